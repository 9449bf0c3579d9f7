#!/usr/bin/env python3
"""Plain-PyTorch baseline of the GPU benchmark (run on the GPU machine, beside gpu_bench).

encode: positions = torch.nonzero(a != b).squeeze(1); values = b[positions]        (int64 positions)
apply:  model.index_put_((positions,), values)                                     (already-decoded input)
Same sizes and densities as gpu_bench; BF16 tensors; CUDA events, median of --reps runs after a warm-up.
Changes: at random positions with the requested density, +-1 ULP in bit space (the distribution barely
matters to these kernels). Writes JSON lines (--json) and prints a markdown table.
"""
import argparse
import json
import statistics
import time

import torch


def timed(fn, reps):
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1e8,1e9,3e9,7e9")
    ap.add_argument("--densities", default="0.003,0.01,0.03,0.1")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    dev = torch.device("cuda")
    card = torch.cuda.get_device_name(0)
    out = open(args.json, "w") if args.json else None
    print(f"# PyTorch {torch.__version__} baseline on {card}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("\n| elements | density | what | ms | G el/s | detail |\n|---|---|---|---|---|---|")
    for sz in [float(x) for x in args.sizes.split(",")]:
        n = int(sz)
        free, _ = torch.cuda.mem_get_info()
        if free < 5 * n + (8 << 30):
            print(f"| {sz:.3g} | - | skipped: {free / 2**30:.1f} GiB free | | | |")
            continue
        torch.manual_seed(0)
        piece = 1 << 28  # generate in pieces: a 7B float32 temporary alone would take 28 GB
        a = torch.empty(n, device=dev, dtype=torch.bfloat16)
        for at in range(0, n, piece):
            m = min(piece, n - at)
            a[at:at + m] = (torch.randn(m, device=dev, dtype=torch.float32) * 0.02).to(torch.bfloat16)
        reps = max(3, args.reps - 2) if n >= 3_000_000_000 else args.reps
        for d in [float(x) for x in args.densities.split(",")]:
            bits = a.view(torch.int16).clone()
            for at in range(0, n, piece):
                m = min(piece, n - at)
                seg = bits[at:at + m]
                mask = torch.rand(m, device=dev) < d
                step = torch.where(torch.rand(m, device=dev) < 0.5, 1, -1).to(torch.int16)
                bits[at:at + m] = torch.where(mask, seg + step, seg)
            del mask, step, seg
            b = bits.view(torch.bfloat16)
            changed = 0  # counted in pieces: count_nonzero over 7B elements allocates int64 per element
            for at in range(0, n, piece):
                m = min(piece, n - at)
                changed += int(torch.count_nonzero(a.view(torch.int16)[at:at + m] != b.view(torch.int16)[at:at + m]))

            def encode():
                pos = torch.nonzero(a.view(torch.int16) != b.view(torch.int16)).squeeze(1)
                return pos, b[pos]

            t_enc = timed(encode, reps)
            pos, vals = encode()
            model = a.clone()
            t_app = timed(lambda: model.index_put_((pos,), vals), reps)
            ok = bool(torch.equal(model.view(torch.int16), b.view(torch.int16)))
            rows = [("torch encode nonzero(a != b) + gather", t_enc, n / t_enc / 1e6, "int64 positions"),
                    ("torch apply index_put_", t_app, changed / t_app / 1e6, f"G changes/s; {'ok' if ok else 'MISMATCH'}")]
            for what, ms, g, det in rows:
                print(f"| {sz:.3g} | {100 * changed / n:.2f}% | {what} | {ms:.3f} | {g:.1f} | {det} |")
            if out:
                out.write(json.dumps({"card": card, "kind": "torch_encode", "n": n, "density": changed / n, "ms": t_enc,
                                      "gels": n / t_enc / 1e6}) + "\n")
                out.write(json.dumps({"card": card, "kind": "torch_apply", "n": n, "density": changed / n, "changed": changed,
                                      "ms": t_app, "g_changes_per_s": changed / t_app / 1e6, "ok": ok}) + "\n")
                out.flush()
            del pos, vals, model, b, bits
            torch.cuda.empty_cache()
        del a
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
