#!/usr/bin/env bash
# Run the fuzz harnesses built in BUILD (dev/fuzz/README.md), PARALLEL at a time, each for SECONDS
# on its corpus: BUILD/corpus/<name> (grows), the seeds BUILD/seeds/<name> and the committed
# regression inputs dev/fuzz/corpus/<name>. Prints one line per harness (executions, corpus size)
# and exits non-zero if any found something; its log, and the input that triggered it
# (BUILD/findings/<name>/), are named.
#   bash dev/fuzz/run.sh BUILD SECONDS [PARALLEL] [name...]        (from the repo root)
set -uo pipefail
# absolute paths: the command-line harnesses run the tools in their own work folder (tool_args.h)
BUILD=$(realpath "$1") SECONDS_EACH=$2 PARALLEL=${3:-2}
shift $(( $# >= 3 ? 3 : $# ))
NAMES=("$@")
# default: every harness built in BUILD
[ ${#NAMES[@]} -gt 0 ] || mapfile -t NAMES < <(cd "$BUILD" && ls fuzz_* | sed 's/^fuzz_//')
# the encoder harnesses' tokenizer: OpenAI's files (make_seeds.sh unpacks them), or FUZZ_GPT2_DIR
export FUZZ_GPT2_DIR=$(realpath -m "${FUZZ_GPT2_DIR:-$BUILD/seeds/gpt2}")
# the command-line harnesses' work files (make_seeds.sh)
export FUZZ_SEEDS=$(realpath -m "$BUILD/seeds")
[ -f "$FUZZ_GPT2_DIR/encoder.json" ] && [ -f "$FUZZ_GPT2_DIR/vocab.bpe" ] || {
    echo "error: FUZZ_GPT2_DIR=$FUZZ_GPT2_DIR has no encoder.json and vocab.bpe (unset it to use the seeds' copy)" >&2; exit 1; }
# a rejected input leaks by design (llmc_die ends a real process): the ledger of dev/fuzz/fuzz.h
# releases it and reports what an accepted input leaks, so LeakSanitizer is off
export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
mkdir -p "$BUILD/logs"

run_one() {
    local name=$1 corpus=$BUILD/corpus/$1 findings=$BUILD/findings/$1
    mkdir -p "$corpus" "$findings"
    local extra=()
    [ -d "dev/fuzz/corpus/$name" ] && extra+=("$PWD/dev/fuzz/corpus/$name")
    local tmp
    tmp=$(mktemp -d /dev/shm/llmc_fuzz_run.XXXXXX 2>/dev/null || mktemp -d)
    FUZZ_TMPDIR=$tmp "$BUILD/fuzz_$name" -max_total_time="$SECONDS_EACH" -timeout=20 -rss_limit_mb=2048 -max_len=65536 \
        -close_fd_mask=3 -print_final_stats=1 -artifact_prefix="$findings/" \
        "$corpus" "$BUILD/seeds/$name" "${extra[@]}" > "$BUILD/logs/$name.log" 2>&1
    local rc=$?
    rm -rf "$tmp"
    local execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$BUILD/logs/$name.log" | grep -o '[0-9]*$')
    local speed=$(grep -o 'exec/s: [0-9]*' "$BUILD/logs/$name.log" | tail -1 | grep -o '[0-9]*$')
    local files=$(ls "$corpus" | wc -l)
    if [ $rc -eq 0 ]; then
        printf "ok    %-12s %10s executions (%s/s), corpus %s files\n" "$name" "${execs:-?}" "${speed:-?}" "$files"
    else
        printf "FAIL  %-12s exit %d after %s executions; log %s, input %s\n" "$name" $rc "${execs:-?}" \
            "$BUILD/logs/$name.log" "$(ls -d "$findings"/* 2>/dev/null | head -1)"
        grep -m1 -A12 "ERROR:\|FUZZ FINDING\|runtime error\|out-of-memory\|timeout" "$BUILD/logs/$name.log" | sed 's/^/      /'
    fi
    return $rc
}
export -f run_one
export BUILD SECONDS_EACH
printf '%s\n' "${NAMES[@]}" | xargs -P "$PARALLEL" -I{} bash -c 'run_one {}'
