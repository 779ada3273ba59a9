#!/usr/bin/env python3
"""
The AdamW-against-Muon benchmark's reader (dev/bench/bench_muon_cpu.sh, and bench_gpu.sh's Muon
step): the val-loss curves of runs named <optimizer>_<lr> (each a folder with a main.log), the best
run of each optimizer (lowest final val loss), the tokens the best Muon run needs to reach the best
AdamW run's final val loss (linear between two evaluations), and a plot.

  python3 dev/bench/muon_curves.py DIR                  the summary (a table for dev/bench/RESULTS.md)
  python3 dev/bench/muon_curves.py DIR -o curves.png    and the plot (needs matplotlib)
  python3 dev/bench/muon_curves.py DIR --best adamw     only the learning rate of the best AdamW run
  python3 dev/bench/muon_curves.py DIR --step-ms W      also each run's median step time after W steps
                                                        (metrics.jsonl) and Muon's overhead over AdamW
"""
import argparse
import json
import os
import statistics
import re
import sys


def read_log(path):
    """(val points [(tokens, loss)], tokens per step) of a main.log; the last line of a step wins"""
    val, d = {}, None
    for line in open(path):
        m = re.match(r"s:(\d+) tel:(\S+)", line)
        if m:
            val[int(m.group(1))] = float(m.group(2))
        m = re.match(r"s:(\d+) trl:\S+ .*tok:(\d+)", line)
        if m and d is None:
            d = int(m.group(2)) // (int(m.group(1)) + 1)
    if d is None:
        return [], None
    return [(s * d, v) for s, v in sorted(val.items())], d


def tokens_to_reach(points, target):
    """the tokens at which a curve first reaches target (linear between evaluations), or None"""
    for (t0, v0), (t1, v1) in zip(points, points[1:]):
        if v1 <= target:
            return t1 if v0 == v1 else t0 + (t1 - t0) * (v0 - target) / (v0 - v1)
    return None


def load_runs(folder):
    runs = {}
    for name in sorted(os.listdir(folder)):
        m = re.fullmatch(r"(adamw|muon)_(\S+)", name)
        log = os.path.join(folder, name, "main.log")
        if m and os.path.isfile(log):
            points, d = read_log(log)
            if points:
                runs[name] = dict(opt=m.group(1), lr=m.group(2), points=points, final=points[-1][1])
    return runs


def step_ms(folder, warmup):
    """median ms of the steps after the first `warmup` (metrics.jsonl; the last line of a step wins)"""
    ms = {}
    for line in open(os.path.join(folder, "metrics.jsonl")):
        e = json.loads(line)
        if e.get("event") == "step" and e["step"] >= warmup:
            ms[e["step"]] = e["ms"]
    return statistics.median(ms.values()) if ms else None


def best(runs, opt):
    mine = [r for r in runs.values() if r["opt"] == opt]
    return min(mine, key=lambda r: r["final"]) if mine else None


def summary(runs):
    lines = ["| run | lr | val loss at the end | tokens |", "| --- | ---: | ---: | ---: |"]
    for name, r in sorted(runs.items(), key=lambda kv: (kv[1]["opt"], float(kv[1]["lr"]))):
        lines.append(f"| {r['opt']} | {r['lr']} | {r['final']:.4f} | {r['points'][-1][0]:,} |")
    a, m = best(runs, "adamw"), best(runs, "muon")
    if a and m:
        t = tokens_to_reach(m["points"], a["final"])
        total = a["points"][-1][0]
        lines.append("")
        lines.append(f"best AdamW: lr {a['lr']}, final val loss {a['final']:.4f} after {total:,} tokens; "
                     f"best Muon: -ml {m['lr']}, final val loss {m['final']:.4f}")
        if t is None:
            lines.append("Muon does not reach AdamW's final val loss within the run")
        else:
            lines.append(f"Muon reaches {a['final']:.4f} after {t:,.0f} tokens = {t / total:.3f}x AdamW's tokens")
    return "\n".join(lines)


def plot(runs, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("error: the plot needs matplotlib (apt-get install python3-matplotlib)")
    a, m = best(runs, "adamw"), best(runs, "muon")
    fig, ax = plt.subplots(figsize=(8, 5))
    for name, r in sorted(runs.items()):
        is_best = r is a or r is m
        color = "tab:blue" if r["opt"] == "adamw" else "tab:red"
        xs, ys = zip(*r["points"])
        ax.plot([x / 1e3 for x in xs], ys, color=color, lw=2.2 if is_best else 0.9, alpha=1.0 if is_best else 0.45,
                marker="o" if is_best else None, ms=3, label=f"{r['opt']} lr {r['lr']}" + (" (best)" if is_best else ""))
    if a and m:
        ax.axhline(a["final"], color="gray", ls="--", lw=0.8)
        t = tokens_to_reach(m["points"], a["final"])
        if t is not None:
            ax.axvline(t / 1e3, color="tab:red", ls=":", lw=0.8)
            ax.annotate(f"Muon reaches AdamW's final {a['final']:.3f}\nat {t / a['points'][-1][0]:.2f}x the tokens",
                        (t / 1e3, a["final"]), textcoords="offset points", xytext=(-150, 40), fontsize=8,
                        arrowprops=dict(arrowstyle="->", lw=0.6))
    finals = [r["final"] for r in runs.values()]
    ax.set_ylim(min(finals) - 0.15, min(finals) + 2.5)
    ax.set_xlabel("tokens seen (thousands)")
    ax.set_ylabel("val loss")
    ax.set_title("AdamW vs Muon, same model, data order and schedule shape")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", help="folder of the runs: adamw_<lr>/main.log, muon_<lr>/main.log")
    ap.add_argument("-o", "--out", help="write the plot here (PNG)")
    ap.add_argument("--best", choices=["adamw", "muon"], help="print only the learning rate of that optimizer's best run")
    ap.add_argument("--step-ms", type=int, metavar="W", help="also the median step time after W steps, and Muon's overhead")
    args = ap.parse_args()
    if not os.path.isdir(args.dir):
        sys.exit(f"error: '{args.dir}' is not a folder of runs")
    runs = load_runs(args.dir)
    if args.best:
        r = best(runs, args.best)
        if r is None:
            sys.exit(f"error: no {args.best}_<lr>/main.log with a val loss in '{args.dir}'")
        print(r["lr"])
        return
    if not runs:
        sys.exit(f"error: no adamw_<lr>/main.log or muon_<lr>/main.log with a val loss in '{args.dir}'")
    print(summary(runs))
    if args.step_ms is not None:
        for name in sorted(runs):
            runs[name]["ms"] = step_ms(os.path.join(args.dir, name), args.step_ms)
            print(f"{name}: median {runs[name]['ms']:.1f} ms per step after step {args.step_ms}")
        a, m = best(runs, "adamw"), best(runs, "muon")
        if a and m:
            print(f"Muon's step time over AdamW's: {100.0 * (m['ms'] / a['ms'] - 1.0):+.1f}%")
    if args.out:
        plot(runs, args.out)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
