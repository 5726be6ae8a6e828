"""Every failure reaches Python as the axrt.Error subclass of its status,
with the runtime's message unchanged."""

import os
import subprocess
import sys

import numpy as np
import pytest

import axrt
from axrt.builder import Buffer, Scalar, ceildiv

CODES = {
    "CancelledError": "CANCELLED", "UnknownError": "UNKNOWN", "InvalidArgumentError": "INVALID_ARGUMENT",
    "DeadlineExceededError": "DEADLINE_EXCEEDED", "NotFoundError": "NOT_FOUND",
    "AlreadyExistsError": "ALREADY_EXISTS", "PermissionDeniedError": "PERMISSION_DENIED",
    "ResourceExhaustedError": "RESOURCE_EXHAUSTED", "FailedPreconditionError": "FAILED_PRECONDITION",
    "AbortedError": "ABORTED", "OutOfRangeError": "OUT_OF_RANGE", "UnimplementedError": "UNIMPLEMENTED",
    "InternalError": "INTERNAL", "UnavailableError": "UNAVAILABLE", "DataLossError": "DATA_LOSS",
    "UnauthenticatedError": "UNAUTHENTICATED", "DeviceLostError": "DEVICE_LOST",
}


def test_hierarchy():
    for name in CODES:
        cls = getattr(axrt, name)
        assert issubclass(cls, axrt.Error) and cls.__module__ == "axrt"
    assert issubclass(axrt.Error, RuntimeError)
    assert issubclass(axrt.InvalidArgumentError, ValueError)
    assert issubclass(axrt.NotFoundError, LookupError)
    assert issubclass(axrt.PermissionDeniedError, PermissionError)
    assert issubclass(axrt.UnimplementedError, NotImplementedError)
    assert issubclass(axrt.DeadlineExceededError, TimeoutError)


def raised(fn):
    with pytest.raises(axrt.Error) as info:
        fn()
    return info.value


def test_load_failures_name_the_file_and_reason(tmp_path, elementwise_bytes):
    e = raised(lambda: axrt.load(tmp_path / "missing.axe"))
    assert type(e) is axrt.NotFoundError and e.code == "NOT_FOUND"
    assert str(e).startswith("axrt_executable_load_file: ") and "missing.axe" in str(e)
    e = raised(lambda: axrt.load(b"not an axe file at all"))
    assert type(e) is axrt.InvalidArgumentError and e.code == "INVALID_ARGUMENT"
    truncated = tmp_path / "truncated.axe"
    truncated.write_bytes(elementwise_bytes[: len(elementwise_bytes) // 2])
    e = raised(lambda: axrt.load(truncated))
    assert "truncated.axe" in str(e)


def test_missing_kernel_symbol():
    b = axrt.Builder()
    cpu = b.kernel_library("axrt.cpu")
    k = b.kernel("axrt_no_such_kernel", cpu, params=[Buffer("out", access="write"), Scalar("n", "uint64")])
    f = b.function("main", inputs=[], outputs=[("y", "f32", (4,))])
    f.dispatch(k, grid=1, args=[f.output(0), 4])
    e = raised(lambda: axrt.load(b.to_bytes()))
    assert type(e) is axrt.NotFoundError and "axrt_no_such_kernel" in str(e)


def test_native_code_needs_permission():
    import axrt._axrt as ext

    b = axrt.Builder()
    with open(ext.__file__, "rb") as f:  # any shared object will do: it is refused unread
        b.code_object("host_shared_object", ext.AxeBuilder.HOST_TARGET, f.read())
    e = raised(lambda: axrt.load(b.to_bytes()))
    assert type(e) is axrt.PermissionDeniedError and "allow" in str(e).lower()


def test_checksums(tmp_path):
    b = axrt.Builder()
    weights = np.full(4096, 1.5, np.float32)
    b.constant("w", weights)
    data = bytearray(b.to_bytes())
    at = bytes(data).find(weights.tobytes())
    assert at > 0
    data[at + 100] ^= 0xFF
    axrt.load(bytes(data))  # not checked unless asked
    e = raised(lambda: axrt.load(bytes(data), verify_checksums=True))
    assert type(e) is axrt.DataLossError and e.code == "DATA_LOSS"


def test_runtime_errors_by_code(elementwise):
    e = raised(lambda: axrt.Event().synchronize())
    assert type(e) is axrt.FailedPreconditionError
    e = raised(lambda: axrt.from_dlpack(np.zeros(2, np.complex128).__dlpack__(max_version=(1, 1))))
    assert type(e) is axrt.UnimplementedError
    e = raised(lambda: axrt.empty((1 << 62,), "f32"))
    assert type(e) in (axrt.ResourceExhaustedError, axrt.InvalidArgumentError, axrt.OutOfRangeError)
    b = axrt.Builder()
    b.metadata("k", "v")
    e = raised(lambda: b.metadata("k", "w"))
    assert type(e) is axrt.AlreadyExistsError and "'k'" in str(e)


def test_no_cuda_driver_is_reported_not_raised():
    env = {k: v for k, v in os.environ.items() if k != "AXRT_CUDA_DRIVER_LIBRARY"}
    env["AXRT_CUDA_DRIVER_LIBRARY"] = "/nonexistent/libcuda.so.1"
    code = "import axrt; print([d.id for d in axrt.devices()]); print(axrt.drivers())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert "['cpu:0']" in out.stdout and "libcuda" in out.stdout


def _with_cpu_threads(value: str, code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, AXRT_CPU_THREADS=value)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)


def test_cpu_thread_count_from_the_environment():
    code = ("import axrt, numpy as np; d = axrt.device('cpu:0'); print(d.compute_units); "
            "print(float((axrt.asarray(np.ones(3, np.float32)).numpy() * 2).sum()))")
    for value in ("1", "3"):
        out = _with_cpu_threads(value, code)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == [value, "6.0"]


@pytest.mark.parametrize("value", ["0", "-2", "two", "4x", "100000"])
def test_a_bad_cpu_thread_count_is_refused_by_name(value):
    out = _with_cpu_threads(value, "import axrt; axrt.devices()")
    assert out.returncode != 0
    assert f"AXRT_CPU_THREADS='{value}' is not a thread count" in out.stderr
    assert "Traceback" in out.stderr  # a Python exception, not an abort
