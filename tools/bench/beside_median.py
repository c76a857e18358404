#!/usr/bin/env python3
"""Summarise `deepinfer bench` decode fractions taken beside the read, split by the machine's state.

`bench` prints, per run, `decode beside the read: X% ... (median of R: f1, ..., fR%; the readings, GB/s:
r0, ..., rR)`: repeat i's decode against the mean of readings r(i-1) and r(i). On a shared machine whose
read flips between a slower and a faster state, this pools the repeats of many runs and reports, per label,
the median fraction of the repeats whose two readings both lie below --threshold (the slower state) and of
those with both at or above it (the faster state); repeats that straddle the two are left out.

Input: bench output (text) on stdin or in the files given. A line `== LABEL ...` starts a group (e.g. one
binary of an interleaved A/B; --label-word picks which word of that line names it); a prefix before `decode beside` (e.g. `bs-exact decode beside ...`) is added
to the label, so several models in one log stay apart.

  python3 tools/bench/beside_median.py --threshold 37 --label-word 1 ab.log   (lines `== r1 BINARY ...`)
"""
import argparse
import re
import statistics
import sys

LINE = re.compile(r"decode beside the read: .*\(median of \d+: ([\d., ]+)%; the readings, GB/s: ([\d., ]+)\)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--threshold", type=float, default=37.0, help="GB/s between the slower and faster state")
    ap.add_argument("--label-word", type=int, default=0, help="which word of a `==` line names its group")
    args = ap.parse_args()
    text = "".join(open(f).read() for f in args.files) if args.files else sys.stdin.read()
    label, groups = "", {}
    for line in text.splitlines():
        head = re.match(r"==\s*(.*)", line)
        if head:
            words = head.group(1).split()
            label = words[args.label_word] if args.label_word < len(words) else ""
            continue
        m = LINE.search(line)
        if not m:
            continue
        prefix = line.split("decode beside")[0].strip()
        fractions = [float(x) for x in m.group(1).split(",")]
        readings = [float(x) for x in m.group(2).split(",")]
        if len(readings) != len(fractions) + 1:
            print(f"skipped (readings do not bracket the repeats): {line}", file=sys.stderr)
            continue
        slow, fast = groups.setdefault((label, prefix), ([], []))
        for i, f in enumerate(fractions):
            lo, hi = readings[i], readings[i + 1]
            if lo < args.threshold and hi < args.threshold:
                slow.append(f)
            elif lo >= args.threshold and hi >= args.threshold:
                fast.append(f)
    for (label, prefix), (slow, fast) in groups.items():
        def summary(v):
            return f"median {statistics.median(v):.1f}% of {len(v)} repeats" if v else "no repeats"
        name = " ".join(x for x in (label, prefix) if x)
        print(f"{name}: below {args.threshold:g} GB/s {summary(slow)}; at or above it {summary(fast)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
