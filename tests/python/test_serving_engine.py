"""axrt.llm.Engine (docs/serving.md, Python): the serving engine from Python, on the f32
tiny-llama converted for the CPU, against Model.generate token for token."""
import asyncio

import numpy as np
import pytest

import axrt
import axrt.llm
from axrt.llm import Engine, TokenEvent
from serving_support import DATA, idle, reference, tiny_llama_path, wait_for  # noqa: F401

PROMPTS = [
    [1, 2, 3, 4],
    [5, 6, 7],
    [9] * 20,
    list(range(100, 160)),
    [500],
]


@pytest.fixture(scope="module")
def model_path(tiny_llama_path):
    return tiny_llama_path


@pytest.fixture(scope="module")
def model(model_path):
    return axrt.llm.load(model_path)


@pytest.fixture(scope="module")
def engine(model_path):
    with Engine(model_path, num_blocks=256) as e:
        yield e


def test_generate_equals_model_generate(engine, model):
    want = [model.generate(p, 24) for p in PROMPTS]
    assert engine.generate(PROMPTS, 24) == want
    # The committed transformers references, through the engine.
    with np.load(DATA / "tiny-llama.f32.npz") as ref:
        prompts = [ref[f"prompt{i}"].tolist() for i in range(3)]
        greedy = [ref[f"prompt{i}_greedy"].tolist() for i in range(3)]
    assert engine.generate(prompts, 32, stop_ids=()) == greedy
    wait_for(lambda: idle(engine), what="the engine to go idle")


def test_text_prompts_go_through_the_tokenizer(engine, model):
    texts = ["The capital of France is", "Kernels run on the device"]
    want = [model.generate(model.tokenizer.encode(t).ids, 12) for t in texts]
    assert engine.generate(texts, 12) == want
    assert engine.generate([texts[0], PROMPTS[0]], 12) == [want[0], model.generate(PROMPTS[0], 12)]


def test_submit_yields_ordered_events_and_a_result(engine, model):
    want = model.generate(PROMPTS[3], 10, stop_ids=())
    request = engine.submit(PROMPTS[3], 10, stop_ids=())
    events = list(request)
    assert [e.token for e in events] == want
    assert [e.index for e in events] == list(range(10))
    assert [e.finish_reason for e in events] == [None] * 9 + ["length"]
    assert all(isinstance(e, TokenEvent) for e in events)
    assert events[0].prompt_tokens == len(PROMPTS[3])
    assert request.result() == want and request.finish_reason == "length"
    assert request.tokens == want and request.done
    assert not request.cancel()  # already finished


def test_stop_ids_end_a_request_with_the_stop_token(engine, model):
    free = model.generate(PROMPTS[0], 16, stop_ids=())
    stop = free[5]
    request = engine.submit(PROMPTS[0], 16, stop_ids=[stop])
    tokens = request.result()
    assert tokens == free[:free.index(stop) + 1]
    assert request.finish_reason == "stop"


def test_async_streams_yield_the_same_tokens(engine, model):
    want = [model.generate(p, 16) for p in PROMPTS]

    async def collect(prompt):
        return [event.token async for event in engine.stream(prompt, 16)]

    async def main():
        return await asyncio.gather(*(collect(p) for p in PROMPTS))

    assert asyncio.run(main()) == want


def test_a_stream_closed_early_cancels_its_request_and_frees_its_blocks(engine):
    async def close_after(n):
        stream = engine.stream(PROMPTS[3], 150, stop_ids=())
        seen = []
        async for event in stream:
            seen.append(event)
            if len(seen) == n:
                break
        used = engine.stats()["kv_blocks_used"]
        await stream.aclose()
        return seen, used

    before = engine.stats()["requests_cancelled"]
    seen, used = asyncio.run(close_after(3))
    assert [e.index for e in seen] == [0, 1, 2] and used > 0
    wait_for(lambda: idle(engine), what="every KV block to come back")
    assert engine.stats()["requests_cancelled"] == before + 1


def test_a_cancelled_consumer_task_cancels_its_request(engine):
    async def main():
        got = asyncio.Event()

        async def consume():
            async for _ in engine.stream(PROMPTS[2], 200, stop_ids=()):
                got.set()

        task = asyncio.ensure_future(consume())
        await asyncio.wait_for(got.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    wait_for(lambda: idle(engine), what="every KV block to come back")


def test_cancel_and_dropped_handles_end_requests(engine):
    request = engine.submit(PROMPTS[1], 200, stop_ids=())
    first = next(iter(request))
    assert first.index == 0
    assert request.cancel()
    request.result(timeout=10)
    assert request.finish_reason == "cancelled"
    assert len(request.tokens) < 200
    # A handle dropped before its request ends cancels it.
    for event in engine.submit(PROMPTS[1], 200, stop_ids=()):
        break
    del event
    engine.submit(PROMPTS[1], 200, stop_ids=())
    wait_for(lambda: idle(engine), what="every KV block to come back")


def test_logprobs_and_logits(engine):
    ref = reference("tiny-llama", "f32")
    prompt = ref["prompt0"].tolist()
    events = list(engine.submit(prompt, 4, stop_ids=(), logprobs=3, logits=True))
    tokens = [e.token for e in events]
    assert tokens == ref["prompt0_greedy"][:4].tolist()
    # The logits are transformers' (tests/llm/data), within the f32 bound of test_llm.
    first = ref["prompt0_logits"][-1].astype(np.float64)
    want = first - first.max() - np.log(np.sum(np.exp(first - first.max())))
    for e in events:
        assert e.logits.shape == (engine.vocab_size,) and e.logits.dtype == np.float32
        assert len(e.top_logprobs) == 3
        assert e.top_logprobs[0][0] == e.token  # greedy: the most likely
        assert e.top_logprobs[0][1] == pytest.approx(e.logprob)
        assert [p for _, p in e.top_logprobs] == sorted((p for _, p in e.top_logprobs),
                                                        reverse=True)
    np.testing.assert_allclose(events[0].logits, first, rtol=0, atol=1e-4 * np.abs(first).max())
    assert events[0].logprob == pytest.approx(want[tokens[0]], abs=1e-4)
    plain = list(engine.submit(PROMPTS[0], 2, stop_ids=()))
    assert plain[0].logprob is None and plain[0].top_logprobs is None and plain[0].logits is None


def test_sampled_tokens_do_not_depend_on_the_batch(engine):
    options = dict(temperature=0.9, top_p=0.95, seed=1234, stop_ids=())
    alone = engine.generate([PROMPTS[2]], 16, **options)[0]
    batched = engine.generate([PROMPTS[0], PROMPTS[2], PROMPTS[3]], 16, **options)[1]
    assert alone == batched
    other_seed = engine.generate([PROMPTS[2]], 16, **{**options, "seed": 99})[0]
    assert other_seed != alone


@pytest.mark.parametrize("prompt,max_tokens,options,message", [
    ([], 4, {}, "at least one token"),
    ("", 4, {}, "at least one token"),
    ("bad \ud800", 4, {}, "not valid Unicode"),
    ([1, 2, 1024], 4, {}, "outside the vocabulary"),
    ([1, -1], 4, {}, "outside the vocabulary"),
    ([1.5, 2], 4, {}, "integers"),
    ([1, 2], 0, {}, "max_tokens must be at least 1"),
    ([1, 2], -3, {}, "max_tokens must be at least 1"),
    ([1, 2], 2.0, {}, "max_tokens must be an integer"),
    ([1] * 250, 10, {}, "exceeds the model's context of 256"),
    ([1, 2], 4, {"temperature": -1.0}, "temperature"),
    ([1, 2], 4, {"temperature": float("nan")}, "temperature"),
    ([1, 2], 4, {"top_p": 0.0}, "top_p"),
    ([1, 2], 4, {"top_k": -1}, "top_k"),
    ([1, 2], 4, {"logprobs": 21}, "logprobs"),
    ([1, 2], 4, {"stop_ids": [5000]}, "outside the vocabulary"),
])
def test_bad_requests_raise_value_error_before_anything_is_queued(engine, prompt, max_tokens,
                                                                   options, message):
    before = engine.stats()
    with pytest.raises(ValueError, match=message):
        engine.submit(prompt, max_tokens, **options)
    after = engine.stats()
    assert after["requests_rejected"] == before["requests_rejected"]
    assert after["prompt_tokens"] == before["prompt_tokens"]


def test_generate_checks_every_prompt_first(engine):
    before = engine.stats()["prompt_tokens"]
    with pytest.raises(ValueError, match="prompt 1: .*outside the vocabulary"):
        engine.generate([[1, 2], [1, 99999]], 4)
    with pytest.raises(ValueError, match="list of prompts"):
        engine.generate([1, 2, 3], 4)
    with pytest.raises(ValueError, match="list of prompts"):
        engine.generate("text", 4)
    assert engine.stats()["prompt_tokens"] == before
    assert engine.generate([], 4) == []


def test_a_full_waiting_queue_refuses_with_unavailable(model_path, model):
    with Engine(model_path, num_blocks=64, max_running=1, max_waiting=1) as small:
        accepted, refused = [], 0
        for i in range(12):
            try:
                accepted.append((i, small.submit(PROMPTS[i % 3], 24, stop_ids=())))
            except axrt.UnavailableError:
                refused += 1
        assert refused > 0 and accepted
        for i, request in accepted:
            assert request.result(timeout=30) == model.generate(PROMPTS[i % 3], 24, stop_ids=())
        assert small.stats()["requests_rejected"] == refused


def test_close_cancels_what_is_left(model_path, model):
    e = Engine(model, num_blocks=64)
    assert e.tokenizer is not None
    assert (e.vocab_size, e.max_context, e.block_size) == (1024, 256, 16)
    requests = [e.submit(p, 200, stop_ids=()) for p in PROMPTS[:3]]
    next(iter(requests[0]))
    e.close()
    for r in requests:
        r.result(timeout=10)
        assert r.finish_reason == "cancelled"
    e.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        e.submit([1, 2], 4)
    with pytest.raises(RuntimeError, match="closed"):
        e.stats()


def test_a_stream_on_a_closed_engine_ends_cancelled(model_path):
    e = Engine(model_path, num_blocks=256)
    # Company for the streamed request: every step then decodes 24
    # sequences, so that 200 tokens take far longer than the close does
    # (alone, the tiny model can finish them before the close lands).
    others = [e.submit([1 + i, 2, 3], 200, stop_ids=()) for i in range(23)]

    async def main():
        events = []
        async for event in e.stream(PROMPTS[0], 200, stop_ids=()):
            events.append(event)
            if len(events) == 2:
                e.close()  # on the loop's thread: the events after it still come
        return events

    events = asyncio.run(main())
    # However the close and the steps interleave, a request that did not
    # reach its 200 tokens ended cancelled, and the close stopped the engine
    # long before all 24 did.
    tokens = [ev for ev in events if ev.token is not None]
    assert events[-1].finish_reason == ("length" if len(tokens) == 200 else "cancelled")
    ended = [len(events) < 200]
    for r in others:
        r.result(timeout=10)
        assert r.finish_reason == ("length" if len(r.tokens) == 200 else "cancelled")
        ended.append(r.finish_reason == "cancelled")
    assert any(ended)
