"""Loading executables and calling their functions."""

import os
import pathlib

import numpy as np
import pytest

import axrt
from conftest import build_elementwise, floats


def test_devices_and_drivers():
    devices = axrt.devices()
    assert devices[0].id == "cpu:0"
    assert axrt.device() is axrt.device("cpu:0") is devices[0]
    cpu = devices[0]
    assert cpu.type == "cpu" and cpu.driver == "cpu" and cpu.compute_units >= 1
    assert cpu.compute_capability is None
    assert cpu.__dlpack_device__() == (1, 0)
    assert "cpu:0" in repr(cpu)
    names = [d["name"] for d in axrt.drivers()]
    assert "cpu" in names
    with pytest.raises(axrt.NotFoundError, match="cpu:0") as info:
        axrt.device("tpu:7")
    assert info.value.code == "NOT_FOUND"


def test_load_from_path_pathlike_and_bytes(tmp_path, elementwise_bytes):
    path = tmp_path / "add.axe"
    path.write_bytes(elementwise_bytes)
    for source in (str(path), path, elementwise_bytes, bytearray(elementwise_bytes),
                   memoryview(elementwise_bytes)):
        exe = axrt.load(source)
        assert exe.device is axrt.device()
        assert sorted(exe) == ["both", "main"]
    assert axrt.load(path).name == str(path)
    assert axrt.load(elementwise_bytes).name == "<memory>"
    assert axrt.load(path, device="cpu:0").producer == ("axrt-tests", "1")
    with pytest.raises(TypeError, match="path"):
        axrt.load(12)


def test_functions_by_attribute_and_item(elementwise):
    assert elementwise.main is elementwise["main"] is elementwise.functions["main"]
    assert "main" in elementwise and "nope" not in elementwise and len(elementwise) == 2
    assert elementwise.main.signature == "main(a: f32[n], b: f32[n]) -> out: f32[n] where n <= 1048576"
    assert elementwise.both.signature.startswith("both(a: f32[n], b: f32[n]) -> (sum: f32[n], product: f32[n])")
    assert elementwise.main.signature in repr(elementwise)
    assert elementwise.main.signature in repr(elementwise.main)
    assert elementwise.main.inputs == [
        {"name": "a", "dtype": "f32", "shape": ("n",), "mutable": False},
        {"name": "b", "dtype": "f32", "shape": ("n",), "mutable": False}]
    with pytest.raises(AttributeError, match="has no function 'nope' .it has: main, both"):
        elementwise.nope
    assert not hasattr(elementwise, "nope")
    with pytest.raises(axrt.NotFoundError, match="nope"):
        elementwise["nope"]


def test_call_returns_tensor_on_device(elementwise):
    a, b = floats(1000, 1), floats(1000, 2)
    y = elementwise.main(a, b)
    assert isinstance(y, axrt.Tensor)
    assert y.shape == (1000,) and y.dtype == np.float32 and y.device is elementwise.device
    assert y.dtype_name == "f32" and y.ndim == 1 and y.size == 1000 and y.nbytes == 4000
    np.testing.assert_array_equal(y.numpy(), a + b)
    s, p = elementwise.both(a, b)
    np.testing.assert_array_equal(s.numpy(), a + b)
    np.testing.assert_array_equal(p.numpy(), a * b)
    # Tensors feed later calls without leaving the device.
    np.testing.assert_array_equal(elementwise.main(y, y).numpy(), (a + b) * 2)


def test_call_takes_lists_scalars_and_noncontiguous(elementwise):
    np.testing.assert_array_equal(elementwise.main([1, 2, 3], [4.0, 5.0, 6.0]).numpy(), [5, 7, 9])
    base = floats(2000)
    a = base[::2]  # strided: copied to a contiguous array first
    np.testing.assert_array_equal(elementwise.main(a, a).numpy(), a * 2)
    np.testing.assert_array_equal(elementwise.main(base[::-1][:5], base[:5]).numpy(),
                                  base[::-1][:5] + base[:5])


def test_out_tensors_and_arrays(elementwise):
    a, b = floats(64, 1), floats(64, 2)
    out = axrt.empty((64,), "f32")
    assert elementwise.main(a, b, out=out) is out
    np.testing.assert_array_equal(out.numpy(), a + b)
    host = np.zeros(64, np.float32)
    assert elementwise.main(a, b, out=host) is host
    np.testing.assert_array_equal(host, a + b)
    s = np.zeros(64, np.float32)
    total, product = elementwise.both(a, b, out=(s, None))
    assert total is s
    np.testing.assert_array_equal(s, a + b)
    np.testing.assert_array_equal(product.numpy(), a * b)
    with pytest.raises(TypeError, match="2 outputs, out= gave 1"):
        elementwise.both(a, b, out=(s,))
    readonly = np.zeros(64, np.float32)
    readonly.flags.writeable = False
    with pytest.raises(axrt.InvalidArgumentError, match="read-only"):
        elementwise.main(a, b, out=readonly)


def test_call_errors_carry_the_runtime_message(elementwise):
    with pytest.raises(TypeError, match=r"main\(\) takes 2 inputs, 1 given"):
        elementwise.main(floats(4))
    with pytest.raises(axrt.InvalidArgumentError) as info:
        elementwise.main(floats(4), floats(5))
    assert info.value.code == "INVALID_ARGUMENT"
    assert str(info.value).startswith("axrt_function_invoke: function 'main'")
    assert isinstance(info.value, ValueError) and isinstance(info.value, axrt.Error)
    with pytest.raises(axrt.InvalidArgumentError, match="f32"):
        elementwise.main(np.zeros(4, np.int32), np.zeros(4, np.int32))
    with pytest.raises(axrt.Error, match="1048576"):
        big = np.zeros((1 << 20) + 1, np.float32)
        elementwise.main(big, big)


def test_streams_and_events(elementwise):
    stream = axrt.Stream()
    assert stream.device is axrt.device() and stream.native_handle is None
    a = floats(4096)
    start = stream.record_event()
    y = elementwise.main(a, a, stream=stream)
    end = stream.record_event()
    end.synchronize(timeout=10)
    assert end.query() and stream.query()
    assert start.elapsed_time(end) >= 0
    np.testing.assert_array_equal(y.numpy(), a * 2)
    # A tensor made on one stream orders the next stream's work after it.
    other = axrt.Stream()
    z = elementwise.main(y, y, stream=other)
    np.testing.assert_array_equal(z.numpy(), a * 4)
    other.wait_stream(stream)
    other.synchronize()
    with pytest.raises(axrt.FailedPreconditionError, match="never recorded"):
        axrt.Event().query()
    with pytest.raises(TypeError, match="axrt.Stream"):
        elementwise.main(a, a, stream="default")
    with pytest.raises(ValueError, match="timeout"):
        end.synchronize(timeout=-1)


def test_empty_asarray_and_to(elementwise):
    t = axrt.empty((2, 3), "f32")
    assert t.shape == (2, 3) and t.strides == (3, 1) and t.is_contiguous
    t.numpy()[:] = 7
    np.testing.assert_array_equal(np.asarray(t), np.full((2, 3), 7, np.float32))
    assert axrt.empty((4,), np.int16).dtype == np.int16
    a = np.arange(6, dtype=np.float64)
    view = axrt.asarray(a)
    a[0] = 42
    assert view.numpy()[0] == 42  # no copy on the CPU
    assert view.to("cpu:0") is view
    with pytest.raises(TypeError, match="dtype"):
        axrt.empty((1,), "complex-ish")


def test_pool_statistics(elementwise):
    cpu = axrt.device()
    before = cpu.pool_statistics()
    y = elementwise.main(floats(1 << 16), floats(1 << 16))
    during = cpu.pool_statistics()
    assert during["bytes_in_use"] >= before["bytes_in_use"] + (1 << 18)
    del y
    assert cpu.pool_statistics()["bytes_in_use"] == before["bytes_in_use"]
    cpu.trim_pool()
