"""Checkpoints sharded as they are published: model.safetensors.index.json
names the file that holds each tensor (docs/llm.md, "Checkpoints").

The sharded checkpoints are tiny-llama's tensors written here, three files
and an index, with a stray file beside them that an index-less reading
would take (and that is not even a safetensors file).
"""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

import axrt
import axrt.llm
from axrt.llm.checkpoint import INDEX_FILE, Checkpoint, CheckpointError
from serving_support import prompts, reference

DATA = Path(__file__).resolve().parent.parent / "llm" / "data"
SOURCE = DATA / "tiny-llama"


def shard(target: Path, *, drop=()) -> dict:
    """SOURCE's tensors, less `drop`, as three shards named as transformers names them, with
    their index; returns the index's weight map."""
    target.mkdir()
    for name in ("config.json", "generation_config.json", "tokenizer.json"):
        shutil.copy(SOURCE / name, target / name)
    source = Checkpoint(SOURCE)
    names = sorted(n for n in source.keys() if n not in drop)
    weight_map = {}
    for i in range(3):
        file_name = f"model-{i + 1:05d}-of-00003.safetensors"
        part = names[i::3]
        save_file({n: np.ascontiguousarray(source.tensor(n)) for n in part},
                  str(target / file_name))
        weight_map.update(dict.fromkeys(part, file_name))
    write_index(target, weight_map)
    (target / "consolidated.safetensors").write_bytes(b"not read: the index names it nowhere")
    return weight_map


def write_index(target: Path, weight_map: dict) -> None:
    (target / INDEX_FILE).write_text(json.dumps({"metadata": {"total_size": 0},
                                                 "weight_map": weight_map}))


def test_an_indexed_checkpoint_reads_the_tensors_its_index_names(tmp_path):
    shard(tmp_path / "ckpt")
    sharded, whole = Checkpoint(tmp_path / "ckpt"), Checkpoint(SOURCE)
    assert sharded.index is not None and whole.index is None
    assert sorted(sharded.keys()) == sorted(whole.keys())
    for name in whole.keys():
        np.testing.assert_array_equal(sharded.tensor(name), whole.tensor(name))


def test_an_indexed_checkpoint_converts_to_the_same_model(tmp_path):
    shard(tmp_path / "ckpt")
    axrt.llm.convert(tmp_path / "ckpt", tmp_path / "sharded.axe")
    ref = reference("tiny-llama", "f32")
    llm = axrt.llm.load(tmp_path / "sharded.axe")
    _, prompt = next(iter(prompts(ref)))
    assert llm.generate(prompt, 8, stop_ids=()) == ref["prompt0_greedy"].tolist()[:8]


def test_an_index_naming_a_missing_file_is_refused_naming_both(tmp_path):
    weight_map = shard(tmp_path / "ckpt")
    name = sorted(weight_map)[4]
    weight_map[name] = "model-00004-of-00003.safetensors"
    write_index(tmp_path / "ckpt", weight_map)
    with pytest.raises(CheckpointError,
                       match=f"maps tensor '{name}' to model-00004-of-00003.safetensors, which "
                             "is not in"):
        axrt.llm.convert(tmp_path / "ckpt", tmp_path / "out.axe")
    assert not (tmp_path / "out.axe").exists()


def test_a_tensor_missing_from_the_index_is_refused_naming_both(tmp_path):
    weight_map = shard(tmp_path / "ckpt")
    name = sorted(weight_map)[7]
    file_name = weight_map.pop(name)
    write_index(tmp_path / "ckpt", weight_map)
    with pytest.raises(CheckpointError,
                       match=f"tensor '{name}' of {file_name} is missing from {INDEX_FILE}"):
        Checkpoint(tmp_path / "ckpt")


def test_an_index_mapping_a_tensor_to_a_file_without_it_is_refused(tmp_path):
    weight_map = shard(tmp_path / "ckpt")
    names = sorted(weight_map)
    other = next(f for f in set(weight_map.values()) if f != weight_map[names[0]])
    weight_map[names[0]] = other
    write_index(tmp_path / "ckpt", weight_map)
    with pytest.raises(CheckpointError,
                       match=f"maps tensor '{names[0]}' to {other}, which does not hold it"):
        Checkpoint(tmp_path / "ckpt")


def test_a_tensor_the_model_needs_and_the_index_lacks_is_named(tmp_path):
    shard(tmp_path / "ckpt", drop=("model.norm.weight",))
    with pytest.raises(CheckpointError,
                       match=f"no tensor 'model.norm.weight' \\({INDEX_FILE} maps no file to it"):
        axrt.llm.convert(tmp_path / "ckpt", tmp_path / "out.axe")
    assert not (tmp_path / "out.axe").exists()


@pytest.mark.parametrize("index, message", [
    ("{", "not a safetensors index"),
    ('{"metadata": {}}', "not a safetensors index"),
    ('{"weight_map": []}', "not a non-empty object"),
    ('{"weight_map": {"model.norm.weight": "../model.safetensors"}}', "not the name of a file"),
    ('{"weight_map": {"model.norm.weight": 3}}', "not the name of a file"),
])
def test_a_malformed_index_is_refused(tmp_path, index, message):
    shard(tmp_path / "ckpt")
    (tmp_path / "ckpt" / INDEX_FILE).write_text(index)
    with pytest.raises(CheckpointError, match=message):
        Checkpoint(tmp_path / "ckpt")


def write_safetensors(path: Path, tensors: dict) -> None:
    """`tensors` as one safetensors file, bf16 included (written here: the format is a
    length, a JSON header and the data)."""
    import struct

    import ml_dtypes

    names = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16",
             np.dtype(ml_dtypes.bfloat16): "BF16"}
    header, offset = {}, 0
    for name, t in tensors.items():
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for t in tensors.values():
            f.write(np.ascontiguousarray(t).tobytes())


@pytest.mark.parametrize("stored,weights", [
    ("bf16", "bf16"), ("bf16", "int8"), ("bf16", "fp8"), ("bf16", "int4"), ("bf16", "f32"),
    ("f16", "bf16"), ("f16", "int4")])
def test_half_precision_checkpoints_convert_as_their_values_in_f32(tmp_path, stored, weights):
    """A bf16 or f16 checkpoint (converted without an f32 copy of its weights) gives the file
    that the f32 checkpoint of the same values gives, byte for byte."""
    import ml_dtypes

    half = ml_dtypes.bfloat16 if stored == "bf16" else np.float16
    source = Checkpoint(SOURCE)
    values = {n: np.asarray(source.tensor(n)).astype(half) for n in source.keys()}
    for kind, tensors in (("half", values),
                          ("f32", {n: t.astype(np.float32) for n, t in values.items()})):
        (tmp_path / kind).mkdir()
        for name in ("config.json", "generation_config.json", "tokenizer.json"):
            shutil.copy(SOURCE / name, tmp_path / kind / name)
        write_safetensors(tmp_path / kind / "model.safetensors", tensors)
        axrt.llm.convert(tmp_path / kind, tmp_path / f"{kind}.axe", weights=weights, cuda=False)
    assert (tmp_path / "half.axe").read_bytes() == (tmp_path / "f32.axe").read_bytes()
