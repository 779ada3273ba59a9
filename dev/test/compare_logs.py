"""
The one main.log comparator of the tests: two runs' logged values, step by step.

  python compare_logs.py A/main.log B/main.log [trl=1e-3] [norm=3e-2] [tel=...] [--first N | --last N]

Each KEY=TOL compares the values logged as `s:<step> ... KEY:<value>` (trl train loss, norm
gradient norm, lr, tel val loss, hsw HellaSwag); the default is `trl=0`. TOL is the largest
relative difference allowed; 0 means identical strings, i.e. bitwise equal values. A NaN or an
infinity never agrees, not even with itself (two runs that diverge alike must not pass). Both logs must
hold the same steps for each key (the last value logged for a step wins, as for a resumed run);
--first N / --last N compare only the first / last N steps of A with the same steps of B. Prints one line per key;
exits 1 at the first difference, naming the step.
"""
import math
import re
import sys


def read(path, key):
    """{step: value string} for one key; a later line for the same step wins (resumed runs)."""
    pat = re.compile(r"^s:(\d+) .*?\b" + re.escape(key) + r":(\S+)")
    out = {}
    with open(path) as f:
        for line in f:
            m = pat.match(line)
            if m:
                out[int(m.group(1))] = m.group(2)
    return out


def compare(path_a, path_b, key, tol, first, last):
    a, b = read(path_a, key), read(path_b, key)
    steps = sorted(a)
    if first or last:
        steps = steps[:first] if first else steps[-last:]
        b = {s: b[s] for s in steps if s in b}
    if not steps or steps != sorted(b):
        print(f"{key}: steps differ: {steps} in {path_a} vs {sorted(b)} in {path_b}")
        return False
    worst = 0.0
    for s in steps:
        x, y = a[s], b[s]
        fx, fy = logged_number(x, path_a, s, key), logged_number(y, path_b, s, key)
        if not (math.isfinite(fx) and math.isfinite(fy)):
            print(f"{key}: step {s}: {x} vs {y} (not finite)")
            return False
        if tol == 0:
            if x != y:
                print(f"{key}: step {s}: {x} != {y} (bitwise comparison)")
                return False
            continue
        d = abs(fx - fy) / max(abs(fy), 1e-30)
        if d > tol:
            print(f"{key}: step {s}: {x} vs {y} (relative {d:.2e} > {tol})")
            return False
        worst = max(worst, d)
    what = "bitwise equal" if tol == 0 else f"worst relative difference {worst:.1e}, tolerance {tol}"
    print(f"  {key}: {len(steps)} steps agree ({what})")
    return True


def logged_number(text, path, step, key):
    """a logged value as a float, or exit with a line naming the file and step"""
    try:
        return float(text)
    except ValueError:
        sys.exit(f"error: compare_logs.py: {path}: step {step}: {key}:{text} is not a number")


def number(text, kind, what):
    """text as kind (int or float, >= 0), or exit with a line naming the argument"""
    if text == "":
        sys.exit(f"error: compare_logs.py: {what} needs a value")
    try:
        value = kind(text)
    except ValueError:
        value = -1
    if not value >= 0:  # also NaN
        sys.exit(f"error: compare_logs.py: {what}: '{text}' is not a number >= 0")
    return value


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    files, specs, first, last = argv[:2], [], 0, 0
    for path in files:
        try:
            open(path).close()
        except OSError as e:
            sys.exit(f"error: compare_logs.py: cannot read '{path}': {e.strerror}")
    rest = argv[2:]
    while rest:
        arg = rest.pop(0)
        if arg == "--last":
            last = number(rest.pop(0) if rest else "", int, "--last")
        elif arg == "--first":
            first = number(rest.pop(0) if rest else "", int, "--first")
        elif "=" in arg:
            key, tol = arg.split("=", 1)
            specs.append((key, number(tol, float, f"the tolerance of {key}")))
        else:
            sys.exit(f"error: compare_logs.py: bad argument '{arg}' (KEY=TOL, --first N or --last N)")
    if first and last:
        sys.exit("error: compare_logs.py: --first and --last: give one")
    ok = all(compare(files[0], files[1], key, tol, first, last) for key, tol in (specs or [("trl", 0.0)]))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main(sys.argv[1:])
