#!/usr/bin/env bash
# Fine-tune OpenAI's GPT-2 on Tiny Shakespeare: fetch the Hugging Face weights (or take a local
# copy), convert them to this project's model .bin, and train on with a fine-tuning recipe.
#
#   scripts/finetune_gpt2.sh [gpt2|gpt2-medium|gpt2-large|gpt2-xl|/path/to/hf_folder] [trainer flags ...]
#
# - Model: openai-community/<name> on huggingface.co (124M, 350M, 774M, 1.5B parameters; fp32
#   model.safetensors, 4 bytes per parameter: 0.5 GB to 6.2 GB, and config.json), downloaded once into
#   data/hf/<name>/ with curl or wget. A local folder with model.safetensors and config.json (the
#   hub's layout, e.g. from `huggingface-cli download`, or one written by ./export_hf) is taken as
#   the first argument or HF_DIR=/path; nothing then needs a network. The folder is converted once
#   with `./export_hf --to-bin` into MODEL_BIN (default data/hf/<name>.bin, fp32 version 3).
# - Data: dev/data/tinyshakespeare.sh (TINYSHAKESPEARE=/path/input.txt and GPT2_DIR=/dir use local
#   copies). Trainer: ./train_gpt2cu when nvidia-smi lists a GPU, else ./train_gpt2.
# - Extra flags go to the trainer after the recipe's, so they override it (-x 40, -b 4, ...).
#   OUT=dir sets the output dir (default log_finetune_<name>), DRY_RUN=1 prints the plan and runs
#   nothing.
#
# The recipe, and why (nanoGPT's finetune_shakespeare, a known reference point, fine-tunes GPT-2 XL
# with 32 sequences of 1024 tokens per step, lr 3e-5 held constant, 20 steps):
# - lr 3e-5, 1/20 of GPT-2 124M's pretraining peak (6e-4): the weights are already good, and at a
#   pretraining LR a few hundred thousand tokens of one author would overwrite what the model knows
#   of English rather than adapt it. Constant after warmup (-q 1.0): a run of 20 steps is too short
#   for a decay to matter.
# - warmup 2 steps: AdamW's first updates move every weight by about lr whatever its gradient
#   (m/sqrt(v) is +-1 after one step), so the first two steps ramp up.
# - 32,768 tokens per step (-d), T = 1024: GPT-2's full context, as in pretraining; 302K train
#   tokens are then 9.2 steps per epoch. 20 steps (-x) are 2.2 epochs: more epochs of a corpus this
#   small overfit it (watch the val loss).
# - no weight decay (-c 0): decay pulls weights towards zero, not towards the pretrained values.
# - val loss on all 35 val windows every 5 steps (-v 5 -m -1), a sample every 10 steps, the
#   fine-tuned model saved at the end (-n 20, <out>/model_00000020.bin), and -y 1: a relaunch
#   resumes an interrupted run and says so when it is complete.
# - micro-batch (-b) by model size (by name; 32 for a local folder of another name) so that the
#   activations fit one 80 GB GPU: 32, 16, 16, 8 sequences.
# - CPUs (no GPU): the same recipe scaled down for GPT-2 124M on a few cores: T = 256, 4,096
#   tokens per step, 40 steps (half an epoch), val on 4 batches every 10 steps.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source dev/data/common.sh

model=gpt2
if [ $# -gt 0 ] && [[ "$1" != -* ]]; then model=$1; shift; fi
hf_dir=${HF_DIR:-}
if [ -z "$hf_dir" ] && [ -d "$model" ]; then hf_dir=$model; fi
if [ -n "$hf_dir" ]; then
    [ -f "$hf_dir/model.safetensors" ] || die "HF folder '$hf_dir' has no model.safetensors (expected the hub's layout: model.safetensors and config.json)"
    name=$(basename "$(realpath "$hf_dir")")
else
    case "$model" in
        gpt2|gpt2-medium|gpt2-large|gpt2-xl) name=$model ;;
        *) die "unknown model '$model': use gpt2, gpt2-medium, gpt2-large, gpt2-xl or a local Hugging Face folder (HF_DIR=/path)" ;;
    esac
    hf_dir="$DATA_DIR/hf/$name"
fi
model_bin=${MODEL_BIN:-$DATA_DIR/hf/$name.bin}
out=${OUT:-log_finetune_$name}

gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep '^GPU' > /dev/null; then gpu=1; fi
data="$DATA_DIR/tinyshakespeare"
recipe=(-e "$model_bin" -i "$data/tiny_shakespeare_train.bin" -j "$data/tiny_shakespeare_val.bin"
        -tk "$TOKENIZER_BIN" -l 3e-5 -u 2 -q 1.0 -c 0 -o "$out" -y 1)
if [ "$gpu" = 1 ]; then
    case "$name" in gpt2-medium|gpt2-large) B=16 ;; gpt2-xl) B=8 ;; *) B=32 ;; esac
    cmd=(./train_gpt2cu "${recipe[@]}" -b $B -t 1024 -d 32768 -x 20 -v 5 -m -1 -s 10 -g 128 -n 20)
else
    cmd=(./train_gpt2 "${recipe[@]}" -b 4 -t 256 -d 4096 -x 40 -v 10 -m 4 -s 20 -g 128 -n 40)
fi
cmd+=("$@")

url="https://huggingface.co/openai-community/$name/resolve/main"
if [ "${DRY_RUN:-0}" = 1 ]; then
    [ -f "$hf_dir/model.safetensors" ] || echo "download: $url/{config.json,model.safetensors} -> $hf_dir"
    [ -f "$model_bin" ] || echo "convert: ./export_hf --to-bin -i $hf_dir -o $model_bin"
    echo "${cmd[*]}"
    exit 0
fi

# ---- the weights: download once, convert once (again when the safetensors are newer)
if [ ! -f "$hf_dir/model.safetensors" ]; then
    hint="pass a local copy: HF_DIR=/path/to/folder $0 (a folder with model.safetensors and config.json)"
    fetch "$url/config.json" "$hf_dir/config.json" "$hint"
    fetch "$url/model.safetensors" "$hf_dir/model.safetensors" "$hint"
fi
# the source of the converted file is kept beside it: two local folders of one name (two runs'
# checkpoint-500) must not share it, nor the output folder that resumes from it
src=$(realpath "$hf_dir/model.safetensors")
was=$(cat "$model_bin.source" 2> /dev/null || true)
if [ -n "$was" ] && [ "$was" != "$src" ] && [ -z "${MODEL_BIN:-}" ]; then
    die "$model_bin was converted from $was, not $src (two folders named '$name'): give this one its own MODEL_BIN=... and OUT=..."
fi
if [ ! -f "$model_bin" ] || [ "$hf_dir/model.safetensors" -nt "$model_bin" ] || [ "$was" != "$src" ]; then
    make -s export_hf
    mkdir -p "$(dirname "$model_bin")"
    rm -f "$model_bin"
    ./export_hf --to-bin -i "$hf_dir" -o "$model_bin"
    echo "$src" > "$model_bin.source"
fi

# ---- data and trainer
bash dev/data/tinyshakespeare.sh
if [ "$gpu" = 1 ]; then
    make train_gpt2cu
else
    make -s train_gpt2
    case "$name" in gpt2-medium|gpt2-large|gpt2-xl)
        echo "finetune_gpt2: no GPU found; $name is 3 to 13 times GPT-2 124M, slow on the CPU trainer" >&2 ;;
    esac
fi
echo "${cmd[*]}"
exec "${cmd[@]}"
