#!/usr/bin/env python3
"""Summarises a timeline.sh recording: per GPU, its kernels' durations and the gaps between
consecutive kernels in the steady state (the last half of the run), and what ran in those
gaps on that GPU (copies), as medians and percentiles in microseconds.
    timeline.py TIMELINE.txt [KERNEL_SUBSTRING [FIRST_RECORDS]]
With FIRST_RECORDS, the first records of every GPU are listed too."""
import collections
import statistics
import sys


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] if xs else 0


def main():
    path = sys.argv[1]
    want = sys.argv[2] if len(sys.argv) > 2 else ""
    per = collections.defaultdict(list)
    for line in open(path):
        f = line.split()
        if not f:
            continue
        kind, dev, stream, start, end = f[0], (-1 if f[1] == "-" else int(f[1])), int(f[2]), int(f[3]), int(f[4])
        rest = f[5:]
        per[dev].append((start, end, kind, stream, " ".join(rest)))
    t0 = min(r[0] for rs in per.values() for r in rs)
    api = sorted(per.pop(-1, []))
    if len(sys.argv) > 3:
        opening(per, t0, int(sys.argv[3]))
    for dev in sorted(per):
        rs = sorted(per[dev])
        ks = [r for r in rs if r[2] == "K" and want in r[4]]
        print(f"GPU {dev}: {len(rs)} records, {len(ks)} kernels matching {want!r}, "
              f"first at {(rs[0][0]-t0)/1e3:.0f} us, last end {(max(r[1] for r in rs)-t0)/1e3:.0f} us")
        if len(ks) < 4:
            continue
        steady = ks[len(ks) // 2:]
        durs = [(b - a) / 1e3 for a, b, *_ in steady]
        gaps, copies_in_gaps, copy_time = [], [], []
        for x, y in zip(steady, steady[1:]):
            gaps.append((y[0] - x[1]) / 1e3)
            inside = [r for r in rs if r[2] in "CP" and r[0] >= x[1] and r[1] <= y[0]]
            copies_in_gaps.append(len(inside))
            copy_time.append(sum(r[1] - r[0] for r in inside) / 1e3)
        print(f"  steady kernels: {len(steady)}, duration median {statistics.median(durs):.1f} us; "
              f"gap median {statistics.median(gaps):.1f} p10 {pct(gaps, .1):.1f} p90 {pct(gaps, .9):.1f} us; "
              f"copies per gap median {statistics.median(copies_in_gaps)}, their time median {statistics.median(copy_time):.1f} us")
        span = (steady[-1][1] - steady[0][0]) / 1e3
        busy = sum(durs)
        print(f"  steady span {span:.0f} us, kernels busy {busy:.0f} us ({100*busy/span:.1f}%)")
        # One typical gap in full: the records between the median-gap pair.
        mid = sorted(range(len(gaps)), key=lambda i: gaps[i])[len(gaps) // 2]
        a, b = steady[mid], steady[mid + 1]
        print(f"  a median gap, from the end of a kernel at {(a[1]-t0)/1e3:.1f} us:")
        for r in rs:
            if a[1] <= r[0] <= b[0] and r[2] in "CP":
                print(f"    {r[2]} stream {r[3]} +{(r[0]-a[1])/1e3:.1f} us for {(r[1]-r[0])/1e3:.1f} us {r[4]}")
        print(f"    next kernel +{(b[0]-a[1])/1e3:.1f} us")
        if dev == min(per):
            window(per, api, a[1] - 5000, b[0] + 2000, a[1], t0)


def opening(per, t0, count):
    """The run's first `count` records of every GPU, in time order, in microseconds from the
    first record: how a run gets going (whole launches, the first split, the first copies)."""
    first_kernel = min((r[0] for rs in per.values() for r in rs if r[2] == "K"), default=t0)
    print(f"  the first {count} records of each GPU from the first kernel (us from the run's first record):")
    rows = [(r[0], d, r) for d, rs in per.items() for r in [x for x in sorted(rs) if x[0] >= first_kernel][:count]]
    for start, d, r in sorted(rows):
        print(f"    {(start-t0)/1e3:10.1f} +{(r[1]-r[0])/1e3:8.1f}  GPU {d} {r[2]} s{r[3]} {r[4][:50]}")


def window(per, api, lo, hi, at, t0):
    """Everything on every GPU, and the host's driver calls, from `lo` to `hi` (ns), in
    microseconds from `at`."""
    print(f"  everything from {(lo-at)/1e3:.1f} to +{(hi-at)/1e3:.1f} us around it (host calls: A):")
    rows = [(r[0], f"GPU {d} {r[2]} s{r[3]}", r) for d, rs in per.items() for r in rs if r[1] >= lo and r[0] <= hi]
    rows += [(r[0], f"host {r[3]}", r) for r in api if r[1] >= lo and r[0] <= hi]
    for start, who, r in sorted(rows):
        print(f"    {(start-at)/1e3:+9.1f} .. {(r[1]-at)/1e3:+9.1f}  {who:<14} {r[4][:60]}")


if __name__ == "__main__":
    main()
