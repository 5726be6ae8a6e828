"""Device groups across processes (axrt.init_group): 2 and 4 member
processes on 127.0.0.1, each with a CPU device. Every collective against
numpy, across element types and uneven sizes; the rendezvous' refusals
(a duplicate rank, a different world size, a member that never arrives);
a member killed (-9) or stopped, seen by the others within the stated time
and named; the survivors and a replacement in the group's next epoch."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import axrt

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import group_worker  # noqa: E402

ml_dtypes = pytest.importorskip("ml_dtypes")


free_port = group_worker.free_port


@pytest.fixture(scope="module", autouse=True)
def transport():
    missing = group_worker.transport_missing()
    if missing:
        pytest.skip(f"no transport between processes in this build: {missing}")


def launch(configs, timeout=60):
    """Starts one worker per config; returns the processes."""
    env = dict(os.environ)
    env.pop("AXRT_CPU_DEVICES", None)
    procs = []
    for config in configs:
        procs.append(subprocess.Popen([sys.executable, str(HERE / "group_worker.py"), json.dumps(config)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    return procs


def finish(procs, timeout=60):
    """Waits for every worker (killing those left after `timeout`); returns
    each one's events and return code."""
    deadline = time.monotonic() + timeout
    results = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        results.append((events, p.returncode, err))
    return results


def base(size, rank, **extra):
    return {"rendezvous": RENDEZVOUS, "size": size, "rank": rank, "timeout": 30, **extra}


RENDEZVOUS = None


@pytest.fixture(autouse=True)
def rendezvous():
    global RENDEZVOUS
    RENDEZVOUS = f"tcp://127.0.0.1:{free_port()}"
    yield RENDEZVOUS


# ---------------------------------------------------------------------------
# Collectives against numpy

def reduce_in_rank_order(xs, dtype_name, op):
    """Every element combined in rank order, each step rounded to the
    element type, as the contract says."""
    dtype = group_worker.dtype_of(dtype_name)
    if op == "sum":
        narrow = dtype_name in ("float16", "bfloat16")
        acc = xs[0].astype(np.float32) if narrow else xs[0].copy()
        for x in xs[1:]:
            acc = (acc + x.astype(np.float32)).astype(dtype).astype(np.float32) if narrow else acc + x
        return acc.astype(dtype)
    f = np.maximum if op == "max" else np.minimum
    acc = xs[0].copy()
    for x in xs[1:]:
        acc = f(acc, x)
    return acc


CASES = [
    ("all_reduce", "float32", 1, "sum", 0),
    ("all_reduce", "float32", 1000, "sum", 0),
    ("all_reduce", "float32", 65536 * 3 + 7, "sum", 0),  # past 64 KiB: in blocks
    ("all_reduce", "float16", 777, "sum", 0),
    ("all_reduce", "bfloat16", 40000, "sum", 0),
    ("all_reduce", "int32", 33, "max", 0),
    ("all_reduce", "int64", 5, "min", 0),
    ("all_reduce", "float64", 0, "sum", 0),
    ("all_reduce", "uint8", 9, "sum", 0),
    ("all_gather", "float32", 5, "sum", 0),
    ("all_gather", "int32", 70000, "sum", 0),
    ("reduce_scatter", "float32", 3, "sum", 0),
    ("reduce_scatter", "bfloat16", 20001, "max", 0),
    ("broadcast", "float16", 13, "sum", 1),
    ("broadcast", "float64", 100000, "sum", 0),
]


@pytest.mark.parametrize("size", [2, 4])
def test_collectives_across_processes_match_numpy(size, tmp_path):
    procs = launch([base(size, r, scenario="collectives", dir=str(tmp_path), cases=CASES) for r in range(size)])
    results = finish(procs, timeout=120)
    for events, code, err in results:
        assert code == 0, err
        assert events[-1]["event"] == "done", err
        assert events[-1]["info"]["state"] == "active"
        assert events[-1]["info"]["collectives"] == len(CASES) + 1
    for i, (kind, dtype_name, count, op, root) in enumerate(CASES):
        dtype = group_worker.dtype_of(dtype_name)
        n = count * (size if kind == "reduce_scatter" else 1)
        xs = [group_worker.make_input(r, i, dtype_name, n) for r in range(size)]
        for r in range(size):
            got = np.load(tmp_path / f"r{r}_{i}.npy").view(dtype)
            if kind == "all_reduce":
                want = reduce_in_rank_order(xs, dtype_name, op)
            elif kind == "all_gather":
                want = np.concatenate(xs)
            elif kind == "reduce_scatter":
                want = reduce_in_rank_order([x[r * count:(r + 1) * count] for x in xs], dtype_name, op)
            else:
                want = xs[root]
            assert got.shape == want.shape, (kind, dtype_name, count)
            assert got.tobytes() == want.tobytes(), (kind, dtype_name, count, r)
            if kind in ("all_reduce", "reduce_scatter") and op == "sum" and dtype_name.startswith("float"):
                exact = sum(x.astype(np.float64) for x in (xs if kind == "all_reduce"
                                                            else [x[r * count:(r + 1) * count] for x in xs]))
                np.testing.assert_allclose(got.astype(np.float64), exact, rtol=0, atol=size * 40 * 2.0 ** -7)


def test_results_equal_a_group_of_one_process(tmp_path):
    """The same reductions in one process (axrt.group on four CPU devices,
    run in a child with AXRT_CPU_DEVICES=4) give the same bits."""
    cases = [c for c in CASES if c[0] in ("all_reduce", "reduce_scatter")]
    procs = launch([base(4, r, scenario="collectives", dir=str(tmp_path), cases=cases) for r in range(4)])
    for events, code, err in finish(procs, timeout=120):
        assert code == 0, err
    script = f"""
import sys, numpy as np
sys.path.insert(0, {str(HERE)!r})
import axrt, group_worker
cases = {cases!r}
with axrt.group(["cpu:0", "cpu:1", "cpu:2", "cpu:3"]) as g:
    for i, (kind, dtype_name, count, op, root) in enumerate(cases):
        n = count * (4 if kind == "reduce_scatter" else 1)
        xs = [group_worker.make_input(r, i, dtype_name, n) for r in range(4)]
        outs = g.all_reduce(xs, op) if kind == "all_reduce" else g.reduce_scatter(xs, op)
        for r, t in enumerate(outs):
            np.save({str(tmp_path)!r} + f"/one_r{{r}}_{{i}}.npy", np.asarray(t.numpy()).view(np.uint8))
"""
    env = dict(os.environ, AXRT_CPU_DEVICES="4")
    subprocess.run([sys.executable, "-c", script], check=True, env=env, timeout=120)
    for i in range(len(cases)):
        for r in range(4):
            assert (np.load(tmp_path / f"r{r}_{i}.npy").tobytes() ==
                    np.load(tmp_path / f"one_r{r}_{i}.npy").tobytes()), (cases[i], r)


# ---------------------------------------------------------------------------
# The rendezvous

def test_file_rendezvous_and_torchrun_environment(tmp_path):
    port = free_port()
    procs = launch([{"rendezvous": f"file://{tmp_path}/meet", "size": 2, "rank": r, "scenario": "join_only"}
                    for r in range(2)])
    for events, code, err in finish(procs):
        assert events and events[0]["event"] == "joined", err
    env_procs = []
    for r in range(2):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r), WORLD_SIZE="2")
        config = {"rendezvous": "", "env": True, "scenario": "join_only"}
        env_procs.append(subprocess.Popen([sys.executable, str(HERE / "group_worker.py"), json.dumps(config)],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    for events, code, err in finish(env_procs):
        assert events and events[0]["event"] == "joined", err
        assert events[0]["size"] == 2


def test_duplicate_rank_is_refused():
    first = launch([base(2, 0, scenario="join_only", hold=3), base(2, 1, scenario="join_only", hold=3)])
    time.sleep(0.5)
    dup = launch([base(2, 1, scenario="join_only", timeout=2)])
    results = finish(first + dup, timeout=60)
    refused = [e for events, _, _ in results for e in events if e["event"] == "refused"]
    joined = [e for events, _, _ in results for e in events if e["event"] == "joined"]
    # One of the two rank-1 processes claimed the rank first.
    assert len(joined) == 2 and len(refused) == 1, results
    assert refused[0]["error"] == "AlreadyExistsError"
    assert "rank 1" in refused[0]["message"] and "taken" in refused[0]["message"]


def test_different_world_sizes_are_refused():
    results = finish(launch([base(2, 0, scenario="join_only", timeout=10),
                             base(3, 1, scenario="join_only", timeout=10)]))
    for events, _, err in results:
        assert events and events[0]["event"] == "refused", err
        assert events[0]["error"] == "InvalidArgumentError"
        assert "world size" in events[0]["message"]


def test_a_member_that_never_arrives_is_named_within_the_timeout():
    start = time.monotonic()
    results = finish(launch([base(3, 0, scenario="join_only", timeout=2),
                             base(3, 1, scenario="join_only", timeout=2)]))
    elapsed = time.monotonic() - start
    rank0 = results[0][0][0]
    assert rank0["event"] == "refused" and rank0["error"] == "DeadlineExceededError"
    assert "member(s) 2 of 3 did not arrive within 2.0 s" in rank0["message"]
    assert results[1][0][0]["event"] == "refused"
    assert elapsed < 15


def test_bad_arguments():
    with pytest.raises(ValueError, match="rank 2 is not in a world of 2"):
        axrt.init_group(rendezvous="tcp://127.0.0.1:1", rank=2, world_size=2)
    with pytest.raises(ValueError, match="rank and the world size"):
        os.environ.pop("RANK", None)
        os.environ.pop("WORLD_SIZE", None)
        axrt.init_group(rendezvous="tcp://127.0.0.1:1")
    with pytest.raises(ValueError, match="MASTER_ADDR"):
        os.environ.pop("MASTER_ADDR", None)
        axrt.init_group(rank=0, world_size=1)
    with pytest.raises(axrt.InvalidArgumentError, match="expected tcp://HOST:PORT"):
        axrt.init_group(rendezvous="udp://somewhere", rank=0, world_size=1)
    with pytest.raises(axrt.InvalidArgumentError, match="port of 1-65535"):
        axrt.init_group(rendezvous="tcp://127.0.0.1:99999", rank=0, world_size=1)
    with pytest.raises(TypeError):
        axrt.init_group(rendezvous=5, rank=0, world_size=1)
    with pytest.raises(ValueError, match="timeout"):
        axrt.init_group(rendezvous=RENDEZVOUS, rank=0, world_size=1, collective_timeout=-1)
    with axrt.init_group(rendezvous=RENDEZVOUS, rank=0, world_size=1) as member:
        x = np.arange(4, dtype=np.float32)
        assert member.all_reduce(x) is x and x.tolist() == [0, 1, 2, 3]
        with pytest.raises(TypeError, match="axrt.Tensor or a numpy array"):
            member.all_reduce([1, 2, 3])
        with pytest.raises(ValueError, match="op must be"):
            member.all_reduce(x, "prod")
        with pytest.raises(ValueError, match="not contiguous"):
            member.all_reduce(np.zeros((4, 4), np.float32)[:, 1])
        with pytest.raises(axrt.OutOfRangeError, match="root 3"):
            member.broadcast(x, 3)
        assert member.info()["rank"] == 0
    with pytest.raises(ValueError, match="closed"):
        member.all_reduce(x)


# ---------------------------------------------------------------------------
# Failure, and carrying on

def test_killed_member_is_named_and_survivors_carry_on_with_a_replacement():
    size = 3
    # The survivors rejoin the same id: member 0 opens the group's next
    # epoch, where the replacement for member 1 meets them.
    configs = [base(size, r, scenario="until_error", die=1, rejoin="", heartbeat_timeout=5)
               for r in range(size)]
    procs = launch(configs)
    time.sleep(0.5)
    replacement = launch([base(size, 1, scenario="rejoin", rejoin="")])
    results = finish(procs + replacement, timeout=90)
    killed_at = None
    for r in (0, 2):
        events, code, err = results[r]
        assert code == 0, err
        failed = [e for e in events if e["event"] == "failed"]
        assert failed, (events, err)
        assert failed[0]["info"]["failed_rank"] == 1
        assert "member 1" in failed[0]["message"] and "is gone" in failed[0]["message"]
        rejoined = [e for e in events if e["event"] == "rejoined"]
        assert rejoined and rejoined[0]["result"] == [6.0] * 5  # 1 + 2 + 3
    assert results[1][1] == -signal.SIGKILL
    events, code, err = results[3]
    assert code == 0 and events[-1]["event"] == "rejoined" and events[-1]["result"] == [6.0] * 5, err


def test_stopped_member_is_named_after_the_heartbeat_timeout():
    configs = [base(2, r, scenario="until_error", die=1, signal=int(signal.SIGSTOP), heartbeat_timeout=2)
               for r in range(2)]
    procs = launch(configs)
    start = time.monotonic()
    try:
        events, code, err = finish(procs[:1], timeout=60)[0]
    finally:
        procs[1].kill()
        procs[1].communicate()
    elapsed = time.monotonic() - start
    failed = [e for e in events if e["event"] == "failed"]
    assert failed, err
    assert failed[0]["info"]["failed_rank"] == 1
    assert "no heartbeat from it for 2.0 s" in failed[0]["message"]
    assert elapsed < 20
