#!/usr/bin/env bash
# Bad input to the trainer: each case must end with exit code 1 (not a crash, not success) and a
# one-line error on stderr that contains the expected words (the file or flag, and the fix).
#   bash dev/test/test_bad_input.sh [trainer]      (from the repo root; default ./train_gpt2)
source "$(dirname "$0")/lib.sh" test_bad_input "${1:-./train_gpt2}"

# good data: random tokens; a tiny model keeps every run fast
$PY "$ROOT/dev/bench/make_random_shard.py" "$TMP/good.bin" 20000 1
$PY "$ROOT/dev/bench/make_random_shard.py" "$TMP/small.bin" 40 2
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
$PY "$ROOT/train_gpt2.py" --model "$MODEL" --write-model "$TMP/model.bin" > /dev/null
$PY - "$TMP" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
m = open(f"{d}/model.bin", "rb").read()
h = np.frombuffer(m[:1024], dtype="<i4").copy()
h[1] = 4
open(f"{d}/model_v4.bin", "wb").write(h.tobytes() + m[1024:])
open(f"{d}/model_trunc.bin", "wb").write(m[:-1000])
# fields whose size arithmetic used to wrap around to the file's size (issue 13), header CRC dropped
h = np.frombuffer(m[:1024], dtype="<i4").copy(); h[252] = 0
h[4], h[6] = 1 << 30, 1 << 30
open(f"{d}/model_wrap.bin", "wb").write(h.tobytes() + m[1024:])
h = np.frombuffer(m[:1024], dtype="<i4").copy(); h[4] += 1   # one layer more: the header CRC fails
open(f"{d}/model_hdr.bin", "wb").write(h.tobytes() + m[1024:])
# HellaSwag: a count that would allocate gigabytes, a context token past the vocab, an empty context
def evalfile(name, count, ctx):
    ex = [65535, 0, 0, 0, 2, len(ctx)] + ctx + [1, 7, 1, 8]
    ex[1] = 2 * len(ex)
    h = np.zeros(256, dtype="<i4"); h[:4] = [20240522, 1, count, ex[1]]
    open(f"{d}/{name}", "wb").write(h.tobytes() + np.array(ex, dtype="<u2").tobytes())
evalfile("hs_count.bin", 2**31 - 1, [5, 6])
evalfile("hs_token.bin", 1, [5, 65535])
evalfile("hs_empty.bin", 1, [])
# a decode table that claims more tokens than its bytes can hold
h = np.zeros(256, dtype="<i4"); h[:4] = [20240328, 2, 1 << 24, 0]
open(f"{d}/tok_count.bin", "wb").write(h.tobytes() + b"\x01a" * 10)
# a safetensors header whose shape would overflow the element count
import json
hdr = json.dumps({"transformer.wte.weight": {"dtype": "F32", "shape": [2**40, 2**40, 2**40], "data_offsets": [0, 4]}}).encode()
open(f"{d}/huge.safetensors", "wb").write(len(hdr).to_bytes(8, "little") + hdr + b"\0" * 4)
EOF

# expect <name> <words that must appear in the error> -- <trainer args...> (expect_error, lib.sh)
expect() {
    local name=$1 words=$2
    shift 3
    expect_error "$name" "$words" "$TRAINER" "$@"
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
expect "bad attention"         "-at flash: expected one of own|cudnn" -- -i "$TMP/good.bin" "${BASE[@]}" -at flash
expect "checkpoints need -o"   "-o"                 -- -i "$TMP/good.bin" "${BASE[@]}" -n 5
expect "resume needs -o"       "-o"                 -- -i "$TMP/good.bin" "${BASE[@]}" -y 1
expect "hellaswag needs val"   "-v > 0"             -- -i "$TMP/good.bin" "${BASE[@]}" -h 1
expect "hellaswag file"        "not found"          -- -i "$TMP/good.bin" -j "$TMP/good.bin" -e "$MODEL" -b 2 -t 32 -x 1 -v 1 -s 0 -h 1 -hf "$TMP/nope.bin"
# issue 13: header fields out of range, counts the file cannot hold (each was a crash or a huge allocation)
HS=(-i "$TMP/good.bin" -j "$TMP/good.bin" -e "$MODEL" -b 2 -t 32 -x 1 -v 1 -s 0 -h 1)
expect "model size wraps"      "model_wrap.bin' has a bad header: number of layers" -- -i "$TMP/good.bin" -e "$TMP/model_wrap.bin" -b 2 -t 32 -x 1 -v 0 -s 0
expect "model header CRC"      "model_hdr.bin' has a corrupt header" -- -i "$TMP/good.bin" -e "$TMP/model_hdr.bin" -b 2 -t 32 -x 1 -v 0 -s 0
expect "hellaswag count"       "hs_count.bin' says it holds 2147483647 examples" -- "${HS[@]}" -hf "$TMP/hs_count.bin"
expect "hellaswag token"       "token id 65535"     -- "${HS[@]}" -hf "$TMP/hs_token.bin"
expect "hellaswag empty ctx"   "empty context"      -- "${HS[@]}" -hf "$TMP/hs_empty.bin"
expect "tokenizer count"       "tok_count.bin' claims 16777216 tokens" -- -i "$TMP/good.bin" "${BASE[@]}" -s 1 -tk "$TMP/tok_count.bin"

# the safetensors import (export_hf --to-bin): a shape whose element count overflows
if [ ! -x "$ROOT/export_hf" ]; then bad "$ROOT/export_hf is not built (make export_hf)"; else
    expect_error "safetensors shape overflow" "error: safetensors file '.*huge.safetensors': tensor 'transformer.wte.weight' has a bad shape" \
        "$ROOT/export_hf" --to-bin -i "$TMP/huge.safetensors" -o "$TMP/huge.bin"
fi

# damaged checkpoints: -y 1 skips them with a warning naming the file and the field, and resumes
# from the previous complete one (README "Checkpoints, resume, preemption")
CK=(-i "$TMP/good.bin" -e "$MODEL" -b 2 -t 32 -v 0 -s 0 -sh 0)
"$TRAINER" "${CK[@]}" -x 2 -n 1 -o "$TMP/ck" > /dev/null 2>&1 || bad "checkpoint run failed"
fallback() {  # fallback <name> <words in the warning>: resume must load checkpoint 1
    local name=$1 words=$2
    "$TRAINER" "${CK[@]}" -x 3 -y 1 -o "$TMP/ckx" > "$TMP/out" 2> "$TMP/err"; local rc=$?
    if [ $rc -eq 0 ] && grep -q "warning: skipping checkpoint 2: .*$words" "$TMP/err" && grep -q "resumed from checkpoint 1" "$TMP/out"; then
        ok "$name: $(grep -m1 warning: "$TMP/err")"
    else
        bad "$name: exit $rc"; cat "$TMP/err"; grep resumed "$TMP/out"
    fi
}
damage() {  # damage <file> <python statements on h (the header, int32) and b (the file's bytes)>
    rm -rf "$TMP/ckx"; cp -r "$TMP/ck" "$TMP/ckx"
    $PY - "$TMP/ckx/$1" "$2" <<'EOF'
import sys, zlib, numpy as np
p = sys.argv[1]; b = bytearray(open(p, "rb").read())
h = np.frombuffer(bytes(b[:1024]), dtype="<i4").copy() if len(b) >= 1024 else None
exec(sys.argv[2])
if h is not None and p.endswith(".bin"):  # a header CRC that matches: the range check must catch it
    h[250] = 0; h[250] = np.array([zlib.crc32(h.tobytes())], dtype=np.uint32).view(np.int32)[0]
    b[:1024] = h.tobytes()
open(p, "wb").write(bytes(b))
EOF
}
damage state_00000002_00000.bin "h[23] = 1000"
fallback "state: guard position out of range" "state_00000002_00000.bin' has a corrupt header: guard history position"
damage state_00000002_00000.bin "h[10] = -7"
fallback "state: negative step" "state_00000002_00000.bin' has a corrupt header: step"
damage state_00000002_00000.bin "h[16] = 2**30; h[17] = 2**30"
fallback "state: count past the parameters" "state_00000002_00000.bin' has a corrupt header: parameter range"
damage DONE_00000002 "b = bytearray(b'step -2\\nworld_size 1\\n')"
fallback "DONE: negative step" "marker DONE_00000002 .* is unreadable"
damage DONE_00000002 "b = bytearray(b'step 2\\nworld_size 99999999999\\n')"
fallback "DONE: world size out of range" "marker DONE_00000002 .* is unreadable"
rm -rf "$TMP/ckx"; cp -r "$TMP/ck" "$TMP/ckx"; : > "$TMP/ckx/DONE_-0000001"
"$TRAINER" "${CK[@]}" -x 3 -y 1 -o "$TMP/ckx" > "$TMP/out" 2>&1 && grep -q "resumed from checkpoint 2" "$TMP/out" \
    && ok "a marker named DONE_-0000001 is not a checkpoint" || { bad "DONE_-0000001"; cat "$TMP/out"; }

# a bad flag is one line pointing at --help (not the whole usage); --help goes to stdout, exit 0
"$TRAINER" -Q 1 2> "$TMP/err" > /dev/null
[ "$(wc -l < "$TMP/err")" -eq 1 ] && grep -q "(see --help)" "$TMP/err" \
    || { bad "an unknown flag should give one line ending in '(see --help)':"; cat "$TMP/err"; }
if "$TRAINER" --help > "$TMP/out" 2> "$TMP/err" && grep -q "^Usage:" "$TMP/out" && [ ! -s "$TMP/err" ]; then
    for f in -i --train -x --steps --lr --batch --seq-len --total-batch --out --prompt --top-k; do
        grep -q -- " $f[ ,]" "$TMP/out" || bad "--help does not list $f"
    done
else
    bad "--help should print the usage on stdout and exit 0"
fi
# long names and --name=value mean the same as the short flags: the same run, the same log
"$TRAINER" -i "$TMP/good.bin" "${BASE[@]}" -x 2 -o "$TMP/short" > /dev/null 2>&1
"$TRAINER" --train "$TMP/good.bin" "${BASE[@]}" --steps=2 --out "$TMP/long" > /dev/null 2>&1
if [ ! -s "$TMP/short/main.log" ] || ! cmp -s "$TMP/short/main.log" "$TMP/long/main.log"; then
    bad "long flag names gave a different run than the short ones"
fi

finish
