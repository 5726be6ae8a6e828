"""Checkpoints with real tokenizers and chat templates, made locally with a fixed seed for the
chat and tokenizer tests: the tiny Llama's weights (tests/llm/data/tiny-llama) beside

- a byte-level BPE tokenizer in Llama 3's manner, with header and end-of-turn special
  tokens inside the model's vocabulary, and a template that uses them;
- a SentencePiece-like BPE in Llama 2's manner: "▁" for spaces, a BOS added by the
  post-processor, byte fallback (<0x00>..<0xFF>) for characters outside the vocabulary,
  and an [INST] template that refuses roles out of turn.

Both are trained by the tokenizers library on the project's documentation, so that
ordinary words are whole tokens and rarer characters are not.
"""
import json
import shutil
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "llm" / "data"
DOCS = Path(__file__).resolve().parent.parent.parent / "docs"

LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                   "<|end_header_id|>", "<|eot_id|>"]

# Block tags on lines of their own: trim_blocks and lstrip_blocks decide the whitespace.
LLAMA3_TEMPLATE = """{{ bos_token }}
{% for message in messages %}
{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}{{ message['content'] | trim }}{{ '<|eot_id|>' }}
{% endfor %}
{% if add_generation_prompt %}
{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{% endif %}
"""

LLAMA2_TEMPLATE = """{% if messages[0]['role'] == 'system' %}
    {% set system = '<<SYS>>\\n' + messages[0]['content'] | trim + '\\n<</SYS>>\\n\\n' %}
    {% set turns = messages[1:] %}
{% else %}
    {% set system = '' %}
    {% set turns = messages %}
{% endif %}
{% for message in turns %}
    {% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
    {% endif %}
    {% if message['role'] == 'user' %}
        {{ bos_token + '[INST] ' + (system if loop.first else '') + message['content'] | trim + ' [/INST]' }}
    {% else %}
        {{ ' ' + message['content'] | trim + ' ' + eos_token }}
    {% endif %}
{% endfor %}
"""


def _docs():
    return [p.read_text(encoding="utf-8") for p in sorted(DOCS.glob("*.md"))]


def byte_level_tokenizer(vocab_size: int) -> str:
    """Llama 3's kind: byte-level BPE, its special tokens first (ids 0..4)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=LLAMA3_SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(_docs(), trainer=trainer)
    return tokenizer.to_str()


def sentencepiece_like_tokenizer(vocab_size: int) -> str:
    """Llama 2's kind: "▁" for spaces (one prepended), <unk> <s> </s> at ids 0..2, the 256
    byte tokens <0x00>..<0xFF> at 3..258 as ordinary entries, merges trained on the rest."""
    from tokenizers import (Tokenizer, decoders, models, normalizers, pre_tokenizers,
                            processors, trainers)

    specials = ["<unk>", "<s>", "</s>"]
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                                 normalizers.Replace(" ", "\u2581")])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - len(byte_tokens),
                                  special_tokens=specials, show_progress=False)
    # Trained word by word (pieces never span a "▁" that begins a word, as SentencePiece's
    # own), then applied, as Llama 2's tokenizer.json is, without a pre-tokenizer.
    tokenizer.pre_tokenizer = pre_tokenizers.Split("\u2581", "merged_with_next")
    tokenizer.train_from_iterator(_docs(), trainer=trainer)
    spec = json.loads(tokenizer.to_str())
    spec["pre_tokenizer"] = None
    trained = sorted(spec["model"]["vocab"].items(), key=lambda kv: kv[1])
    pieces = [p for p, _ in trained if p not in specials]
    vocab = {p: i for i, p in enumerate(specials + byte_tokens + pieces)}
    assert len(vocab) <= vocab_size
    spec["model"]["vocab"] = vocab
    spec["model"]["byte_fallback"] = True
    spec["model"]["fuse_unk"] = True
    for added in spec["added_tokens"]:
        added["id"] = vocab[added["content"]]
    spec["decoder"] = json.loads(decoders.Sequence([
        decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
        decoders.Strip(" ", 1, 0)]).__getstate__())
    spec["post_processor"] = json.loads(processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)]).__getstate__())
    return json.dumps(spec)


def chat_checkpoint(out: Path, kind: str, *, template=True) -> Path:
    """A checkpoint directory: the tiny Llama's weights with a tokenizer of `kind`
    ("llama3" or "llama2") and, with `template`, its chat template in
    tokenizer_config.json (llama3) or chat_template.jinja (llama2)."""
    out.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "model.safetensors"):
        shutil.copy(DATA / "tiny-llama" / name, out / name)
    vocab = json.loads((DATA / "tiny-llama" / "config.json").read_text())["vocab_size"]
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 256}
    generation = {"bos_token_id": 1, "eos_token_id": 2}
    if kind == "llama3":
        (out / "tokenizer.json").write_text(byte_level_tokenizer(vocab), encoding="utf-8")
        config.update(bos_token="<|begin_of_text|>", eos_token="<|eot_id|>")
        if template:
            config["chat_template"] = LLAMA3_TEMPLATE
        generation = {"bos_token_id": 0, "eos_token_id": [1, 4]}
    else:
        (out / "tokenizer.json").write_text(sentencepiece_like_tokenizer(vocab),
                                            encoding="utf-8")
        config.update(bos_token={"__type": "AddedToken", "content": "<s>", "special": True,
                                 "lstrip": False, "rstrip": False, "normalized": False,
                                 "single_word": False}, eos_token="</s>",
                      unk_token="<unk>")
        if template:
            (out / "chat_template.jinja").write_text(LLAMA2_TEMPLATE, encoding="utf-8")
    (out / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    model_config = json.loads((out / "config.json").read_text())
    model_config.update(bos_token_id=generation["bos_token_id"],
                        eos_token_id=generation["eos_token_id"])
    (out / "config.json").write_text(json.dumps(model_config), encoding="utf-8")
    (out / "generation_config.json").write_text(json.dumps(generation), encoding="utf-8")
    return out


def transformers_greedy(checkpoint: Path, ids, max_new_tokens: int, eos_ids):
    """transformers' greedy continuation of `ids` (float32), stopping after an id of
    `eos_ids`."""
    import torch
    from transformers import LlamaForCausalLM

    torch.set_num_threads(1)
    model = LlamaForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).eval()
    tokens = []
    with torch.no_grad():
        for _ in range(max_new_tokens):  # the whole sequence each time: short, and no cache API
            logits = model(torch.tensor([list(ids) + tokens], dtype=torch.long)).logits
            token = int(torch.argmax(logits[0, -1]))
            tokens.append(token)
            if token in eos_ids:
                break
    return tokens
