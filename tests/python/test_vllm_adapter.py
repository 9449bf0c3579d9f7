"""The vLLM adapter (sparsesync.integrations.vllm) against vLLM's documented call contracts, with fake vLLM
objects (both generations of the engine API, the trainer-side engine and its client, the worker extension,
the plugin entry), and against the real vLLM classes where vLLM is installed."""

import base64
import importlib.metadata
import logging
import sys
import types
from types import SimpleNamespace

import pytest

import sparsesync as ss

torch = pytest.importorskip("torch", reason="sparsesync.integrations needs torch (pip install torch); skipped without it")

from sparsesync.integrations import vllm as sv  # noqa: E402
from sparsesync.integrations.worker import PatchMaker  # noqa: E402
from test_weight_map import DEVICE, FakeModel, assert_same_bits, checkpoint_entries, reference, step, trainer_weights  # noqa: E402

try:
    import vllm  # noqa: F401
    HAVE_VLLM = True
except Exception:  # noqa: BLE001
    HAVE_VLLM = False
need_vllm = pytest.mark.skipif(not HAVE_VLLM, reason="vLLM is not installed here: the adapter is tested against its call contracts only")


def new_api_engine(model):
    cfg = SimpleNamespace(backend="sparsesync")
    vllm_config = SimpleNamespace(parallel_config=SimpleNamespace(world_size=1), model_config=SimpleNamespace())
    return sv.SparsesyncWeightTransferEngine(cfg, vllm_config, torch.device(DEVICE), model)


@pytest.mark.parametrize("form", ["bytes", "base64", "path"])
def test_engine_new_api_applies_updates(form, tmp_path):
    entries = checkpoint_entries()
    w = trainer_weights(entries)
    model = reference(w)
    engine = new_api_engine(model)
    engine.init_transfer_engine(engine.parse_init_info({"layout": [list(e) for e in entries]}))
    assert engine.state.applier is not None  # recorded at init, outside any update
    maker = PatchMaker(entries, base=w)
    for v in range(1, 3):
        nw = step(w, seed=v)
        patch = maker.make(nw)
        info = {"bytes": {"patch": patch}, "base64": {"patch": base64.b64encode(patch).decode()}}.get(form)
        if info is None:
            path = tmp_path / f"v{v}.patch"
            path.write_bytes(patch)
            info = {"patch_path": str(path)}
        engine.start_weight_update()
        engine.receive_weights(engine.parse_update_info(info))
        engine.finish_weight_update()
        assert engine.last_report["target_version"] == v and engine.last_report["verified"] == "checksums"
        w = nw
        assert_same_bits(model, reference(w))
    with pytest.raises(ValueError, match="Invalid update_info"):
        engine.parse_update_info({"patches": b""})


def test_engine_old_api_takes_the_model_from_load_weights():
    entries = checkpoint_entries()
    w = trainer_weights(entries)
    model = reference(w, tp=2, rank=1)
    engine = sv.SparsesyncWeightTransferEngine(SimpleNamespace(backend="sparsesync"), SimpleNamespace(world_size=2))
    engine.init_transfer_engine(engine.parse_init_info({}))  # the layout comes with the first patch
    maker = PatchMaker(entries, base=w)
    nw = step(w, seed=7)
    engine.receive_weights(engine.parse_update_info({"patch": maker.make(nw)}), load_weights=model.load_weights)
    assert engine.last_report["verified"] == "patch"
    assert_same_bits(model, reference(nw, tp=2, rank=1))
    with pytest.raises(RuntimeError, match="no model"):
        engine.receive_weights(engine.parse_update_info({"patch": maker.make(step(nw, seed=8))}), load_weights=lambda ws: None)


def test_failed_update_raises_and_keeps_weights():
    entries = checkpoint_entries()
    w = trainer_weights(entries)
    model = reference(w)
    engine = new_api_engine(model)
    engine.init_transfer_engine(engine.parse_init_info({"layout": entries}))
    patch = bytearray(PatchMaker(entries, base=w).make(step(w, seed=1)))
    patch[-2] ^= 1
    with pytest.raises(ss.PayloadChecksum):
        engine.receive_weights(engine.parse_update_info({"patch": bytes(patch)}))
    assert_same_bits(model, reference(w))


class FakeClient:
    """vLLM's VLLMWeightSyncClient protocol, forwarding to worker engines as vLLM's workers do."""

    def __init__(self, engines):
        self.engines, self.calls = engines, []

    def init_weight_transfer_engine(self, init_info):
        self.calls.append("init")
        for e in self.engines:
            e.init_transfer_engine(e.parse_init_info(init_info))

    def start_weight_update(self):
        self.calls.append("start")
        for e in self.engines:
            e.start_weight_update()

    def update_weights(self, update_info):
        self.calls.append("update")
        for e in self.engines:
            e.receive_weights(e.parse_update_info(update_info))

    def finish_weight_update(self, weight_version=None):
        self.calls.append("finish")
        for e in self.engines:
            e.finish_weight_update()


@pytest.mark.parametrize("inline_base64", [False, True])
def test_trainer_engine_drives_two_tensor_parallel_workers(inline_base64):
    entries = checkpoint_entries()
    w = trainer_weights(entries)
    models = [reference(w, tp=2, rank=r) for r in range(2)]
    client = FakeClient([new_api_engine(m) for m in models])
    trainer_model = {n: t.clone() for n, t in w.items()}
    info = sv.SparsesyncTrainerInitInfo(rank=0, inline_base64=inline_base64, worker_init={"layout": entries})
    assert info.backend == "sparsesync"
    engine = sv.SparsesyncTrainerEngine.trainer_init(info, client=client, source=trainer_model.items())
    for v in range(1, 3):
        nw = step(trainer_model, seed=30 + v)
        trainer_model.update(nw)
        engine.send_weights(base=w if v == 1 else None)
    assert client.calls == ["init"] + ["start", "update", "finish"] * 2
    for r, m in enumerate(models):
        assert_same_bits(m, reference(trainer_model, tp=2, rank=r))
    # A rank other than 0 iterates the source but sends nothing.
    quiet = FakeClient([])
    other = sv.SparsesyncTrainerEngine.trainer_init(sv.SparsesyncTrainerInitInfo(rank=1), client=quiet, source=trainer_model.items())
    other.send_weights()
    assert quiet.calls == []


def test_old_trainer_entry_sends_update_info():
    entries = checkpoint_entries()
    w = trainer_weights(entries)
    sent = []
    maker = PatchMaker(entries, base=w)
    sv.SparsesyncWeightTransferEngine.trainer_send_weights(iter(step(w, seed=2).items()), {"maker": maker, "send": sent.append})
    assert len(sent) == 1 and ss.inspect(sent[0]["patch"])["target_version"] == 1


def test_worker_extension():
    entries = checkpoint_entries()
    w = trainer_weights(entries)

    class Worker(sv.SparsesyncWorkerExtension):  # vLLM mixes the extension into its worker class
        def __init__(self, model):
            self.model_runner = SimpleNamespace(model=model)

    worker = Worker(reference(w, quantize=True))
    summary = worker.sparsesync_init(layout=entries)
    assert summary["tensors"]["transformed"] == 2
    maker = PatchMaker(entries)  # no base: the first patch is a full transfer, which also makes the copies
    report = worker.sparsesync_apply(maker.make(w))
    assert report["target_version"] == 1 and worker.sparsesync_checksum() == report["target_checksum"]
    nw = step(w, seed=3)
    worker.sparsesync_apply(maker.make(nw))
    assert_same_bits(worker.model_runner.model, reference(nw, quantize=True))


def _fake_vllm(monkeypatch, register_engine):
    factory = types.ModuleType("vllm.distributed.weight_transfer.factory")
    factory.WeightTransferEngineFactory = type("F", (), {"_registry": {}, "register_engine": classmethod(register_engine)})
    for name in ["vllm", "vllm.distributed", "vllm.distributed.weight_transfer"]:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "vllm.distributed.weight_transfer.factory", factory)
    return factory


@pytest.mark.skipif(HAVE_VLLM, reason="replaces vLLM's modules with fakes; the real ones are tested below")
def test_plugin_registers_the_backend(monkeypatch):
    def register_engine(cls, name, module, class_name):
        cls._registry[name] = (module, class_name)

    factory = _fake_vllm(monkeypatch, register_engine)
    sv.register()
    assert factory.WeightTransferEngineFactory._registry == {"sparsesync": ("sparsesync.integrations.vllm", "SparsesyncWeightTransferEngine")}
    sv.register()  # a second run (vLLM loads plugins in every process, sometimes twice) is harmless


@pytest.mark.skipif(HAVE_VLLM, reason="replaces vLLM's modules with fakes")
def test_plugin_failure_is_loud(monkeypatch, caplog):
    def register_engine(cls, name, module, class_name):
        raise RuntimeError("factory broken")

    _fake_vllm(monkeypatch, register_engine)
    monkeypatch.setattr(sv, "_PLUGIN_ERROR", None)
    with caplog.at_level(logging.ERROR, logger="sparsesync.vllm"), pytest.raises(RuntimeError, match="factory broken"):
        sv.register()
    assert any(r.levelno == logging.ERROR for r in caplog.records)
    with pytest.raises(RuntimeError, match="plugin failed to load"):
        new_api_engine(FakeModel())


def test_plugin_without_the_factory_is_quiet(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm.distributed.weight_transfer.factory", None)  # import fails
    sv.register()
    assert sv._PLUGIN_ERROR is None


def test_entry_point_is_declared():
    eps = importlib.metadata.entry_points()
    group = eps.select(group="vllm.general_plugins") if hasattr(eps, "select") else eps.get("vllm.general_plugins", [])
    assert {e.name: e.value for e in group}.get("sparsesync") == "sparsesync.integrations.vllm:register"


@need_vllm
def test_against_the_real_vllm_classes():
    base = pytest.importorskip("vllm.distributed.weight_transfer.base", reason="this vLLM has no weight-transfer engines")
    import inspect
    assert issubclass(sv.SparsesyncWeightTransferEngine, base.WeightTransferEngine)
    assert not inspect.isabstract(sv.SparsesyncWeightTransferEngine)
    if hasattr(base, "TrainerWeightTransferEngine"):
        assert issubclass(sv.SparsesyncTrainerEngine, base.TrainerWeightTransferEngine)
        assert not inspect.isabstract(sv.SparsesyncTrainerEngine)
    from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory
    sv.register()
    assert WeightTransferEngineFactory._registry["sparsesync"]() is sv.SparsesyncWeightTransferEngine
