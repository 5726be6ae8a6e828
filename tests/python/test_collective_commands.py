"""Collective commands inside functions (format 1.4) on four CPU devices: one
file loaded on every member, each member calling it with its rank on its own
stream; the results against numpy (float64 for the reductions), ordering with
the commands around the collectives, the channel bindings refused clearly, and
a member that fails failing every member by name."""
import os

# Before axrt makes its instance (the first device lookup).
os.environ.setdefault("AXRT_CPU_DEVICES", "4")

import numpy as np
import pytest

import axrt
from axrt.builder import Builder

N = 4
DEVICES = [f"cpu:{i}" for i in range(N)]
BLOCK = 1000  # elements of one member's block (uneven for the ring's split)


@pytest.fixture(scope="module", autouse=True)
def four_devices():
    if len([d for d in axrt.devices() if d.driver == "cpu"]) < N:
        pytest.skip("needs AXRT_CPU_DEVICES=4 before axrt first made its instance")


def collective_file(channel_size=N, root=2):
    """step(x: f32[N * BLOCK]) -> every collective of x, through copies into
    outputs and the arena, so that each collective sits between commands that
    must run before and after it."""
    b = Builder("test")
    n = N * BLOCK
    f = b.function("step", [("x", "float32", [n])],
                   [("total", "float32", [n]), ("gathered", "float32", [N * BLOCK]),
                    ("block", "float32", [BLOCK]), ("most", "float32", [n]),
                    ("root", "float32", [n])],
                   arena_size=8 * n, channels={"tp": channel_size})
    x, total, gathered, block, most, rooted = (
        f.input(0), f.output(0), f.output(1), f.output(2), f.output(3), f.output(4))
    bytes_n = 4 * n
    f.copy(x, total, bytes_n)
    f.collective("all_reduce", "tp", "float32", n, total, total)          # in place
    f.collective("all_gather", "tp", "float32", BLOCK, x, gathered)       # x's first block
    f.collective("reduce_scatter", "tp", "float32", BLOCK, x, block)
    f.copy(x, f.arena(0, bytes_n), bytes_n)
    f.collective("all_reduce", "tp", "float32", n, f.arena(0, bytes_n), f.arena(bytes_n, bytes_n),
                 op="max")
    f.copy(f.arena(bytes_n, bytes_n), most, bytes_n)                      # after the collective
    f.collective("broadcast", "tp", "float32", n, x, rooted, root=root)
    return b.to_bytes()


@pytest.fixture(scope="module")
def members():
    data = collective_file()
    return [axrt.load(data, device=d) for d in DEVICES]


@pytest.fixture(scope="module")
def group():
    with axrt.group(DEVICES, label="tp", timeout=30) as g:
        yield g


def inputs(seed):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-4, 4, N * BLOCK).astype(np.float32) for _ in range(N)]


def test_every_member_gets_what_numpy_computes(members, group):
    xs = inputs(1)
    results = [members[r].step(axrt.asarray(xs[r], device=DEVICES[r]), channels=[(group, r)])
               for r in range(N)]
    wide = np.stack([x.astype(np.float64) for x in xs])
    for r, (total, gathered, block, most, root) in enumerate(results):
        total, gathered, block = np.asarray(total), np.asarray(gathered), np.asarray(block)
        np.testing.assert_allclose(total, wide.sum(axis=0), atol=1e-5 * 16)
        assert np.array_equal(total, np.asarray(results[0][0]))  # bit-identical on every member
        assert np.array_equal(gathered, np.concatenate([x[:BLOCK] for x in xs]))
        np.testing.assert_allclose(block, wide.sum(axis=0)[r * BLOCK:(r + 1) * BLOCK],
                                   atol=1e-5 * 16)
        assert np.array_equal(np.asarray(most), wide.max(axis=0).astype(np.float32))
        assert np.array_equal(np.asarray(root), xs[2])


def test_members_may_call_in_any_order_and_again(members, group):
    for seed in (2, 3):
        xs = inputs(seed)
        order = [3, 1, 0, 2] if seed == 2 else [0, 1, 2, 3]
        results = {}
        for r in order:
            results[r] = members[r].step(axrt.asarray(xs[r], device=DEVICES[r]),
                                         channels=[(group, r)])
        want = np.stack([x.astype(np.float64) for x in xs]).sum(axis=0)
        for r in range(N):
            np.testing.assert_allclose(np.asarray(results[r][0]), want, atol=1e-5 * 16)


def test_channel_bindings_are_checked_before_anything_runs(members, group):
    x = axrt.asarray(np.zeros(N * BLOCK, np.float32), device=DEVICES[1])
    with pytest.raises(axrt.InvalidArgumentError, match="has 1 channel.*binds 0"):
        members[1].step(x)
    with pytest.raises(axrt.InvalidArgumentError, match="member 0 of group 'tp' is not cpu:1"):
        members[1].step(x, channels=[(group, 0)])
    with pytest.raises(axrt.OutOfRangeError, match="rank 7"):
        members[1].step(x, channels=[(group, 7)])
    with pytest.raises(TypeError, match="axrt.Group"):
        members[1].step(x, channels=[("tp", 1)])
    with axrt.group(DEVICES[:2], label="pair") as pair:
        with pytest.raises(axrt.InvalidArgumentError,
                           match="channel 'tp' .* needs a group of 4 members; group 'pair' has 2"):
            members[1].step(x, channels=[(pair, 1)])
    with pytest.raises(axrt.UnimplementedError, match="debugging modes"):
        members[1].step(x, channels=[(group, 1)], check_finite=True)
    assert group.info()["state"] == "active"


def test_a_function_of_any_size_runs_on_two_members():
    with axrt.group(DEVICES[:2], label="two", timeout=30) as two:
        xs = inputs(4)[:2]
        # A broadcast from member 2 does not fit two members: refused before
        # anything of the call runs.
        exe = axrt.load(collective_file(channel_size=0), device=DEVICES[0])
        stream = axrt.Stream(device=DEVICES[0])
        with pytest.raises(axrt.OutOfRangeError, match="root 2 is not a member"):
            exe.step(axrt.asarray(xs[0], device=DEVICES[0]), channels=[(two, 0)], stream=stream)
        stream.synchronize()
        assert two.info()["collectives"] == 0
        data = collective_file(channel_size=0, root=1)
        exes = [axrt.load(data, device=d) for d in DEVICES[:2]]
        results = [exes[r].step(axrt.asarray(xs[r], device=DEVICES[r]), channels=[(two, r)])
                   for r in range(2)]
        # The outputs' shapes assume four members: the all-gather of two fills
        # the first half of `gathered`.
        for r in range(2):
            np.testing.assert_allclose(np.asarray(results[r][0]),
                                       xs[0].astype(np.float64) + xs[1], atol=1e-5 * 8)
            got = np.asarray(results[r][1])
            assert np.array_equal(got[:2 * BLOCK], np.concatenate([x[:BLOCK] for x in xs]))


def test_a_member_that_fails_fails_every_member_by_name(members):
    with axrt.group(DEVICES, label="doomed", timeout=30) as g:
        xs = inputs(5)
        streams = [axrt.Stream(device=d) for d in DEVICES]
        # Members 0 to 2 call; member 3 is lost before it does.
        for r in range(3):
            members[r].step(axrt.asarray(xs[r], device=DEVICES[r]), channels=[(g, r)],
                            stream=streams[r])
        g.abort(3, "its device was lost")
        for r in range(3):
            with pytest.raises(axrt.AbortedError, match=r"member 3 \(cpu:3\) failed: its device"):
                streams[r].synchronize()
        info = g.info()
        assert info["state"] == "aborted" and info["failed_rank"] == 3
        # A later call on the aborted group is refused at once, naming it.
        with pytest.raises(axrt.AbortedError, match="member 3"):
            members[3].step(axrt.asarray(xs[3], device=DEVICES[3]), channels=[(g, 3)],
                            stream=streams[3])
