#!/usr/bin/env bash
# GPT-2 124M on CPUs with train_gpt2 (fp32, MPI across processes): the same hyperparameters and
# tokens per step as scripts/run_gpt2_124M.sh. It is the numerical reference and a fallback, not
# a practical way to train 10B tokens: one step of 524,288 tokens takes hours on a small machine.
# NPROC processes (default 1) each use OMP_NUM_THREADS threads (unset: the CPUs shared out among the
# NPROC, which train_gpt2 chooses); B (4) sequences per micro-step.
set -uo pipefail
cd "$(dirname "$0")/.."
NPROC=${NPROC:-1}
B=${B:-4}
OUT=${OUT:-log_gpt2_124M_cpu}
DATA=${DATA:-data/fineweb10B}
source scripts/recipe_checks.sh
source scripts/relaunch_lib.sh  # launch_stoppable: Ctrl-C or SIGTERM to this script stops the run with a checkpoint
recipe_counts NPROC B
[ "$NPROC" -eq 1 ] || recipe_mpirun "NPROC=$NPROC" "NPROC=1 runs one process without it"
make train_gpt2 || exit 1
LAUNCH=()
if [ "$NPROC" -gt 1 ]; then
    LAUNCH=(mpirun -np "$NPROC" --bind-to none)
    [ "$(id -u)" -eq 0 ] && LAUNCH+=(--allow-run-as-root)
fi
launch_stoppable "${LAUNCH[@]}" ./train_gpt2 \
    -i "$DATA/fineweb_train_*.bin" -j "$DATA/fineweb_val_*.bin" -o "$OUT" \
    -e d12 -b "$B" -t 1024 -d 524288 -x 19073 \
    -l 0.0006 -u 700 -q 0.0 -c 0.1 -k cosine \
    -v 250 -m 20 -s 20000 -g 144 -n 10 -nk 3 -y 1 "$@"
