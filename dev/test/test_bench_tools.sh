#!/usr/bin/env bash
# Tests the readers and the filing a GPU session's results pass through, on logs written here in the formats
# of the programs that make them (a failure there would cost device time, a wrong row, or a GPU
# test that cannot fail):
#  - dev/bench/gpu_summary.py on our step lines and llm.c's: ms/step, tok/s, MFU and the ratio
#    against hand-computed answers (GPT-2 124M with the padded vocabulary has 124,475,904
#    parameters, llm.c's own count: 6N + 6LTC = 803,478,528 FLOP per token at T = 1024), the TSV
#    row, and exit 1 when our step line's MFU disagrees with that count or a log has no steps;
#  - dev/bench/exposed_comm.py on build/bench_layers' output: two 2-layer timelines worked out by
#    hand, and one-line errors for bad arguments;
#  - dev/test/compare_logs.py, the judge of every main.log comparison (GPU vs CPU, determinism,
#    resume, MPI, DDP): a difference just past the tolerance fails and one just inside passes,
#    bitwise means the same digits, a missing step, a key neither log has, a NaN or an infinity
#    (even in both logs) all fail; a resumed log's later line wins; --first, --last; bad arguments;
#  - dev/bench/make_random_shard.py: the share of token 0, bad arguments;
#  - dev/bench/ncu_summary.py, Nsight Compute's raw page per kernel, against a hand-made page;
#  - dev/bench/muon_curves.py, the Muon benchmark's reader: the best runs, the tokens Muon needs to
#    reach AdamW's final val loss and the step-time overhead, against hand-computed answers;
#  - dev/gpu/intake.sh, which files a call's summary, logs and rows in the repo: names, what it
#    keeps, no duplicate rows, no overwritten summary, one-line errors.
# Usage, from the repo root: bash dev/test/test_bench_tools.sh
source "$(dirname "$0")/lib.sh" test_bench_tools
SUMMARY=("$PY" "$ROOT/dev/bench/gpu_summary.py")
COMM=("$PY" "$ROOT/dev/bench/exposed_comm.py")

# ---- gpu_summary.py: ours at 100 ms/step, llm.c at 125 ms/step, d12, B=16, T=1024 (16384 tokens)
# ours: 163840 tok/s, MFU 803478528 x 163840 / 989e12 = 13.31%; llm.c: 131072 tok/s, 10.65%
mkdir -p d12
ours_log() {  # ours_log <file> <MFU printed on the step lines> [<the banner's peak>]
    { echo "device: NVIDIA H100 80GB HBM3 (sm_90, 132 SMs) | gradient reduction: none | recompute -r 1"
      echo "MFU peak: ${3:-989 TFLOP/s dense bf16 (H100 SXM: 989 on the spec sheet at 132 SMs, 1980 MHz; this GPU 132 SMs, 1980 MHz)}"
      for s in 1 2 3 4 5 6; do
          echo "step $s/6 | loss 10.9 | norm 1.0 | lr 6.00e-04 | 100.0 ms | 163840 tok/s | MFU $2 | eta 1s"
      done
      echo "GPU memory in use at the end: 20.5 GiB"; } > "$1"
}
ours_log d12/ours_d12_b16_r1.log 13.3%
# two -lg lines (llmc/cuda/gpu_telemetry.cuh's format) among the steps
sed -i '4a\  gpu: SM 1980/1980 MHz | 610/700 W | 55 C (slows at 87) | busy 99%, memory busy 40% | memory 20.0/80.0 GiB | clocks held back: no' d12/ours_d12_b16_r1.log
sed -i '7a\  gpu: SM 1755/1980 MHz | 699/700 W | 71 C (slows at 87) | busy 99%, memory busy 41% | memory 20.0/80.0 GiB | clocks held back: power cap' d12/ours_d12_b16_r1.log
printf '20000\n21504\n' > d12/ours_d12_b16_r1.mem
{ echo "| device                | NVIDIA H100 80GB HBM3                              |"
  for s in 1 2 3 4 5 6; do
      echo "step    $s/6 | loss 10.900000 (+0.00z)| norm 1.0000 (+0.00z)| lr 6.00e-04 | 125.00 ms | 10.6% bf16 MFU | 131072 tok/s"
  done
  echo "device memory usage: 23552 MiB / 81559 MiB"; } > d12/llmc_d12_b16_r1.log
"${SUMMARY[@]}" d12 2 2026-01-02 abc1234 rows.tsv > summary.txt 2>&1 || bad "gpu_summary.py on good logs: exit $?"
want_row=$(printf '2026-01-02\tabc1234\tNVIDIA H100 80GB HBM3\td12\t16\t1024\t163840\t131072\t13.3\t10.6')
if [ "$(sed -n 2p rows.tsv)" = "$want_row" ] && head -1 rows.tsv | grep -q "^date	commit	device	model	B	T	ours_tok_s"; then
    ok "gpu_summary.py: the TSV row (tok/s, MFU by 6N + 6LTC on the banner's 989 TFLOP/s)"
else
    bad "gpu_summary.py: TSV row"; cat rows.tsv
fi
for line in "ours d12 B= 16 -r 1:    100.00 ms/step     163840 tok/s MFU  13.3%  memory 21.0 GiB \[20.5\]" \
            "llmc d12 B= 16 -r 1:    125.00 ms/step     131072 tok/s MFU  10.6%  memory - GiB \[23.0\]" \
            "d12 B= 16 -r 1: ours    163840 tok/s, llm.c    131072 tok/s: ratio 1.250" \
            "gpu (-lg, 2 readings): SM 1755-1980 of 1980 MHz, up to 699 of 700 W, clocks held back in 1: power cap"; do
    grep -q -- "$line" summary.txt && ok "gpu_summary.py: '${line:0:40}...'" || { bad "gpu_summary.py: no line '$line' in:"; cat summary.txt; }
done
# the peak comes from our banner (llmc/gpu_peak.h), not from a table of the reader's: an H100 PCIe's
# 756 TFLOP/s gives ours 803478528 x 163840 / 756e12 = 17.41%, llm.c 13.93%; a banner without a
# peak (MFU n/a) gives no MFU at all rather than one against a guessed peak
ours_log d12/ours_d12_b16_r1.log 17.4% "756 TFLOP/s dense bf16 (H100 PCIe: 756 on the spec sheet at 114 SMs, 1755 MHz; this GPU 114 SMs, 1755 MHz)"
"${SUMMARY[@]}" d12 2 2026-01-02 abc1234 rows756.tsv > summary.txt 2>&1 || bad "gpu_summary.py with a 756 TFLOP/s banner: exit $?"
[ "$(sed -n 2p rows756.tsv | cut -f9,10)" = "$(printf '17.4\t13.9')" ] && ok "gpu_summary.py: MFU against the banner's peak (756 TFLOP/s)" ||
    { bad "gpu_summary.py: MFU against the banner's 756 TFLOP/s"; cat rows756.tsv; }
ours_log d12/ours_d12_b16_r1.log n/a "n/a (no peak known for 'NVIDIA H100 80GB HBM3': add it to llmc/gpu_peak.h)"
"${SUMMARY[@]}" d12 2 2026-01-02 abc1234 rowsna.tsv > summary.txt 2>&1 || bad "gpu_summary.py with MFU n/a: exit $?"
[ "$(sed -n 2p rowsna.tsv | cut -f9,10)" = "$(printf -- '-\t-')" ] && grep -q "MFU = (6N + 6LTC) x tok/s / n/a" summary.txt &&
    ok "gpu_summary.py: no peak in the banner, no MFU" || { bad "gpu_summary.py: MFU n/a"; cat rowsna.tsv summary.txt; }
ours_log d12/ours_d12_b16_r1.log 14.0%   # 0.7 points off the count: a wrong FLOP formula
"${SUMMARY[@]}" d12 2 2026-01-02 abc1234 > summary.txt 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "MFU differs from the 6N + 6LTC count by up to 0.69" summary.txt && ok "gpu_summary.py: our MFU off the count fails" ||
    { bad "gpu_summary.py: our MFU off the count (exit $rc)"; cat summary.txt; }
ours_log d12/ours_d12_b16_r1.log 13.3%
# two -lg lines (llmc/cuda/gpu_telemetry.cuh's format) among the steps
sed -i '4a\  gpu: SM 1980/1980 MHz | 610/700 W | 55 C (slows at 87) | busy 99%, memory busy 40% | memory 20.0/80.0 GiB | clocks held back: no' d12/ours_d12_b16_r1.log
sed -i '7a\  gpu: SM 1755/1980 MHz | 699/700 W | 71 C (slows at 87) | busy 99%, memory busy 41% | memory 20.0/80.0 GiB | clocks held back: power cap' d12/ours_d12_b16_r1.log
echo "error: out of GPU memory" > d12/llmc_d12_b32_r1.log
"${SUMMARY[@]}" d12 2 2026-01-02 abc1234 > summary.txt 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "B= 32 -r 1: no timed steps after 2 warm-up: error: out of GPU memory" summary.txt &&
    ok "gpu_summary.py: a log without steps fails and shows its last line" || { bad "gpu_summary.py: a log without steps (exit $rc)"; cat summary.txt; }
expect_error "gpu_summary.py: a warm-up that is not a number" "usage:" "${SUMMARY[@]}" d12 x 2026-01-02 abc1234
expect_error "gpu_summary.py: a missing directory" "no directory nope" "${SUMMARY[@]}" nope 2 2026-01-02 abc1234

# ---- exposed_comm.py on build/bench_layers' lines for L = 2, launch costs 0, 2 ranks at 1 GB/s
# (2(W-1)/W = 1: 1 ms per MB). Each layer's reduction starts when both its backward and the
# reduction before it have ended. Worked out by hand:
#  a. head 1 ms, layers 1 ms, embeddings 2 ms; 1 MB per layer, 1 MB for wte/wpe/lnf. Backward ends
#     at 5 ms; reductions 2-3, 3-4 and (after the embeddings) 5-6 ms: 1 ms exposed; 3 MB in one
#     call after the backward: 3 ms.
#  b. head 1 ms, layers 1 ms, embeddings 0.5 ms; 2 MB per layer, 1 MB for the rest. Backward ends
#     at 3.5 ms; reductions 2-4, 4-6 (waits for the first) and 6-7 ms: 3.5 ms exposed; without
#     overlap 5 ms.
layers() {  # layers <file> <embeddings ms> <MB per layer> <MB in all>
    cat > "$1" <<EOF
bench_layers on NVIDIA H100 80GB HBM3: -e L2:C64 (L 2, C 64), B 4, T 64, -r 1, attention ours, 20 timed steps after 3 warm-up
backward: LM head + final LayerNorm 1.000 ms | per layer mean 1.000 ms (min 1.000, max 1.000) | embeddings $2 ms | total 4.000 ms
gradients of one layer: 500000 bf16 values ($3 MB) in 12 slices; all gradients $4 MB
NCCL all-reduce on 1 rank, one layer (12 slices, one group): 0.0000 ms
NCCL all-reduce on 1 rank, all gradients (one call): 0.0000 ms
EOF
}
layers a.txt 2.000 1.00 3.00
layers b.txt 0.500 2.00 5.00
for c in "a 1.000 3.00 1.00" "b 2.000 5.00 3.50"; do
    read -r name one none with <<< "$c"
    "${COMM[@]}" $name.txt 2:1 > comm.txt 2>&1 || bad "exposed_comm.py $name: exit $?"
    grep -q "2 ranks (2 ranks, 1 GB/s bus): one layer $one ms; exposed per step: without overlap $none ms, with overlap $with ms" comm.txt &&
        ok "exposed_comm.py: timeline $name" || { bad "exposed_comm.py: timeline $name:"; cat comm.txt; }
done
# with bench_layers' phases line (a step of 10 ms): each exposed time as a share of it
echo "  zero gradients 0.010 | forward (with the classifier) 3.000 | backward 5.000 | gradient norm 0.100 | AdamW 1.000 | step 10.000 ms = 2048 tok/s" >> a.txt
"${COMM[@]}" a.txt 2:1 > comm.txt 2>&1 || bad "exposed_comm.py with the step: exit $?"
grep -q "without overlap 3.00 ms (30.0% of the 10.0 ms step), with overlap 1.00 ms (10.0% of the 10.0 ms step)" comm.txt &&
    ok "exposed_comm.py: the shares of the step" || { bad "exposed_comm.py: the shares of the step:"; cat comm.txt; }
expect_error "exposed_comm.py: no argument" "usage:" "${COMM[@]}"
expect_error "exposed_comm.py: a missing file" "cannot read nope.txt" "${COMM[@]}" nope.txt
expect_error "exposed_comm.py: not bench_layers' output" "no model line" "${COMM[@]}" rows.tsv
expect_error "exposed_comm.py: a bad setup" "setup '8x370'" "${COMM[@]}" a.txt 8x370
expect_error "exposed_comm.py: one rank" "setup '1:370'" "${COMM[@]}" a.txt 1:370

# ---- compare_logs.py on main.logs in logger.h's format; A's train loss at step 3 is 2e-4 relative
# above B's (5.0010 vs 5.0000); the rest is the same
main_log() {  # main_log <file> <trl of step 3> [extra lines]
    { for s in 1 2 3 4; do
          trl=$([ $s = 3 ] && echo "$2" || echo "5.${s}00000")
          echo "s:$s trl:$trl lr:0.0006 norm:1.5 tok:$((s * 1024))"
      done
      echo "s:4 tel:4.75"
      [ -n "${3:-}" ] && echo "$3"; } > "$1"
}
main_log ma.log 5.00100000
main_log mb.log 5.00000000
compares() {  # compares <what> <want exit> <want output> <args...>
    local what=$1 want=$2 needle=$3; shift 3
    compare_logs "$@" > compare.txt 2>&1
    local rc=$?
    [ $rc -eq "$want" ] && grep -q -- "$needle" compare.txt && ok "compare_logs.py: $what" ||
        { bad "compare_logs.py: $what (exit $rc, want $want and '$needle'):"; cat compare.txt; }
}
compares "2e-4 within trl=3e-4 passes" 0 "trl: 4 steps agree (worst relative difference 2.0e-04, tolerance 0.0003)" ma.log mb.log trl=3e-4
compares "2e-4 beyond trl=1e-4 fails at step 3" 1 "trl: step 3: 5.00100000 vs 5.00000000 (relative 2.00e-04 > 0.0001)" ma.log mb.log trl=1e-4
compares "bitwise (the default) fails on other digits" 1 "trl: step 3: 5.00100000 != 5.00000000 (bitwise comparison)" ma.log mb.log
compares "bitwise passes on the same digits" 0 "trl: 4 steps agree (bitwise equal)" mb.log mb.log trl=0 tel=0
compares "each key is compared (norm, tel)" 0 "tel: 1 steps agree" ma.log mb.log trl=1e-3 norm=0 tel=0
compares "--last 1 leaves out step 3" 0 "trl: 1 steps agree (bitwise equal)" ma.log mb.log --last 1
compares "--first 2 leaves out step 3" 0 "trl: 2 steps agree (bitwise equal)" ma.log mb.log --first 2
compares "--first 3 takes step 3" 1 "trl: step 3: 5.00100000 != 5.00000000" ma.log mb.log --first 3
compares "a key neither log has fails" 1 "hsw: steps differ: \[\] in ma.log" ma.log mb.log hsw=1
grep -v "^s:2 " mb.log > gap.log
compares "a step missing in one log fails" 1 "trl: steps differ: \[1, 2, 3, 4\] in ma.log vs \[1, 3, 4\] in gap.log" ma.log gap.log trl=1
main_log resumed.log 5.00100000 "s:3 trl:5.00000000 lr:0.0006 norm:1.5 tok:3072"
compares "a resumed log's later line for a step wins" 0 "trl: 4 steps agree (bitwise equal)" resumed.log mb.log
for v in nan -nan inf; do
    main_log n1.log $v; main_log n2.log $v
    compares "$v fails, bitwise and with a tolerance, even against itself" 1 "trl: step 3: $v vs $v (not finite)" n1.log n2.log trl=0.5
    compares "$v fails bitwise" 1 "(not finite)" n1.log n2.log
done
main_log junk.log 5.0x
expect_error "compare_logs.py: a value that is not a number" "junk.log: step 3: trl:5.0x is not a number" compare_logs junk.log mb.log trl=1
expect_error "compare_logs.py: a missing log" "cannot read 'nope.log'" compare_logs ma.log nope.log
expect_error "compare_logs.py: a bad tolerance" "the tolerance of trl: 'x' is not a number >= 0" compare_logs ma.log mb.log trl=x
expect_error "compare_logs.py: a negative tolerance" "'-1' is not a number >= 0" compare_logs ma.log mb.log trl=-1
expect_error "compare_logs.py: --last without a value" "--last needs a value" compare_logs ma.log mb.log --last
expect_error "compare_logs.py: a bad argument" "bad argument 'trl'" compare_logs ma.log mb.log trl
expect_error "compare_logs.py: --first with --last" "--first and --last: give one" compare_logs ma.log mb.log --first 1 --last 1

# ---- make_random_shard.py (the benchmarks' and GPU tests' data): token 0 at the share asked for
"$PY" "$ROOT/dev/bench/make_random_shard.py" share.bin 20000 11 1000 0.4 || bad "make_random_shard.py failed"
"$PY" -c 'import numpy as np, sys
t = np.fromfile("share.bin", "<u2", offset=1024)
sys.exit(not (len(t) == 20000 and 0.39 < np.mean(t == 0) < 0.41 and t.max() < 1000))' \
    && ok "make_random_shard.py: 20000 ids below 1000, token 0 at 40% of them" || bad "make_random_shard.py: the shard's tokens"
expect_error "make_random_shard.py: a share above 1" "'1.5': expected a share of token 0 from 0 to 1" \
    "$PY" "$ROOT/dev/bench/make_random_shard.py" bad.bin 100 1 1000 1.5
expect_error "make_random_shard.py: a count that is no number" "'abc': expected a number of tokens" \
    "$PY" "$ROOT/dev/bench/make_random_shard.py" bad.bin abc

# ---- ncu_summary.py (call 4's profile, per kernel) on a raw page of 4 launches in microseconds,
# with thousands separators and an "n/a": layernorm_backward_kernel 1,200.5 + 799.5 = 2000 us in
# 2 launches (weighted by time, SM 20 and 30: 24.0; mem 80 and 70: 76.0; occupancy 50 and n/a:
# 50.0), the GEMM 3000
# us in 1 (90, 40, 12.5), gelu 1000 us; 6 ms in all: shares 50.0%, 33.3%, 16.7%; no DRAM column
NCU_SUM=("$PY" "$ROOT/dev/bench/ncu_summary.py")
{ echo '"ID","Process ID","Kernel Name","Block Size","gpu__time_duration.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed","gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed","sm__warps_active.avg.pct_of_peak_sustained_active"'
  echo '"","","","","usecond","%","%","%"'
  echo '"0","1","layernorm_backward_kernel","(256, 1, 1)","1,200.50","20.0","80.0","50.0"'
  echo '"1","1","nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT","(384, 1, 1)","3000","90","40","12.5"'
  echo '"2","1","layernorm_backward_kernel","(256, 1, 1)","799.50","30.0","70.0","n/a"'
  echo '"3","1","gelu_forward_kernel","(512, 1, 1)","1000","10","85","60"'; } > raw.csv
"${NCU_SUM[@]}" raw.csv 2 > ncu.txt 2>&1 || { bad "ncu_summary.py failed:"; cat ncu.txt; }
if head -1 ncu.txt | grep -q "^4 launches of 3 kernels, 6.000 ms in all; the 2 longest:" &&
   sed -n 3p ncu.txt | grep -qE "^  nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT +1 +3.000 +50.0% +90.0 +40.0 +- +12.5$" &&
   sed -n 4p ncu.txt | grep -qE "^  layernorm_backward_kernel +2 +2.000 +33.3% +24.0 +76.0 +- +50.0$" && [ "$(wc -l < ncu.txt)" = 4 ]; then
    ok "ncu_summary.py: per kernel, longest first, time-weighted means, units, separators, n/a and a missing metric"
else
    bad "ncu_summary.py's table:"; cat ncu.txt
fi
sed 's/"usecond"/"furlong"/' raw.csv > units.csv
expect_error "ncu_summary.py: an unknown unit" "unknown unit 'furlong'" "${NCU_SUM[@]}" units.csv
head -2 raw.csv > empty.csv
expect_error "ncu_summary.py: no launch" "holds no launch" "${NCU_SUM[@]}" empty.csv
expect_error "ncu_summary.py: not a raw page" "no header row with 'Kernel Name'" "${NCU_SUM[@]}" ma.log
expect_error "ncu_summary.py: a bad TOP" "TOP 'x'" "${NCU_SUM[@]}" raw.csv x

# ---- muon_curves.py (the Muon benchmark's reader, bench_gpu.sh muon) on three runs of 1000 tokens a
# step, val loss at steps 0, 50, 100 (tokens 0, 50k, 100k): adamw_6e-4 10/5/4, muon_0.02 10/4.5/3.5,
# muon_0.01 10/6/4.2. Best AdamW 4.0; best Muon -ml 0.02 reaches 4.0 between 50k (4.5) and 100k
# (3.5): 50k + 50k x 0.5/1.0 = 75,000 tokens = 0.750x. Step times after 10 warm-up steps: AdamW
# 100 ms, Muon 103 ms (+3.0%), the first steps 500 ms
MC=("$PY" "$ROOT/dev/bench/muon_curves.py")
muon_run() {  # muon_run <dir> <val at 0> <val at 50> <val at 100> <ms after the warm-up>
    mkdir -p "$1"
    { for s in 0 50 100; do
          v=$([ $s = 0 ] && echo "$2" || { [ $s = 50 ] && echo "$3" || echo "$4"; })
          echo "s:$s tel:$v"
          echo "s:$s trl:$v lr:0.001 norm:1.0 tok:$(( (s + 1) * 1000 ))"
      done; } > "$1/main.log"
    for s in $(seq 0 19); do
        echo "{\"event\":\"step\",\"step\":$s,\"tokens\":$(( (s + 1) * 1000 )),\"ms\":$([ $s -lt 10 ] && echo 500 || echo "$5")}"
    done > "$1/metrics.jsonl"
}
muon_run mc/adamw_6e-4 10.0 5.0 4.0 100
muon_run mc/muon_0.02 10.0 4.5 3.5 103
muon_run mc/muon_0.01 10.0 6.0 4.2 110
if "${MC[@]}" mc --step-ms 10 > mc.txt 2>&1 \
   && grep -q "best AdamW: lr 6e-4, final val loss 4.0000 after 100,000 tokens; best Muon: -ml 0.02, final val loss 3.5000" mc.txt \
   && grep -q "Muon reaches 4.0000 after 75,000 tokens = 0.750x AdamW's tokens" mc.txt \
   && grep -q "Muon's step time over AdamW's: +3.0%" mc.txt; then
    ok "muon_curves.py: best runs, 75,000 tokens = 0.750x, step-time overhead +3.0%"
else
    bad "muon_curves.py on three runs:"; cat mc.txt
fi
[ "$("${MC[@]}" mc --best adamw)" = 6e-4 ] && [ "$("${MC[@]}" mc --best muon)" = 0.02 ] \
    && ok "muon_curves.py --best: 6e-4 and 0.02" || bad "muon_curves.py --best: $("${MC[@]}" mc --best adamw) $("${MC[@]}" mc --best muon)"
rm -r mc/muon_0.02
"${MC[@]}" mc > mc2.txt 2>&1 && grep -q "Muon does not reach AdamW's final val loss within the run" mc2.txt \
    && ok "muon_curves.py: a Muon run that stays above AdamW's final loss is said so" || { bad "muon_curves.py, Muon short of AdamW:"; cat mc2.txt; }
if "$PY" -c "import matplotlib" 2> /dev/null; then
    "${MC[@]}" mc -o mc.png > /dev/null 2>&1 && [ -s mc.png ] && ok "muon_curves.py -o: the plot" || bad "muon_curves.py -o wrote no plot"
fi
# ---- dev/gpu/intake.sh on what a device call brings back (a summary, the log pack, the rows)
mkdir -p back/logs back/bench intake_root
{ echo "== test_gpu.sh 2026-12-01T10:00:00Z parts: env build test bench budget 330s"
  echo "PASS    env (3s)"; echo "FAIL    test_gpt2cu_tiny (exit 1, 2s)"; echo "SKIP    bench_layers (the time budget is used up)"
  echo "== done in 300s: 1 step(s) failed"; } > back/summary.txt
echo "bench figures" > back/logs/bench_d12.log; echo "no figures" > back/logs/env.log; echo "layers" > back/bench/layers_d12_b64.log
echo "why it failed" > back/logs/test_gpt2cu_tiny.log; echo "passed" > back/logs/test_gpt2cu_d12.log
tar -czf back/test_gpu_logs.tgz -C back logs bench
printf 'date\tcommit\tdevice\tmodel\tB\tT\tours_tok_s\tllmc_tok_s\tours_mfu\tllmc_mfu\n2026-12-01\tabc\tH200\td12\t64\t1024\t1\t2\t3\t4\n' > back/gpu_results_rows.tsv
IN=(env INTAKE_ROOT="$TMP/intake_root" bash "$ROOT/dev/gpu/intake.sh")
G=intake_root/dev/bench/gpu
if "${IN[@]}" back 1 > intake.txt 2>&1 && cmp -s back/summary.txt "$G/2026-12-01-call1-env-build-test-bench.txt" \
   && [ -f "$G/2026-12-01-call1-env-build-test-bench-logs/bench_d12.log" ] && [ -f "$G/2026-12-01-call1-env-build-test-bench-logs/layers_d12_b64.log" ] \
   && [ ! -f "$G/2026-12-01-call1-env-build-test-bench-logs/env.log" ] && [ -f "$G/2026-12-01-call1-env-build-test-bench-logs/test_gpt2cu_tiny.log" ] \
   && [ ! -f "$G/2026-12-01-call1-env-build-test-bench-logs/test_gpt2cu_d12.log" ] && [ "$(wc -l < intake_root/dev/bench/gpu_results.tsv)" = 2 ] \
   && grep -q "1 PASS, 1 FAIL/TIMEOUT, 1 SKIP" intake.txt; then
    ok "intake.sh: the summary under its date, call and parts, the logs with figures and the failed step's, the row with its header"
else
    bad "intake.sh:"; cat intake.txt; find intake_root
fi
"${IN[@]}" back 1 > intake2.txt 2>&1 && [ "$(wc -l < intake_root/dev/bench/gpu_results.tsv)" = 2 ] && grep -q "0 row(s) added" intake2.txt \
    && ok "intake.sh again: the same row is not added twice" || { bad "intake.sh run twice:"; cat intake2.txt; }
echo "PASS    later (1s)" >> back/summary.txt
expect_error "intake.sh: another summary of the same name" "exists and differs: not overwritten" "${IN[@]}" back 1
expect_error "intake.sh: no summary" "no summary.txt in 'nope'" "${IN[@]}" nope 1
expect_error "intake.sh: a bad call number" "call number 'x'" "${IN[@]}" back x
echo "not a summary" > notsum.txt && mkdir -p ns && cp notsum.txt ns/summary.txt
expect_error "intake.sh: not test_gpu.sh's summary" "not test_gpu.sh's summary" "${IN[@]}" ns 2

mkdir empty
expect_error "muon_curves.py: no runs" "no adamw_<lr>/main.log or muon_<lr>/main.log" "${MC[@]}" empty
expect_error "muon_curves.py: not a folder" "is not a folder of runs" "${MC[@]}" nope
finish
