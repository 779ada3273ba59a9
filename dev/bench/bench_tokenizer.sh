#!/usr/bin/env bash
# gpt2_tokenize vs tiktoken on the same text, same machine, side by side (make bench-tokenizer).
#
#   dev/bench/bench_tokenizer.sh [text file with <|endoftext|> separator lines]
#
# Default text: the book corpus train split (97.8 MB, 194 documents), decompressed from
# SHARED_DATA/corpus/train.txt.xz into a temporary folder. Each configuration runs REPEATS times
# (default 3) and the fastest run is reported, since other processes may share the machine; the
# load average is printed so a reader can judge.
# - ours: the whole command (start, loading encoder.json/vocab.bpe, reading, encoding, writing the
#   shard); threads 1 and `nproc`
# - tiktoken: encode_ordinary over the documents only (files already loaded and split), one thread
#   and encode_ordinary_batch with `nproc` threads
# MB/s counts input bytes (1 MB = 1e6 bytes); tokens/s counts text tokens (EOT not included).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
PYTHON="${PYTHON:-/usr/bin/python3}"
SHARED="${SHARED_DATA:-../shared/data}"
REPEATS="${REPEATS:-3}"
NT="$(nproc)"
[ -x ./gpt2_tokenize ] || { echo "error: build it first: make gpt2_tokenize" >&2; exit 1; }
"$PYTHON" -c "import tiktoken" 2>/dev/null || { echo "error: needs tiktoken: $PYTHON -m pip install --break-system-packages tiktoken" >&2; exit 1; }
TMP="$(mktemp -d /tmp/bench_tokenizer.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
text="${1:-}"
if [ -z "$text" ]; then
    text="$TMP/train.txt"
    xz -dc "$SHARED/corpus/train.txt.xz" > "$text"
fi
bytes=$(stat -c %s "$text")
echo "text: $text ($bytes bytes); $(nproc) cores: $({ grep -m1 'model name' /proc/cpuinfo || lscpu 2>/dev/null | grep -m1 'Model name' || echo ': unknown CPU'; } | cut -d: -f2 | xargs)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

ours() {  # ours THREADS -> best "seconds rss_kb"
    local best="" line
    for _ in $(seq "$REPEATS"); do
        line="$( { /usr/bin/time -f "%e %M" ./gpt2_tokenize -e "$SHARED/gpt2/encoder.json" -m "$SHARED/gpt2/vocab.bpe" \
                   -x sep -n "$1" -p "$TMP/bench" "$text" > "$TMP/out.txt"; } 2>&1 | tail -n 1)"
        if [ -z "$best" ] || awk -v a="${line%% *}" -v b="${best%% *}" 'BEGIN{exit !(a < b)}'; then best="$line"; fi
    done
    echo "$best"
}
row() {  # row NAME THREADS SECONDS RSS_KB TOKENS
    awk -v n="$1" -v t="$2" -v s="$3" -v r="$4" -v k="$5" -v b="$bytes" \
        'BEGIN{printf "| %-22s | %7s | %7.2f | %6.1f | %9.2fM | %12.0f |\n", n, t, s, b/1e6/s, k/s/1e6, r/1024}'
}
echo
echo "| encoder                | threads | seconds |   MB/s |   tokens/s | peak RSS MiB |"
echo "| ---------------------- | ------: | ------: | -----: | ---------: | -----------: |"
for n in 1 "$NT"; do
    set -- $(ours "$n")
    ntext=$(sed -n 's/.*EOT + \([0-9]*\) text.*/\1/p' "$TMP/out.txt")
    row "gpt2_tokenize (C)" "$n" "$1" "$2" "$ntext"
done
"$PYTHON" - "$text" "$SHARED/gpt2" "$NT" "$REPEATS" "$bytes" <<'EOF'
import resource, sys, time
sys.path.insert(0, "dev/test")
from tokenizer_ref import load_tiktoken, split_sep_documents
path, gpt2, nt, repeats, nbytes = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
enc = load_tiktoken(gpt2)
docs = [d.decode("utf-8") for d in split_sep_documents(open(path, "rb").read())]
def best(f):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        n = f()
        times.append(time.perf_counter() - t0)
    return min(times), n
for threads, f in ((1, lambda: sum(len(enc.encode_ordinary(d)) for d in docs)),
                   (nt, lambda: sum(map(len, enc.encode_ordinary_batch(docs, num_threads=nt))))):
    s, n = best(f)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"| {'tiktoken ' + __import__('tiktoken').__version__:<22} | {threads:7d} | {s:7.2f} | {nbytes / 1e6 / s:6.1f} | {n / s / 1e6:9.2f}M | {rss:12.0f} |")
EOF
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
