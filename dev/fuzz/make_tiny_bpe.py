"""Write a tiny GPT-2-style byte-level BPE (encoder.json and vocab.bpe, OpenAI's layout) learned
from a text: the 256 byte tokens in GPT-2's order, then one token per merge, then <|endoftext|>.
It loads in llmc/bpe.h like GPT-2's own files, at a fraction of their size (fuzz seeds).
usage: python dev/fuzz/make_tiny_bpe.py text.txt out_dir [merges]"""
import json
import re
import sys
from collections import Counter


def bytes_to_unicode():
    # GPT-2's map (encoder.py): printable Latin-1 bytes stand for themselves, the rest from U+0100 on
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}, bs


text, out = open(sys.argv[1], "rb").read().decode("utf-8", "replace"), sys.argv[2]
num_merges = int(sys.argv[3]) if len(sys.argv) > 3 else 60
byte_map, byte_order = bytes_to_unicode()
words = Counter(tuple(byte_map[b] for b in w.encode()) for w in re.findall(r" ?\w+| ?[^\s\w]+|\s+", text))
vocab = [byte_map[b] for b in byte_order]
merges = []
for _ in range(num_merges):
    pairs = Counter()
    for w, c in words.items():
        for a, b in zip(w, w[1:]):
            pairs[a, b] += c
    if not pairs:
        break
    (a, b), _ = pairs.most_common(1)[0]
    merges.append((a, b))
    vocab.append(a + b)
    merged = Counter()
    for w, c in words.items():
        i, nw = 0, []
        while i < len(w):
            if i + 1 < len(w) and (w[i], w[i + 1]) == (a, b):
                nw.append(a + b)
                i += 2
            else:
                nw.append(w[i])
                i += 1
        merged[tuple(nw)] += c
    words = merged
vocab.append("<|endoftext|>")
with open(f"{out}/encoder.json", "w") as f:
    json.dump({t: i for i, t in enumerate(vocab)}, f, ensure_ascii=False)
with open(f"{out}/vocab.bpe", "w", encoding="utf-8") as f:
    f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
print(f"{out}: {len(vocab)} tokens, {len(merges)} merges")
