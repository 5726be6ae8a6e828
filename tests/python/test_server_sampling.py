"""The sampling options through the OpenAI-compatible server, with the openai client: each is
accepted on both endpoints and has its effect, the same tokens as the engine gives for the
same options (tests/python/test_sampling_options.py checks the engine against float64
references of the formulas)."""
import pytest

import axrt.llm

openai = pytest.importorskip("openai")
pytest.importorskip("starlette")

from axrt.llm.server import ServerThread, create_app  # noqa: E402
from chat_support import chat_checkpoint  # noqa: E402
from serving_support import DATA, tiny_llama_path  # noqa: E402,F401 (a fixture)

PROMPT = [1, 17, 250, 3, 999, 512, 64, 128]
LONG_PROMPT = PROMPT * 5  # two full KV blocks of 16 and a part
IDS = {"return_tokens_as_token_ids": True}


@pytest.fixture(scope="module")
def served(tiny_llama_path):
    with axrt.llm.Engine(tiny_llama_path) as engine, \
            ServerThread(create_app(engine, model_name="tiny")) as server:
        yield engine, openai.OpenAI(base_url=server.url + "/v1", api_key="-")


def _ids(choice):
    return [int(t.split(":")[1]) for t in choice.logprobs.tokens]


def _complete(client, **options):
    body = dict(model="tiny", prompt=PROMPT, max_tokens=6, logprobs=0)
    extra = dict(IDS, **options.pop("extra_body", {}))
    body.update(options)
    return client.completions.create(extra_body=extra, **body)


def test_logit_bias_forces_and_forbids_tokens(served):
    engine, client = served
    forced = _complete(client, temperature=1.0, seed=3, logit_bias={"42": 100})
    assert _ids(forced.choices[0]) == [42] * 6
    greedy = _ids(_complete(client, temperature=0).choices[0])
    banned = {str(t): -100 for t in greedy}
    other = _ids(_complete(client, temperature=0, logit_bias=banned).choices[0])
    assert not set(other) & set(greedy)


def test_n_choices_are_reproducible_and_differ(served):
    engine, client = served
    before = engine.stats()["cached_prompt_tokens"]
    a = _complete(client, prompt=LONG_PROMPT, temperature=1.0, seed=7, n=3, max_tokens=8)
    # The other two choices took the prompt's two full blocks from the prefix cache.
    assert engine.stats()["cached_prompt_tokens"] - before >= 2 * 32
    b = _complete(client, prompt=LONG_PROMPT, temperature=1.0, seed=7, n=3, max_tokens=8)
    assert [c.index for c in a.choices] == [0, 1, 2]
    choices = [_ids(c) for c in a.choices]
    assert choices == [_ids(c) for c in b.choices]
    assert len({tuple(c) for c in choices}) > 1
    assert a.usage.completion_tokens == sum(len(c) for c in choices)
    assert a.usage.prompt_tokens == len(LONG_PROMPT)
    # Choice 0 is what one request with the seed draws.
    single = _complete(client, prompt=LONG_PROMPT, temperature=1.0, seed=7, max_tokens=8)
    assert _ids(single.choices[0]) == choices[0]
    request = engine.submit(LONG_PROMPT, 8, temperature=1.0, seed=7, n=3)
    assert request.result(timeout=60) == choices


def test_streamed_choices_add_up_to_the_whole(served):
    engine, client = served
    whole = _complete(client, temperature=1.0, seed=9, n=2, max_tokens=8,
                      extra_body={"ignore_eos": True})
    texts = {0: "", 1: ""}
    finishes = {}
    for chunk in _complete(client, temperature=1.0, seed=9, n=2, max_tokens=8, stream=True,
                           extra_body={"ignore_eos": True}):
        for c in chunk.choices:
            texts[c.index] += c.text
            if c.finish_reason:
                finishes[c.index] = c.finish_reason
    assert texts == {c.index: c.text for c in whole.choices}
    assert finishes == {0: "length", 1: "length"}


def test_penalties_and_min_p_give_the_engines_tokens(served):
    engine, client = served
    options = dict(presence_penalty=0.7, frequency_penalty=1.3, repetition_penalty=1.5,
                   min_p=0.05)
    got = _ids(_complete(client, temperature=0.8, seed=5, max_tokens=10,
                         extra_body={"repetition_penalty": 1.5, "min_p": 0.05,
                                     "ignore_eos": True},
                         presence_penalty=0.7, frequency_penalty=1.3).choices[0])
    want = engine.submit(PROMPT, 10, temperature=0.8, seed=5, stop_ids=(), **options)
    assert got == want.result(timeout=60)
    plain = engine.submit(PROMPT, 10, temperature=0.8, seed=5, stop_ids=()).result(timeout=60)
    assert got != plain


def test_stop_token_ids_end_a_choice(served):
    engine, client = served
    greedy = _ids(_complete(client, temperature=0, max_tokens=6).choices[0])
    stopped = _complete(client, temperature=0, max_tokens=6,
                        extra_body={"stop_token_ids": [greedy[2]]}).choices[0]
    assert _ids(stopped) == greedy[:3] and stopped.finish_reason == "stop"


def test_chat_takes_the_options_too(tmp_path):
    checkpoint = chat_checkpoint(tmp_path / "hf", "llama3")
    path = tmp_path / "model.axe"
    axrt.llm.convert(checkpoint, path, weights="f32", cuda=False)
    with axrt.llm.Engine(path) as engine, \
            ServerThread(create_app(engine, model_name="tiny")) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="-")
        token = engine.tokenizer.token_to_id("the")
        reply = client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hi"}], n=2, seed=4,
            max_completion_tokens=3, temperature=1.0, logit_bias={str(token): 100},
            logprobs=True)
        assert [c.index for c in reply.choices] == [0, 1]
        for choice in reply.choices:
            assert choice.message.content == "thethethe"
            assert [e.token for e in choice.logprobs.content] == ["the"] * 3
        assert reply.usage.completion_tokens == 6
