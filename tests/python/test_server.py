"""The OpenAI-compatible server (docs/serving.md, The OpenAI-compatible server): the
official openai client against axrt.llm.server on 127.0.0.1, in this process, over the
f32 tiny-llama converted for the CPU; plus the pure parts (request parsing, incremental
detokenisation, stop strings) on their own."""
import concurrent.futures
import gc
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import types
import threading
import time

import openai
import prometheus_client  # noqa: F401  (required by the server)
import pytest
import starlette  # noqa: F401
import uvicorn  # noqa: F401
from tokenizers import Tokenizer

import axrt
import axrt.llm
from axrt.llm import Engine, TokenEvent
from serving_support import DATA, ids_text, idle, tiny_llama_path, wait_for  # noqa: F401 (a fixture)
from axrt.llm.detokenize import Completion, IncrementalDecoder, StopMatcher
from axrt.llm.protocol import APIError, parse_completion_request
from axrt.llm.server import ServerThread, create_app

KEY = "test-key"
NAME = "tiny"
MAX_BODY = 64 * 1024
PROMPTS = [[1, 2, 3, 4], [5, 6, 7], [9] * 20, list(range(100, 160))]


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model_path(tiny_llama_path):
    return tiny_llama_path


@pytest.fixture(scope="module")
def engine(model_path):
    with Engine(model_path, num_blocks=768) as e:
        yield e


@pytest.fixture(scope="module")
def server(engine):
    app = create_app(engine, model_name=NAME, api_key=KEY, max_body_bytes=MAX_BODY)
    with ServerThread(app) as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0,
                       timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def tokenizer(engine):
    return engine.tokenizer


def raw(server, method, path, body=None, headers=None, key=KEY):
    """(status, headers, parsed body) of one request over a fresh connection."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        h = dict(headers or {})
        if key is not None:
            h["Authorization"] = f"Bearer {key}"
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=body, headers=h)
        response = conn.getresponse()
        data = response.read()
        try:
            parsed = json.loads(data)
        except ValueError:
            parsed = data.decode(errors="replace")
        return response.status, {k.lower(): v for k, v in response.getheaders()}, parsed
    finally:
        conn.close()


def metrics(server):
    status, _, text = raw(server, "GET", "/metrics")
    assert status == 200
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def complete(client, prompt, max_tokens=16, **kwargs):
    return client.completions.create(model=NAME, prompt=prompt, max_tokens=max_tokens,
                                     temperature=kwargs.pop("temperature", 0), **kwargs)


def stream_text(client, prompt, max_tokens=16, **kwargs):
    chunks = list(complete(client, prompt, max_tokens, stream=True, **kwargs))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    finish = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert all(f is None for f in finish[:-1])
    return text, finish[-1], chunks



# -- the pure parts ----------------------------------------------------------------------------


def test_stop_matcher_holds_back_what_could_start_a_stop_string():
    m = StopMatcher(["STOP", "xy"])
    out = [m.feed(p) for p in ["ab", "cS", "T", "O", "Pzz"]]
    assert out == ["ab", "c", "", "", ""] and m.stopped
    m = StopMatcher(["STOP", "xy"])
    out = [m.feed(p) for p in ["ab", "cS", "Tx", "y", "STOP"]]
    assert out == ["ab", "c", "ST", "", ""] and m.stopped
    m = StopMatcher(["STOP"])
    assert m.feed("aST") == "a" and m.feed("x") == "STx" and m.flush() == ""
    assert not m.stopped
    m = StopMatcher(["end"])
    assert m.feed("the e") == "the " and m.flush() == "e"
    m = StopMatcher(["ab"])
    assert m.feed("ab") == "" and m.stopped and m.feed("more") == ""
    assert StopMatcher([]).feed("anything") == "anything"


class _FakeTokenizer:
    """Decodes each id to fixed bytes, UTF-8 with replacement, as a byte-level BPE does."""

    def __init__(self, pieces):
        self.pieces = pieces

    def decode(self, ids, skip_special_tokens=True):
        return b"".join(self.pieces[i] for i in ids).decode("utf-8", errors="replace")

    def to_str(self):
        return json.dumps({"decoder": None})

    def id_to_token(self, token):
        return None


def test_incremental_decoder_holds_back_incomplete_characters():
    euro = "€".encode()
    tok = _FakeTokenizer({0: b"a", 1: euro[:1], 2: euro[1:2], 3: euro[2:], 4: b" b", 5: b"\x80"})
    d = IncrementalDecoder(tok, context=[0])
    assert [d.push(t) for t in [4, 1, 2, 3, 0]] == [" b", "", "", "€", "a"]
    d = IncrementalDecoder(tok)
    # A lone continuation byte is emitted as U+FFFD once something follows it.
    assert [d.push(t) for t in [5, 0, 1]] == ["", "\ufffda", ""]
    assert d.flush() == "\ufffd" and d.text == "\ufffda\ufffd"
    # Past the rebase length, the text stays the plain decode.
    d = IncrementalDecoder(tok)
    seq = [0, 1, 2, 3, 4] * 40
    assert "".join(d.push(t) for t in seq) + d.flush() == tok.decode(seq)


def test_incremental_decoder_keeps_the_space_a_metaspace_tokenizer_strips(tokenizer):
    spm = Tokenizer.from_str(json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": None, "pre_tokenizer": None, "post_processor": None,
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
                    "split": True},
        "model": {"type": "WordLevel", "vocab": {"\u2581The": 0, "\u2581cat": 1, "s": 2,
                                                 "<unk>": 3}, "unk_token": "<unk>"}}))
    assert spm.decode([1]) == "cat"  # the leading space is gone on its own
    d = IncrementalDecoder(spm, context=[0])
    assert [d.push(t) for t in [1, 2]] == [" cat", "s"]


def test_completion_cuts_logprobs_at_the_stop_string():
    tok = _FakeTokenizer({0: b"he", 1: b"llo", 2: b" wor", 3: b"ld", 4: b"!"})
    c = Completion(tok, [], ["o w"], logprobs=2)
    out, lps = [], []
    for i, t in enumerate([0, 1, 2, 3]):
        text, lp = c.add(TokenEvent(t, i, None, -0.5, [(t, -0.5), (4, -2.0)]))
        out.append(text)
        lps.append(lp)
        if c.stopped:
            break
    rest, last = c.finish()
    assert "".join(out) + rest == "hell" and c.stopped
    tokens = sum((lp["tokens"] for lp in lps + [last]), [])
    offsets = sum((lp["text_offset"] for lp in lps + [last]), [])
    assert tokens == ["he", "llo"] and offsets == [0, 2]
    assert lps[0]["top_logprobs"] == [{"he": -0.5, "!": -2.0}]


def test_a_model_without_a_tokenizer_answers_with_the_ids_in_decimal():
    c = Completion(None, [1, 2], ["9 4"], logprobs=0)
    pieces = [c.add(TokenEvent(t, i))[0] for i, t in enumerate([464, 11, 9, 40])]
    assert "".join(pieces) + c.finish()[0] == "464 11 "
    c = Completion(None, [1, 2], [], logprobs=0)
    texts = [c.add(TokenEvent(t, i))[1]["tokens"] for i, t in enumerate([464, 11])]
    assert texts == [["464"], ["11"]] and c.finish() == ("", {
        "tokens": [], "token_logprobs": [], "top_logprobs": None, "text_offset": []})


@pytest.mark.parametrize("body,param", [
    ([1, 2], None),
    ({"prompt": [1]}, "model"),
    ({"model": "other", "prompt": [1]}, "model"),
    ({"model": NAME}, "prompt"),
    ({"model": NAME, "prompt": 5}, "prompt"),
    ({"model": NAME, "prompt": []}, "prompt"),
    ({"model": NAME, "prompt": [1.5, 2]}, "prompt"),
    ({"model": NAME, "prompt": [True, 2]}, "prompt"),
    ({"model": NAME, "prompt": [[1], [2]]}, "prompt"),
    ({"model": NAME, "prompt": ["a", "b"]}, "prompt"),
    ({"model": NAME, "prompt": [1], "max_tokens": "5"}, "max_tokens"),
    ({"model": NAME, "prompt": [1], "max_tokens": 0}, "max_tokens"),
    ({"model": NAME, "prompt": [1], "max_tokens": 2.5}, "max_tokens"),
    ({"model": NAME, "prompt": [1], "temperature": "hot"}, "temperature"),
    ({"model": NAME, "prompt": [1], "temperature": -0.5}, "temperature"),
    ({"model": NAME, "prompt": [1], "top_p": 0}, "top_p"),
    ({"model": NAME, "prompt": [1], "top_p": 1.5}, "top_p"),
    ({"model": NAME, "prompt": [1], "seed": "x"}, "seed"),
    ({"model": NAME, "prompt": [1], "stop": 5}, "stop"),
    ({"model": NAME, "prompt": [1], "stop": ["a", 1]}, "stop"),
    ({"model": NAME, "prompt": [1], "stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ({"model": NAME, "prompt": [1], "logprobs": 6}, "logprobs"),
    ({"model": NAME, "prompt": [1], "logprobs": True}, "logprobs"),
    ({"model": NAME, "prompt": [1], "stream": "yes"}, "stream"),
    ({"model": NAME, "prompt": [1], "echo": True}, "echo"),
    ({"model": NAME, "prompt": [1], "n": 0}, "n"),
    ({"model": NAME, "prompt": [1], "n": 17}, "n"),
    ({"model": NAME, "prompt": [1], "best_of": 3}, "best_of"),
    ({"model": NAME, "prompt": [1], "n": 2, "best_of": 3}, "best_of"),
    ({"model": NAME, "prompt": [1], "presence_penalty": 2.5}, "presence_penalty"),
    ({"model": NAME, "prompt": [1], "frequency_penalty": "x"}, "frequency_penalty"),
    ({"model": NAME, "prompt": [1], "repetition_penalty": 0}, "repetition_penalty"),
    ({"model": NAME, "prompt": [1], "min_p": 1.5}, "min_p"),
    ({"model": NAME, "prompt": [1], "logit_bias": {"1": 101}}, "logit_bias"),
    ({"model": NAME, "prompt": [1], "logit_bias": {"x": 5}}, "logit_bias"),
    ({"model": NAME, "prompt": [1], "logit_bias": [1]}, "logit_bias"),
    ({"model": NAME, "prompt": [1], "logit_bias": {str(i): 1 for i in range(301)}},
     "logit_bias"),
    ({"model": NAME, "prompt": [1], "stop_token_ids": [1, "2"]}, "stop_token_ids"),
    ({"model": NAME, "prompt": [1], "max_completion_tokens": 0}, "max_completion_tokens"),
    ({"model": NAME, "prompt": [1], "suffix": "x"}, "suffix"),
    ({"model": NAME, "prompt": [1], "stream_options": 3}, "stream_options"),
])
def test_parse_refuses_bad_fields_by_name(body, param):
    with pytest.raises(APIError) as e:
        parse_completion_request(body, NAME)
    assert e.value.status == 400 and e.value.param == param


def test_parse_takes_what_the_openai_client_sends():
    p = parse_completion_request({"model": NAME, "prompt": ["hi"], "stop": "\n", "seed": -5,
                                  "logprobs": 0, "temperature": 0, "top_p": 1,
                                  "max_tokens": None, "user": "someone", "n": 1}, NAME)
    assert (p.prompt, p.stop, p.seed, p.logprobs, p.temperature, p.max_tokens) == \
        ("hi", ["\n"], -5, 0, 0.0, 16)
    p = parse_completion_request({"model": NAME, "prompt": [[3, 4]]}, NAME)
    assert p.prompt == [3, 4] and p.temperature == 1.0 and not p.stream and p.options == {}
    p = parse_completion_request({"model": NAME, "prompt": [1], "n": 3, "best_of": 3,
                                  "presence_penalty": -2, "frequency_penalty": 0.5,
                                  "repetition_penalty": 1.2, "min_p": 0.1, "top_k": -1,
                                  "logit_bias": {"7": -100, "9": 2.5}, "stop_token_ids": [5],
                                  "max_tokens": 3, "max_completion_tokens": 4}, NAME)
    assert p.options == {"n": 3, "presence_penalty": -2.0, "frequency_penalty": 0.5,
                         "repetition_penalty": 1.2, "min_p": 0.1,
                         "logit_bias": {7: -100.0, 9: 2.5}}
    assert (p.top_k, p.stop_token_ids, p.max_tokens) == (0, [5], 4)


# -- the server --------------------------------------------------------------------------------


def test_streamed_and_plain_greedy_completions_equal_engine_generate(client, engine, tokenizer):
    for prompt in PROMPTS:
        tokens = engine.generate([prompt], 20)[0]
        want = ids_text(tokenizer, prompt, tokens)
        finish = "stop" if len(tokens) < 20 else "length"
        text, streamed_finish, _ = stream_text(client, prompt, 20)
        assert (text, streamed_finish) == (want, finish)
        r = complete(client, prompt, 20)
        assert (r.choices[0].text, r.choices[0].finish_reason) == (want, finish)
        assert r.object == "text_completion" and r.model == NAME and r.id.startswith("cmpl-")
        assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == \
            (len(prompt), len(tokens), len(prompt) + len(tokens))
        # The token ids themselves, through logprobs.
        r = complete(client, [prompt], 20, logprobs=0,
                     extra_body={"return_tokens_as_token_ids": True})
        assert r.choices[0].logprobs.tokens == [f"token_id:{t}" for t in tokens]


def test_text_prompts_use_the_tokenizer(client, engine, tokenizer):
    for text in ["The capital of France is", "Kernels run", "é"]:
        ids = tokenizer.encode(text).ids
        want = ids_text(tokenizer, ids, engine.generate([ids], 16)[0])
        assert complete(client, text, 16).choices[0].text == want
        assert stream_text(client, [text], 16)[0] == want


def test_usage_in_the_last_chunk_when_asked(client):
    chunks = list(complete(client, PROMPTS[0], 5, stream=True,
                           stream_options={"include_usage": True}, extra_body={"ignore_eos": True}))
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 5
    assert chunks[-2].choices[0].finish_reason == "length"


def test_sampling_with_a_seed_is_reproducible(client, engine, tokenizer):
    a = complete(client, PROMPTS[2], 16, temperature=0.9, top_p=0.9, seed=7).choices[0].text
    b = stream_text(client, PROMPTS[2], 16, temperature=0.9, top_p=0.9, seed=7)[0]
    want = engine.generate([PROMPTS[2]], 16, temperature=0.9, top_p=0.9, seed=7)[0]
    assert a == b == ids_text(tokenizer, PROMPTS[2], want)


def test_stop_strings_never_appear_in_the_output(client, tokenizer):
    prompt = PROMPTS[3]
    full = complete(client, prompt, 40, logprobs=0, extra_body={"ignore_eos": True}).choices[0]
    text = full.text
    assert full.finish_reason == "length" and len(text) > 12
    # A stop string across the boundary of two tokens.
    offsets = full.logprobs.text_offset
    cut = next(o for o in offsets[2:] if 2 <= o <= len(text) - 2 and o - 2 > 0)
    for stop in [text[cut - 2:cut + 2], text[3:6], text[:2]]:
        want = text[:text.find(stop)]
        r = complete(client, prompt, 40, stop=[stop, "\x00never"],
                     extra_body={"ignore_eos": True})
        assert (r.choices[0].text, r.choices[0].finish_reason) == (want, "stop"), stop
        streamed, finish, chunks = stream_text(client, prompt, 40, stop=stop,
                                               extra_body={"ignore_eos": True})
        assert (streamed, finish) == (want, "stop")
        assert all(stop not in c.choices[0].text for c in chunks if c.choices)
    r = complete(client, prompt, 40, stop="\x00never", extra_body={"ignore_eos": True})
    assert (r.choices[0].text, r.choices[0].finish_reason) == (text, "length")


def test_logprobs_have_openais_shape(client, engine):
    tokens = engine.generate([PROMPTS[1]], 12, stop_ids=())[0]
    r = complete(client, PROMPTS[1], 12, logprobs=3, extra_body={"ignore_eos": True})
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == \
        len(lp.text_offset) == len(tokens)
    assert all(p <= 0 for p in lp.token_logprobs)
    assert lp.text_offset[0] == 0 and lp.text_offset == sorted(lp.text_offset)
    for token, p, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert len(top) in (3, 4) and max(top.values()) == pytest.approx(p)  # greedy
    chunks = list(complete(client, PROMPTS[1], 12, logprobs=3, stream=True,
                           extra_body={"ignore_eos": True}))
    streamed = sum((c.choices[0].logprobs.tokens for c in chunks), [])
    assert streamed == lp.tokens
    assert sum((c.choices[0].logprobs.token_logprobs for c in chunks), []) == \
        pytest.approx(lp.token_logprobs)


def test_32_concurrent_streams_complete_correctly(client, engine, tokenizer):
    want = {i: ids_text(tokenizer, PROMPTS[i % 4], engine.generate([PROMPTS[i % 4]], 24)[0])
            for i in range(4)}

    def one(i):
        return stream_text(client, PROMPTS[i % 4], 24)[0]

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        results = list(pool.map(one, range(32)))
    assert results == [want[i % 4] for i in range(32)]
    wait_for(lambda: idle(engine), what="every KV block to come back")


def test_clients_that_go_away_mid_stream_free_their_blocks(client, server, engine, tokenizer):
    want = {i: ids_text(tokenizer, PROMPTS[i % 4],
                        engine.generate([PROMPTS[i % 4]], 150, stop_ids=())[0])
            for i in range(4)}
    finished = 'axrt_requests_finished_total{finish_reason="%s"}'
    before = metrics(server)
    used = []

    def one(i):
        if i % 2:
            # The longest request that fits, abandoned after three chunks.
            stream = complete(client, [1, 2], 254, stream=True, extra_body={"ignore_eos": True})
            for n, chunk in enumerate(stream):
                if n == 2:
                    used.append(engine.stats()["kv_blocks_used"])
                    stream.close()
                    return None
        stream = complete(client, PROMPTS[i % 4], 150, stream=True,
                          extra_body={"ignore_eos": True})
        return "".join(c.choices[0].text for c in stream)

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        results = list(pool.map(one, range(32)))
    assert [r for r in results if r is not None] == [want[i % 4] for i in range(0, 32, 2)]
    assert max(used) > 0
    wait_for(lambda: idle(engine), what="every KV block to come back")

    def ended():
        now = metrics(server)
        return {r: now[finished % r] - before[finished % r] for r in ("cancelled", "length")}

    wait_for(lambda: sum(ended().values()) == 32, what="32 requests ended in /metrics")
    # Each abandoned request ended cancelled, or at its length when the engine got there
    # before the server saw its client go (254 tokens take a fraction of a second);
    # test_a_client_that_goes_away_cancels_its_request shows the cancellation itself.
    assert ended()["length"] >= 16
    assert metrics(server)["axrt_kv_blocks_used"] == 0


def test_a_client_that_goes_away_cancels_its_request(tmp_path):
    # The tiny checkpoint with room for 4,000 tokens: one request then runs for seconds,
    # while the server sees its client leave within milliseconds.
    checkpoint = tmp_path / "long-context"
    shutil.copytree(DATA / "tiny-llama", checkpoint)
    config = json.loads((checkpoint / "config.json").read_text())
    config["max_position_embeddings"] = 4096
    (checkpoint / "config.json").write_text(json.dumps(config))
    axrt.llm.convert(checkpoint, tmp_path / "long.axe", weights="f32", cuda=False)
    finished = 'axrt_requests_finished_total{finish_reason="cancelled"}'
    with Engine(tmp_path / "long.axe", num_blocks=260) as engine, \
            ServerThread(create_app(engine, model_name=NAME)) as server, \
            openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0,
                          timeout=60) as client:
        for closed_after in (1, 3):
            before = metrics(server)[finished]
            stream = complete(client, [1, 2], 4000, stream=True,
                              extra_body={"ignore_eos": True})
            for n, _ in enumerate(stream, 1):
                if n == closed_after:
                    stream.close()
                    break
            wait_for(lambda: idle(engine), what="the request's KV blocks to come back")
            wait_for(lambda: metrics(server)[finished] == before + 1,
                     what="the request to end cancelled in /metrics")


def test_prefix_sharing_shows_in_usage_and_metrics(client, server):
    prompt = list(range(300, 400))  # more than six blocks of 16
    before = metrics(server)
    first = complete(client, prompt, 4)
    second = complete(client, prompt, 4)
    assert first.choices[0].text == second.choices[0].text
    assert second.usage.prompt_tokens_details.cached_tokens >= 64
    after = metrics(server)
    assert after["axrt_cached_prompt_tokens_total"] - before["axrt_cached_prompt_tokens_total"] \
        >= 64
    assert after["axrt_prefix_cache_hit_rate"] > 0
    assert after["axrt_kv_blocks_cached"] > 0


def test_health_models_and_metrics(server, client):
    assert raw(server, "GET", "/health", key=None)[::2] == (200, {"status": "ok"})
    models = client.models.list()
    assert [m.id for m in models.data] == [NAME]
    assert client.models.retrieve(NAME).id == NAME
    complete(client, PROMPTS[0], 4)
    status, headers, text = raw(server, "GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    for name in ["axrt_requests_running", "axrt_requests_waiting", "axrt_kv_blocks_used",
                 "axrt_kv_blocks_free", "axrt_kv_blocks_cached", "axrt_kv_blocks_total",
                 "axrt_prefix_cache_hit_rate", "axrt_generated_tokens_total",
                 "axrt_prompt_tokens_total", "axrt_preemptions_total",
                 "axrt_engine_graph_steps_total",
                 "axrt_requests_rejected_total",
                 'axrt_requests_finished_total{finish_reason="length"}',
                 "axrt_time_to_first_token_seconds_count", "axrt_inter_token_latency_seconds_count",
                 "axrt_e2e_request_latency_seconds_count", 'axrt_http_responses_total{code="200"}']:
        assert re.search("^" + re.escape(name) + " ", text, re.M), name
    values = metrics(server)
    assert values["axrt_time_to_first_token_seconds_count"] >= 1
    assert values["axrt_kv_blocks_total"] == 768


def test_bad_requests_get_400_with_openais_error_body(server, client):
    cases = [
        (b"{not json", "invalid_json"),
        (b"\xff\xfe", "invalid_json"),
        (b"[1, 2]", None),
        (b'{"model": "tiny", "prompt": [1], "max_tokens": 1e999}', "invalid_type"),
        (json.dumps({"model": NAME, "prompt": [1] * 250, "max_tokens": 10}).encode(),
         "context_length_exceeded"),
        (json.dumps({"model": NAME, "prompt": [1, 1024]}).encode(), "invalid_value"),
        (json.dumps({"model": NAME, "prompt": [1], "max_tokens": 0}).encode(), "invalid_value"),
        (json.dumps({"model": NAME, "prompt": [1], "max_tokens": 10**30}).encode(),
         "context_length_exceeded"),
        (json.dumps({"model": NAME, "prompt": "x" * 2000, "max_tokens": 10}).encode(),
         "context_length_exceeded"),
        (b'{"model": "tiny", "prompt": [1], "temperature": NaN}', "invalid_value"),
        (b'[' * 30000 + b']' * 30000, None),
    ]
    for body, code in cases:
        status, _, error = raw(server, "POST", "/v1/completions", body,
                               {"Content-Type": "application/json"})
        assert status == 400, body[:80]
        assert error["error"]["type"] == "invalid_request_error"
        assert set(error["error"]) == {"message", "type", "param", "code"}
        if code is not None:
            assert error["error"]["code"] == code, (body[:80], error)
    with pytest.raises(openai.BadRequestError, match="does not exist"):
        client.completions.create(model="gpt-5", prompt=[1], max_tokens=2)
    with pytest.raises(openai.BadRequestError, match="maximum context length is 256"):
        complete(client, [1] * 200, 100)
    with pytest.raises(openai.BadRequestError, match="max_tokens"):
        complete(client, [1], 0)
    # Still serving.
    assert complete(client, PROMPTS[0], 4).choices[0].finish_reason in ("length", "stop")


def test_random_requests_get_200_or_400_and_never_500(server, client):
    rng = random.Random(5)
    values = [None, True, 0, -1, 1, 3, 2**70, 0.5, -0.0, 1e308, "", "a", "\ud800x", [], [1],
              [[1, 2]], [-5], ["x", "y"], {}, {"a": 1}, [1, 2, 1023], "The capital", [[]]]
    fields = ["model", "prompt", "max_tokens", "temperature", "top_p", "top_k", "seed", "stop",
              "logprobs", "stream", "echo", "n", "stream_options", "ignore_eos", "suffix",
              "logit_bias", "presence_penalty", "best_of", "return_tokens_as_token_ids"]
    for _ in range(150):
        body = {"model": NAME, "prompt": [1, 2], "max_tokens": 2}
        for key in rng.sample(fields, rng.randint(1, 4)):
            body[key] = rng.choice(values)
        status, _, data = raw(server, "POST", "/v1/completions", body)
        assert status in (200, 400), (body, status, data)
        if status == 400:
            assert data["error"]["type"] == "invalid_request_error", body
    assert complete(client, PROMPTS[0], 2).usage.completion_tokens >= 1


def test_auth_paths_methods_and_sizes(server):
    url = server.url + "/v1"
    with openai.OpenAI(base_url=url, api_key="wrong", max_retries=0) as bad:
        with pytest.raises(openai.AuthenticationError):
            bad.completions.create(model=NAME, prompt=[1], max_tokens=2)
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()
    status, headers, error = raw(server, "GET", "/v1/models", key=None)
    assert status == 401 and error["error"]["code"] == "invalid_api_key"
    assert raw(server, "GET", "/metrics", key=None)[0] == 401
    assert raw(server, "GET", "/v1/models", headers={"Authorization": "Basic " + KEY},
               key=None)[0] == 401
    status, _, error = raw(server, "GET", "/v1/nothing")
    assert status == 404 and error["error"]["code"] == "not_found"
    assert raw(server, "GET", "/v1/completions")[0] == 405
    # Over the body limit: by Content-Length, and streamed in chunks without one.
    big = json.dumps({"model": NAME, "prompt": "x" * (MAX_BODY + 10)}).encode()
    status, _, error = raw(server, "POST", "/v1/completions", big)
    assert status == 413 and error["error"]["code"] == "request_too_large"
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    chunks = (big[i:i + 4096] for i in range(0, len(big), 4096))
    conn.request("POST", "/v1/completions", body=chunks,
                 headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
                 encode_chunked=True)
    response = conn.getresponse()
    assert response.status == 413 and json.loads(response.read())["error"]["code"] == \
        "request_too_large"
    conn.close()
    # Not HTTP at all.
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"\x00\xffGARBAGE\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 400")
    assert raw(server, "POST", "/v1/completions",
               {"model": NAME, "prompt": [1, 2], "max_tokens": 2})[0] == 200


@pytest.fixture(scope="module")
def small_server(model_path):
    """A server whose engine runs one request at a time and lets one wait."""
    with Engine(model_path, num_blocks=64, max_running=1, max_waiting=1) as e:
        with ServerThread(create_app(e, model_name=NAME)) as s:
            yield e, s


def test_a_full_queue_gets_503_with_retry_after_and_the_rest_complete(small_server, engine,
                                                                       tokenizer):
    small, server = small_server
    want = {i: ids_text(tokenizer, PROMPTS[i % 4],
                        engine.generate([PROMPTS[i % 4]], 24, stop_ids=())[0]) for i in range(4)}
    barrier = threading.Barrier(12)

    def one(i):
        body = {"model": NAME, "prompt": PROMPTS[i % 4], "max_tokens": 24, "temperature": 0,
                "ignore_eos": True}
        barrier.wait()
        return i, raw(server, "POST", "/v1/completions", body, key=None)

    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        results = list(pool.map(one, range(12)))
    refused = [(i, r) for i, r in results if r[0] == 503]
    accepted = [(i, r) for i, r in results if r[0] == 200]
    assert refused and accepted and len(refused) + len(accepted) == 12
    for i, (status, headers, body) in refused:
        assert headers["retry-after"] == "1" and body["error"]["code"] == "overloaded"
    for i, (status, headers, body) in accepted:
        assert body["choices"][0]["text"] == want[i % 4]
    wait_for(lambda: idle(small), what="the small engine to go idle")
    # The openai client sees the 503 too (it would retry; here it may not).
    with openai.OpenAI(base_url=server.url + "/v1", api_key="-", max_retries=0) as c:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(c.completions.create, model=NAME, prompt=PROMPTS[0],
                                   max_tokens=24, temperature=0) for _ in range(8)]
            errors = [f.exception() for f in futures]
    assert any(isinstance(e, openai.InternalServerError) and e.status_code == 503
               for e in errors)


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_load_at_twice_the_sustained_rate(small_server, engine, tokenizer):
    """Requests come twice as fast as the server finishes them: each one completes correctly
    or is refused with a clean 503; no KV block stays held; memory returns to where it was."""
    small, server = small_server
    want = {i: ids_text(tokenizer, PROMPTS[i % 4],
                        engine.generate([PROMPTS[i % 4]], 32, stop_ids=())[0]) for i in range(4)}

    def one(i):
        body = {"model": NAME, "prompt": PROMPTS[i % 4], "max_tokens": 32, "temperature": 0,
                "ignore_eos": True, "stream": i % 2 == 1}
        status, headers, data = raw(server, "POST", "/v1/completions", body, key=None)
        if status == 200 and body["stream"]:
            events = [json.loads(line[6:]) for line in data.split("\n\n")
                      if line.startswith("data: {")]
            assert data.rstrip().endswith("data: [DONE]")
            return status, "".join(e["choices"][0]["text"] for e in events)
        if status == 200:
            return status, data["choices"][0]["text"]
        assert status == 503 and headers["retry-after"] == "1", (status, data)
        return status, None

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        # Warm up, and measure the rate one request at a time sustains.
        start = time.perf_counter()
        for i in range(6):
            assert one(i) == (200, want[i % 4])
        rate = 6 / (time.perf_counter() - start)
        gc.collect()
        before = rss_bytes()
        # Twice that rate, for about two seconds (at most 300 requests).
        count = min(300, max(12, int(4 * rate)))
        futures = []
        for i in range(count):
            futures.append(pool.submit(one, i))
            time.sleep(1 / (2 * rate))
        results = [f.result() for f in futures]
    for i, (status, text) in enumerate(results):
        assert status == 503 or text == want[i % 4]
    accepted = sum(status == 200 for status, _ in results)
    assert accepted >= 2
    wait_for(lambda: idle(small), what="the small engine to go idle")
    gc.collect()
    growth = rss_bytes() - before
    # Sockets, thread stacks and allocator slack come and go; a leak of even
    # one small buffer per request would show over the run.
    print(f"load: {rate:.1f} requests/s sustained, {count} sent at twice that, {accepted} "
          f"accepted, RSS {growth / 2**20:+.1f} MiB")
    assert growth < 32 << 20, f"RSS grew by {growth >> 20} MiB"


def test_serve_command_prints_its_url_and_stops_on_sigterm_and_sigint(model_path):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    for sig in (signal.SIGTERM, signal.SIGINT):
        proc = subprocess.Popen([sys.executable, "-m", "axrt.llm", "serve", str(model_path),
                                 "--port", "0", "--api-key", KEY, "--max-waiting", "4",
                                 "--num-blocks", "64", "--graph-max-batch", "2",
                                 "--log-level", "warning"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                text=True)
        try:
            line = proc.stdout.readline()
            match = re.search(r"http://127\.0\.0\.1:(\d+)/v1", line)
            assert match, line + proc.stderr.read()
            port = int(match.group(1))
            with openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY,
                               max_retries=0) as c:
                assert [m.id for m in c.models.list().data] == ["tiny-llama"]
                assert c.completions.create(model="tiny-llama", prompt=[1, 2], max_tokens=3,
                                            temperature=0).usage.completion_tokens >= 1
            # The decode steps replayed graphs (--graph-max-batch).
            served = types.SimpleNamespace(port=port)
            assert metrics(served)["axrt_engine_graph_steps_total"] >= 1
            proc.send_signal(sig)
            assert proc.wait(timeout=30) == 0, proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
