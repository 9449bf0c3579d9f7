"""What a rollout worker keeps between versions, shared by the vLLM and SGLang adapters: the recorded map
of the checkpoint onto its model and the applier. Patches travel as bytes (inline in the engine's update
request, or a path on storage every worker reads); a trainer makes them with :class:`PatchMaker`."""

from __future__ import annotations

import base64
import os
from typing import Any, Iterable, Optional

import torch

from .. import _codec
from .._errors import InvalidArgument
from .._layout import Layout
from .mapped_apply import MappedApplier
from .weight_map import LoadWeights, record_weight_map


def patch_bytes(patch: Any = None, patch_path: Optional[str] = None) -> bytes:
    """A patch from an update request: bytes, base64 text (JSON transports), a uint8 tensor, or a file."""
    if patch_path is not None:
        with open(patch_path, "rb") as f:
            return f.read()
    if isinstance(patch, str):
        return base64.b64decode(patch, validate=True)
    if isinstance(patch, torch.Tensor):
        if patch.dtype != torch.uint8:
            raise InvalidArgument(f"patch tensor must be uint8, not {patch.dtype}")
        return patch.detach().cpu().contiguous().numpy().tobytes()
    if isinstance(patch, (bytes, bytearray, memoryview)):
        return bytes(patch)
    raise InvalidArgument("no patch: pass patch (bytes, base64 str or uint8 tensor) or patch_path")


class WorkerState:
    """The map and applier of one model; made at the first use (the layout may come with the first patch).

    ``layout``: checkpoint entries ``(name, dtype, shape)`` or None (taken from the first patch's layout
    section). ``initial``: the checkpoint tensors the model was loaded from, read only for transformed ones.
    """

    def __init__(self, layout: Any = None, *, budget_bytes: int = 1 << 30, shadow_device: Any = "cpu",
                 initial: Optional[Iterable[tuple[str, torch.Tensor]]] = None) -> None:
        self.layout = None if layout is None else (layout if isinstance(layout, Layout) else Layout(layout))
        self.budget_bytes = int(budget_bytes)
        self.shadow_device = shadow_device
        self.initial = initial
        self.applier: Optional[MappedApplier] = None
        self.model_id: Optional[int] = None

    def ensure(self, model: torch.nn.Module, load_weights: Optional[LoadWeights] = None, patch: Optional[bytes] = None) -> MappedApplier:
        if self.applier is not None:
            if self.model_id != id(model):
                raise InvalidArgument("sparsesync: this worker's map was recorded for another model object")
            return self.applier
        if self.layout is None:
            if patch is None:
                raise InvalidArgument("sparsesync: no checkpoint layout yet (pass it at init, or send a patch with a layout section)")
            self.layout = _codec.layout_of_patch(patch)
        if any(p.device.type == "meta" for p in model.parameters()):
            raise InvalidArgument("sparsesync: the model's parameters are on the meta device (a layerwise reload is open): "
                                  "record the map outside a checkpoint-format update")
        load = load_weights if load_weights is not None else model.load_weights
        wmap = record_weight_map(model, self.layout, load, budget_bytes=self.budget_bytes)
        self.applier = MappedApplier(wmap, load, initial=self.initial, shadow_device=self.shadow_device)
        self.initial = None
        self.model_id = id(model)
        return self.applier

    def apply(self, model: torch.nn.Module, patch: bytes, load_weights: Optional[LoadWeights] = None) -> dict[str, Any]:
        applier = self.ensure(model, load_weights, patch)
        report = applier.apply(patch)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return report


class PatchMaker:
    """Trainer side: keeps the last version sent (bit patterns, on ``snapshot_device``, CPU by default) and
    makes each next patch in checkpoint coordinates. The first patch is a full transfer unless ``base``
    (the weights the workers were started from) is given."""

    def __init__(self, layout: Any, *, encoder: str = "auto", values: str = "ulp", base: Any = None,
                 snapshot_device: Any = "cpu") -> None:
        self.layout = layout if isinstance(layout, Layout) else Layout(layout)
        self.encoder, self.values = encoder, values
        self.snapshot_device = torch.device(snapshot_device)
        self.version = 0
        self._last = None if base is None else self._snapshot(base)

    def _snapshot(self, named: Any) -> list[torch.Tensor]:
        d = dict(named)
        missing = [n for n in self.layout.names if n not in d]
        if missing:
            raise InvalidArgument(f"PatchMaker: no tensor named {missing[0]!r}")
        return [d[n].detach().to(self.snapshot_device, copy=True).contiguous() for n in self.layout.names]

    def make(self, named_tensors: Any) -> bytes:
        """The patch from the last version to ``named_tensors`` (checkpoint names), which becomes the last."""
        new = self._snapshot(named_tensors)
        values = "absolute" if self._last is None else self.values
        patch = _codec.diff(self.layout, self._last, new, encoder=self.encoder, values=values,
                            base_version=self.version, target_version=self.version + 1)
        self._last = new
        self.version += 1
        return bytes(patch)

    @staticmethod
    def layout_entries(named_tensors: Any) -> list[tuple[str, str, tuple[int, ...]]]:
        return Layout(list(dict(named_tensors).items())).entries()


def env_int(name: str, default: int) -> int:
    v = os.environ.get(name)
    return default if v in (None, "") else int(v)
