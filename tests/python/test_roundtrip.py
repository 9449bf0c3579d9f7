"""diff then apply rebuilds the new model bit for bit, through every encoder, value mode and dtype."""

import numpy as np
import pytest

import sparsesync as ss
from conftest import MIXED, copies, make_model, same, step


@pytest.mark.parametrize("values", ss.VALUE_MODES)
@pytest.mark.parametrize("encoder", ss.encoders())
def test_every_encoder_and_value_mode(layout, base, new, encoder, values):
    patch = ss.diff(layout, base, new, encoder=encoder, values=values)
    info = ss.inspect(patch)
    assert info["value_modes"] == [values]
    if encoder != "auto":
        assert set(info["encoders"]) == {encoder}
    work = copies(base)
    report = ss.apply(layout, patch, work)
    assert same(work, new)
    changed = sum(int((a != b).sum()) for a, b in zip(base, new))
    assert report["changed"] == info["changed"] == changed
    assert report["numel"] == layout.numel


@pytest.mark.parametrize("encoder", ["raw_index32", "delta_varint"])
def test_cli_aliases(layout, base, new, encoder):
    work = copies(base)
    ss.apply(layout, ss.diff(layout, base, new, encoder=encoder), work)
    assert same(work, new)


@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32", "f8_e4m3", "f8_e5m2"])
@pytest.mark.parametrize("density", [0.0, 0.001, 0.3, 1.0])
def test_dtypes_and_densities(dtype, density):
    entries = [("t", dtype, (5000,))]
    layout = ss.Layout(entries)
    base = make_model(entries, seed=3)
    new = step(base, density=density, seed=4) if density else copies(base)
    work = copies(base)
    patch = ss.diff(layout, base, new)
    ss.apply(layout, patch, work)
    assert same(work, new)
    assert ss.inspect(patch)["changed"] == sum(int((a != b).sum()) for a, b in zip(base, new))


def test_float_arrays_of_the_same_format():
    """float16 arrays for f16 and float32 arrays for f32 are taken as they are (their bits)."""
    layout = ss.Layout([("h", "f16", (100,)), ("s", "f32", (100,))])
    rng = np.random.default_rng(5)
    base = [rng.standard_normal(100).astype(np.float16), rng.standard_normal(100).astype(np.float32)]
    new = [base[0].copy(), base[1].copy()]
    new[0][::7] += np.float16(0.25)
    new[1][::9] *= np.float32(1.5)
    work = copies(base)
    ss.apply(layout, ss.diff(layout, base, new), work)
    assert same(work, new)


def test_signed_integer_arrays_hold_bits_too(layout, base, new):
    signed = [a.view(a.dtype.str.replace("u", "i")) for a in base]
    target = [a.view(a.dtype.str.replace("u", "i")) for a in new]
    work = copies(signed)
    ss.apply(layout, ss.diff(layout, signed, target), work)
    assert same(work, target)


def test_full_transfer_applies_onto_anything(layout, base, new):
    patch = ss.diff(layout, None, new)
    assert ss.inspect(patch)["from_zero"] is True
    work = make_model(MIXED, seed=42)
    ss.apply(layout, patch, work)
    assert same(work, new)


def test_mappings_by_name(layout, base, new):
    names = layout.names
    patch = ss.diff(layout, dict(zip(names, base)), dict(zip(reversed(names), reversed(new))))
    work = dict(zip(names, copies(base)))
    ss.apply(layout, patch, work)
    assert same([work[n] for n in names], new)


def test_a_chain_of_versions_with_known_base_checksum(layout, base):
    versions = [base]
    for s in range(4):
        versions.append(step(versions[-1], density=0.01, seed=10 + s))
    work = copies(base)
    known = ss.checksum(layout, work)
    for v in range(1, len(versions)):
        patch = ss.diff(layout, versions[v - 1], versions[v], base_version=v - 1, target_version=v)
        report = ss.apply(layout, patch, work, known_base_checksum=known)
        assert (report["base_version"], report["target_version"]) == (v - 1, v)
        known = report["target_checksum"]
        assert known == ss.checksum(layout, work)
    assert same(work, versions[-1])


@pytest.mark.parametrize("bucket_bytes,chunk_log2", [(1000, 8), (64, 9), (1 << 20, 16)])
def test_bucket_and_chunk_sizes(layout, base, new, bucket_bytes, chunk_log2):
    patch = ss.diff(layout, base, new, bucket_bytes=bucket_bytes, chunk_log2=chunk_log2)
    assert ss.inspect(patch)["bucket_count"] >= 1
    work = copies(base)
    ss.apply(layout, patch, work)
    assert same(work, new)


def test_ulp_is_smaller_than_absolute_for_small_steps():
    entries = [("w", "bf16", (1 << 16,))]
    layout = ss.Layout(entries)
    base = make_model(entries, seed=7)
    new = step(base, density=0.05, seed=8)
    ulp = ss.inspect(ss.diff(layout, base, new, values="ulp"))["payload_bytes"]
    absolute = ss.inspect(ss.diff(layout, base, new, values="absolute"))["payload_bytes"]
    assert ulp < absolute


def _weightlike_bf16(n, seed):
    """BF16 bit patterns of normal weights (std 0.02) and a step that moves small magnitudes more often by one ulp."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 0.02, size=n).astype(np.float32)
    bits = (x.view(np.uint32) >> 16).astype(np.uint16)
    p = np.minimum(0.9, 0.01 * 0.004 / (np.abs(x) + 1e-6))
    moved = rng.random(n) < p
    up = rng.random(n) < 0.5
    mag = bits & np.uint16(0x7FFF)
    # One ulp away from zero or towards it (no sign or exponent edge cases needed here).
    step = np.where(up, 1, -1).astype(np.int32)
    new_mag = np.clip(mag.astype(np.int32) + step, 1, 0x7F7F).astype(np.uint16)
    new = bits.copy()
    new[moved] = (bits[moved] & np.uint16(0x8000)) | new_mag[moved]
    return bits, new


def test_auto_weighs_entropy_only_with_a_link_speed():
    layout = ss.Layout([("w", "bf16", (300_000,))])
    old, new = _weightlike_bf16(300_000, seed=7)
    plain = ss.diff(layout, [old], [new], encoder="auto", bucket_bytes=1 << 17)
    assert "entropy" not in ss.inspect(plain)["encoders"]
    slow = ss.diff(layout, [old], [new], encoder="auto", bucket_bytes=1 << 17, link_gbps=0.1)
    assert "entropy" in ss.inspect(slow)["encoders"]
    assert len(bytes(slow)) < len(bytes(plain))
    # Receivers that decode on a CPU walk the base ~300x slower: at 0.1 Gb/s rice's bytes arrive first.
    cpu = ss.diff(layout, [old], [new], encoder="auto", bucket_bytes=1 << 17, link_gbps=0.1, receivers="cpu")
    assert bytes(cpu) == bytes(plain)
    for patch in (plain, slow):
        work = [old.copy()]
        ss.apply(layout, patch, work)
        assert np.array_equal(work[0], new)
    with pytest.raises(ss.InvalidArgument):
        ss.diff(layout, [old], [new], link_gbps=-1.0)
    with pytest.raises(ss.InvalidArgument):
        ss.diff(layout, [old], [new], link_gbps=1.0, receivers="tpu")
