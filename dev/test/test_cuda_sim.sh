#!/usr/bin/env bash
# The CUDA trainer (train_gpt2.cu, test_gpt2.cu) on the CPU host simulator, no GPU needed: every
# kernel runs from its own source with fibers for threads (dev/cuda/sim), the fused attention with
# its PTX primitives emulated and checked, cuBLASLt is a stand-in written from its documented
# semantics; a simulator error (race, bounds, deadlock) fails the run.
# It checks the orchestration a GPU run would otherwise be the first to exercise:
#  1. per-step train and val losses agree with the fp32 CPU trainer from the same init and data
#     (bf16 tolerance), with -r 0/1/2 and with -w 0;
#  2. determinism (a second run is bitwise identical) and resume from a checkpoint (bitwise);
#  3. MPI, host-staged (-pb mpi), 2 ranks: equals 1 rank with 2 micro-steps (bf16 tolerance);
#     ZeRO-1: equals -z 0, writes a state file per rank, resumes bitwise on 2 ranks and re-shards
#     onto 1 rank;
#  4. -opt muon (llmc/muon.cuh): against the CPU trainer's Muon; 2 ranks -pb mpi with ZeRO-1 (shards
#     of whole matrices) against -z 0, bitwise resume on 2 ranks and re-sharded onto 1;
#  5. the AddressSanitizer build on short runs (single process -r 0 and -r 2, 2 ranks ZeRO-1 with AdamW
#     and with Muon);
#  6. test_gpt2cu against a PyTorch fixture (the tolerances the GPU run uses);
#  7. bad launches: unsupported head size, -pb mpi without mpirun, several ranks without NCCL,
#     -at cudnn (and test_gpt2cu's LLMC_ATTENTION=cudnn) in a build without cuDNN.
# usage: dev/test/test_cuda_sim.sh [build/cuda_sim]   (make test-cuda-trainer-sim builds it there)
SIMT=$(realpath "${1:-build/cuda_sim}")
SIM="$SIMT/train_gpt2cu" ASAN="$SIMT/train_gpt2cu_asan" TEST="$SIMT/test_gpt2cu"
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
# two single-process runs at a time (the simulator uses one core): bg <name> <cmd...>, then joined
bg() { local name=$1; shift; ( "$@" > "$name.txt" 2>&1; echo $? > "$name.rc" ) & }
joined() {  # joined <name>...: wait for the background runs, complain about failed ones
    wait
    local n
    for n in "$@"; do [ "$(cat "$n.rc" 2>/dev/null)" = 0 ] || { bad "$n exited non-zero"; tail -5 "$n.txt"; }; done
}

# ---- 1. the CPU trainer vs the simulated CUDA trainer, same init (gpt2_init_params) and data.
# Tolerance: bf16 forward/backward (logits and gradients ~0.5% of their largest entries in the
# simulator's test_gpt2cu) move a mean loss of ~4.9 by ~1e-4 relative over these steps; 2e-3 is
# 10x that and still 100x below what a wrong stride or buffer does to it.
echo "1. CPU (fp32) vs simulated CUDA (bf16), 4 steps of 2 micro-steps:"
run cpu "$CPU" "${ARGS[@]}" -v 4 -m 2 -o cpu
bg sim "$SIM" "${ARGS[@]}" -v 4 -m 2 -o sim
bg sim_r0 "$SIM" "${ARGS[@]}" -r 0 -o sim_r0
joined sim sim_r0
bg sim_r2 "$SIM" "${ARGS[@]}" -r 2 -o sim_r2
bg sim_w0 "$SIM" "${ARGS[@]}" -w 0 -o sim_w0
joined sim_r2 sim_w0
bg sim2 "$SIM" "${ARGS[@]}" -o sim2
bg ck "$SIM" "${ARGS[@]}" -o ck -n 2
joined sim2 ck
# gradient norms: measured 1.2e-3 at most over these steps (bf16 gradients, drifting runs)
compare_logs sim/main.log cpu/main.log trl=2e-3 tel=2e-3 norm=3e-3 || bad "simulated CUDA vs CPU"
for r in 0 2; do
    echo " -r $r vs -r 1:"; compare_logs sim_r$r/main.log sim/main.log trl=1e-3 norm=2e-3 || bad "-r $r differs from -r 1"
done
echo " -w 0 (bf16 parameters, no master weights) vs CPU:"
compare_logs sim_w0/main.log cpu/main.log trl=3e-3 || bad "-w 0 vs CPU"
grep -q "gradient reduction: none (one process)" sim.txt || bad "no device/backend line on stdout"

# ---- 2. determinism and resume
echo "2. determinism and resume:"
echo " second run:"; compare_logs sim2/main.log sim/main.log trl=0 norm=0 || bad "two identical runs differ"
rm -f ck/DONE_00000004
run ck_resume "$SIM" "${ARGS[@]}" -o ck -n 2 -y 1
grep -q "resumed from checkpoint 2" ck_resume.txt || bad "resume did not start from checkpoint 2"
steplines sim.txt | tail -2 > full_tail.txt; steplines ck_resume.txt > resumed.txt
if cmp -s full_tail.txt resumed.txt; then echo "  steps 3-4 after resume are bitwise equal"; else
    bad "resumed steps differ from the uninterrupted run"; diff full_tail.txt resumed.txt | head -6; fi

# ---- 3. MPI, host-staged, and ZeRO-1
if have_mpi "$SIM"; then
    echo "3. 2 MPI ranks (-pb mpi) vs 1 rank with 2 micro-steps:"
    run np2 "${MPIRUN[@]}" -np 2 "$SIM" "${ARGS[@]}" -pb mpi -o np2
    compare_logs np2/main.log sim/main.log trl=2e-3 norm=2e-3 || bad "2 ranks differ from 1 rank"
    [ "$(grep -c '^step [0-9]*/4 |' np2.txt)" -eq 4 ] || bad "np2: expected 4 step lines (rank 0 only)"
    run z1 "${MPIRUN[@]}" -np 2 "$SIM" "${ARGS[@]}" -pb mpi -z 1 -o z1 -n 2
    echo " ZeRO-1 vs -z 0:"; compare_logs z1/main.log np2/main.log trl=1e-3 norm=1e-3 || bad "ZeRO-1 differs from -z 0"
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
    ERROR_LINES=2 expect_error "2 ranks with -pb nccl in a build without NCCL (each rank says so)" "use the host-staged backend -pb mpi" \
        "${MPIRUN[@]}" -np 2 "$SIM" "${ARGS[@]}" -pb nccl
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
    run mz0 "${MPIRUN[@]}" -np 2 "$SIM" "${ARGS[@]}" "${MUON[@]}" -pb mpi -o mz0
    run mz1 "${MPIRUN[@]}" -np 2 "$SIM" "${ARGS[@]}" "${MUON[@]}" -pb mpi -z 1 -o mz1 -n 2
    compare_logs mz1/main.log mz0/main.log trl=1e-3 norm=1e-3 || bad "Muon ZeRO-1 differs from -z 0"
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
for r in 0 2; do
    grep -q "ERROR: AddressSanitizer\|runtime error" asan_r$r.txt && bad "ASan/UBSan report with -r $r"
done
if have_mpi "$SIM"; then
    run asan_z1 "${MPIRUN[@]}" -np 2 "$ASAN" "${ASHORT[@]}" -pb mpi -z 1 -o asan_z1 -n 1
    grep -q "ERROR: AddressSanitizer\|runtime error" asan_z1.txt && bad "ASan/UBSan report with 2 ranks, ZeRO-1"
    run asan_muon_z1 "${MPIRUN[@]}" -np 2 "$ASAN" "${ASHORT[@]}" -opt muon -pb mpi -z 1 -o asan_muon_z1 -n 1
    grep -q "ERROR: AddressSanitizer\|runtime error" asan_muon_z1.txt && bad "ASan/UBSan report with 2 ranks, ZeRO-1, Muon"
fi
echo "  $(grep -c '^step' asan_r0.txt asan_r2.txt asan_muon_z1.txt 2>/dev/null | tr '\n' ' ')"

# ---- 6. test_gpt2cu against the PyTorch reference (head size 64, small vocabulary)
echo "6. test_gpt2cu (simulated) against train_gpt2.py:"
$PY "$ROOT/train_gpt2.py" --model L2:C128:H2:T32:V128 --seed 3 --write-model fx.bin --batch 2 --seq 16 \
    --debug-state fx_state.bin --trajectory fx_traj.txt --steps 6 > fx.txt 2>&1 || { bad "fixture"; tail -3 fx.txt; }
"$TEST" fx.bin fx_state.bin fx_traj.txt > test.txt 2>&1 || bad "test_gpt2cu failed"
grep -E "FAIL|test_gpt2cu:|determinism|checkpoint" test.txt | sed 's/^/  /'

# ---- 7. bad launches
echo "7. bad input:"
expect_error "head size 32" "fused attention supports head sizes 64 and 128" "$SIM" "${ARGS[@]}" -e L2:C64:H2:T32:V128
expect_error "-pb mpi under torchrun variables" "pb mpi reduces gradients with MPI" \
    env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 "$SIM" "${ARGS[@]}" -pb mpi
# the simulator, like any build without cuDNN, says how to build with it
expect_error "-at cudnn in a build without cuDNN" "make cudnn-frontend" "$SIM" "${ARGS[@]}" -at cudnn
expect_error "LLMC_ATTENTION=cudnn in a test build without cuDNN" "make cudnn-frontend" \
    env LLMC_ATTENTION=cudnn "$TEST" fx.bin fx_state.bin fx_traj.txt

finish
