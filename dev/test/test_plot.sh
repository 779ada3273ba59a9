#!/usr/bin/env bash
# Tests dev/plot_log.py on synthetic main.log files: a run restarted into the same log (steps logged
# twice), its continuation in a second log (merged by label), a log without tok: and without val or
# HellaSwag lines, junk lines and unknown keys. The merged series are checked through --dump; the
# figure's panels through matplotlib's own objects (the data of every line against the logs, the
# EMA against its closed form, the best val mark, the token axis and its K/M/B labels, tick labels
# with the digits that tell them apart (a constant learning rate), HellaSwag
# only when logged); the PNGs by decoding the container; a missing matplotlib and bad inputs by
# their one-line errors.
# Needs $PYTHON (default /usr/bin/python3) with matplotlib. Usage, from the repo root:
#   bash dev/test/test_plot.sh
source "$(dirname "$0")/lib.sh" test_plot
PLOT=("$PY" "$ROOT/dev/plot_log.py")

# run A, first attempt to step 6, then resumed from the checkpoint after 4 steps (appended)
cat > "$TMP/a.log" <<'EOF'
s:0 tel:10.95
s:0 hsw:0.25
s:0 trl:10.9 lr:6e-05 norm:4.5 tok:1024
s:1 trl:10.5 lr:0.00012 norm:4.1 tok:2048
s:2 trl:10.1 lr:0.00018 norm:3.9 tok:3072
s:2 tel:10.2
s:3 trl:9.8 lr:0.00024 norm:3.2 tok:4096
s:4 trl:inf lr:0.0003 norm:nan tok:5120
s:4 skip:loss inf is not finite tok:999
s:5 trl:9.5 tok:6144 lr:0.0003 norm:2.9
s:x trl:1.0
s:6 trl:9.4 lr:0.0003 norm:2.5 tok:7168 foo:bar
resumed here
s:4 tel:9.9
s:4 hsw:0.26
s:4 trl:inf lr:0.0003 norm:nan tok:5120
s:4 skip:loss inf is not finite tok:999
s:5 trl:9.45 lr:0.0003 norm:2.8 tok:6144
s:6 norm:2.4 tok:7168 lr:0.0003 trl:9.35
s:7 trl:9.3 lr:0.0003 norm:2.3 tok:8192
s:8 tel:9.2
s:8 hsw:0.27
EOF
# run A continued in another output folder, resumed after 7 steps
cat > "$TMP/c.log" <<'EOF'
s:7 trl:9.28 lr:0.0003 norm:2.3 tok:8192
s:8 trl:9.25 lr:0.0003 norm:2.2 tok:9216
s:9 trl:9.2 lr:0.0003 norm:2.1 tok:10240
s:10 tel:9.1
EOF
# run B: train loss only, no tok:
printf 's:0 trl:11.0\ns:1 trl:10.0\ns:2 trl:9.0\n' > "$TMP/b.log"

expect_same() {  # expect_same what expected_file actual_file
    if diff -u "$2" "$3" > "$TMP/diff.txt"; then ok "$1"; else bad "$1"; head -20 "$TMP/diff.txt" | sed 's/^/     /'; fi
}

cat > "$TMP/want1.txt" <<EOF
run A (files: $TMP/a.log $TMP/c.log)
tokens_per_step 1024
trl 0 10.9 1024
trl 1 10.5 2048
trl 2 10.1 3072
trl 3 9.8 4096
trl 4 inf 5120
trl 5 9.45 6144
trl 6 9.35 7168
trl 7 9.28 8192
trl 8 9.25 9216
trl 9 9.2 10240
tel 0 10.95 0
tel 2 10.2 2048
tel 4 9.9 4096
tel 8 9.2 8192
tel 10 9.1 10240
hsw 0 0.25 0
hsw 4 0.26 4096
hsw 8 0.27 8192
lr 0 6e-05 1024
lr 1 0.00012 2048
lr 2 0.00018 3072
lr 3 0.00024 4096
lr 4 0.0003 5120
lr 5 0.0003 6144
lr 6 0.0003 7168
lr 7 0.0003 8192
lr 8 0.0003 9216
lr 9 0.0003 10240
norm 0 4.5 1024
norm 1 4.1 2048
norm 2 3.9 3072
norm 3 3.2 4096
norm 4 nan 5120
norm 5 2.8 6144
norm 6 2.4 7168
norm 7 2.3 8192
norm 8 2.2 9216
norm 9 2.1 10240
skip 4 loss inf is not finite tok:999
run B (files: $TMP/b.log)
tokens_per_step -
trl 0 11 -
trl 1 10 -
trl 2 9 -
EOF
if "${PLOT[@]}" "$TMP/a.log" "$TMP/b.log" "$TMP/c.log" --label A --label B --label A --dump > "$TMP/got1.txt" 2> "$TMP/err1.txt"; then
    expect_same "--dump: restart in one log and continuation in another merge, the last value per step wins" \
        "$TMP/want1.txt" "$TMP/got1.txt"
else
    bad "--dump exited non-zero"; sed 's/^/     /' "$TMP/err1.txt"
fi
if grep -q "a.log: 1 line(s) without s:<step> ignored (first: line 13)" "$TMP/err1.txt" &&
   grep -q "a.log: 1 malformed line(s) or value(s) ignored (first: line 11)" "$TMP/err1.txt"; then
    ok "junk and malformed lines are reported with their line numbers"
else
    bad "warnings for junk lines"; sed 's/^/     /' "$TMP/err1.txt"
fi

# --merge: the same run under the first log's name
# the reader of --dump gone early (| head): no traceback
"${PLOT[@]}" "$TMP/a.log" "$TMP/b.log" "$TMP/c.log" --dump 2> "$TMP/errpipe.txt" | head -n 1 > /dev/null
! grep -q "Traceback\|BrokenPipe" "$TMP/errpipe.txt" && ok "--dump | head -n 1: ends without a traceback" || { bad "--dump | head -n 1 printed:"; head -3 "$TMP/errpipe.txt"; }
"${PLOT[@]}" "$TMP/a.log" "$TMP/c.log" --merge --dump 2>/dev/null | tail -n +2 > "$TMP/got2.txt"
sed -n '2,/^skip/p' "$TMP/want1.txt" > "$TMP/want2.txt"
expect_same "--merge gives the same series" "$TMP/want2.txt" "$TMP/got2.txt"

# --tokens-per-step for a log without tok:
printf 'run %s (files: %s)\ntokens_per_step 512\ntrl 0 11 512\ntrl 1 10 1024\ntrl 2 9 1536\n' "$TMP/b.log" "$TMP/b.log" > "$TMP/want3.txt"
"${PLOT[@]}" "$TMP/b.log" --tokens-per-step 512 --dump > "$TMP/got3.txt" 2>&1
expect_same "--tokens-per-step places a log without tok: on the token axis" "$TMP/want3.txt" "$TMP/got3.txt"

# PNGs: the container must be complete (signature, IHDR of the expected size, chunk CRCs, IEND)
check_png() {  # check_png what file width height
    if "$PY" - "$2" "$3" "$4" <<'EOF'
import struct, sys, zlib
path, want_w, want_h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
data = open(path, "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "no PNG signature"
pos, chunks = 8, []
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    crc = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0]
    assert zlib.crc32(kind + body) == crc, f"bad CRC in chunk {kind}"
    chunks.append((kind, body))
    pos += 12 + n
assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND", "IHDR/IEND missing"
w, h = struct.unpack(">II", chunks[0][1][:8])
assert (w, h) == (want_w, want_h), f"image is {w}x{h}, expected {want_w}x{want_h}"
idat = zlib.decompress(b"".join(b for k, b in chunks if k == b"IDAT"))
assert len(set(idat)) > 2, "the image is blank"
EOF
    then ok "$1"; else bad "$1"; fi
}
# 13 x 8.5 inches at --dpi 110 = 1430 x 935 pixels
if "${PLOT[@]}" "$TMP/a.log" "$TMP/b.log" "$TMP/c.log" --label A --label B --label A --logy -o "$TMP/curves.png" > "$TMP/out.txt" 2>&1 &&
   grep -q "wrote $TMP/curves.png (2 run(s): A, B)" "$TMP/out.txt"; then
    check_png "two runs, log-scale losses: a valid PNG" "$TMP/curves.png" 1430 935
else
    bad "plotting two runs"; sed 's/^/     /' "$TMP/out.txt"
fi
if "${PLOT[@]}" "$TMP/b.log" -o "$TMP/b.png" --dpi 50 > "$TMP/out.txt" 2>&1; then
    check_png "a log with only train loss and no tok: (empty panels say why): a valid PNG" "$TMP/b.png" 650 425
else
    bad "plotting a train-loss-only log"; sed 's/^/     /' "$TMP/out.txt"
fi
# -o's extension names the format (a .pdf had been written as PNG data under that name)
if "${PLOT[@]}" "$TMP/b.log" -o "$TMP/b.pdf" > "$TMP/out.txt" 2>&1 && [ "$(head -c 5 "$TMP/b.pdf")" = "%PDF-" ] \
   && "${PLOT[@]}" "$TMP/b.log" -o "$TMP/b.svg" > "$TMP/out.txt" 2>&1 && grep -q "<svg" "$TMP/b.svg"; then
    ok "-o b.pdf writes a PDF, -o b.svg an SVG"
else
    bad "-o b.pdf / b.svg: $(head -c 8 "$TMP/b.pdf" | od -c | head -1)"; sed 's/^/     /' "$TMP/out.txt"
fi
ls "$TMP"/*.tmp.* >/dev/null 2>&1 && bad "a temporary plot was left behind"

# the figure itself: panels, the data of each line, EMA, best val, the token axis
if "$PY" - "$TMP" "$ROOT" > "$TMP/fig.txt" 2>&1 <<'EOF'
import importlib.util, math, re, sys
w = sys.argv[1]
spec = importlib.util.spec_from_file_location("plot_log", f"{sys.argv[2]}/dev/plot_log.py")
pl = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pl)
fails = 0
def check(cond, what, detail=""):
    global fails
    print(("ok   " if cond else "FAIL ") + what + ("" if cond else f": {detail}"))
    fails += not cond
def same(a, b):  # lists of floats, NaN equal to NaN
    return len(a) == len(b) and all((math.isnan(x) and math.isnan(y)) or abs(x - y) <= 1e-12 * max(1, abs(y))
                                    for x, y in zip(a, b))
def figure(argv):
    args = pl.parse_args(argv)
    fig = pl.make_figure(pl.build_runs(args), args)
    fig.canvas.draw()
    axes = {ax.get_ylabel(): ax for ax in fig.axes if ax.get_ylabel()}
    return fig, axes
def lines(ax):
    return {l.get_label(): l for l in ax.get_lines()}

check([pl.fmt_count(x) for x in (0, 512, 1024, 1500, 20000, 3e6, 1.02e10)] == ["0", "512", "1.02K", "1.5K", "20K", "3M", "10.2B"],
      "token labels: 0 512 1.02K 1.5K 20K 3M 10.2B")

# run A (steps 0-9 merged from two logs, HellaSwag logged)
fig, axes = figure([f"{w}/a.log", f"{w}/c.log", "--merge"])
check(sorted(axes) == ["HellaSwag acc_norm", "gradient norm (before clipping)", "learning rate", "loss"],
      "four panels when HellaSwag is logged: loss, learning rate, gradient norm, HellaSwag", sorted(axes))
L = lines(axes["loss"])
trl = [10.9, 10.5, 10.1, 9.8, math.inf, 9.45, 9.35, 9.28, 9.25, 9.2]
raw = L["train loss"]
check(list(raw.get_xdata()) == list(range(10)) and same(list(raw.get_ydata()), [v if math.isfinite(v) else math.nan for v in trl]),
      "raw train loss: the last logged value of each step, inf drawn as a gap")
# the bias-corrected EMA in closed form: sum_i beta^(n-i) (1-beta) x_i / (1 - beta^n) over the finite x_i
finite = [v for v in trl if math.isfinite(v)]
want, k = [], 0
for v in trl:
    if not math.isfinite(v):
        want.append(math.nan)
        continue
    k += 1
    want.append(sum(0.5 ** (k - 1 - i) * 0.5 * finite[i] for i in range(k)) / (1 - 0.5 ** k))
check("train loss (EMA 0.5)" in L and same(list(L["train loss (EMA 0.5)"].get_ydata()), want),
      "the default EMA for 10 steps (0.5) equals its closed form", L.keys())
got = [pl.auto_ema(n) for n in (10, 100, 300, 19073, 101000, 10**8)]
check(same(got, [0.5, 0.5, 0.83, 0.9974, 0.9995, 0.9999995]),
      "default EMA: a window of 2% of the run, at least 2 steps (0.5 0.5 0.83 0.9974 0.9995 0.9999995 for 10 100 300 19073 "
      "101000 1e8 steps)", got)
val = L["val loss"]
check(list(val.get_xdata()) == [0, 2, 4, 8, 10] and list(val.get_ydata()) == [10.95, 10.2, 9.9, 9.2, 9.1], "val loss points")
stars = [l for l in axes["loss"].get_lines() if l.get_marker() == "*"]
notes = [t.get_text() for t in axes["loss"].texts]
check(len(stars) == 1 and list(stars[0].get_xdata()) == [10] and list(stars[0].get_ydata()) == [9.1]
      and notes == ["best val 9.1000 (step 10)"], "the best val loss is marked: a star at step 10 and 'best val 9.1000 (step 10)'",
      f"{[(list(s.get_xdata()), list(s.get_ydata())) for s in stars]} {notes}")
check(list(L["skipped steps"].get_xdata()) == [] if "skipped steps" in L else True, "no x for a skipped step whose loss is not finite")
lr = lines(axes["learning rate"])
check(same(list(next(iter(lr.values())).get_ydata()), [6e-05, 0.00012, 0.00018, 0.00024] + [0.0003] * 6), "learning rate panel = lr:")
nm = lines(axes["gradient norm (before clipping)"])
check(same(list(next(iter(nm.values())).get_ydata()), [4.5, 4.1, 3.9, 3.2, math.nan, 2.8, 2.4, 2.3, 2.2, 2.1]), "gradient norm panel = norm:")
hs = lines(axes["HellaSwag acc_norm"])
check(list(next(iter(hs.values())).get_ydata()) == [0.25, 0.26, 0.27], "HellaSwag panel = hsw:")
# a second x axis on top: tokens = 1024 x step, labelled with K
top = axes["loss"].child_axes
ok = len(top) == 1
if ok:
    lo, hi = axes["loss"].get_xlim()
    tlo, thi = top[0].get_xlim()
    ticks = [(x, t.get_text()) for x, t in zip(top[0].get_xticks(), top[0].get_xticklabels()) if tlo <= x <= thi]
    labels = [t for _, t in ticks]
    ok = (abs(tlo - 1024 * lo) < 1e-6 and abs(thi - 1024 * hi) < 1e-6 and any(l.endswith("K") for l in labels)
          and labels == [pl.fmt_count(x) for x, _ in ticks])
check(ok, f"tokens on a second x axis: 1024 per step, labels {labels if top else None}")
check(top[0].get_xlabel() == "tokens seen" if top else False, "the token axis is labelled 'tokens seen'")

# run B: train loss only, no tok: -> three panels, no token axis (with a warning), no HellaSwag
fig, axes = figure([f"{w}/b.log"])
check("HellaSwag acc_norm" not in axes and len(axes) == 3 and not axes["loss"].child_axes,
      "no HellaSwag panel and no token axis for a log without hsw: and tok:", sorted(axes))
check("no lr: values in the logs" in [t.get_text() for t in axes["learning rate"].texts], "an empty panel says why")
fig, axes = figure([f"{w}/b.log", "--ema", "0.9"])
got = list(lines(axes["loss"])["train loss (EMA 0.9)"].get_ydata())
check(same(got, [11.0, (0.09 * 11 + 0.1 * 10) / 0.19, (0.081 * 11 + 0.09 * 10 + 0.1 * 9) / 0.271]), "--ema 0.9", got)
fig, axes = figure([f"{w}/b.log", "--tokens-per-step", "2000000"])
labels = [t.get_text() for t in axes["loss"].child_axes[0].get_xticklabels() if t.get_text()]
check(any(l.endswith("M") for l in labels), f"--tokens-per-step 2000000: labels in M {labels}")
# a constant learning rate: the ticks around it are 2% apart (labelled 1.0e-03 three times at 2 digits)
open(f"{w}/const.log", "w").write("".join(f"s:{s} trl:{5 - s / 100} lr:0.001 norm:1 tok:{1024 * (s + 1)}\n" for s in range(300)))
fig, axes = figure([f"{w}/const.log"])
labels = [t.get_text() for t in axes["learning rate"].get_yticklabels() if t.get_text()]
check(len(labels) >= 3 and len(set(labels)) == len(labels) and "1.00e-03" in labels,
      f"a constant learning rate: every label of its axis differs {labels}")
check([pl.fmt_count(x, pl.fewest_digits(pl.fmt_count, [1e9, 1.0005e9, 1.001e9], 3)) for x in (1e9, 1.0005e9, 1.001e9)]
      == ["1B", "1.0005B", "1.001B"], "token labels take the digits that tell them apart: 1B 1.0005B 1.001B")
# --xaxis tokens: runs with different batch sizes on one axis; --ema 0: raw train loss only
fig, axes = figure([f"{w}/a.log", f"{w}/b.log", "--label", "A", "--label", "B", "--tokens-per-step", "512", "--xaxis", "tokens", "--ema", "0"])
L = lines(axes["loss"])
check(list(L["A: val loss"].get_xdata()) == [0, 2048, 4096, 8192] and list(L["B: train loss"].get_xdata()) == [512, 1024, 1536]
      and not any("EMA" in k for k in L), "--xaxis tokens: val at the tokens before it, train loss after its step; --ema 0", L.keys())
sys.exit(1 if fails else 0)
EOF
then
    grep '^ok' "$TMP/fig.txt"
else
    sed 's/^/     /' "$TMP/fig.txt"; bad "figure contents"
fi

# no matplotlib: one line with the install command, and --dump still works
mkdir -p "$TMP/nompl/matplotlib"
echo 'raise ImportError("No module named matplotlib")' > "$TMP/nompl/matplotlib/__init__.py"
PYTHONPATH="$TMP/nompl" "${PLOT[@]}" "$TMP/b.log" -o "$TMP/none.png" > "$TMP/out.txt" 2> "$TMP/err.txt"; rc=$?
if [ $rc -ne 0 ] && [ "$(wc -l < "$TMP/err.txt")" -eq 1 ] && grep -q "^error: plotting needs matplotlib: .* -m pip install matplotlib" "$TMP/err.txt" \
   && [ ! -e "$TMP/none.png" ] && PYTHONPATH="$TMP/nompl" "${PLOT[@]}" "$TMP/b.log" --dump > /dev/null 2>&1; then
    ok "without matplotlib: $(cat "$TMP/err.txt")"
else
    bad "without matplotlib (exit $rc)"; sed 's/^/     /' "$TMP/err.txt" | head -5
fi

# a run past 100,000 steps with the default smoothing (crashed: the EMA's beta rounded to 1)
if "$PY" -c "import matplotlib" 2> /dev/null; then
    awk 'BEGIN { for (s = 0; s < 101000; s++) printf "s:%d trl:%.4f\n", s, 3 + 8 / (1 + s / 1000) }' > "$TMP/long.log"
    "${PLOT[@]}" "$TMP/long.log" -o "$TMP/long.png" > "$TMP/long.out" 2>&1 && [ -s "$TMP/long.png" ] \
        && ok "101,000 steps with the default EMA: plotted" || { bad "101,000 steps"; tail -n 3 "$TMP/long.out"; }
fi

# bad input: non-zero exit and an error line naming the problem
: > "$TMP/empty.log"
expect_error "missing log file" "$TMP/nope.log" "${PLOT[@]}" "$TMP/nope.log" --dump
expect_error "a file that is not a main.log" "$TMP/empty.log" "${PLOT[@]}" "$TMP/empty.log" --dump
expect_error "--label count differs from the log count" "2 --label for 3 logs" "${PLOT[@]}" "$TMP/a.log" "$TMP/b.log" "$TMP/c.log" --label A --label B --dump
expect_error "--tokens-per-step 0" "--tokens-per-step 0" "${PLOT[@]}" "$TMP/b.log" --tokens-per-step 0 --dump
expect_error "--ema 1" "--ema 1" "${PLOT[@]}" "$TMP/b.log" --ema 1
mkfifo "$TMP/fifo.log" && mkdir -p "$TMP/adir"
expect_error "a FIFO as the log (not read: it would block)" "log file '$TMP/fifo.log' is not a regular file" \
    timeout -k 5 30 "${PLOT[@]}" "$TMP/fifo.log" --dump
expect_error "a folder as the log" "log file '$TMP/adir' is a folder, not a file" "${PLOT[@]}" "$TMP/adir" --dump
touch "$TMP/afile"
if "$PY" -c "import matplotlib" 2> /dev/null; then
    expect_error "-o where no file can be written" "-o $TMP/afile/x.png: cannot write the plot: Not a directory" \
        "${PLOT[@]}" "$TMP/b.log" -o "$TMP/afile/x.png"
    expect_error "-o with an extension matplotlib does not write" "-o $TMP/x.txt: '.txt' is not a format matplotlib writes" \
        "${PLOT[@]}" "$TMP/b.log" -o "$TMP/x.txt"
fi

finish
