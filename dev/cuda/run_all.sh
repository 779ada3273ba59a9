#!/usr/bin/env bash
# Builds and runs the kernel workbenches of dev/cuda on a GPU machine; exits non-zero if the build
# or any workbench fails (a workbench exits non-zero on any mismatch).
#
#   dev/cuda/run_all.sh                 all of them (host_logic_test first, attention if present)
#   dev/cuda/run_all.sh matmul adamw    only these
# Environment: CUDA_ARCHS (default 90a), JOBS (parallel compiles, default 8), TIMEOUT (seconds per
# workbench, default 600), SKIP_BUILD=1 to run binaries already in build/cuda.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
build="$here/../../build/cuda"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
    # through the top-level Makefile, which adds cuDNN to the attention workbench when it finds it
    if ! make --no-print-directory -C "$here/../.." -j "${JOBS:-8}" cuda-kernels CUDA_ARCHS="${CUDA_ARCHS:-90a}"; then
        echo "run_all: build failed" >&2
        exit 1
    fi
fi

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    read -r -a names <<< "$(make --no-print-directory -s -C "$here" list)"
fi

failed=()
total_start=$(date +%s)
for name in "${names[@]}"; do
    echo "=== $name"
    start=$(date +%s)
    if [ -x "$build/$name" ]; then
        timeout "${TIMEOUT:-600}" "$build/$name"
        rc=$?
    else
        echo "run_all: $build/$name not built" >&2
        rc=127
    fi
    echo "=== $name: exit $rc, $(( $(date +%s) - start )) s"
    [ $rc -eq 0 ] || failed+=("$name")
done

echo "run_all: ${#names[@]} workbenches in $(( $(date +%s) - total_start )) s"
if [ ${#failed[@]} -gt 0 ]; then
    echo "run_all: FAILED: ${failed[*]}"
    exit 1
fi
echo "run_all: all passed"
