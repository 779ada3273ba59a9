#!/usr/bin/env bash
# Tiny Shakespeare -> data/tinyshakespeare/tiny_shakespeare_train.bin and ..._val.bin
# nanoGPT's split: the first 90% of the characters are train, the rest val; no EOT tokens
# (301,966 train and 36,059 val tokens).
#
# usage: dev/data/tinyshakespeare.sh [path/to/input.txt]
#   or   TINYSHAKESPEARE=path/to/input.txt dev/data/tinyshakespeare.sh
# Without a path, the text is unpacked once into data/tinyshakespeare/input.txt from the copy in
# dev/data/embedded/ (DOWNLOAD=1: downloaded from karpathy/char-rnn instead); no network needed.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

URL="https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
OUT="$DATA_DIR/tinyshakespeare"
make_out "$OUT"
src="$(input_file "${1:-${TINYSHAKESPEARE:-}}" tinyshakespeare.txt "$URL" "$OUT/input.txt" TINYSHAKESPEARE "Tiny Shakespeare text")"
need_tokenizer
"$TOKENIZE" -e "$ENC" -m "$BPE" -i "$src" \
    -o "$OUT/tiny_shakespeare_train.bin" -f 0.9 -O "$OUT/tiny_shakespeare_val.bin"
