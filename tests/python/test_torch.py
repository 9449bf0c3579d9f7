"""CPU torch tensors cross through DLPack, zero-copy (skipped where torch is not installed)."""

import pytest

import sparsesync as ss

torch = pytest.importorskip("torch", reason="torch is not installed: the torch CPU tensor tests need it")


def model(seed):
    g = torch.Generator().manual_seed(seed)
    return {"w": torch.randn(64, 32, generator=g).to(torch.bfloat16), "b": torch.randn(32, generator=g),
            "h": torch.randn(9, generator=g).to(torch.float16)}


def test_state_dict_round_trip_in_place():
    base = model(0)
    new = {k: v.clone() for k, v in base.items()}
    new["w"][3] += 1.0
    new["b"][::5] *= 2
    layout = ss.Layout(base)
    assert layout.entries() == [("w", "bf16", (64, 32)), ("b", "f32", (32,)), ("h", "f16", (9,))]
    work = {k: v.clone() for k, v in base.items()}
    pointers = {k: v.data_ptr() for k, v in work.items()}
    ss.apply(layout, ss.diff(layout, base, new), work)
    assert {k: v.data_ptr() for k, v in work.items()} == pointers
    for k in base:
        assert torch.equal(work[k], new[k])
    assert ss.checksum(layout, work) == ss.checksum(layout, new)


def test_parameters_that_require_grad():
    net = torch.nn.Linear(8, 4).to(torch.bfloat16)
    layout = ss.Layout(net)
    before = {k: v.detach().clone() for k, v in net.named_parameters()}
    target = {k: v + 1 for k, v in before.items()}
    ss.apply(layout, ss.diff(layout, before, target), dict(net.named_parameters()))
    for k, v in net.named_parameters():
        assert torch.equal(v.detach(), target[k])


def test_cuda_tensors_go_to_the_gpu_codec_or_are_refused_clearly():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    layout = ss.Layout([("w", "f32", (4,))])
    a, b = torch.zeros(4, device="cuda"), torch.ones(4, device="cuda")
    if not ss.HAS_CUDA:
        with pytest.raises(ss.InvalidArgument, match="no CUDA support"):
            ss.diff(layout, [a], [b])
        return
    # Made on the GPU: the host codec's bytes (test_cuda_codec.py checks every encoder); applied on the GPU.
    patch = ss.diff(layout, [a], [b], encoder="rice", bucket_bytes=1 << 20)
    assert bytes(patch) == bytes(ss.diff(layout, [a.cpu()], [b.cpu()], encoder="rice", bucket_bytes=1 << 20))
    ss.apply(layout, patch, [a])
    assert torch.equal(a, b)
    # The checksum is computed where the tensors are, equal to the host's.
    assert ss.checksum(layout, [b]) == ss.checksum(layout, [b.cpu()])


@pytest.mark.skipif(not ss._core.has_tcp, reason="built without the TCP transport (Boost.Asio, OpenSSL)")
def test_republished_parameters_reuse_their_imports_until_they_move(tmp_path):
    """Parameters published again (the same objects, or new ``detach()`` views of them) skip their DLPack export; a
    parameter whose storage was replaced (``.data =``) or restrided in place is imported afresh, so what is
    published is always what the tensors hold now (the report's target checksum is the checksum of the caller's
    tensors at that moment)."""
    import threading

    key = tmp_path / "sync.key"
    ss.generate_key_file(key)
    net = torch.nn.Linear(64, 16).to(torch.bfloat16)
    layout = ss.Layout(net)
    params = dict(net.named_parameters())
    worker = {k: torch.zeros_like(v.detach()) for k, v in params.items()}
    failures = []
    with ss.Publisher(layout, key) as pub:
        def work():
            try:
                with ss.Subscriber(layout, worker, key, port=pub.port) as sub:
                    for _ in sub:
                        pass
            except Exception as e:  # reported by the assertion below
                failures.append(e)

        t = threading.Thread(target=work)
        t.start()
        pub.accept(timeout=60)
        reused = []

        def publish(version):
            reused.append(pub._reuse.same_as_last(layout._in_order(params)))
            report = pub.publish(version, params)
            assert report["acknowledged"] == 1
            assert report["target_checksum"] == ss.checksum(layout, params)

        publish(1)
        with torch.no_grad():
            net.weight[0, :5] += 1  # in place: the same storage
        publish(2)
        with torch.no_grad():
            net.weight.data = net.weight.data.clone()  # new storage: the old import would read the old values
            net.weight[1] += 1
        publish(3)
        with torch.no_grad():
            net.bias.as_strided_((8,), (2,))  # same address, other shape and strides
        with pytest.raises(ss.InvalidArgument, match="shape"):
            pub.publish(4, params)
        with torch.no_grad():
            net.bias.as_strided_((16,), (1,))
            net.bias[3] -= 1
        publish(4)
        publish(5)
        params = {k: v.detach() for k, v in net.named_parameters()}  # new objects, the same memory
        publish(6)
        params = {k: v.detach().clone() for k, v in net.named_parameters()}  # new memory
        with torch.no_grad():
            params["weight"][2] += 1
        publish(7)
        publish(8)
        pub.close()
        t.join(timeout=60)
    assert not failures, failures
    assert reused == [False, True, False, False, True, True, False, True]
    for k, v in params.items():
        assert torch.equal(worker[k], v.detach())
