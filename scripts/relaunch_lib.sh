# The rule by which the recipes relaunch a trainer that crashed: scripts/run_gpt2_124M.sh, and
# scripts/multi_node/slurm.sbatch within its allocation. Every launch passes -y 1, so a relaunch
# continues from the newest complete checkpoint. After a crash: wait RETRY_WAIT seconds (30) and
# launch again, up to RETRIES launches (5) in all, but not after two crashes in a row that left no
# newer checkpoint (an error that repeats, such as a damaged shard, is not retried away). A run
# stopped by a signal is not relaunched: the trainer exits 0, or the launcher exits non-zero after
# a signal of its own (srun; mpirun where the signal reached it too, as it does from systemd), which
# SIGINT, SIGTERM or SIGHUP reaching this shell too tell apart from a crash where the stop wrote a
# checkpoint. Sourced, with RETRIES and RETRY_WAIT set.
#
# And how the recipes launch: a stop signal to the script (SIGINT, SIGTERM, SIGHUP: Ctrl-C, kill
# PID, docker stop, a closed terminal) must reach the trainers once, as one they stop on cleanly.
# The launch runs in a process group of its own, so Ctrl-C reaches only the script, which passes
# each stop signal on: to mpirun as SIGUSR1, since Open MPI's mpirun answers SIGINT and SIGTERM by
# ending the job (SIGTERM to the ranks 1 s later, SIGKILL 1 s after that: no time to finish a step
# and write a checkpoint) but passes SIGUSR1 on to every rank, which stops them the same way.
#
#   relaunch_check_settings             one error line and exit 2 where RETRIES or RETRY_WAIT is bad
#   relaunch_out_dir ARGS...            the last -o or --out value among ARGS (the folder to watch)
#   relaunch NAME OUT LAUNCH [ARGS...]  runs LAUNCH ARGS (a command or function) by the rule: 0 once
#                                       it exits 0, 1 when the rule gives up (a line says why), its
#                                       status where RELAUNCH_STOP is set (by a trap) after a launch,
#                                       0 after a stop signal where the launch wrote a new checkpoint.
#                                       NAME starts the lines; OUT is the trainer's -o. Each launch
#                                       by launch_stoppable, but where RELAUNCH_PASS_STOPS=0 (SLURM
#                                       signals its tasks itself) in the foreground.
#   launch_stoppable CMD [ARGS...]      runs CMD ARGS so, and returns its status
RETRIES=${RETRIES:-5}
RETRY_WAIT=${RETRY_WAIT:-30}

relaunch_check_settings() {
    [[ "$RETRIES" =~ ^[1-9][0-9]*$ ]] || { echo "error: RETRIES='$RETRIES': expected a number of launches >= 1, e.g. 5" >&2; exit 2; }
    [[ "$RETRY_WAIT" =~ ^[0-9]+$ ]] || { echo "error: RETRY_WAIT='$RETRY_WAIT': expected whole seconds, e.g. 30" >&2; exit 2; }
}

# the trainer's output folder: the last -o or --out among the arguments
relaunch_out_dir() {
    local out= prev=
    for a in "$@"; do
        { [ "$prev" = -o ] || [ "$prev" = --out ]; } && out=$a
        prev=$a
    done
    printf '%s\n' "$out"
}

# the step of the newest complete checkpoint in $1 (0: none)
relaunch_newest_checkpoint() { ls "$1" 2> /dev/null | sed -n 's/^DONE_0*\([0-9][0-9]*\)$/\1/p' | sort -n | tail -1 | grep . || echo 0; }

LAUNCH_PID=    # the launch in progress (its process group), if any
LAUNCH_MPIRUN= # 1 where it is mpirun

# the trap of the stop signals: $1 the signal, passed on to the launch in progress
launch_on_stop() {
    RELAUNCH_STOP=${RELAUNCH_STOP:-signal} LAUNCH_STOP_SIGNAL=$1
    [ -n "$LAUNCH_PID" ] || return 0
    kill -s "$([ "$LAUNCH_MPIRUN" = 1 ] && echo USR1 || echo "$1")" -- "-$LAUNCH_PID" 2> /dev/null || true
}

# wait PID out and return its status. bash's wait returns early (above 128) when a trap runs, and
# the launch may have ended and been reaped by then (asking whether it still lives said no: the
# trap's 143 was taken for its status); waiting again returns its status, which bash keeps, and
# the same again once that is what the first wait gave
launch_wait() {
    local rc next
    wait "$1" && rc=0 || rc=$?
    while [ $rc -gt 128 ]; do
        wait "$1" && next=0 || next=$?
        [ $next -eq $rc ] && ! kill -0 "$1" 2> /dev/null && break
        rc=$next
    done
    return $rc
}

launch_stoppable() {
    local rc
    trap 'launch_on_stop INT' INT
    trap 'launch_on_stop TERM' TERM
    trap 'launch_on_stop HUP' HUP
    case ${1##*/} in mpirun|mpiexec|orterun) LAUNCH_MPIRUN=1 ;; *) LAUNCH_MPIRUN=0 ;; esac
    set -m  # job control: the launch gets a process group of its own
    "$@" < /dev/null &  # stdin: a process group not in the terminal's foreground that reads it is stopped
    LAUNCH_PID=$!
    set +m
    # a signal before the launch's PID was known
    [ -z "${LAUNCH_STOP_SIGNAL:-}" ] || launch_on_stop "$LAUNCH_STOP_SIGNAL"
    launch_wait "$LAUNCH_PID"
    rc=$?
    LAUNCH_PID=
    return $rc
}

relaunch() {
    local name=$1 out=$2 attempt before rc stalled=0 newest launch=launch_stoppable
    shift 2
    if [ "${RELAUNCH_PASS_STOPS:-1}" != 1 ]; then
        # in the foreground, bash runs the trap once the launch has ended: the launch stops by itself
        launch=
        trap 'RELAUNCH_STOP=${RELAUNCH_STOP:-signal}' INT TERM HUP
    fi
    for attempt in $(seq "$RETRIES"); do
        before=$(relaunch_newest_checkpoint "$out")
        $launch "$@"
        rc=$?
        [ $rc -eq 0 ] && return 0
        if [ "${RELAUNCH_STOP:-}" = signal ] && [ "$(relaunch_newest_checkpoint "$out")" != "$before" ]; then
            echo "$name: stopped by a signal with checkpoint $(relaunch_newest_checkpoint "$out") in $out (the launcher" \
                 "exited with $rc after the stop); run this script again to resume"
            return 0
        fi
        [ -n "${RELAUNCH_STOP:-}" ] && return $rc
        if [ "$(relaunch_newest_checkpoint "$out")" = "$before" ]; then stalled=$((stalled + 1)); else stalled=0; fi
        if [ $stalled -ge 2 ]; then
            newest="checkpoint $before"; [ "$before" = 0 ] && newest="none yet"
            echo "$name: the trainer exited with $rc twice in a row without a new checkpoint (newest: $newest;" \
                 "attempt $attempt): the error above repeats; fix its cause, then run this script again (it resumes)"
            return 1
        fi
        [ "$attempt" -lt "$RETRIES" ] || break
        echo "$name: the trainer exited with $rc (attempt $attempt of $RETRIES); relaunching in $RETRY_WAIT s with -y 1"
        sleep "$RETRY_WAIT"
        [ -n "${RELAUNCH_STOP:-}" ] && return $rc
    done
    echo "$name: the trainer failed $RETRIES times (the last error above); run this script again to resume"
    return 1
}
