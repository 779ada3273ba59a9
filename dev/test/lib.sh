# The one harness of the test scripts (sourced; run from the repo root). Two ways in:
#   source dev/test/lib.sh <name> [trainer]   a test: the tools below, plus a temporary working
#                                             directory TMP (the cwd afterwards; removed on exit,
#                                             with whatever the test left running), one thread per
#                                             process, TRAINER (absolute; default ./train_gpt2),
#                                             failure bookkeeping: bad <message>, finish;
#                                             require_mpi <test>, mpi_missing <test>;
#                                             expect_error <what> <needle> <cmd...>;
#                                             small_disk <dir> <size> (a tmpfs, as root)
#   source dev/test/lib.sh --tools            the tools only, no directory, no cd (the drivers:
#                                             test_gpu.sh, fresh_machine.sh, the Makefile)
# The tools: ROOT (the repo), PY, MPIRUN, MPI_HINT, have_mpi [binary], skip_or_fail <test> <what
# is missing> <command that provides it>, unpack_embedded <dir>, compare_logs <a> <b> KEY=TOL...,
# compare_checkpoints <a> <b> <step>, shard_cut <in> <out> <from> <to>, crc_against_zlib <data> <lines>, shard_put <in> <out> <position> <token>,
# ok <what> (the line of a check that passed), stand_in_curl <bindir>, gpu_machine_tree <dir>,
# stand_in_binaries <tree> <C statement>, tee_killed <name> <err|both> <cmd...>, rank_pid <rank>
# <pattern>, tgkill_other <pid> <signal number> (the last three in a test only), stopped_step <file>, torchrun_cmd (sets TORCHRUN).

LLMC_TEST_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$LLMC_TEST_DIR/../.." && pwd)
PY=${PYTHON:-/usr/bin/python3}

# skip_or_fail TEST WHAT HINT: TEST (a test, or one part of it) cannot run because WHAT is missing.
# For a user that is a skip which says what is missing and HINT, the command that provides it;
# with CI=true (.ci/run) it is a failure, so CI never passes a test it did not run. Returns 0 for
# a skip and 1 for a failure: end a whole test with `skip_or_fail ...; exit`, a part with
# `skip_or_fail ... || bad ...`. The Makefile calls it as well (SKIP_OR_FAIL in dev/test/tests.mk).
skip_or_fail() {
    if [ "${CI:-}" = true ]; then
        echo "FAIL: $1: cannot run (missing: $2; with CI=true a skip is a failure); to run it: $3"
        return 1
    fi
    echo "$1: SKIPPED (missing: $2); to run it: $3"
}

# unpack_embedded DIR: the files that ship in dev/data/embedded, unpacked by the recipes' own code
# (checked against its SHA256SUMS): DIR/gpt2/{encoder.json,vocab.bpe} and
# DIR/tinyshakespeare/input.txt. Needs no network and never skips; ends the test if it cannot.
unpack_embedded() {
    (DOWNLOAD=0; source "$ROOT/dev/data/common.sh"
     gpt2_files "$1/gpt2"
     obtain "$1/tinyshakespeare/input.txt" tinyshakespeare.txt "" "") ||
        { echo "error: cannot unpack dev/data/embedded into $1" >&2; exit 1; }
}

# compare_logs A/main.log B/main.log KEY=TOL... [--last N]: the one main.log comparator
# (dev/test/compare_logs.py: per step, relative tolerance, 0 = bitwise; a step logged twice, as
# after a resume, counts with its later line; a NaN or infinity never agrees)
compare_logs() { "$PY" "$LLMC_TEST_DIR/compare_logs.py" "$@"; }

# compare_checkpoints A B STEP: checkpoint STEP of run folders A and B bit for bit, the model file and
# the optimizer state put together from the state files however the ranks sliced it
# (dev/test/compare_checkpoints.py)
compare_checkpoints() { "$PY" "$LLMC_TEST_DIR/compare_checkpoints.py" "$@"; }

# shard_cut IN OUT FROM TO: OUT is the token shard IN without its tokens [FROM, TO) (a rollback's
# reference: the data it passes over, gone)
shard_cut() {
    "$PY" - "$@" <<'EOF'
import sys, numpy as np
src, dst, lo, hi = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
raw = open(src, "rb").read()
header, tokens = np.frombuffer(raw[:1024], "<i4").copy(), np.frombuffer(raw[1024:], "<u2")
cut = np.concatenate([tokens[:lo], tokens[hi:]])
header[2] = len(cut)
open(dst, "wb").write(header.tobytes() + cut.tobytes())
EOF
}

# shard_put IN OUT POSITION TOKEN: OUT is the token shard IN with TOKEN at POSITION (damaged data: a
# token past the model's vocabulary where a known step reads it)
shard_put() {
    "$PY" - "$@" <<'EOF'
import sys
src, dst, pos, token = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
data = bytearray(open(src, "rb").read())
if not (0 <= token < 65536 and 0 <= pos and 1024 + 2 * pos + 2 <= len(data)):
    sys.exit(f"error: shard_put: token {token} at position {pos}: out of range of {src}")
data[1024 + 2 * pos:1024 + 2 * pos + 2] = token.to_bytes(2, "little")
open(dst, "wb").write(data)
EOF
}

# crc_against_zlib DATA LINES: every "<offset> <length> <crc>" line of dev/test/crc_probe's output
# (LINES) is Python's zlib.crc32 of those bytes of DATA
crc_against_zlib() {
    "$PY" - "$1" "$2" <<'EOF'
import sys, zlib
data = open(sys.argv[1], "rb").read()
for line in open(sys.argv[2]):
    off, n, crc = map(int, line.split())
    assert zlib.crc32(data[off:off + n]) == crc, f"offset {off} length {n}: {crc:08x}, zlib {zlib.crc32(data[off:off + n]):08x}"
EOF
}

# ok WHAT: a check passed (the counterpart of bad; every test's passed checks read alike)
ok() { echo "ok   $*"; }

# stand_in_curl BINDIR: writes BINDIR/curl, a stand-in for the recipes' downloads: it serves
# $FAKE_NET/<the URL's file name> to -o and logs every URL in $FAKE_NET/requests.log; a file that
# is not there fails as curl -f does (exit 22). Put BINDIR first on PATH.
stand_in_curl() {
    mkdir -p "$1"
    cat > "$1/curl" <<'CURL'
#!/bin/sh
out= url=
while [ $# -gt 0 ]; do case "$1" in -o) out=$2; shift ;; http*) url=$1 ;; esac; shift; done
echo "$url" >> "$FAKE_NET/requests.log"
[ -f "$FAKE_NET/${url##*/}" ] || exit 22
cp "$FAKE_NET/${url##*/}" "$out"
CURL
    chmod +x "$1/curl"
}

# gpu_machine_tree DIR: the sources as a device call gets them (tracked and untracked-not-ignored
# files, no .git), with a two-file stand-in for llm.c's carried tree (dev/gpu/prebuilt.sh's digest
# reads it)
gpu_machine_tree() {
    mkdir -p "$1/.carry/llm.c"
    (cd "$ROOT" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -xf - -C "$1"
    echo "int main() { return 0; }" > "$1/.carry/llm.c/train_gpt2.cu"
    echo "# llm.c" > "$1/.carry/llm.c/README.md"
}

# stand_in_binaries TREE STATEMENT: in TREE, each binary dev/gpu/prebuilt.sh packs as a small
# dynamic program whose main runs the C STATEMENT (stdio.h included; %s: the binary's name); their
# names in STAND_INS. Non-zero if one does not compile.
stand_in_binaries() {
    local b
    mapfile -t STAND_INS < <(bash "$1/dev/gpu/prebuilt.sh" list)
    for b in "${STAND_INS[@]}"; do
        mkdir -p "$1/$(dirname "$b")"
        printf "#include <stdio.h>\nint main(void) { $2 }\n" "$b" | cc -x c - -o "$1/$b" || return 1
    done
}

MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
MPI_HINT="apt-get install openmpi-bin libopenmpi-dev, then make clean && make"
# have_mpi [binary]: mpirun is here and the binary (default: the trainer) was built with MPI
have_mpi() { command -v mpirun >/dev/null 2>&1 && ldd "${1:-$TRAINER}" 2>/dev/null | grep -q libmpi; }
# wait_line PATTERN FILE [SECONDS [PID]]: until FILE has a line that grep's PATTERN matches, for at
# most SECONDS (60), or until process PID has ended; 0 if the line is there, 1 if not
wait_line() {
    local pattern=$1 file=$2 ticks=$(( ${3:-60} * 20 )) pid=${4:-} i
    for ((i = 0; i < ticks; i++)); do
        grep -q -- "$pattern" "$file" 2> /dev/null && return 0
        if [ -n "$pid" ] && ! kill -0 "$pid" 2> /dev/null; then break; fi
        sleep 0.05
    done
    grep -q -- "$pattern" "$file" 2> /dev/null
}
# tee_killed NAME MODE CMD...: CMD | tee NAME.out in TMP, and tee killed once that shows step 2
# (stdout's reader gone); CMD's exit status in NAME.rc. MODE err: CMD's stderr in NAME.err; both:
# stderr into the pipe too (2>&1)
tee_killed() {
    local name=$1 mode=$2 sub; shift 2
    if [ "$mode" = both ]; then
        ( "$@" 2>&1 | tee "$TMP/$name.out" > /dev/null; echo "${PIPESTATUS[0]}" > "$TMP/$name.rc" ) &
    else
        ( "$@" 2> "$TMP/$name.err" | tee "$TMP/$name.out" > /dev/null; echo "${PIPESTATUS[0]}" > "$TMP/$name.rc" ) &
    fi
    sub=$!
    wait_line "^step 2/" "$TMP/$name.out" 60
    pkill -TERM -f "tee $TMP/$name.out"
    wait $sub
}
# free_port: a TCP port nothing listens on now, below Linux's ephemeral range (32768-60999: any
# process's outgoing connection may take a port there at any time, and make test runs tests side by
# side; a random port there once failed torch's bind with "Address already in use")
free_port() {
    local p
    for _ in $(seq 50); do
        p=$((10000 + RANDOM % 22000))
        "$PY" -c 'import socket, sys; socket.socket().bind(("", int(sys.argv[1])))' "$p" 2> /dev/null && break
    done
    echo "$p"
}
# stopped_step FILE: N of the trainers' line "stopped by a signal after step N; ..." in FILE, empty if none
stopped_step() { sed -n 's/^stopped by a signal after step \([0-9]*\);.*/\1/p' "$1"; }
# torchrun_cmd: sets TORCHRUN to torch's launcher for a binary (torch.distributed.run with
# --no-python, --no_python before torch 2), or, where that does not start (torch 1.13 on Python
# 3.11), the same launcher through torchrun_compat.py; returns 1 where neither starts (no torch).
# --monitor_interval=0.1, torch 2's default: torch 1.13's agent looks at its workers every 5 s, so
# each run there ended up to 5 s after its workers (6.2 s for `true`, 1.7 s with 0.1)
torchrun_cmd() {
    local nopy=--no-python flags
    "$PY" -m torch.distributed.run --help 2> /dev/null | grep -q -- --no-python || nopy=--no_python
    flags=("$nopy" --monitor_interval=0.1)
    TORCHRUN=("$PY" -m torch.distributed.run "${flags[@]}")
    timeout 120 "${TORCHRUN[@]}" --nproc_per_node=1 --master_port="$(free_port)" true > /dev/null 2>&1 && return 0
    TORCHRUN=("$PY" "$LLMC_TEST_DIR/torchrun_compat.py" "${flags[@]}")
    timeout 120 "${TORCHRUN[@]}" --nproc_per_node=1 --master_port="$(free_port)" true > /dev/null 2>&1
}
# rank_pid R PATTERN: the pid of mpirun's rank R among the processes whose command line matches
# PATTERN (pgrep -f)
rank_pid() {
    local p
    for p in $(pgrep -f "$2"); do
        tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && { echo "$p"; return; }
    done
}
# tgkill_other PID SIG: SIG to a thread of PID that is not its main thread and does not block SIG
# (a signal sent to a process goes to any such thread; this picks one on purpose: the handler's
# work must then still happen on the main thread, llmc/signals.h)
tgkill_other() {
    "$PY" - "$1" "$2" << 'PYEOF'
import ctypes, os, sys
pid, sig = int(sys.argv[1]), int(sys.argv[2])
for tid in sorted(int(t) for t in os.listdir(f"/proc/{pid}/task")):
    if tid == pid:
        continue
    status = open(f"/proc/{pid}/task/{tid}/status").read()
    blocked = int(status.split("SigBlk:")[1].split()[0], 16)
    if not blocked & (1 << (sig - 1)):
        libc = ctypes.CDLL(None, use_errno=True)
        sys.exit(0 if libc.syscall(234, pid, tid, sig) == 0 else 1)  # SYS_tgkill on x86-64
sys.exit(f"no thread of {pid} but the main one takes signal {sig}")
PYEOF
}

[ "${1:-}" = --tools ] && return 0

# ---- a test
set -u
TEST_NAME=$1
TRAINER=$(realpath "${2:-./train_gpt2}")
TMP=$(mktemp -d "/tmp/$TEST_NAME.XXXXXX")
LLMC_MOUNTS=()
# kill what the test left running (a killed run's mpirun, a backgrounded trainer), unmount what it
# mounted (small_disk), then clean up. Only in the test's own shell: a subshell killed right after
# its fork (a watchdog "( sleep 30; kill ... ) &" killed at once) can run this trap before bash
# resets it, and removed the running test's TMP under it.
trap 'if [ "$BASHPID" = "$$" ]; then pkill -9 -f "$TMP" 2>/dev/null || true
      for m in "${LLMC_MOUNTS[@]}"; do umount -l "$m" 2>/dev/null; done; rm -rf "$TMP"; fi' EXIT
# one thread per process: the tests run several ranks on two cores
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# Open MPI's shared-memory files (4 MB per rank) in TMP, not /dev/shm: the ranks the tests kill
# left theirs behind there for good (16 MB a run of test-multihost), and the two hosts of
# test-multihost share this machine's /dev/shm, where its SLURM jobs, numbered from 1 in every run,
# name theirs alike run after run
export OMPI_MCA_btl_vader_backing_directory=$TMP
fail=0
bad() { echo "FAIL: $*"; fail=1; }
finish() {
    if [ $fail -ne 0 ]; then echo "$TEST_NAME: FAILED ($SECONDS s)"; exit 1; fi
    echo "$TEST_NAME: all checks passed ($SECONDS s)"
}
# expect_error WHAT NEEDLE CMD...: CMD rejects bad input as every tool here must: exit status 1 (or
# 2, argparse's status for a bad flag; a crash, a signal or a timeout is not a rejection), one line
# with "error:" in its output (stdout and stderr together) that matches NEEDLE (a grep pattern), no
# Python traceback. ERROR_LINES=N allows 1 to N such lines: N ranks that each find the same error,
# as many as print before the first one's abort takes the others down. The output stays in
# $TMP/error.txt for further checks.
expect_error() {
    local what=$1 needle=$2 want=${ERROR_LINES:-1} rc n line
    shift 2
    "$@" > "$TMP/error.txt" 2>&1
    rc=$?
    n=$(grep -c 'error:' "$TMP/error.txt")
    line=$(grep -m1 'error:' "$TMP/error.txt")
    if { [ $rc -eq 1 ] || [ $rc -eq 2 ]; } && [ "$n" -ge 1 ] && [ "$n" -le "$want" ] && grep -q -- "$needle" <<< "$line" && ! grep -q '^Traceback' "$TMP/error.txt"; then
        ok "$what: ${line:0:160}"
        return 0
    fi
    bad "$what: exit status $rc (want 1 or 2), $n line(s) with 'error:' (want 1$([ "$want" -gt 1 ] && echo " to $want"), the first matching '$needle'):"
    tail -n 5 "$TMP/error.txt" | sed 's/^/     /'
    return 1
}
# small_disk DIR SIZE: a tmpfs of SIZE (64k, 10m) at DIR, a disk the test can fill; unmounted when
# the test exits, on every path. Needs root: returns 1 otherwise (skip that part with skip_or_fail).
small_disk() {
    mkdir -p "$1"
    [ "$(id -u)" = 0 ] && mount -t tmpfs -o size="$2" llmc_small_disk "$1" 2>/dev/null || return 1
    LLMC_MOUNTS+=("$1")
}
# same_files WHAT DIR_A DIR_B: the two folders hold the same checkpoint files (model, state, DONE),
# byte for byte
same_files() {
    local f n=0
    for f in "$2"/model_* "$2"/state_* "$2"/DONE_*; do
        cmp -s "$f" "$3/${f##*/}" || { bad "$1: ${f##*/} differs"; return 1; }
        n=$((n + 1))
    done
    [ "$(ls "$3" | grep -c '^\(model\|state\|DONE\)_')" -eq $n ] && ok "$1: $n checkpoint files byte for byte equal" \
        || { bad "$1: other checkpoint files in $3"; return 1; }
}
# frozen PID: the process is stopped (SIGSTOP: LLMC_FAULT=...:stop:<rank>, start:0)
frozen() { [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = T ]; }
# wait_frozen PID: until the process stops itself, at most 30 s; 1 if it ended or never stopped
wait_frozen() {
    for _ in $(seq 300); do
        frozen "$1" && return 0
        kill -0 "$1" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
# mpi_missing TEST: TEST (a test, or one part of it) cannot run for want of MPI (skip_or_fail)
mpi_missing() { skip_or_fail "$1" "MPI (mpirun, and $TRAINER built with it)" "$MPI_HINT"; }
# require_mpi TEST: the test needs MPI throughout; without it, end here (a skip, or a failure with CI=true)
require_mpi() { have_mpi && return 0; mpi_missing "$1"; exit; }
cd "$TMP"
