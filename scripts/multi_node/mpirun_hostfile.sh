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
# NCCL_SOCKET_IFNAME names the network interface NCCL uses between nodes (e.g. eth0, ib0);
# set NCCL_IB_DISABLE=1 on Ethernet-only clusters; NCCL_DEBUG=INFO shows what NCCL picked.
set -euo pipefail
cd "$(dirname "$0")/../.."
HOSTFILE=${HOSTFILE:-hostfile}
mpirun -np 16 --hostfile "$HOSTFILE" --bind-to none --map-by ppr:8:node \
    -x NCCL_SOCKET_IFNAME -x NCCL_IB_DISABLE -x NCCL_DEBUG -x PATH -x LD_LIBRARY_PATH \
    ./train_gpt2cu \
    -i "data/fineweb10B/fineweb_train_*.bin" -j "data/fineweb10B/fineweb_val_*.bin" -o log_gpt2_124M_2nodes \
    -e d12 -b 32 -t 1024 -d 524288 -x 19073 \
    -l 0.0006 -u 700 -q 0.0 -c 0.1 -v 250 -h 1 -s 20000 -n 1000 -nk 3 -y 1 -z 1 "$@"
