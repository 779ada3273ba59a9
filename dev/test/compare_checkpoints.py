"""
Two runs' checkpoints of one step, bit for bit: the model file, and the optimizer state (AdamW's m
and v, or Muon's momentum, and the fp32 master weights) put together from each run's state files,
however the ranks sliced it (ZeRO-1's shards or the even split of -z 0; llmc/checkpoint.h).

  python compare_checkpoints.py A B STEP

Prints one line per array; exits 1 if any differs or a run's state files do not tile the parameters.
"""
import glob
import sys

import numpy as np

HEADER_BYTES = 1024


def int64(h, i):
    return int(h[i]) & 0xFFFFFFFF | int(h[i + 1]) << 32


def state(folder, step):
    """[m, v, master] over all parameters (master empty without master weights), from the state files"""
    files = sorted(glob.glob(f"{folder}/state_{step:08d}_*.bin"))
    if not files:
        sys.exit(f"no state files of checkpoint {step} in {folder}")
    slices = []
    for path in files:
        h = np.fromfile(path, "<i4", count=256)
        lo, n, master = int64(h, 14), int64(h, 16), int(h[4])
        x = np.fromfile(path, "<f4", offset=HEADER_BYTES, count=(3 if master else 2) * n)
        slices.append((lo, n, [x[k * n:(k + 1) * n] for k in range(3 if master else 2)]))
    slices.sort(key=lambda s: s[0])
    at = 0
    for lo, n, _ in slices:
        if lo != at:
            sys.exit(f"{folder}: the state files of checkpoint {step} do not tile the parameters (a slice at {lo}, expected {at})")
        at += n
    arrays = [np.concatenate([s[2][k] for s in slices]) for k in range(len(slices[0][2]))]
    return arrays + [np.zeros(0, np.float32)] * (3 - len(arrays))


def main():
    a, b, step = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ok = True
    model = f"model_{step:08d}.bin"
    with open(f"{a}/{model}", "rb") as fa, open(f"{b}/{model}", "rb") as fb:
        same = fa.read() == fb.read()
    print(f"  checkpoint {step} {model}: {'bitwise equal' if same else 'DIFFERS'}")
    ok &= same
    for name, x, y in zip(["m (momentum)", "v", "master weights"], state(a, step), state(b, step)):
        same = x.shape == y.shape and x.tobytes() == y.tobytes()
        detail = "bitwise equal" if same else (f"DIFFERS in {np.count_nonzero(x != y)} of {x.size}" if x.shape == y.shape
                                               else f"DIFFERS in size ({x.size} vs {y.size})")
        print(f"  checkpoint {step} {name}: {detail}")
        ok &= same
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
