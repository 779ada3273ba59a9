#!/usr/bin/env bash
# The seed corpora of the fuzz harnesses: small valid files made by the project's own tools
# (gpt2_tokenize, train_gpt2, train_gpt2.py, export_hf), one folder per harness.
#   bash dev/fuzz/make_seeds.sh OUT_DIR            (from the repo root; the tools must be built)
# Also writes OUT_DIR/tiny/{encoder.json,vocab.bpe}, a small BPE in GPT-2's format, and
# OUT_DIR/gpt2/, OpenAI's files unpacked from dev/data/embedded.
set -euo pipefail
OUT=$1
PY=${PYTHON:-/usr/bin/python3}
ROOT=$(pwd)
rm -rf "$OUT" && mkdir -p "$OUT"/{shard,model,checkpoint,tokenizer,hellaswag,bpe_load,bpe_encode,tokenize,safetensors,args,fs_bootstrap,tcp_bootstrap,tiny} \
    "$OUT"/{tokenize_args,export_args,algo_file,work_files/hf,work_files/tok}
W=$(mktemp -d /tmp/fuzz_seeds.XXXXXX)
trap 'rm -rf "$W"' EXIT
SEP=$'\n--8<--\n'

# text: the opening of Tiny Shakespeare (dev/data/embedded) and a line of non-ASCII and specials.
# OUT_DIR/gpt2: OpenAI's encoder.json and vocab.bpe from the same place, for the encoder harnesses.
source dev/test/lib.sh --tools
unpack_embedded "$W/embedded"
mkdir -p "$OUT/gpt2" && cp "$W/embedded/gpt2/"* "$OUT/gpt2/"
head -c 3000 "$W/embedded/tinyshakespeare/input.txt" > "$W/text.txt"
printf "It's 2024: caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac <|endoftext|> 12ab34\t end\n" >> "$W/text.txt"
"$PY" dev/fuzz/make_tiny_bpe.py "$W/text.txt" "$OUT/tiny" 60 > /dev/null
TOK=(./gpt2_tokenize -e "$OUT/tiny/encoder.json" -m "$OUT/tiny/vocab.bpe" -n 1)

# token shards and the decode table
head -c 400 "$W/text.txt" > "$W/short.txt"
"${TOK[@]}" -i "$W/short.txt" -o "$OUT/shard/text.bin" > /dev/null
printf 'doc one\n' > "$W/a.txt"; printf 'doc two\n' > "$W/b.txt"
"${TOK[@]}" -p "$W/docs" -S 16 "$W/a.txt" "$W/b.txt" > /dev/null
cp "$W/docs_000000.bin" "$OUT/shard/prepared.bin"
"${TOK[@]}" -w "$OUT/tokenizer/tiny_tokenizer.bin" > /dev/null

# HellaSwag: the tool's input (a jsonl) and its output (the eval file)
cat > "$W/hs.jsonl" <<'JSON'
{"ind": 0, "ctx": "A man is sitting on a roof. He", "label": 3, "endings": ["is using wrap.", "is ripping.", "is holding a rubik's cube.", "starts pulling up roofing."]}
{"ctx": "Speak, speak.", "label": "1", "endings": ["All.", "You are all resolved.", "First, you know", "We know't."], "split": "val"}
JSON
"${TOK[@]}" -H "$W/hs.jsonl" -o "$OUT/hellaswag/eval.bin" > /dev/null

# models: the PyTorch reference's v3 and v5, a checkpoint of the CPU trainer (model, state, DONE)
# in the settings of dev/fuzz/fuzz_checkpoint.c
DESC=L1:C8:H2:T16:V64
"$PY" train_gpt2.py --model $DESC --seed 3 --write-model "$OUT/model/ref_v3.bin" > /dev/null
"$PY" train_gpt2.py --model $DESC --seed 3 --dtype bf16 --write-model "$OUT/model/ref_v5.bin" > /dev/null
printf 'L2:C64:H4:T256:V512\n' > "$OUT/model/descriptor"
printf 'd12\n' > "$OUT/model/descriptor_d12"
"$PY" dev/bench/make_random_shard.py "$W/train64.bin" 2000 1 64
OMP_NUM_THREADS=1 ./train_gpt2 -i "$W/train64.bin" -e $DESC -b 2 -t 8 -d 16 -x 2 -n 1 -v 0 -s 0 -rs 1337 -sh 1 \
    -o "$W/ckpt" > /dev/null
cp "$W/ckpt/model_00000002.bin" "$OUT/model/trainer.bin"
cp "$W/ckpt/state_00000002_00000.bin" "$OUT/checkpoint/state.bin"
cp "$W/ckpt/DONE_00000002" "$OUT/checkpoint/done"

# safetensors (with and without config.json)
./export_hf -i "$OUT/model/ref_v3.bin" -o "$W/hf" > /dev/null
./export_hf -i "$OUT/model/ref_v5.bin" -o "$W/hf5" > /dev/null
{ cat "$W/hf/model.safetensors"; printf '%s' "$SEP"; cat "$W/hf/config.json"; } > "$OUT/safetensors/f32_config"
{ cat "$W/hf5/model.safetensors"; printf '%s' "$SEP"; cat "$W/hf5/config.json"; } > "$OUT/safetensors/bf16_config"
cp "$W/hf/model.safetensors" "$OUT/safetensors/f32_alone"

# the BPE files, texts, the tokenizer tool's formats (first byte: 0 doc, 1 sep, 2 jsonl, 3 HellaSwag,
# 4 a shard to decode)
{ cat "$OUT/tiny/encoder.json"; printf '%s' "$SEP"; cat "$OUT/tiny/vocab.bpe"; } > "$OUT/bpe_load/tiny"
cp "$W/short.txt" "$OUT/bpe_encode/text"
printf "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 \xff\xc0\x80 <|endoftext|> 'll 've 123 \xc2\xa0 \t\n\n" > "$OUT/bpe_encode/unicode"
{ printf '\0'; cat "$W/short.txt"; } > "$OUT/tokenize/doc"
{ printf '\1'; printf 'one\n<|endoftext|>\ntwo<|endoftext|>\n<|endoftext|>\nthree\n'; } > "$OUT/tokenize/sep"
{ printf '\2'; printf '{"text": "a\\nb \\u00e9\\ud83d\\ude00", "id": [1, {"x": null}]}\n\n{"text": "second"}\n'; } > "$OUT/tokenize/jsonl"
{ printf '\3'; cat "$W/hs.jsonl"; } > "$OUT/tokenize/hellaswag"
{ printf '\4'; cat "$OUT/shard/text.bin"; } > "$OUT/tokenize/decode"

# command lines (arguments separated by NUL bytes)
# fs_bootstrap, tcp_bootstrap: nothing made here; their exchanges (complete ones of either side, and
# the refusals) are committed in dev/fuzz/corpus/<name> (the fs harness fixes the ranks' nonces)
args_seed() { local name=$1; shift; printf '%s\0' "$@" | head -c -1 > "$OUT/args/$name"; }
args_seed full -e d12 -b 4 -t 1024 -d 8192 -x 10 -k linear -n 5 -o out -y 1
args_seed small -i train.bin -e L2:C64:H4 -b 2 -t 32 -l 1e-3 -sl 3.5 -pb mpi -hm -1
args_seed help --help
args_seed torchrun /usr/bin/torchrun --nproc_per_node=2 --shutdown-timeout 120 --no-python ./train_gpt2cu --shutdown_timeout=7

# the tools' command lines, on the small files their harnesses run in (dev/fuzz/tool_args.h)
F=$OUT/work_files
cp "$OUT/tiny/encoder.json" "$F/e.json"; cp "$OUT/tiny/vocab.bpe" "$F/m.bpe"; cp "$OUT/tiny/"* "$F/tok/"
cp "$OUT/tokenizer/tiny_tokenizer.bin" "$F/t.bin"; cp "$OUT/shard/text.bin" "$F/s.bin"; cp "$W/short.txt" "$F/x.txt"
printf '{"text": "one"}\n{"text": "two words"}\n' > "$F/j.jsonl"; cp "$W/hs.jsonl" "$F/h.jsonl"
cp "$OUT/model/ref_v3.bin" "$F/b.bin"; cp "$OUT/model/ref_v5.bin" "$F/5.bin"
cp "$W/hf/model.safetensors" "$W/hf/config.json" "$F/hf/"; cp "$W/hf/model.safetensors" "$F/st.safetensors"
tool_seed() { local dir=$1 name=$2; shift 2; printf '%s\0' "$@" | head -c -1 > "$OUT/$dir/$name"; }
tool_seed tokenize_args encode -e e.json -m m.bpe -i x.txt -o o.bin
tool_seed tokenize_args split -e e.json -m m.bpe -i x.txt -o a.bin -f 0.5 -O b.bin
tool_seed tokenize_args prepare -e e.json -m m.bpe -p p -x jsonl -S 10 -V 1 j.jsonl x.txt
tool_seed tokenize_args decode -d -t t.bin -i s.bin -o o.txt
tool_seed tokenize_args table -e e.json -m m.bpe -w w.bin
tool_seed tokenize_args hellaswag -e e.json -m m.bpe -H h.jsonl -o h.bin -n 1
tool_seed tokenize_args help -h
tool_seed export_args export -i b.bin -o out
tool_seed export_args export_v5 -i 5.bin -o out --fp32 --force
tool_seed export_args import --to-bin -i hf -o r.bin --bf16
tool_seed export_args bare --to-bin -i st.safetensors -o r.bin --n-head 2
tool_seed export_args tokenizer -i b.bin -o out --tokenizer tok
tool_seed export_args help --help
echo "seeds in $OUT: $(find "$OUT" -type f | wc -l) files"
