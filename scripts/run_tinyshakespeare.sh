#!/usr/bin/env bash
# The main job, in one command: prepare Tiny Shakespeare and train a GPT-2 on it with the best
# trainer this machine has.
#
#   scripts/run_tinyshakespeare.sh [extra trainer flags ...]
#
# - Data: dev/data/tinyshakespeare.sh (downloads input.txt once; TINYSHAKESPEARE=/path/input.txt
#   uses a local copy, GPT2_DIR=/path a local encoder.json + vocab.bpe; nothing else needs a network).
# - Trainer: ./train_gpt2cu when nvidia-smi lists a GPU and `make train_gpt2cu` builds, else
#   ./train_gpt2 (built by make). GPT-2 124M (d12) on the GPU; a small 6-layer, 384-wide model with
#   256-token sequences on CPUs, where d12 would take hours per epoch.
# - Extra flags go to the trainer after the defaults below, so they override them: e.g.
#   `scripts/run_tinyshakespeare.sh -x 50` for a short run, `-e d12` for the full model on a CPU.
# - DRY_RUN=1 prepares the data and prints the trainer command instead of running it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash dev/data/tinyshakespeare.sh
data="${DATA_DIR:-data}/tinyshakespeare"
common=(-i "$data/tiny_shakespeare_train.bin" -j "$data/tiny_shakespeare_val.bin"
        -tk "${TOKENIZER_BIN:-gpt2_tokenizer.bin}" -u 20 -q 0.1 -c 0.1 -g 64)

gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    if [ "${DRY_RUN:-0}" = 1 ] || make train_gpt2cu; then
        gpu=1
    else
        echo "run_tinyshakespeare: a GPU is present but train_gpt2cu did not build; using the CPU trainer" >&2
    fi
fi

if [ "$gpu" = 1 ]; then
    # 301,966 train tokens: 32,768 per step (4 micro-batches of 8 x 1024) is ~9 steps per epoch;
    # val holds 36,059 tokens, so at most 4 batches of 8 x 1024
    cmd=(./train_gpt2cu "${common[@]}" -e d12 -b 8 -t 1024 -d 32768 -l 6e-4 -x 100 -v 10 -m 4 -s 25
         -o log_tinyshakespeare)
else
    [ "${DRY_RUN:-0}" = 1 ] || make train_gpt2
    # 2,048 tokens per step: 200 steps are ~1.4 epochs; val: 8 batches of 8 x 256 tokens
    cmd=(./train_gpt2 "${common[@]}" -e L6:C384:H6 -b 8 -t 256 -d 2048 -l 1e-3 -x 200 -v 50 -m 8 -s 50
         -o log_tinyshakespeare)
fi
cmd+=("$@")
echo "${cmd[*]}"
if [ "${DRY_RUN:-0}" = 1 ]; then exit 0; fi
exec "${cmd[@]}"
