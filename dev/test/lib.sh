# Shared by the trainer test scripts (sourced): a temporary working directory, the trainer under
# test, mpirun flags for small machines, failure bookkeeping and loss comparisons.
#   source "$(dirname "$0")/lib.sh" <name> [trainer]     (run from the repo root)
# Provides: TRAINER (absolute path), PY, ROOT, TMP (the cwd afterwards; removed on exit), MPIRUN,
# bad <message>, finish <name>, train_losses <main.log>, compare_losses <a> <b> <tolerance>.
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
