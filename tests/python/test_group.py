"""axrt.group on four CPU devices: every collective against numpy (float64
for the reductions), at sizes from 0 elements to several MiB, even and not;
arguments refused clearly; failure, abort and rebuilding on the rest."""
import os

# Before axrt makes its instance (the first device lookup).
os.environ.setdefault("AXRT_CPU_DEVICES", "4")

import numpy as np
import pytest

import axrt

ml_dtypes = pytest.importorskip("ml_dtypes")

N = 4
DEVICES = [f"cpu:{i}" for i in range(N)]
# 0, fewer than the members, uneven, up to the flat reduction's 64 KiB and
# past it, past one ring slice (1 MiB) and 16 MiB + a little of float32.
SIZES = [0, 1, 3, 5, 64, 1000, 4097, 16384, 16385, 65536 * 3 + 7, (1 << 20) + 3, (1 << 22) + 5]
DTYPES = {
    "float32": (np.float32, 2.0 ** -23),
    "float16": (np.float16, 2.0 ** -10),
    "bfloat16": (ml_dtypes.bfloat16, 2.0 ** -7),
    "int32": (np.int32, 0),
}


@pytest.fixture(scope="module", autouse=True)
def four_devices():
    if len([d for d in axrt.devices() if d.driver == "cpu"]) < N:
        pytest.skip("needs AXRT_CPU_DEVICES=4 before axrt first made its instance")


@pytest.fixture(scope="module")
def group():
    with axrt.group(DEVICES, label="test") as g:
        yield g


def inputs(n, dtype, seed, count=N):
    rng = np.random.default_rng(seed)
    if dtype == np.int32:
        return [rng.integers(-(2 ** 31), 2 ** 31, n, dtype=np.int64).astype(np.int32) for _ in range(count)]
    return [rng.uniform(-4, 4, n).astype(dtype) for _ in range(count)]


def on_members(arrays, devices=DEVICES):
    # Copies: on cpu:0 a numpy array is lent without one, and in-place
    # collectives would write into the test's inputs.
    return [axrt.asarray(a.copy(), device=d) for a, d in zip(arrays, devices)]


def reference(arrays, op):
    if arrays[0].dtype == np.int32:
        wide = np.stack([a.astype(np.int64) for a in arrays])
        if op == "sum":
            return (wide.sum(axis=0) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    wide = np.stack([a.astype(np.float64) for a in arrays])
    return {"sum": wide.sum(axis=0), "max": wide.max(axis=0), "min": wide.min(axis=0)}[op]


def check_reduced(got, arrays, op, eps):
    ref = reference(arrays, op)
    if arrays[0].dtype == np.int32 or op != "sum":
        np.testing.assert_array_equal(got.astype(ref.dtype), ref)
        return
    # Each of the N - 1 ring steps rounds its partial once.
    bound = (N - 1) * eps * np.stack([np.abs(a.astype(np.float64)) for a in arrays]).sum(axis=0)
    np.testing.assert_array_less(np.abs(got.astype(np.float64) - ref), bound + 1e-30)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_all_reduce_matches_numpy_at_every_size(group, dtype, op):
    np_dtype, eps = DTYPES[dtype]
    for n in SIZES if (dtype in ("float32", "int32") and op == "sum") else SIZES[:10]:
        arrays = inputs(n, np_dtype, seed=n)
        tensors = on_members(arrays)
        out = group.all_reduce(tensors, op=op)
        assert [t is u for t, u in zip(out, tensors)] == [True] * N  # in place
        results = [t.numpy() for t in out]
        for r in range(1, N):
            np.testing.assert_array_equal(results[r], results[0])  # identical on every member
        check_reduced(results[0], arrays, op, eps)


@pytest.mark.parametrize("n", [0, 1, 7, 4097, 65536 * 2 + 1, (1 << 20) + 1])
def test_all_gather_reduce_scatter_broadcast_match_numpy(group, n):
    arrays = inputs(n, np.float32, seed=11)
    gathered = [t.numpy() for t in group.all_gather(on_members(arrays))]
    for g in gathered:
        np.testing.assert_array_equal(g, np.concatenate(arrays))

    blocks = inputs(n * N, np.float32, seed=12)
    scattered = [t.numpy() for t in group.reduce_scatter(on_members(blocks), op="sum")]
    total = reference(blocks, "sum")
    for r, s in enumerate(scattered):
        np.testing.assert_allclose(s, total[r * n:(r + 1) * n], rtol=0, atol=1e-5 * 16)

    for root in range(N):
        out = [t.numpy() for t in group.broadcast(on_members(arrays), root=root)]
        for o in out:
            np.testing.assert_array_equal(o, arrays[root])


def test_send_recv_and_multidimensional_tensors(group):
    a = [np.arange(12, dtype=np.int64).reshape(3, 4) + 100 * r for r in range(N)]
    src = on_members(a)
    dst = on_members([np.zeros((3, 4), np.int64)] * N)
    pairs = [(src[r], dst[(r + 1) % N]) for r in range(N)]
    group.send_recv(pairs)
    for r in range(N):
        np.testing.assert_array_equal(dst[r].numpy(), a[(r - 1) % N])
    one = group.send(src[2], dst[0])
    np.testing.assert_array_equal(one.numpy(), a[2])

    x = inputs(6 * 5, np.float32, seed=3)
    g = group.all_gather(on_members([v.reshape(6, 5) for v in x]))
    assert tuple(g[0].shape) == (24, 5)
    rs = group.reduce_scatter(on_members([v.reshape(24, 5) for v in inputs(24 * 5, np.float32, 4)]))
    assert tuple(rs[3].shape) == (6, 5)


def test_members_in_any_order_and_subsets():
    order = ["cpu:3", "cpu:1"]
    with axrt.group(order) as g:
        assert [d.id for d in g.devices] == order
        arrays = inputs(333, np.float32, seed=5, count=2)
        out = g.all_reduce(on_members(arrays, order), op="max")
        np.testing.assert_array_equal(out[0].numpy(), np.maximum(arrays[0], arrays[1]))
        assert out[1].device.id == "cpu:1"
    with axrt.group(["cpu:2"]) as g:
        a = inputs(10, np.float32, seed=6, count=1)
        np.testing.assert_array_equal(g.all_reduce(on_members(a, ["cpu:2"]))[0].numpy(), a[0])


def test_bad_arguments_are_refused_clearly(group):
    with pytest.raises(ValueError, match="one per member"):
        group.all_reduce(on_members(inputs(4, np.float32, 1))[:3])
    with pytest.raises(ValueError, match="op must be"):
        group.all_reduce(on_members(inputs(4, np.float32, 1)), op="prod")
    mixed = on_members(inputs(4, np.float32, 1))
    mixed[2] = axrt.asarray(np.zeros(5, np.float32), device="cpu:2")
    with pytest.raises(ValueError, match="every member's tensor is alike"):
        group.all_reduce(mixed)
    with pytest.raises(ValueError, match="multiple of the group's 4 members"):
        group.reduce_scatter(on_members(inputs(6, np.float32, 1)))
    with pytest.raises(axrt.OutOfRangeError, match="root 4"):
        group.broadcast(on_members(inputs(4, np.float32, 1)), root=4)
    with pytest.raises(axrt.InvalidArgumentError, match="both member 0 and member 1"):
        axrt.group(["cpu:0", "cpu:0"])
    with pytest.raises(axrt.InvalidArgumentError, match="unknown backend"):
        axrt.group(["cpu:0"], backend="gloo")
    with pytest.raises(ValueError, match="timeout"):
        axrt.group(["cpu:0"], timeout=0)
    with pytest.raises(axrt.UnimplementedError, match="nccl"):
        axrt.group(["cpu:0"], backend="nccl")
    assert group.info()["state"] == "active"


def test_an_aborted_group_fails_fast_and_the_rest_go_on():
    # (Members failing on their own, by a failed stream or by a timeout, are
    # covered by the unit test unit.group_test, which can hold a stream.)
    g = axrt.group(DEVICES, label="tp", timeout=5)
    arrays = inputs(100, np.float32, seed=9)
    done = [t.numpy() for t in g.all_reduce(on_members(arrays))]
    g.abort(2, "device lost")
    info = g.info()
    assert info["state"] == "aborted" and info["failed_rank"] == 2
    with pytest.raises(axrt.AbortedError, match=r"member 2 \(cpu:2\) failed: device lost"):
        g.all_reduce(on_members(arrays))
    check_reduced(done[0], arrays, "sum", 2.0 ** -23)  # what completed stays
    g.close()
    g.close()  # twice is harmless
    with pytest.raises(ValueError, match="closed"):
        g.info()
    # Stop, restructure, resume on the three that remain.
    rest = ["cpu:0", "cpu:1", "cpu:3"]
    with axrt.group(rest) as again:
        a = inputs(100, np.float32, seed=10, count=3)
        got = again.all_reduce(on_members(a, rest))[0].numpy()
        check_reduced(got, a, "sum", 2.0 ** -23)


def test_abort_by_the_application_names_the_member():
    with axrt.group(DEVICES, label="app") as g:
        g.abort(1, "its host stopped answering")
        info = g.info()
        assert (info["state"], info["failed_rank"], info["failure_code"]) == ("aborted", 1, "ABORTED")
        assert "member 1 (cpu:1) failed: its host stopped answering" in info["failure"]
        with pytest.raises(axrt.AbortedError, match="its host stopped answering"):
            g.all_reduce(on_members(inputs(4, np.float32, 1)))
