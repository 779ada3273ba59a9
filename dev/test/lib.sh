# Shared by the test scripts (sourced): a temporary working directory, the trainer under test,
# mpirun flags for small machines, failure bookkeeping, loss comparisons, and what a test does
# when something it needs is missing.
#   source "$(dirname "$0")/lib.sh" <name> [trainer]     (run from the repo root)
#   source "$(dirname "$0")/lib.sh" --skip-only          (only skip_or_fail; no directory, no cd)
# Provides: TRAINER (absolute path), PY, ROOT, TMP (the cwd afterwards; removed on exit), MPIRUN,
# have_mpi [binary], MPI_HINT, bad <message>, finish <name>, train_losses <main.log>, compare_losses <a> <b> <tolerance>,
# skip_or_fail <test> <what is missing> <command that provides it>.

# skip_or_fail TEST WHAT HINT: TEST (a test, or one part of it) cannot run because WHAT is missing.
# For a user that is a skip which says what is missing and HINT, the command that provides it;
# with CI=true (.ci/run) it is a failure, so CI never passes a test it did not run. Returns 0 for
# a skip and 1 for a failure: end a whole test with `skip_or_fail ...; exit`, a part with
# `skip_or_fail ... || bad ...`. The Makefile calls it as well (SKIP_OR_FAIL in dev/test/tests.mk).
skip_or_fail() {
    if [ "${CI:-}" = true ]; then
        echo "FAIL: $1: cannot run (missing: $2; with CI=true a skip is a failure); to run it: $3"
        return 1
    fi
    echo "$1: SKIPPED (missing: $2); to run it: $3"
}
[ "${1:-}" = --skip-only ] && return 0

set -u
TEST_NAME=$1
TRAINER=$(realpath "${2:-./train_gpt2}")
PY=${PYTHON:-/usr/bin/python3}
ROOT=$(pwd)
TMP=$(mktemp -d "/tmp/$TEST_NAME.XXXXXX")
# kill what the test left running (a killed run's mpirun, a backgrounded trainer), then clean up
trap 'pkill -9 -f "$TMP" 2>/dev/null; rm -rf "$TMP"' EXIT
# one thread per process: the tests run several ranks on two cores
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
# have_mpi [binary]: mpirun is here and the binary (default: the trainer) was built with MPI
have_mpi() { command -v mpirun >/dev/null 2>&1 && ldd "${1:-$TRAINER}" 2>/dev/null | grep -q libmpi; }
MPI_HINT="apt-get install openmpi-bin libopenmpi-dev, then make clean && make"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
finish() {
    if [ $fail -ne 0 ]; then echo "$TEST_NAME: FAILED"; exit 1; fi
    echo "$TEST_NAME: all checks passed"
}
cd "$TMP"

# "<step> <loss>" per optimizer step of a main.log, as logged (9 significant digits)
train_losses() { grep -o 's:[0-9]* trl:[^ ]*' "$1" | sed 's/s://; s/trl://'; }

# compare two "<step> <value>" lists: same steps, relative difference <= tolerance (0: equal strings)
compare_losses() {
    $PY - "$1" "$2" "$3" <<'PYEOF'
import sys
a = [l.split() for l in open(sys.argv[1]) if l.strip()]
b = [l.split() for l in open(sys.argv[2]) if l.strip()]
tol = float(sys.argv[3])
if not a or [x[0] for x in a] != [x[0] for x in b]:
    print(f"steps differ: {[x[0] for x in a]} vs {[x[0] for x in b]}"); sys.exit(1)
worst = 0.0
for (s, x), (_, y) in zip(a, b):
    if tol == 0:
        if x != y: print(f"step {s}: {x} != {y}"); sys.exit(1)
    else:
        d = abs(float(x) - float(y)) / abs(float(y)); worst = max(worst, d)
        if d > tol: print(f"step {s}: {x} vs {y} (relative {d:.2e} > {tol})"); sys.exit(1)
print(f"  {len(a)} values agree (worst relative difference {worst:.1e}, tolerance {tol})")
PYEOF
}
