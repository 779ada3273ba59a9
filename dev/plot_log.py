"""
Plot training curves from one or several main.log files (written by train_gpt2 and train_gpt2cu).

  python dev/plot_log.py log124M/main.log -o curves.png
  python dev/plot_log.py runA/main.log runB/main.log --label A --label B --logy
  python dev/plot_log.py part1/main.log part2/main.log --merge       # one run, logged into two dirs
  python dev/plot_log.py log124M/main.log --dump                     # the merged series as text

The PNG has a loss panel (train loss raw and smoothed with an exponential moving average, val
loss, the best val loss marked, steps skipped by the numeric guards marked x) above panels for
the learning rate, the gradient norm and, when the logs have it, HellaSwag acc_norm. The x axis
is the optimizer step with tokens seen on a second axis on top (K/M/B), or tokens (--xaxis tokens,
for runs with different batch sizes).

main.log (llmc/logger.h): one event per line, "s:<step>" then key:value pairs in any order:
  s:<step> trl:<train loss> lr:<lr> norm:<grad norm> tok:<tokens seen after this step>
  s:<step> tel:<val loss>      s:<step> hsw:<HellaSwag acc_norm>      s:<step> skip:<reason...>
<step> counts the optimizer steps completed before the event, so the train loss of line s:N is
that of step N+1 and was measured over the tokens up to tok; a val or HellaSwag point at s:N sits
after N steps, at the tok of line s:N-1. Unknown keys are ignored; skip: takes the rest of the line;
lines starting with # (the header: -b auto's choice) are skipped.

Restarts: a resumed run appends to its main.log, so a step can appear more than once; for every
series the value logged last wins. Several logs given the same --label (or all of them, with
--merge) are one run, read in the order given; different labels are different runs (curves).
Tokens come from tok:; a log without them needs --tokens-per-step N (then N tokens per step).
"""
import argparse
import contextlib
import math
import os
import signal
import statistics
import sys

SERIES = ("trl", "tel", "hsw", "lr", "norm")
TRAIN_KEYS = ("trl", "lr", "norm")  # logged with the step they were measured in (x of s:N is step N+1's)


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
        return self.tokens_after(step + 1 if key in TRAIN_KEYS else step)


def warn(msg):
    print(f"warning: {msg}", file=sys.stderr)


def read_log(path, run):
    """adds the events of one main.log to run; returns the number of s: lines read"""
    if not os.path.isfile(path):  # only a regular file: a FIFO would block the read
        why = ("is a folder, not a file" if os.path.isdir(path) else "is not a regular file" if os.path.exists(path)
               else "not found")
        sys.exit(f"error: log file '{path}' {why} (pass the main.log in a trainer's -o folder)")
    events, other, bad = 0, [], []
    with open(path, "r", encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            fields = line.split()
            if not fields or fields[0].startswith("#"):  # blank, or the header (-b auto's choice)
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
                    continue  # keys this script does not know
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


def fmt_count(x, digits=3):
    """a token count for an axis, to `digits` significant digits: 0, 512, 1.5K, 20K, 3M, 10.2B"""
    for div, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(x) >= div:
            return f"{x / div:.{digits}g}{unit}"
    return f"{x:.{digits}g}"


def fmt_sci(x, digits=2):
    """a learning rate for an axis, to `digits` significant digits: 6.0e-04 (no offset text, which
    would sit under the token axis on top)"""
    return f"{x:.{digits - 1}e}"


def fewest_digits(fmt, values, digits, most=8):
    """the fewest significant digits, from `digits` up, with which fmt(value, digits) labels the
    different values differently: a constant learning rate's axis, 0.00096 to 0.00104 in steps of
    0.00002, read 1.0e-03 three times at 2 digits"""
    values = sorted(set(values))
    for d in range(digits, most + 1):
        if len({fmt(v, d) for v in values}) == len(values):
            return d
    return most


def ema(values, beta):
    """exponential moving average with bias correction (the first values are not pulled towards 0);
    non-finite values (skipped steps) are left out and get NaN"""
    out, m, n = [], 0.0, 0
    for v in values:
        if not math.isfinite(v):
            out.append(float("nan"))
            continue
        m = beta * m + (1 - beta) * v
        n += 1
        out.append(m / (1 - beta ** n))
    return out


def auto_ema(n):
    """the default smoothing for n train steps: an averaging window of about 2% of the run (at least
    2 steps), so the curve lags its raw values by the same share of the x axis for any run length;
    1 - beta kept to 2 significant digits for the legend (rounding beta itself made it 1 past 100,000 steps)"""
    return 1 - float(f"{1 / max(2.0, n / 50):.2g}")


def best_val(run):
    """(step, value) of the lowest finite val loss, or None"""
    pts = [(v, s) for s, v in run.series["tel"].items() if math.isfinite(v)]
    return (min(pts)[1], min(pts)[0]) if pts else None


def make_figure(runs, args):
    """the matplotlib Figure: one loss panel on top, lr | norm [| HellaSwag] below"""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import Formatter

    class DistinctFormatter(Formatter):
        """fmt's labels, with as many digits as the axis's ticks need to differ (fewest_digits)"""
        def __init__(self, fmt, digits):
            self.fmt, self.least, self.digits = fmt, digits, digits

        def set_locs(self, locs):
            super().set_locs(locs)
            self.digits = fewest_digits(self.fmt, locs, self.least)

        def __call__(self, x, pos=None):
            return self.fmt(x, self.digits)

    has_hsw = any(run.series["hsw"] for run in runs)
    fig = plt.figure(figsize=(13, 8.5))
    grid = fig.add_gridspec(2, 3 if has_hsw else 2, height_ratios=[3, 2])
    ax_loss = fig.add_subplot(grid[0, :])
    panels = {"loss": ax_loss, "lr": fig.add_subplot(grid[1, 0]), "norm": fig.add_subplot(grid[1, 1])}
    if has_hsw:
        panels["hsw"] = fig.add_subplot(grid[1, 2])
    many = len(runs) > 1
    by_tokens = args.xaxis == "tokens"

    def xy(run, key):
        xs, ys = [], []
        for step, value in sorted(run.series[key].items()):
            x = run.x_tokens(key, step) if by_tokens else step
            if x is not None:
                xs.append(x)
                ys.append(value if math.isfinite(value) else float("nan"))
        return xs, ys

    def name(run, what):
        return f"{run.label}: {what}" if many else what

    drawn = {k: False for k in panels}
    for i, run in enumerate(runs):
        color = f"C{i % 10}"
        xs, ys = xy(run, "trl")
        if xs:
            ax_loss.plot(xs, ys, "-", color=color, linewidth=0.8, alpha=0.3, label=name(run, "train loss"))
            beta = auto_ema(len(ys)) if args.ema is None else args.ema
            if beta > 0:
                ax_loss.plot(xs, ema(ys, beta), "-", color=color, linewidth=1.6,
                             label=name(run, f"train loss (EMA {beta:.10g})"))
            drawn["loss"] = True
        xs, ys = xy(run, "tel")
        if xs:
            ax_loss.plot(xs, ys, "o--", color=color, linewidth=1.0, markersize=3.5, markerfacecolor="white",
                         label=name(run, "val loss"))
            drawn["loss"] = True
            best = best_val(run)
            bx = run.x_tokens("tel", best[0]) if by_tokens else best[0]
            if bx is not None:
                ax_loss.plot([bx], [best[1]], "*", color=color, markersize=14, markeredgecolor="black",
                             markeredgewidth=0.6, zorder=5)
                right = bx > 0.5 * max(xs)  # label to the left of a point in the right half, so it stays inside
                ax_loss.annotate(name(run, f"best val {best[1]:.4f} (step {best[0]})"), (bx, best[1]),
                                 xytext=(-8 if right else 8, -14), textcoords="offset points", fontsize=8,
                                 color=color, ha="right" if right else "left")
        skipped = [(s, v) for s, v in sorted(run.series["trl"].items()) if s in run.skips and math.isfinite(v)]
        pts = [((run.x_tokens("trl", s) if by_tokens else s), v) for s, v in skipped]
        pts = [p for p in pts if p[0] is not None]
        if pts:
            ax_loss.plot([p[0] for p in pts], [p[1] for p in pts], "x", color="red", markersize=6,
                         label=name(run, "skipped steps"))
        for key in ("lr", "norm", "hsw"):
            xs, ys = xy(run, key)
            if xs and key in panels:
                style = "o-" if key == "hsw" else "-"
                panels[key].plot(xs, ys, style, color=color, linewidth=1.0, markersize=3, label=run.label)
                drawn[key] = True

    # a second x axis with tokens seen, when every run has the same tokens per step
    tps = {run.tokens_per_step for run in runs}
    token_axis = not by_tokens and len(tps) == 1 and None not in tps
    if not by_tokens and not token_axis:
        warn("no token axis: " + ("the runs differ in tokens per step (plot them with --xaxis tokens)"
                                  if len(tps) > 1 else "no tok: in the logs (pass --tokens-per-step N)"))
    ylabels = {"loss": "loss", "lr": "learning rate", "norm": "gradient norm (before clipping)",
               "hsw": "HellaSwag acc_norm"}
    for key, ax in panels.items():
        ax.set_ylabel(ylabels[key], fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.set_xlabel("tokens seen" if by_tokens else "optimizer step", fontsize=9)
        if by_tokens:
            ax.xaxis.set_major_formatter(DistinctFormatter(fmt_count, 3))
        if token_axis:
            t = next(iter(tps))
            top = ax.secondary_xaxis("top", functions=(lambda s: s * t, lambda x: x / t))
            top.xaxis.set_major_formatter(DistinctFormatter(fmt_count, 3))
            top.tick_params(labelsize=8)
            if key == "loss":
                top.set_xlabel("tokens seen", fontsize=9)
        if not drawn[key]:
            what = {"loss": "trl:/tel:", "lr": "lr:", "norm": "norm:", "hsw": "hsw:"}[key]
            why = f"no {what} values in the logs" + (" with token counts (pass --tokens-per-step N)" if by_tokens else "")
            ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes, color="gray")
        elif key == "loss" or many:
            ax.legend(fontsize=8)
    if args.logy and drawn["loss"]:
        ax_loss.set_yscale("log")
    panels["lr"].yaxis.set_major_formatter(DistinctFormatter(fmt_sci, 2))
    fig.suptitle(args.title or ", ".join(r.label for r in runs), fontsize=10)
    fig.tight_layout()
    return fig


def plot(runs, args):
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        sys.exit(f"error: plotting needs matplotlib: {sys.executable} -m pip install matplotlib "
                 "(or apt-get install python3-matplotlib); --dump works without it")
    import matplotlib.pyplot as plt
    from matplotlib.backend_bases import FigureCanvasBase
    # the format that -o's extension names (no extension: PNG), as savefig would pick it for the name
    fmt = os.path.splitext(args.output)[1][1:].lower() or "png"
    kinds = FigureCanvasBase.get_supported_filetypes()
    if fmt not in kinds:
        sys.exit(f"error: -o {args.output}: '.{fmt}' is not a format matplotlib writes; end -o in one of "
                 f"{', '.join('.' + k for k in sorted(kinds))}")
    fig = make_figure(runs, args)
    # written under a temporary name and renamed, so a reader never sees half a file
    tmp = f"{args.output}.tmp.{os.getpid()}"
    try:
        fig.savefig(tmp, dpi=args.dpi, format=fmt)
        os.replace(tmp, args.output)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        sys.exit(f"error: -o {args.output}: cannot write the plot: {e.strerror}; choose another -o")
    plt.close(fig)
    print(f"wrote {args.output} ({len(runs)} run(s): {', '.join(r.label for r in runs)})")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+", help="main.log files")
    ap.add_argument("-o", "--output", default="curves.png", help="the plot to write, in the format its extension names: .png (default curves.png), .pdf, .svg, ...")
    ap.add_argument("--label", action="append",
                    help="name of the run of each log, once per log in order (default: the log's path); "
                         "logs with the same label are one run")
    ap.add_argument("--merge", action="store_true", help="all logs are parts of one run (in the order given)")
    ap.add_argument("--logy", action="store_true", help="log-scale y axis for the losses")
    ap.add_argument("--ema", type=float, metavar="BETA",
                    help="smoothing of the train loss: m = BETA*m + (1-BETA)*loss, bias-corrected; 0 = off "
                         "(default: 1 - 50/steps, at least 0.5: a window of 2%% of the run)")
    ap.add_argument("--xaxis", choices=("step", "tokens"), default="step",
                    help="x axis: optimizer steps with tokens on top (default), or tokens seen")
    ap.add_argument("--tokens-per-step", type=int, metavar="N",
                    help="tokens per optimizer step, for logs without tok: (default: from tok:)")
    ap.add_argument("--title", help="figure title (default: the run labels)")
    ap.add_argument("--dpi", type=int, default=110, help="PNG resolution (default 110)")
    ap.add_argument("--dump", action="store_true",
                    help="print the merged series (series step value tokens) instead of plotting")
    args = ap.parse_args(argv)
    if args.tokens_per_step is not None and args.tokens_per_step <= 0:
        ap.error(f"--tokens-per-step {args.tokens_per_step}: must be a positive number of tokens")
    if args.ema is not None and not 0 <= args.ema < 1:
        ap.error(f"--ema {args.ema:g}: must be in [0, 1) (0 turns smoothing off)")
    return args


def main():
    # `--dump | head`: end quietly when the reader goes, as a C tool does on SIGPIPE (not a traceback)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    args = parse_args()
    runs = build_runs(args)
    if args.dump:
        dump(runs)
    else:
        plot(runs, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
