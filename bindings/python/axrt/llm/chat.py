"""Chat templates: a conversation's messages rendered into the prompt its model was trained on
(docs/serving.md, "Chat").

A converted model carries its checkpoint's chat template and the special
tokens the template reads (:class:`ChatTemplate`, stored under
:data:`~axrt.llm.config.CHAT_KEY`). Rendering follows what transformers'
``apply_chat_template`` does, so that the same messages give the same text
and, tokenized without added special tokens, the same ids: Jinja2's
immutable sandbox with ``trim_blocks`` and ``lstrip_blocks``, the loop
controls, a ``tojson`` that keeps non-ASCII characters and takes
``indent``, ``separators`` and ``sort_keys``, the globals
``raise_exception``, ``strftime_now``, ``namespace`` and ``dict``, the
``{% generation %}`` block, and the template's variables: ``messages``,
``add_generation_prompt``, ``tools`` and ``documents`` (None), and each
special token (``bos_token``, ``eos_token``, ...).

Messages are checked before rendering (:func:`check_messages`): roles
``system``, ``user`` and ``assistant``; content a string or a list of text
parts, which are joined with newlines (a template then sees a string, as
most templates expect).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

from .._extras import require
from .config import CHAT_KEY

#: The roles a message may have.
ROLES = ("system", "user", "assistant")
#: The special tokens a template may read, as transformers names them.
SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                  "mask_token")
#: Where a checkpoint keeps its template (the first found wins), as transformers writes it.
TEMPLATE_FILE = "chat_template.jinja"
LEGACY_TEMPLATE_FILE = "chat_template.json"


class ChatError(ValueError):
    """Messages the template cannot render, or a template that cannot be read; `param` names
    the request field at fault."""

    def __init__(self, message: str, param: str = "messages") -> None:
        super().__init__(message)
        self.param = param


def _token_text(value: Any) -> Optional[str]:
    """A special token as tokenizer_config.json writes it: a string, or an object with
    ``content``."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _named_template(value: Any, source: str) -> Optional[str]:
    """The template of tokenizer_config.json's ``chat_template``: a string, or a list of named
    templates of which the one named ``default`` is used."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        named = {t.get("name"): t.get("template") for t in value if isinstance(t, Mapping)}
        if isinstance(named.get("default"), str):
            return named["default"]
        raise ChatError(f"{source}: the checkpoint has several chat templates "
                        f"({', '.join(sorted(str(n) for n in named))}) and none named "
                        "'default': give one with --chat-template FILE", "chat_template")
    raise ChatError(f"{source}: 'chat_template' is neither a string nor a list of named "
                    "templates", "chat_template")


@dataclass(frozen=True)
class ChatTemplate:
    """A Jinja2 chat template and the special tokens it reads (``{"bos_token": "<s>", ...}``)."""

    source: str
    special_tokens: Dict[str, str] = field(default_factory=dict)

    # -- reading and storing ----------------------------------------------------------------

    @classmethod
    def from_checkpoint(cls, directory: Path) -> Optional["ChatTemplate"]:
        """The template of a Hugging Face model directory, or None when it has none: from
        chat_template.jinja, else chat_template.json, else tokenizer_config.json's
        ``chat_template``; the special tokens from tokenizer_config.json, then
        special_tokens_map.json for those it leaves out."""
        directory = Path(directory)
        config = _read_json(directory / "tokenizer_config.json")
        source = None
        if (directory / TEMPLATE_FILE).is_file():
            source = (directory / TEMPLATE_FILE).read_text(encoding="utf-8")
        elif (directory / LEGACY_TEMPLATE_FILE).is_file():
            legacy = _read_json(directory / LEGACY_TEMPLATE_FILE)
            source = _named_template(legacy.get("chat_template"), LEGACY_TEMPLATE_FILE)
        else:
            source = _named_template(config.get("chat_template"), "tokenizer_config.json")
        if source is None:
            return None
        return cls(source, cls.special_tokens_of(directory))

    @staticmethod
    def special_tokens_of(directory: Path) -> Dict[str, str]:
        """The special tokens of a Hugging Face model directory (``{"bos_token": "<s>", ...}``):
        tokenizer_config.json's, then special_tokens_map.json's for those it leaves out."""
        tokens: Dict[str, str] = {}
        for name_of_file in ("tokenizer_config.json", "special_tokens_map.json"):
            values = _read_json(Path(directory) / name_of_file)
            for name in SPECIAL_TOKENS:
                text = _token_text(values.get(name))
                if text is not None:
                    tokens.setdefault(name, text)
        return tokens

    @classmethod
    def from_file(cls, path: Path, special_tokens: Optional[Dict[str, str]] = None
                  ) -> "ChatTemplate":
        """A template from a file (``--chat-template``): a Jinja2 template, or a JSON file
        holding ``chat_template`` as transformers writes one; `special_tokens` as the model's."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ChatError(f"cannot read the chat template {path}: {e}", "chat_template") \
                from None
        if path.suffix == ".json":
            try:
                text = _named_template(json.loads(text).get("chat_template"), str(path))
            except (ValueError, AttributeError) as e:
                raise ChatError(f"{path}: not a JSON object with 'chat_template' ({e})",
                                "chat_template") from None
            if text is None:
                raise ChatError(f"{path} holds no 'chat_template'", "chat_template")
        template = cls(text, dict(special_tokens or {}))
        template.compiled()  # a syntax error is the file's, said now
        return template

    @classmethod
    def of_model(cls, executable) -> Optional["ChatTemplate"]:
        """The template a converted model carries (the head rank's, in a set), or None."""
        text = executable.metadata.get(CHAT_KEY)
        return None if text is None else cls.from_json(text)

    def prompt_ids(self, tokenizer, messages: Sequence[Mapping[str, Any]]):
        """The int32 token ids of `messages` rendered with the generation prompt, tokenized
        without added special tokens (the template writes them), as transformers'
        ``apply_chat_template(messages, add_generation_prompt=True)`` gives them."""
        import numpy as np

        text = self.render(messages, add_generation_prompt=True)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ChatError(f"the messages are not valid Unicode: {e.reason}") from None
        return np.asarray(tokenizer.encode(text, add_special_tokens=False).ids, np.int32)

    def to_json(self) -> str:
        return json.dumps({"template": self.source, "special_tokens": self.special_tokens},
                          ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> "ChatTemplate":
        data = json.loads(text)
        return cls(data["template"], dict(data.get("special_tokens") or {}))

    # -- rendering --------------------------------------------------------------------------

    def compiled(self):
        """The template compiled in the sandbox; ChatError for a syntax error."""
        jinja2 = require("jinja2", "chat templates (axrt.llm chat, /v1/chat/completions)")
        try:
            return _compile(self.source)
        except jinja2.TemplateSyntaxError as e:
            raise ChatError(f"the chat template does not compile: {e.message} (line {e.lineno})",
                            "chat_template") from None

    def render(self, messages: Sequence[Mapping[str, Any]], *,
               add_generation_prompt: bool = True) -> str:
        """The prompt of `messages` (checked by :func:`check_messages`), ending with the
        assistant's header when `add_generation_prompt`. ChatError when the template refuses
        them (its ``raise_exception``) or fails on them."""
        jinja2 = require("jinja2", "chat templates (axrt.llm chat, /v1/chat/completions)")
        template = self.compiled()
        variables = dict(self.special_tokens)
        variables.update(messages=check_messages(messages), tools=None, documents=None,
                         add_generation_prompt=bool(add_generation_prompt))
        try:
            return template.render(**variables)
        except jinja2.TemplateError as e:  # raise_exception, a sandbox refusal, an undefined
            raise ChatError(f"the chat template refused the messages: {e}") from None
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:
            raise ChatError(f"the chat template failed on the messages: "
                            f"{type(e).__name__}: {e}") from None


def _read_json(path: Path) -> Dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise ChatError(f"{path.name} is not valid JSON: {e}", "chat_template") from None
    return data if isinstance(data, dict) else {}


def check_messages(messages: Any) -> List[Dict[str, Any]]:
    """`messages` as the template sees them: a non-empty list of objects with a ``role`` of
    :data:`ROLES` and a ``content`` that is a string or a list of text parts (joined with
    newlines), and an optional string ``name``; fields that are None are left out, as
    transformers does. ChatError naming the first bad message otherwise."""
    if not isinstance(messages, list):
        raise ChatError("'messages' must be a list of messages")
    if not messages:
        raise ChatError("'messages' is empty: a chat needs at least one message")
    checked = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping):
            raise ChatError(f"{where} must be an object with 'role' and 'content', not "
                            f"{json.dumps(message)[:80]}")
        role = message.get("role")
        if not isinstance(role, str):
            raise ChatError(f"{where}.role must be a string")
        if role not in ROLES:
            raise ChatError(f"{where}.role '{role}' is not supported: roles are "
                            f"{', '.join(ROLES)}")
        for key in ("tool_calls", "function_call", "tool_call_id"):
            if message.get(key) is not None:
                raise ChatError(f"{where}.{key}: tool calls are not supported")
        if "content" not in message or message["content"] is None:
            raise ChatError(f"{where} has no content")
        content = message["content"]
        if isinstance(content, list):
            content = _join_text_parts(content, where)
        elif not isinstance(content, str):
            raise ChatError(f"{where}.content must be a string or a list of text parts")
        out = {"role": role, "content": content}
        name = message.get("name")
        if name is not None:
            if not isinstance(name, str):
                raise ChatError(f"{where}.name must be a string")
            out["name"] = name
        checked.append(out)
    return checked


def _join_text_parts(parts: List[Any], where: str) -> str:
    texts = []
    for j, part in enumerate(parts):
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise ChatError(f"{where}.content[{j}] must be a part with a 'type'")
        if part["type"] != "text":
            raise ChatError(f"{where}.content[{j}]: parts of type '{part['type']}' are not "
                            "supported (text only)")
        if not isinstance(part.get("text"), str):
            raise ChatError(f"{where}.content[{j}].text must be a string")
        texts.append(part["text"])
    return "\n".join(texts)


# -- the sandbox ------------------------------------------------------------------------------


@lru_cache(maxsize=16)
def _compile(source: str):
    return _environment().from_string(source)


@lru_cache(maxsize=1)
def _environment():
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationBlock(jinja2.ext.Extension):
        """``{% generation %}...{% endgeneration %}``: marks the assistant's text for training
        masks; rendering outputs its body unchanged."""

        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body) \
                .set_lineno(lineno)

        def _body(self, caller):
            return caller()

    class Namespace(jinja2.utils.Namespace):
        """Jinja's namespace, refusing attribute names that begin with an underscore."""

        def __init__(*args, **kwargs):  # noqa: N805 (as Jinja's: `self` may be a key)
            self, rest = args[0], args[1:]
            values = dict(*rest, **kwargs)
            for name in values:
                Namespace._check(name)
            jinja2.utils.Namespace.__init__(self, values)

        def __setitem__(self, name, value):
            Namespace._check(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check(name):
            if isinstance(name, str) and name.startswith("_"):
                raise jinja2.exceptions.SecurityError(
                    f"a chat template may not set the attribute {name!r} of a namespace")

    class Dicts:
        """``dict(...)`` and ``dict.fromkeys(...)``, and nothing else of the type."""

        def __call__(self, *args, **kwargs):
            return dict(*args, **kwargs)

        def fromkeys(self, *args, **kwargs):
            return dict.fromkeys(*args, **kwargs)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationBlock, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals.update(raise_exception=raise_exception, strftime_now=strftime_now,
                       namespace=Namespace, dict=Dicts())
    return env
