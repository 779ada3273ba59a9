#!/usr/bin/env bash
# AdamW against Muon (-opt muon) on the CPU trainer: a small GPT-2 (L6:C256:H4, 17.7M parameters,
# T=256) on the book corpus for a fixed number of tokens (STEPS x 2048), the same seed, data order
# and schedule shape (16 warmup steps, cosine to 0.1, no weight decay), val loss on 12 batches
# (24,576 tokens) every 32 steps. First AdamW at each of ADAMW_LRS; then Muon at each of MUON_LRS
# (-ml) with the best AdamW learning rate for the parameters Muon leaves to AdamW. Runs one after
# another (each about 10-15 minutes on the 2-core machine); a run whose log is complete is kept,
# so the script can be started again after an interruption. Ends with dev/bench/muon_curves.py's
# summary (the figures of dev/bench/RESULTS.md) and its plot.
#
#   bash dev/bench/bench_muon_cpu.sh [out_dir]        (default /tmp/bench_muon)
# Env: BIN (default ./train_gpt2), STEPS (320), ADAMW_LRS ("1e-3 2e-3 4e-3"), MUON_LRS
# ("0.01 0.02 0.04"), PLOT (default dev/bench/muon_cpu.png), OMP_NUM_THREADS (default all cores).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-/tmp/bench_muon}
BIN=${BIN:-./train_gpt2}
STEPS=${STEPS:-320}
ADAMW_LRS=${ADAMW_LRS:-"1e-3 2e-3 4e-3"}
MUON_LRS=${MUON_LRS:-"0.01 0.02 0.04"}
PLOT=${PLOT:-dev/bench/muon_cpu.png}
PY=${PYTHON:-/usr/bin/python3}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
[ -f data/books/books_train_000000.bin ] || bash dev/data/books.sh
mkdir -p "$OUT"
COMMON=(-i "data/books/books_train_*.bin" -j "data/books/books_val_*.bin" -e L6:C256:H4 -b 8 -t 256 -d 2048
        -x "$STEPS" -u 16 -k cosine -q 0.1 -c 0 -v 32 -m 12 -s 0 -rs 1337)

run() {  # run <name> <flags...>: one run into $OUT/<name>, unless its log already has the final val loss
    local name=$1
    shift
    if grep -q "^s:$STEPS tel:" "$OUT/$name/main.log" 2>/dev/null; then echo "$name: done before, kept"; return; fi
    echo "$name: $BIN ${COMMON[*]} $* -o $OUT/$name"
    local t0=$SECONDS
    "$BIN" "${COMMON[@]}" "$@" -o "$OUT/$name" > "$OUT/$name.out" 2>&1 || { echo "$name failed:"; tail -3 "$OUT/$name.out"; exit 1; }
    echo "$name: $((SECONDS - t0)) s, $(grep '^val loss' "$OUT/$name.out" | tail -1)"
}

for lr in $ADAMW_LRS; do run "adamw_$lr" -l "$lr"; done
best=$("$PY" dev/bench/muon_curves.py "$OUT" --best adamw)
echo "best AdamW learning rate: $best (Muon's runs use it for the parameters AdamW keeps)"
for mlr in $MUON_LRS; do run "muon_$mlr" -opt muon -l "$best" -ml "$mlr"; done
"$PY" dev/bench/muon_curves.py "$OUT" -o "$PLOT"
