"""Mutable inputs (format 1.2) and constants written from sources.

Functions whose inputs are marked mutable write the caller's tensor in place:
an axrt.Tensor, a writable numpy array or a writable DLPack producer is
updated without a copy, and read-only ones are refused. Constants given as a
callable, or as a memory-mapped or read-only array, are read only while the
file is written, one at a time.
"""

import gc
import os
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest

import axrt
from axrt.builder import Buffer, Builder, Scalar, ceildiv

ELEMENTWISE = [Buffer("a"), Buffer("b"), Buffer("out", access="write"), Scalar("n", "uint64")]
N = 64


def build_step():
    """step(state: mutable f32[n], x: f32[n]) -> y: state += x; y = state."""
    b = Builder(producer="test_mutable", producer_version="1")
    add = b.kernel("axrt_add_f32", b.kernel_library("axrt.cpu", min_version=1), ELEMENTWISE)
    f = b.function("step", inputs=[("state", "f32", ("n",)), ("x", "f32", ("n",))],
                   outputs=[("y", "f32", ("n",))], symbols={"n": 1 << 16}, mutable=("state",))
    n = f.sym("n")
    f.dispatch(add, grid=ceildiv(n, 4096), args=[f.input("state"), f.input("x"),
                                                 f.input("state"), n])
    f.copy(f.input("state"), f.output("y"), n * 4)
    return b, f


@pytest.fixture(scope="module")
def step():
    b, _ = build_step()
    return axrt.load(b.to_bytes()).step


# ---------------------------------------------------------------------------
# The builder


def test_mutable_inputs_are_declared_and_required():
    b, f = build_step()
    assert f.mutable == ("state",)
    data = b.to_bytes()
    assert data[10] == 4  # written as format 1.4; mutable inputs came with 1.2
    assert b"mutable-inputs.v1" in data
    fn = axrt.load(data).step
    assert fn.signature == "step(state: mutable f32[n], x: f32[n]) -> y: f32[n] where n <= 65536"
    assert fn.signature in repr(fn)
    assert [i["mutable"] for i in fn.inputs] == [True, False]
    assert fn.outputs[0]["mutable"] is False


def test_only_inputs_can_be_mutable():
    b = Builder()
    with pytest.raises(ValueError, match="mutable names 'y', which is an output"):
        b.function("f", inputs=[("x", "f32", (4,))], outputs=[("y", "f32", (4,))],
                   mutable=("y",))
    with pytest.raises(ValueError, match="mutable names 'z', which is not an input"):
        b.function("f", inputs=[("x", "f32", (4,))], mutable=("z",))
    with pytest.raises(TypeError, match="sequence of input names"):
        b.function("f", inputs=[("x", "f32", (4,))], mutable="x")


def test_only_mutable_inputs_are_written():
    b = Builder()
    add = b.kernel("axrt_add_f32", b.kernel_library("axrt.cpu", min_version=1), ELEMENTWISE)
    f = b.function("f", inputs=[("kv", "f32", (4,)), ("x", "f32", (4,))],
                   outputs=[("y", "f32", (4,))], mutable=["kv"])
    f.copy(f.input("x"), f.input("kv"), 16)
    f.fill(f.input("kv"), 16, np.float32(0))
    with pytest.raises(axrt.InvalidArgumentError, match="input 1 'x' is not mutable"):
        f.copy(f.input("kv"), f.input("x"), 16)
    with pytest.raises(axrt.InvalidArgumentError, match="input 1 'x' is not mutable"):
        f.fill(f.input("x"), 16)
    f.dispatch(add, 1, [f.input("kv"), f.input("x"), f.input("kv"), 4])
    b.to_bytes()
    f.dispatch(add, 1, [f.input("kv"), f.input("x"), f.input("x"), 4])
    with pytest.raises(axrt.InvalidArgumentError, match="(the input is not mutable)"):
        b.to_bytes()


# ---------------------------------------------------------------------------
# Calls


def test_an_axrt_tensor_is_updated_in_place(step):
    start = np.arange(N, dtype=np.float32)
    x = np.full(N, 2.0, np.float32)
    state = axrt.asarray(start.copy())  # on the CPU, a view of that copy
    address = np.from_dlpack(state).ctypes.data
    for call in range(1, 4):
        y = step(state, x)
        np.testing.assert_array_equal(state.numpy(), start + 2 * call)
        np.testing.assert_array_equal(y.numpy(), start + 2 * call)
    assert np.from_dlpack(state).ctypes.data == address


def test_a_numpy_array_is_updated_in_place(step):
    state = np.zeros(N, np.float32)
    x = np.arange(N, dtype=np.float32)
    address = state.ctypes.data
    for call in range(1, 4):
        step(state, x)
        # Visible when the call returns, in the caller's own array.
        np.testing.assert_array_equal(state, x * call)
    assert state.ctypes.data == address
    # A writable DLPack producer that is not a numpy array.

    class Producer:
        def __init__(self, array):
            self.array = array

        def __dlpack__(self, **kwargs):
            return self.array.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.array.__dlpack_device__()

    held = np.ones(N, np.float32)
    step(Producer(held), x)
    np.testing.assert_array_equal(held, x + 1)


def test_read_only_memory_is_refused_as_a_mutable_input(step):
    x = np.ones(N, np.float32)
    frozen = np.zeros(N, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(axrt.InvalidArgumentError, match=r"input 0 \('state'\) is read-only"):
        step(frozen, x)
    imported = axrt.from_dlpack(frozen)
    assert imported.read_only
    with pytest.raises(axrt.InvalidArgumentError, match="mutable input is written in place"):
        step(imported, x)
    # Read-only is fine where the function only reads.
    state = np.zeros(N, np.float32)
    step(state, frozen)
    with pytest.raises(TypeError, match="is mutable: pass an axrt.Tensor"):
        step([0.0] * N, x)


# ---------------------------------------------------------------------------
# Constants from sources


def bias_executable(data, **kwargs):
    b = Builder()
    add = b.kernel("axrt_add_f32", b.kernel_library("axrt.cpu", min_version=1), ELEMENTWISE)
    c = b.constant("bias", data, **kwargs)
    f = b.function("main", inputs=[("x", "f32", (N,))], outputs=[("y", "f32", (N,))])
    f.dispatch(add, 1, [f.input("x"), c, f.output("y"), N])
    return b


def test_a_callable_constant_is_called_once_per_write(tmp_path):
    calls = []

    def bias():
        calls.append(1)
        return np.arange(N, dtype=np.float32)

    b = bias_executable(bias, dtype="f32", shape=(N,))
    assert calls == []
    data = b.to_bytes()
    assert len(calls) == 1
    b.save(tmp_path / "a.axe")
    assert len(calls) == 2
    assert (tmp_path / "a.axe").read_bytes() == data
    y = axrt.load(data).main(np.ones(N, np.float32))
    np.testing.assert_array_equal(y.numpy(), np.arange(N, dtype=np.float32) + 1)
    with pytest.raises(TypeError, match="needs dtype= and shape="):
        Builder().constant("w", bias)


def test_a_callable_result_is_released_once_written():
    alive = []

    def first():
        array = np.ones(N, np.float32)
        alive.append(weakref.ref(array))
        return array

    def second():
        gc.collect()
        assert alive[0]() is None, "the first constant's array is still held"
        return np.ones(N, np.float32)

    b = Builder()
    b.constant("first", first, dtype="f32", shape=(N,))
    b.constant("second", second, dtype="f32", shape=(N,))
    b.to_bytes()
    assert len(alive) == 1


def test_a_failing_callable_leaves_no_file(tmp_path):
    class CheckpointError(Exception):
        pass

    def broken():
        raise CheckpointError("shard 3 is missing")

    path = tmp_path / "model.axe"
    path.write_bytes(b"previous")
    b = bias_executable(broken, dtype="f32", shape=(N,))
    with pytest.raises(CheckpointError, match="shard 3 is missing"):
        b.save(path)
    assert path.read_bytes() == b"previous"
    assert sorted(os.listdir(tmp_path)) == ["model.axe"]
    with pytest.raises(CheckpointError):
        b.to_bytes()

    wrong = bias_executable(lambda: np.zeros(N, np.float64), dtype="f32", shape=(N,))
    with pytest.raises(ValueError, match="returned 512 bytes"):
        wrong.save(path)
    assert sorted(os.listdir(tmp_path)) == ["model.axe"]


def test_memmaps_are_referenced_and_writable_arrays_copied(tmp_path):
    weights = tmp_path / "weights.bin"
    np.arange(N, dtype=np.float32).tofile(weights)
    mapped = np.memmap(weights, dtype=np.float32, mode="r+", shape=(N,))
    b = bias_executable(mapped)
    mapped[:] = 5.0  # read at write time: the file sees this
    mapped.flush()
    y = axrt.load(b.to_bytes()).main(np.zeros(N, np.float32))
    np.testing.assert_array_equal(y.numpy(), np.full(N, 5.0, np.float32))

    array = np.arange(N, dtype=np.float32)
    b = bias_executable(array)
    array[:] = 5.0  # copied when added: the file does not see this
    y = axrt.load(b.to_bytes()).main(np.zeros(N, np.float32))
    np.testing.assert_array_equal(y.numpy(), np.arange(N, dtype=np.float32))

    # A read-only, byte-swapped array is converted when written.
    swapped = np.arange(N, dtype=">f4")
    swapped.flags.writeable = False
    y = axrt.load(bias_executable(swapped).to_bytes()).main(np.zeros(N, np.float32))
    np.testing.assert_array_equal(y.numpy(), np.arange(N, dtype=np.float32))


MEMORY_CHILD = textwrap.dedent("""
    import resource, sys
    import numpy as np
    import axrt

    SIZE = 256 << 20
    path, out = sys.argv[1], sys.argv[2]
    mapped = np.memmap(path, dtype=np.uint8, mode="r", shape=(SIZE,))
    b = axrt.Builder()
    b.constant("mapped", mapped)
    b.constant("made", lambda: np.memmap(path, dtype=np.uint8, mode="r", shape=(SIZE,)),
               dtype="uint8", shape=(SIZE,))

    # From here, private writable memory may grow by 128 MiB at most.
    with open("/proc/self/status") as status:
        data_kib = next(int(l.split()[1]) for l in status if l.startswith("VmData:"))
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, (data_kib * 1024 + (128 << 20), hard))
    try:
        np.empty(SIZE, np.uint8)
        sys.exit(77)  # the limit does not bite here
    except MemoryError:
        pass
    b.save(out)
    print("saved")
""")


def test_saving_large_constants_needs_no_memory_for_them(tmp_path):
    source = tmp_path / "weights.bin"
    with open(source, "wb") as f:
        f.truncate(256 << 20)
        f.seek(12345)
        f.write(b"\x07")
    out = tmp_path / "big.axe"
    child = subprocess.run([sys.executable, "-c", MEMORY_CHILD, str(source), str(out)],
                           capture_output=True, text=True, timeout=300)
    if child.returncode == 77:
        pytest.skip("RLIMIT_DATA does not limit anonymous mappings on this kernel")
    assert child.returncode == 0, child.stderr
    assert "saved" in child.stdout
    exe = axrt.load(out, verify_checksums=True)
    assert exe.constant_bytes == 2 * (256 << 20)
