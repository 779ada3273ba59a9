#!/usr/bin/env bash
# A stand-in trainer for the recipes' relaunch rule (scripts/relaunch_lib.sh): at its n-th call it
# writes the marker of the checkpoint in line n of $STUB_PLAN ("-": none) into its -o (the last
# one given) and exits with the code on that line; $STUB_CALLS counts the calls. A third word on
# the line (INT, TERM) is a signal it sends its parent first (the recipe, which passes it on);
# STUB_SIGNALS: a file where it notes each stop signal it gets, which, as a trainer, it survives to
# finish its step (the line's checkpoint and code: 1 as mpirun's after a signal of its own).
# STUB_ARGS: a file for its command line.
[ -z "${STUB_ARGS:-}" ] || printf '%s\n' "$@" > "$STUB_ARGS"  # its command line, one word per line
out=; while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
n=$(( $(cat "$STUB_CALLS" 2> /dev/null || echo 0) + 1 )); echo $n > "$STUB_CALLS"
read -r ckpt rc sig < <(sed -n "${n}p" "$STUB_PLAN")
for s in INT TERM HUP USR1; do trap "echo $s >> '${STUB_SIGNALS:-/dev/null}'" $s; done
[ -z "$sig" ] || { kill -"$sig" $PPID; sleep 0.5; }  # time for the signal to come back
mkdir -p "$out"; [ "$ckpt" = - ] || touch "$out/DONE_$(printf %08d "$ckpt")"
exit "$rc"
