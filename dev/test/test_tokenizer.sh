#!/usr/bin/env bash
# GPT-2 tokenizer tests (make test-tokenizer): ./gpt2_tokenize against tiktoken, an independent
# encoder loading the same local encoder.json and vocab.bpe (no network), on Tiny Shakespeare, the
# whole book corpus, HellaSwag, an edge-case text, every code point of planes 0-1, invalid UTF-8,
# the document separators, long texts, FineWeb-style JSON lines, and bad input (dev/test/test_tokenizer.py).
# OpenAI's files and Tiny Shakespeare come from the repository (dev/data/embedded); the book corpus
# and HellaSwag from the shared data folder (SHARED_DATA, default ../shared/data next to the repo):
# without it those two checks are skipped (a failure with CI=true). Needs
#   $PYTHON -m pip install --break-system-packages tiktoken
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
SHARED=$(realpath -m "${SHARED_DATA:-../shared/data}")
source dev/test/lib.sh test_tokenizer   # TMP (the data folder below), skip_or_fail, unpack_embedded
cd "$ROOT"
PYTHON=$PY
[ -x ./gpt2_tokenize ] || { echo "error: ./gpt2_tokenize is missing: make gpt2_tokenize" >&2; exit 1; }
"$PYTHON" -c "import tiktoken" 2>/dev/null || {
    echo "error: test-tokenizer needs tiktoken as the reference: $PYTHON -m pip install --break-system-packages tiktoken" >&2
    exit 1
}
# the data folder test_tokenizer.py reads: the embedded files next to the shared corpus and HellaSwag
W=$TMP
unpack_embedded "$W"
exclude=()
if [ -f "$SHARED/corpus/train.txt.xz" ] && [ -f "$SHARED/corpus/val.txt.xz" ] && [ -f "$SHARED/hellaswag/hellaswag_val.jsonl" ]; then
    ln -s "$(realpath "$SHARED/corpus")" "$W/corpus"
    ln -s "$(realpath "$SHARED/hellaswag")" "$W/hellaswag"
else
    exclude=(--except books_corpus --except hellaswag)
fi
"$PYTHON" dev/test/test_tokenizer.py --tool ./gpt2_tokenize --gpt2-dir "$W/gpt2" --shared "$W" "${exclude[@]}" "$@"
if [ ${#exclude[@]} -gt 0 ]; then
    skip_or_fail "test-tokenizer: books_corpus, hellaswag" "the book corpus and HellaSwag in $SHARED" \
        "SHARED_DATA=/path/to/shared/data make test-tokenizer (a folder with corpus/{train,val}.txt.xz and hellaswag/hellaswag_val.jsonl)"
fi
