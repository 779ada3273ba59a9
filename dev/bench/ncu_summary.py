"""
Where a profiled step's GPU time goes, per kernel, from Nsight Compute's raw page:

  ncu --import ncu_d12.ncu-rep --csv --page raw --print-units base > raw.csv
  python dev/bench/ncu_summary.py raw.csv [TOP]

One line per kernel name (its launches added up), the TOP (default 20) longest first: launches,
total ms, share of all the launches' time, and the Speed-of-Light figures the report holds (SM
throughput, memory throughput, DRAM throughput, achieved occupancy, each in % of its peak; "-"
for a metric the report lacks), averaged over the launches weighted by their time, as one kernel
name may run several shapes. A kernel far below both peaks is latency- or launch-bound; one near
the memory peak has little left to gain but fewer bytes.

The raw page is CSV: a header row (ID, ..., Kernel Name, ..., one column per metric), a row of
units, then a row per launch; values may carry thousands separators. The durations are
converted to ms by their unit. Exits 1 with one line when the file holds no launch.
"""
import csv
import sys

DURATION = "gpu__time_duration.sum"
# each figure's metric, under the names Nsight Compute's versions give it
PERCENTS = [("SM %", ("sm__throughput.avg.pct_of_peak_sustained_elapsed",)),
            ("mem %", ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",)),
            ("DRAM %", ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                        "dram__throughput.avg.pct_of_peak_sustained_elapsed")),
            ("occup. %", ("sm__warps_active.avg.pct_of_peak_sustained_active",))]
TO_MS = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0, "second": 1e3, "s": 1e3}


def die(msg):
    sys.exit(f"error: ncu_summary.py: {msg}")


def number(text):
    """a CSV value as a float, or None (empty, 'n/a', text)"""
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def read(path):
    """[(kernel name, duration ms, {label: percent or None})] for every launch in the raw page"""
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except OSError as e:
        die(f"cannot read '{path}': {e.strerror}")
    head = next((i for i, r in enumerate(rows) if "Kernel Name" in r and DURATION in r), None)
    if head is None:
        die(f"'{path}' has no header row with 'Kernel Name' and {DURATION} (ncu --import <report> --csv --page raw)")
    cols = rows[head]
    name_at, dur_at = cols.index("Kernel Name"), cols.index(DURATION)
    pct_at = {}
    for label, names in PERCENTS:
        found = [cols.index(m) for m in names if m in cols]
        if found:
            pct_at[label] = found[0]
    scale, launches = None, []
    for r in rows[head + 1:]:
        if len(r) != len(cols):
            continue
        if scale is None and number(r[dur_at]) is None:  # the units row
            if r[dur_at] not in TO_MS:
                die(f"'{path}': unknown unit '{r[dur_at]}' of {DURATION}")
            scale = TO_MS[r[dur_at]]
            continue
        d = number(r[dur_at])
        if d is None:
            continue
        launches.append((r[name_at], d * (scale if scale is not None else 1e-6),
                         {label: number(r[i]) for label, i in pct_at.items()}))
    return launches


def weighted(pairs):
    """the mean of (value, ms) pairs weighted by ms (plain where every launch took 0 ms)"""
    w = sum(ms for _, ms in pairs)
    return sum(v * ms for v, ms in pairs) / w if w > 0 else sum(v for v, _ in pairs) / len(pairs)


def summarize(launches, top):
    """the table's lines, longest kernel first"""
    by_name = {}
    for name, ms, pcts in launches:
        k = by_name.setdefault(name, {"n": 0, "ms": 0.0, "p": {label: [] for label, _ in PERCENTS}})
        k["n"] += 1
        k["ms"] += ms
        for label, v in pcts.items():
            if v is not None:
                k["p"][label].append((v, ms))
    total = sum(k["ms"] for k in by_name.values()) or 1e-30  # launches of 0 ms: shares of 0
    labels = [label for label, _ in PERCENTS]
    out = [f"{len(launches)} launches of {len(by_name)} kernels, {total:.3f} ms in all; the {min(top, len(by_name))} longest:",
           f"  {'kernel':<60} {'launches':>8} {'ms':>9} {'share':>6} " + " ".join(f"{x:>8}" for x in labels)]
    for name, k in sorted(by_name.items(), key=lambda kv: -kv[1]["ms"])[:top]:
        means = [f"{weighted(v):8.1f}" if v else f"{'-':>8}" for v in (k["p"][x] for x in labels)]
        short = name if len(name) <= 60 else name[:57] + "..."
        out.append(f"  {short:<60} {k['n']:>8} {k['ms']:>9.3f} {100 * k['ms'] / total:>5.1f}% " + " ".join(means))
    return out


def main(argv):
    if not 1 <= len(argv) <= 2:
        sys.exit(__doc__)
    top = 20
    if len(argv) == 2:
        if not argv[1].isdigit() or int(argv[1]) < 1:
            die(f"TOP '{argv[1]}': expected a whole number >= 1")
        top = int(argv[1])
    launches = read(argv[0])
    if not launches:
        die(f"'{argv[0]}' holds no launch (was the report empty?)")
    print("\n".join(summarize(launches, top)))


if __name__ == "__main__":
    main(sys.argv[1:])
