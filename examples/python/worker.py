"""A rollout worker receiving weights from trainer.py into its own numpy arrays, verified, in place.

    python worker.py [--port 29556] [--key-file sparsesync-example.key]
"""

import argparse
import os
import time

import numpy as np

import sparsesync as ss

p = argparse.ArgumentParser()
p.add_argument("--host", default="127.0.0.1")
p.add_argument("--port", type=int, default=29556)
p.add_argument("--key-file", default="sparsesync-example.key")
args = p.parse_args()

# The same layout as the trainer's (a real worker builds it from its own model's named parameters).
weights = {f"layer{i}.{kind}": np.zeros((1024, 1024), np.uint16) for i in range(4) for kind in ("attn", "mlp")}
layout = ss.Layout(weights)
for _ in range(300):  # the trainer writes the key file when it starts
    if os.path.exists(args.key_file):
        break
    time.sleep(0.1)

with ss.Subscriber(layout, weights, args.key_file, host=args.host, port=args.port) as sub:
    for r in sub:  # each version is applied into `weights` before the loop body runs
        ok = ss.checksum(layout, weights) == r["checksum"]
        print(f"worker: version {r['version']} ({'full' if r['full'] else 'patch'}): {r['changed']} changed, "
              f"{r['payload_bytes']} bytes in {r['ms']:.0f} ms, checksum {r['checksum']:016x} {'OK' if ok else 'MISMATCH'}",
              flush=True)
print("worker: the trainer closed the stream")
