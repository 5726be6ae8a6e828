"""Tensor-parallel models: a set of shards written by ``axrt.llm convert --tensor-parallel N``,
run on N devices (docs/multi-device.md, "Tensor-parallel models").

    model = axrt.llm.load("model-tp2", devices=["cpu:0", "cpu:1"])
    ids = model.generate([1, 2, 3], max_new_tokens=16)

Each rank's file holds its part of every layer, cut where the layer's
attention and MLP end in a partial sum over the ranks; the runner calls the
parts rank by rank and all-reduces each partial sum across the device group
between them, all of it queued on the devices' default streams. Only the
sampled tokens come back to the host.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from .. import _axrt
from .config import SHARD_KEY, ModelConfig, ShardInfo, UnsupportedModelError, shard_file_name
from .model import LanguageModel, Model, read_model

_RANK_FILE = re.compile(r"rank(\d+)\.axe")


class _Rank:
    """The functions of one rank's shard, looked up once."""

    def __init__(self, executable, layers: int, holds_head: bool) -> None:
        missing = []

        def get(name: str):
            if name not in executable:
                missing.append(name)
                return None
            return executable[name]

        self.embed = get("embed")
        self.attention = {which: [get(f"{which}.attention.{l}") for l in range(layers)]
                          for which in ("prefill", "decode")}
        self.mlp = [get(f"mlp.{l}") for l in range(layers)]
        self.head = {}
        self.sample = None
        if holds_head:
            self.head = {which: get(f"{which}.head") for which in ("prefill", "decode")}
            self.sample = get("sample")
        if missing:
            raise UnsupportedModelError(f"{executable.name} lacks the shard functions "
                                        f"{', '.join(missing)}: convert the model again")


class ParallelModel(LanguageModel):
    """A model converted with ``--tensor-parallel N``, its N shards loaded on N devices.

    Made by :func:`axrt.llm.load` with ``devices=``. Generation, sessions,
    ``config`` and ``tokenizer`` behave as :class:`~axrt.llm.Model`'s and
    give the same tokens. ``executables`` and ``devices`` are the shards and
    their devices in rank order, ``group`` the device group whose all-reduce
    joins them, ``kv_cache`` one tensor per rank holding that rank's KV heads
    (``[L, 2, num_blocks, KVH / N, BS, D]``). :meth:`close` (or leaving a
    ``with`` block) closes the group.
    """

    def __init__(self, executables: Sequence, infos: Sequence[ShardInfo], config: ModelConfig,
                 tokenizer_json: Optional[str], num_blocks: Optional[int] = None) -> None:
        super().__init__(config, tokenizer_json, num_blocks)
        self.executables = list(executables)
        self.devices = [e.device for e in self.executables]
        self.head_rank = infos[0].head_rank
        self._ranks = [_Rank(e, config.num_layers, info.rank == self.head_rank)
                       for e, info in zip(self.executables, infos)]
        head = self._ranks[self.head_rank]
        self._sample = head.sample
        kv_heads = infos[0].kv_heads[1] - infos[0].kv_heads[0]
        shape = (config.num_layers, 2, self.num_blocks, kv_heads, config.block_size,
                 config.head_dim)
        self.kv_cache = [_axrt.empty(shape, "float32", device=d) for d in self.devices]
        self.group = _axrt.group(self.devices, label="axrt.llm")

    @property
    def size(self) -> int:
        """The number of ranks (devices)."""
        return len(self.devices)

    def close(self) -> None:
        """Closes the device group; the model cannot run afterwards."""
        if self.group is not None:
            self.group.close()
            self.group = None

    def __enter__(self) -> "ParallelModel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _all_reduce(self, partials: List) -> List:
        """The ranks' partial sums, each replaced by their sum: queued on every device's
        default stream behind the partial's producer, not waited for."""
        return self.group.all_reduce(partials, op="sum")

    def _prefill(self, tokens, positions, block_table, kv_cache):
        return self._forward("prefill", tokens, positions, block_table, kv_cache)

    def _decode(self, tokens, positions, block_tables, kv_cache):
        return self._forward("decode", tokens, positions, block_tables, kv_cache)

    def _forward(self, which: str, tokens, positions, tables, caches):
        """One pass over the layers on every rank; the logits, on the head rank's device."""
        if self.group is None:
            raise ValueError("the model is closed")
        if isinstance(tokens, _axrt.Tensor):
            # A token the head rank sampled, already read back by the caller.
            tokens = tokens.numpy()
        inputs = [(_axrt.asarray(tokens, device=d), _axrt.asarray(positions, device=d),
                   _axrt.asarray(tables, device=d)) for d in self.devices]
        ranks = range(len(self._ranks))
        hidden = [self._ranks[r].embed(inputs[r][0]) for r in ranks]
        delta = None
        for l in range(self.config.num_layers):
            partial = [self._ranks[r].attention[which][l](
                hidden[r], *(() if delta is None else (delta[r],)), inputs[r][1], inputs[r][2],
                caches[r]) for r in ranks]
            delta = self._all_reduce(partial)
            partial = [self._ranks[r].mlp[l](hidden[r], delta[r]) for r in ranks]
            delta = self._all_reduce(partial)
        h = self.head_rank
        return self._ranks[h].head[which](hidden[h], delta[h])


def _device(d):
    return _axrt.device(d) if isinstance(d, str) else d


def _shard_files(path) -> Tuple[List[str], Optional[Dict[int, str]]]:
    """The shard files to load in rank order and, for a directory, every rank file it holds."""
    if isinstance(path, (list, tuple)):
        return [os.fspath(p) for p in path], None
    directory = Path(path)
    if not directory.is_dir():
        return [os.fspath(path)], None
    found = {}
    for entry in directory.iterdir():
        match = _RANK_FILE.fullmatch(entry.name)
        if match:
            found[int(match.group(1))] = os.fspath(entry)
    if 0 not in found:
        raise UnsupportedModelError(f"{directory} holds no {shard_file_name(0)}: it is not a "
                                    "tensor-parallel set written by axrt.llm convert "
                                    "--tensor-parallel")
    return [found[0]], found


def load_parallel(path, devices, *, num_blocks: Optional[int] = None):
    """Loads a tensor-parallel set onto `devices` (rank order); see :func:`axrt.llm.load`.

    Every shard is checked against rank 0's as it is loaded: rank, set size,
    the conversion it came from, the model configuration and the layout of
    its part. Anything else is refused with UnsupportedModelError naming the
    file; the wrong number of devices, or a device given twice, with
    ValueError.
    """
    if isinstance(devices, (str, bytes)) or not hasattr(devices, "__len__"):
        raise TypeError("devices must be a list of devices or device names, one per shard")
    devices = [_device(d) for d in devices]
    if not devices:
        raise ValueError("devices is empty: give one device per shard")
    ids = [d.id for d in devices]
    for i, d in enumerate(ids):
        if d in ids[:i]:
            raise ValueError(f"device {d} is given twice: each shard needs its own device")
    files, directory = _shard_files(path)
    first = _axrt.load(files[0], devices[0])
    if SHARD_KEY not in first.metadata:
        if len(files) == 1 and len(devices) == 1:
            return Model(first, num_blocks=num_blocks)
        raise UnsupportedModelError(f"{files[0]} is not a shard of a tensor-parallel set "
                                    "(axrt.llm convert --tensor-parallel N writes one)")
    info = ShardInfo.from_json(first.metadata[SHARD_KEY])
    config, tokenizer_json = read_model(first, shard=True)
    size = info.size
    if len(devices) != size:
        raise ValueError(f"{files[0]} belongs to a set of {size} shards; {len(devices)} "
                         f"devices were given: one device per shard, in rank order")
    if directory is not None:
        extra = sorted(r for r in directory if r >= size)
        if extra:
            raise UnsupportedModelError(
                f"{Path(path)} holds {shard_file_name(extra[0])}, beyond its set of {size} "
                f"shards ({shard_file_name(0)} .. {shard_file_name(size - 1)})")
        missing = [r for r in range(size) if r not in directory]
        if missing:
            raise UnsupportedModelError(
                f"{Path(path)} lacks {shard_file_name(missing[0])}: the set of {size} shards "
                "is incomplete")
        files = [directory[r] for r in range(size)]
    elif len(files) != size:
        raise UnsupportedModelError(f"{files[0]} belongs to a set of {size} shards; "
                                    f"{len(files)} files were given")
    _check_part(files[0], info, 0, config)
    executables, infos = [first], [info]
    for rank in range(1, size):
        executable = _axrt.load(files[rank], devices[rank])
        infos.append(_check_shard(executable, files[rank], rank, info, config))
        executables.append(executable)
    return ParallelModel(executables, infos, config, tokenizer_json, num_blocks)


def _check_part(name: str, info: ShardInfo, rank: int, config: ModelConfig) -> None:
    if info.rank != rank:
        raise UnsupportedModelError(f"{name} is rank {info.rank} of its set, given as rank "
                                    f"{rank}: give the shards in rank order")
    want = ShardInfo.of(config, rank, info.size, info.set_id)
    if info != want:
        raise UnsupportedModelError(f"{name}: its part of the model ({info.to_json()}) is not "
                                    f"rank {rank}'s of {info.size} ({want.to_json()})")


def _check_shard(executable, name: str, rank: int, first: ShardInfo,
                 config: ModelConfig) -> ShardInfo:
    """The ShardInfo of rank `rank`'s file, once it agrees with rank 0's set and model."""
    metadata = executable.metadata
    if SHARD_KEY not in metadata:
        raise UnsupportedModelError(f"{name} is not a shard of a tensor-parallel set "
                                    "(axrt.llm convert --tensor-parallel N writes one)")
    info = ShardInfo.from_json(metadata[SHARD_KEY])
    if info.set_id != first.set_id or info.size != first.size:
        raise UnsupportedModelError(
            f"{name} is rank {info.rank} of another set (of {info.size} shards, conversion "
            f"{info.set_id}) than rank 0's (of {first.size}, conversion {first.set_id}): a "
            "set's shards come from one conversion")
    theirs, _ = read_model(executable, shard=True)
    if theirs != config:
        raise UnsupportedModelError(f"{name} holds another model configuration than rank 0's")
    _check_part(name, info, rank, config)
    return info
