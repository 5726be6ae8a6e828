"""Tensor-parallel models: a set of shards written by ``axrt.llm convert --tensor-parallel N``,
run on N devices by the serving engine (docs/multi-device.md, "Tensor-parallel models").

    model = axrt.llm.load("model-tp2", devices=["cpu:0", "cpu:1"])
    ids = model.generate([1, 2, 3], max_new_tokens=16)

Each rank's file holds its part of every layer and the two all-reduces per
layer that complete them (collective commands, format 1.4); the engine runs
every step on every rank, each on its own stream, the group's collectives
joining them, and samples once on the head rank.
"""
from __future__ import annotations

from typing import Iterable, Iterator, List, Optional, Sequence

from .engine import Engine


class ParallelModel:
    """A model converted with ``--tensor-parallel N``, its N shards loaded on N devices.

    Made by :func:`axrt.llm.load` with ``devices=``: a view of an
    :class:`~axrt.llm.Engine` serving one request at a time. Generation,
    ``config`` and ``tokenizer`` behave as :class:`~axrt.llm.Model`'s and give
    the same tokens (there are no sessions: the engine schedules the KV
    cache). ``executables`` and ``devices`` are the shards and their devices
    in rank order, ``group`` the device group joining them, ``engine`` the
    engine. :meth:`close` (or leaving a ``with`` block) stops the engine and
    closes the group.
    """

    def __init__(self, path, devices: Sequence, *, num_blocks: Optional[int] = None) -> None:
        self.engine = Engine(path, devices=devices, num_blocks=int(num_blocks or 0))
        self.config = self.engine.config
        self.tokenizer_json = self.engine.tokenizer_json
        self.executables = self.engine.executables
        self.devices = self.engine.devices
        self.group = self.engine.group

    @property
    def size(self) -> int:
        """The number of ranks (devices)."""
        return len(self.devices)

    @property
    def tokenizer(self):
        return self.engine.tokenizer

    def close(self) -> None:
        """Stops the engine and closes the device group; the model cannot run afterwards."""
        self.engine.close()

    def __enter__(self) -> "ParallelModel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def stream(self, prompt_ids: Sequence[int], max_new_tokens: int = 16, *,
               temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, seed: int = 0,
               stop_ids: Optional[Iterable[int]] = None) -> Iterator[int]:
        """Yields generated token ids one at a time (:meth:`axrt.llm.Model.stream`'s rules)."""
        if max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be >= 0, not {max_new_tokens}")
        if max_new_tokens == 0:
            self.engine.encode(prompt_ids)  # still checked
            return
        yield from self.engine.tokens(prompt_ids, max_new_tokens, temperature=temperature,
                                      top_k=top_k, top_p=top_p, seed=seed, stop_ids=stop_ids)

    def generate(self, prompt_ids: Sequence[int], max_new_tokens: int = 16, *,
                 temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, seed: int = 0,
                 stop_ids: Optional[Iterable[int]] = None) -> List[int]:
        """The generated token ids (not the prompt); see :meth:`stream`."""
        return list(self.stream(prompt_ids, max_new_tokens, temperature=temperature, top_k=top_k,
                                top_p=top_p, seed=seed, stop_ids=stop_ids))
