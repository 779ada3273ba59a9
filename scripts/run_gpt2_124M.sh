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
# exits 0 and is not relaunched.
# Overrides: NGPU (8), B (64, micro-batch per GPU), OUT (log_gpt2_124M), DATA (data/fineweb10B),
# RETRIES (5), RETRY_WAIT (30), TRAINER (./train_gpt2cu, built first; another is run as it is),
# and extra trainer flags as arguments.
set -uo pipefail
cd "$(dirname "$0")/.."
NGPU=${NGPU:-8}
B=${B:-64}
OUT=${OUT:-log_gpt2_124M}
DATA=${DATA:-data/fineweb10B}
RETRIES=${RETRIES:-5}
RETRY_WAIT=${RETRY_WAIT:-30}
TRAINER=${TRAINER:-./train_gpt2cu}
[[ "$RETRIES" =~ ^[1-9][0-9]*$ ]] || { echo "error: RETRIES='$RETRIES': expected a number of launches >= 1, e.g. 5" >&2; exit 2; }
[[ "$RETRY_WAIT" =~ ^[0-9]+$ ]] || { echo "error: RETRY_WAIT='$RETRY_WAIT': expected whole seconds, e.g. 30" >&2; exit 2; }
if [ "$TRAINER" = ./train_gpt2cu ]; then make train_gpt2cu || exit 1; fi
ls "$DATA"/fineweb_train_*.bin > /dev/null 2>&1 || { echo "no FineWeb shards in $DATA: run bash dev/data/fineweb.sh"; exit 1; }
HELLASWAG=(-h 1 -hf data/hellaswag/hellaswag_val.bin)
[ -e data/hellaswag/hellaswag_val.bin ] || { echo "note: no data/hellaswag/hellaswag_val.bin (bash dev/data/hellaswag.sh): HellaSwag off"; HELLASWAG=(-h 0); }
# mpirun as root needs --allow-run-as-root; harmless otherwise
LAUNCH=(mpirun -np "$NGPU" --bind-to none)
[ "$(id -u)" -eq 0 ] && LAUNCH+=(--allow-run-as-root)
[ "$NGPU" -eq 1 ] && LAUNCH=()

# the step of the newest complete checkpoint in $OUT (0: none)
newest_checkpoint() { ls "$OUT" 2> /dev/null | sed -n 's/^DONE_0*\([0-9][0-9]*\)$/\1/p' | sort -n | tail -1 | grep . || echo 0; }
stalled=0
for attempt in $(seq "$RETRIES"); do
    before=$(newest_checkpoint)
    "${LAUNCH[@]}" "$TRAINER" \
        -i "$DATA/fineweb_train_*.bin" -j "$DATA/fineweb_val_*.bin" -o "$OUT" \
        -e d12 -b "$B" -t 1024 -d 524288 -x 19073 \
        -l 0.0006 -u 700 -q 0.0 -c 0.1 -k cosine \
        -v 250 -m 20 "${HELLASWAG[@]}" -s 20000 -g 144 \
        -n 1000 -nk 3 -y 1 -z 1 "$@"
    rc=$?
    [ $rc -eq 0 ] && exit 0
    if [ "$(newest_checkpoint)" = "$before" ]; then stalled=$((stalled + 1)); else stalled=0; fi
    if [ $stalled -ge 2 ]; then
        newest="checkpoint $before"; [ "$before" = 0 ] && newest="none yet"
        echo "run_gpt2_124M.sh: the trainer exited with $rc twice in a row without a new checkpoint (newest: $newest;" \
             "attempt $attempt): the error above repeats; fix its cause, then run this script again (it resumes)"
        exit 1
    fi
    [ "$attempt" -lt "$RETRIES" ] || break
    echo "run_gpt2_124M.sh: the trainer exited with $rc (attempt $attempt of $RETRIES); relaunching in $RETRY_WAIT s with -y 1"
    sleep "$RETRY_WAIT"
done
echo "run_gpt2_124M.sh: the trainer failed $RETRIES times (the last error above); run this script again to resume"
exit 1
