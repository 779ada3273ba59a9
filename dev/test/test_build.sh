#!/usr/bin/env bash
# The build follows the features the machine has (make test-build): the Makefile writes what its
# probes found per feature to build/features/<feature>, rewritten only when that changes, and
# every binary depends on the stamps of its features. So a changed feature set rebuilds those
# binaries at the next plain make, and an unchanged one rebuilds nothing. Checked in a copy of the
# sources (this tree's binaries are not touched), built at -O0 to be quick; the independent
# witness of each rebuild is the binary's linkage (its own NEEDED entries: libgomp, libmpi). An
# nvcc older than CUDA 12 counts as none, with a line that says so.
#   bash dev/test/test_build.sh        (from the repo root)
source "$(dirname "$0")/lib.sh" test_build

W=$TMP/tree
mkdir -p "$W/dev/test" "$W/dev/eval" "$W/llmc"
cp "$ROOT/Makefile" "$ROOT/train_gpt2.c" "$W/"
cp "$ROOT/dev/test/tests.mk" "$W/dev/test/"
cp "$ROOT/dev/eval/export_hf.c" "$W/dev/eval/"
cp "$ROOT"/llmc/*.h "$W/llmc/"
export CFLAGS=-O0   # the environment's CFLAGS: the Makefile still adds its flags to it
mk() { make -C "$W" --no-print-directory "$@" > "$TMP/make.log" 2>&1; }
links() { readelf -d "$W/train_gpt2" | grep NEEDED | grep -q "$1"; }   # links <library>: train_gpt2 needs it itself
up_to_date() {  # up_to_date <what> <make args...>: make -q says nothing is to be rebuilt
    local what=$1; shift
    if mk -q "$@"; then ok "$what"; else bad "$what: make -q $* wants to rebuild"; make -C "$W" -n "$@" | tail -3; fi
}
stale() {  # stale <what> <make args...>: make -q says a rebuild is due
    local what=$1; shift
    if mk -q "$@"; then bad "$what: make -q $* says up to date"; else ok "$what"; fi
}

mk train_gpt2 export_hf || { bad "the first build failed"; cat "$TMP/make.log"; finish; }
up_to_date "an unchanged feature set rebuilds nothing" train_gpt2 export_hf
[ -z "$(make -C "$W" -n train_gpt2 export_hf 2>/dev/null | grep -E '^(cc|gcc|clang) ')" ] \
    || bad "make -n lists compile commands for an unchanged feature set"

# makes started together (make test's lanes, make -j's sub-makes) all read the Makefile at once:
# each compares its own probe results with the stamps, so none rewrites a stamp of an unchanged set
# (a rewritten stamp makes the binaries stale, and two tests would then rebuild one at once)
stamps() { ls -l --time-style=+%s.%N "$W/build/features"; }
before=$(stamps)
for i in 1 2 3; do
    for j in 1 2 3 4 5 6 7 8; do make -C "$W" -q train_gpt2 > /dev/null 2>&1 & done
    wait
done
[ "$(stamps)" = "$before" ] && ok "24 makes at once, 8 at a time, leave the feature stamps as they were" \
    || { bad "makes started together rewrote feature stamps:"; diff <(echo "$before") <(stamps); }
up_to_date "... and train_gpt2 is still up to date" train_gpt2

# OpenMP, which every gcc has: NO_OMP=1 changes the set, the plain make changes it back
if links libgomp; then
    stale "OpenMP turned off (NO_OMP=1): train_gpt2 is due" train_gpt2 NO_OMP=1
    mk train_gpt2 NO_OMP=1 && ! links libgomp && ok "rebuilt without OpenMP (no libgomp)" || bad "NO_OMP=1 build still links libgomp"
    up_to_date "the same set again rebuilds nothing" train_gpt2 NO_OMP=1
    mk train_gpt2 && links libgomp && ok "the plain make brings OpenMP back (libgomp)" || bad "OpenMP not back after a plain make"
else
    bad "train_gpt2 does not link libgomp: the Makefile found no OpenMP in gcc"
fi

# CFLAGS on make's command line (a portable build: make CFLAGS="-O2 -march=x86-64-v3") replaces
# the optimization and target flags only: OpenMP, the fast-math pair and the warnings stay
cmd=$(CFLAGS= make -C "$W" -n -B train_gpt2 CFLAGS="-O1 -g" 2>/dev/null | grep -E '^(cc|gcc|clang) .* train_gpt2\.c')
lacks=$(for f in -O1 -g -fopenmp -ffast-math -fno-finite-math-only -std=gnu11; do [[ " $cmd " == *" $f "* ]] || echo "$f"; done)
if [ -n "$lacks" ] || [[ " $cmd " == *" -march=native "* ]]; then
    bad "make CFLAGS=\"-O1 -g\": the compile command lacks $(echo $lacks) or keeps -march=native: $cmd"
else
    ok "make CFLAGS=\"-O1 -g\" keeps -fopenmp and the fast-math flags, drops -march=native"
fi

# an nvcc older than CUDA 12 counts as none: one line names it, the CPU targets build, and a CUDA
# target stops with the reason (stand-ins that print only their version)
mkdir -p "$TMP/cuda11/bin" "$TMP/cuda12/bin"
for v in 11.8 12.4; do
    printf '#!/bin/sh\necho "Cuda compilation tools, release %s, V%s.89"\n' $v $v > "$TMP/cuda${v%%.*}/bin/nvcc"
done
chmod +x "$TMP"/cuda1[12]/bin/nvcc
want="nvcc:     $TMP/cuda11/bin/nvcc is CUDA 11.8, and the CUDA trainer needs 12 or 13"
mk train_gpt2 NVCC="$TMP/cuda11/bin/nvcc" && grep -qF "$want" "$TMP/make.log" && ok "CUDA 11.8's nvcc: the CPU trainer builds, and $want" \
    || { bad "CUDA 11.8's nvcc: no line saying it is too old"; cat "$TMP/make.log"; }
mk train_gpt2cu NVCC="$TMP/cuda11/bin/nvcc" && bad "CUDA 11.8's nvcc: make train_gpt2cu did not stop"
grep -q "^train_gpt2cu needs nvcc (the CUDA toolkit 12 or 13): $TMP/cuda11/bin/nvcc is CUDA 11.8" "$TMP/make.log" \
    && ok "CUDA 11.8's nvcc: make train_gpt2cu stops naming it" || { bad "CUDA 11.8's nvcc: make train_gpt2cu's message"; tail -2 "$TMP/make.log"; }
make -C "$W" -n train_gpt2 NVCC="$TMP/cuda12/bin/nvcc" 2>&1 | grep -q "^nvcc:     found ($TMP/cuda12/bin/nvcc, CUDA 12.4;" \
    && ok "CUDA 12.4's nvcc is taken" || bad "CUDA 12.4's nvcc was not taken"

# MPI appearing after the first build (issue 35: the quick start builds before the tests install
# OpenMPI): mpicc hidden from PATH is MPI not installed; visible again, the plain make relinks
if have_mpi "$W/train_gpt2"; then
    mkdir -p "$TMP/nompi"
    for f in /usr/bin/*; do case "${f##*/}" in mpicc*|mpicxx*|mpic++*|mpiCC*) ;; *) ln -s "$f" "$TMP/nompi/";; esac; done
    NOMPI_PATH="$TMP/nompi:/usr/local/sbin:/usr/local/bin:/usr/sbin"
    PATH=$NOMPI_PATH mk train_gpt2 export_hf
    ! links libmpi && ok "without mpicc on PATH, train_gpt2 is rebuilt without MPI" || bad "train_gpt2 kept MPI with mpicc gone"
    # that build under srun --mpi=pmix (PMIX_RANK and srun's variables, no MPI size): task 0 of 2 stops
    # naming the build (it had trained alone, as every task did, into the same -o)
    "$PY" "$ROOT/dev/bench/make_random_shard.py" "$TMP/t.bin" 20000 1 512 > /dev/null
    expect_error "the build without MPI, task 0 of 2 under srun --mpi=pmix" \
        "2 processes (launcher: slurm), but train_gpt2 runs several processes only with MPI (this build has none" \
        env PMIX_RANK=0 SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_LOCALID=0 "$W/train_gpt2" -i "$TMP/t.bin" -j "$TMP/t.bin" \
        -e L1:C32:H2:T32:V512 -b 1 -t 32 -x 1 -v 0 -o "$TMP/pmix"
    PATH=$NOMPI_PATH up_to_date "MPI gone again: nothing more to rebuild" train_gpt2
    stale "MPI installed (mpicc back on PATH): train_gpt2 is due" train_gpt2
    up_to_date "... but export_hf, which does not use MPI, is not" export_hf
    mk train_gpt2 && links libmpi && ok "the plain make links MPI in (libmpi)" || bad "train_gpt2 has no MPI after a plain make"
else
    mpi_missing "test-build: the MPI part" || true
fi
finish
