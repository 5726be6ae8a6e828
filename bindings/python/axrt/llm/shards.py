"""Tensor-parallel sets: the shards ``axrt.llm convert --tensor-parallel N`` writes, checked
and loaded one per device (docs/multi-device.md, "Tensor-parallel models")."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .. import _axrt
from .config import SHARD_KEY, ModelConfig, ShardInfo, UnsupportedModelError, shard_file_name
from .modelfile import read_model

_RANK_FILE = re.compile(r"rank(\d+)\.axe")


@dataclass
class ShardSet:
    """A set's shards, loaded: `executables` and `infos` in rank order, rank 0 first."""

    executables: List[Any]
    infos: List[ShardInfo]
    config: ModelConfig
    tokenizer_json: Optional[str]

    @property
    def devices(self) -> List[Any]:
        return [e.device for e in self.executables]


def is_set(path) -> bool:
    """Whether `path` names a set: a directory of shards, or a list of shard files."""
    return isinstance(path, (list, tuple)) or (not isinstance(path, bytes) and
                                               os.path.isdir(path))


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


def check_devices(devices: Sequence) -> List[Any]:
    """`devices` as axrt devices; TypeError or ValueError unless a list of distinct ones."""
    if isinstance(devices, (str, bytes)) or not hasattr(devices, "__len__"):
        raise TypeError("devices must be a list of devices or device names, one per shard")
    devices = [_device(d) for d in devices]
    if not devices:
        raise ValueError("devices is empty: give one device per shard")
    ids = [d.id for d in devices]
    for i, d in enumerate(ids):
        if d in ids[:i]:
            raise ValueError(f"device {d} is given twice: each shard needs its own device")
    return devices


def load_set(path, devices: Sequence) -> ShardSet:
    """Loads the set at `path` (its directory, or its files in rank order) onto `devices`.

    Every shard is checked against rank 0's as it is loaded: rank, set size,
    the conversion it came from, the model configuration and the layout of
    its part. Anything else is refused with UnsupportedModelError naming the
    file; the wrong number of devices, or a device given twice, with
    ValueError. A one-device list takes a single-file model too (a set of
    one, with no shard information).
    """
    devices = check_devices(devices)
    files, directory = _shard_files(path)
    first = _axrt.load(files[0], devices[0])
    if SHARD_KEY not in first.metadata:
        if len(files) == 1 and len(devices) == 1:
            config, tokenizer_json = read_model(first)
            return ShardSet([first], [ShardInfo.of(config, 0, 1, "")], config, tokenizer_json)
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
    return ShardSet(executables, infos, config, tokenizer_json)


def load_member(path, rank: int, size: int, device) -> ShardSet:
    """Loads rank `rank`'s shard of the set at `path` (a directory) onto `device`, for a set
    whose members run in separate processes (a group of `size` members): the other ranks'
    files are not read. Refused with UnsupportedModelError when the shard is not rank
    `rank` of a set of `size`."""
    files, directory = _shard_files(path)
    if directory is None:
        raise UnsupportedModelError(f"{path} is not a tensor-parallel set's directory "
                                    "(axrt.llm convert --tensor-parallel N writes one)")
    if rank not in directory:
        raise UnsupportedModelError(f"{Path(path)} lacks {shard_file_name(rank)}, this "
                                    f"member's shard (rank {rank} of {size})")
    name = directory[rank]
    executable = _axrt.load(name, _device(device))
    if SHARD_KEY not in executable.metadata:
        raise UnsupportedModelError(f"{name} is not a shard of a tensor-parallel set "
                                    "(axrt.llm convert --tensor-parallel N writes one)")
    info = ShardInfo.from_json(executable.metadata[SHARD_KEY])
    config, tokenizer_json = read_model(executable, shard=True)
    if info.size != size:
        raise UnsupportedModelError(f"{name} belongs to a set of {info.size} shards, and the "
                                    f"group has {size} members: one process per shard")
    _check_part(name, info, rank, config)
    return ShardSet([executable], [info], config, tokenizer_json)


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
