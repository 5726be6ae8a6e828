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


@dataclass
class CompletionParams:
    """A checked ``POST /v1/completions`` request."""

    prompt: Union[str, List[int]]
    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: Optional[int] = None
    stop: List[str] = field(default_factory=list)
    logprobs: Optional[int] = None
    stream: bool = False
    include_usage: bool = False
    ignore_eos: bool = False
    tokens_as_ids: bool = False


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


def parse_completion_request(body: Any, model_name: str) -> CompletionParams:
    """Checks the fields of a completions request (the prompt's against the model is
    :func:`prompt_token_ids`); raises :class:`APIError` (400) naming the first bad field."""
    if not isinstance(body, dict):
        raise _bad("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str):
        raise _bad("'model' is required and must be a string", "model", "invalid_type")
    if model != model_name:
        raise _bad(f"the model '{model}' does not exist; this server serves '{model_name}'",
                   "model", "model_not_found")
    if "prompt" not in body or body["prompt"] is None:
        raise _bad("'prompt' is required", "prompt", "missing_required_parameter")
    params = CompletionParams(prompt=_prompt_field(body["prompt"]))
    params.max_tokens = _int_field(body, "max_tokens", 16, lo=1)
    params.temperature = _float_field(body, "temperature", 1.0, lambda t: t >= 0, ">= 0")
    params.top_p = _float_field(body, "top_p", 1.0, lambda p: 0 < p <= 1, "in (0, 1]")
    params.top_k = _int_field(body, "top_k", 0, lo=0, hi=2**31 - 1)
    seed = _optional(body, "seed", None)
    if seed is not None and not _is_int(seed):
        raise _bad(f"'seed' must be an integer, not {json.dumps(seed)}", "seed", "invalid_type")
    params.seed = seed
    stop = _optional(body, "stop", [])
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise _bad("'stop' must be a string or a list of strings", "stop", "invalid_type")
    if len(stop) > MAX_STOP_STRINGS:
        raise _bad(f"'stop' holds {len(stop)} strings; at most {MAX_STOP_STRINGS} are allowed",
                   "stop", "invalid_value")
    params.stop = [s for s in stop if s]
    params.logprobs = _int_field(body, "logprobs", None, lo=0, hi=MAX_LOGPROBS)
    params.stream = _bool_field(body, "stream", False)
    options = _optional(body, "stream_options", {})
    if not isinstance(options, dict):
        raise _bad("'stream_options' must be an object", "stream_options", "invalid_type")
    params.include_usage = _bool_field(options, "include_usage", False)
    if _bool_field(body, "echo", False):
        raise _bad("'echo' is not supported", "echo", "unsupported_value")
    if _int_field(body, "n", 1) != 1:
        raise _bad("'n' must be 1: one completion per request", "n", "unsupported_value")
    if _int_field(body, "best_of", 1) != 1:
        raise _bad("'best_of' must be 1", "best_of", "unsupported_value")
    for key in ("frequency_penalty", "presence_penalty"):
        if _float_field(body, key, 0.0, lambda v: True, "a number") != 0:
            raise _bad(f"'{key}' is not supported (it must be 0)", key, "unsupported_value")
    if _optional(body, "logit_bias", {}) != {}:
        raise _bad("'logit_bias' is not supported", "logit_bias", "unsupported_value")
    if _optional(body, "suffix", "") != "":
        raise _bad("'suffix' is not supported", "suffix", "unsupported_value")
    params.ignore_eos = _bool_field(body, "ignore_eos", False)
    params.tokens_as_ids = _bool_field(body, "return_tokens_as_token_ids", False)
    return params


def prompt_token_ids(params: CompletionParams, tokenizer, vocab_size: int,
                     max_context: int) -> np.ndarray:
    """The prompt of `params` as int32 token ids, checked against the model: a string
    through `tokenizer` (None: the model has none), token ids in ``[0, vocab_size)``, at
    least one token, and the prompt plus ``max_tokens`` within `max_context`.

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
    if ids.size == 0:
        raise _bad("the prompt needs at least one token", "prompt", "invalid_value")
    total = ids.size + params.max_tokens
    if total > max_context:
        raise _bad(f"this model's maximum context length is {max_context} tokens, but "
                   f"{total} were requested ({ids.size} in the prompt, {params.max_tokens} "
                   "for the completion): shorten the prompt or lower max_tokens",
                   "max_tokens" if ids.size < max_context else "prompt",
                   "context_length_exceeded")
    return ids


# -- responses ---------------------------------------------------------------------------------


def completion_head(model_name: str) -> Dict[str, Any]:
    """The fields that a completion's response and every chunk of its stream share."""
    return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion",
            "created": int(time.time()), "model": model_name}


def choice(text: str, logprobs: Optional[Dict[str, list]],
           finish_reason: Optional[str]) -> Dict[str, Any]:
    return {"text": text, "index": 0, "logprobs": logprobs, "finish_reason": finish_reason}


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> Dict[str, Any]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens}}


def empty_logprobs() -> Dict[str, list]:
    """The ``logprobs`` object of a choice whose text holds no token's."""
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
