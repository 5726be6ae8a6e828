"""Text in and out with real tokenizers (tests/python/chat_support.py): a byte-level BPE in
Llama 3's manner and a SentencePiece-like one with byte fallback in Llama 2's. Characters of
several bytes split over tokens never show as U+FFFD while they stream, and the streamed
text is the detokenized whole."""
import pytest

import axrt.llm
from axrt.llm.detokenize import Completion, _byte_level_table
from axrt.llm.engine import TokenEvent

tokenizers = pytest.importorskip("tokenizers")
openai = pytest.importorskip("openai")
pytest.importorskip("starlette")

from axrt.llm.server import ServerThread, create_app  # noqa: E402
from chat_support import chat_checkpoint  # noqa: E402
from serving_support import ids_text  # noqa: E402

TEXT = "naïve café — 日本語のテキスト, emoji 🙂🚀 and ok"


@pytest.fixture(scope="module", params=["llama3", "llama2"])
def model(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"tok-{request.param}")
    checkpoint = chat_checkpoint(root / "hf", request.param, template=False)
    path = root / "model.axe"
    axrt.llm.convert(checkpoint, path, weights="f32", cuda=False)
    tokenizer = tokenizers.Tokenizer.from_file(str(checkpoint / "tokenizer.json"))
    return request.param, path, tokenizer


def test_multibyte_characters_are_split_over_tokens(model):
    kind, _, tokenizer = model
    ids = tokenizer.encode(TEXT).ids
    pieces = [tokenizer.decode([t], skip_special_tokens=True) for t in ids]
    # Some token holds part of a character only: decoded alone it is U+FFFD.
    assert any("\ufffd" in p for p in pieces)
    if kind == "llama2":
        assert any(tokenizer.id_to_token(t).startswith("<0x") for t in ids)  # byte fallback
        assert ids[0] == tokenizer.token_to_id("<s>")  # the post-processor's BOS
    assert tokenizer.decode(ids, skip_special_tokens=True) == TEXT


def test_streamed_pieces_are_whole_characters_and_add_up(model):
    _, _, tokenizer = model
    prompt = tokenizer.encode("Say:").ids
    tokens = tokenizer.encode(TEXT, add_special_tokens=False).ids
    for stops in ((), ("テキ",), ("🚀",)):
        completion = Completion(tokenizer, prompt, stops, None)
        pieces = [completion.add(TokenEvent(t, i))[0] for i, t in enumerate(tokens)]
        pieces.append(completion.finish()[0])
        assert not any("\ufffd" in p for p in pieces)
        whole = ids_text(tokenizer, prompt, tokens)
        if stops:
            assert "".join(pieces) == whole[:whole.index(stops[0])]
        else:
            assert "".join(pieces) == whole


def _byte_token(tokenizer, kind: str, byte: int) -> int:
    """The token of one byte: <0xNN> (byte fallback) or the byte's character (byte-level)."""
    if kind == "llama2":
        return tokenizer.token_to_id(f"<0x{byte:02X}>")
    char = next(c for c, b in _byte_level_table().items() if b == byte)
    return tokenizer.token_to_id(char)


def test_bytes_that_are_not_utf8_stream_as_they_decode_whole(model):
    """'h' is whole on its own, but h, 0xCD is not UTF-8; then a whole character of three
    byte tokens. Decoded at once, a byte-fallback tokenizer writes a run of byte tokens that
    is not UTF-8 as one U+FFFD per token (the 'h' too), a byte-level one each invalid byte
    as U+FFFD: the stream must add up to that either way."""
    kind, _, tokenizer = model
    the = tokenizer.encode("the", add_special_tokens=False).ids
    tokens = ([_byte_token(tokenizer, kind, b) for b in (0x41, 0x68, 0xCD)] + the +
              [_byte_token(tokenizer, kind, b) for b in "日".encode()] + the)
    assert None not in tokens
    prompt = tokenizer.encode("Say:").ids
    completion = Completion(tokenizer, prompt, (), None)
    streamed = [completion.add(TokenEvent(t, i))[0] for i, t in enumerate(tokens)]
    streamed.append(completion.finish()[0])
    whole = ids_text(tokenizer, prompt, tokens)
    assert "".join(streamed) == whole
    assert "\ufffd" in whole and "日" in whole
    assert not any("\ufffd" in p and "日" in p for p in streamed)


def test_served_text_is_the_detokenized_whole(model):
    _, path, tokenizer = model
    prompt = "The 日本語 engine"
    with axrt.llm.Engine(path) as engine, \
            ServerThread(create_app(engine, model_name="tiny")) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="-")
        options = dict(model="tiny", prompt=prompt, max_tokens=48, temperature=1.5, seed=11,
                       logprobs=0, extra_body={"ignore_eos": True,
                                               "return_tokens_as_token_ids": True})
        whole = client.completions.create(**options)
        ids = [int(t.split(":")[1]) for t in whole.choices[0].logprobs.tokens]
        assert len(ids) == 48
        prompt_ids = tokenizer.encode(prompt).ids
        assert whole.choices[0].text == ids_text(tokenizer, prompt_ids, ids)
        chunks = [c.choices[0].text for c in client.completions.create(stream=True, **options)]
        assert "".join(chunks) == whole.choices[0].text
        # Text is held back while a character is incomplete: U+FFFD shows only where the
        # tokens' bytes are not UTF-8 at all, and then in the whole as well.
        if "\ufffd" not in whole.choices[0].text:
            assert not any("\ufffd" in c for c in chunks)
