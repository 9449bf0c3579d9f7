"""Element bit patterns as torch integers, and the library's `ulp` step on them (core/dtype.hpp).

Words are carried widened to int64 holding the unsigned pattern (0 .. 2^bits - 1): torch's unsigned 16- and
32-bit types lack arithmetic, and int64 holds every pattern of every width exactly. The ops run on whatever
device the words are on.
"""

from __future__ import annotations

import numpy as np
import torch

#: Layout dtype -> (torch float dtype of that format, width in bits).
TORCH_DTYPES = {
    "bf16": (torch.bfloat16, 16),
    "f16": (torch.float16, 16),
    "f32": (torch.float32, 32),
    "f8_e4m3": (getattr(torch, "float8_e4m3fn", None), 8),
    "f8_e5m2": (getattr(torch, "float8_e5m2", None), 8),
}
# Signed view types of each width (torch can view any float tensor as these, no copy).
_VIEW = {8: torch.uint8, 16: torch.int16, 32: torch.int32}
_NUMPY_WORD = {8: np.uint8, 16: np.uint16, 32: np.uint32}


def width(dtype: str) -> int:
    return TORCH_DTYPES[dtype][1]


def int_view(t: torch.Tensor, bits: int) -> torch.Tensor:
    """`t`'s memory as signed integers of its element width (no copy; writes through)."""
    return t.view(_VIEW[bits])


def widen(words: torch.Tensor, bits: int) -> torch.Tensor:
    """Signed or unsigned words -> int64 holding the unsigned pattern."""
    return words.to(torch.int64) & ((1 << bits) - 1)


def narrow(patterns: torch.Tensor, bits: int) -> torch.Tensor:
    """int64 unsigned patterns -> the signed view type of that width (two's complement, as the bits are)."""
    if bits == 8:
        return patterns.to(torch.uint8)
    top = 1 << (bits - 1)
    return torch.where(patterns >= top, patterns - (1 << bits), patterns).to(_VIEW[bits])


def from_numpy_words(a: np.ndarray) -> torch.Tensor:
    """A numpy array of unsigned words (decode_changes' values) -> int64 patterns."""
    return torch.from_numpy(np.ascontiguousarray(a).astype(np.int64, copy=False))


def to_numpy_words(patterns: torch.Tensor, bits: int) -> np.ndarray:
    """int64 patterns (any device) -> a numpy array of unsigned words, for the checksum helpers."""
    return patterns.cpu().numpy().astype(_NUMPY_WORD[bits])


def order_key(patterns: torch.Tensor, bits: int) -> torch.Tensor:
    """The order-preserving key of sign-magnitude patterns (dtype.hpp, order_key)."""
    sign = 1 << (bits - 1)
    mask = (1 << bits) - 1
    return torch.where((patterns & sign) != 0, (~patterns) & mask, patterns | sign)


def from_order_key(keys: torch.Tensor, bits: int) -> torch.Tensor:
    sign = 1 << (bits - 1)
    mask = (1 << bits) - 1
    return torch.where((keys & sign) != 0, keys & (mask ^ sign), (~keys) & mask)


def apply_ulp(old: torch.Tensor, steps: torch.Tensor, bits: int) -> torch.Tensor:
    """The new patterns of `ulp` changes: old moved by `steps` (the wire's W-bit wrapping delta) in key space."""
    return from_order_key((order_key(old, bits) + steps) & ((1 << bits) - 1), bits)


def ulp_delta(old: torch.Tensor, new: torch.Tensor, bits: int) -> torch.Tensor:
    """The `ulp` value of a change (what a patch carries for it), wrapping modulo 2^bits."""
    return (order_key(new, bits) - order_key(old, bits)) & ((1 << bits) - 1)


def resolve(mode: str, old: torch.Tensor, coded: torch.Tensor, bits: int) -> torch.Tensor:
    """New patterns from the coded values of a patch (decode_value in codec/value_mode.hpp)."""
    if mode == "absolute":
        return coded
    return apply_ulp(old, coded, bits)
