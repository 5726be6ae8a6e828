"""Running a converted model on one device: :class:`Model`, :class:`Session`
(loading: :func:`axrt.llm.load`; tensor-parallel sets: :mod:`axrt.llm.parallel`)."""
from __future__ import annotations

import os
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from .. import _axrt
from .config import ModelConfig, UnsupportedModelError
from .engine import Engine
from .modelfile import check_sampling, check_token_ids, make_tokenizer, read_model

PathLike = Union[str, "os.PathLike[str]"]


class BlockAllocator:
    """Hands out the blocks of one KV-cache pool: ids in ``[0, num_blocks)``."""

    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = int(num_blocks)
        self._free = list(range(self.num_blocks - 1, -1, -1))

    @property
    def free_blocks(self) -> int:
        return len(self._free)

    def allocate(self, count: int) -> List[int]:
        if count > len(self._free):
            raise MemoryError(f"the KV cache has {len(self._free)} free blocks of "
                              f"{self.num_blocks}; {count} are needed")
        return [self._free.pop() for _ in range(count)]

    def release(self, blocks: Iterable[int]) -> None:
        for block in blocks:
            self._free.append(int(block))


class Session:
    """One sequence in a KV cache: its blocks, its length, and the calls that extend it.

    Made by :meth:`Model.session`; :meth:`close` (or leaving a ``with``
    block) gives its blocks back.
    """

    def __init__(self, model: "LanguageModel", capacity: int) -> None:
        cfg = model.config
        if capacity < 1 or capacity > cfg.max_context:
            raise ValueError(f"a sequence of {capacity} tokens does not fit the model's context "
                             f"of {cfg.max_context}")
        self.model = model
        self.capacity = int(capacity)
        self.length = 0
        self._blocks = model._allocator.allocate(-(-capacity // cfg.block_size))
        table = np.zeros((1, cfg.max_blocks_per_sequence), np.int32)
        table[0, :len(self._blocks)] = self._blocks
        self.block_table = table

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._blocks:
            self.model._allocator.release(self._blocks)
            self._blocks = []

    def _room(self, count: int) -> None:
        if not self._blocks:
            raise ValueError("the session is closed")
        if self.length + count > self.capacity:
            raise ValueError(f"the sequence would reach {self.length + count} tokens; "
                             f"the session holds {self.capacity}")

    def prefill(self, token_ids: Sequence[int], chunk: Optional[int] = None) -> np.ndarray:
        """Appends `token_ids`; returns the logits after the last, f32 ``[V]``.

        Runs the ``prefill`` function in chunks of at most `chunk` tokens
        (default and most: the model's prefill chunk).
        """
        ids = self.model._check_ids(token_ids)
        if ids.size == 0:
            raise ValueError("prefill needs at least one token")
        return self._prefill(ids, chunk).numpy()[0]

    def _prefill(self, ids: np.ndarray, chunk: Optional[int] = None):
        """:meth:`prefill` of checked, non-empty int32 `ids`; the logits stay a tensor."""
        self._room(ids.size)
        cfg = self.model.config
        chunk = cfg.prefill_chunk if chunk is None else max(1, min(int(chunk), cfg.prefill_chunk))
        for start in range(0, ids.size, chunk):
            part = ids[start:start + chunk]
            positions = np.arange(self.length, self.length + part.size, dtype=np.int32)
            logits = self.model._prefill(part, positions, self.block_table, self.model.kv_cache)
            self.length += part.size
        return logits

    def decode(self, token_id: int) -> np.ndarray:
        """Appends one token; returns the logits after it, f32 ``[V]``."""
        self._room(1)
        return self._decode(self.model._check_ids([token_id])).numpy()[0]

    def _decode(self, ids):
        """:meth:`decode` of a checked int32 ``[1]`` token id (an array or a tensor), once
        :meth:`_room` allowed it."""
        positions = np.array([self.length], np.int32)
        logits = self.model._decode(ids, positions, self.block_table, self.model.kv_cache)
        self.length += 1
        return logits


class LanguageModel:
    """What a one-device model offers: generation through the serving engine, and
    sessions over a paged KV cache.

    ``config`` is the model's :class:`ModelConfig`; ``tokenizer`` its
    tokenizer (a ``tokenizers.Tokenizer``) when the file carries one, else None
    (reading it raises MissingExtraError, an ImportError naming the extra, when
    the tokenizers package is missing). The sessions' KV cache is one pool of
    ``num_blocks`` blocks of ``config.block_size`` tokens. A subclass provides
    ``kv_cache``, the calls ``_prefill(tokens, positions, block_table,
    kv_cache)`` and ``_decode(...)`` (each returning the logits as a tensor),
    and ``_serving_engine()``, the engine that generates.
    """

    def __init__(self, config: ModelConfig, tokenizer_json: Optional[str],
                 num_blocks: Optional[int]) -> None:
        self.config, self.tokenizer_json = config, tokenizer_json
        self._tokenizer = None
        if num_blocks is None:
            num_blocks = config.max_blocks_per_sequence
        self.num_blocks = int(num_blocks)
        if self.num_blocks < 1:
            raise ValueError(f"num_blocks must be at least 1, not {num_blocks}")
        self._allocator = BlockAllocator(self.num_blocks)

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = make_tokenizer(self.tokenizer_json)
        return self._tokenizer

    def _check_ids(self, token_ids: Sequence[int]) -> np.ndarray:
        return check_token_ids(token_ids, self.config.vocab_size)

    def session(self, capacity: Optional[int] = None) -> Session:
        """A new sequence holding up to `capacity` tokens (default: the model's context)."""
        return Session(self, self.config.max_context if capacity is None else int(capacity))

    def stream(self, prompt_ids: Sequence[int], max_new_tokens: int = 16, *,
               temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, seed: int = 0,
               stop_ids: Optional[Iterable[int]] = None) -> Iterator[int]:
        """Yields generated token ids one at a time, as they are produced.

        Greedy when `temperature` is 0; otherwise samples from the softmax of
        logits / temperature, keeping the `top_k` most likely tokens (0: all)
        and then the smallest set reaching probability `top_p`. `seed` makes
        a sampled run reproducible. Stops after `max_new_tokens`, or after
        yielding a token of `stop_ids` (default: the model's end-of-sequence
        ids; pass ``()`` for none).
        """
        prompt = self._check_ids(prompt_ids)
        if prompt.size == 0:
            raise ValueError("the prompt needs at least one token")
        if max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be >= 0, not {max_new_tokens}")
        total = prompt.size + max_new_tokens
        if total > self.config.max_context:
            raise ValueError(f"prompt ({prompt.size}) + max_new_tokens ({max_new_tokens}) = {total} "
                             f"exceeds the model's context of {self.config.max_context}")
        check_sampling(float(temperature), int(top_k), float(top_p))
        if max_new_tokens == 0:
            return
        # The serving engine, serving this one request.
        yield from self._serving_engine().tokens(
            prompt, max_new_tokens, temperature=float(temperature), top_k=int(top_k),
            top_p=float(top_p), seed=int(seed) & 0xFFFFFFFFFFFFFFFF,
            stop_ids=tuple(self.config.eos_token_ids if stop_ids is None
                           else (int(s) for s in stop_ids)))

    def _serving_engine(self):
        """The engine that generates."""
        raise NotImplementedError

    def generate(self, prompt_ids: Sequence[int], max_new_tokens: int = 16, *,
                 temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, seed: int = 0,
                 stop_ids: Optional[Iterable[int]] = None) -> List[int]:
        """The generated token ids (not the prompt); see :meth:`stream`."""
        return list(self.stream(prompt_ids, max_new_tokens, temperature=temperature, top_k=top_k,
                                top_p=top_p, seed=seed, stop_ids=stop_ids))


class Model(LanguageModel):
    """A language model converted by ``axrt.llm convert``, loaded on one device.

    ``executable`` is the loaded file, ``device`` its device; ``config`` and
    ``tokenizer`` are :class:`LanguageModel`'s. :meth:`generate` and
    :meth:`stream` go through the serving engine (``engine``, made at the
    first request, over a KV cache of ``num_blocks`` blocks), serving one
    request. Sessions (:meth:`session`) are the single-sequence API over the
    file's ``prefill`` and ``decode``, on their own pool ``kv_cache`` (made
    at the first session). :meth:`close` (or leaving a ``with`` block) stops
    the engine.
    """

    def __init__(self, executable, num_blocks: Optional[int] = None) -> None:
        self.executable = executable
        super().__init__(*read_model(executable), num_blocks)
        self._prefill = executable["prefill"]
        self._decode = executable["decode"]
        self._kv_cache = None
        self._engine = None

    @property
    def device(self):
        return self.executable.device

    @property
    def kv_cache(self):
        """The sessions' KV-cache pool, a tensor on the model's device."""
        if self._kv_cache is None:
            self._kv_cache = _axrt.empty(self.config.kv_cache_shape(self.num_blocks), "float32",
                                         device=self.executable.device)
        return self._kv_cache

    @property
    def engine(self) -> Engine:
        """The serving engine that :meth:`generate` and :meth:`stream` use."""
        return self._serving_engine()

    def _serving_engine(self) -> Engine:
        if self._engine is None:
            self._engine = Engine(self, num_blocks=self.num_blocks)
        return self._engine

    def close(self) -> None:
        """Stops the engine (if one was made); sessions still work."""
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
