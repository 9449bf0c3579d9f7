#!/usr/bin/env python3
"""Merges link_bench or gpu_link_bench results (per link rate: the trainer's JSON and the worker's JSON lines)
into bench/results/net-shaped-link[-gpu].json and .md."""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess

ROUNDS = {1: "sparse_pipelined", 2: "sparse_one_bucket", 3: "sparse_preencoded"}


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def source_revision():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        rev = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout.strip()
        return rev + (" + uncommitted changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def ms(s):
    return f"{s * 1e3:.1f}"


def worker_summary(path):
    """Median seconds from a version's first byte to its commit on the worker, per sparse round."""
    per_round = {}
    with open(path) as f:
        for line in f:
            row = json.loads(line)
            if row.get("mode") == "sync" and row.get("round") in ROUNDS:
                per_round.setdefault(ROUNDS[row["round"]], []).append(row["seconds"])
    return {k: statistics.median(v) for k, v in per_round.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--delay-ms", type=float, default=5.0)
    ap.add_argument("--load-at-start", type=float, default=None)
    ap.add_argument("--out-json")
    ap.add_argument("--out-md", required=True)
    ap.add_argument("--from-json", help="rewrite the .md from an earlier --out-json (no new measurement)")
    ap.add_argument("--kind", choices=["cpu", "gpu"], default="cpu", help="link_bench (host codec) or gpu_link_bench")
    ap.add_argument("--name", default="net-shaped-link", help="base name of the result files (for the .md's references)")
    ap.add_argument("--source", help="with --from-json: the source revision the binaries were built from (when the run's "
                                     "machine could not tell)")
    ap.add_argument("files", nargs="*", help="pairs: trainer JSON, worker JSON lines")
    a = ap.parse_args()
    if a.from_json:
        doc = json.load(open(a.from_json))
        if a.source:
            doc["machine"]["source"] = a.source
            json.dump(doc, open(a.from_json, "w"), indent=2)
        (write_md_gpu if doc.get("kind") == "gpu" else write_md)(doc, a.out_md)
        return
    runs = []
    for i in range(0, len(a.files), 2):
        r = json.load(open(a.files[i]))
        r["worker_median_first_byte_to_commit_seconds"] = worker_summary(a.files[i + 1])
        runs.append(r)
    machine = {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "load_average_at_start": a.load_at_start,
        "load_average_at_end": os.getloadavg()[0],
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "source": source_revision(),
    }
    link = {
        "topology": "two network namespaces, point-to-point over two TUN devices (MTU 64000)",
        "rate": "tc tbf on each TUN device's egress (both directions)",
        "delay": f"{a.delay_ms:g} ms each way by bench/net/delay_line.cpp (the kernel has no sch_netem)",
        "tcp": "tcp_rmem/tcp_wmem max 64 MiB and tcp_slow_start_after_idle=0 in both namespaces; asio_tcp with a pre-shared key "
               "(HMAC-SHA256 on every frame)",
    }
    if a.kind == "gpu":
        machine["gpus"] = gpu_names()
    doc = {"kind": a.kind, "name": a.name, "machine": machine, "link": link, "runs": runs}
    json.dump(doc, open(a.out_json, "w"), indent=2)
    (write_md_gpu if a.kind == "gpu" else write_md)(doc, a.out_md)


def gpu_names():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, check=True).stdout
        return [line.strip() for line in out.splitlines() if line.strip()]
    except (OSError, subprocess.CalledProcessError):
        return []


def slow_dense_notes(runs, where, why, ratios, sparse_size):
    """A note for each run whose emulated link carried dense BF16 well below its nominal rate."""
    notes = []
    for r in runs:
        g = r["summary"]["dense_goodput_gbit"]
        if g < 0.8 * r["rate_bits_per_second"] / 1e9:
            notes.append(f"* The emulated {r['label']} link carried dense BF16 at only {g:.2f} Gbit/s {where} ({why}), so the dense baseline "
                         f"there is slower than on a real link of that rate and {ratios} flattered by that factor. The sparse figures "
                         f"({sparse_size} per version) are not affected.")
    return notes


def first_and_slowest_rest(run):
    """The first measured sparse version's time, and the slowest of the others (pipelined)."""
    rows = sorted(run["sparse_pipelined"], key=lambda row: row["version"])
    first = rows[0]["seconds"]
    rest = max((row["seconds"] for row in rows[1:]), default=first)
    return first, rest


def write_md_gpu(doc, path):
    machine, link, runs = doc["machine"], doc["link"], doc["runs"]
    name = doc.get("name", "net-shaped-link-gpu")
    m, u = runs[0]["model"], runs[0]["update"]
    out = ["# Shaped link, GPU weights at both ends: sparse versions against dense BF16 and against the floor", ""]
    gpus = ", ".join(machine.get("gpus", [])) or "unknown"
    out.append(f"Machine: {gpus}; {machine['cpu']} ({machine['cores']} cores), Linux {machine['kernel']}. Trainer and worker each "
               f"on their own GPU (trainer: {runs[0].get('device', '?')}), in two network namespaces. Date: {machine['date']}; "
               f"source {machine['source']}.")
    out.append("")
    out.append(f"Model: GPT-2-shaped, {m['tensors']} tensors, {m['numel'] / 1e6:.1f} M BF16 parameters ({m['dense_bytes'] / 1e6:.1f} MB dense). "
               f"Update: `gen::adam_bf16_model`, AdamW lr {u['lr']:g}, {u['warmup_steps']} warm-up steps, then {u['versions']} versions, "
               f"each uploaded into the trainer's device weights before it is sent (where an optimizer step leaves them). "
               f"GPU codec: `cuda::frame_publisher` ({runs[0].get('encoder', '?')}, ULP values, buckets of "
               f"{runs[0]['bucket_bytes'] / 2**20:g} MiB) on `cuda::transport_frame_channel<asio_tcp_transport>`; the worker's "
               f"`cuda::frame_subscriber` verifies every bucket and the closing header, then writes (atomic commit). Dense: the "
               f"device weights copied to pinned host memory and sent in frames of {runs[0]['dense_frame_bytes'] / 2**20:g} MiB, "
               "copied into the worker's device weights.")
    out.append("")
    out.append(f"Link: {link['topology']}; {link['rate']}; {link['delay']}; {link['tcp']}. "
               f"Raw data: `{name}.json`. Reproduce: `sudo BENCH=gpu_link_bench bench/net/run_shaped.sh BUILD_DIR` "
               "(bench/README.md).")
    out.append("")
    out.append("Each time is the median over the versions, from the `publish()` call (dense: the first byte) until the worker's "
               "acknowledgement arrived: the version verified and written into the worker's GPU memory. Floor = payload bytes / link "
               "rate; target (issue 4): at most 1.15 x floor + 50 ms, and at 1 Gbit/s at least 50x faster than dense.")
    out.append("")
    out.append("| link | density | payload | floor | target | sparse, pipelined (GPU encode) | slowest after the first | first version | one bucket | worker busy | dense | dense goodput | dense / sparse | worker's model after the run |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        s, w = r["summary"], r["worker_median_first_byte_to_commit_seconds"]
        first, rest = first_and_slowest_rest(r)
        out.append(
            f"| {r['label']} | {100 * s['median_density']:.2f}% | {s['median_payload_bytes'] / 1e6:.2f} MB | {ms(s['median_floor_seconds'])} ms "
            f"| {ms(s['target_seconds'])} ms | {ms(s['median_seconds_sparse_pipelined'])} ms ({s['median_encode_seconds_sparse_pipelined'] * 1e3:.2f} ms) "
            f"| {ms(rest)} ms | {ms(first)} ms | {ms(s['median_seconds_sparse_one_bucket'])} ms "
            f"| {ms(w.get('sparse_pipelined', float('nan')))} ms | {ms(s['median_seconds_dense'])} ms "
            f"| {s['dense_goodput_gbit']:.2f} Gbit/s | {s['speedup_vs_dense_pipelined']:.1f}x "
            f"| {'bit-identical (whole-model checksum)' if s['bit_identical'] else '**differs**'} |")
    out.append("")
    out.append("\"Worker busy\" is the worker's own time from the arrival of a version's first frame to its commit (receive, copy to "
               "the GPU, verify, write). \"Worker's model after the run\": each worker connection hashes its whole device model on the host after the "
               "last version; the trainer compares it with its own last version (every version is also acknowledged with the "
               "checksum the GPU verified).")
    out.append("")
    out.append("## Reading")
    out.append("")
    for r in runs:
        s = r["summary"]
        verdict = lambda ok: "met" if ok else "**not met**"
        speed = s["speedup_vs_dense_pipelined"]
        first, rest = first_and_slowest_rest(r)
        line = (f"* **{r['label']}**: pipelined {ms(s['median_seconds_sparse_pipelined'])} ms per version (median) against a target of "
                f"{ms(s['target_seconds'])} ms: {verdict(s['meets_target_pipelined'])}; every version after the first "
                f"{'within it' if rest <= s['target_seconds'] else '**not** within it'} (slowest {ms(rest)} ms); the first sparse version "
                f"took {ms(first)} ms. Dense {ms(s['median_seconds_dense'])} ms: sparse is {speed:.1f}x faster")
        if r["rate_bits_per_second"] == 1e9:
            line += f" ({verdict(speed >= 50)} for the 50x target)"
        line += "."
        out.append(line)
    out.append("")
    out.append("Notes:")
    out.append("")
    out.append("* The first sparse version of a connection is slower on every path here (one bucket too) while the GPU encode "
               "inside it takes as long as later ones: the first use of each end's buffers (device scratch, pinned staging, the "
               "worker's frame arena) happens in it. This run does not break that time down further.")
    out += slow_dense_notes(runs, "on this machine", "the userspace delay line and the per-frame HMAC cap it",
                            "the ratio at this rate is", "2-3 MB")
    out.append("")
    open(path, "w").write("\n".join(out) + "\n")


def write_md(doc, path):
    machine, link, runs = doc["machine"], doc["link"], doc["runs"]
    m, u = runs[0]["model"], runs[0]["update"]
    out = ["# Shaped link: sparse versions against dense BF16 and against the floor", ""]
    out.append(f"Machine: {machine['cpu']} ({machine['cores']} cores, shared with other work; load average "
               f"{machine['load_average_at_start']} at the start, {machine['load_average_at_end']:.2f} at the end), Linux "
               f"{machine['kernel']}, no GPU: encode and apply run on the host codec, one thread each. Date: {machine['date']}; "
               f"source {machine['source']}.")
    out.append("")
    out.append(f"Model: GPT-2-shaped, {m['tensors']} tensors, {m['numel'] / 1e6:.1f} M BF16 parameters ({m['dense_bytes'] / 1e6:.1f} MB dense). "
               f"Update: `gen::adam_bf16_model`, AdamW lr {u['lr']:g}, {u['warmup_steps']} warm-up steps, then {u['versions']} versions; "
               f"each version is sent in all four ways below, over the same link, in the same run. Buckets of "
               f"{runs[0]['bucket_bytes'] / 2**20:g} MiB, dense frames of {runs[0]['dense_frame_bytes'] / 2**20:g} MiB.")
    out.append("")
    out.append(f"Link: {link['topology']}; {link['rate']}; {link['delay']}; {link['tcp']}. "
               f"Raw data: `net-shaped-link.json`. Reproduce: `sudo bench/net/run_shaped.sh BUILD_DIR`.")
    out.append("")
    out.append("Each time is the median over the versions, from the first byte handed to the transport (the `publish()` call) "
               "until the worker's acknowledgement arrived: the version verified and applied (dense: received and copied). "
               "**sparse, pipelined**: `sync::sender`, bucket *i* on the wire while *i+1* is encoded; **one bucket**: the whole "
               "patch encoded before its first byte leaves; **pre-encoded**: the same patch encoded beforehand (encode time in "
               "parentheses, not included), then sent with the session protocol to the same `sync::receiver`: what a trainer "
               "whose encoder takes ~ms (the GPU codec) would see on this link with this worker. Floor = payload bytes / link "
               "rate; target (issue 4): at most 1.15 x floor + 50 ms.")
    out.append("")
    out.append("| link | density | payload | floor | target | sparse, pipelined (encode; after encode) | one bucket | pre-encoded (encode apart) | worker busy, pre-encoded | dense | dense goodput | dense / sparse: pipelined, pre-encoded |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        s, w = r["summary"], r["worker_median_first_byte_to_commit_seconds"]
        out.append(
            f"| {r['label']} | {100 * s['median_density']:.2f}% | {s['median_payload_bytes'] / 1e6:.2f} MB | {ms(s['median_floor_seconds'])} ms "
            f"| {ms(s['target_seconds'])} ms | {ms(s['median_seconds_sparse_pipelined'])} ms ({ms(s['median_encode_seconds_sparse_pipelined'])}; "
            f"{ms(s['median_after_encode_seconds_sparse_pipelined'])}) | {ms(s['median_seconds_sparse_one_bucket'])} ms "
            f"| {ms(s['median_seconds_sparse_preencoded'])} ms ({ms(s['median_encode_only_seconds'])}) "
            f"| {ms(w.get('sparse_preencoded', float('nan')))} ms | {ms(s['median_seconds_dense'])} ms "
            f"| {s['dense_goodput_gbit']:.2f} Gbit/s | {s['speedup_vs_dense_pipelined']:.1f}x, {s['speedup_vs_dense_preencoded']:.1f}x |")
    out.append("")
    out.append("\"Worker busy\" is the worker's own time from a version's first byte to its commit (receive, verify, stage, write).")
    out.append("")
    out.append("Range over the versions of each run (min-max, ms), which shows how much the shared machine moves the figures:")
    out.append("")
    for r in runs:
        parts = []
        for key, name in (("sparse_pipelined", "pipelined"), ("sparse_one_bucket", "one bucket"), ("sparse_preencoded", "pre-encoded"), ("dense", "dense")):
            v = [row["seconds"] for row in r[key]]
            parts.append(f"{name} {ms(min(v))}-{ms(max(v))}")
        enc = [row["encode_seconds"] for row in r["sparse_pipelined"]]
        parts.append(f"encode inside publish() {ms(min(enc))}-{ms(max(enc))}")
        out.append(f"* {r['label']}: " + ", ".join(parts))
    out.append("")
    out.append("## Reading")
    out.append("")
    for r in runs:
        s, w = r["summary"], r["worker_median_first_byte_to_commit_seconds"]
        rtt = r.get("rtt_ms_nominal", 0) / 1e3
        verdict = lambda ok: "met" if ok else "**not met**"
        pre, busy = s["median_seconds_sparse_preencoded"], w.get("sparse_preencoded", float("nan"))
        enc, after = s["median_encode_seconds_sparse_pipelined"], s["median_after_encode_seconds_sparse_pipelined"]
        line = (f"* **{r['label']}** (target {ms(s['target_seconds'])} ms). Pipelined, with this CPU's encoder in the loop: "
                f"{ms(s['median_seconds_sparse_pipelined'])} ms, {verdict(s['meets_target_pipelined'])}. ")
        if enc > 0.5 * s["median_seconds_sparse_pipelined"]:
            line += f"The encoder on the trainer's CPU takes {ms(enc)} ms of it; "
        else:
            line += f"The encoder takes {ms(enc)} ms of it; "
        line += (f"{ms(after)} ms remain once it has finished (floor + RTT = {ms(s['median_floor_seconds'] + rtt)} ms). "
                 f"Pre-encoded: {ms(pre)} ms, {verdict(s['meets_target_preencoded'])}; ")
        if busy > 0.5 * pre:
            line += f"the worker's CPU apply ({ms(busy)} ms from first byte to commit) is most of it, not the link. "
        else:
            line += f"the worker is busy {ms(busy)} ms of it, the rest is the link (transfer and round trip). "
        gain = s["pipelining_gain_seconds"]
        line += (f"Streaming buckets instead of encode-then-send {'saves' if gain >= 0 else 'costs'} {ms(abs(gain))} ms per version. "
                 f"Dense: {ms(s['median_seconds_dense'])} ms ({s['dense_goodput_gbit']:.2f} Gbit/s); sparse is "
                 f"{s['speedup_vs_dense_pipelined']:.1f}x (pipelined) and {s['speedup_vs_dense_preencoded']:.1f}x (pre-encoded) faster.")
        out.append(line)
    out.append("")
    out.append("Notes:")
    out.append("")
    r0 = runs[0]
    changed = r0["summary"]["median_density"] * r0["model"]["numel"]
    busy = r0["worker_median_first_byte_to_commit_seconds"].get("sparse_preencoded", float("nan"))
    out.append("* The link part is close to its floor: once the encoder has finished, a pipelined version needs about one round "
               "trip plus the last bucket's transfer and apply. What is far from the floor is CPU work at both ends, one thread "
               "each: the host codec's encode on the trainer, and on the worker the apply of the scattered changes "
               f"(~{busy / changed * 1e9:.0f} ns per changed element in the {r0['label']} run, the changes scattered over a "
               f"{m['dense_bytes'] / 1e6:.0f} MB model). With the GPU codec (docs/GPU.md) both are GPU kernels taking milliseconds; "
               "this machine has no GPU, so that configuration is not measured here, and the targets are not shown to be met.")
    out += slow_dense_notes(runs, "on this machine", "the userspace delay line and the per-frame HMAC share 2 cores with both endpoints",
                            "the dense/sparse ratios at this rate are", "2 MB")
    out.append("* The first version of each run is slower on every path (new connections, first touch of the worker's buffers); the "
               "medians are over all versions.")
    out.append("")
    open(path, "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
