"""Where each checkpoint element lands in a model's parameters, recorded by running the model's own loader.

A rollout engine's model does not hold the checkpoint's tensors as they are: q/k/v are fused into one
parameter, gate and up into another, a tensor-parallel rank holds a row or column slice, embeddings may be
tied. Rather than teach sparsesync every model, :func:`record_weight_map` runs the model's own
``load_weights`` once on *recording tensors*: each checkpoint tensor is fed with float64 values equal to
the global (checkpoint-order) indices of its elements (exact up to 2^53), while the parameters are
temporarily replaced by float64 tensors filled with NaN. Reading a parameter back says, element by
element, which checkpoint element the loader put there. The result compresses to runs:
``(checkpoint offset, length, parameter, parameter offset)``.

A checkpoint tensor is

* ``"mapped"`` when every element the loader wrote from it holds an exact index of that tensor, the
  parameter has the checkpoint's dtype (so the real load copies bits unchanged) and is contiguous, and every
  held element lands the same number of times (one, or more for a loader that copies a tensor twice);
* ``"transformed"`` when anything else happened (quantization, scaling, a cast to another dtype, a
  re-layout that computes values): changes to it are applied to a checkpoint-order copy and delivered as
  absolute values through ``load_weights`` (see :class:`~sparsesync.integrations.MappedApplier`);
* ``"absent"`` when the loader wrote none of its elements here (another pipeline stage's layer, a tensor the
  loader skips). Elements of a mapped tensor that land nowhere (another tensor-parallel rank's slice) are
  absent too.

Memory: parameters are recorded in groups of at most ``budget_bytes`` of float64 (a parameter larger than
the budget forms its own group); the parameters outside the group are replaced by meta tensors, which take
no memory and swallow the loader's writes. Every checkpoint tensor is fed once per group, one at a time, as
a float64 index tensor of its own shape. Peak: the group's float64 sentinels + the largest checkpoint
tensor in float64 + the loader's own temporaries. The live parameters are never written: their objects are
swapped out of the modules and put back, whatever happens.

Writes are attributed with a torch dispatch mode that records which storages an op mutates, so a loader
call only costs a scan of the parameters it wrote. Loaders that replace a parameter (``param.data = x``,
``setattr(module, name, new)``) instead of writing into it cannot be recorded and raise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional, Sequence

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .._errors import InvalidArgument
from .._layout import Layout
from . import _bits

LoadWeights = Callable[[Iterable[tuple[str, torch.Tensor]]], Any]


@dataclass
class Runs:
    """Runs of one checkpoint tensor that land in distinct places: sorted by checkpoint offset, disjoint."""

    start: torch.Tensor        # int64: checkpoint flat offset of each run's first element
    length: torch.Tensor       # int64
    param: torch.Tensor        # int64: index into WeightMap.params
    param_start: torch.Tensor  # int64: parameter flat offset of each run's first element

    def locate(self, offsets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """For checkpoint offsets (int64, CPU): (held mask, parameter index, parameter offset); the last two
        are meaningful where held."""
        if self.start.numel() == 0:
            z = torch.zeros_like(offsets)
            return torch.zeros_like(offsets, dtype=torch.bool), z, z
        i = (torch.searchsorted(self.start, offsets, right=True) - 1).clamp(min=0)
        held = (offsets >= self.start[i]) & (offsets < self.start[i] + self.length[i])
        return held, self.param[i], self.param_start[i] + (offsets - self.start[i])


@dataclass
class TensorMap:
    """Where one checkpoint tensor lands. ``copies[k]`` holds the k-th landing place of held elements."""

    name: str
    dtype: str
    numel: int
    first: int              # flat index of its first element in the checkpoint (the layout)
    status: str             # "mapped", "transformed" or "absent"
    copies: list[Runs] = field(default_factory=list)
    held: int = 0           # elements held (each counted once)
    params: set[int] = field(default_factory=set)  # parameters its elements (or values derived from them) reach
    reason: str = ""        # why "transformed"


@dataclass
class WeightMap:
    """The recorded map of a checkpoint layout onto a model's parameters."""

    layout: Layout
    params: list[tuple[str, torch.Tensor]]  # the live parameters (the objects the model held at recording)
    tensors: list[TensorMap]

    @property
    def holds_everything(self) -> bool:
        """Whether every checkpoint element is held by a mapped tensor (no slicing, nothing transformed)."""
        return all(t.status == "mapped" and t.held == t.numel for t in self.tensors if t.numel)

    def summary(self) -> dict[str, Any]:
        by = {"mapped": 0, "transformed": 0, "absent": 0}
        for t in self.tensors:
            by[t.status] += 1
        return {"tensors": by, "held_elements": sum(t.held for t in self.tensors), "numel": self.layout.numel,
                "runs": sum(len(c.start) for t in self.tensors for c in t.copies),
                "transformed": {t.name: t.reason for t in self.tensors if t.status == "transformed"}}


class _WriteTracker(TorchDispatchMode):
    """Records the storages that ops write (schema arguments marked as written: copy_, index_put_, fill_...)."""

    def __init__(self) -> None:
        super().__init__()
        self.written: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for i, a in enumerate(func._schema.arguments):
            if a.alias_info is not None and a.alias_info.is_write:
                t = args[i] if i < len(args) else kwargs.get(a.name)
                if isinstance(t, torch.Tensor) and t.device.type != "meta":
                    self.written.add(t.untyped_storage().data_ptr())
        return func(*args, **kwargs)


def _registrations(model: torch.nn.Module) -> list[tuple[torch.nn.Module, str, torch.nn.Parameter]]:
    """Every (module, attribute, parameter) slot, tied parameters included once per slot."""
    out = []
    for m in model.modules():
        for k, p in m._parameters.items():
            if p is not None:
                out.append((m, k, p))
    return out


def _stand_in(p: torch.nn.Parameter, data: torch.Tensor) -> torch.nn.Parameter:
    """A parameter of p's class and attributes (vLLM's weight_loader, shard info...) over other data."""
    cls = type(p) if isinstance(p, torch.nn.Parameter) else torch.nn.Parameter
    s = torch.nn.Parameter.__new__(cls, data, False)
    s.__dict__.update(p.__dict__)
    return s


def _groups(params: Sequence[torch.Tensor], budget_bytes: int) -> list[list[int]]:
    groups: list[list[int]] = []
    size = 0
    for i, p in enumerate(params):
        b = 8 * p.numel()
        if groups and size + b <= budget_bytes:
            groups[-1].append(i)
            size += b
        else:
            groups.append([i])
            size = b
    return groups


def _runs_of(pos: torch.Tensor, offs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Compresses (parameter offset, checkpoint offset) pairs, sorted by parameter offset, into runs where
    both advance by one: (param_start, ckpt_start, length)."""
    if pos.numel() == 0:
        e = torch.empty(0, dtype=torch.int64)
        return e, e, e
    brk = torch.ones(pos.numel(), dtype=torch.bool)
    brk[1:] = ((pos[1:] - pos[:-1]) != 1) | ((offs[1:] - offs[:-1]) != 1)
    starts = torch.nonzero(brk).flatten()
    ends = torch.cat([starts[1:], torch.tensor([pos.numel()])])
    return pos[starts], offs[starts], ends - starts


def _layers(start: torch.Tensor, length: torch.Tensor, param: torch.Tensor, pstart: torch.Tensor) -> Optional[list[Runs]]:
    """Splits a tensor's runs into copies (each disjoint in checkpoint offsets). None when the copies do not
    all cover the same elements (a loader that lands some elements more often than others)."""
    order = torch.argsort(start, stable=True)
    start, length, param, pstart = start[order], length[order], param[order], pstart[order]
    ends: list[int] = []
    members: list[list[int]] = []
    for j, (s, n) in enumerate(zip(start.tolist(), length.tolist())):
        for k, e in enumerate(ends):
            if e <= s:
                ends[k] = s + n
                members[k].append(j)
                break
        else:
            ends.append(s + n)
            members.append([j])

    def cover(ix: list[int]) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for j in ix:
            s, n = int(start[j]), int(length[j])
            if out and out[-1][1] == s:
                out[-1] = (out[-1][0], s + n)
            else:
                out.append((s, s + n))
        return out

    covers = [cover(m) for m in members]
    if any(c != covers[0] for c in covers[1:]):
        return None
    layers = []
    for m in members:
        ix = torch.tensor(m, dtype=torch.int64)
        layers.append(Runs(start[ix].contiguous(), length[ix].contiguous(), param[ix].contiguous(), pstart[ix].contiguous()))
    return layers


def record_weight_map(model: torch.nn.Module, layout: Any, load_weights: Optional[LoadWeights] = None, *,
                      budget_bytes: int = 1 << 30, device: Any = None) -> WeightMap:
    """Records where each element of the checkpoint ``layout`` lands when ``load_weights`` runs on ``model``.

    ``layout``: a :class:`~sparsesync.Layout` (or its entries) in checkpoint (HF) names, dtypes and shapes.
    ``load_weights``: the model's loader, called with lists of ``(name, tensor)``; ``model.load_weights`` by
    default. ``budget_bytes`` bounds the float64 sentinels alive at once; ``device`` is where sentinels and
    index tensors live (default: each parameter's own device for its sentinel, the first parameter's device
    for the index tensors). The model's parameters are unchanged afterwards.
    """
    layout = layout if isinstance(layout, Layout) else Layout(layout)
    if layout.numel >= 1 << 53:
        raise InvalidArgument("record_weight_map: the checkpoint has 2^53 elements or more (float64 indices are exact below)")
    load = load_weights if load_weights is not None else getattr(model, "load_weights", None)
    if load is None:
        raise InvalidArgument("record_weight_map: the model has no load_weights; pass load_weights=")
    regs = _registrations(model)
    params: list[tuple[str, torch.nn.Parameter]] = list(model.named_parameters())
    index_of = {id(p): i for i, (_, p) in enumerate(params)}
    feed_device = torch.device(device) if device is not None else (params[0][1].device if params else torch.device("cpu"))

    entries = layout.entries()
    firsts = []
    acc = 0
    for _, _, shape in entries:
        firsts.append(acc)
        acc += math.prod(shape)
    runs: list[list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]] = [[] for _ in entries]
    reached: list[set[int]] = [set() for _ in entries]
    bad: dict[int, str] = {}

    for group in _groups([p for _, p in params], budget_bytes):
        in_group = set(group)
        sentinels: dict[int, torch.Tensor] = {}
        stand_ins: dict[int, torch.nn.Parameter] = {}
        for i, (_, p) in enumerate(params):
            if i in in_group:
                dev = torch.device(device) if device is not None else p.device
                sentinels[i] = torch.full(tuple(p.shape), math.nan, dtype=torch.float64, device=dev)
                stand_ins[i] = _stand_in(p, sentinels[i])
            else:
                stand_ins[i] = _stand_in(p, torch.empty(tuple(p.shape), dtype=p.dtype, device="meta"))
        storage_of = {s.untyped_storage().data_ptr(): i for i, s in sentinels.items()}
        for m, k, p in regs:
            m._parameters[k] = stand_ins[index_of[id(p)]]
        try:
            for t, (name, _, shape) in enumerate(entries):
                n = math.prod(shape)
                if n == 0:
                    continue
                first = firsts[t]
                idx = torch.arange(first, first + n, dtype=torch.float64, device=feed_device).reshape(shape)
                tracker = _WriteTracker()
                with torch.no_grad(), tracker:
                    ret = load([(name, idx)])
                    if ret is not None and hasattr(ret, "__next__"):  # a loader written as a generator
                        for _ in ret:
                            pass
                del idx
                for m, k, p in regs:
                    if m._parameters.get(k) is not stand_ins[index_of[id(p)]]:
                        raise InvalidArgument(f"record_weight_map: loading {name!r} replaced parameter {k!r} of "
                                              f"{type(m).__name__} instead of writing into it; such loaders cannot be recorded")
                for ptr in tracker.written:
                    i = storage_of.get(ptr)
                    if i is None:
                        continue
                    s = sentinels[i].view(-1)
                    reached[t].add(i)
                    pos = torch.nonzero(~torch.isnan(s)).flatten()
                    vals = s[pos]
                    s.fill_(math.nan)
                    if t in bad:
                        continue
                    exact = (vals == torch.floor(vals)) & (vals >= first) & (vals < first + n)
                    if not bool(exact.all()):
                        bad[t] = f"the loader wrote values other than this tensor's indices into {params[i][0]!r}"
                        continue
                    pname, live = params[i]
                    want = _bits.TORCH_DTYPES[entries[t][1]][0]
                    if live.dtype != want:
                        bad[t] = f"{pname!r} is {live.dtype}, the checkpoint tensor {entries[t][1]} (the real load casts)"
                        continue
                    if not live.is_contiguous():
                        bad[t] = f"{pname!r} is not contiguous"
                        continue
                    pstart, cstart, length = _runs_of(pos.cpu(), vals.cpu().to(torch.int64) - first)
                    runs[t].append((cstart, length, torch.full_like(cstart, i), pstart))
        finally:
            for m, k, p in regs:
                m._parameters[k] = p
        del sentinels, stand_ins

    tensors = []
    for t, (name, dt, shape) in enumerate(entries):
        n = math.prod(shape)
        tm = TensorMap(name, dt, n, firsts[t], "absent", params=reached[t])
        if t in bad:
            tm.status, tm.reason = "transformed", bad[t]
        elif runs[t]:
            cat = [torch.cat([r[j] for r in runs[t]]) for j in range(4)]
            layers = _layers(*cat)
            if layers is None:
                tm.status, tm.reason = "transformed", "some elements land more often than others"
            else:
                tm.status, tm.copies = "mapped", layers
                tm.held = int(layers[0].length.sum())
        elif reached[t]:
            tm.status, tm.reason = "transformed", "the loader wrote no recognizable index"
        tensors.append(tm)
    return WeightMap(layout, params, tensors)
