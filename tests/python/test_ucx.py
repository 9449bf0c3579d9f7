"""Publisher / Subscriber over UCX (transport="ucx"): a trainer and a worker on loopback, UCX limited to its
TCP transport (the only fabric every machine has), the key handshake as over TCP."""

import os
import threading

import numpy as np
import pytest

os.environ.setdefault("UCX_TLS", "tcp")  # read when this process first creates its UCX context

import sparsesync as ss  # noqa: E402
from conftest import MIXED, make_model, step  # noqa: E402

pytestmark = pytest.mark.skipif(not ss.HAS_UCX, reason="built without the UCX transport (UCX not found when built)")


def test_trainer_and_worker_over_ucx(tmp_path):
    key = tmp_path / "k"
    ss.generate_key_file(key)
    layout = ss.Layout(MIXED)
    model = make_model(MIXED)
    worker = [np.zeros_like(a) for a in model]
    got, failures = [], []
    with ss.Publisher(layout, key, transport="ucx", port=0) as pub:
        def work():
            try:
                got.extend(ss.Subscriber(layout, worker, key, transport="ucx", port=pub.port, receive_timeout=60))
            except Exception as e:
                failures.append(e)

        t = threading.Thread(target=work)
        t.start()
        pub.accept(timeout=60)
        sent = []
        for v in (1, 2, 3):
            if v > 1:
                model = step(model, density=0.01, seed=v)
            r = pub.publish(v, model)
            assert r["acknowledged"] == 1, failures
            sent.append(r)
        pub.close()
        t.join(60)
    assert not failures, failures
    assert [g["version"] for g in got] == [1, 2, 3]
    assert [g["checksum"] for g in got] == [s["target_checksum"] for s in sent]
    assert all(np.array_equal(a, b) for a, b in zip(model, worker))


def test_ucx_refuses_tls_and_needs_a_key(tmp_path):
    layout = ss.Layout([("w", "bf16", (8,))])
    with pytest.raises(ss.InvalidArgument, match="tls is for transport='tcp'"):
        ss.Publisher(layout, transport="ucx", tls=ss.TLS("ca.pem", "c.pem", "c.key"))
