#!/usr/bin/env bash
# GPT-2 124M from scratch on the book corpus (../shared/data/corpus: 194 books, 24.1M train tokens,
# 0.85M val), on one GPU in well under 25 minutes, with val loss and HellaSwag every 250 steps.
#
#   bash scripts/run_gpt2_124M_books.sh [extra trainer flags]
#
# The 124M recipe (scripts/run_gpt2_124M.sh) scaled to 24M tokens instead of 10B:
# - total batch 65,536 tokens (B=64 x T=1024 on one GPU) instead of 524,288: at 0.5M tokens a step
#   the corpus is only 46 steps per epoch, too few for a warmup and a decay; at 64K it is 368;
# - 1,100 steps = 72M tokens, about 3 epochs: repeating data a few times costs little, many
#   epochs overfit a 124M model on 24M tokens;
# - lr 6e-4 (as for 124M) with warmup 100 steps (700 of 19,073 in the big run is 3.7%; 100 of
#   1,100 is 9%, a little longer because the batch is 8x smaller and noisier), cosine decay to 0,
#   weight decay 0.1, gradient clipping at 1.0;
# - val loss over the whole val split and HellaSwag (all 10,042 examples) every 250 steps and at
#   the end; a checkpoint every 250 steps (the newest 2 kept); -y 1 resumes an interrupted run.
# Data: dev/data/books.sh and dev/data/hellaswag.sh are run when their outputs are missing.
# Overrides (the CPU smoke test uses them): TRAINER (./train_gpt2cu), MODEL (d12), B (64), T (1024),
# D (65536), STEPS (1100), EVERY (250), HS_MAX (-1 = all), OUT (log_gpt2_124M_books), DATA_DIR (data),
# BUILD (1; 0: run TRAINER as it is, without make: a binary built elsewhere).
set -euo pipefail
cd "$(dirname "$0")/.."
TRAINER=${TRAINER:-./train_gpt2cu}
MODEL=${MODEL:-d12}
B=${B:-64}
T=${T:-1024}
D=${D:-65536}
STEPS=${STEPS:-1100}
EVERY=${EVERY:-250}
HS_MAX=${HS_MAX:--1}
OUT=${OUT:-log_gpt2_124M_books}
DATA=${DATA_DIR:-data}
case ${BUILD:-1} in 0) ;; 1) make "$(basename "$TRAINER")" ;;
    *) echo "error: BUILD='$BUILD': expected 1 (make TRAINER first) or 0 (run it as it is)" >&2; exit 2 ;; esac
ls "$DATA"/books/books_train_*.bin > /dev/null 2>&1 || bash dev/data/books.sh
[ -e "$DATA/hellaswag/hellaswag_val.bin" ] || bash dev/data/hellaswag.sh
exec "$TRAINER" \
    -i "$DATA/books/books_train_*.bin" -j "$DATA/books/books_val_*.bin" -o "$OUT" \
    -e "$MODEL" -b "$B" -t "$T" -d "$D" -x "$STEPS" \
    -l 0.0006 -u 100 -q 0.0 -c 0.1 -k cosine \
    -v "$EVERY" -m -1 -h 1 -hf "$DATA/hellaswag/hellaswag_val.bin" -hm "$HS_MAX" \
    -s "$EVERY" -g 64 -n "$EVERY" -nk 2 -y 1 "$@"
