"""
The PyTorch reference for GPT-2: the model the C and CUDA trainers are held against.

It writes the test fixtures:
  --write-model PATH      a model .bin (version 3 fp32, or 5 bf16 with --dtype bf16)
  --debug-state PATH      inputs, targets, logits, loss and all 16 parameter gradients for one batch
  --trajectory PATH       the loss (and gradient norm) of each of --steps AdamW steps on that batch

The model: learned position embeddings, pre-LayerNorm blocks, causal self-attention, tanh-GELU
MLP, final LayerNorm, LM head tied to wte, vocabulary padded to a multiple of 128 (the padded rows
start at zero and never receive a gradient). Written to run on torch 1.13 (Debian, CPU) and 2.x.

Examples:
  python train_gpt2.py --model L2:C64:H4 --seed 1 --write-model m.bin
  python train_gpt2.py --init-from m.bin --batch 4 --seq 32 --debug-state s.bin --trajectory t.txt --steps 10
"""
import argparse
import math
import re
import struct
import sys
import zlib

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

MODEL_MAGIC, DEBUG_MAGIC, SHARD_MAGIC = 20240326, 20240327, 20240520
CRC_TAG = 0x43524332  # header[252]; [253] = CRC-32 of the payload, [254] of the header (llmc/model_io.h)
PARAM_NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
               "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]


class Config:
    def __init__(self, n_layer, n_embd, n_head, block_size=1024, vocab_size=50257):
        self.n_layer, self.n_embd, self.n_head = n_layer, n_embd, n_head
        self.block_size, self.vocab_size = block_size, vocab_size
        self.padded_vocab_size = (vocab_size + 127) // 128 * 128

    @staticmethod
    def from_descriptor(desc):
        """d12/d24/d36/d48 (GPT-2 sizes), dN (C=64N, NH=N), or L2:C64:H4[:T256][:V512]."""
        m = re.fullmatch(r"d(\d+)", desc)
        if m:
            depth = int(m.group(1))
            sizes = {12: (768, 12), 24: (1024, 16), 36: (1280, 20), 48: (1600, 25)}
            c, h = sizes.get(depth, (64 * depth, depth))
            return Config(depth, c, h)
        fields = dict(L=None, C=None, H=None, T=1024, V=50257)
        for part in desc.split(":"):
            m = re.fullmatch(r"([LCHTV])(\d+)", part)
            if not m:
                raise SystemExit(f"error: bad model descriptor '{desc}' (expected e.g. d12 or L2:C64:H4)")
            fields[m.group(1)] = int(m.group(2))
        if None in (fields["L"], fields["C"], fields["H"]):
            raise SystemExit(f"error: descriptor '{desc}' needs L, C and H")
        return Config(fields["L"], fields["C"], fields["H"], fields["T"], fields["V"])


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C = cfg.n_embd
        self.n_head = cfg.n_head
        self.ln1 = nn.LayerNorm(C, eps=1e-5)
        self.qkv = nn.Linear(C, 3 * C)
        self.attproj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C, eps=1e-5)
        self.fc = nn.Linear(C, 4 * C)
        self.fcproj = nn.Linear(4 * C, C)
        mask = torch.tril(torch.ones(cfg.block_size, cfg.block_size, dtype=torch.bool))
        self.register_buffer("mask", mask, persistent=False)

    def attention(self, x):
        B, T, C = x.shape
        nh, hs = self.n_head, C // self.n_head
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, nh, hs).transpose(1, 2)  # (B, NH, T, HS)
        k = k.view(B, T, nh, hs).transpose(1, 2)
        v = v.view(B, T, nh, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, NH, T, T)
        att = att.masked_fill(~self.mask[:T, :T], float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.attproj(y)

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        x = x + self.fcproj(gelu_tanh(self.fc(self.ln2(x))))
        return x


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.padded_vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.lnf = nn.LayerNorm(cfg.n_embd, eps=1e-5)

    def init_weights(self, seed):
        g = torch.Generator().manual_seed(seed)
        std_resid = 0.02 / math.sqrt(2 * self.cfg.n_layer)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("attproj.weight") or name.endswith("fcproj.weight"):
                    p.copy_(torch.randn(p.shape, generator=g) * std_resid)
                elif p.dim() == 2:
                    p.copy_(torch.randn(p.shape, generator=g) * 0.02)
                elif ".ln" in name or name.startswith("ln"):
                    p.fill_(1.0 if name.endswith("weight") else 0.0)
                else:
                    p.zero_()
            self.wte.weight[self.cfg.vocab_size:].zero_()

    def forward(self, idx, targets=None):
        B, T = idx.shape
        pos = torch.arange(T, dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        x = self.lnf(x)
        logits = x @ self.wte.weight.t()  # tied LM head, (B, T, Vp)
        logits = logits[:, :, : self.cfg.vocab_size]  # padded columns never take part
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss

    # the 16 tensors in llm.c's file order, layers stacked; Linear weights are (out, in) as in the file
    def file_tensors(self, grads=False):
        def t(p):
            return p.grad if grads else p.data
        b = self.blocks
        stack = lambda f: torch.stack([t(f(blk)) for blk in b])
        return [t(self.wte.weight), t(self.wpe.weight),
                stack(lambda x: x.ln1.weight), stack(lambda x: x.ln1.bias),
                stack(lambda x: x.qkv.weight), stack(lambda x: x.qkv.bias),
                stack(lambda x: x.attproj.weight), stack(lambda x: x.attproj.bias),
                stack(lambda x: x.ln2.weight), stack(lambda x: x.ln2.bias),
                stack(lambda x: x.fc.weight), stack(lambda x: x.fc.bias),
                stack(lambda x: x.fcproj.weight), stack(lambda x: x.fcproj.bias),
                t(self.lnf.weight), t(self.lnf.bias)]

    def load_file_tensors(self, tensors):
        with torch.no_grad():
            self.wte.weight.copy_(tensors[0])
            self.wpe.weight.copy_(tensors[1])
            for i, blk in enumerate(self.blocks):
                for mod, w, bias in ((blk.ln1, 2, 3), (blk.qkv, 4, 5), (blk.attproj, 6, 7),
                                     (blk.ln2, 8, 9), (blk.fc, 10, 11), (blk.fcproj, 12, 13)):
                    mod.weight.copy_(tensors[w][i])
                    mod.bias.copy_(tensors[bias][i])
            self.lnf.weight.copy_(tensors[14])
            self.lnf.bias.copy_(tensors[15])


def param_shapes(cfg):
    L, C, Vp, maxT = cfg.n_layer, cfg.n_embd, cfg.padded_vocab_size, cfg.block_size
    return [(Vp, C), (maxT, C), (L, C), (L, C), (L, 3 * C, C), (L, 3 * C), (L, C, C), (L, C),
            (L, C), (L, C), (L, 4 * C, C), (L, 4 * C), (L, C, 4 * C), (L, C), (C,), (C,)]


def header_ints(values):
    h = np.zeros(256, dtype=np.int32)
    h[: len(values)] = values
    return h


def write_model(model, path, dtype):
    cfg = model.cfg
    version = 3 if dtype == "fp32" else 5
    parts = []
    for t in model.file_tensors():
        t = t.detach().contiguous().float()
        if version == 3:
            parts.append(t.numpy().astype("<f4").tobytes())
        else:
            parts.append(t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes())
    payload = b"".join(parts)
    h = header_ints([MODEL_MAGIC, version, cfg.block_size, cfg.vocab_size, cfg.n_layer,
                     cfg.n_head, cfg.n_embd, cfg.padded_vocab_size])
    h[252] = CRC_TAG
    h[253] = np.array([zlib.crc32(payload)], dtype=np.uint32).view(np.int32)[0]
    h[254] = np.array([zlib.crc32(h.astype("<i4").tobytes())], dtype=np.uint32).view(np.int32)[0]  # [254] is 0 here
    with open(path, "wb") as f:
        f.write(h.astype("<i4").tobytes())
        f.write(payload)
    print(f"wrote {path} (version {version}, {sum(p.numel() for p in model.file_tensors()):,} parameters)")


def read_model(path):
    with open(path, "rb") as f:
        h = np.frombuffer(f.read(1024), dtype="<i4")
        if h[0] != MODEL_MAGIC or h[1] not in (3, 5):
            raise SystemExit(f"error: {path} is not a version 3/5 GPT-2 model file")
        maxT, V, L, NH, C, Vp = (int(x) for x in h[2:8])
        cfg = Config(L, C, NH, maxT, V)
        assert cfg.padded_vocab_size == Vp, f"{path}: padded vocab {Vp} is not V rounded up to 128"
        tensors = []
        for shape in param_shapes(cfg):
            n = int(np.prod(shape))
            if h[1] == 3:
                a = np.frombuffer(f.read(4 * n), dtype="<f4").copy()
                tensors.append(torch.from_numpy(a).view(shape))
            else:
                a = np.frombuffer(f.read(2 * n), dtype="<i2").copy()
                tensors.append(torch.from_numpy(a).view(torch.bfloat16).float().view(shape))
    model = GPT(cfg)
    model.load_file_tensors(tensors)
    return model


def read_tokens(path, count, offset=0):
    with open(path, "rb") as f:
        h = np.frombuffer(f.read(1024), dtype="<i4")
        if h[0] != SHARD_MAGIC:
            raise SystemExit(f"error: {path} is not a token shard (magic {h[0]})")
        f.seek(1024 + 2 * offset)
        toks = np.frombuffer(f.read(2 * count), dtype="<u2").astype(np.int64)
    if len(toks) < count:
        raise SystemExit(f"error: {path} has fewer than {offset + count} tokens")
    return torch.from_numpy(toks)


def write_debug_state(model, x, y, path):
    B, T = x.shape
    model.zero_grad(set_to_none=False)
    logits, loss = model(x, y)
    loss.backward()
    h = header_ints([DEBUG_MAGIC, 2, B, T])
    with open(path, "wb") as f:
        f.write(h.astype("<i4").tobytes())
        f.write(x.numpy().astype("<i4").tobytes())
        f.write(y.numpy().astype("<i4").tobytes())
        f.write(logits.detach().numpy().astype("<f4").tobytes())
        f.write(np.array([loss.item()], dtype="<f4").tobytes())
        for g in model.file_tensors(grads=True):
            f.write(g.detach().contiguous().numpy().astype("<f4").tobytes())
    print(f"wrote {path} (B={B} T={T} loss {loss.item():.6f})")


def run_trajectory(model, x, y, steps, lr, wd, path):
    """AdamW(0.9, 0.95, eps 1e-8), decay on 2-D tensors only, global-norm clip at 1.0, constant lr."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": wd},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95), eps=1e-8)
    lines = [f"# lr {lr!r} wd {wd!r} beta1 0.9 beta2 0.95 eps 1e-8 clip 1.0 steps {steps}"]
    for step in range(steps):
        opt.zero_grad(set_to_none=False)
        _, loss = model(x, y)
        loss.backward()
        # global-norm clipping at 1.0 with torch.nn.utils.clip_grad_norm_'s formula, but the norm
        # summed in float64: torch 1.13's fp32 norm is off by ~1e-5 relative on large models
        norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in model.parameters()))
        coef = min(1.0, 1.0 / (float(norm) + 1e-6))
        for p in model.parameters():
            p.grad.mul_(coef)
        opt.step()
        lines.append(f"{step} {loss.item():.9g} {float(norm):.9g}")
        print(f"step {step}: loss {loss.item():.6f} norm {float(norm):.4f}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="d12", help="descriptor: d12, d24, d36, d48, dN or L2:C64:H4[:T..][:V..]")
    ap.add_argument("--init-from", help="start from this model .bin instead of a random init")
    ap.add_argument("--seed", type=int, default=1337, help="seed of the random init and of random batches")
    ap.add_argument("--write-model", help="write the model (before any training step) to this .bin")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32", help="model file version 3 or 5")
    ap.add_argument("--batch", type=int, default=4, help="B of the debug batch")
    ap.add_argument("--seq", type=int, default=64, help="T of the debug batch")
    ap.add_argument("--tokens", help="take the debug batch from the start of this token shard (else random ids)")
    ap.add_argument("--debug-state", help="write the debug state for the batch here")
    ap.add_argument("--trajectory", help="write the per-step loss of --steps AdamW steps here")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    if args.init_from:
        model = read_model(args.init_from)
    else:
        model = GPT(Config.from_descriptor(args.model))
        model.init_weights(args.seed)
    cfg = model.cfg
    if args.write_model:
        write_model(model, args.write_model, args.dtype)
    if args.debug_state or args.trajectory:
        B, T = args.batch, args.seq
        if T > cfg.block_size:
            raise SystemExit(f"error: --seq {T} is larger than the model's max_seq_len {cfg.block_size}")
        if args.tokens:
            toks = read_tokens(args.tokens, B * T + 1)
            if int(toks.max()) >= cfg.vocab_size:
                raise SystemExit(f"error: {args.tokens} has token ids >= vocab size {cfg.vocab_size}")
        else:
            g = torch.Generator().manual_seed(args.seed + 1)
            toks = torch.randint(0, cfg.vocab_size, (B * T + 1,), generator=g)
        x, y = toks[:-1].view(B, T).clone(), toks[1:].view(B, T).clone()
        if args.debug_state:
            write_debug_state(model, x, y, args.debug_state)
        if args.trajectory:
            run_trajectory(model, x, y, args.steps, args.lr, args.weight_decay, args.trajectory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
