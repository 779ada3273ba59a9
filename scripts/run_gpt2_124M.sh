#!/usr/bin/env bash
# GPT-2 124M reproduction on one node of 8 GPUs, with llm.c's hyperparameters for that run:
# 10B FineWeb tokens, total batch 524,288 tokens (2^19), lr 6e-4 with 700 warmup steps and cosine
# decay to 0, weight decay 0.1, val loss and HellaSwag every 250 steps.
#
#   bash dev/data/fineweb.sh          # once: FineWeb 10B -> data/fineweb10B (about 20 GB)
#   bash dev/data/hellaswag.sh        # once: data/hellaswag/hellaswag_val.bin
#   bash scripts/run_gpt2_124M.sh
#
# Every launch passes -y 1: a crashed or preempted run continues from its newest complete
# checkpoint. After a crash the script waits RETRY_WAIT seconds and relaunches, up to RETRIES
# times, but not after two crashes in a row that left no newer checkpoint (an error that repeats,
# such as a damaged shard, is not retried away); a run stopped by SIGTERM/SIGINT (preemption)
# exits 0 and is not relaunched (scripts/relaunch_lib.sh, shared with multi_node/slurm.sbatch).
# Stop it with Ctrl-C or kill <PID>: the script passes the signal on to mpirun as SIGUSR1 (mpirun
# itself would end the job 2 s after a SIGINT or SIGTERM, too soon for the checkpoint).
# Overrides: NGPU (8), B (64, micro-batch per GPU), OUT (log_gpt2_124M), DATA (data/fineweb10B),
# RETRIES (5), RETRY_WAIT (30), TRAINER (./train_gpt2cu, built first; another is run as it is),
# and extra trainer flags as arguments.
set -uo pipefail
cd "$(dirname "$0")/.."
NGPU=${NGPU:-8}
B=${B:-64}
OUT=${OUT:-log_gpt2_124M}
DATA=${DATA:-data/fineweb10B}
TRAINER=${TRAINER:-./train_gpt2cu}
source scripts/relaunch_lib.sh
source scripts/recipe_checks.sh
relaunch_check_settings
recipe_counts NGPU B
[ "$NGPU" -eq 1 ] || recipe_mpirun "NGPU=$NGPU" "NGPU=1 runs one GPU without it"
if [ "$TRAINER" = ./train_gpt2cu ]; then make train_gpt2cu || exit 1; fi
recipe_program TRAINER "a path from the repository's root, or a command"
ls "$DATA"/fineweb_train_*.bin > /dev/null 2>&1 || { echo "error: no FineWeb shards in $DATA: run bash dev/data/fineweb.sh (or set DATA=<folder>)" >&2; exit 1; }
HELLASWAG=(-h 1 -hf data/hellaswag/hellaswag_val.bin)
[ -e data/hellaswag/hellaswag_val.bin ] || { echo "note: no data/hellaswag/hellaswag_val.bin (bash dev/data/hellaswag.sh): HellaSwag off"; HELLASWAG=(-h 0); }
# mpirun as root needs --allow-run-as-root; harmless otherwise
LAUNCH=(mpirun -np "$NGPU" --bind-to none)
[ "$(id -u)" -eq 0 ] && LAUNCH+=(--allow-run-as-root)
[ "$NGPU" -eq 1 ] && LAUNCH=()

# -m counts batches of B over all GPUs (the same sequences at any GPU count): 10,240 sequences, what
# llm.c's 8-GPU run reads with its -m 20 per GPU
relaunch run_gpt2_124M.sh "$(relaunch_out_dir -o "$OUT" "$@")" "${LAUNCH[@]}" "$TRAINER" \
    -i "$DATA/fineweb_train_*.bin" -j "$DATA/fineweb_val_*.bin" -o "$OUT" \
    -e d12 -b "$B" -t 1024 -d 524288 -x 19073 \
    -l 0.0006 -u 700 -q 0.0 -c 0.1 -k cosine \
    -v 250 -m $((10240 / B)) "${HELLASWAG[@]}" -s 20000 -g 144 \
    -n 1000 -nk 3 -y 1 -z 1 "$@"
