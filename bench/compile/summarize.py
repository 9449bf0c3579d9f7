#!/usr/bin/env python3
"""Sums the CPU times that cpu_time_launcher.sh recorded, per build target and per translation unit.

usage: summarize.py CPU_LOG [--json OUT.json] [--top N]
Each log line is "user_s sys_s max_rss_kb object_path"; the target is read from the object path
(.../CMakeFiles/<target>.dir/...). Later lines for the same object replace earlier ones (a rebuild).
"""
import argparse
import json
import re
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--json")
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    tus = {}
    for line in open(a.log):
        parts = line.split(maxsplit=3)
        if len(parts) != 4:
            continue
        user, sys_, rss, obj = float(parts[0]), float(parts[1]), int(parts[2]), parts[3].strip()
        tus[obj] = {"cpu_s": round(user + sys_, 2), "max_rss_mb": round(rss / 1024, 1)}
    targets = {}
    for obj, t in tus.items():
        m = re.search(r"CMakeFiles/([^/]+)\.dir/", obj)
        name = m.group(1) if m else "?"
        e = targets.setdefault(name, {"cpu_s": 0.0, "tus": 0, "largest_tu_cpu_s": 0.0})
        e["cpu_s"] = round(e["cpu_s"] + t["cpu_s"], 2)
        e["tus"] += 1
        e["largest_tu_cpu_s"] = max(e["largest_tu_cpu_s"], t["cpu_s"])
    total = round(sum(t["cpu_s"] for t in tus.values()), 1)
    print(f"total compile CPU time: {total} s over {len(tus)} translation units")
    print(f"{'target':40s} {'cpu_s':>8s} {'tus':>4s} {'largest':>8s}")
    for name, e in sorted(targets.items(), key=lambda kv: -kv[1]["cpu_s"]):
        print(f"{name:40s} {e['cpu_s']:8.1f} {e['tus']:4d} {e['largest_tu_cpu_s']:8.1f}")
    print(f"\nlargest translation units:")
    for obj, t in sorted(tus.items(), key=lambda kv: -kv[1]["cpu_s"])[: a.top]:
        print(f"{t['cpu_s']:8.1f} s {t['max_rss_mb']:8.0f} MB  {re.sub(r'^.*?CMakeFiles/', '', obj)}")
    if a.json:
        json.dump({"total_cpu_s": total, "targets": targets, "tus": tus}, open(a.json, "w"), indent=1, sort_keys=True)


if __name__ == "__main__":
    sys.exit(main())
