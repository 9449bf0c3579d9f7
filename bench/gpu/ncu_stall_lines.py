#!/usr/bin/env python3
"""The source lines where a kernel's warps stall most, from Nsight Compute's source page.

Make the input on the GPU machine from a report taken with `--section SourceCounters --import-source yes` of a
binary built with `-lineinfo`:

    ncu -i report.ncu-rep -k regex:KERNEL --launch-count 1 --page source --print-source sass,cuda --csv > k.csv

then `ncu_stall_lines.py k.csv [N]` prints the N lines (default 25) with the most warp stall samples, each with its
share of the kernel's samples and its four largest stall reasons (long_sb: waiting on global/local memory or
cp.async; short_sb: on shared memory; wait: fixed latency; branch_resolving; ...). `--sass FILE:LINE` prints that
line's instructions with their samples instead.
"""
import csv
import sys


def rows(path):
    """(file, line, source, samples, {reason: samples}, [(address, sass, samples, reasons)]) per source line."""
    out, cur_file, header, cur = [], "", None, None
    with open(path, newline="") as f:
        for r in csv.reader(f):
            if not r:
                continue
            if r[0] == "File Path":
                cur_file = r[1].split("/")[-1]
                continue
            if r[0] == "Function Name":
                continue
            if r[0] == "Line No":
                header = r
                continue
            if header is None:
                continue
            reasons = {h[6:]: int(r[i]) for i, h in enumerate(header)
                       if h.startswith("stall_") and "Not Issued" not in h and i < len(r) and r[i].isdigit() and int(r[i]) > 0}
            samples = int(r[4]) if r[4].isdigit() else 0
            if r[0]:
                cur = (cur_file, r[0], r[1].strip(), samples, reasons, [])
                out.append(cur)
            elif cur is not None and samples:
                cur[5].append((r[2], r[3].strip(), samples, reasons))
    return out


def top(reasons, n=4):
    return " ".join(f"{k}={v}" for k, v in sorted(reasons.items(), key=lambda x: -x[1])[:n])


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    lines = rows(sys.argv[1])
    total = sum(x[3] for x in lines) or 1
    if len(sys.argv) > 3 and sys.argv[2] == "--sass":
        for f, ln, src, s, _, sass in lines:
            if f"{f}:{ln}" == sys.argv[3]:
                print(f"{f}:{ln} {src}  ({s} samples)")
                for addr, ins, n, rs in sass:
                    print(f"  {addr[-6:]} {ins[:64]:64s} {n:8d} {top(rs, 3)}")
        return
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    print(f"{total} warp stall samples")
    for f, ln, src, s, rs, _ in sorted(lines, key=lambda x: -x[3])[:n]:
        print(f"{s:8d} {100 * s / total:5.1f}%  {f}:{ln}  {src[:90]}  | {top(rs)}")


if __name__ == "__main__":
    main()
