"""diff / apply / inspect / checksum: the codec of the C++ library on arrays in host memory.

Arrays are used in place, never copied: numpy arrays, CPU torch tensors, or anything else that speaks the
buffer protocol or DLPack, C-contiguous, of the layout's shapes. Elements are bit patterns: an unsigned
integer array of the element's width always fits (uint16 for bf16 and f16, uint32 for f32, uint8 for the
float8 types); a float array fits only where it is that very format (float16 for f16, bfloat16 for bf16).
The GIL is released while the library works.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

from . import _core
from ._layout import Layout

BytesLike = Union[bytes, bytearray, memoryview]

#: The encoders a patch may use (codec/encoder_table.hpp); ``"auto"`` picks the smallest per bucket.
ENCODERS: tuple[str, ...] = tuple(_core.encoders)
#: How a changed value travels: ``"ulp"`` (its step from the base value; needs the exact base) or ``"absolute"``.
VALUE_MODES: tuple[str, ...] = ("ulp", "absolute")


class Patch(bytes):
    """A patch: the bytes of one update (docs/FORMAT.md), usable wherever bytes are (files, sockets).

    ``info`` is :func:`inspect` of it (validated anew at each access).
    """

    __slots__ = ()

    @property
    def info(self) -> dict[str, Any]:
        return inspect(self)

    def __repr__(self) -> str:
        return f"Patch({len(self)} bytes)"

    __str__ = __repr__


def _layout(layout: Any) -> Layout:
    return layout if isinstance(layout, Layout) else Layout(layout)


def diff(layout: Any, base: Optional[Any], new: Any, encoder: str = "auto", values: str = "ulp", *,
         base_version: int = 0, target_version: int = 1, bucket_bytes: int = _core.default_bucket_bytes,
         chunk_log2: int = _core.default_chunk_log2) -> Patch:
    """Encodes the change from ``base`` to ``new`` as a patch.

    ``base`` and ``new`` hold the tensors of ``layout``: sequences in layout order, or mappings by name.
    ``base=None`` makes a full transfer (from the all-zero model) that applies onto any tensors.
    ``encoder`` is one of :data:`ENCODERS` (or an alias of the CLI) or ``"auto"``; ``values`` is ``"ulp"`` or
    ``"absolute"``. ``bucket_bytes`` and ``chunk_log2`` are the CLI's ``--bucket-bytes`` and ``--chunk-log2``;
    the versions are stored in the header for the receiver's bookkeeping.
    Raises :class:`InvalidArgument` when the arrays do not match the layout.
    """
    layout = _layout(layout)
    base_arrays = None if base is None else layout.order(base)
    patch = _core.diff(layout._native, base_arrays, layout.order(new), encoder, values, base_version, target_version,
                       bucket_bytes, chunk_log2)
    return Patch(patch)


def apply(layout: Any, patch: BytesLike, tensors: Any, *, known_base_checksum: Optional[int] = None) -> dict[str, int]:
    """Applies ``patch`` to ``tensors`` in place: the caller's own memory is written, nothing is copied.

    Everything is verified first (structure, checksums, that ``tensors`` hold the patch's base, that the
    result is the sender's target); on any failure an :class:`Error` subclass is raised and ``tensors`` are
    left untouched, byte for byte. ``known_base_checksum`` (the ``target_checksum`` of the last patch applied)
    skips rereading the whole model to prove the base. Returns a report: ``numel``, ``changed``, ``buckets``,
    ``base_checksum``, ``target_checksum``, ``base_version``, ``target_version``.
    """
    layout = _layout(layout)
    return _core.apply(layout._native, patch, layout.order(tensors), known_base_checksum)


def inspect(patch: BytesLike) -> dict[str, Any]:
    """Validates a patch on its own (without the model) and reports what it holds, as ``sparsesync inspect``.

    Keys: ``numel``, ``changed``, ``payload_bytes`` (the patch's size), ``dense_bytes``, ``data_bytes``,
    ``density``, ``bits_per_changed`` (None without changes), ``ratio_vs_dense``, ``bucket_count``,
    ``base_version``, ``target_version``, ``layout_hash``, ``base_checksum``, ``target_checksum``,
    ``from_zero``, ``metadata_bytes``, ``encoders`` (buckets per encoder), ``value_modes`` and ``tensors``
    (``(name, dtype, shape)`` from the layout section, or None). Raises an :class:`Error` on a damaged patch.
    """
    info = _core.inspect(patch)
    if info["tensors"] is not None:
        info["tensors"] = [(n, d, tuple(s)) for n, d, s in info["tensors"]]
    return info


def checksum(layout: Any, tensors: Any, *, stream: Any = None) -> int:
    """The content checksum of a whole model (docs/FORMAT.md section 5), as a patch's header states it.

    Tensors on a GPU (all on one) are read there, after the work queued on ``stream`` (default: their
    producer's current stream), for weight checkers that compare a worker with its trainer.

    Equal models give equal checksums; a patch's ``target_checksum`` equals ``checksum`` of what it builds.
    """
    layout = _layout(layout)
    arrays = layout.order(tensors)
    from ._net import _placement, _stream_handle  # noqa: PLC0415 (the endpoints' placement rules)
    if _placement(arrays) is not None:
        if not getattr(_core, "has_cuda", False):
            from ._errors import InvalidArgument
            raise InvalidArgument("tensors on a GPU: this build of sparsesync has no CUDA support (built without nvcc)")
        return _core.cuda_checksum(layout._native, arrays, _stream_handle(stream, arrays))
    return _core.checksum(layout._native, arrays)


def layout_of_patch(patch: BytesLike) -> Layout:
    """The layout stored in a patch's layout section (every patch made by :func:`diff` has one)."""
    tensors = inspect(patch)["tensors"]
    if tensors is None:
        from ._errors import InvalidArgument
        raise InvalidArgument("the patch has no layout section")
    return Layout(tensors)


def encoders() -> Sequence[str]:
    """Names accepted by ``diff(encoder=...)``: :data:`ENCODERS` and ``"auto"``."""
    return (*ENCODERS, "auto")
