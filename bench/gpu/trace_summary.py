#!/usr/bin/env python3
"""Where a version's time goes on each GPU, from a kernel_trace.hpp timeline (engine_nccl_bench --trace FILE).

For every version window (its "publish" to its "acknowledged" mark; gpu_bench --trace marks each timed run of an
encode or apply "start" and "end") and every device: how long the GPU was busy
(the union of kernels, copies and memsets), its idle gaps, the kernels that took the most time (summed over the
window, by name, overlaps counted per kernel), and when its last work ended relative to the window's end.

usage: trace_summary.py TRACE.jsonl [--versions 2-6] [--top 8] [--match TEXT]
"""
import argparse
import json
import re
import shutil
import subprocess
from collections import defaultdict


def demangle(names):
    if not names or not shutil.which("c++filt"):
        return {n: n for n in names}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}


def short(name):
    # The function's name and its first template argument: enough to tell the passes apart.
    head = name.split("(")[0]
    m = re.match(r"^(?:void )?(.*?)(<.*>)?$", head)
    base = (m.group(1) if m else head).split("::")[-1]
    args = m.group(2) if m and m.group(2) else ""
    first = args[1:].split(",")[0].split("::")[-1] if args else ""
    return f"{base}<{first}>" if first else base


def union_ms(intervals):
    total, end = 0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total / 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--versions", default="2-99")
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--match", default="", help="only windows whose tag contains this text")
    a = ap.parse_args()
    lo, hi = (int(x) for x in a.versions.split("-"))
    marks, acts = [], []
    for line in open(a.trace):
        r = json.loads(line)
        (marks if r["k"] == "mark" else acts).append(r)
    names = demangle(sorted({r["name"] for r in acts if r["k"] == "kernel"}))
    windows = {}
    for m in marks:
        tag, _, what = m["what"].rpartition(" ")
        windows.setdefault(tag, {})[what] = m["t"]
    for tag, w in windows.items():
        v = int(tag.rsplit(" v", 1)[1])
        start, end = ("publish", "acknowledged") if "publish" in w else ("start", "end")
        if not (lo <= v <= hi) or a.match not in tag or start not in w or end not in w:
            continue
        t0, t1 = w[start], w[end]
        print(f"== {tag}: {(t1 - t0) / 1e6:.3f} ms")
        per_dev = defaultdict(list)
        for r in acts:
            if r["end"] > t0 and r["start"] < t1:
                per_dev[r["dev"]].append(r)
        for dev in sorted(per_dev):
            rs = per_dev[dev]
            iv = [(max(r["start"], t0), min(r["end"], t1)) for r in rs]
            busy = union_ms(iv)
            first = (min(s for s, _ in iv) - t0) / 1e6
            last = (max(e for _, e in iv) - t0) / 1e6
            by = defaultdict(lambda: [0.0, 0])
            for r, (s, e) in zip(rs, iv):
                key = short(names.get(r["name"], r["name"])) if r["k"] == "kernel" else f'{r["k"]}' + (f' kind {r["copy"]}' if r["k"] == "memcpy" else "")
                by[key][0] += (e - s) / 1e6
                by[key][1] += 1
            print(f"  GPU {dev}: busy {busy:.3f} ms of the window; first work at +{first:.3f} ms, last ends at +{last:.3f} ms "
                  f"({(t1 - t0) / 1e6 - last:.3f} ms before the ack)")
            # Busy share per millisecond of the window: where the GPU waited.
            bins = []
            for k in range(int((t1 - t0) / 1e6) + 1):
                b0, b1 = t0 + k * 1_000_000, min(t1, t0 + (k + 1) * 1_000_000)
                part = [(max(s, b0), min(e, b1)) for s, e in iv if e > b0 and s < b1]
                bins.append(round(100 * union_ms(part) / max((b1 - b0) / 1e6, 1e-9)))
            print("    busy % per ms: " + " ".join(str(x) for x in bins))
            for key, (ms, n) in sorted(by.items(), key=lambda kv: -kv[1][0])[: a.top]:
                print(f"    {ms:8.3f} ms  {n:5d} x  {key}")


if __name__ == "__main__":
    main()
