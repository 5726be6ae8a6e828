"""Reads Hugging Face checkpoints: config.json and *.safetensors, memory-mapped.

Which files hold the weights: those that ``model.safetensors.index.json``
names, when the directory has one (as every multi-shard checkpoint does: its
``weight_map`` maps each tensor name to the file holding it; other
``.safetensors`` files beside them, such as a consolidated copy, are not
read), else every ``*.safetensors`` file of the directory.

The safetensors layout (its documented format): an unsigned 64-bit
little-endian header length N, N bytes of JSON mapping each tensor name to
``{"dtype", "shape", "data_offsets": [begin, end]}`` (offsets relative to
the byte after the header) plus an optional ``"__metadata__"`` entry, then
the data. Tensors are returned as read-only numpy views of a memory map, so
reading a checkpoint costs address space, not memory.
"""
from __future__ import annotations

import json
import mmap
import os
import struct
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import numpy as np

from .. import _axrt

_DTYPES = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
    "U8": np.dtype("u1"), "U16": np.dtype("<u2"), "U32": np.dtype("<u4"), "U64": np.dtype("<u8"),
    "BOOL": np.dtype("?"),
    "BF16": None,  # ml_dtypes' bfloat16, imported when a checkpoint holds one
}

# The index of a sharded checkpoint: which file holds each tensor.
INDEX_FILE = "model.safetensors.index.json"

# A header longer than this is not a checkpoint header.
_MAX_HEADER = 100 * 1024 * 1024


class CheckpointError(ValueError):
    """A checkpoint file is malformed or incomplete."""


class SafetensorsFile:
    """One .safetensors file, memory-mapped; tensors are read-only numpy views."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        with open(self.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 8:
                raise CheckpointError(f"{self.path}: {size} bytes is too short for a safetensors file")
            (header_size,) = struct.unpack("<Q", f.read(8))
            if header_size > min(_MAX_HEADER, size - 8):
                raise CheckpointError(f"{self.path}: header length {header_size} does not fit "
                                      f"in the file of {size} bytes")
            try:
                header = json.loads(f.read(header_size))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise CheckpointError(f"{self.path}: the header is not JSON: {e}") from None
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size > 0 else None
        if not isinstance(header, dict):
            raise CheckpointError(f"{self.path}: the header is not a JSON object")
        self._data_start = 8 + header_size
        self._size = size
        self.metadata = header.pop("__metadata__", {}) or {}
        self._entries: Dict[str, Tuple[np.dtype, Tuple[int, ...], int, int]] = {}
        for name, entry in header.items():
            try:
                dtype_name = entry["dtype"]
                shape = tuple(int(d) for d in entry["shape"])
                begin, end = (int(x) for x in entry["data_offsets"])
            except (KeyError, TypeError, ValueError):
                raise CheckpointError(f"{self.path}: tensor '{name}' has a malformed entry") from None
            if dtype_name not in _DTYPES:
                raise CheckpointError(f"{self.path}: tensor '{name}' has dtype {dtype_name}, "
                                      f"which is not supported ({', '.join(_DTYPES)})")
            dtype = _DTYPES[dtype_name]
            if dtype is None:
                dtype = _axrt.numpy_dtype("bf16")
                if dtype is None:
                    raise CheckpointError(f"{self.path}: tensor '{name}' is bfloat16, which needs "
                                          "ml_dtypes (pip install ml_dtypes)")
                _DTYPES[dtype_name] = dtype
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            if begin < 0 or end < begin or end - begin != count * dtype.itemsize:
                raise CheckpointError(f"{self.path}: tensor '{name}' {dtype_name}{list(shape)} "
                                      f"needs {count * dtype.itemsize} bytes but its range is "
                                      f"[{begin}, {end})")
            if self._data_start + end > size:
                raise CheckpointError(f"{self.path}: tensor '{name}' ends beyond the file "
                                      "(truncated?)")
            self._entries[name] = (dtype, shape, begin, end)

    def keys(self) -> List[str]:
        return list(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def tensor(self, name: str) -> np.ndarray:
        dtype, shape, begin, end = self._entries[name]
        if end == begin:
            return np.zeros(shape, dtype)
        view = np.frombuffer(self._map, dtype=dtype, count=(end - begin) // dtype.itemsize,
                             offset=self._data_start + begin)
        return view.reshape(shape)

    def release(self, name: str) -> None:
        """Lets the kernel drop the pages of tensor `name` that this process holds (the
        whole pages inside its range): reading it again reads the file. For a reader that
        has copied what it needs, so that a checkpoint's pages do not accumulate."""
        if self._map is None or not hasattr(mmap, "MADV_DONTNEED"):
            return
        _, _, begin, end = self._entries[name]
        page = mmap.PAGESIZE
        first = -(-(self._data_start + begin) // page) * page
        last = (self._data_start + end) // page * page
        if last > first:
            self._map.madvise(mmap.MADV_DONTNEED, first, last - first)


class Checkpoint:
    """A Hugging Face model directory: its config.json and every tensor of its shards.

    `index` is the path of its model.safetensors.index.json, or None where the directory
    has none. Tensors are read-only views of memory maps the object holds; not thread-safe
    to construct, safe to read from several threads once made."""

    def __init__(self, directory: os.PathLike) -> None:
        self.directory = Path(directory)
        config_path = self.directory / "config.json"
        if not config_path.is_file():
            raise CheckpointError(f"{self.directory}: no config.json (is this a Hugging Face "
                                  "model directory?)")
        with open(config_path, encoding="utf-8") as f:
            self.config = json.load(f)
        self._where: Dict[str, SafetensorsFile] = {}
        index = self.directory / INDEX_FILE
        self.index = index if index.is_file() else None
        if self.index is not None:
            self._read_index(self.index)
        else:
            self._read_directory()
        tokenizer = self.directory / "tokenizer.json"
        self.tokenizer_json = tokenizer.read_text(encoding="utf-8") if tokenizer.is_file() else None

    def _read_directory(self) -> None:
        """Every *.safetensors file of the directory, each tensor in one of them."""
        shards = sorted(self.directory.glob("*.safetensors"))
        if not shards:
            raise CheckpointError(f"{self.directory}: no *.safetensors files (only the "
                                  "safetensors format is read)")
        self._files = [SafetensorsFile(p) for p in shards]
        for shard in self._files:
            for name in shard.keys():
                if name in self._where:
                    raise CheckpointError(f"tensor '{name}' is in both {self._where[name].path.name} "
                                          f"and {shard.path.name}")
                self._where[name] = shard

    def _read_index(self, index: Path) -> None:
        """The shards and tensors `index` (model.safetensors.index.json) names: every file it
        names must be in the directory and hold the tensors it maps there, and every tensor of
        those files must be in its map."""
        try:
            with open(index, encoding="utf-8") as f:
                weight_map = json.load(f)["weight_map"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise CheckpointError(f"{index}: not a safetensors index with a \"weight_map\" "
                                  f"({type(e).__name__}: {e})") from None
        if not isinstance(weight_map, dict) or not weight_map:
            raise CheckpointError(f"{index}: \"weight_map\" is not a non-empty object of tensor "
                                  "names and file names")
        files: Dict[str, SafetensorsFile] = {}
        for name, file_name in weight_map.items():
            if (not isinstance(file_name, str) or not file_name or
                    Path(file_name).name != file_name):
                raise CheckpointError(f"{index.name} maps tensor '{name}' to {file_name!r}, which "
                                      f"is not the name of a file in {self.directory}")
            if file_name not in files:
                path = self.directory / file_name
                if not path.is_file():
                    raise CheckpointError(f"{index.name} maps tensor '{name}' to {file_name}, "
                                          f"which is not in {self.directory}")
                files[file_name] = SafetensorsFile(path)
            shard = files[file_name]
            if name not in shard:
                raise CheckpointError(f"{index.name} maps tensor '{name}' to {file_name}, which "
                                      "does not hold it")
            self._where[name] = shard
        for file_name, shard in files.items():
            for name in shard.keys():
                if name not in weight_map:
                    raise CheckpointError(f"tensor '{name}' of {file_name} is missing from "
                                          f"{index.name}")
        self._files = list(files.values())

    def __contains__(self, name: str) -> bool:
        return name in self._where

    def keys(self) -> Iterator[str]:
        return iter(self._where)

    def release(self, name: str) -> None:
        """Drops this process's mapped pages of tensor `name` (:meth:`SafetensorsFile.release`):
        for a converter that has copied it."""
        if name in self._where:
            self._where[name].release(name)

    def tensor(self, name: str) -> np.ndarray:
        if name not in self._where:
            where = f" ({self.index.name} maps no file to it)" if self.index is not None else ""
            raise CheckpointError(f"{self.directory}: the checkpoint has no tensor '{name}'{where}")
        return self._where[name].tensor(name)
