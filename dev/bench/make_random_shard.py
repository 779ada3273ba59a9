"""Write a token shard (llm.c format) of random GPT-2 token ids, for benchmarks that need no real data.
usage: python dev/bench/make_random_shard.py out.bin num_tokens [seed] [vocab] [share of token 0]
The share (0 by default) puts token 0 at that fraction of the positions, as a text repeats its most
frequent tokens (the embedding backward then sums hundreds of positions of one token)."""
import sys
import numpy as np


def arg(i, kind, default, ok, what):
    """argument i as kind, or default where it is absent; one line and exit 1 where it is not `what`"""
    if len(sys.argv) <= i:
        return default
    try:
        v = kind(sys.argv[i])
    except ValueError:
        v = None
    if v is None or not ok(v):
        sys.exit(f"error: make_random_shard.py: {sys.argv[i]!r}: expected {what}\n{__doc__}")
    return v


if len(sys.argv) < 3 or len(sys.argv) > 6:
    sys.exit(__doc__)
path = sys.argv[1]
n = arg(2, int, None, lambda v: 0 < v < 2**31, "a number of tokens >= 1")
seed = arg(3, int, 0, lambda v: v >= 0, "a seed >= 0")
vocab = arg(4, int, 50257, lambda v: 0 < v <= 65536, "a vocabulary of 1 to 65536 ids")
share = arg(5, float, 0.0, lambda v: 0.0 <= v <= 1.0, "a share of token 0 from 0 to 1")
header = np.zeros(256, dtype="<i4")
header[:3] = [20240520, 1, n]
rng = np.random.default_rng(seed)
toks = rng.integers(0, vocab, size=n, dtype=np.int64)
if share > 0:
    toks[rng.random(n) < share] = 0
with open(path, "wb") as f:
    f.write(header.tobytes())
    f.write(toks.astype("<u2").tobytes())
