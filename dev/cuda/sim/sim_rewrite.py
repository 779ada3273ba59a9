#!/usr/bin/env python3
"""
Host simulator, the source copy: copies the files the simulator builds from (dev/cuda/Makefile's
SIM_FILES) into its build folder, changing only what a C++ compiler cannot parse in .cu and .cuh
files, line for line (a #line directive keeps messages pointing at the original):
  kernel<<<grid, block, smem, stream>>>(args)  ->  sim_launch<kernel>(grid, block, smem, stream, args)
  extern __shared__ T name[];                  ->  T *name = (T *)sim_dynamic_smem();
  __shared__ T name[N]...;                     ->  static T name[N]...; sim_shared_poison(name, sizeof(name));
    (filled with 0xff by the first thread of every block, so reads of unwritten shared memory show)
Everything else, kernels included, is compiled as written. A DEST=SRC argument copies SRC in place
of DEST, also where DEST is in the list (the simulator's checked versions of the PTX primitives of
llmc/cuda/attention_ptx.cuh).
Files are replaced atomically, so builds that share the folder never read a half-written one.

usage: sim_rewrite.py ROOT OUT FILE... [DEST=SRC...]   (paths relative to ROOT)
"""
import os
import re
import sys

LAUNCH = re.compile(r'([A-Za-z_]\w*(?:\s*<[^<>;()]*>)?)\s*<<<')
SHARED = re.compile(r'extern\s+__shared__\s+(\w+)\s+(\w+)\s*\[\s*\]\s*;')
STATIC_SHARED = re.compile(r'(?<!extern )__shared__\s+(\w+)\s+(\w+)((?:\s*\[[^\]]+\])+)\s*;')


def rewrite(text, path):
    out, pos = [], 0
    while True:
        m = LAUNCH.search(text, pos)
        if not m:
            out.append(text[pos:])
            break
        close = text.index('>>>', m.end())
        config = text[m.end():close]
        paren = close + 3
        while text[paren].isspace():
            paren += 1
        if text[paren] != '(':
            sys.exit(f'{path}: a <<<...>>> launch not followed by "(" near offset {paren}')
        depth, i = 0, paren
        while True:
            if text[i] == '(':
                depth += 1
            elif text[i] == ')':
                depth -= 1
                if depth == 0:
                    break
            i += 1
        args = text[paren + 1:i]
        gap = text[close + 3:paren]  # whitespace between >>> and (, kept for its newlines
        out.append(text[pos:m.start()])
        sep = ',' if args.strip() else ''
        out.append(f'sim_launch<{m.group(1)}>({config}{sep}{gap}{args})')
        # the line count is unchanged: config, gap and args keep their newlines
        pos = i + 1
    result = ''.join(out)
    result = SHARED.sub(lambda s: f'{s.group(1)} *{s.group(2)} = ({s.group(1)} *)sim_dynamic_smem();', result)
    return STATIC_SHARED.sub(lambda s: f'static {s.group(1)} {s.group(2)}{s.group(3)}; '
                             f'sim_shared_poison({s.group(2)}, sizeof({s.group(2)}));', result)


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    root, out = sys.argv[1], sys.argv[2]
    files = dict(arg.split('=', 1) if '=' in arg else (arg, arg) for arg in sys.argv[3:])
    for dest, src in files.items():
        path = os.path.join(root, src)
        with open(path) as f:
            text = f.read()
        if path.endswith(('.cu', '.cuh')):
            text = rewrite(text, path)
        target = os.path.join(out, dest)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tmp = f'{target}.{os.getpid()}.tmp'
        with open(tmp, 'w') as f:
            f.write(f'#line 1 "{os.path.relpath(path)}"\n' + text)
        os.replace(tmp, target)


if __name__ == '__main__':
    main()
