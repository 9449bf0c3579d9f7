"""A trainer and a worker on cupy arrays (GPU 0), run by test_cuda_endpoints.py in a process of its own: this case
hung twice on an H100 (bench/results/gpu-test-runs/), and in a child a hang is a failure with every thread's stack
(faulthandler) instead of a stuck suite.  Usage: cupy_endpoints_proc.py KEY_FILE"""

import faulthandler
import sys
import threading

import cupy

import sparsesync as ss


def main(key):
    faulthandler.dump_traceback_later(45, exit=True)  # every thread's stack, then exit 1: the parent reports it
    layout = ss.Layout([("a", "bf16", (300, 200)), ("b", "f32", (77,))])
    rng = cupy.random.default_rng(3)
    trainer = [rng.integers(0, 1 << 16, (300, 200), dtype=cupy.uint16), rng.integers(0, 1 << 31, (77,), dtype=cupy.uint32)]
    worker = [cupy.zeros_like(t) for t in trainer]
    cupy.cuda.Device(0).synchronize()
    got, failures = [], []
    print("publisher", flush=True)
    with ss.Publisher(layout, key, device="cuda:0", ack_timeout=10) as pub:

        def work():
            try:
                got.extend(ss.Subscriber(layout, worker, key, port=pub.port, receive_timeout=30))
            except Exception as e:  # reported below, and at once (a failed publish waits for its ack timeout)
                failures.append(e)
                print("worker failed:", type(e).__name__, e, flush=True)

        t = threading.Thread(target=work)
        t.start()
        pub.accept(timeout=30)
        for v in (1, 2):
            if v == 2:
                trainer[0][::7, ::5] += 1
            print("publish", v, flush=True)
            r = pub.publish(v, trainer)
            if r["acknowledged"] != 1:
                print("publish", v, "not acknowledged:", r, pub.receivers(), failures, flush=True)
            assert r["acknowledged"] == 1, failures
        print("close", flush=True)
        pub.close()
        t.join(30)
    assert not failures, failures
    cupy.cuda.Device(0).synchronize()
    assert [r["version"] for r in got] == [1, 2]
    assert all(bool((a == b).all()) for a, b in zip(trainer, worker))
    assert ss.checksum(layout, worker) == got[-1]["checksum"]
    print("ok", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
