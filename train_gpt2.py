#!/usr/bin/env python3
"""
The PyTorch reference for GPT-2: the model the C and CUDA trainers are held against, and their
DDP twin.

Training (every command line without a fixture output below): the flags (-b 16 or --batch 16),
defaults, data layout, schedule, clipping, AdamW (and Muon with -opt muon), step line, main.log
and checkpoint files of ./train_gpt2 and ./train_gpt2cu (llmc/), so that at the same flags the
same tokens meet the same step and the losses agree:
  python3 train_gpt2.py -i "data/books/books_train_*.bin" -j "data/books/books_val_*.bin" -e d12 -b 16 -t 1024
  torchrun --nproc_per_node=8 train_gpt2.py -e d12 -b 16 -t 1024 -d 524288 ...   (DDP, NCCL on GPUs, gloo on CPUs)
Under torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) it is DistributedDataParallel:
gradient accumulation with no_sync on all but the last micro-step, only rank 0 prints and writes.
On a GPU: bf16 autocast, fused AdamW, scaled_dot_product_attention and torch.compile where the
installed torch has them. `python3 train_gpt2.py -help` lists the training flags.

Test fixtures (a command line with one of these three writes fixtures and does not train):
  --write-model PATH      a model .bin (version 3 fp32, or 5 bf16 with --dtype bf16)
  --debug-state PATH      inputs, targets, logits, loss and all 16 parameter gradients for one batch
  --trajectory PATH       the loss (and gradient norm) of each of --steps AdamW steps on that batch

The model: learned position embeddings, pre-LayerNorm blocks, causal self-attention, tanh-GELU
MLP, final LayerNorm, LM head tied to wte, vocabulary padded to a multiple of 128 (the padded rows
start at zero and never receive a gradient). Written to run on torch 1.13 (Debian, CPU) and 2.x.

Examples:
  python3 train_gpt2.py --model L2:C64:H4 --seed 1 --write-model m.bin
  python3 train_gpt2.py --init-from m.bin --batch 4 --seq 32 --debug-state s.bin --trajectory t.txt --steps 10
"""
import argparse
import bisect
import collections
import contextlib
import datetime
import errno
import fcntl
import glob
import inspect
import json
import math
import os
import re
import signal
import stat
import sys
import time
import traceback
import types
import zlib

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

MODEL_MAGIC, DEBUG_MAGIC, SHARD_MAGIC = 20240326, 20240327, 20240520
SHARD_HINT = "make shards with ./gpt2_tokenize or the recipes in dev/data/"
STATE_MAGIC, STATE_VERSION, EVAL_MAGIC, TOKENIZER_MAGIC = 20240527, 2, 20240522, 20240328
# header[252]: "2CRC": CRC-32s of the payload and of the header itself (llmc/model_io.h, checkpoint.h);
# "1CRC" files, written before the header CRC, have payload CRCs only and are still read
CRC_TAG, CRC_TAG_V1 = 0x43524332, 0x43524331
PARAM_NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
               "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]
DECAYED = (0, 1, 4, 6, 10, 12)  # the 2-D tensors: embeddings and matmul weights (model_io.h)
MUON_TENSORS = (4, 6, 10, 12)  # the blocks' matrices that -opt muon updates: qkvw attprojw fcw fcprojw (llmc/muon.h)
MUON_NS = (3.4445, -4.7750, 2.0315)  # the quintic Newton-Schulz coefficients (llmc/muon.h)
EOT = 50256
CKPT_MAX_FAILURES = 3  # failed checkpoints in a row that stop a run (llmc/checkpoint.h)
U64 = (1 << 64) - 1


def die(msg):
    """one line 'error: ...' (with the rank when several run) and exit 1, as llmc_die does; under torchrun also
    into its agent's error file, the root cause of its failure summary (llmc_fatal_line)"""
    print(f"{RANK_PREFIX}error: {msg}", file=sys.stderr, flush=True)
    if os.environ.get("TORCHELASTIC_ERROR_FILE"):
        line = f"error: {msg}"
        with contextlib.suppress(OSError), open(os.environ["TORCHELASTIC_ERROR_FILE"], "w") as f:
            json.dump({"message": {"message": line, "extraInfo": {"py_callstack": line,
                                                                  "timestamp": str(int(time.time()))}}}, f)
    raise SystemExit(1)


def not_a_file(path):
    """None for a regular file, else why not, in llmc/utils.h's words ("not found", "is a folder, not a file"):
    only regular files are read (a FIFO blocks the open until a writer comes, a device never ends)"""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "not found"
    except OSError as e:
        return f"cannot be opened: {e.strerror}"
    if stat.S_ISREG(mode):
        return None
    return ("is a folder, not a file" if stat.S_ISDIR(mode) else "is a FIFO (named pipe), not a regular file"
            if stat.S_ISFIFO(mode) else "is a device, not a regular file" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "is not a regular file")


def one_line(e):
    """an exception's first line, for an error line"""
    text = str(e).strip().splitlines()
    return text[0].rstrip(".") if text else type(e).__name__


PEER_LOST = re.compile(r"Connection (reset|closed) by peer|Broken pipe|[Tt]imed? ?out|Socket Timeout|NCCL error|"
                       r"ProcessGroup\w* .*(abort|terminat)", re.S)  # gloo's and NCCL's words for a rank gone


def warn(msg):
    print(f"{RANK_PREFIX}warning: {msg}", file=sys.stderr, flush=True)


RANK_PREFIX = ""  # "[rank r] " once several processes run


class Config:
    def __init__(self, n_layer, n_embd, n_head, block_size=1024, vocab_size=50257, padded_vocab_size=None):
        self.n_layer, self.n_embd, self.n_head = n_layer, n_embd, n_head
        self.block_size, self.vocab_size = block_size, vocab_size
        # V rounded up to 128 where this trainer makes the model; a file's header may say otherwise (any Vp >= V)
        self.padded_vocab_size = (vocab_size + 127) // 128 * 128 if padded_vocab_size is None else padded_vocab_size

    @staticmethod
    def from_descriptor(desc, flag="--model"):
        """d12/d24/d36/d48 (GPT-2 sizes), d60/d72/d84 (llm.c's), dN (C=64N, NH=N), gpt2:dN, gpt3:cN
        (llm.c's GPT-3 shapes, maxT 2048), or L2:C64:H4[:T256][:V512], checked as gpt2_parse_descriptor
        (model_io.h) checks it; a bad one ends the run with an error naming flag."""
        m = re.fullmatch(r"(?:gpt2:)?d([0-9]+)", desc)
        g = re.fullmatch(r"gpt3:c([0-9]+)", desc)
        if m:
            depth = int(m.group(1)) if len(m.group(1)) <= 7 else 0
            if not 1 <= depth <= 1000:
                die(f"{flag} {desc}: depth must be in 1..1000")
            sizes = {12: (768, 12), 24: (1024, 16), 36: (1280, 20), 48: (1600, 25), 60: (1920, 30), 72: (2880, 30),
                     84: (3456, 36)}
            c, h = sizes.get(depth, (64 * depth, depth))
            cfg = Config(depth, c, h)
        elif g:
            shapes = {384: (6, 64), 768: (12, 64), 1024: (24, 64), 1536: (24, 96), 2048: (24, 128), 2560: (32, 80),
                      4096: (32, 128), 12288: (96, 128)}  # channels: (layers, head size)
            c = int(g.group(1)) if len(g.group(1)) <= 7 else 0
            if c not in shapes:
                die(f"{flag} {desc}: GPT-3 shapes are gpt3:c384, c768, c1024, c1536, c2048, c2560, c4096 and c12288 "
                    f"(the channels); for another shape use L<layers>:C<channels>:H<heads>:T2048")
            cfg = Config(shapes[c][0], c, c // shapes[c][1], block_size=2048)
        else:  # L<n>:C<n>:H<n>[:T<n>][:V<n>], read as gpt2_parse_descriptor reads it
            fields, p = dict(L=None, C=None, H=None, T=1024, V=50257), 0
            while p < len(desc):
                key, p = desc[p], p + 1
                digits = re.match(r"[0-9]*", desc[p:]).group()
                p += len(digits)
                if not 1 <= len(digits) <= 7 or int(digits) == 0 or desc[p:] == ":":
                    die(f"{flag} {desc}: bad descriptor; expected e.g. L2:C64:H4 or L2:C64:H4:T256:V512")
                if key not in fields:
                    die(f"{flag} {desc}: unknown descriptor field '{key}' (fields: L C H T V)")
                fields[key] = int(digits)
                if desc[p:p + 1] == ":":
                    p += 1
                elif p < len(desc):
                    die(f"{flag} {desc}: bad descriptor; fields are separated by ':' as in L2:C64:H4")
            if None in (fields["L"], fields["C"], fields["H"]):
                die(f"{flag} {desc}: a descriptor needs L, C and H, e.g. L2:C64:H4")
            cfg = Config(fields["L"], fields["C"], fields["H"], fields["T"], fields["V"])
        problem = cfg.problem()
        if problem:
            die(f"{flag} {desc}: {problem}")
        return cfg

    def problem(self):
        """what is wrong with this configuration (gpt2_config_problem, with its bounds), or None"""
        if not 0 < self.n_layer <= 16384:
            return "number of layers must be in 1..16384"
        if not 0 < self.n_embd <= 65536:
            return "channels must be in 1..65536"
        if self.n_head <= 0:
            return "number of heads must be positive"
        if self.n_embd % self.n_head:
            return "channels must be divisible by the number of heads"
        if not 0 < self.vocab_size <= 65536:
            return "vocab size must be in 1..65536 (tokens are uint16)"
        if self.padded_vocab_size < self.vocab_size:
            return "padded vocab size is smaller than the vocab size"
        if self.padded_vocab_size > 1 << 17:
            return "padded vocab size must be at most 131072"
        if not 0 < self.block_size <= 1 << 20:
            return "max sequence length must be in 1..1048576"
        return None

    def key(self):
        return (self.block_size, self.vocab_size, self.padded_vocab_size, self.n_layer, self.n_head, self.n_embd)

    def describe(self):
        return f"L={self.n_layer} C={self.n_embd} NH={self.n_head} V={self.vocab_size} maxT={self.block_size}"


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Block(nn.Module):
    def __init__(self, cfg, fast=False):
        super().__init__()
        C = cfg.n_embd
        self.n_head = cfg.n_head
        # fast (training mode): fused kernels where torch has them; the fixtures keep the plain math
        self.sdpa = fast and hasattr(F, "scaled_dot_product_attention")
        self.gelu = (lambda x: F.gelu(x, approximate="tanh")) if fast else gelu_tanh
        self.ln1 = nn.LayerNorm(C, eps=1e-5)
        self.qkv = nn.Linear(C, 3 * C)
        self.attproj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C, eps=1e-5)
        self.fc = nn.Linear(C, 4 * C)
        self.fcproj = nn.Linear(4 * C, C)

    def attention(self, x):
        B, T, C = x.shape
        nh, hs = self.n_head, C // self.n_head
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, nh, hs).transpose(1, 2)  # (B, NH, T, HS)
        k = k.view(B, T, nh, hs).transpose(1, 2)
        v = v.view(B, T, nh, hs).transpose(1, 2)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, NH, T, HS)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, NH, T, T)
            causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril_()  # not a buffer: gloo cannot broadcast bool
            att = att.masked_fill(~causal, float("-inf"))
            att = torch.softmax(att, dim=-1)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.attproj(y)

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        x = x + self.fcproj(self.gelu(self.fc(self.ln2(x))))
        return x


class GPT(nn.Module):
    def __init__(self, cfg, fast=False):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.padded_vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList([Block(cfg, fast) for _ in range(cfg.n_layer)])
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
        pos = torch.arange(T, dtype=torch.long, device=idx.device)
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

    def file_groups(self):
        """the parameters in the model file's order: 16 groups, a per-layer tensor as one parameter
        per layer (layer 0 first). Flattened and concatenated they are the file's payload."""
        per_layer = [lambda b: b.ln1.weight, lambda b: b.ln1.bias, lambda b: b.qkv.weight, lambda b: b.qkv.bias,
                     lambda b: b.attproj.weight, lambda b: b.attproj.bias, lambda b: b.ln2.weight,
                     lambda b: b.ln2.bias, lambda b: b.fc.weight, lambda b: b.fc.bias, lambda b: b.fcproj.weight,
                     lambda b: b.fcproj.bias]
        return ([[self.wte.weight], [self.wpe.weight]] + [[f(b) for b in self.blocks] for f in per_layer]
                + [[self.lnf.weight], [self.lnf.bias]])

    def file_params(self):
        """flat list of the parameters in file order (Linear weights are (out, in) as in the file)"""
        return [p for group in self.file_groups() for p in group]

    # the 16 tensors in llm.c's file order, layers stacked
    def file_tensors(self, grads=False):
        def t(p):
            return p.grad if grads else p.data
        return [torch.stack([t(p) for p in g]) if i not in (0, 1, 14, 15) else t(g[0])
                for i, g in enumerate(self.file_groups())]

    def load_flat(self, flat):
        """copy a flat float32 array in file order (numpy or torch) into the parameters"""
        flat = torch.as_tensor(flat)
        off = 0
        with torch.no_grad():
            for p in self.file_params():
                p.copy_(flat[off: off + p.numel()].view(p.shape))
                off += p.numel()


def param_shapes(cfg):
    L, C, Vp, maxT = cfg.n_layer, cfg.n_embd, cfg.padded_vocab_size, cfg.block_size
    return [(Vp, C), (maxT, C), (L, C), (L, C), (L, 3 * C, C), (L, 3 * C), (L, C, C), (L, C),
            (L, C), (L, C), (L, 4 * C, C), (L, 4 * C), (L, C, 4 * C), (L, C), (C,), (C,)]


def num_params(cfg):
    return sum(int(np.prod(s)) for s in param_shapes(cfg))


def header_ints(values):
    h = np.zeros(256, dtype=np.int32)
    h[: len(values)] = values
    return h


def crc_int32(crc):
    """a CRC-32 as the int32 a header stores"""
    return np.array([crc], dtype=np.uint32).view(np.int32)[0]


def header_crc(h, slot):
    """the CRC-32 of a 256-int header with h[slot] read as 0 (model_io.h header_crc), as a header int"""
    h = h.copy()
    h[slot] = 0
    return crc_int32(zlib.crc32(h.astype("<i4").tobytes()))


def model_file_bytes(cfg, payload, version):
    h = header_ints([MODEL_MAGIC, version, cfg.block_size, cfg.vocab_size, cfg.n_layer,
                     cfg.n_head, cfg.n_embd, cfg.padded_vocab_size])
    h[252] = CRC_TAG
    h[253] = crc_int32(zlib.crc32(payload))
    h[254] = header_crc(h, 254)
    return h.astype("<i4").tobytes() + payload


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
    with open(path, "wb") as f:
        f.write(model_file_bytes(cfg, b"".join(parts), version))
    print(f"wrote {path} (version {version}, {sum(p.numel() for p in model.file_tensors()):,} parameters)")


def probe_model_file(path, in_checkpoint=False):
    """(config, version, error): the header and size of a model file checked, error None if fine; a
    checkpoint's gets no hint on making one (-y 1 takes the checkpoint before), as llmc/model_io.h"""
    hint = "" if in_checkpoint else "; make one with: python3 train_gpt2.py --model d12 --write-model out.bin (or train_gpt2 -n)"
    why = not_a_file(path)
    if why:
        return None, 0, f"model file '{path}' {why}"
    size = os.path.getsize(path)
    if size < 1024:
        return None, 0, f"model file '{path}' is {size} bytes, smaller than its 1024-byte header (truncated?)"
    h = np.fromfile(path, dtype="<i4", count=256)
    if h[0] != MODEL_MAGIC:
        return None, 0, f"'{path}' is not a GPT-2 model file (magic {h[0]}, expected {MODEL_MAGIC}){hint}"
    if h[1] not in (3, 5):
        return None, 0, f"model file '{path}' has version {h[1]}; this trainer reads version 3 (fp32) and 5 (bf16){hint}"
    if h[252] == CRC_TAG and header_crc(h, 254) != h[254]:
        return None, 0, f"model file '{path}' has a corrupt header (it fails its checksum){hint}"
    maxT, V, L, NH, C, Vp = (int(x) for x in h[2:8])
    cfg = Config(L, C, NH, maxT, V, Vp)
    problem = cfg.problem()
    if problem:
        return None, 0, f"model file '{path}' has a bad header: {problem}"
    expected = 1024 + num_params(cfg) * (4 if h[1] == 3 else 2)
    if size != expected:
        return None, 0, (f"model file '{path}' is {size} bytes but its header (L={L} C={C} NH={NH} Vp={Vp} maxT={maxT}, "
                         f"version {h[1]}) implies {expected} bytes (truncated or corrupt){hint}")
    return cfg, int(h[1]), None


def read_model_flat(path, in_checkpoint=False, probe_prefix=""):
    """(config, flat float32 parameters in file order, error): the whole file, its CRC verified"""
    cfg, version, err = probe_model_file(path, in_checkpoint)
    if err:  # probe_prefix: the C caller's prefix for these (train_loop.h: "-e: "), not for the checksum's
        return None, None, probe_prefix + err
    with open(path, "rb") as f:
        h = np.frombuffer(f.read(1024), dtype="<i4")
        payload = f.read()
    crc = crc_int32(zlib.crc32(payload))
    if h[252] in (CRC_TAG, CRC_TAG_V1) and crc != h[253]:  # llmc/checkpoint.h's words, or model_io.h's for -e
        return None, None, (f"model file '{path}' fails its checksum" if in_checkpoint else
                            f"model file '{path}' is corrupt: checksum {crc & 0xFFFFFFFF:08x}, header says "
                            f"{int(h[253]) & 0xFFFFFFFF:08x}; restore it from a copy, or use another model file")
    if version == 3:
        flat = np.frombuffer(payload, dtype="<f4").copy()
    else:  # bf16: the upper 16 bits of a float32
        flat = (np.frombuffer(payload, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    return cfg, flat, None


def read_model(path):
    cfg, flat, err = read_model_flat(path)
    if err:
        die(err)
    model = GPT(cfg)
    model.load_flat(flat)
    return model


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


def make_optimizer(model, lr, weight_decay, device, muon=False):
    """(AdamW(0.9, 0.95, eps 1e-8) with weight decay on the 2-D tensors only, whether it is fused):
    fused on GPUs where torch has it. muon: the blocks' matrices are left out (Muon takes them)"""
    skip = {id(p) for p in muon_params(model)} if muon else set()
    decay = [p for p in model.parameters() if p.dim() >= 2 and id(p) not in skip]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    extra = {}
    if device.type == "cuda" and "fused" in inspect.signature(torch.optim.AdamW).parameters:
        extra["fused"] = True
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95), eps=1e-8, **extra)
    return opt, bool(extra)


def muon_params(model):
    """the blocks' matrices that Muon updates, in file order (each layer's matrix on its own)"""
    return [p for i, group in enumerate(model.file_groups()) if i in MUON_TENSORS for p in group]


def newton_schulz(G, steps):
    """llmc/muon.h: `steps` quintic Newton-Schulz iterations on G / (||G||_F + 1e-7), on the wide
    orientation; bf16 on a GPU (as train_gpt2cu), fp32 on the CPU (as train_gpt2)"""
    a, b, c = MUON_NS
    X = G.bfloat16() if G.is_cuda else G.float()
    X = X / (X.norm() + 1e-7)
    tall = X.shape[0] > X.shape[1]
    if tall:
        X = X.T
    for _ in range(steps):
        A = X @ X.T
        B = b * A + c * (A @ A)
        X = a * X + B @ X
    return X.T if tall else X


class Muon:
    """llmc/muon.h's Muon on the given matrices: Nesterov momentum, Newton-Schulz, the update scaled
    by sqrt(max(1, rows/cols)), decoupled weight decay. buf: the momentum (the state file's m)."""
    def __init__(self, params, momentum, ns_steps):
        self.params, self.momentum, self.ns_steps = params, momentum, ns_steps
        self.buf = [torch.zeros_like(p) for p in params]

    @torch.no_grad()
    def step(self, lr, weight_decay):
        mu = self.momentum
        for p, buf in zip(self.params, self.buf):
            buf.mul_(mu).add_(p.grad)
            O = newton_schulz(p.grad + mu * buf, self.ns_steps).to(p.dtype)
            scale = math.sqrt(max(1.0, p.shape[0] / p.shape[1]))
            p.sub_(lr * (scale * O + weight_decay * p))


def run_trajectory(model, x, y, steps, lr, wd, path):
    """make_optimizer's AdamW, global-norm clip at 1.0, constant lr."""
    opt, _ = make_optimizer(model, lr, wd, torch.device("cpu"))
    lines = [f"# lr {lr!r} wd {wd!r} beta1 0.9 beta2 0.95 eps 1e-8 clip 1.0 steps {steps}"]
    for step in range(steps):
        opt.zero_grad(set_to_none=False)
        _, loss = model(x, y)
        loss.backward()
        # global-norm clipping at 1.0 with torch.nn.utils.clip_grad_norm_'s formula, but the norm
        # summed in float64: torch 1.13's fp32 norm is off by ~1e-5 relative on large models
        norm = grad_norm(model.parameters())
        coef = min(1.0, 1.0 / (float(norm) + 1e-6))
        for p in model.parameters():
            p.grad.mul_(coef)
        opt.step()
        lines.append(f"{step} {loss.item():.9g} {float(norm):.9g}")
        print(f"step {step}: loss {loss.item():.6f} norm {float(norm):.4f}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def grad_norm(params):
    """global L2 norm of the gradients, summed in float64 (as the C trainers do)"""
    return torch.sqrt(sum((p.grad.double() ** 2).sum() for p in params))


def positive_int(text):
    """argparse type: a whole number >= 1 (a batch, a length or a step count of 0 writes a fixture
    that checks nothing)"""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number >= 1")
    return value


def fixture_main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    ap.add_argument("--model", default="d12", help="descriptor: d12, d24, d36, d48, dN or L2:C64:H4[:T..][:V..]")
    ap.add_argument("--init-from", help="start from this model .bin instead of a random init")
    ap.add_argument("--seed", type=int, default=1337, help="seed of the random init and of random batches")
    ap.add_argument("--write-model", help="write the model (before any training step) to this .bin")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32", help="model file version 3 or 5")
    ap.add_argument("--batch", type=positive_int, default=4, help="B of the debug batch")
    ap.add_argument("--seq", type=positive_int, default=64, help="T of the debug batch")
    ap.add_argument("--tokens", help="take the debug batch from the start of this token shard (else random ids)")
    ap.add_argument("--debug-state", help="write the debug state for the batch here")
    ap.add_argument("--trajectory", help="write the per-step loss of --steps AdamW steps here")
    ap.add_argument("--steps", type=positive_int, default=10)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    args = ap.parse_args(argv)

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
            die(f"--seq {T} is larger than the model's max_seq_len {cfg.block_size}")
        if args.tokens:
            shard = Shard(args.tokens, "--tokens")  # the trainer's header and size checks
            if shard.n < B * T + 1:
                die(f"--tokens: shard '{args.tokens}' has {shard.n} tokens; the debug batch needs B*T+1 = {B * T + 1}")
            toks = torch.from_numpy(shard.read(0, B * T + 1).astype(np.int64))
            if int(toks.max()) >= cfg.vocab_size:
                die(f"{args.tokens} has token ids >= vocab size {cfg.vocab_size}")
        else:
            g = torch.Generator().manual_seed(args.seed + 1)
            toks = torch.randint(0, cfg.vocab_size, (B * T + 1,), generator=g)
        x, y = toks[:-1].view(B, T).clone(), toks[1:].view(B, T).clone()
        if args.debug_state:
            write_debug_state(model, x, y, args.debug_state)
        if args.trajectory:
            run_trajectory(model, x, y, args.steps, args.lr, args.weight_decay, args.trajectory)
    return 0


# =============================================================================================
# Training mode: the DDP twin of ./train_gpt2 (llmc/train_loop.h and the files it uses)

# flag: (attribute, kind, default, lo, hi, usage). kind: str, int, float. Defaults as in llmc/args.h.
FLAGS = {
    "i": ("train_glob", str, "data/tinyshakespeare/tiny_shakespeare_train.bin", None, None, "train token shards (glob)"),
    "j": ("val_glob", str, "data/tinyshakespeare/tiny_shakespeare_val.bin", None, None, "val token shards (glob)"),
    "o": ("output_dir", str, "", None, None, "output dir for main.log and checkpoints; empty = none"),
    "e": ("model", str, "d12", None, None, "model .bin (version 3 or 5) or descriptor: d12 d24 d36 d48 dN gpt3:c768 L2:C64:H4"),
    "tk": ("tokenizer", str, "gpt2_tokenizer.bin", None, None, "tokenizer decode table, to print samples as text"),
    "b": ("B", int, 4, 1, 1 << 20, "micro-batch size per rank, sequences"),
    "t": ("T", int, 1024, 1, 1 << 20, "sequence length"),
    "d": ("total_batch", int, -1, -1, (1 << 62) - 1, "total batch per optimizer step in tokens, all ranks; -1 = B*T*ranks"),
    "l": ("lr", float, 3e-4, 0.0, 10.0, "peak learning rate"),
    "u": ("warmup", int, 0, 0, (1 << 31) - 1, "linear warmup steps"),
    "q": ("final_lr_frac", float, 1.0, 0.0, 1.0, "final learning rate as a fraction of -l"),
    "c": ("weight_decay", float, 0.0, 0.0, 10.0, "weight decay, on 2-D tensors only"),
    "k": ("schedule", str, "cosine", None, None, "schedule: cosine | linear | constant | wsd"),
    "kd": ("decay_frac", float, 0.2, 0.0, 1.0, "wsd: the fraction of the -x steps that decays"),
    "opt": ("optimizer", str, "adamw", None, None, "adamw, or muon: Muon for the blocks' 2-D matrices, AdamW (-l) for the rest"),
    "ml": ("muon_lr", float, 0.02, 0.0, 10.0, "Muon: peak learning rate of the matrices (-k's schedule)"),
    "mm": ("muon_momentum", float, 0.95, 0.0, 0.999, "Muon: Nesterov momentum"),
    "mns": ("muon_ns_steps", int, 5, 1, 100, "Muon: Newton-Schulz iterations"),
    "x": ("max_steps", int, -1, -1, (1 << 31) - 1, "optimizer steps to run; -1 = one epoch of the train data; 0 = evaluate -e only (reads no -i)"),
    "v": ("val_every", int, 20, 0, (1 << 31) - 1, "validation loss every N steps"),
    "m": ("val_batches", int, 20, -1, (1 << 31) - 1, "validation batches of B sequences; -1 = all"),
    "h": ("hellaswag_eval", int, 0, 0, 1, "HellaSwag accuracy at every validation"),
    "hf": ("hellaswag", str, "data/hellaswag/hellaswag_val.bin", None, None, "HellaSwag eval file"),
    "hm": ("hellaswag_max", int, -1, -1, (1 << 31) - 1, "HellaSwag examples to evaluate; -1 = all"),
    "s": ("sample_every", int, 20, 0, (1 << 31) - 1, "sample text every N steps"),
    "g": ("gen_tokens", int, 64, 1, 1 << 20, "tokens to generate per sample"),
    "n": ("checkpoint_every", int, 0, 0, (1 << 31) - 1, "checkpoint every N steps (needs -o)"),
    "nk": ("checkpoint_keep", int, 0, 0, (1 << 31) - 1, "keep only the newest N complete checkpoints; 0 = all"),
    "nm": ("checkpoint_major", int, 0, 0, (1 << 31) - 1, "with -nk: also keep every checkpoint whose step is a multiple of N"),
    "y": ("resume", int, 0, 0, 1, "resume from the newest complete checkpoint in -o"),
    "sl": ("guard_z_loss", float, 0.0, 0.0, 1e6, "skip a step whose loss z-score over the last 100 exceeds this; 0 = off"),
    "sg": ("guard_z_norm", float, 0.0, 0.0, 1e6, "the same for the gradient norm; 0 = off"),
    "sm": ("guard_max_skips", int, 10, 1, (1 << 31) - 1, "stop after this many consecutive skipped steps"),
    "rb": ("rollback_after", int, 0, 0, (1 << 31) - 1,
           "after this many consecutive skipped steps, reload the newest checkpoint, skip the data since; 0 = off"),
    "z": ("zero_stage", int, 0, 0, 1, "accepted for the same command line; ignored (DDP replicates the optimizer)"),
    "r": ("recompute", int, "auto", 0, 2, "accepted (0, 1, 2 or auto) and ignored"),
    "w": ("master_weights", int, 1, 0, 1, "accepted and ignored (parameters are fp32, autocast computes in bf16)"),
    "pb": ("backend", str, "nccl", None, None, "accepted and ignored (NCCL on GPUs, gloo on CPUs)"),
    "pt": ("comm_timeout", int, 300, 1, 86400, "seconds before a stuck collective is an error"),
    "pe": ("phase_every", int, 100, 0, (1 << 31) - 1, "accepted and ignored (the C trainers' phase timers)"),
    "tb": ("tensorboard", int, 0, 0, 1, "accepted and ignored (the C trainers' TensorBoard events)"),
    "at": ("attention", str, "auto", None, None, "accepted and ignored (train_gpt2cu's attention kernel; here SDPA where torch has it)"),
    "ge": ("gelu_fusion", int, 2, 0, 2, "accepted and ignored (train_gpt2cu's GELU fusion)"),
    "mt": ("matmul_tune", int, 0, 0, 1, "accepted and ignored (train_gpt2cu's cuBLASLt algorithm timing)"),
    "bg": ("bias_grad", int, 0, 0, 1, "accepted and ignored (train_gpt2cu's bias gradients)"),
    "lg": ("gpu_log_every", int, 0, -1, 1000000000, "accepted and ignored (train_gpt2cu's NVML line)"),
    "sh": ("shuffle", int, 1, 0, 1, "shuffle the train data (the same permutation on every rank)"),
    "rs": ("seed", int, 1337, 0, (1 << 63) - 1, "random seed (init, shuffling, sampling)"),
    "a": ("overfit_batch", int, 0, 0, 1, "overfit the first batch (debugging)"),
}


def usage():
    lines = ["usage: python3 train_gpt2.py [flags]   (torchrun ... train_gpt2.py [flags] for DDP)",
             "the flags of ./train_gpt2 (every flag takes a value; defaults in brackets):"]
    for flag, (_, _, default, _, _, text) in FLAGS.items():
        lines.append(f"  {'-' + flag + ', --' + LONG_NAMES[flag]:<22} {text} [{default}]")
    for flag, (_, _, default, _, _, text) in LONG_FLAGS.items():
        lines.append(f"  {'--' + flag:<22} {text} [{default}]")
    return "\n".join(lines)


class Args:
    pass


# flags that the C trainers have only by their long name (llmc/args.h)
LONG_FLAGS = {
    "start-over": ("start_over", int, 0, 0, 1, "a new run where -o holds another run's checkpoints (refused without -y 1 "
                   "or this): they and its logs move to <dir>/old_run_<N>/ first"),
    "ckpt-async": ("ckpt_async", int, 1, 0, 1, "accepted and ignored (checkpoints are written before the next step)"),
    "temperature": ("temperature", float, 1.0, 0.0, 100.0, "sampling temperature of the samples; 0 = greedy"),
    "top-k": ("top_k", int, 0, 0, (1 << 31) - 1, "sample from the K most likely tokens only; 0 = all"),
    "prompt": ("prompt", str, "", None, None, "generate: continue this text by -g tokens and exit; empty = train"),
    "bpe-dir": ("bpe_dir", str, "data/gpt2", None, None, "folder with GPT-2's encoder.json and vocab.bpe (--prompt)"),
}

# the long name of each short flag, as llmc/args.h has it (--batch 16 and --batch=16 are -b 16)
LONG_NAMES = {
    "i": "train", "j": "val", "o": "out", "e": "model", "tk": "tokenizer", "b": "batch", "t": "seq-len",
    "d": "total-batch", "l": "lr", "u": "warmup", "q": "final-lr-frac", "c": "weight-decay", "k": "schedule",
    "kd": "decay-frac", "opt": "optimizer", "ml": "muon-lr", "mm": "muon-momentum", "mns": "muon-ns-steps",
    "x": "steps", "v": "val-every", "m": "val-batches", "h": "hellaswag", "hf": "hellaswag-file",
    "hm": "hellaswag-max", "s": "sample-every", "g": "gen-tokens", "n": "ckpt-every", "nk": "ckpt-keep",
    "nm": "ckpt-major", "y": "resume", "sl": "guard-loss-z", "sg": "guard-norm-z", "sm": "guard-max-skips",
    "rb": "rollback", "z": "zero", "r": "recompute", "w": "master-weights", "pb": "backend", "pt": "comm-timeout",
    "at": "attention", "ge": "gelu-fusion", "mt": "matmul-tune", "bg": "bias-grad", "lg": "gpu-log",
    "pe": "phase-every", "tb": "tensorboard", "sh": "shuffle", "rs": "seed", "a": "overfit",
}

# the C trainers' flags that have no meaning here: one line saying what to do instead
TORCHRUN = "train_gpt2.py takes its processes from torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT): launch it with torchrun"
REFUSED = {
    "-pn": TORCHRUN, "-pr": TORCHRUN, "-pg": TORCHRUN, "-pi": TORCHRUN, "-ps": TORCHRUN, "-pf": TORCHRUN,
    "--num-processes": TORCHRUN, "--process-rank": TORCHRUN, "--gpus-per-node": TORCHRUN,
    "--init-method": TORCHRUN, "--server": TORCHRUN, "--sync-dir": TORCHRUN,
    "--plan": "the memory plan is the C trainers' (./train_gpt2cu --plan 1)",
}


# the flags that take one of a few words
CHOICES = {"schedule": "cosine|linear|constant|wsd", "optimizer": "adamw|muon", "backend": "nccl|mpi",
           "attention": "auto|own|cudnn"}


def flag_specs():
    """every flag as written ("-b", "--batch") -> its spec"""
    specs = {"-" + f: spec for f, spec in FLAGS.items()}
    specs.update({"--" + LONG_NAMES[f]: spec for f, spec in FLAGS.items()})
    specs.update({"--" + f: spec for f, spec in LONG_FLAGS.items()})
    return specs


def edit_distance(x, y):
    row = list(range(len(y) + 1))
    for i, cx in enumerate(x, 1):
        diag, row[0] = row[0], i
        for j, cy in enumerate(y, 1):
            diag, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diag + (cx != cy))
    return row[-1]


def did_you_mean(flag):
    """llmc/args.h's hint for an unknown flag: the right name in another case or with the other number of
    dashes, or a long name one or two edits away"""
    key = flag.lstrip("-")
    best, hint = 99, ""
    for known in list(flag_specs()) + list(REFUSED):
        name = known.lstrip("-")
        short_known = not known.startswith("--")
        d = 0 if key.lower() == name.lower() else edit_distance(key, name)
        limit = 0 if short_known and not flag.startswith("--") else 2 if len(name) > 4 else 1
        if d <= limit and d < best:
            best, hint = d, f"; did you mean {known}?"
    return hint


C_SPACE = " \t\n\v\f\r"
C_INT = re.compile(r"[ \t\n\v\f\r]*[+-]?[0-9]+")
C_FLOAT = re.compile(r"[ \t\n\v\f\r]*[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?|inf(?:inity)?|"
                     r"0x(?:[0-9a-f]+\.?[0-9a-f]*|\.[0-9a-f]+)(?:p[+-]?[0-9]+)?)", re.I)


def c_number(text, kind):
    """the value of a flag as llmc/args.h reads it (strtoll base 10, strtod: decimal or hex, inf), or None where
    that refuses it: trailing text, '_', NaN, a value out of the type's range (ERANGE: 1e999, 1e-400, subnormals)"""
    if kind is int:
        v = int(text) if C_INT.fullmatch(text) else None
        return v if v is not None and -(1 << 63) <= v < 1 << 63 else None
    if not C_FLOAT.fullmatch(text):
        return None
    body = text.lstrip(C_SPACE)
    hexa = "x" in body.lower()
    try:
        v = float.fromhex(body) if hexa else float(body)
    except OverflowError:  # fromhex's
        return None
    mantissa = re.split("p" if hexa else "e", body.lstrip("+-").lower()[2 if hexa else 0:])[0]
    if math.isinf(v) and "inf" not in body.lower():
        return None  # overflow
    if abs(v) < sys.float_info.min and re.search("[1-9a-f]" if hexa else "[1-9]", mantissa):
        return None  # underflow to a subnormal or zero
    return v


def parse_train_args(argv):
    """the flags of llmc/args.h (-b 16, --batch 16, --batch=16); a bad one is one line, as the C trainers say it"""
    a = Args()
    for attr, _, default, *_ in list(FLAGS.values()) + list(LONG_FLAGS.values()):
        setattr(a, attr, default)

    def fail(msg):
        die(f"{msg} (see --help)")
    specs, i = flag_specs(), 0
    while i < len(argv):
        f, v = argv[i], None
        if not f.startswith("-") or f == "-":
            fail(f"unexpected argument '{f}': flags come as -x <value>")
        if f.startswith("--") and "=" in f:  # --name=value
            f, v = f.split("=", 1)
        if f in REFUSED:
            fail(f"{f}: {REFUSED[f]}")
        spec = specs.get(f)
        if spec is None:
            fail(f"unknown flag {f}{did_you_mean(f)}")
        if v is None:
            if i + 1 >= len(argv):
                fail(f"flag {f} needs a value" + (": -h is HellaSwag's 0|1" if f == "-h" else ""))  # as llmc/args.h
            i, v = i + 1, argv[i + 1]
        i += 1
        attr, kind, _, lo, hi, _ = spec
        if attr == "recompute" and v == "auto":  # the GPU trainer's memory-dependent choice; ignored here like -r itself
            continue
        if attr == "B" and v == "auto":
            fail(f"{f} auto: the memory plan that chooses B is the C trainers' (./train_gpt2, ./train_gpt2cu); give "
                 "train_gpt2.py a number (the B they print)")
        if attr in CHOICES and v not in CHOICES[attr].split("|"):
            fail(f"{f} {v}: expected one of {CHOICES[attr]}")
        if kind is not str:
            x = c_number(v, kind)
            if x is None:
                fail(f"{f} {v}: expected {'an integer' if kind is int else 'a number'}")
            if not lo <= x <= hi:
                fail(f"{f} {v}: must be in {lo}..{hi}" if kind is int else f"{f} {v}: must be in {lo:g}..{hi:g}")
            v = x
        setattr(a, attr, v)
    if len(a.output_dir.encode()) > 4000:  # the longest name written under it must fit a path's 4095 bytes
        fail(f"-o: the directory's path is {len(a.output_dir.encode())} characters; the files under it would pass the "
             "4095 a path may have: use one of at most 4000")
    if a.checkpoint_every > 0 and not a.output_dir:
        fail(f"-n {a.checkpoint_every} needs an output directory: add -o <dir>")
    if a.checkpoint_major > 0 and (a.checkpoint_every <= 0 or a.checkpoint_major % a.checkpoint_every != 0):
        fail(f"-nm {a.checkpoint_major} keeps the checkpoints at multiples of {a.checkpoint_major} steps; it must be a "
             f"multiple of -n (now {a.checkpoint_every}), which writes them")
    if a.resume and not a.output_dir:
        fail("-y 1 resumes from the checkpoints in -o <dir>; no -o was given")
    if a.tensorboard and not a.output_dir:  # ignored here, but the same command lines as the C trainers
        fail("-tb 1 writes the TensorBoard events into the output directory: add -o <dir>")
    if a.start_over and (a.resume or not a.output_dir):
        fail("--start-over 1 starts a new run in -o <dir> in place of the one there; it needs -o and excludes -y 1")
    # values whose result would mean nothing (a loss or an accuracy over no data), as llmc/args.h
    if a.val_batches == 0:
        fail("-m 0 validates on no batches; give -m N >= 1, -1 for all, or -v 0 for no validation")
    if a.hellaswag_max == 0:
        fail("-hm 0 evaluates no examples; give -hm N >= 1, -1 for all, or -h 0 for no HellaSwag")
    if a.total_batch == 0:
        fail("-d 0: the total batch is -1 (= B*T*ranks) or a multiple of B*T*ranks tokens")
    if a.max_steps == 0 and a.val_every <= 0 and a.sample_every <= 0 and not a.prompt:
        fail("-x 0 trains no step, and with -v 0 and -s 0 there is nothing to evaluate; give -v N to validate, "
             "-s N to sample, or -x N to train")
    # the C trainers keep these as float32: compute with the same values
    a.lr, a.final_lr_frac, a.weight_decay = np.float32(a.lr), np.float32(a.final_lr_frac), np.float32(a.weight_decay)
    a.decay_frac = np.float32(a.decay_frac)
    a.muon_lr, a.muon_momentum = np.float32(a.muon_lr), np.float32(a.muon_momentum)
    a.temperature = np.float32(a.temperature)
    a.argv = list(argv)
    return a


def lr_at(a, step, max_steps, peak=None):
    """llmc/schedule.h, in the same float32/float64 arithmetic; peak: -l by default (Muon's: -ml)"""
    peak = a.lr if peak is None else peak
    if step < a.warmup:
        return float(peak * np.float32(step + 1) / np.float32(a.warmup))
    start = a.warmup  # where the decay begins; for wsd (int)((1 - decay_frac) * max_steps) in float32
    if a.schedule == "wsd":
        start = max(start, int((np.float32(1.0) - a.decay_frac) * np.float32(max_steps)))
    if a.schedule == "constant" or step < start or max_steps <= start:
        return float(peak)
    progress = min(1.0, (step - start) / (max_steps - start))
    min_lr = float(peak) * float(a.final_lr_frac)
    coeff = {"cosine": 0.5 * (1.0 + math.cos(math.pi * progress)), "linear": 1.0 - progress,
             "wsd": 1.0 - math.sqrt(progress)}[a.schedule]
    return float(np.float32(min_lr + coeff * (float(peak) - min_lr)))


SCHEDULES = ("cosine", "linear", "constant", "wsd")  # llmc/schedule.h's LRKind order


def run_settings(a):
    """the optimizer settings a state file keeps (llmc/checkpoint.h's RunSettings, fields [38..46])"""
    return types.SimpleNamespace(recorded=1, schedule=a.schedule, warmup=a.warmup, lr=a.lr, final_lr_frac=a.final_lr_frac,
                                 decay_frac=a.decay_frac, weight_decay=a.weight_decay, muon_lr=a.muon_lr,
                                 muon_momentum=a.muon_momentum)


def settings_from_header(h):
    """fields [38..46] of a state file's header (llmc/checkpoint.h's run_settings_from_header), or None where
    they hold what no flags could give (run_settings_sound)"""
    if h[38] == 0:
        return types.SimpleNamespace(recorded=0)
    f = h[41:47].astype("<i4").view("<f4")
    ranges = np.array([FLAGS[k][3:5] for k in ("l", "q", "kd", "c", "ml", "mm")], dtype=np.float32)  # the flags' own
    within = (f >= ranges[:, 0]) & (f <= ranges[:, 1])  # compared in float32, as the flags are kept; NaN is not
    if h[38] != 1 or not 0 <= h[39] <= 3 or h[40] < 0 or not within.all():
        return None
    return types.SimpleNamespace(recorded=1, schedule=SCHEDULES[h[39]], warmup=int(h[40]), lr=f[0], final_lr_frac=f[1],
                                 decay_frac=f[2], weight_decay=f[3], muon_lr=f[4], muon_momentum=f[5])


def flag_pair(flag, now, was):
    """llmc/train_loop.h's flag_diff_g: (flag, now, was) for two float32 flags, in the fewest significant digits
    (6 to 9) that tell them apart where they differ"""
    now, was = np.float32(now), np.float32(was)
    for digits in range(6, 10):
        n, w = "%.*g" % (digits, now), "%.*g" % (digits, was)
        if now == was or n != w:
            return flag, n, w
    return flag, n, w


def warn_flag_diffs(diffs, start, d, what):
    """llmc/train_loop.h's warn_flag_diffs: diffs are (flag, now, was) strings"""
    def join(items):
        return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
    now, was = join([f"{f} {n}" for f, n, _ in diffs]), join([f"{f} {w}" for f, _, w in diffs])
    warn(f"{now} {'differ' if len(diffs) > 1 else 'differs'} from the {was} of the run that wrote checkpoint {start} in "
         f"{d}: {what}")


def warn_settings_change(a, steps, st):
    """llmc/train_loop.h's warn_settings_change: a resumed run given other optimizer flags than its checkpoint's
    run (the LR schedule's only where a remaining step's learning rate changes, naming the first)"""
    was = st.settings
    old = was if was.recorded else a
    old_steps = st.max_steps if st.max_steps > 0 else steps
    pairs = [("-k", a.schedule, old.schedule), flag_pair("-l", a.lr, old.lr), ("-u", str(a.warmup), str(old.warmup)),
             flag_pair("-q", a.final_lr_frac, old.final_lr_frac)]
    if "wsd" in (a.schedule, old.schedule):
        pairs.append(flag_pair("-kd", a.decay_frac, old.decay_frac))
    pairs.append(("-x", str(steps), str(old_steps)))
    diffs = [p for p in pairs if p[1] != p[2]]
    for s in range(st.step, steps if diffs else 0):
        lr_was, lr_is = lr_at(old, s, old_steps), lr_at(a, s, steps)
        if lr_was != lr_is:
            warn_flag_diffs(diffs, st.step, a.output_dir, f"the LR schedule depends on {'them' if len(diffs) > 1 else diffs[0][0]}, "
                            f"so it changes from here on (step {s + 1}: lr {lr_is:.2e} instead of {lr_was:.2e})")
            break
    if not was.recorded:
        return
    pairs = [flag_pair("-c", a.weight_decay, was.weight_decay)]
    if a.optimizer == "muon":
        pairs += [flag_pair("-ml", a.muon_lr, was.muon_lr), flag_pair("-mm", a.muon_momentum, was.muon_momentum)]
    diffs = [p for p in pairs if p[1] != p[2]]
    if diffs:
        warn_flag_diffs(diffs, st.step, a.output_dir, "the updates from here on use the new value(s)")


# ---------------------------------------------------------------------------------------------
# random streams of llmc/utils.h: splitmix64, for the init and the shuffle

def splitmix64(state, count, start=0):
    """outputs start .. start+count-1 of splitmix64 from `state` (each call adds the gamma, then mixes)"""
    with np.errstate(over="ignore"):
        z = np.uint64(state) + np.arange(start + 1, start + count + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def permutation(n, key):
    """dl_permute_ll: Fisher-Yates from the top, j = splitmix64 % (i+1)"""
    a = list(range(n))
    if n > 1:
        js = (splitmix64(key & U64, n - 1) % np.arange(n, 1, -1, dtype=np.uint64)).tolist()
        for d, i in enumerate(range(n - 1, 0, -1)):
            j = js[d]
            a[i], a[j] = a[j], a[i]
    return a


def c_init_params(cfg, seed):
    """gpt2_init_params (model_io.h): the C trainers' init, so -e d12 starts from the same weights.
    N(0, 0.02) for the 2-D tensors (0.02/sqrt(2L) for attprojw, fcprojw; wte's padded rows 0) by
    Box-Muller over splitmix64, one stream per tensor; LayerNorm weights 1; biases 0."""
    out = []
    resid_std = np.float32(0.02) / np.sqrt(np.float32(2.0 * cfg.n_layer))
    for i, shape in enumerate(param_shapes(cfg)):
        n = int(np.prod(shape))
        if i in (2, 8, 14):
            out.append(np.ones(n, dtype=np.float32))
        elif i not in DECAYED:
            out.append(np.zeros(n, dtype=np.float32))
        else:
            std = float(resid_std if i in (6, 12) else np.float32(0.02))
            real = cfg.vocab_size * cfg.n_embd if i == 0 else n
            x = np.zeros(n, dtype=np.float32)
            state = (seed * 1000003 + i) & U64
            chunk = 1 << 22  # pairs per batch of draws
            for p0 in range(0, (real + 1) // 2, chunk):
                pairs = min(chunk, (real + 1) // 2 - p0)
                bits = splitmix64(state, 2 * pairs, 2 * p0) >> np.uint64(11)
                u = (bits.astype(np.float64) + 0.5) * (1.0 / 9007199254740992.0)  # uniform in (0, 1)
                r = np.sqrt(-2.0 * np.log(u[0::2]))
                angle = (2.0 * math.pi) * u[1::2]
                pair = np.empty(2 * pairs, dtype=np.float32)
                pair[0::2] = std * r * np.cos(angle)
                pair[1::2] = std * r * np.sin(angle)
                end = min(real, 2 * (p0 + pairs))
                x[2 * p0: end] = pair[: end - 2 * p0]
            out.append(x)
    return np.concatenate(out)


# ---------------------------------------------------------------------------------------------
# data: llmc/dataloader.h

def check_header(path, magic, version, kind, hint, prefix=""):
    """the 256 int32 header of a file (at least 1024 bytes long), its magic and version checked"""
    h = np.fromfile(path, dtype="<i4", count=256)
    if h[0] != magic:
        die(f"{prefix}'{path}' is not {kind} (magic {h[0]}, expected {magic}); {hint}")
    if h[1] != version:
        die(f"{prefix}'{path}' has version {h[1]}, this trainer reads version {version}; {hint}")
    return h


class Shard:
    """A token shard's header and size, checked. Tokens are read with pread: a shard cut short on disk during the
    run (rewritten in place) is an error, where a mapping's lost pages would be a SIGBUS. At most OPEN_MAX shards
    are held open (the least recently read closes first), so that thousands of shards fit `ulimit -n`, which the
    C trainers' mappings do not count against; a shard opened again must be the same file (a shard replaced on
    disk meanwhile is an error, where the C trainers go on reading the one they mapped)."""
    OPEN_MAX = 64
    held = collections.OrderedDict()  # the shards with an open file, least recently read first

    def __init__(self, path, flag):
        why = not_a_file(path)
        if why:
            die(f"{flag}: shard '{path}' {why}; {SHARD_HINT}")
        self.path, self.fd = path, None
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as e:
            die(f"{flag}: shard '{path}' cannot be opened: {e.strerror}; {SHARD_HINT}")
        info = os.fstat(fd)
        self.size, self.identity = info.st_size, (info.st_dev, info.st_ino)
        self.hold(fd)
        if self.size < 1024:
            die(f"{flag}: shard '{path}' is {self.size} bytes, smaller than its 1024-byte header (truncated?); {SHARD_HINT}")
        h = check_header(path, SHARD_MAGIC, 1, "a token shard", SHARD_HINT, f"{flag}: ")
        self.n = int(np.uint32(h[2]))
        if self.size != 1024 + 2 * self.n:
            die(f"{flag}: shard '{path}' is {self.size} bytes but its header says {self.n} tokens ({1024 + 2 * self.n} "
                f"bytes): {'truncated' if self.size < 1024 + 2 * self.n else 'trailing bytes'}; {SHARD_HINT}")
        self.digest = self.sample_digest()  # now, while its file is open (the start-up check compares it)

    def hold(self, fd):
        self.fd = fd
        Shard.held[self] = None
        while len(Shard.held) > Shard.OPEN_MAX:
            oldest, _ = Shard.held.popitem(last=False)
            os.close(oldest.fd)
            oldest.fd = None

    def reopen(self):
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError as e:
            die(f"shard '{self.path}' cannot be opened again during the run: {e.strerror}; restore it, then resume with -y 1")
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino) != self.identity:
            os.close(fd)
            die(f"shard '{self.path}' was replaced on disk while this run read it (another program wrote a new file "
                "there?); restore it, then resume with -y 1")
        self.hold(fd)

    def sample_digest(self):
        """the runs of tokens llmc/dataloader.h's dataloader_hash samples (16 of 64 spread over the shard), as
        one CRC-32: ranks compare it, so that a node's stale copy of the same size is noticed"""
        take, crc = min(self.n, 64), 0
        for s in range(16 if take else 0):
            crc = zlib.crc32(self.read((self.n - take) * s // 15, take).tobytes(), crc)
        return crc

    def read(self, start, count):
        """tokens start .. start+count-1 (uint16)"""
        if self.fd is None:
            self.reopen()
        else:
            Shard.held.move_to_end(self)
        b = os.pread(self.fd, 2 * count, 1024 + 2 * start)
        if len(b) != 2 * count:
            die(f"shard '{self.path}' became shorter on disk than its {self.size} bytes while this run read it "
                "(another program rewrote it in place?); restore it, then resume with -y 1")
        return np.frombuffer(b, dtype="<u2")


class DataLoader:
    """Shards cut into windows of T+1 tokens; one stream of windows per epoch, shard order and
    windows within a shard permuted per (seed, epoch, shard) when shuffling; step s reads windows
    s*N .., rank r of W reads global micro-batch k*W + r at micro-step k (see dataloader.h)."""

    def __init__(self, pattern, flag, T, vocab_size, shuffle, seed):
        self.pattern, self.T, self.vocab_size, self.shuffle, self.seed = pattern, T, vocab_size, shuffle, seed
        self.paths = sorted(glob.glob(pattern))
        if not self.paths:
            die(f"{flag} {pattern}: no files match; prepare data first (e.g. bash dev/data/tinyshakespeare.sh) or fix the path")
        self.shards = [Shard(p, flag) for p in self.paths]
        self.num_tokens = [shard.n for shard in self.shards]
        self.num_windows = [(n - 1) // T if n >= 1 else 0 for n in self.num_tokens]
        self.first_window = np.cumsum([0] + self.num_windows[:-1]).tolist()
        self.total_windows = sum(self.num_windows)
        self.total_tokens = sum(self.num_tokens)
        for p, n, w in zip(self.paths, self.num_tokens, self.num_windows):
            if w == 0:
                warn(f"{flag}: shard '{p}' has {n} tokens, fewer than T+1 = {T + 1}; it contributes no data")
        self.cached_epoch, self.cached_perm = None, (None, None)

    def require(self, windows, flag, what):
        if self.total_windows < windows:
            die(f"{flag} {self.pattern}: {self.total_tokens} tokens in {len(self.paths)} shard(s) make "
                f"{self.total_windows} windows of T+1 = {self.T + 1} tokens, but {what} needs {windows} "
                "(B*T+1 tokens per rank per micro-step); use a smaller -b, -t or -d, or more data")

    def locate(self, w):
        """stream window w (epochs repeat) -> (shard, window within the shard)"""
        epoch, idx = divmod(w, self.total_windows)
        if not self.shuffle:
            s = bisect.bisect_right(self.first_window, idx) - 1
            return s, idx - self.first_window[s]
        if self.cached_epoch != epoch:
            order = permutation(len(self.paths), (self.seed * 0x100000001B3) & U64 ^ (epoch * 2 + 1))
            firsts = np.cumsum([0] + [self.num_windows[s] for s in order[:-1]]).tolist()
            self.cached_epoch, self.order, self.order_first = epoch, order, firsts
        lo = bisect.bisect_right(self.order_first, idx) - 1
        s = self.order[lo]
        if self.cached_perm[0] != (s, epoch):
            key = ((self.seed + 0x51ED27) * 0x9E3779B97F4A7C15) & U64 ^ ((epoch << 20) & U64) ^ s
            self.cached_perm = ((s, epoch), permutation(self.num_windows[s], key))
        return s, self.cached_perm[1][idx - self.order_first[lo]]

    def read(self, w, count):
        """the `count` windows from stream window w: (count, T+1) int64, ids checked against the vocab"""
        T = self.T
        rows = np.empty((count, T + 1), dtype=np.int64)
        for i in range(count):
            s, local = self.locate(w + i)
            rows[i] = self.shards[s].read(local * T, T + 1)
            if rows[i].max() >= self.vocab_size:
                t = int(np.argmax(rows[i] >= self.vocab_size))
                die(f"shard '{self.paths[s]}' has token id {rows[i][t]} at position {local * T + t}, not below the "
                    f"model's vocab size {self.vocab_size} (data tokenized for another vocabulary?); {SHARD_HINT}, "
                    f"or give -e a model with that vocabulary")
        return rows


def train_window(step, k, rank, world, B, windows_per_step):
    return step * windows_per_step + (k * world + rank) * B


# ---------------------------------------------------------------------------------------------
# numeric guards: llmc/guard.h

GUARD_WINDOW, GUARD_MIN_HISTORY = 100, 20


class Guard:
    def __init__(self, z_loss, z_norm, max_consecutive):
        self.z_loss, self.z_norm, self.max_consecutive = z_loss, z_norm, max_consecutive
        self.count = self.head = self.consecutive = self.total_skipped = 0
        self.loss_hist = np.zeros(GUARD_WINDOW, dtype=np.float32)
        self.norm_hist = np.zeros(GUARD_WINDOW, dtype=np.float32)

    def zscore(self, hist, x):
        h = hist[: self.count].astype(np.float64)
        return (x - h.mean()) / max(math.sqrt(((h - h.mean()) ** 2).mean()), 1e-12)

    def check(self, loss, norm):
        """the reason to skip this step, or None (then the values join the history)"""
        reason = None
        if not (math.isfinite(loss) and math.isfinite(norm)):
            reason = f"non-finite {'loss' if not math.isfinite(loss) else 'gradient norm'} (loss {loss:g}, norm {norm:g})"
        elif self.count >= GUARD_MIN_HISTORY:
            zl, zn = self.zscore(self.loss_hist, loss), self.zscore(self.norm_hist, norm)
            if self.z_loss > 0 and zl > self.z_loss:
                reason = f"loss {loss:g} has z-score {zl:.2f} > {self.z_loss:g}"
            elif self.z_norm > 0 and zn > self.z_norm:
                reason = f"gradient norm {norm:g} has z-score {zn:.2f} > {self.z_norm:g}"
        if reason:
            self.consecutive += 1
            self.total_skipped += 1
            return reason
        self.consecutive = 0
        self.loss_hist[self.head], self.norm_hist[self.head] = loss, norm
        self.head = (self.head + 1) % GUARD_WINDOW
        self.count = min(self.count + 1, GUARD_WINDOW)
        return None


# ---------------------------------------------------------------------------------------------
# processes: torchrun's variables, DDP collectives

class Dist:
    """rank, world size and device from torchrun's variables; connect() starts the process group"""

    def __init__(self):
        global RANK_PREFIX
        env = os.environ
        self.rank, self.world, self.local_rank, self.launcher = 0, 1, 0, "single"
        if "RANK" in env and "WORLD_SIZE" in env:
            try:
                self.rank, self.world = int(env["RANK"]), int(env["WORLD_SIZE"])
                self.local_rank = int(env.get("LOCAL_RANK", self.rank))
            except ValueError:
                die("RANK, WORLD_SIZE and LOCAL_RANK must be integers (set by torchrun)")
            self.launcher = "torchrun"
            if not 0 <= self.rank < self.world:
                die(f"torchrun gave rank {self.rank} of world size {self.world}; the rank must be below the world size")
            if "TORCHELASTIC_RUN_ID" in env and os.getpgrp() != os.getpid():  # not a group (or session) leader yet
                # a process group of its own, as mpirun's ranks have: a Ctrl-C (or a closed terminal's
                # SIGHUP) then reaches torchrun alone, which passes it on once. In torchrun's group the
                # rank got it twice, from the terminal and from torchrun, and the second exited at once;
                # the C trainers tell the two apart by the sender (llmc/signals.h), which Python's
                # signal handlers do not see. SIGTTOU ignored: a terminal set to `stty tostop` would
                # otherwise stop a writer outside its foreground group
                signal.signal(signal.SIGTTOU, signal.SIG_IGN)
                os.setpgid(0, 0)
        if self.world > 1:
            RANK_PREFIX = f"[rank {self.rank}] "
        self.cuda = torch.cuda.is_available()
        if self.cuda:
            torch.cuda.set_device(self.local_rank % torch.cuda.device_count())
        self.device = torch.device("cuda", torch.cuda.current_device()) if self.cuda else torch.device("cpu")

    def connect(self, timeout_s):
        """NCCL on GPUs, gloo on CPUs; a collective stuck for timeout_s seconds is an error"""
        env = os.environ
        if self.world > 1:
            for v in ("MASTER_ADDR", "MASTER_PORT"):
                if v not in env:
                    die(f"{v} is not set: launch with torchrun, or set MASTER_ADDR and MASTER_PORT for every rank")
            import torch.distributed as dist
            self.dist = dist
            where = f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}"
            try:
                dist.init_process_group("nccl" if self.cuda else "gloo", rank=self.rank, world_size=self.world,
                                        timeout=datetime.timedelta(seconds=timeout_s))
            except (RuntimeError, OSError) as e:  # TimeoutError is an OSError
                if self.rank == 0:
                    die(f"not all {self.world} ranks joined at {where} within -pt {timeout_s} s ({one_line(e)}); start "
                        f"every rank (WORLD_SIZE={self.world}) with the same MASTER_ADDR and MASTER_PORT")
                die(f"rank 0 did not answer at {where} within -pt {timeout_s} s ({one_line(e)}): it ended (its error "
                    "says why) or was not started; start every rank with the same MASTER_ADDR and MASTER_PORT")

    def allreduce(self, values, op="sum"):
        """sum (or max) of a list of numbers over the ranks, in float64"""
        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        if self.world > 1:
            self.dist.all_reduce(t, op=self.dist.ReduceOp.SUM if op == "sum" else self.dist.ReduceOp.MAX)
        return t.tolist()

    def barrier(self):
        if self.world > 1:
            self.dist.barrier()

    def check_same(self, value, what, hint):
        """comm_check_same: every rank must hold the same value"""
        if self.world == 1:
            return
        everyone = [None] * self.world
        self.dist.all_gather_object(everyone, value)
        bad = [str(r) for r in range(1, self.world) if everyone[r] != everyone[0]]
        if bad:
            die(f"rank(s) {', '.join(bad)} have different {what} than rank 0; {hint}")



# ---------------------------------------------------------------------------------------------
# checkpoints: llmc/checkpoint.h (state file version 2)

class TrainState:
    def __init__(self, a):
        self.step = self.opt_steps = 0
        self.max_steps = 0  # the run's -x (the LR schedule's length), kept in the state file
        self.settings = types.SimpleNamespace(recorded=0)  # the other optimizer flags, kept there too
        self.data_skip = self.rollbacks = 0  # the C trainers' -rb: step s trains on the data of s + data_skip
        self.sample_rng = sample_rng_seed(a.seed)
        self.guard = Guard(a.guard_z_loss, a.guard_z_norm, a.guard_max_skips)


def ckpt_path(d, kind, step, rank=None):
    if rank is not None:
        return os.path.join(d, f"{kind}_{step:08d}_{rank:05d}.bin")
    return os.path.join(d, f"DONE_{step:08d}" if kind == "DONE" else f"{kind}_{step:08d}.bin")


class CheckpointWriteError(Exception):
    """a checkpoint file that could not be written, in llmc/utils.h's words (-o: writing '<file>' failed: ...)"""


def atomic_write(path, parts):
    """write under a temporary name, fsync, rename, fsync the directory: a crash leaves old or new; a failure
    removes the temporary and raises CheckpointWriteError"""
    tmp = f"{path}.tmp.{os.getpid()}"
    what = "creating"
    try:
        with open(tmp, "wb") as f:
            what = "writing"
            for p in parts:
                f.write(p)
            f.flush()
            os.fsync(f.fileno())
        what = "renaming the temporary to"
        os.rename(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        full = " (the disk is full)" if e.errno in (errno.ENOSPC, errno.EDQUOT) else ""
        raise CheckpointWriteError(f"-o: {what} '{path}' failed: {e.strerror or e}{full}") from None
    fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


def set64(h, i, v):
    h[i: i + 2] = np.array([v], dtype="<i8").view("<i4")


def get64(h, i):
    return int(h[i: i + 2].view("<i8")[0])


def state_file_parts(a, st, cfg, P, r, W, m, v):
    """rank r's state file: the 256-int header (llmc/checkpoint.h's layout), its slice of AdamW's m and v (the
    even split of [0, P)), the guard's histories"""
    lo, hi = P * r // W, P * (r + 1) // W
    sections = [m[lo:hi].astype("<f4").tobytes(), v[lo:hi].astype("<f4").tobytes()]
    guard = st.guard.loss_hist.astype("<f4").tobytes() + st.guard.norm_hist.astype("<f4").tobytes()
    h = header_ints([STATE_MAGIC, STATE_VERSION, W, r, 0, a.shuffle, a.B, a.T])
    set64(h, 8, a.total_batch)
    h[10], h[11] = st.step, st.opt_steps
    set64(h, 12, P); set64(h, 14, lo); set64(h, 16, hi - lo); set64(h, 18, a.seed)
    set64(h, 20, st.sample_rng if st.sample_rng < 1 << 63 else st.sample_rng - (1 << 64))
    h[22], h[23], h[24] = st.guard.count, st.guard.head, st.guard.consecutive
    set64(h, 25, st.guard.total_skipped)
    h[30:36] = [cfg.block_size, cfg.vocab_size, cfg.padded_vocab_size, cfg.n_layer, cfg.n_head, cfg.n_embd]
    h[27] = st.max_steps
    h[36], h[37] = st.data_skip, st.rollbacks
    r_s = st.settings  # [38..46]: the optimizer settings, the floats' bits
    h[38:41] = [r_s.recorded, SCHEDULES.index(r_s.schedule), r_s.warmup]
    h[41:47] = np.array([r_s.lr, r_s.final_lr_frac, r_s.decay_frac, r_s.weight_decay, r_s.muon_lr, r_s.muon_momentum],
                        dtype="<f4").view("<i4")
    h[28] = 1 if a.optimizer == "muon" else 0  # the optimizer (llmc/checkpoint.h)
    h[251] = crc_int32(zlib.crc32(guard))
    h[252] = CRC_TAG
    h[253], h[254] = crc_int32(zlib.crc32(sections[0])), crc_int32(zlib.crc32(sections[1]))  # h[255]: no master
    h[250] = header_crc(h, 250)
    return [h.astype("<i4").tobytes()] + sections + [guard]


def checkpoint_save(a, d, dist, st, cfg, flat_params, m, v):
    """model (rank 0), this rank's state file, then DONE (rank 0). Returns whether every rank's files were
    written, and why this rank's were not (None where they were): a failed checkpoint's files are removed
    and the older checkpoints stay, as in llmc/checkpoint.h"""
    P, r, W = len(flat_params), dist.rank, dist.world
    if r == 0 and os.path.lexists(ckpt_path(d, "DONE", st.step)):
        os.remove(ckpt_path(d, "DONE", st.step))  # an earlier run's of this step: incomplete while its files are replaced
    dist.barrier()
    err = None
    try:
        if r == 0:
            atomic_write(ckpt_path(d, "model", st.step), [model_file_bytes(cfg, flat_params.astype("<f4").tobytes(), 3)])
        atomic_write(ckpt_path(d, "state", st.step, r), state_file_parts(a, st, cfg, P, r, W, m, v))
    except CheckpointWriteError as e:
        err = str(e)
    written = dist.allreduce([1.0 if err else 0.0], "max")[0] == 0.0  # every file of this checkpoint is on disk
    if written and r == 0:
        try:
            atomic_write(ckpt_path(d, "DONE", st.step), [f"step {st.step}\nworld_size {W}\n".encode()])
        except CheckpointWriteError as e:
            err = str(e)
    written = written and dist.allreduce([1.0 if err else 0.0], "max")[0] == 0.0  # rank 0's marker
    if not written:
        for path in ([ckpt_path(d, "model", st.step)] if r == 0 else []) + [ckpt_path(d, "state", st.step, r)]:
            with contextlib.suppress(OSError):
                os.remove(path)
        return False, err
    if r == 0 and a.checkpoint_keep > 0:  # as llmc/checkpoint.h: those past this one (an earlier run's) neither count nor go
        for old in [s for s in checkpoint_list(d) if s <= st.step][max(a.checkpoint_keep, 1):]:
            if a.checkpoint_major <= 0 or old % a.checkpoint_major != 0:
                checkpoint_delete(d, old)
    return True, None


def torchrun_grace_s():
    """under torchrun (llmc/processes.h's comm_torchrun_grace_s): the seconds from passing a stop signal
    on to SIGKILL: its --shutdown-timeout (from the command line of torchrun, this process's parent),
    else TORCH_ELASTIC_SHUTDOWN_TIMEOUT, else 30; None where torchrun did not start this process"""
    if not all(os.environ.get(v) for v in ("TORCHELASTIC_RUN_ID", "RANK", "WORLD_SIZE")):
        return None

    def seconds(text):
        return int(text) if re.fullmatch(r"[0-9]{1,7}", text) and int(text) <= 1000000 else None
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            args = f.read(16383).decode(errors="replace").split("\0")
    except OSError:
        args = []
    for i, arg in enumerate(args):
        for name in ("--shutdown-timeout", "--shutdown_timeout"):
            value = arg[len(name) + 1:] if arg.startswith(name + "=") else (
                args[i + 1] if arg == name and i + 1 < len(args) else None)
            if value is not None and seconds(value) is not None:
                return float(seconds(value))
    env = seconds(os.environ.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", ""))
    return float(env) if env is not None else 30.0


class CheckpointRecord:
    """llmc/checkpoint.h's rules for checkpoints that fail: a warning from each rank whose files failed, and
    training goes on; CKPT_MAX_FAILURES in a row, or the run's last one failing, stop it (rank 0 says why)"""

    def __init__(self, d, rank, newest):
        self.d, self.rank, self.newest, self.failures, self.last_failed = d, rank, newest, 0, None

    def newest_text(self, yet=" yet"):
        return (f"checkpoint {self.newest} is the newest complete one" if self.newest is not None
                else f"no complete checkpoint exists{yet}")

    def took(self, step, ends_run, written, err):
        if written:
            self.newest, self.failures, self.last_failed = step, 0, None
            return
        self.failures += 1
        self.last_failed = (step, err)
        if err and ends_run:  # the run's last (its last step, or a stop): require_last ends the run
            warn(f"checkpoint {step}, this run's last, not written: {err}; {self.newest_text()}")
        elif err:
            warn(f"checkpoint {step} not written: {err}; {self.newest_text()}; training goes on ({self.failures} "
                 f"failed in a row; the run stops at {CKPT_MAX_FAILURES})")
        if self.failures >= CKPT_MAX_FAILURES:
            self.stop(f"{self.failures} checkpoints in a row could not be written to {self.d} (each rank's warning above "
                      f"says why); free space there or choose another -o, then run again with -y 1 ({self.newest_text()})")

    def require_last(self, step):
        """at the end (or a stop): this run's last checkpoint failed, which no later one makes up for"""
        if self.last_failed is not None and self.last_failed[0] == step:
            err = self.last_failed[1] or "another rank's file failed (its warning says how)"
            self.stop(f"checkpoint {step}, this run's last, could not be written: {err}; {self.newest_text('')}; free "
                      "space there or choose another -o, and run again with -y 1")

    def stop(self, msg):
        if self.rank == 0:
            die(msg)
        leave(1)  # every rank knows: rank 0 says it


def make_output_dir(d):
    """-o and the folders above it, as llmc/utils.h makes them: one line where it cannot be"""
    if os.path.exists(d) and not os.path.isdir(d):
        die(f"-o {d} exists and is not a folder; choose another -o")
    try:
        os.makedirs(d, exist_ok=True)
    except OSError as e:
        die(f"cannot create directory '{e.filename or d}': {e.strerror}")


RUN_LOCK = "llmc_run.lock"  # CKPT_RUN_LOCK
_run_lock = None  # the locked file's descriptor, open until the process ends
_run_lock_len = 0  # the length of its first line (the holder)
_run_lock_owner = ""  # its second line as this run found it (lock_own's)


def lock_output_dir(d):
    """checkpoint_lock_dir: one run per -o, by an exclusive flock on -o/llmc_run.lock held for the run's life"""
    global _run_lock
    path = os.path.join(d, RUN_LOCK)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        warn(f"-o {d}: cannot open {path} ({e.strerror}): nothing keeps a second run out of this folder")
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        who = os.pread(fd, 255, 0).decode(errors="replace").split("\n")[0].strip()
        who = re.sub(r"[^\x20-\x7e]", "?", who) or "its details not written yet"  # nothing that would drive the terminal
        die(f"-o {d} is in use by another run ({who}): two runs in one folder overwrite each other's checkpoints; "
            "wait for it to end, or choose another -o")
    except OSError as e:
        warn(f"-o {d}: cannot lock {path} ({e.strerror}): nothing keeps a second run out of this folder")
        os.close(fd)
        return
    global _run_lock_len, _run_lock_owner
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    who = f"pid {os.getpid()} on {os.uname().nodename}, started {when}\n".encode()
    was = os.pread(fd, 1023, 0).decode(errors="replace")  # the second line says whose the checkpoints are
    _run_lock_owner = was.split("\n", 1)[1] if "\n" in was else ""
    with contextlib.suppress(OSError):  # unbuffered: on a full disk the file stays empty, the lock holds all the same
        os.ftruncate(fd, 0)
        os.pwrite(fd, who, 0)
    _run_lock, _run_lock_len = fd, len(who)


def torchrun_line():
    """checkpoint.h's ckpt_torchrun_line: the lock file's second line under torchrun (its process, host, run id)"""
    if not all(os.environ.get(v) for v in ("TORCHELASTIC_RUN_ID", "RANK", "WORLD_SIZE")):
        return None
    parent, start = os.getppid(), 0
    with contextlib.suppress(OSError, ValueError, IndexError):  # field 22 of /proc/<pid>/stat: its start
        with open(f"/proc/{parent}/stat", "rb") as f:
            start = int(f.read(1023).rpartition(b")")[2].split(b" ")[20])
    return f"torchrun pid {parent} (started {start}) on {os.uname().nodename}, run {os.environ['TORCHELASTIC_RUN_ID']}\n"


def torchrun_restart():
    """checkpoint_torchrun_restart: rank 0, after lock_output_dir: a torchrun restart (--max-restarts) of the run
    that owns the folder, which resumes its checkpoints as -y 1 does"""
    line = torchrun_line()
    if line is None:
        return False
    count = os.environ.get("TORCHELASTIC_RESTART_COUNT", "")
    if count and not (re.fullmatch(r"[0-9]{1,7}", count) and int(count) <= 1000000):
        die(f"environment variable TORCHELASTIC_RESTART_COUNT={count} is not a whole number in 0..1000000; the "
            "launcher sets it (unset it to run one process)")
    return bool(count) and int(count) >= 1 and line == _run_lock_owner


def lock_own():
    """checkpoint_lock_own: rank 0, once the folder is this run's: under torchrun, the lock file's second line"""
    line = torchrun_line()
    if _run_lock is None or line is None:
        return
    with contextlib.suppress(OSError):
        if os.pwrite(_run_lock, line.encode(), _run_lock_len) == len(line.encode()):
            os.ftruncate(_run_lock, _run_lock_len + len(line.encode()))


def ckpt_file_kind(name):
    """1: a checkpoint's file (DONE_, model_, state_ names of ckpt_path); 2: a killed writer's temporary of one; 0"""
    base, tmp, _ = name.partition(".tmp.")
    if not re.fullmatch(r"DONE_\d{8}|DONE_\d{8}\.skipped|model_\d{8}\.bin|state_\d{8}_\d{5}\.bin", base):
        return 0
    return 2 if tmp else 1


SHARED_CHECK = "llmc_shared_check_"  # CKPT_SHARED_CHECK: the check's file, then the nonce in hex


def check_shared_dir(d, dist):
    """llmc/checkpoint.h's checkpoint_check_shared_dir: with several processes every rank must see -o
    (a checkpoint is every rank's files in one folder); rank 0 writes a file of a fresh nonce there
    (where it cannot, the check steps aside), each rank looks for it for 2 s, and if one does not see
    it the run stops"""
    if dist.world == 1:
        return
    # 48 random bits: exact in allreduce's float64; the others give 0, so the max is rank 0's
    nonce, wrote = 0, 0.0
    if dist.rank == 0:
        nonce = int.from_bytes(os.urandom(6), "little")
        path = os.path.join(d, f"{SHARED_CHECK}{nonce:016x}")
        try:
            with open(path, "w") as f:
                f.write(str(nonce))
            wrote = 1.0
        except OSError:  # a folder rank 0 cannot write to (a full disk): its checkpoints fail and say so
            with contextlib.suppress(OSError):
                os.remove(path)
    nonce, wrote = dist.allreduce([nonce, wrote], "max")
    if not wrote:
        return
    nonce = int(nonce)
    path = os.path.join(d, f"{SHARED_CHECK}{nonce:016x}")
    seen = False
    for _ in range(21):
        try:
            with open(path) as f:
                seen = f.read() == str(nonce)
        except OSError:
            pass
        if seen:
            break
        time.sleep(0.1)
    missing = dist.allreduce([1.0 if r == dist.rank and not seen else 0.0 for r in range(dist.world)], "max")
    if dist.rank == 0:
        os.remove(path)
    bad = [str(r) for r in range(1, dist.world) if missing[r] > 0]  # rank 0 wrote the file
    if bad:  # every rank knows: each stops with the line (none waits for another)
        ranks = ",".join(bad[:16]) + (",..." if len(bad) > 16 else "")  # llmc/utils.h's missing_ranks_list
        die(f"-o {d}: {'rank' if len(bad) == 1 else 'ranks'} {ranks} {'does' if len(bad) == 1 else 'do'} not see the "
            "files rank 0 writes there; a checkpoint is every rank's files in one folder, so -o must be one every node "
            "mounts at the same path (a shared filesystem), not a node's own disk")


def claim_output_dir(d, start_over):
    """llmc/checkpoint.h's checkpoint_claim_dir: a new run in an -o that holds another run's checkpoints is refused
    (a later -y 1 would resume whichever is newest), or with --start-over 1 that run moves to <d>/old_run_<N>/"""
    names = os.listdir(d)
    nfiles = sum(ckpt_file_kind(n) == 1 for n in names)
    if nfiles == 0:
        return
    if not start_over:
        done = checkpoint_list(d)
        newest = f", the newest complete one of step {done[0]}" if done else ""
        die(f"-o {d} holds the checkpoints of another run ({nfiles} file(s){newest}); continue that run with -y 1, keep "
            f"it with another -o, or pass --start-over 1 to move it into {d}/old_run_<N>/ and start anew here")
    k = 1
    while True:
        old = os.path.join(d, f"old_run_{k}")
        try:
            os.mkdir(old)
            break
        except FileExistsError:
            k += 1
        except OSError as e:
            die(f"--start-over: cannot create '{old}': {e.strerror}")
    for n in names:
        if ckpt_file_kind(n) or n in ("main.log", "metrics.jsonl"):
            try:
                os.rename(os.path.join(d, n), os.path.join(old, n))
            except OSError as e:
                die(f"--start-over: moving '{os.path.join(d, n)}' to '{os.path.join(old, n)}' failed: {e.strerror}")
    print(f"--start-over: the earlier run in {d} ({nfiles} checkpoint file(s), its logs) moved to {old}", flush=True)


def checkpoint_list(d):
    """steps of the DONE markers in d, newest first"""
    names = os.listdir(d) if os.path.isdir(d) else []
    return sorted((int(n[5:]) for n in names if re.fullmatch(r"DONE_\d{8}", n)), reverse=True)


def done_world_size(d, step):
    path = ckpt_path(d, "DONE", step)
    if not_a_file(path):  # a FIFO named DONE_ would block the read
        return -1
    try:
        m = re.match(r"step (\d+)\nworld_size (\d+)", open(path).read())
    except (OSError, UnicodeDecodeError):
        return -1
    return int(m.group(2)) if m and int(m.group(1)) == step else -1


def checkpoint_delete(d, step):
    """DONE first, so a crash midway leaves the checkpoint incomplete, not wrong; every state file of the step, also
    those of ranks past the marker's world size (a failed attempt of a larger job), as llmc/checkpoint.h"""
    states = sorted(glob.glob(os.path.join(glob.escape(d), f"state_{step:08d}_[0-9][0-9][0-9][0-9][0-9].bin")))
    for p in [ckpt_path(d, "DONE", step), ckpt_path(d, "model", step)] + states:
        with contextlib.suppress(OSError):
            os.remove(p)


def checkpoint_read(a, d, step, cfg):
    """(checkpoint, error) for checkpoint `step`: the model, the whole optimizer state (every rank's
    slice, re-assembled), the train state; error names what is missing or corrupt. Files written
    with other data settings or another model are fatal: an older checkpoint would not help."""
    w = done_world_size(d, step)
    if w <= 0:
        return None, f"marker DONE_{step:08d} in '{d}' is unreadable"
    path = ckpt_path(d, "model", step)
    mcfg, flat, err = read_model_flat(path, in_checkpoint=True)
    if err:
        return None, err
    if mcfg.key() != cfg.key():
        die(f"model file '{path}' is {mcfg.describe()}, but the model built (-e) is {cfg.describe()}; "
            "resume with the -e of the run that wrote it, or use another -o")
    P = len(flat)
    opt = {k: np.zeros(P, dtype=np.float32) for k in ("m", "v", "master")}
    covered, h0, has_master = 0, None, False
    for r in range(w):
        path = ckpt_path(d, "state", step, r)
        why = not_a_file(path)
        if why:
            return None, f"state file '{path}' {'is missing' if why == 'not found' else why}"
        raw = open(path, "rb").read()
        if len(raw) < 1024:
            return None, f"state file '{path}' is truncated ({len(raw)} bytes)"
        h = np.frombuffer(raw[:1024], dtype="<i4")
        if h[0] != STATE_MAGIC or h[1] != STATE_VERSION:
            return None, f"'{path}' is not a version {STATE_VERSION} state file of this trainer (magic {h[0]} version {h[1]})"
        lo, n = get64(h, 14), get64(h, 16)
        nsec = 3 if h[4] else 2
        expected = 1024 + 4 * (nsec * n + 2 * GUARD_WINDOW)
        if n < 0 or len(raw) != expected:
            return None, f"state file '{path}' is {len(raw)} bytes, its header implies {expected} (truncated or corrupt)"
        if h[2] != w or h[3] != r or get64(h, 12) != P or h[10] != step:
            return None, (f"state file '{path}' does not belong to checkpoint {step} of {w} ranks with {P} parameters "
                          f"(header: step {h[10]}, rank {h[3]} of {h[2]}, {get64(h, 12)} parameters)")
        if h[7] != a.T or get64(h, 8) != a.total_batch or h[5] != a.shuffle or get64(h, 18) & U64 != a.seed:
            die(f"checkpoint '{path}' was written with -t {h[7]} -d {get64(h, 8)} -sh {h[5]} -rs {get64(h, 18) & U64}; "
                f"this run has -t {a.T} -d {a.total_batch} -sh {a.shuffle} -rs {a.seed}; the data position of a "
                "resumed run depends on these, so resume with the same values"
                + (f" (to resume with another -b or number of processes, pass -d {get64(h, 8)}, with a -b and process "
                   "count whose B x T x processes divides it: without -d, -d is B x T x processes)"
                   if get64(h, 8) != a.total_batch else ""))
        if h[28] not in (0, 1):
            return None, f"state file '{path}' has a corrupt header: optimizer [28] is out of range"
        if settings_from_header(h) is None:
            return None, f"state file '{path}' has a corrupt header: an optimizer setting [38..46] is out of range"
        if h[28] != (a.optimizer == "muon"):
            die(f"checkpoint '{path}' was written with -opt {('adamw', 'muon')[h[28]]}, this run has -opt {a.optimizer}; "
                f"the optimizer state of one does not continue the other: resume with -opt {('adamw', 'muon')[h[28]]}, "
                "or start the new run in another -o")
        if lo != covered:
            return None, (f"state files of checkpoint {step} do not tile the parameters (rank {r} starts at {lo}, "
                          f"expected {covered})")
        body = np.frombuffer(raw, dtype="<f4", offset=1024)
        guard_bytes = raw[1024 + 4 * nsec * n:]
        if any(crc_int32(zlib.crc32(body[s * n:(s + 1) * n].tobytes())) != h[253 + s] for s in range(nsec)) \
                or crc_int32(zlib.crc32(guard_bytes)) != h[251]:
            return None, f"state file '{path}' fails its checksum"
        for s, k in enumerate(("m", "v", "master")[:nsec]):
            opt[k][lo: lo + n] = body[s * n:(s + 1) * n]
        covered += n
        if r == 0:
            h0, guard0, has_master = h.copy(), np.frombuffer(guard_bytes, dtype="<f4"), bool(h[4])
    if covered != P:
        return None, f"state files of checkpoint {step} cover {covered} of {P} parameters"
    # fp32 master weights (train_gpt2cu -w 1) are the exact parameters behind its bf16 model file
    ck = dict(step=step, params=opt["master"] if has_master else flat, m=opt["m"], v=opt["v"], header=h0,
              guard=guard0)
    return ck, None


MAX_ROLLBACKS = 3


def test_loss_spike(data_step):
    """LLMC_TEST_LOSS_SPIKE=<n>,...: the loss of the steps on the data of step <n> times 1000 (llmc/guard.h)"""
    spikes = os.environ.get("LLMC_TEST_LOSS_SPIKE", "")
    return 1000.0 if str(data_step) in spikes.split(",") else 1.0


def fault_sample(step):
    """LLMC_FAULT=sample:<step> (llmc/checkpoint.h), the only fault point of the twin: rank 0 (the one that
    samples) killed as the sample after <step> steps begins, or with :stop:0 frozen there for a test to signal"""
    faults = os.environ.get("LLMC_FAULT", "").split(",")
    sig = signal.SIGSTOP if f"sample:{step}:stop:0" in faults else signal.SIGKILL if f"sample:{step}" in faults else None
    if sig:
        sys.stdout.flush()
        os.kill(os.getpid(), sig)


def rollback(a, dist, cfg, st, model, opt, muon, reason):
    """-rb: back to the newest complete checkpoint, passing over the data since it (llmc/train_loop.h's
    train_rollback)"""
    if st.rollbacks >= MAX_ROLLBACKS:
        die(f"{st.guard.consecutive} consecutive steps skipped by the numeric guards (last: {reason}) after "
            f"{st.rollbacks} rollbacks (-rb); the run is diverging: lower -l, raise -u, or resume from an earlier checkpoint")
    frm, skip, n = st.step, st.data_skip, st.rollbacks
    run = st.max_steps, st.settings  # this run's -x and optimizer flags, not those the checkpoint recorded
    ck = checkpoint_resume(a, dist, cfg, st)
    if not isinstance(ck, dict):
        die(f"{st.guard.consecutive} consecutive steps skipped by the numeric guards (last: {reason}) and -rb found no "
            f"complete checkpoint that loads in {a.output_dir} to roll back to; lower -l or raise -u, and checkpoint more "
            "often (-n)")
    model.load_flat(ck["params"])
    load_opt_state(opt, model, ck["m"], ck["v"], st.opt_steps, muon)
    st.guard.consecutive = 0
    st.data_skip, st.rollbacks = skip + frm - st.step, n + 1
    st.max_steps, st.settings = run
    if dist.rank == 0:
        print(f"rollback {st.rollbacks} of {MAX_ROLLBACKS}: {a.rollback_after} steps in a row skipped (last: {reason}); "
              f"back to checkpoint {st.step}, passing over the data of steps {st.step + 1}-{frm} (step {st.step + 1} "
              f"now trains on the data of step {st.step + 1 + st.data_skip})", flush=True)


def checkpoint_resume(a, dist, cfg, st):
    """the newest complete, intact checkpoint in -o (all ranks agree), None where there is none, or
    "none loads" where there are some and none loads (llmc/checkpoint.h's 1, 0, -1)"""
    steps = checkpoint_list(a.output_dir)
    for i, step in enumerate(steps):
        ck, err = checkpoint_read(a, a.output_dir, step, cfg)
        if err:
            warn(f"skipping checkpoint {step}: {err}")
        if dist.allreduce([1.0 if err else 0.0], "max")[0] == 0.0:
            if dist.rank == 0:  # the skipped newer ones: llmc/checkpoint.h's ckpt_retire_skipped
                for old in steps[:i]:
                    done = ckpt_path(a.output_dir, "DONE", old)
                    try:
                        os.rename(done, done + ".skipped")
                        warn(f"checkpoint {old} stays in {a.output_dir} as it is, its marker renamed DONE_{old:08d}.skipped "
                             "(rename it back to resume from it)")
                    except OSError:
                        pass
            h = ck["header"]
            st.step, st.opt_steps, st.sample_rng = int(h[10]), int(h[11]), get64(h, 20) & U64
            st.data_skip, st.rollbacks, st.max_steps = int(h[36]), int(h[37]), int(h[27])
            st.settings = settings_from_header(h)
            g = st.guard
            g.count, g.head, g.consecutive, g.total_skipped = int(h[22]), int(h[23]), int(h[24]), get64(h, 25)
            g.loss_hist[:], g.norm_hist[:] = ck["guard"][:GUARD_WINDOW], ck["guard"][GUARD_WINDOW:]
            return ck
    return "none loads" if steps else None


class LogFile:
    """main.log or metrics.jsonl (rank 0), as llmc/logger.h keeps them: a write that fails (a full disk) warns
    once and ends that file, training goes on, and the end of the run names the file again"""

    def __init__(self, path, append):
        self.path, self.lost = path, None  # lost: (the step from which events are missing, why)
        try:
            self.f = open(path, "a" if append else "w")
        except OSError as e:
            die(f"-o: cannot write the log '{path}': {e.strerror}; remove what is there or choose another -o")
        if append:
            self.drop_cut_line()

    def drop_cut_line(self):
        """a last line cut by the run before (killed mid-write) goes, as logger_drop_cut_line does"""
        with contextlib.suppress(OSError), open(self.path, "rb+") as f:
            size = f.seek(0, os.SEEK_END)
            n = min(size, 65536)
            f.seek(size - n)
            tail = f.read(n)
            if not tail or tail.endswith(b"\n"):
                return
            i = tail.rfind(b"\n")
            keep = size - n + i + 1 if i >= 0 else (0 if n == size else -1)
            if keep >= 0:
                f.truncate(keep)
                warn(f"-o: the last line of '{self.path}' was cut ({size - keep} bytes; the run before ended while "
                     "writing it): dropped")
            else:
                f.write(b"\n")

    def write(self, step, text):
        if self.f is None:
            return
        try:
            self.f.write(text)
            self.f.flush()
        except OSError as e:
            self.lost = (step, e.strerror or str(e))
            warn(f"writing '{self.path}' failed at step {step} ({self.lost[1]}): it gets no more events; training goes "
                 "on (free space on the disk of -o to keep logs)")
            with contextlib.suppress(OSError):
                self.f.close()
            self.f = None

    def close(self):
        if self.f is not None:
            with contextlib.suppress(OSError):
                self.f.close()
            self.f = None
        if self.lost:
            warn(f"'{self.path}' is incomplete: the events from step {self.lost[0]} on were not written ({self.lost[1]})")


# ---------------------------------------------------------------------------------------------
# evaluation and sampling

def token_losses(model, x, y, autocast):
    """per-token losses (B, T) of a batch, forward only"""
    with torch.no_grad(), autocast():
        logits, _ = model(x)
        return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1), reduction="none").view(y.shape)


EVAL_STOP_EVERY_BATCHES, EVAL_STOP_EVERY_EXAMPLES = 4, 16  # train_loop.h's


class EvalStop:
    """train_loop.h's EvalStop: on several ranks, whether any got a stop signal is agreed after every
    `every` units of each rank's share (batches, examples) up to `common` (the units every share has),
    so that a signal to one rank stops the others within a few units; a rank that got one skips its
    units up to the next agreement. stop: the run's list of signals, None where the pass runs whole"""

    def __init__(self, dist, stop, every, common):
        self.dist, self.stop, self.every, self.common = dist, stop, every, common
        self.next, self.agreed, self.skipped = every, False, False

    def agreed_by(self, done):
        """before unit `done` of this rank's share (math.inf after its last): the agreements due; True where
        the pass stops here, on every rank"""
        if self.stop is None:
            return False
        if self.dist.world == 1:
            self.agreed = bool(self.stop)
            return self.agreed
        while not self.agreed and self.next <= min(done, self.common):
            self.agreed = self.dist.allreduce([float(bool(self.stop))], op="max")[0] > 0
            self.next += self.every
        return self.agreed

    def skip(self):
        """whether this rank skips its next unit (its own signal; the others hear of it at the next agreement)"""
        self.skipped = self.skipped or bool(self.stop)
        return self.skipped

    def finish(self):
        """after this rank's last unit (or an agreed stop): the agreements still due; True where its share is void"""
        self.agreed_by(math.inf)
        return self.agreed or self.skipped


def val_loss(a, dist, model, val, autocast, stop=None):
    """mean loss over the first -m*B windows of the val data (all with -m -1), any rank count; None where
    a stop signal (in stop, the run's list; None: the pass runs whole) cut it short on some rank
    (train_loop.h's train_val_loss)"""
    B, T = a.B, a.T
    M = val.total_windows if a.val_batches < 0 else min(a.val_batches * B, val.total_windows)
    nmb = (M + B - 1) // B
    mine = (nmb + dist.world - 1) // dist.world  # rank 0's batches
    progress = Progress(dist.rank == 0, "val loss", "batches", nmb)
    halt = EvalStop(dist, stop, EVAL_STOP_EVERY_BATCHES, nmb // dist.world)
    acc = [0.0, 0.0, 0.0]  # loss sum, tokens, the ranks that stopped
    for j in range(dist.rank, nmb, dist.world):
        if halt.agreed_by(j // dist.world):  # the run stops: its checkpoint first, not the rest of the evaluation
            break
        if halt.skip():
            continue
        count = min(B, M - j * B)
        rows = torch.from_numpy(val.read(j * B, count)).to(dist.device)
        acc[0] += token_losses(model, rows[:, :-1], rows[:, 1:], autocast).double().sum().item()
        acc[1] += count * T
        progress.update((j // dist.world + 1) / mine)
    acc[2] = float(halt.finish())
    acc = dist.allreduce(acc)
    if acc[2] > 0:
        return None
    return float(np.float32(acc[0] / acc[1])) if acc[1] else math.nan  # -m 0: nothing evaluated


def load_hellaswag(path, vocab_size):
    """the examples of an eval file (llmc/hellaswag.h layout): [(label, context, [endings])]"""
    hint = "make it with: bash dev/data/hellaswag.sh"
    why = not_a_file(path)
    if why:
        die(f"HellaSwag file '{path}' {why} (-hf); {hint}")
    size = os.path.getsize(path)
    if size < 1024 or (size - 1024) % 2:
        die(f"HellaSwag file '{path}' is {size} bytes: truncated or not an eval file; {hint}")
    h = check_header(path, EVAL_MAGIC, 1, "an eval file", hint)
    s = np.fromfile(path, dtype="<u2", offset=1024).tolist()
    examples, p = [], 0
    for i in range(int(h[2])):
        def take(k):
            nonlocal p
            if p + k > len(s):
                die(f"HellaSwag file '{path}' is truncated in example {i}; {hint}")
            p += k
            return s[p - k: p]
        start = p
        marker, nbytes, index, label, nc, ctx_len = take(6)
        if marker != 65535 or not 1 <= nc <= 16 or label >= nc:
            die(f"HellaSwag file '{path}' is corrupt at example {i} (marker {marker}, {nc} completions, label {label}); {hint}")
        if index != i % 65536:  # llmc/hellaswag.h: the writers number them 0, 1, 2, ... (after the marker, as there)
            die(f"HellaSwag file '{path}' is corrupt: example {i} has index {index}; {hint}")
        ctx = take(ctx_len)
        ends = [take(take(1)[0]) for _ in range(nc)]
        if 2 * (p - start) != nbytes or not all(ends) or max(ctx + sum(ends, [])) >= vocab_size:
            die(f"HellaSwag file '{path}' is corrupt at example {i} (size, empty completion or token id >= {vocab_size}); {hint}")
        examples.append((label, ctx, ends))
    if h[2] <= 0 or p != len(s):
        die(f"HellaSwag file '{path}' holds {h[2]} examples and {2 * (len(s) - p)} bytes after them (corrupt?); {hint}")
    longest = max(2 * (6 + len(ctx) + sum(1 + len(e) for e in ends)) for _, ctx, ends in examples)
    if longest != h[3]:
        die(f"HellaSwag file '{path}' is corrupt: its header says the longest example is {h[3]} bytes, the longest is "
            f"{longest}; {hint}")
    return examples


def hellaswag(a, dist, model, examples, autocast, stop=None):
    """acc_norm as llmc/hellaswag.h scores it: each completion's mean loss after the context (rows
    cut from the left to T+1 tokens), the lowest wins; examples rank, rank+W, ...; batches of B rows.
    (None, None) where a stop signal (in stop, as val_loss's) cut it short on some rank"""
    n = len(examples) if a.hellaswag_max < 0 else min(a.hellaswag_max, len(examples))
    rows = []  # (example, completion, tokens, first scored position)
    for e in range(dist.rank, n, dist.world):
        label, ctx, ends = examples[e]
        for c, end in enumerate(ends):
            toks = ctx + end
            skip = max(0, len(toks) - (a.T + 1))
            rows.append((e, c, toks[skip:], max(0, len(ctx) - 1 - skip)))
    scores = {}
    progress = Progress(dist.rank == 0, "HellaSwag", "examples", n)
    halt = EvalStop(dist, stop, EVAL_STOP_EVERY_EXAMPLES, n // dist.world)
    for b in range(0, len(rows), a.B):
        if halt.agreed_by((rows[b][0] - dist.rank) // dist.world):  # the run stops: its checkpoint first
            break
        if halt.skip():
            continue
        batch = rows[b: b + a.B]
        Tb = max(len(r[2]) - 1 for r in batch)
        # pad with the row's last tokens; causal attention keeps padding out of the scored positions
        x = torch.tensor([r[2][:-1] + [r[2][-2]] * (Tb + 1 - len(r[2])) for r in batch], device=dist.device)
        y = torch.tensor([r[2][1:] + [r[2][-1]] * (Tb + 1 - len(r[2])) for r in batch], device=dist.device)
        losses = token_losses(model, x, y, autocast).double().cpu().numpy()
        for i, (e, c, toks, start) in enumerate(batch):
            scores.setdefault(e, {})[c] = np.float32(losses[i, start: len(toks) - 1].sum() / (len(toks) - 1 - start))
        progress.update((b + len(batch)) / len(rows))
    correct = sum(int(min(sc, key=lambda c: (sc[c], c)) == examples[e][0]) for e, sc in scores.items())
    acc = dist.allreduce([correct, len(scores), float(halt.finish())])
    return (None, None) if acc[2] > 0 else (acc[0], acc[1])


def sample_rng_seed(seed):
    """llmc/generate.h's sample_rng_seed: the sampling RNG's first state for -rs (xorshift64* must not start at 0)"""
    return (seed ^ 0x5DEECE66D) or 1


def xorshift_f32(state):
    """sample_random_f32 (train_loop.h): (new state, a float in [0, 1))"""
    state ^= state >> 12
    state ^= (state << 25) & U64
    state ^= state >> 27
    return state, np.float32(((state * 0x2545F4914F6CDD1D) & U64) >> 40) / np.float32(16777216.0)


TOKENIZER_HOWTO = "./gpt2_tokenize -e encoder.json -m vocab.bpe -w gpt2_tokenizer.bin (or run any dev/data recipe)"


def load_tokenizer(path):
    """token id -> bytes from a decode table, or None (samples then print ids); llmc/tokenizer.h's checks and
    words: a file that is not a whole table is an error"""
    why = not_a_file(path)
    if why == "not found":
        warn(f"tokenizer file -tk '{path}' not found; samples print token ids. Make it with: {TOKENIZER_HOWTO}")
        return None
    if why:  # a path that names something else is a mistake, as in llmc/tokenizer.h
        die(f"tokenizer file -tk '{path}' {why}; give the path of a decode table, made by: {TOKENIZER_HOWTO}")
    raw = open(path, "rb").read()
    remake = f"remake it with: {TOKENIZER_HOWTO}"
    if len(raw) < 1024:
        die(f"tokenizer file '{path}' is truncated (no complete 1024-byte header); {remake}")
    h = np.frombuffer(raw[:1024], dtype="<u4")
    if h[0] != TOKENIZER_MAGIC:
        die(f"'{path}' is not a tokenizer file (magic {h[0]}, expected {TOKENIZER_MAGIC}); {remake}")
    if h[1] not in (1, 2):
        die(f"tokenizer file '{path}' has version {h[1]}; this build reads versions 1 and 2; {remake}")
    V = int(h[2])
    if V == 0 or V > 1 << 24 or V > (len(raw) - 1024) // 2:  # every token takes 2 bytes at least
        die(f"tokenizer file '{path}' claims {V} tokens, which its {len(raw)} bytes cannot hold; {remake}")
    eot = EOT if h[1] == 1 else int(h[3])  # version 1 predates the field: llm.c's GPT-2 files
    if eot >= V:
        die(f"tokenizer file '{path}': EOT id {eot} is not below its vocab size {V}; {remake}")
    table, p = [], 1024
    for i in range(V):
        n = raw[p] if p < len(raw) else None
        if n == 0:
            die(f"tokenizer file '{path}' is corrupt (token {i} has length 0); {remake}")
        if n is None or p + 1 + n > len(raw):
            die(f"tokenizer file '{path}' is truncated at token {i} of {V}; {remake}")
        table.append(raw[p + 1: p + 1 + n])
        p += 1 + n
    if p != len(raw):
        die(f"tokenizer file '{path}' has data after its {V} tokens (corrupt?); {remake}")
    return table


def sample_from_weights(w, coin):
    """the first i with coin < w[0] + ... + w[i] (float32 sums in order); where rounding leaves the sum below
    the coin, the last i with w[i] > 0"""
    above = np.nonzero(coin < np.cumsum(w, dtype=np.float32))[0]
    return int(above[0]) if len(above) else int(np.nonzero(w)[0][-1])


def flush_subnormals(x):
    """the C trainers are built with -ffast-math, which treats float32 subnormals as 0"""
    return np.where(np.abs(x) < np.finfo(np.float32).tiny, np.float32(0), x)


def sample_token(probs, temperature, top_k, coin):
    """llmc/generate.h's sample_token: temperature 0 is the most likely token (the lowest id on ties); else
    weights p^(1/t), only the top_k largest kept (ties at the k-th: the lowest ids), walked with the coin"""
    n, probs = len(probs), flush_subnormals(probs)
    if temperature == 0:
        return int(np.argmax(probs))
    if temperature == 1 and not 0 < top_k < n:
        return sample_from_weights(probs, coin)
    w = probs if temperature == 1 else flush_subnormals(np.power(probs, np.float32(1) / np.float32(temperature),
                                                                 dtype=np.float32))
    if 0 < top_k < n:
        thr = np.partition(w, n - top_k)[n - top_k]
        ties = np.nonzero(w == thr)[0][top_k - int(np.count_nonzero(w > thr)):]
        w = np.where(w < thr, np.float32(0), w)
        w[ties] = 0
    total = float(np.sum(w, dtype=np.float64))
    if not total > 0:  # every kept weight underflowed (a very low temperature): greedy
        return int(np.argmax(probs))
    return sample_from_weights(w, np.float32(float(coin) * total))  # the product in double, as C


GPT2_SPLIT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""  # GPT-2's pre-tokenizer


def load_gpt2_encoder(bpe_dir):
    """GPT-2's BPE encoder from --bpe-dir's encoder.json and vocab.bpe, through tiktoken (llmc/bpe.h is C)"""
    for name in ("encoder.json", "vocab.bpe"):
        path = os.path.join(bpe_dir, name)
        why = not_a_file(path)
        if why:
            die(f"--prompt needs GPT-2's encoder.json and vocab.bpe in --bpe-dir '{bpe_dir}', but '{path}' {why}; unpack "
                "the copies this project ships with: bash dev/data/tinyshakespeare.sh, or pass --bpe-dir <dir>")
    try:
        import tiktoken
    except ImportError:
        die(f"--prompt in train_gpt2.py encodes with tiktoken: {sys.executable} -m pip install tiktoken "
            "(./train_gpt2 --prompt needs no Python)")
    try:  # read here, not by tiktoken's loader: it caches files by their path in /tmp, and drops line 1 unread
        ranks, eot = gpt2_bpe_ranks(os.path.join(bpe_dir, "encoder.json"), os.path.join(bpe_dir, "vocab.bpe"))
        return tiktoken.Encoding("gpt2", pat_str=GPT2_SPLIT, mergeable_ranks=ranks, special_tokens={"<|endoftext|>": eot})
    except (ValueError, KeyError, OSError) as e:
        die(f"--bpe-dir '{bpe_dir}': encoder.json and vocab.bpe are not GPT-2's encoder ({type(e).__name__}"
            f"{': ' + str(e).splitlines()[0] if str(e) else ''}); unpack the copies this project ships with: bash "
            "dev/data/tinyshakespeare.sh, or pass --bpe-dir <dir>")


def gpt2_byte_order():
    """GPT-2's 256 byte tokens in id order, each with the character that stands for it in its files: the
    printable Latin-1 bytes as themselves first, then the others, in byte order, as U+0100 upwards"""
    shown = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    hidden = [b for b in range(256) if b not in shown]
    return [(b, chr(b)) for b in shown] + [(b, chr(0x100 + i)) for i, b in enumerate(hidden)]


def gpt2_bpe_ranks(encoder_path, merges_path):
    """(token bytes -> id, the <|endoftext|> id) from encoder.json, checked as llmc/bpe.h checks it against
    vocab.bpe: the byte tokens first in GPT-2's order, then one token per merge line in file order (a
    first line starting with '#' is the version line; blank lines and CRs are skipped)"""
    order = gpt2_byte_order()
    byte_of = {c: b for b, c in order}
    with open(encoder_path, encoding="utf-8") as f:
        encoder = json.load(f)
    if not isinstance(encoder, dict) or not all(isinstance(i, int) for i in encoder.values()):
        raise ValueError(f"{encoder_path} is not a JSON object of token ids")
    eot = encoder.pop("<|endoftext|>", None)
    if not isinstance(eot, int):
        raise ValueError(f"{encoder_path} has no <|endoftext|> id")
    ranks = {}
    for text, i in encoder.items():
        if any(c not in byte_of for c in text):
            raise ValueError(f"{encoder_path}: token {text!r} is not in GPT-2's byte encoding")
        ranks[bytes(byte_of[c] for c in text)] = i
    for i, (b, _) in enumerate(order):
        if ranks.get(bytes([b])) != i:
            raise ValueError(f"{encoder_path}: the byte 0x{b:02x} has id {ranks.get(bytes([b]))}, GPT-2's order gives {i}")
    with open(merges_path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    first = 1 if lines and lines[0].startswith("#") else 0
    n = 256
    for k, line in enumerate(lines[first:], first + 1):
        line = line.rstrip("\r")
        if not line:
            continue
        parts = line.split(" ")
        if len(parts) != 2 or not all(parts) or any(c not in byte_of for c in parts[0] + parts[1]):
            raise ValueError(f"{merges_path} line {k}: expected two GPT-2 symbols separated by one space")
        left, right = (bytes(byte_of[c] for c in part) for part in parts)
        if ranks.get(left, n) >= n or ranks.get(right, n) >= n:
            raise ValueError(f"{merges_path} line {k}: a symbol that no earlier merge (or byte) makes")
        made = left + right
        if ranks.get(made) != n:
            raise ValueError(f"{merges_path} line {k}: this merge makes id {ranks.get(made)} in {encoder_path}, "
                             f"expected {n} (the files disagree)")
        n += 1
    if n != len(ranks) or eot != n:
        raise ValueError(f"{encoder_path} has {len(ranks) + 1} tokens but {merges_path} has {n - 256} merges, "
                         f"and <|endoftext|> is {eot}: 256 bytes + merges + <|endoftext|> last")
    return ranks, eot


def generate_main(a, dist):
    """llmc/generate.h's generate mode: --prompt and -g tokens after it on stdout (nothing else), from the
    model of -e, the window the last min(-t, maxT) tokens; no data is read"""
    if dist.world > 1:
        die("--prompt generates in one process; run it without mpirun/torchrun")
    if a.resume or a.output_dir:  # a user's guess that -y 1 -o <run> generates from its checkpoint
        warn(f"--prompt generates from -e's model ({a.model}); -y and -o are training's and are not read: to generate "
             "from a checkpoint, pass -e <dir>/model_<step>.bin")
    enc = load_gpt2_encoder(a.bpe_dir)
    model = resolve_model(a, dist.device).eval()
    V, T = model.cfg.vocab_size, a.T
    if V > enc.n_vocab:
        die(f"the model (-e {a.model}) has {V} tokens, more than the GPT-2 encoder's {enc.n_vocab}: it cannot be "
            "decoded as text")
    try:  # argv's bytes that are not UTF-8 come as surrogates (Python's surrogateescape)
        a.prompt.encode()
    except UnicodeEncodeError:
        die("--prompt is not UTF-8 text: train_gpt2.py encodes text (./train_gpt2 --prompt takes any bytes)")
    tokens = enc.encode_ordinary(a.prompt)
    if max(tokens, default=0) >= V:
        die(f"--prompt encodes to token {max(tokens)}, but the model (-e {a.model}) has only {V} tokens")
    if len(tokens) > T:
        warn(f"the prompt is {len(tokens)} tokens; the model sees only the last {T} (-t / the model's maxT)")
    rng, out = sample_rng_seed(a.seed), sys.stdout.buffer
    out.write(a.prompt.encode())
    out.flush()
    for _ in range(a.gen_tokens):
        with torch.no_grad():
            logits, _ = model(torch.tensor([tokens[-T:]], device=dist.device))
        probs = torch.softmax(logits[0, -1].float(), dim=-1).cpu().numpy()
        rng, coin = xorshift_f32(rng)
        tokens.append(sample_token(probs, a.temperature, a.top_k, coin))
        out.write(enc.decode_single_token_bytes(tokens[-1]))
        out.flush()
    out.write(b"\n")
    out.flush()


def sample(a, model, tokenizer, st, device, autocast, stop):
    """train_sample: gen tokens from EOT, one coin of the checkpointed RNG per token, as the C loop
    (the text differs from the C trainer's: another summation order picks other tokens at ties); a
    stop signal ends it at the next token, the coins left drawn still. False where it was cut short"""
    V = model.cfg.vocab_size
    tokens = [EOT if EOT < V else 0]
    out = sys.stdout.buffer
    print("generating:\n---", flush=True)
    n = min(a.gen_tokens, a.T)
    for t in range(1, n + 1):
        if stop:
            for _ in range(t, n + 1):
                st.sample_rng, _ = xorshift_f32(st.sample_rng)
            print("\n---\nsample cut short by a stop signal", flush=True)
            return False
        with torch.no_grad(), autocast():
            logits, _ = model(torch.tensor([tokens[:t]], device=device))
        probs = torch.softmax(logits[0, t - 1].float(), dim=-1).cpu().numpy()
        st.sample_rng, coin = xorshift_f32(st.sample_rng)
        nxt = sample_token(probs, a.temperature, a.top_k, coin)
        if t < a.T:
            tokens.append(nxt)
        piece = (tokenizer[nxt] if nxt < len(tokenizer) else b"") if tokenizer else f"{nxt} ".encode()
        if len(piece) > 1 or (piece and (32 <= piece[0] < 127 or piece in b"\t\n\v\f\r")):  # safe_printf
            out.write(piece)
        out.flush()
    print("\n---", flush=True)
    return True


# ---------------------------------------------------------------------------------------------
# the run

def format_duration(seconds):
    s = int(seconds + 0.5)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def events_left(frm, M, every):
    """llmc/train_loop.h's: iterations s in [frm, M] that run an event due every `every` steps and at s == M"""
    if every <= 0 or frm > M:
        return 0
    return M // every - (frm - 1) // every + (M % every != 0)


class Progress:
    """llmc/train_loop.h's progress of a long evaluation (rank 0): nothing for LLMC_PROGRESS_SECONDS (5), then
    "<what> ... done/total <unit> | elapsed | eta" at most that often; frac: rank 0's share done"""

    def __init__(self, on, what, unit, total):
        self.on, self.what, self.unit, self.total = on, what, unit, total
        text = os.environ.get("LLMC_PROGRESS_SECONDS", "")
        self.interval = c_number(text, float) if text else 5.0
        if self.interval is None or not 0 <= self.interval <= 1e6:
            die(f"LLMC_PROGRESS_SECONDS='{text}' is not a number of seconds (0 .. 1e6); unset it for the default 5")
        self.t0 = time.time()
        self.next = self.t0 + self.interval

    def update(self, frac):
        now = time.time()
        if not self.on or frac >= 1.0 or now < self.next or frac <= 0.0:
            return
        self.next = now + self.interval
        elapsed = now - self.t0
        print(f"{self.what} ... {int(frac * self.total)}/{self.total} {self.unit} | {elapsed:.1f} s | eta "
              f"{format_duration(elapsed / frac * (1.0 - frac))}", flush=True)


def gpu_peak_flops(device):
    """peak dense bf16 FLOP/s of one GPU, for MFU: llmc/gpu_peak.h's table (read from that file) by
    name, scaled by the SM count (torch does not report the clock); 0 on a CPU (no MFU), -1 when unknown
    (MFU n/a)"""
    if device.type != "cuda":
        return 0.0
    try:
        text = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "llmc", "gpu_peak.h")).read()
    except OSError:
        return -1.0
    prop = torch.cuda.get_device_properties(device)
    for match, _, tflops, sms, _ in re.findall(r'\{"([^"]+)", "([^"]+)", ([0-9.]+), (\d+), (\d+)\}', text):
        if match in prop.name:
            return float(tflops) * 1e12 * min(1.0, prop.multi_processor_count / int(sms))
    return -1.0


def model_from_checkpoint(a, path):
    """llmc/train_loop.h's train_model_file: -y 1 where -e's file is not there takes the model of the newest
    complete checkpoint in -o (whose weights the resume loads anyway); every rank that does says so"""
    if not a.resume or not a.output_dir or os.path.exists(path):
        return path
    for step in checkpoint_list(a.output_dir):
        model = ckpt_path(a.output_dir, "model", step)
        if done_world_size(a.output_dir, step) >= 1 and os.path.exists(model):
            print(f"{RANK_PREFIX}-e {path} is not there: -y 1 takes the model from checkpoint {step} in {a.output_dir} "
                  f"({model})", flush=True)
            return model
    return path


def resolve_model(a, device):
    """the model that -e names: a descriptor (the C trainers' init from -rs) or a model file"""
    desc = a.model
    if re.fullmatch(r"(?:gpt2:)?d[0-9]+|gpt3:c[0-9]+", desc) or re.match(r"L[0-9]", desc):  # as gpt2_parse_descriptor
        cfg = Config.from_descriptor(desc, "-e")
        flat = c_init_params(cfg, a.seed)  # the same seed on every rank: the same model
    else:
        desc = model_from_checkpoint(a, desc)
        cfg, flat, err = read_model_flat(desc, probe_prefix="-e: ")
        if err:  # llmc/train_loop.h's words
            die(err + ("" if os.path.exists(desc) else " (-e takes a .bin file or a descriptor such as d12 or L2:C64:H4)"))
    if a.prompt:  # the generate mode: one sequence, the context min(-t, maxT)
        a.B, a.T = 1, min(a.T, cfg.block_size)
    if a.T > cfg.block_size:
        die(f"-t {a.T} is larger than the model's max_seq_len {cfg.block_size} (-e {a.model}); use -t {cfg.block_size} or less")
    model = GPT(cfg, fast=True)
    model.load_flat(flat)
    return model.to(device)


def opt_state_flat(opt, model, key, muon=None):
    """AdamW's exp_avg / exp_avg_sq in model-file order, as one float32 numpy array; with muon, its
    momentum in exp_avg's place for the matrices (their exp_avg_sq stays 0: llmc/muon.h)"""
    bufs = {id(p): b for p, b in zip(muon.params, muon.buf)} if muon else {}

    def state(p):
        if id(p) in bufs:
            return bufs[id(p)].reshape(-1) if key == "exp_avg" else torch.zeros(p.numel(), device=p.device)
        if p in opt.state and key in opt.state[p]:
            return opt.state[p][key].reshape(-1)
        return torch.zeros(p.numel(), device=p.device)
    return torch.cat([state(p) for p in model.file_params()]).float().cpu().numpy()


def load_opt_state(opt, model, m, v, opt_steps, muon=None):
    """set AdamW's moments from flat file-order arrays and its step count to the applied updates;
    with muon, its momentum from m for the matrices"""
    if opt_steps == 0:
        return
    ids = {id(p): i for i, p in enumerate(p for g in opt.param_groups for p in g["params"])}
    bufs = {id(p): b for p, b in zip(muon.params, muon.buf)} if muon else {}
    state, off = {}, 0
    for p in model.file_params():
        n = p.numel()
        if id(p) in bufs:
            bufs[id(p)].copy_(torch.from_numpy(m[off: off + n].copy()).view(p.shape))
        else:
            state[ids[id(p)]] = {"step": torch.tensor(float(opt_steps)),
                                 "exp_avg": torch.from_numpy(m[off: off + n].copy()).view(p.shape),
                                 "exp_avg_sq": torch.from_numpy(v[off: off + n].copy()).view(p.shape)}
        off += n
    sd = opt.state_dict()
    sd["state"] = state
    opt.load_state_dict(sd)  # moves the moments to the parameters' device and dtype


def compiled_or_eager(model, rows, autocast, dist):
    """torch.compile(model) where it compiles here, tried on every rank with one forward and backward of rows (the
    first micro-batch, so that the first step finds it compiled); where it fails on any rank (no C compiler for
    Triton, a Python or CUDA that torch's compiler does not take), the eager model on every rank, with a warning:
    a slower run, not a lost one"""
    try:
        compiled = compile_model(model, dist.rank)
        with autocast():
            _, loss = compiled(rows[:, :-1], rows[:, 1:])
        loss.backward()
        err = None
    except Exception as e:  # torch._dynamo's and the backends' errors have no common base but Exception
        err = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:300]}"
    model.zero_grad(set_to_none=True)
    if dist.allreduce([1.0 if err else 0.0], "max")[0] == 0.0:
        # several ranks: compiled again where DDP calls it, so that torch's compiler splits the graph at
        # DDP's gradient buckets (the probe's graph, compiled outside DDP, would reduce only at the end)
        return compile_model(model, dist.rank, again=True) if dist.world > 1 else compiled
    warn(f"torch.compile failed ({err}); training runs the eager model" if err else
         "torch.compile failed on another rank; training runs the eager model")
    return model


def compile_model(model, rank, again=False):
    """torch.compile(model); for the tests, LLMC_TEST_COMPILE=fail:<rank>,... stands in for it (torch 1.13 has no
    compiler): a module that runs the eager model's forward, and on the ranks listed a compiler that fails at the
    first forward"""
    test = os.environ.get("LLMC_TEST_COMPILE")
    if test is not None and not re.fullmatch(r"(fail:\d+(,\d+)*)?", test):
        die(f"LLMC_TEST_COMPILE={test}: expected fail:<rank>,... or nothing (a test hook; unset it)")
    if test is None:
        if again:
            torch._dynamo.reset()  # else the next call would find the probe's graph
        return torch.compile(model)
    if str(rank) not in test.removeprefix("fail:").split(","):
        return CompiledStandIn(model)

    def fails(*args):
        raise RuntimeError("a compiler that fails (LLMC_TEST_COMPILE)\nits second line")
    return fails


class CompiledStandIn(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *args):
        return self.model(*args)


class PipeSafe:
    """sys.stdout whose reader may leave (`| tee` ended by the same Ctrl-C, or killed): the first write
    or flush that meets the broken pipe calls on_broken, and from then on the output goes to
    /dev/null, as the C trainers' writes fail quietly after their SIGPIPE (llmc/signals.h)"""

    def __init__(self, stream, on_broken):
        self.stream, self.on_broken, self.broken = stream, on_broken, False

    def _broke(self):
        if not self.broken:
            self.broken = True
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.stream.fileno())
            self.on_broken()

    def write(self, text):
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._broke()
            return len(text)

    def flush(self):
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._broke()

    def __getattr__(self, name):
        return getattr(self.stream, name)


def leave(code):
    """Exit without running destructors. torch 1.13's DDP and gloo process group can deadlock when
    they are destroyed (seen: ~ProcessGroupGloo joins a worker thread that waits for the GIL held by
    the joining thread), so a run ends here, with its checkpoints and logs already on disk."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def train_main(argv):
    dist = Dist()
    a = parse_train_args(argv)
    if a.prompt:
        generate_main(a, dist)
        leave(0)
    dist.connect(a.comm_timeout)
    W, rank, device = dist.world, dist.rank, dist.device
    stop = []  # signals received (signals.h): the first stops after the step with a checkpoint

    def on_signal(sig, _):
        if stop and stop[-1] != signal.SIGPIPE:
            sys.stderr.write("second signal: exiting immediately\n")
            os._exit(128 + sig)
        stop.append(sig)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    for sig in (signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):  # a closed terminal, SLURM's --signal
        if signal.getsignal(sig) != signal.SIG_IGN:  # nohup's SIGHUP stays ignored
            signal.signal(sig, on_signal)
    # stdout's reader gone: Python ignores SIGPIPE and raises BrokenPipeError, which stops the run
    # here as SIGPIPE stops the C trainers
    sys.stdout = PipeSafe(sys.stdout, lambda: stop or stop.append(signal.SIGPIPE))
    sys.stderr = PipeSafe(sys.stderr, lambda: stop or stop.append(signal.SIGPIPE))  # `2>&1 | tee`
    per_step = a.B * a.T * W
    if a.total_batch == -1:
        a.total_batch = per_step
    if a.total_batch <= 0 or a.total_batch % per_step:
        die(f"-d {a.total_batch} is not divisible by B*T*ranks = {a.B}*{a.T}*{W} = {per_step}; "
            f"choose -d as a multiple of {per_step}")
    A = a.total_batch // per_step
    if A > 2**31 - 1:  # the C trainers count micro-steps in an int: the same limit and line
        die(f"-d {a.total_batch} is {A} micro-steps of B*T*ranks = {per_step} tokens per optimizer step; "
            f"at most {2**31 - 1}: choose a smaller -d or a larger -b or -t")
    N = a.total_batch // a.T  # windows per optimizer step
    B, T = a.B, a.T

    model = resolve_model(a, device)
    cfg = model.cfg
    V = cfg.vocab_size
    evaluate_only = a.max_steps == 0  # -x 0: the model evaluated, no step trained, no train data read
    train = None
    if not evaluate_only:
        train = DataLoader(a.train_glob, "-i", T, V, a.shuffle, a.seed)
        train.require(N, "-i", "one optimizer step (d/T windows)")
    if a.rollback_after > 0 and (not a.output_dir or a.checkpoint_every <= 0):
        die(f"-rb {a.rollback_after} rolls back to a checkpoint: give the run -o <dir> and -n <steps>")
    if a.rollback_after > a.guard_max_skips:
        die(f"-rb {a.rollback_after} is more than -sm {a.guard_max_skips}, which stops the run first; use "
            f"-rb {a.guard_max_skips} or less, or raise -sm")
    val = None
    if a.val_every > 0:
        val = DataLoader(a.val_glob, "-j", T, V, 0, 0)
        val.require(1, "-j", "validation")
    epoch_steps = train.total_windows // N if train else 0
    M = a.max_steps if a.max_steps >= 0 else min(epoch_steps, (1 << 31) - 1)
    examples = None
    if a.hellaswag_eval:
        if a.val_every <= 0:
            die("-h 1 evaluates HellaSwag at every validation; set -v > 0")
        examples = load_hellaswag(a.hellaswag, V)
    shards = [(os.path.basename(sh.path), sh.n, sh.digest)
              for sh in (train.shards if train else []) + (val.shards if val else [])]
    dist.check_same((a.argv, shards), "flags or data files", "start every rank with the same command line and the same data")

    # ---- output dir, resume
    restarted = False  # a torchrun restart of the run that owns -o: resumed as with -y 1
    if a.output_dir and rank == 0:
        make_output_dir(a.output_dir)
        lock_output_dir(a.output_dir)
        restarted = not a.resume and torchrun_restart()
        if a.resume or restarted:
            for n in os.listdir(a.output_dir):  # checkpoint_clean_tmp's files
                if ".tmp." in n or n.startswith(SHARED_CHECK):
                    os.remove(os.path.join(a.output_dir, n))
        else:
            claim_output_dir(a.output_dir, a.start_over)
        lock_own()
    if dist.allreduce([float(restarted)], op="max")[0] > 0:  # every rank resumes alike
        if rank == 0:
            print(f"torchrun restarted this run's workers (restart {int(os.environ['TORCHELASTIC_RESTART_COUNT'])}): "
                  f"resuming from its checkpoints in {a.output_dir}, as -y 1 does", flush=True)
        a.resume, a.start_over = 1, 0
    dist.barrier()
    if a.output_dir:
        check_shared_dir(a.output_dir, dist)
    st = TrainState(a)
    opt, fused = make_optimizer(model, float(a.lr), float(a.weight_decay), device, a.optimizer == "muon")
    muon = Muon(muon_params(model), float(a.muon_momentum), a.muon_ns_steps) if a.optimizer == "muon" else None
    resumed = False
    if a.resume:
        ck = checkpoint_resume(a, dist, cfg, st)
        if isinstance(ck, str):
            d = a.output_dir
            die(f"-y 1: none of the complete checkpoints in {d} loads (the warnings above say why); a fresh start would "
                f"write among them: repair or move them, choose another -o, or pass --start-over 1 (without -y 1) to "
                f"move them into {d}/old_run_<N>/ and start anew")
        resumed = ck is not None
        if resumed:
            model.load_flat(ck["params"])
            load_opt_state(opt, model, ck["m"], ck["v"], st.opt_steps, muon)
            del ck
        if rank == 0:
            print(f"resumed from checkpoint {st.step} in {a.output_dir}" if resumed else
                  f"no complete checkpoint in {a.output_dir}: starting at step 0 from -e {a.model}", flush=True)
    if st.step > M:
        die(f"checkpoint {st.step} in {a.output_dir} is past the end of this run (-x {M}); raise -x to continue")
    # a checkpoint its run wrote at its end (-x = its step): its final evaluation and sample followed it,
    # nothing is left to do; one written mid-run (a longer -x, now cut to its step) gets them now
    written_last = st.max_steps in (st.step, 0)  # 0: not recorded
    if resumed and st.step == M and not written_last and rank == 0:
        print(f"checkpoint {st.step} in {a.output_dir} was written mid-run (its run had -x {st.max_steps}): -x {M} "
              "ends the run there; its final evaluation and sample follow", flush=True)
    if resumed and st.step == M and written_last:
        if rank == 0:
            print(f"run complete: checkpoint {st.step} in {a.output_dir} is the last step (-x {M}); nothing to do "
                  "(raise -x to train further)", flush=True)
        leave(0)
    if resumed and rank == 0:
        warn_settings_change(a, M, st)
    st.max_steps = M
    st.settings = run_settings(a)

    # ---- the fast paths, each where the installed torch and the device have it
    cuda = device.type == "cuda"
    bf16 = cuda and torch.cuda.is_bf16_supported()
    autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if bf16 else contextlib.nullcontext
    if cuda:
        torch.set_float32_matmul_precision("high")  # TF32 for what autocast leaves in fp32
    def micro_batch(s, k):  # this rank's rows of micro-step k of step s (B, T+1), on the device
        window = train_window(0 if a.overfit_batch else s + st.data_skip, k, rank, W, B, N)
        return torch.from_numpy(train.read(window, B)).to(device)

    train_model = model  # eval and sampling run the eager model: other shapes
    compiled = ((cuda and hasattr(torch, "compile")) or "LLMC_TEST_COMPILE" in os.environ) and st.step < M
    if compiled:
        train_model = compiled_or_eager(model, micro_batch(st.step, 0), autocast, dist)
        compiled = train_model is not model
    if W > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP
        train_model = DDP(train_model, device_ids=[device.index] if cuda else None, broadcast_buffers=False)

    log = metrics = None  # main.log and metrics.jsonl (llmc/logger.h; no phase times or GPU readings here)
    if a.output_dir and rank == 0:
        log, metrics = (LogFile(os.path.join(a.output_dir, name), resumed) for name in ("main.log", "metrics.jsonl"))

    def log_line(step, text):
        if log:
            log.write(step, f"s:{step} {text}\n")

    def log_metrics(event, step, **fields):
        """one metrics.jsonl object: fields are (printf format, value) pairs, a non-finite number null,
        or strings; the C logger's keys, order and digits"""
        if metrics:
            parts = [f'"event":"{event}"', f'"step":{step}']
            for key, v in fields.items():
                if isinstance(v, str):
                    parts.append(f'"{key}":' + json.dumps(v, ensure_ascii=False))
                elif isinstance(v, tuple):
                    parts.append(f'"{key}":' + (format(v[1], v[0]) if math.isfinite(v[1]) else "null"))
                else:
                    parts.append(f'"{key}":{v}')
            metrics.write(step, "{" + ",".join(parts) + "}\n")
    tokenizer = load_tokenizer(a.tokenizer) if rank == 0 and a.sample_every > 0 else None
    if tokenizer is not None and len(tokenizer) < V:  # samples would hold ids it cannot decode
        die(f"-tk {a.tokenizer} has {len(tokenizer)} tokens, fewer than the model's {V} (-e {a.model}): it is another "
            "tokenizer's decode table; give this model's, or -s 0 for no samples")
    if rank == 0 and a.sample_every > 0 and a.gen_tokens > T:  # llmc/train_loop.h's words
        warn(f"-g {a.gen_tokens} is more than -t {T}: the samples during training stop at {T} tokens (--prompt generates "
             "past -t)")
    P = num_params(cfg)
    flops_per_token = 6.0 * P + 6.0 * cfg.n_layer * T * cfg.n_embd  # gpt2_flops_per_token (model_io.h): llm.c's count
    peak = gpu_peak_flops(device)
    if rank == 0:
        what = [torch.cuda.get_device_name(device) if cuda else "cpu", "bf16 autocast" if bf16 else "fp32"]
        features = ((compiled, "torch.compile"), (model.blocks[0].sdpa, "sdpa"), (fused, "fused AdamW"))
        what += [name for on, name in features if on]
        print(f"trainer torch {torch.__version__} ({', '.join(what)}) | {W} process(es) ({dist.launcher}) | model {a.model}")
        print(f"model: L {cfg.n_layer} | C {cfg.n_embd} | NH {cfg.n_head} | maxT {cfg.block_size} | V {V} | "
              f"Vp {cfg.padded_vocab_size} | {P} parameters")
        print(f"batch: B {B} | T {T} | ranks {W} | grad accum {A} | total {a.total_batch} tokens per step")
        if train:
            print(f"train data: {train.total_tokens} tokens in {len(train.paths)} shard(s), {epoch_steps} steps per epoch"
                  f"{', shuffled' if a.shuffle else ''}")
        else:
            print("train data: none read (-x 0: the model is evaluated, not trained)")
        if val:
            print(f"val data: {val.total_tokens} tokens in {len(val.paths)} shard(s)")
        if muon:
            print(f"optimizer: muon (-ml {a.muon_lr:g}, momentum {a.muon_momentum:g}, {a.muon_ns_steps} Newton-Schulz steps) "
                  f"on the blocks' matrices, AdamW (-l {a.lr:g}) on the rest")
        print(f"steps: {M} (starting at {st.step})", flush=True)

    params = list(model.parameters())
    ckpts = CheckpointRecord(a.output_dir, rank, st.step if resumed else None)
    grace = [torchrun_grace_s()]  # None once warned (llmc/checkpoint.h's ckpt_check_stop_grace)
    saved = [st.step if resumed else None]  # train_loop.h's saved_step: the step whose checkpoint is this state

    def checkpoint_after(stopping, in_evaluation=False):
        """train_loop.h's train_checkpoint: the checkpoint when due or stopping (in_evaluation: a stop
        signal voided the evaluation after the step; a checkpoint of this very state is not written
        again), then the stop line; True to stop"""
        due = a.checkpoint_every > 0 and (st.step % a.checkpoint_every == 0 or st.step == M)
        if a.output_dir and (due or stopping) and not (in_evaluation and saved[0] == st.step):
            saved[0] = st.step
            tc = time.time()
            flat = torch.cat([p.detach().reshape(-1) for p in model.file_params()]).cpu().numpy()
            written, err = checkpoint_save(a, a.output_dir, dist, st, cfg, flat, opt_state_flat(opt, model, "exp_avg", muon),
                                           opt_state_flat(opt, model, "exp_avg_sq", muon))
            if written and rank == 0:
                took = time.time() - tc
                print(f"checkpoint {st.step} written to {a.output_dir} ({took:.2f} s)", flush=True)
                step_s = timed / timed_steps if timed_steps else 0.0
                if grace[0] is not None and not (st.step == M or stopping) and took + step_s > grace[0] * 2 / 3:
                    warn(f"checkpoint {st.step} took {took:.2f} s to write, and a step {step_s:.2f} s: stopped by a signal "
                         "(Ctrl-C, SIGTERM), the ranks finish their step and write a checkpoint, and torchrun sends SIGKILL "
                         f"{grace[0]:.0f} s after passing the signal on: too little margin (a checkpoint cut short is lost, "
                         "the older ones stay); give torchrun more time (--shutdown-timeout N where torchrun --help lists "
                         "it, or TORCH_ELASTIC_SHUTDOWN_TIMEOUT=N) or write -o to a faster disk")
                    grace[0] = None
            ckpts.took(st.step, st.step == M or stopping, written, err)
        if stopping and rank == 0 and (ckpts.newest == st.step or not a.output_dir):
            line = f"stopped by a signal after step {st.step}; " + (
                f"checkpoint {st.step} is in {a.output_dir}; to resume, run the same command with -y 1"
                if a.output_dir else "nothing was saved (no -o); next time pass -o <dir> to be able to resume")
            # stdout's reader gone: the line on stderr instead
            print(line, file=sys.stderr if sys.stdout.broken else sys.stdout, flush=True)
        return stopping
    timed, timed_steps, first_step = 0.0, 0, st.step
    eval_time, sample_time = [0.0, 0], [0.0, 0]  # seconds, count: the ETA counts the events still to come
    s = st.step
    while True:
        last = s == M
        if val and (s % a.val_every == 0 or last):
            t0 = time.time()
            # the final evaluation runs whole: it is the run's result, and a resume of its last step would not
            # evaluate again; but -x 0's is all the run does, and a stop signal ends it (nothing is written)
            may_stop = None if last and not evaluate_only else stop
            vl = val_loss(a, dist, model, val, autocast, may_stop)
            if vl is not None and rank == 0:
                print(f"val loss {vl:.6f} ({time.time() - t0:.2f} s)", flush=True)
            hsw, correct = {}, 0
            if examples and vl is not None:
                t1 = time.time()
                correct, evaluated = hellaswag(a, dist, model, examples, autocast, may_stop)
                if correct is not None:
                    acc = float(np.float32(correct / evaluated)) if evaluated else math.nan  # -hm 0
                    if rank == 0:
                        print(f"HellaSwag: {int(correct)}/{int(evaluated)} = {acc:.4f} ({time.time() - t1:.2f} s)", flush=True)
                    hsw = {"hellaswag": (".6f", acc)}
            if vl is None or correct is None:  # a stop signal: the checkpoint of step s, and -y 1 evaluates again
                if rank == 0:
                    print(f"{'validation' if vl is None else 'HellaSwag'} cut short by a stop signal", flush=True)
                if not evaluate_only:
                    checkpoint_after(True, in_evaluation=True)
                elif rank == 0:
                    print("stopped by a signal: the evaluation (-x 0) is not finished, nothing was logged", flush=True)
                break
            log_line(s, f"tel:{vl:.9g}")
            if hsw:
                log_line(s, f"hsw:{hsw['hellaswag'][1]:.6f}")
            log_metrics("eval", s, tokens=s * a.total_batch, val_loss=(".9g", vl), **hsw, ms=(".3f", (time.time() - t0) * 1000))
            eval_time[0] += time.time() - t0
            eval_time[1] += 1
        if rank == 0 and a.sample_every > 0 and ((s > 0 and s % a.sample_every == 0) or last):
            fault_sample(s)
            t0 = time.time()
            if sample(a, model, tokenizer, st, device, autocast, stop):
                sample_time[0] += time.time() - t0
                sample_time[1] += 1
        if last:
            break

        # ---- one optimizer step: A micro-steps on this rank, W ranks; DDP averages the gradients
        t0 = time.time()
        model.zero_grad(set_to_none=True)  # every parameter: Muon's are not in opt
        loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        for k in range(A):
            rows = micro_batch(s, k)
            # all-reduce only after the last micro-step's backward
            sync = train_model.no_sync() if W > 1 and k < A - 1 else contextlib.nullcontext()
            with sync:
                with autocast():
                    _, loss = train_model(rows[:, :-1], rows[:, 1:])
                # each token's loss enters with weight 1/(B*T*A*W), the C loop's dloss
                (loss / A).backward()
            loss_sum += loss.detach()
        loss = float(np.float32(dist.allreduce([loss_sum.item()])[0] / (A * W)))
        loss = float(np.float32(loss) * np.float32(test_loss_spike(s + st.data_skip + 1)))
        norm = float(np.float32(grad_norm(params).item()))
        lr = lr_at(a, s, M)
        reason = st.guard.check(loss, norm)
        if reason is None:
            st.opt_steps += 1
            clip = np.float32(1.0) / (np.float32(norm) + np.float32(1e-6))  # clip_grad_norm_ with max_norm 1.0
            if clip < 1.0:
                for p in params:
                    p.grad.mul_(float(clip))
            for group in opt.param_groups:
                group["lr"] = lr
            opt.step()
            if muon:  # the same schedule, -ml as its peak
                muon.step(lr_at(a, s, M, a.muon_lr), float(a.weight_decay))
        if cuda:
            torch.cuda.synchronize()
        dt = time.time() - t0
        if s > first_step or M - first_step == 1:  # the first step warms up
            timed += dt
            timed_steps += 1
        st.step = s + 1
        if rank == 0:
            tps = a.total_batch / dt
            line = f"step {st.step}/{M} | loss {loss:.6f} | norm {norm:.4f} | lr {lr:.2e} | {dt * 1000:.1f} ms | {tps:.0f} tok/s"
            if peak > 0:
                line += f" | MFU {100.0 * flops_per_token * tps / W / peak:.1f}%"
            elif peak < 0:
                line += " | MFU n/a"
            left = timed / timed_steps * (M - st.step) if timed_steps else 0.0
            for every, (secs, count) in ((a.val_every if val else 0, eval_time), (a.sample_every, sample_time)):
                left += events_left(st.step, M, every) * (secs / count if count else 0.0)
            eta = format_duration(left) if timed_steps else "-"
            print(f"{line} | eta {eta}{' | SKIPPED' if reason else ''}", flush=True)
        log_line(s, f"trl:{loss:.9g} lr:{lr:.6g} norm:{norm:.6g} tok:{st.step * a.total_batch}")
        mfu = {"mfu_pct": (".2f", 100.0 * flops_per_token * a.total_batch / dt / W / peak)} if peak > 0 else {}
        log_metrics("step", s, tokens=st.step * a.total_batch, loss=(".9g", loss), lr=(".6g", lr), norm=(".6g", norm),
                    ms=(".3f", dt * 1000), tok_per_s=(".1f", a.total_batch / dt), **mfu, **({"skipped": reason} if reason else {}))
        if reason:
            if rank == 0:
                warn(f"step {st.step} skipped: {reason}")
            log_line(s, f"skip:{reason}")
            if a.rollback_after > 0 and st.guard.consecutive >= a.rollback_after:
                frm = st.step
                rollback(a, dist, cfg, st, model, opt, muon, reason)
                log_line(frm, f"rollback:{st.step} data_skipped:{frm - st.step}")
                log_metrics("rollback", frm, to=st.step, data_skipped=frm - st.step)
                s = st.step
                saved[0] = None  # the checkpoint's file lacks the steps passed over: not this state
                continue
            if st.guard.consecutive >= st.guard.max_consecutive:
                die(f"{st.guard.consecutive} consecutive steps skipped by the numeric guards (last: {reason}); the run "
                    "is diverging: lower -l, raise -u, or resume from an earlier checkpoint")

        # ---- checkpoint; preemption: every rank learns whether any rank got a signal
        if checkpoint_after(dist.allreduce([1.0 if stop else 0.0], "max")[0] > 0):
            break
        s += 1
    ckpts.require_last(st.step)
    if rank == 0 and timed_steps:
        print(f"total average iteration time: {timed / timed_steps * 1000:.3f} ms", flush=True)
    for f in (log, metrics):
        if f:
            f.close()
    leave(0)


# what the fixture mode writes: a command line with one of them writes fixtures, any other trains
FIXTURE_OUTPUTS = ("--write-model", "--debug-state", "--trajectory")


def main():
    argv = sys.argv[1:]
    if "--help" in argv or "-help" in argv:
        print(__doc__)
        print(usage())
        return 0
    if not any(arg.split("=", 1)[0] in FIXTURE_OUTPUTS for arg in argv):
        try:
            train_main(argv)
        except SystemExit as e:  # die() has printed its line; the traceback keeps DDP alive for leave()
            leave(e.code if isinstance(e.code, int) else 1)
        except BaseException as e:
            if RANK_PREFIX and isinstance(e, RuntimeError) and PEER_LOST.search(str(e)):
                # a collective (ours or DDP's) failed because another rank ended or hung: that rank says why
                print(f"{RANK_PREFIX}error: a collective with the other ranks failed ({one_line(e)}): another rank "
                      "stopped (its error says why), hung past -pt, or cannot be reached", file=sys.stderr, flush=True)
            else:
                traceback.print_exc()
            leave(1)
    return fixture_main(argv)


if __name__ == "__main__":
    sys.exit(main())
