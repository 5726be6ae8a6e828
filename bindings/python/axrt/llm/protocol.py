"""OpenAI's completions protocol for :mod:`axrt.llm.server` (docs/serving.md): a request
read and checked once, at the edge, and the shapes of the bodies sent back.

:func:`parse_completion_request` checks a request's fields;
:func:`prompt_token_ids` checks its prompt against the model (ids in the
vocabulary, prompt plus ``max_tokens`` within the context) and returns the
int32 ids the engine takes as they are. Both raise :class:`APIError`, a 400
naming the field. Nothing here needs the serve extra.
"""
from __future__ import annotations

import json
import math
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Union

import numpy as np

from .engine import encode_text
from .modelfile import check_token_ids

#: The most alternatives ``logprobs`` may ask for (OpenAI's limit).
MAX_LOGPROBS = 5
#: The most stop strings a request may give (OpenAI's limit).
MAX_STOP_STRINGS = 4


# -- errors ------------------------------------------------------------------------------------


def error_body(message: str, type: str, param: Optional[str] = None,
               code: Optional[str] = None) -> Dict[str, Any]:
    """OpenAI's error object: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


class APIError(Exception):
    """An HTTP error with OpenAI's error body."""

    def __init__(self, status: int, message: str, *, param: Optional[str] = None,
                 code: Optional[str] = None, type: str = "invalid_request_error",
                 headers: Optional[Dict[str, str]] = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.type = type
        self.headers = headers

    def body(self) -> Dict[str, Any]:
        return error_body(self.message, self.type, self.param, self.code)


def _bad(message: str, param: Optional[str] = None, code: Optional[str] = None) -> APIError:
    return APIError(400, message, param=param, code=code)


# -- requests ----------------------------------------------------------------------------------

#: The most choices (`n`) a request may ask for.
MAX_CHOICES = 16
#: The most entries of `logit_bias` (OpenAI's limit), and the bound of each bias.
MAX_LOGIT_BIAS = 300
LOGIT_BIAS_BOUND = 100.0
#: The most alternatives a chat's ``top_logprobs`` may ask for (OpenAI's limit).
MAX_TOP_LOGPROBS = 20


@dataclass
class SamplingParams:
    """What both endpoints take beside the prompt: how many tokens, how they are sampled,
    where they stop, how they are sent. ``max_tokens`` None: up to the model's context."""

    max_tokens: Optional[int] = 16
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: Dict[int, float] = field(default_factory=dict)
    n: int = 1
    seed: Optional[int] = None
    stop: List[str] = field(default_factory=list)
    stop_token_ids: List[int] = field(default_factory=list)
    ignore_eos: bool = False
    stream: bool = False
    include_usage: bool = False

    @property
    def options(self) -> Dict[str, Any]:
        """The options :meth:`axrt.llm.Engine.submit` takes beyond the prompt's and the
        sampler's basics, those that differ from their defaults only."""
        out: Dict[str, Any] = {}
        for key, default in (("min_p", 0.0), ("presence_penalty", 0.0),
                             ("frequency_penalty", 0.0), ("repetition_penalty", 1.0), ("n", 1)):
            if getattr(self, key) != default:
                out[key] = getattr(self, key)
        if self.logit_bias:
            out["logit_bias"] = dict(self.logit_bias)
        return out


@dataclass
class CompletionParams(SamplingParams):
    """A checked ``POST /v1/completions`` request."""

    prompt: Union[str, List[int]] = ""
    logprobs: Optional[int] = None
    tokens_as_ids: bool = False


@dataclass
class ChatParams(SamplingParams):
    """A checked ``POST /v1/chat/completions`` request: `messages` as the client sent them
    (:func:`axrt.llm.chat.check_messages` checks them as the template renders them);
    `logprobs` None, or the alternatives per token (``top_logprobs``, 0 when not given)."""

    messages: List[Any] = field(default_factory=list)
    logprobs: Optional[int] = None


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _optional(body: Dict[str, Any], key: str, default: Any) -> Any:
    value = body.get(key)
    return default if value is None else value


def _int_field(body: Dict[str, Any], key: str, default: Any, lo: Optional[int] = None,
               hi: Optional[int] = None) -> Any:
    value = _optional(body, key, default)
    if value is default:
        return value
    if not _is_int(value):
        raise _bad(f"'{key}' must be an integer, not {json.dumps(value)}", key, "invalid_type")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        bounds = (f"at least {lo}" if hi is None else f"in [{lo}, {hi}]" if lo is not None
                  else f"at most {hi}")
        raise _bad(f"'{key}' must be {bounds}, not {value}", key, "invalid_value")
    return value


def _float_field(body: Dict[str, Any], key: str, default: float, check: Callable[[float], bool],
                 requirement: str) -> float:
    value = _optional(body, key, default)
    if not _is_number(value):
        raise _bad(f"'{key}' must be a number, not {json.dumps(value)}", key, "invalid_type")
    value = float(value)
    if not (math.isfinite(value) and check(value)):
        raise _bad(f"'{key}' must be {requirement}, not {value}", key, "invalid_value")
    return value


def _bool_field(body: Dict[str, Any], key: str, default: bool) -> bool:
    value = _optional(body, key, default)
    if not isinstance(value, bool):
        raise _bad(f"'{key}' must be true or false, not {json.dumps(value)}", key, "invalid_type")
    return value


def _prompt_field(value: Any) -> Union[str, List[int]]:
    """A string, a list of token ids, or a list holding one of those."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], (str, list)):
        value = value[0]
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(_is_int(t) for t in value):
        return value
    if isinstance(value, list) and value and all(isinstance(p, (str, list)) for p in value):
        raise _bad("one prompt per request: batches of prompts are not supported", "prompt",
                   "unsupported_value")
    if isinstance(value, list) and not value:
        raise _bad("'prompt' is empty", "prompt", "invalid_value")
    raise _bad("'prompt' must be a string, a list of token ids, or a list holding one of those",
               "prompt", "invalid_type")


def _logit_bias_field(body: Dict[str, Any]) -> Dict[int, float]:
    """``{"token id": bias}`` (keys are strings in JSON) as ``{id: bias}``; each bias in
    [-100, 100]. The ids are checked against the vocabulary with the prompt."""
    bias = _optional(body, "logit_bias", {})
    if not isinstance(bias, dict):
        raise _bad("'logit_bias' must be an object of token ids and biases", "logit_bias",
                   "invalid_type")
    if len(bias) > MAX_LOGIT_BIAS:
        raise _bad(f"'logit_bias' holds {len(bias)} entries; at most {MAX_LOGIT_BIAS} are "
                   "allowed", "logit_bias", "invalid_value")
    out: Dict[int, float] = {}
    for key, value in bias.items():
        try:
            token = int(key)
        except (TypeError, ValueError):
            raise _bad(f"'logit_bias' key {json.dumps(key)} is not a token id", "logit_bias",
                       "invalid_value") from None
        if not _is_number(value) or not (math.isfinite(value) and
                                         abs(value) <= LOGIT_BIAS_BOUND):
            raise _bad(f"'logit_bias' of token {key} must be a number in [-100, 100], not "
                       f"{json.dumps(value)}", "logit_bias", "invalid_value")
        out[token] = float(value)
    return out


def _check_model(body: Any, model_name: str) -> None:
    if not isinstance(body, dict):
        raise _bad("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str):
        raise _bad("'model' is required and must be a string", "model", "invalid_type")
    if model != model_name:
        raise _bad(f"the model '{model}' does not exist; this server serves '{model_name}'",
                   "model", "model_not_found")


def _sampling_fields(body: Dict[str, Any], params: SamplingParams) -> None:
    """Reads the fields :class:`SamplingParams` holds into `params`."""
    params.max_tokens = _int_field(body, "max_tokens", params.max_tokens, lo=1)
    # The chat API's newer name; given both, it wins.
    params.max_tokens = _int_field(body, "max_completion_tokens", params.max_tokens, lo=1)
    params.temperature = _float_field(body, "temperature", 1.0, lambda t: t >= 0, ">= 0")
    params.top_p = _float_field(body, "top_p", 1.0, lambda p: 0 < p <= 1, "in (0, 1]")
    params.top_k = _int_field(body, "top_k", 0, lo=-1, hi=2**31 - 1)
    if params.top_k == -1:  # vLLM's spelling of "all tokens"
        params.top_k = 0
    params.min_p = _float_field(body, "min_p", 0.0, lambda p: 0 <= p <= 1, "in [0, 1]")
    for key in ("presence_penalty", "frequency_penalty"):
        setattr(params, key, _float_field(body, key, 0.0, lambda v: -2 <= v <= 2, "in [-2, 2]"))
    params.repetition_penalty = _float_field(body, "repetition_penalty", 1.0,
                                             lambda v: 0 < v <= 100, "in (0, 100]")
    params.logit_bias = _logit_bias_field(body)
    params.n = _int_field(body, "n", 1, lo=1, hi=MAX_CHOICES)
    seed = _optional(body, "seed", None)
    if seed is not None and not _is_int(seed):
        raise _bad(f"'seed' must be an integer, not {json.dumps(seed)}", "seed", "invalid_type")
    params.seed = seed
    stop = _optional(body, "stop", [])
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise _bad("'stop' must be a string or a list of strings (token ids go in "
                   "'stop_token_ids')", "stop", "invalid_type")
    if len(stop) > MAX_STOP_STRINGS:
        raise _bad(f"'stop' holds {len(stop)} strings; at most {MAX_STOP_STRINGS} are allowed",
                   "stop", "invalid_value")
    params.stop = [s for s in stop if s]
    ids = _optional(body, "stop_token_ids", [])
    if not isinstance(ids, list) or not all(_is_int(t) for t in ids):
        raise _bad("'stop_token_ids' must be a list of token ids", "stop_token_ids",
                   "invalid_type")
    params.stop_token_ids = list(ids)
    params.ignore_eos = _bool_field(body, "ignore_eos", False)
    params.stream = _bool_field(body, "stream", False)
    options = _optional(body, "stream_options", {})
    if not isinstance(options, dict):
        raise _bad("'stream_options' must be an object", "stream_options", "invalid_type")
    params.include_usage = _bool_field(options, "include_usage", False)
    if _int_field(body, "best_of", params.n) != params.n:
        raise _bad("'best_of' must equal 'n': every choice generated is returned", "best_of",
                   "unsupported_value")


def parse_completion_request(body: Any, model_name: str) -> CompletionParams:
    """Checks the fields of a completions request (the prompt's against the model is
    :func:`prompt_token_ids`); raises :class:`APIError` (400) naming the first bad field."""
    _check_model(body, model_name)
    if "prompt" not in body or body["prompt"] is None:
        raise _bad("'prompt' is required", "prompt", "missing_required_parameter")
    params = CompletionParams(prompt=_prompt_field(body["prompt"]))
    _sampling_fields(body, params)
    params.logprobs = _int_field(body, "logprobs", None, lo=0, hi=MAX_LOGPROBS)
    if _bool_field(body, "echo", False):
        raise _bad("'echo' is not supported", "echo", "unsupported_value")
    if _optional(body, "suffix", "") != "":
        raise _bad("'suffix' is not supported", "suffix", "unsupported_value")
    params.tokens_as_ids = _bool_field(body, "return_tokens_as_token_ids", False)
    return params


def parse_chat_request(body: Any, model_name: str) -> ChatParams:
    """Checks the fields of a chat completions request; the messages' contents are checked as
    the template renders them (:func:`axrt.llm.chat.check_messages`). Raises
    :class:`APIError` (400) naming the first bad field."""
    _check_model(body, model_name)
    if "messages" not in body or body["messages"] is None:
        raise _bad("'messages' is required", "messages", "missing_required_parameter")
    params = ChatParams(max_tokens=None, messages=body["messages"])
    _sampling_fields(body, params)
    if _bool_field(body, "logprobs", False):
        params.logprobs = _int_field(body, "top_logprobs", 0, lo=0, hi=MAX_TOP_LOGPROBS)
    elif _optional(body, "top_logprobs", None) is not None:
        raise _bad("'top_logprobs' needs 'logprobs': true", "top_logprobs", "invalid_value")
    for key in ("tools", "functions"):
        if _optional(body, key, []) != []:
            raise _bad(f"'{key}' is not supported: this server does not call tools", key,
                       "unsupported_value")
    for key in ("tool_choice", "function_call"):
        if _optional(body, key, "none") not in ("none", "auto"):
            raise _bad(f"'{key}' is not supported: this server does not call tools", key,
                       "unsupported_value")
    response_format = _optional(body, "response_format", {"type": "text"})
    if not isinstance(response_format, dict) or response_format.get("type") != "text":
        raise _bad("'response_format' must be {\"type\": \"text\"}: structured output is "
                   "not supported", "response_format", "unsupported_value")
    modalities = _optional(body, "modalities", ["text"])
    if modalities != ["text"]:
        raise _bad("'modalities' must be [\"text\"]", "modalities", "unsupported_value")
    return params


def prompt_token_ids(params: CompletionParams, tokenizer, vocab_size: int,
                     max_context: int) -> np.ndarray:
    """The prompt of `params` as int32 token ids, checked against the model: a string
    through `tokenizer` (None: the model has none), token ids in ``[0, vocab_size)``, at
    least one token, and the prompt plus ``max_tokens`` within `max_context`
    (:func:`check_against_model`).

    The one check of the prompt on the server's side: the engine takes the ids as
    they are (its C++ core still checks them). Raises :class:`APIError` (400).
    """
    try:
        if isinstance(params.prompt, str):
            if tokenizer is None:
                raise _bad("this model has no tokenizer: give the prompt as a list of token ids",
                           "prompt", "unsupported_value")
            ids = encode_text(tokenizer, params.prompt)
        else:
            ids = check_token_ids(params.prompt, vocab_size)
    except ValueError as e:
        raise _bad(str(e), "prompt", "invalid_value") from None
    check_against_model(ids, params, vocab_size, max_context, "prompt")
    return ids


def check_against_model(ids: np.ndarray, params: SamplingParams, vocab_size: int,
                        max_context: int, prompt_param: str) -> None:
    """Checks the prompt `ids` and the token ids of `params` against the model: at least one
    prompt token, the prompt plus ``max_tokens`` within `max_context` (``max_tokens`` None
    becomes what the context leaves), ``logit_bias`` and ``stop_token_ids`` in the
    vocabulary. `prompt_param` names the prompt's field in errors. Raises
    :class:`APIError` (400)."""
    if ids.size == 0:
        raise _bad(f"the {prompt_param} gives no token", prompt_param, "invalid_value")
    if params.max_tokens is None:
        if ids.size >= max_context:
            raise _bad(f"this model's maximum context length is {max_context} tokens, and the "
                       f"{prompt_param} takes {ids.size}: shorten it", prompt_param,
                       "context_length_exceeded")
        params.max_tokens = max_context - int(ids.size)
    total = ids.size + params.max_tokens
    if total > max_context:
        raise _bad(f"this model's maximum context length is {max_context} tokens, but "
                   f"{total} were requested ({ids.size} in the {prompt_param}, "
                   f"{params.max_tokens} for the completion): shorten the {prompt_param} or "
                   "lower max_tokens",
                   "max_tokens" if ids.size < max_context else prompt_param,
                   "context_length_exceeded")
    for key, tokens in (("logit_bias", params.logit_bias), ("stop_token_ids",
                                                           params.stop_token_ids)):
        for token in tokens:
            if not 0 <= token < vocab_size:
                raise _bad(f"'{key}' names token {token}, outside the vocabulary "
                           f"[0, {vocab_size})", key, "invalid_value")


# -- responses ---------------------------------------------------------------------------------


def completion_head(model_name: str) -> Dict[str, Any]:
    """The fields that a completion's response and every chunk of its stream share."""
    return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion",
            "created": int(time.time()), "model": model_name}


def choice(text: str, logprobs: Optional[Dict[str, list]],
           finish_reason: Optional[str], index: int = 0) -> Dict[str, Any]:
    return {"text": text, "index": index, "logprobs": logprobs, "finish_reason": finish_reason}


def chat_head(model_name: str, chunk: bool) -> Dict[str, Any]:
    """The fields that a chat completion's response, or every chunk of its stream, share."""
    return {"id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion.chunk" if chunk else "chat.completion",
            "created": int(time.time()), "model": model_name}


def chat_choice(text: str, logprobs: Optional[Dict[str, list]], finish_reason: Optional[str],
                index: int = 0) -> Dict[str, Any]:
    """A choice of a (whole) chat completion: the assistant's message."""
    return {"index": index, "message": {"role": "assistant", "content": text, "refusal": None},
            "logprobs": logprobs, "finish_reason": finish_reason}


def chat_delta(delta: Dict[str, Any], logprobs: Optional[Dict[str, list]],
               finish_reason: Optional[str], index: int = 0) -> Dict[str, Any]:
    """A choice of a chat completion's chunk: what the message gained."""
    return {"index": index, "delta": delta, "logprobs": logprobs,
            "finish_reason": finish_reason}


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> Dict[str, Any]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens}}


def empty_logprobs(chat: bool = False) -> Dict[str, list]:
    """The ``logprobs`` object of a choice whose text holds no token's."""
    if chat:
        return {"content": []}
    return {"tokens": [], "token_logprobs": [], "top_logprobs": None, "text_offset": []}


def merge_logprobs(into: Optional[Dict[str, list]],
                   part: Optional[Dict[str, list]]) -> Optional[Dict[str, list]]:
    """`part`'s entries appended to `into` (a copy of `part` when `into` is None)."""
    if part is None:
        return into
    if into is None:
        return {k: (None if v is None else list(v)) for k, v in part.items()}
    for key, values in part.items():
        if values is not None:
            into[key].extend(values)
    return into


def model_card(model_name: str, created: int, max_context: int) -> Dict[str, Any]:
    return {"id": model_name, "object": "model", "created": created, "owned_by": "axrt",
            "max_model_len": max_context}
