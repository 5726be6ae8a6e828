"""Shared fixtures: small executables built with axrt.Builder.

When the test build names the mock CUDA driver (AXRT_MOCK_CUDA_LIBRARY), it
is selected before axrt makes its instance, so cuda:0 exists in every test
(cpu:0 stays the default device)."""

import os

mock = os.environ.get("AXRT_MOCK_CUDA_LIBRARY")
if mock and "AXRT_CUDA_DRIVER_LIBRARY" not in os.environ:
    os.environ["AXRT_CUDA_DRIVER_LIBRARY"] = mock

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import axrt  # noqa: E402
from axrt.builder import Buffer, Scalar, ceildiv  # noqa: E402

MAX_N = 1 << 20

# The mock CUDA driver runs a PTX image of this form by calling the CPU
# kernels of the names it lists.
MOCK_PTX = b"AXRTMOCKCUDA\naxrt_add_f32\naxrt_mul_f32\n.version 8.0\n.target sm_80\n"


def build_elementwise(with_cuda=False):
    """main(a, b) -> a + b and both(a, b) -> (a + b, a * b), f32[n], n <= 2**20."""
    b = axrt.Builder(producer="axrt-tests", producer_version="1")
    cpu = b.kernel_library("axrt.cpu", min_version=1)
    params = [Buffer("a"), Buffer("b"), Buffer("out", access="write"), Scalar("n", "uint64")]
    add = b.kernel("axrt_add_f32", cpu, params=params)
    mul = b.kernel("axrt_mul_f32", cpu, params=params)
    if with_cuda:
        # The build's CUDA kernels where it has them (they run on a GPU, and
        # on the mock as its CPU kernels of the same names), else the mock's
        # stand-in image.
        fatbin = os.path.join(os.environ.get("AXRT_TEST_BUILD_DIR", ""), "kernels", "cuda",
                              "axrt_kernels.fatbin")
        if os.environ.get("AXRT_TEST_BUILD_DIR") and os.path.exists(fatbin):
            with open(fatbin, "rb") as f:
                image = b.code_object("cuda_fatbin", "sm_80,sm_90", f.read())
        else:
            image = b.code_object("cuda_ptx", "compute_80", MOCK_PTX)
        b.kernel_variant(add, image, workgroup_size=256)
        b.kernel_variant(mul, image, workgroup_size=256)
    sig = ("f32", ("n",))
    main = b.function("main", inputs=[("a", *sig), ("b", *sig)], outputs=[("out", *sig)],
                      symbols={"n": MAX_N})
    n = main.sym("n")
    main.dispatch(add, grid=ceildiv(n, 4096), args=[main.input(0), main.input(1), main.output(0), n])
    both = b.function("both", inputs=[("a", *sig), ("b", *sig)],
                      outputs=[("sum", *sig), ("product", *sig)], symbols={"n": MAX_N})
    n = both.sym("n")
    both.dispatch(add, grid=ceildiv(n, 4096), args=[both.input(0), both.input(1), both.output(0), n])
    both.dispatch(mul, grid=ceildiv(n, 4096), args=[both.input(0), both.input(1), both.output(1), n])
    return b.to_bytes()


@pytest.fixture(scope="session")
def elementwise_bytes():
    return build_elementwise()


@pytest.fixture(scope="session")
def elementwise(elementwise_bytes):
    return axrt.load(elementwise_bytes)


@pytest.fixture(scope="session")
def cuda_mock():
    """cuda:0 of the mock driver, or a skip saying why there is none."""
    for d in axrt.devices():
        if d.type == "cuda":
            return d
    reasons = [d["availability"] for d in axrt.drivers() if d["name"] == "cuda"]
    pytest.skip(f"no CUDA device: {reasons[0] if reasons else 'the CUDA driver is not built'}")


@pytest.fixture(scope="session")
def elementwise_cuda(cuda_mock):
    return axrt.load(build_elementwise(with_cuda=True), device=cuda_mock)


def floats(n, seed=0):
    return np.random.default_rng(seed).standard_normal(n, dtype=np.float32)


def pytest_configure(config):
    config.addinivalue_line("markers", "loads: loads and runs the files it builds with axrt.load")


@pytest.fixture(scope="module", params=["cpu", "cuda"])
def device(request):
    """cpu:0, then the first CUDA device (the mock's, in the test runs), for kernel tests
    that run on both; skipped without one."""
    if request.param == "cpu":
        return axrt.device("cpu:0")
    for d in axrt.devices():
        if d.type == "cuda":
            return d
    reasons = [d["availability"] for d in axrt.drivers() if d["name"] == "cuda"]
    pytest.skip(f"no CUDA device: {reasons[0] if reasons else 'the CUDA driver is not built'}")


def kernels_code_object(builder, kernels):
    """The build's CUDA kernels (AXRT_TEST_BUILD_DIR's fatbin), or, when nvcc built none, a
    mock image naming `kernels`."""
    build = os.environ.get("AXRT_TEST_BUILD_DIR")
    fatbin = os.path.join(build or ".", "kernels", "cuda", "axrt_kernels.fatbin")
    if build and os.path.exists(fatbin):
        with open(fatbin, "rb") as f:
            return builder.code_object("cuda_fatbin", "sm_80,sm_90", f.read())
    image = "AXRTMOCKCUDA\n" + "\n".join(kernels) + "\n.version 8.0\n.target sm_80\n"
    return builder.code_object("cuda_ptx", "compute_80", image.encode())
