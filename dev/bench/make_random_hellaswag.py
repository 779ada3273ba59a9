"""Write a HellaSwag eval file (llm.c's layout, magic 20240522) of random examples: each a context of
3-39 token ids and 4 endings of 1-9, a random label, for tests that need no real data.
usage: python dev/bench/make_random_hellaswag.py out.bin num_examples [seed] [vocab]"""
import sys
import numpy as np

path, count = sys.argv[1], int(sys.argv[2])
seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
vocab = int(sys.argv[4]) if len(sys.argv) > 4 else 50257
rng = np.random.default_rng(seed)
stream, longest = [], 0
for i in range(count):
    ctx = rng.integers(0, vocab, rng.integers(3, 40)).tolist()
    ex = [65535, 0, i, int(rng.integers(0, 4)), 4, len(ctx)] + ctx  # [1]: the example's bytes, below
    for _ in range(4):
        end = rng.integers(0, vocab, rng.integers(1, 10)).tolist()
        ex += [len(end)] + end
    ex[1] = 2 * len(ex)
    longest = max(longest, ex[1])
    stream += ex
header = np.zeros(256, dtype="<i4")
header[:4] = [20240522, 1, count, longest]
with open(path, "wb") as f:
    f.write(header.tobytes())
    f.write(np.array(stream, dtype="<u2").tobytes())
