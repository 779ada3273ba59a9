"""Write a token shard (llm.c format) of random GPT-2 token ids, for benchmarks that need no real data.
usage: python dev/bench/make_random_shard.py out.bin num_tokens [seed] [vocab]"""
import sys
import numpy as np

path, n = sys.argv[1], int(sys.argv[2])
seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
vocab = int(sys.argv[4]) if len(sys.argv) > 4 else 50257
header = np.zeros(256, dtype="<i4")
header[:3] = [20240520, 1, n]
toks = np.random.default_rng(seed).integers(0, vocab, size=n, dtype=np.int64).astype("<u2")
with open(path, "wb") as f:
    f.write(header.tobytes())
    f.write(toks.tobytes())
