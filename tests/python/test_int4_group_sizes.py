"""int4 weights in groups of 32, 64 and 128 inputs (docs/llm.md, "int4 group sizes";
docs/kernels.md, "Group sizes"; docs/format.md section 9): the bytes of groups of 128 pinned, the converter's choice of a
group size and its refusals, every int4 kernel at groups of 32 and 64 against float64 numpy,
and a model whose hidden size is not a multiple of 128 against transformers."""
import hashlib
import json
import os
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import axrt
from conftest import kernels_code_object
import axrt.builder
from axrt.builder import Buffer, Packing, QuantLayout, ScaleRef, ZeroPoint, ceildiv
from axrt.llm import quantize
from axrt.llm.kernel_table import (CUDA_ENTRIES, KERNELS, awq_layout, contracts_path,
                                   gptq_layout, int4_kernel)

DATA = Path(__file__).resolve().parent.parent / "llm" / "data"


# ---------------------------------------------------------------------------
# Groups of 128: their bytes, pinned (files converted at any time hold the same weights)


def pinned_weights(n: int = 256, k: int = 1024) -> np.ndarray:
    """A fixed [n, k] f32 weight made with integer arithmetic only (the same bits on every
    platform and numpy version): values in [-1, 1) at 2^-23 steps, each row scaled by a power
    of two from 2^-8 to 2^4; row 0 zeros, row 1 positive, row 2 one outlier a group, row 3
    constant, and the last 64 rows rounded to bf16 as checkpoints hold them."""
    i = np.arange(n * k, dtype=np.uint64)
    h = i * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x632BE59BD9B4E019)
    h ^= h >> np.uint64(31)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(29)
    h *= np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(32)
    unit = ((h >> np.uint64(40)).astype(np.int64) - (1 << 23)).astype(np.float32)
    w = (unit * np.float32(2.0 ** -23)).reshape(n, k)
    exponents = (np.arange(n) * 7) % 13 - 8
    w *= np.exp2(exponents).astype(np.float32)[:, None]
    w[0] = 0
    w[1] = np.abs(w[1])
    w[2, ::128] = 37.0
    w[3] = -0.375
    w[-64:] = w[-64:].astype(ml_dtypes.bfloat16).astype(np.float32)
    return w


def digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


# sha256 of qweight, scales and qzeros (in that order, little-endian as stored) of
# pinned_weights() in groups of 128.
AWQ_G128 = "47e11536c847ba16e5498ceeee4dd1bd641834c109763cab5490f9b1f0009822"
GPTQ_G128 = "690ad9cfa6de0a3d5c9b0d9fe50a28f90f445fa42afc342bbdfc737258f11d00"


def test_groups_of_128_quantize_to_the_pinned_bytes():
    w = pinned_weights()
    awq = quantize.int4_awq(w)
    gptq = quantize.int4_gptq(w)
    assert [a.dtype for a in awq] == [np.uint32, np.float16, np.uint32]
    assert [a.shape for a in awq] == [(1024, 32), (8, 256), (8, 32)]
    assert [a.dtype for a in gptq] == [np.uint32, np.float16, np.uint32]
    assert [a.shape for a in gptq] == [(128, 256), (8, 256), (8, 32)]
    assert digest(*awq) == AWQ_G128
    assert digest(*gptq) == GPTQ_G128
    assert digest(*quantize.int4_awq(w, 128)) == AWQ_G128
    assert digest(*quantize.int4_gptq(w, 128)) == GPTQ_G128


@pytest.mark.parametrize("group", [128, 64, 32])
def test_quantizing_by_blocks_of_outputs_gives_the_bytes_of_the_whole(monkeypatch, group):
    """The quantizers take a block of outputs at a time (bounded memory); blocks of 8 and
    of 24 outputs give the bytes of one block, from f32 and from bf16 weights alike."""
    import ml_dtypes

    w = pinned_weights()
    for weights in (w, w.astype(ml_dtypes.bfloat16)):
        whole = [digest(*quantize.int4_awq(weights, group)),
                 digest(*quantize.int4_gptq(weights, group))]
        for block_rows in (8, 24):
            monkeypatch.setattr(quantize, "_INT4_BLOCK", block_rows * w.shape[1])
            assert [digest(*quantize.int4_awq(weights, group)),
                    digest(*quantize.int4_gptq(weights, group))] == whole
            monkeypatch.undo()
    if group == 128:
        assert whole == [digest(*quantize.int4_awq(w.astype(ml_dtypes.bfloat16).astype(
            np.float32))), digest(*quantize.int4_gptq(w.astype(ml_dtypes.bfloat16).astype(
                np.float32)))]


def converted_int4_bytes(monkeypatch, tmp_path, **options) -> str:
    """sha256 over the int4 constants (codes, scales, zero points) the converter writes for
    tiny-llama3 (every projection's inputs a multiple of 128) with `options`, by name."""
    seen = {}
    original = axrt.builder.Builder.constant

    def constant(self, name, data, **kw):
        if callable(data) and kw.get("dtype") in ("uint4", "f16", "uint32"):
            make = data

            def data():
                value = make()
                seen[name] = digest(value)
                return value
        return original(self, name, data, **kw)

    monkeypatch.setattr(axrt.builder.Builder, "constant", constant)
    axrt.llm.convert(DATA / "tiny-llama3", tmp_path / "int4.axe", weights="int4", cuda=False,
                     **options)
    monkeypatch.undo()
    assert len(seen) == 3 * (2 * 4 + 1)  # qkv, o, gate_up, down of 2 layers, and lm_head
    return hashlib.sha256("".join(f"{n}={seen[n]};" for n in sorted(seen)).encode()).hexdigest()


# The converter's int4 constants of tiny-llama3, as converted_int4_bytes() hashes them.
CONVERTED_AWQ_G128 = "21e427bf396fcb359ca61d09bde3f5b09596ae5265b4fce6a66c609d620923b2"
CONVERTED_GPTQ_G128 = "cc05a5d041252dfcf575f7292b7e52edd01a5fb70e0cea9476ccc7bb08c59c58"


def test_the_converter_writes_the_pinned_bytes_for_groups_of_128(monkeypatch, tmp_path):
    """GPTQ's storage with f32 and with int8 activations, AWQ's for the tensor-core matmul."""
    assert converted_int4_bytes(monkeypatch, tmp_path) == CONVERTED_GPTQ_G128
    assert converted_int4_bytes(monkeypatch, tmp_path, activations="int8") == CONVERTED_GPTQ_G128
    assert (converted_int4_bytes(monkeypatch, tmp_path, tensor_core_matmuls=True)
            == CONVERTED_AWQ_G128)


# ---------------------------------------------------------------------------
# Choosing a group size


def test_each_input_count_takes_the_largest_group_that_divides_it():
    assert quantize.INT4_GROUP_SIZES == (128, 64, 32)
    picks = {k: quantize.int4_group_size(k) for k in (128, 576, 192, 96, 1536, 288, 40, 8)}
    assert picks == {128: 128, 576: 64, 192: 64, 96: 32, 1536: 128, 288: 32, 40: None, 8: None}
    with pytest.raises(ValueError, match="inputs a multiple of 64"):
        quantize.int4_awq(np.zeros((8, 96), np.float32), 64)


@pytest.mark.parametrize("group", [32, 64])
def test_smaller_groups_quantize_each_group_on_its_own(group):
    """Groups of 32 and 64 are groups of 128 cut finer: the codes, scales and zero points of
    each group are those of that group quantized alone, in either storage."""
    w = pinned_weights(64, 256)
    codes, scales, zeros = quantize.int4_codes(w, group)
    assert codes.shape == (256, 64) and scales.shape == zeros.shape == (256 // group, 64)
    for g in range(256 // group):
        alone = quantize.int4_codes(w[:, g * group:(g + 1) * group], group)
        np.testing.assert_array_equal(codes[g * group:(g + 1) * group], alone[0])
        np.testing.assert_array_equal(scales[g], alone[1][0])
        np.testing.assert_array_equal(zeros[g], alone[2][0])
    awq, gptq = quantize.int4_awq(w, group), quantize.int4_gptq(w, group)
    np.testing.assert_array_equal(awq[0], quantize.pack_awq(codes))
    np.testing.assert_array_equal(gptq[0], quantize.pack_sequential(codes, 0))
    for packed in (awq, gptq):
        np.testing.assert_array_equal(packed[1], scales)


# ---------------------------------------------------------------------------
# Every int4 kernel at groups of 32 and 64, on cpu:0 and on cuda:0 of the mock CUDA driver
# (which runs the CPU kernel named by the CUDA entry point), its weights constants in the
# layout of the group

# The kernels by the name of their groups of 128: the storage they read and their grid
# (columns, rows a workgroup).
INT4_KERNELS = {
    "axrt_matmul_awq_int4_f32": ("awq", 64, 64),
    "axrt_matmul_gptq_int4_f32": ("gptq", 64, 64),
    "axrt_matmul_gptq_v1_int4_f32": ("gptq_v1", 64, 64),
    "axrt_matmul_gptq_int4_f32_decode": ("gptq", 16, 16),
    "axrt_matmul_awq_int4_tc_f32": ("awq", 128, 128),
    "axrt_matmul_gptq_int4_q8_f32": ("gptq", 64, 64),
}


def gptq_v1_layout(group: int) -> QuantLayout:
    """GPTQ v1 (qzeros hold z - 1), which the converter never writes (docs/format.md 9.3)."""
    return QuantLayout(f"gptq.int4.g{group}", "uint4", "f32", (group, 1),
                       scale=ScaleRef(dtype="f16"),
                       zero_point=ZeroPoint("integer", dtype="uint4", stored_bias=1,
                                            packing=Packing(4, 32, axis=1, order="sequential")),
                       packing=Packing(4, 32, axis=0, order="sequential"))


LAYOUTS = {"awq": awq_layout, "gptq": gptq_layout, "gptq_v1": gptq_v1_layout}


def params(kernel: str, storage: str, group: int):
    """The kernel's parameter table from its contract: the converter's, or (GPTQ v1) v2's
    with the v1 layout."""
    if storage != "gptq_v1":
        return KERNELS[kernel][0]
    return [Buffer(p.name, p.access, gptq_v1_layout(group))
            if getattr(p, "layout", None) is not None else p
            for p in KERNELS[kernel.replace("gptq_v1_", "gptq_")][0]]


def test_every_name_declares_the_layout_of_its_group():
    contracts = {k["name"]: k for k in json.loads(contracts_path().read_text())["kernels"]}
    for base, (storage, _, _) in INT4_KERNELS.items():
        for group in (128, 64, 32):
            name = int4_kernel(base, group)
            declared = [p["layout"] for p in contracts[name]["params"] if "layout" in p]
            assert declared == [LAYOUTS[storage](group).layout_id], name
            table = [p.layout.layout_id for p in params(name, storage, group)
                     if getattr(p, "layout", None) is not None]
            assert table == declared, name
            assert [p["name"] for p in contracts[name]["params"]] == \
                [p["name"] for p in contracts[base]["params"]]
            # In CUDA the groups-of-128 kernel's entry point serves every size.
            assert contracts[name].get("cuda_entry", name) == base
            assert CUDA_ENTRIES.get(name, name) == base


def code_object(builder):
    return kernels_code_object(builder, INT4_KERNELS)


def pack(codes: np.ndarray, axis: int, order=range(8)) -> np.ndarray:
    """u32 words of 8 codes along `axis`, element order[p] of each eight in nibble p."""
    codes = np.moveaxis(codes.astype(np.uint32), axis, -1)
    codes = codes.reshape(codes.shape[:-1] + (-1, 8))
    words = np.zeros(codes.shape[:-1], np.uint32)
    for nibble, element in enumerate(order):
        words |= codes[..., element] << np.uint32(4 * nibble)
    return np.ascontiguousarray(np.moveaxis(words, -1, axis))


def int4_weights(rng, k: int, n: int, group: int, storage: str):
    """Random codes, zero points and f16 scales in `storage`: (qweight, scales, qzeros) and
    the float64 weights W [K, N] they stand for, W[k][n] = (q - z[k/g]) s[k/g]."""
    groups = k // group
    q = rng.integers(0, 16, (k, n))
    z = rng.integers(1 if storage == "gptq_v1" else 0, 16, (groups, n))
    scales = (rng.uniform(0.002, 0.05, (groups, n)) * rng.choice([-1, 1], (groups, n))).astype(
        np.float16)
    if storage == "awq":
        qweight, qzeros = pack(q, 1, quantize.AWQ_ORDER), pack(z, 1, quantize.AWQ_ORDER)
    else:
        qweight, qzeros = pack(q, 0), pack(z - (storage == "gptq_v1"), 1)
    g = np.arange(k) // group
    return (qweight, scales, qzeros), (q - z[g]) * scales.astype(np.float64)[g]


def run_int4(device, kernel, storage, group, weights, x, bias, k=None, stream=None):
    """One dispatch of `kernel` on its grid; the weights are constants in the layout of
    `group` (`k`: the K the kernel is told, by default x's)."""
    base = next(b for b in INT4_KERNELS if int4_kernel(b, group) == kernel)
    _, cols, rows = INT4_KERNELS[base]
    (m, kx), n = x.shape, bias.shape[0]
    k = kx if k is None else k
    qweight, scales, qzeros = weights
    b = axrt.Builder(producer="axrt-tests", producer_version="1")
    kern = b.kernel(kernel, b.kernel_library("axrt.cpu"), params=params(kernel, storage, group))
    if device.type == "cuda":  # the entry point of the groups-of-128 name
        b.kernel_variant(kern, code_object(b), workgroup_size=256, entry_symbol=base)
    s = b.constant("scales", scales)
    z = b.constant("qzeros", qzeros)
    w = b.constant("qweight", qweight, dtype="uint4", shape=(kx, n),
                   layout=LAYOUTS[storage](group).with_constants(scale=s, zero_point=z))
    f = b.function("main", inputs=[("x", np.float32, (m, kx)), ("bias", np.float32, (n,))],
                   outputs=[("y", np.float32, (m, n))])
    f.dispatch(kern, grid=(ceildiv(n, cols), ceildiv(m, rows)),
               args=[f.input(0), w, s, z, f.input(1), f.output(0), m, n, k, group])
    options = {} if stream is None else {"stream": stream}
    y = axrt.load(b.to_bytes(), device=device).main(x, bias, **options)
    if stream is not None:
        stream.synchronize()
    return y if isinstance(y, np.ndarray) else y.numpy()


def quantized_x(x: np.ndarray, group: int) -> np.ndarray:
    """x as the int8-activation kernels quantize it (docs/kernels.md, "Int8 activations"),
    per row and group, in f32 operations: xq s_x, in float64."""
    m, k = x.shape
    groups = x.reshape(m, k // group, group)
    a = np.abs(groups).max(axis=2)
    with np.errstate(divide="ignore"):
        inv = np.where(a == 0, np.float32(0), np.float32(127) / a).astype(np.float32)
    xq = np.rint(groups * inv[:, :, None])  # a lone f32 product, rounded half to even
    assert xq.dtype == np.float32
    s_x = (a / np.float32(127)).astype(np.float32)
    return (xq.astype(np.float64) * s_x.astype(np.float64)[:, :, None]).reshape(m, k)


@pytest.mark.parametrize("group", [32, 64])
@pytest.mark.parametrize("base", list(INT4_KERNELS))
def test_int4_kernels_at_groups_of_32_and_64(device, base, group):
    """The kernel's name for the group against float64 numpy: exact kernels within the matmul
    bound of x . W (W dequantized exactly); the tensor-core one of bf16(x) . bf16(W); the
    int8-activation one of xq s_x . W, and within half a step of x per element of x . W.
    21 rows (the panel path, two decode tiles) and their first 3 alone (the fused path): the
    same bits, whatever M."""
    storage = INT4_KERNELS[base][0]
    kernel = int4_kernel(base, group)
    rng = np.random.default_rng(500 + group + list(INT4_KERNELS).index(base))
    n, k = 200, 576  # N a multiple of 8, not of 16 or 64; K 9 groups of 64, 18 of 32
    weights, w = int4_weights(rng, k, n, group, storage)
    x = rng.standard_normal((21, k)).astype(np.float32)
    x *= rng.uniform(0.01, 10, (21, 1)).astype(np.float32)
    x[1, group: 2 * group] = 0  # a group of zeros: s_x = 0
    bias = rng.standard_normal(n).astype(np.float32)
    y = run_int4(device, kernel, storage, group, weights, x, bias)
    np.testing.assert_array_equal(run_int4(device, kernel, storage, group, weights, x[:3], bias),
                                  y[:3])
    exact = x.astype(np.float64) @ w + bias
    if base.endswith("_tc_f32"):
        xr, wr = rounded(x), rounded(w.astype(np.float32))
        bound = 1e-5 * (np.abs(xr) @ np.abs(wr) + np.abs(bias)) + 1e-6
        assert np.all(np.abs(y - (xr @ wr + bias)) <= bound)
        assert np.all(np.abs(y - exact) <=
                      (2.0 ** -7 + 2.0 ** -16) * (np.abs(x) @ np.abs(w)) + bound)
    elif base.endswith("_q8_f32"):
        xq = quantized_x(x, group)
        bound = 1e-5 * (np.abs(xq) @ np.abs(w) + np.abs(bias)) + 1e-6
        assert np.all(np.abs(y - (xq @ w + bias)) <= bound)
        half_step = np.abs(x).reshape(21, k // group, group).max(axis=2) / 254.0
        w_groups = np.abs(w).reshape(k // group, group, n).sum(axis=1)
        assert np.all(np.abs(y - exact) <= half_step @ w_groups + bound)
    else:
        bound = 1e-5 * (np.abs(x) @ np.abs(w) + np.abs(bias)) + 1e-6
        assert np.all(np.abs(y - exact) <= bound)


def rounded(a: np.ndarray) -> np.ndarray:
    """bf16(a) (nearest even) in float64."""
    return a.astype(ml_dtypes.bfloat16).astype(np.float64)


@pytest.mark.parametrize("base", list(INT4_KERNELS))
def test_a_k_the_group_does_not_divide_is_refused(cpu, base):
    """K = 96 told to a kernel of groups of 64: refused by name before anything is written."""
    storage = INT4_KERNELS[base][0]
    kernel = int4_kernel(base, 64)
    rng = np.random.default_rng(7)
    weights, _ = int4_weights(rng, 128, 16, 64, storage)
    x = np.ones((2, 128), np.float32)
    stream = axrt.Stream(device="cpu:0")  # a failure is sticky: a stream of its own
    with pytest.raises(axrt.InvalidArgumentError,
                       match=f"{kernel}: K = 96 is not a multiple of group_size = 64"):
        run_int4(cpu, kernel, storage, 64, weights, x, np.zeros(16, np.float32), k=96,
                 stream=stream)


@pytest.fixture
def cpu():
    return axrt.device("cpu:0")


# ---------------------------------------------------------------------------
# A model whose hidden size is not a multiple of 128, against transformers

# hidden 192 (q/k/v, gate/up and lm_head: groups of 64), 3 heads of 32 (o_proj's 96 inputs:
# 32), intermediate 384 (down_proj: 128).
SPEC = dict(vocab_size=256, hidden_size=192, intermediate_size=384, num_hidden_layers=2,
            num_attention_heads=3, num_key_value_heads=1, head_dim=32,
            max_position_embeddings=128, rope_theta=10000.0, rms_norm_eps=1e-5,
            tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, initializer_range=0.06)
PROMPTS = [[1, 17, 250, 3, 99, 12, 64, 128, 70, 42, 5, 6, 7, 201, 33, 90, 91], [1, 200, 33]]
GREEDY_TOKENS = 12


def make_tiny_llama():
    """tests/llm/make_tiny_llama.py (its references: transformers on the weights as the
    converter stores them, dequantized in float64)."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "llm" / "make_tiny_llama.py"
    spec = importlib.util.spec_from_file_location("make_tiny_llama", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_checkpoint(directory: Path, seed: int, **spec) -> Path:
    """A Llama checkpoint of `spec` made by transformers from `seed` (no tokenizer), norm
    weights spread around 1 as tests/llm/make_tiny_llama.py spreads them."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**spec)).to(torch.float32)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.copy_(1.0 + 0.2 * torch.randn_like(param))
    model.save_pretrained(directory, safe_serialization=True)
    return directory


@pytest.fixture(scope="module")
def hidden_192(tmp_path_factory):
    """The checkpoint, and transformers' int4 reference for PROMPTS."""
    path = write_checkpoint(tmp_path_factory.mktemp("hidden192") / "model", 1921, **SPEC)
    script = make_tiny_llama()
    import torch

    torch.set_num_threads(1)
    return path, script.reference_outputs(script.load_model(path, "int4"), PROMPTS,
                                          GREEDY_TOKENS)


@pytest.mark.parametrize("activations", ["f32", "int8"])
def test_a_model_of_hidden_192_converts_to_int4_and_matches_transformers(
        hidden_192, tmp_path, activations, capsys):
    """Each projection takes the largest group dividing its inputs (64, 32 and 128 here), in
    GPTQ's layout; against transformers on the
    dequantized weights, logits within the bound of docs/llm.md's modes (test_llm.py) and
    greedy generation equal up to a near tie."""
    from test_llm import F32_TOLERANCE, Q8_TOLERANCE, check_rounded_model

    checkpoint, ref = hidden_192
    path = tmp_path / "model.axe"
    config = axrt.llm.convert(checkpoint, path, weights="int4", activations=activations,
                              cuda=False)
    assert config.int4_group_size is None
    data = path.read_bytes()
    storage, kernel = (("gptq_v2", "axrt_matmul_gptq_int4_q8_f32") if activations == "int8"
                       else ("gptq_v2", "axrt_matmul_gptq_int4_f32"))
    for group in (128, 64, 32):
        assert f"{storage}.int4.g{group}".encode() in data
        assert int4_kernel(kernel, group).encode() in data
    llm = axrt.llm.load(path)
    tolerance = F32_TOLERANCE if activations == "f32" else Q8_TOLERANCE
    worst, equal = check_rounded_model(llm, ref, tolerance)
    with capsys.disabled():
        print(f"\nhidden 192, int4 (groups of 64, 32, 128), activations {activations}: logits "
              f"within {worst:.2e}, {equal} of {len(PROMPTS)} generations equal", end="")


def test_decode_matmuls_at_every_group_size_give_the_tile_kernels_bits(hidden_192, tmp_path):
    """GPTQ's layout on the int4 decode grid, for groups of 32, 64 and 128: on the CPU the
    same bits as the tile kernels."""
    checkpoint, _ = hidden_192
    plain, decode = tmp_path / "plain.axe", tmp_path / "decode.axe"
    axrt.llm.convert(checkpoint, plain, weights="int4", cuda=False)
    axrt.llm.convert(checkpoint, decode, weights="int4", cuda=False, decode_matmuls=True)
    for group in (128, 64, 32):
        assert f"gptq_v2.int4.g{group}".encode() in decode.read_bytes()
    a, b = axrt.llm.load(plain), axrt.llm.load(decode)
    with a.session() as sa, b.session() as sb:
        assert np.array_equal(sa.prefill(PROMPTS[0]), sb.prefill(PROMPTS[0]))
        for token in (5, 77, 140):
            assert np.array_equal(sa.decode(token), sb.decode(token))


def test_an_explicit_group_size_applies_to_every_projection(hidden_192, tmp_path):
    checkpoint, _ = hidden_192
    path = tmp_path / "g32.axe"
    config = axrt.llm.convert(checkpoint, path, weights="int4", int4_group_size=32, cuda=False)
    assert config.int4_group_size == 32
    assert axrt.llm.load(path).config.int4_group_size == 32
    data = path.read_bytes()
    assert (b"gptq_v2.int4.g32" in data and b"gptq_v2.int4.g64" not in data
            and b"gptq_v2.int4.g128" not in data)


def test_group_sizes_that_do_not_fit_are_refused_by_name(hidden_192, tmp_path):
    from axrt.llm import UnsupportedModelError

    checkpoint, _ = hidden_192
    out = tmp_path / "out.axe"
    with pytest.raises(UnsupportedModelError,
                       match=r"--int4-group-size 128: layers\.0\.qkv has 192 inputs, not a "
                             r"multiple of 128"):
        axrt.llm.convert(checkpoint, out, weights="int4", int4_group_size=128, cuda=False)
    with pytest.raises(UnsupportedModelError,
                       match=r"--int4-group-size 64: layers\.0\.o_proj has 96 inputs"):
        axrt.llm.convert(checkpoint, out, weights="int4", activations="int8",
                         int4_group_size=64, cuda=False)
    with pytest.raises(UnsupportedModelError, match=r"--int4-group-size 48 is not supported "
                                                    r"\(supported: 32, 64, 128\)"):
        axrt.llm.convert(checkpoint, out, weights="int4", int4_group_size=48, cuda=False)
    with pytest.raises(UnsupportedModelError, match="--int4-group-size needs --weights int4, "
                                                    "not int8"):
        axrt.llm.convert(checkpoint, out, weights="int8", int4_group_size=64, cuda=False)
    # 40 inputs: no group size divides them.
    narrow = write_checkpoint(tmp_path / "narrow", 40, **dict(
        SPEC, hidden_size=40, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, head_dim=20))
    with pytest.raises(UnsupportedModelError,
                       match=r"--weights int4: layers\.0\.qkv has 40 inputs, which no int4 "
                             r"group size \(128, 64, 32\) divides"):
        axrt.llm.convert(narrow, out, weights="int4", cuda=False)
    assert not out.exists()


def test_the_command_line_takes_a_group_size(hidden_192, tmp_path):
    import subprocess
    import sys

    checkpoint, _ = hidden_192
    command = [sys.executable, "-m", "axrt.llm", "convert", str(checkpoint),
               str(tmp_path / "out.axe"), "--weights", "int4", "--no-cuda"]
    refused = subprocess.run(command + ["--int4-group-size", "128"], capture_output=True,
                             text=True, env=os.environ)
    assert refused.returncode != 0
    assert "layers.0.qkv has 192 inputs, not a multiple of 128" in refused.stderr
    done = subprocess.run(command + ["--int4-group-size", "32"], capture_output=True,
                          text=True, env=os.environ)
    assert done.returncode == 0, done.stderr
    assert b"gptq_v2.int4.g32" in (tmp_path / "out.axe").read_bytes()


def test_tensor_parallel_shards_keep_the_one_device_groups(tmp_path):
    """A row-parallel shard keeps the whole projection's groups: tiny-llama-tp's o_proj (256
    inputs, groups of 128) in 4 shards of 64 is refused, and converts with groups of 64 asked
    for."""
    from axrt.llm import UnsupportedModelError

    with pytest.raises(UnsupportedModelError,
                       match=r"o_proj is \[256, 64\] in each of 4 tensor-parallel shards; its "
                             r"groups of 128 inputs would straddle the shards"):
        axrt.llm.convert(DATA / "tiny-llama-tp", tmp_path / "auto", weights="int4",
                         tensor_parallel=4, cuda=False)
    axrt.llm.convert(DATA / "tiny-llama-tp", tmp_path / "g64", weights="int4",
                     int4_group_size=64, tensor_parallel=4, cuda=False)
    for rank in range(4):
        data = (tmp_path / "g64" / f"rank{rank}.axe").read_bytes()
        assert b"gptq_v2.int4.g64" in data and b"gptq_v2.int4.g128" not in data


@pytest.mark.parametrize("options", [{}, {"activations": "int8"}, {"decode_matmuls": True},
                                     {"tensor_core_matmuls": True}],
                         ids=["f32-activations", "int8-activations", "decode", "tensor-core"])
def test_every_group_size_runs_on_the_mock_cuda_device(hidden_192, tmp_path, cuda_mock, options):
    """The CUDA variants of the names for groups of 64 and 32 are the groups-of-128 kernels'
    entry points (kernels/contracts.json, cuda_entry): they load and run on their grids (the
    mock runs the CPU bodies), the CPU device's logits and tokens."""
    from axrt.llm.convert import default_fatbin

    if default_fatbin() is None:
        pytest.skip("axrt was built without its CUDA kernels")
    checkpoint, _ = hidden_192
    path = tmp_path / "model.axe"
    axrt.llm.convert(checkpoint, path, weights="int4", **options)
    on_cuda, on_cpu = (axrt.llm.load(path, device=d) for d in (cuda_mock, "cpu:0"))
    with on_cuda.session() as a, on_cpu.session() as b:
        assert np.array_equal(a.prefill(PROMPTS[0]), b.prefill(PROMPTS[0]))
    assert on_cuda.generate(PROMPTS[1], 4, stop_ids=()) == on_cpu.generate(PROMPTS[1], 4,
                                                                           stop_ids=())
