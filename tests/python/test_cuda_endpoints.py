"""Publisher / Subscriber with weights in CUDA memory (torch tensors): the trainer encodes on its GPU, each worker
verifies and writes on its own GPU, in place. Needs a build with nvcc, a visible GPU and torch; the checks that
need no GPU (clear errors) run everywhere the package has GPU endpoints."""

import pathlib
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import sparsesync as ss
from sparsesync import _core

pytestmark = pytest.mark.skipif(not (_core.has_tcp and ss.HAS_CUDA), reason="built without GPU endpoints (no nvcc when built) or TCP")

gpu_count = _core.cuda_device_count() if ss.HAS_CUDA else 0
try:
    import torch
except ImportError:  # the CI machines have no torch: the GPU cases skip there anyway
    torch = None

needs_gpu = pytest.mark.skipif(gpu_count == 0 or torch is None or not torch.cuda.is_available(),
                               reason=f"needs a CUDA GPU and torch (GPUs visible: {gpu_count}, torch: {torch is not None})")

ENTRIES = [("embed", "bf16", (512, 256)), ("norm", "f32", (256,)), ("proj", "bf16", (256, 384)), ("head", "f16", (96, 256))]
TORCH_DTYPE = {"bf16": "bfloat16", "f32": "float32", "f16": "float16"}


def test_no_visible_gpu_is_a_clear_error(tmp_path):
    if gpu_count:
        pytest.skip("a GPU is visible")
    ss.generate_key_file(tmp_path / "k")
    with pytest.raises(ss.InvalidArgument, match="no CUDA device is visible"):
        ss.Publisher([("w", "bf16", (8,))], tmp_path / "k", device="cuda")


def test_device_spec_is_checked(tmp_path):
    ss.generate_key_file(tmp_path / "k")
    with pytest.raises(ss.InvalidArgument, match="device"):
        ss.Publisher([("w", "bf16", (8,))], tmp_path / "k", device="tpu:0")
    with pytest.raises(ss.InvalidArgument, match="snapshot"):
        ss.Publisher([("w", "bf16", (8,))], tmp_path / "k", snapshot="host_pinned")  # a host publisher


def _model(device, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    out = []
    for _, dt, shape in ENTRIES:
        w = torch.randn(shape, generator=g).to(getattr(torch, TORCH_DTYPE[dt]))
        out.append(w.to(device).contiguous())
    return out


def _step(model, seed):
    """Adam-like: about 1% of the elements move to a neighbouring representable value."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    out = []
    for w in model:
        mask = (torch.rand(w.shape, generator=g) < 0.01).to(w.device)
        moved = (w.float() * (1 + 2 ** -7)).to(w.dtype)
        out.append(torch.where(mask, moved, w).contiguous())
    return out


def _bits(t):
    return t.view(torch.int16 if t.element_size() == 2 else torch.int32)


def _run(tmp_path, worker_device, versions=5, commit="atomic", snapshot="device", link="tcp", encoder="auto"):
    key = tmp_path / "sync.key"
    if not key.exists():
        ss.generate_key_file(key)
    layout = ss.Layout(ENTRIES)
    trainer = _model("cuda:0")
    worker = [torch.zeros_like(t, device=worker_device) for t in trainer]
    pointers = [t.data_ptr() for t in worker]
    reports, failures = [], []
    with ss.Publisher(layout, key, device="cuda:0", snapshot=snapshot, transport=link, encoder=encoder) as pub:

        def work():
            try:
                with ss.Subscriber(layout, worker, key, port=pub.port, commit=commit, transport=link) as sub:
                    for r in sub:
                        torch.cuda.current_stream(worker[0].device).synchronize()
                        r["equal"] = all(torch.equal(_bits(a.to(worker_device)), _bits(b)) for a, b in zip(expected[r["version"]], worker))
                        reports.append(r)
            except Exception as e:  # reported to the test's thread
                failures.append(e)

        expected = {}
        thread = threading.Thread(target=work)
        thread.start()
        pub.accept(timeout=60)
        assert pub.wait_for_receivers(1, timeout=60)
        published = []
        for v in range(1, versions + 1):
            if v > 1:
                trainer = _step(trainer, v)
            expected[v] = [t.clone() for t in trainer]
            r = pub.publish(v, trainer)
            assert r["acknowledged"] == 1, r
            published.append(r)
        status = pub.receivers()
        pub.close()
        thread.join(120)
    assert not failures, failures
    assert [r["version"] for r in reports] == list(range(1, versions + 1))
    assert all(r["equal"] for r in reports), [r["version"] for r in reports if not r["equal"]]
    assert [r["checksum"] for r in reports] == [p["target_checksum"] for p in published]
    assert [t.data_ptr() for t in worker] == pointers, "the subscriber wrote somewhere else than the caller's tensors"
    return published, reports, status, worker


@needs_gpu
@pytest.mark.parametrize("commit", ["atomic", "streamed"])
def test_gpu_trainer_to_gpu_worker_bit_identical(tmp_path, commit):
    worker_device = "cuda:1" if gpu_count > 1 else "cuda:0"
    published, reports, status, _ = _run(tmp_path, worker_device, commit=commit)
    assert reports[0]["full"] and not any(r["full"] for r in reports[1:])
    assert all(0 < p["changed"] < p["numel"] // 20 for p in published[1:])
    assert published[1]["snapshot_device_bytes"] > 0
    assert status[0]["full_transfers"] == 0  # version 1 is itself from zero: no catch-up transfer was needed


@needs_gpu
@pytest.mark.skipif(not ss.HAS_NCCL or gpu_count < 2, reason=f"needs NCCL endpoints and two GPUs (NCCL: {ss.HAS_NCCL}, GPUs: {gpu_count})")
@pytest.mark.parametrize("commit", ["atomic", "streamed"])
def test_frames_gpu_to_gpu_over_nccl(tmp_path, commit):
    published, reports, _, _ = _run(tmp_path, "cuda:1", commit=commit, link="nccl")
    assert reports[0]["full"] and not any(r["full"] for r in reports[1:])
    lib = ss.nccl_library()
    assert lib["version"] > 0 and lib["path"]
    print(f"NCCL {lib['version']} from {lib['path']}")
    if "torch" in __import__("sys").modules:
        # One NCCL in the process: the library torch loaded, not a second copy.
        maps = open("/proc/self/maps").read()
        loaded = {line.split()[-1] for line in maps.splitlines() if "libnccl" in line}
        assert len(loaded) == 1, loaded


@needs_gpu
@pytest.mark.skipif(not ss.HAS_UCX, reason="this build has no UCX endpoints (UCX was not found when it was built)")
@pytest.mark.parametrize("commit", ["atomic", "streamed"])
def test_gpu_tensors_over_ucx(tmp_path, commit):
    # CUDA tensors on both ends, the frames through host memory on UCX (key handshake, tagged frames).
    worker_device = "cuda:1" if gpu_count > 1 else "cuda:0"
    published, reports, _, _ = _run(tmp_path, worker_device, commit=commit, link="ucx")
    assert reports[0]["full"] and not any(r["full"] for r in reports[1:])
    assert all(0 < p["changed"] < p["numel"] // 20 for p in published[1:])


def test_nccl_needs_gpu_tensors(tmp_path):
    ss.generate_key_file(tmp_path / "k")
    with pytest.raises(ss.InvalidArgument, match="nccl"):
        ss.Publisher([("w", "bf16", (8,))], tmp_path / "k", transport="nccl")
    with pytest.raises(ss.InvalidArgument, match="transport"):
        ss.Publisher([("w", "bf16", (8,))], tmp_path / "k", transport="udp")


@needs_gpu
@pytest.mark.parametrize(("encoder", "name"), [("entropy", "entropy"), ("delta_varint", "varint"), ("bitmap", "bitmap")])
def test_gpu_publisher_takes_any_encoder_with_a_device_twin(tmp_path, encoder, name):
    # (an alias of the CLI is taken; the report names the encoder as ENCODERS does)
    published, reports, _, _ = _run(tmp_path, "cuda:1" if gpu_count > 1 else "cuda:0", versions=3, encoder=encoder)
    assert all(p["encoder"] == name for p in published)
    assert reports[0]["full"] and not any(r["full"] for r in reports[1:])


@needs_gpu
def test_gpu_publisher_encoder_names_are_checked(tmp_path):
    ss.generate_key_file(tmp_path / "k")
    with pytest.raises(ss.InvalidArgument, match="unknown encoder"):
        ss.Publisher([("w", "bf16", (8,))], tmp_path / "k", device="cuda:0", encoder="zstd")


@needs_gpu
def test_gpu_publisher_refuses_a_link_speed(tmp_path):
    # It encodes on the GPU with one encoder: the link weighs entropy only in the host encoder's auto.
    ss.generate_key_file(tmp_path / "k")
    with pytest.raises(ss.InvalidArgument, match="GPU publisher"):
        ss.Publisher([("w", "bf16", (8,))], tmp_path / "k", device="cuda:0", link_gbps=1.0)


@needs_gpu
def test_pinned_host_snapshot_holds_no_gpu_copy(tmp_path):
    published, _, _, _ = _run(tmp_path, "cuda:0", versions=3, snapshot="host_pinned")
    assert published[-1]["snapshot_device_bytes"] == 0 and published[-1]["snapshot_host_bytes"] > 0


@needs_gpu
def test_restarted_worker_with_restored_weights_gets_patches_only(tmp_path):
    ss.generate_key_file(tmp_path / "k")
    layout = ss.Layout(ENTRIES)
    trainer = _model("cuda:0")
    worker = [torch.zeros_like(t) for t in trainer]
    with ss.Publisher(layout, tmp_path / "k", device="cuda:0") as pub:
        def session(held, count):
            got = []
            def work():
                with ss.Subscriber(layout, worker, tmp_path / "k", port=pub.port, held_version=held) as sub:
                    for _ in range(count):
                        got.append(sub.receive())
            t = threading.Thread(target=work)
            t.start()
            pub.accept(timeout=60)
            return t, got

        t, first = session(None, 2)
        for v in (1, 2):
            if v > 1:
                trainer = _step(trainer, v)
            pub.publish(v, trainer)
        t.join(60)  # the worker "exits" holding version 2 (its tensors kept, as if restored from disk)
        t, second = session(2, 2)
        for v in (3, 4):
            trainer = _step(trainer, v)
            assert pub.publish(v, trainer)["acknowledged"] == 1
        t.join(60)
        torch.cuda.synchronize()
        assert [r["version"] for r in first + second] == [1, 2, 3, 4]
        assert first[0]["full"] and not any(r["full"] for r in first[1:] + second)
        assert all(torch.equal(_bits(a), _bits(b)) for a, b in zip(trainer, worker))
        assert sum(r["full_transfers"] for r in pub.receivers()) == 0  # the restarted session's own count
        # A worker joining late with nothing: one full transfer of the newest version (encoded on the trainer's
        # GPU) as it joins, then patches.
        late = [torch.zeros_like(t) for t in trainer]
        worker[:] = late
        t, third = session(None, 3)
        # Its handshake and catch-up run on the session's thread after accept(): in step with version 4 before
        # version 5 is published (else it joins during that publish and takes 5 whole instead). (Not
        # wait_for_receivers: the restarted worker's session, at version 4 too, may not be marked gone yet.)
        deadline = time.monotonic() + 60
        while not any(r["connected"] and r["version"] == 4 and r["full_transfers"] == 1 for r in pub.receivers()):
            assert time.monotonic() < deadline, pub.receivers()
            time.sleep(0.01)
        for v in (5, 6):
            trainer = _step(trainer, v)
            assert pub.publish(v, trainer)["acknowledged"] == 1
        t.join(60)
        torch.cuda.synchronize()
        assert [(r["version"], r["full"]) for r in third] == [(4, True), (5, False), (6, False)]
        assert [r["full_transfers"] for r in pub.receivers() if r["version"] == 6] == [1]
        assert all(torch.equal(_bits(a), _bits(b)) for a, b in zip(trainer, late))


@needs_gpu
def test_tensors_in_the_wrong_place_are_refused(tmp_path):
    ss.generate_key_file(tmp_path / "k")
    layout = ss.Layout(ENTRIES)
    with ss.Publisher(layout, tmp_path / "k", device="cuda:0") as pub:
        with pytest.raises(ss.InvalidArgument, match="not a CUDA array"):
            pub.publish(1, [t.cpu() for t in _model("cuda:0")])
        if gpu_count > 1:
            with pytest.raises(ss.InvalidArgument, match="cuda:1"):
                pub.publish(1, [t.to("cuda:1") for t in _model("cuda:0")])
        with pytest.raises(ss.InvalidArgument, match="C-contiguous"):
            pub.publish(1, [torch.empty(t.shape[::-1], dtype=t.dtype, device=t.device).t() if t.dim() == 2 else t
                            for t in _model("cuda:0")])


@needs_gpu
def test_checksum_of_gpu_tensors_equals_the_host_checksum_and_the_published_one(tmp_path):
    layout = ss.Layout(ENTRIES)
    model = _model("cuda:0", seed=5)
    on_gpu = ss.checksum(layout, model)
    host = [t.cpu().view(torch.int16 if t.element_size() == 2 else torch.int32).numpy() for t in model]
    assert on_gpu == ss.checksum(layout, host)
    model[0].view(torch.int16)[3, 4] += 1  # queued on torch's stream: the checksum is ordered after it
    assert ss.checksum(layout, model) != on_gpu


@needs_gpu
def test_cupy_arrays_on_both_ends(tmp_path):
    pytest.importorskip("cupy", reason="cupy is not installed")
    ss.generate_key_file(tmp_path / "k")
    # In a process of its own, bounded (cupy_endpoints_proc.py says why): a hang fails with its stacks.
    script = pathlib.Path(__file__).with_name("cupy_endpoints_proc.py")
    try:
        r = subprocess.run([sys.executable, str(script), str(tmp_path / "k")], capture_output=True, text=True, timeout=90)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the cupy trainer and worker did not finish within 90 s: {e.stdout!r} {e.stderr!r}")
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"