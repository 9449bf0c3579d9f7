"""sparsesync: lossless sparse weight sync for RL trainers and rollout workers.

Send only the elements that changed between two versions of a model's weights, bit-exactly, verified::

    import sparsesync as ss
    layout = ss.Layout([("w", "bf16", (1024, 1024))])   # arrays hold bit patterns: uint16 for bf16
    patch = ss.diff(layout, [old], [new])                # bytes-like (a Patch)
    ss.apply(layout, patch, [worker_copy])               # in place; raises ss.Error, touching nothing, on failure
    ss.inspect(patch)["changed"]

The package is a thin layer over the header-only C++ library (the same wire format as the ``sparsesync``
command-line tool and the C++ API). docs/PYTHON.md has more.
"""

from ._errors import (BadMagic, BaseMismatch, CudaError, Error, HeaderChecksum, IndexOutOfRange, InvalidArgument, IOFailure,
                      LayoutMismatch, Malformed, NonCanonical, PayloadChecksum, TargetMismatch, Truncated,
                      Unsupported, UnsupportedVersion)
from . import _core
from ._codec import ENCODERS, VALUE_MODES, Patch, apply, checksum, diff, encoders, inspect, layout_of_patch
from ._layout import Layout
from ._net import TLS, Publisher, Subscriber, current_stream, generate_key_file, nccl_library

__version__ = "0.1.0"
#: Whether this build has the GPU Publisher / Subscriber (built where nvcc was found).
HAS_CUDA: bool = bool(getattr(_core, "has_cuda", False))
#: Whether this build has the NCCL endpoints (``link="nccl"``: frames GPU to GPU).
HAS_NCCL: bool = bool(getattr(_core, "has_nccl", False))
#: Whether this build has the UCX endpoints (``transport="ucx"``).
HAS_UCX: bool = bool(getattr(_core, "has_ucx", False))
#: The patch format version this build reads and writes.
FORMAT_VERSION: int = _core.format_version

__all__ = [
    "Layout", "Patch", "Publisher", "Subscriber", "TLS", "generate_key_file", "diff", "apply", "inspect", "checksum", "layout_of_patch", "encoders", "ENCODERS",
    "VALUE_MODES", "FORMAT_VERSION", "Error", "InvalidArgument", "Truncated", "BadMagic", "UnsupportedVersion",
    "HeaderChecksum", "PayloadChecksum", "LayoutMismatch", "BaseMismatch", "TargetMismatch", "Malformed",
    "IndexOutOfRange", "NonCanonical", "IOFailure", "Unsupported", "CudaError", "current_stream", "HAS_CUDA", "HAS_NCCL", "HAS_UCX", "nccl_library",
]
