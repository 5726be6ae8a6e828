"""DLPack exchange with PyTorch, both ways: shared memory, the versioned and
legacy capsules, copy= and dl_device=, read-only memory, strided views,
dtypes, lifetimes, and (on the mock CUDA driver) the stream protocol.

The CUDA side of the protocol is checked with axrt's own tensors on the
mock driver's cuda:0 (PyTorch needs a real GPU for CUDA tensors): what
reaches the driver, and what axrt asks of a CUDA producer."""

import ctypes
import gc
import os
import warnings

import ml_dtypes
import numpy as np
import pytest

import axrt
from axrt.builder import Buffer, Builder, Scalar, ceildiv
from conftest import floats

torch = pytest.importorskip("torch")

kDLCPU, kDLCUDA = 1, 2
READ_ONLY, IS_COPIED = 1 << 0, 1 << 1


# ---------------------------------------------------------------------------
# Capsules, read through ctypes


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_get_name = ctypes.pythonapi.PyCapsule_GetName
_get_name.restype = ctypes.c_char_p
_get_name.argtypes = [ctypes.py_object]
_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def capsule_name(capsule):
    return _get_name(capsule).decode()


def versioned(capsule):
    """The DLManagedTensorVersioned of an unconsumed versioned capsule."""
    return _DLManagedTensorVersioned.from_address(_get_pointer(capsule, b"dltensor_versioned"))


def legacy(capsule):
    return _DLManagedTensor.from_address(_get_pointer(capsule, b"dltensor"))


def dl_layout(dl):
    """(address of element 0, shape, strides) of a DLTensor."""
    shape = tuple(dl.shape[i] for i in range(dl.ndim))
    strides = tuple(dl.strides[i] for i in range(dl.ndim))
    return (dl.data or 0) + dl.byte_offset, shape, strides


def address(t):
    """The host address of element 0 of an axrt tensor (through a numpy view)."""
    return np.asarray(t).ctypes.data


def torch_bytes(x):
    """The elements' bytes of a torch tensor, as numpy uint8 (any dtype)."""
    x = x.contiguous().view(-1)
    return x.view(torch.uint8).numpy().copy()


class Spy:
    """A producer that forwards to `inner` and records what it was asked."""

    def __init__(self, inner):
        self.inner = inner
        self.calls = []

    def __dlpack__(self, **kwargs):
        self.calls.append(kwargs)
        return self.inner.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.inner.__dlpack_device__()


class LegacyProducer:
    """A producer from before DLPack 1.0: __dlpack__ takes only stream."""

    def __init__(self, inner):
        self.inner = inner

    def __dlpack__(self, stream=None):
        return self.inner.__dlpack__()

    def __dlpack_device__(self):
        return self.inner.__dlpack_device__()


# ---------------------------------------------------------------------------
# Executables

ELEMENTWISE = [Buffer("a"), Buffer("b"), Buffer("out", access="write"), Scalar("n", "uint64")]


@pytest.fixture(scope="module")
def step():
    """step(state: mutable f32[n], x: f32[n]) -> y: state += x; y = state."""
    b = Builder(producer="test_torch_dlpack", producer_version="1")
    add = b.kernel("axrt_add_f32", b.kernel_library("axrt.cpu", min_version=1), ELEMENTWISE)
    f = b.function("step", inputs=[("state", "f32", ("n",)), ("x", "f32", ("n",))],
                   outputs=[("y", "f32", ("n",))], symbols={"n": 1 << 16}, mutable=("state",))
    n = f.sym("n")
    f.dispatch(add, grid=ceildiv(n, 4096),
               args=[f.input("state"), f.input("x"), f.input("state"), n])
    f.copy(f.input("state"), f.output("y"), n * 4)
    return axrt.load(b.to_bytes()).step


# ---------------------------------------------------------------------------
# Shared memory


def test_torch_to_axrt_shares_memory():
    x = torch.arange(64, dtype=torch.float32)
    a = axrt.from_dlpack(x)
    assert a.shape == (64,) and a.dtype == np.float32 and not a.read_only
    assert address(a) == x.data_ptr()
    x[5] = -7  # torch's writes are axrt's
    assert a.numpy()[5] == -7
    a.numpy()[6] = 42  # and axrt's (numpy view of host memory) torch's
    assert x[6].item() == 42


def test_axrt_to_torch_shares_memory(elementwise):
    a = floats(64)
    t = elementwise.main(a, a)
    y = torch.from_dlpack(t)
    assert y.dtype == torch.float32 and tuple(y.shape) == (64,)
    assert y.data_ptr() == address(t)
    np.testing.assert_array_equal(y.numpy(), a * 2)
    y[0] = 1234
    assert t.numpy()[0] == 1234
    elementwise.main(a, a, out=t)  # a call's writes reach torch's tensor
    t.synchronize()  # once done: torch's view does not wait for axrt's work
    assert y[0].item() == a[0] * 2


def test_calls_take_and_write_torch_tensors(elementwise, step):
    x = torch.arange(100, dtype=torch.float32)
    y = elementwise.main(x, x)
    assert torch.equal(torch.from_dlpack(y), x * 2)
    out = torch.empty(100)
    assert elementwise.main(x, x, out=out) is out  # written in place
    assert torch.equal(out, x * 2)
    state = torch.zeros(16)
    ptr = state.data_ptr()
    step(state, torch.ones(16))
    step(state, torch.ones(16))
    assert state.data_ptr() == ptr and torch.equal(state, torch.full((16,), 2.0))


# ---------------------------------------------------------------------------
# Versions of the protocol


def test_axrt_asks_torch_for_the_versioned_capsule():
    x = torch.arange(8, dtype=torch.int32)
    spy = Spy(x)
    a = axrt.from_dlpack(spy)
    assert spy.calls == [{"stream": None, "max_version": (1, 1)}]  # CPU memory: no stream
    assert address(a) == x.data_ptr()
    capsule = x.__dlpack__(max_version=(1, 0))
    assert capsule_name(capsule) == "dltensor_versioned"
    assert versioned(capsule).major == 1
    a = axrt.from_dlpack(capsule)
    assert capsule_name(capsule) == "used_dltensor_versioned"
    assert address(a) == x.data_ptr()
    with pytest.raises(ValueError, match="consumed once"):
        axrt.from_dlpack(capsule)


def test_axrt_takes_torch_legacy_capsules():
    x = torch.arange(8, dtype=torch.int64)
    for capsule in (x.__dlpack__(), torch.utils.dlpack.to_dlpack(x)):
        assert capsule_name(capsule) == "dltensor"
        a = axrt.from_dlpack(capsule)
        assert capsule_name(capsule) == "used_dltensor"
        assert address(a) == x.data_ptr() and not a.read_only
    a = axrt.from_dlpack(LegacyProducer(x))  # falls back to the legacy call
    assert address(a) == x.data_ptr()
    np.testing.assert_array_equal(a.numpy(), x.numpy())


def test_torch_gets_versioned_and_legacy_capsules(elementwise):
    t = elementwise.main(floats(16), floats(16))
    spy = Spy(t)
    y = torch.from_dlpack(spy)
    assert spy.calls[0]["max_version"] >= (1, 0)
    assert y.data_ptr() == address(t)
    capsule = t.__dlpack__(max_version=(1, 0))
    m = versioned(capsule)
    assert (m.major, m.minor) == (1, 1) and m.flags == 0
    assert dl_layout(m.dl_tensor) == (address(t), (16,), (1,))
    y = torch.from_dlpack(capsule)
    assert capsule_name(capsule) == "used_dltensor_versioned" and y.data_ptr() == address(t)
    capsule = t.__dlpack__()
    assert dl_layout(legacy(capsule).dl_tensor) == (address(t), (16,), (1,))
    y = torch.from_dlpack(capsule)
    assert capsule_name(capsule) == "used_dltensor" and y.data_ptr() == address(t)
    # A later major version than axrt's still gets 1.x, which the caller reads.
    assert versioned(t.__dlpack__(max_version=(2, 0))).major == 1
    assert capsule_name(t.__dlpack__(max_version=(0, 8))) == "dltensor"


# ---------------------------------------------------------------------------
# copy= and dl_device=


def test_copy_semantics_axrt_to_torch(elementwise):
    a = floats(32)
    t = elementwise.main(a, a)
    copied = torch.from_dlpack(t, copy=True)
    assert copied.data_ptr() != address(t)
    copied[0] = 1e6
    assert t.numpy()[0] == a[0] * 2
    assert versioned(t.__dlpack__(max_version=(1, 0), copy=True)).flags == IS_COPIED
    assert torch.from_dlpack(t, copy=False).data_ptr() == address(t)
    assert torch.from_dlpack(t).data_ptr() == address(t)
    # dl_device naming the tensor's own device: no copy.
    assert torch.from_dlpack(t, device="cpu").data_ptr() == address(t)
    capsule = t.__dlpack__(max_version=(1, 0), dl_device=(kDLCPU, 0), copy=False)
    assert versioned(capsule).flags == 0
    with pytest.raises(BufferError, match="DLPack device"):
        t.__dlpack__(max_version=(1, 0), dl_device=(kDLCUDA, 0))


def test_copy_semantics_torch_to_axrt():
    x = torch.arange(32, dtype=torch.float32)
    c = axrt.from_dlpack(x, copy=True)
    assert address(c) != x.data_ptr()
    x[0] = 99
    assert c.numpy()[0] == 0
    assert address(axrt.from_dlpack(x, copy=False)) == x.data_ptr()
    assert address(axrt.from_dlpack(x, device="cpu:0", copy=False)) == x.data_ptr()


def test_copies_of_strided_views():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    for view in (base.t(), base[1:, ::2], torch.arange(3.0).expand(4, 3)):
        c = axrt.from_dlpack(view, copy=True)
        assert c.is_contiguous and c.shape == tuple(view.shape)
        np.testing.assert_array_equal(c.numpy(), view.numpy())
        c.numpy()[0, 0] = -1  # its own memory
        assert view[0, 0].item() != -1
        a = axrt.from_dlpack(view)
        y = torch.from_dlpack(a, copy=True)
        assert y.is_contiguous() and torch.equal(y, view) and y.data_ptr() != view.data_ptr()


# ---------------------------------------------------------------------------
# Read-only memory


def test_read_only_axrt_tensors_reach_torch_flagged(elementwise):
    a = floats(16)
    a.flags.writeable = False
    t = axrt.from_dlpack(a)
    assert t.read_only
    capsule = t.__dlpack__(max_version=(1, 0))
    assert versioned(capsule).flags == READ_ONLY
    # PyTorch has no read-only tensors: it takes the memory as writable, as
    # the array API standard recommends for such consumers.
    y = torch.from_dlpack(capsule)
    assert y.data_ptr() == a.ctypes.data
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__()  # the legacy capsule cannot say so
    # A copy is the consumer's: writable, in either capsule.
    assert versioned(t.__dlpack__(max_version=(1, 0), copy=True)).flags == IS_COPIED
    assert capsule_name(t.__dlpack__(copy=True)) == "dltensor"
    assert torch.from_dlpack(t, copy=True).data_ptr() != a.ctypes.data
    # Read-only tensors are inputs, never out=.
    np.testing.assert_array_equal(elementwise.main(t, t).numpy(), a * 2)
    with pytest.raises(axrt.InvalidArgumentError, match="read-only"):
        elementwise.main(a, a, out=t)


def test_read_only_torch_exports_make_read_only_tensors(elementwise, step):
    wrapper = getattr(torch.utils.dlpack, "ReadOnlyTensorWrapper", None)
    if wrapper is None:
        pytest.skip(f"torch {torch.__version__} cannot export a read-only capsule")
    x = torch.arange(16, dtype=torch.float32)
    t = axrt.from_dlpack(wrapper(x))
    assert t.read_only and address(t) == x.data_ptr()
    assert not t.numpy().flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        t.numpy()[0] = 1
    with pytest.raises(axrt.InvalidArgumentError, match="read-only"):
        elementwise.main(x, x, out=wrapper(torch.empty(16)))
    with pytest.raises(axrt.InvalidArgumentError, match="read-only"):
        step(wrapper(torch.zeros(16)), x)
    np.testing.assert_array_equal(elementwise.main(wrapper(x), x).numpy(), x.numpy() * 2)
    # Exported again, it stays read-only.
    assert versioned(t.__dlpack__(max_version=(1, 0))).flags == READ_ONLY


def test_axrt_follows_torch_read_only_flag():
    # torch.from_numpy of a read-only array (torch warns) and inference
    # tensors are writable memory to torch's DLPack export: axrt follows the
    # flag of the capsule, whatever torch sets.
    ro = np.arange(8, dtype=np.float32)
    ro.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        from_numpy = torch.from_numpy(ro)
    with torch.inference_mode():
        inference = torch.ones(8)
    for x in (from_numpy, inference):
        capsule = x.__dlpack__(max_version=(1, 0))
        flagged = bool(versioned(capsule).flags & READ_ONLY)
        t = axrt.from_dlpack(capsule)
        assert t.read_only == flagged
        assert address(t) == x.data_ptr()


# ---------------------------------------------------------------------------
# Strided and offset views

BASE = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)

VIEWS = {
    "offset": lambda: BASE.reshape(-1)[7:],
    "offset rows": lambda: BASE.reshape(6, 20)[3:],
    "transpose": lambda: BASE.reshape(6, 20).t(),
    "step": lambda: BASE.reshape(-1)[::3],
    "step and offset": lambda: BASE.reshape(6, 20)[1:5, 2::3],
    "permute": lambda: BASE.permute(3, 1, 0, 2),
    "channels last": lambda: BASE.contiguous(memory_format=torch.channels_last),
    "expand": lambda: torch.arange(5.0).expand(4, 5),
    "expand middle": lambda: torch.arange(6.0).reshape(2, 1, 3).expand(2, 4, 3),
    "unsqueeze": lambda: BASE.reshape(6, 20)[:, 3].unsqueeze(1),
    "0-d": lambda: BASE.reshape(-1)[11],
    "empty": lambda: BASE.reshape(6, 20)[2:2],
}


@pytest.mark.parametrize("name", VIEWS)
def test_views_cross_faithfully_both_ways(name):
    view = VIEWS[name]()
    a = axrt.from_dlpack(view)
    assert a.shape == tuple(view.shape)
    np.testing.assert_array_equal(a.numpy(), view.numpy())
    if view.numel():
        assert a.strides == view.stride()  # both count elements
        assert address(a) == view.data_ptr()
        assert a.is_contiguous == view.is_contiguous()
        capsule = a.__dlpack__(max_version=(1, 0))
        assert dl_layout(versioned(capsule).dl_tensor) == (view.data_ptr(), tuple(view.shape),
                                                           view.stride())
    back = torch.from_dlpack(a)
    assert back.shape == view.shape and back.dtype == view.dtype
    assert torch.equal(back, view)
    if view.numel():
        assert back.stride() == view.stride() and back.data_ptr() == view.data_ptr()


def test_strided_views_in_calls(elementwise, step):
    x = torch.arange(40, dtype=torch.float32)
    # Inputs: read through a compact copy, as for numpy arrays.
    for v in (x[::2], x[3:23], torch.arange(1.0, 2.0).expand(20), x.reshape(2, 20).t()[:, 1]):
        np.testing.assert_array_equal(elementwise.main(v, v).numpy(), (v * 2).numpy())
    # Written views must be contiguous: never a copy whose writes are lost.
    with pytest.raises(axrt.InvalidArgumentError, match="contiguous"):
        elementwise.main(x[:20], x[:20], out=torch.zeros(40)[::2])
    with pytest.raises(axrt.InvalidArgumentError, match="contiguous"):
        elementwise.main(x[:5], x[:5], out=torch.zeros(1).expand(5))
    with pytest.raises(axrt.InvalidArgumentError, match="contiguous"):
        step(torch.zeros(40)[::2], x[:20])
    # An offset that keeps the view contiguous is written in place.
    out = torch.zeros(23)
    elementwise.main(x[:20], x[:20], out=out[3:])
    assert torch.equal(out[3:], x[:20] * 2) and torch.equal(out[:3], torch.zeros(3))
    state = torch.zeros(24)
    step(state[4:], torch.ones(20))
    assert torch.equal(state[4:], torch.ones(20)) and torch.equal(state[:4], torch.zeros(4))


# ---------------------------------------------------------------------------
# Element types

DTYPES = [(torch.bool, "bool"), (torch.int8, "int8"), (torch.int16, "int16"),
          (torch.int32, "int32"), (torch.int64, "int64"), (torch.uint8, "uint8"),
          (torch.float16, "f16"), (torch.bfloat16, "bf16"), (torch.float32, "f32"),
          (torch.float64, "f64"), (torch.float8_e4m3fn, "fp8_e4m3fn"),
          (torch.float8_e5m2, "fp8_e5m2")]
# Types of newer PyTorch versions.
for _name, _axrt in [("uint16", "uint16"), ("uint32", "uint32"), ("uint64", "uint64"),
                     ("float8_e4m3fnuz", "fp8_e4m3fnuz"), ("float8_e5m2fnuz", "fp8_e5m2fnuz"),
                     ("float8_e8m0fnu", "ue8m0")]:
    if hasattr(torch, _name):
        DTYPES.append((getattr(torch, _name), _axrt))


def random_tensor(dtype, n=64):
    raw = torch.from_numpy(np.random.default_rng(3).integers(0, 256, n * 8, dtype=np.uint8))
    if dtype == torch.bool:
        return raw[:n] % 2 == 1
    return raw[: n * torch.empty(0, dtype=dtype).element_size()].view(dtype)


@pytest.mark.parametrize("dtype,name", DTYPES,
                         ids=[str(d).removeprefix("torch.") for d, _ in DTYPES])
def test_dtypes_both_ways(dtype, name):
    x = random_tensor(dtype)
    a = axrt.from_dlpack(x)
    assert a.dtype_name == name and a.shape == (64,)
    assert address(a) == x.data_ptr()
    np.testing.assert_array_equal(np.asarray(a).view(np.uint8), torch_bytes(x))
    back = torch.from_dlpack(a)
    assert back.dtype == dtype and back.data_ptr() == x.data_ptr()
    # And from axrt's own memory.
    t = axrt.asarray(np.asarray(a).copy())
    assert t.dtype_name == name
    y = torch.from_dlpack(t)
    assert y.dtype == dtype and y.data_ptr() == address(t)
    np.testing.assert_array_equal(torch_bytes(y), torch_bytes(x))


def test_ml_dtypes_match_torch():
    # The numpy views axrt gives of bfloat16 and fp8 hold torch's values.
    for dtype, np_dtype in [(torch.bfloat16, ml_dtypes.bfloat16),
                            (torch.float8_e4m3fn, ml_dtypes.float8_e4m3fn),
                            (torch.float8_e5m2, ml_dtypes.float8_e5m2)]:
        x = torch.tensor([0.5, -1.5, 2.0, 3.5]).to(dtype)
        a = axrt.from_dlpack(x)
        assert a.dtype == np_dtype
        np.testing.assert_array_equal(a.numpy().astype(np.float32), x.float().numpy())


def test_types_without_a_counterpart_are_refused():
    for dtype in (torch.complex64, torch.complex128):
        with pytest.raises(axrt.UnimplementedError, match="kDLComplex"):
            axrt.from_dlpack(torch.zeros(4, dtype=dtype))
    # PyTorch's fp4 holds two elements per byte as a 2-lane type; axrt's fp4
    # is packed with one lane, which PyTorch does not take.
    if hasattr(torch, "float4_e2m1fn_x2"):
        with pytest.raises(axrt.UnimplementedError, match="lanes"):
            axrt.from_dlpack(torch.zeros(4, dtype=torch.float4_e2m1fn_x2))
    for name in ("fp4_e2m1", "int4", "uint4"):
        with pytest.raises(BufferError):
            torch.from_dlpack(axrt.empty((8,), name))
    with pytest.raises(BufferError, match="gradient"):
        axrt.from_dlpack(torch.zeros(4, requires_grad=True))


# ---------------------------------------------------------------------------
# Round trips and lifetimes


def test_round_trip_torch_axrt_torch():
    for name in VIEWS:
        x = VIEWS[name]()
        y = torch.from_dlpack(axrt.from_dlpack(x))
        assert y.dtype == x.dtype and y.shape == x.shape and torch.equal(y, x)
        if x.numel():
            assert y.stride() == x.stride() and y.data_ptr() == x.data_ptr()


def test_torch_memory_outlives_the_torch_tensor():
    x = torch.arange(1 << 16, dtype=torch.float32)
    ptr = x.data_ptr()
    a = axrt.from_dlpack(x[16:])
    y = torch.from_dlpack(a)  # torch -> axrt -> torch
    del x
    gc.collect()
    # Were the memory freed, these would take it.
    fillers = [torch.full((1 << 16,), -1.0) for _ in range(8)]
    np.testing.assert_array_equal(a.numpy(), np.arange(16, 1 << 16, dtype=np.float32))
    del a
    gc.collect()
    assert y.data_ptr() == ptr + 64 and y[0].item() == 16 and y[-1].item() == (1 << 16) - 1
    del fillers


def test_axrt_memory_outlives_the_axrt_tensor(elementwise):
    cpu = axrt.device()
    gc.collect()
    before = cpu.pool_statistics()["bytes_in_use"]
    a = floats(1 << 16)
    t = elementwise.main(a, a)
    y = torch.from_dlpack(t)
    z = axrt.from_dlpack(y)  # axrt -> torch -> axrt
    assert address(z) == address(t) == y.data_ptr()
    del t
    gc.collect()
    assert cpu.pool_statistics()["bytes_in_use"] > before
    fillers = [elementwise.main(a, a) for _ in range(4)]  # would take freed memory
    np.testing.assert_array_equal(y.numpy(), a * 2)
    del y
    gc.collect()
    np.testing.assert_array_equal(z.numpy(), a * 2)
    del z, fillers
    gc.collect()
    # The fillers' memory goes back once their work is done, which the
    # stream may still be doing: wait for it before counting.
    cpu.synchronize()
    assert cpu.pool_statistics()["bytes_in_use"] == before


# ---------------------------------------------------------------------------
# The stream protocol, on the mock CUDA driver


def mock_calls(function):
    lib = ctypes.CDLL(os.environ["AXRT_MOCK_CUDA_LIBRARY"])
    lib.axrt_mock_cuda_call_count.restype = ctypes.c_uint64
    lib.axrt_mock_cuda_call_count.argtypes = [ctypes.c_char_p]
    return lib.axrt_mock_cuda_call_count(function.encode())


def test_cuda_export_makes_the_consumer_stream_wait(cuda_mock, elementwise_cuda):
    a = floats(4096)
    consumer = axrt.Stream(device=cuda_mock)
    expected = torch.from_numpy(a * 2)
    # None is the legacy default stream (1), 2 the per-thread one, larger
    # numbers a CUstream; each waits on the device for the producing work.
    for stream in (None, 1, 2, consumer.native_handle):
        y = elementwise_cuda.main(a, a)  # queued on the default stream
        waits, records = mock_calls("cuStreamWaitEvent"), mock_calls("cuEventRecord")
        host_waits = mock_calls("cuStreamSynchronize") + mock_calls("cuEventSynchronize")
        capsule = y.__dlpack__(max_version=(1, 0), stream=stream)
        # The consumer's wait for the producing work, plus the events and
        # waits that order queued work after the allocations before it
        # (stream-ordered allocation, docs/cuda-driver.md): all on the device,
        # none on the host.
        assert mock_calls("cuStreamWaitEvent") >= waits + 1
        assert mock_calls("cuEventRecord") >= records + 1
        assert mock_calls("cuStreamSynchronize") + mock_calls("cuEventSynchronize") == host_waits
        m = versioned(capsule)
        assert (m.dl_tensor.device.device_type, m.dl_tensor.device.device_id) == (kDLCUDA, 0)
        del capsule
    # -1: the consumer orders the work itself; nothing is queued.
    y = elementwise_cuda.main(a, a)
    waits = mock_calls("cuStreamWaitEvent")
    y.__dlpack__(max_version=(1, 0), stream=-1)
    assert mock_calls("cuStreamWaitEvent") == waits
    # The number reaches the driver as a stream: an unknown one fails there.
    with pytest.raises(axrt.Error, match="cuStreamWaitEvent"):
        y.__dlpack__(max_version=(1, 0), stream=0x7777)
    with pytest.raises(ValueError, match="ambiguous"):
        y.__dlpack__(max_version=(1, 0), stream=0)
    with pytest.raises(TypeError, match="int or None"):
        y.__dlpack__(max_version=(1, 0), stream="1")
    # Work already done needs no wait.
    y.synchronize()
    waits = mock_calls("cuStreamWaitEvent")
    y.__dlpack__(max_version=(1, 0), stream=consumer.native_handle)
    assert mock_calls("cuStreamWaitEvent") == waits
    # Host memory takes no stream; the host waits instead.
    with pytest.raises(ValueError, match="stream must be None"):
        y.__dlpack__(max_version=(1, 0), dl_device=(kDLCPU, 0), stream=consumer.native_handle)
    # To PyTorch (CPU only here) through a host copy.
    y = elementwise_cuda.main(a, a)
    capsule = y.__dlpack__(max_version=(1, 0), dl_device=(kDLCPU, 0))
    assert versioned(capsule).flags == IS_COPIED
    assert torch.equal(torch.from_dlpack(capsule), expected)
    with pytest.raises(BufferError, match="copy=False"):
        y.__dlpack__(max_version=(1, 0), dl_device=(kDLCPU, 0), copy=False)


def test_cuda_import_passes_the_axrt_stream(cuda_mock, elementwise_cuda):
    a = floats(256)
    y = elementwise_cuda.main(a, a)
    spy = Spy(y)
    imported = axrt.from_dlpack(spy)
    assert spy.calls == [{"stream": cuda_mock.default_stream.native_handle, "max_version": (1, 1)}]
    assert imported.device is cuda_mock
    np.testing.assert_array_equal(imported.numpy(), a * 2)


def test_torch_tensors_reach_cuda(cuda_mock, elementwise_cuda):
    x = torch.arange(48, dtype=torch.float32).reshape(6, 8)
    for v in (x.reshape(-1), x.t().reshape(-1), x.t()):
        t = axrt.from_dlpack(v, device=cuda_mock)
        assert t.device is cuda_mock and t.is_contiguous
        np.testing.assert_array_equal(t.numpy(), v.numpy())
    with pytest.raises(BufferError, match="copy=False"):
        axrt.from_dlpack(x, device=cuda_mock, copy=False)
    # As call inputs, strided views included, copied in stream order.
    v = x.t().reshape(-1)[::2]
    np.testing.assert_array_equal(elementwise_cuda.main(v, v).numpy(), (v * 2).numpy())
    column = x[:, 1]
    np.testing.assert_array_equal(elementwise_cuda.main(column, column).numpy(),
                                  (column * 2).numpy())


def test_fast_import_keeps_the_protocols_refusals():
    """Plain CPU tensors skip torch's Python-level __dlpack__; what it refuses
    is still refused, and subclasses still go through the protocol."""
    t = torch.arange(6, dtype=torch.float32)
    x = axrt.from_dlpack(t)
    assert np.asarray(x).ctypes.data == t.data_ptr()
    with pytest.raises(BufferError, match="grad"):
        axrt.from_dlpack(t.clone().requires_grad_())
    # torch would export a lazily negated view's memory without the negation.
    with pytest.raises(BufferError, match="resolve_neg"):
        axrt.from_dlpack(torch._neg_view(t))
    np.testing.assert_array_equal(np.asarray(axrt.from_dlpack(torch._neg_view(t).resolve_neg())),
                                  -t.numpy())
    p = torch.nn.Parameter(t.clone(), requires_grad=False)
    np.testing.assert_array_equal(np.asarray(axrt.from_dlpack(p)), t.numpy())
