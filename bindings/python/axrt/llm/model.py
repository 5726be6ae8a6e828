"""Language models as views of the serving engine: :class:`Model` (one device),
:class:`LanguageModel` (what it shares with :class:`~axrt.llm.parallel.ParallelModel`)
and :class:`Session`, one sequence extended call by call. Loading: :func:`axrt.llm.load`."""
from __future__ import annotations

import os
from typing import Iterable, Iterator, List, Optional, Sequence, Union

import numpy as np

from .config import ModelConfig
from .engine import Engine
from .modelfile import check_token_ids, make_tokenizer, read_model

PathLike = Union[str, "os.PathLike[str]"]


class Session:
    """One sequence, extended call by call; each call returns the logits after it.

    A thin view of the model's engine: the session keeps the sequence's
    token ids, and each call is one engine request over the whole sequence
    so far, generating one token (greedy, not kept) whose event carries the
    logits. The engine's prefix cache supplies the KV blocks that earlier
    calls filled, so a call computes the tokens it appends and those after
    the sequence's last full block (fewer than a block); an engine made
    without prefix caching computes the whole sequence. The engine
    schedules every call beside whatever else it serves, and the session
    holds no KV blocks between calls.

    Made by :meth:`LanguageModel.session`; a sequence may reach `capacity`
    tokens (at most the model's context less one, the token each call
    generates). :meth:`close` (or leaving a ``with`` block) ends it.
    """

    def __init__(self, model: "LanguageModel", capacity: int) -> None:
        engine = model._serving_engine()
        most = engine.max_context - 1
        if capacity < 1 or capacity > most:
            raise ValueError(f"a session holds 1 to {most} tokens (the model's context of "
                             f"{engine.max_context} less the token a call generates), "
                             f"not {capacity}")
        self.model = model
        self.capacity = int(capacity)
        self._ids = np.zeros(0, np.int32)
        self._open = True

    @property
    def length(self) -> int:
        """The tokens in the sequence so far."""
        return int(self._ids.size)

    @property
    def token_ids(self) -> List[int]:
        return self._ids.tolist()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._open = False

    def prefill(self, token_ids: Sequence[int]) -> np.ndarray:
        """Appends `token_ids` (at least one); returns the logits after the last, f32 ``[V]``."""
        ids = check_token_ids(token_ids, self.model.config.vocab_size)
        if ids.size == 0:
            raise ValueError("prefill needs at least one token")
        return self._extend(ids)

    def decode(self, token_id: int) -> np.ndarray:
        """Appends one token; returns the logits after it, f32 ``[V]``."""
        return self._extend(check_token_ids([token_id], self.model.config.vocab_size))

    def _extend(self, ids: np.ndarray) -> np.ndarray:
        if not self._open:
            raise ValueError("the session is closed")
        if self.length + ids.size > self.capacity:
            raise ValueError(f"the sequence would reach {self.length + ids.size} tokens; "
                             f"the session holds {self.capacity}")
        sequence = np.concatenate([self._ids, ids])
        request = self.model._serving_engine().submit(sequence, 1, stop_ids=(), logits=True)
        logits = next(event.logits for event in request if event.logits is not None)
        request.result()
        self._ids = sequence
        return logits


class LanguageModel:
    """What every loaded model offers, all through its serving engine: generation
    (:meth:`generate`, :meth:`stream`) and sessions (:meth:`session`).

    ``config`` is the model's :class:`ModelConfig`; ``tokenizer`` its
    tokenizer (a ``tokenizers.Tokenizer``) when the file carries one, else
    None (reading it raises MissingExtraError, an ImportError naming the
    extra, when the tokenizers package is missing). A subclass provides
    ``_serving_engine()``, the engine.
    """

    def __init__(self, config: ModelConfig, tokenizer_json: Optional[str]) -> None:
        self.config, self.tokenizer_json = config, tokenizer_json
        self._tokenizer = None

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = make_tokenizer(self.tokenizer_json)
        return self._tokenizer

    @property
    def engine(self) -> Engine:
        """The serving engine that generation and sessions go through."""
        return self._serving_engine()

    def _serving_engine(self) -> Engine:
        raise NotImplementedError

    def session(self, capacity: Optional[int] = None) -> Session:
        """A new sequence of up to `capacity` tokens (default: as many as a call allows)."""
        most = self._serving_engine().max_context - 1
        return Session(self, most if capacity is None else int(capacity))

    def stream(self, prompt_ids: Sequence[int], max_new_tokens: int = 16, *,
               temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, seed: int = 0,
               stop_ids: Optional[Iterable[int]] = None) -> Iterator[int]:
        """Yields generated token ids one at a time, as the engine produces them.

        Greedy when `temperature` is 0; otherwise samples from the softmax of
        logits / temperature, keeping the `top_k` most likely tokens (0: all)
        and then the smallest set reaching probability `top_p`. `seed` makes
        a sampled run reproducible. Stops after `max_new_tokens`, or after
        yielding a token of `stop_ids` (default: the model's end-of-sequence
        ids; pass ``()`` for none). Bad arguments raise ValueError before
        anything runs.
        """
        engine = self._serving_engine()
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)):
            raise ValueError(f"max_new_tokens must be an integer, not {max_new_tokens!r}")
        if max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be >= 0, not {max_new_tokens}")
        if max_new_tokens == 0:
            # Nothing to generate; the prompt is still checked.
            engine._check(prompt_ids, 1, temperature, top_k, top_p, stop_ids, None)
            return iter(())
        # The request is queued here, so that its errors come from this call.
        request = engine.submit(prompt_ids, int(max_new_tokens), temperature=temperature,
                                top_k=top_k, top_p=top_p, seed=seed, stop_ids=stop_ids)
        return engine.tokens_of(request)

    def generate(self, prompt_ids: Sequence[int], max_new_tokens: int = 16, *,
                 temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, seed: int = 0,
                 stop_ids: Optional[Iterable[int]] = None) -> List[int]:
        """The generated token ids (not the prompt); see :meth:`stream`."""
        return list(self.stream(prompt_ids, max_new_tokens, temperature=temperature, top_k=top_k,
                                top_p=top_p, seed=seed, stop_ids=stop_ids))


class Model(LanguageModel):
    """A language model converted by ``axrt.llm convert``, loaded on one device.

    ``executable`` is the loaded file, ``device`` its device; ``engine``
    the serving engine that generation and sessions go through, made at the
    first request over a KV cache of `num_blocks` blocks (default: one full
    context). :meth:`close` (or leaving a ``with`` block) stops the engine;
    a later request makes a new one.
    """

    def __init__(self, executable, num_blocks: Optional[int] = None) -> None:
        super().__init__(*read_model(executable))
        self.executable = executable
        if num_blocks is None:
            num_blocks = self.config.max_blocks_per_sequence
        if isinstance(num_blocks, bool) or int(num_blocks) < 1:
            raise ValueError(f"num_blocks must be at least 1, not {num_blocks}")
        self.num_blocks = int(num_blocks)
        self._engine = None

    @property
    def device(self):
        return self.executable.device

    def _serving_engine(self) -> Engine:
        if self._engine is None:
            self._engine = Engine(self, num_blocks=self.num_blocks)
        return self._engine

    def close(self) -> None:
        """Stops the engine, if one was made."""
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
