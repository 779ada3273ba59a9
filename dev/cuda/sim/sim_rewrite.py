#!/usr/bin/env python3
"""
Host simulator, part 4: copies the CUDA layers of llmc/ for a host (g++) build, changing only what
a C++ compiler cannot parse, line for line (a #line directive keeps messages pointing at llmc/):
  kernel<<<grid, block, smem, stream>>>(args)  ->  sim_launch(grid, block, smem, stream, kernel, args)
  extern __shared__ T name[];                  ->  T *name = (T *)sim_dynamic_smem();
  __shared__ T name[N]...;                     ->  static T name[N]...; sim_shared_poison(name, sizeof(name));
    (filled with 0xff by the first thread of every block, so reads of unwritten shared memory show)
Everything else, kernels included, is compiled as written.

usage: sim_rewrite.py SRC_LLMC_DIR OUT_LLMC_DIR FILE...
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
        if args.strip():
            out.append(f'sim_launch({config}, {m.group(1)},{gap}{args})')
        else:
            out.append(f'sim_launch({config}, {m.group(1)}){gap}{args}')
        # the line count is unchanged: config, gap and args keep their newlines
        pos = i + 1
    result = ''.join(out)
    result = SHARED.sub(lambda s: f'{s.group(1)} *{s.group(2)} = ({s.group(1)} *)sim_dynamic_smem();', result)
    return STATIC_SHARED.sub(lambda s: f'static {s.group(1)} {s.group(2)}{s.group(3)}; '
                             f'sim_shared_poison({s.group(2)}, sizeof({s.group(2)}));', result)


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    os.makedirs(dst, exist_ok=True)
    for name in sys.argv[3:]:
        path = os.path.join(src, name)
        with open(path) as f:
            text = f.read()
        if name.endswith('.cuh'):
            text = rewrite(text, path)
        with open(os.path.join(dst, name), 'w') as f:
            f.write(f'#line 1 "{os.path.relpath(path)}"\n' + text)


if __name__ == '__main__':
    main()
