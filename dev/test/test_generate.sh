#!/usr/bin/env bash
# The generate mode (--prompt TEXT -g N): greedy output equals the PyTorch reference's greedy
# output on the same model (prompt encoded and continuation decoded by tiktoken from the same
# encoder.json/vocab.bpe); top-k 1 is greedy at any temperature; the same -rs gives the same text
# and another -rs another; stdout holds the prompt and the continuation only; no data is read;
# bad input is one line. train_gpt2.py --prompt, the PyTorch twin, prints the same text.
#   bash dev/test/test_generate.sh [trainer]     (from the repo root; default ./train_gpt2)
source "$(dirname "$0")/lib.sh" test-generate "${1:-./train_gpt2}"
# OpenAI's tokenizer files, from the copies that ship in dev/data/embedded
unpack_embedded "$TMP/data"
GPT2_DIR="$TMP/data/gpt2"

# A random model, rescaled so that greedy decoding is a sharp test: the final LayerNorm gain x100
# makes the logits differ by whole units (the 2e-2 init alone gives near-ties that fp32 summation
# order could flip), the attention output projections x30 make the next token depend on the
# context, the position embeddings x3 keep it from repeating one token. 80 tokens after the prompt
# run past the model's 64-token context: a wrong window changes the text from token 66 on.
$PY "$ROOT/dev/test/greedy_within.py" make "$TMP/model.bin" L2:C64:H4:T64 3 100 3 30 > /dev/null
MODEL="$TMP/model.bin"
PROMPT="ROMEO: Is the day so young?"
N=80

# the reference: greedy ids from PyTorch in fp32, text through tiktoken
$PY - "$ROOT" "$MODEL" "$GPT2_DIR" "$PROMPT" $N > "$TMP/ref.txt" <<'EOF'
import sys, torch
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[1] + "/dev/test")
import train_gpt2 as ref
from tokenizer_ref import load_tiktoken
model, enc = ref.read_model(sys.argv[2]), load_tiktoken(sys.argv[3])
prompt, n = sys.argv[4], int(sys.argv[5])
ids = enc.encode_ordinary(prompt)
min_gap = float("inf")
with torch.no_grad():
    for _ in range(n):
        ctx = ids[-model.cfg.block_size:]
        logits, _ = model(torch.tensor([ctx]))
        top2 = torch.topk(logits[0, -1], 2).values
        min_gap = min(min_gap, float(top2[0] - top2[1]))
        ids.append(int(torch.argmax(logits[0, -1])))
sys.stderr.write(f"reference: smallest top-1/top-2 logit gap {min_gap:.3g}\n")
assert min_gap > 1e-2, "near-tie in the reference's greedy path: the comparison would be fragile"
sys.stdout.buffer.write(prompt.encode() + enc.decode_bytes(ids[len(enc.encode_ordinary(prompt)):]) + b"\n")
EOF
[ -s "$TMP/ref.txt" ] || bad "the PyTorch reference produced nothing"

gen() { "$TRAINER" -e "$MODEL" --prompt "$PROMPT" -g $N --bpe-dir "$GPT2_DIR" -i "$TMP/no_such_data.bin" "$@"; }

gen --temperature 0 > "$TMP/greedy.txt" 2> "$TMP/greedy.err" || bad "greedy generation failed: $(cat "$TMP/greedy.err")"
if cmp -s "$TMP/greedy.txt" "$TMP/ref.txt"; then
    echo "  greedy output equals PyTorch's ($N tokens): $(head -c 80 "$TMP/greedy.txt" | tr '\n' ' ')..."
else
    bad "greedy output differs from PyTorch's:"; echo "  ours: $(cat "$TMP/greedy.txt")"; echo "  ref:  $(cat "$TMP/ref.txt")"
fi
[ -s "$TMP/greedy.err" ] && bad "generate mode wrote to stderr: $(cat "$TMP/greedy.err")"
head -c ${#PROMPT} "$TMP/greedy.txt" | grep -qxF "$PROMPT" || bad "stdout does not start with the prompt"

gen --top-k 1 --temperature 3 -rs 7 > "$TMP/topk1.txt" || bad "top-k 1 failed"
cmp -s "$TMP/topk1.txt" "$TMP/greedy.txt" || bad "--top-k 1 is not greedy"

gen --temperature 5 -rs 11 > "$TMP/s11a.txt" && gen --temperature 5 -rs 11 > "$TMP/s11b.txt" && gen --temperature 5 -rs 12 > "$TMP/s12.txt" \
    || bad "sampling failed"
cmp -s "$TMP/s11a.txt" "$TMP/s11b.txt" || bad "the same -rs gave different text"
cmp -s "$TMP/s11a.txt" "$TMP/s12.txt" && bad "-rs 11 and -rs 12 gave the same text"
cmp -s "$TMP/s11a.txt" "$TMP/greedy.txt" && bad "temperature 5 gave the greedy text"
gen --temperature 5 --top-k 5 -rs 11 > "$TMP/k5.txt" || bad "top-k 5 failed"

# train_gpt2.py, the PyTorch twin, given the same command lines: the same text, greedy and sampled
# (its own forward in PyTorch; the token choice of llmc/generate.h, the same random numbers)
for opts in "--temperature 0" "--temperature 5 --top-k 5 -rs 11"; do
    $PY "$ROOT/train_gpt2.py" -e "$MODEL" --prompt "$PROMPT" -g $N --bpe-dir "$GPT2_DIR" $opts > "$TMP/twin.txt" 2> "$TMP/twin.err" \
        || bad "train_gpt2.py --prompt $opts failed: $(tail -n 2 "$TMP/twin.err")"
    gen $opts > "$TMP/c.txt" || bad "$opts failed"
    if cmp -s "$TMP/twin.txt" "$TMP/c.txt"; then
        echo "  train_gpt2.py --prompt ... $opts: the same $N tokens"
    else
        bad "train_gpt2.py $opts differs:"; echo "  train_gpt2:    $(cat "$TMP/c.txt")"; echo "  train_gpt2.py: $(cat "$TMP/twin.txt")"
    fi
done

# -y 1 -o <run> with --prompt (a guess that it generates from the run's checkpoint): the text of -e as
# before, and a warning saying so (both trainers)
for who in C twin; do
    if [ $who = C ]; then gen --temperature 0 -y 1 -o "$TMP/somerun" > "$TMP/yo.txt" 2> "$TMP/yo.err"
    else $PY "$ROOT/train_gpt2.py" -e "$MODEL" --prompt "$PROMPT" -g $N --bpe-dir "$GPT2_DIR" --temperature 0 -y 1 \
        -o "$TMP/somerun" > "$TMP/yo.txt" 2> "$TMP/yo.err"; fi
    cmp -s "$TMP/yo.txt" "$TMP/greedy.txt" && grep -q "^warning: --prompt generates from -e's model (.*); -y and -o are training's" "$TMP/yo.err" \
        && echo "  $who: --prompt with -y 1 -o: -e's text, and a warning" || { bad "$who: --prompt with -y 1 -o"; cat "$TMP/yo.err"; }
done

# bad input (expect_error, lib.sh), and nothing printed but that one line
one_line_error() {
    expect_error "$@" && { [ "$(wc -l < "$TMP/error.txt")" -eq 1 ] || { bad "$1: more than the error line:"; cat "$TMP/error.txt"; }; }
}
one_line_error "missing encoder" "--bpe-dir" "$TRAINER" -e "$MODEL" --prompt "hi" --bpe-dir "$TMP/nowhere"
one_line_error "bad temperature" "--temperature -1" "$TRAINER" -e "$MODEL" --prompt "hi" --temperature -1
one_line_error "missing model" "not found" "$TRAINER" -e "$TMP/nope.bin" --prompt "hi" --bpe-dir "$GPT2_DIR"
one_line_error "train_gpt2.py: missing encoder" "--bpe-dir '$TMP/nowhere', but '$TMP/nowhere/encoder.json' not found" \
    $PY "$ROOT/train_gpt2.py" -e "$MODEL" --prompt "hi" --bpe-dir "$TMP/nowhere"
mkdir -p "$TMP/badbpe" && cp "$GPT2_DIR/vocab.bpe" "$TMP/badbpe/" && head -c 1000 "$GPT2_DIR/encoder.json" > "$TMP/badbpe/encoder.json"
one_line_error "train_gpt2.py: a cut encoder.json" "--bpe-dir '$TMP/badbpe': encoder.json and vocab.bpe are not GPT-2's encoder" \
    $PY "$ROOT/train_gpt2.py" -e "$MODEL" --prompt "hi" --bpe-dir "$TMP/badbpe"
# vocab.bpe without its "#version" line (C reads it so): both trainers the same text as with it; then the
# same folder with two merges swapped: both refuse it (the twin read a copy cached by path before)
mkdir -p "$TMP/nover" && cp "$GPT2_DIR/encoder.json" "$TMP/nover/" && tail -n +2 "$GPT2_DIR/vocab.bpe" > "$TMP/nover/vocab.bpe"
for who in C twin; do
    if [ $who = C ]; then gen --temperature 0 --bpe-dir "$TMP/nover" > "$TMP/nover.txt" 2>&1
    else $PY "$ROOT/train_gpt2.py" -e "$MODEL" --prompt "$PROMPT" -g $N --bpe-dir "$TMP/nover" --temperature 0 > "$TMP/nover.txt" 2>&1; fi
    cmp -s "$TMP/nover.txt" "$TMP/greedy.txt" && echo "  $who: vocab.bpe without its version line, the same text" \
        || { bad "$who: vocab.bpe without its version line:"; head -c 300 "$TMP/nover.txt"; }
done
awk 'NR == 3 { l = $0; next } NR == 4 { print; print l; next } { print }' "$TMP/nover/vocab.bpe" > "$TMP/swap.bpe" && mv "$TMP/swap.bpe" "$TMP/nover/vocab.bpe"
one_line_error "train_gpt2.py: two merges swapped (in the folder just read)" "vocab.bpe line 3: this merge makes id 259 in .*, expected 258" \
    $PY "$ROOT/train_gpt2.py" -e "$MODEL" --prompt "hi" --bpe-dir "$TMP/nover"
one_line_error "two merges swapped" "vocab.bpe line 3: this merge makes token id 259" "$TRAINER" -e "$MODEL" --prompt "hi" --bpe-dir "$TMP/nover"
# "Ġt he" split as "Ġth e": the same token, from a symbol that only a later merge makes: both refuse it
mkdir -p "$TMP/split" && cp "$GPT2_DIR/encoder.json" "$TMP/split/" && sed '8s/^Ġt he$/Ġth e/' "$GPT2_DIR/vocab.bpe" > "$TMP/split/vocab.bpe"
one_line_error "train_gpt2.py: a merge of a symbol made later" "vocab.bpe line 8: a symbol that no earlier merge (or byte) makes" \
    $PY "$ROOT/train_gpt2.py" -e "$MODEL" --prompt "hi" --bpe-dir "$TMP/split"
one_line_error "a merge of a symbol made later" "vocab.bpe line 8: merge uses a symbol before the merge that makes it" \
    "$TRAINER" -e "$MODEL" --prompt "hi" --bpe-dir "$TMP/split"
echo '[1, 2]' > "$TMP/split/encoder.json"
one_line_error "train_gpt2.py: encoder.json a JSON array (was a traceback)" "encoder.json is not a JSON object of token ids" \
    $PY "$ROOT/train_gpt2.py" -e "$MODEL" --prompt "hi" --bpe-dir "$TMP/split"
one_line_error "train_gpt2.py: a prompt that is not UTF-8 (was a traceback)" "--prompt is not UTF-8 text: train_gpt2.py encodes text" \
    $PY "$ROOT/train_gpt2.py" -e "$MODEL" --prompt "$(printf 'a\xff\xfeb')" --bpe-dir "$GPT2_DIR"
one_line_error "train_gpt2.py: a vocabulary wider than GPT-2's" "has 50304 tokens, more than the GPT-2 encoder's 50257" \
    $PY "$ROOT/train_gpt2.py" -e L1:C64:H1:T64:V50304 --prompt "hi" --bpe-dir "$GPT2_DIR"
finish
