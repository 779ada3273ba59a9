"""Summary of dev/bench/bench_gpu.sh's runs: ours and llm.c side by side.

usage: python dev/bench/gpu_summary.py <bench dir> <warm-up steps> <date> <commit> [tsv out] [label]

Reads every <bench dir>/{ours,llmc}_<model>_b<B>_r<R>.log (the trainers' stdout) with its .mem
(nvidia-smi memory.used samples in MiB, one per line), and prints one row per run and one per
pair. Per run: ms/step is the mean over the steps after the warm-up, from the step lines of
either trainer (ours: `step N/M | loss .. | norm .. | lr .. | 12.3 ms | ...`, llm.c:
`step    N/M | loss .. (..z)| norm .. (..z)| lr .. | 12.34 ms | 40.1% bf16 MFU | ... tok/s`);
tok/s = B * T / that; MFU = FLOP per token x tok/s / peak, with llm.c's FLOP count for both:
6 N + 6 L T C (llm.c's gpt2_estimate_mfu; N with the padded vocabulary, as llm.c's
num_parameters), and the dense bf16 peak of the device that our trainer's banner states (`MFU peak:
989 TFLOP/s ...`, from llmc/gpu_peak.h; no MFU where it says n/a; llm.c itself prints -100% on an
H200, which its table lacks). Peak memory is the largest nvidia-smi sample
during the run (the same measure for both), next to the trainer's own figure. Our step lines'
MFU is checked against this count (it must be the same formula). Appends one TSV row per pair
(header `date commit device model B T ours_tok_s llmc_tok_s ours_mfu llmc_mfu`) to [tsv out].
[label] (e.g. "-at own") follows the model name in the rows: which variant of ours ran.
Our runs' -lg lines (the GPU's clock, power and throttling, from NVML) are summed up under each run.
Exit status 1 if a log has no timed steps or our MFU disagrees with the count."""
import glob, os, re, sys

MODELS = {"d12": (12, 768), "d24": (24, 1024), "d36": (36, 1280), "d48": (48, 1600)}  # L, C
VP, MAXT = 50304, 1024
TSV_HEADER = "date\tcommit\tdevice\tmodel\tB\tT\tours_tok_s\tllmc_tok_s\tours_mfu\tllmc_mfu"
STEP = re.compile(r"^step\s+(\d+)/(\d+) \|.*?\| ([0-9.]+) ms", re.M)
OUR_MFU = re.compile(r"^step\s+(\d+)/\d+ \|.*?\| ([0-9.]+) tok/s \| MFU ([0-9.]+)%", re.M)
GPU_LINE = re.compile(r"^  gpu: SM (\d+)/(\d+) MHz \| (\d+)/(\d+) W \|.*?clocks held back: (.*)$", re.M)


def flops_per_token(model, T):
    L, C = MODELS[model]
    n = VP * C + MAXT * C + L * (12 * C * C + 13 * C) + 2 * C
    return 6 * n + 6 * L * T * C


def peak_flops(runs):
    """the peak our trainer's banner states (the same GPU ran every log); 0 if none does"""
    for s in runs:
        m = re.search(r"^MFU peak: ([0-9.]+) TFLOP/s", open(s["path"], errors="replace").read(), re.M)
        if s["who"] == "ours" and m:
            return float(m.group(1)) * 1e12
    return 0.0


def device_name(text):
    m = re.search(r"^device: (.*?) \(sm_", text, re.M) or re.search(r"\| device\s+\| (.*?)\s+\|", text)
    return m.group(1).strip() if m else "?"


def own_memory(text):
    m = re.search(r"GPU memory in use at the end: ([0-9.]+) GiB", text)
    if m:
        return float(m.group(1))
    m = re.search(r"device memory usage: (\d+) MiB", text)
    return int(m.group(1)) / 1024 if m else None


def run_summary(path, warm, T):
    who, model, b, r = re.match(r"(ours|llmc)_(d\d+)_b(\d+)_r(\d)\.log$", os.path.basename(path)).groups()
    B = int(b)
    text = open(path, errors="replace").read()
    ms = [float(m.group(3)) for m in STEP.finditer(text) if int(m.group(1)) > warm]
    mem = None
    if os.path.exists(path[:-4] + ".mem"):
        vals = [int(v) for v in re.findall(r"^\s*(\d+)\s*$", open(path[:-4] + ".mem").read(), re.M)]
        mem = max(vals) / 1024 if vals else None
    s = dict(who=who, model=model, B=B, r=int(r), steps=len(ms), device=device_name(text), path=path,
             own_mem=own_memory(text), smi_mem=mem, ms=None, tps=None, mfu=None, problem=None)
    if not ms:
        tail = [l for l in text.strip().splitlines() if l.strip()][-1:] or ["(empty log)"]
        s["problem"] = f"no timed steps after {warm} warm-up: {tail[0][:160]}"
        return s
    s["ms"] = sum(ms) / len(ms)
    s["tps"] = B * T / (s["ms"] / 1000)
    return s


def gpu_digest(path):
    """our -lg lines (llmc/cuda/gpu_telemetry.cuh) of a run in one line: the SM clock's range against
    its maximum, the highest power against the limit, what held the clocks back; None without them"""
    lines = GPU_LINE.findall(open(path, errors="replace").read())
    if not lines:
        return None
    clocks = [int(l[0]) for l in lines]
    held = sorted({w.strip() for l in lines for w in l[4].split(",") if w.strip() != "no"})
    n_held = sum(1 for l in lines if l[4].strip() != "no")
    return (f"gpu (-lg, {len(lines)} readings): SM {min(clocks)}-{max(clocks)} of {lines[0][1]} MHz, up to "
            f"{max(int(l[2]) for l in lines)} of {lines[0][3]} W, clocks held back in {n_held}: {', '.join(held) or '-'}")


def check_our_mfu(s, fpt, peak):
    """Our step lines print tok/s and MFU of the same step: MFU must be fpt * tok/s / peak."""
    text = open(s["path"], errors="replace").read()
    worst = 0.0
    for m in OUR_MFU.finditer(text):
        tps, mfu = float(m.group(2)), float(m.group(3))
        want = 100 * fpt * tps / peak
        worst = max(worst, abs(mfu - want))
    return worst


def fmt(v, spec, none="-"):
    return none if v is None else format(v, spec)


def main():
    if len(sys.argv) < 5 or not sys.argv[2].isdigit():
        sys.exit("error: bad arguments; usage: python dev/bench/gpu_summary.py <bench dir> <warm-up steps> <date> <commit> [tsv out] [label]")
    bench, warm, date, commit = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    if not os.path.isdir(bench):
        sys.exit(f"error: gpu_summary: no directory {bench} (give dev/bench/bench_gpu.sh's run directory)")
    tsv = sys.argv[5] if len(sys.argv) > 5 and sys.argv[5] else None
    label = " " + sys.argv[6] if len(sys.argv) > 6 else ""
    T = 1024
    runs = [run_summary(p, warm, T) for p in sorted(glob.glob(os.path.join(bench, "*_d*_b*_r*.log")))]
    device = next((s["device"] for s in runs if s["device"] != "?"), "?")
    peak = peak_flops(runs)
    bad = 0
    print(f"== runs ({device}; T={T}; mean over the steps after {warm}; MFU = (6N + 6LTC) x tok/s / "
          f"{f'{peak / 1e12:.0f} TFLOP/s' if peak else 'n/a (no peak in our banner)'}; memory: nvidia-smi peak, "
          f"the trainer's own figure in brackets)")
    for s in runs:
        fpt = flops_per_token(s["model"], T)
        if s["tps"] and peak:
            s["mfu"] = 100 * fpt * s["tps"] / peak
        if s["problem"]:
            print(f"  {s['who']:4s} {s['model']} B={s['B']:3d} -r {s['r']}: {s['problem']}")
            bad = 1
            continue
        mem = f"{fmt(s['smi_mem'], '.1f')} GiB [{fmt(s['own_mem'], '.1f')}]"
        print(f"  {s['who']:4s} {s['model']} B={s['B']:3d} -r {s['r']}: {s['ms']:9.2f} ms/step {s['tps']:10.0f} tok/s "
              f"MFU {fmt(s['mfu'], '5.1f')}%  memory {mem}  ({s['steps']} steps)")
        digest = gpu_digest(s["path"])
        if digest:
            print(f"       {digest}")
        if s["who"] == "ours" and peak:
            worst = check_our_mfu(s, fpt, peak)
            if worst > 0.11:  # the step line rounds MFU to 0.1 and tok/s to 1
                print(f"    our step line's MFU differs from the 6N + 6LTC count by up to {worst:.2f} points")
                bad = 1
    pairs = [(o, l) for o in runs for l in runs if o["who"] == "ours" and l["who"] == "llmc" and
             (o["model"], o["B"], o["r"]) == (l["model"], l["B"], l["r"]) and o["tps"] and l["tps"]]
    print("== ours vs llm.c (same GPU, tokens, B, T, -r; llm.c with cuDNN attention)")
    rows = []
    for o, l in pairs:
        print(f"  {o['model']} B={o['B']:3d} -r {o['r']}: ours {o['tps']:9.0f} tok/s, llm.c {l['tps']:9.0f} tok/s: "
              f"ratio {o['tps'] / l['tps']:.3f}")
        rows.append([date, commit, device, o["model"] + label, str(o["B"]), str(T), f"{o['tps']:.0f}", f"{l['tps']:.0f}",
                     fmt(o["mfu"], ".1f"), fmt(l["mfu"], ".1f")])
    for model in sorted({s["model"] for s in runs}):
        best = {w: max((s for s in runs if s["who"] == w and s["model"] == model and s["tps"]),
                       key=lambda s: s["tps"], default=None) for w in ("ours", "llmc")}
        o, l = best["ours"], best["llmc"]
        if o and l:
            print(f"  {model} each at its best B: ours {o['tps']:.0f} tok/s (B={o['B']} -r {o['r']}), llm.c "
                  f"{l['tps']:.0f} tok/s (B={l['B']} -r {l['r']}): ratio {o['tps'] / l['tps']:.3f}")
    print("== for dev/bench/RESULTS.md")
    print("| date | commit | device | model | B | -r | ours ms/step | ours tok/s | ours MFU | ours GiB | "
          "llm.c ms/step | llm.c tok/s | llm.c MFU | llm.c GiB | ours / llm.c |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    done = set()
    for o, l in pairs:
        done.update([o["path"], l["path"]])
        print(f"| {date} | {commit} | {device} | {o['model']}{label} | {o['B']} | {o['r']} | {o['ms']:.1f} | {o['tps']:.0f} | "
              f"{fmt(o['mfu'], '.1f')}% | {fmt(o['smi_mem'], '.1f')} | {l['ms']:.1f} | {l['tps']:.0f} | "
              f"{fmt(l['mfu'], '.1f')}% | {fmt(l['smi_mem'], '.1f')} | {o['tps'] / l['tps']:.3f} |")
    for s in runs:
        if s["path"] not in done and s["tps"]:
            own = (f"{s['ms']:.1f} | {s['tps']:.0f} | {fmt(s['mfu'], '.1f')}% | {fmt(s['smi_mem'], '.1f')}")
            cells = f"{own} | - | - | - | - | -" if s["who"] == "ours" else f"- | - | - | - | {own} | -"
            print(f"| {date} | {commit} | {device} | {s['model']}{label} | {s['B']} | {s['r']} | {cells} |")
    if tsv and rows:
        new = not os.path.exists(tsv) or os.path.getsize(tsv) == 0
        with open(tsv, "a") as f:
            if new:
                f.write(TSV_HEADER + "\n")
            for r in rows:
                f.write("\t".join(r) + "\n")
        print(f"== {len(rows)} row(s) appended to {tsv}")
    sys.exit(bad)


if __name__ == "__main__":
    main()
