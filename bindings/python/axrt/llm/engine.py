"""The serving engine from Python: :class:`Engine`, :class:`Request`, :class:`TokenEvent`.

Many generation requests over one model, scheduled step by step by the C++
engine (``include/axrt/serving.h``, docs/serving.md). This module owns one
dispatcher thread per engine that polls the engine's events and hands each
to the request it belongs to: a queue for :meth:`Engine.submit`, the
asyncio loop for :meth:`Engine.stream` and :meth:`Engine.submit_async`.
"""
from __future__ import annotations

import asyncio
import functools
import itertools
import os
import queue
import threading
import weakref
from dataclasses import dataclass
from typing import (TYPE_CHECKING, Any, AsyncIterator, Callable, Dict, Iterable, Iterator, List,
                    Optional, Sequence, Tuple, Union)

import numpy as np

from .. import _axrt
from .._extras import MissingExtraError
from .modelfile import (MAX_CHOICES, MAX_LOGIT_BIAS, check_logit_options,  # noqa: F401
                        check_sampling, check_token_ids, make_tokenizer, read_model)
from .shards import is_set, load_member, load_set

if TYPE_CHECKING:
    from .model import Model, PathLike

Prompt = Union[str, Sequence[int], np.ndarray]

#: The most alternatives a request may ask for (AXRT_ENGINE_MAX_TOP_LOGPROBS).
MAX_TOP_LOGPROBS = 20

# How long the dispatcher waits for events before it looks whether the engine
# was closed.
_POLL_SECONDS = 0.25


def encode_text(tokenizer, text: str) -> np.ndarray:
    """`text` as int32 token ids through `tokenizer`; ValueError when it is not valid Unicode
    (a lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"the prompt is not valid Unicode: {e.reason} at character "
                         f"{e.start}") from None
    return np.asarray(tokenizer.encode(text).ids, np.int32)


class RequestError(RuntimeError):
    """A request ended with an error of the engine (the device failed); the message says how."""


@dataclass(frozen=True)
class TokenEvent:
    """One event of a request: a generated token, its end, or both.

    `token` is -1 when the event carries none (a request cancelled or
    failed between tokens); `index` is the token's place among the
    request's generated tokens. `finish_reason` is None until the last
    event, which has one of ``"stop"`` (a stop id was generated; it is this
    event's token), ``"length"`` (``max_tokens`` reached), ``"cancelled"``.
    `logprob` and `top_logprobs` (``[(token, logprob)]``, most likely first)
    are there when the request asked for log-probabilities, `logits`
    (float32 ``[V]``) when it asked for logits; both are those of the model
    before the request's logit bias, penalties and temperature.
    `prompt_tokens` and `cached_tokens` (how many of them the prefix cache
    supplied) are set on a choice's first event, 0 on the others. `choice`
    says which of a request's `n` choices the event belongs to (0-based;
    always 0 when n is 1): each choice has its own indices and its own last
    event.
    """

    token: int
    index: int
    finish_reason: Optional[str] = None
    logprob: Optional[float] = None
    top_logprobs: Optional[List[Tuple[int, float]]] = None
    logits: Optional[np.ndarray] = None
    prompt_tokens: int = 0
    cached_tokens: int = 0
    choice: int = 0


@dataclass
class _Finished:
    """The last message of a request whose engine event was an error."""

    message: str


def _event(raw: tuple) -> Union[TokenEvent, _Finished]:
    (_, token, index, finish, error, logits, logprob, top, prompt_tokens, cached, choice) = raw
    if finish == "error":
        return _Finished(error or "the engine failed")
    return TokenEvent(int(token), int(index), finish, logprob,
                      None if top is None else [(int(t), float(p)) for t, p in top],
                      logits, int(prompt_tokens), int(cached), int(choice))


class _Guard:
    """The low-level engine behind a lock, so that no call races its close (which frees it).

    Reentrant: a handle's finalizer may run (and cancel) on a thread that
    holds the lock.
    """

    def __init__(self, low) -> None:
        self.low = low
        self.lock = threading.RLock()
        self.closed = False
        # The message of the last request that ended with an error (the
        # dispatcher's), which says why a failed engine failed.
        self.last_error: Optional[str] = None

    def add_request(self, *args, **kwargs) -> None:
        with self.lock:
            if self.closed:
                raise RuntimeError("the engine is closed")
            self.low.add_request(*args, **kwargs)

    def cancel(self, request_id: int) -> bool:
        with self.lock:
            if self.closed:
                return False
            try:
                return bool(self.low.cancel(request_id))
            except Exception:  # the engine failed; its requests end anyway
                return False

    def stats(self) -> Dict[str, Any]:
        with self.lock:
            if self.closed:
                raise RuntimeError("the engine is closed")
            return dict(self.low.stats())

    def close(self) -> None:
        with self.lock:
            if not self.closed:
                self.closed = True
                self.low.close()


class _Handle:
    """What :class:`Request` and :class:`AsyncRequest` share."""

    def __init__(self, engine: "Engine", request_id: int, prompt: np.ndarray,
                 n: int = 1) -> None:
        self.id = request_id
        self.prompt = prompt
        #: The number of choices (the request's `n`).
        self.n = n
        #: The generated tokens received so far, of each choice.
        self.choices: List[List[int]] = [[] for _ in range(n)]
        #: How each choice ended (None while it runs).
        self.finish_reasons: List[Optional[str]] = [None] * n
        #: The generated tokens received so far (choice 0's).
        self.tokens: List[int] = self.choices[0]
        #: None while the request runs (any of its choices); then ``"stop"``, ``"length"``
        #: or ``"cancelled"``, choice 0's (``"error"`` when :class:`RequestError` was raised).
        self.finish_reason: Optional[str] = None
        self.prompt_tokens = int(prompt.size)
        #: How many prompt tokens the prefix cache supplied (to choice 0).
        self.cached_tokens = 0
        self._guard = engine._guard
        # A handle dropped before its request ends cancels it, so that its KV
        # blocks come back.
        self._finalizer = weakref.finalize(self, self._guard.cancel, request_id)

    @property
    def done(self) -> bool:
        return self.finish_reason is not None

    def cancel(self) -> bool:
        """Ends the request (its last event has finish_reason ``"cancelled"``); False when it
        had already finished."""
        return not self.done and self._guard.cancel(self.id)

    def _take(self, item: Union[TokenEvent, _Finished]) -> TokenEvent:
        if isinstance(item, _Finished):
            self.finish_reason = "error"
            self.finish_reasons = ["error" if r is None else r for r in self.finish_reasons]
            self._finalizer.detach()
            raise RequestError(f"request {self.id}: {item.message}")
        if item.prompt_tokens and item.choice == 0:
            self.cached_tokens = item.cached_tokens
        if item.token >= 0:
            self.choices[item.choice].append(item.token)
        if item.finish_reason is not None:
            self.finish_reasons[item.choice] = item.finish_reason
            if all(r is not None for r in self.finish_reasons):
                self.finish_reason = self.finish_reasons[0]
                self._finalizer.detach()
        return item

    def _result(self) -> Union[List[int], List[List[int]]]:
        return list(self.tokens) if self.n == 1 else [list(c) for c in self.choices]


class Request(_Handle):
    """A request submitted by :meth:`Engine.submit`.

    Iterating it blocks for each :class:`TokenEvent` in order, up to and
    including the last (the one with a `finish_reason`; with n > 1 choices,
    the events of all choices, interleaved, each choice's in order, up to
    the last choice's last); one consumer at a time (a loop left early can be
    taken up again). :meth:`result` waits for the end. An engine error raises
    :class:`RequestError` from both. Dropping the handle before the end
    cancels the request.
    """

    def __init__(self, engine: "Engine", request_id: int, prompt: np.ndarray,
                 events: "queue.SimpleQueue", n: int = 1) -> None:
        super().__init__(engine, request_id, prompt, n)
        self._events = events

    def __iter__(self) -> Iterator[TokenEvent]:
        while not self.done:
            yield self._take(self._events.get())

    def result(self, timeout: Optional[float] = None) -> Union[List[int], List[List[int]]]:
        """The generated tokens, once the request has ended (``finish_reason`` says why); with
        n > 1 choices, the tokens of each (``finish_reasons`` says why each ended).

        `timeout` (seconds): TimeoutError when the request has not ended by then.
        """
        while not self.done:
            try:
                item = self._events.get(timeout=timeout)
            except queue.Empty:
                raise TimeoutError(f"request {self.id} has not finished after {timeout} s") \
                    from None
            self._take(item)
        return self._result()


class AsyncRequest(_Handle):
    """A request submitted by :meth:`Engine.submit_async`: an async iterator of
    :class:`TokenEvent` on the loop that submitted it.

    Consumers that stop early should :meth:`cancel` it (:meth:`Engine.stream`
    does so itself); dropping the handle before the end cancels it too.
    """

    def __init__(self, engine: "Engine", request_id: int, prompt: np.ndarray,
                 events: "asyncio.Queue", n: int = 1) -> None:
        super().__init__(engine, request_id, prompt, n)
        self._events = events

    def __aiter__(self) -> "AsyncRequest":
        return self

    async def __anext__(self) -> TokenEvent:
        if self.done:
            raise StopAsyncIteration
        return self._take(await self._events.get())

    async def result(self) -> Union[List[int], List[List[int]]]:
        """The generated tokens, once the request has ended (of each choice, with n > 1)."""
        async for _ in self:
            pass
        return self._result()


def _dispatch(guard: _Guard, sinks: Dict[int, Callable], choices: Dict[int, set],
              closed: threading.Event) -> None:
    """The dispatcher thread: routes every event to its request's sink until the engine is
    closed and its last events are drained. `choices`: the choices not yet ended of each
    request of n > 1 (a request's sink goes once all have). Holds no reference to the
    :class:`Engine`."""

    def route(events: List[tuple]) -> None:
        for raw in events:
            rid = raw[0]
            if raw[3] == "error":
                guard.last_error = raw[4]
            left = choices.get(rid)
            if raw[3] is not None and left is not None:
                left.discard(raw[10])
                if not left:
                    choices.pop(rid, None)
            sink = sinks.get(rid) if raw[3] is None or left else sinks.pop(rid, None)
            if sink is None:
                continue
            try:
                sink(_event(raw))
            except Exception:
                # The consumer is gone (its event loop closed): nobody will
                # read the request, so end it.
                sinks.pop(rid, None)
                choices.pop(rid, None)
                guard.cancel(rid)

    low = guard.low
    while True:
        events = low.poll(_POLL_SECONDS)
        if events:
            route(events)
        elif closed.is_set():
            # close() has returned, so every remaining event is queued.
            while True:
                events = low.poll(0)
                if not events:
                    break
                route(events)
            break
    # Requests that never got their last event (none should) end cancelled.
    for rid in list(sinks):
        sink = sinks.pop(rid, None)
        if sink is not None:
            try:
                for choice in sorted(choices.pop(rid, None) or {0}):
                    sink(TokenEvent(-1, 0, "cancelled", choice=choice))
            except Exception:
                pass


def _loop_sink() -> Tuple[Callable, "asyncio.Queue"]:
    """A sink for the dispatcher thread that puts events on a queue of the running loop."""
    loop = asyncio.get_running_loop()
    events: "asyncio.Queue" = asyncio.Queue()

    def sink(event, put=events.put_nowait, call=loop.call_soon_threadsafe) -> None:
        call(put, event)

    return sink, events


def _is_loaded_model(model) -> bool:
    """Whether `model` is a loaded :class:`~axrt.llm.Model` (its executable, configuration and
    tokenizer), without importing model.py, which imports this module."""
    return all(hasattr(model, a) for a in ("executable", "config", "tokenizer_json", "_tokenizer"))


def _close(guard: _Guard, closed: threading.Event, thread: threading.Thread, group) -> None:
    guard.close()
    closed.set()
    if thread is not threading.current_thread():
        thread.join()
    if group is not None:
        group.close()


class Engine:
    """Continuous batching of many requests over one model (docs/serving.md).

    `model`: a converted ``.axe`` (loaded onto `device`) or a loaded
    :class:`Model` (its executable is shared; its own KV cache is not used);
    or, with `devices` (one per shard, rank order), a tensor-parallel set:
    the directory ``convert(..., tensor_parallel=N)`` wrote, or its files in
    rank order. The set's members then run every step together, joined by a
    device group the engine makes (its collectives wait at most
    `group_timeout` seconds for a member), each holding its shard of the KV
    cache; the scheduler, the block manager and sampling run once
    (docs/multi-device.md, "Serving a set"). Options, all passed to the C++
    engine:

    - `num_blocks`: KV-cache blocks; or `kv_cache_bytes`, the cache's size;
      neither: enough for `max_running` sequences of the longest length.
    - `max_step_tokens`: most tokens one step runs (0: the model's bound).
    - `max_running`: most sequences running at once (0: the model's bound).
    - `max_waiting`: most requests waiting; more are refused with
      ``axrt.UnavailableError`` (0: no limit).
    - `chunked_prefill`: split long prompts over several steps.
    - `prefix_caching`: share the KV blocks of identical prompt prefixes.
    - `graph_max_batch`: decode steps of up to this many sequences replay
      graphs captured per batch-size bucket (1, 2, 4, ... up to it): one
      launch per step on a CUDA device instead of one per kernel, the same
      tokens (0: off; docs/serving.md, "Graphs").

    One dispatcher thread delivers the events. :meth:`close` (or leaving a
    ``with`` block) cancels what is left and stops it.
    """

    def __init__(self, model: Union["PathLike", "Model", Sequence["PathLike"]], device=None, *,
                 devices: Optional[Sequence] = None, num_blocks: int = 0,
                 kv_cache_bytes: int = 0, max_step_tokens: int = 0, max_running: int = 0,
                 max_waiting: int = 0, chunked_prefill: bool = True,
                 prefix_caching: bool = True, group_timeout: float = 60.0,
                 graph_max_batch: int = 0, group=None) -> None:
        members = [None]
        member = group
        group = None
        if member is not None:
            # A set across processes: this process is its head.
            if devices is not None or _is_loaded_model(model):
                raise ValueError("group= takes a set's directory and this member's device=")
            if member.rank != 0:
                raise ValueError(f"this process is member {member.rank} of its group: the head "
                                 "(rank 0) runs the engine, the others axrt.llm.follow()")
            shards = load_member(model, 0, member.size, device if device is not None
                                 else member.device)
            executable, self.config = shards.executables[0], shards.config
            self.tokenizer_json = shards.tokenizer_json
            self._tokenizer = None
            members = [executable]
        elif _is_loaded_model(model):
            if device is not None or devices is not None:
                raise ValueError("device and devices apply to a path; a Model is already loaded")
            executable, self.config = model.executable, model.config
            self.tokenizer_json = model.tokenizer_json
            self._tokenizer = model._tokenizer
        elif devices is not None:
            if device is not None:
                raise ValueError("give device= (one file) or devices= (a tensor-parallel set), "
                                 "not both")
            shards = load_set(model, devices)
            members = shards.executables
            executable, self.config = members[0], shards.config
            self.tokenizer_json = shards.tokenizer_json
            self._tokenizer = None
            if len(members) > 1:
                group = _axrt.group(shards.devices, label="axrt.llm", timeout=group_timeout)
        else:
            if is_set(model):
                raise ValueError(f"{model} is a tensor-parallel set: give its devices=[...], one "
                                 "per shard, in rank order")
            executable = _axrt.load(os.fspath(model), device)
            self.config, self.tokenizer_json = read_model(executable)
            self._tokenizer = None
        self._no_tokenizer = "the model carries no tokenizer"
        self.executable = executable
        #: The set's executables in rank order (the one executable on one device).
        self.executables = members if group is not None else [executable]
        #: The group across processes this process heads, when it is one.
        self.member = member
        set_group = group if group is not None else member
        try:
            self._low = _axrt.Engine(executable, num_blocks=int(num_blocks),
                                     kv_cache_bytes=int(kv_cache_bytes),
                                     max_step_tokens=int(max_step_tokens),
                                     max_running=int(max_running), max_waiting=int(max_waiting),
                                     chunked_prefill=bool(chunked_prefill),
                                     prefix_caching=bool(prefix_caching), group=set_group,
                                     members=members if set_group is not None else None,
                                     graph_max_batch=int(graph_max_batch))
        except BaseException:
            if group is not None:
                group.close()
            raise
        self.group = group
        self._guard = _Guard(self._low)
        self._ids = itertools.count(1)
        self._sinks: Dict[int, Callable] = {}
        self._choices: Dict[int, set] = {}
        self._closed = threading.Event()
        self._closing = False
        self._thread = threading.Thread(target=_dispatch, args=(self._guard, self._sinks,
                                                                self._choices, self._closed),
                                        name="axrt-engine-events", daemon=True)
        self._thread.start()
        # Closes the engine when this object goes away, and at exit.
        self._finalizer = weakref.finalize(self, _close, self._guard, self._closed, self._thread,
                                           group)

    # -- properties ------------------------------------------------------------------------

    @property
    def device(self):
        """The device of the (head rank's) executable."""
        return self.executable.device

    @property
    def devices(self) -> List:
        """The devices it runs on, in rank order."""
        return [e.device for e in self.executables]

    @property
    def vocab_size(self) -> int:
        return self._low.vocab_size

    @property
    def max_context(self) -> int:
        """The longest sequence: prompt + max_tokens may not exceed it."""
        return min(self.config.max_context, self._low.max_context)

    @property
    def block_size(self) -> int:
        return self._low.block_size

    @property
    def tokenizer(self):
        """The model's ``tokenizers.Tokenizer``, or None when the file carries none or the
        tokenizers package is missing (prompts are then token ids, and :meth:`encode` says
        which extra to install)."""
        if self._tokenizer is None and self.tokenizer_json is not None:
            try:
                self._tokenizer = make_tokenizer(self.tokenizer_json)
            except MissingExtraError as e:
                self._no_tokenizer = str(e)
                self.tokenizer_json = None
        return self._tokenizer

    @functools.cached_property
    def chat_template(self):
        """The model's :class:`~axrt.llm.chat.ChatTemplate`, or None when the file carries
        none (docs/serving.md, "Chat"); read from the file's metadata once."""
        from .chat import ChatTemplate

        return ChatTemplate.of_model(self.executable)

    def chat_prompt(self, messages, chat_template=None) -> np.ndarray:
        """The prompt ids of a chat: `messages` (``[{"role": "user", "content": "..."}]``)
        rendered with `chat_template` (default: the model's) and the assistant's header, as
        transformers' ``apply_chat_template(..., add_generation_prompt=True)`` gives them.
        ValueError (:class:`~axrt.llm.chat.ChatError`) when the model has no template or
        tokenizer, or the messages are refused. Safe to call from several threads; it borrows
        `messages` for the call and keeps nothing of them."""
        from .chat import ChatError

        template = chat_template if chat_template is not None else self.chat_template
        if template is None:
            raise ChatError("this model carries no chat template: give one (--chat-template "
                            "FILE) or send a prompt", "chat_template")
        if self.tokenizer is None:
            raise ChatError(f"{self._no_tokenizer}: chats need the model's tokenizer")
        return template.prompt_ids(self.tokenizer, messages)

    @property
    def closed(self) -> bool:
        return self._closing

    # -- requests --------------------------------------------------------------------------

    def encode(self, prompt: Prompt) -> np.ndarray:
        """`prompt` as int32 token ids: a string through the tokenizer, or token ids checked
        against the vocabulary. ValueError when it cannot be."""
        if isinstance(prompt, str):
            if self.tokenizer is None:
                raise ValueError(f"{self._no_tokenizer}: give the prompt as token ids")
            ids = encode_text(self.tokenizer, prompt)
        else:
            ids = check_token_ids(prompt, self.config.vocab_size)
        if ids.size == 0:
            raise ValueError("the prompt needs at least one token")
        return ids

    def _check(self, prompt: Prompt, max_tokens: int, temperature: float, top_k: int,
               top_p: float, stop_ids: Optional[Iterable[int]],
               logprobs: Optional[int], *, presence_penalty: float = 0.0,
               frequency_penalty: float = 0.0, repetition_penalty: float = 1.0,
               min_p: float = 0.0, logit_bias: Optional[Dict[int, float]] = None,
               n: int = 1) -> Tuple[np.ndarray, Tuple[int, ...]]:
        ids = self.encode(prompt)
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, np.integer)):
            raise ValueError(f"max_tokens must be an integer, not {max_tokens!r}")
        if max_tokens <= 0:
            raise ValueError(f"max_tokens must be at least 1, not {max_tokens}")
        total = ids.size + int(max_tokens)
        if total > self.max_context:
            raise ValueError(f"prompt ({ids.size} tokens) + max_tokens ({max_tokens}) = {total} "
                             f"exceeds the model's context of {self.max_context}")
        check_sampling(float(temperature), int(top_k), float(top_p))
        check_logit_options(presence_penalty, frequency_penalty, repetition_penalty, min_p,
                            logit_bias, n, self.config.vocab_size)
        if logprobs is not None and not 0 <= int(logprobs) <= MAX_TOP_LOGPROBS:
            raise ValueError(f"logprobs must be in [0, {MAX_TOP_LOGPROBS}], not {logprobs}")
        stops = tuple(self.config.eos_token_ids if stop_ids is None
                      else check_token_ids(list(stop_ids), self.config.vocab_size).tolist())
        return ids, stops

    def _add(self, sink: Callable, prompt: Prompt, max_tokens: int, temperature: float,
             top_k: int, top_p: float, seed: int, stop_ids: Optional[Iterable[int]],
             logprobs: Optional[int], logits: bool, **options) -> Tuple[int, np.ndarray]:
        ids, stops = self._check(prompt, max_tokens, temperature, top_k, top_p, stop_ids,
                                 logprobs, **options)
        rid = self._enqueue(sink, ids, max_tokens, stops, temperature, top_k, top_p, seed,
                            logprobs, logits, **options)
        return rid, ids

    def _enqueue(self, sink: Callable, ids: np.ndarray, max_tokens: int,
                 stops: Tuple[int, ...], temperature: float, top_k: int, top_p: float,
                 seed: int, logprobs: Optional[int], logits: bool, *,
                 presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
                 repetition_penalty: float = 1.0, min_p: float = 0.0,
                 logit_bias: Optional[Dict[int, float]] = None, n: int = 1) -> int:
        """Hands a request to the C++ engine as it is (which checks it); returns its id."""
        if self._closing:
            raise RuntimeError("the engine is closed")
        rid = next(self._ids)
        n = int(n)
        self._sinks[rid] = sink
        if n > 1:
            self._choices[rid] = set(range(n))
        try:
            bias = [] if not logit_bias else [(int(k), float(v)) for k, v in logit_bias.items()]
            self._guard.add_request(rid, ids, int(max_tokens), stop_ids=stops,
                                    temperature=float(temperature), top_k=int(top_k),
                                    top_p=float(top_p), seed=int(seed) & 0xFFFFFFFFFFFFFFFF,
                                    logits=bool(logits), logprobs=logprobs is not None,
                                    top_logprobs=int(logprobs or 0),
                                    presence_penalty=float(presence_penalty),
                                    frequency_penalty=float(frequency_penalty),
                                    repetition_penalty=float(repetition_penalty),
                                    min_p=float(min_p), logit_bias=bias, n=n)
        except BaseException:
            self._sinks.pop(rid, None)
            self._choices.pop(rid, None)
            raise
        return rid

    def _cancel(self, request_id: int) -> bool:
        return self._guard.cancel(request_id)

    def submit(self, prompt: Prompt, max_tokens: int = 16, *, temperature: float = 0.0,
               top_k: int = 0, top_p: float = 1.0, seed: int = 0,
               stop_ids: Optional[Iterable[int]] = None, logprobs: Optional[int] = None,
               logits: bool = False, presence_penalty: float = 0.0,
               frequency_penalty: float = 0.0, repetition_penalty: float = 1.0,
               min_p: float = 0.0, logit_bias: Optional[Dict[int, float]] = None,
               n: int = 1) -> Request:
        """Queues one request; returns its :class:`Request` at once.

        `prompt`: token ids, or a string when the model carries a tokenizer.
        Greedy when `temperature` is 0; else sampled from softmax(logits /
        temperature) over the `top_k` most likely tokens (0: all), then the
        smallest set reaching probability `top_p`, reproducibly for a given
        `seed`. Ends after `max_tokens` tokens or after one of `stop_ids`
        (default: the model's end-of-sequence ids; ``()`` for none, which is
        how to ignore the end-of-sequence token). `logprobs`: None, or the
        number of alternatives (0 to 20) each event carries beside the
        token's own log-probability; `logits`: events carry the logits too
        (both those of the model, before the options below).

        Sampling options, with vLLM's definitions, applied to the logits in
        this order before temperature (docs/serving.md, "Sampling options"):

        - `logit_bias`: ``{token id: bias}``, each bias in [-100, 100], at most
          300 entries, added to those tokens' logits;
        - `repetition_penalty` (> 0; 1: none): the logit ``l`` of every token
          of the prompt or generated so far becomes ``l / repetition_penalty``
          when positive, else ``l * repetition_penalty``;
        - `frequency_penalty`, `presence_penalty` (finite; 0: none): subtract
          ``frequency_penalty * count + presence_penalty * (count > 0)``,
          ``count`` the token's occurrences among the tokens generated so far
          (not the prompt's);
        - `min_p` (in [0, 1]; 0: none): when sampling, after temperature, the
          tokens whose probability is below ``min_p`` times the largest are
          dropped; then `top_k` and `top_p`. Greedy takes the largest logit
          after the bias and penalties.

        `n` (1 to 128): that many choices, generated from the prompt, which
        the engine runs once. Choice 0 samples with `seed` (what a request
        with n = 1 draws), choice c > 0 with a seed derived from (`seed`, c).
        Each choice has its own events (:attr:`TokenEvent.choice`); the
        request is done when all are, and :meth:`Request.result` returns the
        tokens of each (:attr:`Request.choices`, :attr:`Request.finish_reasons`).
        A model converted before these options were added refuses all but
        `n` (``axrt.InvalidArgumentError``: convert it again).

        Raises ValueError for a bad request, naming the option (nothing is
        queued), ``axrt.UnavailableError`` when ``max_waiting`` requests
        already wait.
        """
        events: "queue.SimpleQueue" = queue.SimpleQueue()
        options = dict(presence_penalty=presence_penalty, frequency_penalty=frequency_penalty,
                       repetition_penalty=repetition_penalty, min_p=min_p,
                       logit_bias=logit_bias, n=n)
        rid, ids = self._add(events.put, prompt, max_tokens, temperature, top_k, top_p, seed,
                             stop_ids, logprobs, logits, **options)
        return Request(self, rid, ids, events, int(n))

    def submit_async(self, prompt: Prompt, max_tokens: int = 16, *, temperature: float = 0.0,
                     top_k: int = 0, top_p: float = 1.0, seed: int = 0,
                     stop_ids: Optional[Iterable[int]] = None, logprobs: Optional[int] = None,
                     logits: bool = False, presence_penalty: float = 0.0,
                     frequency_penalty: float = 0.0, repetition_penalty: float = 1.0,
                     min_p: float = 0.0, logit_bias: Optional[Dict[int, float]] = None,
                     n: int = 1) -> AsyncRequest:
        """:meth:`submit` for asyncio: called in a running loop, returns an
        :class:`AsyncRequest` whose events arrive on that loop. Errors are raised here,
        before anything is queued."""
        sink, events = _loop_sink()
        options = dict(presence_penalty=presence_penalty, frequency_penalty=frequency_penalty,
                       repetition_penalty=repetition_penalty, min_p=min_p,
                       logit_bias=logit_bias, n=n)
        rid, ids = self._add(sink, prompt, max_tokens, temperature, top_k, top_p, seed,
                             stop_ids, logprobs, logits, **options)
        return AsyncRequest(self, rid, ids, events, int(n))

    def _submit_checked_async(self, ids: np.ndarray, max_tokens: int, *, temperature: float,
                              top_k: int, top_p: float, seed: int,
                              stop_ids: Optional[Sequence[int]],
                              logprobs: Optional[int], presence_penalty: float = 0.0,
                              frequency_penalty: float = 0.0, repetition_penalty: float = 1.0,
                              min_p: float = 0.0, logit_bias: Optional[Dict[int, float]] = None,
                              n: int = 1) -> AsyncRequest:
        """:meth:`submit_async` for a request its caller has checked already, as the server's
        protocol layer does (:func:`axrt.llm.protocol.prompt_token_ids`): `ids` int32 token
        ids in the vocabulary, within the context with `max_tokens`, and sampling options in
        range (:func:`axrt.llm.modelfile.check_logit_options` checks those of
        :meth:`submit`'s list that this takes too). Nothing is checked again in Python; the
        C++ engine checks everything (``axrt.InvalidArgumentError`` naming the option).
        ``stop_ids=()`` ignores the end-of-sequence token. With `n` > 1 the
        :class:`AsyncRequest` yields the events of every choice (:attr:`TokenEvent.choice`)."""
        sink, events = _loop_sink()
        stops = tuple(self.config.eos_token_ids if stop_ids is None else stop_ids)
        rid = self._enqueue(sink, ids, max_tokens, stops, temperature, top_k, top_p, seed,
                            logprobs, False, presence_penalty=presence_penalty,
                            frequency_penalty=frequency_penalty,
                            repetition_penalty=repetition_penalty, min_p=min_p,
                            logit_bias=logit_bias, n=n)
        return AsyncRequest(self, rid, ids, events, int(n))

    def tokens(self, prompt: Prompt, max_tokens: int = 16, *, temperature: float = 0.0,
               top_k: int = 0, top_p: float = 1.0, seed: int = 0,
               stop_ids: Optional[Iterable[int]] = None, presence_penalty: float = 0.0,
               frequency_penalty: float = 0.0, repetition_penalty: float = 1.0,
               min_p: float = 0.0, logit_bias: Optional[Dict[int, float]] = None,
               n: int = 1) -> Iterator[Union[int, Tuple[int, int]]]:
        """One request's token ids, yielded as they come (:meth:`submit`'s options, and its
        errors, raised by this call): :meth:`tokens_of` the submitted request. With `n` > 1,
        ``(choice, token)`` pairs, the choices' tokens interleaved as they come."""
        request = self.submit(prompt, max_tokens, temperature=temperature, top_k=top_k,
                              top_p=top_p, seed=seed, stop_ids=stop_ids,
                              presence_penalty=presence_penalty,
                              frequency_penalty=frequency_penalty,
                              repetition_penalty=repetition_penalty, min_p=min_p,
                              logit_bias=logit_bias, n=n)
        return self.tokens_of(request)

    @staticmethod
    def tokens_of(request: Request) -> Iterator[Union[int, Tuple[int, int]]]:
        """The token ids of a submitted request, yielded as they come (``(choice, token)``
        pairs when it has n > 1 choices); the request is cancelled when the iteration stops
        early. Raises :class:`RequestError` when the request ends with an error."""
        try:
            for event in request:
                if event.token >= 0:
                    yield event.token if request.n == 1 else (event.choice, event.token)
        finally:
            request.cancel()

    async def stream(self, prompt: Prompt, max_tokens: int = 16, *, temperature: float = 0.0,
                     top_k: int = 0, top_p: float = 1.0, seed: int = 0,
                     stop_ids: Optional[Iterable[int]] = None, logprobs: Optional[int] = None,
                     logits: bool = False, presence_penalty: float = 0.0,
                     frequency_penalty: float = 0.0, repetition_penalty: float = 1.0,
                     min_p: float = 0.0, logit_bias: Optional[Dict[int, float]] = None,
                     n: int = 1) -> AsyncIterator[TokenEvent]:
        """Yields the request's :class:`TokenEvent` as they come (see :meth:`submit`; with
        `n` > 1, those of every choice, :attr:`TokenEvent.choice` saying whose).

        A consumer that stops early (``aclose()``, ``break`` followed by the
        generator's finalization, a cancelled task) cancels the request, so
        its KV blocks return to the pool.
        """
        request = self.submit_async(prompt, max_tokens, temperature=temperature, top_k=top_k,
                                    top_p=top_p, seed=seed, stop_ids=stop_ids,
                                    logprobs=logprobs, logits=logits,
                                    presence_penalty=presence_penalty,
                                    frequency_penalty=frequency_penalty,
                                    repetition_penalty=repetition_penalty, min_p=min_p,
                                    logit_bias=logit_bias, n=n)
        try:
            async for event in request:
                yield event
        finally:
            request.cancel()

    def generate(self, prompts: Sequence[Prompt], max_tokens: int = 16, *,
                 temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, seed: int = 0,
                 stop_ids: Optional[Iterable[int]] = None, presence_penalty: float = 0.0,
                 frequency_penalty: float = 0.0, repetition_penalty: float = 1.0,
                 min_p: float = 0.0, logit_bias: Optional[Dict[int, float]] = None,
                 n: int = 1) -> Union[List[List[int]], List[List[List[int]]]]:
        """Runs every prompt of `prompts` as one batch; returns their generated tokens in order
        (with `n` > 1, for each prompt the tokens of each choice).

        The options are :meth:`submit`'s, the same for every prompt. Every
        prompt is checked before any is queued.
        """
        if isinstance(prompts, (str, bytes)) or (
                len(prompts) and isinstance(prompts[0], (int, np.integer))):
            raise ValueError("generate takes a list of prompts; put a single prompt in a list")
        stop_ids = None if stop_ids is None else list(stop_ids)
        options = dict(presence_penalty=presence_penalty, frequency_penalty=frequency_penalty,
                       repetition_penalty=repetition_penalty, min_p=min_p,
                       logit_bias=logit_bias, n=n)
        for i, prompt in enumerate(prompts):
            try:
                self._check(prompt, max_tokens, temperature, top_k, top_p, stop_ids, None,
                            **options)
            except ValueError as e:
                raise ValueError(f"prompt {i}: {e}") from None
        requests: List[Request] = []
        try:
            for prompt in prompts:
                requests.append(self.submit(prompt, max_tokens, temperature=temperature,
                                            top_k=top_k, top_p=top_p, seed=seed,
                                            stop_ids=stop_ids, **options))
            return [r.result() for r in requests]
        finally:
            for r in requests:
                r.cancel()

    # -- the engine ------------------------------------------------------------------------

    def stats(self) -> Dict[str, Any]:
        """A snapshot of the engine's counters (docs/serving.md lists them)."""
        return self._guard.stats()

    @property
    def failure(self) -> Optional[str]:
        """None while the engine runs; once a step failed on the device (in a set: on any
        member), why: the engine then takes no more requests (docs/serving.md)."""
        if self._closing or not self.stats()["failed"]:
            return None
        return self._guard.last_error or "a step failed"

    def close(self) -> None:
        """Cancels every request (each gets its ``"cancelled"`` event) and stops the engine.
        Idempotent."""
        self._closing = True
        self._finalizer()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closing else "open"
        where = ", ".join(d.id for d in self.devices)
        return (f"<axrt.llm.Engine {self.executable.name} on {where}, "
                f"{self.config.num_layers} layers, {state}>")


def follow(model, member, device=None) -> None:
    """Runs this process's member of a tensor-parallel set across processes: loads rank
    `member.rank`'s shard of the set at `model` (its directory) onto `device` (default: the
    member's device) and runs every step the head's engine sends, until the head closes its
    engine (returns) or the group fails (raises an axrt.Error naming the member lost).
    `member` is this process's ``axrt.init_group(...)``, of rank 1 or more."""
    if member.rank == 0:
        raise ValueError("this process is rank 0, the head: it runs axrt.llm.Engine(..., group=)")
    shards = load_member(model, member.rank, member.size,
                         device if device is not None else member.device)
    _axrt._engine_follow(shards.executables[0], member)
