"""Chat completions (docs/serving.md, "Chat"): the checkpoint's template kept by the converter,
rendered as transformers renders it, served at /v1/chat/completions and checked with the
openai client against transformers' greedy tokens; the refusals; the terminal chat."""
import io
import json

import numpy as np
import pytest

import axrt.llm
from axrt.llm.chat import ChatError, ChatTemplate, check_messages

pytest.importorskip("jinja2")
pytest.importorskip("tokenizers")
openai = pytest.importorskip("openai")
pytest.importorskip("starlette")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from axrt.llm.server import ServerThread, create_app  # noqa: E402
from chat_support import chat_checkpoint, transformers_greedy  # noqa: E402
from serving_support import ids_text  # noqa: E402

CONVERSATIONS = [
    [{"role": "user", "content": "How does the serving engine schedule requests?"}],
    [{"role": "system", "content": "  You answer briefly.  "},
     {"role": "user", "content": "What is a KV cache?"},
     {"role": "assistant", "content": "The keys and values of earlier tokens."},
     {"role": "user", "content": [{"type": "text", "text": "And its blocks?"},
                                  {"type": "text", "text": "Say more."}]}],
]


@pytest.fixture(scope="module", params=["llama3", "llama2"])
def chat_model(request, tmp_path_factory):
    """(checkpoint directory, converted file, transformers' tokenizer) of each kind."""
    root = tmp_path_factory.mktemp(f"chat-{request.param}")
    checkpoint = chat_checkpoint(root / "hf", request.param)
    path = root / "model.axe"
    axrt.llm.convert(checkpoint, path, weights="f32", cuda=False)
    tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint)
    return checkpoint, path, tokenizer


def _hf_ids(tokenizer, messages):
    """transformers' prompt ids of `messages` (text parts joined with newlines, as the
    server gives them to the template)."""
    plain = [{"role": m["role"], "content": m["content"] if isinstance(m["content"], str)
              else "\n".join(p["text"] for p in m["content"])} for m in messages]
    out = tokenizer.apply_chat_template(plain, add_generation_prompt=True, tokenize=True)
    return list(out["input_ids"] if hasattr(out, "keys") else out)


def test_the_converter_keeps_the_template_and_its_special_tokens(chat_model):
    checkpoint, path, tokenizer = chat_model
    with axrt.llm.Engine(path) as engine:
        template = engine.chat_template
    assert template is not None
    assert template.special_tokens["bos_token"] == tokenizer.bos_token
    assert template.special_tokens["eos_token"] == tokenizer.eos_token
    assert template.source == tokenizer.chat_template


@pytest.mark.parametrize("conversation", range(len(CONVERSATIONS)))
def test_prompts_are_transformers_apply_chat_template(chat_model, conversation):
    checkpoint, path, tokenizer = chat_model
    messages = CONVERSATIONS[conversation]
    with axrt.llm.Engine(path) as engine:
        ids = engine.chat_prompt(messages)
        text = engine.chat_template.render(messages)
    assert ids.dtype == np.int32
    assert ids.tolist() == _hf_ids(tokenizer, messages)
    plain = [dict(m, content=m["content"] if isinstance(m["content"], str) else
                  "\n".join(p["text"] for p in m["content"])) for m in messages]
    assert text == tokenizer.apply_chat_template(plain, add_generation_prompt=True,
                                                 tokenize=False)


def test_chat_equals_transformers_greedy_output(chat_model):
    checkpoint, path, tokenizer = chat_model
    messages = CONVERSATIONS[1]
    ids = _hf_ids(tokenizer, messages)
    config = json.loads((checkpoint / "config.json").read_text())
    eos_ids = config["eos_token_id"] if isinstance(config["eos_token_id"], list) \
        else [config["eos_token_id"]]
    want = transformers_greedy(checkpoint, ids, 12, eos_ids)
    want_text = ids_text(tokenizer, ids, want)
    with axrt.llm.Engine(path) as engine, \
            ServerThread(create_app(engine, model_name="tiny")) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="-")
        reply = client.chat.completions.create(model="tiny", messages=messages, max_tokens=12,
                                               temperature=0, logprobs=True, top_logprobs=2)
        choice = reply.choices[0]
        assert choice.message.role == "assistant"
        assert choice.message.content == want_text
        assert choice.finish_reason == ("stop" if want[-1] in eos_ids else "length")
        assert reply.usage.prompt_tokens == len(ids)
        assert reply.usage.completion_tokens == len(want)
        assert reply.object == "chat.completion" and reply.id.startswith("chatcmpl-")
        entries = choice.logprobs.content
        assert len(entries) >= 1 and all(len(e.top_logprobs) == 2 for e in entries)
        assert all(e.logprob <= 0 and e.bytes is not None for e in entries)

        chunks = list(client.chat.completions.create(
            model="tiny", messages=messages, max_tokens=12, temperature=0, stream=True,
            stream_options={"include_usage": True}))
        assert chunks[0].choices[0].delta.role == "assistant"
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert streamed == want_text
        finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
        assert finishes[-1] == choice.finish_reason and not any(finishes[:-1])
        assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == len(want)
        assert all(c.object == "chat.completion.chunk" for c in chunks)


def _post(server, body):
    import urllib.error
    import urllib.request

    request = urllib.request.Request(server.url + "/v1/chat/completions",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


BAD = [
    ({"messages": []}, "messages", "empty"),
    ({"messages": "hi"}, "messages", "list"),
    ({"messages": [{"role": "robot", "content": "hi"}]}, "messages", "robot"),
    ({"messages": [{"role": "user", "content": 3}]}, "messages", "content"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
     "messages", "image_url"),
    ({"messages": [{"role": "user"}]}, "messages", "no content"),
    ({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]},
     "tools", "tools"),
    ({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}, "top_logprobs",
     "logprobs"),
    ({"messages": [{"role": "user", "content": "x"}], "logprobs": True, "top_logprobs": 21},
     "top_logprobs", "[0, 20]"),
    ({"messages": [{"role": "user", "content": "word " * 400}]}, "messages",
     "maximum context length"),
    ({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 10**6},
     "max_tokens", "maximum context length"),
    ({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}},
     "response_format", "structured"),
]


def test_bad_chats_get_400_with_openai_error_bodies(chat_model):
    checkpoint, path, tokenizer = chat_model
    with axrt.llm.Engine(path) as engine, \
            ServerThread(create_app(engine, model_name="tiny")) as server:
        for body, param, words in BAD:
            status, answer = _post(server, {"model": "tiny", **body})
            assert status == 400, (body, answer)
            error = answer["error"]
            assert error["type"] == "invalid_request_error" and error["param"] == param, answer
            assert words in error["message"], answer
        if "[INST]" in tokenizer.chat_template:  # the template's own refusal
            status, answer = _post(server, {"model": "tiny", "messages": [
                {"role": "user", "content": "a"}, {"role": "user", "content": "b"}]})
            assert status == 400 and "alternate" in answer["error"]["message"]
        assert engine.stats()["requests_finished"] == 0  # nothing reached the engine


def test_a_model_without_a_template_refuses_chat_until_given_one(tmp_path):
    checkpoint = chat_checkpoint(tmp_path / "hf", "llama3", template=False)
    path = tmp_path / "model.axe"
    axrt.llm.convert(checkpoint, path, weights="f32", cuda=False)
    template_file = tmp_path / "template.jinja"
    template_file.write_text("{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
                             "{% if add_generation_prompt %}>{% endif %}")
    messages = [{"role": "user", "content": "hello"}]
    with axrt.llm.Engine(path) as engine:
        assert engine.chat_template is None
        with pytest.raises(ChatError, match="no chat template"):
            engine.chat_prompt(messages)
        with ServerThread(create_app(engine, model_name="tiny")) as server:
            status, answer = _post(server, {"model": "tiny", "messages": messages})
            assert status == 400 and "no chat template" in answer["error"]["message"]
        with ServerThread(create_app(engine, model_name="tiny",
                                     chat_template=template_file)) as server:
            status, answer = _post(server, {"model": "tiny", "messages": messages,
                                            "max_tokens": 2})
            assert status == 200, answer
            assert answer["usage"]["prompt_tokens"] == len(
                engine.tokenizer.encode("hello\n>", add_special_tokens=False).ids)
    # The converter takes one too.
    axrt.llm.convert(checkpoint, path, weights="f32", cuda=False, chat_template=template_file)
    with axrt.llm.Engine(path) as engine:
        assert engine.chat_template.render(messages) == "hello\n>"
        assert engine.chat_template.special_tokens["eos_token"] == "<|eot_id|>"


def test_templates_that_do_not_compile_or_misbehave_are_refused(tmp_path):
    bad = tmp_path / "bad.jinja"
    bad.write_text("{% for m in messages %}{{ m['content'] }")
    with pytest.raises(ChatError, match="does not compile"):
        ChatTemplate.from_file(bad)
    escape = ChatTemplate("{{ messages.__class__.__mro__ }}")
    with pytest.raises(ChatError, match="refused"):
        escape.render([{"role": "user", "content": "x"}])
    namespace = ChatTemplate("{% set ns = namespace(_secret=1) %}{{ ns }}")
    with pytest.raises(ChatError, match="refused"):
        namespace.render([{"role": "user", "content": "x"}])
    # What the sandbox offers: tojson keeps non-ASCII characters; strftime_now; dict.
    fine = ChatTemplate("{{ messages[0] | tojson }}|{{ dict(a=1) | tojson(sort_keys=True) }}|"
                        "{{ strftime_now('%Y') | length }}")
    assert fine.render([{"role": "user", "content": "é"}]) == \
        '{"role": "user", "content": "é"}|{"a": 1}|4'
    with pytest.raises(ChatError, match="tool calls"):
        check_messages([{"role": "assistant", "content": "x", "tool_calls": [{}]}])


def test_terminal_chat_streams_replies_and_keeps_the_conversation(chat_model, monkeypatch):
    checkpoint, path, tokenizer = chat_model
    from axrt.llm.chat_terminal import Chat

    with axrt.llm.Engine(path) as engine:
        chat = Chat(engine, engine.chat_template, system="Be brief.", max_tokens=6, seed=3,
                    temperature=0.0)
        out = io.StringIO()
        first = chat.reply("Hello there", out)
        assert out.getvalue() == first + "\n"
        second = chat.reply("And then?", out)
        assert [m["role"] for m in chat.messages] == ["system", "user", "assistant", "user",
                                                      "assistant"]
        assert chat.messages[2]["content"] == first and chat.messages[4]["content"] == second
        ids = engine.chat_prompt(chat.messages[:4])
        want = engine.generate([ids], 6)[0]
        assert second == ids_text(tokenizer, ids.tolist(), want)
        chat.reset()
        assert chat.messages == [{"role": "system", "content": "Be brief."}]


@pytest.mark.parametrize("chat_model", ["llama3"], indirect=True)  # the terminal's path is one
def test_the_chat_command_reads_messages_and_prints_replies(chat_model):
    import subprocess
    import sys

    checkpoint, path, tokenizer = chat_model
    run = subprocess.run([sys.executable, "-m", "axrt.llm", "chat", str(path), "--max-tokens",
                          "4", "--temperature", "0", "--system", "Be brief."],
                         input="Hello there\n/reset\n\nAnd then?\n/exit\nnot read\n",
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    want = ""  # each reply and a newline; /reset and the empty line add none
    with axrt.llm.Engine(path) as engine:
        for message in ["Hello there", "And then?"]:
            ids = engine.chat_prompt([{"role": "system", "content": "Be brief."},
                                      {"role": "user", "content": message}])
            want += ids_text(tokenizer, ids.tolist(), engine.generate([ids], 4)[0]) + "\n"
    assert run.stdout == want
    missing = subprocess.run([sys.executable, "-m", "axrt.llm", "chat", str(path),
                              "--chat-template", str(checkpoint / "no-such-file.jinja")],
                             input="", capture_output=True, text=True, timeout=120)
    assert missing.returncode == 1 and "no-such-file.jinja" in missing.stderr
