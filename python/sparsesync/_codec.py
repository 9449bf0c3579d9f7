"""diff / apply / inspect / checksum: the codec of the C++ library on arrays in host or GPU memory.

Arrays are used in place, never copied: numpy arrays, torch tensors (CPU or CUDA), cupy arrays, or anything else
that speaks the buffer protocol or DLPack, C-contiguous, of the layout's shapes. Tensors on a GPU (all of one
call on one GPU) are encoded and applied there by the GPU codec, which makes the same patches as the host's. Elements are bit patterns: an unsigned
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
         base_version: int = 0, target_version: int = 1, bucket_bytes: Optional[int] = None,
         chunk_log2: int = _core.default_chunk_log2, link_gbps: float = 0.0, receivers: str = "gpu",
         stream: Any = None) -> Patch:
    """Encodes the change from ``base`` to ``new`` as a patch.

    ``base`` and ``new`` hold the tensors of ``layout``: sequences in layout order, or mappings by name.
    ``base=None`` makes a full transfer (from the all-zero model) that applies onto any tensors.
    ``encoder`` is one of :data:`ENCODERS` (or an alias of the CLI) or ``"auto"``; ``values`` is ``"ulp"`` or
    ``"absolute"``. ``bucket_bytes`` and ``chunk_log2`` are the CLI's ``--bucket-bytes`` and ``--chunk-log2``;
    the versions are stored in the header for the receiver's bookkeeping.
    ``link_gbps`` (the CLI's ``--link-gbps``) states the link's speed for ``"auto"``: entropy, the fewest bytes,
    then takes a bucket where its bytes saved cross the link sooner than the ``receivers`` (``"gpu"`` or
    ``"cpu"``) walk the base to decode it; ``0`` (the default) leaves entropy out of ``"auto"``.
    Raises :class:`InvalidArgument` when the arrays do not match the layout.

    Tensors on a GPU are compared there, after the work queued on ``stream`` (default: their producer's current
    stream), by the GPU encoder named (``"auto"`` is ``"rice"`` there, whatever ``link_gbps``; ``bucket_bytes`` defaults to
    ``device_bucket_bytes``); it holds a copy of ``base`` in GPU memory while it runs. The patch is byte for byte
    the host codec's with that encoder (a full transfer, ``base=None``, is bitmap-coded, as the engine sends it).
    """
    layout = _layout(layout)
    base_arrays = None if base is None else layout.order(base)
    new_arrays = layout.order(new)
    if _on_gpu(new_arrays if base_arrays is None else [*new_arrays, *base_arrays]):
        if bucket_bytes is None:
            bucket_bytes = _core.device_bucket_bytes
        from ._net import _stream_handle  # noqa: PLC0415
        return Patch(_core.cuda_diff(layout._native, base_arrays, new_arrays, encoder, values, base_version, target_version,
                                     bucket_bytes, chunk_log2, _stream_handle(stream, new_arrays)))
    if bucket_bytes is None:
        bucket_bytes = _core.default_bucket_bytes
    patch = _core.diff(layout._native, base_arrays, new_arrays, encoder, values, base_version, target_version,
                       bucket_bytes, chunk_log2, link_gbps, receivers)
    return Patch(patch)


def apply(layout: Any, patch: BytesLike, tensors: Any, *, known_base_checksum: Optional[int] = None,
          stream: Any = None) -> dict[str, int]:
    """Applies ``patch`` to ``tensors`` in place: the caller's own memory is written, nothing is copied.

    Everything is verified first (structure, checksums, that ``tensors`` hold the patch's base, that the
    result is the sender's target); on any failure an :class:`Error` subclass is raised and ``tensors`` are
    left untouched, byte for byte. ``known_base_checksum`` (the ``target_checksum`` of the last patch applied)
    skips rereading the whole model to prove the base. Returns a report: ``numel``, ``changed``, ``buckets``,
    ``base_checksum``, ``target_checksum``, ``base_version``, ``target_version``.

    Tensors on a GPU are verified and written there (atomic: every bucket is verified before the first write),
    after the work queued on ``stream`` (default: their producer's current stream) and before the work queued
    there later; memory beside them is proportional to the patch, not the model.
    """
    layout = _layout(layout)
    arrays = layout.order(tensors)
    if _on_gpu(arrays):
        from ._net import _stream_handle  # noqa: PLC0415
        return _core.cuda_apply(layout._native, patch, arrays, known_base_checksum, _stream_handle(stream, arrays))
    return _core.apply(layout._native, patch, arrays, known_base_checksum)


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
    if _on_gpu(arrays):
        from ._net import _stream_handle  # noqa: PLC0415
        return _core.cuda_checksum(layout._native, arrays, _stream_handle(stream, arrays))
    return _core.checksum(layout._native, arrays)


def _on_gpu(arrays: Sequence[Any]) -> bool:
    """True when the arrays live on a GPU (the endpoints' placement rules); raises where this build has no CUDA."""
    from ._net import _placement  # noqa: PLC0415 (the endpoints' placement rules)
    if _placement(arrays) is None:
        return False
    if not getattr(_core, "has_cuda", False):
        from ._errors import InvalidArgument
        raise InvalidArgument("tensors on a GPU: this build of sparsesync has no CUDA support (built without nvcc)")
    return True


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
