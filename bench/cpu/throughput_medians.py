#!/usr/bin/env python3
"""Medians of several `codec_bench --throughput N --out RUN.json` runs of two builds, figure by figure:
    throughput_medians.py DIR old new     (reads DIR/old-run*.json and DIR/new-run*.json)
prints `step encoder figure old-median [runs] -> new-median [runs]` (GB/s of model, one core)."""
import glob
import json
import statistics
import sys

d, names = sys.argv[1], sys.argv[2:]


def figures(path):
    out = {}
    for step in json.load(open(path))["throughput"]["steps"]:
        for row in step["end_to_end"]:
            for k, v in row.items():
                if k.endswith("_gbps"):
                    out[(step["step"], row["encoder"], k)] = v
        for row in step["codec_alone"]:
            for k, v in row.items():
                if k.endswith("_gbps"):
                    out[(step["step"], row["encoder"], "alone_" + k)] = v
    return out


runs = {n: [figures(p) for p in sorted(glob.glob(f"{d}/{n}-run*.json"))] for n in names}
print(f"median of {', '.join(f'{len(runs[n])} {n}' for n in names)} codec_bench --throughput runs (GB/s of model, one core): "
      "step, encoder, figure, " + " -> ".join(f"{n} median [runs]" for n in names))
for key in sorted(runs[names[0]][0]):
    cols = []
    for n in names:
        vals = [round(r[key], 3) for r in runs[n] if key in r]
        cols.append(f"{statistics.median(vals):.3f} {vals}")
    print(*key, " -> ".join(cols))
