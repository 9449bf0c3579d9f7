"""apply writes into the caller's own memory: no copy in, none out."""

import numpy as np

import sparsesync as ss
from conftest import copies, same


def data_pointer(a):
    return a.__array_interface__["data"][0]


def test_apply_writes_the_callers_arrays(layout, base, new):
    work = copies(base)
    pointers = [data_pointer(a) for a in work]
    ss.apply(layout, ss.diff(layout, base, new), work)
    assert [data_pointer(a) for a in work] == pointers
    assert same(work, new)


def test_views_into_one_buffer_are_updated_in_it():
    """Tensors that are slices of one flat buffer (as a flattened parameter store) change in that buffer."""
    layout = ss.Layout([("a", "bf16", (10, 10)), ("b", "bf16", (50,))])
    rng = np.random.default_rng(0)
    store = rng.integers(0, 1 << 16, size=150, dtype=np.uint16)
    views = [store[:100].reshape(10, 10), store[100:]]
    target_store = store.copy()
    target_store[[3, 99, 100, 149]] += 1
    target = [target_store[:100].reshape(10, 10), target_store[100:]]
    ss.apply(layout, ss.diff(layout, views, target), views)
    assert store.tobytes() == target_store.tobytes()


def test_diff_reads_arrays_without_copying_them(layout, base, new):
    """Read-only arrays (which nothing could write to) are accepted as the base and new model."""
    for a in base + new:
        a.setflags(write=False)
    work = copies(base)
    ss.apply(layout, ss.diff(layout, base, new), work)
    assert same(work, new)


def test_bytes_like_patches(layout, base, new):
    patch = ss.diff(layout, base, new)
    for form in (bytes(patch), bytearray(patch), memoryview(patch), np.frombuffer(patch, dtype=np.uint8)):
        work = copies(base)
        ss.apply(layout, form, work)
        assert same(work, new)
        assert ss.inspect(form)["payload_bytes"] == len(patch)
