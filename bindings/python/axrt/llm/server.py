"""An OpenAI-compatible HTTP server over an :class:`~axrt.llm.Engine` (docs/serving.md).

    python -m axrt.llm serve model.axe --port 8000

    app = create_app(engine, model_name="tiny")          # in-process, e.g. for tests
    with ServerThread(app) as server:                    # uvicorn on a free port
        openai.OpenAI(base_url=server.url + "/v1", api_key="-").completions.create(...)

Endpoints: ``POST /v1/completions``, ``GET /v1/models``, ``GET /health``,
``GET /metrics``. Starlette and uvicorn serve them; prometheus_client keeps
the metrics in a registry of the app's own.
"""
from __future__ import annotations

import asyncio
import hmac
import json
import math
import os
import re
import secrets
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .._extras import require

# The serve extra, checked first so that its absence names the extra.
for _module in ("starlette", "uvicorn", "prometheus_client"):
    require(_module, "the OpenAI-compatible server (axrt.llm.server)")

import prometheus_client  # noqa: E402
import uvicorn  # noqa: E402
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from starlette.applications import Starlette  # noqa: E402
from starlette.middleware import Middleware  # noqa: E402
from starlette.requests import Request as HTTPRequest  # noqa: E402
from starlette.responses import JSONResponse, Response  # noqa: E402
from starlette.routing import Route  # noqa: E402

import axrt  # noqa: E402

from .engine import AsyncRequest, Engine, RequestError, TokenEvent  # noqa: E402

#: Default limit on a request's body.
DEFAULT_MAX_BODY_BYTES = 1 << 20
#: The most alternatives ``logprobs`` may ask for (OpenAI's limit).
MAX_LOGPROBS = 5
#: The most stop strings a request may give (OpenAI's limit).
MAX_STOP_STRINGS = 4
#: Seconds a client refused with 503 is told to wait (``Retry-After``).
RETRY_AFTER_SECONDS = 1

_REPLACEMENT = "\ufffd"
_FINISH_REASONS = ("stop", "length", "cancelled", "error")


# -- errors ------------------------------------------------------------------------------------


class _JSON(JSONResponse):
    """JSON, with text that is not valid Unicode (a lone surrogate a client sent, quoted back
    in a message) escaped rather than failing the response."""

    def render(self, content: Any) -> bytes:
        try:
            return json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode()
        except UnicodeEncodeError:
            return json.dumps(content, separators=(",", ":")).encode()


class APIError(Exception):
    """An HTTP error with OpenAI's error body."""

    def __init__(self, status: int, message: str, *, param: Optional[str] = None,
                 code: Optional[str] = None, type: str = "invalid_request_error",
                 headers: Optional[Dict[str, str]] = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.type = type
        self.headers = headers

    def response(self) -> JSONResponse:
        return _JSON({"error": {"message": self.message, "type": self.type,
                                "param": self.param, "code": self.code}},
                     status_code=self.status, headers=self.headers)


def _bad(message: str, param: Optional[str] = None, code: Optional[str] = None) -> APIError:
    return APIError(400, message, param=param, code=code)


# -- request parsing ---------------------------------------------------------------------------


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
    """Checks the fields of a completions request (not yet the prompt against the model);
    raises :class:`APIError` (400) naming the first bad field."""
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


# -- text --------------------------------------------------------------------------------------


class IncrementalDecoder:
    """Generated token ids to text, a piece per token.

    Decodes the ids generated so far (after a few prompt tokens of context,
    so that a tokenizer that drops a leading space does not drop the one
    between prompt and completion) and hands out what is new; holds text
    back while it ends with U+FFFD (a character whose bytes have not all
    come). Every `rebase` tokens the context moves forward, so that a
    token costs a bounded amount of decoding.
    """

    CONTEXT = 8
    REBASE = 64

    def __init__(self, tokenizer, context: Sequence[int] = ()) -> None:
        self._tokenizer = tokenizer
        self._ids: List[int] = []
        self._base = 0
        self._window = ""
        self._set_context([int(t) for t in context][-self.CONTEXT:])
        #: Everything handed out so far.
        self.text = ""

    def _decode(self, ids: List[int]) -> str:
        return self._tokenizer.decode(ids, skip_special_tokens=True)

    def _set_context(self, ids: List[int]) -> bool:
        base = self._decode(ids) if ids else ""
        if base.endswith(_REPLACEMENT):
            return False
        self._ids, self._base, self._window = ids, len(base), ""
        return True

    def _advance(self, full: str) -> str:
        new = full[self._base:]
        delta = new[len(self._window):] if len(new) > len(self._window) else ""
        self._window = new
        self.text += delta
        return delta

    def push(self, token: int) -> str:
        """The text `token` completes (often all of its own; "" while a character is
        incomplete)."""
        self._ids.append(int(token))
        full = self._decode(self._ids)
        if full.endswith(_REPLACEMENT):
            return ""
        delta = self._advance(full)
        if len(self._ids) >= self.REBASE:
            self._set_context(self._ids[-self.CONTEXT:])
        return delta

    def flush(self) -> str:
        """The text held back at the end (incomplete characters as U+FFFD)."""
        return self._advance(self._decode(self._ids))


class IdDecoder:
    """The text of a model without a tokenizer: the generated ids in decimal, separated by
    single spaces ("464 11 9")."""

    def __init__(self) -> None:
        self.text = ""

    def push(self, token: int) -> str:
        piece = f" {int(token)}" if self.text else str(int(token))
        self.text += piece
        return piece

    def flush(self) -> str:
        return ""


class StopMatcher:
    """Cuts text at the first stop string; never hands out a stop string, even one split
    over several pieces: it holds back any end of the text that could begin one."""

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = [s for s in stops if s]
        self._held = ""
        self.stopped = False
        #: Characters handed out so far.
        self.emitted = 0

    def feed(self, text: str) -> str:
        """The part of `text` (after what was held back) that can be handed out now."""
        if self.stopped:
            return ""
        buf = self._held + text
        cuts = [i for i in (buf.find(s) for s in self.stops) if i >= 0]
        if cuts:
            out, self._held, self.stopped = buf[:min(cuts)], "", True
        else:
            hold = 0
            for s in self.stops:
                for k in range(min(len(s) - 1, len(buf)), hold, -1):
                    if buf.endswith(s[:k]):
                        hold = k
                        break
            out, self._held = buf[:len(buf) - hold], buf[len(buf) - hold:]
        self.emitted += len(out)
        return out

    def flush(self) -> str:
        """What was held back, once no more text comes (it held no stop string)."""
        out, self._held = ("", "") if self.stopped else (self._held, "")
        self.emitted += len(out)
        return out


def _byte_level_table() -> Dict[str, int]:
    """The characters a byte-level BPE vocabulary writes bytes as (GPT-2's), to the bytes."""
    visible = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1))
               + list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    table, extra = {}, 0
    for b in range(256):
        if b in visible:
            table[chr(b)] = b
        else:
            table[chr(256 + extra)] = b
            extra += 1
    return table


class TokenTexts:
    """The text of single tokens, for log-probabilities: the token decoded on its own, or
    where that is not whole characters, its bytes as OpenAI writes them (``bytes:\\xe2``).
    Without a tokenizer, the id in decimal."""

    def __init__(self, tokenizer) -> None:
        self._tokenizer = tokenizer
        self._cache: Dict[int, str] = {}
        self._byte_level: Optional[Dict[str, int]] = None
        if tokenizer is not None:
            decoder = json.loads(tokenizer.to_str()).get("decoder") or {}
            kinds = {d.get("type") for d in decoder.get("decoders", [decoder])}
            if "ByteLevel" in kinds:
                self._byte_level = _byte_level_table()

    def _bytes(self, token: int) -> Optional[bytes]:
        piece = self._tokenizer.id_to_token(token)
        if piece is None:
            return None
        if re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", piece):
            return bytes([int(piece[3:5], 16)])
        if self._byte_level is not None and all(c in self._byte_level for c in piece):
            return bytes(self._byte_level[c] for c in piece)
        return None

    def __call__(self, token: int) -> str:
        text = self._cache.get(token)
        if text is None:
            if self._tokenizer is None:
                text = str(token)
            else:
                text = self._tokenizer.decode([token], skip_special_tokens=False)
                if _REPLACEMENT in text:
                    raw = self._bytes(token)
                    if raw is not None:
                        text = "bytes:" + "".join(f"\\x{b:02x}" for b in raw)
            self._cache[token] = text
        return text


@dataclass
class _TokenEntry:
    text: str
    logprob: Optional[float]
    top: Optional[Dict[str, float]]
    start: int
    end: int


class Completion:
    """The text and log-probabilities of one completion, token by token.

    :meth:`add` takes each generated token (a :class:`TokenEvent`) and
    returns the text that may be sent now and the log-probabilities of the
    tokens whose text has all been sent; :attr:`stopped` turns True when a
    stop string appeared (the text ends before it). :meth:`finish` returns
    the rest.
    """

    def __init__(self, tokenizer, prompt: Sequence[int], stops: Sequence[str],
                 logprobs: Optional[int], tokens_as_ids: bool = False,
                 token_texts: Optional[TokenTexts] = None) -> None:
        self._decoder = IdDecoder() if tokenizer is None else IncrementalDecoder(tokenizer, prompt)
        self._matcher = StopMatcher(stops)
        self._logprobs = logprobs
        self._tokens_as_ids = tokens_as_ids
        self._token_texts = token_texts
        if logprobs is not None and token_texts is None and not tokens_as_ids:
            self._token_texts = TokenTexts(tokenizer)
        self._entries: List[_TokenEntry] = []
        self._decoded = 0
        #: The tokens taken so far.
        self.tokens: List[int] = []
        #: The engine's message when the request failed.
        self.error: Optional[str] = None

    @property
    def stopped(self) -> bool:
        return self._matcher.stopped

    def _token_text(self, token: int) -> str:
        if self._tokens_as_ids:
            return f"token_id:{token}"
        return self._token_texts(token)

    def add(self, event: TokenEvent) -> Tuple[str, Optional[Dict[str, list]]]:
        self.tokens.append(event.token)
        piece = self._decoder.push(event.token)
        start = self._decoded
        self._decoded += len(piece)
        if self._logprobs is not None:
            top = None
            if self._logprobs > 0:
                alternatives = (event.top_logprobs or [])[:self._logprobs]
                top = {self._token_text(t): p for t, p in alternatives}
                # As OpenAI's: the chosen token is always among the alternatives.
                top.setdefault(self._token_text(event.token), event.logprob)
            self._entries.append(_TokenEntry(self._token_text(event.token), event.logprob, top,
                                             start, self._decoded))
        text = self._matcher.feed(piece)
        return text, self._take_logprobs(final=False)

    def finish(self) -> Tuple[str, Optional[Dict[str, list]]]:
        text = ""
        if not self.stopped:
            piece = self._decoder.flush()
            self._decoded += len(piece)
            if self._entries and piece:
                self._entries[-1].end = self._decoded
            text = self._matcher.feed(piece)
            text += self._matcher.flush()
        return text, self._take_logprobs(final=True)

    def _take_logprobs(self, final: bool) -> Optional[Dict[str, list]]:
        if self._logprobs is None:
            return None
        # Offsets only grow from entry to entry, so the entries ready form a prefix.
        sent, entries = self._matcher.emitted, self._entries
        if not final:
            n = next((i for i, e in enumerate(entries) if e.end > sent), len(entries))
        elif self.stopped:
            n = next((i for i, e in enumerate(entries) if e.start >= sent), len(entries))
        else:
            n = len(entries)
        ready, self._entries = entries[:n], entries[n:] if not final else []
        return {"tokens": [e.text for e in ready],
                "token_logprobs": [e.logprob for e in ready],
                "top_logprobs": None if self._logprobs == 0 else [e.top for e in ready],
                "text_offset": [e.start for e in ready]}


def _merge_logprobs(into: Optional[Dict[str, list]], part: Optional[Dict[str, list]]):
    if part is None:
        return into
    if into is None:
        return {k: (None if v is None else list(v)) for k, v in part.items()}
    for key, values in part.items():
        if values is not None:
            into[key].extend(values)
    return into


# -- metrics -----------------------------------------------------------------------------------


class _EngineCollector:
    """The engine's counters and gauges, read at each scrape."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def describe(self):
        return []

    def collect(self):
        try:
            s = self._engine.stats()
        except Exception:  # closed
            return
        gauges = [
            ("axrt_requests_running", "Requests holding KV blocks.", s["running"]),
            ("axrt_requests_waiting", "Requests queued, not yet running (preempted ones too).",
             s["waiting"]),
            ("axrt_kv_blocks_total", "Blocks of the KV cache.", s["kv_blocks_total"]),
            ("axrt_kv_blocks_used", "KV blocks held by requests.", s["kv_blocks_used"]),
            ("axrt_kv_blocks_free", "KV blocks held by no request.",
             s["kv_blocks_total"] - s["kv_blocks_used"]),
            ("axrt_kv_blocks_cached", "Free KV blocks that still hold a reusable prefix.",
             s["kv_blocks_cached"]),
            ("axrt_kv_cache_usage_ratio", "Fraction of the KV blocks held by requests.",
             s["kv_blocks_used"] / s["kv_blocks_total"] if s["kv_blocks_total"] else 0.0),
            ("axrt_prefix_cache_hit_rate",
             "Prompt tokens supplied by the prefix cache / prompt tokens, since the start.",
             s["cached_prompt_tokens"] / s["prompt_tokens"] if s["prompt_tokens"] else 0.0),
        ]
        for name, doc, value in gauges:
            yield GaugeMetricFamily(name, doc, value=value)
        counters = [
            ("axrt_prompt_tokens", "Prompt tokens of the requests started.", "prompt_tokens"),
            ("axrt_cached_prompt_tokens", "Prompt tokens the prefix cache supplied.",
             "cached_prompt_tokens"),
            ("axrt_computed_tokens", "Tokens run through the model (recomputes too).",
             "computed_tokens"),
            ("axrt_generated_tokens", "Tokens generated.", "generated_tokens"),
            ("axrt_engine_steps", "Steps the engine ran.", "steps"),
            ("axrt_preemptions", "Requests preempted to free KV blocks.", "preemptions"),
            ("axrt_requests_rejected", "Requests the engine refused (queue full, too long).",
             "requests_rejected"),
        ]
        for name, doc, key in counters:
            yield CounterMetricFamily(name, doc, value=s[key])


class _Metrics:
    def __init__(self, engine: Engine) -> None:
        self.registry = prometheus_client.CollectorRegistry(auto_describe=False)
        self.registry.register(_EngineCollector(engine))
        self.finished = prometheus_client.Counter(
            "axrt_requests_finished", "Completions ended, by finish reason ('stop' includes stop "
            "strings, 'cancelled' clients that went away).", ["finish_reason"],
            registry=self.registry)
        for reason in _FINISH_REASONS:
            self.finished.labels(reason)
        self.responses = prometheus_client.Counter(
            "axrt_http_responses", "HTTP responses of /v1/completions, by status code.",
            ["code"], registry=self.registry)
        self.ttft = prometheus_client.Histogram(
            "axrt_time_to_first_token_seconds", "From a request's arrival to its first token.",
            buckets=(0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                     7.5, 10.0, 20.0, 40.0, 80.0), registry=self.registry)
        self.itl = prometheus_client.Histogram(
            "axrt_inter_token_latency_seconds", "Between consecutive tokens of a request.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075,
                     0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5),
            registry=self.registry)
        self.e2e = prometheus_client.Histogram(
            "axrt_e2e_request_latency_seconds", "From a request's arrival to its last token.",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
                     40.0, 50.0, 60.0, 120.0, 240.0), registry=self.registry)

    def exposition(self) -> bytes:
        return prometheus_client.generate_latest(self.registry)


# -- the app -----------------------------------------------------------------------------------


class _Auth:
    """ASGI middleware: ``Authorization: Bearer KEY`` on every path but /health."""

    def __init__(self, app, api_key: str) -> None:
        self.app = app
        self.key = api_key.encode()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"] != "/health":
            header = b""
            for name, value in scope["headers"]:
                if name == b"authorization":
                    header = value
            scheme, _, token = header.strip().partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(token.strip(), self.key):
                response = APIError(401, "a valid API key is required: 'Authorization: Bearer "
                                    "KEY'", code="invalid_api_key",
                                    headers={"WWW-Authenticate": "Bearer"}).response()
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def _watch_disconnect(receive, on_disconnect: Callable[[], Any]) -> None:
    """Calls `on_disconnect` when the client goes away (the body has been read)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            on_disconnect()
            return


class _EventStream:
    """A server-sent-events response: sends each chunk of `chunks` as it comes; cancels the
    request as soon as the client disconnects."""

    status_code = 200

    def __init__(self, chunks: AsyncIterator[bytes], request: AsyncRequest) -> None:
        self.chunks = chunks
        self.request = request

    async def __call__(self, scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream; charset=utf-8"),
                                (b"cache-control", b"no-cache"),
                                (b"x-accel-buffering", b"no")]})
        watcher = asyncio.ensure_future(_watch_disconnect(receive, self.request.cancel))
        try:
            async for chunk in self.chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # the client went away while we wrote
            pass
        finally:
            watcher.cancel()
            self.request.cancel()
            await self.chunks.aclose()


def _sse(data: Any) -> bytes:
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


class _App:
    def __init__(self, engine: Engine, model_name: str, api_key: Optional[str],
                 max_body_bytes: int) -> None:
        self.engine = engine
        self.model_name = model_name
        self.api_key = api_key
        self.max_body_bytes = int(max_body_bytes)
        self.metrics = _Metrics(engine)
        self.created = int(time.time())
        self.tokenizer = engine.tokenizer
        self.token_texts = TokenTexts(self.tokenizer)

    # -- endpoints ---------------------------------------------------------------------

    async def health(self, request: HTTPRequest) -> Response:
        return _JSON({"status": "ok"})

    def _model_card(self) -> Dict[str, Any]:
        return {"id": self.model_name, "object": "model", "created": self.created,
                "owned_by": "axrt", "max_model_len": self.engine.max_context}

    async def models(self, request: HTTPRequest) -> Response:
        return _JSON({"object": "list", "data": [self._model_card()]})

    async def model(self, request: HTTPRequest) -> Response:
        if request.path_params["model"] != self.model_name:
            return APIError(404, f"the model '{request.path_params['model']}' does not exist",
                            param="model", code="model_not_found").response()
        return _JSON(self._model_card())

    async def prometheus(self, request: HTTPRequest) -> Response:
        return Response(self.metrics.exposition(),
                        media_type=prometheus_client.CONTENT_TYPE_LATEST)

    async def completions(self, request: HTTPRequest) -> Response:
        try:
            response = await self._completions(request)
        except APIError as e:
            response = e.response()
        except Exception as e:  # never let a request take the server down
            response = APIError(500, f"internal error: {type(e).__name__}: {e}",
                                type="server_error", code="internal_error").response()
        self.metrics.responses.labels(str(response.status_code)).inc()
        return response

    # -- completions -------------------------------------------------------------------

    async def _read_body(self, request: HTTPRequest) -> bytes:
        limit = self.max_body_bytes
        length = request.headers.get("content-length")
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                raise _bad("the Content-Length header is not a number") from None
            if declared > limit:
                raise APIError(413, f"the request body ({declared} bytes) exceeds the limit of "
                               f"{limit} bytes", code="request_too_large")
        parts, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise APIError(413, f"the request body exceeds the limit of {limit} bytes",
                               code="request_too_large")
            parts.append(chunk)
        return b"".join(parts)

    def _prompt_ids(self, params: CompletionParams) -> np.ndarray:
        if isinstance(params.prompt, str):
            if self.tokenizer is None:
                raise _bad("this model has no tokenizer: give the prompt as a list of token ids",
                           "prompt", "unsupported_value")
        try:
            ids = self.engine.encode(params.prompt)
        except ValueError as e:
            raise _bad(str(e), "prompt", "invalid_value") from None
        context = self.engine.max_context
        total = ids.size + params.max_tokens
        if total > context:
            raise _bad(f"this model's maximum context length is {context} tokens, but "
                       f"{total} were requested ({ids.size} in the prompt, {params.max_tokens} "
                       "for the completion): shorten the prompt or lower max_tokens",
                       "max_tokens" if ids.size < context else "prompt",
                       "context_length_exceeded")
        return ids

    def _submit(self, ids: np.ndarray, params: CompletionParams) -> AsyncRequest:
        seed = params.seed
        if seed is None:
            seed = secrets.randbits(64) if params.temperature > 0 else 0
        try:
            return self.engine.submit_async(
                ids, params.max_tokens, temperature=params.temperature, top_k=params.top_k,
                top_p=params.top_p, seed=seed, stop_ids=() if params.ignore_eos else None,
                logprobs=params.logprobs)
        except axrt.UnavailableError as e:
            raise self._unavailable(e) from None
        except ValueError as e:  # axrt.InvalidArgumentError too: e.g. more blocks than the cache
            raise _bad(str(e), "prompt", "invalid_value") from None
        except axrt.Error as e:
            if getattr(e, "code", None) == "UNAVAILABLE":
                raise self._unavailable(e) from None
            raise APIError(503, f"the engine cannot take requests: {e}", type="server_error",
                           code="engine_unavailable") from None
        except RuntimeError as e:  # closed
            raise APIError(503, str(e), type="server_error", code="engine_unavailable") from None

    @staticmethod
    def _unavailable(e: Exception) -> APIError:
        return APIError(503, f"the server is overloaded, retry later ({e})", type="server_error",
                        code="overloaded", headers={"Retry-After": str(RETRY_AFTER_SECONDS)})

    async def _completions(self, request: HTTPRequest) -> Response:
        arrival = time.perf_counter()
        body = await self._read_body(request)
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as e:
            raise _bad(f"the body is not valid JSON: {e}", code="invalid_json") from None
        params = parse_completion_request(data, self.model_name)
        if isinstance(params.prompt, str) and len(params.prompt) > 16384:
            ids = await asyncio.to_thread(self._prompt_ids, params)
        else:
            ids = self._prompt_ids(params)
        engine_request = self._submit(ids, params)
        completion = Completion(self.tokenizer, ids.tolist(), params.stop, params.logprobs,
                                params.tokens_as_ids, self.token_texts)
        head = {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion",
                "created": int(time.time()), "model": self.model_name}
        if params.stream:
            return _EventStream(self._chunks(engine_request, completion, head, params, arrival),
                                engine_request)
        watcher = asyncio.ensure_future(_watch_disconnect(request.receive,
                                                          engine_request.cancel))
        run = self._run(engine_request, completion, arrival)
        try:
            text, logprobs = [], None
            finish = None
            async for piece, part, finish in run:
                text.append(piece)
                logprobs = _merge_logprobs(logprobs, part)
        finally:
            watcher.cancel()
            engine_request.cancel()
            await run.aclose()
        if finish == "error":
            raise APIError(500, f"the engine failed: {completion.error}", type="server_error",
                           code="engine_error")
        if logprobs is None and params.logprobs is not None:
            logprobs = {"tokens": [], "token_logprobs": [], "top_logprobs": None,
                        "text_offset": []}
        return _JSON({**head, "choices": [{"text": "".join(text), "index": 0,
                                           "logprobs": logprobs, "finish_reason": finish}],
                      "usage": self._usage(engine_request, completion)})

    @staticmethod
    def _usage(engine_request: AsyncRequest, completion: Completion) -> Dict[str, Any]:
        prompt = engine_request.prompt_tokens
        generated = len(completion.tokens)
        return {"prompt_tokens": prompt, "completion_tokens": generated,
                "total_tokens": prompt + generated,
                "prompt_tokens_details": {"cached_tokens": engine_request.cached_tokens}}

    async def _run(self, engine_request: AsyncRequest, completion: Completion, arrival: float):
        """Yields (text, logprobs, finish_reason) as the tokens come; the last has a finish
        reason. Records the request's metrics."""
        metrics = self.metrics
        last = None
        finish = None
        try:
            async for event in engine_request:
                text, logprobs = "", None
                if event.token >= 0:
                    now = time.perf_counter()
                    if last is None:
                        metrics.ttft.observe(now - arrival)
                    else:
                        metrics.itl.observe(now - last)
                    last = now
                    text, logprobs = completion.add(event)
                    if completion.stopped:
                        engine_request.cancel()
                        finish = "stop"
                finish = finish or event.finish_reason
                if finish is not None:
                    rest, rest_logprobs = completion.finish()
                    yield text + rest, _merge_logprobs(logprobs, rest_logprobs), finish
                    return
                if text or logprobs and logprobs["tokens"]:
                    yield text, logprobs, None
        except RequestError as e:
            completion.error = str(e)
            finish = "error"
            yield "", None, finish
        finally:
            if finish is None:
                finish = "cancelled"
            metrics.finished.labels(finish).inc()
            if last is not None:
                metrics.e2e.observe(time.perf_counter() - arrival)

    async def _chunks(self, engine_request: AsyncRequest, completion: Completion,
                      head: Dict[str, Any], params: CompletionParams,
                      arrival: float) -> AsyncIterator[bytes]:
        run = self._run(engine_request, completion, arrival)
        try:
            async for text, logprobs, finish in run:
                if finish == "error":
                    yield _sse({"error": {"message": f"the engine failed: {completion.error}",
                                          "type": "server_error", "param": None,
                                          "code": "engine_error"}})
                    break
                if params.logprobs is not None and logprobs is None:
                    logprobs = {"tokens": [], "token_logprobs": [], "top_logprobs": None,
                                "text_offset": []}
                yield _sse({**head, "choices": [{"text": text, "index": 0, "logprobs": logprobs,
                                                 "finish_reason": finish}]})
        finally:
            await run.aclose()
        if params.include_usage:
            yield _sse({**head, "choices": [], "usage": self._usage(engine_request, completion)})
        yield b"data: [DONE]\n\n"


async def _not_found(request: HTTPRequest, exc: Exception) -> Response:
    return APIError(404, f"no such endpoint: {request.method} {request.url.path}",
                    code="not_found").response()


async def _method_not_allowed(request: HTTPRequest, exc: Exception) -> Response:
    return APIError(405, f"{request.method} is not allowed on {request.url.path}",
                    code="method_not_allowed").response()


async def _internal(request: HTTPRequest, exc: Exception) -> Response:
    return APIError(500, f"internal error: {type(exc).__name__}", type="server_error",
                    code="internal_error").response()


def create_app(engine: Engine, *, model_name: Optional[str] = None,
               api_key: Optional[str] = None,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> Starlette:
    """The ASGI app serving `engine` (which it borrows: closing it is the caller's business).

    `model_name`: the name clients give as ``model`` (default: the
    executable's file name without its extension). `api_key`: when set,
    every endpoint but ``/health`` needs ``Authorization: Bearer
    <api_key>``. `max_body_bytes`: larger request bodies get 413.
    """
    if model_name is None:
        model_name = os.path.splitext(os.path.basename(engine.executable.name))[0] or "model"
    state = _App(engine, model_name, api_key, max_body_bytes)
    routes = [
        Route("/v1/completions", state.completions, methods=["POST"]),
        Route("/v1/models", state.models, methods=["GET"]),
        Route("/v1/models/{model:path}", state.model, methods=["GET"]),
        Route("/health", state.health, methods=["GET"]),
        Route("/metrics", state.prometheus, methods=["GET"]),
    ]
    middleware = [Middleware(_Auth, api_key=api_key)] if api_key else []
    app = Starlette(routes=routes, middleware=middleware,
                    exception_handlers={404: _not_found, 405: _method_not_allowed,
                                        Exception: _internal})
    app.state.axrt = state
    return app


# -- running -----------------------------------------------------------------------------------


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    # Listening from here on: a client that connects before uvicorn runs waits in the backlog.
    sock.listen(2048)
    return sock


class _Server(uvicorn.Server):
    """uvicorn, closing the engine first on shutdown: every stream then ends at once."""

    def __init__(self, config: uvicorn.Config, engine: Optional[Engine]) -> None:
        super().__init__(config)
        self.engine = engine

    async def shutdown(self, sockets=None) -> None:
        if self.engine is not None:
            await asyncio.to_thread(self.engine.close)
        await super().shutdown(sockets=sockets)


class ServerThread:
    """uvicorn serving `app` on a thread of its own, on `host` (default 127.0.0.1) and `port`
    (default: a free one; :attr:`port` says which).

    ``start()`` returns once it accepts connections; ``stop()`` (or leaving a
    ``with`` block) shuts it down. The engine is left open unless
    `close_engine` is given.
    """

    def __init__(self, app, host: str = "127.0.0.1", port: int = 0, *,
                 log_level: str = "warning", close_engine: Optional[Engine] = None) -> None:
        self._socket = _bind(host, port)
        self.host = host
        self.port = self._socket.getsockname()[1]
        config = uvicorn.Config(app, log_level=log_level, lifespan="off",
                                timeout_graceful_shutdown=5)
        self.server = _Server(config, close_engine)
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._socket]},
                                        name="axrt-server", daemon=True)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout: float = 30.0) -> "ServerThread":
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server on {self.url} did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread.is_alive():
            self._thread.join()
        self._socket.close()

    def __enter__(self) -> "ServerThread":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def serve(model: str, *, host: str = "127.0.0.1", port: int = 8000, device=None,
          api_key: Optional[str] = None, model_name: Optional[str] = None,
          max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, log_level: str = "info",
          **engine_options: Any) -> None:
    """Serves the converted model `model` until SIGINT or SIGTERM, then closes the engine.
    `engine_options` are :class:`Engine`'s."""
    engine = Engine(model, device, **engine_options)
    try:
        app = create_app(engine, model_name=model_name, api_key=api_key,
                         max_body_bytes=max_body_bytes)
        sock = _bind(host, port)
        shown = f"[{host}]" if ":" in host else host
        print(f"axrt.llm: serving '{app.state.axrt.model_name}' on "
              f"http://{shown}:{sock.getsockname()[1]}/v1 (Ctrl-C stops)", flush=True)
        config = uvicorn.Config(app, log_level=log_level, lifespan="off",
                                timeout_graceful_shutdown=5)
        _Server(config, engine).run(sockets=[sock])
    finally:
        engine.close()
