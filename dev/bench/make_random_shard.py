"""Write a token shard (llm.c format) of random GPT-2 token ids, for benchmarks that need no real data.
usage: python dev/bench/make_random_shard.py out.bin num_tokens [seed] [vocab] [share of token 0]
The share (0 by default) puts token 0 at that fraction of the positions, as a text repeats its most
frequent tokens (the embedding backward then sums hundreds of positions of one token)."""
import sys
import numpy as np

path, n = sys.argv[1], int(sys.argv[2])
seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
vocab = int(sys.argv[4]) if len(sys.argv) > 4 else 50257
share = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
header = np.zeros(256, dtype="<i4")
header[:3] = [20240520, 1, n]
rng = np.random.default_rng(seed)
toks = rng.integers(0, vocab, size=n, dtype=np.int64)
if share > 0:
    toks[rng.random(n) < share] = 0
with open(path, "wb") as f:
    f.write(header.tobytes())
    f.write(toks.astype("<u2").tobytes())
