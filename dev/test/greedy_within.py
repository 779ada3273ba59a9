"""
Greedy decoding as a test: a sharp model to decode (`make`), and a bf16 trainer's greedy text
(train_gpt2cu --prompt ... --temperature 0) held against fp32 up to bf16's rounding (`check`),
where it cannot be compared byte for byte with the fp32 trainers' (a top-1/top-2 gap below bf16's
rounding flips a token, and the texts part from there on).

  python greedy_within.py make <model.bin> [<descriptor> <seed> <lnf> <wpe> <attproj> [<qk>] | window256]
      a random model scaled so that greedy decoding is a sharp test: the final LayerNorm gain x<lnf>
      spreads the logits apart, the position embeddings x<wpe> and the attention output
      projections x<attproj> make the next token depend on the position and the context. By
      default the model of `check`: 128 tokens (GPT-2's ids 0-127, each one byte, so that printed
      bytes are token ids), head size 64 (the fused attention's), maxT 64, seed 8, x1000, x30,
      x30: its logits spread over hundreds of units (top-1/top-2 gaps on the prompt "a|b":
      median 70, smallest 1.6). Its attention is all but uniform (LayerNorm undoes x<wpe>, and
      random queries and keys score near 0), so a mistake that reweights far keys barely moves
      it; the query and key weights x<qk> make the scores sharp, so that it does. `window256`
      is the tests' such model (WINDOW256 below: maxT 256, x4): a combine of the generation
      kernel's key splits that drops their rescaling puts a token 152 below fp32's largest logit
      there, where the right one stays within 1.3
  python greedy_within.py check <model.bin> <gpt2 dir> <prompt> <printed text> <tol>
      with the printed text as the context (teacher forcing; the window the last maxT tokens), each
      printed token's fp32 logit (the PyTorch reference, train_gpt2.py) must be within tol of the
      largest. bf16's rounding leaves its tokens within about 2; a wrong context (a window one
      token short) puts them hundreds below.
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import train_gpt2 as ref  # noqa: E402

# `make <model.bin> window256`: the default model at a 256-token window with sharp attention, whose
# decoding passes rows of more than 128 keys (split over CTAs on a GPU) through the attention
WINDOW256 = ("L2:C128:H2:T256:V128", "8", "1000", "30", "30", "4")


def make(path, descriptor="L2:C128:H2:T64:V128", seed="8", lnf="1000", wpe="30", attproj="30", qk="1"):
    model = ref.GPT(ref.Config.from_descriptor(descriptor))
    model.init_weights(int(seed))
    with torch.no_grad():
        model.lnf.weight *= float(lnf)
        model.wpe.weight *= float(wpe)
        for block in model.blocks:
            block.attproj.weight *= float(attproj)
            block.qkv.weight[:2 * model.cfg.n_embd] *= float(qk)  # the query and key rows, not the values
    ref.write_model(model, path, "fp32")


def check(model_path, gpt2_dir, prompt, printed, tol):
    from tokenizer_ref import load_tiktoken
    model, enc = ref.read_model(model_path).eval(), load_tiktoken(gpt2_dir)
    V, T = model.cfg.vocab_size, model.cfg.block_size
    if V > 256:
        sys.exit("error: the printed bytes are the token ids only for a model of at most 256 tokens")
    byte_id = {enc.decode_single_token_bytes(i)[0]: i for i in range(V)}
    text, head = open(printed, "rb").read(), prompt.encode()
    if not (text.startswith(head) and text.endswith(b"\n")) or any(b not in byte_id for b in text[len(head):-1]):
        sys.exit(f"error: {printed} is not the prompt, a continuation of the model's tokens and a newline: {text[:80]!r}")
    ids = enc.encode_ordinary(prompt)
    n_prompt = len(ids)
    ids += [byte_id[b] for b in text[len(head):-1]]
    worst, where = 0.0, None
    with torch.no_grad():
        for n in range(n_prompt, len(ids)):
            logits = model(torch.tensor([ids[max(0, n - T):n]]))[0][0, -1, :V]
            below = float(logits.max() - logits[ids[n]])
            if below > worst:
                worst, where = below, n - n_prompt
    print(f"  {len(ids) - n_prompt} tokens, each within {worst:.3g} of fp32's largest logit (tolerance {tol:g}"
          f"{f'; the farthest: token {where}' if where is not None else ''})")
    return worst <= tol


if __name__ == "__main__":
    if sys.argv[1:2] == ["make"] and sys.argv[3:] == ["window256"]:
        make(sys.argv[2], *WINDOW256)
    elif sys.argv[1:2] == ["make"] and len(sys.argv) in (3, 8, 9):
        make(*sys.argv[2:])
    elif sys.argv[1:2] == ["check"] and len(sys.argv) == 7:
        sys.exit(0 if check(*sys.argv[2:6], float(sys.argv[6])) else 1)
    else:
        sys.exit(__doc__)
