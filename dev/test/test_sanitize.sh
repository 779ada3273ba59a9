#!/usr/bin/env bash
# The CPU suite's core under AddressSanitizer and UBSan (make test-sanitize): the tiny model test,
# the loader test, bad input and resume, with the binaries of BUILD (built with
# -fsanitize=address,undefined). Every report goes to a file under BUILD/reports, whatever the
# exit code of the process that made it (killed runs, ranks under mpirun); the target passes only
# if there are none.
#   bash dev/test/test_sanitize.sh BUILD FIXTURES
set -u
BUILD=$(realpath "$1") FIXTURES=$2
REPORTS=$BUILD/reports
rm -rf "$REPORTS" && mkdir -p "$REPORTS"
# leaks: the MPI, OpenMP and OpenBLAS runtimes keep memory until exit by design; ours must not
export LSAN_OPTIONS=suppressions=$(realpath dev/test/lsan.supp):print_suppressions=0
export ASAN_OPTIONS=log_path=$REPORTS/asan:exitcode=86:detect_leaks=1
export UBSAN_OPTIONS=log_path=$REPORTS/ubsan:print_stacktrace=1:halt_on_error=1:exitcode=86
fail=0
step() {
    local name=$1; shift
    local t0=$SECONDS
    if "$@" > "$REPORTS/../$name.log" 2>&1; then echo "ok   $name ($((SECONDS - t0)) s)"; else
        echo "FAIL $name: exit code $? (log $BUILD/$name.log)"; tail -5 "$REPORTS/../$name.log"; fail=1; fi
}
step model  "$BUILD/test_gpt2" "$FIXTURES/tiny.bin" "$FIXTURES/tiny_state.bin" "$FIXTURES/tiny_traj.txt"
step loader "$BUILD/test_dataloader"
step bad_input bash dev/test/test_bad_input.sh "$BUILD/train_gpt2"
# resume runs ranks under mpirun; OpenMPI unloads its plugins before LeakSanitizer looks, so their
# allocations can be neither attributed nor suppressed: leak checks off here, every other check on
ASAN_OPTIONS=${ASAN_OPTIONS/detect_leaks=1/detect_leaks=0} step resume bash dev/test/test_resume.sh "$BUILD/train_gpt2"
n=$(ls "$REPORTS" | wc -l)
if [ "$n" -ne 0 ]; then
    echo "FAIL: $n sanitizer report(s) in $REPORTS:"
    for f in "$REPORTS"/*; do echo "--- $f"; head -20 "$f"; done
    fail=1
fi
if [ $fail -ne 0 ]; then echo "test_sanitize: FAILED"; exit 1; fi
echo "test_sanitize: all checks passed, no sanitizer reports"
