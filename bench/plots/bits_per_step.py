#!/usr/bin/env python3
"""Bits per changed element, step by step, on the real RL update stream: sparsesync's encoders beside the
information floors and the formats the field ships. Reads bench/results/entropy-cpu.json (written by
bench/cpu/codec_bench through bench/cpu/summarize_entropy.py) and writes docs/img/bits-per-step.png.

    pip install matplotlib && python3 bench/plots/bits_per_step.py [RESULTS_JSON] [OUT_PNG]

The published formats are drawn at their per-change cost: vLLM's sparse_nccl and SparseRL-Sync send an int32
index and a BF16 value (48 bits); NeMo-RL's sparse refit ~12.6 bits (derived from its published figures, see
../shared/reference/anchors.md); the PULSE-style format and zstd -19 of NEW XOR BASE are measured per step by
the bench itself.
"""

import json
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

root = pathlib.Path(__file__).resolve().parents[2]
src = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else root / "bench/results/entropy-cpu.json"
out = pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else root / "docs/img/bits-per-step.png"

data = json.loads(src.read_text())
steps = data["real_stream"]["steps"]
x = [s["step"] for s in steps]


def series(encoder, values="ulp"):
    return [next(e["bits_per_change"] for e in s["encoders"] if e["encoder"] == encoder and e["values"] == values) for s in steps]


fig, ax = plt.subplots(figsize=(9, 6.4), dpi=120)
ax.plot(x, series("entropy"), "o-", color="tab:red", lw=2, label="sparsesync entropy (ulp)")
ax.plot(x, series("rice"), "s-", color="tab:orange", lw=1.5, label="sparsesync rice (ulp)")
ax.plot(x, [s["class_floor_bits_per_change"] for s in steps], "--", color="black", lw=1.5, label="floor, conditioned on the old value's exponent")
ax.plot(x, [s["iid_floor_bits_per_change"] for s in steps], ":", color="black", lw=1.5, label="floor, i.i.d. positions and values")
ax.plot(x, [s["zstd19_xor_bits_per_change"] for s in steps], "^-", color="tab:gray", lw=1, label="zstd -19 of NEW XOR BASE")
ax.plot(x, [s["pulse_style_bits_per_change"] for s in steps], "v-", color="tab:purple", lw=1, label="PULSE-style format")
ax.axhline(12.6, color="tab:green", lw=1.2, label="NeMo-RL sparse refit (~12.6, derived)")
ax.axhline(48, color="tab:blue", lw=1.2, label="vLLM sparse_nccl / SparseRL-Sync (int32 + bf16)")
ax.set_yscale("log")
ax.set_yticks([4, 6, 8, 12, 16, 24, 32, 48])
ax.get_yaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
ax.get_yaxis().set_minor_formatter(matplotlib.ticker.NullFormatter())
ax.set_xlabel(f"optimizer step of the real RL stream ({data['real_stream']['path']}, {steps[0]['numel'] / 1e6:.2f} M elements, BF16)")
ax.set_ylabel("bits per changed element (payload, headers included)")
ax.set_title("Bytes on the wire per changed weight: lower is better")
ax.grid(True, which="both", alpha=0.3)
ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False)
fig.tight_layout()
out.parent.mkdir(parents=True, exist_ok=True)
fig.savefig(out)
print(f"wrote {out}")
