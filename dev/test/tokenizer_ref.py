"""
Reference side of the tokenizer tests: tiktoken (OpenAI's Rust BPE, from PyPI) loading the local
encoder.json / vocab.bpe, so no network is needed; and readers for the files gpt2_tokenize writes.
Expected ids always come from here, never from gpt2_tokenize itself.
"""
import array
import os
import re
import struct
import sys

EOT = 50256
# GPT-2's pattern as tiktoken's r50k/gpt2 encoding spells it
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def load_tiktoken(gpt2_dir):
    try:
        import tiktoken
        from tiktoken.load import data_gym_to_mergeable_bpe_ranks
    except ImportError:
        sys.exit("error: these tests need tiktoken as the reference encoder: "
                 f"{sys.executable} -m pip install --break-system-packages tiktoken")
    os.environ["TIKTOKEN_CACHE_DIR"] = ""  # read the files themselves: tiktoken caches a path's first contents in /tmp
    ranks = data_gym_to_mergeable_bpe_ranks(os.path.join(gpt2_dir, "vocab.bpe"), os.path.join(gpt2_dir, "encoder.json"))
    return tiktoken.Encoding("gpt2_local", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": EOT}, explicit_n_vocab=50257)


def read_shard(path):
    """A token shard as array('H'); checks the header and the file size."""
    with open(path, "rb") as f:
        header = array.array("i")
        header.frombytes(f.read(1024))
        assert len(header) == 256, f"{path}: short header"
        assert header[0] == 20240520 and header[1] == 1, f"{path}: magic/version {header[0]}/{header[1]}"
        toks = array.array("H")
        toks.frombytes(f.read())
    assert len(toks) == header[2], f"{path}: header says {header[2]} tokens, file holds {len(toks)}"
    return toks


def read_evalfile(path):
    """llm.c's eval file: header ints and a list of (index, label, ctx tokens, [ending tokens])."""
    data = open(path, "rb").read()
    header = struct.unpack_from("<256i", data, 0)
    assert header[0] == 20240522 and header[1] == 1, f"{path}: magic/version {header[0]}/{header[1]}"
    stream = array.array("H")
    stream.frombytes(data[1024:])
    examples, p, longest = [], 0, 0
    while p < len(stream):
        assert stream[p] == 65535, f"{path}: example {len(examples)} does not start with 65535"
        nbytes, idx, label, ncomp = stream[p + 1], stream[p + 2], stream[p + 3], stream[p + 4]
        q = p + 5
        nctx = stream[q]
        ctx = list(stream[q + 1:q + 1 + nctx])
        q += 1 + nctx
        ends = []
        for _ in range(ncomp):
            n = stream[q]
            ends.append(list(stream[q + 1:q + 1 + n]))
            q += 1 + n
        assert (q - p) * 2 == nbytes, f"{path}: example {idx} says {nbytes} bytes, holds {(q - p) * 2}"
        longest = max(longest, nbytes)
        examples.append((idx, label, ctx, ends))
        p = q
    assert header[2] == len(examples), f"{path}: header says {header[2]} examples, file holds {len(examples)}"
    assert header[3] == longest, f"{path}: header says longest {header[3]} bytes, actual {longest}"
    return header, examples


def split_sep_documents(data):
    """The documents of a `-x sep` file (bytes), by the definition in dev/data/README.md: a line
    holding only <|endoftext|> separates documents; the line break before it and one line break
    at the end of the file belong to the separator / the file; empty documents are dropped."""
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines.pop()  # the file's last line break
    docs, cur = [], []
    for line in lines:
        if line == b"<|endoftext|>":
            docs.append(b"\n".join(cur))
            cur = []
        else:
            cur.append(line)
    docs.append(b"\n".join(cur))
    return [d for d in docs if d]


def encode_bytes(enc, data):
    """Expected ids for arbitrary bytes (dev/data/README.md, invalid UTF-8): each maximal valid
    UTF-8 run is encoded as text, each invalid byte becomes its single-byte token."""
    text = data.decode("utf-8", "surrogateescape")
    out = []
    # the undecodable bytes come back as U+DC80..U+DCFF (surrogateescape); the valid runs between them
    for part in re.split("([\udc80-\udcff])", text):
        if len(part) == 1 and 0xDC80 <= ord(part) <= 0xDCFF:
            out.append(enc.encode_single_token(bytes([ord(part) - 0xDC00])))
        elif part:
            out += enc.encode_ordinary(part)
    return out


def first_mismatches(got, want, k=5):
    lines = [f"lengths: got {len(got)}, expected {len(want)}"]
    shown = 0
    for i in range(min(len(got), len(want))):
        if got[i] != want[i]:
            lines.append(f"  position {i}: got {got[i]}, expected {want[i]}")
            shown += 1
            if shown == k:
                break
    return "\n".join(lines)
