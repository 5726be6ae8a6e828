"""Calls from several Python threads, and no growth over many calls."""

import gc
import sys
import threading

import numpy as np

import axrt
from conftest import floats


def test_calls_from_many_threads(elementwise):
    errors = []

    def worker(seed):
        try:
            stream = axrt.Stream() if seed % 2 else None
            for i in range(200):
                a, b = floats(257 + i, seed), floats(257 + i, seed + 100)
                y = elementwise.main(a, b, stream=stream)
                s, p = elementwise.both(y, b)
                np.testing.assert_array_equal(y.numpy(), a + b)
                np.testing.assert_array_equal(np.from_dlpack(p), (a + b) * b)
                np.testing.assert_array_equal(axrt.from_dlpack(s).numpy(), a + b + b)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_no_memory_growth_over_10000_calls(elementwise):
    cpu = axrt.device()
    a, b = floats(1024, 1), floats(1024, 2)
    out = np.empty(1024, np.float32)

    def calls(n):
        for _ in range(n):
            y = elementwise.main(a, b)
            np.from_dlpack(y)
            elementwise.main(y, b, out=out)
            axrt.from_dlpack(a)

    calls(1000)  # warm the pools and caches
    gc.collect()
    refs = (sys.getrefcount(a), sys.getrefcount(b), sys.getrefcount(out))
    in_use = cpu.pool_statistics()["bytes_in_use"]
    objects = len(gc.get_objects())
    rss = rss_bytes()
    calls(10000)
    gc.collect()
    assert (sys.getrefcount(a), sys.getrefcount(b), sys.getrefcount(out)) == refs
    assert cpu.pool_statistics()["bytes_in_use"] == in_use
    assert len(gc.get_objects()) <= objects + 100
    # 10,000 leaked results of 4 KiB would be 40 MiB; allow allocator noise.
    assert rss_bytes() - rss < 4 << 20


def test_interpreter_exits_with_work_and_exports_alive():
    """Queued calls, lent arrays and capsules still alive when Python exits:
    deleters then run during or after finalisation and must not touch it."""
    import os
    import subprocess

    code = """
import numpy as np, axrt
from conftest import build_elementwise
exe = axrt.load(build_elementwise())
keep = []
for i in range(50):
    a = np.ones(1 << 16, np.float32)
    stream = axrt.Stream()
    t = exe.main(a, a, stream=stream)
    keep.append((a, t, np.from_dlpack(t), t.__dlpack__(max_version=(1, 1)), axrt.from_dlpack(a),
                 exe.main(a, t, stream=stream)))
"""
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(axrt.__file__))))
    result = subprocess.run([sys.executable, "-c", code], cwd=here, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
