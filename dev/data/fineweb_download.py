#!/usr/bin/env python3
"""
FineWeb download step: stream FineWeb's rows to stdout as JSON lines {"text": ...}, the input
format of `gpt2_tokenize -x jsonl`. Python (Hugging Face `datasets`) is used for the download only;
the tokenizing is C. dev/data/fineweb.sh wires the two together:

    python3 dev/data/fineweb_download.py -v 10B | ./gpt2_tokenize -x jsonl -V 1 -p data/fineweb10B/fineweb ... -

The dataset is streamed in its published order (no copy of the parquet files is kept), so the
first 100M tokens (the val shard) are the same documents as in llm.c's fineweb.py.
Lines are pure ASCII (json.dumps escapes the rest), so no text can break the framing.
"""
import argparse
import json
import sys

REPOS = {"classic": "HuggingFaceFW/fineweb", "edu": "HuggingFaceFW/fineweb-edu"}
SAMPLES = {"10B": "sample-10BT", "100B": "sample-100BT"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("-t", "--type", choices=sorted(REPOS), default="classic", help="FineWeb or FineWeb-Edu (default classic)")
    ap.add_argument("-v", "--version", choices=sorted(SAMPLES), default="10B", help="sample size in tokens (default 10B)")
    ap.add_argument("--parquet", nargs="+", metavar="FILE", help="read these local parquet files instead of downloading")
    ap.add_argument("--limit", type=int, default=0, help="stop after this many documents (0 = all)")
    args = ap.parse_args()
    try:
        from datasets import load_dataset
    except ImportError:
        sys.exit("error: the FineWeb download needs Hugging Face datasets (pip install datasets); "
                 "or give dev/data/fineweb.sh local .jsonl files, which need no Python")
    if args.parquet:
        rows = load_dataset("parquet", data_files=args.parquet, split="train", streaming=True)
    else:
        rows = load_dataset(REPOS[args.type], name=SAMPLES[args.version], split="train", streaming=True)
    out = sys.stdout
    n = 0
    try:
        for row in rows:
            out.write(json.dumps({"text": row["text"]}))
            out.write("\n")
            n += 1
            if args.limit and n >= args.limit:
                break
        out.flush()
    except BrokenPipeError:
        # the tokenizer stopped reading; it prints the reason and exits non-zero itself
        sys.stderr.write(f"fineweb_download.py: output closed after {n} documents\n")
        sys.exit(1)
    sys.stderr.write(f"fineweb_download.py: {n} documents\n")


if __name__ == "__main__":
    main()
