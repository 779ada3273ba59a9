# Shared by the dev/data recipes (sourced, not run). Provides:
#   REPO, DATA_DIR (default data/), TOKENIZER_BIN (default gpt2_tokenizer.bin at the repo root)
#   need_tokenizer   builds ./gpt2_tokenize if needed, finds the GPT-2 files (ENC, BPE) and
#                    writes TOKENIZER_BIN if it is missing
#   fetch URL OUT    downloads a file (curl or wget), or dies with a hint to pass a local copy
#   input_file LOCAL URL CACHE VAR WHAT   the recipe's input: LOCAL if given, else CACHE, downloaded once
# Environment: GPT2_DIR=dir holding encoder.json and vocab.bpe (else data/gpt2/, downloaded once
# from OpenAI and checked against the sha256 values tiktoken uses).

set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DATA_DIR="${DATA_DIR:-$REPO/data}"
TOKENIZER_BIN="${TOKENIZER_BIN:-$REPO/gpt2_tokenizer.bin}"
TOKENIZE="$REPO/gpt2_tokenize"
GPT2_URL="https://openaipublic.blob.core.windows.net/gpt-2/encodings/main"
ENCODER_SHA256=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
VOCAB_SHA256=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5

die() { echo "error: $*" >&2; exit 1; }

# fetch URL OUT HINT: download to OUT (via OUT.part, so an interrupted download never looks complete)
fetch() {
    local url="$1" out="$2" hint="$3"
    mkdir -p "$(dirname "$out")"
    echo "downloading $url -> $out"
    if command -v curl >/dev/null 2>&1; then
        curl -fL --retry 2 -o "$out.part" "$url" || { rm -f "$out.part"; die "download of $url failed; $hint"; }
    elif command -v wget >/dev/null 2>&1; then
        wget -q -O "$out.part" "$url" || { rm -f "$out.part"; die "download of $url failed; $hint"; }
    else
        die "neither curl nor wget is installed; $hint"
    fi
    mv "$out.part" "$out"
}

# input_file LOCAL URL CACHE VAR WHAT: print the path of a recipe's input. LOCAL (a path the user
# gave, or empty) wins; else CACHE, downloaded from URL the first time. VAR names the environment
# variable that passes a local copy, WHAT the file, for messages.
input_file() {
    local src="$1" url="$2" cache="$3" var="$4" what="$5"
    if [ -z "$src" ]; then
        src="$cache"
        [ -f "$src" ] || fetch "$url" "$src" "pass a local copy: $var=/path/to/$(basename "$cache") $0" >&2
    fi
    [ -f "$src" ] || die "$what '$src' not found"
    echo "$src"
}

need_tokenizer() {
    # the tool: rebuilt by make when its sources changed
    if ! (cd "$REPO" && make -s gpt2_tokenize >/tmp/gpt2_tokenize_make.$$.log 2>&1); then
        cat /tmp/gpt2_tokenize_make.$$.log >&2
        rm -f /tmp/gpt2_tokenize_make.$$.log
        die "building gpt2_tokenize failed (it needs PCRE2: apt-get install libpcre2-dev)"
    fi
    rm -f /tmp/gpt2_tokenize_make.$$.log
    # OpenAI's GPT-2 tokenizer files
    if [ -n "${GPT2_DIR:-}" ]; then
        ENC="$GPT2_DIR/encoder.json"
        BPE="$GPT2_DIR/vocab.bpe"
        [ -f "$ENC" ] && [ -f "$BPE" ] || die "GPT2_DIR=$GPT2_DIR must hold encoder.json and vocab.bpe"
    else
        ENC="$DATA_DIR/gpt2/encoder.json"
        BPE="$DATA_DIR/gpt2/vocab.bpe"
        local hint="set GPT2_DIR=/path/to/dir with encoder.json and vocab.bpe to use local copies"
        if [ ! -f "$ENC" ]; then
            fetch "$GPT2_URL/encoder.json" "$ENC" "$hint"
            echo "$ENCODER_SHA256  $ENC" | sha256sum -c --quiet - || { rm -f "$ENC"; die "$ENC: checksum mismatch (corrupt download)"; }
        fi
        if [ ! -f "$BPE" ]; then
            fetch "$GPT2_URL/vocab.bpe" "$BPE" "$hint"
            echo "$VOCAB_SHA256  $BPE" | sha256sum -c --quiet - || { rm -f "$BPE"; die "$BPE: checksum mismatch (corrupt download)"; }
        fi
    fi
    # the decode table the trainers load by default
    if [ ! -f "$TOKENIZER_BIN" ]; then
        "$TOKENIZE" -e "$ENC" -m "$BPE" -w "$TOKENIZER_BIN"
    fi
}
