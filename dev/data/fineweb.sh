#!/usr/bin/env bash
# FineWeb (the GPT-2 124M reproduction data) -> llm.c's shards:
#   data/fineweb10B/fineweb_val_000000.bin   the first 100M tokens
#   data/fineweb10B/fineweb_train_000001.bin, ..._000002.bin, ...   100M tokens each (last one shorter)
# EOT (50256) before each document. FineWeb-Edu (-t edu) goes to data/edu_fineweb10B/edu_fineweb_*.
#
# usage: dev/data/fineweb.sh [-v 10B|100B] [-t classic|edu] [local files ...]
#   no files: download with dev/data/fineweb_download.py (needs: pip install datasets), streamed
#             straight into the tokenizer (about 28 GB of parquet for 10B; no copy is kept)
#   .jsonl files: rows of FineWeb as JSON lines (at least a "text" field), read by the C tool alone
#   .parquet files: FineWeb's own files, read through fineweb_download.py --parquet
# SHARD_TOKENS (default 100000000) sets the shard size; PYTHON the interpreter (default python3).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

version=10B
type=classic
while getopts "v:t:" opt; do
    case "$opt" in
        v) version="$OPTARG" ;;
        t) type="$OPTARG" ;;
        *) die "usage: $0 [-v 10B|100B] [-t classic|edu] [local .jsonl or .parquet files ...]" ;;
    esac
done
shift $((OPTIND - 1))
case "$version" in 10B|100B) ;; *) die "-v $version: use 10B or 100B" ;; esac
case "$type" in classic) name=fineweb ;; edu) name=edu_fineweb ;; *) die "-t $type: use classic or edu" ;; esac
OUT="$DATA_DIR/${name}${version}"
SHARD_TOKENS="${SHARD_TOKENS:-100000000}"
PYTHON="${PYTHON:-python3}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

njsonl=0; nparquet=0
for f in "$@"; do
    [ -f "$f" ] || die "FineWeb file '$f' not found"
    case "$f" in
        *.jsonl) njsonl=$((njsonl + 1)) ;;
        *.parquet) nparquet=$((nparquet + 1)) ;;
        *) die "'$f': local FineWeb files must be .jsonl or .parquet" ;;
    esac
done
[ "$njsonl" -eq 0 ] || [ "$nparquet" -eq 0 ] || die "give either .jsonl or .parquet files, not both"

make_out "$OUT"
need_tokenizer
rm -f "$OUT/${name}"_val_[0-9]*.bin "$OUT/${name}"_train_[0-9]*.bin
tok=("$TOKENIZE" -e "$ENC" -m "$BPE" -x jsonl -V 1 -S "$SHARD_TOKENS" -p "$OUT/$name")
# a download or a parquet reader that fails ends the text early: its shards would pass for the whole set
failed() { rm -f "$OUT/${name}"_val_[0-9]*.bin "$OUT/${name}"_train_[0-9]*.bin; die "$1 failed (see above); no $name shards kept"; }
if [ $# -eq 0 ]; then
    "$PYTHON" "$HERE/fineweb_download.py" -t "$type" -v "$version" | "${tok[@]}" - || failed "the download"
elif [ "$nparquet" -gt 0 ]; then
    "$PYTHON" "$HERE/fineweb_download.py" --parquet "$@" | "${tok[@]}" - || failed "reading the parquet files"
else
    "${tok[@]}" "$@"
fi
