#!/usr/bin/env bash
# GPT-2 124M on a single GPU: the same run as scripts/run_gpt2_124M.sh (same tokens per step,
# same numbers), with 8x gradient accumulation instead of 8 GPUs. About 8x the wall time.
#   bash scripts/run_gpt2_124M_1gpu.sh [extra trainer flags]
exec env NGPU=1 "OUT=${OUT:-log_gpt2_124M_1gpu}" bash "$(dirname "$0")/run_gpt2_124M.sh" "$@"
