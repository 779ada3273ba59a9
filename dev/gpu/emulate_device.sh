#!/usr/bin/env bash
# Runs a command in a rehearsal of the GPU machine's library layout (issue 9), so that its first
# call does not fail on a link step. There: nvcc 13 and cuBLAS under /usr/local/cuda; NCCL and cuDNN
# only inside PyTorch's pip packages (nvidia-nccl-cu13: nvidia/nccl/lib/libnccl.so.2,
# nvidia-cudnn-cu13: nvidia/cudnn/lib/libcudnn*.so.9, no unversioned .so) in the site-packages of
# python3 (PyTorch's venv); no OpenMPI; no network. Here the CUDA toolkit has its own cuDNN and NCCL.
#
#   1. once: downloads the wheels that torch 2.11.0 (CUDA 13.0, the GPU machine's) pins,
#      nvidia-cudnn-cu13==9.19.0.56 and nvidia-nccl-cu13==2.28.9 (about 560 MB), into
#      .device_emul/wheels, and unpacks them into the site-packages of a venv (.device_emul/venv, on
#      /usr/bin/python3 with its system packages: torch is importable, as there);
#   2. runs the command as root in new mount and network namespaces (unshare -m -n; loopback only),
#      where the toolkit's and the system's cuDNN and NCCL files and OpenMPI (its programs, headers
#      and libraries) do not exist (read-only overlays with whiteouts over their folders), the
#      loader's cache is rebuilt without them, and python3 on PATH is the venv's. Nothing outside
#      the namespace changes.
#
# usage: dev/gpu/emulate_device.sh <command> [args...]   e.g. dev/gpu/emulate_device.sh make train_gpt2cu
#        dev/gpu/emulate_device.sh --check               the rehearsal: builds train_gpt2cu, test_gpt2cu,
#            build/bench_layers (with cuDNN and NCCL) and the build part of dev/test/test_gpu.sh there,
#            then checks with readelf and ldd that the binaries load libcudnn.so.9 and libnccl.so.2
#            from the wheels. Needs cudnn-frontend/ (make cudnn-frontend, before: it needs network).
# Environment: EMUL_DIR (default <repo>/.device_emul), CUDA_DIR (default: /usr/local/cuda, resolved).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
E=${EMUL_DIR:-$ROOT/.device_emul}
CUDA_DIR=$(readlink -f "${CUDA_DIR:-/usr/local/cuda}")
WHEELS=(nvidia-cudnn-cu13==9.19.0.56 nvidia-nccl-cu13==2.28.9)
die() { echo "emulate_device: $*" >&2; exit 1; }
[ $# -gt 0 ] || die "usage: $0 <command> [args...] | --check"
[ "$(id -u)" = 0 ] || die "needs root (unshare -m, mount)"

# ---- 1. the wheels in a venv's site-packages
if [ ! -f "$E/venv/.wheels_done" ]; then
    mkdir -p "$E/wheels"
    if ! ls "$E"/wheels/nvidia_cudnn_cu13-*.whl "$E"/wheels/nvidia_nccl_cu13-*.whl > /dev/null 2>&1; then
        python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
            --platform manylinux_2_27_x86_64 --platform manylinux_2_18_x86_64 -d "$E/wheels" "${WHEELS[@]}"
    fi
    rm -rf "$E/venv"
    /usr/bin/python3 -m venv --system-site-packages --without-pip "$E/venv"
    site=$("$E/venv/bin/python3" -c 'import site; print(site.getsitepackages()[0])')
    for w in "$E"/wheels/nvidia_cudnn_cu13-*.whl "$E"/wheels/nvidia_nccl_cu13-*.whl; do
        "$E/venv/bin/python3" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$w" "$site"
    done
    touch "$E/venv/.wheels_done"
fi

# ---- 2. the namespace. Each folder below gets a read-only overlay whose top layer holds a whiteout
# (a 0/0 character device) for each hidden name: those names are gone, everything else is as it is.
# <folder>|<extended regex of the names to hide>
HIDE=("$CUDA_DIR/include|^(cudnn|nccl)"
      "$CUDA_DIR/lib|^lib(cudnn|nccl)"
      "/usr/local/include|^(cudnn|nccl)"
      "/usr/include|^(cudnn|nccl|mpi)"
      "/usr/lib/x86_64-linux-gnu|^(lib(cudnn|nccl|mpi|open-pal|open-rte|oshmem)|openmpi$)"
      "/usr/bin|^(mpi|orte|ompi|opal|osh)")

inner() {  # runs inside the namespace
    mount --make-rprivate /
    local i=0 spec dir pat n
    for spec in "${HIDE[@]}"; do
        dir=${spec%%|*} pat=${spec#*|}
        [ -d "$dir" ] || continue
        local wo="$E/ns/whiteouts$i"
        rm -rf "$wo" && mkdir -p "$wo"
        n=0
        while read -r name; do
            mknod "$wo/$name" c 0 0
            n=$((n + 1))
        done < <(ls -A "$dir" | grep -E "$pat" || true)
        [ $n -gt 0 ] && mount -t overlay overlay -o "lowerdir=$wo:$dir" "$dir"
        i=$((i + 1))
    done
    # the loader's cache without the hidden libraries (the real cache file is left alone)
    ldconfig -C "$E/ns/ld.so.cache" 2> /dev/null
    mount --bind "$E/ns/ld.so.cache" /etc/ld.so.cache
    ip link set lo up 2> /dev/null || true
    export PATH="$E/venv/bin:$PATH"
    unset PYTHON LD_LIBRARY_PATH
    cd "$ROOT"
    "$@"
}

# ---- the rehearsal: build as the GPU machine would, then check where the libraries come from
check() {
    [ -f cudnn-frontend/include/cudnn_frontend.h ] || die "no cudnn-frontend/include: run make cudnn-frontend first (it needs network)"
    local site fail=0 out
    site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
    echo "== inside: python3 = $(command -v python3); mpicc: $(command -v mpicc || echo none);" \
         "$CUDA_DIR/include/cudnn.h: $(test -e "$CUDA_DIR/include/cudnn.h" && echo present || echo absent);" \
         "$CUDA_DIR/lib/libnccl.so.2: $(test -e "$CUDA_DIR/lib/libnccl.so.2" && echo present || echo absent)"
    out=$(mktemp -d)
    # from scratch: binaries built outside the namespace are linked against the toolkit's libraries
    rm -f train_gpt2cu test_gpt2cu build/bench_layers build/cudnn_att.o
    echo "== make train_gpt2cu test_gpt2cu build/bench_layers CUDA_ARCHS=90a"
    make --no-print-directory -j "$(nproc)" train_gpt2cu test_gpt2cu build/bench_layers CUDA_ARCHS=90a > "$out/make.log" 2>&1 ||
        { fail=1; tail -20 "$out/make.log"; }
    grep -E "^(nvcc|cuDNN|NCCL|MPI/CUDA):" "$out/make.log" | sed 's/^/   /'
    echo "== dev/test/test_gpu.sh build (its summary):"
    OUT=$out bash dev/test/test_gpu.sh build > /dev/null 2>&1 || fail=1
    sed 's/^/   /' "$out/summary.txt"
    for b in train_gpt2cu test_gpt2cu build/bench_layers; do
        echo "== $b"
        readelf -d "$b" | grep -E "NEEDED.*(cudnn|nccl|nvrtc|mpi)|RUNPATH|RPATH" | sed 's/^ */   /'
        for lib in libcudnn.so.9 libnccl.so.2; do
            local where
            where=$(ldd "$b" | awk -v l="$lib" '$1 == l {print $3}')
            if [[ "$where" == "$site"/nvidia/* ]]; then
                echo "   ok   $lib => $where"
            else
                echo "   FAIL $lib => ${where:-not found} (expected under $site/nvidia)"; fail=1
            fi
        done
    done
    # the loader resolves everything: the trainer starts and stops only at the missing GPU
    if ./train_gpt2cu -at cudnn -e d12 > "$out/start.txt" 2>&1 || ! grep -q "no CUDA GPU is visible" "$out/start.txt"; then
        echo "   FAIL ./train_gpt2cu did not start up to the GPU check:"; tail -3 "$out/start.txt"; fail=1
    else
        echo "   ok   ./train_gpt2cu -at cudnn starts (all libraries load) and stops at: $(tail -1 "$out/start.txt" | cut -c1-60)..."
    fi
    rm -rf "$out"
    [ $fail = 0 ] && echo "emulate_device: the GPU machine's layout builds and links" || echo "emulate_device: FAILED"
    return $fail
}

mkdir -p "$E/ns"
export E ROOT CUDA_DIR
export -f inner check die
HIDE_STR=$(printf '%s\n' "${HIDE[@]}")
export HIDE_STR
if [ "$1" = --check ]; then set -- check; fi
exec unshare -m -n bash -c 'mapfile -t HIDE <<< "$HIDE_STR"; set -euo pipefail; inner "$@"' emulate "$@"
