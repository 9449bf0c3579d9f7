"""The recorded weight map and the mapped applier (sparsesync.integrations) against fake models whose
loaders do what vLLM's and SGLang's do: q/k/v fused into one parameter and gate/up into another, a
tensor-parallel rank that holds a row or column slice, tied and copied embeddings, and a quantizing loader
that must be detected as transformed. Workers must end bit-identical to what their own loader makes of the
trainer's tensors, after several patches, with every encoder and value mode."""

import math

import numpy as np
import pytest

import sparsesync as ss

torch = pytest.importorskip("torch", reason="sparsesync.integrations needs torch (pip install torch); skipped without it")

from sparsesync.integrations import MappedApplier, record_weight_map  # noqa: E402
from sparsesync.integrations import _bits  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
H, KV, I, V = 8, 4, 12, 10  # hidden, k/v rows, intermediate, vocab


def checkpoint_entries(tied=True, norm_dtype="f32"):
    e = [("model.embed_tokens.weight", "bf16", (V, H))]
    for l in range(2):
        p = f"model.layers.{l}."
        e += [(p + "self_attn.q_proj.weight", "bf16", (H, H)), (p + "self_attn.k_proj.weight", "bf16", (KV, H)),
              (p + "self_attn.v_proj.weight", "bf16", (KV, H)), (p + "self_attn.o_proj.weight", "bf16", (H, H)),
              (p + "mlp.gate_proj.weight", "bf16", (I, H)), (p + "mlp.up_proj.weight", "bf16", (I, H)),
              (p + "mlp.down_proj.weight", "bf16", (H, I)), (p + "input_layernorm.weight", norm_dtype, (H,))]
    e.append(("model.norm.weight", norm_dtype, (H,)))
    if not tied:
        e.append(("lm_head.weight", "bf16", (V, H)))
    return e


TORCH = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def _shard(n, rank, tp):
    assert n % tp == 0
    return slice(rank * n // tp, (rank + 1) * n // tp)


class FakeModel(torch.nn.Module):
    """A two-layer decoder shaped like vLLM's Llama: fused qkv and gate_up, row-parallel o/down (input dim
    sliced), column-parallel qkv/gate_up (output rows sliced), a vocab-parallel embedding. ``tied``: lm_head is
    the embedding's parameter; ``copy_head``: a separate lm_head loaded from embed_tokens.weight; ``quantize``:
    down_proj held as int8 with a per-tensor scale (a value-transforming loader)."""

    def __init__(self, tp=1, rank=0, tied=True, copy_head=False, quantize=False, device=DEVICE, norm_dtype="f32"):
        super().__init__()
        self.tp, self.rank, self.tied, self.copy_head, self.quantize = tp, rank, tied, copy_head, quantize
        P = lambda *shape, dt=torch.bfloat16: torch.nn.Parameter(torch.zeros(*shape, dtype=dt, device=device), requires_grad=False)
        self.embed_tokens = torch.nn.Module()
        self.embed_tokens.weight = P(V // tp, H)
        self.layers = torch.nn.ModuleList()
        for _ in range(2):
            m = torch.nn.Module()
            m.qkv_proj = torch.nn.Module()
            m.qkv_proj.weight = P((H + 2 * KV) // tp, H)
            m.o_proj = torch.nn.Module()
            m.o_proj.weight = P(H, H // tp)
            m.gate_up_proj = torch.nn.Module()
            m.gate_up_proj.weight = P(2 * I // tp, H)
            m.down_proj = torch.nn.Module()
            if quantize:
                m.down_proj.weight = P(H, I // tp, dt=torch.int8)
                m.down_proj.weight_scale = P(1, dt=torch.float32)
            else:
                m.down_proj.weight = P(H, I // tp)
            m.input_layernorm = torch.nn.Module()
            m.input_layernorm.weight = P(H, dt=TORCH[norm_dtype])
            self.layers.append(m)
        self.norm = torch.nn.Module()
        self.norm.weight = P(H, dt=TORCH[norm_dtype])
        self.lm_head = torch.nn.Module()
        if tied:
            self.lm_head.weight = self.embed_tokens.weight
        else:
            self.lm_head.weight = P(V // tp, H)

    def load_weights(self, weights):
        params = dict(self.named_parameters())
        tp, r = self.tp, self.rank
        for name, w in weights:
            if name == "lm_head.weight" and self.tied:
                continue
            if name == "model.embed_tokens.weight":
                params["embed_tokens.weight"].data.copy_(w[_shard(V, r, tp)])
                if self.copy_head:
                    params["lm_head.weight"].data.copy_(w[_shard(V, r, tp)])
                continue
            if name == "lm_head.weight":
                params["lm_head.weight"].data.copy_(w[_shard(V, r, tp)])
                continue
            if name == "model.norm.weight":
                params["norm.weight"].data.copy_(w)
                continue
            l = int(name.split(".")[2])
            tail = name.split(".", 3)[3]
            pre = f"layers.{l}."
            if tail in ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"):
                q = tail.split(".")[1][0]
                rows = {"q": H, "k": KV, "v": KV}[q]
                base = {"q": 0, "k": H // tp, "v": (H + KV) // tp}[q]
                params[pre + "qkv_proj.weight"].data.narrow(0, base, rows // tp).copy_(w[_shard(rows, r, tp)])
            elif tail == "self_attn.o_proj.weight":
                params[pre + "o_proj.weight"].data.copy_(w[:, _shard(H, r, tp)])
            elif tail in ("mlp.gate_proj.weight", "mlp.up_proj.weight"):
                shard = 0 if "gate" in tail else 1
                params[pre + "gate_up_proj.weight"].data.narrow(0, shard * I // tp, I // tp).copy_(w[_shard(I, r, tp)])
            elif tail == "mlp.down_proj.weight":
                part = w[:, _shard(I, r, tp)]
                if self.quantize:
                    scale = part.to(torch.float32).abs().max().clamp(min=1e-6) / 127
                    params[pre + "down_proj.weight"].data.copy_((part.to(torch.float32) / scale).round().clamp(-127, 127))
                    params[pre + "down_proj.weight_scale"].data.fill_(scale.item())
                else:
                    params[pre + "down_proj.weight"].data.copy_(part)
            elif tail == "input_layernorm.weight":
                params[pre + "input_layernorm.weight"].data.copy_(w)
            else:
                raise KeyError(name)


def trainer_weights(entries, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {n: (torch.randn(shape, generator=g) * 0.1).to(TORCH[dt]) for n, dt, shape in entries}


def step(weights, seed, density=0.2):
    """An optimizer-like step: a fraction of elements moved (a new dict; at least one change per tensor)."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for n, w in weights.items():
        f = w.to(torch.float32)
        mask = torch.rand(f.shape, generator=g) < density
        mask.view(-1)[0] = True
        out[n] = torch.where(mask, f * (1 + 0.05 * torch.randn(f.shape, generator=g)) + 1e-3, f).to(w.dtype)
    return out


def reference(weights, **kw):
    m = FakeModel(**kw)
    m.load_weights(list(weights.items()))
    return m


def bits_of(m):
    return {n: p.detach().cpu().contiguous().view(-1).view(torch.uint8).clone() for n, p in m.named_parameters()}


def assert_same_bits(worker, ref):
    a, b = bits_of(worker), bits_of(ref)
    assert a.keys() == b.keys()
    for n in a:
        assert torch.equal(a[n], b[n]), n


def diff(layout, base, new, **kw):
    order = lambda w: [w[n] for n in layout.names]
    return ss.diff(layout, None if base is None else order(base), order(new), **kw)


def make_worker(entries, weights, **kw):
    """A worker loaded from `weights` (as at engine start), with its map recorded and an applier."""
    m = reference(weights, **kw)
    layout = ss.Layout(entries)
    wmap = record_weight_map(m, layout)
    initial = list(weights.items()) if kw.get("quantize") else None
    return m, MappedApplier(wmap, m.load_weights, initial=initial)


# ---- the ulp step in torch, against the library ----

@pytest.mark.parametrize("dt", ["bf16", "f16", "f32", "f8_e4m3", "f8_e5m2"])
def test_ulp_ops_match_the_library(dt):
    bits = _bits.width(dt)
    word = {8: np.uint8, 16: np.uint16, 32: np.uint32}[bits]
    rng = np.random.default_rng(bits)
    n = 4096
    old = rng.integers(0, 2 ** bits, size=n, dtype=np.uint64).astype(word)
    new = old.copy()
    idx = rng.choice(n, size=n // 3, replace=False)
    new[idx] = rng.integers(0, 2 ** bits, size=idx.size, dtype=np.uint64).astype(word)
    new[idx[:50]] = old[idx[:50]] + word(1)  # small steps, wrapping at the top too
    new[0], old[0] = word(0), word(2 ** (bits - 1))  # +0 from -0
    layout = ss.Layout([("t", dt, (n,))])
    patch = ss.diff(layout, [old], [new], values="ulp")
    dec = ss._core.decode_changes(layout._native, patch)
    got = new.copy()
    got[:] = old
    for _, mode, offs, coded in dec["changes"]:
        assert mode == "ulp"
        o = _bits.widen(torch.from_numpy(old[offs.astype(np.int64)].astype(np.int64)), bits)
        c = _bits.from_numpy_words(coded)
        r = _bits.resolve(mode, o, c, bits)
        assert torch.equal(_bits.ulp_delta(o, r, bits), c)
        got[offs.astype(np.int64)] = _bits.to_numpy_words(r, bits)
    lib = old.copy()
    ss.apply(layout, patch, [lib])
    assert np.array_equal(got, new) and np.array_equal(lib, new)


# ---- recording ----

def test_records_fused_and_tied_parameters():
    entries = checkpoint_entries(tied=True)
    w = trainer_weights(entries)
    m = reference(w)
    before = bits_of(m)
    wmap = record_weight_map(m, ss.Layout(entries))
    assert_same_bits(m, reference(w))  # recording changes nothing
    assert all(b.equal(a) for a, b in zip(before.values(), bits_of(m).values()))
    st = {t.name: t.status for t in wmap.tensors}
    assert set(st.values()) == {"mapped"}, wmap.summary()
    assert wmap.holds_everything
    q = next(t for t in wmap.tensors if t.name.endswith("0.self_attn.k_proj.weight"))
    names = [wmap.params[int(p)][0] for p in q.copies[0].param]
    assert set(names) == {"layers.0.qkv_proj.weight"} and int(q.copies[0].param_start[0]) == H * H
    assert len(q.copies[0].start) == 1  # one run: k's rows are contiguous in the fused parameter


def test_small_budget_records_the_same_map():
    entries = checkpoint_entries(tied=False)
    w = trainer_weights(entries)
    a = record_weight_map(reference(w, tied=False), ss.Layout(entries))
    b = record_weight_map(reference(w, tied=False), ss.Layout(entries), budget_bytes=64)
    for x, y in zip(a.tensors, b.tensors):
        assert x.status == y.status and x.held == y.held
        for cx, cy in zip(x.copies, y.copies):
            assert torch.equal(cx.start, cy.start) and torch.equal(cx.param_start, cy.param_start)


def test_copied_head_lands_twice():
    entries = checkpoint_entries(tied=True)
    wmap = record_weight_map(reference(trainer_weights(entries), tied=False, copy_head=True), ss.Layout(entries))
    emb = wmap.tensors[0]
    assert emb.status == "mapped" and len(emb.copies) == 2 and emb.held == V * H


def test_tensor_parallel_slices_are_partly_absent():
    entries = checkpoint_entries()
    wmap = record_weight_map(reference(trainer_weights(entries), tp=2, rank=1), ss.Layout(entries))
    assert not wmap.holds_everything
    o = next(t for t in wmap.tensors if t.name.endswith("0.self_attn.o_proj.weight"))
    assert o.status == "mapped" and o.held == H * H // 2 and len(o.copies[0].start) == H  # a column slice: a run per row
    norm = next(t for t in wmap.tensors if t.name == "model.norm.weight")
    assert norm.held == H  # replicated on every rank


def test_quantizing_loader_is_transformed():
    entries = checkpoint_entries()
    wmap = record_weight_map(reference(trainer_weights(entries), quantize=True), ss.Layout(entries))
    st = {t.name: t.status for t in wmap.tensors}
    assert {n for n, s in st.items() if s == "transformed"} == {f"model.layers.{l}.mlp.down_proj.weight" for l in range(2)}
    assert not wmap.holds_everything  # until the applier holds checkpoint-order copies


def test_cast_to_another_dtype_is_transformed():
    entries = checkpoint_entries(norm_dtype="bf16")
    w = trainer_weights(entries)
    m = reference(w, norm_dtype="f32")  # the model holds the bf16 norms as f32: the real load casts
    wmap = record_weight_map(m, ss.Layout(entries))
    assert wmap.tensors[-1].status == "transformed" and "casts" in wmap.tensors[-1].reason


def test_a_loader_that_replaces_parameters_is_refused():
    class Replacing(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(4, dtype=torch.bfloat16), requires_grad=False)

        def load_weights(self, weights):
            for _, t in weights:
                self.w = torch.nn.Parameter(t.clone(), requires_grad=False)

    m = Replacing()
    with pytest.raises(ss.InvalidArgument, match="replaced parameter"):
        record_weight_map(m, ss.Layout([("w", "bf16", (4,))]))
    assert m.w.dtype == torch.bfloat16 and m.w.device.type == "cpu"


# ---- applying ----

ENCODERS = ["raw", "bitmap", "varint", "rice", "entropy", "auto"]


@pytest.mark.parametrize("encoder", ENCODERS)
@pytest.mark.parametrize("values", ["ulp", "absolute"])
def test_full_worker_follows_the_trainer_bit_for_bit(encoder, values):
    entries = checkpoint_entries(tied=True)
    layout = ss.Layout(entries)
    w = trainer_weights(entries)
    worker, app = make_worker(entries, w)
    for v in range(1, 4):
        nw = step(w, seed=v)
        rep = app.apply(diff(layout, w, nw, encoder=encoder, values=values, base_version=v - 1, target_version=v))
        assert rep["verified"] == "checksums" and rep["target_version"] == v and rep["not_held"] == 0
        assert rep["applied"] == rep["changed"] > 0
        w = nw
        assert_same_bits(worker, reference(w))
    assert app.checksum == ss.checksum(layout, [w[n] for n in layout.names])
    assert app.model_checksum() == app.checksum


@pytest.mark.parametrize("values", ["ulp", "absolute"])
@pytest.mark.parametrize("rank", [0, 1])
def test_tensor_parallel_rank_follows_its_slice(values, rank):
    entries = checkpoint_entries(tied=False)
    layout = ss.Layout(entries)
    w = trainer_weights(entries)
    worker, app = make_worker(entries, w, tp=2, rank=rank, tied=False)
    for v in range(1, 4):
        nw = step(w, seed=10 + v)
        rep = app.apply(diff(layout, w, nw, encoder="auto", values=values))
        assert rep["verified"] == "patch" and rep["not_held"] > 0 and rep["applied"] + rep["not_held"] == rep["changed"]
        w = nw
        assert_same_bits(worker, reference(w, tp=2, rank=rank, tied=False))


def test_copied_head_gets_both_copies():
    entries = checkpoint_entries(tied=True)
    layout = ss.Layout(entries)
    w = trainer_weights(entries)
    worker, app = make_worker(entries, w, tied=False, copy_head=True)
    nw = step(w, seed=3)
    app.apply(diff(layout, w, nw))
    assert_same_bits(worker, reference(nw, tied=False, copy_head=True))


@pytest.mark.parametrize("values", ["ulp", "absolute"])
def test_quantized_tensors_go_through_load_weights(values):
    entries = checkpoint_entries()
    layout = ss.Layout(entries)
    w = trainer_weights(entries)
    worker, app = make_worker(entries, w, quantize=True)
    assert app.holds_everything  # the transformed tensors are held through their copies
    for v in range(1, 3):
        nw = step(w, seed=20 + v)
        rep = app.apply(diff(layout, w, nw, values=values))
        assert rep["verified"] == "checksums"
        assert sorted(rep["reloaded"]) == sorted(f"model.layers.{l}.mlp.down_proj.weight" for l in range(2))
        w = nw
        assert_same_bits(worker, reference(w, quantize=True))


def test_transformed_without_a_copy_needs_a_full_transfer_first():
    entries = checkpoint_entries()
    layout = ss.Layout(entries)
    w = trainer_weights(entries)
    worker = reference(w, quantize=True)
    app = MappedApplier(record_weight_map(worker, layout), worker.load_weights)
    before = bits_of(worker)
    nw = step(w, seed=5)
    with pytest.raises(ss.InvalidArgument, match="full transfer"):
        app.apply(diff(layout, w, nw))
    assert all(torch.equal(before[n], b) for n, b in bits_of(worker).items())
    app.apply(diff(layout, None, nw, values="absolute"))
    assert_same_bits(worker, reference(nw, quantize=True))
    nw2 = step(nw, seed=6)
    app.apply(diff(layout, nw, nw2))
    assert_same_bits(worker, reference(nw2, quantize=True))


@pytest.mark.parametrize("kw", [{}, {"tp": 2, "rank": 1}])
def test_full_transfer_onto_anything(kw):
    entries = checkpoint_entries()
    layout = ss.Layout(entries)
    w = trainer_weights(entries)
    worker, app = make_worker(entries, trainer_weights(entries, seed=9), **kw)  # some other weights
    w["model.norm.weight"][:3] = 0  # zeros are not changes of a full transfer
    rep = app.apply(diff(layout, None, w, values="absolute"))
    assert_same_bits(worker, reference(w, **kw))
    assert rep["verified"] == ("checksums" if not kw else "patch")


def _flip(patch, at):
    b = bytearray(patch)
    b[at] ^= 0x10
    return bytes(b)


def test_errors_leave_parameters_untouched():
    entries = checkpoint_entries()
    layout = ss.Layout(entries)
    w = trainer_weights(entries)
    worker, app = make_worker(entries, w)
    nw = step(w, seed=1)
    patch = diff(layout, w, nw)
    before = bits_of(worker)

    def untouched():
        assert all(torch.equal(before[n], b) for n, b in bits_of(worker).items())

    with pytest.raises(ss.PayloadChecksum):
        app.apply(_flip(patch, len(patch) - 3))
    untouched()
    with pytest.raises(ss.Error):
        app.apply(patch[:-1])
    untouched()
    other = ss.Layout(entries[:-1])
    with pytest.raises(ss.LayoutMismatch):
        app.apply(ss.diff(other, [w[n] for n in other.names], [nw[n] for n in other.names]))
    untouched()
    with pytest.raises(ss.BaseMismatch):
        app.apply(diff(layout, step(w, seed=99), nw))  # made against another base
    untouched()
    app.checksum = None  # the base is then read from the parameters again, and still found wrong
    with pytest.raises(ss.BaseMismatch):
        app.apply(diff(layout, step(w, seed=99), nw))
    untouched()
    app.apply(patch)
    assert_same_bits(worker, reference(nw))


def test_slice_worker_rejects_entropy_coded_patches():
    entries = checkpoint_entries()
    layout = ss.Layout(entries)
    w = trainer_weights(entries)
    worker, app = make_worker(entries, w, tp=2, rank=0)
    before = bits_of(worker)
    with pytest.raises(ss.InvalidArgument, match="does not hold all"):
        app.apply(diff(layout, w, step(w, seed=2), encoder="entropy"))
    assert all(torch.equal(before[n], b) for n, b in bits_of(worker).items())


def test_failed_reload_restores_transformed_tensors():
    entries = checkpoint_entries()
    layout = ss.Layout(entries)
    w = trainer_weights(entries)
    worker, app = make_worker(entries, w, quantize=True)
    before = bits_of(worker)
    calls = []

    def failing(weights):
        weights = list(weights)
        calls.append([n for n, _ in weights])
        if len(calls) == 1:
            raise RuntimeError("loader failed")
        worker.load_weights(weights)

    app.load_weights = failing
    with pytest.raises(RuntimeError, match="loader failed"):
        app.apply(diff(layout, w, step(w, seed=4)))
    assert all(torch.equal(before[n], b) for n, b in bits_of(worker).items())
    app.load_weights = worker.load_weights
    nw = step(w, seed=4)
    app.apply(diff(layout, w, nw))
    assert_same_bits(worker, reference(nw, quantize=True))
