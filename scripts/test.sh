#!/usr/bin/env bash
# The test suite in one command: set up this machine, then `make test`.
#
#   bash scripts/test.sh [test targets ...]      (default: test, the whole suite; e.g. test-data)
#
# Installs (once; run again, it installs nothing) the system packages below with apt-get, as root
# or through sudo (without either, or without apt-get, it goes on where the machine has the build
# tools anyway, and the tests skip what is missing; else it says what to install), and the PyPI test
# references for /usr/bin/python3 (Debian's PyTorch lives there). A test that cannot run here (no
# nvcc, no ../shared/data) says SKIPPED with what is missing; with CI=true it fails instead
# (.ci/run). The CUDA toolkit is not installed: without nvcc the CUDA compile tests are skipped.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup_lib.sh

# compilers, make and the tools the tests use; OpenBLAS (OpenMP build), OpenMPI, PCRE2; for the
# multi-host test, network namespaces (iproute2) and a SLURM of its own (slurmctld, slurmd, munge:
# the test starts and stops them itself, with its own configuration); the test scripts' Python
# (numpy, matplotlib, pip); clang and its sanitizer/fuzzer runtime for the fuzz and sanitizer
# tests (libclang-rt-dev: the runtime of the default clang, libclang-rt-14-dev on Debian 12;
# Ubuntu 22.04's clang has it inside and no such package); the aarch64 cross compilers and
# qemu-user, which run the ARM64 builds (test-aarch64)
need_packages --have have_build_tools build-essential pkg-config xz-utils procps \
    libopenblas-openmp-dev openmpi-bin libopenmpi-dev libpcre2-dev \
    iproute2 slurmctld slurmd slurm-client munge \
    python3-numpy python3-matplotlib python3-pip python3-protobuf \
    clang '?libclang-rt-dev' gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user
# the PyTorch reference: Debian 12's python3-torch (1.13), else PyTorch's CPU wheel (setup_lib.sh)
need_torch /usr/bin/python3
# independent references from PyPI: tiktoken (tokenizer ids), transformers (export check),
# tensorboard (its EventAccumulator reads -tb 1's events files). 4.45.2 is the newest transformers
# whose generate() imports next to Debian's torch 1.13; tensorboard 2.20.0 the newest that keeps
# Debian's protobuf (python3-protobuf, 4.21) and numpy: 2.21.0 pulls protobuf 7 from PyPI over them.
need_pypi /usr/bin/python3 "from importlib.metadata import version as v; v('tiktoken'); assert v('transformers') == '4.45.2'; assert v('tensorboard') == '2.20.0'; import tensorboard.backend.event_processing.event_accumulator" \
    tiktoken 'transformers==4.45.2' 'tensorboard==2.20.0'
if [ "${DRY_RUN:-0}" = 1 ]; then exit 0; fi
# with the CUDA toolkit: the cuDNN frontend's headers (PyPI, once), so that test-cuda-build also
# compiles the cuDNN attention
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
    make --no-print-directory cudnn-frontend
fi

targets=("${@:-test}")
start=$(date +%s)
make "${targets[@]}"
echo "scripts/test.sh: make ${targets[*]} took $(( $(date +%s) - start )) s"
