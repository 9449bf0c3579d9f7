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


@pytest.mark.parametrize("link_gbps,encoder", [(0.0, "auto"), (0.1, "auto"), (0.0, "entropy"), (0.0, "bitmap")])
def test_trainer_and_two_workers(tmp_path, link_gbps, encoder):
    key = tmp_path / "sync.key"
    ss.generate_key_file(key)
    layout = ss.Layout(MIXED)
    here = os.path.dirname(__file__)
    with ss.Publisher(layout, key, port=0, link_gbps=link_gbps, encoder=encoder) as pub:
        workers = [subprocess.Popen([sys.executable, os.path.join(here, "tcp_worker_proc.py"), str(pub.port), str(key)],
                                    cwd=here, stdout=subprocess.PIPE, text=True) for _ in range(2)]
        try:
            for _ in workers:
                pub.accept(timeout=60)
            assert pub.wait_for_receivers(2, timeout=60)
            model = make_model(MIXED)
            sent = []
            previous = None
            for version in range(1, 5):
                if version > 1:
                    previous, model = model, step(model, density=0.01, seed=version)
                report = pub.publish(version, model)
                assert report["acknowledged"] == 2 and report["version"] == version
                assert report["encoder"] == encoder
                if version > 1:  # the named encoder's own patch (less the layout, which travels in the handshake)
                    own = ss.diff(layout, previous, model, encoder=encoder, base_version=version - 1, target_version=version,
                                  link_gbps=link_gbps)
                    assert report["payload_bytes"] == len(bytes(own)) - len(layout.serialize())
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


def test_publisher_link_speed_is_checked(tmp_path):
    key = tmp_path / "sync.key"
    ss.generate_key_file(key)
    layout = ss.Layout(MIXED)
    with pytest.raises(ss.InvalidArgument, match="link_gbps"):
        ss.Publisher(layout, key, port=0, link_gbps=-1.0)
    with pytest.raises(ss.InvalidArgument, match="receivers"):
        ss.Publisher(layout, key, port=0, link_gbps=1.0, receivers="tpu")
    # A stated link weighs entropy into auto's choice: with one encoder named it would say nothing.
    with pytest.raises(ss.InvalidArgument, match="link_gbps"):
        ss.Publisher(layout, key, port=0, link_gbps=1.0, encoder="rice")
    with pytest.raises(ss.InvalidArgument, match="unknown encoder"):
        ss.Publisher(layout, key, port=0, encoder="zstd")


def _accept_in_thread(pub, timeout=10):
    """Starts pub.accept on a thread; the list gets its result: a receiver id or the ss.Error it raised."""
    import threading

    outcome = []

    def accept():
        try:
            outcome.append(pub.accept(timeout))
        except ss.Error as e:
            outcome.append(e)

    t = threading.Thread(target=accept)
    t.start()
    return t, outcome


def test_wrong_key_is_refused(tmp_path):
    import numpy as np

    ss.generate_key_file(tmp_path / "a.key")
    ss.generate_key_file(tmp_path / "b.key")
    layout = ss.Layout([("w", "bf16", (8,))])
    with ss.Publisher(layout, tmp_path / "a.key") as pub:
        t, accepted = _accept_in_thread(pub)
        with pytest.raises(ss.Error, match="auth|key|closed"):
            ss.Subscriber(layout, [np.zeros(8, np.uint16)], tmp_path / "b.key", port=pub.port, connect_timeout=5)
        t.join(20)
        assert len(accepted) == 1 and isinstance(accepted[0], ss.Error)


def _make_pki(d, ca_name="ca"):
    """A CA and server/client certificates signed by it (EC P-256, valid two days), with the openssl CLI."""
    import shutil
    import subprocess as sp

    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed (the TLS test makes its certificates with it)")
    run = lambda *a: sp.run(["openssl", *a], cwd=d, check=True, capture_output=True)  # noqa: E731
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    run("req", "-x509", *ec, "-keyout", f"{ca_name}.key", "-out", f"{ca_name}.pem", "-days", "2", "-subj", f"/CN={ca_name}")
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for who in ("server", "client"):
        run("req", *ec, "-keyout", f"{ca_name}-{who}.key", "-out", f"{who}.csr", "-subj", f"/CN={who}")
        run("x509", "-req", "-in", f"{who}.csr", "-CA", f"{ca_name}.pem", "-CAkey", f"{ca_name}.key", "-CAcreateserial",
            "-out", f"{ca_name}-{who}.pem", "-days", "2", "-extfile", "san.ext")
    return lambda who, server_name="": ss.TLS(d / f"{ca_name}.pem", d / f"{ca_name}-{who}.pem", d / f"{ca_name}-{who}.key",
                                              server_name)


def test_mutual_tls_without_a_key(tmp_path):
    import threading

    import numpy as np

    tls = _make_pki(tmp_path)
    layout = ss.Layout([("w", "bf16", (64, 32))])
    model = [np.arange(64 * 32, dtype=np.uint16).reshape(64, 32)]
    worker = [np.zeros((64, 32), np.uint16)]
    got = []
    with ss.Publisher(layout, tls=tls("server")) as pub:
        t = threading.Thread(target=lambda: got.extend(ss.Subscriber(layout, worker, tls=tls("client", "127.0.0.1"), port=pub.port)))
        t.start()
        pub.accept(timeout=30)
        assert pub.publish(1, model)["acknowledged"] == 1
        pub.close()
        t.join(30)
    assert [r["version"] for r in got] == [1] and np.array_equal(worker[0], model[0])


def test_tls_certificate_from_another_ca_is_refused(tmp_path):
    import numpy as np

    (tmp_path / "ours").mkdir()
    (tmp_path / "rogue").mkdir()
    ours, rogue = _make_pki(tmp_path / "ours"), _make_pki(tmp_path / "rogue", "rogue")
    layout = ss.Layout([("w", "bf16", (8,))])
    with ss.Publisher(layout, tls=ours("server")) as pub:
        t, outcome = _accept_in_thread(pub)
        with pytest.raises(ss.Error):
            ss.Subscriber(layout, [np.zeros(8, np.uint16)], tls=rogue("client"), port=pub.port, connect_timeout=5)
        t.join(20)
        assert len(outcome) == 1 and isinstance(outcome[0], ss.Error), outcome


def test_no_authentication_is_refused(tmp_path):
    with pytest.raises(ss.InvalidArgument, match="no authentication"):
        ss.Publisher([("w", "bf16", (8,))])
