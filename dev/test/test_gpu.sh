#!/usr/bin/env bash
# Everything that needs a GPU, in one command, for a session on the H200 machine: builds, tests and
# benchmarks the CUDA trainer, and leaves every log and a summary in $OUT (default ./gpu_out).
#
#   dev/test/test_gpu.sh env build test      one call of the device tool runs at most 10 minutes,
#   dev/test/test_gpu.sh multi d48           so a session runs it in these four pieces (the build
#   dev/test/test_gpu.sh bench               stays on a warm machine; a part that needs binaries
#   dev/test/test_gpu.sh kernels             builds them again if they are missing)
#   TEST_GPU_BUDGET=1800 dev/test/test_gpu.sh   everything in one go (about 20 minutes)
#
# Parts (each step has its own time limit; TEST_GPU_BUDGET seconds, default 570, bounds the whole
# call: steps that no longer fit are reported as SKIP instead of being cut off; the summary is
# appended to $OUT/summary.txt as the steps finish, the logs packed into $OUT/test_gpu_logs.tgz):
#   env      GPU, driver, nvcc, python/torch, where NCCL and MPI come from
#   build    train_gpt2cu, test_gpt2cu, build/bench_layers (sm_90a), train_gpt2 (CPU), and a
#            sm_80-only build to check the "no kernel image for this GPU" message
#   test     fixtures (train_gpt2.py); test_gpt2cu on L2:C128:H2 and d12; GPU vs CPU trainer over
#            20 steps (dev/test/test_gpu_vs_cpu.sh); bad input (no GPU visible, too large a batch,
#            wrong architecture)
#   multi    NCCL on a 1-rank communicator (LLMC_FORCE_NCCL=1, -z 0 and -z 1) equals the plain run;
#            torchrun --nproc_per_node=1; with MPI: mpirun -np 2 -pb mpi on the one GPU equals one
#            process with 2x accumulation, -z 1 equals -z 0, and -pb nccl with 2 ranks on one GPU
#            stops with a message naming -pb mpi
#   bench    dev/bench/bench_gpu.sh (d12 throughput and MFU at B=16, 64, the largest; per-layer
#            backward; a 1-rank NCCL all-reduce of one layer)
#   d48      GPT-2 1.5B at T=1024 with -r 2 -b 64 and -r 1 -b 48: it fits (3 steps each)
#   kernels  dev/cuda/run_all.sh (every kernel workbench)
#
# Without network: NCCL and cuDNN come from the CUDA toolkit or from PyTorch's nvidia-nccl-cu13 and
# nvidia-cudnn-cu13 wheels (the Makefile finds them under site-packages; carry cudnn-frontend/ for the
# cuDNN attention, and dev/gpu/emulate_device.sh rehearses that layout); MPI from the system, or from Debian packages
# carried in .carry/debs (dev/gpu/fetch_debs.sh), unpacked with dpkg -x; without either, the MPI
# steps are skipped with a note. Data is generated on the spot (random tokens).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
OUTDIR=${OUT:-$ROOT/gpu_out}
WORK=$ROOT/build/gpu_test
mkdir -p "$OUTDIR" "$WORK/logs"
SUMMARY=$OUTDIR/summary.txt
BUDGET=${TEST_GPU_BUDGET:-570}
T0=$(date +%s)
JOBS=$(nproc)
export OMP_NUM_THREADS=$JOBS
PARTS=("$@")
[ ${#PARTS[@]} -eq 0 ] && PARTS=(env build test multi bench d48 kernels)
for p in "${PARTS[@]}"; do
    case $p in env|build|test|multi|bench|d48|kernels) ;; *) echo "unknown part '$p' (env build test multi bench d48 kernels)"; exit 2;; esac
done
echo "== test_gpu.sh $(date -u +%FT%TZ) parts: ${PARTS[*]} budget ${BUDGET}s" >> "$SUMMARY"
NFAIL=0

note() { echo "$*" | tee -a "$SUMMARY"; }
# step <name> <limit seconds> <shell command>: PASS / FAIL (with the log's tail) / TIMEOUT / SKIP
step() {
    local name=$1 limit=$2 cmd=$3
    local left=$(( BUDGET - ($(date +%s) - T0) - 20 ))
    if [ $left -lt 30 ]; then note "SKIP    $name (the time budget is used up)"; return 1; fi
    [ "$limit" -gt $left ] && limit=$left
    local s
    s=$(date +%s)
    timeout -k 10 "$limit" bash -c "$cmd" > "$WORK/logs/$name.log" 2>&1
    local rc=$? dt=$(( $(date +%s) - s ))
    if [ $rc -eq 0 ]; then
        note "PASS    $name (${dt}s)"
    else
        NFAIL=$((NFAIL + 1))
        if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then note "TIMEOUT $name (limit ${limit}s)"; else note "FAIL    $name (exit $rc, ${dt}s)"; fi
        tail -n 15 "$WORK/logs/$name.log" | sed 's/^/        | /' | tee -a "$SUMMARY"
    fi
    return $rc
}
has_part() { local p; for p in "${PARTS[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }

# ---- environment: python with torch, NCCL, MPI (exported for every step)
PY=""
for p in python3 /usr/bin/python3; do
    if command -v "$p" > /dev/null && "$p" -c "import torch" 2> /dev/null; then PY=$(command -v "$p"); break; fi
done
[ -z "$PY" ] && PY=python3
export PYTHON=$PY
MAKEVARS=(CUDA_ARCHS=90a PYTHON="$PY")
# NCCL and cuDNN: the Makefile finds them in the CUDA toolkit or in PyTorch's wheels (nvidia-nccl-cu13,
# nvidia-cudnn-cu13) and says where; cuDNN's attention also needs the frontend headers: carry
# cudnn-frontend/ (make cudnn-frontend, on a machine with network)
LIBS_NOTE=$(make --no-print-directory -n train_gpt2cu "${MAKEVARS[@]}" 2> /dev/null | grep -E "^(NCCL|cuDNN):" | tr -s ' ' | paste -sd '|')
# MPI: the system's, else the carried Debian packages (TEST_GPU_MPI=system|carry|none forces one)
MPIRUN=()
MPI_FROM=${TEST_GPU_MPI:-auto}
if [ "$MPI_FROM" = auto ]; then
    if command -v mpirun > /dev/null && command -v mpicc > /dev/null; then MPI_FROM=system
    elif ls .carry/debs/*.deb > /dev/null 2>&1; then MPI_FROM=carry
    else MPI_FROM=none; fi
fi
if [ "$MPI_FROM" = system ]; then
    MPIRUN=(mpirun)
    MPI_NOTE="MPI from the system: $(command -v mpirun)"
elif [ "$MPI_FROM" = carry ] && ls .carry/debs/*.deb > /dev/null 2>&1; then
    P=$WORK/mpi
    if [ ! -x "$P/usr/bin/orterun" ]; then
        rm -rf "$P"; mkdir -p "$P"
        for f in .carry/debs/*.deb; do dpkg -x "$f" "$P" || dpkg-deb -x "$f" "$P"; done
    fi
    A=$P/usr/lib/x86_64-linux-gnu
    export OPAL_PREFIX=$P/usr PATH=$P/usr/bin:$PATH LD_LIBRARY_PATH=$A:$A/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    MAKEVARS+=(MPI_INCDIRS="$A/openmpi/include" MPI_LIBDIRS="$A/openmpi/lib")
    MPIRUN=("$P/usr/bin/orterun")
    MPI_NOTE="MPI from .carry/debs unpacked into $P (OpenMPI 4.1; a PMIx 'help-pcompress.txt' notice on stderr is harmless)"
else
    MPI_NOTE="no MPI (no mpirun, no .carry/debs): the MPI steps are skipped"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ ${#MPIRUN[@]} -gt 0 ] && MPIRUN+=(--oversubscribe --bind-to none)
MPIRUN_STR="${MPIRUN[*]}"
MAKEVARS_STR=$(printf "%q " "${MAKEVARS[@]}")
# the model and batch of the multi-process steps (overridable, with MULTI_D and MULTI_VOCAB, to dry-run
# this script with the CPU-simulator build of the trainer in place of ./train_gpt2cu)
TRAIN_ARGS_SMALL=${TRAIN_ARGS_SMALL:-"-e L4:C256:H4 -b 4 -t 256 -x 8 -v 4 -m 2 -s 0 -l 6e-4 -u 2 -c 0.1"}
MULTI_D=${MULTI_D:-2048}      # tokens per step: 2 micro-steps of -b 4, 4 of -b 2
MULTI_VOCAB=${MULTI_VOCAB:-50257}

if has_part env; then
    note "python: $PY | $LIBS_NOTE | $MPI_NOTE"
    step env 60 "nvidia-smi; nvcc --version; $PY -c 'import torch; print(\"torch\", torch.__version__, torch.version.cuda, torch.cuda.is_available())'; uname -a; cat /etc/os-release | head -2; nproc; free -g"
    grep -m1 -E "NVIDIA H|NVIDIA A|Tesla" "$WORK/logs/env.log" | sed 's/^/        /' | tee -a "$SUMMARY"
fi

# the parts that run binaries build them first when they are missing or stale (a fresh machine)
if ! has_part build && { has_part test || has_part multi || has_part bench || has_part d48; }; then
    if ! make --no-print-directory -q train_gpt2cu test_gpt2cu build/bench_layers $MAKEVARS_STR > /dev/null 2>&1 \
       || [ ! -x train_gpt2 ]; then
        PARTS+=(build)
    fi
fi

if has_part build; then
    step build 420 "make --no-print-directory -j $JOBS train_gpt2cu test_gpt2cu build/bench_layers $MAKEVARS_STR"
    grep -E "^(nvcc|cuDNN|NCCL|MPI/CUDA):" "$WORK/logs/build.log" | sed 's/^/        /' | tee -a "$SUMMARY"
    # the CPU trainer for the GPU-vs-CPU comparison (one process: no MPI needed)
    step build_cpu 180 "make --no-print-directory -j $JOBS train_gpt2 NO_MPI=1 PYTHON=$PY"
    grep -E "^(OpenMP|OpenBLAS):" "$WORK/logs/build_cpu.log" | sed 's/^/        /' | tee -a "$SUMMARY"
    step build_sm80_only 240 "mkdir -p build/gpu_test/sm80 && nvcc -O3 --use_fast_math -std=c++17 -gencode arch=compute_80,code=sm_80 -DLLMC_CUDA_ARCHS='\"80\"' train_gpt2.cu -o build/gpu_test/sm80/train_gpt2cu -lcublas -lcublasLt"
fi

if has_part test; then
    step fixtures 300 "make --no-print-directory fixtures-cuda PYTHON=$PY"
    step test_gpt2cu_tiny 180 "./test_gpt2cu dev/test/fixtures/tiny64.bin dev/test/fixtures/tiny64_state.bin dev/test/fixtures/tiny64_traj.txt"
    step test_gpt2cu_d12 240 "./test_gpt2cu dev/test/fixtures/d12.bin dev/test/fixtures/d12_state.bin dev/test/fixtures/d12_traj.txt"
    # the same with cuDNN's attention (-at cudnn; fails with a message in a build without cuDNN)
    step test_gpt2cu_tiny_cudnn 180 "LLMC_ATTENTION=cudnn ./test_gpt2cu dev/test/fixtures/tiny64.bin dev/test/fixtures/tiny64_state.bin dev/test/fixtures/tiny64_traj.txt"
    step test_gpt2cu_d12_cudnn 240 "LLMC_ATTENTION=cudnn ./test_gpt2cu dev/test/fixtures/d12.bin dev/test/fixtures/d12_state.bin dev/test/fixtures/d12_traj.txt"
    grep -hE "FAIL|test_gpt2cu|determinism|checkpoint" "$WORK"/logs/test_gpt2cu_{tiny,d12,tiny_cudnn,d12_cudnn}.log \
        2> /dev/null | sed 's/^/        /' | tee -a "$SUMMARY"
    step gpu_vs_cpu 300 "bash dev/test/test_gpu_vs_cpu.sh ./train_gpt2cu ./train_gpt2"
    grep -E "^(trl|tel):" "$WORK/logs/gpu_vs_cpu.log" | sed 's/^/        /' | tee -a "$SUMMARY"
    $PY dev/bench/make_random_shard.py "$WORK/small.bin" 300000 3 > /dev/null
    step bad_no_gpu 60 "CUDA_VISIBLE_DEVICES= ./train_gpt2cu -i $WORK/small.bin -e d12 > $WORK/nogpu.txt 2>&1; rc=\$?; cat $WORK/nogpu.txt; [ \$rc -ne 0 ] && grep -q 'no CUDA GPU is visible' $WORK/nogpu.txt"
    step bad_too_large 60 "./train_gpt2cu -i $WORK/small.bin -e d48 -b 512 -t 1024 -x 1 > $WORK/big.txt 2>&1; rc=\$?; cat $WORK/big.txt; [ \$rc -ne 0 ] && grep -q 'GiB of GPU memory' $WORK/big.txt && grep -q -- '-r 2' $WORK/big.txt"
    step bad_arch 60 "build/gpu_test/sm80/train_gpt2cu -i $WORK/small.bin -e d12 > $WORK/arch.txt 2>&1; rc=\$?; cat $WORK/arch.txt; [ \$rc -ne 0 ] && grep -q 'no machine code for GPU' $WORK/arch.txt"
fi

# cmp.py <a/main.log> <b/main.log> <tol>: every step's loss and gradient norm within tol relative
# (0: identical strings, i.e. bitwise)
cat > "$WORK/cmp.py" <<'EOF'
import re, sys
def read(p):
    return [(int(m.group(1)), m.group(2), m.group(3))
            for m in re.finditer(r"s:(\d+) trl:(\S+) lr:\S+ norm:(\S+)", open(p).read())]
a, b, tol = read(sys.argv[1]), read(sys.argv[2]), float(sys.argv[3])
if not a or [r[0] for r in a] != [r[0] for r in b]:
    print(f"steps differ: {a} vs {b}"); sys.exit(1)
worst = 0.0
for (s, *x), (_, *y) in zip(a, b):
    for what, u, v in zip(("loss", "norm"), x, y):
        d = abs(float(u) - float(v)) / abs(float(v)); worst = max(worst, d)
        if (tol == 0 and u != v) or d > tol:
            print(f"step {s} {what}: {u} vs {v} (relative {d:.2e}, tolerance {tol})"); sys.exit(1)
print(f"{len(a)} steps agree (loss and norm): worst relative difference {worst:.2e}"
      f" (tolerance {tol}{', bitwise' if tol == 0 else ''})")
EOF

if has_part multi; then
    D=$WORK/multi
    rm -rf "$D"; mkdir -p "$D"
    $PY dev/bench/make_random_shard.py "$D/train.bin" 400000 4 $MULTI_VOCAB > /dev/null
    $PY dev/bench/make_random_shard.py "$D/val.bin" 20000 5 $MULTI_VOCAB > /dev/null
    A="-i $D/train.bin -j $D/val.bin $TRAIN_ARGS_SMALL"
    step single 120 "./train_gpt2cu $A -d $MULTI_D -o $D/single"
    step single_accum2 120 "./train_gpt2cu $A -d $MULTI_D -b 2 -o $D/accum2"
    step nccl_1rank 120 "LLMC_FORCE_NCCL=1 ./train_gpt2cu $A -d $MULTI_D -o $D/nccl1 && $PY $WORK/cmp.py $D/nccl1/main.log $D/single/main.log 0"
    step nccl_1rank_zero1 120 "LLMC_FORCE_NCCL=1 ./train_gpt2cu $A -d $MULTI_D -z 1 -o $D/nccl1z && $PY $WORK/cmp.py $D/nccl1z/main.log $D/single/main.log 0"
    # torchrun (torch.distributed.run): --no-python in torch 2.x, --no_python in 1.x
    NOPY=--no-python
    "$PY" -m torch.distributed.run --help 2>/dev/null | grep -q -- "--no-python" || NOPY=--no_python
    TORCHRUN="$PY -m torch.distributed.run --nproc_per_node=1 $NOPY"
    step torchrun_1 180 "$TORCHRUN ./train_gpt2cu $A -d $MULTI_D -o $D/torchrun && $PY $WORK/cmp.py $D/torchrun/main.log $D/single/main.log 0 && LLMC_FORCE_NCCL=1 $TORCHRUN ./train_gpt2cu $A -d $MULTI_D -o $D/torchrun_nccl && $PY $WORK/cmp.py $D/torchrun_nccl/main.log $D/single/main.log 0"
    if [ -n "$MPIRUN_STR" ]; then
        step mpi_sanity 60 "$MPIRUN_STR -np 2 hostname"
        # 2 ranks of B=2 on the one GPU vs 1 process of B=2 with 2 micro-steps: the same tokens per
        # step; bf16 gradients summed in another order (5e-3: the GPU-vs-CPU bound halved)
        step mpi_np2 180 "$MPIRUN_STR -np 2 ./train_gpt2cu $A -d $MULTI_D -b 2 -pb mpi -o $D/mpi2 && $PY $WORK/cmp.py $D/mpi2/main.log $D/accum2/main.log 5e-3"
        step mpi_np2_zero1 180 "$MPIRUN_STR -np 2 ./train_gpt2cu $A -d $MULTI_D -b 2 -pb mpi -z 1 -o $D/mpi2z -n 4 && $PY $WORK/cmp.py $D/mpi2z/main.log $D/mpi2/main.log 1e-3 && ls $D/mpi2z/state_00000004_00001.bin"
        step mpi_nccl_shared_gpu 90 "$MPIRUN_STR -np 2 ./train_gpt2cu $A -d $MULTI_D -b 2 > $D/shared.txt 2>&1; rc=\$?; cat $D/shared.txt; [ \$rc -ne 0 ] && grep -q -- '-pb mpi' $D/shared.txt"
    else
        note "SKIP    mpi_np2, mpi_np2_zero1, mpi_nccl_shared_gpu: $MPI_NOTE"
    fi
fi

if has_part bench; then
    # make reads NCCL_HOME, MPI_INCDIRS, ... from the environment
    step bench 540 "$MAKEVARS_STR bash dev/bench/bench_gpu.sh build/gpu_test/bench"
    grep -E "^(d12 T=1024|-at |largest|forward|backward|gradients of one|NCCL all-reduce)" "$WORK/logs/bench.log" | sed 's/^/        /' | tee -a "$SUMMARY"
fi

if has_part d48; then
    $PY dev/bench/make_random_shard.py "$WORK/d48.bin" 300000 6 > /dev/null
    # 1 micro-step of B*1024 tokens; the memory line of the trainer and the GPU memory in use at the end
    step d48_r2_b64 300 "./train_gpt2cu -i $WORK/d48.bin -e d48 -b 64 -t 1024 -r 2 -x 3 -v 0 -s 0"
    grep -hE "^device:|^step|GPU memory in use" "$WORK/logs/d48_r2_b64.log" | sed 's/^/        /' | tee -a "$SUMMARY"
    step d48_r1_b48 300 "./train_gpt2cu -i $WORK/d48.bin -e d48 -b 48 -t 1024 -r 1 -x 2 -v 0 -s 0"
    grep -hE "^step|GPU memory in use" "$WORK/logs/d48_r1_b48.log" | sed 's/^/        /' | tee -a "$SUMMARY"
fi

if has_part kernels; then
    step kernels 540 "CUDA_ARCHS=90a JOBS=$JOBS TIMEOUT=150 bash dev/cuda/run_all.sh"
    grep -E "^=== .*exit|^run_all:" "$WORK/logs/kernels.log" | sed 's/^/        /' | tee -a "$SUMMARY"
fi

note "== done in $(( $(date +%s) - T0 ))s: $NFAIL step(s) failed"
# every log comes back as one file (the device tool returns at most 8 files)
tar -czf "$OUTDIR/test_gpu_logs.tgz" -C "$WORK" logs 2> /dev/null
[ $NFAIL -eq 0 ]
