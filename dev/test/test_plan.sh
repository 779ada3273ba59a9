#!/usr/bin/env bash
# The memory plan, -b auto and the phase timers (issue 38), on the CPU trainer (the CUDA trainer's
# are in test_cuda_sim.sh, against the simulator's allocator):
#  - --plan prints every row and exits without reading data; its total is within 10% of the peak
#    RSS the kernel measures for a short run (two model sizes);
#  - the large arrays are on transparent huge pages where the kernel's THP mode gives them;
#  - -b auto takes the largest B that fits and divides -d over the ranks, says why on rank 0 and in
#    main.log's header, the same on 2 ranks; a resume keeps the checkpoint's B (bitwise, and -d -1
#    keeps its batch), and --plan with -y 1 shows that choice; bad uses stop with one error line;
#  - every step's metrics.jsonl carries the six phase times, which add up to the step's own
#    wall-clock time (measured apart, in the loop) less what the loop does between them; the -pe
#    line is the mean of the steps it covers; -pe 0 prints none;
#  - train_gpt2cu (when nvcc built it) prints its plan without a GPU and refuses -b auto;
#  - the plan's heading shows the model's shape: llm.c's descriptors (d6 .. d84, gpt2:dN, gpt3:cN)
#    give its shapes, in train_gpt2 and train_gpt2.py alike.
source "$(dirname "$0")/lib.sh" test_plan "${1:-./train_gpt2}"
$PY "$ROOT/dev/bench/make_random_shard.py" train.bin 60000 1 512 > /dev/null
SMALL=(-i train.bin -j train.bin -e L2:C64:H4:T64:V512 -t 32 -s 0 -l 1e-3)

# ---- --plan: rows, no data read, and the total against the measured peak RSS
"$TRAINER" --plan 1 -i missing_dir/x.bin -e L2:C64:H4:T64:V512 -b 4 -t 32 > plan.txt 2>&1 || bad "--plan failed without data"
for row in parameters gradients "master weights" "AdamW moments" activations logits "attention workspace" scratch \
           "communication buffers" "data loader" runtime total "largest -b that fits" "-b auto at -r"; do
    grep -q -- "$row" plan.txt || bad "--plan: no '$row'"
done
grep -q "no -i shards found" plan.txt && ok "--plan prints its rows without reading data (the shards do not exist)"
# the peak RSS of a 1-step run, measured by the kernel (getrusage of the child), against the plan
rss_check() {  # rss_check <model> <B> <T>
    local plan
    plan=$("$TRAINER" --plan 1 -i train.bin -e "$1" -b "$2" -t "$3" -v 0 -s 0 | sed -n 's/.*(RAM: \([0-9]*\) bytes).*/\1/p')
    $PY - "$plan" "$TRAINER" -i train.bin -e "$1" -b "$2" -t "$3" -x 1 -v 0 -s 0 <<'EOF' || bad "plan vs RSS for $1"
import resource, subprocess, sys
plan = int(sys.argv[1])
run = subprocess.run(sys.argv[2:], capture_output=True, text=True)
assert run.returncode == 0, run.stderr[-500:]
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
line = f"{sys.argv[6]} -b {sys.argv[8]} -t {sys.argv[10]}: planned {plan / 2**20:.1f} MiB, peak RSS {rss / 2**20:.1f} MiB ({100 * (rss / plan - 1):+.1f}%)"
assert abs(rss / plan - 1) <= 0.10, f"more than 10% apart: {line}"
print(f"ok   {line}")
EOF
}
rss_check L4:C256:H4 8 256
rss_check L6:C384:H6 4 256

# ---- the large arrays on transparent huge pages, where the kernel gives them to memory marked for
# them ("madvise", the usual default; with "always" every large allocation has them anyway)
thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2> /dev/null)
if [[ $thp == *"[madvise]"* || $thp == *"[always]"* ]]; then
    "$TRAINER" -i train.bin -e L4:C256:H4:T64:V512 -b 8 -t 32 -x 100000 -v 0 -s 0 > thp.txt 2>&1 & pid=$!
    wait_line "^step 2/" thp.txt 60 "$pid"
    huge=$(awk '/^AnonHugePages:/ {print $2}' "/proc/$pid/smaps_rollup" 2> /dev/null)
    kill "$pid" 2> /dev/null; wait "$pid" 2> /dev/null
    # parameters, gradients and AdamW's moments are 12.6 MB each: 24 huge pages in all if the kernel
    # had them to give; at least 4 (8 MiB) must be there
    [ "${huge:-0}" -ge 8192 ] && ok "transparent huge pages (THP mode ${thp}): ${huge} kB of the run's memory" \
        || bad "transparent huge pages: ${huge:-no} kB AnonHugePages in the run (THP mode $thp)"
else
    echo "skip transparent huge pages: THP is off here ($thp)"
fi

# ---- -b auto
"$TRAINER" "${SMALL[@]}" -b auto -d 2048 -x 2 -v 0 -o auto > auto.txt 2>&1 || bad "-b auto run failed"
if grep -q '^-b auto: B 64; up to [0-9]* fit' auto.txt && grep -q '^batch: B 64 | T 32 | ranks 1 | grad accum 1' auto.txt; then
    ok "-b auto with -d 2048 at T 32: $(grep -m1 '^-b auto' auto.txt | cut -c1-120)..."
else bad "-b auto: expected B 64 (2048 / 32)"; head -3 auto.txt; fi
head -1 auto/main.log | grep -q '^# -b auto: B 64;' && ok "main.log's header has the choice" || bad "main.log has no -b auto header"
# -d 1920 at T 32 over 1 rank: 60 windows; the largest divisor of 60 that fits is 60
"$TRAINER" "${SMALL[@]}" -b auto -d 1920 -x 1 -v 0 > auto60.txt 2>&1 && grep -q '^-b auto: B 60;' auto60.txt \
    && ok "-b auto divides -d: B 60 for -d 1920 at T 32" || { bad "-b auto with -d 1920"; head -3 auto60.txt; }
# -d -1: as many windows per step as the 60000 tokens hold at T 32: (60000 - 1) / 32 = 1874
"$TRAINER" "${SMALL[@]}" -b auto -x 1 -v 0 > autod.txt 2>&1 && grep -q '^-b auto: B 1874;.*as many as the train data holds' autod.txt \
    && ok "-b auto with -d -1: B 1874, the windows the train data holds" || { bad "-b auto with -d -1"; head -3 autod.txt; }
if have_mpi; then
    "${MPIRUN[@]}" -np 2 "$TRAINER" "${SMALL[@]}" -b auto -d 1920 -x 1 -v 0 > auto2.txt 2>&1 || bad "-b auto on 2 ranks failed"
    # 30 windows per rank: B 30, the same on both ranks (the run's flag check compares them), printed once
    [ "$(grep -c '^-b auto: B 30;' auto2.txt)" -eq 1 ] && grep -q '^batch: B 30 | T 32 | ranks 2' auto2.txt \
        && ok "-b auto on 2 ranks: B 30, printed once" || { bad "-b auto on 2 ranks"; head -5 auto2.txt; }
else
    mpi_missing "test-plan: -b auto on 2 ranks" || bad "-b auto on 2 ranks not run"
fi
# a resume with -b auto keeps the checkpoint's B where it fits and divides -d: a -b 8 -d 512 run (2
# micro-steps) resumed with -b auto (alone: B 16) takes B 8, and its steps 3-4 are bit for bit those
# of an uninterrupted -b 8 run; with -d -1 the resume takes the checkpoint's batch (before: B 1874,
# as the data holds, so -d 59968, refused as another -d)
KEEP=("${SMALL[@]}" -v 0 -n 2 -k constant -u 0)
"$TRAINER" "${KEEP[@]}" -b 8 -d 512 -x 2 -o keep > keep.txt 2>&1 || bad "the -b 8 run failed"
# --plan with -y 1 shows the resume's choice (without it, a fresh start's B 16)
"$TRAINER" --plan 1 "${KEEP[@]}" -b auto -d 512 -o keep -y 1 > keep_plan.txt 2>&1
"$TRAINER" --plan 1 "${KEEP[@]}" -b auto -d 512 -o keep > keep_plan_fresh.txt 2>&1
grep -q -- '| -b 8 (-b auto: the checkpoint'"'"'s) | -t 32 |' keep_plan.txt && grep -q '^-y 1 resumes checkpoint 2: -b 8 on 1 rank(s), -d 512$' keep_plan.txt \
    && grep -q "^-b auto at -r [0-9]: B 8 (the checkpoint's, kept for a bitwise resume)" keep_plan.txt && grep -q -- '| -b 16 (-b auto) |' keep_plan_fresh.txt \
    && ok "--plan -y 1 with -b auto: the checkpoint's B 8 (a fresh start's: 16)" || { bad "--plan -y 1 with -b auto"; grep -e '-b' keep_plan.txt; }
"$TRAINER" "${KEEP[@]}" -b auto -d 512 -x 4 -o keep -y 1 > keep_resume.txt 2>&1 || { bad "its resume with -b auto failed"; tail -2 keep_resume.txt; }
"$TRAINER" "${KEEP[@]}" -b 8 -d 512 -x 4 -o keep_ref > keep_ref.txt 2>&1 || bad "the uninterrupted -b 8 run failed"
if grep -q "^-b auto: B 8, checkpoint 2's, kept for a bitwise resume; " keep_resume.txt && grep -q '^batch: B 8 | T 32 | ranks 1 | grad accum 2 ' keep_resume.txt \
    && grep -q '^s:3 ' keep/main.log && [ "$(tail -2 keep/main.log)" = "$(tail -2 keep_ref/main.log)" ]; then
    ok "-b auto resuming a -b 8 checkpoint: B 8, steps 3-4 bit for bit an uninterrupted run's"
else bad "-b auto on a resume: $(grep -m1 -e '^-b auto\|^error' keep_resume.txt)"; diff <(tail -2 keep_ref/main.log) <(tail -2 keep/main.log); fi
"$TRAINER" "${KEEP[@]}" -b 8 -d -1 -x 2 -o keepd > keepd.txt 2>&1 || bad "the -b 8 -d -1 run failed"
"$TRAINER" --plan 1 "${KEEP[@]}" -b auto -d -1 -o keepd -y 1 2>&1 | grep -q "^-b auto at -r [0-9]: B 8 (the checkpoint's" \
    || bad "--plan -y 1 with -b auto -d -1: not the checkpoint's B 8"
"$TRAINER" "${KEEP[@]}" -b auto -d -1 -x 4 -o keepd -y 1 > keepd_resume.txt 2>&1 && grep -q '^batch: B 8 | T 32 | ranks 1 | grad accum 1 | total 256 ' keepd_resume.txt \
    && ok "-b auto -d -1 resuming a -b 8 -d -1 checkpoint: its batch (B 8, 256 tokens)" || { bad "-b auto -d -1 on a resume"; grep -m2 -e '^-b auto\|^error' keepd_resume.txt; }
expect_error "-b auto that fits no divisor of -d" "none of 1..[0-9]* divides -d" \
    "$TRAINER" "${SMALL[@]}" -b auto -d 2047 -x 1 -v 0
expect_error "-b auto with a model that fits nowhere" "not even B = 1 fits" \
    "$TRAINER" -i train.bin -e L96:C4096:H32 -b auto -t 32 -x 1 -v 0
expect_error "-b with a word other than auto" "expected an integer" "$TRAINER" "${SMALL[@]}" -b many
# -d -1 (as many windows as the data holds) over a shard shorter than one window: no B to take
$PY "$ROOT/dev/bench/make_random_shard.py" short.bin 40 2 512 > /dev/null
expect_error "-b auto -d -1 on data shorter than a window" "-b auto: the train data (-i short.bin) holds fewer windows of T+1 = 65 tokens than the 1 rank(s)" \
    "$TRAINER" -i short.bin -e L2:C64:H4:T64:V512 -t 64 -b auto -x 1 -v 0 -s 0
expect_error "-tb 1 without -o" "add -o" "$TRAINER" "${SMALL[@]}" -b 4 -tb 1
expect_error "--plan -1" "must be in" "$TRAINER" "${SMALL[@]}" --plan -1

# ---- phase times: metrics.jsonl per step, the -pe line
"$TRAINER" "${SMALL[@]}" -b 4 -d 256 -x 6 -v 3 -m 2 -n 3 -pe 3 -o ph > ph.txt 2>&1 || bad "phase run failed"
$PY - ph/metrics.jsonl ph.txt <<'EOF' && ok "phase times: present, adding up to each step's time, the -pe lines their means" || bad "phase times"
import json, re, sys
names = ["data", "forward", "backward", "comm", "optimizer", "eval"]
steps = [o for o in map(json.loads, open(sys.argv[1])) if o["event"] == "step"]
assert len(steps) == 6, len(steps)
for o in steps:
    ph = [o[f"{n}_ms"] for n in names]
    assert all(v >= 0 for v in ph), o
    inside = sum(ph[:5])  # the step's own phases; "ms" is its wall time, measured apart
    assert 0.8 * o["ms"] <= inside <= o["ms"] * 1.001 + 0.01, f"step {o['step']}: phases {inside:.3f} ms, step {o['ms']} ms"
    assert o["forward_ms"] > 0 and o["backward_ms"] > 0 and o["optimizer_ms"] > 0, o
# evaluations (-v 3: at steps 0 and 3) and the checkpoint after step 3 land in the next step's eval_ms
ev = [o["eval_ms"] for o in steps]
assert ev[0] > 0 and ev[3] > 0 and ev[1] == ev[2] == ev[4] == ev[5] == 0, ev
lines = re.findall(r"^phases, steps (\d+)-(\d+), mean per step: (.*) \| wall ([\d.]+) ms$", open(sys.argv[2]).read(), re.M)
assert [(int(a), int(b)) for a, b, _, _ in lines] == [(1, 3), (4, 6)], lines
for a, b, body, wall in lines:
    got = dict((m[0], float(m[1])) for m in re.findall(r"(\w+) ([\d.]+) ms", body))
    part = steps[int(a) - 1:int(b)]
    for n in names:
        want = sum(o[f"{n}_ms"] for o in part) / len(part)
        assert abs(got[n] - want) <= 0.06 + 0.001 * want, f"{n}: printed {got[n]}, metrics.jsonl mean {want:.3f}"
print(f"  e.g. {open(sys.argv[2]).read().split('phases, ')[1].splitlines()[0][:150]}...")
EOF
"$TRAINER" "${SMALL[@]}" -b 4 -d 256 -x 3 -v 0 -pe 0 > pe0.txt 2>&1 && ! grep -q '^phases' pe0.txt \
    && ok "-pe 0 prints no phase line" || bad "-pe 0"

# ---- train_gpt2cu without a GPU: the plan is printed, -b auto is refused
CU=$ROOT/train_gpt2cu
if [ -x "$CU" ]; then
    # the shard: ceil(124475904 / 8) = 15559488 parameters, rounded up to whole chunks of the gradient norm (65536): 238 of them
    "$CU" --plan 8 -i train.bin -e d12 -b 16 -t 1024 -z 1 -d 524288 > cuplan.txt 2>&1; rc=$?
    if [ $rc -eq 0 ] && grep -q "this rank's ZeRO-1 shard: 15597568 of 124475904" cuplan.txt && grep -q '^device: unknown: \(no CUDA GPU\|no NVIDIA driver is installed\)' cuplan.txt \
        && grep -q 'NCCL staging' cuplan.txt; then
        ok "train_gpt2cu --plan 8 -z 1 without a GPU: $(grep total cuplan.txt | tr -s ' ')"
    else bad "train_gpt2cu --plan without a GPU (exit $rc)"; head -20 cuplan.txt; fi
    # without a GPU: a machine with the driver has none visible; one without it (CI) has no driver
    expect_error "train_gpt2cu -b auto without a GPU" "no CUDA GPU is visible\|no NVIDIA driver is installed" \
        "$CU" -i train.bin -j train.bin -e d12 -b auto -t 64
else
    skip_or_fail "test-plan: train_gpt2cu without a GPU" "./train_gpt2cu (nvcc)" "make train_gpt2cu" || bad "train_gpt2cu part not run"
fi
# ---- llm.c's model descriptors: the shapes its train_gpt2.cu builds (written out here from its
# source), the parameter count from them, against --plan's heading and train_gpt2.py's parser
for d in d6 d12 gpt2:d24 d36 d48 d60 d72 d84 gpt3:c384 gpt3:c768 gpt3:c1024 gpt3:c1536 gpt3:c2048 gpt3:c2560 gpt3:c4096 gpt3:c12288; do
    "$TRAINER" --plan 1 -e "$d" -b 1 -t 64 2>&1 | head -n 1
done > shapes.txt
PYTHONPATH="$ROOT" $PY - shapes.txt <<'EOF' && ok "descriptors: the shapes of llm.c's d6 .. d84, gpt2:dN and gpt3:c384 .. c12288 in both trainers" || bad "descriptors: a shape differs from llm.c's"
import re, sys, train_gpt2
# llm.c: (layers, channels, heads, maxT)
want = {"d6": (6, 384, 6, 1024), "d12": (12, 768, 12, 1024), "gpt2:d24": (24, 1024, 16, 1024), "d36": (36, 1280, 20, 1024),
        "d48": (48, 1600, 25, 1024), "d60": (60, 1920, 30, 1024), "d72": (72, 2880, 30, 1024), "d84": (84, 3456, 36, 1024),
        "gpt3:c384": (6, 384, 6, 2048), "gpt3:c768": (12, 768, 12, 2048), "gpt3:c1024": (24, 1024, 16, 2048),
        "gpt3:c1536": (24, 1536, 16, 2048), "gpt3:c2048": (24, 2048, 16, 2048), "gpt3:c2560": (32, 2560, 32, 2048),
        "gpt3:c4096": (32, 4096, 32, 2048), "gpt3:c12288": (96, 12288, 96, 2048)}
got = {m[1]: tuple(map(int, m.groups()[1:])) for m in re.finditer(
    r"-e (\S+) \(L (\d+), C (\d+), H (\d+), maxT (\d+): (\d+) parameters\)", open(sys.argv[1]).read())}
bad = 0
for d, (L, C, H, T) in want.items():
    P = 50304 * C + T * C + L * (12 * C * C + 13 * C) + 2 * C  # wte (padded vocab), wpe, the blocks, ln_f
    cfg = train_gpt2.Config.from_descriptor(d)
    twin = (cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.block_size)
    if got.get(d) != (L, C, H, T, P) or twin != (L, C, H, T):
        print(f"  {d}: llm.c {(L, C, H, T)} {P} parameters; train_gpt2 {got.get(d)}; train_gpt2.py {twin}")
        bad = 1
sys.exit(bad)
EOF
expect_error "a GPT-3 shape llm.c does not have" "-e gpt3:c700: GPT-3 shapes are gpt3:c384, c768" "$TRAINER" --plan 1 -e gpt3:c700
[ "$("$TRAINER" --plan 1 -e d12.bin 2>&1 | grep -c "model file 'd12.bin' not found")" = 1 ] || bad "-e d12.bin is not taken for a file"

finish
