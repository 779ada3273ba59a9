#!/usr/bin/env bash
# CPU trainer benchmark: one training step (forward, backward, AdamW) of GPT-2 124M (d12) at
# B=4, T=64 on random tokens, the configuration of issue 2's speed target. Prints the mean step
# time over STEPS steps after the first (which also faults in the memory).
#   bash dev/bench/bench_cpu.sh            # OpenBLAS build, all cores
#   NO_BLAS=1 bash dev/bench/bench_cpu.sh  # the dependency-free build
# Env: STEPS (10), THREADS (all cores), PYTHON.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-/usr/bin/python3}
STEPS=${STEPS:-10}
THREADS=${THREADS:-$(nproc)}
BIN=./train_gpt2
if [ "${NO_BLAS:-0}" = 1 ]; then
    BIN=/tmp/train_gpt2_noblas_bench
    make -s -B NO_BLAS=1 train_gpt2 > /dev/null && cp train_gpt2 "$BIN" && make -s -B train_gpt2 > /dev/null
else
    make -s train_gpt2 > /dev/null
fi
DATA=$(mktemp /tmp/bench_cpu.XXXXXX.bin)
trap 'rm -f "$DATA"' EXIT
$PY dev/bench/make_random_shard.py "$DATA" $(( (STEPS + 1) * 4 * 64 + 1 ))
echo "bench_cpu: $BIN d12 B=4 T=64, $STEPS steps, OMP_NUM_THREADS=$THREADS, $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
OMP_NUM_THREADS=$THREADS "$BIN" -i "$DATA" -e d12 -b 4 -t 64 -x "$STEPS" -v 0 -s 0 -sh 0 2>&1 | grep -E "^step|average"
