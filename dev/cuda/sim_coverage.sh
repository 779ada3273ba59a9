#!/usr/bin/env bash
# Which lines of the CUDA trainer have never run: `make sim-coverage` builds the simulated trainer
# (train_gpt2cu, test_gpt2cu, their AddressSanitizer and drop-wait builds) with gcc's line coverage
# into build/cuda_sim_cov and calls this, which runs dev/test/test_cuda_sim.sh on it and lists every
# line of llmc/cuda/*.cuh, train_gpt2.cu and test_gpt2.cu that no run of it executed, per file (the
# workbenches' runs are not counted: a kernel they cover may still be wired into the trainer by a
# path no trainer test takes). A development tool, not a test: it found the embedding backward's
# split path, the host collectives over NCCL and a resume's master weights run by no trainer test
# (2026-11-27). About 6 minutes on 2 cores.
#   make sim-coverage      (the list in build/cuda_sim_cov/never_run.txt, a line per file on stdout)
set -euo pipefail
cd "$(dirname "$0")/../.."
COV=${1:?usage: dev/cuda/sim_coverage.sh <the coverage build, e.g. build/cuda_sim_cov>}
COV=$(realpath "$COV") REPORT=$COV/never_run.txt
PY=${PYTHON:-/usr/bin/python3}
rm -f "$COV"/*.gcda
PYTHON=$PY bash dev/test/test_cuda_sim.sh "$COV" > "$COV/test_cuda_sim.txt" 2>&1 \
    || echo "sim_coverage: test_cuda_sim failed (its output: $COV/test_cuda_sim.txt); this is the coverage of what ran"
# gcov names the sources as the compiler saw them, relative to dev/cuda (../../llmc/...): it runs
# in a folder two levels below the root, so that those paths lead to the sources
for b in train_gpt2cu test_gpt2cu train_gpt2cu_asan train_gpt2cu_dropwait; do
    rm -rf "build/gcov_$b" && mkdir -p "build/gcov_$b"
    for t in train_gpt2 test_gpt2; do
        [ -f "$COV/$b-$t.gcda" ] || continue
        (cd "build/gcov_$b" && gcov -p -o "$COV/$b-$t.gcda" "$COV/src/$t.cu" > /dev/null 2>&1)
    done
done
"$PY" - "$REPORT" build/gcov_train_gpt2cu build/gcov_test_gpt2cu build/gcov_train_gpt2cu_asan build/gcov_train_gpt2cu_dropwait <<'EOF'
import glob, os, sys
report, dirs = sys.argv[1], sys.argv[2:]
ran, text = {}, {}
for d in dirs:
    for f in glob.glob(os.path.join(d, "*.gcov")):
        name = os.path.basename(f)[:-5].replace("#", "/").replace("^", "..").removeprefix("../../")
        if not (name.startswith("llmc/cuda/") or name in ("train_gpt2.cu", "test_gpt2.cu")):
            continue
        for line in open(f, errors="replace"):
            count, num, src = (line.split(":", 2) + ["", ""])[:3]
            count = count.strip()
            if not num.strip().isdigit() or int(num) == 0 or count == "-":
                continue
            key = (name, int(num))
            ran[key] = ran.get(key, False) or not count.startswith(("#####", "====="))
            text[key] = src.rstrip("\n")
with open(report, "w") as out:
    for name in sorted({k[0] for k in ran}):
        lines = sorted(n for (f, n) in ran if f == name)
        never = [n for n in lines if not ran[(name, n)]]
        out.write(f"== {name}: {len(never)} of {len(lines)} lines never ran\n")
        out.writelines(f"{n:6d}: {text[(name, n)].strip()[:110]}\n" for n in never)
        print(f"{name}: {len(never)} of {len(lines)} lines never ran")
print(f"sim_coverage: the lines in {report}")
EOF
