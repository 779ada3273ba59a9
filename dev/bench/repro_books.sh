#!/usr/bin/env bash
# The scaled reproduction of issue 14, on one GPU: GPT-2 124M from scratch on the book corpus with
# the settings of scripts/run_gpt2_124M_books.sh (the script itself runs both trainers), once with
# train_gpt2cu and once with train_gpt2.py (PyTorch at its best: bf16 autocast, torch.compile,
# flash attention through scaled_dot_product_attention, fused AdamW); then one plot of train and
# val loss against tokens for both, HellaSwag at the end for both, tokens/s for both, and a
# summary with the val-loss ratio and the speed ratio (targets: ours within 1% of PyTorch's final
# val loss, at least 2x its tokens/s).
#
#   bash dev/bench/repro_books.sh prepare            CPU build machine: tokenize, compress into .carry/books
#   bash dev/bench/repro_books.sh setup cuda         GPU machine, one device call each (10 minutes at most):
#   bash dev/bench/repro_books.sh torch              every phase stops cleanly at its time budget and
#   bash dev/bench/repro_books.sh report             continues from its checkpoint when called again
#
# How the corpus gets to the GPU machine: that machine has no network and no PCRE2 headers (so no
# ./gpt2_tokenize), and a device call carries at most 64 MiB of working tree. So `prepare` runs
# here, where the data recipes work (../shared/data: the corpus .xz, the GPT-2 files, HellaSwag):
# dev/data/books.sh and dev/data/hellaswag.sh write the token shards (train 24.1M tokens = 48 MB,
# val 1.7 MB, HellaSwag 3.5 MB), which are xz-compressed into .carry/books/ (git-ignored) with the
# decode table gpt2_tokenizer.bin: 25 MiB in all (measured), next to a working tree of about 1 MiB;
# `prepare` takes about 5 minutes on 2 busy cores and fails if the result is over 56 MiB. The device
# call carries `.carry` (with .carry/books), and `setup` decompresses it there with Python's lzma
# (no xz binary needed) into $DATA_DIR/books and $DATA_DIR/hellaswag, and installs the one-GPU
# trainer built on the build machine (build/single_gpu/train_gpt2cu from .carry/prebuilt, made by
# dev/gpu/prepare.sh: neither NCCL nor MPI, cuDNN's attention available), or without it builds
# train_gpt2cu (NO_MULTI_GPU=1 CUDA_ARCHS=90a: one Hopper GPU; about 2 minutes there). A warm
# machine keeps data/, the binaries and the run dirs between calls; a session's 15 minutes of
# device time hold two calls of about 6 minutes, back to back:
#   run(command="REPRO_BUDGET=330 bash dev/bench/repro_books.sh setup cuda torch", carry=[".carry", "cudnn-frontend"], timeout_s=360)
#   run(command="REPRO_BUDGET=330 bash dev/bench/repro_books.sh cuda torch report", carry=[".carry", "cudnn-frontend"], timeout_s=360)
# (a phase that ran out of its budget says so, and the next call continues it from its
# checkpoint). Whether both runs end inside those two calls is for the first GPU session to see;
# a machine given back loses the runs: a later session starts again at setup.
# `report` copies both main.logs, both stdouts, the PNG and summary.txt to $OUT; the GPU session
# commits the PNG as dev/bench/repro_books.png (shown in the README) and the summary to RESULTS.md.
#
# Settings (environment): RUN (log_repro_books: run dirs cuda/ and torch/, their stdouts, the PNG
# and the summary), DATA_DIR (data), REPRO_BUDGET (330: seconds one call may take, all phases
# together; a trainer gets SIGTERM when its share is up, checkpoints and exits), PY_B (32: the
# micro-batch of train_gpt2.py; -d stays 65536, so it accumulates 2 micro-steps: the data of each
# step does not depend on -b), CUDA_TRAINER (default: the prebuilt one-GPU trainer, else
# ./train_gpt2cu), PYTHON (python3, with torch), REPRO_FLAGS (extra flags for both trainers). The
# recipe's own overrides (MODEL B T D STEPS EVERY HS_MAX) pass through: the CPU dry run is
#   CUDA_TRAINER=./train_gpt2 PYTHON=/usr/bin/python3 MODEL=L2:C64:H4 B=4 PY_B=4 T=64 D=512 STEPS=6 \
#     EVERY=3 HS_MAX=40 REPRO_FLAGS="-m 20" RUN=/tmp/repro bash dev/bench/repro_books.sh prepare setup cuda torch report
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
RUN=${RUN:-log_repro_books}
DATA=${DATA_DIR:-data}
CARRY=.carry/books
BUDGET=${REPRO_BUDGET:-330}
PY_B=${PY_B:-32}
[[ "$BUDGET" =~ ^[1-9][0-9]*$ ]] || { echo "error: REPRO_BUDGET='$BUDGET': expected whole seconds, e.g. 330" >&2; exit 2; }
[[ "$PY_B" =~ ^[1-9][0-9]*$ ]] || { echo "error: PY_B='$PY_B': expected a micro-batch size, e.g. 32" >&2; exit 2; }
CUDA_TRAINER=${CUDA_TRAINER:-}   # empty: the one setup prepared (written to $RUN/cuda_trainer)
PREBUILT_TRAINER=build/single_gpu/train_gpt2cu  # the one-GPU trainer dev/gpu/prebuilt.sh carries
PYTHON=${PYTHON:-python3}
STEPS=${STEPS:-1100}
SHARED=${SHARED_DATA:-../shared/data}
T0=$(date +%s)
mkdir -p "$RUN"
# one GPU: no MPI or NCCL needed; Hopper only (H100, H200), half the compile time of "90a 80". For
# train_gpt2cu's make alone: a make of anything else with them would rewrite the build's feature
# stamps (build/features), and the next plain make would rebuild every binary of the tree
CUDA_MAKE=(NO_MULTI_GPU=1 CUDA_ARCHS="${CUDA_ARCHS:-90a}")

left() { echo $((BUDGET - ($(date +%s) - T0))); }

prepare() {
    [ -d "$SHARED/corpus" ] || { echo "prepare: no book corpus at $SHARED/corpus (set SHARED_DATA)"; exit 1; }
    local tmp=build/repro_books_prep
    rm -rf "$tmp" "$CARRY"
    mkdir -p "$CARRY"
    export GPT2_DIR="$SHARED/gpt2" TOKENIZER_BIN="$ROOT/gpt2_tokenizer.bin"
    DATA_DIR="$tmp" bash dev/data/books.sh
    DATA_DIR="$tmp" HELLASWAG="$SHARED/hellaswag/hellaswag_val.jsonl" bash dev/data/hellaswag.sh
    for f in "$tmp"/books/*.bin "$tmp"/hellaswag/hellaswag_val.bin "$TOKENIZER_BIN"; do
        xz -T0 -6 -c "$f" > "$CARRY/$(basename "$f").xz"
    done
    rm -rf "$tmp"
    local bytes
    bytes=$(du -cb "$CARRY" | tail -1 | cut -f1)
    ls -l "$CARRY"
    echo "prepare: $CARRY holds $((bytes / 1048576)) MiB; carry it with the device call"
    [ "$bytes" -le $((56 * 1048576)) ] || { echo "prepare: over 56 MiB, too much to carry next to the working tree"; exit 1; }
}

setup() {
    if ! ls "$DATA"/books/books_train_*.bin > /dev/null 2>&1; then
        ls "$CARRY"/*.xz > /dev/null 2>&1 || { echo "setup: no $CARRY/*.xz: run the prepare phase and carry $CARRY"; exit 1; }
        mkdir -p "$DATA/books" "$DATA/hellaswag"
        "$PYTHON" - "$CARRY" "$DATA" <<'EOF'
import lzma, os, shutil, sys
carry, data = sys.argv[1:]
for name in sorted(os.listdir(carry)):
    out = name[:-3]
    dest = (os.path.join(data, "books", out) if out.startswith("books_") else
            os.path.join(data, "hellaswag", out) if out.startswith("hellaswag") else out)
    with lzma.open(os.path.join(carry, name)) as src, open(dest + ".part", "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 24)
    os.rename(dest + ".part", dest)
    print(f"setup: {dest} ({os.path.getsize(dest)} bytes)")
EOF
    fi
    # the one-GPU trainer built on the build machine (dev/gpu/prebuilt.sh, carried in
    # .carry/prebuilt) when it matches this tree and loads here; else built here
    if [ -z "$CUDA_TRAINER" ] && bash dev/gpu/prebuilt.sh install "$PREBUILT_TRAINER" > "$RUN/prebuilt.log" 2>&1; then
        echo "$PREBUILT_TRAINER" > "$RUN/cuda_trainer"
        sed -n 's/^prebuilt: /setup: prebuilt: /p' "$RUN/prebuilt.log"
    elif [ -z "$CUDA_TRAINER" ] || [ "$(basename "$CUDA_TRAINER")" = train_gpt2cu ]; then
        [ -f "$RUN/prebuilt.log" ] && echo "setup: $(tail -1 "$RUN/prebuilt.log")"
        env "${CUDA_MAKE[@]}" make train_gpt2cu > "$RUN/build.log" 2>&1 || { tail -20 "$RUN/build.log"; exit 1; }
        echo ./train_gpt2cu > "$RUN/cuda_trainer"
    fi
    command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    "$PYTHON" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
}

# the CUDA trainer: CUDA_TRAINER, else the one setup installed or built
cuda_trainer() {
    if [ -n "$CUDA_TRAINER" ]; then echo "$CUDA_TRAINER"; else cat "$RUN/cuda_trainer" 2> /dev/null || echo ./train_gpt2cu; fi
}

# run_trainer <name> <trainer> <B>: scripts/run_gpt2_124M_books.sh with this trainer into $RUN/<name>,
# until it finishes or this call's budget is spent (then SIGTERM: checkpoint, exit 0; call again)
run_trainer() {
    local name=$1 trainer=$2 b=$3 out="$RUN/$1" build=1 ld=${LD_LIBRARY_PATH:-} mk=()
    [ "$(basename "$trainer")" = train_gpt2cu ] && mk=("${CUDA_MAKE[@]}")  # its make's settings, as setup built it
    # the prebuilt binary: its libraries' folders as install found them (for its run only), and no
    # make (which would find it stale by its date and rebuild it)
    if [ "$trainer" = "$PREBUILT_TRAINER" ] && [ -f build/prebuilt/ld_library_path ]; then
        build=0
        ld=$(cat build/prebuilt/ld_library_path)
    fi
    if grep -q "^s:$STEPS tel:" "$out/main.log" 2>/dev/null; then echo "$name: already finished"; return; fi
    local t=$(($(left) - 30))
    [ $t -gt 60 ] || { echo "$name: not started, $(left) s left in this call; run the phase again"; return; }
    echo "$name: running for at most $t s ($trainer, B=$b)"
    # train_gpt2.py runs through its shebang: python3 on PATH is $PYTHON, through a script that
    # execs it by its own path (a symbolic link would not do: a virtual environment's python, as
    # on the GPU machine, finds its packages from the path it was started by)
    mkdir -p "$RUN/bin"
    rm -f "$RUN/bin/python3"
    printf '#!/bin/sh\nexec "%s" "$@"\n' "$(command -v "$PYTHON")" > "$RUN/bin/python3"
    chmod +x "$RUN/bin/python3"
    # ours also logs the GPU's clocks, power and throttling every 100 steps (-lg: stdout, metrics.jsonl)
    local own=""; [ "$name" = cuda ] && own="-lg 100"
    # the signal goes to the trainer alone (the script execs it; --foreground): torch.compile's worker
    # processes, in the same process group, would die of it mid-compile and fail the step
    # shellcheck disable=SC2086  # REPRO_FLAGS: extra trainer flags, word-split on purpose
    PATH="$(realpath "$RUN/bin"):$PATH" LD_LIBRARY_PATH="$ld" TRAINER="$trainer" BUILD=$build B="$b" OUT="$out" DATA_DIR="$DATA" \
        PYTHONUNBUFFERED=1 env "${mk[@]}" timeout --foreground --preserve-status -s TERM -k 120 "$t" \
        bash scripts/run_gpt2_124M_books.sh ${REPRO_FLAGS:-} $own >> "$RUN/$name.out" 2>&1 \
        || { echo "$name: the trainer failed:"; tail -5 "$RUN/$name.out"; exit 1; }
    if grep -q "^s:$STEPS tel:" "$out/main.log"; then echo "$name: finished"; else
        echo "$name: stopped after step $(($(grep -o '^s:[0-9]* trl' "$out/main.log" | tail -1 | grep -o '[0-9]*') + 1)) of $STEPS (time budget); run the phase again"
    fi
}

report() {
    local png="$RUN/repro_books.png"
    "$PYTHON" dev/plot_log.py "$RUN/cuda/main.log" "$RUN/torch/main.log" --label train_gpt2cu --label train_gpt2.py \
        --title "GPT-2 124M on the book corpus, one GPU: train_gpt2cu vs PyTorch DDP twin" -o "$png"
    "$PYTHON" - "$RUN" "$STEPS" <<'EOF' | tee "$RUN/summary.txt"
import re, statistics, sys
run, steps = sys.argv[1], int(sys.argv[2])
res = {}
for name in ("cuda", "torch"):
    last = {}
    for line in open(f"{run}/{name}/main.log"):
        f = dict(kv.split(":", 1) for kv in line.split()[:2])
        for key in ("tel", "hsw"):
            if key in f:
                last[key] = (int(f["s"]), float(f[key]))
    # errors="replace": generated samples may end inside a multi-byte character
    out = open(f"{run}/{name}.out", errors="replace").read()
    # per-step time of the step lines (evaluation, sampling and checkpoints are outside it);
    # the median leaves out the first step (compilation, warm-up) of every launch
    ms = [float(m) for m in re.findall(r"^step \d+/\d+ \|.*?\| ([0-9.]+) ms \|", out, re.M)]
    tok = int(re.search(r"total (\d+) tokens per step", out).group(1))
    trainer = re.search(r"^trainer (.*?) \|", out, re.M).group(1)
    res[name] = dict(val=last["tel"], hsw=last.get("hsw"), tps=tok / (statistics.median(ms) / 1000), n=len(ms), trainer=trainer)
    v = res[name]
    print(f"{name:5s} ({trainer}): val loss {v['val'][1]:.4f} at step {v['val'][0]}, HellaSwag "
          f"{v['hsw'][1] if v['hsw'] else float('nan'):.4f}, {v['tps']:,.0f} tok/s (median of {v['n']} steps)")
c, t = res["cuda"], res["torch"]
done = c["val"][0] == steps and t["val"][0] == steps
print(f"val-loss ratio train_gpt2cu / train_gpt2.py = {c['val'][1] / t['val'][1]:.4f} (target <= 1.01)"
      f"{'' if done else '  [a run has not reached step %d]' % steps}")
print(f"speed ratio train_gpt2cu / train_gpt2.py = {c['tps'] / t['tps']:.2f}x (target >= 2)")
EOF
    if [ -n "${OUT:-}" ]; then
        for n in cuda torch; do cp "$RUN/$n/main.log" "$OUT/main_$n.log"; cp "$RUN/$n.out" "$OUT/$n.out"; done
        cp "$png" "$RUN/summary.txt" "$OUT/"
    fi
}

[ $# -gt 0 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2; }
for phase in "$@"; do
    case $phase in
        prepare) prepare ;;
        setup) setup ;;
        cuda) run_trainer cuda "$(cuda_trainer)" "${B:-64}" ;;
        torch) run_trainer torch ./train_gpt2.py "$PY_B" ;;
        report) report ;;
        *) echo "unknown phase '$phase' (prepare setup cuda torch report)"; exit 2 ;;
    esac
done
