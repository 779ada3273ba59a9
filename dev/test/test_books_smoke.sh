#!/usr/bin/env bash
# CPU smoke version of scripts/run_gpt2_124M_books.sh: the same script, the same data recipes
# (on a slice of the book corpus) and the same HellaSwag file, with train_gpt2 and a tiny model
# for a few steps. Checks that val loss and HellaSwag are logged at every eval step, that the
# checkpoints are kept as asked, and that relaunching the script resumes.
#   bash dev/test/test_books_smoke.sh      (from the repo root)
SHARED=$(realpath -m "${SHARED_DATA:-../shared/data}")
source "$(dirname "$0")/lib.sh" test_books_smoke ./train_gpt2
if [ ! -f "$SHARED/corpus/val.txt.xz" ] || [ ! -f "$SHARED/hellaswag/hellaswag_val.jsonl" ]; then
    skip_or_fail test-books-smoke "the book corpus and HellaSwag in $SHARED" \
        "SHARED_DATA=/path/to/shared/data make test-books-smoke (a folder with corpus/val.txt.xz and hellaswag/hellaswag_val.jsonl)"
    exit
fi
# a slice of the corpus in its own format: two documents for train, one for val
sep=$'\n<|endoftext|>\n'
xz -dc "$SHARED/corpus/val.txt.xz" | head -c 60000 > "$TMP/a.txt"
{ head -c 30000 "$TMP/a.txt"; printf '%s' "$sep"; tail -c 20000 "$TMP/a.txt"; } > "$TMP/train.txt"
xz -dc "$SHARED/corpus/val.txt.xz" | tail -c 12000 > "$TMP/val.txt"
export DATA_DIR="$TMP/data" TOKENIZER_BIN="$TMP/gpt2_tokenizer.bin"  # GPT-2 files: the embedded copies
export HELLASWAG="$SHARED/hellaswag/hellaswag_val.jsonl" OMP_NUM_THREADS=2
bash "$ROOT/dev/data/books.sh" "$TMP/train.txt" "$TMP/val.txt" > "$TMP/prep.txt" 2>&1 || { bad "books.sh failed"; cat "$TMP/prep.txt"; }
SMOKE=(TRAINER="$TRAINER" MODEL=L2:C64:H4 B=4 T=64 D=512 EVERY=3 HS_MAX=8 OUT="$TMP/out")
env "${SMOKE[@]}" STEPS=6 bash "$ROOT/scripts/run_gpt2_124M_books.sh" -tk "$TOKENIZER_BIN" > "$TMP/run1.txt" 2>&1 || { bad "the script failed"; tail "$TMP/run1.txt"; }
log="$TMP/out/main.log"
for s in 0 3 6; do
    grep -q "^s:$s tel:" "$log" || bad "no val loss at step $s"
    grep -q "^s:$s hsw:" "$log" || bad "no HellaSwag at step $s"
done
[ "$(grep -c ' trl:' "$log")" -eq 6 ] || bad "expected 6 train steps in main.log"
[ "$(ls "$TMP/out" | grep -c '^DONE_')" -eq 2 ] || bad "expected 2 checkpoints kept"
grep -q "HellaSwag: [0-9]*/8 " "$TMP/run1.txt" || bad "HellaSwag did not evaluate 8 examples"
env "${SMOKE[@]}" STEPS=9 bash "$ROOT/scripts/run_gpt2_124M_books.sh" -tk "$TOKENIZER_BIN" > "$TMP/run2.txt" 2>&1 || { bad "the relaunch failed"; tail "$TMP/run2.txt"; }
grep -q "resumed from checkpoint 6" "$TMP/run2.txt" || bad "the relaunch did not resume from checkpoint 6"
grep -q "^s:8 trl:" "$log" || bad "the resumed run did not reach step 9"
ok "the books recipe ran, logged val/HellaSwag at steps 0, 3, 6, kept 2 checkpoints and resumed"
finish
