"""An OpenAI-compatible HTTP server over an :class:`~axrt.llm.Engine` (docs/serving.md).

    python -m axrt.llm serve model.axe --port 8000

    app = create_app(engine, model_name="tiny")          # in-process, e.g. for tests
    with ServerThread(app) as server:                    # uvicorn on a free port
        openai.OpenAI(base_url=server.url + "/v1", api_key="-").completions.create(...)

Endpoints: ``POST /v1/completions``, ``POST /v1/chat/completions``, ``GET /v1/models``,
``GET /health``,
``GET /metrics``. Starlette and uvicorn serve them; prometheus_client keeps
the metrics in a registry of the app's own. This module is the app: routes,
authentication, server-sent events, metrics. What a request may hold and
what a response looks like is :mod:`axrt.llm.protocol`; how tokens become
text is :mod:`axrt.llm.detokenize`.
"""
from __future__ import annotations

import asyncio
import hmac
import json
import os
import secrets
import socket
import threading
import time
from typing import Any, AsyncIterator, Callable, Dict, List, Optional, Tuple

import numpy as np

from .._extras import require

# The serve extra, checked first so that its absence names the extra.
for _module in ("starlette", "uvicorn", "prometheus_client"):
    require(_module, "the OpenAI-compatible server (axrt.llm.server)")

import prometheus_client  # noqa: E402
import uvicorn  # noqa: E402
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.middleware import Middleware  # noqa: E402
from starlette.requests import Request as HTTPRequest  # noqa: E402
from starlette.responses import JSONResponse, Response  # noqa: E402
from starlette.routing import Route  # noqa: E402

import axrt  # noqa: E402

from .chat import ChatError, ChatTemplate  # noqa: E402
from .detokenize import Completion, TokenTexts  # noqa: E402
from .engine import AsyncRequest, Engine, RequestError  # noqa: E402
from .protocol import (APIError, ChatParams, CompletionParams, SamplingParams,  # noqa: E402
                       chat_choice, chat_delta, chat_head, check_against_model, choice,
                       completion_head, empty_logprobs, error_body, merge_logprobs,
                       model_card, parse_chat_request, parse_completion_request,
                       prompt_token_ids, usage)

#: Default limit on a request's body.
DEFAULT_MAX_BODY_BYTES = 1 << 20
#: Seconds a client refused with 503 is told to wait (``Retry-After``).
RETRY_AFTER_SECONDS = 1
#: Prompts longer than this (in characters) are tokenized off the event loop.
_LONG_PROMPT_CHARS = 16384

_FINISH_REASONS = ("stop", "length", "cancelled", "error")


# -- responses ---------------------------------------------------------------------------------


class _JSON(JSONResponse):
    """JSON, with text that is not valid Unicode (a lone surrogate a client sent, quoted back
    in a message) escaped rather than failing the response."""

    def render(self, content: Any) -> bytes:
        try:
            return json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode()
        except UnicodeEncodeError:
            return json.dumps(content, separators=(",", ":")).encode()


def _error(e: APIError) -> Response:
    return _JSON(e.body(), status_code=e.status, headers=e.headers)


def _sse(data: Any) -> bytes:
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


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
            ("axrt_engine_failed", "1 once a step failed on a device (the engine then takes "
             "no requests; /health says why).", 1 if s["failed"] else 0),
            ("axrt_engine_devices", "Devices the engine runs every step on.",
             len(self._engine.executables)),
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
            ("axrt_engine_graph_steps", "Of those, steps replayed from graphs "
             "(--graph-max-batch).", "graph_steps"),
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
            "axrt_http_responses", "HTTP responses of /v1/completions and /v1/chat/completions, "
            "by status code.",
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
                response = _error(APIError(401, "a valid API key is required: 'Authorization: "
                                           "Bearer KEY'", code="invalid_api_key",
                                           headers={"WWW-Authenticate": "Bearer"}))
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


class _App:
    def __init__(self, engine: Engine, model_name: str, api_key: Optional[str],
                 max_body_bytes: int, chat_template: Optional[ChatTemplate]) -> None:
        self.engine = engine
        self.chat_template = chat_template
        self.model_name = model_name
        self.api_key = api_key
        self.max_body_bytes = int(max_body_bytes)
        self.metrics = _Metrics(engine)
        self.created = int(time.time())
        self.tokenizer = engine.tokenizer
        self.token_texts = TokenTexts(self.tokenizer)
        self.vocab_size = engine.config.vocab_size
        self.max_context = engine.max_context

    # -- endpoints ---------------------------------------------------------------------

    async def health(self, request: HTTPRequest) -> Response:
        failure = self.engine.failure
        if failure is not None:
            return _JSON({"status": "failed", "reason": failure}, status_code=503)
        return _JSON({"status": "ok"})

    def _model_card(self) -> Dict[str, Any]:
        return model_card(self.model_name, self.created, self.max_context)

    async def models(self, request: HTTPRequest) -> Response:
        return _JSON({"object": "list", "data": [self._model_card()]})

    async def model(self, request: HTTPRequest) -> Response:
        if request.path_params["model"] != self.model_name:
            return _error(APIError(404, f"the model '{request.path_params['model']}' does not "
                                   "exist", param="model", code="model_not_found"))
        return _JSON(self._model_card())

    async def prometheus(self, request: HTTPRequest) -> Response:
        return Response(self.metrics.exposition(),
                        media_type=prometheus_client.CONTENT_TYPE_LATEST)

    async def completions(self, request: HTTPRequest) -> Response:
        return await self._respond(request, chat=False)

    async def chat_completions(self, request: HTTPRequest) -> Response:
        return await self._respond(request, chat=True)

    async def _respond(self, request: HTTPRequest, chat: bool) -> Response:
        try:
            response = await self._generate(request, chat)
        except APIError as e:
            response = _error(e)
        except Exception as e:  # never let a request take the server down
            response = _error(APIError(500, f"internal error: {type(e).__name__}: {e}",
                                       type="server_error", code="internal_error"))
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
                raise APIError(400, "the Content-Length header is not a number") from None
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
        return prompt_token_ids(params, self.tokenizer, self.vocab_size, self.max_context)

    def _chat_ids(self, params: ChatParams) -> np.ndarray:
        if self.chat_template is None:
            raise APIError(400, "this model has no chat template, so it cannot chat: start the "
                           "server with --chat-template FILE, or use /v1/completions",
                           param="messages", code="chat_template_missing")
        if self.tokenizer is None:
            raise APIError(400, "this model has no tokenizer, so it cannot chat: use "
                           "/v1/completions with token ids", param="messages",
                           code="unsupported_value")
        try:
            ids = self.chat_template.prompt_ids(self.tokenizer, params.messages)
        except ChatError as e:
            raise APIError(400, str(e), param=e.param, code="invalid_value") from None
        check_against_model(ids, params, self.vocab_size, self.max_context, "messages")
        return ids

    def _stop_ids(self, params: SamplingParams) -> Tuple[int, ...]:
        eos = [] if params.ignore_eos else list(self.engine.config.eos_token_ids)
        return tuple(dict.fromkeys(eos + params.stop_token_ids))

    def _submit(self, ids: np.ndarray, params: SamplingParams) -> AsyncRequest:
        """Queues a request whose prompt and fields the protocol has checked: the engine takes
        them without checking them again in Python (its C++ core still does)."""
        seed = params.seed
        if seed is None:
            seed = secrets.randbits(64) if params.temperature > 0 else 0
        try:
            return self.engine._submit_checked_async(
                ids, params.max_tokens, temperature=params.temperature, top_k=params.top_k,
                top_p=params.top_p, seed=seed, stop_ids=self._stop_ids(params),
                logprobs=params.logprobs, **params.options)
        except axrt.UnavailableError as e:
            raise self._unavailable(e) from None
        except ValueError as e:  # axrt.InvalidArgumentError: e.g. more blocks than the cache
            raise APIError(400, str(e), param="prompt", code="invalid_value") from None
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

    async def _generate(self, request: HTTPRequest, chat: bool) -> Response:
        arrival = time.perf_counter()
        body = await self._read_body(request)
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as e:
            raise APIError(400, f"the body is not valid JSON: {e}", code="invalid_json") from None
        if chat:
            params = parse_chat_request(data, self.model_name)
            ids = await asyncio.to_thread(self._chat_ids, params)
        else:
            params = parse_completion_request(data, self.model_name)
            if isinstance(params.prompt, str) and len(params.prompt) > _LONG_PROMPT_CHARS:
                ids = await asyncio.to_thread(self._prompt_ids, params)
            else:
                ids = self._prompt_ids(params)
        engine_request = self._submit(ids, params)
        completions = [Completion(self.tokenizer, ids, params.stop, params.logprobs,
                                  getattr(params, "tokens_as_ids", False), self.token_texts,
                                  chat=chat) for _ in range(params.n)]
        if params.stream:
            return _EventStream(self._chunks(engine_request, completions, params, chat, arrival),
                                engine_request)
        watcher = asyncio.ensure_future(_watch_disconnect(request.receive,
                                                          engine_request.cancel))
        run = self._run(engine_request, completions, arrival)
        texts: List[List[str]] = [[] for _ in completions]
        logprobs: List[Optional[Dict[str, list]]] = [None] * len(completions)
        finishes: List[Optional[str]] = [None] * len(completions)
        try:
            async for index, piece, part, finish in run:
                texts[index].append(piece)
                logprobs[index] = merge_logprobs(logprobs[index], part)
                finishes[index] = finish or finishes[index]
        finally:
            watcher.cancel()
            engine_request.cancel()
            await run.aclose()
        for index, finish in enumerate(finishes):
            if finish == "error":
                raise APIError(500, f"the engine failed: {completions[index].error}",
                               type="server_error", code="engine_error")
        choices = []
        for index, completion in enumerate(completions):
            part = logprobs[index]
            if part is None and params.logprobs is not None:
                part = empty_logprobs(chat)
            make = chat_choice if chat else choice
            choices.append(make("".join(texts[index]), part, finishes[index], index))
        head = chat_head(self.model_name, chunk=False) if chat else completion_head(self.model_name)
        return _JSON({**head, "choices": choices,
                      "usage": self._usage(engine_request, completions)})

    @staticmethod
    def _usage(engine_request: AsyncRequest, completions: List[Completion]) -> Dict[str, Any]:
        return usage(engine_request.prompt_tokens, sum(len(c.tokens) for c in completions),
                     engine_request.cached_tokens)

    async def _run(self, engine_request: AsyncRequest, completions: List[Completion],
                   arrival: float):
        """Yields (choice, text, logprobs, finish_reason) as the tokens come; each choice's
        last has a finish reason. Ends the request once every choice has ended (a stop
        string ends a choice before the engine does). Records the request's metrics."""
        metrics = self.metrics
        last = None
        running = set(range(len(completions)))
        try:
            async for event in engine_request:
                index = getattr(event, "choice", 0)
                if index not in running:
                    continue  # the rest of a choice that a stop string ended
                completion = completions[index]
                text, logprobs, finish = "", None, None
                if event.token >= 0:
                    now = time.perf_counter()
                    if last is None:
                        metrics.ttft.observe(now - arrival)
                    else:
                        metrics.itl.observe(now - last)
                    last = now
                    text, logprobs = completion.add(event)
                    if completion.stopped:
                        finish = "stop"
                finish = finish or event.finish_reason
                if finish is not None:
                    running.discard(index)
                    metrics.finished.labels(finish).inc()
                    if finish == "stop" and event.finish_reason is None:
                        self._end_choice(engine_request, index, len(completions))
                    rest, rest_logprobs = completion.finish()
                    yield index, text + rest, merge_logprobs(logprobs, rest_logprobs), finish
                    if not running:
                        return
                elif text or (logprobs and any(logprobs.get(k) for k in ("tokens", "content"))):
                    yield index, text, logprobs, None
        except RequestError as e:
            for index in sorted(running):
                completions[index].error = str(e)
                metrics.finished.labels("error").inc()
                yield index, "", None, "error"
            running.clear()
        finally:
            for _ in running:  # the client went away, or the engine closed
                metrics.finished.labels("cancelled").inc()
            if last is not None:
                metrics.e2e.observe(time.perf_counter() - arrival)

    @staticmethod
    def _end_choice(engine_request: AsyncRequest, index: int, choices: int) -> None:
        """Stops generating for a choice a stop string ended: the request itself when it has
        one choice; else that choice, where the engine can end one alone."""
        if choices == 1:
            engine_request.cancel()
        elif hasattr(engine_request, "cancel_choice"):
            engine_request.cancel_choice(index)

    async def _chunks(self, engine_request: AsyncRequest, completions: List[Completion],
                      params: SamplingParams, chat: bool,
                      arrival: float) -> AsyncIterator[bytes]:
        head = chat_head(self.model_name, chunk=True) if chat else completion_head(self.model_name)
        if chat:  # each choice opens with the assistant's role
            for index in range(len(completions)):
                yield _sse({**head, "choices": [chat_delta({"role": "assistant", "content": ""},
                                                           None, None, index)]})
        run = self._run(engine_request, completions, arrival)
        try:
            async for index, text, logprobs, finish in run:
                if finish == "error":
                    yield _sse(error_body(f"the engine failed: {completions[index].error}",
                                          "server_error", code="engine_error"))
                    break
                if params.logprobs is not None and logprobs is None:
                    logprobs = empty_logprobs(chat)
                if not chat:
                    part = choice(text, logprobs, finish, index)
                elif finish is None or text:
                    part = chat_delta({"content": text}, logprobs, None, index)
                    if finish is not None:  # the last text, then the end in a chunk of its own
                        yield _sse({**head, "choices": [part]})
                        part = chat_delta({}, None, finish, index)
                else:
                    part = chat_delta({}, logprobs, finish, index)
                yield _sse({**head, "choices": [part]})
        finally:
            await run.aclose()
        if params.include_usage:
            yield _sse({**head, "choices": [], "usage": self._usage(engine_request, completions)})
        yield b"data: [DONE]\n\n"


async def _not_found(request: HTTPRequest, exc: Exception) -> Response:
    return _error(APIError(404, f"no such endpoint: {request.method} {request.url.path}",
                           code="not_found"))


async def _method_not_allowed(request: HTTPRequest, exc: Exception) -> Response:
    return _error(APIError(405, f"{request.method} is not allowed on {request.url.path}",
                           code="method_not_allowed"))


async def _internal(request: HTTPRequest, exc: Exception) -> Response:
    return _error(APIError(500, f"internal error: {type(exc).__name__}", type="server_error",
                           code="internal_error"))


def create_app(engine: Engine, *, model_name: Optional[str] = None,
               api_key: Optional[str] = None,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
               chat_template: Optional[os.PathLike] = None) -> Starlette:
    """The ASGI app serving `engine` (which it borrows: closing it is the caller's business).

    `model_name`: the name clients give as ``model`` (default: the
    executable's file name without its extension; a set's directory name). `api_key`: when set,
    every endpoint but ``/health`` needs ``Authorization: Bearer
    <api_key>``. `max_body_bytes`: larger request bodies get 413. `chat_template`: a file
    whose template renders chats instead of the model's (:mod:`axrt.llm.chat`; a model
    without one refuses chats with 400).
    """
    if model_name is None:
        name = engine.executable.name
        # A set (in this process or across processes): its directory's name.
        if len(engine.executables) > 1 or getattr(engine, "member", None) is not None:
            name = os.path.dirname(os.path.abspath(name))
        model_name = os.path.splitext(os.path.basename(name))[0] or "model"
    template = engine.chat_template
    if chat_template is not None:
        template = ChatTemplate.from_file(
            chat_template, template.special_tokens if template is not None else None)
    elif template is not None:
        template.compiled()  # a template that does not compile is said at the start
    state = _App(engine, model_name, api_key, max_body_bytes, template)
    routes = [
        Route("/v1/completions", state.completions, methods=["POST"]),
        Route("/v1/chat/completions", state.chat_completions, methods=["POST"]),
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
          devices=None, api_key: Optional[str] = None, model_name: Optional[str] = None,
          max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, log_level: str = "info",
          chat_template: Optional[os.PathLike] = None, rendezvous: Optional[str] = None,
          world_size: int = 1, rank: int = 0, join_timeout: float = 60.0,
          heartbeat_timeout: Optional[float] = None, **engine_options: Any) -> int:
    """Serves the converted model `model` (on `device`, or a tensor-parallel set on `devices`)
    until SIGINT or SIGTERM, then closes the engine. `engine_options` are :class:`Engine`'s;
    the others :func:`create_app`'s.

    With `rendezvous`, `model` is a set's directory served by `world_size` processes: rank 0
    (this call with ``rank=0``) serves HTTP and runs the engine (:class:`ProcessSet`), every
    other rank follows it (:func:`run_member`, no HTTP). Returns the exit status."""
    if rendezvous is not None:
        from .process_set import ProcessSet, run_member

        if rank > 0:
            return run_member(model, rendezvous=rendezvous, world_size=world_size, rank=rank,
                              device=device, join_timeout=join_timeout,
                              heartbeat_timeout=heartbeat_timeout)
        print(f"axrt.llm: rank 0 of {world_size}: waiting for the set's members at {rendezvous}",
              flush=True)
        engine = ProcessSet(model, rendezvous=rendezvous, world_size=world_size, device=device,
                            join_timeout=join_timeout, heartbeat_timeout=heartbeat_timeout,
                            **engine_options)
    else:
        engine = Engine(model, device, devices=devices, **engine_options)
    try:
        app = create_app(engine, model_name=model_name, api_key=api_key,
                         max_body_bytes=max_body_bytes, chat_template=chat_template)
        sock = _bind(host, port)
        shown = f"[{host}]" if ":" in host else host
        print(f"axrt.llm: serving '{app.state.axrt.model_name}' on "
              f"http://{shown}:{sock.getsockname()[1]}/v1 (Ctrl-C stops)", flush=True)
        config = uvicorn.Config(app, log_level=log_level, lifespan="off",
                                timeout_graceful_shutdown=5)
        _Server(config, engine).run(sockets=[sock])
    finally:
        engine.close()
    return 0
