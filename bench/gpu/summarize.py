#!/usr/bin/env python3
"""Markdown tables from gpu_bench (and torch_baseline.py) JSON lines, for bench/results/gpu-*.md.

    python3 bench/gpu/summarize.py gpu_bench.jsonl [torch.jsonl ...] > tables.md

Every figure is copied from the JSON records; nothing is computed but ratios of them.
"""
import json
import sys


def load(paths):
    rows = []
    for p in paths:
        with open(p) as f:
            for line in f:
                line = line.strip()
                if line:
                    rows.append(json.loads(line))
    return rows


def pct(x):
    return f"{100 * x:.2f}%" if x < 0.1 else f"{100 * x:.1f}%"


def main(paths):
    rows = load(paths)
    meta = next((r for r in rows if r["kind"] == "meta"), {})
    memcpy = {r["n"]: r for r in rows if r["kind"] == "memcpy"}
    sizes = sorted({r["n"] for r in rows if "n" in r})
    print(f"Card: {meta.get('card', '?')} ({meta.get('sms', '?')} SMs), gpu_bench run of {meta.get('date', '?')}.\n")

    print("## Ceilings and baselines\n")
    print("| elements | density | what | ms | G el/s | GB/s | share of memcpy |")
    print("|---|---|---|---|---|---|---|")
    for n in sizes:
        if n in memcpy:
            m = memcpy[n]
            print(f"| {n:.0e} | - | device memcpy (read + write) | {m['ms']:.3f} | - | {m['gbs']:.0f} | 100% |")
        for r in rows:
            if r.get("n") != n:
                continue
            if r["kind"] == "compare":
                print(f"| {n:.0e} | {pct(r['density'])} | read-compare floor | {r['ms']:.3f} | {r['gels']:.0f} | {r['gbs']:.0f} | {pct(r['share_memcpy'])} |")
            elif r["kind"] == "cub_select":
                print(f"| {n:.0e} | {pct(r['density'])} | cub::DeviceSelect::If + gather | {r['ms']:.3f} | {r['gels']:.0f} | {r['gbs']:.0f} | {pct(r['share_memcpy'])} |")
            elif r["kind"] == "torch_encode":
                share = (2 * 2 * n / r["ms"] / 1e6) / memcpy[n]["gbs"] if n in memcpy else 0
                print(f"| {n:.0e} | {pct(r['density'])} | PyTorch nonzero(a != b) + gather | {r['ms']:.3f} | {r['gels']:.0f} | {4 * n / r['ms'] / 1e6:.0f} | {pct(share)} |")
            elif r["kind"] == "torch_apply":
                print(f"| {n:.0e} | {pct(r['density'])} | PyTorch index_put_ of decoded int64 positions ({r['changed']:.3g} changes, no verification) | {r['ms']:.3f} | {r['g_changes_per_s']:.1f} G changes/s | - | - |")

    print("\n## Encode\n")
    print("GB/s = bytes of both BF16 copies read per second. Scratch = temporary storage the plan keeps (not the output frame).\n")
    print("| elements | encoder/values | density | base | ms | G el/s | share of memcpy | bits/change | frame MB | scratch MB (x frame) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        for r in rows:
            if r["kind"] == "encode" and r["n"] == n:
                base = "known" if r["known_base"] else "hashed"
                print(f"| {n:.0e} | {r['encoder']} | {pct(r['density'])} | {base} | {r['ms']:.3f} | {r['gels']:.0f} | {pct(r['share_memcpy'])} | "
                      f"{r['bits_per_change']:.1f} | {r['frame_bytes'] / 1e6:.1f} | {r['scratch_bytes'] / 1e6:.0f} ({r['scratch_over_frame']:.2f}x) |")

    print("\n## Verified apply in place\n")
    print("| elements | encoder/values | density | base | changes | ms | G changes/s | scratch MB |")
    print("|---|---|---|---|---|---|---|---|")
    for n in sizes:
        for r in rows:
            if r["kind"] == "apply" and r["n"] == n:
                base = "known" if r["known_base"] else "hashed"
                ok = "" if r.get("ok", 1) else " (FAILED)"
                print(f"| {n:.0e} | {r['encoder']} | {pct(r['density'])} | {base} | {r['changed']:.3g} | {r['ms']:.3f} | {r['g_changes_per_s']:.1f}{ok} | {r['scratch_bytes'] / 1e6:.0f} |")

    sweep = [r for r in rows if r["kind"] == "detect"]
    if sweep:
        print("\n## Detect-pass tuning sweep (resolve + detect only)\n")
        print("| elements | density | policy | base | ms | G el/s | share of memcpy |")
        print("|---|---|---|---|---|---|---|")
        for r in sweep:
            base = "hashed" if r["hash_base"] else "known"
            print(f"| {r['n']:.0e} | {pct(r['density'])} | {r['policy']} | {base} | {r['ms']:.3f} | {r['gels']:.0f} | {pct(r['share_memcpy'])} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
