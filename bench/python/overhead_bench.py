#!/usr/bin/env python3
"""The Python layer's cost over the C++ engine it wraps: a Qwen2.5-7B-shaped BF16 model on a GPU published
through ss.Publisher(device="cuda:0") to an ss.Subscriber on another GPU (or the same one), 1% of the elements
moving by one BF16 step per version. For every version it records the wall time of the Python publish() call
and the C++ sender's own time for the same publish (the report's "ms", measured inside sync::sender::publish):
the difference is what the binding adds (layout ordering, DLPack imports of every tensor, stream ordering, the
report), in the same run on the same machine.

Versions alternate between the two ways a publish takes the tensors: "fresh" imports every tensor through
DLPack (what a publish of tensors at new memory costs), "reused" takes the previous publish's imports (the same
parameters published again, the RL loop's case). `--transport nccl` sends the frames GPU to GPU.

    python bench/python/overhead_bench.py [--versions 11] [--layers 28] [--transport tcp|nccl] [--json OUT.json]
Needs torch with CUDA and a build of sparsesync with GPU endpoints.
"""

import argparse
import json
import platform
import statistics
import tempfile
import threading
import time

import torch

import sparsesync as ss


def qwen7b_layout(layers):
    vocab, hidden, inter, kv = 152064, 3584, 18944, 512
    out = [("model.embed_tokens.weight", "bf16", (vocab, hidden))]
    for i in range(layers):
        p = f"model.layers.{i}."
        out += [(p + "self_attn.q_proj.weight", "bf16", (hidden, hidden)), (p + "self_attn.q_proj.bias", "bf16", (hidden,)),
                (p + "self_attn.k_proj.weight", "bf16", (kv, hidden)), (p + "self_attn.k_proj.bias", "bf16", (kv,)),
                (p + "self_attn.v_proj.weight", "bf16", (kv, hidden)), (p + "self_attn.v_proj.bias", "bf16", (kv,)),
                (p + "self_attn.o_proj.weight", "bf16", (hidden, hidden)), (p + "mlp.gate_proj.weight", "bf16", (inter, hidden)),
                (p + "mlp.up_proj.weight", "bf16", (inter, hidden)), (p + "mlp.down_proj.weight", "bf16", (hidden, inter)),
                (p + "input_layernorm.weight", "bf16", (hidden,)), (p + "post_attention_layernorm.weight", "bf16", (hidden,))]
    out += [("model.norm.weight", "bf16", (hidden,)), ("lm_head.weight", "bf16", (vocab, hidden))]
    return out


def step(tensors, density, seed):
    """About `density` of the elements move to the next or previous BF16 value (an RL optimizer step)."""
    g = torch.Generator(device=tensors[0].device).manual_seed(seed)
    for t in tensors:
        bits = t.view(torch.int16)
        r = torch.rand(t.shape, generator=g, device=t.device)
        bits.add_(((r < density / 2).to(torch.int16) - ((r > 1 - density / 2).to(torch.int16))))
        del r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--versions", type=int, default=11)
    ap.add_argument("--transport", choices=("tcp", "nccl"), default="tcp")
    ap.add_argument("--layers", type=int, default=28)
    ap.add_argument("--density", type=float, default=0.01)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    entries = qwen7b_layout(a.layers)
    layout = ss.Layout(entries)
    worker_dev = "cuda:1" if torch.cuda.device_count() > 1 else "cuda:0"
    torch.manual_seed(0)
    trainer = [(torch.randn(s, device="cuda:0") * 0.02).to(torch.bfloat16) for _, _, s in entries]
    worker = [torch.zeros(s, dtype=torch.bfloat16, device=worker_dev) for _, _, s in entries]
    key = tempfile.mktemp(suffix=".key")
    ss.generate_key_file(key)
    rows, failures = [], []
    with ss.Publisher(layout, key, device="cuda:0", transport=a.transport) as pub:
        def work():
            try:
                with ss.Subscriber(layout, worker, key, port=pub.port, transport=a.transport) as sub:
                    for _ in sub:
                        pass
            except Exception as e:
                failures.append(e)
        t = threading.Thread(target=work)
        t.start()
        pub.accept(timeout=120)
        for v in range(1, a.versions + 1):
            if v > 1:
                step(trainer, a.density, v)
            imports = "fresh" if v % 2 == 0 or v == 1 else "reused"
            if imports == "fresh":
                pub._reuse.forget()  # as if these tensors were at new memory
            torch.cuda.synchronize("cuda:0")
            start = time.perf_counter()
            r = pub.publish(v, trainer)
            wall = (time.perf_counter() - start) * 1e3
            rows.append({"version": v, "imports": imports, "python_ms": wall, "cpp_ms": r["ms"], "overhead_ms": wall - r["ms"],
                         "overhead_pct": 100 * (wall - r["ms"]) / r["ms"], "changed": r["changed"], "payload_bytes": r["payload_bytes"],
                         "acknowledged": r["acknowledged"]})
            print(json.dumps(rows[-1]), flush=True)
        pub.close()
        t.join()
    assert not failures, failures
    torch.cuda.synchronize()
    identical = all(torch.equal(x.view(torch.int16).to(worker_dev), y.view(torch.int16)) for x, y in zip(trainer, worker))
    later = rows[1:]

    def medians(rs):
        return {"versions_counted": len(rs), "median_python_ms": statistics.median(r["python_ms"] for r in rs),
                "median_cpp_ms": statistics.median(r["cpp_ms"] for r in rs),
                "median_overhead_ms": statistics.median(r["overhead_ms"] for r in rs),
                "median_overhead_pct": statistics.median(r["overhead_pct"] for r in rs)}
    summary = {"bench": "python-overhead", "machine": platform.node(), "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
               "torch": torch.__version__, "transport": a.transport, "numel": layout.numel, "tensors": len(entries), "density": a.density,
               "worker_device": worker_dev, "bit_identical": identical,
               "fresh_imports": medians([r for r in later if r["imports"] == "fresh"]),
               "reused_imports": medians([r for r in later if r["imports"] == "reused"]), "versions": rows}
    print(json.dumps({k: v for k, v in summary.items() if k != "versions"}, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
