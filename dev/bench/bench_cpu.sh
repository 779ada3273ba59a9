#!/usr/bin/env bash
# CPU trainer benchmark: one training step (forward, backward, AdamW) of GPT-2 124M (d12) at
# B=4, T=64 on random tokens, the configuration of issue 2's speed target (B and T in the
# environment choose others for ours; llm.c's are fixed). Prints the mean step time over the
# steps after the first (which also faults in the memory).
#   bash dev/bench/bench_cpu.sh                       # OpenBLAS build, all cores
#   NO_BLAS=1 bash dev/bench/bench_cpu.sh             # the dependency-free build
#   LLMC=path/to/llm.c bash dev/bench/bench_cpu.sh    # the peer: llm.c's train_gpt2.c
#   BIN=path/to/train_gpt2 bash dev/bench/bench_cpu.sh # a binary built some other way
# LLMC runs karpathy/llm.c's CPU trainer, built by its own Makefile in a scratch copy, at the same
# shape, B, T and thread count: it takes no flags, so it runs in a folder laid out as it expects
# (gpt2_124M.bin, written by our trainer with d12's random initialization; the random tokens as
# its Tiny Shakespeare files), and is stopped after STEPS steps. Its own "took" figures are
# averaged the same way as ours, so the two last lines compare.
# Our trainer's matmul kernel is the one it picks (its first line); LLMC_CPU_MATMUL chooses.
# Env: STEPS (10), THREADS (all cores), B (4) and T (64) for ours, PYTHON, BIN, LLMC, BENCH_DIR (LLMC's
# folder, kept between runs: /tmp/bench_cpu_llmc).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-/usr/bin/python3}
STEPS=${STEPS:-10}
THREADS=${THREADS:-$(nproc)}
B=${B:-4} T=${T:-64}
die() { echo "bench_cpu: $*" >&2; exit 1; }
[[ $STEPS =~ ^[0-9]+$ ]] && [ "$STEPS" -ge 2 ] || die "STEPS must be an integer >= 2, not '$STEPS'"
[[ $THREADS =~ ^[1-9][0-9]*$ ]] || die "THREADS must be a positive integer, not '$THREADS'"
[[ $B =~ ^[1-9][0-9]*$ ]] && [[ $T =~ ^[1-9][0-9]*$ ]] && [ "$T" -le 1024 ] || die "B must be a positive integer and T one up to 1024, not B='$B' T='$T'"
# x86's /proc/cpuinfo names the model; ARM's does not, lscpu does
CPU="$({ grep -m1 'model name' /proc/cpuinfo || lscpu 2>/dev/null | grep -m1 'Model name' || echo ': unknown CPU'; } | cut -d: -f2 | xargs)"

# our trainer, built as the Makefile builds it (or NO_BLAS=1), on a fresh random shard
bench_ours() {
    local bin=${BIN:-./train_gpt2}
    if [ -n "${BIN:-}" ]; then
        [ -x "$BIN" ] || die "BIN=$BIN is not an executable"
    elif [ "${NO_BLAS:-0}" = 1 ]; then
        bin=/tmp/train_gpt2_noblas_bench
        make -s -B NO_BLAS=1 train_gpt2 > /dev/null && cp train_gpt2 "$bin" && make -s -B train_gpt2 > /dev/null
    else
        make -s train_gpt2 > /dev/null
    fi
    DATA=$(mktemp /tmp/bench_cpu.XXXXXX.bin)
    trap 'rm -f "$DATA"' EXIT
    $PY dev/bench/make_random_shard.py "$DATA" $(( (STEPS + 1) * B * T + 1 ))
    echo "bench_cpu: $bin d12 B=$B T=$T, $STEPS steps, OMP_NUM_THREADS=$THREADS, $(nproc) cores: $CPU"
    OMP_NUM_THREADS=$THREADS "$bin" -i "$DATA" -e d12 -b "$B" -t "$T" -x "$STEPS" -v 0 -s 0 -sh 0 2>&1 | grep -E "^trainer|^step|average"
}

# llm.c's folder: its trainer (rebuilt when its train_gpt2.c changes), the model, the tokens
llmc_setup() {
    local src=$1 w=$2
    [ -f "$src/train_gpt2.c" ] && [ -f "$src/Makefile" ] || die "LLMC=$src is not an llm.c tree (no train_gpt2.c and Makefile there)"
    mkdir -p "$w/dev/data/tinyshakespeare"
    if ! cmp -s "$src/train_gpt2.c" "$w/train_gpt2.c" || [ ! -x "$w/train_gpt2" ]; then
        rm -rf "$w/src" && cp -r "$src" "$w/src"
        make -s -C "$w/src" train_gpt2 > "$w/build.log" 2>&1 || die "building llm.c's train_gpt2 failed: $w/build.log"
        cp "$w/src/train_gpt2" "$w/src/train_gpt2.c" "$w/"
    fi
    make -s train_gpt2 > /dev/null
    cp gpt2_tokenizer.bin "$w/"
    local d=$w/dev/data/tinyshakespeare n=$(( 64 * 4 * 64 + 1 ))
    $PY dev/bench/make_random_shard.py "$d/tiny_shakespeare_train.bin" $n 0
    $PY dev/bench/make_random_shard.py "$d/tiny_shakespeare_val.bin" $n 1
    if [ ! -f "$w/gpt2_124M.bin" ]; then
        rm -rf "$w/init"
        OMP_NUM_THREADS=$THREADS ./train_gpt2 -i "$d/tiny_shakespeare_train.bin" -j "$d/tiny_shakespeare_val.bin" -e d12 -b 4 -t 64 \
            -x 1 -v 0 -s 0 -o "$w/init" -n 1 > "$w/init.log" 2>&1 || die "writing the d12 model failed: $w/init.log"
        mv "$w/init/model_00000001.bin" "$w/gpt2_124M.bin" && rm -rf "$w/init"
    fi
}

# llm.c's trainer until it has printed STEPS step lines, then stopped; the mean of all but the first
bench_llmc() {
    local w=${BENCH_DIR:-/tmp/bench_cpu_llmc}
    llmc_setup "$(cd "$LLMC" && pwd)" "$w"
    echo "bench_cpu: llm.c's train_gpt2 ($LLMC) d12 B=4 T=64, $STEPS steps, OMP_NUM_THREADS=$THREADS, $(nproc) cores: $CPU"
    coproc LL { cd "$w" && OMP_NUM_THREADS=$THREADS exec stdbuf -oL ./train_gpt2 2>&1; }
    local line n=0 sum=0 ms
    while IFS= read -r line <&"${LL[0]}"; do
        [[ $line =~ ^step\ ([0-9]+):.*took\ ([0-9.]+)\ ms ]] || continue
        echo "$line"
        ms=${BASH_REMATCH[2]}
        [ $n -gt 0 ] && sum=$(awk -v s="$sum" -v m="$ms" 'BEGIN { print s + m }')
        n=$((n + 1))
        [ $n -ge "$STEPS" ] && break
    done
    kill "$LL_PID" 2> /dev/null || true
    wait "$LL_PID" 2> /dev/null || true
    [ $n -ge "$STEPS" ] || die "llm.c's train_gpt2 stopped after $n of $STEPS steps"
    awk -v s="$sum" -v n=$((STEPS - 1)) 'BEGIN { printf "total average iteration time: %.3f ms\n", s / n }'
}

if [ -n "${LLMC:-}" ]; then
    [ "${NO_BLAS:-0}" = 1 ] && die "LLMC and NO_BLAS=1 measure different programs: run them one at a time"
    [ "$B" = 4 ] && [ "$T" = 64 ] || die "llm.c's train_gpt2 runs B=4 T=64 only (it takes no flags): unset B and T"
    bench_llmc
else
    bench_ours
fi
