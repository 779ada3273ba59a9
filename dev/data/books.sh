#!/usr/bin/env bash
# The book corpus (200 public-domain books; see the data README) ->
#   data/books/books_train_000000.bin ... and data/books/books_val_000000.bin
# Documents are separated by a line holding only <|endoftext|>; each gets EOT (50256) in front,
# as llm.c does (train: 24,120,290 tokens = 24,120,096 text + 194 EOT; val: 847,273).
#
# usage: dev/data/books.sh [train.txt[.xz] val.txt[.xz]]
#   or   BOOKS_DIR=dir dev/data/books.sh     (dir holds train.txt.xz and val.txt.xz, or .txt)
# Default BOOKS_DIR: ../shared/data/corpus next to the repo. SHARD_TOKENS (default 100000000)
# sets the shard size. There is no download: the corpus is built from public repositories, see
# ../shared/data/README.md.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

OUT="$DATA_DIR/books"
SHARD_TOKENS="${SHARD_TOKENS:-100000000}"
pick() {  # pick DIR NAME: NAME.txt or NAME.txt.xz in DIR
    if [ -f "$1/$2.txt" ]; then echo "$1/$2.txt"; elif [ -f "$1/$2.txt.xz" ]; then echo "$1/$2.txt.xz"; fi
}
if [ $# -eq 2 ]; then
    train="$1"; val="$2"
elif [ $# -eq 0 ]; then
    dir="${BOOKS_DIR:-$REPO/../shared/data/corpus}"
    train="$(pick "$dir" train)"; val="$(pick "$dir" val)"
    [ -n "$train" ] && [ -n "$val" ] || die "no train.txt[.xz] and val.txt[.xz] in '$dir'; set BOOKS_DIR or pass the two files"
else
    die "usage: $0 [train.txt[.xz] val.txt[.xz]]"
fi
for f in "$train" "$val"; do [ -f "$f" ] || die "book corpus file '$f' not found"; done
make_out "$OUT"
need_tokenizer

# tokenize one split; .xz files are decompressed on the fly (nothing decompressed lands on disk)
tokenize_split() {
    local file="$1" name="$2"
    rm -f "$OUT/${name}"_[0-9]*.bin
    if [[ "$file" == *.xz ]]; then
        command -v xz >/dev/null || die "xz is needed for $file (apt-get install xz-utils)"
        # a corrupt .xz ends the text early: the shards of that text would pass for the whole split
        xz -dc "$file" | "$TOKENIZE" -e "$ENC" -m "$BPE" -x sep -S "$SHARD_TOKENS" -p "$OUT/$name" - \
            || { rm -f "$OUT/${name}"_[0-9]*.bin; die "$file: decompressing or tokenizing it failed (see above); no $name shards kept"; }
    else
        "$TOKENIZE" -e "$ENC" -m "$BPE" -x sep -S "$SHARD_TOKENS" -p "$OUT/$name" "$file"
    fi
}
tokenize_split "$train" books_train
tokenize_split "$val" books_val
