"""The model path (docs/llm.md): tiny Llama checkpoints made by transformers
(tests/llm/make_tiny_llama.py) converted to .axe and run on axrt, against
transformers' outputs committed beside them."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import axrt
import axrt.llm
from axrt.llm import UnsupportedModelError
from serving_support import prompts, reference

DATA = Path(__file__).resolve().parent.parent / "llm" / "data"
MODELS = ("tiny-llama", "tiny-llama3", "tiny-llama-tp")
# Logits agree with transformers within this fraction of the largest |logit|
# of the same position.
F32_TOLERANCE = 1e-4
# With int8 activations (int4 or int8 weights), against transformers on the
# dequantized weights: the activations' rounding, compounded over the layers
# (measured with int4 weights: up to 5.8e-2 on tiny-llama, 2.9e-2 on
# tiny-llama3, the int4 weights themselves moving the logits by 0.24-0.40
# from the f32 model's; with int8 weights: up to 4.8e-2, 3.3e-2 and 4.6e-2
# on tiny-llama, tiny-llama3 and tiny-llama-tp).
Q8_TOLERANCE = 0.1
# A bf16 or fp8 KV cache, against transformers reading its keys and values
# rounded the same way (tests/llm/make_tiny_llama.py): the f32 bound, but a
# key or value whose f32 value lies within rounding of a boundary between two
# stored values may land on the other one, a whole step (measured: 2.3e-4 on
# tiny-llama in bf16, 1.7e-6 in fp8, whose steps are wider and so rarely
# neared).
KV_TOLERANCE = 1e-3
# Tensor-core matmuls (bf16 weights), against transformers on the bf16 weights
# with f32 activations: each projection rounds its input to bf16 (2^-8
# relative), compounded over the layers (measured: 1.1e-2 on tiny-llama,
# 6.4e-3 on tiny-llama3, 8.7e-3 on tiny-llama-tp).
TENSOR_CORE_TOLERANCE = 2e-2




def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got.astype(np.float64) - want)) / np.max(np.abs(want)))


def teacher_forced(llm, prompt, greedy) -> list:
    """The logits after `prompt` and after each of `greedy` but the last, through a session."""
    with llm.session() as seq:
        return [seq.prefill(prompt)] + [seq.decode(int(token)) for token in greedy[:-1]]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """Converts each model in each precision once per test run."""
    out = tmp_path_factory.mktemp("models")
    cache = {}

    def get(model: str, weights: str, activations: str = "f32", kv: str = "f32",
            fused: bool = False, splits: int = 0) -> Path:
        """`splits` > 0: split attention in that many chunks."""
        key = (model, weights, activations, kv, fused, splits)
        if key not in cache:
            path = out / (f"{model}.{weights}.{activations}.kv-{kv}{'.fused' if fused else ''}"
                          f"{f'.split{splits}' if splits else ''}.axe")
            axrt.llm.convert(DATA / model, path, weights=weights, cuda=False,
                             activations=activations, kv_cache_dtype=kv, fused_kernels=fused,
                             split_attention=splits > 0, attention_splits=splits or 8)
            cache[key] = path
        return cache[key]

    return get


@pytest.mark.parametrize("model", MODELS)
def test_f32_logits_and_greedy_tokens_match_transformers(converted, model):
    ref = reference(model, "f32")
    llm = axrt.llm.load(converted(model, "f32"))
    for i, prompt in prompts(ref):
        with llm.session() as seq:
            last = seq.prefill(prompt)
        err = relative_error(last, ref[f"prompt{i}_logits"][-1])
        assert err <= F32_TOLERANCE, f"prompt {i}: prefill logits off by {err:.2e}"
        tokens = llm.generate(prompt, 32, stop_ids=())
        assert tokens == ref[f"prompt{i}_greedy"].tolist(), f"prompt {i}"


@pytest.mark.parametrize("model", MODELS)
def test_every_position_through_decode_and_chunked_prefill(converted, model):
    """Teacher-forced through a session: one token, then one more per call; and the
    prompt prefilled by an engine in steps of 5 tokens (positions continuing in the
    cache)."""
    ref = reference(model, "f32")
    llm = axrt.llm.load(converted(model, "f32"))
    _, prompt = next(p for p in prompts(ref) if len(p[1]) > 20)
    want = ref[f"prompt{_}_logits"]
    with llm.session() as seq:
        rows = [seq.prefill(prompt[:1])]
        rows += [seq.decode(t) for t in prompt[1:]]
    for position, row in enumerate(rows):
        err = relative_error(row, want[position])
        assert err <= F32_TOLERANCE, f"position {position}: decode logits off by {err:.2e}"
    with axrt.llm.Engine(converted(model, "f32"), max_step_tokens=5) as engine:
        (event,) = engine.submit(prompt, 1, stop_ids=(), logits=True)
        assert engine.stats()["steps"] == -(-len(prompt) // 5)
    assert relative_error(event.logits, want[-1]) <= F32_TOLERANCE


@pytest.mark.parametrize("model", MODELS)
def test_greedy_step_logits_match_transformers(converted, model):
    ref = reference(model, "f32")
    llm = axrt.llm.load(converted(model, "f32"))
    for i, prompt in prompts(ref):
        rows = teacher_forced(llm, prompt, ref[f"prompt{i}_greedy"])
        for step, row in enumerate(rows):
            err = relative_error(row, ref[f"prompt{i}_greedy_logits"][step])
            assert err <= F32_TOLERANCE, f"prompt {i} step {step}: off by {err:.2e}"


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("weights", ["bf16", "int8", "fp8", "int4"])
def test_low_precision_weights_match_transformers_on_the_dequantized_weights(
        converted, model, weights, capsys):
    """The reference is transformers run on the weights as stored, dequantized;
    activations stay f32, so the bound is the f32 one. The distance to the
    unquantized model is reported, not asserted."""
    ref = reference(model, weights)
    full = reference(model, "f32")
    llm = axrt.llm.load(converted(model, weights))
    for i, prompt in prompts(ref):
        rows = teacher_forced(llm, prompt, ref[f"prompt{i}_greedy"])
        for step, row in enumerate(rows):
            err = relative_error(row, ref[f"prompt{i}_greedy_logits"][step])
            assert err <= F32_TOLERANCE, f"prompt {i} step {step}: off by {err:.2e}"
        tokens = llm.generate(prompt, 32, stop_ids=())
        assert tokens == ref[f"prompt{i}_greedy"].tolist(), f"prompt {i}"
        drift = relative_error(rows[0], full[f"prompt{i}_logits"][-1])
        agree = int(np.sum(np.asarray(tokens) == full[f"prompt{i}_greedy"]))
        with capsys.disabled():
            print(f"\n{model} {weights} prompt {i}: last-prompt logits {drift:.2e} from the f32 "
                  f"model, {agree}/32 greedy tokens equal to it", end="")


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("weights", ["int4", "int8"])
def test_int8_activations_stay_near_the_dequantized_weights(converted, model, weights, capsys):
    """int4 or int8 weights with int8 activations: the reference is the
    weights' own (transformers on the dequantized weights, activations f32),
    the inputs teacher-forced so that every step compares the same context;
    the bound is Q8_TOLERANCE. How many greedy tokens agree is reported, not
    asserted."""
    ref = reference(model, weights)
    path = converted(model, weights, "int8")
    kernel = ("axrt_matmul_gptq_int4_q8_f32" if weights == "int4"
              else "axrt_matmul_int8_pc_q8_f32")
    assert kernel.encode() in path.read_bytes()
    llm = axrt.llm.load(path)
    assert llm.config.activations == "int8"
    worst = 0.0
    for i, prompt in prompts(ref):
        rows = teacher_forced(llm, prompt, ref[f"prompt{i}_greedy"])
        for step, row in enumerate(rows):
            err = relative_error(row, ref[f"prompt{i}_greedy_logits"][step])
            worst = max(worst, err)
            assert err <= Q8_TOLERANCE, f"prompt {i} step {step}: off by {err:.2e}"
        tokens = llm.generate(prompt, 32, stop_ids=())
        agree = int(np.sum(np.asarray(tokens) == ref[f"prompt{i}_greedy"]))
        with capsys.disabled():
            print(f"\n{model} {weights} + int8 activations prompt {i}: {agree}/32 greedy tokens "
                  f"equal to the dequantized model's", end="")
    with capsys.disabled():
        print(f"\n{model} {weights} + int8 activations: logits within {worst:.2e} of the largest",
              end="")


@pytest.mark.parametrize("model", ["tiny-llama", "tiny-llama3"])
@pytest.mark.parametrize("kv", ["bf16", "fp8_e4m3"])
def test_low_precision_kv_caches_match_transformers_on_rounded_keys_and_values(
        converted, model, kv, capsys):
    """Teacher-forced logits within KV_TOLERANCE of transformers whose attention reads
    every key and value as the cache stores them, greedy tokens equal; the distance to
    the f32 cache (prompt logits, greedy tokens) is reported, not asserted."""
    ref = reference(model, f"kv-{kv}")
    full = reference(model, "f32")
    llm = axrt.llm.load(converted(model, "f32", kv=kv))
    assert llm.config.kv_cache_dtype == kv
    worst = drift = 0.0
    for i, prompt in prompts(ref):
        rows = teacher_forced(llm, prompt, ref[f"prompt{i}_greedy"])
        for step, row in enumerate(rows):
            err = relative_error(row, ref[f"prompt{i}_greedy_logits"][step])
            worst = max(worst, err)
            assert err <= KV_TOLERANCE, f"prompt {i} step {step}: off by {err:.2e}"
        drift = max(drift, relative_error(rows[0], full[f"prompt{i}_logits"][-1]))
        tokens = llm.generate(prompt, 32, stop_ids=())
        assert tokens == ref[f"prompt{i}_greedy"].tolist(), f"prompt {i}"
        agree = int(np.sum(np.asarray(tokens) == full[f"prompt{i}_greedy"]))
        with capsys.disabled():
            print(f"\n{model} KV cache {kv} prompt {i}: {agree}/32 greedy tokens equal to the "
                  f"f32 cache's", end="")
    with capsys.disabled():
        print(f"\n{model} KV cache {kv}: logits within {worst:.2e} of the reference; last "
              f"prompt logits {drift:.2e} from the f32 cache's", end="")


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("weights, kv", [("f32", "f32"), ("int4", "f32"), ("f32", "bf16"),
                                         ("f32", "fp8_e4m3")])
def test_fused_kernels_give_the_same_logits_bit_for_bit(converted, model, weights, kv):
    """A residual add and the norm after it, and rope and the cache write, as one kernel
    each: the same bits as the kernels they stand for."""
    ref = reference(model, "f32")
    plain = axrt.llm.load(converted(model, weights, kv=kv))
    fused = axrt.llm.load(converted(model, weights, kv=kv, fused=True))
    assert fused.config.fused_kernels and not plain.config.fused_kernels
    for i, prompt in prompts(ref):
        rows = {}
        for name, llm in (("plain", plain), ("fused", fused)):
            with llm.session() as seq:
                rows[name] = [seq.prefill(prompt)]
                rows[name] += [seq.decode(int(t)) for t in ref[f"prompt{i}_greedy"][:8]]
        for step, (a, b) in enumerate(zip(rows["plain"], rows["fused"])):
            assert np.array_equal(a, b), f"prompt {i} step {step}"


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("weights", ["bf16", "int8", "fp8", "int4"])
def test_decode_matmuls_give_the_same_logits_bit_for_bit(tmp_path, converted, model, weights):
    """bf16, int8, fp8 and int4 projections on the decode grids: on the CPU the same bits as
    the tile grid's (int4: GPTQ's layout on its decode grid, AWQ's on the tile grid, the
    same values and the same arithmetic)."""
    ref = reference(model, weights)
    path = tmp_path / "decode.axe"
    axrt.llm.convert(DATA / model, path, weights=weights, cuda=False, decode_matmuls=True)
    plain = axrt.llm.load(converted(model, weights))
    decode = axrt.llm.load(path)
    assert decode.config.decode_matmuls
    for i, prompt in prompts(ref):
        with plain.session() as a, decode.session() as b:
            assert np.array_equal(a.prefill(prompt), b.prefill(prompt)), f"prompt {i}"
            for t in ref[f"prompt{i}_greedy"][:4]:
                assert np.array_equal(a.decode(int(t)), b.decode(int(t))), f"prompt {i}"
    with pytest.raises(UnsupportedModelError, match="--decode-matmuls needs --weights bf16, "
                                                    "int8, fp8 or int4, not f32"):
        axrt.llm.convert(DATA / model, tmp_path / "x.axe", weights="f32", cuda=False,
                         decode_matmuls=True)
    with pytest.raises(UnsupportedModelError, match="--decode-matmuls needs --activations f32"):
        axrt.llm.convert(DATA / model, tmp_path / "x.axe", weights="int4", activations="int8",
                         cuda=False, decode_matmuls=True)


def near_tie(logits: np.ndarray, tolerance: float) -> bool:
    """Whether the two largest logits lie within twice `tolerance` (of the largest |logit|)
    of each other: logits that far off may rank them either way."""
    top = np.sort(logits.astype(np.float64))[-2:]
    return bool(top[1] - top[0] <= 2 * tolerance * np.max(np.abs(logits)))


def check_rounded_model(llm, ref, tolerance: float) -> tuple:
    """A model whose kernels round (tensor cores: activations to bf16) against transformers'
    reference `ref`: teacher-forced logits within `tolerance`, the same greedy token wherever
    the reference's top two logits are further apart than that allows, and generation equal
    to the reference's up to the first step where they are not. Returns the worst error and
    how many generations were equal throughout."""
    worst, equal = 0.0, 0
    for i, prompt in prompts(ref):
        greedy, want = ref[f"prompt{i}_greedy"], ref[f"prompt{i}_greedy_logits"]
        rows = teacher_forced(llm, prompt, greedy)
        for step, row in enumerate(rows):
            err = relative_error(row, want[step])
            worst = max(worst, err)
            assert err <= tolerance, f"prompt {i} step {step}: off by {err:.2e}"
            if not near_tie(want[step], tolerance):
                assert int(np.argmax(row)) == int(greedy[step]), f"prompt {i} step {step}"
        tokens = llm.generate(prompt, 32, stop_ids=())
        parted = next((j for j, (a, b) in enumerate(zip(tokens, greedy)) if a != b), None)
        if parted is None:
            equal += 1
        else:
            assert near_tie(want[parted], tolerance), f"prompt {i} token {parted}"
    return worst, equal


@pytest.mark.parametrize("model", MODELS)
def test_tensor_core_matmuls_match_transformers_on_the_bf16_weights(tmp_path, model, capsys):
    """bf16 projections by axrt_matmul_bf16_tc_f32 (on the CPU its twin), which round the
    activations to bf16: teacher-forced logits within TENSOR_CORE_TOLERANCE of transformers'
    on the bf16 weights, the same greedy token wherever the reference's top two logits are
    further apart than that allows, and generation equal to the reference's up to the
    first step where they are not (measured: tiny-llama's first prompt parts at token 20,
    whose top two logits are 3.6e-3 apart; the others give all 32 tokens)."""
    ref = reference(model, "bf16")
    path = tmp_path / "tc.axe"
    axrt.llm.convert(DATA / model, path, weights="bf16", cuda=False, tensor_core_matmuls=True)
    assert b"axrt_matmul_bf16_tc_f32" in path.read_bytes()
    llm = axrt.llm.load(path)
    assert llm.config.tensor_core_matmuls
    worst, equal = check_rounded_model(llm, ref, TENSOR_CORE_TOLERANCE)
    with capsys.disabled():
        print(f"\n{model} tensor-core matmuls: logits within {worst:.2e}, {equal} of "
              f"{len(list(prompts(ref)))} generations equal", end="")
    with pytest.raises(UnsupportedModelError, match="--tensor-core-matmuls needs --weights bf16, "
                                                    "int8, fp8 or int4, not f32"):
        axrt.llm.convert(DATA / model, tmp_path / "x.axe", weights="f32", cuda=False,
                         tensor_core_matmuls=True)
    with pytest.raises(UnsupportedModelError, match="--tensor-core-matmuls and --decode-matmuls"):
        axrt.llm.convert(DATA / model, tmp_path / "x.axe", weights="bf16", cuda=False,
                         tensor_core_matmuls=True, decode_matmuls=True)


@pytest.mark.parametrize("model, kv, splits", [(m, "f32", 8) for m in MODELS] +
                         [("tiny-llama", "bf16", 3), ("tiny-llama3", "fp8_e4m3", 3),
                          ("tiny-llama", "f32", 1)])
def test_split_attention_matches_transformers(converted, model, kv, splits, capsys):
    """Attention split into chunks of the context and combined (docs/kernels.md, "Split
    attention"): teacher-forced logits within the tolerance of the unsplit model's reference
    (transformers, reading the keys and values as a bf16 or fp8 cache rounds them), greedy
    tokens equal; the distance to the unsplit model's logits is reported."""
    ref = reference(model, "f32" if kv == "f32" else f"kv-{kv}")
    tolerance = F32_TOLERANCE if kv == "f32" else KV_TOLERANCE
    split = axrt.llm.load(converted(model, "f32", kv=kv, splits=splits))
    plain = axrt.llm.load(converted(model, "f32", kv=kv))
    assert split.config.split_attention and split.config.attention_splits == splits
    assert not plain.config.split_attention
    worst = apart = 0.0
    for i, prompt in prompts(ref):
        rows = teacher_forced(split, prompt, ref[f"prompt{i}_greedy"])
        for step, row in enumerate(rows):
            err = relative_error(row, ref[f"prompt{i}_greedy_logits"][step])
            worst = max(worst, err)
            assert err <= tolerance, f"prompt {i} step {step}: off by {err:.2e}"
        unsplit = teacher_forced(plain, prompt, ref[f"prompt{i}_greedy"])
        apart = max(apart, max(relative_error(a, b.astype(np.float64))
                               for a, b in zip(rows, unsplit)))
        assert split.generate(prompt, 32, stop_ids=()) == ref[f"prompt{i}_greedy"].tolist(), (
            f"prompt {i}")
    with capsys.disabled():
        print(f"\n{model} KV cache {kv}, {splits} chunk{'s' if splits > 1 else ''}: logits "
              f"within {worst:.2e} of the reference, {apart:.2e} of the unsplit model's", end="")


def test_split_attention_runs_on_the_mock_device(tmp_path, cuda_mock):
    """The split kernels' CUDA variants load and launch on a grid of chunks (the mock runs
    their CPU bodies): the CPU device's tokens and logits."""
    from axrt.llm.convert import default_fatbin

    if default_fatbin() is None:
        pytest.skip("axrt was built without its CUDA kernels")
    path = tmp_path / "split.axe"
    axrt.llm.convert(DATA / "tiny-llama", path, weights="int8", split_attention=True)
    prompt = [int(t) for t in reference("tiny-llama", "int8")["prompt0"]]
    on_cuda, on_cpu = (axrt.llm.load(path, device=d) for d in (cuda_mock, "cpu:0"))
    assert on_cuda.generate(prompt, 16, stop_ids=()) == on_cpu.generate(prompt, 16, stop_ids=())
    with on_cuda.session() as a, on_cpu.session() as b:
        assert np.array_equal(a.prefill(prompt), b.prefill(prompt))


def test_split_attention_options_are_checked_and_on_the_command_line(tmp_path):
    for bad in (0, 65536):
        with pytest.raises(ValueError, match="attention_splits must be"):
            axrt.llm.convert(DATA / "tiny-llama3", tmp_path / "x.axe", cuda=False,
                             split_attention=True, attention_splits=bad)
    out = tmp_path / "split.axe"
    done = _cli("convert", DATA / "tiny-llama3", out, "--split-attention", "--attention-splits",
                5, "--no-cuda")
    assert done.returncode == 0, done.stderr
    config = axrt.llm.load(out).config
    assert config.split_attention and config.attention_splits == 5


def test_the_engine_sizes_the_cache_from_its_element_type(converted):
    """The same bytes hold twice the blocks in bf16 and (4 D / (D + 4)) times in fp8."""
    budget = 4 << 20
    blocks = {}
    for kv in ("f32", "bf16", "fp8_e4m3"):
        path = converted("tiny-llama3", "f32", kv=kv)
        config = axrt.llm.load(path).config
        with axrt.llm.Engine(path, kv_cache_bytes=budget) as engine:
            blocks[kv] = engine.stats()["kv_blocks_total"]
        assert blocks[kv] == budget // config.kv_cache_bytes_per_block(), kv
    config = axrt.llm.load(converted("tiny-llama3", "f32")).config
    rows = config.num_layers * 2 * config.num_kv_heads * config.block_size
    D = config.head_dim
    assert blocks["f32"] == budget // (rows * D * 4)
    assert blocks["bf16"] == budget // (rows * D * 2)
    assert blocks["fp8_e4m3"] == budget // (rows * (D + 4))


def test_sampling_is_reproducible_and_follows_its_options(converted):
    llm = axrt.llm.load(converted("tiny-llama", "f32"))
    prompt = [1, 17, 250, 3]
    a = llm.generate(prompt, 24, temperature=1.0, top_p=0.95, seed=11, stop_ids=())
    b = llm.generate(prompt, 24, temperature=1.0, top_p=0.95, seed=11, stop_ids=())
    c = llm.generate(prompt, 24, temperature=1.0, top_p=0.95, seed=12, stop_ids=())
    assert a == b
    assert a != c
    # top_k = 1 is greedy whatever the temperature and seed.
    greedy = llm.generate(prompt, 24, stop_ids=())
    assert llm.generate(prompt, 24, temperature=2.0, top_k=1, seed=5, stop_ids=()) == greedy
    # The stream yields what generate returns, and stops at a stop id.
    assert list(llm.stream(prompt, 24, temperature=1.0, top_p=0.95, seed=11, stop_ids=())) == a
    stop = a[5]
    first = a.index(stop)
    assert llm.generate(prompt, 24, temperature=1.0, top_p=0.95, seed=11,
                        stop_ids=[stop]) == a[:first + 1]


def test_sessions_are_requests_of_the_engine_and_hold_no_blocks(converted):
    llm = axrt.llm.load(converted("tiny-llama", "f32"), num_blocks=8)
    ref = reference("tiny-llama", "f32")
    prompt = [int(t) for t in ref["prompt0"]]
    # Two sequences interleaved compute what each computes alone, and hold no
    # KV block between calls; the prefix cache supplies the full blocks of
    # what came before.
    with llm.session(48) as one, llm.session(48) as two:
        a = one.prefill(prompt)
        b = two.prefill(prompt[:3])
        a2 = one.decode(int(ref["prompt0_greedy"][0]))
        assert relative_error(a, ref["prompt0_logits"][-1]) <= F32_TOLERANCE
        assert relative_error(b, ref["prompt0_logits"][2]) <= F32_TOLERANCE
        assert relative_error(a2, ref["prompt0_greedy_logits"][1]) <= F32_TOLERANCE
        stats = llm.engine.stats()
        assert stats["kv_blocks_used"] == 0 and stats["running"] == 0
        assert stats["cached_prompt_tokens"] >= len(prompt) // 16 * 16
        assert one.length == len(prompt) + 1 and two.token_ids == prompt[:3]
    # A sequence longer than the cache (8 blocks of 16) is refused by the
    # engine, and the session is unchanged.
    with llm.session(200) as seq:
        seq.prefill(prompt)
        with pytest.raises(ValueError, match="block"):
            seq.prefill(list(range(1, 129)))
        assert seq.length == len(prompt)
        with pytest.raises(ValueError, match="closed"):
            seq.close() or seq.decode(1)
    with pytest.raises(ValueError, match="holds 1 to 255 tokens"):
        llm.session(256)


def test_bad_requests_are_refused_by_name(converted):
    llm = axrt.llm.load(converted("tiny-llama", "f32"))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        llm.generate([1, 5000], 4)
    with pytest.raises(ValueError, match="exceeds the model's context of 256"):
        llm.generate([1, 2], 255)
    with pytest.raises(ValueError, match="at least one token"):
        llm.generate([], 4)
    with pytest.raises(ValueError, match="top_p"):
        llm.generate([1], 4, temperature=1.0, top_p=0.0)
    with pytest.raises(ValueError, match="temperature"):
        llm.generate([1], 4, temperature=-1.0)
    with llm.session(4) as seq:
        seq.prefill([1, 2, 3])
        seq.decode(4)
        with pytest.raises(ValueError, match="holds 4"):
            seq.decode(5)
    # The model still works after refusals.
    assert llm.generate([1, 17, 250, 3], 2, stop_ids=()) == llm.generate([1, 17, 250, 3], 2,
                                                                          stop_ids=())


def _checkpoint_copy(tmp_path: Path, edit) -> Path:
    target = tmp_path / "ckpt"
    shutil.copytree(DATA / "tiny-llama3", target)
    config = json.loads((target / "config.json").read_text())
    edit(config)
    (target / "config.json").write_text(json.dumps(config))
    return target


@pytest.mark.parametrize("edit, message", [
    (lambda c: c.update(architectures=["GPT2LMHeadModel"]), "GPT2LMHeadModel"),
    (lambda c: c.update(hidden_act="gelu"), "hidden_act 'gelu'"),
    (lambda c: c["rope_parameters"].update(rope_type="yarn"), "rope scaling 'yarn'"),
    (lambda c: c.update(num_key_value_heads=3), "not a multiple"),
])
def test_unsupported_checkpoints_are_refused_by_name(tmp_path, edit, message):
    ckpt = _checkpoint_copy(tmp_path, edit)
    with pytest.raises(UnsupportedModelError, match=message):
        axrt.llm.convert(ckpt, tmp_path / "out.axe")
    assert not (tmp_path / "out.axe").exists()


def test_broken_checkpoints_and_options_are_refused(tmp_path):
    from axrt.llm.checkpoint import CheckpointError

    with pytest.raises(CheckpointError, match="no config.json"):
        axrt.llm.convert(tmp_path, tmp_path / "out.axe")
    with pytest.raises(UnsupportedModelError, match="--weights 'int3'"):
        axrt.llm.convert(DATA / "tiny-llama3", tmp_path / "out.axe", weights="int3")
    with pytest.raises(UnsupportedModelError, match="--activations 'int4'"):
        axrt.llm.convert(DATA / "tiny-llama3", tmp_path / "out.axe", activations="int4")
    with pytest.raises(UnsupportedModelError, match="needs --weights int4 or int8, not bf16"):
        axrt.llm.convert(DATA / "tiny-llama3", tmp_path / "out.axe", weights="bf16",
                         activations="int8")
    assert not (tmp_path / "out.axe").exists()
    ckpt = _checkpoint_copy(tmp_path, lambda c: None)
    data = (ckpt / "model.safetensors").read_bytes()
    (ckpt / "model.safetensors").write_bytes(data[:len(data) // 2])
    with pytest.raises(CheckpointError, match="beyond the file"):
        axrt.llm.convert(ckpt, tmp_path / "out.axe")
    assert not (tmp_path / "out.axe").exists()


def test_int8_activations_of_int8_weights_need_inputs_a_multiple_of_32(tmp_path):
    """axrt_matmul_int8_pc_q8_f32 quantizes its inputs in groups of 128, 64 or 32: a
    projection of 240 inputs is refused by name, before anything is written."""
    from safetensors.numpy import load_file, save_file

    ckpt = _checkpoint_copy(tmp_path, lambda c: c.update(intermediate_size=240))
    tensors = load_file(ckpt / "model.safetensors")
    for name, t in tensors.items():
        if "gate_proj" in name or "up_proj" in name:
            tensors[name] = np.ascontiguousarray(t[:240])
        elif "down_proj" in name:
            tensors[name] = np.ascontiguousarray(t[:, :240])
    save_file(tensors, ckpt / "model.safetensors")
    axrt.llm.convert(ckpt, tmp_path / "f32.axe", weights="int8", cuda=False)
    with pytest.raises(UnsupportedModelError, match=r"layers\.0\.down_proj is \[128, 240\]; int8 "
                                                    r"activations need inputs a multiple of 32"):
        axrt.llm.convert(ckpt, tmp_path / "out.axe", weights="int8", activations="int8",
                         cuda=False)
    assert not (tmp_path / "out.axe").exists()


def test_a_file_that_is_not_a_model_is_refused(tmp_path):
    b = axrt.Builder()
    b.function("main")
    path = tmp_path / "plain.axe"
    b.save(path)
    with pytest.raises(UnsupportedModelError, match="not a model"):
        axrt.llm.load(path)


def test_the_file_carries_config_and_tokenizer(converted):
    exe = axrt.load(converted("tiny-llama3", "int4"))
    config = json.loads(exe.metadata["axrt.llm.config"])
    assert config["num_layers"] == 2 and config["weights"] == "int4"
    assert config["tie_word_embeddings"] is True
    assert json.loads(exe.metadata["axrt.llm.tokenizer"])["model"]["type"] == "BPE"
    assert set(exe.functions) == {"step", "sample", "process_logits"}


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "axrt.llm", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def test_command_line_convert_and_generate(tmp_path):
    out = tmp_path / "m.axe"
    done = _cli("convert", DATA / "tiny-llama", out, "--weights", "int8", "--no-cuda")
    assert done.returncode == 0, done.stderr
    assert "weights int8" in done.stdout
    ref = reference("tiny-llama", "int8")
    prompt = ",".join(str(t) for t in ref["prompt0"])
    done = _cli("generate", out, "--prompt-ids", prompt, "--max-new-tokens", 16)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(t) for t in ref["prompt0_greedy"][:16]]
    # Text in, text out through the embedded tokenizer.
    done = _cli("generate", out, "--prompt", "The runtime loads", "--max-new-tokens", 8,
                "--temperature", 0.7, "--seed", 3)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() != ""
    # Bad input: a clear message and a non-zero exit, never a traceback.
    done = _cli("generate", out, "--prompt-ids", "1,99999")
    assert done.returncode == 1 and "outside the vocabulary" in done.stderr
    assert "Traceback" not in done.stderr
    done = _cli("convert", tmp_path, tmp_path / "x.axe")
    assert done.returncode == 1 and "config.json" in done.stderr


# Run in a process of its own: the instruction set is chosen once a process.
_ISA_LOGITS = """
import sys
import numpy as np
import axrt.llm
out = {}
for name, path, prompt, tokens in zip(*[iter(sys.argv[2:])] * 4):
    prompt = [int(t) for t in prompt.split(",")]
    tokens = [int(t) for t in tokens.split(",")]
    with axrt.llm.load(path).session() as seq:
        out[name] = np.stack([seq.prefill(prompt)] + [seq.decode(t) for t in tokens[:-1]])
np.savez(sys.argv[1], **out)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.uname().machine != "x86_64",
                    reason="the AVX2 build is x86-64's")
def test_the_avx2_build_runs_the_models(converted, tmp_path):
    """AXRT_CPU_ISA=avx2 runs every kernel's AVX2 body, on any x86-64 machine (on one with
    AVX-512, the only way a model runs them end to end). Teacher-forced logits of tiny-llama3
    against transformers on the weights as stored: within the f32 bound for f32 and exact
    int4 weights, within Q8_TOLERANCE with int8 activations (int4 and int8 weights)."""
    cases = {"f32": ("f32", "f32", F32_TOLERANCE), "int4": ("int4", "f32", F32_TOLERANCE),
             "int4-q8": ("int4", "int8", Q8_TOLERANCE), "int8-q8": ("int8", "int8", Q8_TOLERANCE)}
    ref = {w: reference("tiny-llama3", w) for w in ("f32", "int4", "int8")}
    args = []
    for name, (weights, activations, _) in cases.items():
        path = converted("tiny-llama3", weights, activations)
        tokens = ref[weights]["prompt0_greedy"][:8]
        args += [name, str(path), ",".join(map(str, ref[weights]["prompt0"])),
                 ",".join(map(str, tokens))]
    env = dict(os.environ, AXRT_CPU_ISA="avx2")
    out = tmp_path / "avx2.npz"
    done = subprocess.run([sys.executable, "-c", _ISA_LOGITS, str(out)] + args, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    logits = dict(np.load(out))
    for name, (weights, _, tolerance) in cases.items():
        want = ref[weights]["prompt0_greedy_logits"]
        for step, row in enumerate(logits[name]):
            err = relative_error(row, want[step])
            assert err <= tolerance, f"{name} step {step}: off by {err:.2e}"


def test_int4_weights_with_int8_activations_run_pre_packed_on_the_cpu(converted, tmp_path,
                                                                      monkeypatch):
    """On a CPU device the loader packs the int4 weights of the int8-activation kernels tile
    by tile and runs the kernels' pre-packed form (docs/kernels.md, "Pre-packed weights"):
    the trace names that form as the code each matmul ran, and the logits are the bits of
    the canonical layout's, which AXRT_CPU_PREPACK=0 keeps."""
    import json as _json

    ref = reference("tiny-llama3", "int4")
    path = converted("tiny-llama3", "int4", "int8")
    prompt = ref["prompt0"]
    tokens = ref["prompt0_greedy"][:4]
    packed = axrt.llm.load(path)
    with axrt.profile(tmp_path / "trace.json"):
        rows = teacher_forced(packed, prompt, tokens)
    symbols = {e.get("args", {}).get("symbol")
               for e in _json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
               if e.get("cat") == "kernel"}
    assert any(s and s.startswith("axrt_matmul_gptq_int4_q8_f32@gptq_v2.int4.g") and
               s.endswith(".tile64") for s in symbols), symbols
    monkeypatch.setenv("AXRT_CPU_PREPACK", "0")
    canonical = axrt.llm.load(path)
    want = teacher_forced(canonical, prompt, tokens)
    assert len(rows) == len(want)
    for step, (got, expected) in enumerate(zip(rows, want)):
        assert np.array_equal(np.asarray(got).view(np.uint32),
                              np.asarray(expected).view(np.uint32)), f"step {step}"


def test_the_c_example_generates_the_greedy_tokens(converted):
    build = os.environ.get("AXRT_TEST_BUILD_DIR")
    program = Path(build) / "examples" / "c" / "axrt_llm" if build else None
    if program is None or not program.exists():
        pytest.skip("the C examples are not built in this tree")
    ref = reference("tiny-llama3", "f32")
    prompt = ",".join(str(t) for t in ref["prompt2"])
    done = subprocess.run([str(program), "--max-new-tokens", "32",
                           str(converted("tiny-llama3", "f32")), prompt],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(t) for t in ref["prompt2_greedy"]]
    done = subprocess.run([str(program), str(converted("tiny-llama3", "f32")), "1,5000"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "outside the vocabulary" in done.stderr


def test_the_cuda_variants_run_on_the_mock_device(tmp_path, cuda_mock):
    """The converter adds axrt's CUDA kernels as variants; on the mock's cuda:0
    the driver loads them from the fatbin (the mock runs each under its CPU
    implementation), so this checks the CUDA driver's path, not GPU numerics."""
    from axrt.llm.convert import default_fatbin

    if default_fatbin() is None:
        pytest.skip("axrt was built without its CUDA kernels")
    path = tmp_path / "cuda.axe"
    axrt.llm.convert(DATA / "tiny-llama3", path, weights="int4")
    ref = reference("tiny-llama3", "int4")
    llm = axrt.llm.load(path, device=cuda_mock)
    assert llm.device.type == "cuda" and llm.engine.device.type == "cuda"
    prompt = [int(t) for t in ref["prompt0"]]
    assert llm.generate(prompt, 32, stop_ids=()) == ref["prompt0_greedy"].tolist()
    with llm.session() as seq:
        logits = seq.prefill(prompt)
    assert relative_error(logits, ref["prompt0_greedy_logits"][0]) <= F32_TOLERANCE
    # int8 activations: the CUDA variants of the q8 kernels (int4 and int8
    # weights) load and run (under their CPU implementations, so the tokens
    # are the CPU's).
    for weights in ("int4", "int8"):
        q8 = tmp_path / f"cuda-{weights}-q8.axe"
        axrt.llm.convert(DATA / "tiny-llama3", q8, weights=weights, activations="int8")
        on_cuda = axrt.llm.load(q8, device=cuda_mock).generate(prompt, 16, stop_ids=())
        on_cpu = axrt.llm.load(q8, device="cpu:0").generate(prompt, 16, stop_ids=())
        assert on_cuda == on_cpu, weights
