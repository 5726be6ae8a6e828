"""The serving engine's sampling options (docs/serving.md, "Sampling options"): logit bias,
repetition, frequency and presence penalties, min_p and n choices, through axrt.llm.Engine on
the f32 tiny-llama. Greedy tokens are checked step by step against a float64 reference of the
options applied to the model's own raw logits (the events' logits, which stay those before
processing)."""
import asyncio
import importlib

import numpy as np
import pytest

import axrt
import axrt.llm
from axrt.llm import Engine
from serving_support import DATA, idle, tiny_llama_path, wait_for  # noqa: F401

PROMPT = list(range(100, 140))  # 40 tokens: two full blocks of 16, then 8
BLOCK = 16


@pytest.fixture(scope="module")
def engine(tiny_llama_path):
    with Engine(tiny_llama_path, num_blocks=128) as e:
        yield e


def events_of(engine, prompt, max_tokens, **options):
    request = engine.submit(prompt, max_tokens, stop_ids=(), logits=True, **options)
    events = list(request)
    return [e.token for e in events], np.stack([e.logits for e in events])


def processed(raw, prompt, generated, *, logit_bias=None, repetition_penalty=1.0,
              frequency_penalty=0.0, presence_penalty=0.0):
    """The documented order on one row of raw f32 logits, in float64, rounded to f32 once per
    changed logit (the kernel's arithmetic): bias, repetition (prompt or generated), then
    frequency and presence (generated)."""
    out = np.asarray(raw, np.float32).copy()
    counts = np.bincount(np.asarray(generated, np.int64), minlength=out.size)
    listed = set(np.flatnonzero(counts).tolist()) | set(prompt) | set(logit_bias or {})
    for t in listed:
        x = np.float64(out[t]) + np.float64(np.float32((logit_bias or {}).get(t, 0.0)))
        c = int(counts[t])
        if c > 0 or t in prompt:
            rp = np.float64(np.float32(repetition_penalty))
            x = x / rp if x > 0 else x * rp
        x = x - np.float64(np.float32(frequency_penalty)) * c
        if c > 0:
            x = x - np.float64(np.float32(presence_penalty))
        out[t] = np.float32(x)
    return out


def test_a_strong_logit_bias_forces_a_token(engine):
    plain = engine.generate([PROMPT], 8, stop_ids=())[0]
    forced = 5
    assert forced not in plain
    assert engine.generate([PROMPT], 8, stop_ids=(), logit_bias={forced: 100.0})[0] == [5] * 8
    sampled = engine.submit(PROMPT, 8, stop_ids=(), temperature=1.0, seed=3,
                            logit_bias={forced: 100})
    assert sampled.result() == [5] * 8
    # A bias of -100 bans the greedy choice.
    banned = engine.generate([PROMPT], 1, stop_ids=(), logit_bias={plain[0]: -100.0})[0]
    assert banned[0] != plain[0]
    wait_for(lambda: idle(engine), what="the engine to go idle")


@pytest.mark.parametrize("options", [
    {"repetition_penalty": 1.8},
    {"repetition_penalty": 0.6},
    {"presence_penalty": 3.0},
    {"frequency_penalty": 1.5},
    {"repetition_penalty": 1.3, "frequency_penalty": 0.4, "presence_penalty": -0.2,
     "logit_bias": {433: -5.0, 7: 2.5}},
], ids=["repetition", "repetition_below_1", "presence", "frequency", "all"])
def test_penalties_change_greedy_tokens_as_the_reference_predicts(engine, options):
    plain, plain_logits = events_of(engine, PROMPT, 12)
    tokens, raw = events_of(engine, PROMPT, 12, **options)
    assert tokens != plain
    # The events' logits are the model's, before the options.
    assert np.array_equal(raw[0].view(np.uint32), plain_logits[0].view(np.uint32))
    for i, token in enumerate(tokens):
        want = int(np.argmax(processed(raw[i], PROMPT, tokens[:i], **options)))
        assert token == want, f"token {i}"


def test_a_request_with_options_is_unchanged_by_its_batch(engine):
    options = dict(repetition_penalty=1.4, presence_penalty=0.5, min_p=0.1,
                   logit_bias={9: 3.0})
    alone = engine.submit(PROMPT, 10, stop_ids=(), temperature=0.8, seed=21, **options)
    alone = alone.result()
    others = [engine.submit(list(range(3 + i, 20 + 3 * i)), 10, stop_ids=(),
                            temperature=0.7 * (i % 2), seed=i,
                            **({"frequency_penalty": 0.3 * i} if i % 3 else {}))
              for i in range(6)]
    again = engine.submit(PROMPT, 10, stop_ids=(), temperature=0.8, seed=21, **options)
    assert again.result() == alone
    for r in others:
        r.result()


def test_min_p_1_keeps_only_the_largest(engine):
    plain = engine.generate([PROMPT], 10, stop_ids=())[0]
    assert engine.generate([PROMPT], 10, stop_ids=(), temperature=1.5, seed=4,
                           min_p=1.0)[0] == plain


def test_min_p_draws_only_tokens_it_keeps(engine):
    temperature, min_p = 2.0, 0.3
    tokens, raw = events_of(engine, PROMPT, 24, temperature=temperature, seed=8, min_p=min_p)
    unrestricted, _ = events_of(engine, PROMPT, 24, temperature=temperature, seed=8)
    assert tokens != unrestricted
    for i, token in enumerate(tokens):
        threshold = np.float64(raw[i].max()) + temperature * np.log(min_p)
        assert raw[i][token] >= threshold, f"token {i}"


def test_choices_share_the_prompt_and_are_reproducible(tiny_llama_path):
    with Engine(tiny_llama_path, num_blocks=64) as engine:
        request = engine.submit(PROMPT, 6, stop_ids=(), temperature=1.0, seed=11, n=3)
        events = list(request)
        choices = request.result()
        stats = engine.stats()
        # Choices 1 and 2 took the prompt's two full blocks from the prefix cache, and
        # computed only the rest of it; choice 0 computed all of it.
        assert stats["cached_prompt_tokens"] == 2 * 2 * BLOCK
        assert stats["computed_tokens"] == len(PROMPT) + 2 * (len(PROMPT) - 2 * BLOCK) + 3 * 5
        assert stats["requests_finished"] == 3
    assert len(choices) == 3 and all(len(c) == 6 for c in choices)
    assert not choices[0] == choices[1] == choices[2]
    assert request.choices == choices and request.tokens == choices[0]
    assert request.finish_reasons == ["length"] * 3 and request.finish_reason == "length"
    for c in range(3):
        mine = [e for e in events if e.choice == c]
        assert [e.token for e in mine] == choices[c]
        assert [e.index for e in mine] == list(range(6))
        assert [e.finish_reason for e in mine] == [None] * 5 + ["length"]
        assert mine[0].prompt_tokens == len(PROMPT)
        assert mine[0].cached_tokens == (0 if c == 0 else 2 * BLOCK)
    assert request.cached_tokens == 0
    with Engine(tiny_llama_path, num_blocks=64) as engine:
        again = engine.submit(PROMPT, 6, stop_ids=(), temperature=1.0, seed=11, n=3)
        assert again.result() == choices
        # Choice 0 draws what a request with n = 1 and the same seed draws.
        single = engine.submit(PROMPT, 6, stop_ids=(), temperature=1.0, seed=11)
        assert single.result() == choices[0]
        assert single.n == 1 and single.finish_reason == "length"
        assert engine.generate([PROMPT], 4, stop_ids=(), n=2) == [
            [engine.generate([PROMPT], 4, stop_ids=())[0]] * 2]


def test_choices_through_asyncio_and_tokens(engine):
    async def collect():
        seen = {}
        async for event in engine.stream(PROMPT, 4, stop_ids=(), temperature=1.0, seed=2, n=2):
            seen.setdefault(event.choice, []).append(event.token)
        return seen

    seen = asyncio.run(collect())
    want = engine.submit(PROMPT, 4, stop_ids=(), temperature=1.0, seed=2, n=2).result()
    assert [seen[0], seen[1]] == want
    pairs = list(engine.tokens(PROMPT, 4, stop_ids=(), temperature=1.0, seed=2, n=2))
    assert sorted(pairs) == sorted((c, t) for c in range(2) for t in want[c])


def test_cancel_ends_every_choice(engine):
    request = engine.submit([1, 2, 3], 200, stop_ids=(), n=3)
    assert request.cancel()
    events = list(request)
    assert request.finish_reasons == ["cancelled"] * 3 and request.done
    assert sorted(e.choice for e in events if e.finish_reason) == [0, 1, 2]
    wait_for(lambda: idle(engine), what="the engine to go idle")


@pytest.mark.parametrize("options, match", [
    ({"presence_penalty": float("nan")}, "presence_penalty"),
    ({"frequency_penalty": float("inf")}, "frequency_penalty"),
    ({"repetition_penalty": 0.0}, "repetition_penalty"),
    ({"repetition_penalty": -1.0}, "repetition_penalty"),
    ({"min_p": 1.5}, "min_p"),
    ({"min_p": -0.1}, "min_p"),
    ({"logit_bias": {3: 100.5}}, "logit_bias"),
    ({"logit_bias": {1024: 1.0}}, "logit_bias"),
    ({"logit_bias": {-1: 1.0}}, "logit_bias"),
    ({"logit_bias": {t: 1.0 for t in range(301)}}, "logit_bias has 301"),
    ({"logit_bias": [(3, 1.0)]}, "logit_bias must be a dict"),
    ({"n": 0}, "n must be"),
    ({"n": 129}, "n must be"),
])
def test_bad_values_are_refused_with_nothing_queued(engine, options, match):
    before = engine.stats()
    with pytest.raises(ValueError, match=match):
        engine.submit(PROMPT, 4, **options)
    with pytest.raises(ValueError, match=match):
        engine.generate([PROMPT], 4, **options)
    after = engine.stats()
    assert after["waiting"] == after["running"] == 0
    assert after["requests_rejected"] == before["requests_rejected"]


@pytest.mark.parametrize("options, match", [
    ({"presence_penalty": float("nan")}, "presence_penalty must be finite"),
    ({"repetition_penalty": 0.0}, "repetition_penalty must be > 0"),
    ({"min_p": 2.0}, "min_p must be in"),
    ({"logit_bias": [(3, 101.0)]}, r"logit_bias_values\[0\]"),
    ({"logit_bias": [(3, 1.0), (3, 2.0)]}, "token 3 twice"),
    ({"logit_bias": [(5000, 1.0)]}, r"logit_bias_tokens\[0\] is 5000"),
    ({"logit_bias": [(t, 1.0) for t in range(301)]}, "301 entries"),
    ({"n": 0}, "n must be"),
])
def test_the_engine_itself_refuses_bad_values(engine, options, match):
    """The C++ engine checks every field as it would any client's (the server hands it
    requests unchecked in Python)."""
    with pytest.raises(axrt.InvalidArgumentError, match=match):
        engine._guard.add_request(10**9, np.asarray(PROMPT, np.int32), 4, **options)
    assert engine.stats()["waiting"] == 0


def test_an_older_file_refuses_the_options_cleanly(tmp_path, monkeypatch):
    """A file converted before process_logits existed serves every request but those with
    the options it applies, which are refused naming the option."""
    # The module (axrt.llm.convert is also the name of its function).
    module = importlib.import_module("axrt.llm.convert")
    monkeypatch.setattr(module._Converter, "logits_processor", lambda self: None)
    path = tmp_path / "older.axe"
    axrt.llm.convert(DATA / "tiny-llama", path, weights="f32", cuda=False)
    assert "process_logits" not in axrt.load(path).functions
    with Engine(path, num_blocks=32) as engine:
        for options, name in [({"presence_penalty": 0.5}, "presence_penalty"),
                              ({"frequency_penalty": 0.5}, "frequency_penalty"),
                              ({"repetition_penalty": 1.2}, "repetition_penalty"),
                              ({"min_p": 0.1}, "min_p"),
                              ({"logit_bias": {3: 1.0}}, "logit_bias")]:
            with pytest.raises(axrt.InvalidArgumentError, match=f"{name}.*convert"):
                engine.submit(PROMPT, 4, **options)
        plain = engine.generate([PROMPT], 4, stop_ids=())[0]
        assert engine.generate([PROMPT], 4, stop_ids=(), n=2) == [[plain, plain]]
        assert idle(engine)


@pytest.fixture(scope="module")
def cuda_path(tmp_path_factory, cuda_mock):
    from axrt.llm.convert import default_fatbin

    if default_fatbin() is None:
        pytest.skip("axrt was built without its CUDA kernels")
    path = tmp_path_factory.mktemp("options-cuda") / "tiny-llama.axe"
    axrt.llm.convert(DATA / "tiny-llama", path, weights="f32")
    return path


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_graph_steps_run_the_options_between_step_and_sample(request, device, tiny_llama_path):
    """With graph_max_batch, process_logits runs as a call between the step's and the
    sample's replays: the same tokens as every step as calls, on the CPU and on the CUDA
    driver (the mock's cuda:0)."""
    path = tiny_llama_path if device == "cpu" else request.getfixturevalue("cuda_path")
    where = None if device == "cpu" else request.getfixturevalue("cuda_mock")
    # Four sequences (the second request has two choices): every decode step fits bucket 4.
    prompts = [PROMPT, [3, 1, 4, 1, 5], [9] * 20]
    options = [dict(repetition_penalty=1.5, logit_bias={7: 1.5}),
               dict(temperature=0.9, seed=4, min_p=0.2, presence_penalty=0.7),
               dict(temperature=1.1, seed=6, frequency_penalty=0.8)]
    results = []
    for graphs in (0, 4):
        with Engine(path, where, num_blocks=64, graph_max_batch=graphs) as engine:
            requests = [engine.submit(p, 8, stop_ids=(), n=2 if i == 1 else 1, **o)
                        for i, (p, o) in enumerate(zip(prompts, options))]
            results.append([r.result() for r in requests])
            stats = engine.stats()
            assert (stats["graph_steps"] > 0) == (graphs > 0)
    assert results[0] == results[1]
