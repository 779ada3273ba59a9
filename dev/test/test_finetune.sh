#!/usr/bin/env bash
# scripts/finetune_gpt2.sh end to end without a network, on the CPU trainer: a small GPT-2 in the
# hub's safetensors layout (no "transformer." prefix, attention-mask buffers, config.json) stands
# in for openai-community/gpt2; the recipe converts it, prepares Tiny Shakespeare and fine-tunes
# it for a handful of steps. Checks:
#  - the converted model's starting val loss equals the loss transformers computes for the same
#    safetensors folder on the same val windows (an independent check that the weights loaded right);
#  - the val loss goes down from there, the fine-tuned model is saved, a relaunch says the run is complete;
#  - the GPU plan (DRY_RUN=1 with a stand-in nvidia-smi) for all four sizes: batch arithmetic that
#    divides, the recipe's hyperparameters, the hub's URLs; bad model names and folders.
# Tiny Shakespeare and the GPT-2 tokenizer files come from dev/data/embedded (the recipes' default,
# no network); needs $PYTHON with torch and transformers.
source "$(dirname "$0")/lib.sh" test_finetune
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=2
# the recipes' defaults: Tiny Shakespeare and OpenAI's files unpacked from dev/data/embedded into DATA_DIR
unset GPT2_DIR TINYSHAKESPEARE DOWNLOAD
export DATA_DIR="$TMP/data" TOKENIZER_BIN="$TMP/gpt2_tokenizer.bin"

# ---- a small "GPT-2", pretrained for a few steps (so that its biases and LayerNorms are no longer
# 0 and 1, which would hide a misplaced one), exported and rewritten in the hub's layout
(cd "$ROOT" && bash dev/data/tinyshakespeare.sh) > data.out 2>&1 || { bad "dev/data/tinyshakespeare.sh failed"; tail -3 data.out; }
"$ROOT/train_gpt2" -i "$DATA_DIR/tinyshakespeare/tiny_shakespeare_train.bin" -e L2:C128:H2:T256 -b 4 -t 64 -d 1024 \
    -x 6 -l 1e-2 -v 0 -s 0 -o pre -n 6 > pre.out 2>&1 || { bad "pretraining the small model failed"; tail -3 pre.out; }
"$ROOT/export_hf" -i pre/model_00000006.bin -o exported > export.out 2>&1 || { bad "export_hf failed"; cat export.out; }
$PY - <<'EOF' || bad "writing the hub layout"
import os, shutil, torch
from safetensors.torch import load_file, save_file
t = load_file("exported/model.safetensors")
hub = {k[len("transformer."):]: v for k, v in t.items()}
for l in range(2):  # the buffers the hub's gpt2 files carry
    hub[f"h.{l}.attn.bias"] = torch.tril(torch.ones(256, 256)).view(1, 1, 256, 256)
    hub[f"h.{l}.attn.masked_bias"] = torch.tensor(-1e4)
os.makedirs("gpt2-small-test")
save_file(hub, "gpt2-small-test/model.safetensors", metadata={"format": "pt"})
shutil.copy("exported/config.json", "gpt2-small-test/config.json")
EOF

# ---- the recipe, with a handful of steps at T=64 (the recipe's lr, warmup, schedule and decay)
RUN=(-t 64 -b 4 -d 1024 -x 8 -v 4 -m 8 -s 0)
(cd "$ROOT" && HF_DIR="$TMP/gpt2-small-test" OUT="$TMP/out" bash scripts/finetune_gpt2.sh "${RUN[@]}") > run.out 2>&1 \
    || { bad "the recipe failed"; tail -5 run.out; }
bin="$DATA_DIR/hf/gpt2-small-test.bin"
[ -f "$bin" ] && echo "ok   converted to $(basename "$bin")" || bad "no converted model at $bin"
grep -q "^./train_gpt2 -e $bin .* -l 3e-5 -u 2 -q 1.0 -c 0 " run.out || bad "the CPU trainer command does not carry the recipe"
[ -f out/model_00000008.bin ] && [ -f out/DONE_00000008 ] || bad "the fine-tuned model was not saved"

# the starting loss: the trainer's val loss at step 0 against transformers on the same windows
$PY - "$DATA_DIR/tinyshakespeare/tiny_shakespeare_val.bin" out/main.log <<'EOF' || bad "starting loss vs transformers"
import sys, numpy as np, torch
import torch.nn.functional as F
from transformers import GPT2LMHeadModel
val, log = sys.argv[1:]
toks = np.fromfile(val, dtype="<u2", offset=1024).astype(np.int64)
T, M = 64, 8 * 4                      # -t 64, -m 8 batches of -b 4: windows j*T .. j*T+T
x = torch.tensor(np.stack([toks[j * T:j * T + T] for j in range(M)]))
y = torch.tensor(np.stack([toks[j * T + 1:j * T + T + 1] for j in range(M)]))
model = GPT2LMHeadModel.from_pretrained("gpt2-small-test", torch_dtype=torch.float32).eval()
with torch.no_grad():
    want = F.cross_entropy(model(x).logits.reshape(-1, model.config.vocab_size), y.reshape(-1)).item()
tel = {int(l.split()[0][2:]): float(l.split()[1][4:]) for l in open(log) if " tel:" in l}
got = tel[0]
# both sides are fp32 on the same weights; only summation order separates them (measured ~1e-7
# relative); a misplaced or untransposed tensor moves the loss by far more than 1e-5
rel = abs(got - want) / want
print(f"{'ok  ' if rel < 1e-5 else 'FAIL'} starting val loss {got:.6f} = transformers {want:.6f} (relative {rel:.1e})")
# the val loss (the same windows each time; a train loss is of a different batch at every step)
down = tel[8] < tel[4] < tel[0]
print(f"{'ok  ' if down else 'FAIL'} val loss goes down: {tel[0]:.6f} (start), {tel[4]:.6f} (4 steps), {tel[8]:.6f} (8 steps)")
sys.exit(0 if rel < 1e-5 and down else 1)
EOF

# relaunched: the recipe resumes (-y 1), and the finished run says so; the conversion is not redone
before=$(stat -c %Y.%i "$bin")
(cd "$ROOT" && HF_DIR="$TMP/gpt2-small-test" OUT="$TMP/out" bash scripts/finetune_gpt2.sh "${RUN[@]}") > again.out 2>&1 \
    && grep -q "^run complete: checkpoint 8" again.out && [ "$(stat -c %Y.%i "$bin")" = "$before" ] \
    && echo "ok   relaunched, not converted again: $(grep '^run complete' again.out)" || { bad "relaunch"; tail -3 again.out; }

# a fine-tune resumed where its base model file is gone (deleted, or on another machine): -y 1
# takes the model from the newest checkpoint and trains on as the uninterrupted run (both trainers)
cp pre/model_00000006.bin base.bin
FT=(-i "$DATA_DIR/tinyshakespeare/tiny_shakespeare_train.bin" -e base.bin -b 4 -t 64 -d 1024 -x 4 -v 0 -s 0 -n 2)
"$ROOT/train_gpt2" "${FT[@]}" -o ftc > ftc.out 2>&1 || bad "fine-tune from base.bin failed"
$PY "$ROOT/train_gpt2.py" "${FT[@]}" -o ftp > ftp.out 2>&1 || bad "train_gpt2.py: fine-tune from base.bin failed"
rm base.bin
for t in c p; do
    cp -r ft$t ft${t}2 && rm ft${t}2/DONE_00000004
    if [ $t = c ]; then "$ROOT/train_gpt2" "${FT[@]}" -o ftc2 -y 1 > ftc2.out 2>&1; else $PY "$ROOT/train_gpt2.py" "${FT[@]}" -o ftp2 -y 1 > ftp2.out 2>&1; fi
    grep -qx -- "-e base.bin is not there: -y 1 takes the model from checkpoint 2 in ft${t}2 (ft${t}2/model_00000002.bin)" ft${t}2.out \
        && compare_logs ft$t/main.log ft${t}2/main.log trl=0 --last 2 > cmp.out \
        && echo "ok   $t: $(head -n 1 ft${t}2.out); steps 3-4 $(head -n 1 cmp.out | sed 's/^ *//')" \
        || { bad "$t: resuming a fine-tune whose -e file is gone"; head -n 3 ft${t}2.out; cat cmp.out; }
done

# ---- no HF_DIR: the hub's files are downloaded once into DATA_DIR/hf/gpt2 (a stand-in curl serves
# the small model under the hub's names), converted, and trained on; its own DATA_DIR, so that the
# plans below still see nothing downloaded
mkdir -p hub && cp gpt2-small-test/config.json gpt2-small-test/model.safetensors hub/
stand_in_curl fakecurl
(cd "$ROOT" && PATH="$TMP/fakecurl:$PATH" FAKE_NET="$TMP/hub" OUT="$TMP/out_dl" DATA_DIR="$TMP/dl" \
    bash scripts/finetune_gpt2.sh gpt2 -t 64 -b 4 -d 1024 -x 1 -v 0 -s 0) > dl.out 2>&1 || { bad "the download run failed"; tail -3 dl.out; }
n=$(grep -c -e '^https://huggingface.co/openai-community/gpt2/resolve/main/config.json$' \
    -e '^https://huggingface.co/openai-community/gpt2/resolve/main/model.safetensors$' hub/requests.log 2>/dev/null)
cmp -s hub/model.safetensors dl/hf/gpt2/model.safetensors && [ "$n" = 2 ] && [ -f dl/hf/gpt2.bin ] \
    && [ -f out_dl/DONE_00000001 ] && [ -z "$(ls dl/hf/gpt2 | grep '\.part$')" ] \
    && ok "no HF_DIR: the hub's two files downloaded into \$DATA_DIR/hf/gpt2, converted, trained" \
    || { bad "the download path"; cat hub/requests.log 2>/dev/null; ls dl/hf/gpt2 2>/dev/null; tail -3 dl.out; }

# ---- the GPU plan for each size, with a stand-in nvidia-smi
mkdir -p fakebin
printf '#!/bin/sh\necho "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)"\n' > fakebin/nvidia-smi
chmod +x fakebin/nvidia-smi
for m in gpt2 gpt2-medium gpt2-large gpt2-xl; do
    plan=$(cd "$ROOT" && PATH="$TMP/fakebin:$PATH" DRY_RUN=1 bash scripts/finetune_gpt2.sh $m 2>&1)
    cmd=$(echo "$plan" | grep '^./train_gpt2cu ')
    b=$(echo "$cmd" | grep -o ' -b [0-9]*' | cut -d' ' -f3)
    if echo "$plan" | grep -q "^download: https://huggingface.co/openai-community/$m/resolve/main/{config.json,model.safetensors}" &&
       echo "$cmd" | grep -q -- "-e $DATA_DIR/hf/$m.bin .* -l 3e-5 -u 2 -q 1.0 -c 0 .* -t 1024 -d 32768 -x 20 " &&
       [ -n "$b" ] && [ $((32768 % (b * 1024))) -eq 0 ]; then
        echo "ok   GPU plan for $m: -b $b, $((32768 / (b * 1024))) micro-step(s) per step"
    else
        bad "GPU plan for $m"; echo "$plan" | head -4
    fi
done
# a second local folder of the same name (another run's checkpoint folder): refused, naming the first
# (it took the first one's converted file, and its output folder resumed the first fine-tune)
mkdir -p other/gpt2-small-test && cp gpt2-small-test/* other/gpt2-small-test/ && touch -d '2000-01-01' other/gpt2-small-test/model.safetensors
out=$(cd "$ROOT" && HF_DIR="$TMP/other/gpt2-small-test" OUT="$TMP/out_other" bash scripts/finetune_gpt2.sh "${RUN[@]}" 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q "^error: .*gpt2-small-test.bin was converted from $TMP/gpt2-small-test/model.safetensors, not $TMP/other/gpt2-small-test/model.safetensors" \
    && [ ! -e out_other ] && echo "ok   a second folder of the same name: $(echo "$out" | cut -c1-120)" || bad "a second folder of the same name: $out"
out=$(cd "$ROOT" && bash scripts/finetune_gpt2.sh gpt3 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q "^error: unknown model 'gpt3'" && echo "ok   $out" || bad "unknown model name: $out"
mkdir -p empty
out=$(cd "$ROOT" && HF_DIR="$TMP/empty" bash scripts/finetune_gpt2.sh 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q "^error: HF folder '$TMP/empty' has no model.safetensors" && echo "ok   $out" || bad "empty HF folder: $out"
finish
