#!/usr/bin/env bash
# The CUDA trainer (train_gpt2.cu, test_gpt2.cu) on the CPU host simulator, no GPU needed: every
# kernel runs from its own source with fibers for threads (dev/cuda/sim), the fused attention with
# its PTX primitives emulated and checked, cuBLASLt is a stand-in written from its documented
# semantics; a simulator error (race, bounds, deadlock) fails the run.
# It checks the orchestration a GPU run would otherwise be the first to exercise:
#  1. per-step train and val losses agree with the fp32 CPU trainer from the same init and data
#     (bf16 tolerance), with -r 0/1/2, with -w 0 and with each -ge (GELU in cuBLASLt's epilogue or not);
#     -mt 1 (cuBLASLt's algorithms chosen by timing) bitwise the plain run; -bg 1 (the bias gradients
#     from the weight-gradient matmuls' epilogue, added up over the 2 micro-steps) against the CPU;
#     a token at 60% of the positions (the embedding backward's segments of 128) against the CPU;
#  2. determinism (a second run is bitwise identical) and resume from a checkpoint (bitwise); the CPU
#     trainer's checkpoint resumed with its fp32 weights as the master weights, exactly, and the CUDA
#     trainer's by the CPU trainer from its master weights, exactly (-w 0 resuming it warns, and so
#     does a resume with other -r, -ge and -bg than its checkpoint's); NCCL
#     on a 1-rank communicator (the simulator's NCCL, sim/nccl.h), -z 0 and -z 1, with the
#     stream-order debug mode LLMC_DEBUG_STREAMS=1, is bitwise the plain run, and each of the four
#     event waits between the streams left out (the dropwait build) makes it differ;
#  3. MPI, host-staged (-pb mpi), 2 ranks: equals 1 rank with 2 micro-steps (bf16 tolerance); a
#     frozen rank ends the job within -pt with the line of processes.h's deadline;
#     ZeRO-1: bitwise -z 0 (logs, weights and optimizer state; 2 and 3 ranks), writes a state file
#     per rank, resumes bitwise on 2 ranks and re-shards onto 1 rank; -pb nccl on 2 simulated GPUs
#     is bitwise -pb mpi (also with the NCCL id through -pi fs's files instead of MPI), with -z 0
#     and with ZeRO-1's
#     reduce-scatter layout (and the debug mode on); the host's collectives over NCCL, as when no
#     MPI launched the ranks (LLMC_FORCE_NCCL=2): the same log and checkpoint files, and a resume;
#  4. -opt muon (llmc/cuda/muon.cuh): against the CPU trainer's Muon; 2 ranks -pb mpi with ZeRO-1 (shards
#     of whole matrices) bitwise -z 0, -pb nccl -z 1 bitwise -pb mpi -z 1, bitwise resume on 2
#     ranks and re-sharded onto 1;
#  5. the AddressSanitizer build on short runs (single process -r 0 and -r 2; -r 1 with -ge 0 -bg 1
#     -mt 1 -w 0; a resume; 2 ranks ZeRO-1 with AdamW and with Muon);
#  6. test_gpt2cu against a PyTorch fixture (the tolerances the GPU run uses), -ge 2 and -ge 0, -mt 1,
#     -bg 1 (the bias gradients from the weight-gradient matmuls' epilogue, and with cuBLASLt
#     refusing that epilogue, SIM_CUBLASLT_NO_BGRADB=1: our column sums take over), and the racecheck
#     hook LLMC_TEST_GEMM_NO_CLUSTER=1 where GEMMs with a cluster fail (SIM_CUBLASLT_CLUSTER_FAULT=1);
#  7. bad launches: unsupported head size, too little free GPU memory for cuBLAS's workspace, a padded vocabulary not a multiple of 8, -pb mpi without
#     mpirun, several ranks without NCCL or on one GPU with NCCL, -at cudnn in a build without cuDNN
#     (the AddressSanitizer build's), bad LLMC_DEBUG_STREAMS, LLMC_GELU_FUSION and
#     LLMC_MATMUL_TUNE and LLMC_BIAS_GRAD and LLMC_TEST_GEMM_NO_CLUSTER, a clustered GEMM failing, a
#     driver older than the runtime and none at all; bad -i and -j named before the GPU starts;
#  8. the memory plan (--plan) equals the simulator's allocator peak, byte for byte (-r 0/1/2, -w 0,
#     -at cudnn, ZeRO-1 on 2 ranks); -b auto on a device of SIM_DEVICE_MEMORY bytes picks the B whose measured
#     peak fits the budget while B+1's does not, and on 2 ranks the smaller device decides; -r auto
#     takes the least recomputation that fits, and a resume the checkpoint's level where it fits
#     (bitwise); the phase times come from the events (adding up to at most the step's time) and
#     NVTX ranges nest;
#  9. the generate mode (--prompt): greedy text within bf16's rounding of fp32's, past the window
#     (also at a 256-token window with sharp attention: the rows kernel's key splits combined);
# 10. HellaSwag (-h 1, batches shorter than -t): the CPU trainer's accuracy; under AddressSanitizer;
#     -x 0 (an evaluation, no train data read): the CPU trainer's val loss and accuracy;
# 11. a rollback (-rb) reloads a checkpoint mid-run: the CPU trainer's losses, and bitwise a resume;
# 12. SIGTERM: a checkpoint after the step, exit 0, and -y 1 continues bitwise;
# 13. a fatal error (a bad token) while a checkpoint is written in the background: it is finished
#     first, and resumes bitwise;
# 14. -at cudnn on the simulator's stand-in for cuDNN's attention (dev/cuda/sim/cudnn_att.h: our
#     kernels behind cudnn_att.h, which the trainer and test_gpt2cu here are built with): bitwise
#     -at own, validation included; its workspace in the plan (section 8: byte for byte the peak); -b auto
#     down to the B whose graphs cuDNN builds within its workspace limit, and a refusal at the run's
#     own B a one-line error; -at auto's choice of it from T 256 on; a backward that is not
#     deterministic warned of; a resume with -at own warned of; test_gpt2cu with LLMC_ATTENTION=cudnn.
# usage: dev/test/test_cuda_sim.sh [build/cuda_sim]   (make test-cuda-trainer-sim builds it there)
SIMT=$(realpath "${1:-build/cuda_sim}")
SIM="$SIMT/train_gpt2cu" ASAN="$SIMT/train_gpt2cu_asan" TEST="$SIMT/test_gpt2cu" DROP="$SIMT/train_gpt2cu_dropwait"
source "$(dirname "$0")/lib.sh" test_cuda_sim ./train_gpt2  # TRAINER (the CPU one), PY, ROOT, TMP (cwd), MPIRUN
CPU=$TRAINER
export ASAN_OPTIONS=detect_leaks=0  # MPI and the fiber stacks keep memory to the end on purpose

$PY "$ROOT/dev/bench/make_random_shard.py" train.bin 20000 1 128
$PY "$ROOT/dev/bench/make_random_shard.py" val.bin 4000 2 128
# head size 64 (the fused attention's); 4C = 256 > Vp = 128, so the logits buffer is sized by 4C
ARGS=(-i train.bin -j val.bin -e L2:C64:H1:T32:V128 -b 2 -t 16 -d 64 -x 4 -v 0 -s 0 -l 1e-3 -u 1 -c 0.1)

# main.logs compared with compare_logs (lib.sh). The gradient norm (norm=) is the backward pass's
# sharpest signal in a log: a wrong statistic or stride in one layer's backward moves it by ~1%
# but the loss by ~1e-5.
# the step lines' "step N/M | loss X | norm Y" part, for bitwise comparisons
steplines() { grep -o '^step [0-9]*/[0-9]* | loss [^|]*| norm [^|]*' "$1"; }
run() {  # run <name> <binary> args...: stdout+stderr to <name>.txt, complain on failure
    local name=$1; shift
    "$@" > "$name.txt" 2>&1 || { bad "$name exited non-zero"; tail -5 "$name.txt"; }
}
# two single-process runs at a time (the simulator uses one core): bg <name> <cmd...>, then joined;
# aside <name> <cmd...> starts one that mostly sleeps beside them, joined later by name alone
bg_pids=()
declare -A aside_pid=()
launch() { local name=$1; shift; ( "$@" > "$name.txt" 2>&1; echo $? > "$name.rc" ) & }
bg() { launch "$@"; bg_pids+=($!); }
aside() { launch "$@"; aside_pid[$1]=$!; }
joined() {  # joined <name>...: wait for the background runs (bg's, and the named aside ones), complain about failed ones
    local n
    [ ${#bg_pids[@]} -eq 0 ] || wait "${bg_pids[@]}"  # (a bare wait would wait for the aside ones too)
    bg_pids=()
    for n in "$@"; do
        [ -z "${aside_pid[$n]:-}" ] || wait "${aside_pid[$n]}"
        [ "$(cat "$n.rc" 2>/dev/null)" = 0 ] || { bad "$n exited non-zero"; tail -5 "$n.txt"; }
    done
}

# ---- 1. the CPU trainer vs the simulated CUDA trainer, same init (gpt2_init_params) and data.
# Tolerance: bf16 forward/backward (logits and gradients ~0.5% of their largest entries in the
# simulator's test_gpt2cu) move a mean loss of ~4.9 by ~1e-4 relative over these steps; 2e-3 is
# 10x that and still 100x below what a wrong stride or buffer does to it.
echo "1. CPU (fp32) vs simulated CUDA (bf16), 4 steps of 2 micro-steps:"
# -mt 1 where the winner is fast only in a burst (below): about 50 s, nearly all of it the stand-in's
# sleeps, so it runs beside the rest of this section
aside sim_mtb env SIM_LT_BURST=1 "$SIM" "${ARGS[@]}" -mt 1 -o sim_mtb
run cpu "$CPU" "${ARGS[@]}" -v 4 -m 2 -o cpu
bg sim "$SIM" "${ARGS[@]}" -v 4 -m 2 -o sim
bg sim_r1 "$SIM" "${ARGS[@]}" -r 1 -o sim_r1
joined sim sim_r1
bg sim_r2 "$SIM" "${ARGS[@]}" -r 2 -o sim_r2
bg sim_w0 "$SIM" "${ARGS[@]}" -w 0 -o sim_w0
joined sim_r2 sim_w0
bg sim2 "$SIM" "${ARGS[@]}" -o sim2
bg ck "$SIM" "${ARGS[@]}" -o ck -n 2
joined sim2 ck
# -ge: 0 our GELU kernels (sigmoid form, fast exp), 1 cuBLASLt's epilogue (tanh form, here in fp64)
# in the forward only, 2 (the default, sim) in both
bg sim_ge0 "$SIM" "${ARGS[@]}" -ge 0 -o sim_ge0
bg sim_ge1 "$SIM" "${ARGS[@]}" -ge 1 -o sim_ge1
joined sim_ge0 sim_ge1
# gradient norms: measured 1.2e-3 at most over these steps (bf16 gradients, drifting runs)
compare_logs sim/main.log cpu/main.log trl=2e-3 tel=2e-3 norm=3e-3 || bad "simulated CUDA vs CPU"
# without -r: -r auto, here -r 0 (the simulator's device holds every activation)
grep -q "recompute -r 0 |" sim.txt && grep -q '^# -r auto: -r 0,' sim/main.log && ok "the default -r auto: -r 0 on this device" \
    || bad "the default -r: $(grep -m1 -o 'recompute -r [^|]*' sim.txt)"
for r in 1 2; do
    echo " -r $r vs -r 0:"; compare_logs sim_r$r/main.log sim/main.log trl=1e-3 norm=2e-3 || bad "-r $r differs from -r 0"
done
echo " -w 0 (bf16 parameters, no master weights) vs CPU:"
compare_logs sim_w0/main.log cpu/main.log trl=3e-3 || bad "-w 0 vs CPU"
for g in 0 1; do
    echo " -ge $g vs CPU:"; compare_logs sim_ge$g/main.log cpu/main.log trl=2e-3 norm=3e-3 || bad "-ge $g vs CPU"
done
grep -q "GELU -ge 0" sim_ge0.txt || bad "-ge 0 not in the banner"
grep -q "gradient reduction: none (one process)" sim.txt || bad "no device/backend line on stdout"
# -at auto, the default: our kernel at this T (cuDNN's from T 256 on, in builds with it), and says why
grep -q "attention: own (llmc/cuda/attention.cuh) by -at auto" sim.txt || bad "the banner's attention: $(grep -o 'attention: [^|]*' sim.txt)"

# -lg: the GPU line every N steps from NVML, here a stand-in libnvidia-ml.so.1 (dev/test/nvml_stub.c)
# with fixed readings; without any NVML one warning, and the run goes on
mkdir -p nvml && cc -shared -fPIC "$ROOT/dev/test/nvml_stub.c" -o nvml/libnvidia-ml.so.1 || bad "the NVML stand-in did not build"
bg sim_lg env LD_LIBRARY_PATH="$PWD/nvml${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$SIM" "${ARGS[@]}" -lg 2 -o sim_lg -tb 1
if ldconfig -p 2> /dev/null | grep -q "libnvidia-ml.so.1"; then no_nvml=0; else no_nvml=1; bg sim_lg0 "$SIM" "${ARGS[@]}" -lg 1; fi
# -mt 1: cuBLASLt's algorithms by timing (the stand-in's 3 candidates compute alike, its first is the
# slowest: by 40 ms a call with SIM_LT_WIDE=1, which a loaded machine's scheduling does not overturn)
bg sim_mt env SIM_LT_WIDE=1 "$SIM" "${ARGS[@]}" -mt 1 -o sim_mt
joined sim_lg sim_mt $([ $no_nvml = 1 ] && echo sim_lg0)
# -bg 1: the bias gradients from the dweight GEMMs' epilogue (it overwrites: the trainer adds it up)
run sim_bg1 "$SIM" "${ARGS[@]}" -bg 1 -o sim_bg1
echo " -bg 1 vs CPU:"; compare_logs sim_bg1/main.log cpu/main.log trl=2e-3 norm=3e-3 || bad "-bg 1 vs CPU"
grep -q "bias gradients: in the weight-gradient matmuls (-bg 1)" sim_bg1.txt &&
    grep -q "^bias gradients (-bg 1): [1-9][0-9]* in the weight-gradient matmuls' epilogue, 0 by our column sums" sim_bg1.txt \
    || bad "-bg 1: the banner or the closing line: $(grep "bias gradients" sim_bg1.txt)"
# a text repeats its frequent tokens hundreds of times a batch, and the embedding backward cuts a
# token's positions into segments of 128 (llmc/cuda/encoder.cuh) that a second kernel adds up: a path
# the runs above (32 positions a micro-batch) never take. Here token 0 holds 60% of the positions,
# about 150 of each micro-batch's 256
$PY "$ROOT/dev/bench/make_random_shard.py" skew.bin 20000 4 128 0.6
SKEW=(-i skew.bin -j val.bin -e L2:C64:H1:T32:V128 -b 8 -t 32 -d 512 -x 3 -v 0 -s 0 -l 1e-3 -u 1 -c 0.1)
bg cpu_skew "$CPU" "${SKEW[@]}" -o cpu_skew
bg sim_skew "$SIM" "${SKEW[@]}" -o sim_skew
joined cpu_skew sim_skew
echo " a token at 60% of the positions (the embedding backward's segments) vs CPU:"
compare_logs sim_skew/main.log cpu_skew/main.log trl=2e-3 norm=3e-3 || bad "a frequent token vs CPU"
want="  gpu: SM 1410/1980 MHz | 650/700 W | 62 C (slows at 87) | busy 97%, memory busy 41% | memory 24.0/140.0 GiB | clocks held back: power cap"
got=$(grep -A1 "^step [0-9]*/4 " sim_lg.txt | grep -v "^--" | paste -sd'#')
expect_lines="$(grep "^step 1/4 " sim_lg.txt)#$(grep "^step 2/4 " sim_lg.txt)#$want#$(grep "^step 3/4 " sim_lg.txt)#$(grep "^step 4/4 " sim_lg.txt)#$want"
[ "$got" = "$expect_lines" ] && ok "-lg 2: NVML's line after steps 2 and 4 (the device found by its PCI bus id)" \
    || { bad "-lg 2: the lines around the steps:"; grep -A1 "^step" sim_lg.txt | head -12; }
# the same readings in metrics.jsonl (the steps printed as 2 and 4 are main.log's s 1 and 3) and TensorBoard
readings=$($PY -c '
import json, sys
keys = ["gpu_sm_mhz", "gpu_sm_max_mhz", "gpu_power_w", "gpu_power_limit_w", "gpu_temp_c", "gpu_busy_pct", "gpu_mem_used_gib", "gpu_held_back"]
steps = [e for e in map(json.loads, open(sys.argv[1])) if e.get("event") == "step"]
print(" ".join(str(e["step"]) + ":" + ",".join(str(e.get(k)) for k in keys) for e in steps))' sim_lg/metrics.jsonl)
none="None,None,None,None,None,None,None,None" some="1410,1980,650.5,700.0,62,97,24.0,power cap"
[ "$readings" = "0:$none 1:$some 2:$none 3:$some" ] &&
    grep -qa "gpu/power_w" sim_lg/events.out.tfevents.* && ok "-lg 2: the readings in metrics.jsonl (every second step) and TensorBoard" \
    || bad "-lg 2: metrics.jsonl's readings: $readings"
if [ $no_nvml = 1 ]; then
    [ "$(grep -c "warning: -lg: no GPU line: cannot load libnvidia-ml.so.1" sim_lg0.txt)" = 1 ] &&
    [ "$(grep -c "^step [0-9]*/4 " sim_lg0.txt)" = 4 ] && ! grep -q "^  gpu:" sim_lg0.txt \
        && ok "-lg without NVML: one warning, the run goes on" || { bad "-lg without NVML:"; head -20 sim_lg0.txt; }
fi

# -mt 1 where the winner is fast only in the burst it was timed in (SIM_LT_BURST=1, as an algorithm
# whose speed a GPU at its power cap does not sustain): the second timing against the first
# overturns it for every shape, and the run keeps the heuristic's first choices (started at the top)
joined sim_mtb
n=$(sed -n 's/^matmul algorithms (-mt 1): \([0-9]*\) GEMM shapes timed.*/\1/p' sim_mtb.txt)
compare_logs sim_mtb/main.log sim2/main.log trl=0 norm=0 > /dev/null && [ "${n:-0}" -gt 0 ] \
    && grep -q "the heuristic's first was the fastest for $n (for $n of them a second timing overturned another's lead);" sim_mtb.txt \
    && ok "-mt 1, a winner fast only in a burst: overturned by the second timing for all $n shapes, the heuristic's first kept" \
    || { bad "-mt 1, a winner fast only in a burst:"; grep "matmul" sim_mtb.txt; }

echo " -mt 1 (the timing runs must leave every accumulated gradient as it was):"
compare_logs sim_mt/main.log sim2/main.log trl=0 norm=0 || bad "-mt 1 differs from the plain run"
grep -q "matmul algorithms: the fastest by timing (-mt 1)" sim_mt.txt &&
    grep -q "matmul algorithms (-mt 1): [1-9][0-9]* GEMM shapes timed, up to 8 candidates each; the heuristic's first was the fastest for 0;" sim_mt.txt \
    && ok "-mt 1: the banner, and every shape chose a faster candidate than the heuristic's first" \
    || { bad "-mt 1: the lines:"; grep "matmul" sim_mt.txt; }

# -mt 1's choices kept in -o (matmul_algos_00000.bin): a second run into a copy of that folder reads
# them all (no timing; the same log, bit for bit); a file that cannot be used (damaged, another
# GPU, an algorithm cuBLASLt's check refuses, a folder in its place) is one warning, the run times
# what it must and goes on
algo_file=sim_mt/matmul_algos_00000.bin
algo_patch() {  # algo_patch <file> device|records|algo: another GPU's name, a flipped record byte, a bad algorithm
    $PY - "$@" <<'EOF'
import struct, sys, zlib
path, how = sys.argv[1], sys.argv[2]
b = bytearray(open(path, "rb").read())
kb, ab = struct.unpack_from("<ii", b, 24)
if how == "device":
    b[72:72 + 256] = b"NVIDIA H200".ljust(256, b"\0")
elif how == "records":
    b[328 + 10] ^= 1
else:  # the first record's algorithm: the stand-in's mark (its 5th word) changed, the checksum made to fit
    struct.pack_into("<Q", b, 328 + kb + 32, 0x52)
    struct.pack_into("<I", b, 36, zlib.crc32(bytes(b[328:])))
open(path, "wb").write(bytes(b))
EOF
}
if [ -f "$algo_file" ]; then
    for c in again damaged device algo folder fifo; do rm -rf mt_$c && mkdir mt_$c && cp "$algo_file" mt_$c/; done
    algo_patch mt_damaged/matmul_algos_00000.bin records
    algo_patch mt_device/matmul_algos_00000.bin device
    algo_patch mt_algo/matmul_algos_00000.bin algo
    rm mt_folder/matmul_algos_00000.bin && mkdir mt_folder/matmul_algos_00000.bin
    rm mt_fifo/matmul_algos_00000.bin && mkfifo mt_fifo/matmul_algos_00000.bin
    bg mt_again "$SIM" "${ARGS[@]}" -mt 1 -o mt_again
    bg mt_damaged "$SIM" "${ARGS[@]}" -mt 1 -o mt_damaged
    joined mt_again mt_damaged
    bg mt_device "$SIM" "${ARGS[@]}" -mt 1 -o mt_device
    bg mt_algo "$SIM" "${ARGS[@]}" -mt 1 -o mt_algo
    joined mt_device mt_algo
    bg mt_folder "$SIM" "${ARGS[@]}" -mt 1 -o mt_folder
    bg mt_fifo timeout 120 "$SIM" "${ARGS[@]}" -mt 1 -o mt_fifo  # an open() of the FIFO would wait for a writer
    joined mt_folder mt_fifo
    run mt_damaged2 "$SIM" "${ARGS[@]}" -mt 1 -o mt_damaged  # reads the file the damaged one's run wrote
    n=$(sed -n 's/^matmul algorithms (-mt 1): \([0-9]*\) GEMM shapes timed.*/\1/p' sim_mt.txt)
    compare_logs mt_again/main.log sim_mt/main.log trl=0 norm=0 > /dev/null &&
        grep -q "^matmul algorithms (-mt 1): kept in mt_again/matmul_algos_00000.bin; $n read from there" mt_again.txt &&
        grep -q "; $n of them by an earlier run (mt_again/matmul_algos_00000.bin)$" mt_again.txt \
        && ok "-mt 1 into a folder with the file: all $n choices read, none timed, the same log bit for bit" \
        || { bad "-mt 1 with the file:"; grep "matmul" mt_again.txt; }
    warned() { [ "$(grep -c "^warning: -mt 1: $1" "$2")" = 1 ] && [ "$(grep -c "^step [0-9]*/4 " "$2")" = 4 ]; }
    warned "mt_damaged/matmul_algos_00000.bin is damaged (its records do not match their checksum); its matmul algorithms are not used" mt_damaged.txt &&
        grep -q "^matmul algorithms (-mt 1): $n GEMM shapes timed" mt_damaged.txt &&
        grep -q "^matmul algorithms (-mt 1): kept in mt_damaged/matmul_algos_00000.bin; $n read from there" mt_damaged2.txt \
        && ok "-mt 1, a damaged file: one warning, every shape timed again, the file rewritten" || { bad "-mt 1, damaged file"; grep -e "mt 1" mt_damaged.txt; }
    warned "mt_device/matmul_algos_00000.bin holds the choices of NVIDIA H200 (1 SMs, cuBLASLt 130000), not of this host simulator" mt_device.txt \
        && ok "-mt 1, another GPU's file: one warning naming both, timed again" || { bad "-mt 1, another GPU's file"; grep -e "mt 1" mt_device.txt; }
    grep -q "; $((n - 1)) of them by an earlier run (mt_algo/matmul_algos_00000.bin), 1 read there refused by cuBLASLt's check and timed again" mt_algo.txt \
        && ok "-mt 1, an algorithm cuBLASLt's check refuses: that shape timed again, the others read" || { bad "-mt 1, a refused algorithm"; grep "matmul" mt_algo.txt; }
    warned "mt_folder/matmul_algos_00000.bin is a folder, not a file" mt_folder.txt &&
        [ "$(grep -c "^warning: -mt 1: the matmul algorithms chosen could not be kept (-o: renaming the temporary to 'mt_folder/matmul_algos_00000.bin' failed: Is a directory)" mt_folder.txt)" = 1 ] \
        && ok "-mt 1, a folder in the file's place: a warning on reading, one on writing, the run ends" || { bad "-mt 1, a folder as the file"; grep -e "mt 1" mt_folder.txt; }
    warned "mt_fifo/matmul_algos_00000.bin is a FIFO (named pipe), not a regular file" mt_fifo.txt &&
        [ -f mt_fifo/matmul_algos_00000.bin ] \
        && ok "-mt 1, a FIFO in the file's place: one warning, no wait, the file written in its place" || { bad "-mt 1, a FIFO as the file"; grep -e "mt 1" mt_fifo.txt; }
else
    bad "-mt 1 -o sim_mt wrote no $algo_file"
fi

# ---- 2. determinism and resume
echo "2. determinism and resume:"
echo " second run:"; compare_logs sim2/main.log sim/main.log trl=0 norm=0 || bad "two identical runs differ"
rm -f ck/DONE_00000004
run ck_resume "$SIM" "${ARGS[@]}" -o ck -n 2 -y 1
grep -q "resumed from checkpoint 2" ck_resume.txt || bad "resume did not start from checkpoint 2"
steplines sim.txt | tail -2 > full_tail.txt; steplines ck_resume.txt > resumed.txt
if cmp -s full_tail.txt resumed.txt; then echo "  steps 3-4 after resume are bitwise equal"; else
    bad "resumed steps differ from the uninterrupted run"; diff full_tail.txt resumed.txt | head -6; fi
# the CPU trainer's checkpoint (an fp32 model file, a state file without master weights) resumed by
# the CUDA trainer: its master weights are the file's fp32 values, not their bf16 rounding. One
# step at lr 1e-30 leaves them as they were, and checkpoint 3 holds them
run cpu_ck "$CPU" "${ARGS[@]}" -o cpu_ck -n 2
mkdir -p from_cpu && cp cpu_ck/*_00000002* from_cpu/
run from_cpu "$SIM" "${ARGS[@]}" -l 1e-30 -c 0 -x 3 -n 1 -o from_cpu -y 1
$PY - cpu_ck/model_00000002.bin from_cpu/state_00000003_00000.bin <<'EOF' || bad "the CPU checkpoint's master weights were not taken exactly"
import sys, numpy as np
model = np.fromfile(sys.argv[1], "<f4", offset=1024)
h = np.fromfile(sys.argv[2], "<i4", count=256)
n = int(h[16]) | int(h[17]) << 32
master = np.fromfile(sys.argv[2], "<f4", offset=1024)[2 * n:3 * n]
print(f"  the CPU trainer's checkpoint resumed: master weights {'equal to' if np.array_equal(master, model) else 'differ from'} "
      f"its fp32 model file (largest difference {np.abs(master - model).max():.2e})")
sys.exit(0 if h[4] == 1 and np.array_equal(master, model) else 1)
EOF
# and the reverse: the CUDA trainer's checkpoint (a bf16 model file, fp32 master weights in the state
# file) resumed by the CPU trainer goes on from the master weights, not from their bf16 rounding
# (it did before); its fp32 checkpoint 3, one step at lr 1e-30 later, holds them exactly
mkdir -p from_gpu && cp ck/*_00000002* from_gpu/
run from_gpu "$CPU" "${ARGS[@]}" -l 1e-30 -c 0 -x 3 -n 1 -o from_gpu -y 1
$PY - ck/state_00000002_00000.bin from_gpu/model_00000003.bin <<'EOF' || bad "the CPU trainer did not resume from the CUDA checkpoint's master weights"
import sys, numpy as np
h = np.fromfile(sys.argv[1], "<i4", count=256)
n = int(h[16]) | int(h[17]) << 32
master = np.fromfile(sys.argv[1], "<f4", offset=1024)[2 * n:3 * n]
model = np.fromfile(sys.argv[2], "<f4", offset=1024)
print(f"  the CUDA trainer's checkpoint resumed by the CPU trainer: its parameters {'equal' if np.array_equal(master, model) else 'differ from'} "
      f"the master weights (largest difference {np.abs(master - model).max():.2e})")
sys.exit(0 if h[4] == 1 and np.array_equal(master, model) else 1)
EOF
# the same checkpoint resumed by the CUDA trainer with -w 0: it says its master weights go unused
mkdir -p from_gpu_w0 && cp ck/*_00000002* from_gpu_w0/
run from_gpu_w0 "$SIM" "${ARGS[@]}" -w 0 -x 3 -o from_gpu_w0 -y 1
grep -q "^warning: checkpoint 2 in from_gpu_w0 holds fp32 master weights, and this run keeps none (-w 0)" from_gpu_w0.txt \
    && echo "  -w 0 resuming a checkpoint with master weights: a warning" || bad "-w 0 resuming a checkpoint with master weights: no warning"
# a resume with other kernels (-r, -ge, -bg, recorded in the checkpoint) is told it matches only to
# rounding; the resume above with the same ones is not
mkdir -p kernels && cp ck/*_00000002* kernels/
run kernels "$SIM" "${ARGS[@]}" -r 2 -ge 0 -bg 1 -x 3 -o kernels -y 1
grep -q "^warning: -r 2, -ge 0 and -bg 1 differ from the -r 0, -ge 2 and -bg 0 of the run that wrote checkpoint 2 in kernels: other kernels" kernels.txt \
    && ! grep -q "other kernels" ck_resume.txt && echo "  a resume with other -r, -ge and -bg: named in one warning (none with the same ones)" \
    || { bad "a resume with other kernels: $(grep -h 'other kernels' kernels.txt ck_resume.txt)"; }

# NCCL on 1 rank changes no value, so only the events between the NCCL stream and the compute stream
# could make it differ from the plain run (sim2): sim/streams.h runs the two streams' queued work
# interleaved, and LLMC_DEBUG_STREAMS=1 changes the data under the NCCL stream for a while
echo " NCCL on 1 rank (LLMC_FORCE_NCCL=1), the stream-order debug mode on:"
export LLMC_FORCE_NCCL=1
LLMC_DEBUG_STREAMS=1 bg nccl_z0 "$SIM" "${ARGS[@]}" -o nccl_z0
LLMC_DEBUG_STREAMS=1 bg nccl_z1 "$SIM" "${ARGS[@]}" -z 1 -o nccl_z1
joined nccl_z0 nccl_z1
for z in 0 1; do compare_logs nccl_z$z/main.log sim2/main.log trl=0 norm=0 || bad "NCCL on 1 rank, -z $z, differs from the plain run"; done
grep -q "gradient reduction: nccl (stream priority -5, LLMC_DEBUG_STREAMS=1)" nccl_z0.txt \
    || bad "the NCCL stream's priority (-5, the simulated device's highest) or the debug mode not in the banner"
# a build that leaves out one wait (LLMC_TEST_DROP_WAIT, llmc/cuda/grad_reduce.cuh): the debug mode must show it
for w in 1 2 3 4; do
    LLMC_TEST_DROP_WAIT=$w LLMC_DEBUG_STREAMS=1 bg drop$w "$DROP" "${ARGS[@]}" -z 1 -o drop$w
    [ $((w % 2)) -eq 0 ] && joined drop$((w - 1)) drop$w
done
for w in 1 2 3 4; do
    if compare_logs drop$w/main.log sim2/main.log trl=0 norm=0 > /dev/null; then bad "wait $w left out, yet the run is bitwise the plain one"
    else ok "wait $w left out: the run differs from the plain one"; fi
done
unset LLMC_FORCE_NCCL

# ---- 3. MPI, host-staged, and ZeRO-1
if have_mpi "$SIM"; then
    echo "3. 2 MPI ranks (-pb mpi) vs 1 rank with 2 micro-steps:"
    run np2 "${MPIRUN[@]}" -np 2 "$SIM" "${ARGS[@]}" -pb mpi -o np2
    compare_logs np2/main.log sim/main.log trl=2e-3 norm=2e-3 || bad "2 ranks differ from 1 rank"
    [ "$(grep -c '^step [0-9]*/4 |' np2.txt)" -eq 4 ] || bad "np2: expected 4 step lines (rank 0 only)"
    run z1 "${MPIRUN[@]}" -np 2 "$SIM" "${ARGS[@]}" -pb mpi -z 1 -o z1 -n 2
    echo " ZeRO-1 vs -z 0:"; compare_logs z1/main.log np2/main.log trl=0 norm=0 || bad "ZeRO-1 differs from -z 0"
    grep -q "ZeRO-1" z1.txt || bad "ZeRO-1 not reported"
    [ "$(ls z1 | grep -c '^state_00000002_')" -eq 2 ] || bad "ZeRO-1: expected 2 state files for checkpoint 2"
    cp -r z1 z1b; rm -f z1/DONE_00000004
    run z1_resume "${MPIRUN[@]}" -np 2 "$SIM" "${ARGS[@]}" -pb mpi -z 1 -o z1 -n 2 -y 1
    steplines z1.txt | tail -2 > z1_tail.txt; steplines z1_resume.txt > z1_resumed.txt
    if cmp -s z1_tail.txt z1_resumed.txt; then echo "  ZeRO-1 resume on 2 ranks: steps 3-4 bitwise equal"; else
        bad "ZeRO-1 resume on 2 ranks differs"; diff z1_tail.txt z1_resumed.txt | head -6; fi
    rm -f z1b/DONE_00000004
    run z1_on1 "$SIM" "${ARGS[@]}" -o z1b -n 2 -y 1
    # steps 3-4 resumed on 1 rank (appended to the copied log; the later line wins) vs 2 ranks
    echo " ZeRO-1 checkpoint of 2 ranks resumed on 1:"
    compare_logs z1b/main.log z1/main.log trl=1e-3 --last 2 || bad "re-sharded resume"
    # ZeRO-1 changes no bit of a run (the same sums of 2 or 3 ranks' gradients, the gradient norm
    # from whole chunks, llmc/cuda/global_norm.cuh, AdamW's rounding keyed to the parameter): 8
    # steps (a norm summed by shard parts, as before, first moved the state at step 6), the logs,
    # the weights and the optimizer state at the end; on 3 ranks the tiny model's third shard is empty
    for w in 2 3; do
        zargs=("${ARGS[@]}" -x 8 -d $((32 * w)) -n 8 -pb mpi)
        run zb0_$w "${MPIRUN[@]}" -np $w "$SIM" "${zargs[@]}" -o zb0_$w
        run zb1_$w "${MPIRUN[@]}" -np $w "$SIM" "${zargs[@]}" -z 1 -o zb1_$w
        echo " ZeRO-1 vs -z 0 on $w ranks, 8 steps:"
        { compare_logs zb1_$w/main.log zb0_$w/main.log trl=0 norm=0 && compare_checkpoints zb1_$w zb0_$w 8; } \
            || bad "ZeRO-1 on $w ranks is not bitwise -z 0"
    done
    # NCCL on 2 simulated GPUs (sim/nccl.h over MPI): each sum is the one -pb mpi's host reduction makes
    # (2 bf16 values added in fp32, rounded once), so the runs are bitwise equal, with ZeRO-1's
    # reduce-scatter layout too (and the stream-order debug mode on)
    NCCL2=("${MPIRUN[@]}" -x SIM_DEVICES=2 -np 2)
    run nc2 "${NCCL2[@]}" "$SIM" "${ARGS[@]}" -pb nccl -v 2 -m 2 -n 2 -o nc2  # -v, -n: for nc2host below
    run nc2z "${NCCL2[@]}" -x LLMC_DEBUG_STREAMS=1 "$SIM" "${ARGS[@]}" -pb nccl -z 1 -o nc2z
    echo " -pb nccl vs -pb mpi, 2 ranks:"; compare_logs nc2/main.log np2/main.log trl=0 norm=0 || bad "-pb nccl differs from -pb mpi"
    echo " -pb nccl -z 1 vs -pb mpi -z 1:"; compare_logs nc2z/main.log z1/main.log trl=0 norm=0 || bad "NCCL ZeRO-1 differs from MPI ZeRO-1"
    # the NCCL id through llm.c's file bootstrap instead of MPI (the simulator's NCCL, like NCCL,
    # takes no ranks whose ids differ): the same run
    run nc2fs "${NCCL2[@]}" "$SIM" "${ARGS[@]}" -pb nccl -pi fs -o nc2fs  # -pf: -o by default
    echo " -pb nccl with -pi fs vs with MPI's broadcast:"; compare_logs nc2fs/main.log nc2/main.log trl=0 norm=0 || bad "-pi fs differs"
    ! ls nc2fs | grep -q llmc_sync || bad "-pi fs left files in -o: $(ls nc2fs | tr '\n' ' ')"
    # ranks that no MPI launched (torchrun, srun) run the host's collectives over NCCL too: the loss and
    # validation sums, the checkpoints' agreement, the broadcasts. LLMC_FORCE_NCCL=2 takes that path
    # under mpirun (the simulator's NCCL needs MPI beneath it): the same run, bit for bit, and files
    NCCL_HOST=("${NCCL2[@]}" -x LLMC_FORCE_NCCL=2 "$SIM" "${ARGS[@]}" -pb nccl -pi fs -v 2 -m 2 -n 2 -o nc2host)
    run nc2host "${NCCL_HOST[@]}"
    echo " the host's collectives over NCCL (LLMC_FORCE_NCCL=2, -pi fs) vs over MPI:"
    compare_logs nc2host/main.log nc2/main.log trl=0 tel=0 norm=0 || bad "the host's collectives over NCCL: the logs differ"
    same_files "the host's collectives over NCCL" nc2 nc2host
    # ... and a resume there (rank 0's list of checkpoints broadcast over NCCL): steps 3-4 as before
    rm -f nc2host/DONE_00000004
    run nc2host_r "${NCCL_HOST[@]}" -y 1
    grep -q "^resumed from checkpoint 2" nc2host_r.txt && compare_logs nc2host/main.log nc2/main.log trl=0 tel=0 norm=0 > /dev/null \
        && ok "the host's collectives over NCCL: resumed from checkpoint 2, steps 3-4 bitwise" \
        || { bad "the host's collectives over NCCL: the resume"; tail -3 nc2host_r.txt; }
    grep -q "gradient reduction: nccl (stream priority -5, LLMC_DEBUG_STREAMS=1), ZeRO-1" nc2z.txt || bad "nc2z: no NCCL ZeRO-1 banner"
    ERROR_LINES=2 expect_error "2 ranks with -pb nccl in a build without NCCL (each rank says so)" "use the host-staged backend -pb mpi" \
        "${MPIRUN[@]}" -np 2 "$ASAN" "${ARGS[@]}" -pb nccl
    expect_error "2 ranks with -pb nccl on one simulated GPU" "use the same GPU.*-pb mpi" "${MPIRUN[@]}" -np 2 "$SIM" "${ARGS[@]}" -pb nccl
    # the deadline of processes.h in -pb mpi's own collectives: rank 1 freezes as step 3 begins
    expect_error "-pb mpi -z 1, rank 1 frozen (SIGSTOP)" "step 3 (.*): MPI_[A-Za-z_()]* of [0-9]* bytes did not complete within -pt 3 s; no answer from rank(s) 1 " \
        timeout -s KILL 60 "${MPIRUN[@]}" -np 2 -x LLMC_FAULT=step:3:stop:1 "$SIM" "${ARGS[@]}" -pb mpi -z 1 -pt 3
else
    skip_or_fail "test-cuda-trainer-sim part 3 (2 MPI ranks)" "MPI (mpirun, and the simulator built with it)" "$MPI_HINT" \
        || bad "part 3 (2 MPI ranks) not run"
fi

# ---- 4. -opt muon. -ml above its default so that Muon's part of the step shows: a run with AdamW
# instead is 3.5e-3 (loss) and 22% (norm) away from the CPU's Muon run
MUON=(-opt muon -ml 0.05)
echo "4. -opt muon: simulated CUDA (bf16 Newton-Schulz) vs CPU (fp32):"
run cpu_muon "$CPU" "${ARGS[@]}" "${MUON[@]}" -v 4 -m 2 -o cpu_muon
run sim_muon "$SIM" "${ARGS[@]}" "${MUON[@]}" -v 4 -m 2 -o sim_muon
grep -q "^optimizer: muon" sim_muon.txt || bad "no optimizer line in the banner"
# measured 6.9e-5 (loss) and 2.3e-3 (norm; bf16 Newton-Schulz, about 3% of each update, adds to
# part 1's bf16 gradients): part 1's loss tolerance, the norm's 5e-3
compare_logs sim_muon/main.log cpu_muon/main.log trl=2e-3 tel=2e-3 norm=5e-3 || bad "simulated CUDA Muon vs CPU"
if have_mpi "$SIM"; then
    echo " 2 ranks, ZeRO-1 (whole matrices per rank) vs -z 0:"
    run mz0 "${MPIRUN[@]}" -np 2 "$SIM" "${ARGS[@]}" "${MUON[@]}" -pb mpi -o mz0 -n 4
    run mz1 "${MPIRUN[@]}" -np 2 "$SIM" "${ARGS[@]}" "${MUON[@]}" -pb mpi -z 1 -o mz1 -n 2
    { compare_logs mz1/main.log mz0/main.log trl=0 norm=0 && compare_checkpoints mz1 mz0 4; } || bad "Muon ZeRO-1 differs from -z 0"
    # NCCL's bucketed reduce-scatter delivers each sum to the owner of its whole matrix
    echo " -pb nccl -z 1 vs -pb mpi -z 1 (uneven shards):"
    run mnz1 "${MPIRUN[@]}" -x SIM_DEVICES=2 -np 2 "$SIM" "${ARGS[@]}" "${MUON[@]}" -pb nccl -z 1 -o mnz1 -n 2
    compare_logs mnz1/main.log mz1/main.log trl=0 norm=0 || bad "Muon NCCL ZeRO-1 differs from MPI ZeRO-1"
    echo " 2 ranks (-z 0) vs 1 rank with 2 micro-steps:"
    compare_logs mz0/main.log sim_muon/main.log trl=2e-3 norm=2e-3 || bad "Muon on 2 ranks differs from 1 rank"
    cp -r mz1 mz1b; rm -f mz1/DONE_00000004
    run mz1_resume "${MPIRUN[@]}" -np 2 "$SIM" "${ARGS[@]}" "${MUON[@]}" -pb mpi -z 1 -o mz1 -n 2 -y 1
    steplines mz1.txt | tail -2 > mz1_tail.txt; steplines mz1_resume.txt > mz1_resumed.txt
    if [ -s mz1_tail.txt ] && cmp -s mz1_tail.txt mz1_resumed.txt; then echo "  Muon ZeRO-1 resume on 2 ranks: steps 3-4 bitwise equal"; else
        bad "Muon ZeRO-1 resume on 2 ranks differs"; diff mz1_tail.txt mz1_resumed.txt | head -6; fi
    rm -f mz1b/DONE_00000004
    run mz1_on1 "$SIM" "${ARGS[@]}" "${MUON[@]}" -o mz1b -n 2 -y 1
    echo " Muon ZeRO-1 checkpoint of 2 ranks resumed on 1:"
    compare_logs mz1b/main.log mz1/main.log trl=1e-3 --last 2 || bad "re-sharded Muon resume"
else
    skip_or_fail "test-cuda-trainer-sim part 4 (Muon on 2 MPI ranks)" "MPI (mpirun, and the simulator built with it)" \
        "$MPI_HINT" || bad "part 4 (Muon on 2 MPI ranks) not run"
fi

# ---- 5. AddressSanitizer: every buffer access of the trainer inside its allocation
echo "5. AddressSanitizer build, short runs:"
ASHORT=(-i train.bin -j val.bin -e L2:C64:H1:T32:V128 -b 2 -t 16 -d 64 -x 1 -v 1 -m 1 -s 1 -g 3 -l 1e-3)
bg asan_r0 "$ASAN" "${ASHORT[@]}" -r 0 -o asan_r0 -n 1
bg asan_r2 "$ASAN" "${ASHORT[@]}" -r 2 -o asan_r2 -n 1
joined asan_r0 asan_r2
# the other kernels and paths: -r 1, our GELU kernels, the bias-gradient epilogue, timed matmul
# algorithms, bf16 parameters; and a resume from asan_r0's checkpoint 1
bg asan_alt "$ASAN" "${ASHORT[@]}" -r 1 -ge 0 -bg 1 -mt 1 -w 0 -o asan_alt
bg asan_resume "$ASAN" "${ASHORT[@]}" -x 2 -r 0 -o asan_r0 -n 1 -y 1
joined asan_alt asan_resume
grep -q "resumed from checkpoint 1" asan_resume.txt && grep -q "^step 2/2 " asan_resume.txt || bad "ASan: the resume from checkpoint 1 did not run step 2"
for r in r0 r2 alt resume; do
    grep -q "ERROR: AddressSanitizer\|runtime error" asan_$r.txt && bad "ASan/UBSan report in asan_$r"
done
if have_mpi "$SIM"; then
    run asan_z1 "${MPIRUN[@]}" -np 2 "$ASAN" "${ASHORT[@]}" -pb mpi -z 1 -o asan_z1 -n 1
    grep -q "ERROR: AddressSanitizer\|runtime error" asan_z1.txt && bad "ASan/UBSan report with 2 ranks, ZeRO-1"
    run asan_muon_z1 "${MPIRUN[@]}" -np 2 "$ASAN" "${ASHORT[@]}" -opt muon -pb mpi -z 1 -o asan_muon_z1 -n 1
    grep -q "ERROR: AddressSanitizer\|runtime error" asan_muon_z1.txt && bad "ASan/UBSan report with 2 ranks, ZeRO-1, Muon"
fi
echo "  $(grep -c '^step' asan_r0.txt asan_r2.txt asan_alt.txt asan_resume.txt asan_muon_z1.txt 2>/dev/null | tr '\n' ' ')"

# ---- 6. test_gpt2cu against the PyTorch reference (head size 64, small vocabulary)
echo "6. test_gpt2cu (simulated) against train_gpt2.py:"
$PY "$ROOT/train_gpt2.py" --model L2:C128:H2:T32:V128 --seed 3 --write-model fx.bin --batch 2 --seq 16 \
    --debug-state fx_state.bin --trajectory fx_traj.txt --steps 6 > fx.txt 2>&1 || { bad "fixture"; tail -3 fx.txt; }
"$TEST" fx.bin fx_state.bin fx_traj.txt > test.txt 2>&1 || bad "test_gpt2cu failed"
grep -E "FAIL|test_gpt2cu:|determinism|checkpoint" test.txt | sed 's/^/  /'
LLMC_GELU_FUSION=0 bg test_ge0 "$TEST" fx.bin fx_state.bin fx_traj.txt
LLMC_MATMUL_TUNE=1 bg test_mt1 "$TEST" fx.bin fx_state.bin fx_traj.txt
joined test_ge0 test_mt1
grep -E "FAIL|test_gpt2cu:" test_ge0.txt | sed 's/^/  -ge 0: /'
grep -E "FAIL|test_gpt2cu:|^matmul algorithms" test_mt1.txt | sed 's/^/  -mt 1: /'
grep -q "matmul -mt 1" test_mt1.txt || bad "LLMC_MATMUL_TUNE=1: test_gpt2cu's banner does not say -mt 1"
LLMC_BIAS_GRAD=1 bg test_bg1 "$TEST" fx.bin fx_state.bin fx_traj.txt
LLMC_BIAS_GRAD=1 SIM_CUBLASLT_NO_BGRADB=1 bg test_bg1_refused "$TEST" fx.bin fx_state.bin fx_traj.txt
# the racecheck hook: where a GEMM with a thread-block cluster fails as it runs (as under
# compute-sanitizer's racecheck on an H200), LLMC_TEST_GEMM_NO_CLUSTER=1 takes algorithms without one
SIM_CUBLASLT_CLUSTER_FAULT=1 LLMC_TEST_GEMM_NO_CLUSTER=1 bg test_nocluster "$TEST" fx.bin fx_state.bin fx_traj.txt
joined test_bg1 test_bg1_refused test_nocluster
grep -E "FAIL|test_gpt2cu:" test_nocluster.txt | sed 's/^/  LLMC_TEST_GEMM_NO_CLUSTER=1, clusters failing: /'
grep -E "FAIL|test_gpt2cu:|^bias gradients" test_bg1.txt | sed 's/^/  -bg 1: /'
grep -E "FAIL|test_gpt2cu:|^bias gradients|^warning: -bg 1" test_bg1_refused.txt | sed 's/^/  -bg 1, epilogue refused: /'
grep -q "bias gradients -bg 1" test_bg1.txt || bad "LLMC_BIAS_GRAD=1: test_gpt2cu's banner does not say -bg 1"
grep -q "^bias gradients (-bg 1): [1-9][0-9]* in the weight-gradient matmuls' epilogue, 0 by our column sums" test_bg1.txt ||
    bad "LLMC_BIAS_GRAD=1: not every bias gradient came from the epilogue"
grep -q "^bias gradients (-bg 1): 0 in the weight-gradient matmuls' epilogue, [1-9][0-9]* by our column sums" \
    test_bg1_refused.txt && grep -q "^warning: -bg 1: cuBLASLt cannot sum the bias gradient" test_bg1_refused.txt ||
    bad "LLMC_BIAS_GRAD=1 with the epilogue refused: not our column sums, or no warning"

# ---- 7. bad launches
echo "7. bad input:"
expect_error "head size 32" "fused attention supports head sizes 64 and 128" "$SIM" "${ARGS[@]}" -e L2:C64:H2:T32:V128
expect_error "a GPU with less free memory than cuBLAS's workspace (was a raw CUDA error)" "less than cuBLAS's 32 MiB workspace" \
    env SIM_DEVICE_MEMORY=20000000 "$SIM" "${ARGS[@]}"
# a model file (no CRC, as llm.c writes them) whose padded vocabulary 132 is no multiple of 8
"$PY" -c 'import numpy as np
C, L, T, V, Vp = 64, 2, 32, 130, 132
h = np.zeros(256, np.int32); h[:8] = [20240326, 3, T, V, L, 1, C, Vp]
P = Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
with open("vp132.bin", "wb") as f: h.tofile(f); np.full(P, 0.01, np.float32).tofile(f)'
expect_error "a padded vocabulary of 132" "padded vocabulary Vp = 132.*multiple of 8" "$SIM" "${ARGS[@]}" -e vp132.bin
expect_error "LLMC_DEBUG_STREAMS=yes" "LLMC_DEBUG_STREAMS=yes: expected 0 or 1" \
    env LLMC_FORCE_NCCL=1 LLMC_DEBUG_STREAMS=yes "$SIM" "${ARGS[@]}"
expect_error "LLMC_GELU_FUSION=3 for test_gpt2cu" "LLMC_GELU_FUSION=3: expected 0, 1 or 2" \
    env LLMC_GELU_FUSION=3 "$TEST" fx.bin fx_state.bin fx_traj.txt
expect_error "LLMC_MATMUL_TUNE=2 for test_gpt2cu" "LLMC_MATMUL_TUNE=2: expected 0 or 1" \
    env LLMC_MATMUL_TUNE=2 "$TEST" fx.bin fx_state.bin fx_traj.txt
expect_error "LLMC_BIAS_GRAD=on for test_gpt2cu" "LLMC_BIAS_GRAD=on: expected 0 or 1" \
    env LLMC_BIAS_GRAD=on "$TEST" fx.bin fx_state.bin fx_traj.txt
expect_error "GEMMs with a cluster failing, without LLMC_TEST_GEMM_NO_CLUSTER" "CUBLAS_STATUS_EXECUTION_FAILED" \
    env SIM_CUBLASLT_CLUSTER_FAULT=1 "$TEST" fx.bin fx_state.bin fx_traj.txt
expect_error "LLMC_TEST_GEMM_NO_CLUSTER=2" "LLMC_TEST_GEMM_NO_CLUSTER=2: expected 0 or 1" \
    env LLMC_TEST_GEMM_NO_CLUSTER=2 "$TEST" fx.bin fx_state.bin fx_traj.txt
expect_error "-pb mpi under torchrun variables" "pb mpi reduces gradients with MPI" \
    env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 "$SIM" "${ARGS[@]}" -pb mpi
# NCCL needs a GPU per rank: under torchrun, a local rank past the visible GPUs stops before any
# bootstrap (under mpirun, two ranks on one GPU: section 3)
expect_error "local rank 1 with 1 GPU under torchrun" "local rank 1 but only 1 GPU(s) are visible on this node" \
    env SIM_DEVICES=1 RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 "$SIM" "${ARGS[@]}" -pt 5
# a build without cuDNN (the simulator's AddressSanitizer build) says how to build with it
expect_error "-at cudnn in a build without cuDNN" "make cudnn-frontend" "$ASAN" "${ARGS[@]}" -at cudnn
expect_error "LLMC_FORCE_NCCL=yes" "LLMC_FORCE_NCCL=yes: expected 0, 1 or 2" env LLMC_FORCE_NCCL=yes "$SIM" "${ARGS[@]}"
# a driver older than the runtime (13.0 in the simulator), and none at all
expect_error "a driver for CUDA 12.4" "the NVIDIA driver here supports CUDA 12.4, older than the CUDA 13.0 this train_gpt2cu was built with; update the driver, or build with a CUDA toolkit of 12.4 at most" \
    env SIM_DRIVER_VERSION=12040 "$SIM" "${ARGS[@]}"
expect_error "no driver" "no NVIDIA driver is installed" env SIM_DRIVER_VERSION=0 "$SIM" "${ARGS[@]}"
# the data flags are checked before the GPU starts (a mistyped -i on 8 GPUs used to wait for CUDA, NCCL
# and the model's build first): here the driver is missing too, and the data's error comes first
expect_error "-i matching nothing, before the GPU's start-up" "-i nothing_\*.bin: no files match" \
    env SIM_DRIVER_VERSION=0 "$SIM" "${ARGS[@]}" -i 'nothing_*.bin'
expect_error "-j not a shard, before the GPU's start-up" "-j: 'fx.bin' is not a token shard" \
    env SIM_DRIVER_VERSION=0 "$SIM" "${ARGS[@]}" -v 1 -j fx.bin
# --plan prints its plan there, and its device line names the same reason
for drv in 0 12040; do
    reason="no NVIDIA driver is installed"; [ $drv = 0 ] || reason="the NVIDIA driver here supports CUDA 12.4, older than"
    SIM_DRIVER_VERSION=$drv "$SIM" --plan 1 "${ARGS[@]}" > drvplan.txt 2>&1
    grep -q "^device: unknown: $reason" drvplan.txt && grep -q "^  total " drvplan.txt \
        && ok "--plan with SIM_DRIVER_VERSION=$drv: the plan, and the device line names the driver" \
        || bad "--plan with SIM_DRIVER_VERSION=$drv: $(grep -m1 '^device' drvplan.txt)"
done

# ---- 8. memory plan, -b auto, phase timers
echo "8. memory plan against the allocator, -b auto, phases:"
planned() { "$SIM" --plan "$1" "${@:2}" | sed -n 's/.*(GPU: \([0-9]*\) bytes).*/\1/p'; }
peak() { grep -o 'sim: peak device bytes [0-9]*' "$1" | awk '{print $5}' | sort -n | tail -1; }  # the largest rank's
for v in "-r 1" "-r 0" "-r 2" "-w 0" "-at cudnn"; do  # -at cudnn: the stand-in's workspace (section 14)
    SIM_MEMORY_REPORT=1 "$SIM" "${ARGS[@]}" $v -x 1 -v 0 > mem.txt 2>&1 || bad "run with $v failed"
    want=$(planned 1 "${ARGS[@]}" $v); got=$(peak mem.txt)
    [ -n "$want" ] && [ "$want" = "$got" ] && ok "$v: planned $want bytes = the allocator's peak" || bad "$v: planned $want bytes, peak $got"
done
if have_mpi "$SIM"; then
    SIM_MEMORY_REPORT=1 "${MPIRUN[@]}" -np 2 -x SIM_MEMORY_REPORT "$SIM" "${ARGS[@]}" -pb mpi -z 1 -x 1 -v 0 > memz.txt 2>&1 || bad "ZeRO-1 run failed"
    want=$(planned 2 "${ARGS[@]}" -pb mpi -z 1); got=$(peak memz.txt)
    [ -n "$want" ] && [ "$want" = "$got" ] && ok "2 ranks ZeRO-1: planned $want bytes = rank 0's peak" || bad "ZeRO-1: planned $want, peak $got"
fi
# -b auto: a device whose budget (free less 5%; the 32 MiB cuBLASLt workspace is allocated before) lies
# between the plans of B 4 and B 5; the measured peaks of runs at -b 4 and -b 5 must bracket it
AUTO=(-i train.bin -j val.bin -e L2:C64:H1:T32:V128 -t 16 -x 1 -v 0 -s 0)
p4=$(planned 1 "${AUTO[@]}" -b 4); p5=$(planned 1 "${AUTO[@]}" -b 5)
M=$(( ((p4 + p5) / 2 + 33554432) * 100 / 95 ))
budget=$(( M - 33554432 - M / 20 ))
for b in 4 5; do SIM_MEMORY_REPORT=1 "$SIM" "${AUTO[@]}" -b $b > peak$b.txt 2>&1; done
SIM_DEVICE_MEMORY=$M "$SIM" "${AUTO[@]}" -b auto -o auto > auto.txt 2>&1 || bad "-b auto run failed"
if grep -q '^-b auto: B 4;' auto.txt && [ "$(peak peak4.txt)" -le $budget ] && [ "$(peak peak5.txt)" -gt $budget ]; then
    ok "-b auto on $M bytes: B 4 (measured peaks: B 4 $(peak peak4.txt) <= budget $budget < B 5 $(peak peak5.txt))"
else bad "-b auto on $M bytes (budget $budget): $(grep -m1 -- '-b auto' auto.txt), peaks $(peak peak4.txt) $(peak peak5.txt)"; fi
head -1 auto/main.log | grep -q '^# -b auto: B 4;' || bad "-b auto: main.log's header"
if have_mpi "$SIM"; then
    # rank 0 on a device 4x as large, rank 1 on the small one: the smaller decides, on both
    "${MPIRUN[@]}" -np 1 -x SIM_DEVICE_MEMORY=$((M * 4)) "$SIM" "${AUTO[@]}" -b auto -pb mpi : \
        -np 1 -x SIM_DEVICE_MEMORY=$M "$SIM" "${AUTO[@]}" -b auto -pb mpi > auto2.txt 2>&1 || bad "-b auto on 2 ranks failed"
    grep -q '^-b auto: B 4;.* on the smallest device' auto2.txt && grep -q '^batch: B 4 | T 16 | ranks 2' auto2.txt \
        && ok "-b auto on 2 ranks with 4x and 1x that memory: B 4 on both" || { bad "-b auto on 2 ranks"; head -4 auto2.txt; }
fi
# -r auto: devices whose budget lies between the plans of -r 0 and -r 1 (without -r: the default),
# and of -r 1 and -r 2, at B 32: the least recomputation that fits, its measured peak within the
# budget, the next lower level's over it
RA=(-i train.bin -j val.bin -e L2:C64:H1:T32:V128 -t 16 -x 1 -v 0 -s 0 -b 32)
for r in 0 1 2; do
    rplan[$r]=$(planned 1 "${RA[@]}" -r $r)
    SIM_MEMORY_REPORT=1 "$SIM" "${RA[@]}" -r $r > rpeak$r.txt 2>&1 || bad "-b 32 -r $r run failed"
done
budget_of() { echo $(( $1 - 33554432 - $1 / 20 )); }
for want in 1 2; do
    M=$(( ((rplan[want] + rplan[want - 1]) / 2 + 33554432) * 100 / 95 )); budget=$(budget_of $M); MEM[$want]=$M
    rflag=(-r auto); [ $want = 1 ] && rflag=()
    SIM_DEVICE_MEMORY=$M "$SIM" "${RA[@]}" "${rflag[@]}" -o rauto$want > rauto$want.txt 2>&1 || bad "-r auto run on $M bytes failed"
    if grep -q "^-r auto: -r $want, the least recomputation whose plan fits at B 32 " rauto$want.txt \
        && grep -q "recompute -r $want |" rauto$want.txt && [ "$(peak rpeak$want.txt)" -le $budget ] \
        && [ "$(peak rpeak$((want - 1)).txt)" -gt $budget ]; then
        ok "-r ${rflag[1]:-auto (the default)} on $M bytes: -r $want (measured peaks: -r $want $(peak rpeak$want.txt) <= budget $budget < -r $((want - 1)) $(peak rpeak$((want - 1)).txt))"
    else bad "-r auto on $M bytes (budget $budget): $(grep -m1 -e '-r auto' rauto$want.txt), peaks ${rplan[*]}"; fi
done
sed -n 1p rauto2/main.log | grep -q '^# -r auto: -r 2,' || bad "-r auto: main.log's header"
SIM_DEVICE_MEMORY=$((M * 4)) "$SIM" "${RA[@]}" -r auto > rauto0.txt 2>&1 && grep -q "^-r auto: -r 0," rauto0.txt \
    && ok "-r auto on a device 4x that: -r 0" || bad "-r auto on a large device: $(grep -m1 -e '-r auto' rauto0.txt)"
"$SIM" --plan 1 "${RA[@]}" -r auto > rplan.txt 2>&1
grep -q -- '-b 32 | -t 16 | -r 0 (-r auto) |' rplan.txt && grep -q -- '^-r auto at -b 32: -r 0 ' rplan.txt \
    && ok "--plan with -r auto: the plan at the level it chooses" || bad "--plan with -r auto: $(grep -m2 -e '-r' rplan.txt)"
SIM_DEVICE_MEMORY=$M "$SIM" "${RA[@]}" -b auto -r auto > rbauto.txt 2>&1 || bad "-b auto -r auto failed"
grep -q '^-b auto: B [0-9]*; up to [0-9]* fit at -r 1 ' rbauto.txt && grep -q '^-r auto: -r [0-2],' rbauto.txt \
    && ok "-b auto -r auto: B at -r 1, then the level" || bad "-b auto -r auto: $(grep -e 'auto' rbauto.txt)"
if have_mpi "$SIM"; then  # rank 0 on a device 4x as large, rank 1 between -r 1 and -r 2: -r 2 on both
    "${MPIRUN[@]}" -np 1 -x SIM_DEVICE_MEMORY=$((M * 4)) "$SIM" "${RA[@]}" -r auto -pb mpi : \
        -np 1 -x SIM_DEVICE_MEMORY=$M "$SIM" "${RA[@]}" -r auto -pb mpi > rauto_np2.txt 2>&1 || bad "-r auto on 2 ranks failed"
    grep -q '^-r auto: -r 2, .* on every rank' rauto_np2.txt && grep -q 'recompute -r 2 |' rauto_np2.txt \
        && ok "-r auto on 2 ranks with 4x and 1x that memory: -r 2 on both" || { bad "-r auto on 2 ranks"; grep -e '-r' rauto_np2.txt | head -3; }
fi
# -r auto and -y 1: a run made at -r 1 (the device between the plans of -r 0 and -r 1) resumed on a
# device where -r 0 fits keeps -r 1 and its steps are an uninterrupted -r 1 run's, bit for bit (at
# -r 0 they are not: GELU's output is rounded apart); resumed where only -r 2 fits, a warning
RK=("${RA[@]}" -k constant -u 0 -n 2)
"$SIM" "${RK[@]}" -x 4 -r 1 -o rk_ref > rk_ref.txt 2>&1 || bad "the -r 1 reference run failed"
SIM_DEVICE_MEMORY=${MEM[1]} "$SIM" "${RK[@]}" -x 2 -o rk > rk.txt 2>&1 || bad "the -r auto run on ${MEM[1]} bytes failed"
"$SIM" "${RK[@]}" -x 4 -o rk -y 1 > rk_resume.txt 2>&1 || bad "its resume failed"
if grep -q "^-r auto: -r 1, the least" rk.txt && grep -q "^-r auto: -r 1, checkpoint 2's level, kept for a bitwise resume; -r 0, the least recomputation, fits too" rk_resume.txt \
    && grep -q "recompute -r 1 |" rk_resume.txt && [ "$(tail -2 rk_ref/main.log)" = "$(tail -2 rk/main.log)" ] \
    && grep -q '^s:3 ' rk/main.log; then ok "-r auto, resumed where -r 0 fits: checkpoint 2's -r 1, steps 3-4 bitwise an uninterrupted -r 1 run's"
else bad "-r auto's resume of a -r 1 checkpoint: $(grep -h -m1 -e '^-r auto' rk_resume.txt)"; diff <(tail -2 rk_ref/main.log) <(tail -2 rk/main.log); fi
# --plan with -y 1 shows those choices: checkpoint 4's -r 1 kept where -r 0 fits, -r 2 and why where -r 1 does not fit
"$SIM" --plan 1 "${RK[@]}" -o rk -y 1 > rk_plan.txt 2>&1
SIM_DEVICE_MEMORY=${MEM[2]} "$SIM" --plan 1 "${RK[@]}" -o rk -y 1 > rk_plan_small.txt 2>&1
grep -q -- '| -r 1 (-r auto: the checkpoint'"'"'s) |' rk_plan.txt && grep -q '^-y 1 resumes checkpoint 4: -b 32 on 1 rank(s), -d 512, -r 1$' rk_plan.txt \
    && grep -q "^-r auto at -b 32: -r 1 (the checkpoint's, kept for a bitwise resume; -r 0, the least recomputation, fits too)" rk_plan.txt \
    && grep -q "^-r auto at -b 32: -r 2 (the least recomputation that fits; the checkpoint's -r 1 does not" rk_plan_small.txt \
    && ok "--plan -y 1 with -r auto: the checkpoint's -r 1 where it fits, -r 2 and why where not (as the resumes)" \
    || { bad "--plan -y 1 with -r auto"; grep -h -e '-r' rk_plan.txt rk_plan_small.txt | grep -v '^  '; }
SIM_DEVICE_MEMORY=${MEM[2]} "$SIM" "${RK[@]}" -x 6 -o rk -y 1 > rk_small.txt 2>&1 || bad "the resume on ${MEM[2]} bytes failed"
grep -q "^-r auto: -r 2, the least" rk_small.txt && grep -q "^warning: checkpoint 4 was written at -r 1, which does not fit now: at -r 2 the resumed steps may match" rk_small.txt \
    && ok "-r auto, resumed where -r 1 does not fit: -r 2, and a warning" || bad "-r auto's resume on a smaller device: $(grep -e '-r auto\|warning' rk_small.txt)"
expect_error "-b auto on a device too small for B 1" "not even B = 1 fits" env SIM_DEVICE_MEMORY=$((34 << 20)) "$SIM" "${AUTO[@]}" -b auto
# a -b too large for the device: the plan's check before any activation is allocated, with what to do
expect_error "-b 64 on that device" "B=64 T=16 needs .* GiB of GPU memory .* but .* GiB of .* are free; use a smaller -b or -b auto" \
    env SIM_DEVICE_MEMORY=$((34 << 20)) "$SIM" "${AUTO[@]}" -b 64
# phases: from the events, inside the step's wall time; NVTX ranges nest and cover each step
rm -f nvtx.log
SIM_NVTX_LOG=nvtx.log "$SIM" "${ARGS[@]}" -x 2 -v 1 -m 1 -o ph > ph.txt 2>&1 || bad "phase run failed"
$PY - ph/metrics.jsonl nvtx.log <<'EOF' && ok "phase times from the events, NVTX ranges around each step's phases" || bad "phases in the simulator"
import json, sys
steps = [o for o in map(json.loads, open(sys.argv[1])) if o["event"] == "step"]
assert len(steps) == 2, steps
for o in steps:
    # the update runs on the stream after the host has ended the step (the simulator's streams, as a
    # GPU's, run queued work later), so only the phases before it lie inside the step's wall time
    ph = [o[k + "_ms"] for k in ("data", "forward", "backward", "comm")]
    assert o["forward_ms"] > 0 and o["backward_ms"] > 0 and o["optimizer_ms"] > 0, o
    assert sum(ph) <= o["ms"] * 1.001 + 0.01, o
log = [l.split() for l in open(sys.argv[2])]
depth = 0
for l in log:
    depth += 1 if l[0] == "push" else -1
    assert depth >= 0, "a pop without a push"
assert depth == 0, "ranges left open"
pushed = [l[1] for l in log if l[0] == "push"]
# -d 64 = 2 micro-steps of B 2 x T 16, 2 steps; evaluations before each step and at the end
for name, n in (("data", 4), ("forward", 4), ("backward", 4), ("comm", 2), ("optimizer", 4), ("eval", 3)):
    assert pushed.count(name) == n, (name, pushed.count(name), pushed)
EOF

# ---- 9. the generate mode (--prompt): the CUDA trainer's forward at B = 1 over a growing context,
# the window sliding past the model's 64 tokens. Greedy: within bf16's rounding of fp32's
# (dev/test/greedy_within.py; the CPU trainer's text differs from token 11 on, a near-tie); sampled
# at temperature 100 (at 1 this model's softmax is all but one-hot): the same text twice at one -rs.
echo "9. --prompt:"
unpack_embedded gen
$PY "$ROOT/dev/test/greedy_within.py" make sharp.bin > /dev/null
gen_sim() { "$SIM" -e sharp.bin --prompt "a|b" -g 80 --bpe-dir gen/gpt2 -i no_such_data.bin "$@"; }
if gen_sim --temperature 0 > greedy.txt 2> greedy.err; then
    $PY "$ROOT/dev/test/greedy_within.py" check sharp.bin gen/gpt2 "a|b" greedy.txt 10 \
        && ok "--prompt, greedy: 80 tokens, fp32's up to bf16's rounding" || bad "--prompt: the greedy text is not fp32's"
else
    bad "--prompt --temperature 0 failed"; tail -3 greedy.err
fi
gen_sim -rs 5 --temperature 100 > s5a.txt 2> /dev/null && gen_sim -rs 5 --temperature 100 > s5b.txt 2> /dev/null \
    && cmp -s s5a.txt s5b.txt && ! cmp -s s5a.txt greedy.txt \
    && ok "--prompt, sampled: the same text twice with -rs 5, not the greedy one" || bad "--prompt -rs 5 --temperature 100"
# a 256-token window with sharp attention (greedy_within.py's window256 model): each new
# row's keys past 128 are split over CTAs and the parts combined (attention_forward_rows), and
# every key's score counts, so a combine that weighs a part wrongly puts tokens far below fp32's
$PY "$ROOT/dev/test/greedy_within.py" make sharp256.bin window256 > /dev/null
if "$SIM" -e sharp256.bin --prompt "a|b" -g 300 --bpe-dir gen/gpt2 -i no_such_data.bin --temperature 0 > greedy256.txt 2> greedy256.err; then
    $PY "$ROOT/dev/test/greedy_within.py" check sharp256.bin gen/gpt2 "a|b" greedy256.txt 10 \
        && ok "--prompt at a 256-token window, sharp attention: 300 tokens (rows past 128 keys in parts), fp32's up to bf16's rounding" \
        || bad "--prompt at a 256-token window: the greedy text is not fp32's"
else
    bad "--prompt at a 256-token window failed"; tail -3 greedy256.err
fi

# ---- 10. HellaSwag (-h 1): its batches of rows of varying length (each batch as long as its
# longest row, so T below -t) through forward_losses. The accuracy, a count, equals the CPU
# trainer's (a flip would need two endings' losses within bf16's rounding of each other; none is on
# these 20 examples); the AddressSanitizer build on 2 examples.
echo "10. HellaSwag:"
$PY "$ROOT/dev/bench/make_random_hellaswag.py" hs.bin 20 3 128
HS=("${ARGS[@]}" -x 1 -v 1 -m 1 -h 1 -hf hs.bin)
run hs_cpu "$CPU" "${HS[@]}" -o hs_cpu
bg hs_sim "$SIM" "${HS[@]}" -o hs_sim
bg hs_asan "$ASAN" "${HS[@]}" -hm 2
joined hs_sim hs_asan
compare_logs hs_sim/main.log hs_cpu/main.log hsw=0 && ok "HellaSwag: the CPU trainer's accuracy ($(grep -a -m1 '^HellaSwag:' hs_sim.txt | cut -d' ' -f2-4))" \
    || bad "HellaSwag: the simulated CUDA trainer's accuracy is not the CPU trainer's"
grep -q '^HellaSwag: [0-9]*/2 ' hs_asan.txt && ok "HellaSwag under AddressSanitizer: 2 examples" || bad "HellaSwag under AddressSanitizer"
# -x 0: an evaluation of -e without train data (-i names no file): the CPU trainer's val loss and accuracy
EV=(-i nowhere.bin -j val.bin -e L2:C64:H1:T32:V128 -b 2 -t 16 -x 0 -v 1 -m 2 -s 0 -h 1 -hf hs.bin)
run ev_cpu "$CPU" "${EV[@]}" -o ev_cpu
run ev_sim "$SIM" "${EV[@]}" -o ev_sim
grep -q "^train data: none read (-x 0" ev_sim.txt && compare_logs ev_sim/main.log ev_cpu/main.log tel=2e-3 hsw=0 \
    && ok "-x 0 without train data: the CPU trainer's val loss and HellaSwag" || bad "-x 0 without train data"

# ---- 11. rollback (-sl 5 -rb 2, llmc/guard.h's LLMC_TEST_LOSS_SPIKE): the losses of steps 26 and 27
# x1000 skip both (after the guard's 20 steps of history), and the run reloads checkpoint 24 into
# the GPU model mid-run (undoing step 25, which was applied) and passes over the data of steps
# 25-27. Against the CPU trainer's same run (bf16 tolerance), and bitwise against checkpoint 24
# resumed by a new process on the shard without that data (unshuffled: step s trains on the
# shard's windows 4(s-1) .. 4s-1, 64 tokens).
echo "11. rollback:"
RBK=("${ARGS[@]}" -x 30 -n 3 -sh 0 -sl 5 -rb 2)
LLMC_TEST_LOSS_SPIKE=26,27 run rb_cpu "$CPU" "${RBK[@]}" -o rb_cpu
LLMC_TEST_LOSS_SPIKE=26,27 run rb_sim "$SIM" "${RBK[@]}" -o rb_sim
grep -q "^rollback 1 of 3: 2 steps in a row skipped .* back to checkpoint 24, passing over the data of steps 25-27" rb_sim.txt \
    && compare_logs rb_sim/main.log rb_cpu/main.log trl=2e-3 norm=2e-2 && ok "rollback to checkpoint 24 mid-run: the CPU trainer's losses" \
    || { bad "rollback: not the CPU trainer's run"; grep -a '^rollback\|error' rb_sim.txt | head -3; }
shard_cut train.bin cut.bin $((24 * 64)) $((27 * 64))
mkdir rb_cut && cp rb_sim/*_00000024* rb_cut/ && grep -v "^s:\(2[4-9]\|30\) " rb_sim/main.log > rb_cut/main.log
run rb_cut "$SIM" "${RBK[@]/train.bin/cut.bin}" -o rb_cut -y 1
grep -q "^resumed from checkpoint 24" rb_cut.txt && compare_logs rb_sim/main.log rb_cut/main.log trl=0 norm=0 \
    && ok "rollback: bitwise checkpoint 24 resumed by a new process without the data of steps 25-27" || bad "rollback: not the resumed run"

# ---- 12. preemption: SIGTERM after step 8 ends the simulated CUDA trainer after its step with a
# checkpoint (exit 0); -y 1 continues it bitwise to the uninterrupted run's end
echo "12. SIGTERM:"
bg sig_ref "$SIM" "${ARGS[@]}" -x 30 -o sig_ref
"$SIM" "${ARGS[@]}" -x 30 -o sig > sig.txt 2>&1 &
pid=$!
wait_line "^step 8/" sig.txt 120
kill -TERM $pid
wait $pid
rc=$?
joined sig_ref
if [ $rc -eq 0 ] && grep -q "^stopped by a signal after step [0-9]*; checkpoint [0-9]* is in sig" sig.txt && ! grep -q "^step 30/30" sig.txt; then
    run sig_resumed "$SIM" "${ARGS[@]}" -x 30 -o sig -y 1
    compare_logs sig/main.log sig_ref/main.log trl=0 norm=0 \
        && ok "SIGTERM: $(grep -o 'checkpoint [0-9]* is in sig' sig.txt), resumed with -y 1 to the uninterrupted run, bitwise" \
        || bad "SIGTERM: the resumed run is not the uninterrupted one"
else
    bad "SIGTERM: exit $rc, no checkpoint line, or the run went on to its end"; tail -3 sig.txt
fi

# ---- 13. a fatal error while checkpoint 4 is written in the background (a token out of the
# vocabulary in step 5's data, unshuffled: tokens 256-319): checkpoint 4 is finished before the exit
# (from the pinned snapshot) and resumes bitwise to the run without the bad token
echo "13. a fatal error during a background checkpoint:"
FE=(-j val.bin -e L2:C64:H1:T32:V128 -b 2 -t 16 -d 64 -x 12 -v 0 -s 0 -l 1e-3 -u 1 -c 0.1 -sh 0 -n 4)
shard_put train.bin badtoken.bin 290 200  # past the vocabulary of 128
bg fatal_ref "$SIM" -i train.bin "${FE[@]}" -o fatal_ref
"$SIM" -i badtoken.bin "${FE[@]}" -o fatal > fatal.txt 2>&1
rc=$?
joined fatal_ref
if [ $rc -eq 1 ] && grep -q "^error: shard 'badtoken.bin' has token id 200 at position 290" fatal.txt \
    && grep -q "^finishing checkpoint 4 (being written when the error came) before exiting" fatal.txt && [ -f fatal/DONE_00000004 ]; then
    run fatal_resumed "$SIM" -i train.bin "${FE[@]}" -o fatal -y 1
    grep -q "^resumed from checkpoint 4 in fatal" fatal_resumed.txt && compare_logs fatal/main.log fatal_ref/main.log trl=0 norm=0 \
        && ok "a fatal error during checkpoint 4's background write: finished, and resumed bitwise to the run without it" \
        || bad "a fatal error during checkpoint 4's background write: the resume from it is not the undisturbed run"
else
    bad "a fatal error during checkpoint 4's background write: exit $rc, checkpoint 4 not finished"; tail -3 fatal.txt; ls fatal
fi

# ---- 14. -at cudnn on the simulator's stand-in (our kernels behind cudnn_att.h: the same bits as -at own)
echo "14. -at cudnn on the simulator's stand-in for cuDNN:"
SIM_CUDNN_REPORT=1 bg cud "$SIM" "${ARGS[@]}" -v 4 -m 2 -at cudnn -o cud -n 4
LLMC_ATTENTION=cudnn bg test_cudnn "$TEST" fx.bin fx_state.bin fx_traj.txt
joined cud test_cudnn
# every layer's attention through cuDNN: 4 steps of 2 micro-steps and 2 validations of 2 batches, 2 layers
# (the same bits as -at own cannot tell which kernel ran; the stand-in counts its calls)
compare_logs cud/main.log sim/main.log trl=0 tel=0 norm=0 > cud.cmp && grep -q "attention: cudnn (the simulator's cuDNN stand-in (our kernels), deterministic backward" cud.txt \
    && grep -q "^sim cudnn: 24 forward, 16 backward calls" cud.txt \
    && ok "-at cudnn: bitwise -at own, validation included ($(head -1 cud.cmp | sed 's/^ *//')), $(grep -o '[0-9]* forward, [0-9]* backward calls' cud.txt) to cuDNN" \
    || { bad "-at cudnn against -at own"; cat cud.cmp; grep -o 'attention: [^|]*' cud.txt; grep "^sim cudnn" cud.txt; }
grep -E "FAIL|test_gpt2cu:" test_cudnn.txt | sed 's/^/  LLMC_ATTENTION=cudnn: /'
grep -q "attention cudnn" test_cudnn.txt || bad "LLMC_ATTENTION=cudnn: test_gpt2cu's banner does not say cudnn"
# -b auto: the stand-in needs 64 bytes of workspace per sequence here (our backward's scratch) and
# refuses more than 2048, so B 32 is the largest cuDNN builds, whatever the memory holds; at the
# run's own B a refusal is one line
CUDB=(-i train.bin -e L2:C64:H1:T32:V128 -t 16 -d 1024 -x 1 -v 0 -s 0 -at cudnn)
SIM_CUDNN_MAX_WORKSPACE=2048 "$SIM" "${CUDB[@]}" -b auto > cud_auto.txt 2>&1 && grep -q "^-b auto: B 32; up to 32 fit" cud_auto.txt \
    && ok "-b auto with cuDNN's workspace limited: $(grep -o '^-b auto: B 32; up to 32 fit' cud_auto.txt)" || { bad "-b auto under cuDNN's refusals"; grep -m2 "b auto\|error" cud_auto.txt; }
expect_error "-at cudnn refused at the run's B" "-at cudnn: cuDNN cannot build the attention for B=64 T=16 NH=1 HS=64.*-at own runs our kernel instead" \
    env SIM_CUDNN_MAX_WORKSPACE=2048 "$SIM" "${CUDB[@]}" -b 64
# -at auto (the default) in a cuDNN build: cuDNN's attention from T 256 on, ours below (the plan's row says which)
at_row() { "$SIM" -i train.bin -e L2:C64:H1:T256:V128 -b 1 -t "$1" -d "$1" -x 1 -v 0 -s 0 --plan 1 2>&1 | grep -o "^  attention workspace .*"; }
at_row 256 | grep -q "cuDNN's workspace$" && at_row 128 | grep -q "none: our kernel" \
    && ok "-at auto in a cuDNN build: cuDNN's attention at T 256, ours at T 128" || bad "-at auto's choice: T 256 '$(at_row 256)', T 128 '$(at_row 128)'"
# where cuDNN refuses its deterministic backward (the default one then runs), the run says so
SIM_CUDNN_DETERMINISTIC=0 "$SIM" "${ARGS[@]}" -at cudnn > cud_nd.txt 2>&1 \
    && grep -q "^warning: -at cudnn: cuDNN refused its deterministic attention backward" cud_nd.txt && grep -q "NON-deterministic backward" cud_nd.txt \
    && ok "a backward cuDNN cannot make deterministic: warned of, named in the banner" || { bad "no warning for a non-deterministic backward"; tail -3 cud_nd.txt; }
# a resume with -at own of a checkpoint -at cudnn wrote: warned of (the steps then match only to rounding; here bitwise)
"$SIM" "${ARGS[@]}" -v 4 -m 2 -at own -o cud -y 1 -x 6 > cud_own.txt 2>&1 \
    && grep -q "^warning: -at own differs from the -at cudnn of the run that wrote checkpoint 4 in cud" cud_own.txt \
    && ok "a -at cudnn checkpoint resumed with -at own: warned of" || { bad "the resume's -at warning"; grep -m3 "warning\|error" cud_own.txt; }

finish
