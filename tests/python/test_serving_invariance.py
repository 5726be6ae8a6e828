"""Batching does not change results (docs/serving.md, "Batch invariance"): a
request's logits through the serving engine are bitwise identical whether it
runs alone or among 31 others, with or without chunked prefill, and its
greedy tokens are those of Model.generate."""
from pathlib import Path

import numpy as np
import pytest

import axrt
import axrt.llm
from axrt import _axrt

DATA = Path(__file__).resolve().parent.parent / "llm" / "data"
MAX_TOKENS = 12
# The weight (and activation) kinds whose CPU kernels are batch-invariant
# (docs/serving.md).
INVARIANT_KINDS = (("f32", "f32"), ("bf16", "f32"), ("int8", "f32"), ("int4", "f32"),
                   ("int4", "int8"))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    out = tmp_path_factory.mktemp("serving-models")
    cache = {}

    def get(weights: str, activations: str = "f32", kv: str = "f32",
            split_attention: bool = False, tensor_core_matmuls: bool = False):
        key = (weights, activations, kv, split_attention, tensor_core_matmuls)
        if key not in cache:
            path = (out / f"tiny-llama.{weights}.{activations}.kv-{kv}"
                    f"{'.split' if split_attention else ''}"
                    f"{'.tc' if tensor_core_matmuls else ''}.axe")
            axrt.llm.convert(DATA / "tiny-llama", path, weights=weights, cuda=False,
                             activations=activations, kv_cache_dtype=kv,
                             split_attention=split_attention,
                             tensor_core_matmuls=tensor_core_matmuls)
            cache[key] = axrt.llm.load(path)
        return cache[key]

    return get


def run(model, requests, **options):
    """Runs (id, prompt, sampling) requests together; {id: (tokens, logits [n, V])}."""
    engine = _axrt.Engine(model.executable, num_blocks=256, **options)
    try:
        for rid, prompt, sampling in requests:
            engine.add_request(rid, np.asarray(prompt, np.int32), MAX_TOKENS, logits=True,
                               **sampling)
        tokens = {rid: [] for rid, _, _ in requests}
        logits = {rid: [] for rid, _, _ in requests}
        done = set()
        while len(done) < len(requests):
            for rid, token, index, finish, error, row, *_ in engine.poll(30.0):
                assert error is None, error
                if token >= 0:
                    assert index == len(tokens[rid])
                    tokens[rid].append(token)
                    logits[rid].append(row)
                if finish is not None:
                    done.add(rid)
        assert engine.stats()["kv_blocks_used"] == 0
        return {rid: (tokens[rid], np.stack(logits[rid])) for rid in tokens}
    finally:
        engine.close()


def others(count: int, seed: int = 7):
    """Requests of mixed prompt lengths, half of them sampled."""
    rng = np.random.default_rng(seed)
    result = []
    for i in range(count):
        length = int(rng.integers(1, 90))
        prompt = rng.integers(0, 1024, size=length).tolist()
        sampling = {} if i % 2 else {"temperature": 0.8, "top_k": 50, "seed": i}
        result.append((100 + i, prompt, sampling))
    return result


@pytest.mark.parametrize("weights,activations", INVARIANT_KINDS)
def test_logits_do_not_depend_on_the_batch_or_on_chunking(models, weights, activations):
    check_invariance(models(weights, activations))


def test_tensor_core_matmul_logits_do_not_depend_on_the_batch_or_on_chunking(models):
    """The tensor-core matmul serves every step size, each row's bits its own
    (docs/kernels.md, "Tensor-core matmul")."""
    check_invariance(models("bf16", tensor_core_matmuls=True))


@pytest.mark.parametrize("weights, kv", [("f32", "f32"), ("int4", "bf16"), ("f32", "fp8_e4m3")])
def test_split_attention_logits_do_not_depend_on_the_batch_or_on_chunking(models, weights, kv):
    """Split attention (docs/kernels.md, "Split attention"): a token's chunks follow from its
    position alone."""
    model = models(weights, kv=kv, split_attention=True)
    assert model.config.split_attention
    check_invariance(model)


def check_invariance(model):
    """The request's tokens and logits alone, and among 31 others, with and without chunked
    prefill, bit for bit; its tokens those of Model.generate."""
    prompt = list(np.random.default_rng(3).integers(0, 1024, size=41))
    mine = [(1, prompt, {})]
    alone = run(model, mine, chunked_prefill=False)[1]
    tokens, logits = alone
    assert len(tokens) == MAX_TOKENS
    # The same tokens as one generation at a time through prefill and decode.
    assert tokens == model.generate(prompt, MAX_TOKENS, stop_ids=())
    crowd = others(31)
    runs = {
        "alone, chunks of 16": run(model, mine, max_step_tokens=16)[1],
        "among 31, whole prompts": run(model, crowd[:16] + mine + crowd[16:],
                                       chunked_prefill=False)[1],
        "among 31, chunks of 64": run(model, crowd[:16] + mine + crowd[16:],
                                      max_step_tokens=64)[1],
        "among 31, first, chunks of 24": run(model, mine + crowd, max_step_tokens=24,
                                             max_running=32)[1],
    }
    for name, (got_tokens, got_logits) in runs.items():
        assert got_tokens == tokens, name
        assert got_logits.shape == logits.shape, name
        assert np.array_equal(got_logits.view(np.uint32), logits.view(np.uint32)), (
            f"{name}: logits differ by up to {np.max(np.abs(got_logits - logits))}")


def test_sampled_requests_are_reproducible_under_load(models):
    model = models("f32")
    prompt = list(range(5, 30))
    mine = [(1, prompt, {"temperature": 1.0, "top_p": 0.9, "seed": 1234})]
    alone = run(model, mine)[1][0]
    loaded = run(model, others(31, seed=11) + mine, max_step_tokens=32)[1][0]
    assert alone == loaded
