#!/usr/bin/env bash
# The dev/data recipes and the main-job script end to end, offline. Tiny Shakespeare and the
# GPT-2 files come from the repository's embedded copies (dev/data/embedded); a stand-in curl on
# PATH serves downloads from a local folder, so the download path is tested too and any other
# download fails. The book corpus and HellaSwag come from the shared data folder (SHARED_DATA,
# default ../shared/data next to the repo); without it those recipes are skipped (a failure with
# CI=true). Outputs go to a temporary DATA_DIR and TOKENIZER_BIN, never into data/ or the repo root.
# Run by `make test-data`; exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
SHARED=$(realpath -m "${SHARED_DATA:-../shared/data}")
source dev/test/lib.sh test_data   # TMP, bad/finish, ok, skip_or_fail
cd "$ROOT"                         # the recipes run from the repo root, as a user runs them
PYTHON=$PY
"$PYTHON" -c "import tiktoken" 2>/dev/null || {
    echo "error: test-data needs tiktoken: $PYTHON -m pip install --break-system-packages tiktoken" >&2; exit 1; }

export DATA_DIR="$TMP/data" TOKENIZER_BIN="$TMP/gpt2_tokenizer.bin"
unset GPT2_DIR TINYSHAKESPEARE BOOKS_DIR HELLASWAG SHARD_TOKENS DOWNLOAD EMBEDDED_DIR

fail() { bad "$*"; finish; }   # the first failure ends the test
# tokens in a shard, from its header (and the file size must agree)
ntok() { "$PYTHON" -c "
import sys; sys.path.insert(0, 'dev/test')
from tokenizer_ref import read_shard
print(len(read_shard(sys.argv[1])))" "$1"; }
# a recipe that must fail: its last line must name the problem
expect_fail() {  # expect_fail <needle> <command...>: expect_error (lib.sh); the first failure ends the test
    local needle=$1; shift
    expect_error "rejected" "$needle" "$@" || finish
}
# Tiny Shakespeare's known token counts (../shared/data/README.md, from an independent Python BPE)
ts_counts() {
    [ "$(ntok "$1/tinyshakespeare/tiny_shakespeare_train.bin")" = 301966 ] || fail "$2: tiny shakespeare train count"
    [ "$(ntok "$1/tinyshakespeare/tiny_shakespeare_val.bin")" = 36059 ] || fail "$2: tiny shakespeare val count"
}

# the network: a stand-in curl first on PATH serves $FAKE_NET/<the URL's file name> and logs every
# URL in $FAKE_NET/requests.log; the default folder is empty, so every download fails
mkdir -p "$TMP/net"
stand_in_curl "$TMP/bin"
export PATH="$TMP/bin:$PATH" FAKE_NET="$TMP/net"

# --- Tiny Shakespeare by default: the embedded copies, no network, no local files given
bash dev/data/tinyshakespeare.sh >/dev/null
[ ! -f "$TMP/net/requests.log" ] || fail "the default recipe tried to download: $(cat "$TMP/net/requests.log")"
[ -f "$TOKENIZER_BIN" ] || fail "tinyshakespeare.sh did not write TOKENIZER_BIN"
ts_counts "$DATA_DIR" "embedded copies"
TS="$TMP/input.txt"
cp "$DATA_DIR/tinyshakespeare/input.txt" "$TS"
ok "tinyshakespeare.sh from the embedded copies, no download: 301,966 / 36,059 tokens"

# --- from a variable and from an argument; the tokenizer table is written once
rm -r "$DATA_DIR/tinyshakespeare"
touch -d '2000-01-01' "$TOKENIZER_BIN"
TINYSHAKESPEARE="$TS" bash dev/data/tinyshakespeare.sh >/dev/null
[ ! -f "$DATA_DIR/tinyshakespeare/input.txt" ] || fail "TINYSHAKESPEARE= given, but the embedded copy was unpacked too"
bash dev/data/tinyshakespeare.sh "$TS" >/dev/null
[ "$(stat -c %Y "$TOKENIZER_BIN")" = "$(date -d '2000-01-01' +%s)" ] || fail "an existing tokenizer table was rewritten"
ts_counts "$DATA_DIR" "local copy"
ok "tinyshakespeare.sh from TINYSHAKESPEARE= and an argument; gpt2_tokenizer.bin written once"

# --- DOWNLOAD=1: the sources' URLs, checked against SHA256SUMS; a corrupt copy is refused
mkdir "$TMP/net_ok" "$TMP/net_bad"
cp "$TS" "$DATA_DIR/gpt2/encoder.json" "$DATA_DIR/gpt2/vocab.bpe" "$TMP/net_ok/"
cp "$TMP/net_ok/"* "$TMP/net_bad/"
echo "one more line" >> "$TMP/net_bad/input.txt"
DOWNLOAD=1 FAKE_NET="$TMP/net_ok" DATA_DIR="$TMP/dl" TOKENIZER_BIN="$TMP/dl/tok.bin" bash dev/data/tinyshakespeare.sh >/dev/null
ts_counts "$TMP/dl" "downloaded"
[ "$(grep -c -e 'openaipublic.*/encoder.json$' -e 'openaipublic.*/vocab.bpe$' -e 'char-rnn.*/input.txt$' "$TMP/net_ok/requests.log")" = 3 ] \
    || fail "DOWNLOAD=1 fetched: $(cat "$TMP/net_ok/requests.log")"
expect_fail "sha256 differs" env DOWNLOAD=1 FAKE_NET="$TMP/net_bad" DATA_DIR="$TMP/dl2" bash dev/data/tinyshakespeare.sh
[ -z "$(ls -A "$TMP/dl2/tinyshakespeare")" ] || fail "a corrupt download left a file: $(ls "$TMP/dl2/tinyshakespeare")"
ok "DOWNLOAD=1: the three files from their URLs, 301,966 / 36,059 tokens; a corrupt download is refused"

# --- a corrupt embedded copy is refused and nothing is written
mkdir "$TMP/emb"
cp dev/data/embedded/* "$TMP/emb/"
head -c 500000 "$TS" | xz > "$TMP/emb/tinyshakespeare.txt.xz"
expect_fail "sha256 differs" env EMBEDDED_DIR="$TMP/emb" DATA_DIR="$TMP/d3" bash dev/data/tinyshakespeare.sh
[ -z "$(ls -A "$TMP/d3/tinyshakespeare")" ] || fail "a corrupt embedded copy left a file: $(ls "$TMP/d3/tinyshakespeare")"

# --- the book corpus straight from the .xz files, and HellaSwag (both from the shared folder)
if [ -f "$SHARED/corpus/train.txt.xz" ] && [ -f "$SHARED/hellaswag/hellaswag_val.jsonl" ]; then
    BOOKS_DIR="$SHARED/corpus" bash dev/data/books.sh >/dev/null
    [ "$(ntok "$DATA_DIR/books/books_train_000000.bin")" = 24120290 ] || fail "books train count"
    [ "$(ntok "$DATA_DIR/books/books_val_000000.bin")" = 847273 ] || fail "books val count"
    SHARD_TOKENS=10000000 BOOKS_DIR="$SHARED/corpus" bash dev/data/books.sh >/dev/null
    n=$(ls "$DATA_DIR/books"/books_train_*.bin | wc -l)
    [ "$n" = 3 ] || fail "books with 10M-token shards: $n train shards, expected 3 (no stale shards either)"
    ok "books.sh: 24,120,290 / 847,273 tokens; SHARD_TOKENS=10000000 gives 3 train shards"

    HELLASWAG="$SHARED/hellaswag/hellaswag_val.jsonl" bash dev/data/hellaswag.sh >/dev/null
    "$PYTHON" -c "
import sys; sys.path.insert(0, 'dev/test')
from tokenizer_ref import read_evalfile
h, ex = read_evalfile(sys.argv[1])
assert h[2] == 10042 and len(ex) == 10042, h[:4]
" "$DATA_DIR/hellaswag/hellaswag_val.bin" || fail "hellaswag_val.bin"
    ok "hellaswag.sh: 10,042 examples"
else
    skip_or_fail "test-data: books.sh, hellaswag.sh" "the book corpus and HellaSwag in $SHARED" \
        "SHARED_DATA=/path/to/shared/data make test-data (a folder with corpus/{train,val}.txt.xz and hellaswag/hellaswag_val.jsonl)" || exit 1
fi

# --- FineWeb from local JSON lines (FineWeb's columns), llm.c's names, val shard first
"$PYTHON" - "$TS" "$TMP/fw1.jsonl" "$TMP/fw2.jsonl" "$TMP/fw_expected.txt" "$DATA_DIR/gpt2" <<'EOF'
import json, os, sys
sys.path.insert(0, "dev/test")
from tokenizer_ref import load_tiktoken
text = open(sys.argv[1], encoding="utf-8").read()
docs = [d for d in text.split("\n\n") if d][:3000]
enc = load_tiktoken(sys.argv[5])
for k, path in enumerate(sys.argv[2:4]):
    with open(path, "w") as f:
        for i, d in enumerate(docs[k::2]):
            f.write(json.dumps({"text": d, "id": f"<urn:uuid:{k}-{i}>", "dump": "CC-MAIN-2024-10", "url": "http://x/",
                                "date": "2024-03-01T00:00:00Z", "file_path": "s3://x", "language": "en",
                                "language_score": 0.93, "token_count": len(d) // 4}) + "\n")
total = sum(1 + len(enc.encode_ordinary(d)) for d in docs[0::2] + docs[1::2])
open(sys.argv[4], "w").write(str(total))
EOF
SHARD_TOKENS=40000 bash dev/data/fineweb.sh "$TMP/fw1.jsonl" "$TMP/fw2.jsonl" >/dev/null
[ -f "$DATA_DIR/fineweb10B/fineweb_val_000000.bin" ] && [ -f "$DATA_DIR/fineweb10B/fineweb_train_000001.bin" ] \
    || fail "fineweb.sh shard names: $(ls "$DATA_DIR/fineweb10B")"
[ "$(ntok "$DATA_DIR/fineweb10B/fineweb_val_000000.bin")" = 40000 ] || fail "fineweb val shard size"
total=0
for f in "$DATA_DIR"/fineweb10B/fineweb_*.bin; do total=$((total + $(ntok "$f"))); done
[ "$total" = "$(cat "$TMP/fw_expected.txt")" ] || fail "fineweb tokens: $total, expected $(cat "$TMP/fw_expected.txt")"
SHARD_TOKENS=40000 bash dev/data/fineweb.sh -t edu "$TMP/fw1.jsonl" >/dev/null
[ -f "$DATA_DIR/edu_fineweb10B/edu_fineweb_val_000000.bin" ] || fail "fineweb.sh -t edu names: $(ls "$DATA_DIR/edu_fineweb10B")"
"$PYTHON" dev/data/fineweb_download.py --help >/dev/null || fail "fineweb_download.py --help"
ok "fineweb.sh: local JSON lines -> fineweb_val_000000.bin (40,000 tokens) + train shards, $total tokens"

# --- the main job, dry run: packages present (nothing to install), data prepared, the CPU
# trainer chosen here, extra flags passed on last
out="$(DRY_RUN=1 bash scripts/quickstart.sh -x 7 2>&1)"
echo "$out" | grep -q "would install" && fail "quickstart.sh would install packages the tests already need: $(echo "$out" | grep 'would install')"
out="$(echo "$out" | tail -n 1)"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then want=./train_gpt2cu; else want=./train_gpt2; fi
case "$out" in "$want "*"-i $DATA_DIR/tinyshakespeare/tiny_shakespeare_train.bin"*" -n "*" -x 7") ;;
    *) fail "quickstart.sh picked: $out (expected $want ... -n ... -x 7)" ;; esac
ok "quickstart.sh: $(echo "$out" | cut -c1-60)... -x 7"
# a stop signal to the script and the trainer (SIGTERM here: a background job ignores SIGINT;
# Ctrl-C sends SIGINT to both alike) during a short real run of the main job: the trainer
# checkpoints and the summary says the run stopped and how to continue (it said "done")
if [ "$want" = ./train_gpt2 ]; then
    bash scripts/quickstart.sh -e L1:C32:H2 -t 64 -b 2 -d 128 -x 100000 -v 50 -m 1 -s 0 -o "$TMP/qs" > "$TMP/qs.txt" 2>&1 &
    qs=$!
    wait_line "^step 60/" "$TMP/qs.txt" 60 || true  # the checks below say what went wrong
    pkill -TERM -f -- "-o $TMP/qs\$"  # the script and the trainer, as a signal to their group
    wait $qs && rc=0 || rc=$?
    line=$(grep '^quickstart:' "$TMP/qs.txt" || true)
    [ $rc = 0 ] && grep -q "^quickstart: stopped by a signal after .*; the last val loss [0-9.]* was at step [0-9]*; to continue from checkpoint [0-9]*: bash scripts/quickstart.sh .* -y 1$" <<< "$line" \
        && ok "quickstart.sh stopped by a signal: ${line:0:110}" || { fail "quickstart.sh after a stop signal (exit $rc): $line"; }
fi

# --- bad input to the recipes
expect_fail "not found" env TINYSHAKESPEARE="$TMP/none.txt" bash dev/data/tinyshakespeare.sh
touch "$TMP/afile"
expect_fail "cannot make the folder '$TMP/afile/tinyshakespeare' for the data (DATA_DIR=$TMP/afile)" env DATA_DIR="$TMP/afile" bash dev/data/tinyshakespeare.sh
expect_fail "GPT2_DIR" env GPT2_DIR="$TMP" bash dev/data/tinyshakespeare.sh "$TS"
expect_fail "BOOKS_DIR" env BOOKS_DIR="$TMP" bash dev/data/books.sh
expect_fail "not found" bash dev/data/books.sh "$TMP/none.txt" "$TMP/none2.txt"
# a cut .xz: the text it gives up to the cut would look like the whole split; no shard stays
head -c 300000 "$TS" | xz -0 > "$TMP/whole.txt.xz" && head -c 30000 "$TMP/whole.txt.xz" > "$TMP/cut.txt.xz"
DATA_DIR="$TMP/cutdata" expect_fail "cut.txt.xz: decompressing or tokenizing it failed (see above); no books_train shards kept" \
    bash dev/data/books.sh "$TMP/cut.txt.xz" "$TS"
[ -z "$(ls "$TMP/cutdata/books" 2>/dev/null)" ] || fail "books.sh with a cut .xz left $(ls "$TMP/cutdata/books")"
expect_fail "not found" env HELLASWAG="$TMP/none.jsonl" bash dev/data/hellaswag.sh
expect_fail ".jsonl or .parquet" bash dev/data/fineweb.sh "$TS"
expect_fail "-v 1B" bash dev/data/fineweb.sh -v 1B
if ! "$PYTHON" -c "import datasets" 2>/dev/null; then
    expect_fail "pip install datasets" "$PYTHON" dev/data/fineweb_download.py
fi
finish
