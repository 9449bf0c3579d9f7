"""Model layouts: the ordered named tensors that a trainer and its workers agree on."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Union

from . import _core
from ._errors import InvalidArgument

DTypeSpec = Union[str, Mapping[str, str], None]

# Array dtype names (numpy's str(dtype), torch's str(dtype) without "torch.", ml_dtypes') -> layout dtype.
# A float type names its format; an integer type only its width, so it needs the caller's word (see Layout).
_FLOAT_DTYPES = {
    "bfloat16": "bf16",
    "float16": "f16",
    "half": "f16",
    "float32": "f32",
    "float": "f32",
    "float8_e4m3fn": "f8_e4m3",
    "float8_e4m3": "f8_e4m3",
    "float8_e5m2": "f8_e5m2",
}
_INT_WIDTH = {"uint8": 1, "int8": 1, "uint16": 2, "int16": 2, "uint32": 4, "int32": 4}


def _array(x: Any) -> Any:
    """A tensor that can cross DLPack: torch parameters that require grad are detached (no copy)."""
    if getattr(x, "requires_grad", False) and hasattr(x, "detach"):
        return x.detach()
    return x


def _exported(x: Any) -> Any:
    """What crosses into the library for ``x`` where the per-tensor cost counts (a publish): a plain torch tensor
    as the DLPack capsule of torch's C exporter, whose ``Tensor.__dlpack__`` wrapper runs Python checks first
    (about 4 us a tensor; they refuse what the detach and the dtype check already exclude: gradients, complex
    conjugate views, sparse layouts); anything else (numpy, cupy, torch subclasses) as itself."""
    x = _array(x)
    torch = sys.modules.get("torch")
    if torch is not None and type(x) is torch.Tensor and x.layout is torch.strided:
        return torch.utils.dlpack.to_dlpack(x)
    return x


def _dtype_name(a: Any) -> str:
    name = str(getattr(a, "dtype", ""))
    return name[len("torch."):] if name.startswith("torch.") else name


def _infer_dtype(name: str, a: Any, dtype: DTypeSpec) -> str:
    if isinstance(dtype, Mapping):
        if name in dtype:
            return dtype[name]
        dtype = None
    elif isinstance(dtype, str):
        return dtype
    kind = _dtype_name(a)
    if kind in _FLOAT_DTYPES:
        return _FLOAT_DTYPES[kind]
    width = _INT_WIDTH.get(kind)
    if width == 2:
        return "bf16"  # documented default: 16-bit integer arrays hold bf16 bits unless told otherwise
    if width == 4:
        return "f32"
    if width == 1:
        raise InvalidArgument(
            f"tensor '{name}': an {kind} array may hold f8_e4m3 or f8_e5m2 bits; say which with dtype=")
    raise InvalidArgument(f"tensor '{name}': cannot tell the layout dtype of an array of {kind or type(a).__name__}")


def _entries(spec: Any, dtype: DTypeSpec) -> list[tuple[str, str, tuple[int, ...]]]:
    if isinstance(spec, Mapping):
        items: Iterable[Any] = spec.items()
    elif hasattr(spec, "named_parameters") and callable(spec.named_parameters):
        items = spec.named_parameters()
    else:
        items = spec
    out = []
    for item in items:
        if not isinstance(item, Sequence) or isinstance(item, (str, bytes)) or len(item) not in (2, 3):
            raise InvalidArgument(f"layout entry {item!r}: expected (name, dtype, shape) or (name, array)")
        if len(item) == 3:
            name, dt, shape = item
            if isinstance(dtype, Mapping) and name in dtype:
                dt = dtype[name]
            out.append((str(name), str(dt), tuple(int(d) for d in shape)))
        else:
            name, a = item
            a = _array(a)
            out.append((str(name), _infer_dtype(str(name), a, dtype), tuple(int(d) for d in a.shape)))
    return out


class Layout:
    """The ordered named tensors of a model: what a patch is made for.

    Build it from ``(name, dtype, shape)`` triples, dtype as in the CLI (``"bf16"``, ``"f16"``, ``"f32"``,
    ``"f8_e4m3"``, ``"f8_e5m2"``)::

        layout = ss.Layout([("w", "bf16", (4096, 4096)), ("b", "f32", (4096,))])

    or from named tensors: a list of ``(name, array)`` pairs, a mapping (a state dict), or anything with
    ``named_parameters()`` (a torch module). The dtype comes from the array: float16, float32, bfloat16 and
    float8 arrays name their format. Integer arrays hold bit patterns and only say their width: 16-bit
    integer arrays are taken as ``bf16`` and 32-bit ones as ``f32``; 8-bit ones need to be told. Override with
    ``dtype="f16"`` (every tensor) or ``dtype={"name": "f16", ...}`` (those named)::

        layout = ss.Layout(state_dict)                 # uint16 arrays -> bf16
        layout = ss.Layout(state_dict, dtype="f16")    # all of them f16

    Two layouts are equal when names, dtypes and shapes agree in order; ``hash`` is the layout hash that
    every patch carries (XXH64 of the canonical serialization, docs/FORMAT.md).
    """

    __slots__ = ("_native", "_names")

    def __init__(self, spec: Any, *, dtype: DTypeSpec = None) -> None:
        if isinstance(spec, Layout):
            self._native = spec._native
        else:
            self._native = _core.Layout(_entries(spec, dtype))
        self._names = [e[0] for e in self._native.entries()]

    @property
    def hash(self) -> int:
        """The 64-bit layout hash a patch header carries."""
        return self._native.hash

    @property
    def numel(self) -> int:
        """Elements of all tensors together."""
        return self._native.numel

    @property
    def nbytes(self) -> int:
        """Bytes of all tensors together (the size of a dense transfer)."""
        return self._native.nbytes

    @property
    def names(self) -> list[str]:
        """Tensor names in layout order."""
        return list(self._names)

    def entries(self) -> list[tuple[str, str, tuple[int, ...]]]:
        """``(name, dtype, shape)`` per tensor, in order."""
        return [(n, d, tuple(s)) for n, d, s in self._native.entries()]

    def serialize(self) -> bytes:
        """The canonical serialization (docs/FORMAT.md, "Layout section"); ``hash`` is its XXH64."""
        return self._native.serialize()

    def order(self, tensors: Any) -> Sequence[Any]:
        """``tensors`` in layout order: a sequence is taken as it is, a mapping is read by name."""
        return [_array(t) for t in self._in_order(tensors)]

    def _in_order(self, tensors: Any) -> list[Any]:
        """The caller's own objects in layout order (torch parameters not yet detached)."""
        if isinstance(tensors, Mapping):
            missing = [n for n in self._names if n not in tensors]
            if missing:
                raise InvalidArgument(f"tensors: no tensor named {missing[0]!r} (and {len(missing) - 1} more missing)"
                                      if len(missing) > 1 else f"tensors: no tensor named {missing[0]!r}")
            extra = len(tensors) - len(self._names)
            if extra:
                raise InvalidArgument(f"tensors: {extra} tensors that the layout does not name")
            return [tensors[n] for n in self._names]
        if isinstance(tensors, (str, bytes)) or not isinstance(tensors, Iterable):
            raise InvalidArgument("tensors: expected a sequence of arrays in layout order or a mapping by name")
        return list(tensors)

    def __len__(self) -> int:
        return len(self._names)

    def __iter__(self):
        return iter(self.entries())

    def __getitem__(self, i: int) -> tuple[str, str, tuple[int, ...]]:
        return self.entries()[i]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layout) and self.serialize() == other.serialize()

    def __hash__(self) -> int:
        return self.hash

    def __repr__(self) -> str:
        return f"Layout({len(self)} tensors, {self.numel} elements, hash={self.hash:#018x})"
