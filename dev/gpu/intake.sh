#!/usr/bin/env bash
# Files what one device call brought back (dev/gpu/PLAN.md, "What comes back"), on the build
# machine, the same way every time:
#   - summary.txt -> dev/bench/gpu/<date>-call<N>-<parts>.txt (date and parts from its first line);
#   - the logs that carry figures (the benchmark's steps, d48, the memory plan, Nsight Compute,
#     Muon, bench_layers' output) and those of the steps that failed, out of test_gpu_logs.tgz ->
#     dev/bench/gpu/<date>-call<N>-logs/;
#   - gpu_results_rows.tsv's rows -> dev/bench/gpu_results.tsv (its header once; a row already
#     there is not added again).
# It never overwrites a different summary of the same name. What stays by hand: the figures into
# dev/bench/RESULTS.md (command, commit, device, date) and README's status.
#
#   bash dev/gpu/intake.sh FILES_AT N      FILES_AT: the folder the device tool put the files in
# INTAKE_ROOT (default: this repo) is where dev/bench/... are written (the tests use a scratch one).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DEST_ROOT=${INTAKE_ROOT:-$ROOT}
die() { echo "error: intake.sh: $*" >&2; exit 1; }
[ $# -eq 2 ] || die "usage: dev/gpu/intake.sh FILES_AT N (the folder of one call's files, the call's number)"
FROM=$1 N=$2
[[ "$N" =~ ^[1-9][0-9]*$ ]] || die "call number '$N': expected 1, 2, ..."
[ -f "$FROM/summary.txt" ] || die "no summary.txt in '$FROM' (the folder the device tool names as files_at)"

# "== test_gpu.sh 2026-11-27T10:00:00Z parts: env build test bench budget 330s" (the last run in it)
head_line=$(grep "^== test_gpu.sh " "$FROM/summary.txt" | tail -1)
[ -n "$head_line" ] || die "$FROM/summary.txt has no '== test_gpu.sh <date> parts: ...' line: not test_gpu.sh's summary"
date=$(sed -n 's/^== test_gpu.sh \([0-9]\{4\}-[0-9][0-9]-[0-9][0-9]\)T.*/\1/p' <<< "$head_line")
parts=$(sed -n 's/.* parts: \(.*\) budget .*/\1/p' <<< "$head_line" | tr ' ' '-')
[ -n "$date" ] && [ -n "$parts" ] || die "cannot read the date and parts of: $head_line"
name=$date-call$N-$parts
G=$DEST_ROOT/dev/bench/gpu
mkdir -p "$G"
if [ -f "$G/$name.txt" ] && ! cmp -s "$FROM/summary.txt" "$G/$name.txt"; then
    die "$G/$name.txt exists and differs: not overwritten (another call $N that day? give another N)"
fi
cp "$FROM/summary.txt" "$G/$name.txt"
echo "intake: dev/bench/gpu/$name.txt ($(grep -c '^PASS' "$G/$name.txt") PASS, $(grep -c '^FAIL\|^TIMEOUT' "$G/$name.txt") FAIL/TIMEOUT, $(grep -c '^SKIP' "$G/$name.txt") SKIP)"

if [ -f "$FROM/test_gpu_logs.tgz" ]; then
    tmp=$(mktemp -d)
    tar -xzf "$FROM/test_gpu_logs.tgz" -C "$tmp" 2> /dev/null || die "$FROM/test_gpu_logs.tgz is damaged"
    mkdir -p "$G/$name-logs"
    n=0
    # and each FAIL or TIMEOUT step's own log: what the next session fixes from (the summary keeps
    # only its last 15 lines)
    failed=$(sed -n 's/^\(FAIL\|TIMEOUT\) *\([A-Za-z0-9_]*\).*/\2/p' "$FROM/summary.txt" | sed "s|^|$tmp/logs/|; s|\$|.log|")
    for f in $(ls "$tmp"/logs/bench_*.log "$tmp"/logs/d48.log "$tmp"/logs/memory_*.log "$tmp"/logs/profile_*.log \
               "$tmp"/logs/muon_bench.log "$tmp"/logs/kernels.log "$tmp"/bench/layers_*.log $failed 2> /dev/null | sort -u); do
        cp "$f" "$G/$name-logs/" && n=$((n + 1))
    done
    rm -rf "$tmp"
    [ $n -gt 0 ] || rmdir "$G/$name-logs"
    echo "intake: $n log(s) with figures or of failed steps -> dev/bench/gpu/$name-logs/"
fi

rows=$FROM/gpu_results_rows.tsv
if [ -s "$rows" ]; then
    tsv=$DEST_ROOT/dev/bench/gpu_results.tsv
    [ -s "$tsv" ] || head -1 "$rows" > "$tsv"
    [ "$(head -1 "$tsv")" = "$(head -1 "$rows")" ] || die "the header of $rows differs from $tsv's: not appended"
    added=0
    while IFS= read -r row; do
        grep -qxF -- "$row" "$tsv" || { echo "$row" >> "$tsv"; added=$((added + 1)); }
    done < <(tail -n +2 "$rows")
    echo "intake: $added row(s) added to dev/bench/gpu_results.tsv"
fi
echo "intake: by hand now: the figures into dev/bench/RESULTS.md (command, commit, device, date), README's status"
