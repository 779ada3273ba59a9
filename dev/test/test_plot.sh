#!/usr/bin/env bash
# Tests dev/plot_log.py on synthetic main.log files: a run restarted into the same log (steps logged
# twice), its continuation in a second log (merged by label), a log without tok: and without val or
# HellaSwag lines, junk lines and unknown keys. The merged series are checked through --dump, the
# plots by decoding the PNG container, and bad inputs by their one-line errors.
# Needs $PYTHON (default /usr/bin/python3) with matplotlib. Usage: bash dev/test/test_plot.sh
set -u
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-/usr/bin/python3}
PLOT="$PYTHON dev/plot_log.py"
W=$(mktemp -d /tmp/test_plot.XXXXXX)
trap 'rm -rf "$W"' EXIT
FAILS=0
ok() { echo "ok   $1"; }
fail() { echo "FAIL $1"; FAILS=$((FAILS + 1)); }

# run A, first attempt to step 6, then resumed from the checkpoint after 4 steps (appended)
cat > "$W/a.log" <<'EOF'
s:0 tel:10.95
s:0 hsw:0.25
s:0 trl:10.9 lr:6e-05 norm:4.5 tok:1024
s:1 trl:10.5 lr:0.00012 norm:4.1 tok:2048
s:2 trl:10.1 lr:0.00018 norm:3.9 tok:3072
s:2 tel:10.2
s:3 trl:9.8 lr:0.00024 norm:3.2 tok:4096
s:4 trl:inf lr:0.0003 norm:nan tok:5120
s:4 skip:loss inf is not finite tok:999
s:5 trl:9.5 tok:6144 lr:0.0003 norm:2.9
s:x trl:1.0
s:6 trl:9.4 lr:0.0003 norm:2.5 tok:7168 foo:bar
resumed here
s:4 tel:9.9
s:4 hsw:0.26
s:4 trl:inf lr:0.0003 norm:nan tok:5120
s:4 skip:loss inf is not finite tok:999
s:5 trl:9.45 lr:0.0003 norm:2.8 tok:6144
s:6 norm:2.4 tok:7168 lr:0.0003 trl:9.35
s:7 trl:9.3 lr:0.0003 norm:2.3 tok:8192
s:8 tel:9.2
s:8 hsw:0.27
EOF
# run A continued in another output folder, resumed after 7 steps
cat > "$W/c.log" <<'EOF'
s:7 trl:9.28 lr:0.0003 norm:2.3 tok:8192
s:8 trl:9.25 lr:0.0003 norm:2.2 tok:9216
s:9 trl:9.2 lr:0.0003 norm:2.1 tok:10240
s:10 tel:9.1
EOF
# run B: train loss only, no tok:
printf 's:0 trl:11.0\ns:1 trl:10.0\ns:2 trl:9.0\n' > "$W/b.log"

expect_same() {  # expect_same what expected_file actual_file
    if diff -u "$2" "$3" > "$W/diff.txt"; then ok "$1"; else fail "$1"; head -20 "$W/diff.txt" | sed 's/^/     /'; fi
}

cat > "$W/want1.txt" <<EOF
run A (files: $W/a.log $W/c.log)
tokens_per_step 1024
trl 0 10.9 1024
trl 1 10.5 2048
trl 2 10.1 3072
trl 3 9.8 4096
trl 4 inf 5120
trl 5 9.45 6144
trl 6 9.35 7168
trl 7 9.28 8192
trl 8 9.25 9216
trl 9 9.2 10240
tel 0 10.95 0
tel 2 10.2 2048
tel 4 9.9 4096
tel 8 9.2 8192
tel 10 9.1 10240
hsw 0 0.25 0
hsw 4 0.26 4096
hsw 8 0.27 8192
skip 4 loss inf is not finite tok:999
run B (files: $W/b.log)
tokens_per_step -
trl 0 11 -
trl 1 10 -
trl 2 9 -
EOF
if $PLOT "$W/a.log" "$W/b.log" "$W/c.log" --label A --label B --label A --dump > "$W/got1.txt" 2> "$W/err1.txt"; then
    expect_same "--dump: restart in one log and continuation in another merge, the last value per step wins" \
        "$W/want1.txt" "$W/got1.txt"
else
    fail "--dump exited non-zero"; sed 's/^/     /' "$W/err1.txt"
fi
if grep -q "a.log: 1 line(s) without s:<step> ignored (first: line 13)" "$W/err1.txt" &&
   grep -q "a.log: 1 malformed line(s) or value(s) ignored (first: line 11)" "$W/err1.txt"; then
    ok "junk and malformed lines are reported with their line numbers"
else
    fail "warnings for junk lines"; sed 's/^/     /' "$W/err1.txt"
fi

# --merge: the same run under the first log's name
$PLOT "$W/a.log" "$W/c.log" --merge --dump 2>/dev/null | tail -n +2 > "$W/got2.txt"
sed -n '2,/^skip/p' "$W/want1.txt" > "$W/want2.txt"
expect_same "--merge gives the same series" "$W/want2.txt" "$W/got2.txt"

# --tokens-per-step for a log without tok:
printf 'run %s (files: %s)\ntokens_per_step 512\ntrl 0 11 512\ntrl 1 10 1024\ntrl 2 9 1536\n' "$W/b.log" "$W/b.log" > "$W/want3.txt"
$PLOT "$W/b.log" --tokens-per-step 512 --dump > "$W/got3.txt" 2>&1
expect_same "--tokens-per-step places a log without tok: on the token axis" "$W/want3.txt" "$W/got3.txt"

# PNGs: the container must be complete (signature, IHDR of the expected size, chunk CRCs, IEND)
check_png() {  # check_png what file width height
    if "$PYTHON" - "$2" "$3" "$4" <<'EOF'
import struct, sys, zlib
path, want_w, want_h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
data = open(path, "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "no PNG signature"
pos, chunks = 8, []
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    crc = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0]
    assert zlib.crc32(kind + body) == crc, f"bad CRC in chunk {kind}"
    chunks.append((kind, body))
    pos += 12 + n
assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND", "IHDR/IEND missing"
w, h = struct.unpack(">II", chunks[0][1][:8])
assert (w, h) == (want_w, want_h), f"image is {w}x{h}, expected {want_w}x{want_h}"
idat = zlib.decompress(b"".join(b for k, b in chunks if k == b"IDAT"))
assert len(set(idat)) > 2, "the image is blank"
EOF
    then ok "$1"; else fail "$1"; fi
}
# 13 x 8.5 inches at --dpi 110 = 1430 x 935 pixels
if $PLOT "$W/a.log" "$W/b.log" "$W/c.log" --label A --label B --label A --logy -o "$W/curves.png" > "$W/out.txt" 2>&1 &&
   grep -q "wrote $W/curves.png (2 run(s): A, B)" "$W/out.txt"; then
    check_png "two runs, log-scale losses: a valid PNG" "$W/curves.png" 1430 935
else
    fail "plotting two runs"; sed 's/^/     /' "$W/out.txt"
fi
if $PLOT "$W/b.log" -o "$W/b.png" --dpi 50 > "$W/out.txt" 2>&1; then
    check_png "a log with only train loss and no tok: (empty panels say why): a valid PNG" "$W/b.png" 650 425
else
    fail "plotting a train-loss-only log"; sed 's/^/     /' "$W/out.txt"
fi
ls "$W"/*.tmp.* >/dev/null 2>&1 && fail "a temporary PNG was left behind"

# bad input: non-zero exit and an error line naming the problem
expect_error() {  # expect_error what needle args...
    local what=$1 needle=$2
    shift 2
    $PLOT "$@" > "$W/out.txt" 2> "$W/err.txt"
    local rc=$?
    if [ $rc -ne 0 ] && grep '^error:\|: error:' "$W/err.txt" | grep -qF -- "$needle"; then
        ok "bad input: $what"
    else
        fail "bad input: $what (exit $rc)"; sed 's/^/     /' "$W/err.txt" | tail -3
    fi
}
: > "$W/empty.log"
expect_error "missing log file" "$W/nope.log" "$W/nope.log" --dump
expect_error "a file that is not a main.log" "$W/empty.log" "$W/empty.log" --dump
expect_error "--label count differs from the log count" "2 --label for 3 logs" "$W/a.log" "$W/b.log" "$W/c.log" --label A --label B --dump
expect_error "--tokens-per-step 0" "--tokens-per-step 0" "$W/b.log" --tokens-per-step 0 --dump

if [ $FAILS -ne 0 ]; then
    echo "test_plot: $FAILS check(s) FAILED"
    exit 1
fi
echo "test_plot: all checks passed"
