"""A trainer (this process) publishes versions to two worker processes over TCP with a pre-shared key."""

import json
import os
import subprocess
import sys

import pytest

import sparsesync as ss
from sparsesync import _core
from conftest import MIXED, make_model, step

pytestmark = pytest.mark.skipif(not _core.has_tcp, reason="built without the TCP transport (Boost.Asio, OpenSSL)")


def test_trainer_and_two_workers(tmp_path):
    key = tmp_path / "sync.key"
    ss.generate_key_file(key)
    layout = ss.Layout(MIXED)
    here = os.path.dirname(__file__)
    with ss.Publisher(layout, key, port=0) as pub:
        workers = [subprocess.Popen([sys.executable, os.path.join(here, "tcp_worker_proc.py"), str(pub.port), str(key)],
                                    cwd=here, stdout=subprocess.PIPE, text=True) for _ in range(2)]
        try:
            for _ in workers:
                pub.accept(timeout=60)
            assert pub.wait_for_receivers(2, timeout=60)
            model = make_model(MIXED)
            sent = []
            for version in range(1, 5):
                if version > 1:
                    model = step(model, density=0.01, seed=version)
                report = pub.publish(version, model)
                assert report["acknowledged"] == 2 and report["version"] == version
                assert report["target_checksum"] == ss.checksum(layout, model)
                sent.append(report)
            assert [r["connected"] for r in pub.receivers()] == [True, True]
        finally:
            pub.close()
            outputs = [w.communicate(timeout=60)[0] for w in workers]
    for w, out in zip(workers, outputs):
        assert w.returncode == 0
        got = [json.loads(line) for line in out.splitlines()]
        assert [g["version"] for g in got] == [1, 2, 3, 4]
        assert got[0]["full"] and not any(g["full"] for g in got[1:])
        for g, s in zip(got, sent):
            assert g["checksum"] == g["recomputed"] == s["target_checksum"]
        assert [g["changed"] for g in got[1:]] == [s["changed"] for s in sent[1:]]


def test_wrong_key_is_refused(tmp_path):
    import threading

    import numpy as np

    ss.generate_key_file(tmp_path / "a.key")
    ss.generate_key_file(tmp_path / "b.key")
    layout = ss.Layout([("w", "bf16", (8,))])
    with ss.Publisher(layout, tmp_path / "a.key") as pub:
        accepted = []

        def accept():
            try:
                accepted.append(pub.accept(10))
            except ss.Error as e:
                accepted.append(e)

        t = threading.Thread(target=accept)
        t.start()
        with pytest.raises(ss.Error, match="auth|key|closed"):
            ss.Subscriber(layout, [np.zeros(8, np.uint16)], tmp_path / "b.key", port=pub.port, connect_timeout=5)
        t.join(20)
        assert len(accepted) == 1 and isinstance(accepted[0], ss.Error)
