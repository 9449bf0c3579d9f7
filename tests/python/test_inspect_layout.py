"""inspect's report, the layout hash and the model checksum."""

import numpy as np
import pytest

import sparsesync as ss
from conftest import MIXED, copies, step


def test_inspect_fields(layout, base, new):
    patch = ss.diff(layout, base, new, base_version=7, target_version=8)
    info = ss.inspect(patch)
    changed = sum(int((a != b).sum()) for a, b in zip(base, new))
    assert info["numel"] == layout.numel
    assert info["changed"] == changed
    assert info["payload_bytes"] == len(patch)
    assert info["dense_bytes"] == layout.nbytes
    assert info["bits_per_changed"] == pytest.approx(8 * len(patch) / changed)
    assert (info["base_version"], info["target_version"]) == (7, 8)
    assert info["layout_hash"] == layout.hash
    assert info["base_checksum"] == ss.checksum(layout, base)
    assert info["target_checksum"] == ss.checksum(layout, new)
    assert info["tensors"] == layout.entries()
    assert info["from_zero"] is False
    assert sum(info["encoders"].values()) == info["bucket_count"]
    assert patch.info == info
    assert ss.layout_of_patch(patch) == layout


def test_inspect_of_an_empty_update(layout, base):
    info = ss.inspect(ss.diff(layout, base, copies(base)))
    assert info["changed"] == 0 and info["bits_per_changed"] is None


def test_checksum_equality(layout, base, new):
    assert ss.checksum(layout, base) == ss.checksum(layout, copies(base))
    assert ss.checksum(layout, base) != ss.checksum(layout, new)
    moved = copies(base)
    moved[0].reshape(-1)[0], moved[0].reshape(-1)[1] = base[0].reshape(-1)[1], base[0].reshape(-1)[0]
    if base[0].reshape(-1)[0] != base[0].reshape(-1)[1]:
        assert ss.checksum(layout, moved) != ss.checksum(layout, base)  # positions count, not just the values


def test_layout_hash_and_equality():
    a = ss.Layout(MIXED)
    assert a.hash == ss.Layout(MIXED).hash and a == ss.Layout(MIXED)
    for changed in ([("x", "bf16", (64, 48))] + MIXED[1:], [("embed", "f16", (64, 48))] + MIXED[1:],
                    [("embed", "bf16", (48, 64))] + MIXED[1:], MIXED[1:] + MIXED[:1]):
        assert ss.Layout(changed).hash != a.hash
    assert len(a) == len(MIXED) and a.names == [n for n, _, _ in MIXED]
    assert a.numel == sum(int(np.prod(s)) for _, _, s in MIXED)
    assert ss.Layout(a) == a


def test_layout_from_named_arrays():
    arrays = {"w": np.zeros((4, 3), np.uint16), "h": np.zeros(5, np.float16), "s": np.zeros(2, np.float32),
              "i": np.zeros(2, np.uint32), "q": np.zeros(6, np.uint8)}
    layout = ss.Layout(arrays, dtype={"q": "f8_e5m2"})
    assert layout.entries() == [("w", "bf16", (4, 3)), ("h", "f16", (5,)), ("s", "f32", (2,)), ("i", "f32", (2,)),
                                ("q", "f8_e5m2", (6,))]
    assert ss.Layout(list(arrays.items())[:2], dtype="f16").entries()[0] == ("w", "f16", (4, 3))
    assert ss.Layout({"w": np.zeros(3, np.int16)}, dtype={"w": "f16"}).entries() == [("w", "f16", (3,))]


def test_encoder_names_follow_the_library():
    assert ss.ENCODERS == ("raw", "bitmap", "varint", "rice", "entropy")
    assert ss.encoders()[-1] == "auto"


def test_stub_lists_the_native_module():
    import pathlib
    from sparsesync import _core
    stub = (pathlib.Path(ss.__file__).parent / "_core.pyi").read_text()
    public = {n for n in dir(_core) if not n.startswith("_")}
    for name in public:
        assert f"def {name}(" in stub or f"class {name}" in stub or f"{name}:" in stub, name
