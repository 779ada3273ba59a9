#!/usr/bin/env bash
# -tb 1 (issue 38): the events file read by TensorBoard's own reader (PyPI tensorboard's
# EventAccumulator, which checks every record's CRC) returns exactly main.log's values (train and
# val loss, lr, gradient norm, HellaSwag, skipped steps) and metrics.jsonl's (tokens/s, phase
# times), keyed by main.log's s; a resumed run adds a new file and the reader keeps one value per
# step, the resumed run's; a file cut or damaged inside a record still loads up to its last whole
# record.
source "$(dirname "$0")/lib.sh" test_tensorboard "${1:-./train_gpt2}"
if ! $PY -c "import tensorboard" 2> /dev/null; then
    skip_or_fail test-tensorboard "PyPI tensorboard for $PY" "bash scripts/test.sh test-tensorboard (installs it)"; exit
fi
$PY "$ROOT/dev/bench/make_random_shard.py" train.bin 30000 1 512 > /dev/null
$PY "$ROOT/dev/bench/make_random_shard.py" val.bin 8000 2 512 > /dev/null
$PY "$ROOT/dev/bench/make_random_hellaswag.py" hs.bin 4 5 512  # 4 random examples of 4 endings
ARGS=(-i train.bin -j val.bin -e L2:C64:H4:T64:V512 -b 4 -t 32 -d 256 -v 2 -m 2 -s 0 -h 1 -hf hs.bin -l 1e-3 -u 2 -tb 1)

# compare <dir>: the reader's scalars against main.log (the last line of a step wins) and metrics.jsonl
compare() {
    $PY - "$1" <<'EOF'
import json, math, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
d = sys.argv[1]
ea = EventAccumulator(d, size_guidance={"scalars": 0})
ea.Reload()
tb = {}
for tag in ea.Tags()["scalars"]:
    events = ea.Scalars(tag)
    steps = [e.step for e in events]
    assert len(steps) == len(set(steps)), f"{tag}: a step more than once: {steps}"
    tb[tag] = {e.step: e.value for e in events}
# main.log: key -> {s: text}; the same in TensorBoard, at main.log's digits
log = {}
for line in open(f"{d}/main.log"):
    if line.startswith("#"):
        continue
    f = line.split()
    s = int(f[0][2:])
    for kv in f[1:]:
        k, v = kv.split(":", 1)
        log.setdefault(k, {})[s] = v
        if k == "skip":
            break
def same(text, value, fmt):
    return (math.isnan(float(text)) and math.isnan(value)) or (fmt % value) == text or float(text) == value
for key, tag, fmt in (("trl", "train/loss", "%.9g"), ("lr", "train/lr", "%.6g"), ("norm", "train/grad_norm", "%.6g"),
                      ("tel", "val/loss", "%.9g"), ("hsw", "val/hellaswag", "%.6f")):
    want = log.get(key, {})
    got = tb.get(tag, {})
    assert sorted(got) == sorted(want), f"{tag}: steps {sorted(got)}, main.log {sorted(want)}"
    for s, text in want.items():
        assert same(text, got[s], fmt), f"{tag} at {s}: {got[s]!r} vs main.log {text}"
skips = set(log.get("skip", {}))
assert {s for s, v in tb["train/skipped"].items() if v == 1.0} == skips, (tb["train/skipped"], skips)
steps = {}
for o in map(json.loads, open(f"{d}/metrics.jsonl")):
    if o["event"] == "step":
        steps[o["step"]] = o
# the events file holds float32 of the value that metrics.jsonl prints rounded to `digits`: equal
# within half a unit of that rounding plus float32's relative precision (100169.35 tok/s is
# 100169.3515625 as a float32, "100169.4" to one decimal, while metrics.jsonl says 100169.3)
def same_value(ev, js, digits):
    return abs(ev - js) <= 0.5 * 10 ** -digits + abs(js) * 2 ** -23
for s, o in steps.items():
    assert same_value(tb["train/tokens_per_s"][s], o["tok_per_s"], 1), (s, tb["train/tokens_per_s"][s], o)
    for ph in ("data", "forward", "backward", "comm", "optimizer", "eval"):
        assert same_value(tb[f"phase/{ph}_ms"][s], o[f"{ph}_ms"], 3), (s, ph, tb[f"phase/{ph}_ms"][s], o)
print(f"ok   {d}: {sum(len(v) for v in tb.values())} values in {len(tb)} series = main.log's and metrics.jsonl's "
      f"({len(want)} evaluations, {len(steps)} steps, {len(skips)} skipped)")
EOF
}

# ---- a run with validation, HellaSwag and a checkpoint; then resumed from checkpoint 2 (its DONE of 4
# removed), which logs steps 2-3 again: the reader must keep one value per step, the resumed run's
"$TRAINER" "${ARGS[@]}" -x 4 -n 2 -o run > run.txt 2>&1 || { bad "the run failed"; tail -3 run.txt; }
[ "$(ls run/events.out.tfevents.* | wc -l)" -eq 1 ] || bad "expected one events file"
compare run || bad "events file vs main.log"
cp -r run fresh
rm run/DONE_00000004
"$TRAINER" "${ARGS[@]}" -x 4 -n 2 -o run -y 1 > resume.txt 2>&1 || { bad "the resume failed"; tail -3 resume.txt; }
grep -q "resumed from checkpoint 2" resume.txt || bad "did not resume from checkpoint 2"
[ "$(ls run/events.out.tfevents.* | wc -l)" -eq 2 ] && ok "the resumed run added a second events file" || bad "expected 2 events files"
compare run || bad "events files of a resumed run vs main.log"

# ---- skipped steps: a model with a NaN weight (every step skipped, -sm 2 stops the run)
$PY "$ROOT/train_gpt2.py" --model L2:C64:H4:T64:V512 --write-model nan.bin > /dev/null
$PY -c "
import numpy as np
b = open('nan.bin', 'rb').read()
h = np.frombuffer(b[:1024], dtype='<i4').copy(); h[252] = 0   # no checksum: the file loads unchecked
a = np.frombuffer(b[1024:], dtype='<f4').copy(); a[1000] = np.nan
open('nan.bin', 'wb').write(h.tobytes() + a.tobytes())"
"$TRAINER" "${ARGS[@]}" -e nan.bin -v 0 -h 0 -x 4 -sm 2 -o nanrun > nan.txt 2>&1
[ "$(grep -c skip: nanrun/main.log)" -eq 2 ] || bad "NaN run: expected 2 skipped steps"
compare nanrun || bad "skipped steps in the events file"

# ---- an interrupted write: cut inside each of the last records, and a damaged last record; the
# reader must return exactly the whole records before it (record bounds from the TFRecord framing)
f=$(ls fresh/events.out.tfevents.*)
$PY - "$f" <<'EOF' && ok "cut or damaged inside a record: the file loads up to its last whole record" || bad "truncated files"
import os, shutil, struct, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
data = open(sys.argv[1], "rb").read()
ends, pos = [], 0
while pos < len(data):
    n = struct.unpack("<Q", data[pos:pos + 8])[0]
    pos += 16 + n
    ends.append(pos)
assert pos == len(data), "framing does not add up to the file"
def load(blob):
    shutil.rmtree("cut", ignore_errors=True); os.mkdir("cut")
    open("cut/" + os.path.basename(sys.argv[1]), "wb").write(blob)
    ea = EventAccumulator("cut", size_guidance={"scalars": 0}); ea.Reload()
    return sum(len(ea.Scalars(t)) for t in ea.Tags()["scalars"])
whole = [load(data[:e]) for e in ends]
for k in range(2, len(ends)):
    start = ends[k - 1]
    for cut in (start + 3, start + 12, ends[k] - 1):  # in the length, in the data, before the last CRC
        got = load(data[:cut])
        assert got == whole[k - 1], f"cut at {cut} in record {k}: {got} values, want {whole[k - 1]}"
    bad = bytearray(data[:ends[k]]); bad[ends[k] - 6] ^= 0xFF  # a flipped byte in the record's data
    got = load(bytes(bad))
    assert got == whole[k - 1], f"damaged record {k}: {got} values, want {whole[k - 1]}"
print(f"  {len(ends)} records, each cut 3 ways and damaged once")
EOF
finish
