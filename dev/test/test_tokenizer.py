#!/usr/bin/env python3
"""
Tests of ./gpt2_tokenize (llmc/bpe.h, llmc/tokenizer.h): exact ids against tiktoken loading the
same local encoder.json / vocab.bpe, round trips, the file formats, and bad input.
Run by dev/test/test_tokenizer.sh (make test-tokenizer). Exits non-zero on the first failing
check's end, after printing the first mismatches of every failing check.

usage: test_tokenizer.py --gpt2-dir DIR --shared DIR [--tool ./gpt2_tokenize] [--only NAME] [--except NAME]
                         [--full-unicode]
"""
import argparse
import array
import hashlib
import json
import lzma
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizer_ref import (EOT, encode_bytes, first_mismatches, load_tiktoken, read_evalfile,  # noqa: E402
                           read_shard, split_sep_documents)

# known answers from ../shared/data/README.md (an independent Python BPE computed them)
TS_TOKENS, TS_TRAIN, TS_VAL = 338025, 301966, 36059
TS_FIRST = [5962, 22307, 25, 198, 8421, 356, 5120, 597, 2252, 11]
TS_LAST = [14210, 1242, 23137, 13, 198]
BOOKS_TRAIN_TEXT, BOOKS_TRAIN_DOCS = 24120096, 194
BOOKS_VAL_TEXT, BOOKS_VAL_DOCS = 847267, 6
HS_EXAMPLES, HS_LABELS = 10042, [2515, 2485, 2584, 2458]

# the edge-case text: written for this test, expected ids from tiktoken
EDGE_TEXT = "\n".join([
    # letters and digits of many scripts
    "English café naïve Ångström façade Straße ÜBER œuvre",
    "Ελληνικά αβγ ΑΒΓ; Русский текст ЁЖИК ёжик; Српски; Українська ґ ї",
    "العربية ١٢٣٤٥ مرحبا بالعالم; עברית שלום; فارسی ۱۲۳",
    "हिन्दी देवनागरी १२३४; বাংলা ১২৩; தமிழ் ௧௨௩; ไทย ภาษาไทย ๑๒๓; ລາວ; ქართული; Հայերեն",
    "中文汉字測試 日本語のテキスト カタカナ ひらがな 한국어 텍스트 ᄀᄁ; ０１２３ ＡＢＣ ｶﾀｶﾅ",
    "Ⅻ ⅻ ² ³ ½ ¾ ⁴ ₅ ① ⑩ 𝟘𝟙 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ᚠᚢᚦ 𐌰𐌱 ꯀꯁ 𓀀𓀁",
    # combining marks
    "e\u0301 a\u0308\u0304 n\u0303 Z\u0351\u036b\u0343\u036a\u0302a\u033e\u0364l\u0313g\u0368o \u0301\u0301 x\u20dd 1\u20e3",
    # emoji: skin tones, ZWJ sequences, flags, keycaps, variation selectors
    "👍 👍🏽 👩🏿‍💻 👨‍👩‍👧‍👦 🏳️‍🌈 🏴‍☠️ 🇫🇷🇯🇵 1️⃣ #️⃣ ❤️ ❤︎ ☺️ 🧑🏻‍🤝‍🧑🏾 😀😃😄",
    # contractions, lower, upper and mixed case, and near misses
    "don't I'm we'll they've you're she'd it's can't won't y'all ma'am",
    "DON'T I'M WE'LL THEY'VE YOU'RE SHE'D IT'S 'S 'LL 'D 'M 'T 'RE 'VE",
    "'s 't 're 've 'm 'll 'd ''s 's' rock'n'roll don’t it’s O'Neil 'sup 'tis '99 ' s",
    # runs of spaces, tabs, CR/LF, Unicode spaces
    "a  b   c    d     e      f       g",
    "trailing spaces   \n\ttab\t\ttabs\t \t mixed \t\n\r\nCRLF\r\nCR\rCR\r\r\n\n\n\nnewlines",
    "nbsp\u00a0a\u00a0\u00a0b ideographic\u3000a en\u2002em\u2003thin\u2009hair\u200a"
    "narrow\u202fmath\u205fogham\u1680x ls\u2028ps\u2029nel\u0085vt\x0bff\x0cend",
    "zwsp\u200bzwj\u200dzwnj\u200cbom\ufeffmvs\u180ex mvs \u180ex word-joiner\u2060x \x1c\x1d\x1e\x1f info-separators",
    " \u00a0 x \u3000\u3000y  \u00a0z \n \n  \n\u00a0\n",
    # numbers and punctuation
    "3.14159 1,000,000 2024-11-21 0x1F 1e-9 -42 +7 100% $5.00 €9,99 №5 ...!!!??? ;-) <3 :: -> => ===",
    "https://example.com/path?q=a%20b&x=1#frag user@example.org C:\\\\Windows\\\\path /usr/bin/env",
    # long words and long runs
    "pneumonoultramicroscopicsilicovolcanoconiosis Llanfairpwllgwyngyllgogerychwyrndrobwllllantysiliogogogoch",
    "x" * 3000 + " " + "ab1" * 700 + " " + "9" * 2000 + " " + "!?" * 900 + " " * 1000 + "y",
    "ä" * 1500 + " " + "漢" * 1200 + " " + "🙂" * 500,
    # the literal <|endoftext|> is ordinary text
    "<|endoftext|>",
    "text<|endoftext|>more <|endoftext|> <|endof <|endoftext|><|endoftext|>",
    # control characters
    "nul\x00byte del\x7f bell\x07 esc\x1b[0m",
]) + "\n"

# bytes that are not valid UTF-8, in and around valid text
INVALID_UTF8 = (b"\xffstart abc\xff def \xc3\x28 x \xe2\x82 y \xe2\x82\xac ok \xed\xa0\x80 surrogate "
                b"\xf4\x90\x80\x80 big \xc0\xaf overlong \xe0\x80\xaf \x80\x80 lone cont caf\xc3\xa9 "
                b"ab\xffcd 12\xfe34 \xf0\x9f\x98 truncated emoji \xf0\x9f\x98\x80 real \xf8\x88\x80\x80\x80 "
                b"\xc3 \xc3\xa9\xc3 end\xe2\x82")


class Ctx:
    pass


def run(ctx, args, expect_ok=True, stdin=b"", timeout=None):
    try:
        p = subprocess.run([ctx.tool] + args, capture_output=True, input=stdin, timeout=timeout)
    except subprocess.TimeoutExpired:  # a reader blocked (a FIFO): a failure, not a hang
        raise AssertionError(f"gpt2_tokenize {' '.join(args)} did not end within {timeout} s")
    if expect_ok and p.returncode != 0:
        raise AssertionError(f"gpt2_tokenize {' '.join(args)} failed ({p.returncode}):\n{p.stderr.decode(errors='replace')}")
    return p


def enc_args(ctx):
    return ["-e", ctx.encoder, "-m", ctx.vocab]


def expect_equal(got, want, what):
    if list(got) != list(want):
        raise AssertionError(f"{what}: ids differ from tiktoken\n{first_mismatches(list(got), list(want))}")


def tmp(ctx, name):
    return os.path.join(ctx.tmp, name)


def write(ctx, name, data):
    path = tmp(ctx, name)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


def encode_file(ctx, path, extra=()):
    out = path + ".bin"
    run(ctx, enc_args(ctx) + ["-i", path, "-o", out] + list(extra))
    return read_shard(out), out


def decode_file(ctx, shard):
    out = shard + ".txt"
    run(ctx, ["-d", "-t", ctx.table, "-i", shard, "-o", out])
    return open(out, "rb").read()


# ---------------------------------------------------------------------------------------------
# checks

CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


@check
def tokenizer_table(ctx):
    """the decode table: header, 50257 tokens, each the bytes tiktoken decodes; version 1 still reads"""
    run(ctx, enc_args(ctx) + ["-w", ctx.table])
    data = open(ctx.table, "rb").read()
    h = struct.unpack_from("<256I", data, 0)
    assert h[:4] == (20240328, 2, 50257, 50256), f"header {h[:4]}"
    p, toks = 1024, []
    for _ in range(h[2]):
        n = data[p]
        toks.append(data[p + 1:p + 1 + n])
        p += 1 + n
    assert p == len(data), f"{len(data) - p} trailing bytes"
    want = [ctx.enc.decode_single_token_bytes(i) for i in range(50257)]
    bad = [i for i in range(50257) if toks[i] != want[i]]
    assert not bad, f"{len(bad)} tokens differ, first: {[(i, toks[i], want[i]) for i in bad[:3]]}"
    # a version 1 file (no EOT field) decodes the same
    v1 = bytearray(data)
    struct.pack_into("<II", v1, 4, 1, 50257)
    struct.pack_into("<I", v1, 12, 0)
    v1_path = write(ctx, "tok_v1.bin", bytes(v1))
    text = write(ctx, "v1.txt", "Version one files still decode. <|endoftext|>\n")
    _, shard = encode_file(ctx, text)
    out = tmp(ctx, "v1_out.txt")
    run(ctx, ["-d", "-t", v1_path, "-i", shard, "-o", out])
    assert open(out, "rb").read() == open(text, "rb").read(), "version 1 table decodes differently"


@check
def tinyshakespeare(ctx):
    """338,025 ids equal to tiktoken and the README's known answers; 90/10 split by characters; round trip; threads"""
    src = os.path.join(ctx.shared, "tinyshakespeare", "input.txt")
    text = open(src, encoding="utf-8").read()
    toks, shard = encode_file(ctx, src)
    assert len(toks) == TS_TOKENS, f"{len(toks)} tokens, expected {TS_TOKENS}"
    assert list(toks[:10]) == TS_FIRST and list(toks[-5:]) == TS_LAST, f"first {list(toks[:10])} last {list(toks[-5:])}"
    expect_equal(toks, ctx.enc.encode_ordinary(text), "tiny shakespeare")
    assert decode_file(ctx, shard) == open(src, "rb").read(), "decode(encode(x)) != x"
    # nanoGPT's split
    tr, va = tmp(ctx, "ts_train.bin"), tmp(ctx, "ts_val.bin")
    run(ctx, enc_args(ctx) + ["-i", src, "-o", tr, "-f", "0.9", "-O", va])
    k = int(len(text) * 0.9)
    t, v = read_shard(tr), read_shard(va)
    assert (len(t), len(v)) == (TS_TRAIN, TS_VAL), f"split {len(t)}/{len(v)}, expected {TS_TRAIN}/{TS_VAL}"
    expect_equal(t, ctx.enc.encode_ordinary(text[:k]), "train split")
    expect_equal(v, ctx.enc.encode_ordinary(text[k:]), "val split")
    # same ids whatever the thread count (more threads than cores included)
    for n in ("1", "3"):
        out = tmp(ctx, f"ts_n{n}.bin")
        run(ctx, enc_args(ctx) + ["-n", n, "-i", src, "-o", out])
        assert open(out, "rb").read() == open(shard, "rb").read(), f"-n {n} gives other tokens"


@check
def edge_cases(ctx):
    """scripts, combining marks, emoji, contractions, spaces, long runs, literal <|endoftext|>"""
    path = write(ctx, "edge.txt", EDGE_TEXT)
    toks, shard = encode_file(ctx, path)
    expect_equal(toks, ctx.enc.encode_ordinary(EDGE_TEXT), "edge-case text")
    assert decode_file(ctx, shard) == EDGE_TEXT.encode("utf-8"), "decode(encode(x)) != x"
    # each line on its own too (different neighbours at the text's start and end)
    lines = EDGE_TEXT.split("\n")
    jl = write(ctx, "edge.jsonl", "".join(json.dumps({"text": s}) + "\n" for s in lines))
    prefix = tmp(ctx, "edge_lines")
    run(ctx, enc_args(ctx) + ["-x", "jsonl", "-p", prefix, jl])
    want = []
    for s in lines:
        if s:
            want += [EOT] + ctx.enc.encode_ordinary(s)
    expect_equal(read_shard(prefix + "_000000.bin"), want, "edge-case lines")


@check
def unicode_classes(ctx):
    """every code point of planes 0-1 (all planes with --full-unicode) in letter/digit/space contexts"""
    top = 0x110000 if ctx.full_unicode else 0x20000
    cps = [c for c in range(top) if not 0xD800 <= c <= 0xDFFF]
    texts = ["a" + ch + ch + "b " + ch + "1" + ch + ch + "! " + ch + "  " + ch + "x" for ch in map(chr, cps)]
    # ensure_ascii: the \u escapes (surrogate pairs above the BMP) exercise the JSON reader too
    jl = write(ctx, "unicode.jsonl", "".join(json.dumps({"text": s}) + "\n" for s in texts))
    prefix = tmp(ctx, "unicode")
    run(ctx, enc_args(ctx) + ["-x", "jsonl", "-p", prefix, jl])
    got = read_shard(prefix + "_000000.bin")
    want = []
    for ids in ctx.enc.encode_ordinary_batch(texts, num_threads=2):
        want.append(EOT)
        want += ids
    if list(got) != want:
        # name the code points: split our output at the EOTs (text never encodes to EOT)
        docs, cur = [], None
        for t in got:
            if t == EOT:
                cur = []
                docs.append(cur)
            else:
                cur.append(t)
        bad = [f"U+{c:04X}: got {d}, expected {ids}" for c, d, ids in
               zip(cps, docs, ctx.enc.encode_ordinary_batch(texts, num_threads=2)) if d != ids]
        raise AssertionError(f"{len(bad)} code points encoded differently, first:\n  " + "\n  ".join(bad[:5]))


@check
def invalid_utf8(ctx):
    """invalid bytes become their single-byte tokens, valid runs are encoded as text; lossless"""
    path = write(ctx, "invalid.txt", INVALID_UTF8)
    p = run(ctx, enc_args(ctx) + ["-i", path, "-o", path + ".bin"])
    toks = read_shard(path + ".bin")
    expect_equal(toks, encode_bytes(ctx.enc, INVALID_UTF8), "invalid UTF-8")
    assert decode_file(ctx, path + ".bin") == INVALID_UTF8, "decode(encode(x)) != x for invalid UTF-8"
    nbad = sum(1 for ch in INVALID_UTF8.decode("utf-8", "surrogateescape") if 0xDC80 <= ord(ch) <= 0xDCFF)
    msg = p.stderr.decode()
    assert f"{nbad} bytes are not valid UTF-8" in msg, f"expected a warning counting {nbad} bytes, got: {msg!r}"


@check
def separators(ctx):
    """-x sep: separator lines at the start, in a row, at the end without a line break, not alone on
    their line, CRLF; separators across the 4 MiB read window; several files; -x doc"""
    cases = [
        b"<|endoftext|>\nfirst doc\n<|endoftext|>\nsecond doc\n",
        b"a\n<|endoftext|>\n<|endoftext|>\n\n<|endoftext|>\nb\n\n",
        b"one\n<|endoftext|>",
        b"not a separator: <|endoftext|> in text\n <|endoftext|>\n<|endoftext|> \nx<|endoftext|>\n",
        b"crlf\r\n<|endoftext|>\r\nstays one document\r\n",
        b"\n\n<|endoftext|>\n\n",
        b"no separator at all",
    ]
    rng = random.Random(3)
    words = [w for w in EDGE_TEXT.split()[:200] if len(w) < 30]
    seps = [" ", " ", "\n", "  ", ", "]
    body = "".join(w + s for w, s in zip(rng.choices(words, k=600000), rng.choices(seps, k=600000))).encode()
    assert len(body) > (4 << 20) + 10
    for off in (4 << 20) - 14, (4 << 20) - 7, (4 << 20) - 1, (4 << 20), (4 << 20) + 1:
        data = body[:off].decode("utf-8", "ignore").encode()  # cut inside a character: drop its remains
        cases.append(data + b"\n<|endoftext|>\ntail document\n")
    for i, data in enumerate(cases):
        path = write(ctx, f"sep{i}.txt", data)
        prefix = tmp(ctx, f"sep{i}")
        run(ctx, enc_args(ctx) + ["-x", "sep", "-p", prefix, path])
        want = []
        for d in split_sep_documents(data):
            want += [EOT] + encode_bytes(ctx.enc, d)
        expect_equal(read_shard(prefix + "_000000.bin"), want, f"separator case {i} ({data[:40]!r}...)")
    # several files in doc mode: each file one document, byte for byte; empty files are skipped
    files = [write(ctx, "doc_a.txt", "first file\n"), write(ctx, "doc_empty.txt", ""),
             write(ctx, "doc_b.txt", "second\n<|endoftext|>\nstill the second file\n")]
    prefix = tmp(ctx, "docs")
    run(ctx, enc_args(ctx) + ["-x", "doc", "-p", prefix] + files)
    want = []
    for f in files:
        d = open(f, "rb").read()
        if d:
            want += [EOT] + encode_bytes(ctx.enc, d)
    expect_equal(read_shard(prefix + "_000000.bin"), want, "doc mode")


@check
def streaming(ctx):
    """texts much longer than the 256 KiB work items and the 4 MiB read window: cuts never change ids"""
    rng = random.Random(5)
    b64 = "".join(rng.choices("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/", k=3 << 20))
    mixed = "".join(rng.choices(["word ", "Word, ", "12 ", "x1y2 ", "\n", "  ", "über ", "\u00a0", "'s ", "🙂 "], k=1 << 20))
    # one pre-token longer than a work item (no cut point inside): Shakespeare's letters without
    # spaces, so a wrong cut would split some multi-letter token
    src = open(os.path.join(ctx.shared, "tinyshakespeare", "input.txt"), encoding="utf-8").read()
    letters = "".join(ch for ch in src if ch.isalpha())[:700000]
    repeated = "a" * 300000
    for name, text in (("b64", b64), ("mixed", mixed), ("letters", letters), ("repeated", repeated)):
        path = write(ctx, f"long_{name}.txt", text)
        toks, shard = encode_file(ctx, path)
        expect_equal(toks, ctx.enc.encode_ordinary(text), f"long text '{name}'")
        # stdin, and two threads against one
        prefix = tmp(ctx, f"long_{name}_stdin")
        run(ctx, enc_args(ctx) + ["-n", "1", "-p", prefix, "-"], stdin=text.encode())
        expect_equal(read_shard(prefix + "_000000.bin"), [EOT] + list(toks), f"long text '{name}' from stdin")
    # a document spread over several shards (llm.c fills every shard, a document may straddle two)
    path = write(ctx, "shards.txt", mixed[:200000])
    prefix = tmp(ctx, "shards")
    p = run(ctx, enc_args(ctx) + ["-S", "10K", "-V", "2", "-p", prefix, path])
    want = [EOT] + ctx.enc.encode_ordinary(mixed[:200000])
    names = sorted(f for f in os.listdir(ctx.tmp) if f.startswith("shards_"))
    assert names[0] == "shards_train_000002.bin" and names[-2:] == ["shards_val_000000.bin", "shards_val_000001.bin"], names
    got = []
    for i in range(len(names)):
        kind = "val" if i < 2 else "train"
        toks = read_shard(tmp(ctx, f"shards_{kind}_{i:06d}.bin"))
        assert i == len(names) - 1 or len(toks) == 10000, f"shard {i} has {len(toks)} tokens"
        got += list(toks)
    expect_equal(got, want, "tokens across shards")
    assert b"documents" in p.stdout, "prepare mode reports its counts"


@check
def books_corpus(ctx):
    """the whole book corpus, train and val, against tiktoken; counts from the data README"""
    for split, ntext, ndocs in (("val", BOOKS_VAL_TEXT, BOOKS_VAL_DOCS), ("train", BOOKS_TRAIN_TEXT, BOOKS_TRAIN_DOCS)):
        data = lzma.open(os.path.join(ctx.shared, "corpus", f"{split}.txt.xz")).read()
        path = write(ctx, f"books_{split}.txt", data)
        prefix = tmp(ctx, f"books_{split}")
        t0 = time.time()
        run(ctx, enc_args(ctx) + ["-x", "sep", "-p", prefix, path])
        t_ours = time.time() - t0
        got = read_shard(prefix + "_000000.bin")
        docs = split_sep_documents(data)
        assert len(docs) == ndocs, f"{split}: {len(docs)} documents, expected {ndocs}"
        t0 = time.time()
        per_doc = ctx.enc.encode_ordinary_batch([d.decode("utf-8") for d in docs], num_threads=2)
        t_ref = time.time() - t0
        want = array.array("H")
        for ids in per_doc:
            want.append(EOT)
            want.extend(ids)
        assert len(got) == ntext + ndocs, f"{split}: {len(got)} tokens, expected {ntext} + {ndocs} EOT"
        assert got.count(EOT) == ndocs, f"{split}: {got.count(EOT)} EOT tokens, expected {ndocs}"
        if got != want:
            expect_equal(got, want, f"books {split}")
        print(f"    books {split}: {len(got):,} tokens equal ({t_ours:.1f} s ours, {t_ref:.1f} s tiktoken)")
        os.remove(path)


@check
def fineweb_sample(ctx):
    """FineWeb rows as JSON lines (all of FineWeb's columns, escapes, unicode) -> val/train shards"""
    rng = random.Random(7)
    texts = [EDGE_TEXT[i:i + rng.randint(1, 3000)] for i in range(0, len(EDGE_TEXT), 2500)]
    texts += ["", "short", "a\nb\r\n\tc \"quoted\" back\\slash /slash \u2028 \U0001F600", "x" * 300000]
    src = open(os.path.join(ctx.shared, "tinyshakespeare", "input.txt"), encoding="utf-8").read()
    texts += [src[i:i + 5000] for i in range(0, 200000, 5000)]
    rows = []
    for i, t in enumerate(texts):
        rows.append({"text": t, "id": f"<urn:uuid:{i:08x}-0000>", "dump": "CC-MAIN-2013-20",
                     "url": f"http://example.com/{i}", "date": "2013-05-18T05:48:54Z",
                     "file_path": "s3://commoncrawl/crawl-data/x.warc.gz", "language": "en",
                     "language_score": 0.9 + i * 1e-4, "token_count": len(t) // 4,
                     "nested": {"a": [1, 2.5e3, None, True, False, {"b": "}"}]}})
    lines = []
    for i, r in enumerate(rows):  # both JSON styles: escaped ASCII and raw UTF-8, key order varies
        if i % 2:
            lines.append(json.dumps(r, ensure_ascii=False))
        else:
            lines.append(json.dumps(dict(reversed(list(r.items())))))
    # a lone surrogate escape has no UTF-8 form: it is read as U+FFFD (with a warning)
    lines.append('{"text": "lone \\ud800 surrogate, then a pair \\ud83d\\ude00", "id": "x"}')
    texts.append("lone \ufffd surrogate, then a pair \U0001F600")
    path = write(ctx, "fineweb_sample.jsonl", "\n".join(lines) + "\n\n")
    prefix = tmp(ctx, "fw")
    p = run(ctx, enc_args(ctx) + ["-x", "jsonl", "-V", "1", "-S", "50K", "-p", prefix, path])
    assert b"1 lone UTF-16 surrogate" in p.stderr, f"expected a warning about the lone surrogate: {p.stderr!r}"
    want = []
    for t in texts:
        if t:
            want += [EOT] + ctx.enc.encode_ordinary(t)
    names = sorted(f for f in os.listdir(ctx.tmp) if f.startswith("fw_"))
    assert names[-1] == "fw_val_000000.bin" and names[0] == "fw_train_000001.bin", names
    got = list(read_shard(prefix + "_val_000000.bin"))
    assert len(got) == 50000, f"val shard has {len(got)} tokens"
    for i in range(1, len(names)):
        got += list(read_shard(f"{prefix}_train_{i:06d}.bin"))
    expect_equal(got, want, "FineWeb sample")


@check
def hellaswag(ctx):
    """llm.c's eval file: 10,042 examples, the labels, every example's tokens against tiktoken"""
    src = os.path.join(ctx.shared, "hellaswag", "hellaswag_val.jsonl")
    out = tmp(ctx, "hellaswag_val.bin")
    run(ctx, enc_args(ctx) + ["-H", src, "-o", out])
    header, examples = read_evalfile(out)
    assert len(examples) == HS_EXAMPLES, f"{len(examples)} examples"
    counts = [0, 0, 0, 0]
    rows = [json.loads(line) for line in open(src, encoding="utf-8")]
    for (idx, label, ctx_toks, ends), row, i in zip(examples, rows, range(len(rows))):
        assert idx == i and label == row["label"], f"example {i}: index {idx} label {label}, expected {row['label']}"
        counts[label] += 1
        want_ctx = ctx.enc.encode_ordinary(row["ctx"])
        want_ends = [ctx.enc.encode_ordinary(" " + e) for e in row["endings"]]
        if ctx_toks != want_ctx or ends != want_ends:
            raise AssertionError(f"example {i}: tokens differ\n ctx {first_mismatches(ctx_toks, want_ctx)}\n"
                                 f" endings {ends} vs {want_ends}")
    assert counts == HS_LABELS, f"labels {counts}, expected {HS_LABELS}"
    # spot check, spelled out: the first example
    idx, label, c, ends = examples[0]
    r = rows[0]
    print(f"    example 0: label {label}, ctx {len(c)} tokens {c[:6]}..., ending {label}: {ctx.enc.decode(ends[label])!r}")
    assert ctx.enc.decode(c) == r["ctx"] and ctx.enc.decode(ends[label]) == " " + r["endings"][label]


@check
def bad_input(ctx):
    """every bad input: non-zero exit and a one-line error that names the problem"""
    good_enc, good_bpe = ctx.encoder, ctx.vocab
    enc_text = open(good_enc, encoding="utf-8").read()
    bpe_lines = open(good_bpe, encoding="utf-8").read().split("\n")
    text = write(ctx, "ok.txt", "some text\n")
    out = tmp(ctx, "bad_out.bin")
    enc_gap = json.loads(enc_text)
    del enc_gap["\u0120gazed"]  # id 50255: a gap in the ids
    enc_swap = json.loads(enc_text)
    enc_swap["!"], enc_swap['"'] = enc_swap['"'], enc_swap["!"]  # two byte tokens' ids: every '!' would encode as '"'
    enc_short = dict(enc_gap)
    enc_short["<|endoftext|>"] = 50255  # contiguous ids, one merge token short
    # issue 35: special files where a file is read (a FIFO blocked the tool forever), a folder
    fifo, folder = tmp(ctx, "fifo"), tmp(ctx, "folder")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
        os.mkdir(folder)
    # a BPE whose merges make a 256-byte token, one byte more than the decode table's length field
    long_bpe = tmp(ctx, "long_bpe")
    os.makedirs(long_bpe, exist_ok=True)
    subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "..", "fuzz", "make_tiny_bpe.py"),
                    write(ctx, "a300.txt", "a" * 300), long_bpe, "9"], check=True, capture_output=True)
    long_args = ["-e", os.path.join(long_bpe, "encoder.json"), "-m", os.path.join(long_bpe, "vocab.bpe")]
    shard = write(ctx, "ok_shard.bin", struct.pack("<256i", 20240520, 1, 2, *([0] * 253)) + struct.pack("<2H", 31, 32))
    # outputs that are inputs (or each other) were overwritten; shards of an earlier run under the same -p mixed
    # with the new ones; a run that failed after writing shards left them
    same = write(ctx, "same.txt", "keep me\n")
    enc_copy = write(ctx, "enc_copy.json", enc_text)
    earlier = tmp(ctx, "earlier")
    write(ctx, "earlier_train_000003.bin", b"old")
    cases = [
        ("-o the same file as -i", enc_args(ctx) + ["-i", same, "-o", same], "-o " + same + " is the same file as -i"),
        ("-w the same file as -e", ["-e", enc_copy, "-m", good_bpe, "-w", enc_copy], "-w " + enc_copy + " is the same file as -e"),
        ("-O the same file as -o", enc_args(ctx) + ["-i", text, "-o", out, "-f", "0.5", "-O", out], "is the same file as -O"),
        ("decode: -o the same file as -t", ["-d", "-t", ctx.table, "-i", shard, "-o", ctx.table], "is the same file as -t"),
        ("-p over an earlier run's shards", enc_args(ctx) + ["-p", earlier, text], "1 shard(s) of an earlier run are there"),
        ("-p ending in a folder", enc_args(ctx) + ["-p", ctx.tmp + "/", text], "the prefix ends in a folder"),
        ("-o a folder (no advice to free space)", enc_args(ctx) + ["-i", text, "-o", folder], "failed: Is a directory; choose another -o"),
        ("-V shards written, then nothing left", enc_args(ctx) + ["-S", "1", "-V", "9", "-p", tmp(ctx, "vfail"), text],
         "nothing is left for training"),
        ("FIFO as encoder.json", ["-e", fifo, "-m", good_bpe, "-i", text, "-o", out], "is a FIFO"),
        ("FIFO as vocab.bpe", ["-e", good_enc, "-m", fifo, "-w", out], "vocab.bpe '" + fifo + "': it is a FIFO"),
        ("FIFO as -i", enc_args(ctx) + ["-i", fifo, "-o", out], "-i input '" + fifo + "' is a FIFO"),
        ("folder as -i", enc_args(ctx) + ["-i", folder, "-o", out], "-i input '" + folder + "' is a folder"),
        ("FIFO as a prepare input", enc_args(ctx) + ["-p", tmp(ctx, "f"), text, fifo], "input '" + fifo + "' is a FIFO"),
        ("FIFO as -H", enc_args(ctx) + ["-H", fifo, "-o", out], "-H HellaSwag file '" + fifo + "' is a FIFO"),
        ("decode: FIFO as -i", ["-d", "-t", ctx.table, "-i", fifo, "-o", out], "-i token shard '" + fifo + "' is a FIFO"),
        ("decode: FIFO as -t", ["-d", "-t", fifo, "-i", shard, "-o", out], "tokenizer file -t '" + fifo + "' is a FIFO"),
        ("decode: folder as -t", ["-d", "-t", folder, "-i", shard, "-o", out], "is a folder"),
        ("a token too long for the decode table", long_args + ["-w", out], "-w " + out + ": token 263 of -e"),
        ("-S past long long", enc_args(ctx) + ["-S", "1e300", "-p", tmp(ctx, "x"), text], "-S 1e300: tokens per shard must be"),
        ("-S not a number", enc_args(ctx) + ["-S", "nan", "-p", tmp(ctx, "x"), text], "-S nan: tokens per shard must be"),
        ("-V past an int", enc_args(ctx) + ["-V", "4294967297", "-p", tmp(ctx, "x"), text], "-V 4294967297: the number of validation"),
        ("-n past 1024", enc_args(ctx) + ["-n", "2K", "-i", text, "-o", out], "-n 2K: threads must be"),
        ("a flag the mode does not read", enc_args(ctx) + ["-S", "5", "-i", text, "-o", out], "-S does not apply to encoding"),
        ("-e with -d", enc_args(ctx) + ["-d", "-t", ctx.table, "-i", shard, "-o", out], "-e does not apply to decoding"),
        ("missing encoder.json", ["-e", tmp(ctx, "nope.json"), "-m", good_bpe, "-i", text, "-o", out], "cannot open encoder.json"),
        ("missing vocab.bpe", ["-e", good_enc, "-m", tmp(ctx, "nope.bpe"), "-i", text, "-o", out], "cannot open vocab.bpe"),
        ("truncated JSON", ["-e", write(ctx, "trunc.json", enc_text[:5000]), "-m", good_bpe, "-i", text, "-o", out], "bad JSON"),
        ("not JSON", ["-e", write(ctx, "notjson.json", "hello"), "-m", good_bpe, "-i", text, "-o", out], "bad JSON"),
        ("JSON with a trailing comma", ["-e", write(ctx, "comma.json", enc_text[:-1] + ",}"), "-m", good_bpe, "-i", text, "-o", out], "bad JSON"),
        ("encoder.json with an id gap", ["-e", write(ctx, "gap.json", json.dumps(enc_gap)), "-m", good_bpe, "-i", text, "-o", out], "out of range"),
        ("encoder.json with two byte tokens' ids swapped (tiktoken refuses it too)", ["-e", write(ctx, "swap.json", json.dumps(enc_swap)), "-m", good_bpe, "-i", text, "-o", out],
         "the byte 0x21 has id 1, but GPT-2 numbers the 256 byte tokens first"),
        ("encoder.json one token short", ["-e", write(ctx, "short.json", json.dumps(enc_short)), "-m", good_bpe, "-i", text, "-o", out], "does not have"),
        ("vocab.bpe truncated", ["-e", good_enc, "-m", write(ctx, "short.bpe", "\n".join(bpe_lines[:30000]) + "\n"), "-i", text, "-o", out], "do not belong together"),
        ("vocab.bpe bad line", ["-e", good_enc, "-m", write(ctx, "badline.bpe", "\n".join(bpe_lines[:100] + ["a b c"] + bpe_lines[100:])), "-i", text, "-o", out], "line 101"),
        ("vocab.bpe merges out of order", ["-e", good_enc, "-m", write(ctx, "order.bpe", "\n".join([bpe_lines[0], bpe_lines[2], bpe_lines[1]] + bpe_lines[3:])), "-i", text, "-o", out], "disagree on the merge order"),
        ("empty input", enc_args(ctx) + ["-i", write(ctx, "empty.txt", ""), "-o", out], "empty"),
        ("empty stdin", enc_args(ctx) + ["-i", "-", "-o", out], "nothing to tokenize"),
        ("empty prepare input", enc_args(ctx) + ["-x", "sep", "-p", tmp(ctx, "e"), write(ctx, "onlysep.txt", "<|endoftext|>\n")], "no documents"),
        ("document longer than any buffer", enc_args(ctx) + ["-b", "1", "-i", write(ctx, "huge.txt", "z" * (3 << 20)), "-o", out], "no place where the text can be cut"),
        ("JSON line longer than any buffer", enc_args(ctx) + ["-b", "1", "-x", "jsonl", "-p", tmp(ctx, "j"), write(ctx, "huge.jsonl", json.dumps({"text": "z " * (1 << 20)}) + "\n")], "longer than 1 MiB"),
        ("output folder missing", enc_args(ctx) + ["-i", text, "-o", tmp(ctx, "no/such/dir/out.bin")], "does not exist"),
        ("prepare folder missing", enc_args(ctx) + ["-p", tmp(ctx, "no/such/dir/x"), text], "does not exist"),
        ("shard too small for the val split", enc_args(ctx) + ["-V", "1", "-p", tmp(ctx, "small"), text], "nothing is left for training"),
        ("split leaves a part empty", enc_args(ctx) + ["-i", write(ctx, "one.txt", "a"), "-o", out, "-f", "0.9", "-O", tmp(ctx, "v.bin")], "part empty"),
        ("bad JSON line", enc_args(ctx) + ["-x", "jsonl", "-p", tmp(ctx, "j"), write(ctx, "bad.jsonl", '{"text": "ok"}\n{"text": "unterminated}\n')], "line 2: bad JSON"),
        ("JSON line without text", enc_args(ctx) + ["-x", "jsonl", "-p", tmp(ctx, "j"), write(ctx, "notext.jsonl", '{"body": "x"}\n')], "no \"text\" field"),
        ("HellaSwag with 3 endings", enc_args(ctx) + ["-H", write(ctx, "hs.jsonl", '{"ctx": "a", "label": 0, "endings": ["b", "c", "d"]}\n'), "-o", out], "4 \"endings\""),
        ("HellaSwag label out of range", enc_args(ctx) + ["-H", write(ctx, "hs2.jsonl", '{"ctx": "a", "label": 7, "endings": ["b", "c", "d", "e"]}\n'), "-o", out], "label must be 0..3"),
        ("decode: table missing", ["-d", "-t", tmp(ctx, "none.bin"), "-i", text, "-o", out], "tokenizer file not found"),
        ("decode: table with wrong magic", ["-d", "-t", write(ctx, "badmagic.bin", b"\0" * 2048), "-i", text, "-o", out], "not a tokenizer file"),
        ("decode: truncated table", ["-d", "-t", write(ctx, "trunctab.bin", open(ctx.table, "rb").read()[:300000]), "-i", text, "-o", out], "truncated at token"),
        ("decode: not a shard", ["-d", "-t", ctx.table, "-i", text, "-o", out], "too short for a token shard"),
        ("decode: truncated shard", ["-d", "-t", ctx.table, "-i", write(ctx, "truncshard.bin", struct.pack("<256i", 20240520, 1, 100, *([0] * 253)) + b"\0" * 10), "-o", out], "truncated"),
        ("unknown flag", ["-Q"], "unknown flag -Q"),
        ("unknown long flag (getopt read it as '-')", ["--frobnicate"], "unknown flag --frobnicate"),
        ("flag without value", enc_args(ctx) + ["-i"], "needs a value"),
        ("bad -x", enc_args(ctx) + ["-x", "csv", "-p", tmp(ctx, "x"), text], "unknown input format"),
        ("bad -S", enc_args(ctx) + ["-S", "0", "-p", tmp(ctx, "x"), text], "tokens per shard"),
    ]
    failures = []
    for name, args, needle in cases:
        p = run(ctx, args, expect_ok=False, timeout=60)
        err = p.stderr.decode(errors="replace")
        last = [line for line in err.strip().split("\n") if line.startswith("error:")]
        if p.returncode == 0 or not last or needle not in last[-1]:
            failures.append(f"{name}: exit {p.returncode}, expected an 'error:' line containing {needle!r}, got {err.strip()[-300:]!r}")
        else:
            print(f"    {name}: {last[-1][:150]}")
    leftovers = [f for f in os.listdir(ctx.tmp) if ".tmp." in f or f.startswith("vfail_")]
    if leftovers:
        failures.append(f"partial outputs left behind: {leftovers}")
    if open(same, "rb").read() != b"keep me\n" or open(enc_copy, "rb").read() != enc_text.encode("utf-8"):
        failures.append("an input named as an output was changed")
    if failures:
        raise AssertionError("\n".join(failures))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", default="./gpt2_tokenize")
    ap.add_argument("--gpt2-dir", required=True)
    ap.add_argument("--shared", required=True, help="the shared data folder (tinyshakespeare/, corpus/, hellaswag/)")
    ap.add_argument("--only", action="append", help="run only these checks")
    ap.add_argument("--except", dest="exclude", action="append", default=[],
                    help="leave out these checks (test_tokenizer.sh reports them as skipped)")
    ap.add_argument("--full-unicode", action="store_true", help="all 17 planes in unicode_classes (slow)")
    args = ap.parse_args()
    ctx = Ctx()
    ctx.tool = os.path.abspath(args.tool)
    ctx.encoder = os.path.join(args.gpt2_dir, "encoder.json")
    ctx.vocab = os.path.join(args.gpt2_dir, "vocab.bpe")
    ctx.shared = args.shared
    ctx.full_unicode = args.full_unicode
    ctx.enc = load_tiktoken(args.gpt2_dir)
    ctx.tmp = tempfile.mkdtemp(prefix="test_tokenizer_")
    ctx.table = os.path.join(ctx.tmp, "gpt2_tokenizer.bin")
    failed = []
    t_all = time.time()
    try:
        checks = CHECKS if not args.only else [c for c in CHECKS if c.__name__ in args.only]
        checks = [c for c in checks if c.__name__ not in args.exclude]
        if "tokenizer_table" not in [c.__name__ for c in checks]:
            run(ctx, enc_args(ctx) + ["-w", ctx.table])
        for fn in checks:
            t0 = time.time()
            doc = " ".join(fn.__doc__.split())
            try:
                fn(ctx)
                print(f"ok   {fn.__name__}: {doc} ({time.time() - t0:.1f} s)", flush=True)
            except AssertionError as e:
                failed.append(fn.__name__)
                print(f"FAIL {fn.__name__}: {doc}\n{e}", flush=True)
    finally:
        shutil.rmtree(ctx.tmp, ignore_errors=True)
    if failed:
        print(f"test_tokenizer: {len(failed)} of {len(checks)} checks failed: {', '.join(failed)}")
        sys.exit(1)
    print(f"test_tokenizer: all {len(checks)} checks passed ({time.time() - t_all:.1f} s)")


if __name__ == "__main__":
    main()
