#!/usr/bin/env bash
# A frozen rank is an error, not a hang (CPU ranks under real OpenMPI). One rank of a job freezes
# itself with SIGSTOP (its sockets stay open, so nothing but a deadline can tell): at a random step
# of 2 ranks, at a random step of 4 ranks (a random victim), and inside a checkpoint write
# (LLMC_FAULT=step:<step>:stop:<rank>, state:<step>:stop:<rank>). Each time:
#  - the job ends non-zero within -pt + 15 s of the freeze, no process left behind;
#  - every live rank prints one error line naming the step, the collective and the frozen rank;
#  - every live rank writes <out>/flight_rank<R>.txt whose newest collective is not completed (the
#    frozen rank, which the launcher continues and kills, never one that blames the others);
#  - -y 1 resumes from the newest complete checkpoint before the freeze, and the losses equal an
#    uninterrupted run's (bitwise on the same rank count).
# And a whole job paused for longer than -pt (every rank stopped, then continued: Ctrl-Z, a paused
# VM) is no failure: it goes on to the end with the uninterrupted run's losses.
source "$(dirname "$0")/lib.sh" test_hang "${1:-./train_gpt2}"
require_mpi test-hang
PT=5
$PY "$ROOT/dev/bench/make_random_shard.py" train.bin 60000 1 512 > /dev/null
$PY "$ROOT/dev/bench/make_random_shard.py" val.bin 20000 2 512 > /dev/null
ARGS=(-i train.bin -j val.bin -e L2:C64:H4:T64:V512 -b 4 -t 32 -d 1024 -v 10 -m 2 -s 0 -n 5 -x 40 -tk none.bin -pt $PT)
echo "random steps and victims from seed $((RANDOM = ${HANG_SEED:-$$})) (HANG_SEED=<n> repeats a run)"

"${MPIRUN[@]}" -np 2 "$TRAINER" "${ARGS[@]}" -o "$TMP/ref" > ref.out 2>&1 || { bad "the reference run failed"; tail -3 ref.out; }

# freeze NP VICTIM WHERE DIR VAR=VALUE...: a job of NP ranks into DIR whose environment (LLMC_FAULT
# ...:stop:VICTIM) makes rank VICTIM freeze itself WHERE (words for the messages). Checks the end of the job.
freeze() {
    local np=$1 victim=$2 where=$3 dir=$4 t0 t1 job pid r kv xs=()
    shift 4
    for kv in "$@"; do xs+=(-x "$kv"); done
    # (the timeout keeps the test from hanging if the trainer does)
    timeout -s KILL $((PT + 60)) "${MPIRUN[@]}" -np "$np" "${xs[@]}" "$TRAINER" "${ARGS[@]}" -o "$TMP/$dir" > "$dir.out" 2>&1 &
    job=$!
    t0=
    for _ in $(seq 600); do
        pid=$(rank_pid "$victim" "$TRAINER .*-o $TMP/$dir\$")
        [ -n "$pid" ] && frozen "$pid" && { t0=$SECONDS; break; }
        sleep 0.1
    done
    [ -n "$t0" ] || { bad "$dir: rank $victim never froze itself"; kill -9 $job; return; }
    wait $job
    local rc=$?
    t1=$SECONDS
    kill -9 "$pid" 2>/dev/null
    local what="$np ranks, rank $victim frozen $where"
    [ $rc -ne 0 ] || bad "$what: the job exited 0"
    [ $((t1 - t0)) -le $((PT + 15)) ] && ok "$what: the job ended (exit $rc) $((t1 - t0)) s after the freeze (-pt $PT)" \
        || bad "$what: the job took $((t1 - t0)) s to end after the freeze (-pt $PT)"
    sleep 0.5
    [ -z "$(pgrep -f "$TMP/$dir")" ] || bad "$what: processes left behind: $(pgrep -af "$TMP/$dir" | head -3)"
    local lines
    lines=$(grep -c "error: step [0-9]* (.*): MPI_[A-Za-z()0-9]* of [0-9]* bytes .*no answer from rank(s) $victim (" "$dir.out")
    [ "$lines" -eq $((np - 1)) ] && ok "$what: each live rank says so: $(grep -m1 'no answer from' "$dir.out" | cut -c1-170)" \
        || { bad "$what: $lines error lines naming rank $victim, want $((np - 1)) (one per live rank)"; grep error "$dir.out" | head -5; }
    for r in $(seq 0 $((np - 1))); do
        if [ "$r" = "$victim" ]; then  # killed by the launcher: at most a record of the signal
            ! grep -q "did not complete within" "$dir/flight_rank$r.txt" 2>/dev/null \
                || { bad "$what: the frozen rank's flight record blames the others for its own pause"; head -2 "$dir/flight_rank$r.txt"; }
        elif ! tail -n 1 "$dir/flight_rank$r.txt" 2>/dev/null | grep -q '<- not completed$'; then
            bad "$what: rank $r's flight record is missing or its newest collective is not the open one"
            tail -n 2 "$dir/flight_rank$r.txt" 2>/dev/null
        fi
    done
}

# resume DIR NP TOL: -y 1 on NP ranks continues from the newest complete checkpoint to the end;
# its losses equal the reference's (TOL relative; 0 = bitwise)
resume() {
    local dir=$1 np=$2 tol=$3 want
    want=$(ls "$dir" | sed -n 's/^DONE_0*\([0-9][0-9]*\)$/\1/p' | sort -n | tail -1)
    "${MPIRUN[@]}" -np "$np" "$TRAINER" "${ARGS[@]}" -o "$TMP/$dir" -y 1 > "$dir.resume.out" 2>&1 \
        || { bad "$dir: the resume failed"; tail -3 "$dir.resume.out"; return; }
    # a freeze before the first checkpoint (step < -n) leaves none: -y 1 then starts from scratch
    local expect="^resumed from checkpoint $want in" what="checkpoint $want"
    [ -n "$want" ] || { expect="^no complete checkpoint in .*: starting at step 0 from -e "; what="step 0 (no checkpoint was complete)"; }
    grep -q "$expect" "$dir.resume.out" || { bad "$dir: did not resume from $what"; grep -m2 "checkpoint" "$dir.resume.out"; }
    compare_logs ref/main.log "$dir/main.log" trl=$tol norm=$tol > cmp.out \
        && ok "$dir: resumed on $np ranks from $what: $(tail -1 cmp.out)" || { bad "$dir: resumed losses differ"; cat cmp.out; }
}

# pause_all AT DIR: 2 ranks; at the step line AT rank 0 stops, a second later (rank 1 now waits
# for it in a collective) rank 1 too; -pt + 3 s later rank 1 goes on, half a second after it rank 0
pause_all() {
    local at=$1 dir=$2 p0 p1 job
    "${MPIRUN[@]}" -np 2 "$TRAINER" "${ARGS[@]}" -o "$TMP/$dir" > "$dir.out" 2>&1 &
    job=$!
    wait_line "^step $at/" "$dir.out" 60
    p0=$(rank_pid 0 "$TRAINER .*-o $TMP/$dir\$") p1=$(rank_pid 1 "$TRAINER .*-o $TMP/$dir\$")
    kill -STOP "$p0"
    sleep 1
    kill -STOP "$p1"
    sleep $((PT + 3))
    kill -CONT "$p1"
    sleep 0.5
    kill -CONT "$p0"
    wait $job && ok "a whole job paused $((PT + 3)) s at step $at (-pt $PT) goes on to the end" \
        || { bad "a whole job paused $((PT + 3)) s at step $at failed"; grep -m2 error "$dir.out"; return; }
    compare_logs ref/main.log "$dir/main.log" trl=0 norm=0 > cmp.out \
        && ok "a whole job paused: $(tail -1 cmp.out)" || { bad "a whole job paused: losses differ"; cat cmp.out; }
}

pause_all $((3 + RANDOM % 30)) paused
# the random-step freezes come from the victim itself (LLMC_FAULT step:<s>:stop:<rank>: SIGSTOP as step
# s begins): a SIGSTOP sent on seeing the step line could land at the end of a fast job instead
at=$((3 + RANDOM % 30))
freeze 2 1 "at step $at" two LLMC_FAULT=step:$at:stop:1
resume two 2 0
victim=$((RANDOM % 4)) at=$((3 + RANDOM % 30))
freeze 4 $victim "at step $at" four LLMC_FAULT=step:$at:stop:$victim
resume four 2 1e-5
victim=$((RANDOM % 2))
freeze 2 $victim "inside a checkpoint write" ckpt LLMC_FAULT=state:20:stop:$victim
resume ckpt 2 0
finish
