"""Shared model fixtures: random bit patterns (NaNs and infinities included) with sparse, small changes,
like consecutive optimizer steps."""

import numpy as np
import pytest

import sparsesync as ss

WORDS = {"bf16": np.uint16, "f16": np.uint16, "f32": np.uint32, "f8_e4m3": np.uint8, "f8_e5m2": np.uint8}


def make_model(entries, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _, dt, shape in entries:
        w = WORDS[dt]
        out.append(np.asarray(rng.integers(0, np.iinfo(w).max, size=shape, dtype=w, endpoint=True)))
    return out


def step(model, density=0.02, seed=1):
    """A copy of `model` with about `density` of its elements moved by a few ulps (and some bit flips)."""
    rng = np.random.default_rng(seed)
    out = []
    for a in model:
        b = a.copy()
        flat = b.reshape(-1)
        n = max(1, int(flat.size * density))
        idx = rng.choice(flat.size, size=min(n, flat.size), replace=False)
        delta = rng.integers(1, 4, size=idx.size).astype(flat.dtype)
        flat[idx] = flat[idx] + delta  # a bit pattern step; wraps at the top, still a change
        out.append(b)
    return out


MIXED = [("embed", "bf16", (64, 48)), ("norm", "f32", (48,)), ("empty", "bf16", (0, 4)), ("proj", "f16", (3, 5, 7)),
         ("scale", "f8_e4m3", (257,)), ("gate", "f8_e5m2", (2, 33)), ("scalar", "f32", ())]


@pytest.fixture
def layout():
    return ss.Layout(MIXED)


@pytest.fixture
def base():
    return make_model(MIXED)


@pytest.fixture
def new(base):
    return step(base)


def copies(model):
    return [a.copy() for a in model]


def same(a, b):
    return len(a) == len(b) and all(x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes() for x, y in zip(a, b))
