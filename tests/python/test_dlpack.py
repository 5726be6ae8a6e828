"""DLPack both ways, with numpy and JAX (PyTorch: test_torch_dlpack.py)."""

import ctypes
import gc

import ml_dtypes
import numpy as np
import pytest

import axrt
from conftest import floats

kDLCPU, kDLCUDA = 1, 2

_name = ctypes.pythonapi.PyCapsule_GetName
_name.restype = ctypes.c_char_p
_name.argtypes = [ctypes.py_object]


def capsule_name(capsule):
    return _name(capsule).decode()


class LegacyProducer:
    """A producer from before DLPack 1.0: no max_version keyword."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


class CapsuleOnly:
    """Hands numpy a capsule made by axrt through the legacy protocol."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, stream=None, **kwargs):
        return self.tensor.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


def test_numpy_consumes_versioned_and_legacy(elementwise):
    a = floats(256)
    t = elementwise.main(a, a)
    assert t.__dlpack_device__() == (kDLCPU, 0)
    versioned = t.__dlpack__(max_version=(1, 1))
    assert capsule_name(versioned) == "dltensor_versioned"
    legacy = t.__dlpack__()
    assert capsule_name(legacy) == "dltensor"
    del versioned, legacy  # unconsumed capsules free their exports
    y = np.from_dlpack(t)  # numpy asks for the versioned capsule
    np.testing.assert_array_equal(y, a * 2)
    y[0] = 5  # shared memory
    assert t.numpy()[0] == 5
    z = np.from_dlpack(CapsuleOnly(t))
    np.testing.assert_array_equal(z, y)


def test_axrt_consumes_versioned_and_legacy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for producer in (a, LegacyProducer(a)):
        t = axrt.from_dlpack(producer)
        assert t.shape == (3, 4) and t.dtype == np.float32 and not t.read_only
        np.testing.assert_array_equal(t.numpy(), a)
    a[0, 0] = -1
    assert t.numpy()[0, 0] == -1  # no copy
    capsule = a.__dlpack__(max_version=(1, 0))
    t = axrt.from_dlpack(capsule)
    assert capsule_name(capsule) == "used_dltensor_versioned"
    with pytest.raises(ValueError, match="consumed once"):
        axrt.from_dlpack(capsule)
    legacy = a.__dlpack__()
    axrt.from_dlpack(legacy)
    assert capsule_name(legacy) == "used_dltensor"


def test_read_only_both_ways(elementwise):
    a = floats(32)
    a.flags.writeable = False
    t = axrt.from_dlpack(a)
    assert t.read_only and "read-only" in repr(t)
    assert not t.numpy().flags.writeable
    with pytest.raises(axrt.InvalidArgumentError, match="read-only"):
        elementwise.main(a, a, out=t)
    # Exported read-only: numpy's array is read-only too; legacy capsules
    # cannot say so and are refused.
    assert not np.from_dlpack(t).flags.writeable
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__()
    # Inputs may be read-only.
    np.testing.assert_array_equal(elementwise.main(t, a).numpy(), a * 2)


def test_byte_offset_strides_and_zero_size():
    base = np.arange(60, dtype=np.int32).reshape(6, 10)
    view = base[1:5, 2::3]
    t = axrt.from_dlpack(view)
    assert t.shape == (4, 3) and t.strides == (10, 3) and not t.is_contiguous
    np.testing.assert_array_equal(t.numpy(), view)
    np.testing.assert_array_equal(np.from_dlpack(t), view)
    np.testing.assert_array_equal(np.asarray(memoryview(t)), view)
    empty = np.zeros((0, 4), np.float32)
    t = axrt.from_dlpack(empty)
    assert t.shape == (0, 4) and t.size == 0
    assert np.from_dlpack(t).shape == (0, 4)
    scalar = axrt.from_dlpack(np.float64(2.5).reshape(()))
    assert scalar.shape == () and scalar.numpy() == 2.5


def test_copy_and_dl_device(elementwise):
    a = floats(16)
    t = elementwise.main(a, a)
    copied = np.from_dlpack(t, copy=True)
    copied[0] = 1e6
    assert t.numpy()[0] != 1e6
    assert np.from_dlpack(t, copy=False)[0] == t.numpy()[0]
    np.testing.assert_array_equal(np.from_dlpack(t, device="cpu"), a * 2)
    with pytest.raises(BufferError, match="DLPack device"):
        t.__dlpack__(max_version=(1, 1), dl_device=(kDLCUDA, 0))
    with pytest.raises(ValueError, match="stream must be None"):
        t.__dlpack__(max_version=(1, 1), stream=7)
    c = axrt.from_dlpack(a, copy=True)
    a[0] = 99
    assert c.numpy()[0] != 99


def test_memory_returns_when_consumers_let_go(elementwise):
    cpu = axrt.device()
    gc.collect()
    before = cpu.pool_statistics()["bytes_in_use"]
    t = elementwise.main(floats(1 << 16), floats(1 << 16))
    arrays = [np.from_dlpack(t), t.numpy(), np.asarray(memoryview(t))]
    unconsumed = t.__dlpack__(max_version=(1, 1))
    del t
    assert cpu.pool_statistics()["bytes_in_use"] > before
    del arrays, unconsumed
    gc.collect()
    assert cpu.pool_statistics()["bytes_in_use"] == before


def test_producer_kept_alive_until_released():
    a = floats(1024)
    t = axrt.from_dlpack(a)
    refs = __import__("sys").getrefcount(a)
    del t
    gc.collect()
    assert __import__("sys").getrefcount(a) == refs - 1


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                                   np.float16, np.bool_, np.uint64, np.int8])
def test_dtypes_round_trip(dtype):
    a = np.arange(-4, 4).astype(dtype)
    t = axrt.asarray(a)
    assert t.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(t.numpy(), a)
    # ml_dtypes' types have no buffer format (float8_e5m2's kind is 'f'):
    # numpy takes them through __array__.
    np.testing.assert_array_equal(np.asarray(t), a)
    if np.dtype(dtype).isbuiltin != 1:
        with pytest.raises(BufferError):
            memoryview(t)


def test_unsupported_types_are_refused():
    # Through numpy's capsule the runtime refuses it; numpy arrays given
    # directly are refused before.
    with pytest.raises(axrt.UnimplementedError, match="complex|element type|code"):
        axrt.from_dlpack(np.zeros(3, np.complex64).__dlpack__(max_version=(1, 1)))
    with pytest.raises(TypeError, match="complex64 has no axrt dtype"):
        axrt.from_dlpack(np.zeros(3, np.complex64))
    with pytest.raises(TypeError, match="packs"):
        axrt.asarray(np.zeros(4, ml_dtypes.int4))
    with pytest.raises(TypeError, match="__dlpack__"):
        axrt.from_dlpack(object())


def test_jax_both_ways(elementwise):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = jnp.arange(1024, dtype=jnp.float32) / 7
    t = axrt.from_dlpack(x)
    np.testing.assert_array_equal(t.numpy(), np.asarray(x))
    y = elementwise.main(x, x)  # JAX arrays are DLPack producers
    back = jnp.from_dlpack(y)
    np.testing.assert_allclose(np.asarray(back), np.asarray(x) * 2)
    assert jax.dlpack.is_supported_dtype if hasattr(jax.dlpack, "is_supported_dtype") else True
    m = jnp.ones((3, 5), jnp.bfloat16)
    tb = axrt.from_dlpack(m)
    assert tb.dtype == ml_dtypes.bfloat16 and tb.shape == (3, 5)
    np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(tb)), np.asarray(m))


def test_cuda_tensors_on_the_mock(cuda_mock, elementwise_cuda):
    a, b = floats(5000, 1), floats(5000, 2)
    y = elementwise_cuda.main(a, b)  # host arrays are copied to cuda:0
    assert y.device is cuda_mock and y.__dlpack_device__() == (kDLCUDA, 0)
    np.testing.assert_array_equal(y.numpy(), a + b)
    np.testing.assert_array_equal(np.asarray(y), a + b)
    with pytest.raises(ValueError, match="without a copy"):
        y.__array__(copy=False)
    with pytest.raises(BufferError):
        memoryview(y)
    stream = cuda_mock.default_stream
    assert isinstance(stream.native_handle, int) and stream.native_handle != 0
    # The stream protocol: the consumer's stream waits with an event.
    for s in (None, 1, 2, -1, stream.native_handle):
        capsule = y.__dlpack__(max_version=(1, 1), stream=s)
        assert capsule_name(capsule) == "dltensor_versioned"
    with pytest.raises(ValueError, match="ambiguous"):
        y.__dlpack__(max_version=(1, 1), stream=0)
    # To the host: a copy unless copy=False.
    np.testing.assert_array_equal(np.from_dlpack(y, device="cpu"), a + b)
    with pytest.raises(BufferError, match="copy=False"):
        y.__dlpack__(max_version=(1, 1), dl_device=(kDLCPU, 0), copy=False)
    back = axrt.from_dlpack(y)
    assert back is y
    imported = axrt.from_dlpack(CapsuleOnly(y))  # through a capsule
    assert imported.device is cuda_mock
    np.testing.assert_array_equal(imported.numpy(), a + b)
    on_host = y.to("cpu:0")
    np.testing.assert_array_equal(on_host.numpy(), a + b)
    z = elementwise_cuda.main(y, on_host.to(cuda_mock))
    np.testing.assert_array_equal(z.numpy(), (a + b) * 2)
