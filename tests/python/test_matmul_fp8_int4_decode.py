"""The fp8 e4m3fn per-channel matmuls (axrt_matmul_fp8_e4m3_pc_f32 and its
decode-grid twin) and the GPTQ int4 decode matmul
(axrt_matmul_gptq_int4_f32_decode) against float64 references from the
stored codes, on cpu:0 and on cuda:0 of the mock CUDA driver (which runs the
CPU kernel of the same name): within the matmul bound, the decode kernels the
same bits as the tile kernels on the CPU, and every row's bits the same
whatever M (docs/kernels.md, "Decode matmuls")."""

import pathlib

import ml_dtypes
import numpy as np
import pytest

import axrt
from axrt.builder import ceildiv
from axrt.llm import quantize
from axrt.llm.convert import FP8_LAYOUT, KERNELS as CONTRACTS
from test_llm_kernels import cpu, cuda_code_object, pack_nibbles, refused, run  # noqa: F401

FP8_TILE = "axrt_matmul_fp8_e4m3_pc_f32"
FP8_DECODE = "axrt_matmul_fp8_e4m3_pc_f32_decode"
GPTQ_TILE = "axrt_matmul_gptq_int4_f32"
GPTQ_DECODE = "axrt_matmul_gptq_int4_f32_decode"
# Columns by rows a workgroup of each kernel (docs/kernels.md).
GRIDS = {FP8_TILE: (64, 64), FP8_DECODE: (8, 16), GPTQ_TILE: (64, 64), GPTQ_DECODE: (16, 16)}

# Every e4m3fn code's value, float64 (NaN for S.1111.111).
E4M3_VALUES = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)


def params(kernel):
    return CONTRACTS[kernel][0]


def test_fp8_contracts_share_the_int8_parameters_and_declare_the_layout():
    assert params(FP8_TILE) == params(FP8_DECODE)
    assert [p.name for p in params(FP8_TILE)] == [p.name for p in
                                                   params("axrt_matmul_int8_pc_f32")]
    assert params(FP8_TILE)[1].layout.layout_id == "fp8.e4m3fn.per_channel"
    assert params(GPTQ_DECODE) == params(GPTQ_TILE)


def nearest_e4m3(v):
    """Round to nearest e4m3fn value, ties to the even code, by search over the finite
    codes (float64): independent of ml_dtypes."""
    finite = np.arange(256)[~np.isnan(E4M3_VALUES)]
    values = E4M3_VALUES[finite]
    dist = np.abs(v[..., None] - values)
    best = dist.min(axis=-1, keepdims=True)
    ties = dist == best
    # Of tied codes, the one whose mantissa is even (code & 1 == 0); -0 and +0 are one value.
    even = ties & (finite % 2 == 0)
    pick = np.where(even.any(axis=-1, keepdims=True), even, ties)
    return values[np.argmax(pick, axis=-1)]


def test_fp8_per_channel_quantization_rounds_to_nearest_even():
    rng = np.random.default_rng(5)
    w = rng.standard_normal((6, 40)).astype(np.float32) * rng.uniform(0.01, 3, (6, 1)).astype(
        np.float32)
    w[2] = 0  # a row of zeros: scale 1, codes 0
    w[3, :5] = [448, -448, 0, 1e-30, -1e-30]  # the peak exactly, and values below every step
    codes, scale = quantize.fp8_e4m3_per_channel(w)
    assert codes.dtype == ml_dtypes.float8_e4m3fn and codes.shape == w.shape
    assert scale.dtype == np.float32 and scale.shape == (6, 1)
    assert scale[2, 0] == 1 and np.all(codes[2].astype(np.float32) == 0)
    np.testing.assert_array_equal(scale[:, 0], np.where(
        np.abs(w).max(axis=1) > 0, np.abs(w).max(axis=1) / np.float32(448), 1).astype(np.float32))
    ratio = (w / scale).astype(np.float64)
    np.testing.assert_array_equal(codes.astype(np.float64), nearest_e4m3(ratio))
    assert not np.any(np.isnan(codes.astype(np.float32)))
    # Ties between two codes go to the even one: 1 + 1/16 lies between 1 and 1.125.
    halfway = np.array([[1.0625, 1.1875, -1.0625, 448.0]], np.float32)
    tie_codes, _ = quantize.fp8_e4m3_per_channel(halfway)
    np.testing.assert_array_equal(tie_codes.astype(np.float32), [[1.0, 1.25, -1.0, 448.0]])


def fp8_weights(rng, n, k):
    """e4m3fn codes [N, K] (every finite code may occur), scales [N, 1] and the float64
    weights they stand for."""
    finite = np.arange(256, dtype=np.uint8)[~np.isnan(E4M3_VALUES)]
    codes = rng.choice(finite, (n, k)).astype(np.uint8)
    scale = rng.uniform(0.0005, 0.002, (n, 1)).astype(np.float32)
    return codes, scale, E4M3_VALUES[codes] * scale.astype(np.float64)


def call_fp8(device, kernel, codes, scale, bias, x):
    m, k = x.shape
    n = codes.shape[0]
    b = axrt.Builder(producer="axrt-tests", producer_version="1")
    kern = b.kernel(kernel, b.kernel_library("axrt.cpu"), params=params(kernel))
    if device.type == "cuda":
        b.kernel_variant(kern, cuda_code_object(b), workgroup_size=256)
    s = b.constant("scale", scale)
    w = b.constant("w", codes.view(ml_dtypes.float8_e4m3fn),
                   layout=FP8_LAYOUT.with_constants(scale=s))
    f = b.function("main", inputs=[("x", np.float32, (m, k)), ("bias", np.float32, (n,))],
                   outputs=[("y", np.float32, (m, n))])
    cols, rows = GRIDS[kernel]
    f.dispatch(kern, grid=(ceildiv(n, cols), ceildiv(m, rows)),
               args=[f.input(0), w, s, f.input(1), f.output(0), m, n, k])
    out = axrt.load(b.to_bytes(), device=device).main(x, bias)
    return out if isinstance(out, np.ndarray) else out.numpy()


@pytest.mark.parametrize("m, n, k", [(1, 200, 336), (5, 67, 336), (16, 72, 50),
                                     (33, 200, 336)])
def test_matmul_fp8_per_channel(device, m, n, k):
    """Tile and decode kernels within the matmul bound of the float64 product of the
    codes' values times the scales; on the CPU the same bits; each row's bits those of
    that row alone and inside 16 and 33 rows."""
    rng = np.random.default_rng(90 + m)
    codes, scale, value = fp8_weights(rng, n, k)
    bias = rng.standard_normal(n).astype(np.float32)
    x = rng.standard_normal((33, k)).astype(np.float32)
    ref = x[:m].astype(np.float64) @ value.T + bias
    bound = 1e-5 * (np.abs(x[:m].astype(np.float64)) @ np.abs(value.T) + np.abs(bias)) + 1e-6
    results = {}
    for kernel in (FP8_TILE, FP8_DECODE):
        y = call_fp8(device, kernel, codes, scale, bias, x[:m])
        assert np.all(np.abs(y - ref) <= bound), kernel
        alone = call_fp8(device, kernel, codes, scale, bias, x[:1])
        np.testing.assert_array_equal(alone[0], y[0])
        if m == 33:
            inside = call_fp8(device, kernel, codes, scale, bias, x[:16])
            np.testing.assert_array_equal(inside, y[:16])
        results[kernel] = y
    if device.type == "cpu":
        np.testing.assert_array_equal(results[FP8_DECODE], results[FP8_TILE])


def test_matmul_fp8_nan_code_makes_its_column_nan(cpu):
    rng = np.random.default_rng(3)
    codes, scale, _ = fp8_weights(rng, 16, 32)
    codes[5, 7] = 0x7F  # S.1111.111: NaN
    x = rng.standard_normal((2, 32)).astype(np.float32)
    for kernel in (FP8_TILE, FP8_DECODE):
        y = call_fp8(cpu, kernel, codes, scale, np.zeros(16, np.float32), x)
        assert np.all(np.isnan(y[:, 5])) and not np.any(np.isnan(np.delete(y, 5, axis=1)))


def gptq_weights(rng, n, k, group_size):
    groups = k // group_size
    q = rng.integers(0, 16, (k, n))
    z = rng.integers(0, 16, (groups, n))
    scales = (rng.uniform(0.002, 0.05, (groups, n)) * rng.choice([-1, 1], (groups, n))).astype(
        np.float16)
    g = np.arange(k) // group_size
    value = (q - z[g]) * scales.astype(np.float64)[g]  # [K, N], exact
    return pack_nibbles(q, axis=0), scales, pack_nibbles(z, axis=1), value


def call_gptq(device, kernel, qweight, scales, qzeros, bias, x, n, k, group_size, **options):
    m = x.shape[0]
    cols, rows = GRIDS[kernel]
    (y,) = run(kernel, params(kernel), (ceildiv(n, cols), ceildiv(m, rows)),
               {"x": x, "qweight": qweight, "scales": scales, "qzeros": qzeros, "bias": bias},
               {"y": (np.float32, (m, n))},
               lambda f: [f.input(0), f.input(1), f.input(2), f.input(3), f.input(4),
                          f.output(0), m, n, k, group_size], device, **options)
    return y


@pytest.mark.parametrize("m, group_size", [(1, 128), (5, 128), (16, 128), (33, 128), (5, 32),
                                           (16, 8)])
def test_matmul_gptq_int4_decode(device, m, group_size):
    """Within the matmul bound of the float64 product of (q - z) s; on the CPU the same bits
    as axrt_matmul_gptq_int4_f32; each row's bits those of that row alone and inside 16
    and 33 rows."""
    rng = np.random.default_rng(120 + m + group_size)
    n, k = 200, 384  # N a multiple of 8, not of 16: the last workgroup half full
    qweight, scales, qzeros, value = gptq_weights(rng, n, k, group_size)
    bias = rng.standard_normal(n).astype(np.float32)
    x = rng.standard_normal((33, k)).astype(np.float32)
    args = (qweight, scales, qzeros, bias)
    y = call_gptq(device, GPTQ_DECODE, *args, x[:m], n, k, group_size)
    ref = x[:m].astype(np.float64) @ value + bias
    bound = 1e-5 * (np.abs(x[:m].astype(np.float64)) @ np.abs(value) + np.abs(bias)) + 1e-6
    assert np.all(np.abs(y - ref) <= bound)
    np.testing.assert_array_equal(call_gptq(device, GPTQ_DECODE, *args, x[:1], n, k,
                                            group_size)[0], y[0])
    if m == 33:
        np.testing.assert_array_equal(call_gptq(device, GPTQ_DECODE, *args, x[:16], n, k,
                                                group_size), y[:16])
    if device.type == "cpu":
        np.testing.assert_array_equal(
            call_gptq(device, GPTQ_TILE, *args, x[:m], n, k, group_size), y)


@pytest.mark.parametrize("n, k, group_size, match", [
    (12, 128, 128, "N = 12 is not a multiple of 8"),
    (16, 192, 128, "K = 192 is not a multiple of group_size = 128"),
    (16, 120, 12, "group_size = 12 is not a multiple of 8"),
    (16, 128, 0, "group_size is 0")])
def test_matmul_gptq_int4_decode_refuses_bad_shapes(cpu, n, k, group_size, match):
    m = 2
    groups = max(k // max(group_size, 1), 1)
    inputs = (np.zeros((ceildiv(k, 8), n), np.uint32), np.ones((groups, n), np.float16),
              np.zeros((groups, ceildiv(n, 8)), np.uint32), np.zeros(n, np.float32))
    x = np.ones((m, k), np.float32)
    out = np.full((m, n), 7.0, np.float32)
    refused(lambda s: call_gptq(cpu, GPTQ_DECODE, *inputs, x, n, k, group_size, out=out,
                                stream=s), match)
    np.testing.assert_array_equal(out, 7.0)


# ---------------------------------------------------------------------------
# The gated SiLU in the bf16 decode matmul's epilogue (axrt_matmul_bf16_f32_decode_silu)

GATED = "axrt_matmul_bf16_f32_decode_silu"


def interleave(gate_up, rows=4):
    """[gate; up] rows [2 I, K] as the converter stores them: 4 gate rows, then their 4 up
    rows."""
    n, k = gate_up.shape
    return gate_up.reshape(2, n // (2 * rows), rows, k).transpose(1, 0, 2, 3).reshape(n, k)


@pytest.mark.parametrize("m, inner", [(1, 36), (5, 64), (16, 36), (33, 20)])
def test_matmul_bf16_decode_silu_is_the_decode_matmul_then_silu_mul(device, m, inner):
    """The same bits as axrt_matmul_bf16_f32_decode on [gate; up] followed by
    axrt_silu_mul_f32 (rows of 36 and 20 end in the silu kernel's scalar tail), and each
    row's bits the same alone."""
    rng = np.random.default_rng(150 + m + inner)
    k = 72
    gate_up = rng.standard_normal((2 * inner, k)).astype(np.float32)
    w = interleave(gate_up).astype(ml_dtypes.bfloat16).view(np.uint16)
    x = rng.standard_normal((m, k)).astype(np.float32)
    bias = np.zeros(2 * inner, np.float32)
    decode = params("axrt_matmul_bf16_f32_decode")
    assert params(GATED) == decode

    def gated(rows):
        (act,) = run(GATED, params(GATED), (ceildiv(2 * inner, 8), ceildiv(rows, 16)),
                     {"x": x[:rows], "w": w, "bias": bias}, {"act": (np.float32, (rows, inner))},
                     lambda f: [f.input(0), f.input(1), f.input(2), f.output(0), rows,
                                2 * inner, k], device)
        return act

    act = gated(m)
    plain = gate_up.astype(ml_dtypes.bfloat16).view(np.uint16)
    (h,) = run("axrt_matmul_bf16_f32_decode", decode, (ceildiv(2 * inner, 8), ceildiv(m, 16)),
               {"x": x, "w": plain, "bias": bias}, {"h": (np.float32, (m, 2 * inner))},
               lambda f: [f.input(0), f.input(1), f.input(2), f.output(0), m, 2 * inner, k],
               device)
    (want,) = run("axrt_silu_mul_f32", params("axrt_silu_mul_f32"), (m,), {"h": h},
                  {"act": (np.float32, (m, inner))},
                  lambda f: [f.input(0), f.output(0), m, inner], device)
    np.testing.assert_array_equal(act, want)
    np.testing.assert_array_equal(gated(1)[0], act[0])


def test_matmul_bf16_decode_silu_refuses_a_partial_block(cpu):
    m, n, k = 2, 12, 16
    inputs = {"x": np.ones((m, k), np.float32), "w": np.zeros((n, k), np.uint16),
              "bias": np.zeros(n, np.float32)}
    out = np.full((m, n // 2), 7.0, np.float32)
    refused(lambda s: run(GATED, params(GATED), (2, 1), inputs, {"act": (np.float32, (m, n // 2))},
                          lambda f: [f.input(0), f.input(1), f.input(2), f.output(0), m, n, k],
                          cpu, out=out, stream=s), "N = 12 is not a multiple of 8")
    np.testing.assert_array_equal(out, 7.0)


@pytest.mark.parametrize("model, gated_kernel", [("tiny-llama", True), ("tiny-llama3", True),
                                                 ("tiny-llama-tp", False)])
def test_gated_decode_matmul_gives_the_bf16_logits_bit_for_bit(tmp_path, model, gated_kernel):
    """bf16 with fused kernels and decode matmuls: gate/up and the gated SiLU as one
    kernel, on the CPU the same logits, bit for bit, as the bf16 model's default kernels,
    and transformers' greedy tokens on the bf16 weights. tiny-llama-tp's MLP has biases,
    which the gated kernel's converter path leaves to the two kernels."""
    import axrt.llm
    from serving_support import prompts, reference

    data = pathlib.Path(__file__).resolve().parent.parent / "llm" / "data"
    ref = reference(model, "bf16")
    plain_path, gated_path = tmp_path / "plain.axe", tmp_path / "gated.axe"
    axrt.llm.convert(data / model, plain_path, weights="bf16", cuda=False)
    axrt.llm.convert(data / model, gated_path, weights="bf16", cuda=False, fused_kernels=True,
                     decode_matmuls=True)
    assert (GATED.encode() in gated_path.read_bytes()) == gated_kernel
    plain, gated = axrt.llm.load(plain_path), axrt.llm.load(gated_path)
    for i, prompt in prompts(ref):
        with plain.session() as a, gated.session() as b:
            assert np.array_equal(a.prefill(prompt), b.prefill(prompt)), f"prompt {i}"
            for t in ref[f"prompt{i}_greedy"][:4]:
                assert np.array_equal(a.decode(int(t)), b.decode(int(t))), f"prompt {i}"
        assert gated.generate(prompt, 32, stop_ids=()) == ref[f"prompt{i}_greedy"].tolist()
