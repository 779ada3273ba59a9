#!/usr/bin/env bash
# The random init of -e <descriptor> (llmc/model_io.h gpt2_init_params), which runs on every
# OpenMP thread: dev/test/test_init gives bitwise the same parameters on 1 and 2 threads, and they
# are train_gpt2.py's c_init_params (numpy, its own implementation of the same scheme): the same
# float32 values up to a rounding of the last bit where numpy's log/cos/sin differ from glibc's in
# the last bit of a double (seen: none).
# usage: dev/test/test_init.sh [dev/test/test_init]   (make test-init builds it)
BIN=$(realpath "${1:-dev/test/test_init}")
source "$(dirname "$0")/lib.sh" test_init
"$BIN" init > init.txt 2>&1 || bad "test_init: the init differs between 1 and 2 threads (or failed)"
sed 's/^/  /' init.txt
PYTHONPATH="$ROOT" "$PY" - > twin.txt 2>&1 <<'PYEOF' || bad "the init differs from train_gpt2.py's c_init_params"
import numpy as np, train_gpt2 as t
bad = 0
for i, desc in enumerate(["L2:C64:H4:T32:V130", "L3:C128:H2:T64:V1000"]):
    ours = np.fromfile(f"init_{i}.f32", dtype=np.float32)
    ref = t.c_init_params(t.Config.from_descriptor(desc, "-e"), 7)
    # one float32 ulp at most (relative 2^-23 ~ 1.2e-7); 0 must stay 0 (biases, padded rows)
    close = ours.shape == ref.shape and np.all(np.abs(ours - ref) <= 1.2e-7 * np.abs(ref))
    print(f"{'ok  ' if close else 'FAIL'} {desc}: {ref.size} parameters, {int(np.sum(ours == ref)) if close else 0} bitwise "
          f"equal to train_gpt2.py's c_init_params")
    bad |= not close
raise SystemExit(bad)
PYEOF
sed 's/^/  /' twin.txt
finish
