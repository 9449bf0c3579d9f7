"""The SGLang adapter (sparsesync.integrations.sglang) against SGLang's custom-weight-loader contract:
``update_weights_from_tensor(named_tensors, load_format=NAME)`` calls ``dynamic_import(NAME)(model,
named_tensors)`` on every TP rank when NAME is listed in ``--custom-weight-loader``; and against the real
SGLang where it is installed."""

import importlib

import pytest

import sparsesync as ss

torch = pytest.importorskip("torch", reason="sparsesync.integrations needs torch (pip install torch); skipped without it")

from sparsesync.integrations import sglang as sg  # noqa: E402
from sparsesync.integrations.worker import PatchMaker  # noqa: E402
from test_weight_map import assert_same_bits, bits_of, checkpoint_entries, reference, step, trainer_weights  # noqa: E402


def dynamic_import(path):
    """What SGLang does with load_format (sglang.srt.utils.dynamic_import)."""
    module, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def update_weights_from_tensor(model, named, load_format, custom_weight_loader):
    """SGLang's dispatch in ModelRunner.update_weights_from_tensor, reduced to the custom-loader branch."""
    assert load_format in custom_weight_loader
    return dynamic_import(load_format)(model, named)


def test_two_ranks_follow_the_trainer():
    entries = checkpoint_entries()
    w = trainer_weights(entries)
    ranks = [reference(w, tp=2, rank=r) for r in range(2)]
    maker = PatchMaker(entries, base=w, values="ulp")
    for v in range(1, 4):
        w = step(w, seed=40 + v)
        named = sg.named_tensors(maker.make(w))
        for m in ranks:
            rep = update_weights_from_tensor(m, named, sg.LOAD_FORMAT, [sg.LOAD_FORMAT])
            assert rep["target_version"] == v
    for r, m in enumerate(ranks):
        assert_same_bits(m, reference(w, tp=2, rank=r))


def test_seeded_transformed_tensors_take_sparse_patches():
    entries = checkpoint_entries()
    w = trainer_weights(entries)
    model = reference(w, quantize=True)
    update_weights_from_tensor(model, list(w.items()), "sparsesync.integrations.sglang.seed_checkpoint",
                               [sg.LOAD_FORMAT, "sparsesync.integrations.sglang.seed_checkpoint"])
    maker = PatchMaker(entries, base=w)
    nw = step(w, seed=50)
    rep = sg.load_patch(model, sg.named_tensors(maker.make(nw)))
    assert rep["verified"] == "checksums" and len(rep["reloaded"]) == 2
    assert_same_bits(model, reference(nw, quantize=True))


def test_bad_input_leaves_the_model_alone():
    entries = checkpoint_entries()
    w = trainer_weights(entries)
    model = reference(w)
    before = bits_of(model)
    with pytest.raises(ss.InvalidArgument, match="unexpected tensor"):
        sg.load_patch(model, [("model.norm.weight", w["model.norm.weight"])])
    patch = bytearray(PatchMaker(entries, base=w).make(step(w, seed=1)))
    patch[40] ^= 4
    with pytest.raises(ss.Error):
        sg.load_patch(model, sg.named_tensors(bytes(patch)))
    assert all(torch.equal(before[n], b) for n, b in bits_of(model).items())


def test_against_the_real_sglang():
    utils = pytest.importorskip("sglang.srt.utils", reason="SGLang is not installed here: the adapter is tested against its call contract only")
    assert utils.dynamic_import(sg.LOAD_FORMAT) is sg.load_patch
    server_args = pytest.importorskip("sglang.srt.server_args")
    assert "custom_weight_loader" in {f.name for f in __import__("dataclasses").fields(server_args.ServerArgs)}
