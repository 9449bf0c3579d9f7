#!/usr/bin/env python3
"""One markdown row per nccl_sync_bench JSON file (bench/results/nccl-*.md).

    python3 bench/nccl/summarize.py results/*.json
"""
import json
import os
import sys


def main(paths):
    print("| file | GPUs | density | encoder | bucket | worker apply | payload MB | bits/change | encode ms (alone) | sparse ms | dense ms | speedup | bit-identical |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for p in paths:
        with open(p) as f:
            r = json.load(f)
        later = r["versions"][1:] or r["versions"]
        payload = sorted(v["payload_bytes"] for v in later)[len(later) // 2]
        changed = sorted(v["changed"] for v in later)[len(later) // 2]
        print(f"| {os.path.basename(p)} | {r['gpus']} x {r['card']} | {100 * r['density']:.1f}% | {r['encoder']}/{r['values']} | "
              f"{r['bucket_bytes'] >> 20} MiB | {r['apply']} | {payload / 1e6:.1f} | {8 * payload / changed:.2f} | "
              f"{r['median_encode_ms']:.2f} ({r.get('encode_alone_ms', 0):.2f}) | {r['median_sparse_ms']:.2f} | {r['median_dense_ms']:.2f} | "
              f"{r['speedup']:.2f}x | {'yes' if r['all_bit_identical'] else 'NO'} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
