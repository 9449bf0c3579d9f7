"""Publisher / Subscriber: versions of a model's weights streamed to workers over TCP, authenticated with a
pre-shared key (the C++ library's sync::sender / sync::receiver over its asio_tcp transport), host arrays only.

A worker that joins late or falls behind gets a full transfer or the patches it misses; every version is
verified and applied atomically into the worker's own arrays. Each call returns a report dict.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from . import _core
from ._layout import Layout
from ._errors import IOFailure


def _require_tcp() -> None:
    if not _core.has_tcp:
        raise IOFailure("this build of sparsesync has no TCP transport (Boost.Asio and OpenSSL were not found when it was "
                        "built; scripts/install-deps.sh installs them)")


def generate_key_file(path: str | os.PathLike[str]) -> None:
    """Writes a new random pre-shared key to ``path`` (hex, mode 0600; the file must not exist yet)."""
    _require_tcp()
    _core.generate_key_file(os.fspath(path))


class Publisher:
    """The trainer's side: listens on ``host:port`` and publishes versions to every accepted worker.

    ``key_file`` holds the pre-shared key both sides load (:func:`generate_key_file`). Patches use the
    ``auto`` encoder and ``values`` (``"ulp"`` or ``"absolute"``); the first version a worker gets is a
    full transfer. ``port=0`` picks a free port (read it from :attr:`port`).
    """

    def __init__(self, layout: Any, key_file: str | os.PathLike[str], *, host: str = "127.0.0.1", port: int = 0,
                 values: str = "ulp", bucket_bytes: int = 16 << 20, ack_timeout: float = 600.0) -> None:
        _require_tcp()
        self.layout = layout if isinstance(layout, Layout) else Layout(layout)
        self._native = _core.Publisher(self.layout._native, host, port, os.fspath(key_file), values, bucket_bytes,
                                       ack_timeout)

    @property
    def port(self) -> int:
        """The port it listens on."""
        return self._native.port

    def accept(self, timeout: Optional[float] = None) -> int:
        """Waits for one worker to connect (``timeout`` seconds; None waits for ever); returns its id."""
        return self._native.accept(timeout)

    def wait_for_receivers(self, n: int, timeout: float = 60.0) -> bool:
        """Waits until ``n`` workers completed the handshake; False on timeout."""
        return self._native.wait_for_receivers(n, timeout)

    def publish(self, version: int, tensors: Any) -> dict[str, Any]:
        """Publishes ``tensors`` (layout order, or a mapping by name) as ``version`` and waits for the workers.

        Returns ``version``, ``numel``, ``changed``, ``payload_bytes``, ``bits_per_changed``, ``target_checksum``,
        ``encode_ms``, ``ms``, ``acknowledged``, ``lagging`` and ``receivers`` (one status dict per worker).
        """
        return self._native.publish(version, self.layout.order(tensors))

    def receivers(self) -> list[dict[str, Any]]:
        """Per worker: ``id``, ``connected``, ``version``, ``bytes_sent``, ``full_transfers``, ``last_error``."""
        return self._native.receivers()

    def close(self) -> None:
        """Ends the stream: each worker's :meth:`Subscriber.receive` then returns None."""
        self._native.close()

    def __enter__(self) -> "Publisher":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Subscriber:
    """The worker's side: connects to a :class:`Publisher` and applies each version into ``tensors`` in place.

    ``tensors`` are the worker's own arrays (layout order or a mapping by name); they are written only with
    verified versions, atomically, and must stay alive (and unmoved) while the subscriber exists.
    ``connect_timeout`` covers a publisher that is still starting; ``receive_timeout`` (None: none) bounds the
    wait for the next version.
    """

    def __init__(self, layout: Any, tensors: Any, key_file: str | os.PathLike[str], *, host: str = "127.0.0.1",
                 port: int, connect_timeout: float = 30.0, receive_timeout: Optional[float] = None) -> None:
        _require_tcp()
        self.layout = layout if isinstance(layout, Layout) else Layout(layout)
        self.tensors = self.layout.order(tensors)
        self._native = _core.Subscriber(self.layout._native, self.tensors, host, port, os.fspath(key_file),
                                        receive_timeout, connect_timeout)

    def receive(self) -> Optional[dict[str, Any]]:
        """Blocks for the next version and applies it; None once the publisher closed the stream.

        Returns ``version``, ``base_version``, ``full``, ``changed``, ``payload_bytes``, ``bits_per_changed``,
        ``checksum`` (of the weights now held) and ``ms``. A version that fails verification raises an
        :class:`Error` and leaves the arrays at the last good version (the publisher then sends a full one).
        """
        return self._native.next()

    def __iter__(self):
        while (report := self.receive()) is not None:
            yield report

    @property
    def version(self) -> int:
        """The version the arrays hold."""
        return self._native.version

    def close(self) -> None:
        self._native.close()

    def __enter__(self) -> "Subscriber":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
