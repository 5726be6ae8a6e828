""":func:`load`: a converted model onto a device, or a tensor-parallel set onto its devices."""
from __future__ import annotations

import os
from typing import Optional, Sequence, Union

from .. import _axrt
from .config import SHARD_KEY, UnsupportedModelError
from .model import Model, PathLike
from .parallel import ParallelModel
from .shards import check_devices, is_set


def load(path: Union[PathLike, bytes, Sequence[PathLike]], device=None, *,
         devices: Optional[Sequence] = None,
         num_blocks: Optional[int] = None) -> Union[Model, ParallelModel]:
    """Loads a model converted by ``axrt.llm convert`` onto `device` (default: the default device).

    `num_blocks`: blocks of the KV-cache pool (default: one full context).
    `devices`, a list of devices (or their names), loads a tensor-parallel
    set instead: `path` is the directory ``convert(..., tensor_parallel=N)``
    wrote (or the list of its shard files in rank order) and `devices` its N
    devices in rank order; the result is a
    :class:`~axrt.llm.parallel.ParallelModel`, served by the engine
    (docs/multi-device.md). A one-device list takes a single-file model too.
    """
    if devices is not None:
        if device is not None:
            raise ValueError("give device= (one file) or devices= (a tensor-parallel set), "
                             "not both")
        checked = check_devices(devices)
        if len(checked) == 1 and not is_set(path) and not isinstance(path, bytes):
            executable = _axrt.load(os.fspath(path), checked[0])
            if SHARD_KEY not in executable.metadata:
                return Model(executable, num_blocks=num_blocks)
        return ParallelModel(path, checked, num_blocks=num_blocks)
    if isinstance(path, (list, tuple)):
        raise ValueError("a list of shard files is a tensor-parallel set: give its devices= too")
    if not isinstance(path, bytes) and os.path.isdir(path):
        raise UnsupportedModelError(
            f"{os.fspath(path)} is a directory: a tensor-parallel set is loaded with "
            "axrt.llm.load(path, devices=[...]), one device per shard")
    return Model(_axrt.load(os.fspath(path) if not isinstance(path, bytes) else path, device),
                 num_blocks=num_blocks)
