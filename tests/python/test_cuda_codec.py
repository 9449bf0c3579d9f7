"""diff / apply on CUDA tensors (torch): made and applied on the GPU by the GPU codec, byte for byte the host
codec's patches, verified before any write, in place in the caller's memory. Needs a build with nvcc, a visible
GPU and torch; skips otherwise (the CI machines have neither)."""

import numpy as np
import pytest

import sparsesync as ss
from sparsesync import _core

gpu_count = _core.cuda_device_count() if ss.HAS_CUDA else 0
try:
    import torch
except ImportError:
    torch = None

pytestmark = pytest.mark.skipif(not ss.HAS_CUDA or gpu_count == 0 or torch is None or not torch.cuda.is_available(),
                                reason=f"needs a build with CUDA, a GPU and torch (CUDA build: {ss.HAS_CUDA}, GPUs: {gpu_count}, "
                                       f"torch: {torch is not None})")

ENTRIES = [("embed", "bf16", (640, 256)), ("norm", "f32", (256,)), ("proj", "bf16", (256, 384)), ("head", "f16", (96, 256))]
DTYPE = {"bf16": "bfloat16", "f32": "float32", "f16": "float16"}
BUCKET = 1 << 18  # several buckets per model, as the engine's


def _model(seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return [torch.randn(shape, generator=g).to(getattr(torch, DTYPE[dt])).contiguous() for _, dt, shape in ENTRIES]


def _step(model, seed, density=0.01):
    g = torch.Generator(device="cpu").manual_seed(seed)
    out = []
    for w in model:
        mask = torch.rand(w.shape, generator=g) < density
        out.append(torch.where(mask, (w.float() * (1 + 2 ** -7)).to(w.dtype), w).contiguous())
    return out


def _bits(t):
    return t.view(torch.int16 if t.element_size() == 2 else torch.int32)


def _same(a, b):
    return all(torch.equal(_bits(x.cpu()), _bits(y.cpu())) for x, y in zip(a, b))


def _host(model):
    """numpy bit patterns of CPU tensors (what the host codec takes)."""
    return [_bits(t.cpu()).numpy() for t in model]


@pytest.mark.parametrize("encoder", ["rice", "delta_varint", "bitmap", "raw_index32"])
@pytest.mark.parametrize("values", ["ulp", "absolute"])
def test_gpu_diff_is_the_host_diff_byte_for_byte(encoder, values):
    layout = ss.Layout(ENTRIES)
    base = _model(1)
    new = _step(base, 2)
    gpu = ss.diff(layout, [t.cuda() for t in base], [t.cuda() for t in new], encoder=encoder, values=values, bucket_bytes=BUCKET)
    host = ss.diff(layout, _host(base), _host(new), encoder=encoder, values=values, bucket_bytes=BUCKET)
    assert bytes(gpu) == bytes(host)
    assert ss.inspect(gpu)["changed"] > 0


def test_gpu_apply_writes_the_callers_memory_and_matches_the_target():
    layout = ss.Layout(ENTRIES)
    base = _model(3)
    new = _step(base, 4)
    patch = ss.diff(layout, _host(base), _host(new), bucket_bytes=BUCKET)  # made on the host, applied on the GPU
    worker = [t.cuda() for t in base]
    pointers = [t.data_ptr() for t in worker]
    report = ss.apply(layout, patch, worker)
    torch.cuda.synchronize()
    assert [t.data_ptr() for t in worker] == pointers
    assert _same(worker, new)
    assert report["changed"] == ss.inspect(patch)["changed"]
    assert report["target_checksum"] == ss.checksum(layout, worker) == ss.checksum(layout, _host(new))


def test_gpu_round_trip_over_versions_with_known_base_checksum():
    layout = ss.Layout(ENTRIES)
    trainer = _model(5)
    worker = [t.cuda() for t in trainer]
    known = None
    for v in range(2, 6):
        nxt = _step(trainer, 10 + v)
        patch = ss.diff(layout, [t.cuda() for t in trainer], [t.cuda() for t in nxt], encoder="delta_varint", base_version=v - 1,
                        target_version=v)
        r = ss.apply(layout, patch, worker, known_base_checksum=known)
        known = r["target_checksum"]
        trainer = nxt
        assert r["target_version"] == v
        torch.cuda.synchronize()
        assert _same(worker, trainer)


def test_gpu_full_transfer_applies_onto_anything():
    layout = ss.Layout(ENTRIES)
    new = _model(6)
    patch = ss.diff(layout, None, [t.cuda() for t in new])
    assert ss.inspect(patch)["from_zero"]
    garbage = [torch.full_like(t, 3).cuda() for t in new]
    ss.apply(layout, patch, garbage)
    torch.cuda.synchronize()
    assert _same(garbage, new)
    host = [np.zeros_like(a) for a in _host(new)]
    ss.apply(layout, patch, host)  # the same patch on the host
    assert all(np.array_equal(a, b) for a, b in zip(host, _host(new)))


def test_gpu_apply_of_a_damaged_patch_or_wrong_base_raises_and_writes_nothing():
    layout = ss.Layout(ENTRIES)
    base = _model(7)
    new = _step(base, 8)
    patch = bytearray(ss.diff(layout, _host(base), _host(new), bucket_bytes=BUCKET))
    worker = [t.cuda() for t in base]
    before = [t.clone() for t in worker]
    for at in (len(patch) - 3, len(patch) // 2, 200):
        damaged = bytearray(patch)
        damaged[at] ^= 0x40
        with pytest.raises(ss.Error):
            ss.apply(layout, bytes(damaged), worker)
        torch.cuda.synchronize()
        assert _same(worker, before)
    with pytest.raises(ss.Error):
        ss.apply(layout, bytes(patch[:-10]), worker)  # truncated
    other = [t.cuda() for t in _model(9)]  # not the patch's base
    other_before = [t.clone() for t in other]
    with pytest.raises(ss.BaseMismatch):
        ss.apply(layout, bytes(patch), other)
    torch.cuda.synchronize()
    assert _same(other, other_before)
    assert _same(worker, before)


def test_gpu_codec_refuses_what_it_cannot_do():
    layout = ss.Layout(ENTRIES)
    model = [t.cuda() for t in _model(11)]
    with pytest.raises(ss.InvalidArgument, match="no GPU implementation|unknown encoder"):
        ss.diff(layout, model, model, encoder="no_such_encoder")
    if gpu_count > 1:
        with pytest.raises(ss.InvalidArgument):
            ss.diff(layout, [t.to("cuda:1") for t in model], model)  # base and new on different GPUs
    with pytest.raises(ss.InvalidArgument):
        ss.diff(layout, _host(_model(11)), model)  # base on the host, new on the GPU
