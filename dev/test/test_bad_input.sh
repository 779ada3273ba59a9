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
open(f"{d}/headless.bin", "wb").write(good[:100])  # cut inside the header
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
evalfile("hs_ok.bin", 1, [5, 6])
# a decode table that claims more tokens than its bytes can hold; a good one (every token "a")
h = np.zeros(256, dtype="<i4"); h[:4] = [20240328, 2, 1 << 24, 0]
open(f"{d}/tok_count.bin", "wb").write(h.tobytes() + b"\x01a" * 10)
h[:4] = [20240328, 2, 50257, 50256]
open(f"{d}/table.bin", "wb").write(h.tobytes() + b"\x01a" * 50257)
h[:4] = [20240328, 2, 10, 9]  # another tokenizer's: fewer tokens than the model's 50257
open(f"{d}/table10.bin", "wb").write(h.tobytes() + b"\x01a" * 10)
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
expect "shard cut in its header" "shard '.*headless.bin' is 100 bytes, smaller than its 1024-byte header" -- -i "$TMP/headless.bin" "${BASE[@]}"
expect "too few tokens"        "small.bin"          -- -i "$TMP/small.bin" "${BASE[@]}"
expect "too few tokens (val)"  "-j"                 -- -i "$TMP/good.bin" -j "$TMP/nothing*.bin" -e "$MODEL" -b 2 -t 32 -x 1 -v 1 -s 0
expect "token id >= vocab"     "token id 60000"     -- -i "$TMP/bigtoken.bin" -e "$MODEL" -b 2 -t 32 -x 5 -v 0 -s 0 -sh 0
expect "model file version"    "version 4"          -- -i "$TMP/good.bin" -e "$TMP/model_v4.bin" -b 2 -t 32 -x 1 -v 0 -s 0
expect "model file truncated"  "model_trunc.bin"    -- -i "$TMP/good.bin" -e "$TMP/model_trunc.bin" -b 2 -t 32 -x 1 -v 0 -s 0
expect "model file missing"    "not found"          -- -i "$TMP/good.bin" -e "$TMP/nope.bin" -b 2 -t 32 -x 1 -v 0 -s 0
expect "-d not divisible"      "-d 1000 is not divisible by B\*T\*ranks = 2\*32\*1 = 64" -- -i "$TMP/good.bin" "${BASE[@]}" -d 1000
# 2^31 micro-steps of 64 tokens: more than an int counts (found by fuzz_args; it used to wrap around)
expect "-d of 2^31 micro-steps" "at most 2147483647" -- -i "$TMP/good.bin" "${BASE[@]}" -d 137438953472
expect "T > max_seq_len"       "max_seq_len 64"     -- -i "$TMP/good.bin" -e "$MODEL" -b 2 -t 128 -x 1 -v 0 -s 0
expect "missing data glob"     "no files match"     -- -i "$TMP/missing_*.bin" "${BASE[@]}"
expect "unknown flag"          "unknown flag -Q"    -- -i "$TMP/good.bin" "${BASE[@]}" -Q 1
expect "near-miss flag"        "unknown flag --setps; did you mean --steps?" -- -i "$TMP/good.bin" "${BASE[@]}" --setps 3
expect "flag in wrong case"    "did you mean -z?"   -- -i "$TMP/good.bin" "${BASE[@]}" -Z 1
expect "flag without value"    "needs a value"      -- -i "$TMP/good.bin" "${BASE[@]}" -b
expect "-h alone (help asked)"  "flag -h needs a value: -h is HellaSwag's 0|1 (see --help)" -- -h
expect "bad number"            "expected an integer" -- -i "$TMP/good.bin" "${BASE[@]}" -x two
expect "bad -b (auto offered)" "-b two: expected an integer or auto" -- -i "$TMP/good.bin" "${BASE[@]}" -b two
expect "bad -r word"           "-r autox: expected an integer or auto" -- -i "$TMP/good.bin" "${BASE[@]}" -r autox
expect "-r out of range"       "-r 3: must be in 0..2 or auto" -- -i "$TMP/good.bin" "${BASE[@]}" -r 3
expect "-rs below 0 (its bound exactly)" "-rs -1: must be in 0..9223372036854775807 (see" -- -i "$TMP/good.bin" "${BASE[@]}" -rs -1
expect "bad descriptor"        "descriptor"         -- -i "$TMP/good.bin" -e L2:C64 -b 2 -t 32
expect "bad schedule"          "expected one of cosine|linear|constant|wsd" -- -i "$TMP/good.bin" "${BASE[@]}" -k triangle
expect "bad attention"         "-at flash: expected one of auto|own|cudnn" -- -i "$TMP/good.bin" "${BASE[@]}" -at flash
expect "checkpoints need -o"   "-o"                 -- -i "$TMP/good.bin" "${BASE[@]}" -n 5
expect "-nm not a multiple of -n" "-nm 10 keeps the checkpoints at multiples of 10 steps; it must be a multiple of -n (now 4)" -- -i "$TMP/good.bin" "${BASE[@]}" -o "$TMP/nm" -n 4 -nk 2 -nm 10
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
# issue 35: values that make a result meaningless (-m 0 logged "val loss -nan", -hm 0 "HellaSwag 0/0")
expect "-m 0"                  "-m 0 validates on no batches" -- -i "$TMP/good.bin" -j "$TMP/good.bin" "${BASE[@]}" -v 1 -m 0
expect "-hm 0"                 "-hm 0 evaluates no examples" -- "${HS[@]}" -hf "$TMP/hs_ok.bin" -hm 0
expect "-x 0 -v 0 -s 0"        "-x 0 trains no step, and with -v 0 and -s 0 there is nothing to evaluate" -- -i "$TMP/good.bin" "${BASE[@]}" -x 0
expect "-d 0"                  "-d 0: the total batch is -1" -- -i "$TMP/good.bin" "${BASE[@]}" -d 0
expect "B*T past an int"       "B\*T = 3000000000 positions" -- -i "$TMP/good.bin" -e L1:C32:H2:T1000000 -b 3000 -t 1000000
expect "memory past the machine" "B=1000000 T=64 needs [0-9.]* GiB of RAM per process" -- -i "$TMP/good.bin" "${BASE[@]}" -b 1000000 -t 64
expect "-b and -t near 64 bits" "-b 2147 -t 1000000: the activations alone would take" -- -i "$TMP/good.bin" "${BASE[@]}" -e L16384:C4096:H64:T1000000 -b 2147 -t 1000000
expect "--start-over with -y 1" "--start-over 1 .* excludes -y 1" -- -i "$TMP/good.bin" "${BASE[@]}" -o "$TMP/so" -y 1 --start-over 1
expect_error "bad LLMC_FAULT" "LLMC_FAULT=state:x: expected" env LLMC_FAULT=state:x "$TRAINER" -i "$TMP/good.bin" "${BASE[@]}"
expect "-o longer than a path can take below it" "-o: the directory's path is 4001 characters" -- -i "$TMP/good.bin" "${BASE[@]}" -o "/tmp/$(printf 'd%.0s' $(seq 3996))"
expect_error "bad LLMC_CPU_MATMUL" "LLMC_CPU_MATMUL=fast: the CPU matmul is auto, openblas or builtin" env LLMC_CPU_MATMUL=fast "$TRAINER" -i "$TMP/good.bin" "${BASE[@]}"
expect "a smaller model's decode table" "-tk .*table10.bin has 10 tokens, fewer than the model's 50257" -- -i "$TMP/good.bin" "${BASE[@]}" -s 1 -tk "$TMP/table10.bin"
expect "-o a file"             "-o .*good.bin exists and is not a folder" -- -i "$TMP/good.bin" "${BASE[@]}" -o "$TMP/good.bin"
mkdir -p "$TMP/logdir/main.log"
expect "a folder in main.log's place" "-o: cannot write the log '.*logdir/main.log': Is a directory; remove what is there" -- -i "$TMP/good.bin" "${BASE[@]}" -o "$TMP/logdir"

# a shard too short for one window among good ones: named in a warning, the run trains on the rest
mkdir -p "$TMP/mixed" && cp "$TMP/good.bin" "$TMP/mixed/a.bin" && cp "$TMP/small.bin" "$TMP/mixed/b.bin"
"$TRAINER" -i "$TMP/mixed/*.bin" -e "$MODEL" -b 2 -t 64 -x 1 -v 0 -s 0 > "$TMP/out" 2> "$TMP/err" \
    && grep -q "^warning: -i: shard '.*b.bin' has 40 tokens, fewer than T+1 = 65; it contributes no data" "$TMP/err" \
    && grep -q "^step 1/1 " "$TMP/out" && ok "a shard shorter than a window among good ones: $(head -1 "$TMP/err")" \
    || { bad "a shard shorter than a window among good ones"; tail -3 "$TMP/err"; }

# issue 35: special files where a file is read. A FIFO blocked the reader forever (and SIGTERM did
# not end it); a folder in a shard glob gave a message without its name. timeout: a regression
# must fail, not hang the suite.
mkfifo "$TMP/fifo"
mkdir -p "$TMP/globdir/shard_dir.bin" "$TMP/bpe_fifo"
cp "$TMP/good.bin" "$TMP/globdir/shard_a.bin"
mkfifo "$TMP/bpe_fifo/encoder.json"
: > "$TMP/bpe_fifo/vocab.bpe"
special() {  # special <name> <words> <trainer args...>: as expect, bounded in time
    local name=$1 words=$2
    shift 2
    expect_error "$name" "$words" timeout -k 5 30 "$TRAINER" "$@"
}
special "FIFO as -tk"           "-tk '.*fifo' is a FIFO" -i "$TMP/good.bin" "${BASE[@]}" -s 1 -tk "$TMP/fifo"
special "FIFO as -e"            "-e: model file '.*fifo' is a FIFO" -i "$TMP/good.bin" -e "$TMP/fifo" -b 2 -t 32
special "FIFO as -hf"           "HellaSwag file '.*fifo' is a FIFO" "${HS[@]}" -hf "$TMP/fifo"
special "FIFO in the -i glob"   "-i .*: '.*fifo' is a FIFO" -i "$TMP/fi*" "${BASE[@]}"
special "folder in the -i glob" "-i .*globdir/shard_\*.bin: '.*shard_dir.bin' is a folder" -i "$TMP/globdir/shard_*.bin" "${BASE[@]}"
special "folder as -j"          "-j .*: '.*globdir' is a folder" -i "$TMP/good.bin" -j "$TMP/globdir" -e "$MODEL" -b 2 -t 32 -x 1 -v 1 -s 0
if ldd "$TRAINER" | grep -q pcre2; then  # built with --prompt
    special "FIFO as --bpe-dir's encoder.json" "--bpe-dir '.*bpe_fifo', but '.*encoder.json' is a FIFO" -e "$MODEL" --prompt hi --bpe-dir "$TMP/bpe_fifo"
fi

# the safetensors import (export_hf --to-bin): a shape whose element count overflows
if [ ! -x "$ROOT/export_hf" ]; then bad "$ROOT/export_hf is not built (make export_hf)"; else
    expect_error "safetensors shape overflow" "error: safetensors file '.*huge.safetensors': tensor 'transformer.wte.weight' has a bad shape" \
        "$ROOT/export_hf" --to-bin -i "$TMP/huge.safetensors" -o "$TMP/huge.bin"
fi

# damaged checkpoints: -y 1 skips them with a warning naming the file and the field, and resumes
# from the previous complete one (docs/checkpoints.md)
CK=(-i "$TMP/good.bin" -e "$MODEL" -b 2 -t 32 -v 0 -s 0 -sh 0)
"$TRAINER" "${CK[@]}" -x 2 -n 1 -o "$TMP/ck" > /dev/null 2>&1 || bad "checkpoint run failed"
fallback() {  # fallback <name> <words in the warning>: resume must load checkpoint 1 (in bounded time)
    local name=$1 words=$2
    timeout -k 5 60 "$TRAINER" "${CK[@]}" -x 3 -y 1 -o "$TMP/ckx" > "$TMP/out" 2> "$TMP/err"; local rc=$?
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
damage state_00000002_00000.bin "h[41] = np.array([np.nan], dtype='<f4').view('<i4')[0]"
fallback "state: a NaN learning rate among the run's settings" "state_00000002_00000.bin' has a corrupt header: an optimizer setting"
damage state_00000002_00000.bin "h[39] = 9"
fallback "state: a schedule past the four kinds" "state_00000002_00000.bin' has a corrupt header: an optimizer setting"
damage state_00000002_00000.bin "h[47] = 1; h[48] = 7"
fallback "state: a -ge past 2 among the kernel choices" "state_00000002_00000.bin' has a corrupt header: kernel choices"
damage DONE_00000002 "b = bytearray(b'step -2\\nworld_size 1\\n')"
fallback "DONE: negative step" "marker DONE_00000002 .* is unreadable"
damage DONE_00000002 "b = bytearray(b'step 2\\nworld_size 99999999999\\n')"
fallback "DONE: world size out of range" "marker DONE_00000002 .* is unreadable"
rm -rf "$TMP/ckx"; cp -r "$TMP/ck" "$TMP/ckx"; rm "$TMP/ckx/DONE_00000002"; mkfifo "$TMP/ckx/DONE_00000002"
fallback "DONE: a FIFO (it blocked -y 1)" "marker DONE_00000002 .* is unreadable"
rm -rf "$TMP/ckx"; cp -r "$TMP/ck" "$TMP/ckx"; : > "$TMP/ckx/DONE_-0000001"
"$TRAINER" "${CK[@]}" -x 3 -y 1 -o "$TMP/ckx" > "$TMP/out" 2>&1 && grep -q "resumed from checkpoint 2" "$TMP/out" \
    && ok "a marker named DONE_-0000001 is not a checkpoint" || { bad "DONE_-0000001"; cat "$TMP/out"; }

# issue 35: a new run in an old run's -o. Without -y 1 it is refused (it overwrote main.log and
# mixed its checkpoints with the old ones, so a later -y 1 resumed the old run); --start-over 1
# moves the old run into old_run_1/ first. The moved files must be the old run's, byte for byte.
cp -r "$TMP/ck" "$TMP/again"
cp "$TMP/again/main.log" "$TMP/old_main.log"
expect_error "a new run where another run's checkpoints are" "-o .*again holds the checkpoints of another run (6 file(s), the newest complete one of step 2); continue that run with -y 1, keep it with another -o, or pass --start-over 1" \
    "$TRAINER" "${CK[@]}" -x 1 -n 1 -o "$TMP/again"
cmp -s "$TMP/again/main.log" "$TMP/old_main.log" && ok "the refused run left the old main.log alone" || bad "the refused run changed main.log"
"$TRAINER" "${CK[@]}" -x 1 -n 1 -o "$TMP/again" --start-over 1 > "$TMP/out" 2>&1 || { bad "--start-over 1 failed"; cat "$TMP/out"; }
if cmp -s "$TMP/again/old_run_1/main.log" "$TMP/old_main.log" && cmp -s "$TMP/again/old_run_1/model_00000002.bin" "$TMP/ck/model_00000002.bin" &&
   [ -f "$TMP/again/old_run_1/DONE_00000001" ] && [ ! -e "$TMP/again/DONE_00000002" ] && [ -f "$TMP/again/DONE_00000001" ] &&
   [ "$(grep -c '^s:' "$TMP/again/main.log")" = 1 ]; then
    ok "--start-over 1: the old run is in old_run_1/ (main.log, checkpoints 1 and 2), the new one alone in -o"
else
    bad "--start-over 1 did not move the old run aside"; ls -R "$TMP/again"; cat "$TMP/out"
fi
"$TRAINER" "${CK[@]}" -x 2 -y 1 -o "$TMP/again" > "$TMP/out" 2>&1 && grep -q "resumed from checkpoint 1 " "$TMP/out" \
    && ok "-y 1 afterwards resumes the new run (checkpoint 1), not the old run's 2" || { bad "-y 1 after --start-over"; cat "$TMP/out"; }
mkdir "$TMP/leftover" && : > "$TMP/leftover/model_00000005.bin.tmp.4242"  # a killed writer's, never read
"$TRAINER" "${CK[@]}" -x 1 -n 1 -o "$TMP/leftover" > "$TMP/out" 2>&1 && [ -f "$TMP/leftover/DONE_00000001" ] \
    && ok "a killed writer's temporary file alone is no old run: the new run starts" || { bad "a leftover .tmp. file refused a new run"; cat "$TMP/out"; }

# issue 35: a signal during start-up ends the process (the handler that defers it to the end of a
# step is installed when training starts; before, a start-up blocked on a FIFO ignored timeout's
# TERM). LLMC_FAULT=start:0 stops the trainer at the end of start-up; TERM, then CONT.
LLMC_FAULT=start:0 "$TRAINER" -i "$TMP/good.bin" "${BASE[@]}" -x 2 -o "$TMP/sig" > "$TMP/out" 2>&1 &
pid=$!
wait_frozen $pid
kill -TERM $pid; kill -CONT $pid
( sleep 30; kill -KILL $pid 2>/dev/null ) & watchdog=$!
wait $pid; rc=$?
kill $watchdog 2>/dev/null
if [ $rc -eq 143 ] && ! grep -q "^step " "$TMP/out" && [ ! -e "$TMP/sig/DONE_00000001" ]; then
    ok "SIGTERM in start-up ends the trainer (status 143, no step, no checkpoint)"
else
    bad "SIGTERM in start-up: status $rc (want 143)"; tail -3 "$TMP/out"
fi

# a shard cut short on disk while the run reads it (rewritten in place by another program): the
# pages past its new end are gone from the mapping, and reading them raised SIGBUS. One error that
# names the shard, and the checkpoints written before stay complete.
cp "$TMP/good.bin" "$TMP/shrinks.bin"
LLMC_FAULT=step:3:stop:0 "$TRAINER" -i "$TMP/shrinks.bin" "${BASE[@]}" -sh 0 -x 200 -n 2 -o "$TMP/shrink" > "$TMP/out" 2>&1 &
pid=$!
wait_frozen $pid && truncate -s 4096 "$TMP/shrinks.bin"  # 1536 of its 20000 tokens: steps 24 and on read past
kill -CONT $pid
wait $pid; rc=$?
line=$(grep -m1 'error:' "$TMP/out")
if [ $rc -eq 1 ] && grep -q "^error: shard '$TMP/shrinks.bin' became shorter on disk than its 41024 bytes while this run read it" <<< "$line" \
   && [ -e "$TMP/shrink/DONE_00000020" ]; then
    ok "a shard cut short mid-run: ${line:0:150}"
else
    bad "a shard cut short mid-run: exit status $rc (want 1 and the error line), or checkpoint 20 missing:"; tail -3 "$TMP/out"
fi

# issue 35: a full disk. Writes that fail name the file and the flag (-o), and leave no temporary
# file; logs that cannot be written are a warning (once per file) and a note at the end, and the
# run goes on. A 10 MB tmpfs: model files of L1:C64 (12.9 MB) do not fit, those of L1:C32 (6.5 MB)
# do, but not their state file (13 MB); filled up, not even main.log fits.
if small_disk "$TMP/disk" 10m; then
    D=$TMP/disk
    expect_error "full disk: the model file" "-o: writing '$D/m/model_00000001.bin' failed: No space left on device (the disk is full)" \
        "$TRAINER" -i "$TMP/good.bin" -e L1:C64:H2:T64 -b 2 -t 32 -x 1 -v 0 -s 0 -n 1 -o "$D/m"
    expect_error "full disk: the state file" "-o: writing '$D/s/state_00000001_00000.bin' failed: No space left" \
        "$TRAINER" -i "$TMP/good.bin" "${BASE[@]}" -n 1 -o "$D/s"
    ls "$D"/*/*.tmp.* > /dev/null 2>&1 && bad "a failed write left its temporary file: $(ls "$D"/*/*.tmp.*)" || ok "no temporary file left behind"
    rm -rf "$D"/m "$D"/s
    mkdir "$D/log"
    dd if=/dev/zero of="$D/fill" bs=64k > /dev/null 2>&1
    "$TRAINER" -i "$TMP/good.bin" "${BASE[@]}" -x 3 -tb 1 -o "$D/log" > "$TMP/out" 2> "$TMP/err"; rc=$?
    if [ $rc -eq 0 ] && [ "$(grep -c '^step ' "$TMP/out")" = 3 ] && [ ! -s "$D/log/main.log" ] &&
       [ "$(grep -c "warning: writing '$D/log/main.log' failed at step 0 (No space left on device)" "$TMP/err")" = 1 ] &&
       [ "$(grep -c "warning: writing '$D/log/metrics.jsonl' failed at step 0" "$TMP/err")" = 1 ] &&
       [ "$(grep -c "warning: writing '$D/log/events.out.tfevents.[0-9]*.[^ ]*' failed at step 0" "$TMP/err")" = 1 ] &&
       [ "$(tail -3 "$TMP/err" | grep -c "is incomplete: the events from step 0 on were not written")" = 3 ]; then
        ok "full disk: the logs (-tb 1 too) warn once each, the run trains its 3 steps and exits 0, the end names all three"
    else
        bad "full disk: logs (exit $rc, $(grep -c '^step ' "$TMP/out") steps)"; cat "$TMP/err"
    fi
    if [ -x "$ROOT/export_hf" ]; then
        expect_error "full disk: export_hf" "-o: writing '$D/hf.tmp.[0-9]*/model.safetensors' failed: No space left" \
            "$ROOT/export_hf" -i "$TMP/model.bin" -o "$D/hf"
    fi
    if [ -x "$ROOT/gpt2_tokenize" ]; then
        expect_error "full disk: gpt2_tokenize -d" "-o: writing '$D/text.txt' failed: No space left" \
            "$ROOT/gpt2_tokenize" -d -t "$TMP/table.bin" -i "$TMP/good.bin" -o "$D/text.txt"
    fi
else
    skip_or_fail "test-bad-input: full disk" "root (to mount a 10 MB tmpfs)" "run the test as root" || bad "full disk cases not run"
fi

# stdout and stderr closed by the launcher (`>&- 2>&-`): the files the run opens would take their
# numbers and get the step lines and warnings; main.log holds only its records, metrics.jsonl only
# JSON, the checkpoint resumes. gpt2_tokenize's shards the same bytes as with them open
"$TRAINER" -i "$TMP/good.bin" -j "$TMP/good.bin" "${BASE[@]}" -x 3 -v 1 -n 3 -o "$TMP/closed" >&- 2>&-
rc=$?
if [ $rc -eq 0 ] && [ -s "$TMP/closed/main.log" ] && ! grep -qv '^s:[0-9]' "$TMP/closed/main.log" \
   && ! grep -qv '^{"' "$TMP/closed/metrics.jsonl" && [ -f "$TMP/closed/DONE_00000003" ] \
   && "$TRAINER" -i "$TMP/good.bin" -j "$TMP/good.bin" "${BASE[@]}" -x 4 -v 1 -n 3 -o "$TMP/closed" -y 1 > /dev/null 2>&1; then
    ok "stdout and stderr closed: main.log and metrics.jsonl hold only their records, checkpoint 3 resumes"
else
    bad "stdout and stderr closed: exit $rc; main.log: $(grep -v '^s:[0-9]' "$TMP/closed/main.log" | head -2)"
fi
if [ -x "$ROOT/gpt2_tokenize" ]; then
    unpack_embedded "$TMP/emb"
    TOK=("$ROOT/gpt2_tokenize" -e "$TMP/emb/gpt2/encoder.json" -m "$TMP/emb/gpt2/vocab.bpe" -S 100K)
    mkdir "$TMP/tok_open" "$TMP/tok_closed"
    "${TOK[@]}" -p "$TMP/tok_open/ts" "$TMP/emb/tinyshakespeare/input.txt" > /dev/null 2>&1
    "${TOK[@]}" -p "$TMP/tok_closed/ts" "$TMP/emb/tinyshakespeare/input.txt" >&- 2>&-
    diff -r "$TMP/tok_open" "$TMP/tok_closed" > /dev/null && [ "$(ls "$TMP/tok_open" | wc -l)" -ge 3 ] \
        && ok "gpt2_tokenize with stdout and stderr closed: the same $(ls "$TMP/tok_open" | wc -l) shards" \
        || bad "gpt2_tokenize with stdout and stderr closed: other shards"
fi

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
