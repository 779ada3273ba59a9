#!/usr/bin/env bash
# A run is never lost (issue: robust runs), on CPU ranks:
#  - SIGKILL at several points, and in the middle of a checkpoint write (LLMC_FAULT), then -y 1:
#    the per-step losses and the text samples equal the uninterrupted run bit for bit;
#  - a corrupt newest checkpoint (model or state file) is skipped with a warning naming the file,
#    and its marker retired (DONE_N.skipped): a rewrite of its step killed midway is not resumed;
#  - SIGTERM / SIGINT on any rank: every rank finishes the step, a checkpoint is written, exit 0;
#    during a validation or HellaSwag pass, the pass is voided on every rank instead (not the final one,
#    but -x 0's, with nothing logged or written);
#    during a sample, the sample ends at its next token and the resume samples as the uninterrupted run;
#    a second signal exits at once; the same for SIGPIPE (stdout's reader gone: `| tee` killed, or
#    ended by the same Ctrl-C), SIGHUP (which stays ignored under nohup), SIGUSR1 and SIGUSR2;
#  - under torchrun (its own, or torch 1.13's through torchrun_compat.py): Ctrl-C and a closed
#    terminal (the signal to the whole process group, so the rank gets it from the terminal and from
#    torchrun), SIGTERM to every process (either order) and to torchrun alone each stop the run once with a
#    checkpoint; a second Ctrl-C exits at once; train_gpt2.py takes a process group of its own there;
#    a checkpoint and a step that need over 2/3 of torchrun's grace before SIGKILL are warned of once
#    (--shutdown-timeout in the parent's command line, else TORCH_ELASTIC_SHUTDOWN_TIMEOUT, else 30 s);
#    --max_restarts=1 with a worker killed after checkpoint 2: the restart resumes it without -y 1
#    (train_gpt2, and train_gpt2.py on 2 ranks), but not another run's checkpoints that the first
#    attempt refused; a fatal error is the root cause of torchrun's failure summary (both trainers);
#  - a second run into the -o of a running one (train_gpt2 or train_gpt2.py) is refused, naming
#    it, and touches none of its files; a filesystem without locks gets one warning;
#  - -nk keeps the newest K complete checkpoints, and -nm M also those at multiples of M; a damaged
#    newer checkpoint that -y 1 skipped does not count (train_gpt2 and train_gpt2.py);
#  - -y 1 where every checkpoint is damaged stops with one line and touches nothing (both);
#  - numeric guards: NaN steps are skipped and the run stops after -sm of them; an outlier loss is
#    skipped without touching parameters or optimizer state;
#  - resuming with another model size is an error naming the file;
#  - scripts/run_gpt2_124M.sh's relaunches (a stand-in trainer; Ctrl-C with mpirun exiting 1 is a stop): a crash after a new checkpoint is
#    relaunched, two crashes in a row without one end the script with a line, RETRIES bounds them;
#    the recipes refuse bad NGPU/NPROC/B/NP/PER_NODE and a TRAINER that is not there in one line.
#   bash dev/test/test_resume.sh [TRAINER]   (RESUME_LEAN=1: each of the C trainer's paths once, as
#                                             test_sanitize.sh runs it on its builds; below)
source "$(dirname "$0")/lib.sh" test_resume "${1:-./train_gpt2}"
# the references and the signal tests run 2 ranks as well
require_mpi test-resume
$PY "$ROOT/dev/bench/make_random_shard.py" train.bin 60000 1 512
$PY "$ROOT/dev/bench/make_random_shard.py" val.bin 4000 2 512
ARGS=(-i train.bin -j val.bin -e L2:C64:H4:T64:V512 -b 2 -t 32 -d 512 -x 40 -v 8 -m 2 -s 8 -g 8 -l 1e-3 -u 2 -q 0.1 -c 0.1 -tk none.bin)

# final per-step train losses of a run dir (the last logged value of each step wins), and its samples
final_losses() {
    $PY - "$1/main.log" <<'EOF'
import sys
last = {}
for line in open(sys.argv[1]):
    f = dict(kv.split(":", 1) for kv in line.split())
    if "trl" in f: last[int(f["s"])] = f["trl"]
for s in sorted(last): print(s, last[s])
EOF
}
samples_after() {  # the sample blocks printed by a run's stdout for steps > $2, keyed by step
    awk -v from="$2" '/^step [0-9]+\//{split($2,a,"/"); s=a[1]} /^generating:/{g=1; txt=""; next} g&&/^---$/{if(txt!=""){if(s>from)print s": "txt; g=0} next} g{txt=txt $0}' "$1"
}
same() {  # same <name> <file a> <file b>
    if cmp -s "$2" "$3"; then echo "ok   $1 ($(wc -l < "$2") lines identical)"; else bad "$1"; diff "$2" "$3" | head -6; fi
}

# ---- references: uninterrupted runs on 1 and 2 ranks
"$TRAINER" "${ARGS[@]}" -o ref1 -n 4 > ref1.out 2>&1 || { bad "reference run failed"; tail ref1.out; }
final_losses ref1 > ref1.loss
"${MPIRUN[@]}" -np 2 "$TRAINER" "${ARGS[@]}" -o ref2 -n 4 > ref2.out 2>&1 || { bad "reference np=2 run failed"; tail ref2.out; }
final_losses ref2 > ref2.loss
[ "$(wc -l < ref1.loss)" -eq 40 ] || bad "reference has $(wc -l < ref1.loss) steps"

# ---- SIGKILL after step K is printed, then resume
for K in 5 27; do
    d=kill$K
    "$TRAINER" "${ARGS[@]}" -o $d -n 4 > $d.out1 2>&1 &
    pid=$!
    wait_line "^step $K/" $d.out1 60
    kill -9 $pid; wait $pid 2>/dev/null
    grep -q "^step 40/40" $d.out1 && bad "the run ended before SIGKILL at step $K arrived (machine too fast for this test?)"
    # a kill in the middle of a log write: the record cut short (the resume drops it; appended to,
    # it read as one record of the cut step with the next one's values)
    [ $K = 27 ] && printf 's:%d trl:3.' $K >> $d/main.log && printf '{"step": %d, "tr' $K >> $d/metrics.jsonl
    "$TRAINER" "${ARGS[@]}" -o $d -n 4 -y 1 > $d.out2 2>&1 || bad "resume after SIGKILL at step $K failed"
    [ $K = 27 ] && { $PY - $d <<'EOF' && [ "$(grep -c "was cut" $d.out2)" = 2 ] && ok "a log record cut by the kill: dropped on resume (both logs, a warning each)" || bad "the cut log records after the resume"
import json, re, sys
d = sys.argv[1]
assert all(len(re.findall(r"(?<![a-z])s:", line)) == 1 for line in open(f"{d}/main.log")), "a main.log line with two records"
[json.loads(line) for line in open(f"{d}/metrics.jsonl")]
EOF
    }
    final_losses $d > $d.loss
    same "SIGKILL after step $K, resume: losses bitwise equal" $d.loss ref1.loss
    from=$(grep -o "resumed from checkpoint [0-9]*" $d.out2 | grep -o "[0-9]*$")
    samples_after ref1.out "${from:-0}" > ref.samples; samples_after $d.out2 "${from:-0}" > $d.samples
    same "SIGKILL after step $K, resume: samples equal" $d.samples ref.samples
done

# ---- SIGKILL inside a checkpoint write (fault injection), on 1 and 2 ranks
LLMC_FAULT=state:12 "$TRAINER" "${ARGS[@]}" -o faultA -n 4 > faultA.out1 2>&1
[ $? -eq 137 ] || bad "LLMC_FAULT=state:12 did not kill the run"
ls faultA | grep -q "DONE_00000012" && bad "torn checkpoint 12 has a DONE marker"
ls faultA | grep -q "\.tmp\." || bad "no temporary file left by the killed write (fault not mid-write?)"
"$TRAINER" "${ARGS[@]}" -o faultA -n 4 -y 1 > faultA.out2 2>&1 || bad "resume after a torn checkpoint failed"
grep -q "resumed from checkpoint 8" faultA.out2 || bad "did not fall back to checkpoint 8"
ls faultA | grep -q "\.tmp\." && bad "temporary files were not cleaned up on resume"
final_losses faultA > faultA.loss
same "killed while writing checkpoint 12: losses bitwise equal" faultA.loss ref1.loss

"${MPIRUN[@]}" -np 2 -x LLMC_FAULT=done:16 "$TRAINER" "${ARGS[@]}" -o faultB -n 4 > faultB.out1 2>&1
ls faultB | grep -q "DONE_00000016" && bad "killed before the marker, but DONE_00000016 exists"
"${MPIRUN[@]}" -np 2 "$TRAINER" "${ARGS[@]}" -o faultB -n 4 -y 1 > faultB.out2 2>&1 || bad "np=2 resume after a torn checkpoint failed"
grep -q "resumed from checkpoint 12" faultB.out2 || bad "np=2 did not fall back to checkpoint 12"
final_losses faultB > faultB.loss
same "np=2, killed before DONE_16: losses bitwise equal" faultB.loss ref2.loss

# ---- a corrupt newest checkpoint is skipped with a warning naming the file
flip() { $PY -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[len(b)//2]^=0x40; open(p,'wb').write(b)" "$1"; }  # a bit in the middle
# trainer_of c|py: the command of ./train_gpt2 or of its PyTorch twin, in the array run
trainer_of() { if [ "$1" = py ]; then run=($PY "$ROOT/train_gpt2.py"); else run=("$TRAINER"); fi; }
# lean: RESUME_LEAN=1, which test_sanitize.sh sets to run this script again on the sanitizer builds
# of the C trainer: each of its paths once. Left out there: the PyTorch twin's runs, the torchrun
# stops that differ from the Ctrl-C ones only in torchrun's part, the grace checks' real torchrun
# (a stand-in's command line takes the same path), and the recipe scripts' relaunches (a stand-in
# trainer: no C). twin: whether the twin's checks run; TRAINERS: c, and py where they run
lean() { [ "${RESUME_LEAN:-0}" = 1 ]; }
twin() { ! lean; }
TRAINERS="c$(twin && echo ' py')"
for f in state_00000036_00000.bin model_00000036.bin; do
    d=corrupt_${f%%_*}
    cp -r ref1 $d
    rm $d/DONE_00000040
    flip $d/$f
    "$TRAINER" "${ARGS[@]}" -o $d -n 4 -y 1 > $d.out 2>&1 || bad "resume with a corrupt $f failed"
    grep -q "skipping checkpoint 36: .*$f.* fails its checksum" $d.out || { bad "no warning naming the corrupt $f"; grep -i "skip\|error" $d.out | head -3; }
    grep -q "resumed from checkpoint 32" $d.out || bad "did not fall back to checkpoint 32 after a corrupt $f"
    final_losses $d > $d.loss
    same "corrupt $f skipped: losses bitwise equal" $d.loss ref1.loss
done

# a skipped checkpoint's step written again, killed midway: its old marker must not stand over a mix
# of old and new files (before: the old DONE_36 stayed, the new model beside the old state file, and
# the next -y 1 resumed that mix without a warning). -y 1 retires the skipped marker
# (DONE_00000036.skipped), the rewrite is incomplete, the next -y 1 falls back to 32: bitwise the reference
d=rewrite; cp -r ref1 $d; rm $d/DONE_00000040; flip $d/model_00000036.bin
LLMC_FAULT=state:36 "$TRAINER" "${ARGS[@]}" -o $d -n 4 -y 1 > $d.out1 2>&1
"$TRAINER" "${ARGS[@]}" -o $d -n 4 -y 1 > $d.out2 2>&1 || bad "the resume after a killed rewrite of checkpoint 36 failed"
final_losses $d > $d.loss
grep -q "checkpoint 36 stays in $d as it is, its marker renamed DONE_00000036.skipped" $d.out1 && [ -f $d/DONE_00000036.skipped ] \
    && grep -q "resumed from checkpoint 32" $d.out2 && cmp -s $d.loss ref1.loss \
    && ok "a skipped checkpoint 36 rewritten and killed midway: its marker retired, the next -y 1 from 32, losses bitwise equal" \
    || { bad "a killed rewrite of a skipped checkpoint"; grep -h "resumed\|skipp\|stays" $d.out1 $d.out2 | head -4; }
# train_gpt2.py retires a skipped marker alike
if twin; then
    d=rewrite_py; cp -r ref1 $d; rm $d/DONE_00000040; flip $d/model_00000036.bin
    $PY "$ROOT/train_gpt2.py" "${ARGS[@]}" -o $d -n 4 -y 1 -x 34 > $d.out 2>&1
    grep -q "checkpoint 36 stays in $d as it is, its marker renamed DONE_00000036.skipped" $d.out && [ -f $d/DONE_00000036.skipped ] \
        && grep -q "resumed from checkpoint 32" $d.out && [ -f $d/DONE_00000034 ] \
        && ok "train_gpt2.py: a skipped checkpoint's marker retired as DONE_00000036.skipped" \
        || { bad "train_gpt2.py: a skipped checkpoint's marker"; grep -h "resumed\|skipp\|stays\|error" $d.out | head -4; }
fi

# ---- preemption: SIGTERM to one rank of two; every rank checkpoints and exits 0
"${MPIRUN[@]}" -np 2 "$TRAINER" "${ARGS[@]}" -o term > term.out1 2>&1 &
mpid=$!
wait_line "^step 5/" term.out1 60
kill -TERM "$(pgrep -f "$TRAINER .*-o term" | tail -1)"
wait $mpid; rc=$?
[ $rc -eq 0 ] || bad "SIGTERM: mpirun exited $rc, expected 0"
grep -q "^step 40/40" term.out1 && bad "the run ended before SIGTERM arrived"
grep -q "stopped by a signal after step .*run the same command with -y 1" term.out1 || bad "no resume hint after SIGTERM"
n=$(ls term | grep -c '^state_.*_0000[01].bin'); [ "$n" -eq 2 ] || bad "SIGTERM: $n state files, expected 2"
"${MPIRUN[@]}" -np 2 "$TRAINER" "${ARGS[@]}" -o term -y 1 > term.out2 2>&1 || bad "resume after SIGTERM failed"
final_losses term > term.loss
same "SIGTERM on one rank, resume: losses bitwise equal" term.loss ref2.loss

# a stop signal during a long evaluation (validation and HellaSwag on 2 ranks, the signal to one of
# them, and train_gpt2.py's HellaSwag on 2 under torchrun; HellaSwag on one process): it is cut short
# on every rank, nothing of it is logged, the checkpoint of the step before it is written (was: the
# whole pass, then one more step), and -y 1 evaluates again and trains on bit for bit. On 2 ranks the
# one without the signal stops too within a few batches (the ranks agree every few): rank 0's last
# progress line (one each 0.1 s) must show less than half the pass (was: all of its share, 60 s more
# under the sanitizers)
# (evaluations of 8 s on an idle machine, and 18 for train_gpt2.py's HellaSwag on one process, each
# cut after 1 s: 400000 tokens and 3000 examples took 0.8 s there, the signal landing in training after them)
$PY "$ROOT/dev/bench/make_random_shard.py" longval.bin 4000000 3 512 > /dev/null
$PY "$ROOT/dev/bench/make_random_hellaswag.py" longhs.bin 20000 5 512 > /dev/null
stop_in_eval() {  # stop_in_eval NAME WHAT TRAINER-COMMAND...: SIGTERM to its last process 1 s into step 0's evaluation
    local name=$1 what=$2 pid
    shift 2
    LLMC_PROGRESS_SECONDS=0.1 "$@" "${ARGS[@]}" -v 100 -o $name $EVAL > $name.out1 2>&1 &
    pid=$!
    wait_line "^steps: " $name.out1 60
    sleep 1
    kill -TERM "$(pgrep -f "train_gpt2.* -o $name" | tail -1)"
    wait $pid; rc=$?
    [ $rc -eq 0 ] && grep -q "^$what cut short by a stop signal$" $name.out1 && [ -f $name/DONE_00000000 ] \
        && ! grep -q "^s:0 tel" $name/main.log && grep -q "stopped by a signal after step 0; checkpoint 0 is in $name" $name.out1 \
        && ok "SIGTERM during $what ($name): cut short, checkpoint 0, nothing logged of it" \
        || { bad "SIGTERM during $what ($name): exit $rc"; grep -v "^step\|\.\.\." $name.out1 | tail -n 5; }
    local unit=${what/validation/val loss} done
    done=$(grep "^$unit \.\.\. " $name.out1 | tail -1 | sed 's|^[^.]*\.\.\. \([0-9]*\)/\([0-9]*\) .*|\1 \2|')
    [ -z "$done" ] || [ $((2 * ${done% *})) -lt ${done#* } ] || bad "SIGTERM during $what ($name): rank 0 went on to ${done% *} of ${done#* }"
    "$@" "${ARGS[@]}" -v 100 -o $name $EVAL_RESUME -y 1 > $name.out2 2>&1 || bad "resume after SIGTERM during $what failed"
    grep -q "^s:0 tel" $name/main.log || bad "the resume did not evaluate step 0 again"
    final_losses $name > $name.loss
}
# (the resumes evaluate less: -m and -hm may change on a resume, and the test takes no longer than it must)
EVAL="-j longval.bin -m -1" EVAL_RESUME="-j longval.bin -m 2"
stop_in_eval stopval validation "${MPIRUN[@]}" -np 2 "$TRAINER"
same "SIGTERM to one rank of 2 during validation, resume: losses bitwise equal" stopval.loss ref2.loss
EVAL="-h 1 -hf longhs.bin" EVAL_RESUME="-h 1 -hf longhs.bin -hm 20"
stop_in_eval stophs HellaSwag "$TRAINER"
same "SIGTERM during HellaSwag, resume: losses bitwise equal" stophs.loss ref1.loss
stop_in_eval stophs2 HellaSwag "${MPIRUN[@]}" -np 2 "$TRAINER"
same "SIGTERM to one rank of 2 during HellaSwag, resume: losses bitwise equal" stophs2.loss ref2.loss
if twin && torchrun_cmd; then
    stop_in_eval stophs_py HellaSwag "${TORCHRUN[@]}" --nproc_per_node=2 --master_port="$(free_port)" $PY "$ROOT/train_gpt2.py"
    compare_logs ref2/main.log stophs_py/main.log trl=1e-4 > cmp.out && ok "train_gpt2.py, the same: its losses those of ./train_gpt2 ($(head -1 cmp.out | sed 's/^ *//'))" \
        || { bad "train_gpt2.py after SIGTERM during HellaSwag"; cat cmp.out; }
elif twin; then
    skip_or_fail "train_gpt2.py's stop during HellaSwag" "torchrun (PyTorch)" "bash scripts/test.sh installs it" \
        || bad "train_gpt2.py's stop during HellaSwag not run"
fi

# ... but the final evaluation (the run's result, after its last checkpoint) runs whole (a sample
# after it does not: below)
"$TRAINER" "${ARGS[@]}" -x 2 -v 100 -j longval.bin -m 3000 -o stopfinal > stopfinal.out 2>&1 &
pid=$!
wait_line "^step 2/2" stopfinal.out 120
kill -TERM $pid; wait $pid; rc=$?
[ $rc = 0 ] && ! grep -q "^validation cut short" stopfinal.out && grep -q "^s:2 tel" stopfinal/main.log \
    && grep -q "^sample cut short by a stop signal$" stopfinal.out \
    && ok "SIGTERM during the final validation: it runs whole and is logged (the sample after it is cut short)" \
    || { bad "SIGTERM during the final validation (exit $rc)"; grep -v "^step\|\.\.\." stopfinal.out | tail -n 4; }

# ... except -x 0's, which is all that run does: a stop ends it, and nothing is logged or written
for t in $TRAINERS; do
    trainer_of $t
    "${run[@]}" "${ARGS[@]}" -x 0 -v 1 -j longval.bin -m -1 -s 0 -n 4 -o stopx0_$t > stopx0_$t.out 2>&1 &
    pid=$!
    wait_line "^steps: " stopx0_$t.out 60
    sleep 1
    kill -TERM $pid; wait $pid; rc=$?
    [ $rc = 0 ] && grep -q "^validation cut short by a stop signal$" stopx0_$t.out \
        && grep -q "^stopped by a signal: the evaluation (-x 0) is not finished, nothing was logged$" stopx0_$t.out \
        && ! grep -q "tel" stopx0_$t/main.log && [ -z "$(ls stopx0_$t | grep '^\(model\|state\|DONE\)_')" ] \
        && ok "SIGTERM during -x 0's evaluation ($t): cut short, exit 0, nothing logged, no checkpoint" \
        || { bad "SIGTERM during -x 0's evaluation ($t, exit $rc)"; tail -n 3 stopx0_$t.out; ls stopx0_$t; }
done

# a stop signal during a sample (rank 0's, which it freezes itself in as the sample after step 8
# begins: LLMC_FAULT=sample:8:stop:0): the sample ends at its next token, and the coins it would
# have drawn are drawn still, so the resumed run's losses, its later samples and the sampling RNG in
# its last checkpoint are the uninterrupted run's
sample_rng() { od -A n -t d8 -j 80 -N 8 "$1/state_00000040_00000.bin" | tr -d ' '; }  # the state header's int64 at 20
stop_in_sample() {  # stop_in_sample NAME REF LAUNCHER...: the run of ARGS into NAME, REF the uninterrupted run
    local name=$1 ref=$2 pid p stopped=
    shift 2
    LLMC_FAULT=sample:8:stop:0 "$@" "${ARGS[@]}" -n 4 -o $name > $name.out1 2>&1 &
    pid=$!
    for _ in $(seq 300); do
        for p in $(pgrep -f "train_gpt2.* -o $name"); do frozen $p && stopped=$p; done
        [ -z "$stopped" ] && kill -0 $pid 2> /dev/null || break
        sleep 0.1
    done
    [ -n "$stopped" ] || { bad "stop during a sample ($name): no rank froze at the sample"; kill -KILL $pid; wait $pid; return 1; }
    kill -TERM $stopped; kill -CONT $stopped
    wait $pid; rc=$?
    [ $rc -eq 0 ] && grep -q "^sample cut short by a stop signal$" $name.out1 && [ -f $name/DONE_00000009 ] \
        && grep -q "stopped by a signal after step 9; checkpoint 9 is in $name" $name.out1 \
        && ok "SIGTERM during a sample ($name): cut short, step 9 trained, checkpoint 9" \
        || { bad "SIGTERM during a sample ($name): exit $rc"; grep -v "^step" $name.out1 | tail -n 5; }
    LLMC_FAULT= "$@" "${ARGS[@]}" -n 4 -o $name -y 1 > $name.out2 2>&1 || bad "resume after SIGTERM during a sample ($name) failed"
    [ "$(sample_rng $name)" = "$(sample_rng $ref)" ] && ok "... the resumed run's sampling RNG at step 40 is $ref's" \
        || bad "stop during a sample ($name): the sampling RNG at step 40 $(sample_rng $name), not ${ref}'s $(sample_rng $ref)"
}
stop_in_sample stopsample ref1 "$TRAINER"
final_losses stopsample > stopsample.loss
same "SIGTERM during a sample, resume: losses bitwise equal" stopsample.loss ref1.loss
samples_after ref1.out 9 > ref.samples; samples_after stopsample.out2 9 > stopsample.samples
same "SIGTERM during a sample, resume: the later samples equal" stopsample.samples ref.samples
if ! lean; then
    stop_in_sample stopsample2 ref2 "${MPIRUN[@]}" -np 2 -x LLMC_FAULT "$TRAINER"
    final_losses stopsample2 > stopsample2.loss
    same "SIGTERM to rank 0 of 2 during a sample, resume: losses bitwise equal" stopsample2.loss ref2.loss
fi
if twin && torchrun_cmd; then
    stop_in_sample stopsample_py ref2 "${TORCHRUN[@]}" --nproc_per_node=2 --master_port="$(free_port)" $PY "$ROOT/train_gpt2.py"
    compare_logs ref2/main.log stopsample_py/main.log trl=1e-4 > cmp.out && ok "train_gpt2.py, the same: its losses those of ./train_gpt2 ($(head -1 cmp.out | sed 's/^ *//'))" \
        || { bad "train_gpt2.py after SIGTERM during a sample"; cat cmp.out; }
fi

# SIGINT on a single process
"$TRAINER" "${ARGS[@]}" -o int > int.out1 2>&1 &
pid=$!
wait_line "^step 2/" int.out1 60
kill -INT $pid; wait $pid; rc=$?
[ $rc -eq 0 ] || bad "SIGINT: exit code $rc, expected 0"
grep -q "^step 40/40" int.out1 && bad "the run ended before SIGINT arrived"
"$TRAINER" "${ARGS[@]}" -o int -y 1 > int.out2 2>&1 || bad "resume after SIGINT failed"
final_losses int > int.loss
same "SIGINT, resume: losses bitwise equal" int.loss ref1.loss

# the reader of stdout gone (`| tee`, tee killed): SIGPIPE stops the run like SIGTERM, the stop line
# on stderr, and the resume goes on bit for bit (the default action ended it, the steps since the
# last checkpoint lost)
tee_killed pipe err "$TRAINER" "${ARGS[@]}" -o pipe
[ "$(cat pipe.rc)" = 0 ] && grep -q "^stopped by a signal after step [0-9]*; checkpoint [0-9]* is in pipe" pipe.err \
    && ok "stdout's reader killed: the run stopped with a checkpoint, exit 0, on stderr: $(grep -m1 '^stopped' pipe.err | cut -c1-60)" \
    || { bad "stdout's reader killed: exit $(cat pipe.rc), stderr: $(tail -2 pipe.err)"; }
"$TRAINER" "${ARGS[@]}" -o pipe -y 1 > pipe.out2 2>&1 || bad "resume after SIGPIPE failed"
final_losses pipe > pipe.loss
same "SIGPIPE, resume: losses bitwise equal" pipe.loss ref1.loss
# Ctrl-C on `train_gpt2 | tee` in a terminal: SIGINT to both at once (a new session whose SIGINT is
# not ignored, as a script's background jobs' is); tee ends first, and the step line that follows
# must not end the trainer before its checkpoint
$PY - "$TRAINER" "$TMP/ctrlc" "${ARGS[@]}" -o ctrlc > ctrlc.txt 2>&1 << 'PYEOF2'
import os, signal, subprocess, sys, time
trainer, out, args = sys.argv[1], sys.argv[2], sys.argv[3:]
signal.signal(signal.SIGINT, signal.SIG_DFL)
cmd = f"{trainer} {' '.join(args)} 2> {out}.err | tee {out}.log > /dev/null; echo ${{PIPESTATUS[@]}} > {out}.rc"
p = subprocess.Popen(["bash", "-c", cmd], start_new_session=True)
for _ in range(300):
    if os.path.exists(out + ".log") and "step 2/" in open(out + ".log").read(): break
    time.sleep(0.05)
os.killpg(p.pid, signal.SIGINT)
p.wait()
print(open(out + ".rc").read().strip())
PYEOF2
rcs=$(tail -1 ctrlc.txt)
[ "${rcs%% *}" = 0 ] && [ "${rcs##* }" = 130 ] && ls ctrlc | grep -q '^DONE_' \
    && ok "Ctrl-C on train_gpt2 | tee: tee ended by SIGINT (130), the trainer checkpointed and exited 0 ($(ls ctrlc | grep -m1 DONE_))" \
    || { bad "Ctrl-C on train_gpt2 | tee: exit statuses '$rcs' (want 0 130), checkpoints: $(ls ctrlc | tr '\n' ' ')"; tail -2 ctrlc.err ctrlc.txt; }
# SIGHUP (the terminal closed), SIGUSR1 and SIGUSR2 (SLURM's --signal) stop the run with a
# checkpoint; under nohup SIGHUP is ignored, the run goes on
for sig in HUP USR1 USR2; do
    "$TRAINER" "${ARGS[@]}" -o $sig > $sig.out1 2>&1 &
    pid=$!
    wait_line "^step 2/" $sig.out1 60
    kill -$sig $pid; wait $pid; rc=$?
    [ $rc -eq 0 ] && grep -q "^stopped by a signal after step [0-9]*; checkpoint" $sig.out1 && ! grep -q "^step 40/40" $sig.out1 \
        && ok "SIG$sig: $(grep -m1 '^stopped' $sig.out1 | cut -c1-60)" || { bad "SIG$sig: exit $rc"; tail -2 $sig.out1; }
done
nohup "$TRAINER" "${ARGS[@]}" -o nohup > nohup.out 2>&1 &
pid=$!
wait_line "^step 2/" nohup.out 60
kill -HUP $pid; wait $pid; rc=$?
[ $rc -eq 0 ] && grep -q "^step 40/40" nohup.out && ok "SIGHUP under nohup: ignored, the run went on to step 40" \
    || { bad "SIGHUP under nohup: exit $rc"; tail -2 nohup.out; }

# a second signal exits at once (a model big enough that a step takes a while)
$PY "$ROOT/dev/bench/make_random_shard.py" big.bin 300000 5
"$TRAINER" -i big.bin -e L4:C256:H4:T128 -b 8 -t 128 -x 50 -v 0 -s 0 -o twice > twice.out 2>&1 &
pid=$!
wait_line "^step 1/" twice.out 60
kill -TERM $pid; sleep 0.05; kill -TERM $pid; wait $pid; rc=$?
[ $rc -eq 143 ] || bad "second SIGTERM: exit code $rc, expected 143"
grep -q "second signal: exiting immediately" twice.out || bad "no message for the second signal"
ls twice | grep -q DONE && bad "a checkpoint was completed despite the second signal"
[ $fail -eq 0 ] && echo "ok   signals: SIGTERM (np=2), SIGINT and a second SIGTERM"

# ---- under torchrun, whose agent passes every SIGINT, SIGTERM and SIGHUP it gets on to its workers
# (SIGKILL 30 s later): a Ctrl-C, a closed terminal (the signal to the terminal's whole process
# group: the worker gets it from the terminal, then from torchrun) and systemd's SIGTERM to every
# process (in either order: torchrun may pass its copy on first) are one stop, with a checkpoint;
# torchrun's SIGTERM alone too; a second Ctrl-C exits at once. train_gpt2.py takes a process group
# of its own there: a Ctrl-C is one stop as well.
torchrun_stop() {  # torchrun_stop NAME HOW PROGRAM...: train under torchrun in a process group of
    # its own (a terminal's foreground job), stop it HOW once step 2 is printed, wait for torchrun
    local name=$1 how=$2 pid rank; shift 2
    setsid "${TORCHRUN[@]}" --nproc_per_node=1 --master_port="$(free_port)" "$@" -i big.bin \
        -e L4:C256:H4:T128 -b 8 -t 128 -x 50 -v 0 -s 0 -o "$name" > "$name.out" 2>&1 &
    pid=$!
    wait_line "^step 2/" "$name.out" 120 $pid || bad "torchrun $how: no step 2"
    rank=$(pgrep -P $pid)
    [ "$(ps -o pgid= -p "$rank" | tr -d ' ')" = $pid ] && echo same > "$name.group" || echo own > "$name.group"
    case $how in
        ctrl-c) kill -INT -- -$pid ;;
        ctrl-c-twice) kill -INT -- -$pid; sleep 0.5; kill -INT -- -$pid 2> /dev/null ;;
        hangup) kill -HUP -- -$pid ;;
        # systemd's SIGTERM to every process, the rank's first or torchrun's (passed on) first
        sigterm-rank-first) kill -TERM $rank $pid ;;
        sigterm-launcher-first) kill -TERM $pid; wait_line "closing signal SIGTERM" "$name.out" 60; kill -TERM $rank ;;
        sigterm-to-torchrun) kill -TERM $pid ;;
    esac
    wait $pid
}
stopped_once() {  # stopped_once NAME WHAT: torchrun passed the signal on, and the run stopped once
    local step
    step=$(stopped_step "$1.out")
    grep -q "closing signal SIG" "$1.out" && [ -n "$step" ] && [ -e "$1/DONE_$(printf %08d "$step")" ] \
        && ! grep -q "second signal" "$1.out" \
        && ok "torchrun, $2: passed on by torchrun, one stop: checkpoint $step" \
        || { bad "torchrun, $2: no clean stop"; grep -v "^step\|^  " "$1.out" | tail -n 8; }
}
exited_at_once() {  # exited_at_once NAME WHAT: the second signal ended the run, no checkpoint written
    grep -q "second signal: exiting immediately" "$1.out" && ! ls "$1" | grep -q DONE && ok "torchrun, $2: exits at once" \
        || { bad "torchrun, $2: did not exit at once"; grep -v "^step\|^  " "$1.out" | tail -n 8; }
}
if torchrun_cmd; then
    # (lean: the Ctrl-C, whose signal comes from the terminal and from torchrun, takes both ways in)
    for how in ctrl-c $(lean || echo hangup sigterm-rank-first sigterm-launcher-first sigterm-to-torchrun); do
        torchrun_stop "tr_$how" $how "$TRAINER"
        stopped_once "tr_$how" $how
    done
    torchrun_stop tr_twice ctrl-c-twice "$TRAINER"
    exited_at_once tr_twice "Ctrl-C twice"
    if twin; then
        torchrun_stop tr_py ctrl-c $PY "$ROOT/train_gpt2.py"
        stopped_once tr_py "train_gpt2.py, ctrl-c"
        # where torchrun leaves its workers in its own process group (torch 1.x; torch 2 starts each in
        # a session of its own and signals that), the Ctrl-C above reached the C trainer twice, and
        # train_gpt2.py must have left the group (its Python handlers do not see a signal's sender, and
        # Python runs a handler once for signals that come close together: in torchrun's group a Ctrl-C
        # exited at once about one time in six)
        if [ "$(cat tr_ctrl-c.group)" = same ]; then
            [ "$(cat tr_py.group)" = own ] || bad "torchrun: train_gpt2.py did not take a process group of its own"
            # a second Ctrl-C: torch 1.x's torchrun passes it on as well, and train_gpt2.py exits at once
            torchrun_stop tr_py_twice ctrl-c-twice $PY "$ROOT/train_gpt2.py"
            exited_at_once tr_py_twice "train_gpt2.py, Ctrl-C twice"
        else
            echo "note: this torchrun starts its workers in process groups of their own"
        fi
    fi
    # torchrun --max-restarts: a worker killed once checkpoint 2 is written (train_gpt2's one process;
    # rank 1 of train_gpt2.py's two, so that torchrun stops rank 0 as well) is started again by torchrun
    # with the same command (no -y 1), and resumes the run's own checkpoints: the per-step losses of an
    # uninterrupted run (train_gpt2's bitwise, train_gpt2.py's within 1e-4). Where the first attempt was
    # refused by another run's checkpoints, the restart refuses them too (it does not take them for its own)
    RS_ARGS=(-i big.bin -e L4:C256:H4:T128 -t 128 -d 1024 -x 4 -v 0 -s 0 -n 2)
    restarted() {  # restarted NAME NPROC PROGRAM...: under torchrun --max_restarts=1, its last worker killed after checkpoint 2
        local name=$1 np=$2 pid; shift 2
        "${TORCHRUN[@]}" --nproc_per_node=$np --max_restarts=1 --master_port="$(free_port)" "$@" "${RS_ARGS[@]}" \
            -b $((8 / np)) -o "$name" > "$name.out" 2>&1 &
        pid=$!
        wait_line "^checkpoint 2 written" "$name.out" 120 $pid && kill -KILL "$(pgrep -P $pid | tail -n 1)"
        wait $pid
    }
    "$TRAINER" "${RS_ARGS[@]}" -b 8 -o rs_ref > rs_ref.out 2>&1 || bad "torchrun restart: the reference run failed"
    for prog in $TRAINERS; do
        cmd=("$TRAINER") np=1 tol=0; [ $prog = py ] && cmd=($PY "$ROOT/train_gpt2.py") np=2 tol=1e-4
        restarted rs_$prog $np "${cmd[@]}"; rc=$?
        [ $rc = 0 ] && grep -q "^torchrun restarted this run's workers (restart 1): resuming" rs_$prog.out \
            && grep -q "^resumed from checkpoint [24] in rs_$prog" rs_$prog.out \
            && compare_logs rs_ref/main.log rs_$prog/main.log trl=$tol norm=$tol > rs_$prog.cmp \
            && ok "torchrun --max-restarts ($prog, $np process(es)): the restarted workers resumed the run's checkpoint, the losses an uninterrupted run's (trl=$tol)" \
            || { bad "torchrun --max-restarts ($prog): exit $rc"; cat rs_$prog.cmp; grep -v "^step\|^  " rs_$prog.out | tail -n 8; }
    done
    "${TORCHRUN[@]}" --nproc_per_node=1 --max_restarts=1 --master_port="$(free_port)" "$TRAINER" "${RS_ARGS[@]}" -b 8 -x 5 \
        -o rs_ref > rs_other.out 2>&1; rc=$?
    [ $rc != 0 ] && [ "$(grep -c "^error: -o rs_ref holds the checkpoints of another run" rs_other.out)" = 2 ] && ! grep -q "torchrun restarted" rs_other.out \
        && ok "torchrun --max-restarts: another run's checkpoints refused by the first attempt and by the restart" \
        || { bad "torchrun --max-restarts over another run's checkpoints: exit $rc"; tail -n 5 rs_other.out; }
    # a fatal error under torchrun is the root cause of its failure summary (the error file its agent
    # reads), not "<N/A>"
    grep -q "traceback : error: -o rs_ref holds the checkpoints of another run" rs_other.out \
        && ok "torchrun's failure summary: the trainer's error line as its root cause" \
        || { bad "torchrun's failure summary without the error line"; grep -h "traceback" rs_other.out; }
    if twin; then
        "${TORCHRUN[@]}" --nproc_per_node=1 --master_port="$(free_port)" $PY "$ROOT/train_gpt2.py" -i big.bin -b 0 > tr_err_py.out 2>&1
        grep -q "traceback : error: -b 0: " tr_err_py.out && ok "torchrun's failure summary: train_gpt2.py's error line too" \
            || { bad "torchrun's failure summary without train_gpt2.py's error line"; grep -h "traceback" tr_err_py.out; }
    fi
    # torchrun's grace (SIGKILL that long after it passes a stop on): a checkpoint and a step that need
    # more than two thirds of it are warned of, once. The grace is its --shutdown-timeout (read from
    # the command line of the rank's parent, here a stand-in for newer torchruns), else
    # TORCH_ELASTIC_SHUTDOWN_TIMEOUT, else 30 s; 0 s makes any checkpoint too long
    GRACE_ARGS=(-i big.bin -e L2:C64:H4 -b 2 -t 64 -x 6 -n 2 -v 0 -s 0)
    grace_run() {  # grace_run NAME c|py [--shutdown-timeout form]: a trainer under a stand-in torchrun
        local name=$1 prog=("$TRAINER"); [ "$2" = py ] && prog=($PY "$ROOT/train_gpt2.py"); shift 2
        TORCHELASTIC_RUN_ID=standin RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 \
            $PY -c 'import subprocess, sys; sys.exit(subprocess.call(sys.argv[sys.argv.index("--") + 1:]))' "$@" -- \
            "${prog[@]}" "${GRACE_ARGS[@]}" -o "$name" > "$name.out" 2>&1
    }
    if lean; then  # the stand-in's command line without --shutdown-timeout, as torchrun's
        TORCH_ELASTIC_SHUTDOWN_TIMEOUT=0 grace_run grace_env c
        grace_run grace_30 c
    else
        TORCH_ELASTIC_SHUTDOWN_TIMEOUT=0 "${TORCHRUN[@]}" --nproc_per_node=1 --master_port="$(free_port)" "$TRAINER" \
            "${GRACE_ARGS[@]}" -o grace_env > grace_env.out 2>&1
        "${TORCHRUN[@]}" --nproc_per_node=1 --master_port="$(free_port)" "$TRAINER" "${GRACE_ARGS[@]}" -o grace_30 > grace_30.out 2>&1
    fi
    TORCH_ELASTIC_SHUTDOWN_TIMEOUT=0 grace_run grace_cli100 c --shutdown-timeout=100
    grace_run grace_cli0 c --shutdown_timeout 0
    warned() { grep -c "^warning: checkpoint 2 took .* torchrun sends SIGKILL $2 s after" "$1.out"; }
    [ "$(warned grace_env 0)" = 1 ] && [ "$(grep -c "^warning:" grace_env.out)" = 1 ] \
        && [ "$(grep -c "^warning:" grace_30.out)" = 0 ] && [ "$(grep -c "^warning:" grace_cli100.out)" = 0 ] \
        && [ "$(warned grace_cli0 0)" = 1 ] && [ -e grace_cli0/DONE_00000006 ] \
        && ok "torchrun's grace: warned once where a checkpoint needs more of it than 2/3 (TORCH_ELASTIC_SHUTDOWN_TIMEOUT=0, --shutdown_timeout 0), not at 30 s nor where --shutdown-timeout=100 overrides the variable" \
        || { bad "torchrun's grace warning"; grep -h "^warning" grace_*.out; }
    if twin; then
        TORCH_ELASTIC_SHUTDOWN_TIMEOUT=0 grace_run grace_py100 py --shutdown-timeout=100
        grace_run grace_py0 py --shutdown_timeout 0
        # train_gpt2.py alike, its warning the same words but for the times
        [ "$(warned grace_py0 0)" = 1 ] && [ "$(grep -c "^warning:" grace_py100.out)" = 0 ] \
            && diff <(grep "^warning" grace_cli0.out | sed -E 's/[0-9.]+ s/X s/g') <(grep "^warning" grace_py0.out | sed -E 's/[0-9.]+ s/X s/g') \
            && ok "torchrun's grace: train_gpt2.py alike, in the same words" \
            || { bad "torchrun's grace: train_gpt2.py's warning"; grep -h "^warning" grace_cli0.out grace_py*.out; }
    fi
else
    skip_or_fail "test-resume's torchrun part" "torchrun (PyTorch)" "bash scripts/test.sh installs it" \
        || bad "the torchrun part not run"
fi

# ---- one run per -o: a second run into the folder of a running one (the same command started
# twice, a requeued job whose first copy still runs) stops at once, naming the holder, and touches
# nothing: not the holder's temporary files, which a start with -y 1 would otherwise remove as a
# killed writer's; train_gpt2.py takes the same lock. The holder goes on, and once it has ended the
# folder is free. (A SIGKILLed holder leaves no lock: the resumes after SIGKILL above.)
"$TRAINER" "${ARGS[@]}" -x 100000 -o busy > busy.out 2>&1 &
pid=$!
wait_line "^step 2/" busy.out 60
touch busy/model_00000099.bin.tmp.7  # as if the holder were writing a checkpoint
held="error: -o busy is in use by another run (pid $pid on $(hostname), started [0-9-]* [0-9:]* UTC): two runs"
refused=1
for tr in $TRAINERS; do
    trainer_of $tr
    "${run[@]}" "${ARGS[@]}" -o busy -y 1 > busy_$tr.out 2>&1; rc=$?
    [ $rc -eq 1 ] && grep -q "^$held" busy_$tr.out || { refused=0; bad "$tr: a second run into a running one's -o: exit $rc"; tail -n 2 busy_$tr.out; }
done
[ $refused = 1 ] && [ -e busy/model_00000099.bin.tmp.7 ] \
    && ok "a second run into a running one's -o ($TRAINERS): refused, its files untouched: $(grep -m1 -o 'in use by another run ([^)]*)' busy_c.out)" \
    || bad "a second run into a running one's -o: refused $refused, the holder's temporary file $(ls busy | grep tmp)"
kill -TERM $pid; wait $pid; rc=$?
"$TRAINER" "${ARGS[@]}" -o busy -y 1 -x 2 > busy4.out 2>&1; rc4=$?
[ $rc -eq 0 ] && grep -q "checkpoint [0-9]* is in busy" busy.out && [ $rc4 -eq 1 ] && grep -q "is past the end of this run" busy4.out \
    && [ ! -e busy/model_00000099.bin.tmp.7 ] && ok "the holder went on and stopped with its checkpoint; then the folder was free" \
    || { bad "after the refused runs: holder exit $rc, then exit $rc4"; tail -n 2 busy.out busy4.out; }

# a lock file of another making (binary, escape sequences): the refusal prints it as printable ASCII
mkdir -p odd && $PY -c "
import fcntl, os, sys, time
fd = os.open('odd/llmc_run.lock', os.O_RDWR | os.O_CREAT)
os.write(fd, b'\x1b[2Jodd\x07\xff holder\n'); fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)" > odd.held &
hpid=$!
wait_line held odd.held 5
want="error: -o odd is in use by another run (?[2Jodd?? holder): two runs"
for tr in $TRAINERS; do
    trainer_of $tr
    "${run[@]}" "${ARGS[@]}" -o odd > odd_$tr.out 2>&1; rc=$?
    [ $rc -eq 1 ] && grep -qF "$want" odd_$tr.out \
        && ok "$tr: a lock file of another making: shown as printable ASCII ($(grep -o 'in use by another run ([^)]*)' odd_$tr.out))" \
        || { bad "$tr: a lock file of another making: exit $rc"; tail -n 1 odd_$tr.out | cat -v; }
done
kill $hpid; wait $hpid 2> /dev/null

# a filesystem without locks (Lustre mounted without flock; a preloaded flock that fails with
# ENOLCK stands in): one warning, and the run trains and checkpoints as before (both trainers)
printf '#include <errno.h>\n#include <sys/file.h>\nint flock(int fd, int op) { (void)fd; (void)op; errno = ENOLCK; return -1; }\n' > noflock.c
cc -shared -fPIC -o noflock.so noflock.c || bad "could not build the flock stand-in"
nolock_line() { echo "warning: -o $1: cannot lock $1/llmc_run.lock (No locks available): nothing keeps a second run out of this folder"; }
for tr in $TRAINERS; do
    d=nolock_$tr
    trainer_of $tr
    # (an AddressSanitizer build, test_sanitize's, wants its runtime first in the list: told not to check)
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" LD_PRELOAD=$PWD/noflock.so "${run[@]}" "${ARGS[@]}" \
        -x 4 -n 4 -o $d > $d.out 2> $d.err; rc=$?
    [ $rc -eq 0 ] && grep -qxF "$(nolock_line $d)" $d.err && [ "$(grep -c 'cannot lock' $d.err)" = 1 ] && [ -f $d/DONE_00000004 ] \
        && ok "$tr: no locks on the filesystem: one warning, the run trains and checkpoints ($(nolock_line $d | cut -c1-60)...)" \
        || { bad "$tr: no locks on the filesystem: exit $rc"; tail -n 2 $d.err; }
done

# ---- pruning: keep the newest 2 complete checkpoints
"$TRAINER" "${ARGS[@]}" -o prune -n 4 -nk 2 > prune.out 2>&1 || bad "run with -nk 2 failed"
got=$(ls prune | grep -v "main.log\|metrics.jsonl\|llmc_run.lock" | tr '\n' ' ')
want="DONE_00000036 DONE_00000040 model_00000036.bin model_00000040.bin state_00000036_00000.bin state_00000040_00000.bin "
[ "$got" = "$want" ] && echo "ok   -nk 2 keeps: $got" || bad "-nk 2 left: $got"
# -nm 12 (llm.c's major checkpoints): the multiples of 12 stay too, and the run resumes from the newest
"$TRAINER" "${ARGS[@]}" -o major -n 4 -nk 2 -nm 12 > major.out 2>&1 || bad "run with -nk 2 -nm 12 failed"
got=$(ls major | grep '^DONE' | tr '\n' ' ')
want="DONE_00000012 DONE_00000024 DONE_00000036 DONE_00000040 "
[ "$got" = "$want" ] && echo "ok   -nk 2 -nm 12 keeps: $got" || bad "-nk 2 -nm 12 left: $got"
[ "$(ls major | grep -c '^model_\|^state_')" -eq 8 ] || bad "-nm 12: the kept checkpoints' files: $(ls major | tr '\n' ' ')"
"$TRAINER" "${ARGS[@]}" -o major -n 4 -nk 2 -nm 12 -x 44 -y 1 > major2.out 2>&1 && grep -q "resumed from checkpoint 40" major2.out \
    && [ "$(ls major | grep '^DONE' | tr '\n' ' ')" = "DONE_00000012 DONE_00000024 DONE_00000036 DONE_00000040 DONE_00000044 " ] \
    && echo "ok   resumed from 40 to 44: 36 kept as a major checkpoint, 40 as one of the newest 2" \
    || { bad "-nm 12 resume: $(ls major | grep '^DONE' | tr '\n' ' ')"; tail -n 3 major2.out; }

# a damaged newer checkpoint (an earlier run's, skipped and retired by -y 1) is neither counted nor
# deleted by -nk: the resumed run's own newest stays (before: -nk 1 kept the damaged 40 and deleted 38 and 36)
for tr in $TRAINERS; do
    d=prunebad_$tr; cp -r prune $d; flip $d/state_00000040_00000.bin
    trainer_of $tr
    "${run[@]}" "${ARGS[@]}" -o $d -n 2 -nk 1 -x 38 -y 1 > $d.out 2>&1 || bad "$tr: resume with -nk 1 and a damaged checkpoint 40 failed"
    got=$(ls $d | grep '^DONE' | tr '\n' ' ')
    [ "$got" = "DONE_00000038 DONE_00000040.skipped " ] && [ -f $d/state_00000040_00000.bin ] && grep -q "resumed from checkpoint 36" $d.out \
        && ok "$tr: -nk 1 after -y 1 skipped a damaged checkpoint 40: the run's own 38 kept, 40 left alone (retired), 36 pruned" \
        || { bad "$tr: -nk 1 with a damaged newer checkpoint left: $got"; grep -i "skip\|resumed\|error" $d.out | head -3; }
done
# every checkpoint damaged: -y 1 stops with one line, touching nothing (before: a fresh start wrote among them)
ckpt_files() { ls -l --time-style=+%s.%N "$1" | grep ' \(DONE\|model\|state\)_' | md5sum; }
for tr in $TRAINERS; do
    d=allbad_$tr; cp -r prune $d; flip $d/state_00000040_00000.bin; flip $d/model_00000036.bin
    before=$(ckpt_files $d)
    trainer_of $tr
    "${run[@]}" "${ARGS[@]}" -o $d -n 4 -y 1 > $d.out 2>&1; rc=$?
    line=$(grep -m1 '^error:' $d.out)
    [ $rc = 1 ] && grep -q "none of the complete checkpoints in $d loads.*--start-over 1" <<< "$line" \
        && [ "$(grep -c '^step ' $d.out)" = 0 ] && [ "$(ckpt_files $d)" = "$before" ] \
        && ok "$tr: -y 1 with every checkpoint damaged: ${line:0:110}..." \
        || { bad "$tr: -y 1 with every checkpoint damaged: exit $rc"; tail -n 3 $d.out; }
done

# a resume with another -d (here: another -b without -d, whose default -d follows it) is refused,
# naming the -d that resumes with the new -b; the same line from both trainers
for tr in $TRAINERS; do
    trainer_of $tr
    cp -r prune newb_$tr
    "${run[@]}" "${ARGS[@]/#512/-1}" -b 4 -o newb_$tr -y 1 > newb_$tr.out 2>&1; rc=$?
    line=$(grep -m1 '^error:' newb_$tr.out | sed "s/newb_$tr/DIR/")
    [ $rc = 1 ] && grep -q "this run has -t 32 -d 128 .*so resume with the same values (to resume with another -b or number of processes, pass -d 512, with a -b and process count whose B x T x processes divides it: without -d, -d is B x T x processes)$" <<< "$line" \
        && ok "$tr: a resume with another -b and the default -d: ${line:0:60}...${line: -90}" || { bad "$tr: a resume with another -b: exit $rc"; tail -n 2 newb_$tr.out; }
    eval "lines_$tr=\$line"
done
! twin || [ "$lines_c" = "$lines_py" ] || bad "the -d refusal differs: train_gpt2 '$lines_c', train_gpt2.py '$lines_py'"
expect_error "-o where no folder can be made" "-o /proc/llmc_test/out: cannot create directory '/proc/llmc_test': " \
    "$TRAINER" "${ARGS[@]}" -o /proc/llmc_test/out

# ---- another model size in the checkpoint dir
"$TRAINER" "${ARGS[@]}" -e L2:C32:H4:T64:V512 -o ref1 -y 1 > size.out 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "error: model file 'ref1/model_00000040.bin' is L=2 C=64.*resume with the -e of the run that wrote it" size.out && echo "ok   other model size: $(grep error: size.out)" || { bad "other model size: exit $rc"; tail -2 size.out; }

# ---- numeric guards
# NaN: a model with a NaN weight gives a NaN loss at every step; -sm 3 stops the run
$PY "$ROOT/train_gpt2.py" --model L2:C64:H4:T64:V512 --write-model nan.bin > /dev/null
$PY -c "
import numpy as np, sys
b = bytearray(open('nan.bin','rb').read())
a = np.frombuffer(b, dtype='<f4', offset=1024)
a[1000] = np.nan
b[248*4+4*4:] = b[248*4+4*4:]  # the CRC would now mismatch: drop the tag so the file loads unchecked
h = np.frombuffer(b[:1024], dtype='<i4').copy(); h[252] = 0
open('nan.bin','wb').write(h.tobytes() + a.tobytes())
"
"$TRAINER" -i train.bin -e nan.bin -b 2 -t 32 -x 20 -v 0 -s 0 -o nanrun -sm 3 > nan.out 2>&1; rc=$?
[ $rc -eq 1 ] || bad "NaN run: exit code $rc, expected 1"
[ "$(grep -c 'skip:non-finite loss' nanrun/main.log)" -eq 3 ] || bad "NaN run: expected 3 skip lines in main.log"
grep -q "error: 3 consecutive steps skipped" nan.out && echo "ok   NaN steps skipped, run stopped: $(grep error: nan.out)" || bad "NaN run: no stop message"

# an outlier: 150 steps of a predictable sequence (the loss settles near 0), then one step of
# random tokens. Checkpoint 150 comes from a first run; the resumed run writes checkpoint 151
# after the skipped step; parameters and optimizer state must be equal in both.
$PY - <<'EOF'
import numpy as np
h = np.zeros(256, dtype="<i4"); h[:2] = [20240520, 1]
pattern = np.tile(np.arange(100, 164), 1300)[:150 * 512]         # steps 0..149: easy to learn
noise = np.random.default_rng(9).integers(0, 256, 512)           # step 150: random tokens
tail = np.tile(np.arange(100, 164), 100)[:4 * 512 + 1]           # steps 151..154
toks = np.concatenate([pattern, noise, tail]).astype("<u2")
h[2] = len(toks)
open("spike.bin", "wb").write(h.tobytes() + toks.tobytes())
EOF
SPIKE=(-i spike.bin -e L1:C32:H2:T64:V256 -b 2 -t 32 -d 512 -v 0 -s 0 -sh 0 -l 3e-3 -sl 5 -o spike)
"$TRAINER" "${SPIKE[@]}" -x 150 -n 150 > spike.out1 2>&1 || bad "outlier run (first part) failed"
"$TRAINER" "${SPIKE[@]}" -x 153 -n 1 -y 1 > spike.out2 2>&1 || bad "outlier run (second part) failed"
if grep -q "^s:150 skip:loss .* has z-score" spike/main.log; then
    echo "ok   outlier skipped: $(grep '^s:150 skip' spike/main.log)"
    [ "$(grep -c skip spike/main.log)" -eq 1 ] || bad "more than one step skipped in the outlier run"
    cmp -s <(tail -c +1025 spike/model_00000150.bin) <(tail -c +1025 spike/model_00000151.bin) || bad "parameters changed in the skipped step"
    $PY - spike/state_00000150_00000.bin spike/state_00000151_00000.bin <<'EOF' || bad "optimizer state changed in the skipped step"
import sys, numpy as np
a, b = (np.fromfile(p, dtype="<f4", offset=1024) for p in sys.argv[1:])
ha, hb = (np.fromfile(p, dtype="<i4", count=256) for p in sys.argv[1:])
assert ha[11] == hb[11], f"AdamW update count changed: {ha[11]} -> {hb[11]}"
assert np.array_equal(a, b), "m, v or the guard history changed"
print(f"ok   the skipped step left parameters, m, v, the guard history and the AdamW count ({ha[11]}) unchanged")
EOF
    grep -q "^s:151 trl" spike/main.log && ! grep -q "^s:151 skip" spike/main.log || bad "the run did not continue after the skip"
else
    bad "the random step 150 was not skipped as an outlier"; grep -E "^s:(149|150|151) " spike/main.log
fi

# (lean: the rest runs the recipe scripts with a stand-in trainer, no C of this build: the end)
if lean; then finish; exit 0; fi
# ---- scripts/run_gpt2_124M.sh's relaunches: a stand-in trainer (TRAINER, NGPU=1: no make, no
# mpirun; dev/test/relaunch_stub.sh) that, at its n-th call, writes the marker of the checkpoint in
# line n of STUB_PLAN ("-": none) and exits with the code there
mkdir -p fw && touch fw/fineweb_train_000001.bin fw/fineweb_val_000000.bin
relaunch() {  # relaunch <name> <plan lines...>: the script's exit code; its output in <name>.out
    local name=$1; shift
    printf '%s\n' "$@" > "$name.plan"
    TRAINER=$ROOT/dev/test/relaunch_stub.sh NGPU=1 RETRY_WAIT=0 RETRIES=${RETRIES:-5} DATA=$TMP/fw OUT=$TMP/$name STUB_PLAN=$TMP/$name.plan \
        STUB_CALLS=$TMP/$name.calls bash "$ROOT/scripts/run_gpt2_124M.sh" > "$name.out" 2>&1
}
# -o given on the script's command line (extra flags override the recipe's): the relaunch watches
# that folder (it watched OUT, and gave up as if no checkpoint had been written); OUT with a space
# through the 1-GPU script; the recipe's validation is llm.c's 8-GPU 10,240 sequences (-m 160 at B 64)
printf '%s\n' "1000 1" "- 1" "2000 0" > flag_o.plan
TRAINER=$ROOT/dev/test/relaunch_stub.sh NGPU=1 RETRY_WAIT=0 DATA=$TMP/fw OUT=$TMP/flag_o_default STUB_PLAN=$TMP/flag_o.plan \
    STUB_CALLS=$TMP/flag_o.calls STUB_ARGS=$TMP/flag_o.args bash "$ROOT/scripts/run_gpt2_124M.sh" -o "$TMP/flag o" > flag_o.out 2>&1; rc=$?
[ $rc = 0 ] && [ "$(cat flag_o.calls)" = 3 ] && [ -f "$TMP/flag o/DONE_00002000" ] && grep -qx -- -m flag_o.args \
    && [ "$(grep -A1 -x -- -m flag_o.args | tail -1)" = 160 ] && ok "run_gpt2_124M.sh -o <dir>: the relaunch watches <dir>; -m 160" \
    || { bad "run_gpt2_124M.sh -o <dir> (exit $rc)"; cat flag_o.out; }
printf '%s\n' "1000 0" > space.plan
TRAINER=$ROOT/dev/test/relaunch_stub.sh RETRY_WAIT=0 DATA=$TMP/fw OUT="$TMP/my out" STUB_PLAN=$TMP/space.plan STUB_CALLS=$TMP/space.calls \
    bash "$ROOT/scripts/run_gpt2_124M_1gpu.sh" > space.out 2>&1 && [ -f "$TMP/my out/DONE_00001000" ] \
    && ok "run_gpt2_124M_1gpu.sh: OUT with a space" || { bad "run_gpt2_124M_1gpu.sh: OUT with a space"; cat space.out; }
relaunch transient "1000 1" "2000 0" && [ "$(cat transient.calls)" = 2 ] \
    && ok "run_gpt2_124M.sh: a crash after checkpoint 1000 is relaunched, and the run ends" || { bad "run_gpt2_124M.sh: the crash was not relaunched"; cat transient.out; }
relaunch repeats "1000 1" "- 1" "- 1" "- 0"
rc=$?
line=$(grep -m1 "twice in a row" repeats.out)
[ $rc -eq 1 ] && [ "$(cat repeats.calls)" = 3 ] && grep -q "without a new checkpoint (newest: checkpoint 1000; attempt 3)" <<< "$line" \
    && ok "run_gpt2_124M.sh: an error that repeats stops it: ${line:0:150}" || { bad "run_gpt2_124M.sh: an error that repeats (exit $rc)"; cat repeats.out; }
# launch_wait's status when the launch ends, and is reaped, while the trap that cut the wait short
# still runs (seen once in CI as exit 143, the trap's, for a stand-in that exited 1)
bash -c 'source "$1"; sh -c "trap \"exit 1\" TERM; sleep 5 & wait" & child=$!
         trap "kill -TERM $child; sleep 0.5" TERM; ( sleep 0.3; kill -TERM $$ ) &
         launch_wait $child' _ "$ROOT/scripts/relaunch_lib.sh"
rc=$?
[ $rc = 1 ] && ok "launch_wait: a launch reaped while the trap ran: its status (1), not the trap's" \
    || bad "launch_wait: a launch reaped while the trap ran: status $rc, want 1"
# Ctrl-C: the script passes SIGINT on to the trainer, once; a launcher that exits 1 after the
# checkpoint (as mpirun does after a signal of its own) is a stop, exit 0 (a real mpirun: test_mpi)
STUB_SIGNALS=$TMP/stopped.signals relaunch stopped "1000 1 INT" "2000 0" && [ "$(cat stopped.calls)" = 1 ] \
    && grep -q "stopped by a signal with checkpoint 1000 in" stopped.out && [ "$(cat stopped.signals)" = INT ] \
    && ok "run_gpt2_124M.sh: Ctrl-C, passed on once, a checkpoint and exit 1: a stop, exit 0: $(grep -o 'stopped by a signal.*' stopped.out | cut -c1-70)" \
    || { bad "run_gpt2_124M.sh: Ctrl-C (calls $(cat stopped.calls), signals passed on: $(cat stopped.signals 2> /dev/null | tr '\n' ' '))"; cat stopped.out; }
STUB_SIGNALS=$TMP/stopped_early.signals relaunch stopped_early "- 1 TERM" "2000 0"
rc=$?
[ $rc -eq 1 ] && [ "$(cat stopped_early.calls)" = 1 ] && [ "$(cat stopped_early.signals)" = TERM ] \
    && ok "run_gpt2_124M.sh: SIGTERM before any checkpoint: passed on, not relaunched, exit 1" \
    || { bad "run_gpt2_124M.sh: SIGTERM before any checkpoint: exit $rc, calls $(cat stopped_early.calls)"; cat stopped_early.out; }
RETRIES=3 relaunch bounded "1000 1" "2000 1" "3000 1" "4000 0"
rc=$?
[ $rc -eq 1 ] && [ "$(cat bounded.calls)" = 3 ] && grep -q "the trainer failed 3 times" bounded.out \
    && ok "run_gpt2_124M.sh: RETRIES=3 bounds the relaunches" || { bad "run_gpt2_124M.sh: RETRIES=3 (exit $rc)"; cat bounded.out; }
expect_error "run_gpt2_124M.sh RETRY_WAIT=soon" "error: RETRY_WAIT='soon': expected whole seconds" \
    env RETRY_WAIT=soon bash "$ROOT/scripts/run_gpt2_124M.sh"
expect_error "run_gpt2_124M.sh RETRIES=0" "error: RETRIES='0': expected a number of launches >= 1" \
    env RETRIES=0 bash "$ROOT/scripts/run_gpt2_124M.sh"
# the recipes' settings are checked before anything is built or launched (NGPU=abc was a shell's
# "integer expression expected", then mpirun's own complaint)
expect_error "run_gpt2_124M.sh NGPU=abc" "error: NGPU='abc': expected a whole number >= 1" \
    env NGPU=abc bash "$ROOT/scripts/run_gpt2_124M.sh"
expect_error "run_gpt2_124M.sh TRAINER missing" "error: TRAINER='$TMP/nope' is not a program here" \
    env TRAINER="$TMP/nope" NGPU=1 DATA=$TMP/fw bash "$ROOT/scripts/run_gpt2_124M.sh"
expect_error "run_gpt2_124M_cpu.sh NPROC=x" "error: NPROC='x': expected a whole number >= 1" \
    env NPROC=x bash "$ROOT/scripts/run_gpt2_124M_cpu.sh"
expect_error "mpirun_hostfile.sh PER_NODE=0" "error: PER_NODE='0': expected a whole number >= 1" \
    env PER_NODE=0 bash "$ROOT/scripts/multi_node/mpirun_hostfile.sh"

finish
