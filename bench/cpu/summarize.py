#!/usr/bin/env python3
"""Turns bench/results/cpu-codec.json into the markdown table of bench/results/cpu-codec.md."""
import datetime
import json
import sys

src = sys.argv[1] if len(sys.argv) > 1 else "bench/results/cpu-codec.json"
r = json.load(open(src))
when = datetime.datetime.fromtimestamp(r["timestamp_unix"], datetime.timezone.utc).strftime("%Y-%m-%d")
out = [f"# CPU codec benchmark ({when})", "",
       f"Machine: {r['machine']['cpu']}, {r['machine']['hardware_threads']} hardware threads; one thread used. "
       "Command: `./build/bench/codec_bench --gen-elements 100000000 --gen-steps 3` (JSON: cpu-codec.json). "
       "Bits per changed element count the whole patch (headers, tables, checksums); ratio = dense BF16 bytes / patch bytes.",
       ""]


def table(step, title):
    out.append(f"## {title}")
    out.append("")
    line = (f"{step['changed']:,} of {step['numel']:,} elements changed ({100 * step['density']:.2f}%); "
            f"{100 * step['share_within_1_ulp']:.1f}% within 1 ULP; i.i.d. floor {step['iid_floor_bits_per_change']:.2f} bits/change")
    if "pulse_style_bits_per_change" in step:
        line += f"; PULSE-style (zstd-1 over row/col deltas + BF16 values) {step['pulse_style_bits_per_change']:.2f} bits/change"
    out.append(line + ".")
    out.append("")
    out.append("| encoder | values | bits/change | ratio vs dense | encode GB/s | apply+verify GB/s |")
    out.append("|---|---|---|---|---|---|")
    for e in step["encoders"]:
        out.append(f"| {e['encoder']} | {e['values']} | {e['bits_per_change']:.2f} | {e['ratio_vs_dense']:.1f}x | "
                   f"{e['encode_gbps_of_weights']:.2f} | {e['apply_verify_gbps_of_weights']:.2f} |")
    out.append("")


if "real_stream" in r:
    steps = r["real_stream"]["steps"]
    table(steps[-1], f"Real stream {r['real_stream']['path']}, step {steps[-1]['step']}")
    out.append("All 24 steps, auto/ulp bits per change: " +
               ", ".join(f"{s['step']}: {next(e for e in s['encoders'] if e['encoder'] == 'auto' and e['values'] == 'ulp')['bits_per_change']:.2f}"
                         for s in steps) + ".")
    out.append("")
g = r["generator"]
for s in g["steps"]:
    table(s, f"Generator ({g['layout']}, {g['numel']:,} elements, lr {g['lr']}), step {s['step']}")
out.append("GB/s are of dense weights (model bytes / time). The machine was shared with concurrent compiles while this ran, "
           "so throughputs are lower bounds; sizes and bits are exact.")
print("\n".join(out))
