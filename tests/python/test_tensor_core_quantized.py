"""The tensor-core matmuls of quantized weights (docs/kernels.md, "Tensor-core matmul"):
axrt_matmul_int8_pc_tc_f32, axrt_matmul_fp8_e4m3_pc_tc_f32 and axrt_matmul_awq_int4_tc_f32
against float64 references from bf16(x) and the exact codes and scales, on cpu:0 and on
cuda:0 of the mock CUDA driver (which runs the CPU body of the same name); and the tiny
models converted with `tensor_core_matmuls=True` against transformers."""

import ml_dtypes
import numpy as np
import pytest

import axrt
from conftest import kernels_code_object
import axrt.llm
from axrt.builder import ceildiv
from axrt.llm import UnsupportedModelError
from axrt.llm.convert import KERNELS as CONTRACTS
from serving_support import prompts, reference
from test_llm import DATA, TENSOR_CORE_TOLERANCE, check_rounded_model

INT8 = "axrt_matmul_int8_pc_tc_f32"
FP8 = "axrt_matmul_fp8_e4m3_pc_tc_f32"
AWQ = "axrt_matmul_awq_int4_tc_f32"
TILE = 128  # the kernels' workgroup: 128 x 128 outputs
# int8 and fp8 take the bf16 option's tolerance (measured: int8 1.1e-2 on
# tiny-llama, 6.5e-3 on tiny-llama3; fp8 1.0e-2 and 7.9e-3). int4 weights
# are rounded to bf16 as well, 2^-8 of each weight more, compounded over the
# layers (measured: 1.9e-2 on tiny-llama, 1.1e-2 on tiny-llama3).
INT4_TOLERANCE = 4e-2


def code_object(builder):
    return kernels_code_object(builder, [INT8, FP8, AWQ])


def run(kernel, inputs, scalars, m, n, device, *, out=None, stream=None):
    """One dispatch of `kernel` on its grid of 128 x 128 tiles: args are the inputs in order,
    then y, then `scalars`."""
    b = axrt.Builder(producer="axrt-tests", producer_version="1")
    k = b.kernel(kernel, b.kernel_library("axrt.cpu"), params=CONTRACTS[kernel][0])
    if device.type == "cuda":
        b.kernel_variant(k, code_object(b), workgroup_size=256)
    f = b.function("main", inputs=[(name, a.dtype, a.shape) for name, a in inputs.items()],
                   outputs=[("y", np.float32, (m, n))])
    f.dispatch(k, grid=(ceildiv(n, TILE), ceildiv(m, TILE)),
               args=[f.input(i) for i in range(len(inputs))] + [f.output(0), *scalars])
    options = {"out": out} if out is not None else {}
    if stream is not None:
        options["stream"] = stream
    y = axrt.load(b.to_bytes(), device=device).main(*inputs.values(), **options)
    return y if isinstance(y, np.ndarray) else y.numpy()


def rounded(x):
    """bf16(x) (nearest even) in float64."""
    return x.astype(ml_dtypes.bfloat16).astype(np.float64)


# ---------------------------------------------------------------------------
# int8 per channel


def int8_case(rng, m, n, k):
    x = rng.standard_normal((m, k)).astype(np.float32)
    codes = rng.integers(-128, 128, (n, k)).astype(np.int8)
    scale = rng.uniform(0.005, 0.02, (n, 1)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    return x, codes, scale, bias


def run_int8(x, codes, scale, bias, device, **options):
    (m, k), n = x.shape, codes.shape[0]
    return run(INT8, {"x": x, "w": codes, "scale": scale, "bias": bias}, [m, n, k], m, n,
               device, **options)


@pytest.mark.parametrize("m, n, k", [(1, 200, 336), (17, 200, 336), (130, 200, 336),
                                     (257, 136, 40), (17, 9, 50)])
def test_matmul_int8_tensor_core(device, m, n, k):
    """(sum of bf16(x) q) * scale + bias: within the f32 matmul bound of the float64 value on
    tiles of 128 x 128 that M and N end inside; K 40 ends inside the CUDA kernel's K tile of
    32 and K 50 is not a multiple of 8 (element loads). Against f32 activations the rounding
    of x adds at most 2^-8 |x| . |W|."""
    rng = np.random.default_rng(300 + m + k)
    x, codes, scale, bias = int8_case(rng, m, n, k)
    y = run_int8(x, codes, scale, bias, device)
    s = scale.astype(np.float64)[:, 0]
    xr = rounded(x)
    ref = (xr @ codes.T.astype(np.float64)) * s + bias
    value = codes.astype(np.float64) * s[:, None]
    bound = 1e-5 * (np.abs(xr) @ np.abs(value.T) + np.abs(bias)) + 1e-6
    assert np.all(np.abs(y - ref) <= bound)
    exact = x.astype(np.float64) @ value.T + bias
    assert np.all(np.abs(y - exact) <= bound + 2.0 ** -8 * (np.abs(x) @ np.abs(value.T)))


# ---------------------------------------------------------------------------
# fp8 e4m3fn per channel

NAN_CODES = (0x7F, 0xFF)  # e4m3fn has no infinities; S.1111.111 is NaN


def e4m3_values(codes):
    """Each e4m3fn code's value, exactly, in float64."""
    return codes.view(ml_dtypes.float8_e4m3fn).astype(np.float64)


def fp8_case(rng, m, n, k):
    x = rng.standard_normal((m, k)).astype(np.float32)
    codes = rng.integers(0, 254, (n, k)).astype(np.uint8)
    codes[codes >= 0x7F] += 1  # every finite code, no NaN (253 + 1 = 0xfe)
    scale = rng.uniform(0.0005, 0.002, (n, 1)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    return x, codes, scale, bias


def run_fp8(x, codes, scale, bias, device, **options):
    (m, k), n = x.shape, codes.shape[0]
    return run(FP8, {"x": x, "w": codes, "scale": scale, "bias": bias}, [m, n, k], m, n,
               device, **options)


@pytest.mark.parametrize("m, n, k", [(1, 200, 336), (17, 200, 336), (130, 200, 336),
                                     (257, 136, 40), (17, 9, 50)])
def test_matmul_fp8_tensor_core(device, m, n, k):
    """(sum of bf16(x) e4m3(q)) * scale + bias, the codes exact in bf16: within the f32
    matmul bound of the float64 value on the int8 test's shapes (tiles that M and N end
    inside, K inside the K tile, K off 8). Against f32 activations the rounding of x adds
    at most 2^-8 |x| . |W|."""
    rng = np.random.default_rng(600 + m + k)
    x, codes, scale, bias = fp8_case(rng, m, n, k)
    y = run_fp8(x, codes, scale, bias, device)
    s = scale.astype(np.float64)[:, 0]
    q = e4m3_values(codes)
    xr = rounded(x)
    ref = (xr @ q.T) * s + bias
    value = q * s[:, None]
    bound = 1e-5 * (np.abs(xr) @ np.abs(value.T) + np.abs(bias)) + 1e-6
    assert np.all(np.abs(y - ref) <= bound)
    exact = x.astype(np.float64) @ value.T + bias
    assert np.all(np.abs(y - exact) <= bound + 2.0 ** -8 * (np.abs(x) @ np.abs(value.T)))


def test_matmul_fp8_tensor_core_widens_every_code_exactly(device):
    """Through rows of the identity (scale 1, bias 0) y is the staged weights themselves:
    every finite code (code 32 n + k at w[n, k], the NaN codes' places holding 0) widened
    exactly, the subnormals S.0000.mmm (m 2^-9) and +-448 among them; a column holding the
    NaN codes 0x7f and 0xff comes out NaN (each of its outputs multiplies them)."""
    k = 32
    codes = np.zeros((9, k), np.uint8)
    codes[:8] = np.arange(256, dtype=np.uint8).reshape(8, k)
    codes[:8][np.isin(codes[:8], NAN_CODES)] = 0
    codes[8, :2] = NAN_CODES
    x = np.eye(k, dtype=np.float32)
    y = run_fp8(x, codes, np.ones((9, 1), np.float32), np.zeros(9, np.float32), device)
    assert np.all(np.isnan(y[:, 8]))
    np.testing.assert_array_equal(y[:, :8], e4m3_values(codes[:8]).T.astype(np.float32))
    assert y[1, 0] == 2.0 ** -9 and y[7, 0] == 7 * 2.0 ** -9 and y[1, 4] == -(2.0 ** -9)
    assert y[8, 0] == 2.0 ** -6  # the smallest normal
    assert y[30, 3] == 448.0 and y[30, 7] == -448.0


# ---------------------------------------------------------------------------
# AWQ int4


def pack_awq(codes):
    """u32 words of 8 codes (0..15) along the last axis, in the AWQ order: code i in nibble
    (i % 2) 4 + i / 2."""
    codes = codes.astype(np.uint32).reshape(codes.shape[:-1] + (-1, 8))
    shifts = np.array([4 * ((i % 2) * 4 + i // 2) for i in range(8)], np.uint32)
    return np.bitwise_or.reduce(codes << shifts, axis=-1)


def awq_case(rng, m, n, k, group_size):
    groups = k // group_size
    x = rng.standard_normal((m, k)).astype(np.float32)
    q = rng.integers(0, 16, (k, n))
    z = rng.integers(0, 16, (groups, n))
    scales = (rng.uniform(0.002, 0.05, (groups, n)) * rng.choice([-1, 1], (groups, n))).astype(
        np.float16)
    bias = rng.standard_normal(n).astype(np.float32)
    return x, q, z, scales, bias


def awq_inputs(x, q, z, scales, bias):
    return {"x": x, "qweight": pack_awq(q), "scales": scales, "qzeros": pack_awq(z), "bias": bias}


def run_awq(x, q, z, scales, bias, group_size, device, **options):
    (m, k), n = x.shape, q.shape[1]
    return run(AWQ, awq_inputs(x, q, z, scales, bias), [m, n, k, group_size], m, n, device,
               **options)


def awq_weights(q, z, scales, group_size):
    """W [K, N] = (q - z) s exactly, and as the kernels stage it: bf16((q - z) s)."""
    g = np.arange(q.shape[0]) // group_size
    exact = (q - z[g]).astype(np.float64) * scales.astype(np.float64)[g]
    assert np.array_equal(exact.astype(np.float32), exact)  # a 5-bit integer times an f16
    return exact, rounded(exact.astype(np.float32))


@pytest.mark.parametrize("m, n, k, group_size", [(1, 200, 384, 128), (17, 200, 384, 128),
                                                 (130, 136, 256, 128), (257, 200, 384, 128),
                                                 (17, 8, 96, 32)])
def test_matmul_awq_int4_tensor_core(device, m, n, k, group_size):
    """bf16(x) . bf16((q - z) s) + bias: within the f32 matmul bound of the float64 value,
    N off the tile (and off 64); groups of 128 and of 32. Against f32 activations and the
    exact weights the two roundings add at most (2^-7 + 2^-16) |x| . |W|."""
    rng = np.random.default_rng(400 + m + n + group_size)
    x, q, z, scales, bias = awq_case(rng, m, n, k, group_size)
    y = run_awq(x, q, z, scales, bias, group_size, device)
    exact, staged = awq_weights(q, z, scales, group_size)
    xr = rounded(x)
    ref = xr @ staged + bias
    bound = 1e-5 * (np.abs(xr) @ np.abs(staged) + np.abs(bias)) + 1e-6
    assert np.all(np.abs(y - ref) <= bound)
    full = x.astype(np.float64) @ exact + bias
    assert np.all(np.abs(y - full) <=
                  bound + (2.0 ** -7 + 2.0 ** -16) * (np.abs(x) @ np.abs(exact)))


def test_matmul_awq_int4_tensor_core_rounds_weights_to_nearest_even(device):
    """Through rows of the identity y is the staged weights themselves: (q - z) s rounded to
    bf16, ties to even (s = 1 + 2^-8 times 1 lies halfway between 1 and 1 + 2^-7)."""
    k, n, group_size = 32, 8, 32
    q = np.zeros((k, n), np.int64)
    q[:, 0] = 1
    q[:, 1] = 3
    q[:, 2:] = np.random.default_rng(5).integers(0, 16, (k, n - 2))
    z = np.zeros((1, n), np.int64)
    scales = np.full((1, n), 1 + 2.0 ** -8, np.float16)
    scales[0, 4:] = np.array([0.0999, -3.0e-5, 7.0e-8, 1.2e3], np.float16)  # a subnormal f16
    x = np.eye(k, dtype=np.float32)[:17]
    y = run_awq(x, q, z, scales, np.zeros(n, np.float32), group_size, device)
    _, staged = awq_weights(q, z, scales, group_size)
    np.testing.assert_array_equal(y, staged[:17].astype(np.float32))
    assert y[0, 0] == 1.0 and y[0, 1] == 3.0 + 2.0 ** -6


@pytest.mark.parametrize("kernel", [INT8, FP8, AWQ])
def test_tensor_core_quantized_is_batch_invariant(device, kernel):
    """A row's bits do not depend on the step's size or on the other rows: rows computed in a
    batch of 257 (three row tiles) equal, bit for bit, the same rows in batches of 17 and
    127, and the first row alone."""
    rng = np.random.default_rng(500)
    m, n, k = 257, 200, 256
    if kernel == INT8:
        x, codes, scale, bias = int8_case(rng, m, n, k)

        def call(rows):
            return run_int8(rows, codes, scale, bias, device)
    elif kernel == FP8:
        x, codes, scale, bias = fp8_case(rng, m, n, k)

        def call(rows):
            return run_fp8(rows, codes, scale, bias, device)
    else:
        x, q, z, scales, bias = awq_case(rng, m, n, k, 128)

        def call(rows):
            return run_awq(rows, q, z, scales, bias, 128, device)
    big = call(x)
    np.testing.assert_array_equal(call(x[:17]), big[:17])
    np.testing.assert_array_equal(call(x[130:]), big[130:])
    np.testing.assert_array_equal(call(x[:1]), big[:1])


@pytest.mark.parametrize("n, k, group_size, match", [
    (12, 128, 128, "N = 12 is not a multiple of 8"),
    (16, 128, 0, "group_size = 0 is not a positive multiple of 32"),
    (16, 96, 48, "group_size = 48 is not a positive multiple of 32"),
    (16, 160, 128, "K = 160 is not a multiple of group_size = 128")])
def test_matmul_awq_int4_tensor_core_refuses_bad_shapes(n, k, group_size, match):
    """Shapes the layout cannot hold, and groups that a K tile of 32 would straddle: refused
    with INVALID_ARGUMENT, y left as it was."""
    m = 2
    groups = max(1, k // max(group_size, 1))
    inputs = {"x": np.ones((m, k), np.float32),
              "qweight": np.zeros((k, max(1, n // 8)), np.uint32),
              "scales": np.ones((groups, n), np.float16),
              "qzeros": np.zeros((groups, max(1, n // 8)), np.uint32),
              "bias": np.zeros(n, np.float32)}
    out = np.full((m, n), 7.0, np.float32)
    stream = axrt.Stream(device="cpu:0")
    with pytest.raises(axrt.InvalidArgumentError, match=match):
        run(AWQ, inputs, [m, n, k, group_size], m, n, axrt.device("cpu:0"), out=out,
            stream=stream)
        stream.synchronize()
    np.testing.assert_array_equal(out, 7.0)


# ---------------------------------------------------------------------------
# The converter's option


@pytest.mark.parametrize("model, weights", [("tiny-llama", "int8"), ("tiny-llama3", "int8"),
                                            ("tiny-llama", "fp8"), ("tiny-llama3", "fp8"),
                                            ("tiny-llama", "int4"), ("tiny-llama3", "int4")])
def test_tensor_core_matmuls_match_transformers_on_the_quantized_weights(tmp_path, model,
                                                                         weights, capsys):
    """int8, fp8 and int4 projections on tensor cores (on the CPU their twins), which round
    the activations (and int4's dequantized weights) to bf16: teacher-forced logits within the
    tolerance of transformers' on the dequantized weights, the same greedy token wherever
    the reference's top two logits are further apart than that allows, and generation
    equal to the reference's up to the first step where they are not."""
    tolerance = INT4_TOLERANCE if weights == "int4" else TENSOR_CORE_TOLERANCE
    kernel = {"int8": INT8, "fp8": FP8, "int4": AWQ}[weights]
    ref = reference(model, weights)
    path = tmp_path / "tc.axe"
    axrt.llm.convert(DATA / model, path, weights=weights, cuda=False, tensor_core_matmuls=True)
    assert kernel.encode() in path.read_bytes()
    llm = axrt.llm.load(path)
    assert llm.config.tensor_core_matmuls
    worst, equal = check_rounded_model(llm, ref, tolerance)
    with capsys.disabled():
        print(f"\n{model} {weights} tensor-core matmuls: logits within {worst:.2e}, {equal} of "
              f"{len(list(prompts(ref)))} generations equal", end="")


def test_tensor_core_matmuls_run_on_the_mock_device(tmp_path, cuda_mock):
    """The CUDA variants load and launch on their grid (the mock runs their CPU bodies): the
    CPU device's tokens and logits."""
    from axrt.llm.convert import default_fatbin

    if default_fatbin() is None:
        pytest.skip("axrt was built without its CUDA kernels")
    for weights in ("int8", "fp8", "int4"):
        path = tmp_path / f"{weights}.axe"
        axrt.llm.convert(DATA / "tiny-llama3", path, weights=weights, tensor_core_matmuls=True)
        prompt = [int(t) for t in reference("tiny-llama3", weights)["prompt0"]]
        on_cuda, on_cpu = (axrt.llm.load(path, device=d) for d in (cuda_mock, "cpu:0"))
        assert on_cuda.generate(prompt, 8, stop_ids=()) == on_cpu.generate(prompt, 8,
                                                                           stop_ids=())
        with on_cuda.session() as a, on_cpu.session() as b:
            assert np.array_equal(a.prefill(prompt), b.prefill(prompt))


def test_tensor_core_matmuls_refuse_other_modes(tmp_path):
    out = tmp_path / "x.axe"
    with pytest.raises(UnsupportedModelError, match="--tensor-core-matmuls needs --activations "
                                                    "f32, not int8"):
        axrt.llm.convert(DATA / "tiny-llama3", out, weights="int4", activations="int8",
                         cuda=False, tensor_core_matmuls=True)
    with pytest.raises(UnsupportedModelError, match="--tensor-core-matmuls and --decode-matmuls"):
        axrt.llm.convert(DATA / "tiny-llama3", out, weights="int8", cuda=False,
                         tensor_core_matmuls=True, decode_matmuls=True)
    with pytest.raises(UnsupportedModelError, match="--tensor-core-matmuls needs --weights bf16, "
                                                    "int8, fp8 or int4, not f32"):
        axrt.llm.convert(DATA / "tiny-llama3", out, weights="f32", cuda=False,
                         tensor_core_matmuls=True)
