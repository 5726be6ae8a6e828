"""A program that exits while axrt work is queued never crashes.

Each test runs a short program many times, several at once, that leaves work
queued when it ends, so that the work completes while the interpreter shuts
down: runtime threads then release what Python lent (DLPack deleters), and
Python threads blocked in axrt calls come back. The size of the last work
changes from run to run, so that its completion sweeps across the shutdown.

AXRT_EXIT_RUNS sets the runs per test (default 8: each size of the last work
once), AXRT_EXIT_PARALLEL how many run at once (default 3), and AXRT_EXIT_HOGS
how many busy processes load the machine meanwhile (default 0); `make soak`
runs them long and loaded.
"""

import os
import subprocess
import sys
import textwrap

import pytest

import axrt
from conftest import build_elementwise

RUNS = int(os.environ.get("AXRT_EXIT_RUNS", "8"))
PARALLEL = int(os.environ.get("AXRT_EXIT_PARALLEL", "3"))
HOGS = int(os.environ.get("AXRT_EXIT_HOGS", "0"))

# Every program starts with this: argv is (the .axe path, the run's index).
PREAMBLE = """
import atexit, sys, threading
import numpy as np

# An exit handler that runs after axrt's and holds the GIL for a few
# milliseconds, as handlers of libraries imported before axrt may.
atexit.register(lambda: sum(range(200_000)))

import axrt
exe = axrt.load(sys.argv[1])
run = int(sys.argv[2])
# 8K to 1M elements (the most the executable takes): the queued work takes
# from about a millisecond to tens.
n = 1 << (13 + run % 8)
streams = [axrt.Stream() for _ in range(3)]
"""

# Calls on several streams whose inputs are lent numpy arrays: each loan's
# deleter runs on a stream's worker thread when its call completed. Exports
# of results stay alive too.
LENT_ARRAYS = """
a = np.ones(n, np.float32)
keep = []
for k in range(64):
    t = exe.main(a, a, stream=streams[k % 3])
    if k % 16 == 0:
        keep.append((np.from_dlpack(t), t.__dlpack__(max_version=(1, 1)), axrt.from_dlpack(a)))
"""

# As above, with inputs imported from numpy's own DLPack capsules: numpy's
# deleter, which takes the GIL itself, runs on the worker threads.
NUMPY_CAPSULES = """
a = np.ones(n, np.float32)
for k in range(64):
    exe.main(axrt.from_dlpack(a.__dlpack__(max_version=(1, 0))), axrt.from_dlpack(a.__dlpack__()),
             stream=streams[k % 3])
"""

# Daemon threads blocked in axrt calls (the GIL released) when the program
# ends: the work they wait for completes during the shutdown.
BLOCKED_THREADS = """
a = np.ones(n, np.float32)
waits = [axrt.device().synchronize]
for s in streams:
    for k in range(16):
        t = exe.main(a, a, stream=s)
    waits += [s.synchronize, s.record_event().synchronize, t.synchronize, t.numpy]
for wait in waits:
    threading.Thread(target=wait, daemon=True).start()
"""

# Uploads to the mock CUDA device: the lent arrays are released by host
# functions on the device's callback threads.
CUDA_UPLOADS = """
cuda = axrt.device("cuda:0")
exe = axrt.load(sys.argv[1], device=cuda)
a = np.ones(n, np.float32)
keep = []
for k in range(32):
    t = axrt.asarray(a, device=cuda)
    keep.append(exe.main(t, t))
"""


@pytest.fixture(scope="module")
def exe_path(tmp_path_factory, elementwise_bytes):
    path = tmp_path_factory.mktemp("exit") / "elementwise.axe"
    path.write_bytes(elementwise_bytes)
    return str(path)


@pytest.fixture(scope="module")
def cuda_exe_path(tmp_path_factory, cuda_mock):
    path = tmp_path_factory.mktemp("exit") / "elementwise_cuda.axe"
    path.write_bytes(build_elementwise(with_cuda=True))
    return str(path)


def start_hogs():
    spin = "import time\nend = time.time() + 600\nwhile time.time() < end: pass\n"
    return [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(HOGS)]


def run_many(program, exe):
    """Runs `program` RUNS times, PARALLEL at once; fails naming every run
    that did not exit cleanly."""
    code = textwrap.dedent(PREAMBLE) + textwrap.dedent(program)
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(axrt.__file__)))
    env = dict(os.environ, PYTHONPATH=package_dir)
    failures = []
    hogs = start_hogs()
    try:
        for first in range(0, RUNS, PARALLEL):
            batch = [(run, subprocess.Popen([sys.executable, "-c", code, exe, str(run)], env=env,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
                     for run in range(first, min(first + PARALLEL, RUNS))]
            for run, process in batch:
                try:
                    _, stderr = process.communicate(timeout=120)
                except subprocess.TimeoutExpired:
                    process.kill()
                    _, stderr = process.communicate()
                    failures.append(f"run {run}: hung at exit: {stderr.strip()[-300:]}")
                    continue
                if process.returncode != 0:
                    failures.append(f"run {run}: exit status {process.returncode}: {stderr.strip()[-300:]}")
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert not failures, f"{len(failures)} of {RUNS} runs failed:\n" + "\n".join(failures)


def test_exit_while_workers_release_lent_arrays(exe_path):
    run_many(LENT_ARRAYS, exe_path)


def test_exit_while_workers_release_numpy_capsules(exe_path):
    run_many(NUMPY_CAPSULES, exe_path)


def test_exit_while_threads_wait_in_axrt_calls(exe_path):
    run_many(BLOCKED_THREADS, exe_path)


def test_exit_while_cuda_callbacks_release_uploads(cuda_exe_path):
    run_many(CUDA_UPLOADS, cuda_exe_path)
