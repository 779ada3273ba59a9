#!/usr/bin/env bash
# -opt muon (llmc/muon.h) in the CPU trainer and the PyTorch twin:
#  1. the Newton-Schulz orthogonalization of train_gpt2 against numpy's SVD (random and
#     ill-conditioned matrices, square, wide and tall): dev/test/test_newton_schulz.py;
#  2. train_gpt2 against train_gpt2.py, both -opt muon from the same model file on the same data:
#     10 steps' train and val losses within 1e-5 relative (gradient norms 1e-4); after one step,
#     each block matrix's update (p1 - p0) within 1e-5 of its largest entry, and all parameters
#     within 1e-5 (L2, relative: AdamW's first step turns rounding noise in near-zero gradients into
#     steps of +-lr, as test_torch_ddp.sh notes);
#  3. checkpoints: a resumed run continues bit for bit; train_gpt2.py resumes train_gpt2's Muon
#     checkpoint within 1e-5; a checkpoint resumed with the other -opt is one error line, in both
#     trainers and both directions; a state file whose optimizer field [28] is out of range (with a
#     valid header checksum) is skipped with a warning naming the field;
#  4. mpirun -np 1/2/4: the same losses (1e-5);
#  5. bad flags in both trainers: -opt sgd, a negative momentum, 0 Newton-Schulz steps.
# The simulated CUDA trainer's Muon (-z 1 against -z 0 included) is in test_cuda_sim.sh.
source "$(dirname "$0")/lib.sh" test_muon "${1:-./train_gpt2}"
NS="$ROOT/dev/test/newton_schulz"
TORCH_TRAINER="$ROOT/train_gpt2.py"
$PY "$ROOT/dev/bench/make_random_shard.py" train.bin 40000 1 512
$PY "$ROOT/dev/bench/make_random_shard.py" val.bin 4000 2 512
$PY "$TORCH_TRAINER" --model L2:C64:H4:T64:V512 --seed 5 --write-model init.bin > /dev/null || bad "init model"
# -ml above its default so that Muon's part of the update dominates what the comparison sees
ARGS=(-i train.bin -j val.bin -e init.bin -b 4 -t 32 -d 256 -v 5 -m 2 -s 0 -l 3e-3 -u 2 -k cosine -q 0.1 -c 0.1
      -opt muon -ml 0.03 -mm 0.9)

# ---- 1. Newton-Schulz against numpy's SVD
echo "1. Newton-Schulz (train_gpt2.c's muon_update) against numpy's SVD:"
$PY "$ROOT/dev/test/test_newton_schulz.py" "$NS" | sed 's/^/  /'
[ "${PIPESTATUS[0]}" -eq 0 ] || bad "Newton-Schulz differs from the SVD reference"

# ---- 2. train_gpt2 against train_gpt2.py
echo "2. train_gpt2 against train_gpt2.py, -opt muon:"
"$TRAINER" "${ARGS[@]}" -x 10 -n 5 -o c > c.txt 2>&1 || { bad "train_gpt2 -opt muon failed"; tail -3 c.txt; }
$PY "$TORCH_TRAINER" "${ARGS[@]}" -x 10 -n 5 -o p > p.txt 2>&1 || { bad "train_gpt2.py -opt muon failed"; tail -3 p.txt; }
grep -q "^optimizer: muon" c.txt && grep -q "^optimizer: muon" p.txt || bad "no optimizer line in the banners"
compare_logs p/main.log c/main.log trl=1e-5 tel=1e-5 norm=1e-4 || bad "the losses of the two trainers differ"
"$TRAINER" "${ARGS[@]}" -x 1 -n 1 -o c1 > c1.txt 2>&1 || bad "train_gpt2 one step"
$PY "$TORCH_TRAINER" "${ARGS[@]}" -x 1 -n 1 -o p1 > p1.txt 2>&1 || bad "train_gpt2.py one step"
$PY - "$TORCH_TRAINER" init.bin c1/model_00000001.bin p1/model_00000001.bin <<'EOF' || bad "the parameters after one step differ"
import importlib.util, sys, numpy as np
spec = importlib.util.spec_from_file_location("t", sys.argv[1]); t = importlib.util.module_from_spec(spec); spec.loader.exec_module(t)
cfg, p0, _ = t.read_model_flat(sys.argv[2])
(_, pc, _), (_, pp, _) = t.read_model_flat(sys.argv[3]), t.read_model_flat(sys.argv[4])
bad, off = 0, 0
for i, (name, shape) in enumerate(zip(t.PARAM_NAMES, t.param_shapes(cfg))):
    n = int(np.prod(shape))
    if i in t.MUON_TENSORS:
        dc, dp = (x[off:off + n].astype(np.float64) - p0[off:off + n] for x in (pc, pp))
        r = np.abs(dc - dp).max() / np.abs(dp).max()
        print(f"  {name}: Muon's update, max|diff| / max|update| = {r:.1e} (tolerance 1e-5)")
        bad |= not r <= 1e-5
    off += n
r = np.linalg.norm(pc.astype(np.float64) - pp) / np.linalg.norm(pp)
print(f"  all parameters after one step: |diff| / |ref| = {r:.1e} (L2; tolerance 1e-5)")
sys.exit(1 if bad or not r <= 1e-5 else 0)
EOF

# ---- 3. checkpoints
echo "3. checkpoints:"
cp -r c cr && rm cr/DONE_00000010
"$TRAINER" "${ARGS[@]}" -x 10 -n 5 -o cr -y 1 > cr.txt 2>&1 || bad "resume failed"
grep -q "resumed from checkpoint 5" cr.txt || bad "did not resume from checkpoint 5"
echo " train_gpt2 resumed (bitwise):"; compare_logs cr/main.log c/main.log trl=0 norm=0 --last 5 || bad "resume is not bitwise"
cmp -s cr/model_00000010.bin c/model_00000010.bin && ok "resumed parameters bitwise equal" || bad "resumed parameters differ"
cp -r c cp && rm cp/DONE_00000010
$PY "$TORCH_TRAINER" "${ARGS[@]}" -x 10 -n 5 -o cp -y 1 > cp.txt 2>&1 || bad "train_gpt2.py resuming train_gpt2's checkpoint failed"
echo " train_gpt2's checkpoint resumed by train_gpt2.py:"; compare_logs cp/main.log c/main.log trl=1e-5 --last 5 || bad "cross resume"
[ "$(od -A n -t d4 -j 112 -N 4 c/state_00000005_00000.bin | tr -d ' ')" = 1 ] || bad "state header [28] is not 1 (Muon)"
"$TRAINER" "${ARGS[@]}" -opt adamw -x 6 -n 3 -o a > a.txt 2>&1 || bad "AdamW run"
# header [28] = 5 with the header's CRC made right again: skipped, checkpoint 5 resumed instead
cp -r c bad28 && $PY - bad28/state_00000010_00000.bin "$TORCH_TRAINER" <<'EOF' || bad "could not damage the state file"
import importlib.util, sys, numpy as np
spec = importlib.util.spec_from_file_location("t", sys.argv[2]); t = importlib.util.module_from_spec(spec); spec.loader.exec_module(t)
raw = bytearray(open(sys.argv[1], "rb").read())
h = np.frombuffer(bytes(raw[:1024]), "<i4").copy()
h[28] = 5
h[250] = t.header_crc(h, 250)
raw[:1024] = h.astype("<i4").tobytes()
open(sys.argv[1], "wb").write(raw)
EOF
"$TRAINER" "${ARGS[@]}" -x 10 -n 5 -o bad28 -y 1 > bad28.txt 2>&1 || bad "a damaged optimizer field stopped the run"
grep -q "skipping checkpoint 10: .*optimizer \[28\] is out of range" bad28.txt && grep -q "resumed from checkpoint 5" bad28.txt \
    && ok "a state file with optimizer [28] = 5 is skipped: $(grep -m1 skipping bad28.txt | cut -c1-140)" \
    || bad "optimizer [28] = 5 not skipped with a warning: $(grep -m1 'error\|warning' bad28.txt)"
expect_error "train_gpt2: a Muon checkpoint resumed with -opt adamw" "written with -opt muon, this run has -opt adamw" \
    "$TRAINER" "${ARGS[@]}" -opt adamw -x 12 -o c -y 1
expect_error "train_gpt2: an AdamW checkpoint resumed with -opt muon" "written with -opt adamw, this run has -opt muon" \
    "$TRAINER" "${ARGS[@]}" -x 12 -o a -y 1
expect_error "train_gpt2.py: a Muon checkpoint resumed with -opt adamw" "written with -opt muon, this run has -opt adamw" \
    $PY "$TORCH_TRAINER" "${ARGS[@]}" -opt adamw -x 12 -o c -y 1
expect_error "train_gpt2.py: an AdamW checkpoint resumed with -opt muon" "written with -opt adamw, this run has -opt muon" \
    $PY "$TORCH_TRAINER" "${ARGS[@]}" -x 12 -o a -y 1

# ---- 4. rank counts
if have_mpi; then
    echo "4. mpirun -np 1/2/4 (-b 1: 8, 4 and 2 micro-steps per step):"
    for np in 1 2 4; do
        "${MPIRUN[@]}" -np $np "$TRAINER" "${ARGS[@]}" -b 1 -x 6 -o "np$np" > "np$np.txt" 2>&1 || bad "np=$np failed"
    done
    for np in 2 4; do echo " np=$np vs np=1:"; compare_logs "np$np/main.log" np1/main.log trl=1e-5 tel=1e-5 || bad "np=$np differs"; done
else
    mpi_missing "test-muon part 4 (rank counts)" || bad "part 4 not run"
fi

# ---- 5. bad flags, one line each
echo "5. bad flags:"
for t in "$TRAINER" "$PY $TORCH_TRAINER"; do
    name=$(basename "${t##* }")
    expect_error "$name -opt sgd" "opt sgd" $t "${ARGS[@]}" -x 1 -opt sgd
    expect_error "$name -mm -0.5" "mm -0.5" $t "${ARGS[@]}" -x 1 -mm -0.5
    expect_error "$name -mns 0" "mns 0" $t "${ARGS[@]}" -x 1 -mns 0
done
finish
