#!/usr/bin/env bash
# The CPU trainer's threads under ThreadSanitizer (test_sanitize.sh runs it with a train_gpt2 built
# with -fsanitize=thread, MPI, and neither OpenMP nor OpenBLAS, whose threads TSan cannot see
# synchronize): the background checkpoint writer beside the training loop, a stop signal that the
# kernel hands to another thread than the main one (MPI's), and a fatal error while a checkpoint is
# written, in one process and on 2 ranks. Each run must end as it does without the sanitizer;
# TSAN_OPTIONS (the caller's) sends any race report to a file, which fails test_sanitize.
#   bash dev/test/test_threads.sh TRAINER      (from the repo root)
source "$(dirname "$0")/lib.sh" test_threads "$1"
require_mpi test-sanitize
"$PY" "$ROOT/dev/bench/make_random_shard.py" train.bin 40000 1 512 > /dev/null
"$PY" "$ROOT/dev/bench/make_random_shard.py" val.bin 8000 2 512 > /dev/null
# unshuffled, so that step 7's data (tokens 3072-3583 over both ranks) holds the bad token below
ARGS=(-j val.bin -e L2:C64:H4:T64:V512 -b 4 -t 32 -d 512 -v 0 -s 0 -n 2 -x 12 -sh 0 -tk none.bin)

# ---- 2 ranks: SIGTERM to a thread of rank 1 that is not its main thread, after step 4; every rank
# stops after its step with a checkpoint, exit 0; then a resume runs to the end
"${MPIRUN[@]}" -np 2 "$TRAINER" -i train.bin "${ARGS[@]}" -x 10000 -o sig > sig.out 2>&1 &
job=$!
wait_line "^step 4/" sig.out 60 $job
rank1=$(rank_pid 1 "$TRAINER -i train.bin")
if [ -n "$rank1" ] && tgkill_other "$rank1" 15; then
    ( sleep 120; kill -9 $job 2> /dev/null ) & watchdog=$!
    wait $job; rc=$?
    kill $watchdog 2> /dev/null
    line=$(grep -m1 '^stopped by a signal' sig.out)
    [ $rc -eq 0 ] && [ -n "$line" ] && ok "SIGTERM to a thread of rank 1 that is not its main one: ${line:0:100}" \
        || { bad "SIGTERM to a non-main thread of rank 1: exit $rc"; tail -5 sig.out; }
    "${MPIRUN[@]}" -np 2 "$TRAINER" -i train.bin "${ARGS[@]}" -o sig -y 1 > sigres.out 2>&1 && grep -q '^resumed from checkpoint' sigres.out \
        && [ -f sig/DONE_00000012 ] && ok "resumed to step 12: $(grep -m1 '^resumed' sigres.out)" \
        || { bad "the resume after the signal failed"; tail -3 sigres.out; }
else
    bad "rank 1 of the job (pid '${rank1}') not found, or no thread of it took the signal"; kill -9 $job 2> /dev/null; wait $job
    tail -3 sig.out
fi

# ---- a fatal error (a token past the vocabulary in step 7's data) while checkpoint 6 is written in
# the background: one process, then 2 ranks (the token in rank 1's part); the checkpoint completes
shard_put train.bin badtoken.bin 3300 600
"$TRAINER" -i badtoken.bin "${ARGS[@]}" -o fatal1 > fatal1.out 2>&1
[ $? -eq 1 ] && grep -q "^error: shard 'badtoken.bin' has token id 600" fatal1.out && [ -f fatal1/DONE_00000006 ] \
    && ok "one process, a fatal error with checkpoint 6 in flight: $(grep -m1 '^checkpoint 6 written' fatal1.out)" \
    || { bad "one process, a fatal error with checkpoint 6 in flight"; tail -3 fatal1.out; }
"${MPIRUN[@]}" -np 2 "$TRAINER" -i badtoken.bin "${ARGS[@]}" -o fatal2 > fatal2.out 2>&1
[ $? -ne 0 ] && grep -q "^\[rank 1\] error: shard 'badtoken.bin' has token id 600" fatal2.out && [ -f fatal2/DONE_00000006 ] \
    && ok "2 ranks, a fatal error on rank 1 with checkpoint 6 in flight: $(grep -m1 'checkpoint 6 written' fatal2.out)" \
    || { bad "2 ranks, a fatal error on rank 1 with checkpoint 6 in flight"; grep -v '^step' fatal2.out | tail -4; }
finish
