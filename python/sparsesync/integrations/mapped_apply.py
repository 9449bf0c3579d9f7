"""Applies patches made in checkpoint coordinates straight into a model's live parameters, through a
recorded :class:`~sparsesync.integrations.weight_map.WeightMap`.

Memory is proportional to the changes: the decoded changes (flat offsets and coded values), their old and
new values and their parameter positions; never a full-shape staging tensor. The exceptions are
"transformed" checkpoint tensors (quantizing or value-changing loaders), which are kept as a checkpoint-
order copy (``shadow_device``, CPU by default) and delivered whole through ``load_weights`` when they
change, and the first full transfer of a model (a patch from zero), whose changes are the whole model.

What is verified (docs/INTEGRATIONS.md has the table):

* always: everything :func:`sparsesync.apply` checks on the patch itself (header, layout hash, section and
  payload checksums, structure, tiling, canonical coding), and that each change this worker resolves moves
  its element (a no-op change is a corrupt patch);
* where this worker holds every checkpoint element (no tensor-parallel slice; transformed tensors count as
  held through their copy): the patch's whole-model base checksum against this worker's weights (read once
  in bounded chunks, then carried from version to version) and its target checksum against what the
  changes build, before anything is written - the same guarantee as ``sparsesync.apply``;
* where it holds a slice: the patch is the sender's, bit for bit, but whether this worker's slice was the
  patch's base is not checked (a checksum of a slice is in no patch). ``values="absolute"`` patches do not
  depend on the base; ``ulp`` ones do.

Everything that can be checked is checked before the first write: an error leaves the parameters as they
were. The one step that runs after writes begin is ``load_weights`` for transformed tensors (run first); if
it raises, their copies are restored, ``load_weights`` is run again with the old values, and nothing else
is written.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Optional

import numpy as np
import torch

from .. import _core
from .._errors import BaseMismatch, InvalidArgument, NonCanonical, TargetMismatch
from . import _bits
from .weight_map import LoadWeights, TensorMap, WeightMap

_MASK64 = (1 << 64) - 1
_FLAG_FROM_ZERO = 1 << 2


def _from_zero(patch: Any) -> bool:
    """The header's from-zero flag (read to pick the base reader; decode_changes validates the header)."""
    b = bytes(memoryview(patch)[8:12])
    return len(b) == 4 and bool(int.from_bytes(b, "little") & _FLAG_FROM_ZERO)


class MappedApplier:
    """Applies sparsesync patches of a checkpoint layout to a model through its recorded weight map.

    ``load_weights`` is the model's loader, used only for transformed tensors. ``initial`` (optional): the
    checkpoint tensors the model was loaded from, ``(name, tensor)``, read only for the transformed ones
    (their checkpoint-order copies); without it those copies are made by the first full transfer. A patch
    that changes a transformed tensor before that raises :class:`~sparsesync.InvalidArgument`.
    ``chunk_elements`` bounds the reads of a whole-model checksum.
    """

    def __init__(self, weight_map: WeightMap, load_weights: Optional[LoadWeights] = None, *,
                 initial: Optional[Iterable[tuple[str, torch.Tensor]]] = None, shadow_device: Any = "cpu",
                 chunk_elements: int = 1 << 24) -> None:
        self.map = weight_map
        self.load_weights = load_weights
        self.shadow_device = torch.device(shadow_device)
        self.chunk_elements = int(chunk_elements)
        self.checksum: Optional[int] = None  # content checksum of the current weights, once verified
        self.version: Optional[int] = None
        self._shadows: dict[int, torch.Tensor] = {}
        self._index = {t.name: i for i, t in enumerate(self.map.tensors)}
        self._components = self._transformed_components()
        if any(t.status == "transformed" for t in self.map.tensors) and load_weights is None:
            raise InvalidArgument("MappedApplier: the map has transformed tensors, which need load_weights")
        if initial is not None:
            self.seed(initial)

    # ---- what this worker holds ----

    def _transformed_components(self) -> list[list[int]]:
        """Transformed tensors grouped by the parameters they reach: a changed one is reloaded with all the
        tensors that share a parameter with it (a layer's post-processing needs all of its inputs)."""
        ts = [i for i, t in enumerate(self.map.tensors) if t.status == "transformed"]
        parent = {i: i for i in ts}

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        owner: dict[int, int] = {}
        for i in ts:
            for p in self.map.tensors[i].params:
                if p in owner:
                    parent[find(i)] = find(owner[p])
                else:
                    owner[p] = i
        comps: dict[int, list[int]] = {}
        for i in ts:
            comps.setdefault(find(i), []).append(i)
        return list(comps.values())

    def seed(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Keeps checkpoint-order copies of the transformed tensors among ``named_tensors``."""
        for name, tensor in named_tensors:
            i = self._index.get(name)
            if i is None or self.map.tensors[i].status != "transformed":
                continue
            tm = self.map.tensors[i]
            bits = _bits.width(tm.dtype)
            t = tensor.detach()
            if t.numel() != tm.numel or t.element_size() * 8 != bits:
                raise InvalidArgument(f"seed: {name!r} has {t.numel()} elements of {t.element_size()} bytes, the layout {tm.numel} of {tm.dtype}")
            self._shadows[i] = _bits.int_view(t.contiguous(), bits).reshape(-1).to(self.shadow_device, copy=True)

    @property
    def holds_everything(self) -> bool:
        """Whether this worker holds every checkpoint element (then base and target checksums are verified)."""
        return all(t.numel == 0 or (t.status == "mapped" and t.held == t.numel) or (t.status == "transformed" and i in self._shadows)
                   for i, t in enumerate(self.map.tensors))

    def _param_words(self, p: int, bits: int) -> torch.Tensor:
        return _bits.int_view(self.map.params[p][1].data, bits).view(-1)

    def _gather(self, tm: TensorMap, pidx: torch.Tensor, poff: torch.Tensor) -> torch.Tensor:
        """Current patterns (int64, CPU) at parameter positions."""
        bits = _bits.width(tm.dtype)
        out = torch.empty(pidx.numel(), dtype=torch.int64)
        for p in torch.unique(pidx).tolist():
            sel = pidx == p
            words = self._param_words(p, bits)
            out[sel] = _bits.widen(words[poff[sel].to(words.device)], bits).cpu()
        return out

    def read(self, t: int, offset: int, count: int) -> np.ndarray:
        """``count`` elements of checkpoint tensor ``t`` from ``offset``, as unsigned words (numpy)."""
        tm = self.map.tensors[t]
        bits = _bits.width(tm.dtype)
        if t in self._shadows:
            return _bits.to_numpy_words(_bits.widen(self._shadows[t][offset:offset + count], bits), bits)
        if tm.status != "mapped" or tm.held != tm.numel:
            raise InvalidArgument(f"tensor {tm.name!r}: this worker does not hold all of it")
        held, pidx, poff = tm.copies[0].locate(torch.arange(offset, offset + count, dtype=torch.int64))
        return _bits.to_numpy_words(self._gather(tm, pidx, poff), bits)

    def model_checksum(self) -> int:
        """The content checksum of the checkpoint as this worker holds it (a full read, chunk by chunk)."""
        if not self.holds_everything:
            raise InvalidArgument("model_checksum: this worker does not hold every checkpoint element")
        total = 0
        for i, tm in enumerate(self.map.tensors):
            for a in range(0, tm.numel, self.chunk_elements):
                n = min(self.chunk_elements, tm.numel - a)
                total = (total + _core.chunk_checksum(self.read(i, a, n), tm.first + a)) & _MASK64
        return total

    # ---- applying ----

    def apply(self, patch: Any) -> dict[str, Any]:
        """Verifies ``patch`` and applies it to the live parameters; see the module doc for what is verified.
        Returns a report: versions, changes in the patch, elements written, those not held here, checksums."""
        from_zero = _from_zero(patch)
        full = self.holds_everything

        def base_reader(t: int, offset: int, count: int) -> np.ndarray:
            if from_zero:
                return np.zeros(count, dtype=_bits._NUMPY_WORD[_bits.width(self.map.tensors[t].dtype)])
            return self.read(t, offset, count)

        dec = _core.decode_changes(self.map.layout._native, patch, base_reader)
        if full and not from_zero:
            base = self.checksum if self.checksum is not None else self.model_checksum()
            if base != dec["base_checksum"]:
                raise BaseMismatch("this worker's weights are not the patch's base (whole-model checksum differs)")
        delta = 0
        writes: list[tuple[TensorMap, torch.Tensor, torch.Tensor]] = []  # (tensor, held offsets, new patterns)
        shadow_writes: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        applied = skipped = 0
        for t, mode, offsets, coded in dec["changes"]:
            tm = self.map.tensors[t]
            bits = _bits.width(tm.dtype)
            offs = torch.from_numpy(offsets.astype(np.int64))
            coded_t = _bits.from_numpy_words(coded)
            if tm.status == "transformed":
                if t not in self._shadows and not from_zero:
                    raise InvalidArgument(f"tensor {tm.name!r} is loaded through load_weights (transformed) and this worker has no "
                                          "checkpoint-order copy of it yet: pass initial= or send a full transfer first")
                old = torch.zeros_like(offs) if from_zero else _bits.widen(self._shadows[t][offs.to(self.shadow_device)], bits).cpu()
                held_offs, new = offs, _bits.resolve(mode, old, coded_t, bits)
                shadow_writes[t] = (held_offs, new) if t not in shadow_writes else (
                    torch.cat([shadow_writes[t][0], held_offs]), torch.cat([shadow_writes[t][1], new]))
            elif tm.status == "mapped":
                held, pidx, poff = tm.copies[0].locate(offs)
                held_offs = offs[held]
                old = torch.zeros_like(held_offs) if from_zero else self._gather(tm, pidx[held], poff[held])
                new = _bits.resolve(mode, old, coded_t[held], bits)
                writes.append((tm, held_offs, new))
                skipped += int(offs.numel() - held_offs.numel())
            else:
                skipped += int(offs.numel())
                continue
            if bool((new == old).any()):
                raise NonCanonical(f"tensor {tm.name!r}: a change leaves its element unchanged")
            applied += int(held_offs.numel())
            if full:
                flat = (held_offs + tm.first).numpy().astype(np.uint64)
                delta = (delta + _core.element_hash_delta(flat, _bits.to_numpy_words(old, bits), _bits.to_numpy_words(new, bits))) & _MASK64
        if full and (dec["base_checksum"] + delta) & _MASK64 != dec["target_checksum"]:
            raise TargetMismatch("the rebuilt weights differ from the sender's")
        if from_zero:
            for i, tm in enumerate(self.map.tensors):
                if tm.status == "transformed" and i not in shadow_writes and i not in self._shadows:
                    self._shadows[i] = torch.zeros(tm.numel, dtype=_bits._VIEW[_bits.width(tm.dtype)], device=self.shadow_device)
        reloaded = self._reload_transformed(shadow_writes, from_zero)
        if from_zero:
            self._zero_held()
        for tm, held_offs, new in writes:
            self._write(tm, held_offs, new)
        self.checksum = dec["target_checksum"] if full else None
        self.version = dec["target_version"]
        return {"base_version": dec["base_version"], "target_version": dec["target_version"], "changed": dec["changed"],
                "applied": applied, "not_held": skipped, "reloaded": reloaded,
                "verified": "checksums" if full else "patch", "target_checksum": dec["target_checksum"]}

    def _write(self, tm: TensorMap, offs: torch.Tensor, new: torch.Tensor) -> None:
        bits = _bits.width(tm.dtype)
        for copy in tm.copies:
            _, pidx, poff = copy.locate(offs)
            for p in torch.unique(pidx).tolist():
                sel = pidx == p
                words = self._param_words(p, bits)
                words.index_copy_(0, poff[sel].to(words.device), _bits.narrow(new[sel], bits).to(words.device))

    def _zero_held(self) -> None:
        """A full transfer's base is zero: every held element not among its changes must read zero."""
        for tm in self.map.tensors:
            if tm.status != "mapped":
                continue
            bits = _bits.width(tm.dtype)
            for copy in tm.copies:
                for p in torch.unique(copy.param).tolist():
                    sel = copy.param == p
                    starts, lengths = copy.param_start[sel], copy.length[sel]
                    pos = torch.repeat_interleave(starts - torch.cumsum(lengths, 0) + lengths, lengths) + torch.arange(int(lengths.sum()))
                    words = self._param_words(p, bits)
                    words.index_fill_(0, pos.to(words.device), 0)

    def _reload_transformed(self, shadow_writes: dict[int, tuple[torch.Tensor, torch.Tensor]], from_zero: bool) -> list[str]:
        if not shadow_writes:
            return []
        todo = [c for c in self._components if any(i in shadow_writes for i in c)]
        old = {i: self._shadows[i].clone() for c in todo for i in c if i in self._shadows}
        for i, (offs, new) in shadow_writes.items():
            tm = self.map.tensors[i]
            bits = _bits.width(tm.dtype)
            if from_zero or i not in self._shadows:
                self._shadows[i] = torch.zeros(tm.numel, dtype=_bits._VIEW[bits], device=self.shadow_device)
            self._shadows[i].index_copy_(0, offs.to(self.shadow_device), _bits.narrow(new, bits).to(self.shadow_device))
        names = []
        try:
            for c in todo:
                missing = [self.map.tensors[i].name for i in c if i not in self._shadows]
                if missing:
                    raise InvalidArgument(f"cannot reload {self.map.tensors[c[0]].name!r}: it shares parameters with {missing}, "
                                          "of which this worker has no checkpoint-order copy (pass initial=)")
                self.load_weights([self._as_checkpoint(i) for i in c])
                names += [self.map.tensors[i].name for i in c]
        except BaseException:
            for i, s in old.items():
                self._shadows[i] = s
            for i in list(self._shadows):
                if i in shadow_writes and i not in old:
                    del self._shadows[i]
            try:
                for c in todo:
                    if all(i in self._shadows for i in c):
                        self.load_weights([self._as_checkpoint(i) for i in c])
            finally:
                raise
        return names

    def _as_checkpoint(self, i: int) -> tuple[str, torch.Tensor]:
        tm = self.map.tensors[i]
        name, _, shape = self.map.layout.entries()[i]
        dev = self.map.params[min(tm.params)][1].device if tm.params else self.shadow_device
        return name, self._shadows[i].view(_bits.TORCH_DTYPES[tm.dtype][0]).reshape(shape).to(dev)
