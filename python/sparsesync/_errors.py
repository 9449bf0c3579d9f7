"""The exceptions of sparsesync: one class per error code of the C++ library (core/error.hpp).

Every error the library reports is a :class:`Error`; catch a subclass to handle one cause. Each class's
``code`` is the C++ ``errc`` value and ``reason`` its text.
"""

from __future__ import annotations


class Error(Exception):
    """Base of every sparsesync error. ``code`` is the C++ ``sparsesync::errc`` value."""

    code: int = 0
    reason: str = ""


class InvalidArgument(Error, ValueError):
    """The caller passed inconsistent inputs (sizes, dtypes, shapes, options)."""

    code, reason = 1, "invalid argument"


class Truncated(Error):
    """The patch ends before a length it announced."""

    code, reason = 2, "truncated"


class BadMagic(Error):
    """Not a sparsesync patch, or framing lost."""

    code, reason = 3, "bad magic"


class UnsupportedVersion(Error):
    """A patch format version (or flag) this build does not read."""

    code, reason = 4, "unsupported version"


class HeaderChecksum(Error):
    """A header's own checksum does not match its bytes."""

    code, reason = 5, "header checksum mismatch"


class PayloadChecksum(Error):
    """Chunk tables or chunk data were altered."""

    code, reason = 6, "payload checksum mismatch"


class LayoutMismatch(Error):
    """The patch was made for another model layout (names, dtypes or shapes)."""

    code, reason = 7, "layout mismatch"


class BaseMismatch(Error):
    """The receiver's current weights are not the patch's base."""

    code, reason = 8, "base mismatch"


class TargetMismatch(Error):
    """The reconstructed weights differ from what the sender had."""

    code, reason = 9, "target mismatch"


class Malformed(Error):
    """A field is out of its allowed range or inconsistent with another."""

    code, reason = 10, "malformed"


class IndexOutOfRange(Error):
    """A change position lies outside its chunk."""

    code, reason = 11, "index out of range"


class NonCanonical(Error):
    """A valid-looking encoding the encoder never produces (overlong varint, no-op change)."""

    code, reason = 12, "non-canonical encoding"


class IOFailure(Error, OSError):
    """A file, stream or connection failed."""

    code, reason = 13, "i/o error"


class Unsupported(Error):
    """Valid, but not decodable here: an encoder without a GPU decoder, on a GPU receiver."""

    code, reason = 14, "unsupported here"


class CudaError(Error, RuntimeError):
    """The CUDA runtime failed (out of GPU memory, an invalid stream, a device fault); ``reason`` has its text."""
    code, reason = -1, "cuda error"


_BY_CODE = {cls.code: cls for cls in Error.__subclasses__()}


def _class_for_code(code: int) -> type[Error]:
    """The class the native module raises for a C++ error code (an unknown code gives the base class)."""
    return _BY_CODE.get(code, Error)
