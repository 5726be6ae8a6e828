"""The serving engine's C API through its low-level binding (_axrt.Engine):
refusals, cancellation, destruction with requests in flight, preemption,
prefix caching and copy-on-write, each checked against results computed
without them (docs/serving.md)."""
import numpy as np
import pytest

import axrt
import axrt.llm
from axrt import _axrt
from serving_support import tiny_llama_path  # noqa: F401 (a fixture)


@pytest.fixture(scope="module")
def model(tiny_llama_path):
    return axrt.llm.load(tiny_llama_path)


def drain(engine, ids, timeout=30.0):
    """Polls until every id in `ids` has finished: {id: (tokens, finish, events)}."""
    result = {i: ([], None, []) for i in ids}
    pending = set(ids)
    while pending:
        events = engine.poll(timeout)
        assert events, f"no event within {timeout} s; waiting for {sorted(pending)}"
        for event in events:
            rid, token, index, finish, error = event[:5]
            tokens, _, log = result[rid]
            log.append(event)
            if token >= 0:
                tokens.append(token)
            if finish is not None:
                result[rid] = (tokens, finish, log)
                pending.discard(rid)
    return result


def ids(n, seed=0, low=1, high=90):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 1024, size=int(rng.integers(low, high))).astype(np.int32)
            for _ in range(n)]


def test_an_executable_without_the_serving_functions_is_refused(elementwise):
    with pytest.raises(axrt.InvalidArgumentError, match="no `step` function"):
        _axrt.Engine(elementwise)


def test_bad_options_and_requests_are_refused_by_name(model):
    with pytest.raises(axrt.InvalidArgumentError, match="max_step_tokens"):
        _axrt.Engine(model.executable, max_step_tokens=1 << 20)
    with pytest.raises(axrt.InvalidArgumentError, match="max_running"):
        _axrt.Engine(model.executable, max_running=1000)
    with pytest.raises(axrt.InvalidArgumentError, match="kv_cache_bytes"):
        _axrt.Engine(model.executable, kv_cache_bytes=16)
    engine = _axrt.Engine(model.executable, num_blocks=4, max_waiting=2)
    try:
        ok = np.arange(1, 5, dtype=np.int32)
        cases = [
            (dict(prompt=np.zeros(0, np.int32)), "prompt is empty"),
            (dict(max_tokens=0), "max_tokens"),
            (dict(prompt=np.array([1, 5000], np.int32)), "outside"),
            (dict(temperature=-1.0), "temperature"),
            (dict(top_p=0.0), "top_p"),
            (dict(top_k=-2), "top_k"),
            (dict(logprobs=True, top_logprobs=21), "top_logprobs"),
            (dict(max_tokens=300), "context of 256"),
            (dict(max_tokens=100), "cache has 4"),
        ]
        for change, message in cases:
            args = dict(prompt=ok, max_tokens=4)
            args.update(change)
            with pytest.raises(axrt.InvalidArgumentError, match=message):
                engine.add_request(1, args.pop("prompt"), args.pop("max_tokens"), **args)
        assert engine.stats()["requests_rejected"] == 2
        engine.add_request(1, ok, 4)
        with pytest.raises(axrt.AlreadyExistsError):
            engine.add_request(1, ok, 4)
        drain(engine, [1])
        assert not engine.cancel(1)  # finished: no longer live
    finally:
        engine.close()
    with pytest.raises(axrt.FailedPreconditionError, match="closed"):
        engine.add_request(2, ok, 4)


def test_destroying_the_engine_cancels_every_live_request(model):
    engine = _axrt.Engine(model.executable, num_blocks=64, max_running=4)
    prompts = ids(12, seed=1)
    for i, p in enumerate(prompts):
        engine.add_request(i, p, 200 - len(p))
    engine.poll(10.0)  # at least one step ran
    engine.close()
    finishes = {}
    for rid, token, index, finish, *_ in engine.poll(0):
        if finish is not None:
            finishes[rid] = finish
    # Every request ended once; those still going were cancelled.
    assert sorted(finishes) == list(range(12))
    assert set(finishes.values()) <= {"cancelled", "length"}
    assert "cancelled" in finishes.values()
    assert engine.poll(0) == []


def test_cancelling_returns_blocks_before_the_last_event(model):
    engine = _axrt.Engine(model.executable, num_blocks=64)
    try:
        prompts = ids(6, seed=2)
        for i, p in enumerate(prompts):
            engine.add_request(i, p, 100)
        engine.poll(10.0)
        for i in range(0, 6, 2):
            assert engine.cancel(i)
        result = drain(engine, list(range(6)))
        for i in range(6):
            assert result[i][1] == ("cancelled" if i % 2 == 0 else "length")
        stats = engine.stats()
        assert stats["kv_blocks_used"] == 0
        assert stats["requests_cancelled"] == 3
        assert stats["running"] == stats["waiting"] == 0
    finally:
        engine.close()


def test_preemption_recomputes_and_changes_no_token(model):
    prompts = ids(8, seed=3, low=20, high=60)
    want = [model.generate(p, 40, stop_ids=()) for p in prompts]
    # 16 blocks of 16 tokens: not enough for 8 sequences of up to 100 tokens.
    engine = _axrt.Engine(model.executable, num_blocks=16)
    try:
        for i, p in enumerate(prompts):
            engine.add_request(i, p, 40)
        result = drain(engine, list(range(8)))
        stats = engine.stats()
        assert stats["preemptions"] > 0
        assert stats["kv_blocks_used"] == 0
        for i in range(8):
            assert result[i][0] == want[i], i
    finally:
        engine.close()


def test_prefix_cache_hits_and_copy_on_write_give_the_same_logits(model):
    rng = np.random.default_rng(4)
    shared = rng.integers(0, 1024, size=48).astype(np.int32)  # three full blocks
    tail = rng.integers(0, 1024, size=7).astype(np.int32)
    engine = _axrt.Engine(model.executable, num_blocks=64)
    try:
        # Without a cache: the references.
        cold = _axrt.Engine(model.executable, num_blocks=64, prefix_caching=False)
        cold.add_request(1, shared, 6, logits=True)
        cold.add_request(2, np.concatenate([shared, tail]), 6, logits=True)
        ref = drain(cold, [1, 2])
        cold.close()

        engine.add_request(1, np.concatenate([shared, tail]), 30, logits=True)
        engine.poll(10.0)  # its prompt is in the cache, and it keeps running
        # The same prompt again: 48 tokens found.
        engine.add_request(2, np.concatenate([shared, tail]), 6, logits=True)
        # Exactly the shared blocks: the last token runs again, in a copy of
        # a block request 1 still holds.
        engine.add_request(3, shared, 6, logits=True)
        got = drain(engine, [1, 2, 3])
        first = {e[0]: e for e in got[2][2] + got[3][2] if e[1] >= 0 and e[2] == 0}
        assert first[2][9] == 48  # cached_tokens
        assert first[3][9] == 47
        for rid, ref_id in ((2, 2), (3, 1)):
            tokens, _, log = got[rid]
            assert tokens == ref[ref_id][0]
            rows = [e[5] for e in log if e[1] >= 0]
            ref_rows = [e[5] for e in ref[ref_id][2] if e[1] >= 0]
            for a, b in zip(rows, ref_rows):
                assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
        stats = engine.stats()
        assert stats["cached_prompt_tokens"] == 48 + 47
        assert stats["kv_blocks_used"] == 0
        assert stats["kv_blocks_cached"] > 0
    finally:
        engine.close()


def test_logprobs_are_the_log_softmax_of_the_logits(model):
    engine = _axrt.Engine(model.executable)
    try:
        engine.add_request(1, np.arange(3, 20, dtype=np.int32), 4, logits=True, logprobs=True,
                           top_logprobs=5)
        (tokens, finish, log) = drain(engine, [1])[1]
        for rid, token, index, fin, err, logits, logprob, top, *_ in log:
            if token < 0:
                continue
            x = logits.astype(np.float64)
            lsm = x - x.max() - np.log(np.exp(x - x.max()).sum())
            assert logprob == pytest.approx(lsm[token], abs=1e-5)
            order = np.argsort(-x, kind="stable")[:5]
            assert [t for t, _ in top] == order.tolist()
            assert [lp for _, lp in top] == pytest.approx(lsm[order].tolist(), abs=1e-5)
    finally:
        engine.close()
