#!/usr/bin/env bash
# Downloads OpenMPI (runtime, launcher, headers) and the shared libraries it loads as Debian
# packages into .carry/debs, so that a GPU machine without network and without MPI can run the
# multi-rank tests of dev/test/test_gpu.sh: carry .carry to it (the device tool's `carry`), and
# test_gpu.sh unpacks the packages with dpkg -x into a prefix (OPAL_PREFIX relocates OpenMPI).
#
# The list is what `ldd` shows the OpenMPI binaries and plugins load here (Debian 12, OpenMPI
# 4.1), minus what every Linux image has (libc6, libgcc-s1, libstdc++6, zlib1g, libudev1,
# libuuid1, libatomic1). Needs apt's package lists (apt-get update) and network; about 7 MB.
#
# usage: dev/gpu/fetch_debs.sh   (from anywhere; writes <repo>/.carry/debs)
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PKGS=(openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libpmix2 libhwloc15 libevent-core-2.1-7
      libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 ibverbs-providers librdmacm1 libnl-3-200
      libnl-route-3-200 libpsm2-2 libpsm-infinipath1 libnuma1 libmunge2)
mkdir -p "$ROOT/.carry/debs"
cd "$ROOT/.carry/debs"
rm -f ./*.deb
apt-get download "${PKGS[@]}"
echo "fetch_debs: $(ls ./*.deb | wc -l) packages, $(du -sh . | cut -f1), in $ROOT/.carry/debs"
