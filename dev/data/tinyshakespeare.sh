#!/usr/bin/env bash
# Tiny Shakespeare -> data/tinyshakespeare/tiny_shakespeare_train.bin and ..._val.bin
# nanoGPT's split: the first 90% of the characters are train, the rest val; no EOT tokens
# (301,966 train and 36,059 val tokens).
#
# usage: dev/data/tinyshakespeare.sh [path/to/input.txt]
#   or   TINYSHAKESPEARE=path/to/input.txt dev/data/tinyshakespeare.sh
# Without a path, input.txt is downloaded once from karpathy/char-rnn into data/tinyshakespeare/.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

URL="https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
OUT="$DATA_DIR/tinyshakespeare"
src="${1:-${TINYSHAKESPEARE:-}}"
mkdir -p "$OUT"
if [ -z "$src" ]; then
    src="$OUT/input.txt"
    [ -f "$src" ] || fetch "$URL" "$src" "pass a local copy: TINYSHAKESPEARE=/path/to/input.txt $0"
fi
[ -f "$src" ] || die "Tiny Shakespeare text '$src' not found"
need_tokenizer
"$TOKENIZE" -e "$ENC" -m "$BPE" -i "$src" \
    -o "$OUT/tiny_shakespeare_train.bin" -f 0.9 -O "$OUT/tiny_shakespeare_val.bin"
