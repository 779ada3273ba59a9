#!/usr/bin/env bash
# The dev/data recipes and the main-job script end to end, offline: every download step is given
# the local copy in the shared data folder (SHARED_DATA, default ../shared/data next to the repo).
# Outputs go to a temporary DATA_DIR and TOKENIZER_BIN, never into data/ or the repo root.
# Run by `make test-data`; exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
REPO="$(pwd)"
PYTHON="${PYTHON:-/usr/bin/python3}"
SHARED="${SHARED_DATA:-$REPO/../shared/data}"
if [ ! -d "$SHARED" ]; then
    # DESIGN.md: tests use ../shared/data when it exists; OpenAI's files cannot be downloaded here
    echo "test-data: SKIPPED: no shared data folder at $SHARED (set SHARED_DATA=...)"
    exit 0
fi
[ -d "$SHARED/gpt2" ] || { echo "error: test-data needs $SHARED/gpt2 (set SHARED_DATA=...)" >&2; exit 1; }
"$PYTHON" -c "import tiktoken" 2>/dev/null || {
    echo "error: test-data needs tiktoken: $PYTHON -m pip install --break-system-packages tiktoken" >&2; exit 1; }

TMP="$(mktemp -d /tmp/test_data.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
export DATA_DIR="$TMP/data" TOKENIZER_BIN="$TMP/gpt2_tokenizer.bin" GPT2_DIR="$SHARED/gpt2"
unset TINYSHAKESPEARE BOOKS_DIR HELLASWAG SHARD_TOKENS
t_start=$(date +%s)

fail() { echo "FAIL test-data: $*" >&2; exit 1; }
ok() { echo "ok   $*"; }
# tokens in a shard, from its header (and the file size must agree)
ntok() { "$PYTHON" -c "
import sys; sys.path.insert(0, 'dev/test')
from tokenizer_ref import read_shard
print(len(read_shard(sys.argv[1])))" "$1"; }
# a recipe that must fail: its last line must name the problem
expect_fail() {
    local needle="$1"; shift
    local out
    if out="$("$@" 2>&1)"; then fail "'$*' succeeded, expected an error about '$needle'"; fi
    echo "$out" | tail -n 1 | grep -q -- "$needle" || fail "'$*': expected an error about '$needle', got: $(echo "$out" | tail -n 1)"
    ok "rejected: $(echo "$out" | tail -n 1 | cut -c1-150)"
}

# --- Tiny Shakespeare, from a variable and from an argument; the tokenizer table appears once
bash dev/data/tinyshakespeare.sh "$SHARED/tinyshakespeare/input.txt" >/dev/null
[ -f "$TOKENIZER_BIN" ] || fail "tinyshakespeare.sh did not write TOKENIZER_BIN"
[ "$(ntok "$DATA_DIR/tinyshakespeare/tiny_shakespeare_train.bin")" = 301966 ] || fail "tiny shakespeare train count"
[ "$(ntok "$DATA_DIR/tinyshakespeare/tiny_shakespeare_val.bin")" = 36059 ] || fail "tiny shakespeare val count"
touch -d '2000-01-01' "$TOKENIZER_BIN"
TINYSHAKESPEARE="$SHARED/tinyshakespeare/input.txt" bash dev/data/tinyshakespeare.sh >/dev/null
[ "$(stat -c %Y "$TOKENIZER_BIN")" = "$(date -d '2000-01-01' +%s)" ] || fail "an existing tokenizer table was rewritten"
ok "tinyshakespeare.sh: 301,966 / 36,059 tokens; gpt2_tokenizer.bin written once"

# --- the book corpus straight from the .xz files
BOOKS_DIR="$SHARED/corpus" bash dev/data/books.sh >/dev/null
[ "$(ntok "$DATA_DIR/books/books_train_000000.bin")" = 24120290 ] || fail "books train count"
[ "$(ntok "$DATA_DIR/books/books_val_000000.bin")" = 847273 ] || fail "books val count"
SHARD_TOKENS=10000000 BOOKS_DIR="$SHARED/corpus" bash dev/data/books.sh >/dev/null
n=$(ls "$DATA_DIR/books"/books_train_*.bin | wc -l)
[ "$n" = 3 ] || fail "books with 10M-token shards: $n train shards, expected 3 (no stale shards either)"
ok "books.sh: 24,120,290 / 847,273 tokens; SHARD_TOKENS=10000000 gives 3 train shards"

# --- HellaSwag
HELLASWAG="$SHARED/hellaswag/hellaswag_val.jsonl" bash dev/data/hellaswag.sh >/dev/null
"$PYTHON" -c "
import sys; sys.path.insert(0, 'dev/test')
from tokenizer_ref import read_evalfile
h, ex = read_evalfile(sys.argv[1])
assert h[2] == 10042 and len(ex) == 10042, h[:4]
" "$DATA_DIR/hellaswag/hellaswag_val.bin" || fail "hellaswag_val.bin"
ok "hellaswag.sh: 10,042 examples"

# --- FineWeb from local JSON lines (FineWeb's columns), llm.c's names, val shard first
"$PYTHON" - "$SHARED/tinyshakespeare/input.txt" "$TMP/fw1.jsonl" "$TMP/fw2.jsonl" "$TMP/fw_expected.txt" <<'EOF'
import json, os, sys
sys.path.insert(0, "dev/test")
from tokenizer_ref import load_tiktoken
text = open(sys.argv[1], encoding="utf-8").read()
docs = [d for d in text.split("\n\n") if d][:3000]
enc = load_tiktoken(os.environ["GPT2_DIR"])
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

# --- the main job, dry run: data prepared, the CPU trainer chosen here, extra flags passed on
out="$(DRY_RUN=1 TINYSHAKESPEARE="$SHARED/tinyshakespeare/input.txt" bash scripts/run_tinyshakespeare.sh -x 7 2>&1 | tail -n 1)"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then want=./train_gpt2cu; else want=./train_gpt2; fi
case "$out" in "$want "*"-i $DATA_DIR/tinyshakespeare/tiny_shakespeare_train.bin"*" -x 7") ;;
    *) fail "run_tinyshakespeare.sh picked: $out (expected $want ... -x 7)" ;; esac
ok "run_tinyshakespeare.sh: $(echo "$out" | cut -c1-60)... -x 7"

# --- bad input to the recipes
expect_fail "not found" env TINYSHAKESPEARE="$TMP/none.txt" bash dev/data/tinyshakespeare.sh
expect_fail "GPT2_DIR" env GPT2_DIR="$TMP" bash dev/data/tinyshakespeare.sh "$SHARED/tinyshakespeare/input.txt"
expect_fail "BOOKS_DIR" env BOOKS_DIR="$TMP" bash dev/data/books.sh
expect_fail "not found" bash dev/data/books.sh "$TMP/none.txt" "$TMP/none2.txt"
expect_fail "not found" env HELLASWAG="$TMP/none.jsonl" bash dev/data/hellaswag.sh
expect_fail ".jsonl or .parquet" bash dev/data/fineweb.sh "$SHARED/tinyshakespeare/input.txt"
expect_fail "-v 1B" bash dev/data/fineweb.sh -v 1B
if ! "$PYTHON" -c "import datasets" 2>/dev/null; then
    expect_fail "pip install datasets" "$PYTHON" dev/data/fineweb_download.py
fi
echo "test-data: all passed ($(( $(date +%s) - t_start )) s)"
