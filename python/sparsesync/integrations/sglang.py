"""SGLang without a fork: a ``--custom-weight-loader`` entry that applies a sparsesync patch.

Server (every TP rank of the scheduler imports the loader by name)::

    python -m sglang.launch_server --model-path MODEL \\
        --custom-weight-loader sparsesync.integrations.sglang.load_patch

Trainer, each version (``engine`` is ``sglang.Engine`` or the HTTP client's equivalent)::

    maker = PatchMaker(layout, base=initial_weights)          # sparsesync.integrations.worker
    engine.update_weights_from_tensor(named_tensors=named_tensors(maker.make(weights)),
                                      load_format=LOAD_FORMAT)

SGLang's ``update_weights_from_tensor`` hands ``(model, named_tensors)`` to the function named by
``load_format`` when that name is listed in ``--custom-weight-loader``. The patch travels as one uint8
tensor named :data:`PATCH_TENSOR`; each rank records the map of the checkpoint onto its model at the first
patch (with the model's own ``load_weights``, the layout from the patch's layout section) and keeps it on the
model object. Guarantees are those of :class:`~sparsesync.integrations.MappedApplier`.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

import numpy as np
import torch

from .._errors import InvalidArgument
from .worker import WorkerState, env_int, patch_bytes

#: The ``load_format`` string (and the ``--custom-weight-loader`` value).
LOAD_FORMAT = "sparsesync.integrations.sglang.load_patch"
#: The name the patch tensor travels under.
PATCH_TENSOR = "sparsesync.patch"
_STATE = "_sparsesync_state"


def named_tensors(patch: bytes) -> list[tuple[str, torch.Tensor]]:
    """The ``named_tensors`` argument of ``update_weights_from_tensor`` for one patch."""
    return [(PATCH_TENSOR, torch.from_numpy(np.frombuffer(bytes(patch), dtype=np.uint8).copy()))]


def state_of(model: torch.nn.Module) -> WorkerState:
    """The sparsesync state kept on ``model`` (made at the first patch). Its recording budget comes from
    ``SPARSESYNC_RECORD_BUDGET_BYTES`` (default 1 GiB of float64 sentinels)."""
    s = getattr(model, _STATE, None)
    if s is None:
        s = WorkerState(budget_bytes=env_int("SPARSESYNC_RECORD_BUDGET_BYTES", 1 << 30))
        object.__setattr__(model, _STATE, s)
    return s


def load_patch(model: torch.nn.Module, named: Iterable[tuple[str, Any]]) -> Optional[dict]:
    """The custom weight loader: applies the patch in ``named`` to ``model``'s live parameters."""
    patch = None
    for name, tensor in named:
        if name != PATCH_TENSOR:
            raise InvalidArgument(f"sparsesync loader: unexpected tensor {name!r} (send named_tensors(patch))")
        patch = patch_bytes(tensor)
    if patch is None:
        raise InvalidArgument(f"sparsesync loader: no {PATCH_TENSOR!r} tensor")
    return state_of(model).apply(model, patch)


def seed_checkpoint(model: torch.nn.Module, named: Iterable[tuple[str, torch.Tensor]]) -> None:
    """A second custom loader (list it in ``--custom-weight-loader`` too): loads checkpoint tensors the
    usual way and keeps copies of those the map calls transformed, so that sparse patches can change them
    without a full transfer first."""
    named = list(named)
    model.load_weights(named)
    s = state_of(model)
    if s.applier is None:
        s.initial = list(s.initial or []) + [(n, t.detach().cpu()) for n, t in named]
    else:
        s.applier.seed(named)
