#!/usr/bin/env bash
# GPU benchmark of train_gpt2cu (issue 4's speed figure, issue 5's scaling inputs), on one GPU:
#  1. GPT-2 124M (d12), T = 1024, at B = 16, B = 64 and the largest B that fits (the trainer's own
#     memory check decides: candidates are tried from large to small), ~30 timed steps each after
#     10 warm-up steps, on a shard of random tokens: tokens/s, ms/step, MFU and GPU memory in use;
#  2. build/bench_layers: the backward time of each layer and one NCCL all-reduce of one layer's
#     gradients on a 1-rank communicator (the launch and copy costs).
# MFU = FLOP per token x tokens/s / 989e12 (H100/H200 SXM dense bf16), with FLOP per token
# = 6 N + 12 L T C (N parameters, forward + backward, attention's two T-long matmuls per layer
# without the causal half) = 6 * 124,475,904 + 12 * 12 * 1024 * 768 = 860,101,632 for d12.
#
#  3. the d12 B = 64 run with each attention implementation (-at own, -at cudnn).
#
# usage: dev/bench/bench_gpu.sh [out_dir]   (CUDA_ARCHS defaults to 90a; NCCL_HOME, PYTHON as for make)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
OUTB=${1:-build/bench}
mkdir -p "$OUTB"
PY=${PYTHON:-python3}
ARCHS=${CUDA_ARCHS:-90a}
STEPS=40 WARMUP=10
FLOP_PER_TOKEN=860101632

make --no-print-directory -j "$(nproc)" train_gpt2cu build/bench_layers CUDA_ARCHS="$ARCHS" > "$OUTB/build.log" 2>&1 || {
    echo "bench_gpu: build failed (see $OUTB/build.log)"; tail -20 "$OUTB/build.log"; exit 1; }
grep -E "^(nvcc|NCCL|MPI/CUDA):" "$OUTB/build.log"

# enough random tokens for STEPS steps at the largest candidate B (each step reads B*T+1 tokens)
MAXB=448
SHARD="$OUTB/random_train.bin"
NEED=$(( MAXB * 1024 * STEPS + 1024 ))
if [ ! -f "$SHARD" ] || [ "$(stat -c %s "$SHARD")" -lt $(( 1024 + 2 * NEED )) ]; then
    $PY dev/bench/make_random_shard.py "$SHARD" $NEED 1 || exit 1
fi

# run <B>: train STEPS steps of d12 at micro-batch B, one micro-step per step, attention -at $ATT
# (default own); 0 if it ran
run() {
    local B=$1 log="$OUTB/d12_b$1${ATT:+_$ATT}.log"
    ./train_gpt2cu -i "$SHARD" -e d12 -b "$B" -t 1024 -d $(( B * 1024 )) -x $STEPS -v 0 -s 0 -sh 0 -r "${RECOMPUTE:-1}" \
        -at "${ATT:-own}" > "$log" 2>&1
}
# summarize <B>: mean over the steps after the warm-up
summarize() {
    local B=$1 log="$OUTB/d12_b$1${ATT:+_$ATT}.log"
    $PY - "$log" "$B" $WARMUP $FLOP_PER_TOKEN <<'EOF'
import re, sys
log, B, warm, fpt = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
text = open(log).read()
ms = [float(m.group(2)) for m in re.finditer(r"^step (\d+)/\d+ \|.*?\| ([0-9.]+) ms", text, re.M) if int(m.group(1)) > warm]
mem = re.search(r"GPU memory in use at the end: ([0-9.]+) GiB", text)
if not ms:
    print(f"B={B}: no timed steps (see {log})"); sys.exit(1)
avg = sum(ms) / len(ms)
tps = B * 1024 / (avg / 1000)
print(f"d12 T=1024 B={B:4d}: {avg:8.2f} ms/step  {tps:10.0f} tok/s  MFU {100 * fpt * tps / 989e12:5.1f}%  "
      f"GPU memory {mem.group(1) if mem else '?'} GiB  ({len(ms)} steps after {warm} warm-up)")
EOF
}

echo "== d12, T=1024, -r ${RECOMPUTE:-1} ($STEPS steps, the first $WARMUP not timed)"
for B in 16 64; do
    if run $B; then summarize $B; else echo "B=$B failed:"; tail -5 "$OUTB/d12_b$B.log"; fi
done
largest=""
for B in $MAXB 384 320 256 192 128 96; do
    if run $B; then largest=$B; break; fi
    grep -q "needs .* GiB of GPU memory\|out of GPU memory" "$OUTB/d12_b$B.log" || { echo "B=$B failed:"; tail -5 "$OUTB/d12_b$B.log"; break; }
done
if [ -n "$largest" ]; then echo "largest B that fits (of $MAXB 384 320 256 192 128 96):"; summarize $largest; fi

# the attention implementations side by side (issue 10): the same run with each -at
echo "== attention implementations, d12 T=1024 B=64"
for ATT in own cudnn; do
    printf '%s ' "-at $ATT:"
    if run 64; then summarize 64; else echo "failed:"; tail -3 "$OUTB/d12_b64_$ATT.log"; fi
done
unset ATT

echo "== per-layer backward and a 1-rank NCCL all-reduce of a layer's gradients"
for B in 16 64; do
    build/bench_layers -e d12 -b $B -t 1024 -x 20 2>&1 | tee "$OUTB/layers_b$B.log" | grep -v "^$"
done
