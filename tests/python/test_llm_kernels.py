"""The transformer kernels of docs/llm.md ("Kernels") against float64 numpy
references.

Each test builds a one-dispatch executable over the "axrt.cpu" library and
runs it on cpu:0 and, through the kernel's CUDA variant (the build's fatbin),
on cuda:0 of the mock CUDA driver, which runs the CPU kernel of the same name.
The paged KV cache is f32 [L, 2, NB, KVH, BS, D]; every test scatters a
sequence over shuffled blocks of a larger pool and fills the slots no
sequence owns with NaN, which any read of them would carry into the result.
"""

import math
import platform

import ml_dtypes
import numpy as np
import pytest

import axrt
from conftest import kernels_code_object
from axrt.builder import ceildiv
from axrt.llm.convert import KERNELS as CONTRACTS

BS = 16  # tokens per KV block

KERNELS = ["axrt_embedding_f32", "axrt_embedding_bf16", "axrt_rope_f32", "axrt_silu_mul_f32",
           "axrt_kv_cache_write_f32", "axrt_attention_prefill_f32", "axrt_attention_decode_f32",
           "axrt_kv_cache_write_bf16", "axrt_kv_cache_write_fp8_e4m3",
           "axrt_attention_decode_kv_bf16", "axrt_attention_decode_kv_fp8_e4m3",
           "axrt_add_rmsnorm_f32", "axrt_rope_kv_cache_write_f32", "axrt_rope_kv_cache_write_bf16",
           "axrt_rope_kv_cache_write_fp8_e4m3", "axrt_matmul_bf16_f32_decode",
           "axrt_matmul_int8_pc_f32", "axrt_matmul_int8_pc_f32_decode",
           "axrt_sample_f32", "axrt_matmul_f32_nk", "axrt_matmul_bf16_f32",
           "axrt_matmul_gptq_int4_q8_f32", "axrt_matmul_int8_pc_q8_f32",
           "axrt_attention_decode_split_f32",
           "axrt_attention_decode_split_kv_bf16", "axrt_attention_decode_split_kv_fp8_e4m3",
           "axrt_attention_combine_f32", "axrt_matmul_bf16_tc_f32",
           "axrt_attention_flash_f32", "axrt_attention_flash_kv_bf16",
           "axrt_attention_flash_kv_fp8_e4m3"]


def params(kernel):
    """The parameter table of `kernel`, from its contract (kernels/contracts.json, as the
    converter reads it)."""
    return CONTRACTS[kernel][0]


EMBEDDING = params("axrt_embedding_f32")  # axrt_embedding_bf16's too
ROPE = params("axrt_rope_f32")
SILU_MUL = params("axrt_silu_mul_f32")
KV_CACHE_WRITE = params("axrt_kv_cache_write_f32")
PREFILL = params("axrt_attention_prefill_f32")
DECODE = params("axrt_attention_decode_f32")
MATMUL = params("axrt_matmul_f32_nk")  # axrt_matmul_bf16_f32's too
MATMUL_GPTQ = params("axrt_matmul_gptq_int4_q8_f32")
MATMUL_INT8_Q8 = params("axrt_matmul_int8_pc_q8_f32")
SAMPLE = params("axrt_sample_f32")
assert params("axrt_embedding_bf16") == EMBEDDING and params("axrt_matmul_bf16_f32") == MATMUL
# The KV cache's element types (docs/kernels.md, "KV cache"): write and decode kernels.
KV_KERNELS = {"bf16": ("axrt_kv_cache_write_bf16", "axrt_attention_decode_kv_bf16"),
              "fp8_e4m3": ("axrt_kv_cache_write_fp8_e4m3", "axrt_attention_decode_kv_fp8_e4m3")}
assert all(params(w)[:3] == KV_CACHE_WRITE[:3] and params(d) == DECODE
           for w, d in KV_KERNELS.values())
# Split decode by the cache's element type, and the combine (docs/kernels.md, "Split attention").
SPLIT_KERNELS = {"f32": "axrt_attention_decode_split_f32",
                 "bf16": "axrt_attention_decode_split_kv_bf16",
                 "fp8_e4m3": "axrt_attention_decode_split_kv_fp8_e4m3"}
SPLIT = params("axrt_attention_decode_split_f32")
COMBINE = params("axrt_attention_combine_f32")
assert all(params(k) == SPLIT for k in SPLIT_KERNELS.values())


# ---------------------------------------------------------------------------
# Running one dispatch


@pytest.fixture
def cpu():
    return axrt.device("cpu:0")


def cuda_code_object(builder):
    return kernels_code_object(builder, KERNELS)


def run(kernel, params, grid, inputs, outputs, args, device, *, copies=(), out=None,
        stream=None):
    """Calls main(*inputs) of an executable that copies input `i` to output
    `o` for each (i, o) in `copies`, then dispatches `kernel` over `grid`
    with args(function). `inputs`: name -> array; `outputs`: name ->
    (dtype, shape). Returns the outputs as numpy arrays."""
    b = axrt.Builder(producer="axrt-tests", producer_version="1")
    k = b.kernel(kernel, b.kernel_library("axrt.cpu"), params=params)
    if device.type == "cuda":
        b.kernel_variant(k, cuda_code_object(b), workgroup_size=256)  # docs/kernels.md
    f = b.function("main", inputs=[(n, a.dtype, a.shape) for n, a in inputs.items()],
                   outputs=[(n, dtype, shape) for n, (dtype, shape) in outputs.items()])
    for i, o in copies:
        f.copy(f.input(i), f.output(o), list(inputs.values())[i].nbytes)
    f.dispatch(k, grid=grid, args=args(f))
    exe = axrt.load(b.to_bytes(), device=device)
    options = {}
    if out is not None:
        options["out"] = out
    if stream is not None:
        options["stream"] = stream
    result = exe.main(*inputs.values(), **options)
    results = result if isinstance(result, tuple) else (result,)
    return [r if isinstance(r, np.ndarray) else r.numpy() for r in results]


def refused(call, match):
    """`call(stream)` fails with INVALID_ARGUMENT on a stream of its own (a
    failure is sticky)."""
    stream = axrt.Stream(device="cpu:0")
    with pytest.raises(axrt.InvalidArgumentError, match=match):
        call(stream)
        stream.synchronize()


# ---------------------------------------------------------------------------
# The paged KV cache


def scattered_tables(rng, sequences, max_blocks, num_blocks):
    """Disjoint block tables [S, MBS] over shuffled blocks of the pool."""
    assert sequences * max_blocks <= num_blocks
    return rng.permutation(num_blocks)[: sequences * max_blocks].reshape(
        sequences, max_blocks).astype(np.int32)


def filled_cache(rng, layers, num_blocks, kv_heads, head_dim, layer, tables, lengths):
    """A NaN cache with positions [0, lengths[s]) of each sequence random."""
    cache = np.full((layers, 2, num_blocks, kv_heads, BS, head_dim), np.nan, np.float32)
    for table, n in zip(tables, lengths):
        for p in range(n):
            cache[layer, :, table[p // BS], :, p % BS, :] = rng.standard_normal(
                (2, kv_heads, head_dim), dtype=np.float32)
    return cache


def cached(cache, layer, table, kv_head, n):
    """Keys and values [n, D] of positions [0, n) of a sequence, float64."""
    keys = np.stack([cache[layer, 0, table[p // BS], kv_head, p % BS] for p in range(n)])
    values = np.stack([cache[layer, 1, table[p // BS], kv_head, p % BS] for p in range(n)])
    return keys.astype(np.float64), values.astype(np.float64)


def attention_reference(q, keys, values, scale):
    s = (keys @ q) * scale
    p = np.exp(s - s.max())
    return (p / p.sum()) @ values, p / p.sum()


# ---------------------------------------------------------------------------
# Embedding


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_embedding(device, dtype):
    rng = np.random.default_rng(1)
    T, H, V = 37, 96, 1000
    table = rng.standard_normal((V, H), dtype=np.float32)
    if dtype == "bf16":
        table = table.astype(ml_dtypes.bfloat16)
    tokens = rng.integers(0, V, T).astype(np.int32)
    tokens[:3] = [0, V - 1, tokens[5]]  # both ends of the table, a repeat
    (out,) = run(f"axrt_embedding_{dtype}", EMBEDDING, T, {"tokens": tokens, "table": table},
                 {"out": (np.float32, (T, H))},
                 lambda f: [f.input(0), f.input(1), f.output(0), T, H, V], device)
    np.testing.assert_array_equal(out, table.astype(np.float32)[tokens])


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("bad", [-1, 1000, 2**31 - 1])
def test_embedding_refuses_tokens_out_of_range(cpu, dtype, bad):
    rng = np.random.default_rng(2)
    T, H, V = 3, 8, 1000
    table = rng.standard_normal((V, H), dtype=np.float32)
    if dtype == "bf16":
        table = table.astype(ml_dtypes.bfloat16)
    tokens = np.array([4, bad, 5], np.int32)
    out = np.full((T, H), 7.0, np.float32)
    refused(lambda s: run(f"axrt_embedding_{dtype}", EMBEDDING, T,
                          {"tokens": tokens, "table": table}, {"out": (np.float32, (T, H))},
                          lambda f: [f.input(0), f.input(1), f.output(0), T, H, V], cpu,
                          out=out, stream=s),
            f"token 1 is {bad}, outside \\[0, 1000\\)")
    np.testing.assert_array_equal(out[1], 7.0)  # the bad token's row is untouched


# ---------------------------------------------------------------------------
# Rotary position embedding


def llama3_inv_freq(head_dim, theta=500000.0, factor=8.0, low_freq_factor=1.0,
                    high_freq_factor=4.0, original_max_position_embeddings=8192):
    """Hugging Face's "llama3" rope scaling of the plain inverse frequencies, in float64."""
    inv_freq = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    low_freq_wavelen = original_max_position_embeddings / low_freq_factor
    high_freq_wavelen = original_max_position_embeddings / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = ((original_max_position_embeddings / wavelen - low_freq_factor)
              / (high_freq_factor - low_freq_factor))
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    return np.where(medium, smoothed, scaled)


def rope_reference(x, positions, inv_freq, heads, head_dim, scaling):
    """Rotate-half rope in float64 over the f32 angles of the contract."""
    out = x.astype(np.float64)
    half = head_dim // 2
    angle = positions.astype(np.float32)[:, None] * inv_freq.astype(np.float32)[None, :]
    c = np.cos(angle.astype(np.float64)) * np.float64(np.float32(scaling))
    s = np.sin(angle.astype(np.float64)) * np.float64(np.float32(scaling))
    for h in range(heads):
        a = out[:, h * head_dim: h * head_dim + half].copy()
        b = out[:, h * head_dim + half: (h + 1) * head_dim].copy()
        out[:, h * head_dim: h * head_dim + half] = a * c - b * s
        out[:, h * head_dim + half: (h + 1) * head_dim] = b * c + a * s
    return out


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("scaling", ["plain", "llama3", "attention_scaling"])
def test_rope(device, head_dim, scaling):
    rng = np.random.default_rng(3)
    T, heads = 23, 6  # e.g. 4 query and 2 key heads at the start of a qkv row
    row_stride = (heads + 2) * head_dim + 5
    x = rng.standard_normal((T, row_stride), dtype=np.float32)
    positions = rng.integers(0, 4096, T).astype(np.int32)
    positions[:3] = [0, 131071, 8191]
    if scaling == "llama3":
        inv_freq, attention_scaling = llama3_inv_freq(head_dim), 1.0
    else:
        inv_freq = 1.0 / 10000.0 ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
        attention_scaling = 1.2 if scaling == "attention_scaling" else 1.0
    inv_freq = inv_freq.astype(np.float32)
    (out,) = run("axrt_rope_f32", ROPE, T,
                 {"x": x, "positions": positions, "inv_freq": inv_freq},
                 {"y": (np.float32, (T, row_stride))},
                 lambda f: [f.output(0), f.input(1), f.input(2), T, heads, head_dim,
                            row_stride, attention_scaling],
                 device, copies=[(0, 0)])
    ref = rope_reference(x, positions, inv_freq, heads, head_dim, attention_scaling)
    rotated = heads * head_dim
    half = head_dim // 2
    # Each output is a . c - b . s of f32 a, b: a few roundings of |a| + |b|.
    pair = np.abs(x[:, :rotated]).reshape(T, heads, 2, half)
    magnitude = np.broadcast_to((pair[:, :, 0] + pair[:, :, 1])[:, :, None], pair.shape)
    bound = 1e-6 * attention_scaling * magnitude.reshape(T, rotated) + 1e-7
    assert np.all(np.abs(out[:, :rotated] - ref[:, :rotated]) <= bound)
    np.testing.assert_array_equal(out[:, rotated:], x[:, rotated:])  # the rest untouched


# ---------------------------------------------------------------------------
# Projections on [N, K] weights (the checkpoint's [out, in] layout)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("m", [1, 3, 16, 70])  # dot products, then the tile engine
def test_matmul_nk(device, dtype, m):
    rng = np.random.default_rng(40 + m)
    n, k = 200, 336  # N past three tiles, K past every vector width and panel edge
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    if dtype == "bf16":
        stored = (w.view(np.uint32) >> 16).astype(np.uint16)  # truncated: exact widening
        value = (stored.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        kernel = "axrt_matmul_bf16_f32"
    else:
        stored, value, kernel = w, w.astype(np.float64), "axrt_matmul_f32_nk"
    (y,) = run(kernel, MATMUL, (ceildiv(n, 64), ceildiv(m, 64)),
               {"x": x, "w": stored, "bias": bias}, {"y": (np.float32, (m, n))},
               lambda f: [f.input(0), f.input(1), f.input(2), f.output(0), m, n, k], device)
    ref = x.astype(np.float64) @ value.T + bias
    # docs/kernels.md: 1e-5 sum_k |x W| + |bias| scaled, plus 1e-6.
    bound = 1e-5 * (np.abs(x.astype(np.float64)) @ np.abs(value.T) + np.abs(bias)) + 1e-6
    assert np.all(np.abs(y - ref) <= bound)


@pytest.mark.parametrize("m, n, k", [(1, 200, 336), (3, 200, 336), (16, 67, 336), (21, 9, 50),
                                     (70, 200, 336)])
def test_matmul_bf16_decode(device, m, n, k):
    """The decode grid (8 columns by 16 rows a workgroup): within the matmul bound of the
    float64 product, and the same bits as axrt_matmul_bf16_f32 (its CPU body takes the same
    dot products), whatever M; K 50 is not a multiple of 8."""
    rng = np.random.default_rng(60 + m)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    stored = (w.view(np.uint32) >> 16).astype(np.uint16)
    value = (stored.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    kernel = "axrt_matmul_bf16_f32_decode"
    inputs = {"x": x, "w": stored, "bias": bias}

    def args(f):
        return [f.input(0), f.input(1), f.input(2), f.output(0), m, n, k]

    (y,) = run(kernel, params(kernel), (ceildiv(n, 8), ceildiv(m, 16)), inputs,
               {"y": (np.float32, (m, n))}, args, device)
    ref = x.astype(np.float64) @ value.T + bias
    bound = 1e-5 * (np.abs(x.astype(np.float64)) @ np.abs(value.T) + np.abs(bias)) + 1e-6
    assert np.all(np.abs(y - ref) <= bound)
    (tiled,) = run("axrt_matmul_bf16_f32", MATMUL, (ceildiv(n, 64), ceildiv(m, 64)), inputs,
                   {"y": (np.float32, (m, n))}, args, device)
    if device.type == "cpu":
        np.testing.assert_array_equal(y, tiled)
    # Batch invariance: the first row alone gives the same bits.
    (alone,) = run(kernel, params(kernel), (ceildiv(n, 8), 1),
                   {"x": x[:1], "w": stored, "bias": bias}, {"y": (np.float32, (1, n))},
                   lambda f: [f.input(0), f.input(1), f.input(2), f.output(0), 1, n, k], device)
    np.testing.assert_array_equal(alone[0], y[0])


TENSOR_CORE = "axrt_matmul_bf16_tc_f32"


def run_tensor_core(x, stored, bias, device):
    """axrt_matmul_bf16_tc_f32 on its grid of 128 x 128 tiles (docs/kernels.md)."""
    (m, k), n = x.shape, stored.shape[0]
    (y,) = run(TENSOR_CORE, params(TENSOR_CORE), (ceildiv(n, 128), ceildiv(m, 128)),
               {"x": x, "w": stored, "bias": bias}, {"y": (np.float32, (m, n))},
               lambda f: [f.input(0), f.input(1), f.input(2), f.output(0), m, n, k], device)
    return y


def bf16_weights(rng, n, k):
    """Random bf16 weights (truncated f32, so the widening is exact): the stored bits and
    their values in float64."""
    w = rng.standard_normal((n, k)).astype(np.float32)
    stored = (w.view(np.uint32) >> 16).astype(np.uint16)
    return stored, (stored.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


@pytest.mark.parametrize("m, n, k", [(17, 200, 336), (64, 136, 40), (130, 200, 336),
                                     (130, 9, 50), (1, 129, 8)])
def test_matmul_bf16_tensor_core(device, m, n, k):
    """x rounded to bf16 (nearest even), times the bf16 weights: within the f32 matmul bound of
    the float64 product of the rounded x, on tiles of 128 x 128 that M and N end inside; K 40
    ends inside the kernel's K tile of 32 and K 50 is not a multiple of 8 (element loads)."""
    rng = np.random.default_rng(80 + m + k)
    x = rng.standard_normal((m, k)).astype(np.float32)
    stored, value = bf16_weights(rng, n, k)
    bias = rng.standard_normal(n).astype(np.float32)
    y = run_tensor_core(x, stored, bias, device)
    xr = x.astype(ml_dtypes.bfloat16).astype(np.float64)
    ref = xr @ value.T + bias
    bound = 1e-5 * (np.abs(xr) @ np.abs(value.T) + np.abs(bias)) + 1e-6
    assert np.all(np.abs(y - ref) <= bound)
    # Against f32 activations, the rounding of x adds at most 2^-8 |x| . |W|.
    exact = x.astype(np.float64) @ value.T + bias
    assert np.all(np.abs(y - exact) <= bound + 2.0 ** -8 * (np.abs(x) @ np.abs(value.T)))


def test_matmul_bf16_tensor_core_rounds_to_nearest_even(device):
    """Through identity weights y is bf16(x) itself: ties go to the even neighbour, either
    side of a tie to the nearer one, the largest values below a power of two up to it."""
    bits = np.array([0x3f808000, 0x3f818000, 0xbf808000, 0xbf818000, 0x3f80ffff, 0x3f807fff,
                     0x3f808001, 0x3f81ffff, 0x40490fdb, 0x3eaaaaab, 0xc2f6e979, 0x00000000,
                     0x80000000, 0x3f800001, 0x7effffff, 0x0080c000], np.uint32)
    k = bits.size
    x = np.tile(bits.view(np.float32), (17, 1))
    eye = (np.eye(k, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)
    y = run_tensor_core(x, eye, np.zeros(k, np.float32), device)
    np.testing.assert_array_equal(y, x.astype(ml_dtypes.bfloat16).astype(np.float32))


def test_matmul_bf16_tensor_core_is_batch_invariant(device):
    """A row's bits do not depend on the step's size or on the other rows: rows computed in a
    batch of 130 (two row tiles) equal, bit for bit, the same rows in a batch of 17, and
    the first row alone."""
    rng = np.random.default_rng(90)
    n, k = 200, 336
    x = rng.standard_normal((130, k)).astype(np.float32)
    stored, _ = bf16_weights(rng, n, k)
    bias = rng.standard_normal(n).astype(np.float32)
    big = run_tensor_core(x, stored, bias, device)
    np.testing.assert_array_equal(run_tensor_core(x[:17], stored, bias, device), big[:17])
    np.testing.assert_array_equal(run_tensor_core(x[113:], stored, bias, device), big[113:])
    np.testing.assert_array_equal(run_tensor_core(x[:1], stored, bias, device), big[:1])


@pytest.mark.parametrize("m, n, k", [(1, 200, 336), (16, 67, 336), (21, 9, 50), (70, 200, 336)])
def test_matmul_int8_decode(device, m, n, k):
    """int8 per-channel weights on the decode grid: within the matmul bound of the float64
    product of the dequantized weights, the same bits as axrt_matmul_int8_pc_f32 on the CPU,
    and a row's bits the same alone."""
    rng = np.random.default_rng(70 + m)
    x = rng.standard_normal((m, k)).astype(np.float32)
    codes = rng.integers(-127, 128, (n, k)).astype(np.int8)
    scale = rng.uniform(0.005, 0.02, (n, 1)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    value = codes.astype(np.float64) * scale.astype(np.float64)
    layout = CONTRACTS["axrt_matmul_int8_pc_f32"][0][1].layout

    def call(kernel, tile, rows, xs):
        b = axrt.Builder(producer="axrt-tests", producer_version="1")
        kern = b.kernel(kernel, b.kernel_library("axrt.cpu"), params=params(kernel))
        if device.type == "cuda":
            b.kernel_variant(kern, cuda_code_object(b), workgroup_size=256)
        s = b.constant("scale", scale)
        w = b.constant("w", codes, layout=layout.with_constants(scale=s))
        f = b.function("main", inputs=[("x", np.float32, (rows, k)), ("bias", np.float32, (n,))],
                       outputs=[("y", np.float32, (rows, n))])
        f.dispatch(kern, grid=(ceildiv(n, tile[0]), ceildiv(rows, tile[1])),
                   args=[f.input(0), w, s, f.input(1), f.output(0), rows, n, k])
        out = axrt.load(b.to_bytes(), device=device).main(xs, bias)
        return out if isinstance(out, np.ndarray) else out.numpy()

    y = call("axrt_matmul_int8_pc_f32_decode", (8, 16), m, x)
    ref = x.astype(np.float64) @ value.T + bias
    bound = 1e-5 * (np.abs(x.astype(np.float64)) @ np.abs(value.T) + np.abs(bias)) + 1e-6
    assert np.all(np.abs(y - ref) <= bound)
    if device.type == "cpu":
        np.testing.assert_array_equal(y, call("axrt_matmul_int8_pc_f32", (64, 64), m, x))
    np.testing.assert_array_equal(call("axrt_matmul_int8_pc_f32_decode", (8, 16), 1, x[:1])[0],
                                  y[0])


# ---------------------------------------------------------------------------
# GPTQ int4 weights times activations quantized to int8 (axrt_matmul_gptq_int4_q8_f32)


def pack_nibbles(codes, axis):
    """u32 words of 8 codes (0..15) along `axis`, code i in nibble i (sequential)."""
    codes = np.moveaxis(codes.astype(np.uint32), axis, -1)
    codes = codes.reshape(codes.shape[:-1] + (-1, 8))
    words = np.bitwise_or.reduce(codes << (4 * np.arange(8, dtype=np.uint32)), axis=-1)
    return np.ascontiguousarray(np.moveaxis(words, -1, axis))


def quantize_rows_q8(x, group_size):
    """x quantized per row and group as the kernel does, in float32: the
    codes xq and the scales s_x [M, K / group_size]."""
    m, k = x.shape
    groups = x.reshape(m, k // group_size, group_size)
    a = np.abs(groups).max(axis=2)
    with np.errstate(divide="ignore"):
        inv = np.where(a == 0, np.float32(0), np.float32(127) / a).astype(np.float32)
    xq = np.rint(groups * inv[:, :, None])  # a lone f32 product, rounded half to even
    assert xq.dtype == np.float32 and np.abs(xq).max() <= 127
    s_x = (a / np.float32(127)).astype(np.float32)
    return xq.reshape(m, k), s_x


@pytest.mark.parametrize("m,group_size", [(1, 128), (3, 128), (16, 128), (70, 128), (70, 32)])
def test_matmul_gptq_int4_q8(device, m, group_size):
    rng = np.random.default_rng(60 + m + group_size)
    n, k = 200, 384  # N past three tiles and not a multiple of 64
    groups = k // group_size
    x = rng.standard_normal((m, k)).astype(np.float32)
    x *= rng.uniform(0.01, 10, (m, 1)).astype(np.float32)  # rows of different scales
    # a = 127 makes 127 / a exactly 1, so every x * inv = x ends in .5: ties,
    # rounded to even. Then a group of zeros, where s_x = 0.
    x[0, :group_size] = rng.integers(-127, 127, group_size) + 0.5
    x[0, 0] = 127
    x[0, group_size: 2 * group_size] = 0
    q = rng.integers(0, 16, (k, n))
    z = rng.integers(0, 16, (groups, n))
    scales = (rng.uniform(0.002, 0.05, (groups, n)) * rng.choice([-1, 1], (groups, n))).astype(
        np.float16)
    bias = rng.standard_normal(n).astype(np.float32)
    qweight = pack_nibbles(q, axis=0)  # [K / 8, N]
    qzeros = pack_nibbles(z, axis=1)  # [K / g, N / 8]
    assert qweight.shape == (k // 8, n) and qzeros.shape == (groups, n // 8)
    (y,) = run("axrt_matmul_gptq_int4_q8_f32", MATMUL_GPTQ, (ceildiv(n, 64), ceildiv(m, 64)),
               {"x": x, "qweight": qweight, "scales": scales, "qzeros": qzeros, "bias": bias},
               {"y": (np.float32, (m, n))},
               lambda f: [f.input(0), f.input(1), f.input(2), f.input(3), f.input(4),
                          f.output(0), m, n, k, group_size], device)

    g = np.arange(k) // group_size
    w = (q - z[g]) * scales.astype(np.float64)[g]  # exact
    xq, s_x = quantize_rows_q8(x, group_size)
    x_q8 = xq.astype(np.float64) * s_x.astype(np.float64)[:, g]
    ref = x_q8 @ w + bias
    bound = 1e-5 * (np.abs(x_q8) @ np.abs(w) + np.abs(bias)) + 1e-6
    assert np.all(np.abs(y - ref) <= bound)
    # Against the unquantized x: at most half a step (a / 254) per element.
    half_step = np.abs(x).reshape(m, groups, group_size).max(axis=2).astype(np.float64) / 254
    w_groups = np.abs(w).reshape(groups, group_size, n).sum(axis=1)
    exact = x.astype(np.float64) @ w + bias
    assert np.all(np.abs(y - exact) <= half_step @ w_groups + bound)


def tile64(qweight):
    """GPTQ's [K/8, N] words tile by tile, as gptq_v2.int4.g128.tile64 lays them out:
    [ceil(N/64)][K/8][64], columns past N zero."""
    rows, n = qweight.shape
    tiles = ceildiv(n, 64)
    padded = np.zeros((rows, tiles * 64), np.uint32)
    padded[:, :n] = qweight
    return np.ascontiguousarray(padded.reshape(rows, tiles, 64).transpose(1, 0, 2))


@pytest.mark.parametrize("copy", ["none", "in the file", "of the wrong size"])
def test_matmul_gptq_int4_q8_runs_on_pre_packed_weights(cpu, monkeypatch, copy):
    """Weights bound as constants: the CPU device's loader runs the kernel's pre-packed
    form (docs/kernels.md, "Pre-packed weights") on a copy it packs, or on the file's own
    copy for this host in that layout; the bits are those of the canonical words
    (AXRT_CPU_PREPACK=0, and the weights passed as an input). A file whose copy is of
    another size has it ignored. (The file's copy here holds other codes, so the result
    shows which words ran.)"""
    from axrt.llm.kernel_table import gptq_layout

    rng = np.random.default_rng(61)
    m, n, k, group = 3, 200, 256, 128
    x = rng.standard_normal((m, k)).astype(np.float32)
    codes = [rng.integers(0, 16, (k, n)) for _ in range(2)]
    qweights = [pack_nibbles(q, axis=0) for q in codes]
    qzeros = pack_nibbles(rng.integers(0, 16, (k // group, n)), axis=1)
    scales = rng.uniform(0.002, 0.05, (k // group, n)).astype(np.float16)
    bias = rng.standard_normal(n).astype(np.float32)

    def call(qweight, file_copy=None, as_input=False):
        b = axrt.Builder(producer="axrt-tests", producer_version="1")
        kernel = b.kernel("axrt_matmul_gptq_int4_q8_f32", b.kernel_library("axrt.cpu"),
                          params=MATMUL_GPTQ)
        s = b.constant("scales", scales)
        z = b.constant("qzeros", qzeros)
        inputs = [("x", np.float32, (m, k))]
        if as_input:
            inputs.append(("qweight", np.uint32, qweight.shape))
        else:
            w = b.constant("qweight", qweight.reshape(-1).view(np.uint8), dtype="uint4",
                           shape=(k, n), layout=gptq_layout(group).with_constants(
                               scale=s, zero_point=z))
            if file_copy is not None:
                b.prepacked_copy(w, platform.machine(), "gptq_v2.int4.g128.tile64", file_copy)
        f = b.function("main", inputs=inputs, outputs=[("y", np.float32, (m, n))])
        f.dispatch(kernel, grid=(ceildiv(n, 64), 1),
                   args=[f.input(0), f.input(1) if as_input else w, s, z,
                         b.constant("bias", bias), f.output(0), m, n, k, group])
        exe = axrt.load(b.to_bytes(), device=cpu)
        y = exe.main(x, qweight) if as_input else exe.main(x)
        return np.asarray(y if isinstance(y, np.ndarray) else y.numpy())

    want = [call(q, as_input=True) for q in qweights]
    assert not np.array_equal(want[0], want[1])
    if copy == "none":
        got, expected = call(qweights[0]), want[0]
    elif copy == "in the file":
        got, expected = call(qweights[0], tile64(qweights[1])), want[1]
    else:
        got, expected = call(qweights[0], tile64(qweights[1])[:, :-1]), want[0]
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))
    monkeypatch.setenv("AXRT_CPU_PREPACK", "0")
    assert np.array_equal(call(qweights[0]).view(np.uint32), want[0].view(np.uint32))


@pytest.mark.parametrize("m, k", [(1, 384), (3, 192), (70, 96)])
def test_matmul_int8_pc_q8(device, m, k):
    """int8 per-channel weights times x quantized to int8 per group (G = 128, 64, 32 by K):
    within (K / G + 3) 2^-24 (|xq s_x| . |W| + |bias|) of the float64 product of the
    quantized x, half a step per input more from x itself; a row's bits the same alone."""
    rng = np.random.default_rng(80 + m)
    n = 131  # past two tiles, odd
    group = 128 if k % 128 == 0 else 64 if k % 64 == 0 else 32
    x = rng.standard_normal((m, k)).astype(np.float32)
    x *= rng.uniform(0.01, 10, (m, 1)).astype(np.float32)
    # Ties (a = 127: x * inv = x), and in the last row a group of zeros.
    x[0, :group] = rng.integers(-127, 127, group) + 0.5
    x[0, 0] = 127
    x[-1, group:2 * group] = 0
    codes = rng.integers(-128, 128, (n, k)).astype(np.int8)
    scale = rng.uniform(0.005, 0.02, (n, 1)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)

    def call(xs):
        rows = xs.shape[0]
        (y,) = run("axrt_matmul_int8_pc_q8_f32", MATMUL_INT8_Q8,
                   (ceildiv(n, 64), ceildiv(rows, 64)),
                   {"x": xs, "w": codes, "scale": scale, "bias": bias},
                   {"y": (np.float32, (rows, n))},
                   lambda f: [f.input(0), f.input(1), f.input(2), f.input(3), f.output(0), rows, n,
                              k], device)
        return y

    y = call(x)
    w = codes.astype(np.float64).T * scale.astype(np.float64).T  # [K, N], exact
    xq, s_x = quantize_rows_q8(x, group)
    g = np.arange(k) // group
    x_q8 = xq.astype(np.float64) * s_x.astype(np.float64)[:, g]
    ref = x_q8 @ w + bias
    bound = (k // group + 3) * 2.0 ** -24 * (np.abs(x_q8) @ np.abs(w) + np.abs(bias))
    assert np.all(np.abs(y - ref) <= bound)
    half_step = np.abs(x).reshape(m, k // group, group).max(axis=2).astype(np.float64) / 254
    w_groups = np.abs(w).reshape(k // group, group, n).sum(axis=1)
    assert np.all(np.abs(y - (x.astype(np.float64) @ w + bias)) <= half_step @ w_groups + bound)
    np.testing.assert_array_equal(call(x[:1])[0], y[0])


def test_matmul_gptq_int4_q8_refuses_a_partial_word(cpu):
    m, n, k, group_size = 2, 12, 128, 128
    x = np.ones((m, k), np.float32)
    inputs = {"x": x, "qweight": np.zeros((k // 8, n), np.uint32),
              "scales": np.ones((1, n), np.float16), "qzeros": np.zeros((1, 2), np.uint32),
              "bias": np.zeros(n, np.float32)}
    out = np.full((m, n), 7.0, np.float32)
    refused(lambda s: run("axrt_matmul_gptq_int4_q8_f32", MATMUL_GPTQ, (1, 1), inputs,
                          {"y": (np.float32, (m, n))},
                          lambda f: [f.input(0), f.input(1), f.input(2), f.input(3), f.input(4),
                                     f.output(0), m, n, k, group_size], cpu, out=out, stream=s),
            "N = 12")
    np.testing.assert_array_equal(out, 7.0)


# ---------------------------------------------------------------------------
# SiLU and multiply


def test_silu_mul(device):
    rng = np.random.default_rng(4)
    rows, cols = 9, 1000 + 3  # a tail past every vector width
    gate_up = (rng.standard_normal((rows, 2 * cols)) * 4).astype(np.float32)
    gate_up[0, :6] = [0.0, -30.0, 30.0, -100.0, 88.5, -88.5]
    (out,) = run("axrt_silu_mul_f32", SILU_MUL, rows, {"gate_up": gate_up},
                 {"out": (np.float32, (rows, cols))},
                 lambda f: [f.input(0), f.output(0), rows, cols], device)
    g = gate_up[:, :cols].astype(np.float64)
    u = gate_up[:, cols:].astype(np.float64)
    silu = g / (1.0 + np.exp(-g))
    ref = silu * u
    # SiLU's bound (docs/kernels.md), then one more rounding for the product.
    bound = (1e-6 + 1e-5 * np.abs(silu)) * np.abs(u) + 1e-7 * np.abs(ref)
    assert np.all(np.abs(out - ref) <= bound)


# ---------------------------------------------------------------------------
# KV cache write


def kv_write_call(qkv, positions, tables, cache, *, T, tokens_per_seq, layer, kv_heads,
                  head_dim, row_stride, k_offset, device, out=None, stream=None,
                  kernel="axrt_kv_cache_write_f32"):
    """`kernel` (the f32 cache's, or the bf16 or fp8 one of KV_KERNELS) over `cache`."""
    num_blocks, max_blocks = cache.shape[2], tables.shape[1]
    (result,) = run(kernel, params(kernel), T,
                    {"qkv": qkv, "positions": positions, "block_tables": tables,
                     "cache_in": cache},
                    {"cache": (cache.dtype, cache.shape)},
                    lambda f: [f.input(0), f.input(1), f.input(2), f.output(0), T,
                               tokens_per_seq, layer, num_blocks, kv_heads, BS, head_dim,
                               max_blocks, row_stride, k_offset],
                    device, copies=[(3, 0)], out=out, stream=stream)
    return result


def kv_write_reference(qkv, positions, tables, cache, tokens_per_seq, layer, kv_heads,
                       head_dim, k_offset):
    ref = cache.copy()
    width = kv_heads * head_dim
    for t, p in enumerate(positions):
        block = tables[t // tokens_per_seq][p // BS]
        row = qkv[t, k_offset: k_offset + 2 * width].reshape(2, kv_heads, head_dim)
        ref[layer, :, block, :, p % BS, :] = row
    return ref


@pytest.mark.parametrize("case", ["chunked_prefill", "decode_batch"])
@pytest.mark.parametrize("kv_heads, head_dim", [(2, 64), (1, 128)])
def test_kv_cache_write(device, case, kv_heads, head_dim):
    rng = np.random.default_rng(5)
    heads = 4 * kv_heads
    L, layer, max_blocks = 3, 2, 6
    if case == "chunked_prefill":  # one sequence, positions 21 .. 57 after 21 cached ones
        S, T, tokens_per_seq = 1, 37, 37
        positions = np.arange(21, 21 + T, dtype=np.int32)
    else:  # one token of each of five sequences of different lengths
        S, T, tokens_per_seq = 5, 5, 1
        positions = np.array([0, 15, 16, 47, 95], np.int32)
    num_blocks = S * max_blocks + 3
    tables = scattered_tables(rng, S, max_blocks, num_blocks)
    k_offset = heads * head_dim
    row_stride = (heads + 2 * kv_heads) * head_dim + 3
    qkv = rng.standard_normal((T, row_stride), dtype=np.float32)
    cache = rng.standard_normal((L, 2, num_blocks, kv_heads, BS, head_dim), dtype=np.float32)
    out = kv_write_call(qkv, positions, tables, cache, T=T, tokens_per_seq=tokens_per_seq,
                        layer=layer, kv_heads=kv_heads, head_dim=head_dim,
                        row_stride=row_stride, k_offset=k_offset, device=device)
    ref = kv_write_reference(qkv, positions, tables, cache, tokens_per_seq, layer, kv_heads,
                             head_dim, k_offset)
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("position, entry, match", [
    (96, 3, r"position 96, outside the block table's \[0, 96\)"),
    (-1, 3, r"position -1, outside"),
    (40, -1, r"block table entry 2 is -1, outside \[0, 9\)"),
    (40, 9, r"block table entry 2 is 9, outside \[0, 9\)"),
])
def test_kv_cache_write_refuses_indices_out_of_range(cpu, position, entry, match):
    rng = np.random.default_rng(6)
    kv_heads, head_dim, max_blocks, num_blocks = 2, 64, 6, 9
    tables = scattered_tables(rng, 1, max_blocks, num_blocks)
    tables[0, 2] = entry if entry != 3 else tables[0, 2]
    qkv = rng.standard_normal((1, 4 * head_dim), dtype=np.float32)
    cache = rng.standard_normal((1, 2, num_blocks, kv_heads, BS, head_dim), dtype=np.float32)
    out = np.zeros_like(cache)
    refused(lambda s: kv_write_call(qkv, np.array([position], np.int32), tables, cache, T=1,
                                    tokens_per_seq=1, layer=0, kv_heads=kv_heads,
                                    head_dim=head_dim, row_stride=4 * head_dim, k_offset=0,
                                    device=cpu, out=out, stream=s),
            match)
    np.testing.assert_array_equal(out, cache)  # the copy ran, the kernel wrote nothing


# ---------------------------------------------------------------------------
# Attention


def prefill_call(qkv, positions, table, cache, *, heads, kv_heads, head_dim, layer, scale,
                 device, out=None, stream=None):
    T, row_stride = qkv.shape
    num_blocks, max_blocks = cache.shape[2], table.shape[1]
    (result,) = run("axrt_attention_prefill_f32", PREFILL, (ceildiv(T, 16), heads),
                    {"qkv": qkv, "positions": positions, "block_table": table, "cache": cache},
                    {"out": (np.float32, (T, heads * head_dim))},
                    lambda f: [f.input(0), f.input(1), f.input(2), f.input(3), f.output(0), T,
                               heads, kv_heads, head_dim, layer, num_blocks, BS, max_blocks,
                               row_stride, scale],
                    device, out=out, stream=stream)
    return result


def decode_call(qkv, positions, tables, cache, *, heads, kv_heads, head_dim, layer, scale,
                device, out=None, stream=None, kernel="axrt_attention_decode_f32"):
    """`kernel` (the f32 cache's, or the bf16 or fp8 one of KV_KERNELS) over `cache`."""
    B, row_stride = qkv.shape
    num_blocks, max_blocks = cache.shape[2], tables.shape[1]
    (result,) = run(kernel, DECODE, (B, kv_heads),
                    {"qkv": qkv, "positions": positions, "block_tables": tables,
                     "cache": cache},
                    {"out": (np.float32, (B, heads * head_dim))},
                    lambda f: [f.input(0), f.input(1), f.input(2), f.input(3), f.output(0), B,
                               heads, kv_heads, head_dim, layer, num_blocks, BS, max_blocks,
                               row_stride, scale],
                    device, out=out, stream=stream)
    return result


def check_attention(out, qkv, positions, tables, cache, heads, kv_heads, head_dim, layer, scale):
    group = heads // kv_heads
    worst = 0.0
    for t, p in enumerate(positions):
        table = tables[t] if len(tables) > 1 else tables[0]
        for h in range(heads):
            keys, values = cached(cache, layer, table, h // group, p + 1)
            q = qkv[t, h * head_dim: (h + 1) * head_dim].astype(np.float64)
            ref, weights = attention_reference(q, keys, values, np.float64(np.float32(scale)))
            got = out[t, h * head_dim: (h + 1) * head_dim]
            # f32 scores and sums: |error| <= 1e-5 (sum_j w_j |v_j| + max_j |v_j| ...)
            bound = 1e-5 * (weights @ np.abs(values) + np.abs(values).max(axis=0)) + 1e-6
            assert np.all(np.abs(got - ref) <= bound), (t, h, np.abs(got - ref).max())
            worst = max(worst, float((np.abs(got - ref) / bound).max()))
    return worst


SHAPES = [(4, 4, 64), (8, 2, 128), (8, 2, 64), (4, 1, 128)]  # heads, kv_heads, head_dim


@pytest.mark.parametrize("heads, kv_heads, head_dim", SHAPES)
@pytest.mark.parametrize("start", [0, 21])
def test_attention_prefill(device, heads, kv_heads, head_dim, start):
    """A chunk of 37 tokens at positions start .. start + 36, whose keys and
    values (and those of the positions before) are in the cache."""
    rng = np.random.default_rng(7)
    T, L, layer, max_blocks, num_blocks = 37, 2, 1, 5, 13
    positions = np.arange(start, start + T, dtype=np.int32)
    tables = scattered_tables(rng, 1, max_blocks, num_blocks)
    cache = filled_cache(rng, L, num_blocks, kv_heads, head_dim, layer, tables, [start + T])
    row_stride = (heads + 2 * kv_heads) * head_dim + 7
    qkv = rng.standard_normal((T, row_stride), dtype=np.float32)
    scale = 1.0 / math.sqrt(head_dim)
    out = prefill_call(qkv, positions, tables, cache, heads=heads, kv_heads=kv_heads,
                       head_dim=head_dim, layer=layer, scale=scale, device=device)
    check_attention(out, qkv, positions, tables, cache, heads, kv_heads, head_dim, layer, scale)


@pytest.mark.parametrize("heads, kv_heads, head_dim", SHAPES)
def test_attention_decode(device, heads, kv_heads, head_dim):
    """Five sequences of different lengths, one query each."""
    rng = np.random.default_rng(8)
    L, layer, max_blocks = 2, 0, 9
    positions = np.array([0, 15, 16, 77, 130], np.int32)
    B = len(positions)
    num_blocks = B * max_blocks + 4
    tables = scattered_tables(rng, B, max_blocks, num_blocks)
    cache = filled_cache(rng, L, num_blocks, kv_heads, head_dim, layer, tables, positions + 1)
    row_stride = (heads + 2 * kv_heads) * head_dim
    qkv = (rng.standard_normal((B, row_stride)) * 2).astype(np.float32)  # peaked softmaxes too
    scale = 1.0 / math.sqrt(head_dim)
    out = decode_call(qkv, positions, tables, cache, heads=heads, kv_heads=kv_heads,
                      head_dim=head_dim, layer=layer, scale=scale, device=device)
    check_attention(out, qkv, positions, tables, cache, heads, kv_heads, head_dim, layer, scale)


@pytest.mark.parametrize("kernel", ["prefill", "decode"])
@pytest.mark.parametrize("position, entry, match", [
    (80, None, r"position 80, outside the block table's \[0, 80\)"),
    (-3, None, r"position -3, outside"),
    (40, -1, r"block table entry 1 is -1, outside \[0, 12\)"),
    (40, 12, r"block table entry 1 is 12, outside \[0, 12\)"),
])
def test_attention_refuses_indices_out_of_range(cpu, kernel, position, entry, match):
    rng = np.random.default_rng(9)
    heads, kv_heads, head_dim, max_blocks, num_blocks = 4, 2, 64, 5, 12
    tables = scattered_tables(rng, 1, max_blocks, num_blocks)
    if entry is not None:
        tables[0, 1] = entry
    cache = rng.standard_normal((1, 2, num_blocks, kv_heads, BS, head_dim), dtype=np.float32)
    qkv = rng.standard_normal((1, (heads + 2 * kv_heads) * head_dim), dtype=np.float32)
    out = np.full((1, heads * head_dim), 7.0, np.float32)
    call = prefill_call if kernel == "prefill" else decode_call
    refused(lambda s: call(qkv, np.array([position], np.int32), tables, cache, heads=heads,
                           kv_heads=kv_heads, head_dim=head_dim, layer=0, scale=0.125,
                           device=cpu, out=out, stream=s),
            match)
    np.testing.assert_array_equal(out, 7.0)


def test_attention_prefill_refuses_a_late_position_of_its_tile(cpu):
    """One bad position among 16 queries: the workgroup writes none of them."""
    rng = np.random.default_rng(10)
    heads, kv_heads, head_dim, max_blocks, num_blocks = 2, 1, 64, 2, 4
    tables = scattered_tables(rng, 1, max_blocks, num_blocks)
    cache = rng.standard_normal((1, 2, num_blocks, kv_heads, BS, head_dim), dtype=np.float32)
    qkv = rng.standard_normal((16, (heads + 2 * kv_heads) * head_dim), dtype=np.float32)
    positions = np.arange(16, dtype=np.int32)
    positions[15] = 32
    out = np.full((16, heads * head_dim), 7.0, np.float32)
    refused(lambda s: prefill_call(qkv, positions, tables, cache, heads=heads, kv_heads=kv_heads,
                                   head_dim=head_dim, layer=0, scale=0.125, device=cpu,
                                   out=out, stream=s),
            r"token 15 is at position 32, outside")
    np.testing.assert_array_equal(out, 7.0)


# ---------------------------------------------------------------------------
# Fused kernels (docs/kernels.md, "Fused kernels")


def test_add_rmsnorm(device):
    """x += residual in f32, written back; out the float64 RMSNorm of the sums within the
    row-wise bound."""
    rng = np.random.default_rng(18)
    rows, cols, eps = 7, 300, 1e-5
    x = rng.standard_normal((rows, cols), dtype=np.float32) * 3
    residual = rng.standard_normal((rows, cols), dtype=np.float32)
    gamma = rng.uniform(0.5, 1.5, cols).astype(np.float32)
    kernel = "axrt_add_rmsnorm_f32"
    got_x, got = run(kernel, params(kernel), rows,
                     {"x_in": x, "residual": residual, "gamma": gamma},
                     {"x": (np.float32, x.shape), "out": (np.float32, x.shape)},
                     lambda f: [f.output(0), f.input(1), f.input(2), f.output(1), rows, cols,
                                eps],
                     device, copies=[(0, 0)])
    sums = x + residual
    np.testing.assert_array_equal(got_x, sums)
    s64 = sums.astype(np.float64)
    want = s64 / np.sqrt((s64 ** 2).mean(axis=1, keepdims=True) + np.float32(eps)) * gamma
    assert np.all(np.abs(got - want) <= 1e-5 * np.abs(want) + 1e-6)


@pytest.mark.parametrize("dtype", ["f32", "bf16", "fp8_e4m3"])
def test_rope_kv_cache_write_is_rope_then_the_write(device, dtype):
    """Bit for bit the two kernels it stands for: the rotated rows and every byte of the
    cache."""
    rng = np.random.default_rng(19)
    heads, kv_heads, head_dim, L, layer, max_blocks = 8, 2, 64, 2, 1, 6
    S, T = 2, 10
    positions = np.concatenate([np.arange(3, 8), np.arange(40, 45)]).astype(np.int32)
    num_blocks = S * max_blocks + 2
    tables = scattered_tables(rng, S, max_blocks, num_blocks)
    row_stride = (heads + 2 * kv_heads) * head_dim + 3
    qkv = rng.standard_normal((T, row_stride), dtype=np.float32)
    inv_freq = llama3_inv_freq(head_dim)
    f32 = rng.standard_normal((L, 2, num_blocks, kv_heads, BS, head_dim), dtype=np.float32)
    cache = f32 if dtype == "f32" else stored_cache(f32, dtype)[0]
    rotated = heads + kv_heads
    (rope_out,) = run("axrt_rope_f32", ROPE, T, {"x_in": qkv, "positions": positions,
                                                 "inv_freq": inv_freq},
                      {"x": (np.float32, qkv.shape)},
                      lambda f: [f.output(0), f.input(1), f.input(2), T, rotated, head_dim,
                                 row_stride, 1.0],
                      device, copies=[(0, 0)])
    want_cache = kv_write_call(rope_out, positions, tables, cache, T=T, tokens_per_seq=5,
                               layer=layer, kv_heads=kv_heads, head_dim=head_dim,
                               row_stride=row_stride, k_offset=heads * head_dim, device=device,
                               kernel=f"axrt_kv_cache_write_{dtype}")
    kernel = f"axrt_rope_kv_cache_write_{dtype}"
    got_qkv, got_cache = run(
        kernel, params(kernel), T,
        {"qkv_in": qkv, "positions": positions, "inv_freq": inv_freq, "block_tables": tables,
         "cache_in": cache},
        {"qkv": (np.float32, qkv.shape), "cache": (cache.dtype, cache.shape)},
        lambda f: [f.output(0), f.input(1), f.input(2), f.input(3), f.output(1), T, 5, rotated,
                   layer, num_blocks, kv_heads, BS, head_dim, max_blocks, row_stride,
                   heads * head_dim, 1.0],
        device, copies=[(0, 0), (4, 1)])
    np.testing.assert_array_equal(got_qkv, rope_out)
    np.testing.assert_array_equal(got_cache.view(np.uint8), want_cache.view(np.uint8))


# ---------------------------------------------------------------------------
# bf16 and fp8 KV caches (docs/kernels.md, "KV cache"): rounding by ml_dtypes,
# the stored layout built here from the f32 cache


def stored_rows(x, dtype):
    """Rows [..., D] of f32 as the cache stores them: bf16, or (e4m3fn codes, f32 scales)
    with each row's scale its largest magnitude / 448 in f32 and its codes x / scale rounded
    to nearest even (a row of zeros: scale 0, codes 0)."""
    if dtype == "bf16":
        return x.astype(ml_dtypes.bfloat16)
    with np.errstate(invalid="ignore"):
        scale = (np.abs(x).max(axis=-1) / np.float32(448)).astype(np.float32)
        divisor = np.where(scale == 0, np.float32(1), scale)[..., None]
        codes = (x / divisor).astype(ml_dtypes.float8_e4m3fn)
    return codes, scale


def decoded_rows(stored, dtype):
    """What stored rows read back as, in f32: code value x scale, one f32 product."""
    if dtype == "bf16":
        return stored.astype(np.float32)
    codes, scale = stored
    return codes.astype(np.float32) * scale[..., None]


def stored_cache(cache, dtype):
    """The f32 cache [L, 2, NB, KVH, BS, D] stored as `dtype`: bf16 of the same shape, or u8
    [L, 2, NB, KVH, BS, D + 4], each (block, head) run of BS rows of D codes then BS scales;
    and what it reads back as (f32, the f32 cache's shape)."""
    stored = stored_rows(cache, dtype)
    decoded = decoded_rows(stored, dtype)
    if dtype == "bf16":
        return stored, decoded
    codes, scale = stored
    L, _, NB, KVH, bs, D = cache.shape
    runs = np.concatenate([codes.view(np.uint8).reshape(L, 2, NB, KVH, bs * D),
                           scale.view(np.uint8).reshape(L, 2, NB, KVH, bs * 4)], axis=-1)
    return runs.reshape(L, 2, NB, KVH, bs, D + 4), decoded


def stored_dtype(dtype):
    return ml_dtypes.bfloat16 if dtype == "bf16" else np.uint8


@pytest.mark.parametrize("dtype", ["bf16", "fp8_e4m3"])
@pytest.mark.parametrize("case", ["chunked_prefill", "decode_batch"])
def test_kv_cache_write_stores_rounded_rows(device, dtype, case):
    """Byte for byte what ml_dtypes' rounding gives, every other byte of the pool kept."""
    rng = np.random.default_rng(15)
    kv_heads, head_dim, heads = 2, 64, 8
    L, layer, max_blocks = 2, 1, 6
    if case == "chunked_prefill":
        S, T, tokens_per_seq = 1, 37, 37
        positions = np.arange(21, 21 + T, dtype=np.int32)
    else:
        S, T, tokens_per_seq = 5, 5, 1
        positions = np.array([0, 15, 16, 47, 95], np.int32)
    num_blocks = S * max_blocks + 3
    tables = scattered_tables(rng, S, max_blocks, num_blocks)
    row_stride = (heads + 2 * kv_heads) * head_dim + 5
    qkv = (rng.standard_normal((T, row_stride)) * rng.uniform(0.01, 100, (T, 1))).astype(
        np.float32)
    qkv[0, heads * head_dim: (heads + 1) * head_dim] = 0.0  # a row of zeros: scale 0
    f32 = rng.standard_normal((L, 2, num_blocks, kv_heads, BS, head_dim), dtype=np.float32)
    before, _ = stored_cache(f32, dtype)
    out = kv_write_call(qkv, positions, tables, before, T=T, tokens_per_seq=tokens_per_seq,
                        layer=layer, kv_heads=kv_heads, head_dim=head_dim,
                        row_stride=row_stride, k_offset=heads * head_dim, device=device,
                        kernel=KV_KERNELS[dtype][0])
    want_f32 = kv_write_reference(qkv, positions, tables, f32, tokens_per_seq, layer, kv_heads,
                                  head_dim, heads * head_dim)
    want, _ = stored_cache(want_f32, dtype)
    np.testing.assert_array_equal(out.view(np.uint8), want.view(np.uint8))


def test_fp8_rounding_ties_subnormals_and_signs_match_ml_dtypes(device):
    """Rows whose scale is exactly 1 (largest magnitude 448), so that the codes are the values
    themselves rounded: every e4m3fn value, every midpoint between neighbours (ties to even),
    a hair either side of each, subnormals and zeros of both signs."""
    finite = np.arange(0, 0x7f, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    mids = (finite[:-1] + finite[1:]) / 2
    pool = np.concatenate([finite, mids, np.nextafter(mids.astype(np.float32), np.float32(0)),
                           np.nextafter(mids.astype(np.float32), np.float32(np.inf)),
                           [2.0 ** -10, 3 * 2.0 ** -10, 2.0 ** -12, 0.0]]).astype(np.float32)
    pool = np.concatenate([pool, -pool])
    head_dim, kv_heads = 64, 1
    per_row = head_dim - 1
    rows = -(-len(pool) // per_row)
    T = -(-rows // 2)
    values = np.resize(pool, (2 * T, per_row))
    values = np.concatenate([np.full((2 * T, 1), 448, np.float32), values], axis=1)
    qkv = values.reshape(T, 2 * head_dim)
    positions = np.arange(T, dtype=np.int32)
    max_blocks = -(-T // BS)
    tables = np.arange(max_blocks, dtype=np.int32).reshape(1, max_blocks)
    cache = np.zeros((1, 2, max_blocks, kv_heads, BS, head_dim + 4), np.uint8)
    out = kv_write_call(qkv, positions, tables, cache, T=T, tokens_per_seq=T, layer=0,
                        kv_heads=kv_heads, head_dim=head_dim, row_stride=2 * head_dim,
                        k_offset=0, device=device, kernel="axrt_kv_cache_write_fp8_e4m3")
    runs = out.reshape(2, max_blocks, BS * (head_dim + 4))
    got_codes = runs[..., :BS * head_dim].reshape(2, max_blocks * BS, head_dim)[:, :T]
    got_scales = runs[..., BS * head_dim:].copy().view(np.float32).reshape(2, -1)[:, :T]
    np.testing.assert_array_equal(got_scales, 1.0)
    want = qkv.reshape(T, 2, head_dim).transpose(1, 0, 2).astype(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(got_codes, want.view(np.uint8))


# Half a step of each element type, relative, and the smallest fp8 step's half
# (of a row's scale): |stored - x| <= U |x| + SUB s.
ROUNDING = {"bf16": (2.0 ** -8, 0.0), "fp8_e4m3": (2.0 ** -4, 2.0 ** -10)}


@pytest.mark.parametrize("dtype", ["bf16", "fp8_e4m3"])
@pytest.mark.parametrize("heads, kv_heads, head_dim", [(4, 4, 64), (8, 2, 128), (8, 2, 64)])
def test_attention_decode_over_a_low_precision_cache(device, dtype, heads, kv_heads, head_dim,
                                                     capsys):
    """Within the f32 bound of attention over the values the cache holds (decoded by
    ml_dtypes), and within the stated bound of docs/kernels.md of attention over the
    unrounded f32 cache."""
    rng = np.random.default_rng(16)
    L, layer, max_blocks = 2, 1, 9
    positions = np.array([0, 15, 16, 77, 130], np.int32)
    B = len(positions)
    num_blocks = B * max_blocks + 4
    tables = scattered_tables(rng, B, max_blocks, num_blocks)
    f32 = filled_cache(rng, L, num_blocks, kv_heads, head_dim, layer, tables, positions + 1)
    stored, decoded = stored_cache(f32, dtype)
    row_stride = (heads + 2 * kv_heads) * head_dim
    qkv = (rng.standard_normal((B, row_stride)) * 2).astype(np.float32)
    scale = 1.0 / math.sqrt(head_dim)
    out = decode_call(qkv, positions, tables, stored, heads=heads, kv_heads=kv_heads,
                      head_dim=head_dim, layer=layer, scale=scale, device=device,
                      kernel=KV_KERNELS[dtype][1])
    check_attention(out, qkv, positions, tables, decoded, heads, kv_heads, head_dim, layer, scale)

    relative, subnormal = ROUNDING[dtype]
    group = heads // kv_heads
    worst = 0.0
    for b, p in enumerate(positions):
        for h in range(heads):
            keys, values = cached(f32, layer, tables[b], h // group, p + 1)
            q = qkv[b, h * head_dim: (h + 1) * head_dim].astype(np.float64)
            want, weights = attention_reference(q, keys, values, np.float64(np.float32(scale)))
            key_step = relative * np.abs(keys) + subnormal * np.abs(keys).max(1, keepdims=True) / 448
            value_step = (relative * np.abs(values) +
                          subnormal * np.abs(values).max(1, keepdims=True) / 448)
            spread = 2 * np.float32(scale) * (key_step @ np.abs(q)).max()
            bound = ((np.expm1(spread)) * (weights @ np.abs(values)) +
                     np.exp(spread) * (weights @ value_step) +
                     1e-5 * (weights @ np.abs(values) + np.abs(values).max(axis=0)) + 1e-6)
            got = out[b, h * head_dim: (h + 1) * head_dim]
            assert np.all(np.abs(got - want) <= bound), (b, h, np.abs(got - want).max())
            worst = max(worst, float(np.abs(got - want).max()))
    with capsys.disabled():
        print(f"\n{dtype} KV cache, heads {heads}/{kv_heads}, head_dim {head_dim}: attention "
              f"within {worst:.2e} (max abs) of f32's", end="")


def test_fp8_kv_cache_refuses_a_head_dim_off_16(cpu):
    rng = np.random.default_rng(17)
    head_dim, kv_heads = 8, 1
    tables = np.arange(2, dtype=np.int32).reshape(1, 2)
    cache = np.zeros((1, 2, 2, kv_heads, BS, head_dim + 4), np.uint8)
    qkv = rng.standard_normal((1, 4 * head_dim), dtype=np.float32)
    out = cache.copy()
    refused(lambda s: kv_write_call(qkv, np.array([3], np.int32), tables, cache, T=1,
                                    tokens_per_seq=1, layer=0, kv_heads=kv_heads,
                                    head_dim=head_dim, row_stride=4 * head_dim,
                                    k_offset=2 * head_dim, device=cpu, out=out, stream=s,
                                    kernel="axrt_kv_cache_write_fp8_e4m3"),
            r"head_dim 8: an fp8 KV cache needs a multiple of 16")
    np.testing.assert_array_equal(out, cache)


# ---------------------------------------------------------------------------
# Split decode and its combine (docs/kernels.md, "Split attention")


def split_call(qkv, positions, tables, cache, *, heads, kv_heads, head_dim, layer, scale, splits,
               device, kernel="axrt_attention_decode_split_f32", out=None, stream=None):
    """The records [B, heads, splits, head_dim + 2] of `kernel` over `cache`."""
    B, row_stride = qkv.shape
    num_blocks, max_blocks = cache.shape[2], tables.shape[1]
    (result,) = run(kernel, SPLIT, (B, kv_heads, splits),
                    {"qkv": qkv, "positions": positions, "block_tables": tables, "cache": cache},
                    {"partials": (np.float32, (B, heads, splits, head_dim + 2))},
                    lambda f: [f.input(0), f.input(1), f.input(2), f.input(3), f.output(0), B,
                               heads, kv_heads, head_dim, layer, num_blocks, BS, max_blocks,
                               row_stride, scale, splits],
                    device, out=out, stream=stream)
    return result


def combine_call(partials, device, out=None, stream=None):
    B, heads, splits, stride = partials.shape
    (result,) = run("axrt_attention_combine_f32", COMBINE, (B, heads), {"partials": partials},
                    {"out": (np.float32, (B, heads * (stride - 2)))},
                    lambda f: [f.input(0), f.output(0), B, heads, stride - 2, splits],
                    device, out=out, stream=stream)
    return result


def split_chunks(position, splits):
    """[begin, end) of each chunk of positions 0 .. position: ceil((position + 1) / splits)
    rounded up to whole blocks, empty past the context."""
    n = position + 1
    chunk = ceildiv(ceildiv(n, splits), BS) * BS
    return [(min(s * chunk, n), min((s + 1) * chunk, n)) for s in range(splits)]


def check_records(records, qkv, positions, tables, cache, heads, kv_heads, head_dim, layer,
                  scale, splits):
    """Each record against float64: an empty chunk exactly {-inf, 0, 0...}; otherwise m
    within the scores' f32 bound, l within what that moves it, and acc / l within the
    attention bound of the chunk's keys and values."""
    group = heads // kv_heads
    scale64 = np.float64(np.float32(scale))
    for t, p in enumerate(positions):
        for h in range(heads):
            keys, values = cached(cache, layer, tables[t], h // group, p + 1)
            q = qkv[t, h * head_dim: (h + 1) * head_dim].astype(np.float64)
            for s, (begin, end) in enumerate(split_chunks(int(p), splits)):
                m, l, acc = records[t, h, s, 0], records[t, h, s, 1], records[t, h, s, 2:]
                where = (t, h, s)
                if begin == end:
                    assert m == -np.inf and l == 0 and np.all(acc == 0), where
                    continue
                k, v = keys[begin:end], values[begin:end]
                scores = (k @ q) * scale64
                spread = 1e-5 * scale64 * (np.abs(k) @ np.abs(q)).max() + 1e-7
                want_m = scores.max()
                assert abs(m - want_m) <= spread, where
                want_l = np.exp(scores - want_m).sum()
                assert abs(l / want_l - 1) <= np.expm1(2 * spread) + 1e-5, where
                ref, weights = attention_reference(q, k, v, scale64)
                bound = 1e-5 * (weights @ np.abs(v) + np.abs(v).max(axis=0)) + 1e-6
                assert np.all(np.abs(acc / l - ref) <= bound), (where, np.abs(acc / l - ref).max())


# GQA groups of 1 to 20 heads (the CPU takes 16 query heads a pass), head_dim up to 256 and
# one (f32, bf16) that is no multiple of 4.
SPLIT_SHAPES = [(4, 4, 64), (8, 2, 128), (4, 1, 128), (20, 1, 32), (32, 2, 256), (4, 2, 36)]


# An fp8 cache takes head_dim a multiple of 16 only (the decode kernels' refusal of others is
# tested above).
SPLIT_CASES = [(dtype, *shape) for dtype in ("f32", "bf16", "fp8_e4m3") for shape in SPLIT_SHAPES
               if dtype != "fp8_e4m3" or shape[2] % 16 == 0]


@pytest.mark.parametrize("dtype, heads, kv_heads, head_dim", SPLIT_CASES)
@pytest.mark.parametrize("splits", [1, 3, 8])
def test_attention_decode_split_and_combine(device, dtype, heads, kv_heads, head_dim, splits,
                                            capsys):
    """Five tokens at positions 0 .. 130 (contexts shorter than `splits` chunks, chunks
    ending mid-block, empty ones past the context): every record against float64 over the
    keys and values the cache holds, the combine within the f32 attention bound, the
    difference to the unsplit kernel reported; and a token's records alone the same bits
    as among the others."""
    rng = np.random.default_rng(19)
    L, layer, max_blocks = 2, 1, 9
    positions = np.array([0, 15, 16, 77, 130], np.int32)
    B = len(positions)
    num_blocks = B * max_blocks + 4
    tables = scattered_tables(rng, B, max_blocks, num_blocks)
    f32 = filled_cache(rng, L, num_blocks, kv_heads, head_dim, layer, tables, positions + 1)
    stored, decoded = (f32, f32) if dtype == "f32" else stored_cache(f32, dtype)
    row_stride = (heads + 2 * kv_heads) * head_dim + 3
    qkv = (rng.standard_normal((B, row_stride)) * 2).astype(np.float32)
    scale = 1.0 / math.sqrt(head_dim)
    kernel = SPLIT_KERNELS[dtype]
    records = split_call(qkv, positions, tables, stored, heads=heads, kv_heads=kv_heads,
                         head_dim=head_dim, layer=layer, scale=scale, splits=splits,
                         device=device, kernel=kernel)
    check_records(records, qkv, positions, tables, decoded, heads, kv_heads, head_dim, layer,
                  scale, splits)
    out = combine_call(records, device)
    check_attention(out, qkv, positions, tables, decoded, heads, kv_heads, head_dim, layer, scale)
    unsplit = decode_call(qkv, positions, tables, stored, heads=heads, kv_heads=kv_heads,
                          head_dim=head_dim, layer=layer, scale=scale, device=device,
                          kernel="axrt_attention_decode_f32" if dtype == "f32"
                          else KV_KERNELS[dtype][1])
    if splits == 1 and device.type == "cpu":
        # One chunk is the unsplit pass, normalised by the combine.
        np.testing.assert_allclose(out, unsplit, rtol=4e-7, atol=1e-30)
    if heads == 8 and kv_heads == 2 and head_dim == 128 and splits == 8:
        with capsys.disabled():
            print(f"\nsplit attention ({dtype}, 8 splits): within "
                  f"{np.abs(out - unsplit).max():.2e} (max abs) of the unsplit kernel", end="")
    # Batch invariance: token 3 alone.
    alone = split_call(qkv[3:4], positions[3:4], tables[3:4], stored, heads=heads,
                       kv_heads=kv_heads, head_dim=head_dim, layer=layer, scale=scale,
                       splits=splits, device=device, kernel=kernel)
    np.testing.assert_array_equal(alone.view(np.uint32), records[3:4].view(np.uint32))
    np.testing.assert_array_equal(combine_call(alone, device), out[3:4])


def test_attention_combine(device):
    """Random records, empty ones (m = -inf, l = 0) among them: the float64 combine within
    f32 rounding."""
    rng = np.random.default_rng(20)
    B, heads, splits, head_dim = 3, 5, 7, 40
    records = np.empty((B, heads, splits, head_dim + 2), np.float32)
    records[..., 0] = rng.uniform(-20, 20, (B, heads, splits))
    records[..., 1] = rng.uniform(1, 50, (B, heads, splits))
    records[..., 2:] = rng.standard_normal((B, heads, splits, head_dim)) * 10
    empty = rng.random((B, heads, splits)) < 0.3
    empty[..., 0] = False
    records[empty, 0] = -np.inf
    records[empty, 1:] = 0
    out = combine_call(records, device).reshape(B, heads, head_dim)
    r = records.astype(np.float64)
    w = np.exp(r[..., 0] - r[..., 0].max(axis=-1, keepdims=True))
    total = (r[..., 1] * w).sum(axis=-1)
    want = (r[..., 2:] * w[..., None]).sum(axis=-2) / total[..., None]
    bound = 1e-5 * (np.abs(r[..., 2:]) * w[..., None]).sum(axis=-2) / total[..., None] + 1e-6
    assert np.all(np.abs(out - want) <= bound), np.abs(out - want).max()


@pytest.mark.parametrize("position, entry, match", [
    (80, None, r"position 80, outside the block table's \[0, 80\)"),
    (-3, None, r"position -3, outside"),
    (40, -1, r"block table entry 1 is -1, outside \[0, 12\)"),
])
def test_attention_decode_split_refuses_indices_out_of_range(cpu, position, entry, match):
    """As the decode kernels: an index out of range fails before any record is written."""
    rng = np.random.default_rng(21)
    heads, kv_heads, head_dim, max_blocks, num_blocks, splits = 4, 2, 64, 5, 12, 4
    tables = scattered_tables(rng, 1, max_blocks, num_blocks)
    if entry is not None:
        tables[0, 1] = entry
    cache = rng.standard_normal((1, 2, num_blocks, kv_heads, BS, head_dim), dtype=np.float32)
    qkv = rng.standard_normal((1, (heads + 2 * kv_heads) * head_dim), dtype=np.float32)
    out = np.full((1, heads, splits, head_dim + 2), 7.0, np.float32)
    refused(lambda s: split_call(qkv, np.array([position], np.int32), tables, cache,
                                 heads=heads, kv_heads=kv_heads, head_dim=head_dim, layer=0,
                                 scale=0.125, splits=splits, device=cpu, out=out, stream=s),
            match)
    np.testing.assert_array_equal(out, 7.0)


def test_attention_split_and_combine_refuse_zero_splits(cpu):
    rng = np.random.default_rng(22)
    D = 16
    tables = np.arange(2, dtype=np.int32).reshape(1, 2)
    cache = rng.standard_normal((1, 2, 2, 1, BS, D), dtype=np.float32)
    qkv = rng.standard_normal((1, 3 * D), dtype=np.float32)
    partials = np.full((1, 1, 1, D + 2), 7.0, np.float32)
    inputs = {"qkv": qkv, "positions": np.array([3], np.int32), "block_tables": tables,
              "cache": cache}
    refused(lambda s: run("axrt_attention_decode_split_f32", SPLIT, (1, 1, 1), inputs,
                          {"partials": (np.float32, partials.shape)},
                          lambda f: [f.input(0), f.input(1), f.input(2), f.input(3), f.output(0),
                                     1, 1, 1, D, 0, 2, BS, 2, 3 * D, 0.25, 0],
                          cpu, out=partials, stream=s),
            "splits must be at least 1")
    np.testing.assert_array_equal(partials, 7.0)
    out = np.full((1, D), 7.0, np.float32)
    refused(lambda s: run("axrt_attention_combine_f32", COMBINE, (1, 1), {"partials": partials},
                          {"out": (np.float32, out.shape)},
                          lambda f: [f.input(0), f.output(0), 1, 1, D, 0], cpu, out=out,
                          stream=s),
            r"head_dim 16 and splits 0 must be positive")
    np.testing.assert_array_equal(out, 7.0)


# ---------------------------------------------------------------------------
# Sampling: the algorithm of docs/llm.md ("Sampling"), step by step


M1, M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def mix64(z):
    z = (z ^ (z >> np.uint64(30))) * M1
    z = (z ^ (z >> np.uint64(27))) * M2
    return z ^ (z >> np.uint64(31))


def uniforms(seeds, positions):
    """u in [0, 1) of each (seed, position)."""
    with np.errstate(over="ignore"):
        step = np.asarray(positions, np.int32).view(np.uint32).astype(np.uint64) + np.uint64(1)
        bits = mix64(mix64(np.asarray(seeds, np.uint64)) + step * GOLDEN)
    return (bits >> np.uint64(11)).astype(np.float64) * 2.0**-53


def kept_weights(logits, temperature, top_k, top_p):
    """Steps 1-4: the weight of every token the draw may pick (0 elsewhere),
    or the greedy token."""
    l = np.asarray(logits, np.float32)
    l = np.where(np.isnan(l), np.float32(-np.inf), l)
    V = len(l)
    greedy = int(np.argmax(l))  # the lowest index of the maximum
    l_max = l[greedy]
    if not np.float32(temperature) > 0 or not np.isfinite(l_max) or top_k == 1:
        return greedy
    w = np.exp((l.astype(np.float64) - np.float64(l_max)) / np.float64(np.float32(temperature)))
    k = top_k if 0 < top_k < V else V
    ranked = np.lexsort((np.arange(V), -l))[:k]  # larger logit first, then lower id
    n = k
    if np.float32(top_p) < 1:
        reached = np.cumsum(w[ranked]) >= np.float64(np.float32(top_p)) * w[ranked].sum()
        n = int(np.argmax(reached)) + 1 if reached.any() else k
    kept = np.zeros(V)
    kept[ranked[:n]] = w[ranked[:n]]
    return kept


def sample_reference(logits, temperature, top_k, top_p, u):
    kept = kept_weights(logits, temperature, top_k, top_p)
    if isinstance(kept, int):
        return kept
    running = np.cumsum(kept)  # step 5: in token order
    token = int(np.searchsorted(running, u * running[-1], side="right"))
    return token if token < len(kept) else int(np.flatnonzero(kept)[-1])


def sample_call(logits, temperature, top_k, top_p, seeds, positions, device):
    B, V = logits.shape
    (tokens,) = run("axrt_sample_f32", SAMPLE, B,
                    {"logits": np.asarray(logits, np.float32),
                     "temperature": np.asarray(temperature, np.float32),
                     "top_k": np.asarray(top_k, np.int32), "top_p": np.asarray(top_p, np.float32),
                     "seeds": np.asarray(seeds, np.uint64),
                     "positions": np.asarray(positions, np.int32)},
                    {"tokens": (np.int32, (B,))},
                    lambda f: [f.input(0), f.input(1), f.input(2), f.input(3), f.input(4),
                               f.input(5), f.output(0), B, V],
                    device)
    return tokens


def test_sample_greedy_is_the_lowest_index_of_the_maximum(device):
    rng = np.random.default_rng(11)
    B, V = 6, 1000
    logits = rng.standard_normal((B, V), dtype=np.float32)
    logits[1, [17, 400, 900]] = 50.0  # ties: the lowest wins
    logits[2, :] = -np.inf
    logits[3, 10] = np.nan  # NaN counts as -inf
    logits[4, 999] = 60.0
    temperature = [0.0, 0.0, 1.0, -1.0, 0.0, np.nan]  # <= 0, NaN: greedy; row 2: all -inf
    tokens = sample_call(logits, temperature, [0] * B, [1.0] * B, np.arange(B), [3] * B, device)
    want = np.argmax(np.where(np.isnan(logits), -np.inf, logits), axis=1)
    np.testing.assert_array_equal(tokens, want)
    assert tokens[1] == 17 and tokens[2] == 0 and tokens[4] == 999


def test_sample_top_k_1_is_greedy(device):
    rng = np.random.default_rng(12)
    B, V = 16, 3000
    logits = rng.standard_normal((B, V), dtype=np.float32)
    logits[0, [5, 7]] = 9.0
    tokens = sample_call(logits, [1.5] * B, [1] * B, [0.9] * B, rng.integers(0, 2**63, B),
                         np.arange(B), device)
    np.testing.assert_array_equal(tokens, np.argmax(logits, axis=1))


def test_sample_is_reproducible_and_independent_of_the_batch(device):
    rng = np.random.default_rng(13)
    V = 500
    row = rng.standard_normal(V, dtype=np.float32) * 2
    args = dict(temperature=1.0, top_k=100, top_p=0.95, seed=0xDEADBEEFCAFE, position=1234)
    alone = sample_call(row[None], [args["temperature"]], [args["top_k"]], [args["top_p"]],
                        [args["seed"]], [args["position"]], device)
    logits = rng.standard_normal((7, V), dtype=np.float32)
    logits[4] = row
    seeds = rng.integers(0, 2**63, 7, dtype=np.uint64)
    seeds[4] = args["seed"]
    positions = rng.integers(0, 5000, 7)
    positions[4] = args["position"]
    for _ in range(2):
        batch = sample_call(logits, [1.0] * 7, [100] * 7, [0.95] * 7, seeds, positions, device)
        assert batch[4] == alone[0]
    u = uniforms([args["seed"]], [args["position"]])[0]
    assert alone[0] == sample_reference(row, 1.0, 100, 0.95, u)


def test_sample_matches_the_reference_token_for_token(device):
    """Steps 1-5 on rows of every kind: the kernel's token is the reference's."""
    rng = np.random.default_rng(14)
    B, V = 600, 257
    logits = (rng.standard_normal((B, V)) * rng.uniform(0.1, 6, (B, 1))).astype(np.float32)
    logits[::7, ::3] = logits[::7, :1]  # many ties
    logits[::11, ::5] = -np.inf
    temperature = rng.choice([0.0, 0.3, 0.7, 1.0, 1.8], B)
    top_k = rng.choice([0, 1, 2, 10, 50, 256, 257, 1000, -4], B)
    top_p = rng.choice([1.0, 0.95, 0.8, 0.5, 0.1, 0.0, 1.5], B)
    seeds = rng.integers(0, 2**64, B, dtype=np.uint64)
    positions = rng.integers(-5, 100000, B)
    tokens = sample_call(logits, temperature, top_k, top_p, seeds, positions, device)
    u = uniforms(seeds, positions)
    want = [sample_reference(logits[b], temperature[b], top_k[b], top_p[b], u[b])
            for b in range(B)]
    np.testing.assert_array_equal(tokens, want)


@pytest.mark.parametrize("temperature, top_k, top_p", [
    (1.0, 0, 1.0), (0.7, 20, 1.0), (1.3, 0, 0.8), (0.8, 25, 0.9)])
@pytest.mark.parametrize("vary", ["seed", "position"])
def test_sample_draws_from_the_truncated_distribution(device, temperature, top_k, top_p, vary):
    """20000 draws, one a seed (or a position), against the reference's
    probabilities: no token outside the kept set, and a chi-square statistic
    far below its 1e-9 tail."""
    rng = np.random.default_rng(15)
    V, N = 48, 20000
    row = (rng.standard_normal(V) * 1.5).astype(np.float32)
    logits = np.broadcast_to(row, (N, V))
    seeds = np.arange(N) if vary == "seed" else np.full(N, 0x5EED)
    positions = np.full(N, 77) if vary == "seed" else np.arange(N)
    tokens = sample_call(logits, [temperature] * N, [top_k] * N, [top_p] * N, seeds, positions,
                         device)
    kept = kept_weights(row, temperature, top_k, top_p)
    p = kept / kept.sum()
    counts = np.bincount(tokens, minlength=V)
    assert counts[p == 0].sum() == 0
    expected = N * p[p > 0]
    chi2 = float(((counts[p > 0] - expected) ** 2 / expected).sum())
    df = int((p > 0).sum()) - 1
    assert chi2 < df + 9 * math.sqrt(2 * df), (chi2, df)
    if top_k:
        assert (p > 0).sum() <= top_k
