"""Publisher / Subscriber: versions of a model's weights streamed to workers over TCP (a pre-shared key and/or
mutual TLS), UCX (a key) or NCCL (GPU to GPU, the protocol on TCP): the C++ library's one sync engine,
sync::sender / sync::receiver, over its transports.

The weights may live in host memory (numpy arrays, CPU tensors) or on a GPU (torch or cupy CUDA tensors,
anything that exports CUDA memory through DLPack): on a GPU the trainer encodes on its GPU against a snapshot
the engine keeps, and each worker verifies and writes on its own GPU; the frames cross host memory and TCP.

A worker that joins late or falls behind gets a full transfer or the patches it misses; every version is
verified before the worker's tensors change. Each call returns a report dict.
"""

from __future__ import annotations

import os
import sys
from typing import Any, NamedTuple, Optional, Sequence, Union

from . import _core
from ._layout import Layout, _exported
from ._errors import InvalidArgument, IOFailure
from ._reuse import ImportReuse

#: ``__dlpack_device__`` codes (the DLPack standard's DLDeviceType).
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST = 1, 2, 3

DeviceSpec = Union[None, str, int, Any]


def _require_tcp() -> None:
    if not _core.has_tcp:
        raise IOFailure("this build of sparsesync has no TCP transport (Boost.Asio and OpenSSL were not found when it was "
                        "built; scripts/install-deps.sh installs them)")


def _require_cuda() -> None:
    if not getattr(_core, "has_cuda", False):
        raise InvalidArgument("this build of sparsesync has no GPU endpoints: it was built without nvcc (install the CUDA "
                              "toolkit and reinstall: pip install . builds them where nvcc is found)")


def _require_nccl() -> None:
    _require_cuda()
    if not getattr(_core, "has_nccl", False):
        raise InvalidArgument("this build of sparsesync has no NCCL endpoints (nccl.h was not found when it was built: "
                              "pip install nvidia-nccl-cu13, or set SPARSESYNC_NCCL_ROOT, and reinstall)")
    # One NCCL per process: where torch is installed, its NCCL is loaded first and the endpoints use that one.
    if "torch" not in sys.modules:
        import importlib.util
        if importlib.util.find_spec("torch") is not None:
            import torch  # noqa: F401


def nccl_library() -> dict[str, Any]:
    """The NCCL library the NCCL endpoints use (``version`` code and ``path``), loading it if needed: the one
    already in the process (torch's), else ``$SPARSESYNC_NCCL_LIBRARY``, else ``libnccl.so.2``."""
    _require_nccl()
    return _core.nccl_library()


def _require_ucx() -> None:
    if not getattr(_core, "has_ucx", False):
        raise InvalidArgument("this build of sparsesync has no UCX endpoints (UCX was not found when it was built: "
                              "apt-get install libucx-dev, or set SPARSESYNC_UCX_ROOT, and reinstall)")


def _native_classes(index: Optional[int], transport: str) -> tuple[Any, Any]:
    """(publisher class, subscriber class) for a placement (None: host memory) and a transport."""
    if transport not in ("tcp", "ucx", "nccl"):
        raise InvalidArgument(f"transport must be 'tcp', 'ucx' or 'nccl', not {transport!r}")
    if index is None:
        if transport == "nccl":
            raise InvalidArgument("transport='nccl' moves frames GPU to GPU: it needs tensors on a GPU")
        if transport == "ucx":
            _require_ucx()
            return _core.UcxPublisher, _core.UcxSubscriber
        return _core.Publisher, _core.Subscriber
    if transport == "nccl":
        _require_nccl()
        return _core.NcclPublisher, _core.NcclSubscriber
    _require_cuda()
    if transport == "ucx":
        _require_ucx()
        return _core.UcxCudaPublisher, _core.UcxCudaSubscriber
    return _core.CudaPublisher, _core.CudaSubscriber


class TLS(NamedTuple):
    """Mutual TLS for a Publisher or Subscriber: confidentiality, and authentication by certificates (both sides
    present one signed by ``ca_file``). PEM files; the private key unencrypted. ``server_name`` (subscribers):
    the name the publisher's certificate must hold (DNS or IP subjectAltName), empty to accept any the CA signed.
    With a key file as well, the key is a second, independent check."""

    ca_file: Union[str, os.PathLike]
    cert_file: Union[str, os.PathLike]
    key_file: Union[str, os.PathLike]
    server_name: str = ""


def _auth(key_file: Any, tls: Optional[TLS]) -> tuple[Optional[str], Optional[tuple[str, str, str, str]]]:
    if key_file is None and tls is None:
        raise InvalidArgument("no authentication: pass key_file (generate_key_file) and/or tls=TLS(...)")
    if tls is not None and not isinstance(tls, TLS):
        tls = TLS(*tls)
    files = None if tls is None else (os.fspath(tls.ca_file), os.fspath(tls.cert_file), os.fspath(tls.key_file), tls.server_name)
    return (None if key_file is None else os.fspath(key_file)), files


def generate_key_file(path: str | os.PathLike[str]) -> None:
    """Writes a new random pre-shared key to ``path`` (hex, mode 0600; the file must not exist yet)."""
    _require_tcp()
    _core.generate_key_file(os.fspath(path))


def _cuda_index(device: DeviceSpec) -> Optional[int]:
    """None for host memory; a CUDA device index (-1: the current device) for a GPU."""
    if device is None:
        return None
    if isinstance(device, int):
        return device
    text = str(device)  # also torch.device and cupy.cuda.Device ("cuda:1", "<CUDA Device 1>")
    if text == "cpu":
        return None
    if text == "cuda":
        return -1
    if text.startswith("cuda:") and text[5:].isdigit():
        return int(text[5:])
    dev_id = getattr(device, "id", None)  # cupy.cuda.Device
    if isinstance(dev_id, int):
        return dev_id
    raise InvalidArgument(f"device: expected 'cpu', 'cuda', 'cuda:N', an index or a torch/cupy device, not {device!r}")


def _placement(arrays: Sequence[Any]) -> Optional[int]:
    """Where arrays live, from the DLPack device they export: None (host) or a CUDA device index."""
    if not arrays:
        return None
    probe = getattr(arrays[0], "__dlpack_device__", None)
    if probe is None:
        return None  # the buffer protocol only: host memory
    kind, index = probe()
    if int(kind) == _DL_CUDA:
        return int(index)
    return None


def current_stream(tensor: Any) -> int:
    """The CUDA stream that work on ``tensor`` is queued on now, as a handle: torch's or cupy's current stream
    of the tensor's device (0, the legacy default stream, for other producers)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(tensor, torch.Tensor) and tensor.is_cuda:
        return int(torch.cuda.current_stream(tensor.device).cuda_stream)
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(tensor, cupy.ndarray):
        with tensor.device:
            return int(cupy.cuda.get_current_stream().ptr)
    return 0


def _stream_handle(stream: Any, arrays: Sequence[Any]) -> int:
    if stream is None:
        return current_stream(arrays[0]) if arrays else 0
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr", "handle"):  # torch.cuda.Stream, cupy.cuda.Stream, cuda-python streams
        value = getattr(stream, attr, None)
        if isinstance(value, int):
            return value
    raise InvalidArgument(f"stream: expected a CUDA stream (torch.cuda.Stream, cupy.cuda.Stream or a handle), not {stream!r}")


class Publisher:
    """The trainer's side: listens on ``host:port`` and publishes versions to every accepted worker.

    ``key_file`` holds the pre-shared key both sides load (:func:`generate_key_file`); ``tls`` (:class:`TLS`)
    adds mutual TLS (either suffices, both are independent checks). ``device``: where the
    published tensors live: ``"cpu"`` (default) or a GPU (``"cuda"``, ``"cuda:1"``, an index, a torch device).
    On the host patches use the ``auto`` encoder; on a GPU ``rice`` (``delta_varint`` with ``link="nccl"``, the
    fastest where bytes barely count), encoded on the GPU, and
    ``snapshot`` says where the engine keeps the last published version (the base of the next patch):
    ``"device"`` (1x the model in GPU memory, fastest) or ``"host_pinned"`` (no GPU copy of the model).
    ``values`` is ``"ulp"`` or ``"absolute"``; the first version a worker gets is a full transfer.
    ``bucket_bytes``: the bucket size (default 16 MiB on the host; 512 MiB on a GPU, where each bucket has a
    fixed cost and a full transfer stages about 8 bytes per element of one bucket on the worker).
    ``port=0`` picks a free port (read it from :attr:`port`). ``transport``: ``"tcp"`` (default; frames through
    host memory), ``"ucx"`` (UCX picks the fabric: InfiniBand, RoCE, shared memory, TCP; key file only) or, for
    GPU tensors, ``"nccl"`` (frames GPU to GPU by NCCL on a communicator per worker, built over the
    authenticated TCP connection, which still carries the protocol). Workers must use the same.
    ``link_gbps`` (host publishers) states the link's speed for ``auto``, as in :func:`diff`: ``entropy`` then
    takes a bucket where its bytes saved cross the link sooner than the ``receivers`` (``"gpu"`` or ``"cpu"``)
    walk the base to decode it; a GPU publisher refuses it (it encodes with one encoder).
    ``encoder``: ``"auto"`` (the choice above) or any of :data:`ENCODERS`, e.g. ``"entropy"``, the fewest bytes
    where the link is slow (its decode walks the worker's weights: ~3x rice's GPU apply time), for every bucket;
    a GPU publisher takes those with a device twin, and ``link_gbps`` only with ``"auto"``. ``publish()`` reports
    the encoder used as ``"encoder"``.
    """

    def __init__(self, layout: Any, key_file: Optional[str | os.PathLike[str]] = None, *, tls: Optional[TLS] = None,
                 host: str = "127.0.0.1", port: int = 0,
                 values: str = "ulp", bucket_bytes: Optional[int] = None, ack_timeout: float = 600.0,
                 device: DeviceSpec = "cpu", snapshot: str = "device", transport: str = "tcp",
                 link_gbps: float = 0.0, receivers: str = "gpu", encoder: str = "auto") -> None:
        _require_tcp()
        self.layout = layout if isinstance(layout, Layout) else Layout(layout)
        index = _cuda_index(device)
        native = _native_classes(index, transport)[0]
        if index is None:
            index = -1
            bucket_bytes = bucket_bytes or 16 << 20
        else:
            bucket_bytes = bucket_bytes or _core.device_bucket_bytes
        key, tls_files = _auth(key_file, tls)
        self._native = native(self.layout._native, host, port, key, tls_files, values, bucket_bytes, ack_timeout, index,
                              snapshot, link_gbps, receivers, encoder)
        self._reuse = ImportReuse()

    @property
    def port(self) -> int:
        """The port it listens on."""
        return self._native.port

    @property
    def device(self) -> str:
        """``"cpu"`` or ``"cuda:N"``: where the published tensors must live."""
        d = self._native.device
        return "cpu" if d < 0 else f"cuda:{d}"

    def accept(self, timeout: Optional[float] = None) -> int:
        """Waits for one worker to connect (``timeout`` seconds; None waits for ever); returns its id."""
        return self._native.accept(timeout)

    def wait_for_receivers(self, n: int, timeout: float = 60.0) -> bool:
        """Waits until ``n`` workers completed the handshake; False on timeout."""
        return self._native.wait_for_receivers(n, timeout)

    def publish(self, version: int, tensors: Any, *, stream: Any = None) -> dict[str, Any]:
        """Publishes ``tensors`` (layout order, or a mapping by name) as ``version`` and waits for the workers.

        On a GPU the encode is ordered after ``stream`` (default: the tensors' producer's current stream, as
        torch or cupy report it), so work queued there before the call is included; nothing synchronizes the
        device. The tensors must not change until the call returns. Publishing torch tensors at the same memory
        again (an RL loop's parameters updated in place, as the same objects or new ``detach()`` views) reuses the
        last call's DLPack imports; the publisher keeps a reference to the last call's tensors until the next
        publish or :meth:`close`.

        Returns ``version``, ``numel``, ``changed``, ``payload_bytes``, ``bits_per_changed``, ``target_checksum``,
        ``encode_ms``, ``snapshot_ms``, ``ms``, ``acknowledged``, ``lagging``, ``receivers`` (one status dict
        per worker) and ``encoder``; on a GPU also ``snapshot_device_bytes``, ``snapshot_host_bytes`` and
        ``scratch_device_bytes``.
        """
        objects = self.layout._in_order(tensors)
        handle = _stream_handle(stream, objects) if self._native.device >= 0 else 0
        marks = self._reuse.marks_of(objects)
        if self._reuse.matches(marks):
            return self._native.publish(version, None, handle)
        self._reuse.forget()  # the native side drops the last imports once it has imported these
        report = self._native.publish(version, [_exported(t) for t in objects], handle)
        self._reuse.remember(objects, marks)
        return report

    def receivers(self) -> list[dict[str, Any]]:
        """Per worker: ``id``, ``connected``, ``version``, ``bytes_sent``, ``full_transfers``, ``lagging``,
        ``last_error``."""
        return self._native.receivers()

    def close(self) -> None:
        """Ends the stream: each worker's :meth:`Subscriber.receive` then returns None."""
        self._reuse.forget()
        self._native.close()

    def __enter__(self) -> "Publisher":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Subscriber:
    """The worker's side: connects to a :class:`Publisher` and applies each version into ``tensors`` in place.

    ``tensors`` are the worker's own arrays (layout order or a mapping by name), in host memory or all on one
    GPU (then verified and written on that GPU); they are written only with verified versions and must stay
    alive (and unmoved) while the subscriber exists. ``commit`` (GPU): ``"atomic"`` writes a version only once
    all of it is verified; ``"streamed"`` writes bucket by bucket as frames arrive and rolls back a version
    refused later. ``held_version``: the tensors already hold that version (restored from disk after a
    restart); the handshake proves it by checksum and the publisher then sends patches, not a full transfer.
    ``connect_timeout`` covers a publisher that is still starting; ``receive_timeout`` (None: none) bounds the
    wait for the next version. ``transport``: as the publisher's.
    """

    def __init__(self, layout: Any, tensors: Any, key_file: Optional[str | os.PathLike[str]] = None, *,
                 tls: Optional[TLS] = None, host: str = "127.0.0.1", port: int, connect_timeout: float = 30.0, receive_timeout: Optional[float] = None,
                 held_version: Optional[int] = None, commit: str = "atomic", transport: str = "tcp") -> None:
        _require_tcp()
        self.layout = layout if isinstance(layout, Layout) else Layout(layout)
        self.tensors = self.layout.order(tensors)
        index = _placement(self.tensors)
        native = _native_classes(index, transport)[1]
        if index is None:
            index = -1
        key, tls_files = _auth(key_file, tls)
        self._native = native(self.layout._native, self.tensors, host, port, key, tls_files, receive_timeout,
                              connect_timeout, held_version, index, commit)

    def receive(self, *, stream: Any = None) -> Optional[dict[str, Any]]:
        """Blocks for the next version and applies it; None once the publisher closed the stream.

        On a GPU, ``stream`` (default: the tensors' current torch/cupy stream) is ordered after the apply, so
        work queued there next reads the new version. Returns ``version``, ``base_version``, ``full``,
        ``changed``, ``payload_bytes``, ``bits_per_changed``, ``checksum`` (of the weights now held) and ``ms``.
        A version that fails verification raises an :class:`Error` and leaves the tensors at the last good
        version (the publisher then sends a full one).
        """
        handle = _stream_handle(stream, self.tensors) if self._native.device >= 0 else 0
        return self._native.next(handle)

    def __iter__(self):
        while (report := self.receive()) is not None:
            yield report

    @property
    def version(self) -> int:
        """The version the tensors hold."""
        return self._native.version

    @property
    def device(self) -> str:
        """``"cpu"`` or ``"cuda:N"``: where the tensors live."""
        d = self._native.device
        return "cpu" if d < 0 else f"cuda:{d}"

    def close(self) -> None:
        self._native.close()

    def __enter__(self) -> "Subscriber":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
