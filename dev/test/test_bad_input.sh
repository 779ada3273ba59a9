#!/usr/bin/env bash
# Bad input to the trainer: each case must end with exit code 1 (not a crash, not success) and a
# one-line error on stderr that contains the expected words (the file or flag, and the fix).
#   bash dev/test/test_bad_input.sh [trainer]      (default ./train_gpt2)
set -u
TRAINER=${1:-./train_gpt2}
PY=${PYTHON:-/usr/bin/python3}
TMP=$(mktemp -d /tmp/test_bad_input.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fail=0

# good data: random tokens; a tiny model keeps every run fast
$PY dev/bench/make_random_shard.py "$TMP/good.bin" 20000 1
$PY dev/bench/make_random_shard.py "$TMP/small.bin" 40 2
$PY - "$TMP" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
good = open(f"{d}/good.bin", "rb").read()
h = np.frombuffer(good[:1024], dtype="<i4").copy()
def write(name, header, body):
    open(f"{d}/{name}", "wb").write(header.astype("<i4").tobytes() + body)
bad = h.copy(); bad[0] = 12345; write("magic.bin", bad, good[1024:])
bad = h.copy(); bad[1] = 7; write("version.bin", bad, good[1024:])
write("truncated.bin", h, good[1024:-100])
toks = np.frombuffer(good[1024:], dtype="<u2").copy(); toks[50] = 60000
write("bigtoken.bin", h, toks.tobytes())
EOF
MODEL="L1:C32:H2:T64"
BASE=(-e "$MODEL" -b 2 -t 32 -x 1 -v 0 -s 0)
$PY train_gpt2.py --model "$MODEL" --write-model "$TMP/model.bin" > /dev/null
$PY - "$TMP" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
m = open(f"{d}/model.bin", "rb").read()
h = np.frombuffer(m[:1024], dtype="<i4").copy()
h[1] = 4
open(f"{d}/model_v4.bin", "wb").write(h.tobytes() + m[1024:])
open(f"{d}/model_trunc.bin", "wb").write(m[:-1000])
EOF

# expect <name> <words that must appear in the error> -- <trainer args...>
expect() {
    local name=$1 words=$2
    shift 3
    "$TRAINER" "$@" > "$TMP/out" 2> "$TMP/err"
    local rc=$?
    local errline
    errline=$(grep -m1 "error:" "$TMP/err")
    if [ $rc -ne 1 ]; then
        echo "FAIL $name: exit code $rc (expected 1)"; tail -3 "$TMP/err"; fail=1; return
    fi
    if ! grep -q -- "$words" <<< "$errline"; then
        echo "FAIL $name: error line does not mention '$words':"; echo "  $errline"; fail=1; return
    fi
    if [ "$(grep -c 'error:' "$TMP/err")" -ne 1 ]; then
        echo "FAIL $name: more than one error line"; cat "$TMP/err"; fail=1; return
    fi
    echo "ok   $name: $errline"
}

expect "wrong shard magic"     "magic.bin"          -- -i "$TMP/magic.bin" "${BASE[@]}"
expect "wrong shard version"   "has version 7"      -- -i "$TMP/version.bin" "${BASE[@]}"
expect "truncated shard"       "truncated"          -- -i "$TMP/truncated.bin" "${BASE[@]}"
expect "too few tokens"        "small.bin"          -- -i "$TMP/small.bin" "${BASE[@]}"
expect "too few tokens (val)"  "-j"                 -- -i "$TMP/good.bin" -j "$TMP/nothing*.bin" -e "$MODEL" -b 2 -t 32 -x 1 -v 1 -s 0
expect "token id >= vocab"     "token id 60000"     -- -i "$TMP/bigtoken.bin" -e "$MODEL" -b 2 -t 32 -x 5 -v 0 -s 0 -sh 0
expect "model file version"    "version 4"          -- -i "$TMP/good.bin" -e "$TMP/model_v4.bin" -b 2 -t 32 -x 1 -v 0 -s 0
expect "model file truncated"  "model_trunc.bin"    -- -i "$TMP/good.bin" -e "$TMP/model_trunc.bin" -b 2 -t 32 -x 1 -v 0 -s 0
expect "model file missing"    "not found"          -- -i "$TMP/good.bin" -e "$TMP/nope.bin" -b 2 -t 32 -x 1 -v 0 -s 0
expect "-d not divisible"      "-d 1000 is not divisible by B\*T\*ranks = 2\*32\*1 = 64" -- -i "$TMP/good.bin" "${BASE[@]}" -d 1000
expect "T > max_seq_len"       "max_seq_len 64"     -- -i "$TMP/good.bin" -e "$MODEL" -b 2 -t 128 -x 1 -v 0 -s 0
expect "missing data glob"     "no files match"     -- -i "$TMP/missing_*.bin" "${BASE[@]}"
expect "unknown flag"          "unknown flag -Q"    -- -i "$TMP/good.bin" "${BASE[@]}" -Q 1
expect "near-miss flag"        "unknown flag --setps; did you mean --steps?" -- -i "$TMP/good.bin" "${BASE[@]}" --setps 3
expect "flag in wrong case"    "did you mean -z?"   -- -i "$TMP/good.bin" "${BASE[@]}" -Z 1
expect "flag without value"    "needs a value"      -- -i "$TMP/good.bin" "${BASE[@]}" -b
expect "bad number"            "expected an integer" -- -i "$TMP/good.bin" "${BASE[@]}" -b two
expect "bad descriptor"        "descriptor"         -- -i "$TMP/good.bin" -e L2:C64 -b 2 -t 32
expect "bad schedule"          "expected one of cosine|linear|constant" -- -i "$TMP/good.bin" "${BASE[@]}" -k triangle
expect "checkpoints need -o"   "-o"                 -- -i "$TMP/good.bin" "${BASE[@]}" -n 5
expect "resume needs -o"       "-o"                 -- -i "$TMP/good.bin" "${BASE[@]}" -y 1
expect "hellaswag needs val"   "-v > 0"             -- -i "$TMP/good.bin" "${BASE[@]}" -h 1
expect "hellaswag file"        "not found"          -- -i "$TMP/good.bin" -j "$TMP/good.bin" -e "$MODEL" -b 2 -t 32 -x 1 -v 1 -s 0 -h 1 -hf "$TMP/nope.bin"

# a bad flag is one line pointing at --help (not the whole usage); --help goes to stdout, exit 0
"$TRAINER" -Q 1 2> "$TMP/err" > /dev/null
[ "$(wc -l < "$TMP/err")" -eq 1 ] && grep -q "(see --help)" "$TMP/err" \
    || { echo "FAIL: an unknown flag should give one line ending in '(see --help)':"; cat "$TMP/err"; fail=1; }
if "$TRAINER" --help > "$TMP/out" 2> "$TMP/err" && grep -q "^Usage:" "$TMP/out" && [ ! -s "$TMP/err" ]; then
    for f in -i --train -x --steps --lr --batch --seq-len --total-batch --out --prompt --top-k; do
        grep -q -- " $f[ ,]" "$TMP/out" || { echo "FAIL: --help does not list $f"; fail=1; }
    done
else
    echo "FAIL: --help should print the usage on stdout and exit 0"; fail=1
fi
# long names and --name=value mean the same as the short flags: the same run, the same log
"$TRAINER" -i "$TMP/good.bin" "${BASE[@]}" -x 2 -o "$TMP/short" > /dev/null 2>&1
"$TRAINER" --train "$TMP/good.bin" "${BASE[@]}" --steps=2 --out "$TMP/long" > /dev/null 2>&1
if [ ! -s "$TMP/short/main.log" ] || ! cmp -s "$TMP/short/main.log" "$TMP/long/main.log"; then
    echo "FAIL: long flag names gave a different run than the short ones"; fail=1
fi

if [ $fail -ne 0 ]; then echo "test_bad_input: FAILED"; exit 1; fi
echo "test_bad_input: all cases passed"
