#!/usr/bin/env bash
# The cost of checkpoints to the training loop (dev/bench/RESULTS.md, "Checkpoints in the background"):
#   dev/bench/ckpt_loop.sh BINARY WORKDIR OUTDIR [FLAGS...]
# trains d12 (B=4, T=64, 20 steps, 2 OpenMP threads unless THREADS says otherwise) on random tokens
# in WORKDIR, writing into WORKDIR/OUTDIR (emptied first), and prints "<OUTDIR> <ms>": the time
# from the line "step 1/20" to the end of the process over the 19 steps after it, so the wait for
# the last checkpoint is in it; a warning or error line in the run's output (a checkpoint not
# written) fails it. OUTDIR is deleted at the end (KEEP=1 keeps it). A with -n 5 against B
# without, run in turn several times each:
#   A: dev/bench/ckpt_loop.sh ./train_gpt2 /tmp/ck every5 -n 5
#   B: dev/bench/ckpt_loop.sh ./train_gpt2 /tmp/ck none
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,11p' "$0"; exit 2; }
bin=$(realpath "$1") work=$2 out=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work" && cd "$work"
[ -f train.bin ] || ${PYTHON:-/usr/bin/python3} "$here/make_random_shard.py" train.bin 200000 1 > /dev/null
[ -f val.bin ] || ${PYTHON:-/usr/bin/python3} "$here/make_random_shard.py" val.bin 20000 2 > /dev/null
rm -rf "$out" "$out.log"
t0=""
while IFS= read -r line; do
    echo "$line" >> "$out.log"
    case "$line" in "step 1/20 "*) t0=$(date +%s.%N);; esac
done < <(OMP_NUM_THREADS=${THREADS:-2} "$bin" -i train.bin -j val.bin -e d12 -b 4 -t 64 -v 0 -s 0 -x 20 -tk none.bin -o "$out" "$@" 2>&1)
t1=$(date +%s.%N)
wait $! || { echo "the run failed: see $work/$out.log" >&2; exit 1; }
[ "${KEEP:-0}" = 1 ] || rm -rf "$out"  # d12's checkpoints take 2 GB each
[ -n "$t0" ] || { echo "no step line: see $work/$out.log" >&2; exit 1; }
# a checkpoint that failed (a full disk) would make the run look fast
if grep -q "^\(warning\|error\)" "$out.log"; then grep -m1 "^\(warning\|error\)" "$out.log" >&2; exit 1; fi
echo "$out $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) * 1000 / 19 }')"
