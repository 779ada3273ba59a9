#!/usr/bin/env bash
# GPU benchmark on one GPU, ours against karpathy/llm.c in the same call.
# Parts (arguments, in this order; default: d12 attention gelu recompute tune biasgrad layers d48):
#   d12     GPT-2 124M, T = 1024, B = 16, 32, 64, 128: ours and llm.c's train_gpt2cu (cuDNN attention,
#           built by dev/bench/build_llmc.sh) on the same shard of random tokens, the same B, T and
#           -r, one after the other, STEPS steps each of which the first WARMUP are not timed;
#   attention  ours with our own attention kernel (-at own) on d12, T = 1024, B = 64; the d12
#           part runs the defaults (-at auto: cuDNN's attention at T = 1024 in builds with it) and
#           llm.c at the same B, and its llm.c run is paired with this one (rows "d12 -at own");
#   gelu    ours with -ge 0 (our GELU kernels; the d12 part runs the default -ge 2, GELU and its
#           derivative in cuBLASLt's epilogues) on d12, T = 1024, B = 64, paired with llm.c's run
#           of the d12 part (rows "d12 -ge 0"); llm.c measured its fused epilogue slower on some GPUs;
#   recompute  ours and llm.c with -r 0 (nothing recomputed) on d12, T = 1024, B = 64 (rows "d12 -r 0");
#   tune    ours with -mt 1 (cuBLASLt's algorithm of each matmul shape the fastest of 8 by timing,
#           instead of its heuristic's first) on d12, T = 1024, B = 64, paired with llm.c's run of the
#           d12 part (rows "d12 -mt 1"), and build/bench_layers with -mt 1 (every operation's time
#           beside the layers part's, which runs the heuristic's choices);
#   biasgrad  ours with -bg 1 (the linear layers' bias gradients summed by the weight-gradient
#           matmuls' cuBLASLt epilogue instead of our own pass over the data) on d12, T = 1024,
#           B = 64, paired with llm.c's run of the d12 part (rows "d12 -bg 1");
#   layers  build/bench_layers on d12 at B = 64 and at B = 16 (llm.c's fastest, where ours led it by
#           only 5% on 2026-11-27): where the milliseconds of one step go (the phases,
#           every operation alone), the backward time per layer, one 1-rank NCCL all-reduce of a
#           layer's gradients, and from them (dev/bench/exposed_comm.py) the exposed communication
#           per step on 8 GPUs and on 2 nodes, with and without the overlap;
#   d48     GPT-2 1.5B, T = 1024: ours at the largest B that fits with -r 1 and with -r 2 (the
#           trainer's memory check decides before allocating, so a B that does not fit costs
#           seconds), llm.c at ours' -r 1 B (else half of it), and build/bench_layers at that B;
#   muon    -opt muon against AdamW on d12, T = 1024, B = 64 (65,536 tokens per step), the same seed,
#           data order and schedule (MUON_STEPS steps, 30 warmup, cosine to 0.1, -c 0), val loss
#           every 50 steps: AdamW at -l 6e-4, Muon at -ml 0.02 (-l 6e-4 for the parameters AdamW
#           keeps). On the book corpus when data/books holds it (carry it: dev/data/books.sh),
#           else on random tokens, where only the timing means something. dev/bench/muon_curves.py
#           then prints the final val losses, the tokens Muon needs to reach AdamW's final val loss,
#           and the step-time overhead of Muon (median ms per step after the warm-up; target < 3%).
# Each run's GPU memory is sampled by nvidia-smi (the same measure for both trainers).
# dev/bench/gpu_summary.py then prints every run (ms/step, tok/s, MFU, peak memory), the ratio
# ours / llm.c per pair and the rows for dev/bench/RESULTS.md, and appends the pairs to
# dev/bench/gpu_results.tsv and $BENCH_OUT/gpu_results_rows.tsv (to bring back from the GPU
# machine). MFU for both = (6 N + 6 L T C) x tok/s / the peak our trainer's banner states
# (llmc/gpu_peak.h: 989 TFLOP/s on an H100 SXM or H200): llm.c's FLOP count, which is also the
# trainer's (llmc/model_io.h); the summary checks that our step lines agree.
#
# usage: dev/bench/bench_gpu.sh [d12] [attention] [gelu] [recompute] [tune] [biasgrad] [layers] [d48] [muon]
#   env: BENCH_OUT (build/bench), LLMC_COMMIT (the commit in the rows; default git HEAD), STEPS (40),
#        MUON_STEPS (300),
#        WARMUP (10), D12_BS ("16 32 64 128"), RECOMPUTE (-r of the d12 runs, 1), CUDA_ARCHS (90a),
#        OURS_ARGS (more flags for our trainer), LLMC_BIN, BENCH_NO_BUILD (see the builds), and what
#        make reads (NCCL_HOME, PYTHON, ...)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
OUTB=${BENCH_OUT:-build/bench}
mkdir -p "$OUTB"
PY=${PYTHON:-python3}
STEPS=${STEPS:-40} WARMUP=${WARMUP:-10} D12_BS=${D12_BS:-"16 32 64 128"} R=${RECOMPUTE:-1}
bench_error() { echo "error: bench_gpu.sh: $*" >&2; exit 2; }
[[ "$STEPS" =~ ^[0-9]+$ && "$WARMUP" =~ ^[0-9]+$ ]] && [ "$WARMUP" -lt "$STEPS" ] \
    || bench_error "STEPS=$STEPS WARMUP=$WARMUP: expected whole numbers with WARMUP < STEPS (the timed steps follow the warm-up)"
[[ "$D12_BS" =~ ^[1-9][0-9]*( +[1-9][0-9]*)*$ ]] || bench_error "D12_BS='$D12_BS': expected batch sizes, e.g. \"16 32 64\""
COMMIT=${LLMC_COMMIT:-$(git rev-parse --short HEAD 2> /dev/null || echo unknown)}
PARTS=("$@")
[ ${#PARTS[@]} -eq 0 ] && PARTS=(d12 attention gelu recompute tune biasgrad layers d48)
for p in "${PARTS[@]}"; do
    case $p in d12|attention|gelu|recompute|tune|biasgrad|layers|d48|muon) ;; *) bench_error "unknown part '$p' (parts: d12 attention gelu recompute tune biasgrad layers d48 muon)";; esac
done
has() { local p; for p in "${PARTS[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }

# ---- builds, in parallel: ours (make) and llm.c (only for the parts that compare); LLMC_BIN names
# an llm.c binary built before (its cuDNN folder on LD_LIBRARY_PATH), BENCH_NO_BUILD=1 skips make
[ "${BENCH_NO_BUILD:-0}" = 1 ] || {
    make --no-print-directory -j "$(nproc)" train_gpt2cu build/bench_layers CUDA_ARCHS="${CUDA_ARCHS:-90a}" > "$OUTB/build.log" 2>&1 &
    OURS_BUILD=$!; }
LLMC=${LLMC_BIN:-} LLMC_LD=""
if [ -z "$LLMC" ] && { has d12 || has d48; }; then
    bash dev/bench/build_llmc.sh > "$OUTB/build_llmc.log" 2>&1 &
    LLMC_BUILD=$!
fi
if [ -n "${OURS_BUILD:-}" ]; then
    if ! wait $OURS_BUILD; then echo "bench_gpu: build failed (see $OUTB/build.log)"; tail -20 "$OUTB/build.log"; exit 1; fi
    grep -E "^(nvcc|NCCL|cuDNN|MPI/CUDA):" "$OUTB/build.log"
fi
if [ -n "${LLMC_BUILD:-}" ]; then
    if wait "$LLMC_BUILD"; then
        LLMC=$(tail -1 "$OUTB/build_llmc.log")
        LLMC_LD=$(cat build/llmc/ld_library_path)
        echo "llm.c: $LLMC ($(grep -m1 -o 'cuDNN from .*' "$OUTB/build_llmc.log" || echo "build kept"))"
    else
        echo "bench_gpu: llm.c did not build; ours runs alone (see $OUTB/build_llmc.log):"; tail -5 "$OUTB/build_llmc.log"
    fi
fi

# enough random tokens for STEPS steps at B = 64 (each step reads B*T+1 tokens)
SHARD=$OUTB/random_train.bin
NEED=$(( 64 * 1024 * STEPS + 1024 ))
if [ ! -f "$SHARD" ] || [ "$(stat -c %s "$SHARD")" -lt $(( 1024 + 2 * NEED )) ]; then
    $PY dev/bench/make_random_shard.py "$SHARD" $NEED 1 || exit 1
fi

# nvidia-smi samples memory.used (MiB) every 200 ms into <file> while a run lasts
mem_start() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$1" 2> /dev/null & MEM_PID=$!; }
mem_stop() { kill "$MEM_PID" 2> /dev/null; wait "$MEM_PID" 2> /dev/null; }
# run <ours|llmc> <model> <B> <-r> <steps> [dir]: one run, log <dir>/<who>_<model>_b<B>_r<R>.log (dir:
# <model> by default); 0 if it ran
run() {
    local who=$1 model=$2 B=$3 r=$4 steps=$5 log="$OUTB/${6:-$2}/$1_$2_b$3_r$4.log" rc
    local common=(-i "$SHARD" -e "$model" -b "$B" -t 1024 -d $(( B * 1024 )) -x "$steps" -s 0 -r "$r")
    mem_start "${log%.log}.mem"
    if [ "$who" = ours ]; then
        # -lg 10: the GPU's clocks, power and throttling beside the step times (gpu_summary.py sums them up)
        timeout 400 ./train_gpt2cu "${common[@]}" -v 0 -sh 0 -lg 10 ${OURS_ARGS:-} > "$log" 2>&1
    else  # llm.c: -v 0 would divide by zero; -m 1 keeps its step-0 and last-step validation short
        LD_LIBRARY_PATH="$LLMC_LD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 400 "$LLMC" "${common[@]}" -j "$SHARD" \
            -v 100000 -m 1 > "$log" 2>&1
    fi
    rc=$?
    mem_stop
    [ $rc -eq 0 ] || { echo "  $who $model B=$B -r $r: exit $rc: $(grep -v '^\s*$' "$log" | tail -1 | cut -c1-200)"; }
    return $rc
}
oom() { grep -qi "GiB of GPU memory\|out of GPU memory\|out of memory" "$1"; }

echo "== $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2> /dev/null); idle memory.used" \
     "$(nvidia-smi --query-gpu=memory.used --format=csv,noheader 2> /dev/null)"
if has d12; then
    rm -rf "$OUTB/d12" && mkdir -p "$OUTB/d12"
    echo "== d12, T=1024, -r $R: ours and llm.c, B = $D12_BS ($STEPS steps, the first $WARMUP not timed)"
    for B in $D12_BS; do
        run ours d12 "$B" "$R" "$STEPS"
        [ -n "$LLMC" ] && run llmc d12 "$B" "$R" "$STEPS"
    done
fi

# variant <dir> <flags of ours>: ours with those flags on d12, T=1024, B=64, paired with llm.c's B=64
# run of the d12 part (copied in, if there is one)
variant() {
    rm -rf "${OUTB:?}/$1" && mkdir -p "$OUTB/$1"
    echo "== d12, T=1024, B=64, -r $R: ours with $2 ($STEPS steps, the first $WARMUP not timed)"
    OURS_ARGS="${OURS_ARGS:-} $2" run ours d12 64 "$R" "$STEPS" "$1"
    cp "$OUTB/d12/llmc_d12_b64_r$R".* "$OUTB/$1/" 2> /dev/null
}
if has attention; then variant d12_own "-at own"; fi
if has gelu; then variant d12_ge0 "-ge 0"; fi
# -r 0 (nothing recomputed in the backward: the GELU output kept, 4.8 GB more at d12 B=64) for both
# trainers: the lever of the d12 step's 2.4 ms GELU recompute (bench_layers, 2026-11-26)
if has recompute; then
    rm -rf "$OUTB/d12_r0" && mkdir -p "$OUTB/d12_r0"
    echo "== d12, T=1024, B=64, -r 0: ours and llm.c ($STEPS steps, the first $WARMUP not timed)"
    run ours d12 64 0 "$STEPS" d12_r0
    [ -n "$LLMC" ] && run llmc d12 64 0 "$STEPS" d12_r0
fi

# largest <r> <B...>: the first B with which ours runs d48 (10 steps), echoed; memory failures go on
largest() {
    local r=$1 B; shift
    for B in "$@"; do
        if run ours d48 "$B" "$r" 10 > /dev/null; then echo "$B"; return 0; fi
        oom "$OUTB/d48/ours_d48_b${B}_r$r.log" || return 1
        rm -f "$OUTB/d48/ours_d48_b${B}_r$r".*
    done
    return 1
}
rc=0
# layers <log> <bench_layers flags...>: where the time goes, then the exposed communication it implies
layers() {
    local log=$1; shift
    echo "== build/bench_layers $*"
    build/bench_layers "$@" > "$log" 2>&1; local r=$?
    cat "$log"
    if [ $r -ne 0 ]; then echo "bench_gpu: bench_layers failed (exit $r)"; rc=1; return; fi
    $PY dev/bench/exposed_comm.py "$log" || rc=1
}
if has tune; then
    variant d12_mt1 "-mt 1"
    layers "$OUTB/layers_d12_b64_mt1.log" -e d12 -b 64 -t 1024 -r "$R" -x 20 -mt 1
    grep -h "^matmul algorithms" "$OUTB/d12_mt1/"ours_*.log "$OUTB/layers_d12_b64_mt1.log" 2> /dev/null
fi
if has biasgrad; then
    variant d12_bg1 "-bg 1"
    grep -h "^bias gradients\|^warning: -bg 1" "$OUTB/d12_bg1/"ours_*.log 2> /dev/null
fi
if has layers; then
    layers "$OUTB/layers_d12_b64.log" -e d12 -b 64 -t 1024 -r "$R" -x 20
    layers "$OUTB/layers_d12_b16.log" -e d12 -b 16 -t 1024 -r "$R" -x 20
fi
if has d48; then
    rm -rf "$OUTB/d48" && mkdir -p "$OUTB/d48"
    echo "== d48, T=1024: ours at the largest B that fits with -r 1 and -r 2 (10 steps, 3 warm-up), llm.c at ours' -r 1 B"
    B1=$(largest 1 64 48 40 32 24 16 8); echo "  ours -r 1: ${B1:+B=}${B1:-no B fits (see $OUTB/d48)}"
    if [ -n "$LLMC" ] && [ -n "$B1" ]; then
        run llmc d48 "$B1" 1 10 || { oom "$OUTB/d48/llmc_d48_b${B1}_r1.log" && rm -f "$OUTB/d48/llmc_d48_b${B1}_r1".* \
            && run llmc d48 $(( B1 / 2 )) 1 10; }
    fi
    if [ -n "$B1" ]; then layers "$OUTB/layers_d48_b$B1.log" -e d48 -b "$B1" -t 1024 -r 1 -x 3; fi
    B2=$(largest 2 96 80 64 48 32 16); echo "  ours -r 2: ${B2:+B=}${B2:-no B fits (see $OUTB/d48)}"
fi

if has muon; then
    MS=${MUON_STEPS:-300}
    [[ "$MS" =~ ^[1-9][0-9]*$ ]] || bench_error "MUON_STEPS=$MS: expected a number of steps"
    rm -rf "$OUTB/muon" && mkdir -p "$OUTB/muon"
    DATA=(-i "$SHARD" -j "$SHARD")
    if ls data/books/books_train_*.bin > /dev/null 2>&1; then DATA=(-i "data/books/books_train_*.bin" -j "data/books/books_val_*.bin")
    else echo "  (no data/books: random tokens, only the step times mean something)"; fi
    MCOMMON=("${DATA[@]}" -e d12 -b 64 -t 1024 -d 65536 -x "$MS" -u 30 -k cosine -q 0.1 -c 0 -v 50 -m 8 -s 0 -rs 1337 -l 6e-4)
    echo "== -opt muon vs adamw: d12, B=64, T=1024, $MS steps each"
    for run in adamw_6e-4 muon_0.02; do
        flags=(); [ "$run" = muon_0.02 ] && flags=(-opt muon -ml 0.02)
        timeout 540 ./train_gpt2cu "${MCOMMON[@]}" "${flags[@]}" -o "$OUTB/muon/$run" > "$OUTB/muon/$run.out" 2>&1 \
            || { echo "  $run: exit $?: $(tail -1 "$OUTB/muon/$run.out" | cut -c1-200)"; rc=1; }
    done
    $PY dev/bench/muon_curves.py "$OUTB/muon" --step-ms 10 -o "$OUTB/muon/muon_d12.png" || rc=1
fi

# the summary of the parts run now (d48's runs have 10 steps, 3 of them warm-up)
rows=$OUTB/gpu_results_rows.tsv
rm -f "$rows"
if has d12; then $PY dev/bench/gpu_summary.py "$OUTB/d12" "$WARMUP" "$(date -u +%F)" "$COMMIT" "$rows" || rc=1; fi
if has attention; then
    $PY dev/bench/gpu_summary.py "$OUTB/d12_own" "$WARMUP" "$(date -u +%F)" "$COMMIT" "$rows" "-at own" || rc=1
fi
if has gelu; then $PY dev/bench/gpu_summary.py "$OUTB/d12_ge0" "$WARMUP" "$(date -u +%F)" "$COMMIT" "$rows" "-ge 0" || rc=1; fi
if has recompute; then $PY dev/bench/gpu_summary.py "$OUTB/d12_r0" "$WARMUP" "$(date -u +%F)" "$COMMIT" "$rows" "-r 0" || rc=1; fi
if has tune; then $PY dev/bench/gpu_summary.py "$OUTB/d12_mt1" "$WARMUP" "$(date -u +%F)" "$COMMIT" "$rows" "-mt 1" || rc=1; fi
if has biasgrad; then $PY dev/bench/gpu_summary.py "$OUTB/d12_bg1" "$WARMUP" "$(date -u +%F)" "$COMMIT" "$rows" "-bg 1" || rc=1; fi
if has d48; then $PY dev/bench/gpu_summary.py "$OUTB/d48" 3 "$(date -u +%F)" "$COMMIT" "$rows" || rc=1; fi
if [ -s "$rows" ]; then
    [ -s dev/bench/gpu_results.tsv ] || head -1 "$rows" > dev/bench/gpu_results.tsv
    tail -n +2 "$rows" >> dev/bench/gpu_results.tsv
fi
exit $rc
