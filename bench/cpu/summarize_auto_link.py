#!/usr/bin/env python3
"""Summarizes auto_link_bench's JSON: per link speed and receiver kind, over every step of the stream, the mean bits
per change, the buckets entropy took, and what a version costs end to end (bytes over an ideal link of that speed
plus the receivers' decode: measured on this CPU for CPU receivers; for GPU receivers only entropy's extra walk,
modelled from link_cost::gpu_receiver), beside `auto` with no link stated in the same run.

    python3 bench/cpu/summarize_auto_link.py bench/results/auto-link.json > table.md
"""
import json
import sys


def main(path):
    doc = json.load(open(path))
    rows = doc["rows"]
    steps = sorted({r["step"] for r in rows})
    base = {r["step"]: r for r in rows if r["link_gbps"] == 0}
    print("| receivers | link | auto bits/change, mean of %d steps (no link stated: %.2f) | entropy buckets | "
          "version time, mean: auto with the link stated | auto with no link stated | gain |" % (
              len(steps), sum(base[s]["bits_per_change"] for s in steps) / len(steps)))
    print("|---|---:|---:|---:|---:|---:|---:|")
    for receivers in ("gpu", "cpu"):
        links = sorted({r["link_gbps"] for r in rows if r["receivers"] == receivers}, reverse=True)
        for gbps in links:
            sel = [r for r in rows if r["receivers"] == receivers and r["link_gbps"] == gbps]
            bits = sum(r["bits_per_change"] for r in sel) / len(sel)
            ent = sum(r["entropy_buckets"] for r in sel)
            total = sum(r["buckets"] for r in sel)

            def cost(r):
                wire = 8.0 * r["bytes"] / (gbps * 1e9) * 1e3
                decode = r["cpu_apply_ms_measured"] if receivers == "cpu" else r["gpu_entropy_walk_ms_modelled"]
                return wire + decode

            with_link = sum(cost(r) for r in sel) / len(sel)
            without = sum(cost(base[r["step"]]) for r in sel) / len(sel)
            print("| %s | %g Gb/s | %.2f | %d of %d | %.3f ms | %.3f ms | %.2fx |" % (
                receivers, gbps, bits, ent, total, with_link, without, without / with_link))
    # The CPU walk's cost as measured here, against the constant the CPU rows use: the one-core apply of the
    # patches where entropy took every bucket (GPU receivers over the slowest link) beside the no-link ones.
    slowest = min(r["link_gbps"] for r in rows if r["receivers"] == "gpu")
    alls = [r for r in rows if r["receivers"] == "gpu" and r["link_gbps"] == slowest and r["entropy_buckets"] == r["buckets"]]
    if alls:
        extra = sum(r["cpu_apply_ms_measured"] - base[r["step"]]["cpu_apply_ms_measured"] for r in alls) / len(alls)
        print()
        print("CPU apply (one core, base known), entropy in every bucket vs auto with no link stated, mean of %d steps: "
              "+%.3f ms a version, %.2f ns an element (link_cost::cpu_receiver: %.2f ns)" % (
                  len(alls), extra, extra * 1e6 / doc["numel"], doc["cpu_receiver_s_per_element"] * 1e9))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/results/auto-link.json")
