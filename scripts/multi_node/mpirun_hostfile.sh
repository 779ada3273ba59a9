#!/usr/bin/env bash
# GPT-2 124M on 2 nodes x 8 GPUs with mpirun and a hostfile (OpenMPI). The total batch stays
# 524,288 tokens: 16 ranks x B=32 x T=1024, no accumulation. The same tokens per step as on one
# node, so the loss curve is the same run.
#
#   hostfile:   node1 slots=8
#               node2 slots=8
#   Both nodes see this repo and the data at the same path (shared filesystem), and the output
#   dir -o must be shared too: rank 0 writes the model file, every rank its state file.
#
# Settings (environment; the defaults are this run's): HOSTFILE (hostfile), TRAINER
# (./train_gpt2cu; ./train_gpt2 runs the same on CPUs), NP (16 ranks in all), PER_NODE (8).
# Flags after the script's name go to the trainer after the recipe's own and override them (the
# last value of a flag counts), e.g. -x 100 for a short run; paths are relative to the repo.
#
# NCCL_SOCKET_IFNAME names the network interface NCCL uses between nodes (e.g. eth0, ib0);
# set NCCL_IB_DISABLE=1 on Ethernet-only clusters; NCCL_DEBUG=INFO shows what NCCL picked. These,
# PATH, LD_LIBRARY_PATH and OMP_NUM_THREADS go to every rank when they are set.
set -euo pipefail
cd "$(dirname "$0")/../.."
HOSTFILE=${HOSTFILE:-hostfile} TRAINER=${TRAINER:-./train_gpt2cu} NP=${NP:-16} PER_NODE=${PER_NODE:-8}

source scripts/recipe_checks.sh
source scripts/relaunch_lib.sh  # launch_stoppable: Ctrl-C or SIGTERM to this script stops the run with a checkpoint
recipe_counts NP PER_NODE
recipe_mpirun "this script" "or load your cluster's MPI module"
recipe_program TRAINER "build it: make train_gpt2cu; a path from the repository's root"
# a host that does not resolve stops here with one line, not in mpirun's launch
[ -f "$HOSTFILE" ] || { echo "error: no hostfile '$HOSTFILE' (set HOSTFILE=<file>: one 'host slots=N' line per node)" >&2; exit 1; }
for host in $(sed -e 's/#.*//' "$HOSTFILE" | awk 'NF {print $1}'); do
    getent hosts "$host" > /dev/null || {
        echo "error: hostfile '$HOSTFILE' names '$host', which does not resolve; fix the name or add it to /etc/hosts" >&2
        exit 1
    }
done
env_args=()
for var in NCCL_SOCKET_IFNAME NCCL_IB_DISABLE NCCL_DEBUG PATH LD_LIBRARY_PATH OMP_NUM_THREADS; do
    [ -n "${!var+set}" ] && env_args+=(-x "$var")
done

[ "$(id -u)" -eq 0 ] && env_args+=(--allow-run-as-root)  # as root (containers) mpirun needs it; harmless otherwise
launch_stoppable mpirun -np "$NP" --hostfile "$HOSTFILE" --bind-to none --map-by "ppr:$PER_NODE:node" "${env_args[@]}" \
    "$TRAINER" \
    -i "data/fineweb10B/fineweb_train_*.bin" -j "data/fineweb10B/fineweb_val_*.bin" -o log_gpt2_124M_2nodes \
    -e d12 -b 32 -t 1024 -d 524288 -x 19073 \
    -l 0.0006 -u 700 -q 0.0 -c 0.1 -v 250 -m 320 -h 1 -s 20000 -n 1000 -nk 3 -y 1 -z 1 "$@"  # -m: 10,240 sequences
