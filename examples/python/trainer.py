"""A trainer publishing its weights to rollout workers over TCP (run worker.py beside it).

Weights are numpy arrays of bf16 bit patterns (uint16); each "step" nudges 1% of them by an ulp or two, like
an RL optimizer step at a small learning rate. Only the changed elements travel.

    python trainer.py [--port 29556] [--key-file sparsesync-example.key] [--workers 1] [--steps 5]
"""

import argparse
import os

import numpy as np

import sparsesync as ss

p = argparse.ArgumentParser()
p.add_argument("--port", type=int, default=29556)
p.add_argument("--key-file", default="sparsesync-example.key")
p.add_argument("--workers", type=int, default=1)
p.add_argument("--steps", type=int, default=5)
args = p.parse_args()

rng = np.random.default_rng(0)
weights = {f"layer{i}.{kind}": rng.integers(0x3C00, 0x3F80, size=(1024, 1024), dtype=np.uint16)
           for i in range(4) for kind in ("attn", "mlp")}
layout = ss.Layout(weights)  # uint16 arrays -> bf16 tensors
if not os.path.exists(args.key_file):
    ss.generate_key_file(args.key_file)  # the workers read the same file

with ss.Publisher(layout, args.key_file, port=args.port) as pub:
    print(f"trainer: {len(layout)} tensors, {layout.numel / 1e6:.1f} M bf16 weights, port {pub.port}", flush=True)
    for _ in range(args.workers):
        pub.accept(timeout=60)
    for version in range(1, args.steps + 2):  # version 1: the initial weights (a full transfer)
        if version > 1:
            for w in weights.values():
                idx = rng.choice(w.size, size=w.size // 100, replace=False)
                w.reshape(-1)[idx] += rng.integers(1, 3, size=idx.size, dtype=np.uint16)
        r = pub.publish(version, weights)
        bits = f"{r['bits_per_changed']:.1f}" if r["bits_per_changed"] else "-"
        print(f"trainer: version {version}: {r['changed']} changed, {r['payload_bytes']} bytes ({bits} bits/change), "
              f"{r['acknowledged']} acknowledged in {r['ms']:.0f} ms, checksum {r['target_checksum']:016x}", flush=True)
