"""
How far a bf16 forward/backward of the PyTorch reference lands from its fp32 one, per tensor, as
max|bf16 - fp32| / max|fp32| (the measure test_gpt2.cu checks). It is the independent side of
the tolerances in test_gpt2.cu: the whole model cast to bf16 in PyTorch rounds at every
operation (also inside LayerNorm, GELU and the attention softmax, which the CUDA kernels compute
in fp32), so it overestimates the CUDA trainer's error; the CPU simulation of the CUDA kernels
(dev/test/test_cuda_sim.sh) measured 1.5x to 3.5x less on the L2:C128:H2 fixture.

usage: python dev/test/bf16_error_estimate.py <model> <B> <T> <seed>
  e.g. d12 4 64 2 (the d12 fixture of the Makefile), L2:C128:H2:T128 4 64 1 (tiny64)
"""
import copy
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import train_gpt2 as R  # noqa: E402


def run(model, x, y):
    model.zero_grad(set_to_none=False)
    logits, _ = model(x)
    loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1))
    loss.backward()
    return logits.float(), loss.item(), [t.float() for t in model.file_tensors(grads=True)]


def main():
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    desc, B, T, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    cfg = R.Config.from_descriptor(desc)
    ref = R.GPT(cfg)
    ref.init_weights(seed)
    g = torch.Generator().manual_seed(seed + 1)  # the batch train_gpt2.py --debug-state uses
    toks = torch.randint(0, cfg.vocab_size, (B * T + 1,), generator=g)
    x, y = toks[:-1].view(B, T), toks[1:].view(B, T)
    l32, loss32, g32 = run(ref, x, y)
    l16, loss16, g16 = run(copy.deepcopy(ref).to(torch.bfloat16), x, y)
    rel = lambda a, b: ((a - b).abs().max() / b.abs().max()).item()
    print(f"{desc} B={B} T={T}: logits {rel(l16, l32):.2e}, loss {abs(loss16 - loss32) / loss32:.2e} (relative)")
    for name, a, b in zip(R.PARAM_NAMES, g16, g32):
        print(f"  {name:9s} {rel(a, b):.2e}")
    n32 = math.sqrt(sum((t.double() ** 2).sum().item() for t in g32))
    n16 = math.sqrt(sum((t.double() ** 2).sum().item() for t in g16))
    print(f"  gradient norm {abs(n16 - n32) / n32:.2e} (relative)")


if __name__ == "__main__":
    main()
