#!/usr/bin/env bash
# make test's runner: the test targets TEST_JOBS at a time (default: the machine's cores, at most 2),
# each `make <target>` into build/test-logs/<target>.log, one line per test as it ends, and at the
# end the logs of those that failed. Two at a time because most tests are one process on one core
# or wait (timeouts, SLURM, the multi-host namespaces): on a 2-core machine like CI's the whole
# `make test` took 937 s so, 2040 s one test after another (2026-11-28). What the tests build is
# built before, in one `make -j` (two makes building the same file at once would clash).
#
#   dev/test/run_suite.sh <test targets>    (dev/test/tests.mk's `test`; make test-prerequisites
#                                           names what to build first)
#
# The tests start in the order given (the longest first, so that the two lanes end together); a
# test that fails does not stop the others. Exit 1 if any failed. The tests TEST_WAITING names
# (tests.mk: those that spend most of their time waiting for timeouts, hangs and daemons) run one
# after another in a lane of their own beside the others, on the time those leave.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
tests=() waiting=()
for t in "$@"; do
    case " ${TEST_WAITING:-} " in *" $t "*) waiting+=("$t") ;; *) tests+=("$t") ;; esac
done
builds=($(make -s --no-print-directory test-prerequisites 2> /dev/null | sed -n 's/^prerequisite //p'))
[ ${#builds[@]} -gt 0 ] || { echo "run_suite.sh: make test-prerequisites named nothing to build" >&2; exit 1; }
cores=$(nproc 2> /dev/null || echo 1)
jobs=${TEST_JOBS:-$((cores < 2 ? cores : 2))}
case "$jobs" in ''|*[!0-9]*|0) echo "run_suite.sh: TEST_JOBS=$jobs: expected a number of tests at a time, 1 or more" >&2; exit 2 ;; esac
if [ "$jobs" -eq 1 ]; then tests+=("${waiting[@]}"); waiting=(); fi  # one at a time means all of them
LOGS=build/test-logs
rm -rf "$LOGS" && mkdir -p "$LOGS" || exit 1
start=$(date +%s)

echo "make test: building what the tests use (make -j$jobs ...)"
make --no-print-directory -j"$jobs" "${builds[@]}" > "$LOGS/builds.log" 2>&1 \
    || { tail -n 40 "$LOGS/builds.log"; echo "make test: the build failed (the whole log: $LOGS/builds.log)" >&2; exit 1; }
# the feature stamps as the build left them: a test's make that finds them changed rebuilds the
# binaries, maybe two tests the same binary at once (checked at the end)
stamps() { ls -l --time-style=+%s.%N build/features 2> /dev/null; }
stamps_built=$(stamps)
echo "make test: built in $(( $(date +%s) - start )) s; $(( ${#tests[@]} + ${#waiting[@]} )) tests, $jobs at a time and" \
     "${#waiting[@]} that mostly wait beside them (each one's output in $LOGS/<test>.log)"

# the queue: each lane takes the next test in order (a counter under a lock)
echo 0 > "$LOGS/.next"
take() {
    local n
    {
        flock 9
        n=$(cat "$LOGS/.next")
        echo $((n + 1)) > "$LOGS/.next"
    } 9> "$LOGS/.lock"
    echo "$n"
}
# children_cpu: the CPU seconds (user + system) of this shell's finished children so far, into
# $cpu, from the builtin times (into a file: in a command substitution, a subshell would answer,
# whose count starts at 0)
children_cpu() {
    local f=$LOGS/.times.$BASHPID  # (this shell's pid, not the substitution's below)
    times > "$f"
    cpu=$(awk 'NR == 2 { s = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); s += a[1] * 60 + a[2] } printf "%d", s }' "$f")
}
run_one() {  # run_one <target>: its make into its log, its line (wall time, and the CPU time its
    # processes took: which tests wait more than they compute, for the lanes' order)
    local t=$1 t0 c0 cpu rc skips took
    t0=$(date +%s); children_cpu; c0=$cpu
    make --no-print-directory "$t" > "$LOGS/$t.log" 2>&1 < /dev/null
    rc=$?
    echo "$rc" > "$LOGS/$t.rc"
    children_cpu
    took=$(printf '%4d s, CPU %4d s' $(( $(date +%s) - t0 )) $(( cpu - c0 )))
    # a skip's own line ("<what>: SKIPPED (missing: ...); to run it: ..."), as the test printed it
    skips=$(grep '^[^ ].*: SKIPPED' "$LOGS/$t.log")
    if [ $rc -eq 0 ]; then printf 'ok    %-24s %s\n%s' "$t" "$took" "${skips:+$skips$'\n'}"
    else printf 'FAIL  %-24s %s  (exit %d; %s)\n' "$t" "$took" $rc "$LOGS/$t.log"; fi
}
lane() {
    local i
    while i=$(take) && [ "$i" -lt ${#tests[@]} ]; do run_one "${tests[$i]}"; done
}
waiting_lane() {
    local t
    for t in "${waiting[@]}"; do run_one "$t"; done
}
pids=()
for _ in $(seq "$jobs"); do lane & pids+=($!); done
[ ${#waiting[@]} -eq 0 ] || { waiting_lane & pids+=($!); }
# Ctrl-C or a kill: stop the lanes and their tests (each test cleans up on its own signal)
trap 'kill -TERM "${pids[@]}" 2> /dev/null; pkill -TERM -P "$(echo "${pids[@]}" | tr " " ,)" 2> /dev/null; exit 130' INT TERM
wait "${pids[@]}"
trap - INT TERM

failed=()
for t in "${tests[@]}" "${waiting[@]}"; do [ "$(cat "$LOGS/$t.rc" 2> /dev/null)" = 0 ] || failed+=("$t"); done
if [ "$(stamps)" != "$stamps_built" ]; then
    echo "make test: build/features changed while the tests ran (a test's make rebuilt binaries the others use):"
    diff <(echo "$stamps_built") <(stamps) | sed -n 's/^> /  now: /p'
    stamps_changed=1
fi
for t in "${failed[@]}"; do
    echo "======== $t ($LOGS/$t.log):"
    cat "$LOGS/$t.log" 2> /dev/null || echo "(no log: it did not run)"
done
if [ ${#failed[@]} -gt 0 ] || [ -n "${stamps_changed:-}" ]; then
    echo "make test: FAILED:${failed[*]:+ ${failed[*]}}${stamps_changed:+ build/features} ($(( $(date +%s) - start )) s; logs in $LOGS)" >&2
    exit 1
fi
echo "make test: all tests passed ($(( $(date +%s) - start )) s)"
