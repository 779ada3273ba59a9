#!/usr/bin/env bash
# Runs a command on this (GPU-less) machine in the software layout of the lent GPU machine, so that
# the builds and the scripts a GPU session runs can be tried here first (nothing CUDA runs here):
#   - NCCL and cuDNN only inside Python wheels (nvidia-nccl-cu13, nvidia-cudnn-cu13: lib/*.so.N,
#     no unversioned .so), in the site-packages of the python3 first on PATH; the toolkit's own
#     copies hidden;
#   - no OpenMPI (its packages' files hidden: mpicc, mpirun, libmpi; the few libraries Debian's
#     torch needs here, libnuma, libibverbs and libnl, stay);
#   - the driver's libnvidia-ml.so.1 stood in for by an empty library (for llm.c's -lnvidia-ml).
# The hiding happens in a private mount namespace (unshare -m, needs root): empty files are
# bind-mounted over the hidden ones for this command only; nothing changes for other processes.
#
#   dev/gpu/emulate_device.sh setup            once, with network: the wheels (the versions PyTorch
#                                              2.11 pins) into a venv in build/emu (about 600 MB)
#   dev/gpu/emulate_device.sh <command...>     e.g. dev/gpu/emulate_device.sh bash dev/test/test_gpu.sh build
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
EMU=${EMU_DIR:-$ROOT/build/emu}
WHEELS=(nvidia-nccl-cu13==2.28.9 nvidia-cudnn-cu13==9.19.0.56)
MPI_PKGS=(openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libpmix2 libhwloc15 libevent-core-2.1-7
          libevent-pthreads-2.1-7 libfabric1 libucx0 ibverbs-providers librdmacm1 libpsm2-2 libpsm-infinipath1
          libmunge2)

if [ "${1:-}" = setup ]; then
    rm -rf "$EMU/venv" && mkdir -p "$EMU/wheels" "$EMU/driver"  # wheels already there are kept
    /usr/bin/python3 -m venv --system-site-packages "$EMU/venv"  # Debian's torch stays importable
    python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_18_x86_64 -d "$EMU/wheels" "${WHEELS[@]}"
    sp=$("$EMU/venv/bin/python3" -c "import site; print(site.getsitepackages()[0])")
    for w in "$EMU"/wheels/*.whl; do (cd "$sp" && unzip -q -o "$w"); done
    echo "" | cc -shared -Wl,-soname,libnvidia-ml.so.1 -x c - -o "$EMU/driver/libnvidia-ml.so.1"
    echo "emulate_device: wheels in $sp/nvidia, NVML stand-in in $EMU/driver"
    exit 0
fi
[ $# -gt 0 ] || { echo "usage: $0 setup | $0 <command...>" >&2; exit 2; }
[ -x "$EMU/venv/bin/python3" ] || { echo "emulate_device: run '$0 setup' first (needs network)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "emulate_device: needs root (unshare -m, mount --bind)" >&2; exit 1; }

# the files to hide: the toolkit's NCCL and cuDNN, and the regular files of the OpenMPI packages
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
# folders get an overlay in which they are whiteouts. OpenMPI's own folders become empty folders
# (build scripts test for them, PMIx looks there for plugins); the rest (documentation) is covered
# by an empty file.
OVERLAYS=(/usr/bin "$CUDA/include" "$CUDA_LIB" /usr/lib/x86_64-linux-gnu)
WHOLE=(/usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/share/openmpi /etc/openmpi)
for i in "${!OVERLAYS[@]}"; do
    mkdir -p "$OV/upper$i" "$OV/work$i"
    while read -r f; do
        if [ "${f%/*}" = "${OVERLAYS[$i]}" ]; then mknod "$OV/upper$i/${f##*/}" c 0 0; fi
    done < "$LIST"
done
export EMU_LIST=$LIST EMU_FILE=$OV/empty_file EMU_DIRX=$OV/empty_dir EMU_OV=$OV
export EMU_OVERLAYS="${OVERLAYS[*]}" EMU_WHOLE="${WHOLE[*]}"
export PATH="$EMU/venv/bin:$PATH" LLMC_NVML_DIR="$EMU/driver"
rc=0
unshare -m --propagation private bash -c '
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
    echo "emulate_device: $(wc -l < "$EMU_LIST") files hidden (toolkit NCCL/cuDNN, OpenMPI); python3 = $(command -v python3)" >&2
    exec "$@"' emulate "$@" || rc=$?
rm -rf "$OV"
exit $rc
