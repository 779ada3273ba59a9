# Shared by the dev/data recipes (sourced, not run). Provides:
#   REPO, DATA_DIR (default data/), TOKENIZER_BIN (default gpt2_tokenizer.bin at the repo root)
#   need_tokenizer   builds ./gpt2_tokenize if needed, finds the GPT-2 files (ENC, BPE) and
#                    writes TOKENIZER_BIN if it is missing
#   obtain OUT NAME URL HINT   makes OUT once: from the embedded copy of NAME, else downloaded
#   input_file LOCAL NAME URL CACHE VAR WHAT   the recipe's input: LOCAL if given, else CACHE (obtain)
#   gpt2_files DIR   OpenAI's encoder.json and vocab.bpe in DIR (obtain)
# The GPT-2 tokenizer files and Tiny Shakespeare ship with the repository, xz-compressed, in
# dev/data/embedded/ (sources and licenses in its README), so the main job needs no network.
# Environment: GPT2_DIR=dir holding encoder.json and vocab.bpe (else data/gpt2/, unpacked once
# from the embedded copies); DOWNLOAD=1 downloads the embedded files from their sources instead.
# Files listed in dev/data/embedded/SHA256SUMS are checked against it however they were obtained.

set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DATA_DIR="${DATA_DIR:-$REPO/data}"
TOKENIZER_BIN="${TOKENIZER_BIN:-$REPO/gpt2_tokenizer.bin}"
TOKENIZE="$REPO/gpt2_tokenize"
# EMBEDDED_DIR moves the embedded copies (the tests point it at a corrupted copy)
EMBEDDED="${EMBEDDED_DIR:-$REPO/dev/data/embedded}"
GPT2_URL="https://openaipublic.blob.core.windows.net/gpt-2/encodings/main"

die() { echo "error: $*" >&2; exit 1; }
# make_out DIR: the recipe's output folder, or one line naming DATA_DIR where it cannot be made
make_out() { mkdir -p "$1" 2> /dev/null || die "cannot make the folder '$1' for the data (DATA_DIR=$DATA_DIR): set DATA_DIR to a folder you can write"; }

# fetch URL OUT HINT: download URL to OUT (its folder made; via OUT.part, so an interrupted
# download never looks complete), or die with HINT (how to pass a local copy instead)
fetch() {
    local url="$1" out="$2" hint="$3"
    mkdir -p "$(dirname "$out")"
    echo "downloading $url"
    if command -v curl >/dev/null 2>&1; then
        curl -fL --retry 2 -o "$out.part" "$url" || { rm -f "$out.part"; die "download of $url failed; $hint"; }
    elif command -v wget >/dev/null 2>&1; then
        wget -q -O "$out.part" "$url" || { rm -f "$out.part"; die "download of $url failed; $hint"; }
    else
        die "neither curl nor wget is installed; $hint"
    fi
    mv "$out.part" "$out"
}

# obtain OUT NAME URL HINT: make OUT if it is missing, from the embedded copy $EMBEDDED/NAME.xz, or
# from URL when there is no such copy or DOWNLOAD=1. It is written as OUT.part and renamed only
# once it is complete and, if SHA256SUMS lists NAME, has the listed sha256.
obtain() {
    local out="$1" name="$2" url="$3" hint="$4" from
    [ -f "$out" ] && return 0
    case "${DOWNLOAD:-0}" in 0|1) ;; *) die "DOWNLOAD=$DOWNLOAD: use 1 (download from the sources) or 0 (the embedded copies)" ;; esac
    # without the list a mistyped EMBEDDED_DIR would download, unchecked
    [ -f "$EMBEDDED/SHA256SUMS" ] || die "EMBEDDED_DIR=$EMBEDDED has no SHA256SUMS; point it at a copy of dev/data/embedded or unset it"
    mkdir -p "$(dirname "$out")"
    if [ "${DOWNLOAD:-0}" != 1 ] && [ -f "$EMBEDDED/$name.xz" ]; then
        from="$EMBEDDED/$name.xz"
        command -v xz >/dev/null 2>&1 || die "xz is needed to unpack $from (apt-get install xz-utils)"
        xz -dc "$from" > "$out.part" || { rm -f "$out.part"; die "$from: cannot decompress (a corrupt checkout?)"; }
    else
        from="$url"
        fetch "$url" "$out.part" "$hint"
    fi
    local want
    want="$(awk -v n="$name" '$2 == n { print $1 }' "$EMBEDDED/SHA256SUMS")"
    if [ -n "$want" ] && [ "$(sha256sum "$out.part" | cut -d' ' -f1)" != "$want" ]; then
        rm -f "$out.part"
        die "$name from $from: sha256 differs from $EMBEDDED/SHA256SUMS (a corrupt copy); nothing was written"
    fi
    mv "$out.part" "$out"
}

# input_file LOCAL NAME URL CACHE VAR WHAT: print the path of a recipe's input. LOCAL (a path the
# user gave, or empty) wins; else CACHE, made once by obtain from the embedded copy NAME or URL.
# VAR names the environment variable that passes a local copy, WHAT the file, for messages.
input_file() {
    local src="$1" name="$2" url="$3" cache="$4" var="$5" what="$6"
    if [ -z "$src" ]; then
        src="$cache"
        obtain "$cache" "$name" "$url" "pass a local copy: $var=/path/to/$(basename "$cache") $0" >&2
    fi
    [ -f "$src" ] || die "$what '$src' not found"
    echo "$src"
}

# gpt2_files DIR: OpenAI's encoder.json and vocab.bpe in DIR, made once by obtain
gpt2_files() {
    local f
    for f in encoder.json vocab.bpe; do
        obtain "$1/$f" "$f" "$GPT2_URL/$f" "set GPT2_DIR=/path/to/dir with encoder.json and vocab.bpe to use local copies"
    done
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
        gpt2_files "$DATA_DIR/gpt2"
        ENC="$DATA_DIR/gpt2/encoder.json"
        BPE="$DATA_DIR/gpt2/vocab.bpe"
    fi
    # the decode table the trainers load by default
    if [ ! -f "$TOKENIZER_BIN" ]; then
        "$TOKENIZE" -e "$ENC" -m "$BPE" -w "$TOKENIZER_BIN"
    fi
}
