#!/usr/bin/env bash
# Everything a GPU session carries, made on the build machine before its first device call (device
# time starts with that call, so all of this is free there): the OpenMPI packages (.carry/debs),
# llm.c's tree (.carry/llm.c, karpathy/llm.c at f1e2ace), the cuDNN frontend headers
# (cudnn-frontend/), and the binaries built here for the GPU machine (.carry/prebuilt, from the
# committed tree: commit first). Then it checks that what travels stays under the device tool's
# 64 MiB and prints the commit to write into the calls of dev/gpu/PLAN.md.
#
#   dev/gpu/prepare.sh [LLMC_GIT]   LLMC_GIT: a git directory of karpathy/llm.c that holds f1e2ace
#                                   (needed only when .carry/llm.c is missing); root, network for the
#                                   packages, the wheels and the frontend the first time
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
LLMC_COMMIT_PEER=f1e2ace
die() { echo "prepare: $*" >&2; exit 1; }

[ -z "$(git status --porcelain)" ] || die "commit first: the prebuilt binaries and the calls name one commit ($(git status --porcelain | head -3 | paste -sd' '))"
if ! ls .carry/debs/*.deb > /dev/null 2>&1; then
    apt-get update -qq > /dev/null 2>&1 || true
    bash dev/gpu/fetch_debs.sh
fi
if [ ! -f .carry/llm.c/train_gpt2.cu ]; then
    [ -n "${1:-}" ] || die "no .carry/llm.c: give a git directory of karpathy/llm.c (with commit $LLMC_COMMIT_PEER) as the argument"
    git --git-dir="$1" cat-file -e "$LLMC_COMMIT_PEER^{commit}" 2> /dev/null || die "$1: no commit $LLMC_COMMIT_PEER there"
    mkdir -p .carry/llm.c && git --git-dir="$1" archive "$LLMC_COMMIT_PEER" | tar -x -C .carry/llm.c
fi
[ -f cudnn-frontend/include/cudnn_frontend.h ] || make --no-print-directory cudnn-frontend
bash dev/gpu/prebuilt.sh build
# what travels: tracked and untracked-not-ignored files, and the carried folders
tree=$(git ls-files -co --exclude-standard -z | xargs -0 du -cb 2> /dev/null | tail -1 | cut -f1)
carried=$(du -cb .carry cudnn-frontend | tail -1 | cut -f1)
total=$(( (tree + carried) / 1048576 ))
echo "prepare: the tree $(( tree / 1048576 )) MiB + .carry and cudnn-frontend $(( carried / 1048576 )) MiB = $total MiB (the device tool takes 64)"
[ $total -lt 62 ] || die "$total MiB is too close to the device tool's 64 MiB"
echo "prepare: ready; in the calls of dev/gpu/PLAN.md: LLMC_COMMIT=$(git rev-parse --short HEAD), carry [\".carry\", \"cudnn-frontend\"]"
