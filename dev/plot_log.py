"""
Plot training curves from one or several main.log files (written by train_gpt2 and train_gpt2cu).

  python dev/plot_log.py log124M/main.log -o curves.png
  python dev/plot_log.py runA/main.log runB/main.log --label A --label B --logy
  python dev/plot_log.py part1/main.log part2/main.log --merge       # one run, logged into two dirs
  python dev/plot_log.py log124M/main.log --dump                     # the merged series as text

The PNG has train loss and val loss (left) and HellaSwag acc_norm (right), against optimizer steps
(top row) and against tokens seen (bottom row); steps skipped by the numeric guards are marked x.

main.log (llmc/logger.h): one event per line, "s:<step>" then key:value pairs in any order:
  s:<step> trl:<train loss> lr:<lr> norm:<grad norm> tok:<tokens seen after this step>
  s:<step> tel:<val loss>      s:<step> hsw:<HellaSwag acc_norm>      s:<step> skip:<reason...>
<step> counts the optimizer steps completed before the event, so the train loss of line s:N is
that of step N+1 and was measured over the tokens up to tok; a val or HellaSwag point at s:N sits
after N steps, at the tok of line s:N-1. Unknown keys are ignored; skip: takes the rest of the line.

Restarts: a resumed run appends to its main.log, so a step can appear more than once; for every
series the value logged last wins. Several logs given the same --label (or all of them, with
--merge) are one run, read in the order given; different labels are different runs (curves).
Tokens come from tok:; a log without them needs --tokens-per-step N (then N tokens per step).
"""
import argparse
import math
import os
import statistics
import sys

SERIES = ("trl", "tel", "hsw")
NAMES = {"trl": "train loss", "tel": "val loss", "hsw": "HellaSwag acc_norm"}


class Run:
    def __init__(self, label):
        self.label = label
        self.files = []
        self.series = {k: {} for k in SERIES}  # key -> {step: value}, the last logged value wins
        self.tok = {}                            # step -> tokens seen after that step (from trl lines)
        self.skips = {}                          # step -> reason
        self.tokens_per_step = None

    def tokens_after(self, steps):
        """tokens seen after `steps` optimizer steps, or None when unknown"""
        if steps == 0:
            return 0
        if steps - 1 in self.tok:
            return self.tok[steps - 1]
        if self.tokens_per_step is not None:
            return steps * self.tokens_per_step
        return None

    def x_tokens(self, key, step):
        # a train loss at s:N is measured during step N+1; val and HellaSwag after N steps
        return self.tokens_after(step + 1 if key == "trl" else step)


def warn(msg):
    print(f"warning: {msg}", file=sys.stderr)


def read_log(path, run):
    """adds the events of one main.log to run; returns the number of s: lines read"""
    if not os.path.isfile(path):
        sys.exit(f"error: log file '{path}' not found (pass the main.log in a trainer's -o folder)")
    events, other, bad = 0, [], []
    with open(path, "r", encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            fields = line.split()
            if not fields:
                continue
            if not fields[0].startswith("s:"):
                other.append(lineno)
                continue
            try:
                step = int(fields[0][2:])
                if step < 0:
                    raise ValueError
            except ValueError:
                bad.append(lineno)
                continue
            events += 1
            for i, field in enumerate(fields[1:], 1):
                key, sep, value = field.partition(":")
                if not sep:
                    continue
                if key == "skip":  # free text to the end of the line
                    run.skips[step] = " ".join([value] + fields[i + 1:]).strip()
                    break
                if key not in SERIES and key != "tok":
                    continue  # lr, norm and keys this script does not know
                try:
                    v = int(value) if key == "tok" else float(value)
                except ValueError:
                    bad.append(lineno)
                    continue
                if key == "tok":
                    run.tok[step] = v
                else:
                    run.series[key][step] = v
    if other:
        warn(f"{path}: {len(other)} line(s) without s:<step> ignored (first: line {other[0]})")
    if bad:
        warn(f"{path}: {len(bad)} malformed line(s) or value(s) ignored (first: line {bad[0]})")
    run.files.append(path)
    return events


def build_runs(args):
    labels = args.label or []
    if args.merge:
        if len(labels) > 1:
            sys.exit(f"error: --merge makes one run and takes at most one --label, got {len(labels)}")
        labels = [labels[0] if labels else args.logs[0]] * len(args.logs)
    elif labels and len(labels) != len(args.logs):
        sys.exit(f"error: {len(labels)} --label for {len(args.logs)} logs; give one --label per log "
                 "(logs with the same label are merged into one run)")
    elif not labels:
        labels = list(args.logs)
    runs = {}
    for path, label in zip(args.logs, labels):
        run = runs.setdefault(label, Run(label))
        if read_log(path, run) == 0:
            sys.exit(f"error: '{path}' has no s:<step> lines; is it a main.log written by train_gpt2?")
    for run in runs.values():
        if args.tokens_per_step is not None:
            run.tokens_per_step = args.tokens_per_step
        elif run.tok:
            # for steps that have no tok: of their own (e.g. the val point after the last step)
            run.tokens_per_step = statistics.median(t / (s + 1) for s, t in run.tok.items())
    return list(runs.values())


def fmt_tokens(t):
    return "-" if t is None else str(int(round(t)))


def dump(runs):
    for run in runs:
        print(f"run {run.label} (files: {' '.join(run.files)})")
        tps = run.tokens_per_step
        print(f"tokens_per_step {'-' if tps is None else f'{tps:g}'}")
        for key in SERIES:
            for step in sorted(run.series[key]):
                print(f"{key} {step} {run.series[key][step]:.9g} {fmt_tokens(run.x_tokens(key, step))}")
        for step in sorted(run.skips):
            print(f"skip {step} {run.skips[step]}")


def plot(runs, args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(13, 8.5), squeeze=False)
    have = {"loss": False, "hsw": False, "tok_loss": False, "tok_hsw": False}
    for i, run in enumerate(runs):
        color = f"C{i % 10}"
        many = len(runs) > 1
        for row, use_tokens in ((0, False), (1, True)):
            for key, col, style in (("trl", 0, "-"), ("tel", 0, "o--"), ("hsw", 1, "o-")):
                pts = sorted(run.series[key].items())
                xs, ys = [], []
                for step, value in pts:
                    x = run.x_tokens(key, step) if use_tokens else step
                    if x is None:
                        continue
                    xs.append(x)
                    ys.append(value if math.isfinite(value) else float("nan"))
                if not xs:
                    continue
                label = f"{run.label}: {NAMES[key]}" if many else NAMES[key]
                kw = dict(linewidth=1.0, markersize=3, color=color, label=label)
                if key == "trl":
                    kw["alpha"] = 0.8
                axes[row][col].plot(xs, ys, style, **kw)
                have[("tok_" if use_tokens else "") + ("hsw" if key == "hsw" else "loss")] = True
            skipped = [(s, run.series["trl"].get(s)) for s in sorted(run.skips)]
            sx = [run.x_tokens("trl", s) if use_tokens else s for s, v in skipped if v is not None and math.isfinite(v)]
            sy = [v for s, v in skipped if v is not None and math.isfinite(v)]
            pairs = [(x, y) for x, y in zip(sx, sy) if x is not None]
            if pairs:
                axes[row][0].plot([p[0] for p in pairs], [p[1] for p in pairs], "x", color="red", markersize=6,
                                  label=f"{run.label}: skipped steps" if many else "skipped steps")
    for row, xlabel in ((0, "optimizer step"), (1, "tokens seen")):
        for col, ylabel, what in ((0, "loss", "loss"), (1, "HellaSwag acc_norm", "hsw")):
            ax = axes[row][col]
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.grid(True, alpha=0.3)
            if have[("tok_" if row else "") + what]:
                ax.legend(fontsize=8)
                if col == 0 and args.logy:
                    ax.set_yscale("log")
            else:
                why = ("no token counts in the logs (pass --tokens-per-step N)" if row and have[what] else
                       f"no {'hsw:' if what == 'hsw' else 'trl:/tel:'} lines in the logs")
                ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes, color="gray")
    fig.suptitle(args.title or ", ".join(r.label for r in runs), fontsize=10)
    fig.tight_layout()
    # written under a temporary name and renamed, so a reader never sees half a PNG
    tmp = f"{args.output}.tmp.{os.getpid()}.png"
    fig.savefig(tmp, dpi=args.dpi)
    plt.close(fig)
    os.replace(tmp, args.output)
    print(f"wrote {args.output} ({len(runs)} run(s): {', '.join(r.label for r in runs)})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+", help="main.log files")
    ap.add_argument("-o", "--output", default="curves.png", help="PNG to write (default curves.png)")
    ap.add_argument("--label", action="append",
                    help="name of the run of each log, once per log in order (default: the log's path); "
                         "logs with the same label are one run")
    ap.add_argument("--merge", action="store_true", help="all logs are parts of one run (in the order given)")
    ap.add_argument("--logy", action="store_true", help="log-scale y axis for the losses")
    ap.add_argument("--tokens-per-step", type=int, metavar="N",
                    help="tokens per optimizer step, for logs without tok: (default: from tok:)")
    ap.add_argument("--title", help="figure title (default: the run labels)")
    ap.add_argument("--dpi", type=int, default=110, help="PNG resolution (default 110)")
    ap.add_argument("--dump", action="store_true",
                    help="print the merged series (series step value tokens) instead of plotting")
    args = ap.parse_args()
    if args.tokens_per_step is not None and args.tokens_per_step <= 0:
        ap.error(f"--tokens-per-step {args.tokens_per_step}: must be a positive number of tokens")
    runs = build_runs(args)
    if args.dump:
        dump(runs)
    else:
        plot(runs, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
