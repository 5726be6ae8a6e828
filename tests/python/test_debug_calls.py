"""The debugging modes of a call (docs/debugging.md) on the tiny Llama: a
dumped one-token step holds every layer's intermediates, equal to what numpy
computes from the ones before, and its logits bit for bit; a checked call of
a model with one NaN weight names the first command that reads it."""
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import axrt
import axrt.llm
from axrt.builder import Buffer, Scalar
from axrt.llm.checkpoint import Checkpoint
from axrt.llm.modelfile import read_model
from serving_support import DATA, tiny_llama_path  # noqa: F401 (a fixture)

# The kernels of one decoder layer's commands in step (convert.py's writer);
# the parameter each writes comes from its contract.
LAYER = [
    "axrt_rmsnorm_f32",           # xn = norm(h)
    "axrt_matmul_f32_nk",         # qkv
    "axrt_rope_f32",              # qkv rotated in place
    "axrt_kv_cache_write_f32",    # the mutable kv_cache
    "axrt_attention_decode_f32",  # attn
    "axrt_matmul_f32_nk",         # o_proj
    "axrt_add_f32",               # h += o_proj
    "axrt_rmsnorm_f32",           # xn = norm(h)
    "axrt_matmul_f32_nk",         # gate_up
    "axrt_silu_mul_f32",          # act
    "axrt_matmul_f32_nk",         # down_proj
    "axrt_add_f32",               # h += down_proj
]
CONTRACTS = {k["name"]: k for k in json.loads(
    (Path(__file__).resolve().parent.parent.parent / "kernels" / "contracts.json").read_text())[
        "kernels"]}


def written(kernel):
    """The parameter `kernel` writes, as its contract says."""
    (param,) = [p["name"] for p in CONTRACTS[kernel]["params"]
                if p.get("access") in ("write", "read_write")]
    return param


def step_inputs(config, token=5):
    """A step of one token at position 0 that wants its logits."""
    blocks = config.max_blocks_per_sequence
    tokens = np.array([token], np.int32)
    positions = np.array([0], np.int32)
    tables = np.arange(blocks, dtype=np.int32).reshape(1, blocks)
    logit_rows = np.array([0], np.int32)
    cache = np.zeros(config.kv_cache_shape(blocks), np.float32)
    return tokens, positions, tables, logit_rows, cache


def file_of(command, kernel):
    return f"c{command:03}-{kernel}-{written(kernel)}.npy"


def rmsnorm(x, gamma, eps):
    x64 = x.astype(np.float64)
    return x64 / np.sqrt(np.mean(x64 * x64) + eps) * gamma


def test_a_dumped_step_holds_every_layer(tiny_llama_path, tmp_path):  # noqa: F811
    exe = axrt.load(tiny_llama_path)
    config, _ = read_model(exe)
    step = exe["step"]
    H, L = config.hidden_size, config.num_layers
    expected = step(*step_inputs(config)).numpy()

    tokens, positions, tables, logit_rows, cache = step_inputs(config)
    logits = step(tokens, positions, tables, logit_rows, cache, dump_dir=tmp_path).numpy()
    # The same kernels one command at a time: the same bits.
    assert logits.view(np.uint32).tolist() == expected.view(np.uint32).tolist()

    (call,) = [p for p in tmp_path.iterdir()]
    assert re.fullmatch(r"\d{5}-step", call.name)
    index = json.loads((call / "index.json").read_text())
    assert index["function"] == "step" and index["failure"] is None
    files = {entry["file"]: entry for entry in index["files"]}
    assert set(files) == {p.name for p in call.iterdir()} - {"index.json"}

    # The inputs at the call's start, with their call shapes.
    assert np.load(call / "in-tokens.npy").tolist() == [5]
    assert np.load(call / "in-kv_cache.npy").shape == cache.shape
    assert not np.load(call / "in-kv_cache.npy").any()

    # Every layer's commands and files, in order.
    assert files[file_of(0, "axrt_embedding_f32")]["binding"] == "arena"
    for layer in range(L):
        for i, kernel in enumerate(LAYER):
            entry = files[file_of(1 + 12 * layer + i, kernel)]
            assert entry["command"] == 1 + 12 * layer + i
            assert entry["dtype"] == "f32"
            if kernel == "axrt_kv_cache_write_f32":
                assert entry["binding"] == "input" and entry["name"] == "kv_cache"
                assert tuple(entry["shape"]) == cache.shape
    last = 1 + 12 * L
    # The logit rows gathered from the hidden rows (an embedding lookup),
    # normed, projected.
    assert files[file_of(last, "axrt_embedding_f32")]["binding"] == "arena"
    assert files[file_of(last + 1, "axrt_rmsnorm_f32")]["binding"] == "arena"
    head = files[file_of(last + 2, "axrt_matmul_f32_nk")]
    assert head["binding"] == "output" and head["name"] == "logits"
    assert len(files) == 5 + 1 + 12 * L + 3  # inputs, embedding, layers, gather, norm, head

    # The final logits, bit for bit.
    dumped = np.load(call / head["file"])
    assert dumped.dtype == np.float32 and dumped.shape == logits.shape
    assert dumped.view(np.uint32).tolist() == logits.view(np.uint32).tolist()

    def arena(command, kernel, count=H):
        data = np.load(call / file_of(command, kernel))
        assert data.dtype == np.float32 and data.ndim == 1
        # The one token's row; the slice's other rows were not written.
        assert not data[count:].any()
        return data[:count]

    # What numpy computes from the dumped inputs of each step.
    ckpt = Checkpoint(DATA / "tiny-llama")
    embedding = ckpt.tensor("model.embed_tokens.weight").astype(np.float32)
    h = arena(0, "axrt_embedding_f32")
    assert h.tolist() == embedding[5].tolist()
    eps = config.rms_norm_eps
    for layer in range(L):
        base = 1 + 12 * layer
        gamma = ckpt.tensor(f"model.layers.{layer}.input_layernorm.weight").astype(np.float64)
        xn = arena(base, "axrt_rmsnorm_f32")
        np.testing.assert_allclose(xn, rmsnorm(h, gamma, eps), rtol=1e-5, atol=1e-6)
        o = arena(base + 5, "axrt_matmul_f32_nk")
        h = h + o  # f32 + f32: the kernel's bits
        assert arena(base + 6, "axrt_add_f32").tolist() == h.tolist()
        inter = config.intermediate_size
        gate_up = arena(base + 8, "axrt_matmul_f32_nk", 2 * inter).astype(np.float64)
        gate, up = gate_up[:inter], gate_up[inter:]
        act = arena(base + 9, "axrt_silu_mul_f32", inter)
        np.testing.assert_allclose(act, gate / (1 + np.exp(-gate)) * up, rtol=1e-5, atol=1e-6)
        h = h + arena(base + 10, "axrt_matmul_f32_nk")
        assert arena(base + 11, "axrt_add_f32").tolist() == h.tolist()
    gamma = ckpt.tensor("model.norm.weight").astype(np.float64)
    assert arena(last, "axrt_embedding_f32").tolist() == h.tolist()
    final = arena(last + 1, "axrt_rmsnorm_f32")
    np.testing.assert_allclose(final, rmsnorm(h, gamma, eps), rtol=1e-5, atol=1e-6)
    lm_head = ckpt.tensor("lm_head.weight").astype(np.float64)
    np.testing.assert_allclose(logits[0], lm_head @ final.astype(np.float64), rtol=1e-4, atol=1e-5)


def test_a_copy_into_the_arena_takes_its_sources_type(tmp_path):
    """An add writes f32 into the arena; a copy moves its second half to
    another slice, which the dump then writes as f32 too."""
    b = axrt.Builder()
    cpu = b.kernel_library("axrt.cpu")
    add = b.kernel("axrt_add_f32", cpu, [Buffer("a"), Buffer("b"),
                                          Buffer("out", "write", dtype="f32"),
                                          Scalar("n", "uint64")])
    f = b.function("main", inputs=[("x", "f32", (6,))], outputs=[("y", "f32", (3,))],
                   arena_size=48)
    x, sums, half = f.input(0), f.arena(0, 24), f.arena(32, 12)
    f.dispatch(add, grid=1, args=[x, x, sums, 6])
    f.copy(sums, half, 12, src_offset=12)
    f.copy(half, f.output(0), 12)
    exe = axrt.load(b.to_bytes())
    x = np.arange(6, dtype=np.float32)
    assert exe.main(x, dump_dir=tmp_path).numpy().tolist() == [6, 8, 10]
    (call,) = tmp_path.iterdir()
    index = json.loads((call / "index.json").read_text())
    first, _ = [e for e in index["files"] if e["kernel"] == "copy"]
    assert first["binding"] == "arena" and first["dtype"] == "f32"
    assert np.load(call / first["file"]).tolist() == [6, 8, 10]


def poisoned_checkpoint(directory, name, row, column):
    """A copy of the tiny Llama whose weight `name`[row, column] is NaN."""
    shutil.copytree(DATA / "tiny-llama", directory)
    path = directory / "model.safetensors"
    raw = bytearray(path.read_bytes())
    length = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + length])
    info = header[name]
    assert info["dtype"] == "F32"
    start = 8 + length + info["data_offsets"][0]
    at = start + 4 * (row * info["shape"][1] + column)
    raw[at:at + 4] = np.array([np.nan], np.float32).tobytes()
    path.write_bytes(bytes(raw))
    return directory


def test_a_checked_call_names_the_first_command_reading_a_nan_weight(tmp_path):
    model = poisoned_checkpoint(tmp_path / "poisoned", "model.layers.0.mlp.down_proj.weight", 3, 7)
    path = tmp_path / "poisoned.axe"
    axrt.llm.convert(model, path, weights="f32", cuda=False)
    exe = axrt.load(path)
    config, _ = read_model(exe)
    step = exe["step"]

    # Unchecked, the NaN spreads to the logits.
    assert np.isnan(step(*step_inputs(config)).numpy()).all()

    # The kv_cache is a numpy array, written in place: the call waits for the
    # commands and raises the stream's failure. An axrt.Tensor cache would
    # raise it when the logits are read.
    stream = axrt.Stream()
    with pytest.raises(axrt.DataLossError) as error:
        step(*step_inputs(config), stream=stream, check_finite=True)
    message = str(error.value)
    assert message.startswith("axrt_function_invoke: function 'step' of executable ")
    # Layer 0's down_proj, the 12th command: its output row 3 is the first NaN.
    assert ("command 11 (kernel 'axrt_matmul_f32_nk' (axrt.cpu:axrt_matmul_f32_nk)) wrote NaN "
            "to intermediate 'y' (arena bytes [") in message
    assert "f32) at element 3 of " in message
    assert message.endswith("every earlier command's writes were finite")
    with pytest.raises(axrt.DataLossError):
        stream.synchronize()

    # With an axrt.Tensor cache (whose memory starts uninitialised, as
    # the serving engine's does) the call returns and reading the logits raises.
    tokens, positions, tables, logit_rows, cache = step_inputs(config)
    logits = step(tokens, positions, tables, logit_rows, axrt.empty(cache.shape, "float32"),
                  stream=axrt.Stream(), check_finite=True)
    with pytest.raises(axrt.DataLossError, match="command 11 .* at element 3 of "):
        logits.numpy()


def test_the_options_are_checked(tiny_llama_path, tmp_path):  # noqa: F811
    exe = axrt.load(tiny_llama_path)
    config, _ = read_model(exe)
    with pytest.raises(axrt.NotFoundError, match="dump_directory.*does not exist"):
        exe["step"](*step_inputs(config), dump_dir=tmp_path / "missing")
    assert not list(tmp_path.iterdir())


def test_device_memory_is_read_through_copies(elementwise_cuda, cuda_mock, tmp_path):
    """On a device whose memory the host cannot address (cuda:0 of the mock
    driver) the host functions read copies queued in stream order."""
    a = np.array([1, np.inf, 3, 4], np.float32)
    b = np.array([1, -np.inf, 1, 1], np.float32)
    stream = axrt.Stream(device=cuda_mock)
    out = elementwise_cuda["main"](a, b, stream=stream, check_finite=True, dump_dir=tmp_path)
    with pytest.raises(axrt.DataLossError) as error:
        out.numpy()
    message = str(error.value)
    assert "function 'main' of executable " in message
    assert ("command 0 (kernel 'axrt_add_f32' (" in message and
            "wrote NaN to output 'out' (f32[4], parameter 'out') at element 1 of 4; it is the "
            "function's first command" in message), message
    (call,) = tmp_path.iterdir()
    np.testing.assert_array_equal(np.load(call / "in-a.npy"), a)
    np.testing.assert_array_equal(np.load(call / "in-b.npy"), b)
    dumped = np.load(call / "c000-axrt_add_f32-out.npy")
    assert np.isnan(dumped[1]) and dumped[[0, 2, 3]].tolist() == [2, 4, 5]
    assert json.loads((call / "index.json").read_text())["failure"] == message
