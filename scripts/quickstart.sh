#!/usr/bin/env bash
# The main job in one command: set up this machine, prepare Tiny Shakespeare, train a GPT-2 on it
# with the best trainer here, and say where the model is and what to do with it.
#
#   bash scripts/quickstart.sh [extra trainer flags ...]
#
# - Setup: the system packages below (apt-get, as root or through sudo). Run again, it installs
#   nothing. Where they cannot be installed (no root and no sudo, or no apt-get) it goes on if the
#   machine has the build tools anyway (have_build_tools), else says what to install and stops.
# - Data: dev/data/tinyshakespeare.sh, from the copies in dev/data/embedded (no network).
# - Trainer: ./train_gpt2cu when nvidia-smi lists a GPU and nvcc builds it: GPT-2 124M (d12).
#   Else ./train_gpt2 on the CPU: a small model sized to finish in under 10 minutes on 2 cores.
# - Extra flags go to the trainer after the defaults, so they override them: `-x 10` for a short
#   run, `-y 1` to resume an interrupted one from its last checkpoint.
# - Output: log_tinyshakespeare/ (main.log; the last checkpoint, model_<step>.bin).
# - DRY_RUN=1 installs nothing (it says what it would install), prepares the data and prints the
#   trainer command instead of running it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup_lib.sh

# compilers and make; xz for the embedded data; OpenBLAS (the OpenMP build: the fast CPU matmul);
# PCRE2 for the tokenizer
need_packages --have have_build_tools build-essential pkg-config xz-utils libopenblas-openmp-dev libpcre2-dev

bash dev/data/tinyshakespeare.sh
data="${DATA_DIR:-data}/tinyshakespeare"
# the output directory and whether this run resumes, as the trainer will see them (the last -o / -y)
out=log_tinyshakespeare
resume=0
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    case "${args[i]}" in
        -o|--out) out="${args[i + 1]:-}" ;; --out=*) out="${args[i]#*=}" ;;
        -y|--resume) resume="${args[i + 1]:-}" ;; --resume=*) resume="${args[i]#*=}" ;;
    esac
done
# -n: a checkpoint every 100 steps and at the end, only the newest kept (-nk 1)
common=(-i "$data/tiny_shakespeare_train.bin" -j "$data/tiny_shakespeare_val.bin"
        -tk "${TOKENIZER_BIN:-gpt2_tokenizer.bin}" -u 20 -q 0.1 -c 0.1 -n 100 -nk 1 -o "$out")
# a new run never mixes with an earlier run's checkpoints: the trainer moves the earlier run into
# $out/old_run_<N>/ (moved aside, not deleted; to continue it instead, pass -y 1)
[ "$resume" = 1 ] || common+=(--start-over 1)

gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep '^GPU' > /dev/null; then
    if [ "${DRY_RUN:-0}" = 1 ] || make train_gpt2cu export_hf; then
        gpu=1
    else
        echo "quickstart: a GPU is present but train_gpt2cu did not build; using the CPU trainer" >&2
    fi
fi

if [ "$gpu" = 1 ]; then
    trainer=./train_gpt2cu
    # 301,966 train tokens: 32,768 per step (4 micro-batches of 8 x 1024) is ~9 steps per epoch;
    # val holds 36,059 tokens, so at most 4 batches of 8 x 1024
    cmd=("$trainer" "${common[@]}" -e d12 -b 8 -t 1024 -d 32768 -l 6e-4 -x 100 -v 10 -m 4 -s 25)
else
    trainer=./train_gpt2
    [ "${DRY_RUN:-0}" = 1 ] || make train_gpt2 export_hf
    # a 4-layer, 256-wide model: the 50,257-entry classifier is most of the work, so a narrow model
    # sees the most tokens in the time; 2,048 tokens per step (8 x 256), 250 steps are ~1.7 epochs
    # (on the 2-core build machine 1.8 s a step in 2026-11, 300 steps 10m6s; 0.72 s since its
    # own AVX-512 matmul, 1.02 s with OpenBLAS's AVX2 kernels: 250 steps leave room on CPUs
    # without AVX-512 or with fewer cores); val: 4 batches of 8 x 256
    cmd=("$trainer" "${common[@]}" -e L4:C256:H4 -b 8 -t 256 -d 2048 -l 2e-3 -x 250 -v 50 -m 4 -s 125)
fi
cmd+=("$@")
echo "${cmd[*]}"
if [ "${DRY_RUN:-0}" = 1 ]; then exit 0; fi

start=$(date +%s)
# Ctrl-C reaches this script too: the trainer checkpoints and exits 0, and the summary says so
stopped=0
trap 'stopped=1' INT TERM HUP
"${cmd[@]}"
trap - INT TERM HUP
secs=$(( $(date +%s) - start ))

# the summary: the last validation, the newest complete checkpoint, and what to do next
val=$(grep -o '^s:[0-9]* tel:[^ ]*' "$out/main.log" | tail -n 1 || true)
step=$(ls "$out" | grep '^DONE_[0-9]*$' | sort | tail -n 1 | cut -c6- || true)
model="$out/model_$step.bin"
vstep=${val%% *}
echo
if [ $stopped = 1 ]; then
    echo "quickstart: stopped by a signal after $((SECONDS / 60))m$((SECONDS % 60))s; the last val loss ${val#*tel:} was at" \
         "step ${vstep#s:}; to continue from checkpoint $((10#${step:-0})): bash scripts/quickstart.sh ${*:+$* }-y 1"
else
    echo "quickstart: done in $((SECONDS / 60))m$((SECONDS % 60))s (training $((secs / 60))m$((secs % 60))s);" \
         "val loss ${val#*tel:} at step ${vstep#s:}"
fi
if [ -z "$step" ]; then
    echo "  no checkpoint in $out (the run had -n 0?)"
    exit 0
fi
echo "  model   $model"
echo "  log     $out/main.log"
echo "  sample  $trainer -e $model --prompt \"ROMEO:\" -g 200"
echo "  plot    python3 dev/plot_log.py $out/main.log -o curves.png   (needs python3-matplotlib)"
echo "  export  ./export_hf -i $model -o tinyshakespeare_hf   (a Hugging Face GPT2LMHeadModel folder)"
echo "  resume  bash scripts/quickstart.sh -y 1   (continues an interrupted run from its last checkpoint)"
