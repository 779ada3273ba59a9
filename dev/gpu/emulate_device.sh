#!/usr/bin/env bash
# Runs a command on this (GPU-less) machine in the software layout of the lent GPU machine, so that
# the builds and the scripts a GPU session runs can be tried here first (nothing CUDA runs
# here). On the GPU machine: nvcc 13 and cuBLAS under /usr/local/cuda; NCCL and cuDNN only inside
# PyTorch's pip packages (nvidia-nccl-cu13: nvidia/nccl/lib/libnccl.so.2, nvidia-cudnn-cu13:
# nvidia/cudnn/lib/libcudnn*.so.9, no unversioned .so) in the site-packages of python3; no OpenMPI;
# no network. So, for the command:
#   - the wheels that torch 2.11.0 (CUDA 13.0) pins, nvidia-cudnn-cu13==9.19.0.56 and
#     nvidia-nccl-cu13==2.28.9, unpacked into the site-packages of a venv (on /usr/bin/python3 with
#     its system packages: torch stays importable) that is python3 on PATH;
#   - the toolkit's own NCCL and cuDNN hidden, and every file of the OpenMPI packages (programs,
#     headers, libraries, PMIx/hwloc/libevent, plugins), so that the carried packages
#     (dev/gpu/fetch_debs.sh) are proven complete; the loader's cache rebuilt without them;
#   - the driver's libnvidia-ml.so.1 stood in for by an empty library (llm.c links -lnvidia-ml;
#     LLMC_NVML_DIR points dev/bench/build_llmc.sh at it);
#   - no network (a new network namespace with loopback only).
# The hiding happens in private mount and network namespaces (unshare -m -n, needs root): read-only
# overlays with whiteouts, and empty files bind-mounted over the rest; nothing changes for other
# processes.
#
#   dev/gpu/emulate_device.sh setup          once, with network: the wheels and the venv in build/emu
#                                            (about 600 MB; done by the other forms when missing)
#   dev/gpu/emulate_device.sh <command...>   e.g. dev/gpu/emulate_device.sh bash dev/test/test_gpu.sh build
#   dev/gpu/emulate_device.sh --check        the rehearsal: builds train_gpt2cu, test_gpt2cu and
#       build/bench_layers (with cuDNN and NCCL) and the build part of dev/test/test_gpu.sh there,
#       then checks with readelf and ldd that the binaries load libcudnn.so.9 and libnccl.so.2 from
#       the wheels. Needs cudnn-frontend/ (make cudnn-frontend, before: it needs network).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
EMU=${EMU_DIR:-$ROOT/build/emu}
WHEELS=(nvidia-nccl-cu13==2.28.9 nvidia-cudnn-cu13==9.19.0.56)
MPI_PKGS=(openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libpmix2 libhwloc15 libevent-core-2.1-7
          libevent-pthreads-2.1-7 libfabric1 libucx0 ibverbs-providers librdmacm1 libpsm2-2 libpsm-infinipath1
          libmunge2)
die() { echo "emulate_device: $*" >&2; exit 1; }

setup() {
    rm -rf "$EMU/venv" && mkdir -p "$EMU/wheels" "$EMU/driver"  # wheels already there are kept
    /usr/bin/python3 -m venv --system-site-packages --without-pip "$EMU/venv"
    python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_18_x86_64 -d "$EMU/wheels" "${WHEELS[@]}"
    local sp
    sp=$("$EMU/venv/bin/python3" -c "import site; print(site.getsitepackages()[0])")
    for w in "$EMU"/wheels/*.whl; do
        "$EMU/venv/bin/python3" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$w" "$sp"
    done
    echo "" | cc -shared -Wl,-soname,libnvidia-ml.so.1 -x c - -o "$EMU/driver/libnvidia-ml.so.1"
    touch "$EMU/venv/.wheels_done"
    echo "emulate_device: wheels in $sp/nvidia, NVML stand-in in $EMU/driver"
}

# the rehearsal (runs inside the namespace): build as the GPU machine would, then check where the
# libraries come from
check() {
    [ -f cudnn-frontend/include/cudnn_frontend.h ] || die "no cudnn-frontend/include: run make cudnn-frontend first (it needs network)"
    local site fail=0 out
    site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
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
    # the loader resolves everything: the trainer starts and stops only at the missing GPU (or driver);
    # a shard of its own, since the data flags are checked before the GPU
    python3 dev/bench/make_random_shard.py "$out/x.bin" 4096 1 > /dev/null
    # (with the OpenMPI that test_gpu.sh unpacked, on the library path as test_gpu.sh sets it)
    local mpi_lib=$ROOT/build/gpu_test/mpi/usr/lib/x86_64-linux-gnu
    if LD_LIBRARY_PATH=$mpi_lib:$mpi_lib/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
        ./train_gpt2cu -at cudnn -e d12 -i "$out/x.bin" -v 0 > "$out/start.txt" 2>&1 || ! grep -qE "no CUDA GPU is visible|no NVIDIA driver is installed" "$out/start.txt"; then
        echo "   FAIL ./train_gpt2cu did not start up to the GPU check:"; tail -3 "$out/start.txt"; fail=1
    else
        echo "   ok   ./train_gpt2cu -at cudnn starts (all libraries load) and stops at: $(tail -1 "$out/start.txt" | cut -c1-60)..."
    fi
    rm -rf "$out"
    [ $fail = 0 ] && echo "emulate_device: the GPU machine's layout builds and links" || echo "emulate_device: FAILED"
    return $fail
}

if [ "${1:-}" = setup ]; then setup; exit 0; fi
[ $# -gt 0 ] || { echo "usage: $0 setup | --check | <command...>" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "needs root (unshare -m -n, mount)"
[ -f "$EMU/venv/.wheels_done" ] || setup

# the files to hide: the toolkit's NCCL and cuDNN, and the files of the OpenMPI packages
CUDA=$(readlink -f /usr/local/cuda)
CUDA_LIB=$(readlink -f "$CUDA/lib64")
# this run's own folder (runs may overlap): the list, the overlays' layers; removed at the end
OV=$(mktemp -d "$EMU/run.XXXXXX")
LIST=$OV/hidden.txt
{
    ls -d "$CUDA"/include/nccl* "$CUDA"/include/cudnn* "$CUDA_LIB"/libnccl* "$CUDA_LIB"/libcudnn* 2> /dev/null || true
    for p in "${MPI_PKGS[@]}"; do
        dpkg -L "$p" 2> /dev/null | while read -r f; do if [ -f "$f" ] || [ -L "$f" ]; then echo "$f"; fi; done
    done
} | sort -u > "$LIST"
: > "$OV/empty_file" && chmod 000 "$OV/empty_file"
mkdir -p "$OV/empty_dir"

# Where programs, headers and libraries are looked up, hidden entries must be absent, not empty: those
# folders get an overlay in which they are whiteouts (0/0 character devices). OpenMPI's own folders
# become empty folders (build scripts test for them, PMIx looks there for plugins); the rest
# (documentation) is covered by an empty file.
OVERLAYS=(/usr/bin "$CUDA/include" "$CUDA_LIB" /usr/lib/x86_64-linux-gnu /usr/include)
WHOLE=(/usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/share/openmpi /etc/openmpi)
for i in "${!OVERLAYS[@]}"; do
    mkdir -p "$OV/upper$i" "$OV/work$i"
    while read -r f; do
        if [ "${f%/*}" = "${OVERLAYS[$i]}" ]; then mknod "$OV/upper$i/${f##*/}" c 0 0; fi
    done < "$LIST"
done
export EMU_LIST=$LIST EMU_FILE=$OV/empty_file EMU_DIRX=$OV/empty_dir EMU_OV=$OV ROOT
export EMU_OVERLAYS="${OVERLAYS[*]}" EMU_WHOLE="${WHOLE[*]}"
export PATH="$EMU/venv/bin:$PATH" LLMC_NVML_DIR="$EMU/driver"
unset PYTHON LD_LIBRARY_PATH
export -f check die
if [ "$1" = --check ]; then set -- check; fi
rc=0
unshare -m -n --propagation private bash -c '
    i=0
    for o in $EMU_OVERLAYS; do
        mount -t overlay overlay -o "lowerdir=$o,upperdir=$EMU_OV/upper$i,workdir=$EMU_OV/work$i" "$o"
        i=$((i + 1))
    done
    for w in $EMU_WHOLE; do if [ -d "$w" ]; then mount --bind "$EMU_DIRX" "$w"; fi; done
    # the other files (documentation): covered by an empty file
    while read -r f; do
        d=${f%/*} skip=0
        for o in $EMU_OVERLAYS; do [ "$d" = "$o" ] && skip=1; done
        for w in $EMU_WHOLE; do case "$d/" in "$w"/*) skip=1;; esac; done
        if [ $skip = 0 ] && [ -f "$f" ] && [ ! -L "$f" ]; then mount --bind "$EMU_FILE" "$f"; fi
    done < "$EMU_LIST"
    if command -v mpicc > /dev/null || command -v mpirun > /dev/null || [ -e /usr/local/cuda/include/nccl.h ] \
       || [ -e /usr/local/cuda/include/cudnn.h ] || [ -e /usr/lib/x86_64-linux-gnu/libmpi.so.40 ]; then
        echo "emulate_device: hiding failed" >&2; exit 1
    fi
    # the loader cache without the hidden libraries (the real cache file is left alone)
    ldconfig -C "$EMU_OV/ld.so.cache" 2> /dev/null && mount --bind "$EMU_OV/ld.so.cache" /etc/ld.so.cache
    ip link set lo up 2> /dev/null || true
    echo "emulate_device: $(wc -l < "$EMU_LIST") files hidden (toolkit NCCL/cuDNN, OpenMPI), no network;" \
         "python3 = $(command -v python3)" >&2
    cd "$ROOT"
    if [ "$1" = check ]; then check; else exec "$@"; fi' emulate "$@" || rc=$?
rm -rf "$OV"
exit $rc
