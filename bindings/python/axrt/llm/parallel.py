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

from typing import Optional, Sequence

from .engine import Engine
from .model import LanguageModel


class ParallelModel(LanguageModel):
    """A model converted with ``--tensor-parallel N``, its N shards loaded on N devices.

    Made by :func:`axrt.llm.load` with ``devices=``: a view of an
    :class:`~axrt.llm.Engine` serving the set. Generation, sessions,
    ``config`` and ``tokenizer`` are :class:`~axrt.llm.LanguageModel`'s and
    give the same tokens as :class:`~axrt.llm.Model`'s. ``executables`` and
    ``devices`` are the shards and their devices in rank order, ``group``
    the device group joining them, ``engine`` the engine. :meth:`close` (or
    leaving a ``with`` block) stops the engine and closes the group.
    """

    def __init__(self, path, devices: Sequence, *, num_blocks: Optional[int] = None) -> None:
        engine = Engine(path, devices=devices, num_blocks=int(num_blocks or 0))
        super().__init__(engine.config, engine.tokenizer_json)
        self._engine = engine
        self.executables = engine.executables
        self.devices = engine.devices
        self.group = engine.group

    @property
    def size(self) -> int:
        """The number of ranks (devices)."""
        return len(self.devices)

    @property
    def tokenizer(self):
        return self._engine.tokenizer

    def _serving_engine(self) -> Engine:
        return self._engine

    def close(self) -> None:
        """Stops the engine and closes the device group; the model cannot run afterwards."""
        self._engine.close()

    def __enter__(self) -> "ParallelModel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
