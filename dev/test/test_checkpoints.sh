#!/usr/bin/env bash
# Checkpoints that never stall the step or vanish (CPU trainer):
#  - their CRC-32 (llmc/utils.h: folded by carry-less multiplication where the CPU can) is zlib's;
#  - written in the background (--ckpt-async 1, the default; front to back past the page cache)
#    they are byte for byte the files a synchronous write makes (--ckpt-async 0, straight from the
#    model, section by section), on 1 and 2 ranks and for a model larger than the direct path's stage;
#  - a disk that fills up during checkpoint 10 (a small tmpfs; the run frozen there by
#    LLMC_FAULT while the test fills it, and again before checkpoint 15 while it frees it): one
#    warning naming the file and the error, checkpoint 10 leaves no file behind, checkpoint 5
#    stays, training goes on and checkpoint 15 is written; checkpoint 5 resumes bit for bit;
#  - a disk that stays full: 3 failed checkpoints in a row stop the run with an error, the older
#    complete checkpoints intact, and the newest of them resumes bit for bit; train_gpt2.py by the
#    same rules and words (and a failed last checkpoint, unwritable logs, 2 ranks);
#  - -rb 3 on injected loss spikes rolls back and then equals a resume on a shard without that data,
#    with AdamW and with Muon; train_gpt2.py rolls back alike (1e-4); a stop signal in the validation
#    right after the rollback rewrites its checkpoint with the data position (both trainers);
#  - a fatal error (a token out of the vocabulary) while a checkpoint is written in the background:
#    the checkpoint is finished before the exit and resumes bit for bit; on 2 ranks the rank with the
#    error writes the marker once both ranks' files are on disk, and gives up after 10 s when
#    rank 0's never come (frozen by LLMC_FAULT).
source "$(dirname "$0")/lib.sh" test_checkpoints "${1:-./train_gpt2}"
$PY "$ROOT/dev/bench/make_random_shard.py" train.bin 60000 1 512 > /dev/null
$PY "$ROOT/dev/bench/make_random_shard.py" val.bin 20000 2 512 > /dev/null
ARGS=(-i train.bin -j val.bin -e L2:C64:H4:T64:V512 -b 4 -t 32 -d 512 -v 10 -m 2 -s 0 -n 5 -x 30 -tk none.bin)

# ---- the CRC-32 of every file, against zlib's: each tail and alignment, running over uneven pieces
"$ROOT/dev/test/crc_probe" crc.bin > crc.txt && crc_against_zlib crc.bin crc.txt && ok "CRC-32: $(wc -l < crc.txt) slices agree with zlib.crc32" || bad "CRC-32 differs from zlib.crc32"

"$TRAINER" "${ARGS[@]}" -o ref > ref.out 2>&1 || { bad "the reference run failed"; tail -3 ref.out; }

# ---- the same bytes in the background and synchronously
"$TRAINER" "${ARGS[@]}" -o sync --ckpt-async 0 > sync.out 2>&1 || bad "the --ckpt-async 0 run failed"
grep -q "^checkpoint 30 written to sync ([0-9.]* s)$" sync.out || bad "--ckpt-async 0 did not write synchronously"
grep -q "^checkpoint 30 written to ref (snapshot [0-9.]* s, then [0-9.]* s while training went on)$" ref.out \
    || bad "checkpoints were not written in the background by default"
same_files "1 rank, background vs synchronous" ref sync
# a model whose m, v and parameters outgrow the 4 MiB stage of the direct (O_DIRECT) path: 1.7 M
# parameters, so each section goes out as full stages and a partial one
BIG=(-i train.bin -j val.bin -e L2:C256:H4:T64:V512 -b 2 -t 32 -v 0 -s 0 -n 3 -x 3 -tk none.bin)
if "$TRAINER" "${BIG[@]}" -o big > big.out 2>&1 && "$TRAINER" "${BIG[@]}" -o bigsync --ckpt-async 0 > bigsync.out 2>&1; then
    same_files "1.7 M parameters, background (direct) vs synchronous" big bigsync
else
    bad "the 1.7 M-parameter runs failed"; tail -2 big.out bigsync.out
fi
# both write the model file front to back: its payload, and each section of the state file, must
# have the CRC-32 its header gives (Python's zlib, not ours)
$PY - big/model_00000003.bin big/state_00000003_00000.bin <<'PY' && ok "1.7 M parameters: zlib.crc32 of the model payload and of m, v agree with the headers" || bad "1.7 M parameters: a CRC-32 does not match zlib's"
import sys, zlib, numpy as np
model, state = (open(f, "rb").read() for f in sys.argv[1:])
hm, hs = np.frombuffer(model[:1024], "<u4"), np.frombuffer(state[:1024], "<u4")
assert zlib.crc32(model[1024:]) == hm[253], "model payload"
n = int(hs[16]) | int(hs[17]) << 32
for s in range(3 if hs[4] else 2):
    assert zlib.crc32(state[1024 + 4 * n * s:1024 + 4 * n * (s + 1)]) == hs[253 + s], f"state section {s}"
PY
# the memory plan counts the copy: rank 0's parameters, m and v, 3 x 136960 fp32 = 1.6 MiB
"$TRAINER" "${ARGS[@]}" -o plan --plan 1 | grep -q "^  besides, for checkpoints: 1.6 MiB of host memory" \
    && ok "--plan shows the checkpoint copy (1.6 MiB)" || bad "--plan does not show the 1.6 MiB checkpoint copy"
if have_mpi; then
    "${MPIRUN[@]}" -np 2 "$TRAINER" "${ARGS[@]}" -o ref2 > ref2.out 2>&1 || bad "the np=2 run failed"
    "${MPIRUN[@]}" -np 2 "$TRAINER" "${ARGS[@]}" -o sync2 --ckpt-async 0 > sync2.out 2>&1 || bad "the np=2 --ckpt-async 0 run failed"
    same_files "2 ranks, background vs synchronous" ref2 sync2
else
    mpi_missing "test-checkpoints (2 ranks)" || bad "no MPI"
fi

# ---- rollback on loss spikes (unshuffled, so that a step's data is a slice of the shard)
RB=(-i train.bin -j val.bin -e L2:C64:H4:T64:V512 -b 4 -t 32 -d 512 -v 10 -m 2 -s 0 -n 5 -x 40 -sh 0 -sl 5 -rb 3 -tk none.bin)
LLMC_TEST_LOSS_SPIKE=27,28,29 "$TRAINER" "${RB[@]}" -o rb > rb.out 2>&1 || { bad "the run with -rb 3 failed"; tail -3 rb.out; }
grep -q "^rollback 1 of 3: 3 steps in a row skipped (last: loss .*back to checkpoint 25, passing over the data of steps 26-29 (step 26 now trains on the data of step 30)$" rb.out \
    && grep -qx "s:29 rollback:25 data_skipped:4" rb/main.log && grep -q '^{"event":"rollback","step":29,"to":25,"data_skipped":4}$' rb/metrics.jsonl \
    && ok "-rb 3: $(grep -m1 '^rollback' rb.out | cut -c1-150)" || { bad "-rb 3: no rollback to checkpoint 25 printed and logged"; grep -i 'rollback\|skipped' rb.out | head -5; }
# the reference: checkpoint 25 resumed on the shard without the tokens of steps 26-29 (16 windows of 32 a
# step; step 26 was applied before the skips, so the rollback undoes it)
shard_cut train.bin cut.bin $((25 * 16 * 32)) $((29 * 16 * 32))
mkdir cutrun && cp rb/*_00000025* cutrun/ && grep -v "^s:\(2[5-9]\|[3-9][0-9]\) " rb/main.log > cutrun/main.log
"$TRAINER" "${RB[@]/train.bin/cut.bin}" -o cutrun -y 1 > cutrun.out 2>&1 || { bad "the resume on the cut shard failed"; tail -3 cutrun.out; }
compare_logs rb/main.log cutrun/main.log trl=0 norm=0 tel=0 > cmp.out \
    && ok "-rb 3: after the rollback = checkpoint 25 resumed without that data ($(tail -1 cmp.out | sed 's/^ *//'))" \
    || { bad "-rb 3: the losses after the rollback differ from the reference"; cat cmp.out; }
# a checkpoint written after the rollback carries the data position
mkdir rb35 && cp rb/*_000000[0-3][05]* rb35/ && grep -v "^s:\(3[5-9]\) " rb/main.log > rb35/main.log
"$TRAINER" "${RB[@]}" -o rb35 -y 1 > rb35.out 2>&1 || bad "resuming checkpoint 35 of the rolled-back run failed"
grep -q "^resumed from checkpoint 35 in" rb35.out && compare_logs rb/main.log rb35/main.log trl=0 norm=0 > cmp.out \
    && ok "-rb 3: checkpoint 35, after the rollback, resumes bit for bit" || { bad "-rb 3: checkpoint 35 does not resume bit for bit"; cat cmp.out; }
# a stop signal during the validation right after the rollback (-v 25: step 25's): checkpoint 25 is
# written again, with the data position and the rollback count (it was taken for the checkpoint
# resumed from, and the resume trained on the spikes and rolled back once more); both trainers
$PY "$ROOT/dev/bench/make_random_shard.py" longval.bin 400000 3 512 > /dev/null
for t in C py; do
    tr=("$TRAINER"); [ $t = py ] && tr=("$PY" "$ROOT/train_gpt2.py")
    LLMC_TEST_LOSS_SPIKE=27,28,29 "${tr[@]}" "${RB[@]}" -v 25 -j longval.bin -m 1000 -o rbstop$t > rbstop$t.out 2>&1 &
    pid=$!
    wait_line "^rollback 1 of 3" rbstop$t.out 120
    kill -TERM $pid; wait $pid; rc=$?
    LLMC_TEST_LOSS_SPIKE=27,28,29 "${tr[@]}" "${RB[@]}" -v 25 -j longval.bin -m 2 -x 30 -o rbstop$t -y 1 > rbstop$t.2.out 2>&1
    [ $rc = 0 ] && grep -q "^validation cut short by a stop signal" rbstop$t.out && grep -q "^resumed from checkpoint 25" rbstop$t.2.out \
        && ! grep -q "^rollback" rbstop$t.2.out && grep -q "^step 30/30" rbstop$t.2.out \
        && ok "$t: a stop in the validation after a rollback: checkpoint 25 rewritten with the data position (no second rollback)" \
        || { bad "$t: a stop in the validation after a rollback (exit $rc)"; grep -h "rollback\|resumed\|cut short\|error" rbstop$t.out rbstop$t.2.out | head -6; }
done
# the PyTorch twin rolls back alike, and resumes the C trainer's checkpoint 35 at its data position
if "$PY" -c "import torch" 2> /dev/null; then
    LLMC_TEST_LOSS_SPIKE=27,28,29 "$PY" "$ROOT/train_gpt2.py" "${RB[@]}" -o rbpy > rbpy.out 2>&1 || { bad "train_gpt2.py -rb 3 failed"; tail -3 rbpy.out; }
    grep -qx "s:29 rollback:25 data_skipped:4" rbpy/main.log && compare_logs rb/main.log rbpy/main.log trl=1e-4 norm=1e-4 tel=1e-4 > cmp.out \
        && ok "-rb 3: train_gpt2.py rolls back alike ($(head -1 cmp.out | sed 's/^ *//'))" || { bad "-rb 3: train_gpt2.py differs"; cat cmp.out; }
    mkdir rb35py && cp rb/*_000000[0-3][05]* rb35py/ && grep -v "^s:\(3[5-9]\) " rb/main.log > rb35py/main.log
    "$PY" "$ROOT/train_gpt2.py" "${RB[@]}" -o rb35py -y 1 > rb35py.out 2>&1 && compare_logs rb/main.log rb35py/main.log trl=1e-4 norm=1e-4 > cmp.out \
        && ok "-rb 3: train_gpt2.py resumes checkpoint 35 at its data position" || { bad "-rb 3: train_gpt2.py's resume of checkpoint 35 differs"; cat cmp.out; tail -2 rb35py.out; }
    # a rollback into a checkpoint of an earlier -x and -c keeps this run's: a later checkpoint resumed
    # with the same flags warns of nothing (train_gpt2.py saved the rolled-back-to run's flags)
    for t in c py; do
        if [ $t = c ]; then tr=("$TRAINER"); else tr=("$PY" "$ROOT/train_gpt2.py"); fi
        "${tr[@]}" "${RB[@]}" -x 25 -c 0 -o rbx$t > rbx$t.1.out 2>&1 \
            && LLMC_TEST_LOSS_SPIKE=27,28,29 "${tr[@]}" "${RB[@]}" -c 0.1 -o rbx$t -y 1 > rbx$t.2.out 2>&1 \
            && rm rbx$t/DONE_00000040 && "${tr[@]}" "${RB[@]}" -c 0.1 -o rbx$t -y 1 > rbx$t.3.out 2>&1 \
            && grep -q "^rollback 1 of 3" rbx$t.2.out && grep -q "^resumed from checkpoint 35" rbx$t.3.out \
            && ! grep "differs\? from the" rbx$t.3.out \
            && ok "$t: a rollback into an earlier -x/-c's checkpoint: the later checkpoints keep this run's flags" \
            || { bad "$t: a rollback into an earlier -x/-c's checkpoint"; tail -n 2 rbx$t.*.out; }
    done
    # with Muon, the rollback also reloads its momentum (kept in the checkpoint's m): both trainers
    # against checkpoint 25 resumed on the cut shard
    mkdir mucut && LLMC_TEST_LOSS_SPIKE=27,28,29 "$TRAINER" "${RB[@]}" -opt muon -o murb > murb.out 2>&1 \
        && cp murb/*_00000025* mucut/ && grep -v "^s:\(2[5-9]\|[3-9][0-9]\) " murb/main.log > mucut/main.log \
        && "$TRAINER" "${RB[@]/train.bin/cut.bin}" -opt muon -o mucut -y 1 > mucut.out 2>&1 \
        && compare_logs murb/main.log mucut/main.log trl=0 norm=0 tel=0 > cmp.out \
        && ok "-rb 3 -opt muon: after the rollback = checkpoint 25 resumed without that data" \
        || { bad "-rb 3 -opt muon: the C trainer's rollback differs from the reference"; tail -3 murb.out mucut.out cmp.out; }
    LLMC_TEST_LOSS_SPIKE=27,28,29 "$PY" "$ROOT/train_gpt2.py" "${RB[@]}" -opt muon -o murbpy > murbpy.out 2>&1 \
        && grep -qx "s:29 rollback:25 data_skipped:4" murbpy/main.log && compare_logs murb/main.log murbpy/main.log trl=1e-4 norm=1e-4 tel=1e-4 > cmp.out \
        && ok "-rb 3 -opt muon: train_gpt2.py rolls back alike ($(head -1 cmp.out | sed 's/^ *//'))" \
        || { bad "-rb 3 -opt muon: train_gpt2.py differs"; tail -3 murbpy.out; cat cmp.out; }
else
    skip_or_fail "test-checkpoints (train_gpt2.py)" "PyTorch for $PY" "apt-get install python3-torch" || bad "no PyTorch"
fi
LLMC_TEST_LOSS_SPIKE=$(seq -s, 26 40) "$TRAINER" "${RB[@]}" -o rb4 > rb4.out 2>&1
rc=$?
line=$(grep -m1 'error:' rb4.out)
[ $rc -eq 1 ] && [ "$(grep -c '^rollback [1-3] of 3' rb4.out)" -eq 3 ] && grep -q "^error: 3 consecutive steps skipped .* after 3 rollbacks (-rb)" <<< "$line" \
    && ok "-rb 3: a fourth rollback is an error: ${line:0:120}" || { bad "-rb 3: no error after 3 rollbacks (exit $rc)"; tail -3 rb4.out; }
expect_error "-rb without checkpoints" "error: -rb 3 rolls back to a checkpoint: give the run -o <dir> and -n <steps>" \
    "$TRAINER" "${RB[@]}" -n 0 -o norb
expect_error "-rb over -sm" "error: -rb 3 is more than -sm 2" "$TRAINER" "${RB[@]}" -sm 2 -o norb
# the spikes before the first checkpoint (-n 50): nothing to roll back to, a one-line error
LLMC_TEST_LOSS_SPIKE=27,28,29 expect_error "-rb before the first checkpoint" \
    "error: 3 consecutive steps skipped .* and -rb found no complete checkpoint that loads in rbnone to roll back to" \
    "$TRAINER" "${RB[@]}" -n 50 -o rbnone

# ---- a fatal error while a checkpoint is written in the background: it is finished first. A token
# out of the vocabulary at step 11's data (unshuffled: tokens 5120-5631), checkpoint 10 in flight
FE=(-j val.bin -e L2:C64:H4:T64:V512 -b 4 -t 32 -d 512 -v 10 -m 2 -s 0 -n 5 -x 15 -sh 0 -tk none.bin)
shard_put train.bin badtoken.bin 5220 600  # past the vocabulary of 512
"$TRAINER" -i badtoken.bin "${FE[@]}" -o fatal > fatal.out 2>&1
rc=$?
line=$(grep -m1 '^error:' fatal.out)
[ $rc -eq 1 ] && grep -q "^error: shard 'badtoken.bin' has token id 600 at position 5220" <<< "$line" && grep -q "^step 10/15" fatal.out \
    && ! grep -q "^step 11/15" fatal.out || { bad "a token out of the vocabulary at step 11: exit $rc, $line"; tail -3 fatal.out; }
grep -q "^finishing checkpoint 10 (being written when the error came) before exiting$" fatal.out && [ -f fatal/DONE_00000010 ] \
    && ok "a fatal error during checkpoint 10's background write: $(grep -m1 '^checkpoint 10 written' fatal.out)" \
    || { bad "a fatal error during checkpoint 10's background write lost it"; ls fatal; tail -3 fatal.out; }
if "$PY" -c "import torch" 2> /dev/null; then  # the PyTorch twin stops on the same line
    pyline=$("$PY" "$ROOT/train_gpt2.py" -i badtoken.bin "${FE[@]}" -n 0 2>&1 | grep -m1 '^error:')
    [ "$pyline" = "$line" ] && ok "train_gpt2.py stops on the same error line" || bad "train_gpt2.py's error differs: $pyline"
fi
"$TRAINER" -i train.bin "${FE[@]}" -o fatalref > fatalref.out 2>&1 || bad "the run without the bad token failed"
"$TRAINER" -i train.bin "${FE[@]}" -o fatal -y 1 > fatalres.out 2>&1 && grep -q "^resumed from checkpoint 10 in" fatalres.out \
    && compare_logs fatalref/main.log fatal/main.log trl=0 norm=0 tel=0 > cmp.out \
    && ok "checkpoint 10, finished at the error, resumes bit for bit: $(tail -1 cmp.out)" \
    || { bad "checkpoint 10, finished at the error, does not resume bit for bit"; tail -3 fatalres.out; cat cmp.out; }
# 2 ranks: the bad token in rank 1's part of step 11 (its windows 164-167): rank 1 finishes its own
# files, finds rank 0's on disk and writes the marker. With rank 0 frozen inside its state file,
# rank 1 waits 10 s for it, says so and ends, and checkpoint 5 stays the newest; there resumed from
# checkpoint 5 next to files of checkpoint 10 left by an earlier attempt (no marker), which must not
# count as rank 0's
if have_mpi; then
    shard_put train.bin badtoken1.bin 5300 600
    "${MPIRUN[@]}" -np 2 "$TRAINER" -i badtoken1.bin "${FE[@]}" -o fatal2 > fatal2.out 2>&1
    rc=$?
    want="[rank 1] checkpoint 10 written to fatal2 (every rank's files on disk, the marker written by this rank)"
    [ $rc -ne 0 ] && grep -q "^\[rank 1\] error: shard 'badtoken1.bin' has token id 600 at position 5300" fatal2.out \
        && grep -qxF "$want" fatal2.out && [ -f fatal2/DONE_00000010 ] && ok "2 ranks, a fatal error on rank 1: $want" \
        || { bad "2 ranks, a fatal error on rank 1 during checkpoint 10: exit $rc, not completed"; grep -v '^step' fatal2.out | tail -4; }
    "${MPIRUN[@]}" -np 2 "$TRAINER" -i train.bin "${FE[@]}" -o fatalref2 > fatalref2.out 2>&1 || bad "the 2-rank run without the bad token failed"
    "${MPIRUN[@]}" -np 2 "$TRAINER" -i train.bin "${FE[@]}" -o fatal2 -y 1 > fatal2res.out 2>&1 && grep -q "^resumed from checkpoint 10 in" fatal2res.out \
        && compare_logs fatalref2/main.log fatal2/main.log trl=0 norm=0 tel=0 > cmp.out \
        && ok "2 ranks: checkpoint 10, completed by rank 1 at its error, resumes bit for bit: $(tail -1 cmp.out)" \
        || { bad "2 ranks: checkpoint 10, completed at the error, does not resume bit for bit"; tail -3 fatal2res.out; cat cmp.out; }
    mkdir fatal3 && cp fatal2/*_00000005* fatal2/model_00000010.bin fatal2/state_00000010_00000.bin fatal3/
    # -v 0: no collective between checkpoint 10's start and rank 1's bad token, so rank 1 reaches
    # it however soon rank 0's writer freezes the process (with step 10's validation, a writer
    # faster than rank 0's main thread froze rank 0 before that all-reduce: rank 1 waited in it)
    LLMC_FAULT=state:10:stop:0 timeout 120 "${MPIRUN[@]}" -np 2 "$TRAINER" -i badtoken1.bin "${FE[@]}" -v 0 -o fatal3 -y 1 > fatal3.out 2>&1
    rc=$?
    want="[rank 1] warning: checkpoint 10 not completed: 'fatal3/state_00000010_00000.bin' was not on disk after 10 s"
    [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -qF "$want" fatal3.out && [ ! -e fatal3/DONE_00000010 ] && [ -f fatal3/DONE_00000005 ] \
        && ok "2 ranks, rank 0 frozen in checkpoint 10, rank 1's fatal error: ${want:0:120}" \
        || { bad "2 ranks, rank 0 frozen in checkpoint 10: exit $rc, expected: $want"; grep -v '^step' fatal3.out | tail -4; }
    # -o on each node's own disk (rank 1 given a tmpfs of its own over the folder): the run stops at
    # start-up with a line naming rank 1, before a checkpoint only one node would hold a part of
    mkdir notshared
    if [ "$(id -u)" = 0 ] && command -v unshare > /dev/null; then
        expect_error "-o not shared by the ranks" "^\[rank 0\] error: -o notshared: rank 1 does not see the files rank 0 writes there" \
            "${MPIRUN[@]}" -np 1 "$TRAINER" -i train.bin "${FE[@]}" -o notshared : -np 1 unshare -m sh -c \
            'mount -t tmpfs none notshared && exec "$0" "$@"' "$TRAINER" -i train.bin "${FE[@]}" -o notshared
        [ "$(ls notshared)" = llmc_run.lock ] && ok "-o not shared: nothing left in it but rank 0's lock" \
            || bad "-o not shared: $(ls notshared | tr '\n' ' ') left"
        # the check's file of a start-up killed before it removed it: a resume clears it
        touch notshared/llmc_shared_check_00000000000000ab
        "$TRAINER" -i train.bin "${FE[@]}" -x 1 -o notshared -y 1 > stale.out 2>&1 && [ ! -e notshared/llmc_shared_check_00000000000000ab ] \
            && ok "a stale check file in -o: removed by -y 1" || { bad "a stale check file in -o stayed"; tail -2 stale.out; }
    else
        skip_or_fail "test-checkpoints (-o not shared)" "root and unshare, to mount a folder for one rank" "sudo make test-checkpoints" \
            || bad "no root"
    fi
else
    mpi_missing "test-checkpoints (a fatal error on 2 ranks)" || bad "no MPI"
fi

# ---- a full disk: a tmpfs of the test's own, unmounted on every exit path
if [ "$(id -u)" != 0 ] || ! { mkdir -p disk && mount -t tmpfs -o size=16m tmpfs disk; }; then
    skip_or_fail "test-checkpoints (a full disk)" "root, to mount a small tmpfs" "sudo make test-checkpoints" || bad "no tmpfs"
    finish
    exit
fi
trap 'umount -l "$TMP/disk" 2>/dev/null; pkill -9 -f "$TMP" 2>/dev/null || true; rm -rf "$TMP"' EXIT

# resume_from <what> <dir> <step>: a copy of <dir> keeping checkpoints up to <step> resumes from it,
# and the losses of the whole run equal the reference's bit for bit
resume_from() {
    local copy="${2//\//_}.resume"  # on the test's disk, not the tmpfs
    mkdir "$copy"
    cp "$2/main.log" "$copy/"
    for f in "$2"/model_* "$2"/state_* "$2"/DONE_*; do
        local s
        s=$(grep -o '[0-9]\{8\}' <<< "${f##*/}")
        [ "$((10#$s))" -le "$3" ] && cp "$f" "$copy/"
    done
    "$TRAINER" "${ARGS[@]}" -o "$copy" -y 1 > "$copy.out" 2>&1 || { bad "$1: the resume failed"; tail -3 "$copy.out"; return; }
    grep -q "^resumed from checkpoint $3 in" "$copy.out" || bad "$1: did not resume from checkpoint $3"
    compare_logs ref/main.log "$copy/main.log" trl=0 norm=0 tel=0 > cmp.out && ok "$1: checkpoint $3 resumes: $(tail -1 cmp.out)" \
        || { bad "$1: the resumed losses differ"; cat cmp.out; }
}

# the disk fills up while checkpoint 10 is written, and is freed before step 13
LLMC_FAULT=state:10:stop:0,step:13:stop:0 "$TRAINER" "${ARGS[@]}" -o disk/full > full.out 2>&1 &
pid=$!
if wait_frozen $pid; then
    # all but 64 KiB (room for the logs): the rest of the state file does not fit
    fallocate -l $(( $(df --output=avail -B1 disk | tail -1) - 65536 )) disk/filler || bad "cannot fill the tmpfs"
    kill -CONT $pid
    wait_frozen $pid || bad "the run did not reach step 13"
    rm -f disk/filler
    kill -CONT $pid
else
    bad "the run never froze inside checkpoint 10"
fi
wait $pid || bad "the run with a full disk during checkpoint 10 failed (exit $?)"
want="warning: checkpoint 10 not written: -o: writing 'disk/full/state_00000010_00000.bin' failed: No space left on device (the disk is full); checkpoint 5 is the newest complete one; training goes on"
[ "$(grep -c '^warning: checkpoint' full.out)" -eq 1 ] && grep -qF "$want" full.out && ok "a full disk: ${want:0:150}" \
    || { bad "a full disk: expected one warning: $want"; grep -i 'warning\|error' full.out | head -3; }
[ -z "$(ls disk/full | grep '_00000010')" ] && ok "a full disk: nothing of checkpoint 10 is left" || bad "files of checkpoint 10 are left: $(ls disk/full | grep 10)"
for s in 5 15 20 25 30; do [ -f disk/full/DONE_0000$(printf %04d $s) ] || bad "a full disk: checkpoint $s is missing"; done
compare_logs ref/main.log disk/full/main.log trl=0 norm=0 tel=0 > cmp.out && ok "a full disk: training went on ($(tail -1 cmp.out))" \
    || { bad "a full disk: the losses differ from an undisturbed run"; cat cmp.out; }
resume_from "a full disk" disk/full 5

# a disk that stays full (4 MiB hold two of these checkpoints): 15, 20, 25 fail, and the run stops
umount disk && mount -t tmpfs -o size=4m tmpfs disk || bad "cannot remount the tmpfs"
"$TRAINER" "${ARGS[@]}" -o disk/stays --ckpt-async 0 > stays.out 2>&1
rc=$?
line=$(grep -m1 '^error:' stays.out)
[ $rc -eq 1 ] && [ "$(grep -c '^warning: checkpoint .* not written' stays.out)" -eq 3 ] && grep -q "^error: 3 checkpoints in a row could not be written to disk/stays .*checkpoint 10 is the newest complete one" <<< "$line" \
    && ok "a disk that stays full: $line" || { bad "a disk that stays full: exit $rc, $line"; tail -4 stays.out; }
grep -q "^step 25/30" stays.out && ! grep -q "^step 26/30" stays.out || bad "a disk that stays full: the run did not stop at step 25"
[ "$(ls disk/stays | grep -c '^\(model\|state\|DONE\)_')" -eq 6 ] || bad "a disk that stays full: expected the 6 files of checkpoints 5 and 10: $(ls disk/stays)"
resume_from "a disk that stays full" disk/stays 10
# 2 ranks on a disk full from the start: the check that every rank sees -o cannot write its file and
# steps aside; the run trains, and its checkpoints fail and stop it as in one process
if have_mpi; then
    umount disk && mount -t tmpfs -o size=1m tmpfs disk || bad "cannot remount the tmpfs"
    dd if=/dev/zero of=disk/fill bs=64k > /dev/null 2>&1
    mkdir disk/full2
    "${MPIRUN[@]}" -np 2 "$TRAINER" "${ARGS[@]}" -x 10 -n 1 -o disk/full2 > full2.out 2>&1
    [ "$(grep -c '^\[rank [01]\] warning: checkpoint [123] not written' full2.out)" = 6 ] \
        && grep -q "^\[rank 0\] error: 3 checkpoints in a row could not be written to disk/full2" full2.out \
        && ok "2 ranks on a full disk: trained, 3 checkpoints failed on each rank, then the error" \
        || { bad "2 ranks on a full disk"; grep -m3 'error\|warning' full2.out; }
fi
# the PyTorch twin on the same disks, by the same rules and in the same words: training goes on past
# a failed checkpoint, 3 in a row stop it, a failed last one ends it non-zero, the logs that cannot
# be written are warned about, and on 2 ranks each rank warns of its own file
if "$PY" -c "import torch" 2> /dev/null; then
    umount disk && mount -t tmpfs -o size=4m tmpfs disk || bad "cannot remount the tmpfs"
    "$PY" "$ROOT/train_gpt2.py" "${ARGS[@]}" -o disk/pystays > pystays.out 2>&1
    rc=$?
    line=$(grep -m1 '^error:' pystays.out)
    [ $rc -eq 1 ] && [ "$(grep -c '^warning: checkpoint .* not written' pystays.out)" -eq 3 ] \
        && grep -q "^error: 3 checkpoints in a row could not be written to disk/pystays .*checkpoint 10 is the newest complete one" <<< "$line" \
        && grep -q "^step 25/30" pystays.out && ! grep -q "^step 26/30" pystays.out && ! grep -q Traceback pystays.out \
        && ok "train_gpt2.py, a disk that stays full: $line" || { bad "train_gpt2.py, a disk that stays full: exit $rc"; tail -4 pystays.out; }
    [ "$(ls disk/pystays | grep -c '^\(model\|state\|DONE\)_')" -eq 6 ] && [ -z "$(ls disk/pystays | grep tmp)" ] \
        || bad "train_gpt2.py, a disk that stays full: expected the 6 files of checkpoints 5 and 10: $(ls disk/pystays)"
    grep -v '^s:\(2[5-9]\|30\) ' ref/main.log > ref25.log  # the 25 steps it trained
    compare_logs ref25.log disk/pystays/main.log trl=1e-4 norm=1e-4 > cmp.out \
        && ok "train_gpt2.py, a disk that stays full: trained on as $TRAINER does ($(head -1 cmp.out | sed 's/^ *//'))" \
        || { bad "train_gpt2.py, a disk that stays full: the losses differ from $TRAINER's"; cat cmp.out; }
    "$TRAINER" "${ARGS[@]}" -o disk/pystays -y 1 -x 12 -n 0 > pyresume.out 2>&1 && grep -q "^resumed from checkpoint 10 in" pyresume.out \
        && ok "train_gpt2.py, a disk that stays full: $TRAINER resumes its checkpoint 10" || { bad "train_gpt2.py's checkpoint 10 does not resume"; tail -2 pyresume.out; }
    # a full disk from the start: the logs and the run's last checkpoint (-x 10 -n 10) fail
    umount disk && mount -t tmpfs -o size=1m tmpfs disk || bad "cannot remount the tmpfs"
    dd if=/dev/zero of=disk/fill bs=64k > /dev/null 2>&1
    mkdir disk/pylast disk/py2 disk/clast
    "$PY" "$ROOT/train_gpt2.py" "${ARGS[@]}" -x 10 -n 10 -o disk/pylast > pylast.out 2>&1
    rc=$?
    "$TRAINER" "${ARGS[@]}" -x 10 -n 10 -o disk/clast --ckpt-async 0 > clast.out 2>&1
    crc=$?
    # both: the warning says the run ends (not "training goes on"), then the error
    for t in py c; do
        want="warning: checkpoint 10, this run's last, not written: -o: writing 'disk/${t}last/model_00000010.bin' failed: No space left on device (the disk is full); no complete checkpoint exists yet"
        grep -qxF "$want" ${t}last.out && ! grep -q "^warning: checkpoint.*training goes on" ${t}last.out && ok "${t}: ${want:0:100}" \
            || { bad "$t: the failed last checkpoint's warning"; grep "warning: checkpoint" ${t}last.out; }
    done
    want="error: checkpoint 10, this run's last, could not be written: -o: writing 'disk/pylast/model_00000010.bin' failed: No space left on device (the disk is full); no complete checkpoint exists"
    [ $rc -eq 1 ] && [ $crc -eq 1 ] && grep -qF "$want" pylast.out && grep -qF "${want//pylast/clast}" clast.out \
        && grep -q "^warning: writing 'disk/pylast/main.log' failed at step 0 (No space left on device)" pylast.out \
        && ! grep -q Traceback pylast.out && ok "train_gpt2.py and $TRAINER, a failed last checkpoint: ${want:0:120}" \
        || { bad "a failed last checkpoint: exit $rc (train_gpt2.py), $crc ($TRAINER)"; tail -n 3 pylast.out clast.out; }
    port=$(free_port)
    for r in 0 1; do
        RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout -k 10 120 \
            "$PY" "$ROOT/train_gpt2.py" "${ARGS[@]}" -b 2 -x 10 -n 1 -o disk/py2 > py2.$r.out 2>&1 &
        pids[r]=$!
    done
    wait ${pids[0]}; rc0=$?; wait ${pids[1]}; rc1=$?
    [ $rc0 = 1 ] && [ $rc1 = 1 ] && grep -q "^\[rank 0\] warning: checkpoint 3 not written: -o: writing 'disk/py2/model_00000003.bin'" py2.0.out \
        && grep -q "^\[rank 1\] warning: checkpoint 3 not written: -o: writing 'disk/py2/state_00000003_00001.bin'" py2.1.out \
        && grep -q "^\[rank 0\] error: 3 checkpoints in a row could not be written to disk/py2" py2.0.out \
        && ! grep -q Traceback py2.0.out py2.1.out && ok "train_gpt2.py, 2 ranks on a full disk: each rank warned of its file, then the error" \
        || { bad "train_gpt2.py, 2 ranks on a full disk"; tail -n 2 py2.0.out py2.1.out; }
fi
finish
