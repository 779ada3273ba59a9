#!/usr/bin/env bash
# The CPU suite's core under AddressSanitizer and UBSan (make test-sanitize): the tiny model tests,
# the loader test, bad input and resume, with the binaries of BUILD (built with
# -fsanitize=address,undefined); and the trainer's threads under ThreadSanitizer (test_threads.sh,
# BUILD/train_gpt2_tsan). Every report goes to a file under BUILD/reports, whatever the
# exit code of the process that made it (killed runs, ranks under mpirun); the target passes only
# if there are none. Each step's output goes to BUILD/<step>.log.
#   bash dev/test/test_sanitize.sh BUILD FIXTURES      (from the repo root)
# lib.sh for bad/finish (its TMP, the cwd, is unused: the logs and reports stay in BUILD to be read)
[ $# -eq 2 ] || { echo "usage: bash dev/test/test_sanitize.sh BUILD FIXTURES (or: make test-sanitize)" >&2; exit 1; }
BUILD=$(realpath "$1") FIXTURES=$(realpath "$2")
source "$(dirname "$0")/lib.sh" test_sanitize
REPORTS=$BUILD/reports
rm -rf "$REPORTS" && mkdir -p "$REPORTS"
# leaks: the MPI, OpenMP and OpenBLAS runtimes keep memory until exit by design; ours must not
export LSAN_OPTIONS=suppressions=$ROOT/dev/test/lsan.supp:print_suppressions=0
# detect_stack_use_after_return=0: GCC 13's libasan (Ubuntu 24.04) moves stack frames to its fake
# stack, aligned to less than the 64 bytes of the built-in matmul's AVX-512 vector locals, whose
# aligned stores there then fault (vmovaps, in gemm_micro); GCC 12's had it off by default
export ASAN_OPTIONS=log_path=$REPORTS/asan:exitcode=86:detect_leaks=1:detect_stack_use_after_return=0
export UBSAN_OPTIONS=log_path=$REPORTS/ubsan:print_stacktrace=1:halt_on_error=1:exitcode=86
step() {
    local name=$1; shift
    local t0=$SECONDS
    if "$@" > "$BUILD/$name.log" 2>&1; then ok "$name ($((SECONDS - t0)) s)"; else
        bad "$name: exit code $? (log $BUILD/$name.log)"; tail -5 "$BUILD/$name.log"; fi
}
step model  "$BUILD/test_gpt2" "$FIXTURES/tiny.bin" "$FIXTURES/tiny_state.bin" "$FIXTURES/tiny_traj.txt"
# T=300: the attention's query blocks past the first (their products, workspace and masks)
step model_t300 "$BUILD/test_gpt2" "$FIXTURES/tiny300.bin" "$FIXTURES/tiny300_state.bin" "$FIXTURES/tiny300_traj.txt" nockpt
step loader "$BUILD/test_dataloader"
step bad_input bash "$ROOT/dev/test/test_bad_input.sh" "$BUILD/train_gpt2"
# resume runs ranks under mpirun; OpenMPI unloads its plugins before LeakSanitizer looks, so their
# allocations can be neither attributed nor suppressed: leak checks off here, every other check on.
# RESUME_LEAN=1: each of the C trainer's paths once (without the PyTorch twin's runs, which these builds
# do not change, the torchrun stops that differ only in torchrun's part, the recipe scripts' relaunches)
ASAN_OPTIONS=${ASAN_OPTIONS/detect_leaks=1/detect_leaks=0} RESUME_LEAN=1 step resume bash "$ROOT/dev/test/test_resume.sh" "$BUILD/train_gpt2"
# the threads (the checkpoint writer, MPI's, a signal on another thread) under ThreadSanitizer.
# PMIX_MCA_gds=hash: PMIx 5 (Ubuntu 24.04's OpenMPI) keeps the job's data in a shared-memory segment
# that each rank maps at the address its launcher chose, which TSan's memory layout does not leave
# free; MPI_Init then read through a null pointer in every rank (pmix_gds_shmem_fetch). The hash
# store (PMIx 4's only one, as on Debian 12) needs no fixed address.
PMIX_MCA_gds=hash TSAN_OPTIONS=log_path=$REPORTS/tsan:exitcode=86:halt_on_error=0 step threads bash "$ROOT/dev/test/test_threads.sh" "$BUILD/train_gpt2_tsan"
n=$(ls "$REPORTS" | wc -l)
if [ "$n" -ne 0 ]; then
    bad "$n sanitizer report(s) in $REPORTS:"
    for f in "$REPORTS"/*; do echo "--- $f"; head -20 "$f"; done
else
    ok "no sanitizer reports in $REPORTS"
fi
finish
