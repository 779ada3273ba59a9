#!/usr/bin/env bash
# Everything that needs a GPU, for a session on the lent H200/H100 machine: builds, tests and
# benchmarks the CUDA trainer, and leaves every log and a summary in $OUT (default ./gpu_out).
# dev/gpu/PLAN.md lists the device calls (a session has 15 minutes of device time: two calls of
# about 5.5 minutes each, on binaries built beforehand by dev/gpu/prepare.sh):
#
#   dev/test/test_gpu.sh env build test bench     call 1: bring-up, ours vs llm.c, -at own, -ge 0, layers
#   dev/test/test_gpu.sh multi memory             call 2: the multi-process paths, the memory plan
#   dev/test/test_gpu.sh sanitize kernels         call 3: compute-sanitizer, the kernel workbenches
#   dev/test/test_gpu.sh d48 profile              call 4: GPT-2 1.5B, Nsight Compute
#   dev/test/test_gpu.sh muon                     call 5: -opt muon
# A part that needs binaries installs (or builds) them if they are missing (a fresh machine).
#
# Parts (each step has its own time limit; TEST_GPU_BUDGET seconds bounds the whole run, for the
# device calls, which last at most a few minutes: steps that no longer fit are reported as SKIP
# instead of being cut off; unset or 0, no bound, as on a GPU machine of one's own; the summary is
# appended to $OUT/summary.txt as the steps finish, the logs packed into $OUT/test_gpu_logs.tgz):
#   env      GPU, driver, nvcc, python/torch, ncu (and whether it may read the GPU's counters),
#            compute-sanitizer, where NCCL, cuDNN and MPI come from
#   build    the binaries built on the build machine (.carry/prebuilt, dev/gpu/prebuilt.sh) when
#            they were built from this tree and find their libraries here: seconds instead of two
#            minutes (TEST_GPU_PREBUILT=no builds anyway, =yes fails the step without them); else
#            built here: train_gpt2cu, test_gpt2cu, build/bench_layers (sm_90a), the test build that
#            can leave out an event wait (build/drop_wait), a sm_80-only build (make
#            build/arch_80/train_gpt2cu) to check the "no kernel image for this GPU" message; llm.c's
#            train_gpt2cu (dev/bench/build_llmc.sh) in the background, waited for at the end of the
#            call. Then train_gpt2 (CPU) in either case
#   test     fixtures (train_gpt2.py); test_gpt2cu on L2:C128:H2 and d12 (also with -ge 0, our GELU
#            kernels instead of cuBLASLt's epilogue; d12 also with -mt 1, cuBLASLt's algorithms
#            chosen by timing, and with -bg 1, the bias gradients from the weight-gradient
#            matmuls' epilogue); GPU vs CPU trainer over
#            20 steps (dev/test/test_gpu_vs_cpu.sh); two separate processes give bitwise-equal runs;
#            a resume from a checkpoint is bitwise equal to the uninterrupted run (also with -mt 1:
#            the resume takes the choices kept in -o); --prompt's greedy text within bf16's rounding
#            of fp32's (dev/test/greedy_within.py; own and cuDNN attention; at a 256-token window the
#            rows kernel's key splits combined) and d12's time per generated
#            token (a figure); HellaSwag's accuracy
#            against the CPU trainer's; a fatal error while a checkpoint is written from the pinned
#            snapshot (finished first, resumed bitwise); SIGTERM to a thread that is not the main
#            one (a checkpoint after the step, exit 0, resumed bitwise); bad input (no GPU
#            visible, too large a batch, wrong architecture)
#   multi    NCCL on a 1-rank communicator (LLMC_FORCE_NCCL=1, -z 0 and -z 1) equals the plain run,
#            also with the stream-order debug mode (LLMC_DEBUG_STREAMS=1), and differs from it when
#            the test build leaves out any one of the four event waits between the NCCL and the
#            compute stream (LLMC_TEST_DROP_WAIT=1..4); torchrun --nproc_per_node=1, plain and with
#            NCCL carrying the host's collectives too (LLMC_FORCE_NCCL=2, as without MPI), and a
#            Ctrl-C there (from the terminal and torchrun both: one stop with a checkpoint); with MPI:
#            mpirun -np 2 -pb mpi on the one GPU equals one process with 2x accumulation (10 steps,
#            validation, checkpoints), -z 1 equals -z 0, the -z 1 checkpoint resumes on 2 ranks
#            (bitwise) and on 1 process, -pb nccl with 2 ranks on one GPU stops with a message naming
#            -pb mpi, and a rank killed with SIGKILL mid-step makes the job end with an error instead
#            of hanging
#   bench    dev/bench/bench_gpu.sh's parts d12, attention, gelu, recompute, tune, biasgrad, layers,
#            each its own step: ours and llm.c at d12, B=16/32/64/128, ours with -at own, with -ge 0,
#            with -mt 1 and with -bg 1 at B=64, both with -r 0 at B=64; where the time of a step goes
#            (also with -mt 1);
#            per-layer backward; a 1-rank NCCL all-reduce of one layer
#   d48      dev/bench/bench_gpu.sh d48: GPT-2 1.5B at T=1024, the largest B that fits (-r 1, -r 2),
#            llm.c at the same B, per-layer backward
#   memory   the memory plan against the GPU: d12 -b 16 -r auto and d48 -b auto -r 2 at T=1024, 2
#            steps each: the trainer's end line compares the plan with what cudaMemGetInfo says the
#            run allocated after its CUDA context (the rest is cuBLAS's and NCCL's own, under 1 GiB);
#            -b auto must not run out of memory; the phase line and metrics.jsonl's phase times;
#            d12 at B=128 (logits of 6.6e9 elements, 13 GB: matrices past 2^32 elements in
#            cuBLASLt) equals B=64 with 2 micro-steps on the same tokens (bf16 tolerance)
#   muon     -opt muon: its kernel workbench (dev/cuda/muon.cu), GPU vs CPU trainer, two processes
#            bitwise equal, with MPI 2 ranks -z 1 against -z 0 (shards of whole matrices), then
#            dev/bench/bench_gpu.sh muon: AdamW against Muon on d12 and Muon's step-time overhead
#   sanitize compute-sanitizer memcheck and racecheck on test_gpt2cu (tiny fixture) and on the
#            attention workbench (racecheck: its cases of T <= 130): zero reports; racecheck follows our kernels only (by name; cuBLASLt's
#            and cuDNN's are slow to instrument and not ours to fix), test_gpt2cu's matmuls with
#            cuBLASLt's algorithms without thread-block clusters (LLMC_TEST_GEMM_NO_CLUSTER=1: racecheck
#            failed in the first one with a cluster on 2026-11-27); a sanitizer failure it cannot
#            place is run again with CUDA_LAUNCH_BLOCKING=1, whose error line names the launch; and
#            racecheck of the 6 kernel workbenches that launch no cuBLAS (WB_NO_TIMING=1)
#   kernels  dev/cuda/run_all.sh (every kernel workbench)
#   profile  Nsight Compute (ncu --clock-control none) over one d12 step: every kernel's duration,
#            throughput and occupancy, summarized per kernel by dev/bench/ncu_summary.py (a refusal says whether counters are
#            restricted to administrators, as env found)
#
# Without network: NCCL and cuDNN come from the CUDA toolkit or from PyTorch's nvidia-nccl-cu13 and
# nvidia-cudnn-cu13 wheels (the Makefile finds them under site-packages and says where); MPI from
# the system, or from Debian packages
# carried in .carry/debs (dev/gpu/fetch_debs.sh), unpacked with dpkg -x into build/gpu_test/mpi and
# run from there (OPAL_PREFIX, PMIx's plugin path); without either, the MPI steps are skipped with a
# note. llm.c's tree is carried in .carry/llm.c, the cuDNN frontend headers in cudnn-frontend. Data
# is generated on the spot (random tokens). dev/gpu/emulate_device.sh runs this script on a GPU-less
# machine in the GPU machine's software layout (the builds work; the GPU steps fail).
set -u
source "$(dirname "$0")/lib.sh" --tools   # ROOT; compare_logs, exported to the steps below
cd "$ROOT" || exit 1
OUTDIR=${OUT:-$ROOT/gpu_out}
WORK=$ROOT/build/gpu_test
# the logs of an earlier call on the same (still warm) machine would travel back again in this
# call's test_gpu_logs.tgz as if this call had made them (2026-11-27: d48's logs in a call of
# the test part); the benchmark's data and builds under $WORK stay
rm -rf "$WORK/logs"; rm -f "$WORK"/bench/*.log "$WORK/ncu_d12.ncu-rep" "$WORK/ncu_raw.csv"
mkdir -p "$OUTDIR" "$WORK/logs"
SUMMARY=$OUTDIR/summary.txt
BUDGET=${TEST_GPU_BUDGET:-0}
[[ "$BUDGET" =~ ^[0-9]+$ ]] || { echo "error: TEST_GPU_BUDGET='$BUDGET': expected whole seconds, e.g. 330" >&2; exit 2; }
MPI_FROM=${TEST_GPU_MPI:-auto}
PREBUILT_MODE=${TEST_GPU_PREBUILT:-auto}
case $PREBUILT_MODE in auto|yes|no) ;;
    *) echo "error: TEST_GPU_PREBUILT='$PREBUILT_MODE': expected one of auto|yes|no" >&2; exit 2;; esac
case $MPI_FROM in auto|system|carry|none) ;;
    *) echo "error: TEST_GPU_MPI='$MPI_FROM': expected one of auto|system|carry|none" >&2; exit 2;; esac
T0=$(date +%s)
JOBS=$(nproc)
export OMP_NUM_THREADS=$JOBS
PARTS=("$@")
ALL_PARTS="env build test multi memory bench d48 muon sanitize kernels profile"
[ ${#PARTS[@]} -eq 0 ] && read -r -a PARTS <<< "$ALL_PARTS"
for p in "${PARTS[@]}"; do
    case " $ALL_PARTS " in *" $p "*) ;; *) echo "error: test_gpu.sh: unknown part '$p' (parts: $ALL_PARTS)" >&2; exit 2;; esac
done
echo "== test_gpu.sh $(date -u +%FT%TZ) parts: ${PARTS[*]} budget $([ "$BUDGET" -gt 0 ] && echo "${BUDGET}s" || echo none)" >> "$SUMMARY"
NFAIL=0

note() { echo "$*" | tee -a "$SUMMARY"; }
# step <name> <limit seconds> <shell command>: PASS / FAIL (with the log's tail) / TIMEOUT / SKIP
step() {
    local name=$1 limit=$2 cmd=$3
    if [ "$BUDGET" -gt 0 ]; then
        local left=$(( BUDGET - ($(date +%s) - T0) - 20 ))
        if [ $left -lt 30 ]; then note "SKIP    $name (the time budget is used up)"; return 1; fi
        [ "$limit" -gt $left ] && limit=$left
    fi
    local s
    s=$(date +%s)
    timeout -k 10 "$limit" bash -c "$cmd" > "$WORK/logs/$name.log" 2>&1
    report "$name" $? $(( $(date +%s) - s )) "$limit"
}
# report <name> <exit status> <seconds> <limit>: the PASS / FAIL (with the log's tail) / TIMEOUT line
report() {
    local name=$1 rc=$2 dt=$3 limit=$4
    if [ "$rc" -eq 0 ]; then
        note "PASS    $name (${dt}s)"
    else
        NFAIL=$((NFAIL + 1))
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then note "TIMEOUT $name (limit ${limit}s)"; else note "FAIL    $name (exit $rc, ${dt}s)"; fi
        tail -n 15 "$WORK/logs/$name.log" | sed 's/^/        | /' | tee -a "$SUMMARY"
    fi
    pack_logs
    return "$rc"
}
# every log so far as one file, after each step: a call cut off by its limit still brings them
# back (the device tool returns at most 8 files)
pack_logs() {
    tar -czf "$OUTDIR/test_gpu_logs.tgz.new" --exclude='*.bin' -C "$WORK" logs $(cd "$WORK" && ls -d bench 2> /dev/null) 2> /dev/null \
        && mv -f "$OUTDIR/test_gpu_logs.tgz.new" "$OUTDIR/test_gpu_logs.tgz"
}
# bg_step <name> <limit> <command>: a step in the background (a build on otherwise idle cores);
# bg_wait <name> reports it like a step, once
declare -A BG_PID BG_START BG_LIMIT
bg_step() {
    BG_START[$1]=$(date +%s) BG_LIMIT[$1]=$2
    timeout -k 10 "$2" bash -c "$3" > "$WORK/logs/$1.log" 2>&1 &
    BG_PID[$1]=$!
}
bg_wait() {
    [ -n "${BG_PID[$1]:-}" ] || return 0
    wait "${BG_PID[$1]}"
    local rc=$?
    report "$1" $rc $(( $(date +%s) - ${BG_START[$1]} )) "${BG_LIMIT[$1]}"
    unset "BG_PID[$1]"
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
export PY LLMC_TEST_DIR
export -f compare_logs compare_checkpoints stopped_step
MAKEVARS=(CUDA_ARCHS=90a PYTHON="$PY")
# NCCL and cuDNN: the Makefile finds them in the CUDA toolkit or in PyTorch's wheels (nvidia-nccl-cu13,
# nvidia-cudnn-cu13) and says where; cuDNN's attention also needs the frontend headers: carry
# cudnn-frontend/ (make cudnn-frontend, on a machine with network)
LIBS_NOTE=$(make --no-print-directory -n train_gpt2cu "${MAKEVARS[@]}" 2> /dev/null | grep -E "^(NCCL|cuDNN):" | tr -s ' ' | paste -sd '|')
# MPI: the system's, else the carried Debian packages (TEST_GPU_MPI=system|carry|none forces one)
MPIRUN=()
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
        # the names Debian's postinst would register as alternatives (mpirun, mpicc, ...)
        for l in "$P"/usr/bin/*.openmpi; do ln -sf "$(readlink "$l")" "${l%.openmpi}"; done
    fi
    A=$P/usr/lib/x86_64-linux-gnu
    # OPAL_PREFIX relocates OpenMPI; PMIx (its own package) looks for its plugins under /usr unless told
    export OPAL_PREFIX=$P/usr PMIX_MCA_mca_base_component_path=$A/pmix2/lib/pmix PATH=$P/usr/bin:$PATH
    export LD_LIBRARY_PATH=$A:$A/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    MPIRUN=("$P/usr/bin/orterun")
    MPI_NOTE="MPI from .carry/debs unpacked into $P (OpenMPI $(orterun --version 2> /dev/null | grep -o '[0-9][0-9.]*' | head -1))"
else
    MPI_NOTE="no MPI (no mpirun, no .carry/debs): the MPI steps are skipped"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ ${#MPIRUN[@]} -gt 0 ] && MPIRUN+=(--oversubscribe --bind-to none)
MPIRUN_STR="${MPIRUN[*]}"
MAKEVARS_STR=$(printf "%q " "${MAKEVARS[@]}")
# the model and batch of the runs of the test and multi parts (overridable, with MULTI_D and
# MULTI_VOCAB, to dry-run this script with a CPU build of a trainer in place of ./train_gpt2cu:
# the CPU trainer with MPI, or the CPU-simulator build): 10 steps, validation every 5
TRAIN_ARGS_SMALL=${TRAIN_ARGS_SMALL:-"-e L4:C256:H4 -b 4 -t 256 -x 10 -v 5 -m 2 -s 0 -l 6e-4 -u 2 -c 0.1"}
MULTI_D=${MULTI_D:-2048}      # tokens per step: 2 micro-steps of -b 4, 4 of -b 2
MULTI_VOCAB=${MULTI_VOCAB:-50257}
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
tool() { command -v "$1" || ls /usr/local/cuda/bin/"$1" /opt/nvidia/nsight-compute/*/"$1" 2> /dev/null | head -1; }
NCU=$(tool ncu) SANITIZER=$(tool compute-sanitizer)
# ncu needs the GPU's performance counters: the driver gives them to administrators only when its
# RmProfilingAdminOnly parameter is 1 (ERR_NVGPUCTRPERM otherwise)
ncu_access() {
    local only
    only=$(sed -n 's/^RmProfilingAdminOnly: *//p' /proc/driver/nvidia/params 2> /dev/null)
    if [ -z "$only" ]; then echo "unknown (no /proc/driver/nvidia/params)"
    elif [ "$only" = 0 ]; then echo "open to every user (RmProfilingAdminOnly: 0)"
    elif [ "$(id -u)" = 0 ]; then echo "administrators only (RmProfilingAdminOnly: 1), and this is root: allowed"
    else echo "administrators only (RmProfilingAdminOnly: 1) and this is uid $(id -u): ncu fails with ERR_NVGPUCTRPERM; run as root, or load the driver with NVreg_RestrictProfilingToAdminUsers=0"; fi
}

if has_part env; then
    note "python: $PY | $LIBS_NOTE | $MPI_NOTE"
    # passes when nvidia-smi sees the GPU; the rest is information
    versions="echo 'ncu: ${NCU:-not found}'; echo 'compute-sanitizer: ${SANITIZER:-not found}';"
    for t in $NCU $SANITIZER; do versions+=" '$t' --version;"; done
    step env 60 "nvidia-smi; rc=\$?; $NVCC --version; $PY -c 'import torch; print(\"torch\", torch.__version__, torch.version.cuda, torch.cuda.is_available())'; uname -a; head -2 /etc/os-release; nproc; free -g; df -h .; $versions ldconfig -p | grep -E 'libnvidia-ml|libcuda.so'; exit \$rc"
    grep -m1 -E "NVIDIA H|NVIDIA A|Tesla" "$WORK/logs/env.log" | sed 's/^/        /' | tee -a "$SUMMARY"
    note "        ncu counters: $(ncu_access)"
fi

# the parts that run binaries install or build them first when they are missing or stale (a fresh
# machine; after an install of the prebuilt ones make always finds them stale, and the install
# is repeated: seconds)
if ! has_part build && { has_part test || has_part multi || has_part memory || has_part muon || has_part sanitize \
                         || has_part profile || has_part bench || has_part d48; }; then
    if ! make --no-print-directory -q train_gpt2cu test_gpt2cu build/bench_layers build/drop_wait/train_gpt2cu $MAKEVARS_STR > /dev/null 2>&1 \
       || [ ! -x train_gpt2 ] || [ ! -x build/arch_80/train_gpt2cu ]; then
        PARTS+=(build)
    fi
fi

# PREBUILT=1: the binaries came from .carry/prebuilt; the steps below then run no make of their own
PREBUILT=0
if has_part build; then
    s=$(date +%s)
    if [ "$PREBUILT_MODE" != no ] && bash dev/gpu/prebuilt.sh install > "$WORK/logs/prebuilt.log" 2>&1; then
        PREBUILT=1
        LD_LIBRARY_PATH=$(cat build/prebuilt/ld_library_path)
        export LD_LIBRARY_PATH
        note "PASS    prebuilt ($(( $(date +%s) - s ))s: $(sed -n 's/^prebuilt: //p' "$WORK/logs/prebuilt.log" | head -1))"
        grep "^train_gpt2cu loads" .carry/prebuilt/MANIFEST | sed 's/^/        /' | tee -a "$SUMMARY"
    else
        if [ "$PREBUILT_MODE" = yes ]; then
            NFAIL=$((NFAIL + 1)); note "FAIL    prebuilt: $(tail -1 "$WORK/logs/prebuilt.log")"
        elif [ "$PREBUILT_MODE" = auto ]; then
            note "        prebuilt not used: $(tail -1 "$WORK/logs/prebuilt.log")"
        fi
        # llm.c's train_gpt2cu (the benchmark peer) and the sm_80-only trainer (bad_arch) build on
        # other cores meanwhile
        bg_step build_llmc 480 "bash dev/bench/build_llmc.sh"
        bg_step build_sm80_only 300 "make --no-print-directory build/arch_80/train_gpt2cu $MAKEVARS_STR"
        step build 420 "make --no-print-directory -j $JOBS train_gpt2cu test_gpt2cu build/bench_layers build/drop_wait/train_gpt2cu $MAKEVARS_STR"
        grep -E "^(nvcc|NCCL|cuDNN|MPI/CUDA):" "$WORK/logs/build.log" | sed 's/^/        /' | tee -a "$SUMMARY"
    fi
    # the CPU trainer for the GPU-vs-CPU comparison (one process: no MPI needed)
    step build_cpu 180 "make --no-print-directory -j $JOBS train_gpt2 NO_MPI=1 PYTHON=$PY"
    grep -E "^(OpenMP|OpenBLAS):" "$WORK/logs/build_cpu.log" | sed 's/^/        /' | tee -a "$SUMMARY"
fi

# compare_logs <a/main.log> <b/main.log> trl=<tol> norm=<tol> (lib.sh): every step's loss and
# gradient norm within tol relative (0: identical strings, i.e. bitwise)
# resume_copy <run dir> <copy>: the run as it was at its checkpoint 5 (checkpoint 10 incomplete,
# main.log cut after step 5), for a resume with -y 1 that must log steps 6-10 again
resume_copy() {
    rm -rf "$2" && cp -r "$1" "$2" && rm -f "$2"/DONE_00000010 \
        && awk '{ split($1, f, ":"); if (f[2] < 5) print }' "$1/main.log" > "$2/main.log"
}
# children_of <pid>: its child processes, from /proc (pgrep is procps, which a minimal image may lack)
children_of() {
    local st
    for st in /proc/[0-9]*/stat; do
        awk -v p="$1" '{ sub(/^.*\) /, ""); if ($2 == p) { split(FILENAME, f, "/"); print f[3] } }' "$st" 2> /dev/null
    done
}
# kill_rank <log> <mpirun command...>: SIGKILL one of the job's 2 ranks after its step 2; the job must
# end with a non-zero status within 60 s (the ranks are mpirun's children)
kill_rank() {
    local log=$1 job victim i start rc; shift
    "$@" > "$log" 2>&1 &
    job=$!
    for i in $(seq 600); do grep -q "^step 2/" "$log" && break; kill -0 $job 2> /dev/null || break; sleep 0.2; done
    if ! grep -q "^step 2/" "$log"; then echo "the job did not reach step 2:"; cat "$log"; kill -9 $job 2> /dev/null; return 1; fi
    victim=$(children_of $job | sort -n | tail -1)
    [ -n "$victim" ] || { echo "no rank process under mpirun ($job)"; kill -9 $job; return 1; }
    start=$(date +%s)
    kill -9 "$victim"
    for i in $(seq 600); do kill -0 $job 2> /dev/null || break; sleep 0.1; done
    if kill -0 $job 2> /dev/null; then
        echo "rank $victim killed; the job still runs 60 s later"; kill -9 $(children_of $job) $job 2> /dev/null; return 1
    fi
    wait $job; rc=$?
    tail -5 "$log"
    echo "rank $victim killed with SIGKILL: the job ended in $(( $(date +%s) - start )) s with exit status $rc"
    [ $rc -ne 0 ]
}
# preempt_run <trainer> <dir> <flags...>: SIGTERM, after step 5, to a thread of the trainer that is
# not its main one (CUDA's, NCCL's: the kernel may hand the signal to any); the run must stop after
# its step with a checkpoint and exit 0, and its resume 5 steps on repeat an uninterrupted run's
# losses bit for bit (-q 1's constant rate: -x does not change the schedule)
preempt_run() {
    local bin=$1 dir=$2 pid rc k i; shift 2
    rm -rf "$dir" "$dir.ref"
    "$bin" "$@" -x 100000 -v 0 -o "$dir" > "$dir.txt" 2>&1 &
    pid=$!
    for i in $(seq 600); do grep -q "^step 5/" "$dir.txt" && break; kill -0 $pid 2> /dev/null || break; sleep 0.1; done
    tgkill_other $pid 15 || { echo "no thread of $pid but the main one takes SIGTERM"; kill -9 $pid; return 1; }
    for i in $(seq 600); do kill -0 $pid 2> /dev/null || break; sleep 0.1; done
    if kill -0 $pid 2> /dev/null; then echo "still running 60 s after SIGTERM"; kill -9 $pid; return 1; fi
    wait $pid; rc=$?
    k=$(stopped_step "$dir.txt")
    echo "exit $rc: $(grep -m1 '^stopped' "$dir.txt")"
    [ $rc -eq 0 ] && [ -n "$k" ] || { tail -3 "$dir.txt"; return 1; }
    "$bin" "$@" -x $((k + 5)) -v 0 -o "$dir" -y 1 > "$dir.res.txt" 2>&1 && "$bin" "$@" -x $((k + 5)) -v 0 -o "$dir.ref" > /dev/null 2>&1 \
        && grep -q "^resumed from checkpoint $k " "$dir.res.txt" && compare_logs "$dir.ref/main.log" "$dir/main.log" trl=0 norm=0
}
# torchrun_ctrl_c <torchrun command> <dir> <flags...>: train_gpt2cu under torchrun in a process group
# of its own (a terminal's foreground job), Ctrl-C (SIGINT to the group) after step 5: the trainer
# gets it from the terminal and again from torchrun, on whichever of its threads (CUDA's, NCCL's),
# and stops once, after its step with a checkpoint, as without torchrun
torchrun_ctrl_c() {
    local launcher=$1 dir=$2 pid i k; shift 2
    rm -rf "$dir"
    setsid $launcher ./train_gpt2cu "$@" -x 100000 -v 0 -o "$dir" > "$dir.txt" 2>&1 &
    pid=$!
    for i in $(seq 600); do grep -q "^step 5/" "$dir.txt" && break; kill -0 $pid 2> /dev/null || break; sleep 0.1; done
    kill -INT -- -$pid
    for i in $(seq 600); do kill -0 $pid 2> /dev/null || break; sleep 0.1; done
    if kill -0 $pid 2> /dev/null; then echo "still running 60 s after Ctrl-C"; kill -9 -- -$pid; return 1; fi
    wait $pid
    grep -v "^step" "$dir.txt" | tail -n 12
    k=$(stopped_step "$dir.txt")
    [ -n "$k" ] && [ -e "$dir/DONE_$(printf %08d "$k")" ] && grep -q "closing signal SIG" "$dir.txt" && ! grep -q "second signal" "$dir.txt"
}
export -f resume_copy kill_rank children_of preempt_run tgkill_other torchrun_ctrl_c
# resumed <output> <run dir> <reference dir> <tol>: the resume said so, and its steps 6-10 make the
# run's main.log agree with the reference's (all 10 steps)
resumed() { echo "grep -q 'resumed from checkpoint 5' $1 && compare_logs $2/main.log $3/main.log trl=$4 norm=$4"; }

# the data of the small runs (test, multi)
D=$WORK/multi
if has_part test || has_part multi || has_part muon; then
    mkdir -p "$D"
    [ -f "$D/train.bin" ] || $PY dev/bench/make_random_shard.py "$D/train.bin" 400000 4 $MULTI_VOCAB > /dev/null
    [ -f "$D/val.bin" ] || $PY dev/bench/make_random_shard.py "$D/val.bin" 20000 5 $MULTI_VOCAB > /dev/null
fi
A="-i $D/train.bin -j $D/val.bin $TRAIN_ARGS_SMALL"

if has_part test; then
    step fixtures 180 "make --no-print-directory fixtures-cuda PYTHON=$PY"
    step test_gpt2cu_tiny 60 "./test_gpt2cu dev/test/fixtures/tiny64.bin dev/test/fixtures/tiny64_state.bin dev/test/fixtures/tiny64_traj.txt"
    step test_gpt2cu_d12 120 "./test_gpt2cu dev/test/fixtures/d12.bin dev/test/fixtures/d12_state.bin dev/test/fixtures/d12_traj.txt"
    # the same with cuDNN's attention (-at cudnn; fails with a message in a build without cuDNN)
    step test_gpt2cu_tiny_cudnn 90 "LLMC_ATTENTION=cudnn ./test_gpt2cu dev/test/fixtures/tiny64.bin dev/test/fixtures/tiny64_state.bin dev/test/fixtures/tiny64_traj.txt"
    step test_gpt2cu_d12_cudnn 120 "LLMC_ATTENTION=cudnn ./test_gpt2cu dev/test/fixtures/d12.bin dev/test/fixtures/d12_state.bin dev/test/fixtures/d12_traj.txt"
    # -ge 0: our GELU kernels instead of cuBLASLt's epilogue, against the same PyTorch reference
    step test_gpt2cu_tiny_ge0 60 "LLMC_GELU_FUSION=0 ./test_gpt2cu dev/test/fixtures/tiny64.bin dev/test/fixtures/tiny64_state.bin dev/test/fixtures/tiny64_traj.txt"
    step test_gpt2cu_d12_ge0 120 "LLMC_GELU_FUSION=0 ./test_gpt2cu dev/test/fixtures/d12.bin dev/test/fixtures/d12_state.bin dev/test/fixtures/d12_traj.txt"
    # -mt 1: cuBLASLt's algorithms chosen by timing, each checked against the same reference (the
    # timing runs of an accumulating matmul must leave the gradients as they were)
    step test_gpt2cu_d12_mt1 120 "LLMC_MATMUL_TUNE=1 ./test_gpt2cu dev/test/fixtures/d12.bin dev/test/fixtures/d12_state.bin dev/test/fixtures/d12_traj.txt"
    # -bg 1: the bias gradients from the weight-gradient matmuls' epilogue (or, where cuBLASLt has
    # none for a shape, our column sums: the closing line says how many went which way)
    step test_gpt2cu_d12_bg1 120 "LLMC_BIAS_GRAD=1 ./test_gpt2cu dev/test/fixtures/d12.bin dev/test/fixtures/d12_state.bin dev/test/fixtures/d12_traj.txt"
    grep -hE "FAIL|test_gpt2cu|determinism|checkpoint|matmul algorithms|bias gradients|warning: -bg" "$WORK"/logs/test_gpt2cu_{tiny,d12,tiny_cudnn,d12_cudnn,tiny_ge0,d12_ge0,d12_mt1,d12_bg1}.log \
        2> /dev/null | sed 's/^/        /' | tee -a "$SUMMARY"
    step gpu_vs_cpu 150 "bash dev/test/test_gpu_vs_cpu.sh ./train_gpt2cu ./train_gpt2"
    grep -E "^  (trl|tel|norm):" "$WORK/logs/gpu_vs_cpu.log" | sed 's/^/        /' | tee -a "$SUMMARY"
    # two processes with the same flags: bitwise-equal losses and norms; the first one's checkpoint
    # 5 resumed in a third process: steps 6-10 bitwise equal to the uninterrupted run's
    rm -rf "$D/det_a" "$D/det_b" "$D/det_r"
    step determinism_2proc 90 "./train_gpt2cu $A -d $MULTI_D -n 5 -o $D/det_a > /dev/null && ./train_gpt2cu $A -d $MULTI_D -o $D/det_b && compare_logs $D/det_b/main.log $D/det_a/main.log trl=0 norm=0"
    # -at auto (the default): cuDNN's attention at T = 256 (this build has it), our kernel at T = 64
    step at_auto 60 "./train_gpt2cu $A -d $MULTI_D -x 1 -v 0 > $WORK/auto256.txt 2>&1; ./train_gpt2cu $A -t 64 -d 1024 -x 1 -v 0 > $WORK/auto64.txt 2>&1; grep -h 'attention:' $WORK/auto256.txt $WORK/auto64.txt; grep -q 'attention: cudnn .* by -at auto' $WORK/auto256.txt && grep -q 'attention: own .* by -at auto' $WORK/auto64.txt"
    # -lg: NVML's line (the driver's library) after each step, real readings
    step gpu_log 60 "./train_gpt2cu $A -d $MULTI_D -x 2 -v 0 -lg 1 > $WORK/lg.txt 2>&1; rc=\$?; cat $WORK/lg.txt; [ \$rc -eq 0 ] && [ \$(grep -cE '^  gpu: SM [0-9]+/[0-9]+ MHz \\| [0-9]+/[0-9]+ W \\| [0-9]+ C' $WORK/lg.txt) = 2 ]"
    grep -h "^  gpu:" "$WORK/lg.txt" 2> /dev/null | head -1 | sed 's/^/      /' | tee -a "$SUMMARY"
    # --prompt: greedy text within bf16's rounding of fp32's (dev/test/greedy_within.py), past the
    # model's 64-token window; with -at cudnn the calls at the full window run cuDNN's attention;
    # then at a 256-token window with sharp attention, where the new rows' keys past 128 are split
    # over CTAs and combined (attention_forward_rows) and a part weighed wrongly shows
    (unpack_embedded "$WORK/gen"; $PY dev/test/greedy_within.py make "$WORK/sharp.bin"
     $PY dev/test/greedy_within.py make "$WORK/sharp256.bin" window256) > "$WORK/gen.txt" 2>&1  # else the step fails
    GEN="./train_gpt2cu -e $WORK/sharp.bin --prompt 'a|b' -g 80 --bpe-dir $WORK/gen/gpt2 --temperature 0"
    CHECK="$PY dev/test/greedy_within.py check $WORK/sharp.bin $WORK/gen/gpt2 'a|b'"
    GEN256="./train_gpt2cu -e $WORK/sharp256.bin --prompt 'a|b' -g 300 --bpe-dir $WORK/gen/gpt2 --temperature 0"
    CHECK256="$PY dev/test/greedy_within.py check $WORK/sharp256.bin $WORK/gen/gpt2 'a|b'"
    step generate 60 "$GEN > $WORK/greedy.txt && $CHECK $WORK/greedy.txt 10 && $GEN -at cudnn > $WORK/greedy_cudnn.txt && $CHECK $WORK/greedy_cudnn.txt 10 && $GEN256 > $WORK/greedy256.txt && $CHECK256 $WORK/greedy256.txt 10"
    # generation's speed (a figure, not a check): d12's time per token, from 10 and from 510 greedy
    # tokens after a 5-token prompt (their difference leaves the start-up out); each token one row's forward
    GEN12="./train_gpt2cu -e d12 --prompt 'The meaning of life is' --bpe-dir $WORK/gen/gpt2 --temperature 0"
    step generate_speed 90 "t0=\$(date +%s%N) && $GEN12 -g 10 > /dev/null && t1=\$(date +%s%N) && $GEN12 -g 510 > /dev/null && t2=\$(date +%s%N) && echo \"generate d12: \$(( (t2 - 2 * t1 + t0) / 500000 )) us per token (tokens 11-510 after a 5-token prompt, greedy)\""
    grep -h "^generate d12" "$WORK/logs/generate_speed.log" 2> /dev/null | sed 's/^/      /' | tee -a "$SUMMARY"
    # HellaSwag (-h 1; its batches are shorter than -t, so our attention kernel): the CPU trainer's
    # accuracy on 40 random examples (the count right, at the start and after a step), up to 2 flips of
    # bf16's rounding; only the result lines 'HellaSwag: n/40' (a CPU evaluation past 5 s also prints
    # progress lines 'HellaSwag ... n/40 examples')
    $PY dev/bench/make_random_hellaswag.py "$WORK/hs.bin" 40 3 $MULTI_VOCAB
    HSW="$A -d $MULTI_D -x 1 -v 1 -h 1 -hf $WORK/hs.bin"
    rm -rf "$D/hs_gpu" "$D/hs_cpu"
    step hellaswag 90 "./train_gpt2cu $HSW -o $D/hs_gpu > $D/hs_gpu.txt && ./train_gpt2 $HSW -o $D/hs_cpu > $D/hs_cpu.txt && paste <(grep '^HellaSwag:' $D/hs_gpu.txt) <(grep '^HellaSwag:' $D/hs_cpu.txt) | awk -F'[ /\t]' '{ print; d = \$2 - \$9; if (d > 2 || d < -2 || NF != 14) bad = 1 } END { exit bad || NR != 2 }'"
    step resume_bitwise 60 "resume_copy $D/det_a $D/det_r && ./train_gpt2cu $A -d $MULTI_D -n 5 -o $D/det_r -y 1 > $D/det_r.txt 2>&1; rc=\$?; cat $D/det_r.txt; [ \$rc -eq 0 ] && $(resumed "$D/det_r.txt" "$D/det_r" "$D/det_a" 0)"
    # a fatal error (a token past the vocabulary in step 3's data, unshuffled) while checkpoint 2 is
    # written from the pinned snapshot: finished before the exit, and it resumes bitwise
    shard_put "$D/train.bin" "$WORK/badtoken.bin" $((2 * MULTI_D + 100)) 65535
    FE="-j $D/val.bin $TRAIN_ARGS_SMALL -d $MULTI_D -sh 0 -n 2"
    rm -rf "$D/fatal" "$D/fatal_ref"
    step fatal_checkpoint 90 "./train_gpt2cu -i $WORK/badtoken.bin $FE -o $D/fatal > $D/fatal.txt 2>&1; rc=\$?; grep -E '^error|^finishing|^checkpoint 2 ' $D/fatal.txt; [ \$rc -eq 1 ] && [ -f $D/fatal/DONE_00000002 ] && ./train_gpt2cu -i $D/train.bin $FE -o $D/fatal_ref > /dev/null 2>&1 && ./train_gpt2cu -i $D/train.bin $FE -o $D/fatal -y 1 > $D/fatal_res.txt 2>&1 && grep -q 'resumed from checkpoint 2 ' $D/fatal_res.txt && compare_logs $D/fatal_ref/main.log $D/fatal/main.log trl=0 norm=0"
    step preempt 90 "preempt_run ./train_gpt2cu $D/pre $A -d $MULTI_D"
    # -mt 1 with -o: the choices kept in the folder; its resume reads them (real cuBLASLt's algorithms,
    # restored from the file and checked) and repeats steps 6-10 bit for bit
    rm -rf "$D/mt_a" "$D/mt_r"
    step resume_mt1 90 "./train_gpt2cu $A -d $MULTI_D -n 5 -mt 1 -o $D/mt_a > $D/mt_a.txt 2>&1 && resume_copy $D/mt_a $D/mt_r && ./train_gpt2cu $A -d $MULTI_D -n 5 -mt 1 -o $D/mt_r -y 1 > $D/mt_r.txt 2>&1; rc=\$?; grep -h 'matmul algorithms' $D/mt_a.txt $D/mt_r.txt; [ \$rc -eq 0 ] && grep -q 'of them by an earlier run' $D/mt_r.txt && $(resumed "$D/mt_r.txt" "$D/mt_r" "$D/mt_a" 0)"
    $PY dev/bench/make_random_shard.py "$WORK/small.bin" 300000 3 > /dev/null
    step bad_no_gpu 60 "CUDA_VISIBLE_DEVICES= ./train_gpt2cu -i $WORK/small.bin -v 0 -e d12 > $WORK/nogpu.txt 2>&1; rc=\$?; cat $WORK/nogpu.txt; [ \$rc -ne 0 ] && grep -q 'no CUDA GPU is visible' $WORK/nogpu.txt"
    step bad_too_large 60 "./train_gpt2cu -i $WORK/small.bin -v 0 -e d48 -b 512 -t 1024 -x 1 > $WORK/big.txt 2>&1; rc=\$?; cat $WORK/big.txt; [ \$rc -ne 0 ] && grep -q 'GiB of GPU memory' $WORK/big.txt && grep -q -- '-r 2' $WORK/big.txt"
    bg_wait build_sm80_only
    step bad_arch 60 "build/arch_80/train_gpt2cu -i $WORK/small.bin -v 0 -e d12 > $WORK/arch.txt 2>&1; rc=\$?; cat $WORK/arch.txt; [ \$rc -ne 0 ] && grep -q 'no machine code for GPU' $WORK/arch.txt"
fi

if has_part multi; then
    rm -rf "$D"/single "$D"/accum2 "$D"/nccl1* "$D"/torchrun* "$D"/mpi2* "$D"/kill
    step single 60 "./train_gpt2cu $A -d $MULTI_D -o $D/single"
    step single_accum2 60 "./train_gpt2cu $A -d $MULTI_D -b 2 -o $D/accum2"
    step nccl_1rank 60 "LLMC_FORCE_NCCL=1 ./train_gpt2cu $A -d $MULTI_D -o $D/nccl1 && compare_logs $D/nccl1/main.log $D/single/main.log trl=0 norm=0"
    step nccl_1rank_zero1 60 "LLMC_FORCE_NCCL=1 ./train_gpt2cu $A -d $MULTI_D -z 1 -o $D/nccl1z && compare_logs $D/nccl1z/main.log $D/single/main.log trl=0 norm=0"
    # the stream-order debug mode (LLMC_DEBUG_STREAMS=1: the NCCL stream flips the signs of what it
    # reduces or gathers, waits 2 ms, flips them back) changes nothing while the events are right...
    step nccl_debug_streams 180 "for z in 0 1; do LLMC_FORCE_NCCL=1 LLMC_DEBUG_STREAMS=1 ./train_gpt2cu $A -d $MULTI_D -z \$z -o $D/nccldbg\$z && compare_logs $D/nccldbg\$z/main.log $D/single/main.log trl=0 norm=0 || exit 1; done"
    # ...and shows each of the four waits between the two streams when a test build leaves it out
    step nccl_dropped_waits 240 "for w in 1 2 3 4; do LLMC_FORCE_NCCL=1 LLMC_DEBUG_STREAMS=1 LLMC_TEST_DROP_WAIT=\$w build/drop_wait/train_gpt2cu $A -d $MULTI_D -z 1 -o $D/ncclmiss\$w > $D/ncclmiss\$w.txt 2>&1 || { echo \"wait \$w left out: exit \$?\"; tail -3 $D/ncclmiss\$w.txt; exit 1; }; if compare_logs $D/ncclmiss\$w/main.log $D/single/main.log trl=0 norm=0 > /dev/null; then echo \"wait \$w left out, yet the run is bitwise the plain one\"; exit 1; fi; echo \"wait \$w left out: the run differs, as it must\"; done"
    # torchrun (torch.distributed.run, lib.sh's torchrun_cmd)
    torchrun_cmd
    TORCHRUN="${TORCHRUN[*]} --nproc_per_node=1"
    step torchrun_1 180 "$TORCHRUN ./train_gpt2cu $A -d $MULTI_D -o $D/torchrun && compare_logs $D/torchrun/main.log $D/single/main.log trl=0 norm=0 && LLMC_FORCE_NCCL=2 $TORCHRUN ./train_gpt2cu $A -d $MULTI_D -o $D/torchrun_nccl && compare_logs $D/torchrun_nccl/main.log $D/single/main.log trl=0 norm=0"
    step torchrun_ctrl_c 120 "torchrun_ctrl_c '$TORCHRUN' $D/torchrun_int $A -d $MULTI_D"
    if [ -n "$MPIRUN_STR" ]; then
        step mpi_sanity 60 "$MPIRUN_STR -np 2 hostname"
        # 2 ranks of B=2 on the one GPU vs 1 process of B=2 with 2 micro-steps: the same tokens per
        # step; bf16 gradients summed in another order (5e-3: the GPU-vs-CPU bound halved)
        step mpi_np2 180 "$MPIRUN_STR -np 2 ./train_gpt2cu $A -d $MULTI_D -b 2 -pb mpi -n 5 -o $D/mpi2 && compare_logs $D/mpi2/main.log $D/accum2/main.log trl=5e-3 norm=5e-3 && ls $D/mpi2/DONE_00000010"
        # ZeRO-1 changes no bit: the same sums of the 2 ranks' gradients, the norm from whole chunks
        # (llmc/cuda/global_norm.cuh), AdamW's rounding keyed to the parameter; the logs, and the
        # weights and optimizer state of checkpoint 10 (-z 1's state files sliced otherwise)
        step mpi_np2_zero1 180 "$MPIRUN_STR -np 2 ./train_gpt2cu $A -d $MULTI_D -b 2 -pb mpi -z 1 -n 5 -o $D/mpi2z && compare_logs $D/mpi2z/main.log $D/mpi2/main.log trl=0 norm=0 && compare_checkpoints $D/mpi2z $D/mpi2 10 && ls $D/mpi2z/state_00000005_00001.bin"
        # the -z 1 checkpoint 5 resumed on 2 ranks (bitwise) and re-sliced onto 1 process (B=2 in 4
        # micro-steps: the same tokens, summed in another order, so the 2-rank tolerance)
        step mpi_zero1_resume_np2 180 "resume_copy $D/mpi2z $D/mpi2z_r2 && $MPIRUN_STR -np 2 ./train_gpt2cu $A -d $MULTI_D -b 2 -pb mpi -z 1 -n 5 -o $D/mpi2z_r2 -y 1 > $D/mpi2z_r2.txt 2>&1; rc=\$?; cat $D/mpi2z_r2.txt; [ \$rc -eq 0 ] && $(resumed "$D/mpi2z_r2.txt" "$D/mpi2z_r2" "$D/mpi2z" 0)"
        step mpi_zero1_resume_np1 180 "resume_copy $D/mpi2z $D/mpi2z_r1 && ./train_gpt2cu $A -d $MULTI_D -b 2 -n 5 -o $D/mpi2z_r1 -y 1 > $D/mpi2z_r1.txt 2>&1; rc=\$?; cat $D/mpi2z_r1.txt; [ \$rc -eq 0 ] && $(resumed "$D/mpi2z_r1.txt" "$D/mpi2z_r1" "$D/mpi2z" 5e-3)"
        step mpi_nccl_shared_gpu 90 "$MPIRUN_STR -np 2 ./train_gpt2cu $A -d $MULTI_D -b 2 > $D/shared.txt 2>&1; rc=\$?; cat $D/shared.txt; [ \$rc -ne 0 ] && grep -q -- '-pb mpi' $D/shared.txt"
        step mpi_kill_rank 120 "kill_rank $D/kill.txt $MPIRUN_STR -np 2 ./train_gpt2cu $A -d $MULTI_D -b 2 -pb mpi -pt 30 -x 100000 -v 0 -o $D/kill"
        grep -h "killed" "$WORK/logs/mpi_kill_rank.log" 2> /dev/null | sed 's/^/        /' | tee -a "$SUMMARY"
    else
        note "SKIP    mpi_np2, mpi_np2_zero1, mpi_zero1_resume_*, mpi_nccl_shared_gpu, mpi_kill_rank: $MPI_NOTE"
    fi
fi

# planned against allocated: "allocated by this run X GiB, planned Y GiB" (the trainer's end line)
if has_part memory; then
    [ -f "$WORK/small.bin" ] || $PY dev/bench/make_random_shard.py "$WORK/small.bin" 300000 3 > /dev/null
    for m in "d12 -b 16 -r auto" "d48 -b auto -r 2"; do
        name=memory_${m%% *}
        step $name 300 "./train_gpt2cu --plan 1 -i $WORK/small.bin -e $m -t 1024 | tail -5; ./train_gpt2cu -i $WORK/small.bin -e $m -t 1024 -x 2 -v 0 -s 0 -pe 1 -o $WORK/$name > $WORK/$name.txt 2>&1; rc=\$?; cat $WORK/$name.txt; [ \$rc -eq 0 ] && grep -q '^phases, steps 2-2' $WORK/$name.txt && grep -q '\"forward_ms\"' $WORK/$name/metrics.jsonl && awk '/allocated by this run/ { a = \$(NF-4); p = \$(NF-1); d = a - p; print \"allocated - planned:\", d, \"GiB\"; exit !(d >= 0 && d < 1) }' $WORK/$name.txt"
        grep -hE "^-b auto|^-r auto|^phases|GPU memory in use|allocated - planned" "$WORK/logs/$name.log" 2> /dev/null | sed 's/^/        /' | tee -a "$SUMMARY"
    done
    # the largest micro-batch the benchmark runs: its classifier's matrices span more than 2^32 elements
    LB="./train_gpt2cu -i $WORK/small.bin -e d12 -t 1024 -d 131072 -x 2 -v 0 -s 0"
    step large_batch 120 "$LB -b 128 -o $WORK/b128 > $WORK/b128.txt 2>&1 && $LB -b 64 -o $WORK/b64x2 > $WORK/b64x2.txt 2>&1 && compare_logs $WORK/b128/main.log $WORK/b64x2/main.log trl=5e-3 norm=5e-3"
fi

# the benchmark (dev/bench/bench_gpu.sh builds what it needs; make reads NCCL_HOME, ... from the
# environment); its summary goes into summary.txt, its TSV rows to $OUT
# with the prebuilt binaries: no make, and llm.c's prebuilt binary
BENCH_ENV="$MAKEVARS_STR BENCH_OUT=$WORK/bench"
[ $PREBUILT = 1 ] && BENCH_ENV+=" BENCH_NO_BUILD=1 LLMC_BIN=build/llmc/src/train_gpt2cu"
# llm.c built in the background by the build part: done before bench_gpu.sh looks at it
wait_llmc() {
    if [ -n "${BG_PID[build_llmc]:-}" ]; then
        bg_wait build_llmc && grep -h "^build_llmc" "$WORK/logs/build_llmc.log" | sed 's/^/        /' | tee -a "$SUMMARY"
    fi
}
{ has_part bench || has_part d48; } && wait_llmc
# bench_part <name> <limit> <bench_gpu.sh part>: one part of the benchmark as its own step (a call
# whose budget runs out keeps the parts done), its figures into the summary, its TSV rows appended
# to $OUT/gpu_results_rows.tsv (one header)
bench_part() {
    step "$1" "$2" "$BENCH_ENV bash dev/bench/bench_gpu.sh $3"
    [ -f "$WORK/logs/$1.log" ] || return 0
    grep -E "^(  ours|  llmc|  d12|  d48|       gpu \(-lg|\| [0-9]{4}-|phases|  zero|backward:|sum of the|NCCL all-reduce|bench_layers)" \
        "$WORK/logs/$1.log" | sed 's/^/        /' | tee -a "$SUMMARY"
    local rows=$WORK/bench/gpu_results_rows.tsv all=$OUTDIR/gpu_results_rows.tsv
    if [ -s "$rows" ]; then
        [ -s "$all" ] || head -1 "$rows" > "$all"
        tail -n +2 "$rows" >> "$all"
    fi
}
if has_part bench; then
    # ours against llm.c first (the figure the calls exist for), then the variants and the layers
    bench_part bench_d12 300 d12
    bench_part bench_attention 90 attention
    bench_part bench_gelu 90 gelu
    bench_part bench_recompute 90 recompute
    bench_part bench_tune 90 tune
    bench_part bench_biasgrad 60 biasgrad
    bench_part bench_layers 120 layers
fi
if has_part d48; then
    bench_part d48 420 d48
fi

# -opt muon: the workbench; GPU vs CPU (the same tolerance as AdamW's); determinism; ZeRO-1's shards
# of whole matrices on 2 ranks bitwise -z 0 (as mpi_np2_zero1); the benchmark
if has_part muon; then
    rm -rf "$D"/mu_*
    MAKE_MUON="make --no-print-directory -C dev/cuda ../../build/cuda/muon CUDA_ARCHS=90a NVCC=$NVCC &&"
    [ $PREBUILT = 1 ] && MAKE_MUON=""
    step muon_kernel 300 "$MAKE_MUON build/cuda/muon"
    step muon_gpu_vs_cpu 300 "bash dev/test/test_gpu_vs_cpu.sh ./train_gpt2cu ./train_gpt2 -opt muon"
    step muon_determinism 180 "./train_gpt2cu $A -d $MULTI_D -opt muon -o $D/mu_a > /dev/null && ./train_gpt2cu $A -d $MULTI_D -opt muon -o $D/mu_b && compare_logs $D/mu_b/main.log $D/mu_a/main.log trl=0 norm=0"
    if [ -n "$MPIRUN_STR" ]; then
        step muon_mpi_np2_zero1 240 "$MPIRUN_STR -np 2 ./train_gpt2cu $A -d $MULTI_D -b 2 -pb mpi -opt muon -o $D/mu_2 && $MPIRUN_STR -np 2 ./train_gpt2cu $A -d $MULTI_D -b 2 -pb mpi -z 1 -opt muon -o $D/mu_2z && compare_logs $D/mu_2z/main.log $D/mu_2/main.log trl=0 norm=0"
    fi
    step muon_bench 540 "$BENCH_ENV bash dev/bench/bench_gpu.sh muon"
    grep -E "^(\| |best |Muon |adamw_|muon_)" "$WORK/logs/muon_bench.log" 2> /dev/null | sed 's/^/        /' | tee -a "$SUMMARY"
fi

# the kernel workbenches (before the sanitizers: seconds each, where a sanitizer may take minutes)
if has_part kernels; then
    step kernels 180 "CUDA_ARCHS=90a JOBS=$JOBS TIMEOUT=60 SKIP_BUILD=$PREBUILT bash dev/cuda/run_all.sh"
    grep -E "^=== .*exit|^run_all:" "$WORK/logs/kernels.log" | sed 's/^/        /' | tee -a "$SUMMARY"
    # the kernel times to compare with earlier calls (dev/gpu/PLAN.md, "Checks in calls 1-4"):
    # LayerNorm backward, the column sums (dbias), the classifier, what -mt 1 chose
    # in the matmul workbench, the dweight GEMM with our dbias against the one with the BGRADB
    # epilogue (-bg 1), whether cuBLASLt took it, and the probe of the bias-gradient epilogues it has
    grep -E "time (fused_classifier, loss \+ dlogits|layernorm_backward|dbias reduction|dweight)|^matmul algorithms|^bias gradients|-bg 1: |^  probe " \
        "$WORK/logs/kernels.log" 2> /dev/null | sed 's/^/        /' | tee -a "$SUMMARY"
fi

# compute-sanitizer on the trainer's test (tiny fixture) and on the attention workbench: no report
if has_part sanitize; then
    if [ -n "$SANITIZER" ]; then
        MAKE_ATT="&& make --no-print-directory -C dev/cuda ../../build/cuda/attention CUDA_ARCHS=90a NVCC=$NVCC"
        [ $PREBUILT = 1 ] && MAKE_ATT=""
        step sanitize_build 300 "make --no-print-directory dev/test/fixtures/tiny64.bin PYTHON=$PY $MAKE_ATT"
        # racecheck follows our kernels only (each of llmc/cuda's __global__ functions ends in _kernel):
        # cuBLASLt's and cuDNN's are not ours to fix, and instrumenting them is slow (cuDNN's
        # runtime-compiled ones took minutes); memcheck checks every kernel
        OURS="regex=$(grep -ho -E '\b[A-Za-z0-9_]+_kernel\(' llmc/cuda/*.cuh llmc/cuda/*.h | tr -d '(' | sort -u | paste -sd'|')"
        TEST_TINY="./test_gpt2cu dev/test/fixtures/tiny64.bin dev/test/fixtures/tiny64_state.bin dev/test/fixtures/tiny64_traj.txt"
        for t in memcheck racecheck; do
            for prog in test_gpt2cu attention; do
                cmd=$TEST_TINY filter="" limit=150 hook=""
                [ $prog = attention ] && cmd="build/cuda/attention --no-timing" limit=90
                if [ $t = racecheck ]; then
                    filter="--kernel-name '$OURS'"
                    [ $prog = attention ] && cmd="$cmd --no-cudnn --small"  # T <= 130: it ran past 90 s with T = 1024
                    # cuBLASLt's algorithms without thread-block clusters: racecheck failed on the first
                    # one with a cluster (2x4x1) on 2026-11-27, before any of our kernels ran
                    [ $prog = test_gpt2cu ] && hook="LLMC_TEST_GEMM_NO_CLUSTER=1 "
                fi
                step "sanitize_${t}_$prog" $limit "$hook'$SANITIZER' --tool $t $filter --error-exitcode 99 --print-limit 20 $cmd"
                rc=$?
                grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$WORK/logs/sanitize_${t}_$prog.log" 2> /dev/null | sed 's/^/        /' | tee -a "$SUMMARY"
                # a failure the tool itself could not place ("Internal Sanitizer Error", an error that
                # surfaces at a later call): again with every launch synchronous, so that the
                # cudaCheckLaunch() after the launch that faulted names its file and line
                if [ $rc -ne 0 ] && grep -qE "Internal Sanitizer Error|^error: CUDA error" "$WORK/logs/sanitize_${t}_$prog.log"; then
                    step "sanitize_${t}_${prog}_blocking" $limit "${hook}CUDA_LAUNCH_BLOCKING=1 '$SANITIZER' --tool $t $filter --error-exitcode 99 --print-limit 20 $cmd"
                    grep -hE "^error:|Internal Sanitizer|SUMMARY" "$WORK/logs/sanitize_${t}_${prog}_blocking.log" 2> /dev/null | sed 's/^/        /' | tee -a "$SUMMARY"
                fi
            done
        done
        # racecheck of our kernels in the workbenches that launch no cuBLAS (each kernel checked once,
        # WB_NO_TIMING=1): what test_gpt2cu runs, without cuBLASLt's kernels beside them
        WBS="encoder layernorm gelu fused_classifier adamw global_norm"
        step sanitize_racecheck_workbenches 150 "for w in $WBS; do echo \"=== \$w\"; WB_NO_TIMING=1 '$SANITIZER' --tool racecheck --kernel-name '$OURS' --error-exitcode 99 --print-limit 20 build/cuda/\$w || exit 1; done"
        grep -hE "^=== |RACECHECK SUMMARY" "$WORK/logs/sanitize_racecheck_workbenches.log" 2> /dev/null | paste -sd' ' | sed 's/^/        /' | tee -a "$SUMMARY"
    else
        note "SKIP    sanitize: compute-sanitizer not found"
    fi
fi

# Nsight Compute over about one d12 step at B=16 (400 kernel launches after 600 skipped: the start
# and step 1): each kernel's time, throughput and occupancy, summarized per kernel name
if has_part profile; then
    if [ -n "$NCU" ]; then
        [ -f "$WORK/small.bin" ] || $PY dev/bench/make_random_shard.py "$WORK/small.bin" 300000 3 > /dev/null
        step profile_ncu 420 "'$NCU' --clock-control none --target-processes all --launch-skip 600 --launch-count 400 --section SpeedOfLight --section LaunchStats --section Occupancy --export $WORK/ncu_d12 --force-overwrite ./train_gpt2cu -i $WORK/small.bin -e d12 -b 16 -t 1024 -x 4 -v 0 -s 0"
        if grep -q "ERR_NVGPUCTRPERM" "$WORK/logs/profile_ncu.log" 2> /dev/null; then
            note "        ncu was refused the GPU's counters; env found: $(ncu_access)"
        fi
        if [ -f "$WORK/ncu_d12.ncu-rep" ] && [ "$(stat -c %s "$WORK/ncu_d12.ncu-rep")" -lt 15000000 ]; then
            cp "$WORK/ncu_d12.ncu-rep" "$OUTDIR/"
        fi
        # with --export, ncu prints no summary (2026-11-27: 164 s of profiling and no figure came
        # back): the report's raw page per kernel, the 25 longest into the summary
        if [ -f "$WORK/ncu_d12.ncu-rep" ]; then
            step profile_summary 120 "'$NCU' --import $WORK/ncu_d12.ncu-rep --csv --page raw --print-units base > $WORK/ncu_raw.csv && $PY dev/bench/ncu_summary.py $WORK/ncu_raw.csv 25" &&
                sed 's/^/        /' "$WORK/logs/profile_summary.log" | head -28 | tee -a "$SUMMARY"
        fi
    else
        note "SKIP    profile: ncu not found"
    fi
fi

bg_wait build_sm80_only
wait_llmc
note "== done in $(( $(date +%s) - T0 ))s: $NFAIL step(s) failed"
pack_logs
[ $NFAIL -eq 0 ]
