#!/usr/bin/env bash
# Binaries built on the build machine for the lent GPU machine. A GPU session has 15 minutes of
# device time, and building there (the cuDNN object, four trainer-sized compiles, llm.c, the
# workbenches) would take two of them, on every fresh machine. The build machine has the same
# CUDA 13.0, and dev/gpu/emulate_device.sh gives it the GPU machine's NCCL and cuDNN wheels and the
# OpenMPI of .carry/debs; so it builds every CUDA binary a GPU call runs, and this script packs them
# into .carry/prebuilt (carried with .carry): binaries.tar.xz (the 17 binaries, 31 MB, are 3.4 MB
# compressed: less of the 64 MiB a call carries, and a shorter transfer, which is device time)
# and MANIFEST, with the digest of the sources they came from. On the GPU machine
# dev/test/test_gpu.sh's build part installs them when the tree there has that digest and every
# binary finds its libraries; otherwise it builds them there, as before.
#
#   dev/gpu/prebuilt.sh build     build machine (root, network for the first setup): builds in the
#                                 emulated layout (test_gpu.sh build, the workbenches), then packs
#   dev/gpu/prebuilt.sh pack      packs what is built (the build form runs it)
#   dev/gpu/prebuilt.sh install [BINARY...]
#                                 GPU machine: all of them, or only those named (e.g.
#                                 build/single_gpu/train_gpt2cu, which needs no MPI): checks the
#                                 digest, unpacks (Python's lzma: no xz binary needed) into
#                                 build/prebuilt/stage, checks each binary's libraries and symbols
#                                 (ldd -r, with LD_LIBRARY_PATH + the NCCL, cuDNN and NVRTC folders
#                                 found there), then copies them into place and writes that
#                                 library path to build/prebuilt/ld_library_path; exit 0 only when
#                                 installed
#   dev/gpu/prebuilt.sh digest    the sources' digest
#   dev/gpu/prebuilt.sh list      the binaries it packs, one a line
#
# The CPU trainer is not packed: Debian's OpenBLAS is not on the GPU machine, and it builds there
# in seconds.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
PACK=${PREBUILT_DIR:-.carry/prebuilt}
# what the GPU calls run: the trainer and its tests and benchmarks, the sm_80-only trainer, the
# drop-wait test build, the one-GPU trainer (the scaled reproduction), the kernel workbenches,
# llm.c's trainer
BINARIES=(train_gpt2cu test_gpt2cu build/bench_layers build/drop_wait/train_gpt2cu build/arch_80/train_gpt2cu
          build/single_gpu/train_gpt2cu
          build/cuda/host_logic_test build/cuda/encoder build/cuda/layernorm build/cuda/matmul build/cuda/gelu build/cuda/fused_classifier
          build/cuda/adamw build/cuda/muon build/cuda/global_norm build/cuda/attention build/llmc/src/train_gpt2cu)
die() { echo "prebuilt: $*" >&2; exit 1; }

# Every file a binary above is compiled from: the sources and build files of this tree (the same
# list with or without .git: the GPU machine's copy has none) and llm.c's carried tree, with
# their names, so that a renamed file changes it too.
digest() {
    { find . \( -path ./build -o -path ./.git -o -path ./.carry -o -path ./cudnn-frontend -o -path ./data \
                -o -path ./dev/test/fixtures -o -path ./gpu_out \) -prune -o -type f \
                \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' \
                -o -name 'Makefile' -o -name '*.mk' -o -name build_llmc.sh \) -print
      find .carry/llm.c -type f 2> /dev/null; } | LC_ALL=C sort | xargs -d '\n' sha256sum | sha256sum | cut -c1-16
}

pack() {
    local b missing=()
    for b in "${BINARIES[@]}"; do [ -x "$b" ] || missing+=("$b"); done
    [ ${#missing[@]} -eq 0 ] || die "not built: ${missing[*]} (dev/gpu/prebuilt.sh build builds them)"
    rm -rf "$PACK" && mkdir -p "$PACK"
    tar -cf - "${BINARIES[@]}" | xz -T0 -6 > "$PACK/binaries.tar.xz" || die "could not pack the binaries"
    {
        echo "digest $(digest)"
        echo "commit $(git rev-parse --short HEAD 2> /dev/null || echo unknown)$([ -n "$(git status --porcelain 2> /dev/null)" ] && echo ' (with uncommitted changes)')"
        echo "built $(date -u +%FT%TZ) on $(hostname), $(nvcc --version 2> /dev/null | grep -o 'release [0-9.]*')"
        echo "train_gpt2cu loads $(readelf -d train_gpt2cu | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -E 'cudnn|nccl|mpi|cublas|nvrtc' | paste -sd' ')"
    } > "$PACK/MANIFEST"
    echo "prebuilt: ${#BINARIES[@]} binaries ($(du -cb "${BINARIES[@]}" | tail -1 | cut -f1) bytes), $(du -b "$PACK/binaries.tar.xz" | cut -f1) bytes packed, in $PACK"
    cat "$PACK/MANIFEST"
}

build() {
    [ -f cudnn-frontend/include/cudnn_frontend.h ] || die "no cudnn-frontend/include: make cudnn-frontend first (it needs network)"
    [ -f .carry/llm.c/train_gpt2.cu ] || die "no .carry/llm.c (karpathy/llm.c at f1e2ace, unpacked there)"
    ls .carry/debs/*.deb > /dev/null 2>&1 || die "no .carry/debs (dev/gpu/fetch_debs.sh): the MPI the binaries link must be the carried one"
    local out
    out=$(mktemp -d)
    # the build part of test_gpu.sh (MPI from .carry/debs, NCCL and cuDNN from the wheels), then
    # the workbenches, then pack, all inside the emulated layout
    OUT=$out TEST_GPU_PREBUILT=no TEST_GPU_MPI=carry dev/gpu/emulate_device.sh bash -c \
        'bash dev/test/test_gpu.sh build && make --no-print-directory -j "$(nproc)" cuda-kernels build/single_gpu/train_gpt2cu CUDA_ARCHS=90a && bash dev/gpu/prebuilt.sh pack'
    local rc=$?
    sed 's/^/  /' "$out/summary.txt" 2> /dev/null
    rm -rf "$out"
    return $rc
}

# the folders of the NCCL, cuDNN and NVRTC libraries on this machine (the Makefile's search), for
# binaries whose run paths point at the build machine's
lib_path() {
    make --no-print-directory cuda-libs PYTHON="${PYTHON:-python3}" 2> /dev/null \
        | awk '$2 ~ /^(cudnn|nvrtc|nccl)=/ && NF >= 4 { print $3 }' | awk '!seen[$0]++' | paste -sd:
}

install() {
    [ -f "$PACK/MANIFEST" ] && [ -f "$PACK/binaries.tar.xz" ] || die "no $PACK (dev/gpu/prebuilt.sh build, on the build machine, makes it)"
    local want have libs b bad=() stage=build/prebuilt/stage
    if [ $# -gt 0 ]; then
        for b in "$@"; do [[ " ${BINARIES[*]} " == *" $b "* ]] || die "$b is not one of the prebuilt binaries (${BINARIES[*]})"; done
        BINARIES=("$@")
    fi
    want=$(sed -n 's/^digest //p' "$PACK/MANIFEST")
    have=$(digest)
    [ "$want" = "$have" ] || die "$PACK was built from other sources (digest $want, this tree $have): building here"
    rm -rf "$stage" && mkdir -p "$stage"
    "${PYTHON:-python3}" -c 'import sys, tarfile
kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # no links or paths out of the folder
tarfile.open(sys.argv[1]).extractall(sys.argv[2], **kw)' "$PACK/binaries.tar.xz" "$stage" 2> "$stage.err" \
        || die "could not unpack $PACK/binaries.tar.xz ($(tail -1 "$stage.err")): building here"
    libs=$(lib_path)
    export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    for b in "${BINARIES[@]}"; do
        [ -x "$stage/$b" ] || { bad+=("$b: missing"); continue; }
        local miss
        # -r: the symbols too, so that an older NCCL or cuDNN there that lacks one is caught here
        miss=$(ldd -r "$stage/$b" 2>&1 | grep -E "not found|not a dynamic|undefined symbol" | tr -s ' \t' ' ' \
               | sed "s/^ //; s| ($stage/[^)]*)||" | head -3 | paste -sd';' | sed 's/;/; /g')
        [ -z "$miss" ] || bad+=("$b: $miss")
    done
    [ ${#bad[@]} -eq 0 ] || die "not usable ($(printf '%s; ' "${bad[@]}" | sed 's/; $//')): building here"
    for b in "${BINARIES[@]}"; do mkdir -p "$(dirname "$b")" && cp -f "$stage/$b" "$b"; done
    rm -rf "$stage" "$stage.err"
    mkdir -p build/prebuilt && echo "$LD_LIBRARY_PATH" > build/prebuilt/ld_library_path
    local what="all ${#BINARIES[@]} binaries"
    [ $# -gt 0 ] && what="$*"
    echo "prebuilt: installed $what, $(grep -E '^(commit|built) ' "$PACK/MANIFEST" | paste -sd' ' -)"
    echo "prebuilt: library path $LD_LIBRARY_PATH"
}

case "${1:-}" in
    digest) digest ;;
    list) printf '%s\n' "${BINARIES[@]}" ;;
    pack) pack ;;
    build) build ;;
    install) shift; install "$@" ;;
    *) echo "usage: $0 build | pack | install [BINARY...] | digest | list" >&2; exit 2 ;;
esac
