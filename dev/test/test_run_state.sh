#!/usr/bin/env bash
# What a run tells its user (issue 15, "Progress and run state"), on CPU ranks:
#  - <out>/metrics.jsonl: every line parses as JSON; its events are main.log's, in the same order,
#    with the same values (loss, lr, norm, tokens, val loss, HellaSwag); a resumed run appends to
#    both files alike;
#  - the step line's ETA equals (mean step time x steps left) + (mean evaluation time x
#    evaluations left), recomputed from the times metrics.jsonl records;
#  - validation and HellaSwag print progress lines (count/total, ETA) on rank 0 only, no more
#    often than LLMC_PROGRESS_SECONDS (the test hook; default 5 s, so none for fast evaluations);
#  - a finished run started again with -y 1 says it is complete, exits 0 and writes nothing;
#  - resuming with another -x warns that the LR schedule changes (only when it does), and the
#    resumed steps follow the new schedule (checked against the cosine formula);
#  - -k wsd: every step's LR against the warmup-stable-decay formula, and a run resumed in its
#    stable phase with a larger -x trains the steps before the new decay as it did.
source "$(dirname "$0")/lib.sh" test_run_state "${1:-./train_gpt2}"
$PY "$ROOT/dev/bench/make_random_shard.py" train.bin 60000 1 512
$PY "$ROOT/dev/bench/make_random_shard.py" val.bin 240000 2 512
# a HellaSwag file in llm.c's layout: 8 random examples of 4 endings
$PY "$ROOT/dev/bench/make_random_hellaswag.py" hs.bin 8 3 512
# cosine to 0.1*lr over -x steps; val loss on 8 batches, except in the first run (all of them)
ARGS=(-i train.bin -j val.bin -e L2:C64:H4:T64:V512 -b 4 -t 32 -d 512 -v 4 -m 8 -s 0 -h 1 -hf hs.bin
      -l 1e-3 -u 2 -q 0.1 -n 4 -tk none.bin)

# metrics.jsonl against main.log: the same events in the same order, equal values
check_metrics() {  # check_metrics <dir> <what>
    $PY - "$1" <<'EOF' && echo "ok   $2: metrics.jsonl = main.log ($(wc -l < "$1/metrics.jsonl") events)" || bad "$2: metrics.jsonl vs main.log"
import json, math, sys
d = sys.argv[1]
events = []  # main.log's events as (kind, step, {field: value})
for line in open(f"{d}/main.log"):
    f = dict(kv.split(":", 1) for kv in line.split())
    s = int(f["s"])
    if "trl" in f:
        events.append(("step", s, {"loss": float(f["trl"]), "lr": float(f["lr"]), "norm": float(f["norm"]), "tokens": int(f["tok"])}))
    elif "tel" in f:
        events.append(("eval", s, {"val_loss": float(f["tel"])}))
    elif "hsw" in f:
        assert events[-1][:2] == ("eval", s), f"hsw at {s} without its val loss"
        events[-1][2]["hellaswag"] = float(f["hsw"])
objs = [json.loads(l) for l in open(f"{d}/metrics.jsonl")]
assert len(objs) == len(events), f"{len(objs)} JSON objects, {len(events)} main.log events"
for o, (kind, s, want) in zip(objs, events):
    assert o["event"] == kind and o["step"] == s, f"{o} vs main.log {kind} at s:{s}"
    for k, v in want.items():
        assert o[k] == v, f"step {s}: {k} {o[k]} in metrics.jsonl, {v} in main.log"
    if kind == "eval":
        assert o["tokens"] == s * 512, o
    assert o["ms"] > 0 and "mfu_pct" not in o, o  # the CPU trainer knows no peak FLOP/s
    if kind == "step":
        assert abs(o["tok_per_s"] - 512 / (o["ms"] / 1000)) <= 0.01 * o["tok_per_s"], o
EOF
}

# ---- a run of 12 steps whose evaluations read all 7499 val windows (about 1-6 s on 2 cores; with
# half as many, a quiet fresh machine took 0.42 s, too fast for the ETA check below), with
# progress lines at most every 0.25 s
LLMC_PROGRESS_SECONDS=0.25 "$TRAINER" "${ARGS[@]}" -m -1 -x 12 -o run > run.out 2>&1 || { bad "the run failed"; tail -3 run.out; }
check_metrics run "12 steps, 4 evaluations"
[ "$(grep -c '"event":"eval"' run/metrics.jsonl)" -eq 4 ] && grep -q '"event":"eval","step":12,"tokens":6144,"val_loss":[0-9.]*,"hellaswag":' run/metrics.jsonl \
    || bad "expected 4 evaluations with val_loss and hellaswag in metrics.jsonl"

# the ETA of every step line after the first, recomputed from the recorded step and evaluation times
$PY - run/metrics.jsonl run.out <<'EOF' && echo "ok   the step line's ETA counts the evaluations still to come" || bad "ETA"
import json, re, sys
objs = [json.loads(l) for l in open(sys.argv[1])]
printed = {int(m[1]): m[2] for m in re.finditer(r"^step (\d+)/12 .*\| eta (\S+)", open(sys.argv[2]).read(), re.M)}
def secs(t):
    m = re.fullmatch(r"(?:(\d+)m)?(\d+)s", t)
    return int(m[1] or 0) * 60 + int(m[2])
steps, evals, checked = [], [], 0
for o in objs:
    if o["event"] == "eval":
        evals.append(o["ms"] / 1000)
        continue
    steps.append(o["ms"] / 1000)
    n = o["step"] + 1              # the step line's number
    if n == 1:
        assert printed[1] == "-", printed[1]
        continue
    left = 12 - n
    evals_left = sum(1 for s in range(n, 13) if s % 4 == 0)
    eval_part = evals_left * sum(evals) / len(evals)
    want = sum(steps[1:]) / len(steps[1:]) * left + eval_part
    got = secs(printed[n])
    assert abs(got - want) <= 0.51, f"step {n}: eta {printed[n]}, expected {want:.2f} s"
    if n == 2:  # an ETA without the evaluations would be more than a rounding away: 0.51 s of
        # tolerance plus 0.5 s of rounding to whole seconds
        assert eval_part >= 1.1, f"3 evaluations took {eval_part:.2f} s: too fast for this check"
    checked += 1
assert checked == 11, printed
print(f"  step 2: eta {printed[2]} (10 steps of {sum(steps[1:3]) / 2 * 1000:.0f} ms, 3 evaluations of ~{evals[0]:.1f} s)")
EOF

# progress lines: count/total and an ETA, spaced by at least the interval
$PY - run.out <<'EOF' && echo "ok   progress lines during long evaluations, at most one per LLMC_PROGRESS_SECONDS" || bad "progress lines"
import re, sys
lines, evals = [], []  # per evaluation: its val progress lines (done, total, elapsed), its duration
for l in open(sys.argv[1]):
    m = re.match(r"val loss \.\.\. (\d+)/(\d+) batches \| ([\d.]+) s \| eta \S+$", l)
    if m:
        lines.append((int(m[1]), int(m[2]), float(m[3])))
    m = re.match(r"val loss [0-9.]+ \(([0-9.]+) s\)$", l)
    if m:
        evals.append((lines, float(m[1])))
        lines = []
assert len(evals) == 4, f"{len(evals)} val results"
for progress, secs in evals:
    assert all(t == 1875 and 0 < d < 1875 for d, t, _ in progress), progress[:3]  # 7499 windows / B=4
    assert [d for d, _, _ in progress] == sorted(d for d, _, _ in progress), progress
    elapsed = [e for _, _, e in progress]
    # none before 0.25 s, no two closer than 0.25 s (printed to 0.1 s), some in any evaluation of 0.5 s or more
    assert not elapsed or elapsed[0] >= 0.2, elapsed
    assert all(b - a >= 0.15 for a, b in zip(elapsed, elapsed[1:])), elapsed
    assert len(progress) <= secs / 0.25 + 1 and (secs < 0.5 or progress), f"{len(progress)} lines in {secs} s"
assert any(p for p, _ in evals), "no val progress line: every evaluation took under 0.25 s"
example = next(l for l in open(sys.argv[1]) if l.startswith("val loss ..."))
print(f"  {sum(len(p) for p, _ in evals)} val progress lines in evaluations of {', '.join(f'{s:.2f}' for _, s in evals)} s, e.g. '{example.strip()}'")
EOF

# every batch with LLMC_PROGRESS_SECONDS=0: HellaSwag counts examples; only rank 0 prints (np=2)
QUICK=(-x 2 -v 2 -m 3 -b 2 -d 512)
LLMC_PROGRESS_SECONDS=0 "$TRAINER" "${ARGS[@]}" "${QUICK[@]}" -o quick > quick.out 2>&1 || bad "quick run failed"
# val: 3 batches, a line after each but the last; HellaSwag: 8 examples x 4 rows in batches of 2
want_val=$(printf 'val loss ... 1/3 batches\nval loss ... 2/3 batches\n')
[ "$(grep '^val loss \.\.\.' quick.out | head -2 | cut -d'|' -f1 | sed 's/ *$//')" = "$want_val" ] \
    && echo "ok   val progress per batch: $(grep -m1 '^val loss \.\.\.' quick.out)" || { bad "val progress per batch"; grep '\.\.\.' quick.out | head -4; }
n=$(grep -c '^HellaSwag \.\.\. [0-9]*/8 examples | .* s | eta ' quick.out)
[ "$n" -eq 30 ] && echo "ok   HellaSwag progress: $n lines (2 evaluations x 15 batches), e.g. $(grep -m3 '^HellaSwag \.\.\.' quick.out | tail -1)" \
    || { bad "HellaSwag progress: $n lines, expected 30"; grep HellaSwag quick.out | head -5; }
if have_mpi; then
    LLMC_PROGRESS_SECONDS=0 "${MPIRUN[@]}" -np 2 -x LLMC_PROGRESS_SECONDS "$TRAINER" "${ARGS[@]}" "${QUICK[@]}" -o quick2 > quick2.out 2>&1 || bad "np=2 quick run failed"
    # rank 0 reads 2 of the 3 val batches, and 16 of the 32 HellaSwag rows (8 batches of 2)
    nv=$(grep -c '^val loss \.\.\.' quick2.out); nh=$(grep -c '^HellaSwag \.\.\.' quick2.out)
    [ "$nv" -eq 2 ] && [ "$nh" -eq 14 ] && echo "ok   np=2: rank 0 alone prints progress ($nv val, $nh HellaSwag lines)" \
        || { bad "np=2: $nv val and $nh HellaSwag progress lines, expected 2 and 14"; grep '\.\.\.' quick2.out | head; }
else
    mpi_missing "test-run-state: progress on 2 ranks" || bad "the 2-rank part not run"
fi
"$TRAINER" "${ARGS[@]}" "${QUICK[@]}" -o quick3 > quick3.out 2>&1
grep -q '\.\.\. [0-9]*/' quick3.out && bad "progress lines for evaluations shorter than the default 5 s"
LLMC_PROGRESS_SECONDS=soon "$TRAINER" "${ARGS[@]}" "${QUICK[@]}" -o badenv > bad.out 2>&1
[ $? -ne 0 ] && grep -q "error: LLMC_PROGRESS_SECONDS='soon' is not a number" bad.out && echo "ok   $(grep error: bad.out)" \
    || { bad "a bad LLMC_PROGRESS_SECONDS"; tail -2 bad.out; }

# ---- a finished run started again: complete, exit 0, nothing written or evaluated
ls run > before.ls; cp run/main.log before.log; cp run/metrics.jsonl before.jsonl
"$TRAINER" "${ARGS[@]}" -m -1 -x 12 -o run -y 1 > again.out 2>&1; rc=$?
if [ $rc -eq 0 ] && grep -q "^run complete: checkpoint 12 in run is the last step (-x 12); nothing to do" again.out &&
   ! grep -q "^val loss\|^HellaSwag\|^step " again.out && cmp -s before.log run/main.log && cmp -s before.jsonl run/metrics.jsonl &&
   [ "$(ls run)" = "$(cat before.ls)" ]; then
    echo "ok   a finished run started again: $(grep '^run complete' again.out)"
else
    bad "a finished run started again (exit $rc)"; tail -4 again.out
fi

# ---- resumed after a crash with the same -x: no warning, and both files continue alike
cp -r run crash
rm crash/DONE_00000012
"$TRAINER" "${ARGS[@]}" -x 12 -o crash -y 1 > crash.out 2>&1 || bad "resume from checkpoint 8 failed"
grep -q "resumed from checkpoint 8" crash.out || bad "did not resume from checkpoint 8"
grep "^warning: .* differs\? from the" crash.out && bad "a warning about flags that did not change"
check_metrics crash "resumed with steps 8-11 logged twice"

# ---- other optimizer flags on a resume: the LR schedule's named, with the first step whose LR
# changes (the cosine formula's values), and -c apart
cp -r run flags && rm flags/DONE_00000012
"$TRAINER" "${ARGS[@]}" -x 12 -l 5e-4 -u 3 -c 0.05 -o flags -y 1 > flags.out 2>&1 || bad "resume with other flags failed"
want=$($PY -c "
import math
def lr(peak, warmup, s, x=12):  # cosine to 0.1*peak over x steps after warmup
    return peak * (s + 1) / warmup if s < warmup else 0.1 * peak + 0.5 * (1 + math.cos(math.pi * (s - warmup) / (x - warmup))) * 0.9 * peak
print(f'warning: -l 0.0005 and -u 3 differ from the -l 0.001 and -u 2 of the run that wrote checkpoint 8 in flags: the LR schedule '
      f'depends on them, so it changes from here on (step 9: lr {lr(5e-4, 3, 8):.2e} instead of {lr(1e-3, 2, 8):.2e})')
print('warning: -c 0.05 differs from the -c 0 of the run that wrote checkpoint 8 in flags: the updates from here on use the new value(s)')")
[ "$(grep '^warning: .* differs\? from the' flags.out)" = "$want" ] && echo "ok   other flags on a resume: $(tr '\n' ' ' <<< "$want" | cut -c1-230)" \
    || { bad "other flags on a resume: expected"; echo "$want"; grep '^warning' flags.out; }

# ---- a checkpoint written mid-run, resumed with -x cut to its step: no step trains, and its final
# evaluation runs, equal to the one the first run made at that step (the same parameters)
cp -r run cut
rm cut/DONE_00000012
"$TRAINER" "${ARGS[@]}" -m -1 -x 8 -o cut -y 1 > cut.out 2>&1; rc=$?
if [ $rc -eq 0 ] && grep -q "^checkpoint 8 in cut was written mid-run (its run had -x 12): -x 8 ends the run there" cut.out \
   && ! grep -q "^step \|^run complete" cut.out && [ "$(grep '^s:8 \(tel\|hsw\):' run/main.log)" = "$(tail -n 2 cut/main.log)" ]; then
    echo "ok   -x cut to a mid-run checkpoint: its final evaluation ($(tail -n 2 cut/main.log | tr '\n' ' '))"
else
    bad "-x cut to a mid-run checkpoint (exit $rc)"; tail -n 3 cut.out cut/main.log
fi

# ---- raising -x: a warning, and the schedule of the new -x from there on
"$TRAINER" "${ARGS[@]}" -x 16 -o run -y 1 > more.out 2>&1 || bad "resume with -x 16 failed"
if grep -q "^warning: -x 16 differs from the -x 12 of the run that wrote checkpoint 12 in run: the LR schedule depends on -x, so it changes" more.out; then
    echo "ok   $(grep '^warning: -x' more.out)"
else
    bad "no warning for a raised -x"; grep -i "warn\|error" more.out | head -3
fi
check_metrics run "resumed with -x 16"
$PY - run/main.log <<'EOF' && echo "ok   steps 13-16 follow the cosine schedule of -x 16" || bad "the LR after raising -x"
import math, sys
lr = {int(f["s"]): float(f["lr"]) for f in (dict(kv.split(":", 1) for kv in l.split()) for l in open(sys.argv[1])) if "lr" in f}
for s in range(12, 16):
    p = (s - 2) / (16 - 2)  # warmup 2, cosine from 1e-3 to 1e-4
    want = 1e-4 + 0.5 * (1 + math.cos(math.pi * p)) * (1e-3 - 1e-4)
    assert abs(lr[s] - want) <= 5e-6 * want, f"s:{s} lr {lr[s]}, want {want}"  # main.log has 6 digits
EOF
# the checkpoint now records -x 16: resuming it with -x 16 warns no more; a constant schedule never warns
"$TRAINER" "${ARGS[@]}" -x 16 -o run -y 1 > same.out 2>&1
grep -q "^run complete: checkpoint 16" same.out && ! grep -q "warning: -x" same.out && echo "ok   the new -x is stored with the checkpoint" \
    || { bad "resume of the -x 16 run"; tail -3 same.out; }
"$TRAINER" "${ARGS[@]}" -q 1.0 -x 4 -o const > /dev/null 2>&1
"$TRAINER" "${ARGS[@]}" -q 1.0 -x 6 -o const -y 1 > const.out 2>&1 || bad "constant-schedule resume failed"
grep -q "warning: -x" const.out && bad "a warning about -x for a constant schedule, which -x does not change"

# ---- wsd (warmup-stable-decay): every step's LR against the formula (Hagele et al. 2024, decay
# point as llm.c's); raising -x in the stable phase moves the decay to the new end, the steps
# before it train as they did, and the warning names the first step whose LR changes
wsd_lrs_follow() {  # wsd_lrs_follow <main.log> <-x> <first step> <last step> (1-based, inclusive)
    $PY - "$@" <<'EOF2' && echo "ok   $1: steps $3-$4 follow wsd at -x $2" || bad "$1: the LR of wsd at -x $2"
import math, sys
log, x, first, last = sys.argv[1], *map(int, sys.argv[2:])
lr = {int(f["s"]): float(f["lr"]) for f in (dict(kv.split(":", 1) for kv in l.split()) for l in open(log)) if "lr" in f}
start = int(0.75 * x)  # -kd 0.25: the last quarter decays
for s in range(first - 1, last):
    if s < 2:
        want = 1e-3 * (s + 1) / 2  # warmup 2
    elif s < start:
        want = 1e-3
    else:
        want = 1e-4 + (1 - math.sqrt((s - start) / (x - start))) * (1e-3 - 1e-4)
    assert abs(lr[s] - want) <= 5e-6 * want, f"s:{s} lr {lr[s]}, want {want}"
EOF2
}
WSD=(-k wsd -kd 0.25 -n 2 -nk 0)
"$TRAINER" "${ARGS[@]}" "${WSD[@]}" -x 8 -o wsd > wsd.out 2>&1 || { bad "the wsd run failed"; tail -n 3 wsd.out; }
wsd_lrs_follow wsd/main.log 8 1 8
cp -r wsd wsd_longer && rm wsd_longer/DONE_0000000[68]
"$TRAINER" "${ARGS[@]}" "${WSD[@]}" -x 12 -o wsd_longer -y 1 > wsd_longer.out 2>&1 || bad "the wsd resume with -x 12 failed"
grep -q "resumed from checkpoint 4" wsd_longer.out || bad "the wsd run did not resume from checkpoint 4"
wsd_lrs_follow wsd_longer/main.log 12 5 12
$PY - wsd/main.log wsd_longer/main.log <<'EOF2' && echo "ok   steps 5-7 logged the same loss and LR after -x 8 -> 12" || bad "steps 5-7 changed with -x"
import sys
rows = [{int(l.split()[0][2:]): l.split()[1:3] for l in open(p) if " trl:" in l} for p in sys.argv[1:]]
assert all(rows[0][s] == rows[1][s] for s in (4, 5, 6)), [(rows[0][s], rows[1][s]) for s in (4, 5, 6)]
EOF2
if grep -q "^warning: -x 12 differs from the -x 8 .*(step 8: lr 1.00e-03 instead of 3.64e-04)" wsd_longer.out; then
    echo "ok   $(grep '^warning: -x' wsd_longer.out)"
else
    bad "the warning for wsd's raised -x"; grep -i "warn" wsd_longer.out | head -3
fi

finish
