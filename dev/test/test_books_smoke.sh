#!/usr/bin/env bash
# CPU smoke version of scripts/run_gpt2_124M_books.sh: the same script, the same data recipes
# (on a slice of the book corpus) and the same HellaSwag file, with train_gpt2 and a tiny model
# for a few steps. Checks that val loss and HellaSwag are logged at every eval step, that the
# checkpoints are kept as asked, and that relaunching the script resumes; then the driver of the
# scaled reproduction (dev/bench/repro_books.sh) end to end, the CPU trainer against train_gpt2.py.
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

# the scaled reproduction's driver (dev/bench/repro_books.sh, issue 14's GPU runs) on the same
# data, with the CPU trainer in the CUDA trainer's place and train_gpt2.py on the CPU: both runs,
# the plot and the summary; the two trainers start from the same model and read the same tokens,
# so their final val losses agree (the DDP twin's 1e-4)
# Its python is a virtual environment's (the GPU machine's python3 is one), whose packages come from
# the path it is started by: a .pth file there records each start inside it (prefix and script),
# and train_gpt2.py, which the torch phase starts through its shebang, must be among them.
"$PY" -m venv --system-site-packages --without-pip "$TMP/venv" || bad "could not make a virtual environment with $PY"
site=$("$TMP/venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')
echo 'import os, sys; p = os.environ.get("REPRO_PY_PROBE"); p and open(p, "a").write(sys.prefix + " " + (sys.argv[0] if sys.argv else "") + "\n")' \
    > "$site/zz_probe.pth"
# the build's feature stamps before the scripts' makes: a make with other settings (repro_books.sh's
# NO_MULTI_GPU=1 reaching the CPU trainer's make) would rewrite them, and the next plain make would
# rebuild every binary of the tree, beside the tests that run them
stamps=$(cd "$ROOT" && cat build/features/* 2> /dev/null | md5sum)
REPRO=(CUDA_TRAINER="$TRAINER" PYTHON="$TMP/venv/bin/python" DATA_DIR="$TMP/data" RUN="$TMP/repro" MODEL=L2:C64:H4 B=4 PY_B=4
       T=64 D=512 STEPS=6 EVERY=3 HS_MAX=8 REPRO_FLAGS="-tk $TOKENIZER_BIN" REPRO_PY_PROBE="$TMP/probe.txt")
if env "${REPRO[@]}" bash "$ROOT/dev/bench/repro_books.sh" setup cuda torch report > "$TMP/repro.txt" 2>&1; then
    if grep -q "^torch: finished" "$TMP/repro.txt" && grep -q "^$TMP/venv .*train_gpt2.py$" "$TMP/probe.txt" 2> /dev/null; then
        ok "repro_books.sh: train_gpt2.py ran in the virtual environment of PYTHON"
    else
        bad "repro_books.sh: train_gpt2.py did not run in PYTHON's virtual environment (starts there: $(cut -d' ' -f2 "$TMP/probe.txt" 2> /dev/null | sort -u | paste -sd' '))"
    fi
    ratio=$(sed -n 's/^val-loss ratio .* = \([0-9.]*\) .*/\1/p' "$TMP/repro.txt")
    if [ -s "$TMP/repro/repro_books.png" ] && awk -v r="$ratio" 'BEGIN { exit !(r != "" && r > 0.9999 && r < 1.0001) }'; then
        ok "repro_books.sh setup cuda torch report: both runs, the plot, val-loss ratio $ratio"
    else
        bad "repro_books.sh: val-loss ratio '$ratio' (expected 1.0000 within 1e-4) or no plot"; tail -5 "$TMP/repro.txt"
    fi
else
    bad "repro_books.sh failed:"; tail -10 "$TMP/repro.txt"
fi
# their settings: a bad value stops them with one line
[ "$(cd "$ROOT" && cat build/features/* 2> /dev/null | md5sum)" = "$stamps" ] \
    && ok "repro_books.sh's makes left the build's feature stamps as they were" || bad "repro_books.sh's makes rewrote build/features"
expect_error "run_gpt2_124M_books.sh BUILD=x" "BUILD='x': expected 1" env BUILD=x bash "$ROOT/scripts/run_gpt2_124M_books.sh"
expect_error "repro_books.sh REPRO_BUDGET=abc" "REPRO_BUDGET='abc'" env REPRO_BUDGET=abc RUN="$TMP/bad" bash "$ROOT/dev/bench/repro_books.sh" setup
expect_error "repro_books.sh PY_B=0" "PY_B='0'" env PY_B=0 RUN="$TMP/bad" bash "$ROOT/dev/bench/repro_books.sh" setup
finish
