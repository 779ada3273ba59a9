#!/usr/bin/env bash
# HellaSwag validation set -> data/hellaswag/hellaswag_val.bin, llm.c's eval file (magic 20240522;
# byte layout in dev/data/README.md). Rendering as llm.c: context = "ctx", each of the 4 endings
# encoded as " " + ending, and the label.
#
# usage: dev/data/hellaswag.sh [path/to/hellaswag_val.jsonl]
#   or   HELLASWAG=path/to/hellaswag_val.jsonl dev/data/hellaswag.sh
# Without a path, the jsonl is downloaded once from rowanz/hellaswag into data/hellaswag/.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

URL="https://raw.githubusercontent.com/rowanz/hellaswag/master/data/hellaswag_val.jsonl"
OUT="$DATA_DIR/hellaswag"
make_out "$OUT"
src="$(input_file "${1:-${HELLASWAG:-}}" hellaswag_val.jsonl "$URL" "$OUT/hellaswag_val.jsonl" HELLASWAG "HellaSwag file")"
need_tokenizer
"$TOKENIZE" -e "$ENC" -m "$BPE" -H "$src" -o "$OUT/hellaswag_val.bin"
