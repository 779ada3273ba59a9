#!/usr/bin/env bash
# Builds karpathy/llm.c's train_gpt2cu, the benchmark peer of dev/bench/bench_gpu.sh, on the GPU
# machine: single GPU, cuDNN attention (USE_CUDNN=1), bf16, for sm_90 (H100/H200). llm.c is only
# measured against, never a source: its tree (commit f1e2ace) is carried unchanged in .carry/llm.c
# and built in a scratch copy, build/llmc/src, with two changes made here at build time:
#   - CUDA 13 fix: llm.c falls back to managed memory when cudaMalloc runs out, through
#     cudaMemAdvise(..., cudaCpuDeviceId), which CUDA 13 no longer accepts (it takes a
#     cudaMemLocation); and managed memory beyond the card's can hang the GPU.
#     The fallback becomes an error exit: an oversized batch fails instead.
#   - links: cuDNN from PyTorch's nvidia-cudnn-cu13 wheel has only libcudnn.so.9, and NVML
#     (llm.c links -lnvidia-ml) only the driver's libnvidia-ml.so.1: unversioned links to both in
#     build/llmc/libs, given to the linker through LIBRARY_PATH (llm.c's Makefile assigns its own
#     flags); the cuDNN headers through CPATH. The frontend headers (1.32) call NVRTC, which
#     llm.c's Makefile (written for older ones) does not link: NVCC_LDLIBS=-lnvrtc (empty otherwise
#     in a single-GPU build).
# cuDNN, NVRTC and the frontend headers: where our Makefile finds them (`make cuda-libs`); the
# frontend in cudnn-frontend/include (`make cudnn-frontend`; carried), or CUDNN_FRONTEND.
# A build whose inputs (sources, frontend version, cuDNN location) are unchanged is kept.
#
# usage: dev/bench/build_llmc.sh     prints the binary's path last; run it with LD_LIBRARY_PATH
#                                    from build/llmc/ld_library_path (cuDNN's and NVRTC's folders)
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SRC=${LLMC_SRC:-$ROOT/.carry/llm.c}
W=$ROOT/build/llmc
PY=${PYTHON:-python3}
die() { echo "build_llmc: $*" >&2; exit 1; }

[ -f "$SRC/train_gpt2.cu" ] || die "no llm.c tree in $SRC (karpathy/llm.c at f1e2ace, unpacked there; carry .carry)"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$NVCC" ] || die "nvcc not found"
# cuDNN, NVRTC and the frontend headers where our own Makefile finds them (CUDA_HOME, CUDNN_HOME,
# CUDNN_FRONTEND, the wheels in $PY's site-packages): the two trainers build against the same ones
LIBS=$(cd "$ROOT" && make --no-print-directory cuda-libs PYTHON="$PY" 2>&1) || die "make cuda-libs failed: $(tail -1 <<< "$LIBS")"
found() { sed -n "s/^cuda-libs $1=//p" <<< "$LIBS"; }
FE=$(found frontend)
[ -f "$FE/cudnn_frontend.h" ] || die "no cuDNN frontend headers (make cudnn-frontend fetches them; carry cudnn-frontend, or set CUDNN_FRONTEND)"
# unversioned <name> <"folder libdir file">: "<include dir> <link dir> <run-time dir>"; llm.c links
# -l<name>, and a wheel has only lib<name>.so.N: the link dir is build/llmc/libs/<name> with
# lib<name>.so pointing at the file
unversioned() {
    local name=$1 dir libdir file
    read -r dir libdir file <<< "$2"
    [ -n "$file" ] || return 0
    mkdir -p "$W/libs/$name" && ln -sf "$libdir/$file" "$W/libs/$name/lib$name.so"
    echo "$dir/include $W/libs/$name $libdir"
}
read -r CUDNN_INC CUDNN_LINK CUDNN_RUN <<< "$(unversioned cudnn "$(found cudnn)")"
[ -n "$CUDNN_INC" ] || die "cuDNN not found (no toolkit or system copy, no nvidia-cudnn-cu13 wheel for $PY; or CUDNN_HOME=dir)"
# the frontend (1.32) calls NVRTC directly (an experimental engine), so llm.c's link needs -lnvrtc
read -r NVRTC_INC NVRTC_LINK NVRTC_RUN <<< "$(unversioned nvrtc "$(found nvrtc)")"
[ -n "$NVRTC_INC" ] || die "NVRTC not found (no toolkit copy, no nvidia-cuda-nvrtc wheel for $PY)"
# the driver's NVML: LLMC_NVML_DIR, the loader's cache, the usual driver folders
nvml=""
for d in ${LLMC_NVML_DIR:-} $(ldconfig -p 2> /dev/null | sed -n 's|.*libnvidia-ml.so.1 .*=> \(.*\)/libnvidia-ml.so.1$|\1|p') \
         /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/cuda/lib64/stubs; do
    if [ -e "$d/libnvidia-ml.so.1" ]; then nvml=$d/libnvidia-ml.so.1; break; fi
    if [ -e "$d/libnvidia-ml.so" ]; then nvml=$d/libnvidia-ml.so; break; fi
done
[ -n "$nvml" ] || die "libnvidia-ml.so.1 (the driver's NVML) not found; set LLMC_NVML_DIR"
mkdir -p "$W/libs/nvml"
ln -sf "$nvml" "$W/libs/nvml/libnvidia-ml.so"
echo "$CUDNN_RUN:$NVRTC_RUN" > "$W/ld_library_path"

stamp=$( { (cd "$SRC" && find . -type f -not -path './.git/*' | LC_ALL=C sort | xargs sha256sum);
           cat "$FE/cudnn_frontend_version.h" 2> /dev/null; echo "$CUDNN_RUN $NVRTC_RUN $nvml $NVCC";
           sha256sum "$0"; } | sha256sum | cut -c1-16)
if [ -x "$W/src/train_gpt2cu" ] && [ "$(cat "$W/stamp" 2> /dev/null)" = "$stamp" ]; then
    echo "build_llmc: up to date (cuDNN from $CUDNN_RUN)"
    echo "$W/src/train_gpt2cu"
    exit 0
fi
rm -rf "$W/src" "$W/stamp"
cp -a "$SRC" "$W/src"
sed -i -e 's|^\( *\)cudaCheck_(cudaMallocManaged(out, bytes), file, line);|\1fprintf(stderr, "out of GPU memory: %zu bytes at %s:%d (benchmark build: no managed-memory fallback)\\n", bytes, file, line); exit(EXIT_FAILURE);|' \
       -e '/cudaMemAdvise(\*out, bytes, cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)/d' "$W/src/llmc/cuda_utils.cuh"
grep -q "no managed-memory fallback" "$W/src/llmc/cuda_utils.cuh" && ! grep -q cudaMemAdvise "$W/src/llmc/cuda_utils.cuh" \
    || die "the managed-memory patch no longer matches llmc/cuda_utils.cuh (another llm.c version?)"
mkdir -p "$W/src/cudnn-frontend" && ln -sfn "$FE" "$W/src/cudnn-frontend/include"  # where llm.c's Makefile looks

echo "build_llmc: cuDNN from $CUDNN_RUN, NVRTC from $NVRTC_RUN, NVML $nvml, frontend $FE"
LIBRARY_PATH="$W/libs/nvml:$CUDNN_LINK:$NVRTC_LINK${LIBRARY_PATH:+:$LIBRARY_PATH}" CPATH="$CUDNN_INC:$NVRTC_INC${CPATH:+:$CPATH}" \
    make --no-print-directory -C "$W/src" train_gpt2cu USE_CUDNN=1 NO_MULTI_GPU=1 NO_USE_MPI=1 \
        GPU_COMPUTE_CAPABILITY=90 PRECISION=BF16 CC=gcc NVCC="$NVCC" CUDNN_FRONTEND_PATH="$FE" NVCC_LDLIBS=-lnvrtc
[ -x "$W/src/train_gpt2cu" ] || die "no binary after the build"
echo "$stamp" > "$W/stamp"
echo "$W/src/train_gpt2cu"
