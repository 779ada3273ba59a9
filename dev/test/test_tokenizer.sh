#!/usr/bin/env bash
# GPT-2 tokenizer tests (make test-tokenizer): ./gpt2_tokenize against tiktoken, an independent
# encoder loading the same local encoder.json and vocab.bpe (no network), on Tiny Shakespeare, the
# whole book corpus, HellaSwag, an edge-case text, every code point of planes 0-1, invalid UTF-8,
# the document separators, long texts, FineWeb-style JSON lines, and bad input (dev/test/test_tokenizer.py).
# Needs the shared data folder (SHARED_DATA, default ../shared/data next to the repo) and
#   $PYTHON -m pip install --break-system-packages tiktoken
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
PYTHON="${PYTHON:-/usr/bin/python3}"
SHARED="${SHARED_DATA:-../shared/data}"
if [ ! -d "$SHARED" ]; then
    # DESIGN.md: tests use ../shared/data when it exists; OpenAI's files cannot be downloaded here
    echo "test-tokenizer: SKIPPED: no shared data folder at $SHARED (OpenAI's encoder.json/vocab.bpe and the corpora live there; set SHARED_DATA=...)"
    exit 0
fi
[ -x ./gpt2_tokenize ] || { echo "error: ./gpt2_tokenize is missing: make gpt2_tokenize" >&2; exit 1; }
for f in gpt2/encoder.json gpt2/vocab.bpe tinyshakespeare/input.txt corpus/train.txt.xz corpus/val.txt.xz hellaswag/hellaswag_val.jsonl; do
    [ -f "$SHARED/$f" ] || { echo "error: test-tokenizer needs $SHARED/$f (set SHARED_DATA=...)" >&2; exit 1; }
done
"$PYTHON" -c "import tiktoken" 2>/dev/null || {
    echo "error: test-tokenizer needs tiktoken as the reference: $PYTHON -m pip install --break-system-packages tiktoken" >&2
    exit 1
}
exec "$PYTHON" dev/test/test_tokenizer.py --tool ./gpt2_tokenize --gpt2-dir "$SHARED/gpt2" --shared "$SHARED" "$@"
