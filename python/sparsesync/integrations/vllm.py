"""vLLM without a fork: the ``sparsesync`` weight-transfer backend, its trainer-side engine, the plugin that
registers both in every vLLM process, and a worker extension for vLLM releases without the factory.

Worker side (every vLLM worker process; the ``vllm.general_plugins`` entry point of this package runs
:func:`register`)::

    vllm serve MODEL --weight-transfer-config '{"backend": "sparsesync"}'
    # or LLM(MODEL, weight_transfer_config=WeightTransferConfig(backend="sparsesync"))

Each update request carries one patch in checkpoint (HF) coordinates, inline (``{"patch": bytes}``, or
base64 text for JSON transports) or as a path every worker reads (``{"patch_path": ...}``); each worker
applies it straight into its live parameters through the map it records at init (weight_map.py).
Trainer side: :class:`SparsesyncTrainerEngine` (vLLM's ``TrainerWeightTransferEngine``) or, with any
vLLM, :class:`~sparsesync.integrations.worker.PatchMaker` plus the engine's ``update_weights`` call.

Two generations of vLLM's engine API are served by one class: ``(config, parallel_config)`` with
``receive_weights(update_info, load_weights)``, and ``(config, vllm_config, device, model)`` with
``receive_weights(update_info)`` and engine-owned ``start/finish_weight_update``. Updates are applied in
place, without vLLM's layerwise reload: with the older API, open updates with
``start_weight_update(is_checkpoint_format=False)`` or use the worker extension.
"""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

from .worker import PatchMaker, WorkerState, patch_bytes

logger = logging.getLogger("sparsesync.vllm")

BACKEND = "sparsesync"
_PLUGIN_ERROR: Optional[BaseException] = None  # set when register() failed: the first use raises it

try:  # the engine base classes where this vLLM has them; plain classes otherwise (tests, old vLLM)
    from vllm.distributed.weight_transfer.base import WeightTransferEngine as _EngineBase
    from vllm.distributed.weight_transfer.base import WeightTransferInitInfo as _InitBase
    from vllm.distributed.weight_transfer.base import WeightTransferUpdateInfo as _UpdateBase
    HAVE_VLLM_ENGINE = True
except Exception:  # noqa: BLE001 - any failure to import means: no engine API here
    _EngineBase, _InitBase, _UpdateBase = object, object, object
    HAVE_VLLM_ENGINE = False

try:
    from vllm.distributed.weight_transfer.base import TrainerInitInfo as _TrainerInitBase
    from vllm.distributed.weight_transfer.base import TrainerWeightTransferEngine as _TrainerBase
    HAVE_VLLM_TRAINER_ENGINE = True
except Exception:  # noqa: BLE001
    _TrainerBase = object
    HAVE_VLLM_TRAINER_ENGINE = False

    @dataclass
    class _TrainerInitBase:  # the field vLLM's TrainerInitInfo has (keyword-only there)
        rank: int = 0

        @property
        def is_sender(self) -> bool:
            return self.rank == 0


def _check_plugin() -> None:
    if _PLUGIN_ERROR is not None:
        raise RuntimeError(f"sparsesync's vLLM plugin failed to load in this process: {_PLUGIN_ERROR!r}") from _PLUGIN_ERROR


@dataclass
class SparsesyncInitInfo(_InitBase):
    """``init_weight_transfer_engine`` fields: ``layout`` (checkpoint ``[name, dtype, shape]`` entries; else
    taken from the first patch), the recording budget and where copies of transformed tensors live."""

    layout: Optional[list] = None
    budget_bytes: int = 1 << 30
    shadow_device: str = "cpu"


@dataclass
class SparsesyncUpdateInfo(_UpdateBase):
    """``update_weights`` fields: one patch, inline (bytes or base64 text) or as a path."""

    patch: Any = None
    patch_path: Optional[str] = None


class SparsesyncWeightTransferEngine(_EngineBase):
    """vLLM weight-transfer backend ``sparsesync`` (worker side); see the module doc."""

    init_info_cls = SparsesyncInitInfo
    update_info_cls = SparsesyncUpdateInfo
    supports_draft_weight_update = False  # the map is recorded for one model

    def __init__(self, config: Any, *args: Any) -> None:
        _check_plugin()
        if _EngineBase is not object:
            super().__init__(config, *args)
        self.config = config
        if len(args) == 3:  # (vllm_config, device, model)
            self.device, self.model = args[1], args[2]
        else:               # (parallel_config)
            self.device, self.model = None, None
        self.state: Optional[WorkerState] = None
        self.last_report: Optional[dict] = None

    def parse_init_info(self, init_dict: dict) -> SparsesyncInitInfo:
        try:
            return SparsesyncInitInfo(**init_dict)
        except TypeError as e:
            raise ValueError(f"Invalid init_info for {type(self).__name__}: {e}") from e

    def parse_update_info(self, update_dict: dict) -> SparsesyncUpdateInfo:
        try:
            return SparsesyncUpdateInfo(**update_dict)
        except TypeError as e:
            raise ValueError(f"Invalid update_info for {type(self).__name__}: {e}") from e

    def init_transfer_engine(self, init_info: SparsesyncInitInfo) -> None:
        self.state = WorkerState(init_info.layout, budget_bytes=init_info.budget_bytes, shadow_device=init_info.shadow_device)
        if self.model is not None and init_info.layout is not None:
            self.state.ensure(self.model)  # record now, outside any update

    def start_weight_update(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to open: changes are applied in place, verified, without a layerwise reload."""

    def finish_weight_update(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to close (see start_weight_update)."""

    def abort_weight_update(self) -> None:
        """Nothing to undo: a patch is applied whole or not at all."""

    def receive_weights(self, update_info: SparsesyncUpdateInfo, load_weights: Optional[Callable] = None) -> None:
        _check_plugin()
        if self.state is None:
            self.state = WorkerState()
        patch = patch_bytes(update_info.patch, update_info.patch_path)
        model = self.model
        if model is None:  # the older API: the model's bound load_weights is all the engine gets
            model = getattr(load_weights, "__self__", None)
            if model is None:
                raise RuntimeError("sparsesync: receive_weights got no model (load_weights is not a model's bound method); "
                                   "use SparsesyncWorkerExtension with this vLLM")
        self.last_report = self.state.apply(model, patch)
        logger.info("sparsesync: version %s applied (%s changes, %s here, verified: %s)", self.last_report["target_version"],
                    self.last_report["changed"], self.last_report["applied"], self.last_report["verified"])

    def shutdown(self) -> None:
        self.state = None

    @staticmethod
    def trainer_send_weights(iterator: Iterator[tuple[str, Any]], trainer_args: Any) -> None:
        """The older trainer entry: ``trainer_args`` = ``{"maker": PatchMaker, "send": f(update_info)}``;
        makes the patch of the weights in ``iterator`` and hands ``{"patch": bytes}`` to ``send`` (for
        example ``lambda info: llm.collective_rpc("update_weights", args=(info,))``)."""
        args = dict(trainer_args)
        args["send"]({"patch": args["maker"].make(list(iterator))})


@dataclass
class SparsesyncTrainerInitInfo(_TrainerInitBase):
    """Trainer-side init info: the patch options, and the initial weights' source when workers start from
    the same checkpoint (then the first patch is sparse, else a full transfer)."""

    backend = BACKEND
    encoder: str = "auto"
    values: str = "ulp"
    inline_base64: bool = False  # patches as base64 text, for a JSON control plane (the HTTP routes)
    worker_init: dict = field(default_factory=dict)


class SparsesyncTrainerEngine(_TrainerBase):
    """vLLM's trainer-side engine for ``sparsesync``: makes a patch from ``source`` and drives
    ``start_weight_update`` / ``update_weights`` / ``finish_weight_update`` through ``client``."""

    init_info_cls = SparsesyncTrainerInitInfo

    def __init__(self, *, client: Any, source: Any = None, is_sender: bool = True, init_info: Optional[SparsesyncTrainerInitInfo] = None) -> None:
        if _TrainerBase is not object:
            super().__init__(client=client, source=source, is_sender=is_sender)
        self.client, self.source, self.is_sender = client, source, is_sender
        self.init_info = init_info or SparsesyncTrainerInitInfo()
        self.maker: Optional[PatchMaker] = None

    @classmethod
    def trainer_init(cls, init_info: SparsesyncTrainerInitInfo, *, client: Any, source: Any = None) -> "SparsesyncTrainerEngine":
        engine = cls(client=client, source=source, is_sender=init_info.is_sender, init_info=init_info)
        if engine.is_sender:
            client.init_weight_transfer_engine(dict(init_info.worker_init))
        return engine

    def send_weights(self, base: Any = None) -> None:
        if self.source is None:
            raise RuntimeError("sparsesync: the trainer engine has no weight source")
        named = list(iter(self.source))
        if not self.is_sender:
            return
        if self.maker is None:
            self.maker = PatchMaker(PatchMaker.layout_entries(named), encoder=self.init_info.encoder, values=self.init_info.values, base=base)
        patch = self.maker.make(named)
        info = {"patch": base64.b64encode(patch).decode() if self.init_info.inline_base64 else patch}
        self.client.start_weight_update()
        self.client.update_weights(info)
        self.client.finish_weight_update()


class SparsesyncWorkerExtension:
    """``worker_extension_cls="sparsesync.integrations.vllm.SparsesyncWorkerExtension"``: methods vLLM adds
    to its workers, for releases without the weight-transfer factory (or to bypass it). Call them on every
    worker with ``llm.collective_rpc("sparsesync_apply", args=(patch,))``."""

    def sparsesync_init(self, layout: Any = None, budget_bytes: int = 1 << 30, shadow_device: str = "cpu") -> dict:
        _check_plugin()
        self._sparsesync = WorkerState(layout, budget_bytes=budget_bytes, shadow_device=shadow_device)
        model = self.model_runner.model
        if layout is not None:
            self._sparsesync.ensure(model)
            return self._sparsesync.applier.map.summary()
        return {}

    def sparsesync_apply(self, patch: Any = None, patch_path: Optional[str] = None) -> dict:
        _check_plugin()
        state = getattr(self, "_sparsesync", None)
        if state is None:
            state = self._sparsesync = WorkerState()
        return state.apply(self.model_runner.model, patch_bytes(patch, patch_path))

    def sparsesync_checksum(self) -> Optional[int]:
        state = getattr(self, "_sparsesync", None)
        if state is None or state.applier is None or not state.applier.holds_everything:
            return None
        return state.applier.model_checksum()


def register() -> None:
    """The ``vllm.general_plugins`` entry: registers the backend in vLLM's engine factories. vLLM logs and
    swallows a plugin's exceptions, so a failure is logged at error level, kept (the engine and the worker
    extension raise it at first use) and re-raised."""
    global _PLUGIN_ERROR
    try:
        try:
            from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory
        except ImportError:
            logger.info("sparsesync: this vLLM has no weight-transfer factory; use SparsesyncWorkerExtension")
            return
        if BACKEND not in WeightTransferEngineFactory._registry:
            WeightTransferEngineFactory.register_engine(BACKEND, __name__, "SparsesyncWeightTransferEngine")
        try:
            from vllm.distributed.weight_transfer.factory import WeightTransferTrainerFactory
        except ImportError:
            return
        if BACKEND not in WeightTransferTrainerFactory._registry:
            WeightTransferTrainerFactory.register_engine(BACKEND, __name__, "SparsesyncTrainerEngine")
    except BaseException as e:  # noqa: BLE001 - recorded, logged loudly and re-raised
        _PLUGIN_ERROR = e
        logger.error("sparsesync: registering the vLLM weight-transfer backend failed: %r", e, exc_info=True)
        raise
