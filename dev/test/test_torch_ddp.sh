#!/usr/bin/env bash
# train_gpt2.py, the PyTorch DDP twin, against ./train_gpt2 (issue 14), on CPU ranks (gloo):
#  1. 1 and 2 processes of train_gpt2.py (torchrun's variables set by hand: Debian's torchrun does
#     not start on Python 3.11) give the per-step train losses and gradient norms, the val losses,
#     the HellaSwag accuracy and the samples' RNG of ./train_gpt2 under mpirun -np 1/2 at the same
#     flags (shuffled data, 2 micro-steps per step, warmup + cosine, weight decay), within 1e-4
#     relative; final parameters within 1e-4 (L2). -e is a descriptor: both init alike. With -k wsd
#     (1 process, train_gpt2.py given the long names of ./train_gpt2 --help) the logged learning
#     rates are the same strings.
#     torch.compile (LLMC_TEST_COMPILE's stand-in: torch 1.13 has none) on 2 ranks: bitwise the eager
#     run; failing on rank 1, both train the eager model and say so, bitwise the same.
#  2. only rank 0 prints step lines and writes main.log and metrics.jsonl (the C trainer's events,
#     keys and values but its phase times); a state file per rank, whose header
#     (data position, AdamW count, sampling RNG after a sample, guard counters, model) equals the
#     C trainer's.
#  3. checkpoints cross over: ./train_gpt2 -np 2 step 6 resumes in train_gpt2.py (1 process), and
#     train_gpt2.py 2 processes step 6 resumes in ./train_gpt2 (1 process); the continuing losses
#     equal the uninterrupted runs' within 1e-4.
#  4. bad flags and files end with a one-line error (bad -tk tables, flag values that strtoll/strtod
#     refuse, -e descriptors and model files: the C trainers' line; a shard cut short on disk mid-run, or replaced,
#     too; 300 shards fit ulimit -n 128 and train alike); every flag of ./train_gpt2 --help, short and
#     long, is train_gpt2.py's too (or refused with a reason, as -pn: torchrun launches it). stdout's
#     reader killed and SIGHUP stop it with a checkpoint, as they stop ./train_gpt2.
#  5. the samples' token choice (temperature, top-k) is llmc/generate.h's on random distributions.
source "$(dirname "$0")/lib.sh" test_torch_ddp "${1:-./train_gpt2}"
require_mpi test-torch-ddp  # the C trainer runs under mpirun, also for 1 process
TORCH_TRAINER="$ROOT/train_gpt2.py"

# learnable data (a noisy linear recurrence over 512 ids, so the loss moves) and a HellaSwag file
# of random examples in llm.c's layout
$PY - <<'EOF'
import numpy as np
def shard(path, n, seed):
    noise = np.random.default_rng(seed).integers(0, 4, n)
    t = np.zeros(n, dtype=np.int64)
    for i in range(1, n):
        t[i] = (t[i - 1] * 7 + 3 + noise[i]) % 512
    h = np.zeros(256, "<i4"); h[:3] = [20240520, 1, n]
    open(path, "wb").write(h.tobytes() + t.astype("<u2").tobytes())
for i, n in enumerate((20000, 27000, 13000)):  # several shards: shuffling permutes their order too
    shard(f"train_{i}.bin", n, 10 + i)
shard("val.bin", 4000, 2)
EOF
$PY "$ROOT/dev/bench/make_random_hellaswag.py" hs.bin 40 3 512  # 40 random examples of 4 endings
ARGS=(-i 'train_*.bin' -j val.bin -e L2:C64:H4:T64:V512 -t 32 -d 256 -x 12 -v 6 -m 4 -h 1 -hf hs.bin -s 6 -g 8 -tk none.bin
      -l 3e-3 -u 2 -k cosine -q 0.1 -c 0.1 -sh 1 -n 6 -r auto)  # -r: train_gpt2cu's; both accept it and ignore it
B_FOR=(0 4 2)  # -b for 1 and 2 processes: 2 micro-steps per step either way, the same tokens per step

# np processes of train_gpt2.py with torchrun's variables; rank r's stdout/stderr in <prefix>.r.out/.err
torch_ranks() {
    local np=$1 prefix=$2 port rc=0 pids=()
    port=$(free_port)
    shift 2
    for ((r = 0; r < np; r++)); do
        RANK=$r LOCAL_RANK=$r WORLD_SIZE=$np MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
            timeout -k 10 300 $PY "$TORCH_TRAINER" "$@" > "$prefix.$r.out" 2> "$prefix.$r.err" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    return $rc
}
# two model files' parameters: |a-b| / |a| <= tol (L2 norms). Not the largest single difference:
# AdamW turns rounding noise in a near-zero gradient into a step of up to lr*|g|/eps (seen: 1e-4
# on one element of fcw while the whole differs by 7e-6)
close_params() {
    $PY - "$@" <<'EOF'
import sys, numpy as np
a, b, tol = np.fromfile(sys.argv[1], "<f4", offset=1024), np.fromfile(sys.argv[2], "<f4", offset=1024), float(sys.argv[3])
d = np.linalg.norm(a - b) / np.linalg.norm(a)
print(f"  |diff|/|ref| = {d:.1e} (tolerance {tol})")
sys.exit(0 if d <= tol else 1)
EOF
}

# compare_metrics <train_gpt2.py's metrics.jsonl> <train_gpt2's>: the same events with the same keys
# (but the C trainer's phase times, *_ms), losses within 1e-4 relative, the rest as main.log's
compare_metrics() {
    $PY - "$@" <<'EOF'
import json, sys
p, c = ([json.loads(line) for line in open(f)] for f in sys.argv[1:])
c = [{k: v for k, v in e.items() if not k.endswith("_ms")} for e in c]
bad = [] if len(p) == len(c) else [f"{len(p)} events against {len(c)}"]
for a, b in zip(p, c):
    if list(a) != list(b) or any(a[k] != b[k] for k in ("event", "step", "tokens", "lr") if k in a):
        bad.append(f"{a} against {b}")
    bad += [f"{k} {a[k]} against {b[k]} at step {a['step']}" for k in ("loss", "val_loss", "hellaswag", "norm")
            if k in a and k in b and abs(a[k] - b[k]) > 1e-4 * abs(b[k])]
print(f"  metrics.jsonl: {len(p)} events ({', '.join(sorted({e['event'] for e in p}))}), "
      f"{'the same keys and values' if not bad else 'differ: ' + '; '.join(bad[:3])}")
sys.exit(1 if bad else 0)
EOF
}

# ---- 1, 2: the same run by both trainers on 1 and 2 processes
for np in 1 2; do
    "${MPIRUN[@]}" -np $np "$TRAINER" "${ARGS[@]}" -b ${B_FOR[$np]} -o c$np > c$np.out 2>&1 \
        || { bad "train_gpt2 np=$np failed"; tail -n 3 c$np.out; }
    torch_ranks $np p$np "${ARGS[@]}" -b ${B_FOR[$np]} -o p$np || { bad "train_gpt2.py np=$np failed"; tail -n 3 p$np.*.err; }
    # train loss, gradient norm, val loss, HellaSwag accuracy (a count: equal)
    echo "np=$np, train_gpt2.py vs train_gpt2:"
    compare_logs p$np/main.log c$np/main.log trl=1e-4 norm=1e-4 tel=1e-4 hsw=0 || bad "np=$np: the logs differ"
    compare_metrics p$np/metrics.jsonl c$np/metrics.jsonl || bad "np=$np: metrics.jsonl differs"
    n=$(grep -c '^s:[0-9]* trl:' p$np/main.log)
    [ "$n" -eq 12 ] || bad "train_gpt2.py np=$np logged $n steps, expected 12"
    echo "np=$np final parameters:"
    close_params c$np/model_00000012.bin p$np/model_00000012.bin 1e-4 || bad "np=$np: final parameters differ"
    n=$(grep -c '^step [0-9]*/12 |' p$np.0.out)
    [ "$n" -eq 12 ] || bad "np=$np: rank 0 printed $n step lines, expected 12"
    [ "$(ls p$np | grep -c '^main.log$')" -eq 1 ] && [ "$(ls p$np | grep -c '^state_00000012_')" -eq $np ] \
        || bad "np=$np: expected one main.log and $np state files for step 12: $(ls p$np | tr '\n' ' ')"
done
# a long evaluation's progress lines (LLMC_PROGRESS_SECONDS=0: one per batch), the same counts as
# ./train_gpt2's; the ETA counts the evaluations and samples still to come (events_left, known answers)
PROG=("${ARGS[@]}" -b 4 -x 2 -v 2 -n 0 -s 0)
LLMC_PROGRESS_SECONDS=0 "$TRAINER" "${PROG[@]}" 2>&1 | sed -n 's/^\(val loss\|HellaSwag\) \.\.\. \([0-9]*\/[0-9]* [a-z]*\) .*/\1 \2/p' > prog_c.txt
LLMC_PROGRESS_SECONDS=0 timeout -k 10 300 $PY "$TORCH_TRAINER" "${PROG[@]}" 2>&1 | sed -n 's/^\(val loss\|HellaSwag\) \.\.\. \([0-9]*\/[0-9]* [a-z]*\) .*/\1 \2/p' > prog_py.txt
$PY -c "import sys; sys.path.insert(0, '$ROOT'); import train_gpt2 as t; sys.exit(0 if [t.events_left(3, 10, 5), t.events_left(1, 12, 5), t.events_left(11, 12, 5), t.events_left(13, 12, 5)] == [2, 3, 1, 0] else 1)" \
    && [ -s prog_c.txt ] && cmp -s prog_c.txt prog_py.txt \
    && ok "progress lines of the evaluations as ./train_gpt2's ($(wc -l < prog_py.txt): $(head -n 1 prog_py.txt), ...); the ETA's events_left" \
    || { bad "progress lines or events_left differ from ./train_gpt2's"; diff prog_c.txt prog_py.txt | head -5; }
# -g past -t: the samples during training stop at -t tokens, and both trainers say so alike
SHORT=("${ARGS[@]}" -b 4 -t 16 -x 1 -v 0 -h 0 -n 0 -s 1 -g 100)
"$TRAINER" "${SHORT[@]}" > gshort_c.out 2>&1; timeout -k 10 300 $PY "$TORCH_TRAINER" "${SHORT[@]}" > gshort_py.out 2>&1
want="warning: -g 100 is more than -t 16: the samples during training stop at 16 tokens (--prompt generates past -t)"
grep -qxF "$want" gshort_c.out && grep -qxF "$want" gshort_py.out && ok "-g past -t: $want" \
    || { bad "-g past -t: expected '$want' from both"; grep warning gshort_c.out gshort_py.out; }
# the finished run started again with -y 1: nothing to do, as ./train_gpt2 says; its logs untouched
before=$(cat p2/main.log p2/metrics.jsonl | md5sum)
torch_ranks 2 again "${ARGS[@]}" -b 2 -o p2 -y 1 \
    && grep -qx "run complete: checkpoint 12 in p2 is the last step (-x 12); nothing to do (raise -x to train further)" again.0.out \
    && ! grep -q "^val loss\|^HellaSwag" again.0.out && [ ! -s again.1.out ] && [ "$(cat p2/main.log p2/metrics.jsonl | md5sum)" = "$before" ] \
    && ok "train_gpt2.py -y 1 on a finished run: $(tail -n 1 again.0.out)" \
    || { bad "train_gpt2.py -y 1 on a finished run"; tail -n 3 again.0.out again.0.err; }
# its mid-run checkpoint 6 resumed with -x 6: no step, the final evaluation equal to the one at step 6
cp -r p2 cut && rm cut/DONE_00000012
torch_ranks 2 cut "${ARGS[@]}" -b 2 -x 6 -o cut -y 1 \
    && grep -q "^checkpoint 6 in cut was written mid-run (its run had -x 12): -x 6 ends the run there" cut.0.out \
    && ! grep -q "^step \|^run complete" cut.0.out && [ "$(grep '^s:6 \(tel\|hsw\):' p2/main.log)" = "$(tail -n 2 cut/main.log)" ] \
    && ok "train_gpt2.py -x cut to a mid-run checkpoint: its final evaluation ($(tail -n 2 cut/main.log | tr '\n' ' '))" \
    || { bad "train_gpt2.py -x cut to a mid-run checkpoint"; tail -n 3 cut.0.out cut.0.err cut/main.log; }
# -k wsd (warmup-stable-decay), 1 process: the same learning rate strings and losses
# (train_gpt2.py given the long names that ./train_gpt2 --help pairs with the short ones, as
# "--name value" and "--name=value" in turn)
WSD=("${ARGS[@]}" -b 4 -k wsd -kd 0.4 -x 10 -v 0 -h 0 -s 0 -n 2 -nk 1 -nm 4)
"$TRAINER" "${WSD[@]}" -o cwsd > cwsd.out 2>&1 || { bad "train_gpt2 -k wsd failed"; tail -n 3 cwsd.out; }
declare -A LONG_OF
while read -r short long; do LONG_OF[$short]=$long; done < <("$TRAINER" --help | sed -n 's/^  \(-[a-z]*\), \(--[a-z-]*\) .*/\1 \2/p')
WSD_LONG=()
for ((i = 0; i < ${#WSD[@]}; i += 2)); do
    long=${LONG_OF[${WSD[i]}]:?"./train_gpt2 --help has no long name for ${WSD[i]}"}
    if ((i % 4)); then WSD_LONG+=("$long=${WSD[i + 1]}"); else WSD_LONG+=("$long" "${WSD[i + 1]}"); fi
done
torch_ranks 1 pwsd "${WSD_LONG[@]}" --out pwsd || { bad "train_gpt2.py -k wsd (long names) failed"; tail -n 3 pwsd.*.err; }
echo "-k wsd, train_gpt2.py (${WSD_LONG[*]:0:5} ...) vs train_gpt2:"
compare_logs pwsd/main.log cwsd/main.log lr=0 trl=1e-4 || bad "-k wsd: the logs differ"
# and -nk 1 -nm 4 keep the same checkpoints: the newest and the multiples of 4
[ "$(ls pwsd | grep '^DONE' | tr '\n' ' ')" = "DONE_00000004 DONE_00000008 DONE_00000010 " ] && [ "$(ls pwsd | tr '\n' ' ')" = "$(ls cwsd | tr '\n' ' ')" ] \
    && echo "ok   -nk 1 -nm 4: both kept checkpoints 4, 8 and 10" || bad "-nk 1 -nm 4: train_gpt2.py kept $(ls pwsd | tr '\n' ' '), train_gpt2 $(ls cwsd | tr '\n' ' ')"
# a state file of a rank past the marker's world size (a larger job's failed attempt at that step)
# goes when the checkpoint is rotated out, as in llmc/checkpoint.h
cp pwsd/state_00000004_00000.bin pwsd/state_00000004_00003.bin
timeout -k 10 300 $PY "$TORCH_TRAINER" "${WSD[@]}" -x 12 -nm 0 -o pwsd -y 1 > pstray.out 2>&1 || { bad "the -nk 1 resume failed"; tail -n 2 pstray.out; }
[ "$(ls pwsd | grep '^\(state\|model\|DONE\)_' | tr '\n' ' ')" = "DONE_00000012 model_00000012.bin state_00000012_00000.bin " ] \
    && ok "train_gpt2.py -nk 1: a rotated-out checkpoint's stray state file of rank 3 went with it" || bad "train_gpt2.py -nk 1 left $(ls pwsd | tr '\n' ' ')"
# torch.compile (GPUs only; here LLMC_TEST_COMPILE's stand-in: torch 1.13 has none), tried once before
# the first step: where it compiles, DDP trains the compiled module; where it fails on any rank,
# every rank trains the eager model and says so; both the same numbers as the eager run
LLMC_TEST_COMPILE= torch_ranks 2 pc "${ARGS[@]}" -b 2 -o pc && grep -q '^trainer .*(.*, torch.compile[,)].* | 2 process' pc.0.out \
    && compare_logs pc/main.log p2/main.log trl=0 norm=0 tel=0 > /dev/null \
    && ok "torch.compile (stand-in), 2 ranks: the banner says so, the logs are the eager run's" \
    || { bad "torch.compile (stand-in), 2 ranks: $(head -1 pc.0.out)"; tail -n 3 pc.*.err; }
LLMC_TEST_COMPILE=fail:1 torch_ranks 2 pf "${ARGS[@]}" -b 2 -o pf && ! grep -q 'torch.compile' pf.0.out \
    && grep -qx '\[rank 1\] warning: torch.compile failed (RuntimeError: a compiler that fails (LLMC_TEST_COMPILE)); training runs the eager model' pf.1.err \
    && grep -qx '\[rank 0\] warning: torch.compile failed on another rank; training runs the eager model' pf.0.err \
    && compare_logs pf/main.log p2/main.log trl=0 norm=0 tel=0 > /dev/null \
    && ok "torch.compile failing on rank 1: $(cat pf.1.err | head -1); the logs are the eager run's" \
    || { bad "torch.compile failing on rank 1: $(head -1 pf.0.out)"; tail -n 3 pf.*.err; }
if grep -q '^step \|^val loss\|^generating' p2.1.out; then bad "rank 1 printed: $(head -n 2 p2.1.out)"
else echo "ok   rank 1 printed nothing ($(wc -c < p2.1.out) bytes on stdout)"; fi
# the banner names the attention too where torch has SDPA (2.x): "(cpu, fp32, sdpa)"
grep -qE '\(cpu, fp32(, [a-z]+)?\) \| 2 process\(es\) \(torchrun\)' p2.0.out || bad "np=2 did not run as 2 torchrun processes: $(head -1 p2.0.out)"
$PY - c2/state_00000012_00000.bin p2/state_00000012_00000.bin <<'EOF' || bad "state file headers differ from the C trainer's"
import sys, numpy as np
c, p = (np.fromfile(f, "<i4", count=256) for f in sys.argv[1:])
# all but ints 251, 253, 254: the CRCs of float data, which differs in the last bits, and 250, the
# CRC of the header, which holds them
differ = [i for i in list(range(250)) + [252, 255] if c[i] != p[i]]
print(f"  state header of rank 0 at step 12: {f'differs at ints {differ}' if differ else 'equal'} (step {p[10]}, "
      f"AdamW updates {p[11]}, sampling RNG {p[20:22].view('<u8')[0]:#x}, guard count {p[22]})")
sys.exit(1 if differ else 0)
EOF

# ---- 3. checkpoints cross over (re-sliced from 2 ranks onto 1)
# cross_resume <name> <run> <trainer command...>: <run> without its last checkpoint marker,
# resumed from step 6 by the command; steps 7-12 compared with <run>'s
cross_resume() {
    local name=$1 src=$2
    shift 2
    cp -r "$src" "$name" && rm "$name/DONE_00000012"
    timeout -k 10 300 "$@" -o "$name" -y 1 > "$name.out" 2>&1 || { bad "$name: the resumed run failed"; tail -n 3 "$name.out"; return; }
    grep -q "resumed from checkpoint 6" "$name.out" || bad "$name: did not resume from checkpoint 6"
    # the other trainer reads the same optimizer flags out of the state file: nothing to warn about
    ! grep "^warning: .* differs\? from the" "$name.out" || bad "$name: a warning about flags that did not change"
    echo "$name, steps 7-12:"; compare_logs "$name/main.log" "$src/main.log" trl=1e-4 --last 6 || bad "$name: losses after the resume differ"
}
cross_resume train_gpt2_np2_to_torch_np1 c2 $PY "$TORCH_TRAINER" "${ARGS[@]}" -b 4
cross_resume torch_np2_to_train_gpt2_np1 p2 "$TRAINER" "${ARGS[@]}" -b 4
# issue 35: a FIFO as the newest DONE marker blocked -y 1; it is an unreadable marker, skipped
cp -r c1 fifo_done && rm fifo_done/DONE_00000012 && mkfifo fifo_done/DONE_00000012
if timeout -k 10 60 $PY "$TORCH_TRAINER" "${ARGS[@]}" -x 7 -l 2e-3 -c 0.2 -o fifo_done -y 1 > fifo_done.out 2>&1 &&
   grep -q "resumed from checkpoint 6" fifo_done.out; then
    ok "train_gpt2.py -y 1 past a FIFO named DONE_00000012: resumed from checkpoint 6"
else
    bad "train_gpt2.py -y 1 with a FIFO marker"; tail -n 3 fifo_done.out
fi
# that resume ran with -x 7 -l 2e-3 -c 0.2 where ./train_gpt2's checkpoint says -x 12 -l 3e-3 -c 0.1: both
# trainers name the changes alike (the LR schedule's with the first step whose LR changes, then -c)
cp -r c1 xchange && rm xchange/DONE_00000012 && rm -f fifo_done/DONE_00000012
timeout -k 10 60 "$TRAINER" "${ARGS[@]}" -x 7 -l 2e-3 -c 0.2 -o xchange -y 1 > xchange.out 2>&1
want=$(grep '^warning: .* differs\? from the' xchange.out | sed 's/ in xchange:/ in DIR:/'); got=$(grep '^warning: .* differs\? from the' fifo_done.out | sed 's/ in fifo_done:/ in DIR:/')
[ "$(wc -l <<< "$want")" = 2 ] && grep -q "^warning: -l 0.002 and -x 7 differ from the -l 0.003 and -x 12 of" <<< "$want" \
    && grep -q "^warning: -c 0.2 differs from the -c 0.1 of" <<< "$want" && [ "$got" = "$want" ] \
    && ok "a resume with other -l, -x, -c: both trainers warn alike ($(tr '\n' ' ' <<< "$want" | cut -c10-200))" \
    || { bad "a resume with other -l, -x, -c: the warnings"; printf '  train_gpt2:    %s\n  train_gpt2.py: %s\n' "$want" "$got"; }
# flags that differ past 6 significant digits: compared as the float32 values the state file keeps
# (the same value: no warning; another: the digits that tell them apart), alike in both trainers
PREC=("${ARGS[@]}" -b 4 -v 0 -h 0 -s 0 -n 2)
"$TRAINER" "${PREC[@]}" -x 2 -c 0.1234565 -o prec > /dev/null 2>&1 && cp -r prec precsame && cp -r prec precpy
timeout -k 10 300 $PY "$TORCH_TRAINER" "${PREC[@]}" -x 3 -c 0.1234565 -o precsame -y 1 > precsame.out 2>&1
"$TRAINER" "${PREC[@]}" -x 3 -c 0.1234566 -o prec -y 1 > precc.out 2>&1
timeout -k 10 300 $PY "$TORCH_TRAINER" "${PREC[@]}" -x 3 -c 0.1234566 -o precpy -y 1 > precpy.out 2>&1
want="warning: -c 0.1234566 differs from the -c 0.1234565 of the run that wrote checkpoint 2 in DIR: the updates from here on use the new value(s)"
grep -q "^resumed from checkpoint 2" precsame.out && ! grep "differs\? from the" precsame.out \
    && grep -qxF "${want/DIR/prec}" precc.out && grep -qxF "${want/DIR/precpy}" precpy.out \
    && ok "7-digit flags: the same value warns of nothing, another: $want" \
    || { bad "7-digit flags on a resume"; grep -h "warning\|error" precsame.out precc.out precpy.out; }
# llm.c's descriptors gpt2:dN and gpt3:cN: the same model and first loss
for e in gpt2:d2 gpt3:c384; do
    "$TRAINER" "${ARGS[@]}" -e $e -b 1 -x 1 -v 0 -s 0 -n 0 -h 0 > desc_c.out 2>&1
    $PY "$TORCH_TRAINER" "${ARGS[@]}" -e $e -b 1 -x 1 -v 0 -s 0 -n 0 -h 0 > desc_py.out 2>&1
    c=$(grep -o '^step 1/1 | loss [0-9.]*' desc_c.out | grep -o '[0-9.]*$'); p=$(grep -o '^step 1/1 | loss [0-9.]*' desc_py.out | grep -o '[0-9.]*$')
    [ -n "$c" ] && [ -n "$p" ] && $PY -c "import sys; sys.exit(abs($c - $p) > 1e-4 * $c)" \
        && ok "-e $e: both trainers build it alike (step 1 loss $c and $p)" || { bad "-e $e: train_gpt2 '$c', train_gpt2.py '$p'"; tail -n 2 desc_py.out; }
done

# ---- 4. bad input: one line naming the flag or file
torch_error() {  # torch_error <name> <words> <flags...>: train_gpt2.py rejects them (expect_error, lib.sh)
    local name=$1 words=$2
    shift 2
    expect_error "$name" "^error: .*$words" timeout -k 10 120 $PY "$TORCH_TRAINER" "$@"
}
torch_error "unknown flag" "unknown flag -zz" "${ARGS[@]}" -zz 1
torch_error "-h alone (help asked), as ./train_gpt2 says it" "flag -h needs a value: -h is HellaSwag's 0|1 (see --help)" -h
torch_error "bad model descriptor" "-e L2:C64:H5: channels must be divisible by the number of heads" "${ARGS[@]}" -e L2:C64:H5 -o bad
torch_error "-nm not a multiple of -n" "-nm 10 keeps the checkpoints at multiples of 10 steps; it must be a multiple of -n (now 6)" "${ARGS[@]}" -o bad -nk 1 -nm 10
torch_error "batch arithmetic" "not divisible by B\*T\*ranks = 3\*32\*1 = 96" "${ARGS[@]}" -b 3 -o bad
LLMC_TEST_COMPILE=fial:1 torch_error "a mistyped test hook" "LLMC_TEST_COMPILE=fial:1: expected fail:<rank>" "${ARGS[@]}" -b 4 -o bad
torch_error "2^31 micro-steps (the C trainers' line)" "is 2147483648 micro-steps of B\*T\*ranks = 32 tokens per optimizer step; at most 2147483647" \
    "${ARGS[@]}" -b 1 -d 68719476736 -o bad
torch_error "no shards" "-i nothing\*.bin: no files match" "${ARGS[@]}" -i 'nothing*.bin' -o bad
head -c 5000 c1/model_00000012.bin > cut.bin
torch_error "truncated model file" "model file 'cut.bin' is 5000 bytes but its header" "${ARGS[@]}" -e cut.bin -o bad
torch_error "checkpoint of another model" "but the model built (-e) is L=1 C=64" "${ARGS[@]}" -o p1 -y 1 -e L1:C64:H4:T64:V512
torch_error "a range" "-b 0: must be in 1..1048576 (see --help)" "${ARGS[@]}" -b 0 -o bad
torch_error "-b auto (the C trainers')" "-b auto: the memory plan that chooses B is the C trainers'" "${ARGS[@]}" -b auto -o bad
torch_error "-m 0 (a loss over no data)" "-m 0 validates on no batches" "${ARGS[@]}" -b 4 -m 0 -o bad
torch_error "-hm 0" "-hm 0 evaluates no examples" "${ARGS[@]}" -b 4 -hm 0 -o bad
torch_error "-x 0 -v 0 -s 0 (nothing to do)" "-x 0 trains no step, and with -v 0 and -s 0 there is nothing to evaluate" "${ARGS[@]}" -b 4 -x 0 -v 0 -s 0 -o bad
torch_error "-d 0" "-d 0: the total batch is -1 (= B\*T\*ranks) or a multiple" "${ARGS[@]}" -b 4 -d 0 -o bad
torch_error "a choice" "-k foo: expected one of cosine|linear|constant|wsd" "${ARGS[@]}" -b 4 -k foo -o bad
torch_error "a long name's range" "--batch 0: must be in 1..1048576 (see --help)" "${ARGS[@]}" --batch=0 -o bad
torch_error "a near miss" "unknown flag --bach; did you mean --batch?" "${ARGS[@]}" --bach 4 -o bad
torch_error "-pn (a launcher's flag)" "-pn: train_gpt2.py takes its processes from torchrun" "${ARGS[@]}" -b 4 -pn 2 -o bad
torch_error "--plan (the C trainers' memory plan)" "--plan: the memory plan is the C trainers'" "${ARGS[@]}" -b 4 --plan 1
# every flag of ./train_gpt2 --help: known to train_gpt2.py by both its names (the same flag), or refused with its reason
"$TRAINER" --help > c_help.txt
$PY - "$ROOT" c_help.txt <<'EOF' || bad "train_gpt2.py's flags are not ./train_gpt2's"
import re, sys
sys.path.insert(0, sys.argv[1])
import train_gpt2 as twin
specs, missing, n = twin.flag_specs(), [], 0
for names in re.findall(r"^  (-[a-z]+, --[a-z-]+|--[a-z-]+) ", open(sys.argv[2]).read(), re.M):
    names, n = names.split(", "), n + 1
    if not (all(f in twin.REFUSED for f in names) or all(f in specs for f in names) and len({id(specs[f]) for f in names}) == 1):
        missing.append(" ".join(names))
print(f"  {n} flags in ./train_gpt2 --help; not train_gpt2.py's: {missing or 'none'}")
sys.exit(1 if missing or n < 50 else 0)
EOF
# values as llmc/args.h and model_io.h read them (strtoll, strtod, the descriptor grammar) and the
# model file checks: each accepted by both trainers, or refused by both with the same line
$PY "$TORCH_TRAINER" --model L2:C64:H4:T64:V512 --write-model m.bin > /dev/null
$PY "$TORCH_TRAINER" --model L2:C64:H4:T64:V500 --write-model m500.bin > /dev/null
$PY - "$ROOT" "$TRAINER" <<'EOF' && ok "flag values and -e read alike: $(tail -n 1 values.txt)" || { bad "train_gpt2.py reads flag values or -e unlike ./train_gpt2"; cat values.txt; }
import contextlib, io, subprocess, sys
sys.path.insert(0, sys.argv[1])
import torch
import train_gpt2 as twin
good = open("m.bin", "rb").read()
for name, at in (("m_flip.bin", 5000), ("m_hdr.bin", 8)):  # a payload bit, a header bit
    b = bytearray(good); b[at] ^= 1; open(name, "wb").write(b)
open("m_cut.bin", "wb").write(good[:-10])
open("m_magic.bin", "wb").write(b"\1" + good[1:])
# Vp = V (llm.c's files pad V to 128, but any Vp >= V is a model): wte's 12 padding rows dropped,
# no CRC (as llm.c's files); and a Vp past the bound
import numpy as np
b = open("m500.bin", "rb").read()
h = np.frombuffer(b[:1024], dtype="<i4").copy()
h[7], h[252] = 500, 0
open("m_vp500.bin", "wb").write(h.tobytes() + b[1024:1024 + 500 * 64 * 4] + b[1024 + 512 * 64 * 4:])
h[7] = 200000
open("m_vpbig.bin", "wb").write(h.tobytes() + b[1024:])
cases = [("-l", v) for v in ("1_0e-4", " 1e-4", "1e-4 ", "0x1p-10", "0X1.8P-3", "-0x1p-2000", "0x1p99999", "0x", "inf", "nan",
                             "1e-400", "1e-310", "0e-400", "1e999", ".", "1.", "+.5e1", "1e")]
cases += [("-rs", v) for v in ("1_000", " 5", "+5", "5 ", "0x10", "99999999999999999999", "9223372036854775807", "1e3", "--1")]
cases += [("-e", v) for v in ("L2:C64:H4:", "L2:C64:H4::", "d2:", "C64:L2:H4", "L2:C064:H4:T64:V512", "L2:C+64:H4", "L2:X4:C64:H4",
                              "L0:C64:H4", "L2:C64:H4:T99999999", "L2:C64:H4:T9999999", "L2 :C64:H4", "L2:C64;H4", "d0", "gpt3:c100",
                              "m.bin", "m_flip.bin", "m_hdr.bin", "m_cut.bin", "m_magic.bin", "nope.bin", "m_vp500.bin",
                              "m_vpbig.bin")]
cases += [("-tb", "1"), ("-o", "/tmp/" + "d" * 3996)]  # TensorBoard without -o (ignored by the twin, refused alike)
base = ["-i", "train_*.bin", "-e", "L1:C32:H2:T64:V512", "-t", "32", "-b", "1", "-x", "0", "-v", "0", "-s", "0", "-tk", "none.bin"]
differ, report, outcomes = 0, [], []
for flag, value in cases:
    run = subprocess.run([sys.argv[2], *base, flag, value], capture_output=True, text=True)
    c = next((line for line in run.stderr.splitlines() if line.startswith("error:")), "accepted")
    outcomes.append(c)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = twin.parse_train_args(base + [flag, value])
            twin.resolve_model(args, torch.device("cpu"))
        py = "accepted"
    except SystemExit:
        py = next((line for line in err.getvalue().splitlines() if line.startswith("error:")), "no error line")
    if c != py:
        differ += 1
        report.append(f"  {flag} '{value}': train_gpt2: {c}\n  {' ' * len(flag)}  train_gpt2.py: {py}")
report.append(f"{len(cases)} values of -l, -rs, -e, -tb and -o (strtod and strtoll edge cases, descriptors, damaged model files), "
              f"{sum(c == 'accepted' for c in outcomes)} accepted: {differ} read differently")
open("values.txt", "w").write("\n".join(report) + "\n")
sys.exit(1 if differ else 0)
EOF
# a folder or a FIFO where a file is read: named, never read (a FIFO would block the open)
mkdir -p adir && rm -f fifo.bin && mkfifo fifo.bin
for f in adir fifo.bin; do
    what=$([ $f = adir ] && echo "is a folder, not a file" || echo "is a FIFO (named pipe), not a regular file")
    torch_error "-i $f" "-i: shard '$f' $what" "${ARGS[@]}" -b 4 -i $f -o bad
    torch_error "-e $f" "model file '$f' $what" "${ARGS[@]}" -b 4 -e $f -o bad
    torch_error "-hf $f" "HellaSwag file '$f' $what" "${ARGS[@]}" -b 4 -hf $f -o bad
    torch_error "-tk $f" "tokenizer file -tk '$f' $what" "${ARGS[@]}" -b 4 -tk $f -o bad
done
# bad decode tables (-tk): the C trainers' error line, word for word (the twin had taken a table too
# small for the model, an empty token, an EOT past the table and bytes after it)
$PY - <<'EOF'
import numpy as np
def table(name, tokens, V=None, version=2, eot=None, tail=b""):
    h = np.zeros(256, "<u4")
    h[:4] = [20240328, version, len(tokens) if V is None else V, len(tokens) - 1 if eot is None else eot]
    open(name, "wb").write(h.tobytes() + b"".join(bytes([len(t)]) + t for t in tokens) + tail)
toks = [bytes([65 + i % 26]) * (1 + i % 3) for i in range(512)]
table("tk_small.bin", toks[:10])
table("tk_tail.bin", toks, tail=b"x")
table("tk_eot.bin", toks, eot=512)
table("tk_empty.bin", toks[:5] + [b""] + toks[6:])
table("tk_cut.bin", toks[:-1], V=512)
table("tk_count.bin", toks[:3], V=1 << 20)
table("tk_v3.bin", toks, version=3)
open("tk_short.bin", "wb").write(b"\0" * 100)
EOF
for f in tk_small tk_tail tk_eot tk_empty tk_cut tk_count tk_v3 tk_short; do
    c=$("$TRAINER" "${ARGS[@]}" -b 4 -n 0 -tk $f.bin 2>&1 | grep -m1 '^error:')
    p=$(timeout -k 10 120 $PY "$TORCH_TRAINER" "${ARGS[@]}" -b 4 -n 0 -tk $f.bin 2>&1 | grep -m1 '^error:')
    [ -n "$c" ] && [ "$c" = "$p" ] && ok "-tk $f.bin, both trainers: ${c:0:110}" || bad "-tk $f.bin: train_gpt2: '$c'; train_gpt2.py: '$p'"
done
# a shard cut short on disk mid-run (rewritten in place): the C trainers' error, not a SIGBUS; the
# run is stopped from outside once it trains (it has no LLMC_FAULT), any position past the new end
# of 1536 tokens fails at its read, any before it once it gets there
$PY "$ROOT/dev/bench/make_random_shard.py" shrinks.bin 400000 5 512 > /dev/null
timeout -k 10 300 $PY "$TORCH_TRAINER" -i shrinks.bin -e L1:C32:H2:T64:V512 -b 2 -t 32 -x 10000 -v 0 -s 0 -sh 0 -n 2 -tk none.bin -o shrink > shrink.out 2>&1 &
pid=$!
for _ in $(seq 300); do [ "$(cat shrink/main.log 2> /dev/null | grep -c '^s:')" -ge 3 ] && break; sleep 0.1; done
kill -STOP $pid; truncate -s 4096 shrinks.bin; kill -CONT $pid
wait $pid; rc=$?
line=$(grep -m1 'error:' shrink.out)
[ $rc -eq 1 ] && grep -q "^error: shard 'shrinks.bin' became shorter on disk than its 801024 bytes while this run read it" <<< "$line" && [ -e shrink/DONE_00000002 ] \
    && ok "a shard cut short mid-run: ${line:0:120}" || { bad "a shard cut short mid-run: exit status $rc (want 1, the error line)"; tail -n 3 shrink.out; }
# 300 shards under `ulimit -n 128`: train_gpt2.py holds at most 64 open (the C trainers map them),
# and trains as ./train_gpt2 does on them; a shard it closed and must open again that was replaced
# on disk meanwhile is an error, not another file's tokens
$PY - <<'EOF'
import numpy as np, os
os.mkdir("many")
rng = np.random.default_rng(5)
for i in range(300):
    h = np.zeros(256, "<i4"); h[:3] = [20240520, 1, 100]
    open(f"many/s_{i:03d}.bin", "wb").write(h.tobytes() + rng.integers(0, 512, 100).astype("<u2").tobytes())
EOF
MANY=(-i 'many/s_*.bin' -e L1:C32:H2:T64:V512 -b 4 -t 32 -x 80 -v 0 -s 0 -n 0 -tk none.bin)  # 225 steps an epoch
( ulimit -n 128 && $PY "$TORCH_TRAINER" "${MANY[@]}" -o manyp > manyp.out 2>&1 && "$TRAINER" "${MANY[@]}" -o manyc > manyc.out 2>&1 ) \
    && compare_logs manyc/main.log manyp/main.log trl=1e-4 > cmp.out \
    && ok "300 shards under ulimit -n 128: $(head -1 cmp.out | sed 's/^ *//')" || { bad "300 shards under ulimit -n 128"; tail -n 2 manyp.out manyc.out cmp.out; }
$PY - "$ROOT" <<'EOF' && ok "a shard replaced on disk before it is opened again: an error naming it" || bad "a replaced shard was read"
import contextlib, io, os, shutil, sys
sys.path.insert(0, sys.argv[1])
import train_gpt2 as twin
twin.Shard.OPEN_MAX = 2
shards = [twin.Shard(f"many/s_{i:03d}.bin", "-i") for i in range(4)]  # 0 and 1 closed again
shutil.copy("many/s_001.bin", "new.bin"); os.replace("new.bin", "many/s_001.bin")
shards[0].read(0, 4)  # the same file: opened again and read
err = io.StringIO()
with contextlib.redirect_stderr(err), contextlib.suppress(SystemExit):
    shards[1].read(0, 4)
    sys.exit("read")
assert "shard 'many/s_001.bin' was replaced on disk while this run read it" in err.getvalue(), err.getvalue()
EOF
touch afile
torch_error "-o a file" "-o afile exists and is not a folder" "${ARGS[@]}" -b 4 -o afile
torch_error "-o under a file" "cannot create directory 'afile/sub': Not a directory" "${ARGS[@]}" -b 4 -o afile/sub
# a new run in another run's -o (the C trainer's): refused, the old run untouched; --start-over 1 moves it aside
ls c1 > c1.before
torch_error "a new run in another run's -o" "-o c1 holds the checkpoints of another run (.*the newest complete one of step 12)" \
    "${ARGS[@]}" -b 4 -o c1
ls c1 | cmp -s - c1.before || bad "the refused run changed c1: $(ls c1 | tr '\n' ' ')"
# the same on 2 ranks (only rank 0 checks -o): rank 1's collective breaks, and it says so in one line
torch_ranks 2 other "${ARGS[@]}" -b 2 -o c1
grep -q "^\[rank 0\] error: -o c1 holds the checkpoints of another run" other.0.err \
    && grep -q "^\[rank 1\] error: a collective with the other ranks failed (.*): another rank stopped (its error says why)" other.1.err \
    && ! grep -q Traceback other.0.err other.1.err && ok "2 ranks, rank 0's error at start-up: rank 1 $(grep -o 'a collective.*failed' other.1.err)" \
    || { bad "2 ranks, rank 0's error at start-up: rank 1 said"; tail -n 3 other.1.err; }
# each rank with its own copy of the data (the same command line in another folder), rank 1's shard
# of the same name and size but other tokens: refused as ./train_gpt2 refuses it
mkdir -p tnode0 tnode1
$PY "$ROOT/dev/bench/make_random_shard.py" tnode0/data.bin 20000 1 512 > /dev/null
$PY "$ROOT/dev/bench/make_random_shard.py" tnode1/data.bin 20000 2 512 > /dev/null
port=$(free_port)
for r in 0 1; do
    (cd tnode$r && RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout -k 10 120 \
        $PY "$TORCH_TRAINER" -i data.bin -e L1:C32:H2:T64:V512 -b 2 -t 32 -x 2 -v 0 -s 0 -tk none.bin > ../tnode.$r.out 2>&1) &
done
wait
grep -q "^\[rank 0\] error: rank(s) 1 have different flags or data files than rank 0" tnode.0.out && ! grep -q "^step" tnode.0.out \
    && ok "2 ranks, a same-size shard of other tokens on rank 1: $(grep -o 'rank(s) 1 have different.*rank 0' tnode.0.out)" \
    || { bad "2 ranks with different shard contents were not refused"; tail -n 2 tnode.0.out tnode.1.out; }
# a rank alone (rank 0 never started): one line once -pt has passed, not a traceback
RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) timeout -k 10 120 $PY "$TORCH_TRAINER" "${ARGS[@]}" -b 2 -n 0 -pt 2 > alone.out 2>&1
rc=$?
[ $rc = 1 ] && grep -q "^\[rank 1\] error: rank 0 did not answer at 127.0.0.1:[0-9]* within -pt 2 s (.*): it ended (its error says why) or was not started" alone.out \
    && ! grep -q Traceback alone.out && ok "rank 1 without rank 0: $(grep -o 'rank 0 did not answer.*-pt 2 s' alone.out)" || { bad "rank 1 without rank 0: exit $rc"; tail -n 3 alone.out; }
cp -r c1 over
torch_error "--start-over with -y 1" "--start-over 1 starts a new run in -o <dir>" "${ARGS[@]}" -b 4 -o over -y 1 --start-over 1
timeout -k 10 300 $PY "$TORCH_TRAINER" "${ARGS[@]}" -b 4 -x 2 -n 0 -s 0 -o over --start-over 1 > over.out 2>&1 || { bad "--start-over 1 failed"; tail -n 3 over.out; }
[ "$(ls over/old_run_1)" = "$(ls c1 | grep -v '^old_run_\|^llmc_run.lock$')" ] && [ "$(grep -c '^s:[0-9]* trl:' over/main.log)" = 2 ] \
    && [ "$(ls over)" = "$(printf 'llmc_run.lock\nmain.log\nmetrics.jsonl\nold_run_1')" ] \
    && grep -q "^--start-over: the earlier run in over (.* checkpoint file(s), its logs) moved to over/old_run_1$" over.out \
    && ok "train_gpt2.py --start-over 1: the old run in over/old_run_1 (as train_gpt2 moves it), the new one in its place" \
    || { bad "train_gpt2.py --start-over 1: over holds $(ls over | tr '\n' ' '), old_run_1 $(ls over/old_run_1 2>&1 | tr '\n' ' ')"; tail -n 2 over.out; }
# stdout's reader killed (`| tee`), then SIGHUP: the twin stops after its step with a checkpoint,
# exit 0, as ./train_gpt2 does (test_resume.sh), the first stop line on stderr
LONG=(timeout -k 10 300 $PY "$TORCH_TRAINER" "${ARGS[@]}" -b 4 -x 100000 -n 0 -s 0 -v 0 -h 0)
tee_killed tpipe err "${LONG[@]}" -o tpipe
tee_killed tpipe2 both "${LONG[@]}" -o tpipe2
[ "$(cat tpipe2.rc)" = 0 ] && ls tpipe2 | grep -q '^DONE_' && ok "train_gpt2.py 2>&1 | tee, tee killed: a checkpoint, exit 0" \
    || bad "train_gpt2.py 2>&1 | tee, tee killed: exit $(cat tpipe2.rc), $(ls tpipe2 | tr '\n' ' ')"
"${LONG[@]}" -o thup > thup.out 2>&1 &
pid=$!
wait_line "^step 2/" thup.out 60
kill -HUP $pid; wait $pid; rc=$?
[ "$(cat tpipe.rc)" = 0 ] && grep -q "^stopped by a signal after step [0-9]*; checkpoint [0-9]* is in tpipe" tpipe.err \
    && [ $rc = 0 ] && grep -q "^stopped by a signal after step [0-9]*; checkpoint [0-9]* is in thup" thup.out \
    && ok "train_gpt2.py with stdout's reader killed, and on SIGHUP: stopped with a checkpoint, exit 0 ($(ls tpipe thup | grep -c DONE_) markers)" \
    || { bad "train_gpt2.py, stdout's reader killed: exit $(cat tpipe.rc), $(tail -n 1 tpipe.err); SIGHUP: exit $rc, $(tail -n 1 thup.out)"; }
# -o not shared by the ranks (rank 1 given a tmpfs of its own over it): both stop at start-up with
# ./train_gpt2's line
mkdir tnotshared
if [ "$(id -u)" = 0 ] && command -v unshare > /dev/null; then
    port=$(free_port)
    RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        timeout -k 10 120 $PY "$TORCH_TRAINER" "${ARGS[@]}" -b 4 -o tnotshared > tns.0.out 2>&1 &
    pid0=$!
    RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout -k 10 120 unshare -m sh -c \
        'mount -t tmpfs none tnotshared && exec "$0" "$@"' $PY "$TORCH_TRAINER" "${ARGS[@]}" -b 4 -o tnotshared > tns.1.out 2>&1
    rc1=$?; wait $pid0; rc0=$?
    want="-o tnotshared: rank 1 does not see the files rank 0 writes there; a checkpoint is every rank's files in one folder"
    [ $rc0 = 1 ] && [ $rc1 = 1 ] && grep -qF "[rank 0] error: $want" tns.0.out && grep -qF "[rank 1] error: $want" tns.1.out \
        && [ "$(ls tnotshared)" = llmc_run.lock ] && ok "train_gpt2.py with -o not shared by the ranks: ${want:0:70}" \
        || { bad "train_gpt2.py with -o not shared: exit $rc0 $rc1"; tail -n 2 tns.0.out tns.1.out; }
else
    skip_or_fail "test-torch-ddp (-o not shared)" "root and unshare" "sudo make test-torch-ddp" || bad "no root"
fi
# the fixture mode (a command line that writes fixtures): its descriptor and its --tokens shard get the trainer's checks
FIXTURE=(--model L2:C64:H4:T64:V512 --debug-state bad_state.bin --batch 2 --seq 32)
torch_error "fixture: a depth of 0" "--model d0: depth must be in 1..1000" --model d0 --write-model bad.bin
torch_error "fixture: heads that do not divide C" "--model L2:C64:H5: channels must be divisible" --model L2:C64:H5 --write-model bad.bin
for flag in --batch --seq --steps; do
    expect_error "fixture: $flag 0" "error: argument $flag: '0' is not a whole number >= 1" $PY "$TORCH_TRAINER" "${FIXTURE[@]}" $flag 0
done
torch_error "fixture: a missing --tokens shard" "--tokens: shard 'nope.bin' not found" "${FIXTURE[@]}" --tokens nope.bin
torch_error "fixture: a --tokens file that is not a shard" "--tokens: .*cut.bin" "${FIXTURE[@]}" --tokens cut.bin
$PY "$ROOT/dev/bench/make_random_shard.py" short.bin 40 1 512 > /dev/null
torch_error "fixture: a --tokens shard too short for the batch" "has 40 tokens; the debug batch needs B\*T+1 = 65" "${FIXTURE[@]}" --tokens short.bin
# ---- 5. the samples' token choice (-s, --temperature, --top-k) against llmc/generate.h's, built as the trainers
# build it (-ffast-math: subnormals are 0), on random distributions
$PY - "$ROOT" "$ROOT/dev/test/sample_probe" <<'EOF' || bad "train_gpt2.py's sample_token is not llmc/generate.h's"
import sys, subprocess, numpy as np
sys.path.insert(0, sys.argv[1])
import train_gpt2 as twin
rng = np.random.default_rng(5)
LAST = np.nextafter(np.float32(1), np.float32(0))  # the largest coin: where rounding decides
cases = []
for c in range(4000):
    n = int(rng.choice([1, 2, 3, 7, 64, 513]))
    logits = rng.normal(0, float(rng.choice([0.5, 3, 20])), n).astype(np.float32)
    if c % 3 == 0:  # ties: probabilities on a coarse grid
        logits = np.round(logits)
    p = np.exp(logits - logits.max()).astype(np.float32)
    if c % 5 == 0:  # some exactly zero
        p[rng.random(n) < 0.3] = 0
        p[rng.integers(n)] = 1
    p = twin.flush_subnormals((p / p.sum(dtype=np.float64)).astype(np.float32))  # as a softmax under -ffast-math
    t = np.float32(rng.choice([0, 1, 1, 0.5, 0.7, 2, 1e-3, 100]))
    k = int(rng.choice([0, 0, 1, 2, 3, max(n - 1, 1), n, n + 5]))
    coin = np.float32(rng.choice([0.0, LAST, rng.random(), rng.random()]))
    cases.append((t, k, coin, p))
text = "".join(f"{float(t).hex()} {k} {float(c).hex()} " + " ".join(float(x).hex() for x in p) + "\n" for t, k, c, p in cases)
c_ids = [int(x) for x in subprocess.run([sys.argv[2]], input=text.encode(), capture_output=True, check=True).stdout.split()]
py_ids = [twin.sample_token(p, t, k, c) for t, k, c, p in cases]


def kept(p, t, k):  # the tokens sample_token may return: weight > 0 after temperature and top-k
    if t == 0:
        return {int(np.argmax(p))}
    w = p if t == 1 else twin.flush_subnormals(np.power(p, np.float32(1) / t, dtype=np.float32))
    if 0 < k < len(p):
        w = np.where(w >= np.sort(w)[len(p) - k], w, 0)
    return set(np.nonzero(w)[0].tolist()) or {int(np.argmax(p))}


# below the largest coin the two sides walk the same float sums to the same token; at it, an ulp of
# powf decides, so there only: a token the temperature and top-k keep (never one of weight 0)
diff = [i for i, (t, k, c, p) in enumerate(cases) if c != LAST and c_ids[i] != py_ids[i]]
outside = [i for i, (t, k, c, p) in enumerate(cases) if c == LAST and c_ids[i] not in kept(p, t, k)]
n_last = sum(c == LAST for _, _, c, _ in cases)
print(f"  {len(cases) - n_last} draws (temperatures 0-100, top-k 0..n+5, ties, zeros): {len(diff)} differ from "
      f"llmc/generate.h's sample_token; {n_last} at the largest coin: {len(outside)} of weight 0")
for i in (diff + outside)[:5]:
    t, k, c, p = cases[i]
    print(f"  case {i}: n={len(p)} temperature {t} top-k {k} coin {c}: C {c_ids[i]}, train_gpt2.py {py_ids[i]}")
sys.exit(1 if diff or outside or len(c_ids) != len(cases) else 0)
EOF
finish
