#!/usr/bin/env python3
"""The tail of each version after the trainer's last frame, from engine_nccl_bench's timelines (--json rows).

For every version row (versions >= --from): the version time, when the last frame was emitted, and after it (ms):
the trainer's encode end, the worker's last frame received, its verify finished, the commit's length, the settle.
--medians: first each file's summary (median version) and dense-broadcast rows, and their ratio (what call scripts
printed with a Python snippet of their own before session 24).
--hops: also each version's last three frames hop by hop (timelines from session 25 on keep each event's last six
times): emitted by the encoder, send enqueued, receive posted by worker 0, landed, handed to the verify; and the
ack's path (commit end, ack sent, received by the trainer, settle begun).

usage: tail_summary.py FILE.jsonl [FILE.jsonl ...] [--from 3] [--medians] [--hops]
"""
import argparse
import json
import os

ap = argparse.ArgumentParser()
ap.add_argument("files", nargs="+")
ap.add_argument("--from", dest="first", type=int, default=3)
ap.add_argument("--medians", action="store_true")
ap.add_argument("--hops", action="store_true")
a = ap.parse_args()
if a.medians:
    for f in a.files:
        version, dense = {}, None
        for line in open(f):
            r = json.loads(line)
            if r.get("row", "").endswith("summary") and "median_version_ms" in r:
                version[(r.get("commit"), r.get("workers"))] = r["median_version_ms"]
            elif "dense" in r.get("row", "") and "median_ms" in r:
                dense = r["median_ms"]
        for (commit, workers), ms in version.items():
            ratio = " = %.3fx" % (dense / ms) if dense else ""
            print("%-22s %s, %s worker(s): %.3f ms against dense %s ms%s" % (os.path.basename(f)[:22], commit, workers, ms, dense, ratio))


def version_rows(f):
    """The version rows of one file from --from on, with their timelines."""
    for line in open(f):
        r = json.loads(line)
        if r.get("row") == "engine_nccl_version" and r["version"] >= a.first:
            yield r, r["timeline_ms"]


print("%-22s %3s %8s %9s %8s %9s %8s %7s %8s" % ("file", "v", "version", "emit_last", "enc_end", "recv_last", "verified", "commit", "settled"))
for f in a.files:
    for r, t in version_rows(f):
        e = t["trainer_frame_emitted"][1]
        print("%-22s %3d %8.3f %9.3f %+8.3f %+9.3f %+8.3f %7.3f %8.3f" % (
            os.path.basename(f)[:22], r["version"], r["version_ms"], e, t["trainer_encode_end"][0] - e,
            t["worker0_frame_received"][1] - e, t["worker0_finish_end"][0] - e,
            t["worker0_commit_end"][0] - t["worker0_commit_begin"][0], t["trainer_settle_end"][0]))

if a.hops:
    hops = [("emitted", "trainer_frame_emitted"), ("send", "trainer_send_device_begin"), ("posted", "worker0_receive_posted"),
            ("landed", "worker0_frame_received"), ("handed", "worker0_added")]
    for f in a.files:
        for r, t in version_rows(f):
            if len(t.get("trainer_frame_emitted", [])) < 4:
                print("%s: no per-event times (a timeline from before session 25)" % os.path.basename(f))
                break
            print("%s v%d, last three frames (ms since publish()):" % (os.path.basename(f)[:22], r["version"]))
            for name, key in hops:
                print("  %-8s %s" % (name, "  ".join("%8.3f" % x for x in t[key][3][-3:])))
            print("  ack: commit end %.3f, sent %.3f, trainer got it %.3f, settle %.3f; closing header sent %.3f, worker messages %s" % (
                t["worker0_commit_end"][0], t["worker0_message_sent"][1], t["trainer_message_received"][1], t["trainer_settle_begin"][0],
                t["trainer_message_sent"][1], " ".join("%.3f" % x for x in t["worker0_message_received"][3][-3:])))
