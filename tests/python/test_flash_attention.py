"""Flash attention over the paged KV cache (docs/kernels.md, "Flash attention")
against a float64 numpy reference on the bf16-rounded queries, keys and values,
and against the decode kernels, on cpu:0 and the mock's cuda:0 (which runs the
CPU body).

Each batch mixes what a serving step holds: prefill chunks from position 0
and from mid-sequence, decode tokens of other sequences, and sequences that
share their first blocks. The cache pool is shuffled and every slot no
sequence owns is NaN.
"""

import json
import math
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import axrt
import axrt.llm
from axrt.builder import ceildiv
from axrt.llm import UnsupportedModelError
from serving_support import prompts, reference
from test_llm_kernels import cpu, params, refused, run, stored_rows  # noqa: F401

DATA = Path(__file__).resolve().parent.parent / "llm" / "data"

FLASH_KERNELS = {"f32": "axrt_attention_flash_f32", "bf16": "axrt_attention_flash_kv_bf16",
                 "fp8_e4m3": "axrt_attention_flash_kv_fp8_e4m3"}
DECODE_KERNELS = {"f32": "axrt_attention_decode_f32", "bf16": "axrt_attention_decode_kv_bf16",
                  "fp8_e4m3": "axrt_attention_decode_kv_fp8_e4m3"}
FLASH = params("axrt_attention_flash_f32")
assert all(params(k) == FLASH for k in FLASH_KERNELS.values())
assert FLASH == params("axrt_attention_decode_f32")
TOKENS = 16  # tokens of a workgroup: grid x = ceil(T / 16), y = kv_heads


def bf16(x):
    """x rounded to bf16 (nearest even), as float64."""
    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)


class Batch:
    """A step's tokens over a paged cache of block size `bs`: the f32 rows of each sequence
    (`rows[s]`, [n, 2, KVH, D]), block tables, the pool as f32 with NaN in unowned slots."""

    def __init__(self, rng, bs, kv_heads, head_dim, lengths, shared=()):
        """`lengths[s]`: positions sequence s has written. `shared`: (s, r, blocks): sequence
        s's first `blocks` blocks are sequence r's (a shared prefix; r < s)."""
        self.bs, self.kv_heads, self.head_dim = bs, kv_heads, head_dim
        self.max_blocks = max(-(-n // bs) for n in lengths) + 1
        S = len(lengths)
        self.num_blocks = S * self.max_blocks + 5
        pool = rng.permutation(self.num_blocks)
        self.tables = pool[: S * self.max_blocks].reshape(S, self.max_blocks).astype(np.int32)
        self.rows = [rng.standard_normal((n, 2, kv_heads, head_dim)).astype(np.float32)
                     for n in lengths]
        for s, r, blocks in shared:
            self.tables[s, :blocks] = self.tables[r, :blocks]
            self.rows[s][: blocks * bs] = self.rows[r][: blocks * bs]
        self.cache = np.full((2, 2, self.num_blocks, kv_heads, bs, head_dim), np.nan, np.float32)
        for s, n in enumerate(lengths):
            for p in range(n):
                self.cache[1, :, self.tables[s, p // bs], :, p % bs] = self.rows[s][p]

    def stored(self, dtype):
        """The pool as `dtype` stores it, and each sequence's keys and values as the kernel
        reads them: (key values, key scales, value values, value scales), float64; the
        scales are 1 but for fp8, whose values are the codes'."""
        if dtype == "f32":
            return self.cache, [(bf16(r[:, 0]), 1.0, bf16(r[:, 1]), 1.0) for r in self.rows]
        if dtype == "bf16":
            return (stored_rows(self.cache, dtype),
                    [(bf16(r[:, 0]), 1.0, bf16(r[:, 1]), 1.0) for r in self.rows])
        codes, scales = stored_rows(self.cache, dtype)
        L, _, NB, KVH, bs, D = self.cache.shape
        runs = np.concatenate([codes.view(np.uint8).reshape(L, 2, NB, KVH, bs * D),
                               scales.view(np.uint8).reshape(L, 2, NB, KVH, bs * 4)], axis=-1)
        seen = []
        for r in self.rows:
            c, sc = stored_rows(r, dtype)
            c = c.astype(np.float64)
            seen.append((c[:, 0], sc[:, 0, :, None].astype(np.float64),
                         c[:, 1], sc[:, 1, :, None].astype(np.float64)))
        return runs.reshape(L, 2, NB, KVH, bs, D + 4), seen


def attention_call(kernel, qkv, positions, tables, cache, *, heads, kv_heads, head_dim, bs,
                   scale, device, out=None, stream=None):
    T, row_stride = qkv.shape
    num_blocks, max_blocks = cache.shape[2], tables.shape[1]
    grid = (ceildiv(T, TOKENS), kv_heads) if "flash" in kernel else (T, kv_heads)
    (result,) = run(kernel, FLASH, grid,
                    {"qkv": qkv, "positions": positions, "block_tables": tables, "cache": cache},
                    {"out": (np.float32, (T, heads * head_dim))},
                    lambda f: [f.input(0), f.input(1), f.input(2), f.input(3), f.output(0), T,
                               heads, kv_heads, head_dim, 1, num_blocks, bs, max_blocks,
                               row_stride, scale],
                    device, out=out, stream=stream)
    return result


def step(rng, batch, heads, tokens):
    """qkv, positions and per-token tables for `tokens`: (sequence, position) pairs."""
    row_stride = (heads + 2 * batch.kv_heads) * batch.head_dim + 3  # rows not 16-byte aligned
    qkv = (rng.standard_normal((len(tokens), row_stride)) * 2).astype(np.float32)
    positions = np.array([p for _, p in tokens], np.int32)
    tables = np.stack([batch.tables[s] for s, _ in tokens])
    return qkv, positions, tables


def mixed_tokens(lengths):
    """A prefill chunk of sequence 0 from 0, one of sequence 1 from mid-sequence, decode
    tokens of the others."""
    tokens = [(0, p) for p in range(lengths[0])]
    tokens += [(1, p) for p in range(lengths[1] - 21, lengths[1])]
    # Sequence 8 within the blocks it shares with sequence 1, in a tile of sequence 1's rows.
    tokens += [(8, p) for p in range(20, 26)]
    tokens += [(s, n - 1) for s, n in enumerate(lengths) if s >= 2]
    return tokens


LENGTHS = [37, 150, 1, 16, 17, 64, 65, 130, 140]
SHARED = [(7, 1, 4), (8, 1, 8)]  # two more sequences on sequence 1's first blocks


def attention_reference(qkv, tokens, seen, heads, kv_heads, head_dim, scale):
    """float64 attention over the rounded operands, per (token, head), and its
    sum_j w_j |v_j| and max_j |v_j| (for the bounds)."""
    group = heads // kv_heads
    out = np.zeros((len(tokens), heads, head_dim))
    spread = np.zeros((len(tokens), heads, head_dim))
    top = np.zeros((len(tokens), heads, head_dim))
    for t, (s, p) in enumerate(tokens):
        keys, key_scale, values, value_scale = seen[s]
        for h in range(heads):
            g = h // group
            q = bf16(qkv[t, h * head_dim: (h + 1) * head_dim])
            k = keys[: p + 1, g]
            ks = key_scale if np.isscalar(key_scale) else key_scale[: p + 1, g, 0]
            v = values[: p + 1, g] * (value_scale if np.isscalar(value_scale)
                                      else value_scale[: p + 1, g])
            score = (k @ q) * ks * np.float64(np.float32(scale))
            w = np.exp(score - score.max())
            w /= w.sum()
            out[t, h] = w @ v
            spread[t, h] = w @ np.abs(v)
            top[t, h] = np.abs(v).max(axis=0)
    return out, spread, top


# heads, kv_heads, head_dim, block size: groups of 1, 2, 4 and 8; head_dim 16, 64, 128.
SHAPES = [(4, 4, 16, 16), (8, 4, 64, 5), (8, 2, 128, 16), (8, 1, 64, 8)]


@pytest.mark.parametrize("dtype", ["f32", "bf16", "fp8_e4m3"])
@pytest.mark.parametrize("heads, kv_heads, head_dim, bs", SHAPES)
def test_flash_attention(device, dtype, heads, kv_heads, head_dim, bs, capsys):
    """Within 2^-8 sum_j w_j |v_j| (the probabilities' rounding) plus the f32 attention
    bound of the float64 reference on bf16(q) and the keys and values as read; and within
    the looser bound of docs/kernels.md of the decode kernel over the same cache."""
    rng = np.random.default_rng(41)
    batch = Batch(rng, bs, kv_heads, head_dim, LENGTHS, SHARED)
    tokens = mixed_tokens(LENGTHS)
    qkv, positions, tables = step(rng, batch, heads, tokens)
    cache, seen = batch.stored(dtype)
    scale = 1.0 / math.sqrt(head_dim)
    kw = dict(heads=heads, kv_heads=kv_heads, head_dim=head_dim, bs=bs, scale=scale,
              device=device)
    got = attention_call(FLASH_KERNELS[dtype], qkv, positions, tables, cache, **kw)
    got = got.reshape(len(tokens), heads, head_dim)
    want, spread, top = attention_reference(qkv, tokens, seen, heads, kv_heads, head_dim, scale)
    bound = 2.0 ** -8 * spread + 1e-5 * (spread + top) + 1e-6
    error = np.abs(got - want)
    assert np.all(error <= bound), np.unravel_index(np.argmax(error - bound), error.shape)

    # The decode kernel over the same cache: q (and an f32 cache's keys and values) unrounded.
    decode = attention_call(DECODE_KERNELS[dtype], qkv, positions, tables, cache, **kw)
    decode = decode.reshape(len(tokens), heads, head_dim)
    group = heads // kv_heads
    loose = np.zeros_like(bound)
    for t, (s, p) in enumerate(tokens):
        keys, key_scale, _, _ = seen[s]
        for h in range(heads):
            q = np.abs(qkv[t, h * head_dim: (h + 1) * head_dim]).astype(np.float64)
            k = np.abs(keys[: p + 1, h // group])
            ks = key_scale if np.isscalar(key_scale) else key_scale[: p + 1, h // group, 0]
            # Each score moves by at most e = 2^-8 scale |q| . |k| (q's rounding) and as much
            # again for an f32 cache's keys; each value by 2^-8 |v| for an f32 cache.
            e = (2.0 if dtype == "f32" else 1.0) * 2.0 ** -8 * scale * ((k @ q) * ks).max()
            rounding = 2.0 ** -8 * (2.0 if dtype == "f32" else 1.0)
            loose[t, h] = (np.expm1(2 * e) * spread[t, h] + np.exp(2 * e) * rounding *
                           spread[t, h] + 2e-5 * (spread[t, h] + top[t, h]) + 2e-6)
    apart = np.abs(got - decode)
    assert np.all(apart <= loose), np.unravel_index(np.argmax(apart - loose), apart.shape)
    with capsys.disabled():
        print(f"\nflash {dtype}, heads {heads}/{kv_heads}, head_dim {head_dim}, block {bs}: "
              f"{error.max():.2e} from the reference ({(error / bound).max():.2f} of the bound), "
              f"{apart.max():.2e} from the decode kernel", end="")


@pytest.mark.parametrize("dtype", ["f32", "fp8_e4m3"])
def test_flash_attention_is_batch_invariant(device, dtype):
    """A token's output has the same bits alone, in its prefill chunk, behind other tokens
    that move it to another row of its tile or another tile, and beside a shared-prefix
    sequence whose rows join its pass."""
    rng = np.random.default_rng(42)
    heads, kv_heads, head_dim, bs = 8, 2, 64, 16
    batch = Batch(rng, bs, kv_heads, head_dim, [90, 70, 5, 100], [(3, 0, 3)])
    cache, _ = batch.stored(dtype)
    scale = 1.0 / math.sqrt(head_dim)
    kw = dict(heads=heads, kv_heads=kv_heads, head_dim=head_dim, bs=bs, scale=scale,
              device=device)
    chunk = [(0, p) for p in range(40, 90)]
    qkv, positions, tables = step(rng, batch, heads, chunk)
    whole = attention_call(FLASH_KERNELS[dtype], qkv, positions, tables, cache, **kw)
    batches = [
        [(1, 69), (2, 4)],  # decode tokens ahead: the chunk moves by two rows
        [(3, p) for p in range(60, 77)],  # a shared-prefix sequence: a tile and a row ahead
        [(1, p) for p in range(30, 43)] + [(3, 99)],
        [(3, p) for p in range(30, 50)],  # sequence 3 within the blocks it shares, and past
    ]
    for others in batches:
        o_qkv, o_positions, o_tables = step(rng, batch, heads, others)
        mixed = attention_call(FLASH_KERNELS[dtype], np.concatenate([o_qkv, qkv]),
                               np.concatenate([o_positions, positions]),
                               np.concatenate([o_tables, tables]), cache, **kw)
        np.testing.assert_array_equal(mixed[len(others):], whole)
        mixed = attention_call(FLASH_KERNELS[dtype], np.concatenate([qkv, o_qkv]),
                               np.concatenate([positions, o_positions]),
                               np.concatenate([tables, o_tables]), cache, **kw)
        np.testing.assert_array_equal(mixed[: len(chunk)], whole)
    for t in (0, 17, 49):
        alone = attention_call(FLASH_KERNELS[dtype], qkv[t: t + 1], positions[t: t + 1],
                               tables[t: t + 1], cache, **kw)
        np.testing.assert_array_equal(alone[0], whole[t])


@pytest.mark.parametrize("position, entry, match", [
    (80, None, r"sequence 1 is at position 80, outside the block table's \[0, 80\)"),
    (-3, None, r"sequence 1 is at position -3, outside"),
    (40, -1, r"sequence 1: block table entry 1 is -1, outside \[0, 12\)"),
    (40, 12, r"sequence 1: block table entry 1 is 12, outside \[0, 12\)"),
])
def test_flash_attention_refuses_indices_out_of_range(cpu, position, entry, match):
    """The decode kernels' checks and messages; the workgroup writes nothing."""
    rng = np.random.default_rng(43)
    heads, kv_heads, head_dim, bs, max_blocks, num_blocks = 4, 2, 64, 16, 5, 12
    tables = rng.permutation(num_blocks)[:2 * max_blocks].reshape(2, max_blocks).astype(np.int32)
    if entry is not None:
        tables[1, 1] = entry
    cache = rng.standard_normal((2, 2, num_blocks, kv_heads, bs, head_dim), dtype=np.float32)
    qkv = rng.standard_normal((2, (heads + 2 * kv_heads) * head_dim), dtype=np.float32)
    out = np.full((2, heads * head_dim), 7.0, np.float32)
    refused(lambda s: attention_call("axrt_attention_flash_f32", qkv,
                                     np.array([3, position], np.int32), tables, cache,
                                     heads=heads, kv_heads=kv_heads, head_dim=head_dim, bs=bs,
                                     scale=0.125, device=cpu, out=out, stream=s),
            match)
    np.testing.assert_array_equal(out, 7.0)


@pytest.mark.parametrize("head_dim", [24, 144])
def test_flash_attention_refuses_a_head_dim_it_cannot_take(cpu, head_dim):
    heads, kv_heads, bs = 2, 1, 16
    cache = np.zeros((1, 2, 2, kv_heads, bs, head_dim), np.float32)
    qkv = np.zeros((1, (heads + 2 * kv_heads) * head_dim), np.float32)
    refused(lambda s: attention_call("axrt_attention_flash_f32", qkv, np.array([0], np.int32),
                                     np.zeros((1, 2), np.int32), cache, heads=heads,
                                     kv_heads=kv_heads, head_dim=head_dim, bs=bs, scale=0.125,
                                     device=cpu, stream=s),
            rf"head_dim {head_dim}: the flash attention kernels need a multiple of 16 up to 128")


# ---------------------------------------------------------------------------
# The converter's option


# Flash attention's logits against transformers' (on the same weights, and on keys and values
# rounded as a bf16 cache stores them): q, keys, values and probabilities rounded to bf16 in
# every layer's attention, compounded over the layers (measured: see the test's output).
FLASH_TOLERANCE = 2e-2


def near_tie(logits, tolerance):
    """Whether the two largest logits lie within twice `tolerance` (of the largest |logit|)
    of each other: logits that far off may rank them either way."""
    top = np.sort(logits.astype(np.float64))[-2:]
    return bool(top[1] - top[0] <= 2 * tolerance * np.max(np.abs(logits)))


@pytest.mark.parametrize("model, weights, kv", [("tiny-llama", "bf16", "f32"),
                                                ("tiny-llama3", "f32", "bf16")])
def test_flash_attention_model_matches_transformers(tmp_path, model, weights, kv, capsys):
    """A model converted with flash_attention=True: teacher-forced logits within
    FLASH_TOLERANCE of transformers', the same greedy token wherever the reference's top two
    logits are further apart than that allows; the serving engine's greedy generation of
    every prompt at once (prefill chunks and decode tokens in the same steps) equal to the
    reference's where no step is that close."""
    ref = reference(model, weights if kv == "f32" else f"kv-{kv}")
    path = tmp_path / "flash.axe"
    config = axrt.llm.convert(DATA / model, path, weights=weights, kv_cache_dtype=kv, cuda=False,
                              flash_attention=True)
    assert config.flash_attention
    read = "f32" if kv == "f32" else f"kv_{kv}"
    assert f"axrt_attention_flash_{read}".encode() in path.read_bytes()
    llm = axrt.llm.load(path)
    assert llm.config.flash_attention
    worst, first_tie = 0.0, {}
    for i, prompt in prompts(ref):
        greedy, want = ref[f"prompt{i}_greedy"], ref[f"prompt{i}_greedy_logits"]
        with llm.session() as seq:
            rows = [seq.prefill(prompt)] + [seq.decode(int(t)) for t in greedy[:-1]]
        for j, row in enumerate(rows):
            err = float(np.max(np.abs(row - want[j])) / np.max(np.abs(want[j])))
            worst = max(worst, err)
            assert err <= FLASH_TOLERANCE, f"prompt {i} step {j}: off by {err:.2e}"
            if near_tie(want[j], FLASH_TOLERANCE):
                first_tie.setdefault(i, j)
            else:
                assert int(np.argmax(row)) == int(greedy[j]), f"prompt {i} step {j}"
    all_prompts = [p for _, p in prompts(ref)]
    with axrt.llm.Engine(path, max_step_tokens=24) as engine:
        generated = engine.generate(all_prompts, 32, stop_ids=())
    equal = 0
    for i, tokens in enumerate(generated):
        greedy = ref[f"prompt{i}_greedy"].tolist()
        # Up to the first near tie, after which the reference's own path may be left.
        upto = first_tie.get(i, len(greedy))
        assert tokens[:upto] == greedy[:upto], f"prompt {i}"
        equal += tokens == greedy
    with capsys.disabled():
        print(f"\n{model} {weights} weights, KV cache {kv}, flash attention: logits within "
              f"{worst:.2e} of transformers', {equal} of {len(generated)} generations equal, "
              f"first near ties {first_tie}", end="")


def test_flash_attention_runs_on_the_mock_device(tmp_path, cuda_mock):
    """The flash kernels' CUDA variants load and launch on their grid (the mock runs their CPU
    bodies): the CPU device's tokens and logits, through the serving engine."""
    from axrt.llm.convert import default_fatbin

    if default_fatbin() is None:
        pytest.skip("axrt was built without its CUDA kernels")
    path = tmp_path / "flash.axe"
    axrt.llm.convert(DATA / "tiny-llama", path, weights="bf16", flash_attention=True)
    all_prompts = [p for _, p in prompts(reference("tiny-llama", "bf16"))]
    generated = []
    for device in (cuda_mock, "cpu:0"):
        with axrt.llm.Engine(path, device=device, max_step_tokens=24) as engine:
            generated.append(engine.generate(all_prompts, 12, stop_ids=()))
    assert generated[0] == generated[1]
    on_cuda, on_cpu = (axrt.llm.load(path, device=d) for d in (cuda_mock, "cpu:0"))
    with on_cuda.session() as a, on_cpu.session() as b:
        assert np.array_equal(a.prefill(all_prompts[0]), b.prefill(all_prompts[0]))


def test_flash_attention_option_is_checked_and_on_the_command_line(tmp_path):
    with pytest.raises(UnsupportedModelError, match="--flash-attention and --split-attention"):
        axrt.llm.convert(DATA / "tiny-llama3", tmp_path / "x.axe", cuda=False,
                         flash_attention=True, split_attention=True)
    model = tmp_path / "odd"
    model.mkdir()
    for f in (DATA / "tiny-llama3").iterdir():
        (model / f.name).symlink_to(f)
    (model / "config.json").unlink()
    config = json.loads((DATA / "tiny-llama3" / "config.json").read_text())
    config["head_dim"] = 72
    (model / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedModelError, match="--flash-attention needs a head size that is "
                                                    "a multiple of 16 up to 128; this model's "
                                                    "is 72"):
        axrt.llm.convert(model, tmp_path / "x.axe", cuda=False, flash_attention=True)
    out = tmp_path / "flash.axe"
    done = subprocess.run([sys.executable, "-m", "axrt.llm", "convert", DATA / "tiny-llama3", out,
                           "--flash-attention", "--no-cuda"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert axrt.llm.load(out).config.flash_attention
