#!/usr/bin/env python3
"""Turns the JSON of `codec_bench --density-sweep N` into bench/results/entropy-cpu.md: the entropy encoder's bits
per changed element next to the floors the bench computed and the other formats, and its CPU throughput."""
import datetime
import json
import sys

src = sys.argv[1] if len(sys.argv) > 1 else "bench/results/entropy-cpu.json"
machine = sys.argv[2] if len(sys.argv) > 2 else None
r = json.load(open(src))
when = datetime.datetime.fromtimestamp(r["timestamp_unix"], datetime.timezone.utc).strftime("%Y-%m-%d")


def enc(step, name, mode="ulp"):
    return next(e for e in step["encoders"] if e["encoder"] == name and e["values"] == mode)


def target(step):
    return 1.05 * step["class_floor_bits_per_change"] + 0.25


out = [f"# entropy encoder on the CPU ({when})", "",
       f"Machine: {machine or r['machine']['cpu']} ({r['machine']['hardware_threads']} hardware threads; one used). "
       "Command: `codec_bench --gen-elements 20000000 --gen-steps 2 --density-sweep 8000000` (JSON: entropy-cpu.json; "
       "this page: `python3 bench/cpu/summarize_entropy.py`).", "",
       "Bits per changed element. **patch** counts the whole patch (patch and bucket headers, segment and chunk tables, "
       "checksums); **data** only the chunk data, which is what an encoder controls (the framing is the same for every "
       "encoder and comes from the bucketing: ~1 bit per change on the small real model, whose many small tensors each "
       "get a bucket). Floors are computed by the bench from the two versions: **i.i.d.** = H(mask) + H(ULP distance); "
       "**class** = H(mask | class of the old value) + H(ULP distance), the class being the old value's exponent field "
       "(what `entropy` conditions on; the anchors' \"floor given each old value's exponent\"); **class+v** also "
       "conditions the distance on the class. Target = 1.05 x class + 0.25. All other formats in ulp mode except "
       "PULSE-style (its own format: zstd-1 over row/column deltas + raw BF16) and zstd -19 of the dense NEW XOR BASE.", ""]

cols = ("| step | density | i.i.d. | class | class+v | target | **entropy** patch | entropy data | rice patch | rice data | "
        "varint patch | auto patch | PULSE-style | zstd-19 xor |")
sep = "|" + "---|" * 14


def row(label, s):
    e, ri, v, a = enc(s, "entropy"), enc(s, "rice"), enc(s, "varint"), enc(s, "auto")
    pulse = f"{s['pulse_style_bits_per_change']:.2f}" if "pulse_style_bits_per_change" in s else "-"
    met = "ok" if e["bits_per_change"] <= target(s) else ("data ok" if e["chunk_data_bits_per_change"] <= target(s) else "over")
    return (f"| {label} | {100 * s['density']:.2f}% | {s['iid_floor_bits_per_change']:.2f} | {s['class_floor_bits_per_change']:.2f} | "
            f"{s['class_floor_values_given_class_bits_per_change']:.2f} | {target(s):.2f} | **{e['bits_per_change']:.2f}** ({met}) | "
            f"{e['chunk_data_bits_per_change']:.2f} | {ri['bits_per_change']:.2f} | {ri['chunk_data_bits_per_change']:.2f} | "
            f"{v['bits_per_change']:.2f} | {a['bits_per_change']:.2f} | {pulse} | {s['zstd19_xor_bits_per_change']:.2f} |")


if "real_stream" in r:
    steps = r["real_stream"]["steps"]
    out += [f"## Real stream {r['real_stream']['path']}, every step", "", cols, sep]
    out += [row(str(s["step"]), s) for s in steps]
    out.append("")
if "density_sweep" in r:
    d = r["density_sweep"]
    out += [f"## Generator, densities 0.3%..10% ({d['layout']}, {d['numel']:,} elements; step 3 at each learning rate)", "",
            cols.replace("| step |", "| lr |"), sep]
    out += [row(f"{s['lr']:g}", s) for s in d["steps"]]
    out.append("")
g = r["generator"]
out += [f"## Generator at scale ({g['layout']}, {g['numel']:,} elements, lr {g['lr']})", "", cols, sep]
out += [row(str(s["step"]), s) for s in g["steps"]]
out.append("")

out += ["## CPU throughput, one core (GB/s of BF16 model: model bytes / time)", "",
        "encode = encode_patch from two model versions (diff, checksums, encoding); apply = apply_patch with every check "
        "(base and target checksums). The same runs as the sizes above.", "",
        "| input | entropy encode | entropy apply | rice encode | rice apply | auto encode | auto apply |", "|---|---|---|---|---|---|---|"]


def tp(label, s):
    e, ri, a = enc(s, "entropy"), enc(s, "rice"), enc(s, "auto")
    return (f"| {label} | {e['encode_gbps_of_weights']:.2f} | {e['apply_verify_gbps_of_weights']:.2f} | {ri['encode_gbps_of_weights']:.2f} | "
            f"{ri['apply_verify_gbps_of_weights']:.2f} | {a['encode_gbps_of_weights']:.2f} | {a['apply_verify_gbps_of_weights']:.2f} |")


if "real_stream" in r:
    for s in r["real_stream"]["steps"]:
        if s["step"] in (1, 12, 24):
            out.append(tp(f"real step {s['step']}", s))
if "density_sweep" in r:
    for s in r["density_sweep"]["steps"]:
        out.append(tp(f"generator lr {s['lr']:g} ({100 * s['density']:.2f}%)", s))
for s in g["steps"]:
    out.append(tp(f"generator at scale, step {s['step']}", s))
out.append("")
print("\n".join(out))
