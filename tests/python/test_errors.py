"""Bad input raises a typed sparsesync.Error and never touches the caller's arrays."""

import numpy as np
import pytest

import sparsesync as ss
from sparsesync import _core
from conftest import MIXED, copies, same


def untouched_after(fn, work):
    before = [a.tobytes() for a in work]
    with pytest.raises(ss.Error) as caught:
        fn()
    assert [a.tobytes() for a in work] == before
    return caught.value


def test_one_class_per_library_error_code():
    codes = dict(_core.error_codes)
    classes = {cls.code: cls for cls in ss.Error.__subclasses__() if cls is not ss.CudaError}
    assert set(classes) == set(codes)
    assert ss.CudaError.code < 0 and issubclass(ss.CudaError, RuntimeError)  # the CUDA runtime's, not the library's
    for code, reason in codes.items():
        assert classes[code].reason == reason
        assert getattr(ss, classes[code].__name__) is classes[code]
    assert issubclass(ss.InvalidArgument, ValueError)


def test_every_single_byte_damage_is_caught(layout, base, new):
    patch = ss.diff(layout, base, new)
    work = copies(base)
    kinds = set()
    for i in range(len(patch)):
        bad = bytearray(patch)
        bad[i] ^= 0x40
        err = untouched_after(lambda: ss.apply(layout, bad, work), work)
        kinds.add(type(err))
        with pytest.raises(ss.Error):
            ss.inspect(bad)
    assert ss.Error not in kinds  # always a specific subclass
    assert {ss.HeaderChecksum, ss.PayloadChecksum} <= kinds


def test_every_truncation_is_caught(layout, base, new):
    patch = ss.diff(layout, base, new)
    work = copies(base)
    for n in range(len(patch)):
        untouched_after(lambda: ss.apply(layout, patch[:n], work), work)
    with pytest.raises(ss.Malformed):
        ss.apply(layout, patch + b"\0", work)


def test_not_a_patch(layout, base):
    work = copies(base)
    assert isinstance(untouched_after(lambda: ss.apply(layout, b"x" * 200, work), work), ss.BadMagic)
    with pytest.raises(ss.Truncated):
        ss.inspect(b"")


def test_inspect_checks_as_the_cli_does(layout, base, new):
    # One check for both (format/patch_check.hpp): the header is named once, and trailing bytes are refused.
    with pytest.raises(ss.Truncated) as caught:
        ss.inspect(bytes(40))
    assert "patch header: 40 of its" in str(caught.value)
    assert "patch header: patch header" not in str(caught.value)
    with pytest.raises(ss.Malformed, match="trailing bytes"):
        ss.inspect(ss.diff(layout, base, new) + b"\0")


def test_wrong_base(layout, base, new):
    patch = ss.diff(layout, base, new)
    work = copies(base)
    work[0].reshape(-1)[17] ^= 1
    assert isinstance(untouched_after(lambda: ss.apply(layout, patch, work), work), ss.BaseMismatch)


def test_wrong_base_with_a_stale_known_checksum(layout, base, new):
    patch = ss.diff(layout, base, new)
    work = copies(base)
    err = untouched_after(lambda: ss.apply(layout, patch, work, known_base_checksum=12345), work)
    assert isinstance(err, ss.BaseMismatch)


def test_applied_twice(layout, base, new):
    patch = ss.diff(layout, base, new)
    work = copies(base)
    ss.apply(layout, patch, work)
    assert isinstance(untouched_after(lambda: ss.apply(layout, patch, work), work), ss.BaseMismatch)


def test_another_layout(layout, base, new):
    patch = ss.diff(layout, base, new)
    renamed = ss.Layout([("other" if n == "norm" else n, d, s) for n, d, s in MIXED])
    work = copies(base)
    assert isinstance(untouched_after(lambda: ss.apply(renamed, patch, work), work), ss.LayoutMismatch)


def test_wrong_shape(layout, base, new):
    patch = ss.diff(layout, base, new)
    work = copies(base)
    work[0] = work[0].reshape(48, 64)
    err = untouched_after(lambda: ss.apply(layout, patch, work), work)
    assert isinstance(err, ss.InvalidArgument) and "'embed'" in str(err) and "shape" in str(err)


def test_wrong_dtype(layout, base, new):
    work = copies(base)
    work[1] = work[1].view(np.float32).astype(np.float64)  # 8 bytes per element for an f32 tensor
    err = untouched_after(lambda: ss.apply(layout, ss.diff(layout, base, new), work), work)
    assert "'norm'" in str(err) and "element type" in str(err)


def test_float16_array_for_bf16_is_refused(layout, base, new):
    wrong = copies(new)
    wrong[0] = wrong[0].view(np.float16)
    with pytest.raises(ss.InvalidArgument, match="float16 cannot hold bf16"):
        ss.diff(layout, base, wrong)


def test_wrong_count_and_non_arrays(layout, base, new):
    with pytest.raises(ss.InvalidArgument, match="arrays given"):
        ss.diff(layout, base, new[:-1])
    with pytest.raises(ss.InvalidArgument, match="not a CPU array"):
        ss.diff(layout, base, [list(a.reshape(-1)) for a in new])
    with pytest.raises(ss.InvalidArgument, match="no tensor named"):
        ss.checksum(layout, {"embed": base[0]})


def test_non_contiguous_and_read_only_targets(layout, base, new):
    patch = ss.diff(layout, base, new)
    work = copies(base)
    work[0] = np.asfortranarray(work[0])
    assert "C-contiguous" in str(untouched_after(lambda: ss.apply(layout, patch, work), work))
    work = copies(base)
    work[2].setflags(write=False)
    assert "read-only" in str(untouched_after(lambda: ss.apply(layout, patch, work), work))


def test_bad_options(layout, base, new):
    with pytest.raises(ss.InvalidArgument, match="unknown encoder"):
        ss.diff(layout, base, new, encoder="zstd")
    with pytest.raises(ss.InvalidArgument, match="values"):
        ss.diff(layout, base, new, values="relative")
    with pytest.raises(ss.InvalidArgument, match="log2_chunk"):
        ss.diff(layout, base, new, chunk_log2=30)
    with pytest.raises(ss.InvalidArgument, match="bytes-like"):
        ss.apply(layout, "not bytes", copies(base))


def test_bad_layouts():
    with pytest.raises(ss.InvalidArgument, match="unknown dtype"):
        ss.Layout([("w", "int4", (3,))])
    with pytest.raises(ss.InvalidArgument, match="twice"):
        ss.Layout([("w", "bf16", (3,)), ("w", "bf16", (3,))])
    with pytest.raises(ss.InvalidArgument, match="f8_e4m3 or f8_e5m2"):
        ss.Layout([("w", np.zeros(3, np.uint8))])
    with pytest.raises(ss.InvalidArgument, match="expected"):
        ss.Layout(["w"])
