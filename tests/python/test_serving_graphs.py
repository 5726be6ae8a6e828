"""Decode steps replayed from graphs (docs/serving.md, "Graphs"): with
graph_max_batch the engine pads decode steps to batch-size buckets and
replays the graphs captured for them, and every request's tokens and logits
are those of the same requests run as calls, bit for bit, on the CPU and on
the CUDA driver (the mock's cuda:0)."""
from pathlib import Path

import numpy as np
import pytest

import axrt
import axrt.llm
from axrt import _axrt

DATA = Path(__file__).resolve().parent.parent / "llm" / "data"


@pytest.fixture(scope="module")
def cpu_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("graphs") / "tiny-llama.axe"
    axrt.llm.convert(DATA / "tiny-llama", path, weights="f32", cuda=False)
    return axrt.llm.load(path)


@pytest.fixture(scope="module")
def cuda_model(tmp_path_factory, cuda_mock):
    from axrt.llm.convert import default_fatbin

    if default_fatbin() is None:
        pytest.skip("axrt was built without its CUDA kernels")
    path = tmp_path_factory.mktemp("graphs-cuda") / "tiny-llama3.axe"
    axrt.llm.convert(DATA / "tiny-llama3", path, weights="int4")
    return axrt.llm.load(path, device=cuda_mock)


def requests(count: int, seed: int = 5):
    """Mixed prompts and lengths, so that the batch shrinks through every
    bucket (and pads) as requests end; every other one sampled."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        prompt = rng.integers(0, 200, size=int(rng.integers(1, 40))).tolist()
        sampling = {} if i % 2 else {"temperature": 0.9, "top_k": 40, "seed": 100 + i}
        out.append((i + 1, prompt, 3 + 2 * i, sampling))
    return out


def run(model, reqs, **options):
    """{id: (tokens, logits [n, V])}, and the engine's stats at the end."""
    engine = _axrt.Engine(model.executable, num_blocks=64, **options)
    try:
        for rid, prompt, max_tokens, sampling in reqs:
            engine.add_request(rid, np.asarray(prompt, np.int32), max_tokens, logits=True,
                               **sampling)
        tokens = {rid: [] for rid, *_ in reqs}
        logits = {rid: [] for rid, *_ in reqs}
        done = set()
        while len(done) < len(reqs):
            for rid, token, index, finish, error, row, *_ in engine.poll(30.0):
                assert error is None, error
                if token >= 0:
                    tokens[rid].append(token)
                    logits[rid].append(row)
                if finish is not None:
                    done.add(rid)
        stats = engine.stats()
        assert stats["kv_blocks_used"] == 0
        return {rid: (tokens[rid], np.stack(logits[rid])) for rid in tokens}, stats
    finally:
        engine.close()


def check_same(got, want):
    for rid, (tokens, logits) in want.items():
        assert got[rid][0] == tokens, rid
        assert np.array_equal(got[rid][1].view(np.uint32), logits.view(np.uint32)), (
            f"request {rid}: logits differ by up to {np.max(np.abs(got[rid][1] - logits))}")


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_graph_steps_give_the_calls_tokens_and_logits(request, device):
    model = request.getfixturevalue(f"{device}_model")
    reqs = requests(7)
    calls, plain = run(model, reqs)
    assert plain["graph_steps"] == 0 and plain["graphs_captured"] == 0
    graphed, stats = run(model, reqs, graph_max_batch=8)
    check_same(graphed, calls)
    # Seven, then fewer as requests end: buckets 8 (padded), 4, 2 and 1.
    assert stats["graph_steps"] > 0
    assert stats["graphs_captured"] == 2 * 4
    assert stats["kv_blocks_total"] == 64  # the padding's blocks come on top


def test_a_bound_that_is_not_a_power_of_two_is_the_last_bucket(cpu_model):
    reqs = requests(6, seed=9)
    calls, _ = run(cpu_model, reqs)
    graphed, stats = run(cpu_model, reqs, graph_max_batch=5)
    check_same(graphed, calls)
    # Six run as calls until one ends; then buckets 5, 4 (padding 3), 2, 1.
    assert 0 < stats["graph_steps"] < stats["steps"]
    assert stats["graphs_captured"] == 2 * 4


def test_the_bound_is_clamped_to_the_running_sequences(cpu_model):
    reqs = requests(3, seed=2)
    calls, _ = run(cpu_model, reqs)
    graphed, stats = run(cpu_model, reqs, graph_max_batch=1000, max_running=2)
    check_same(graphed, calls)
    assert stats["graphs_captured"] <= 2 * 2  # buckets 1 and 2 only


def test_llm_engine_takes_the_option(cpu_model):
    prompts = [[3, 1, 4, 1, 5], [2, 7, 1, 8]]
    with axrt.llm.Engine(cpu_model, graph_max_batch=4) as engine:
        out = engine.generate(prompts, max_tokens=6, stop_ids=())
        assert engine.stats()["graph_steps"] > 0
    assert out == [cpu_model.generate(p, 6, stop_ids=()) for p in prompts]
