"""The converter's time and memory on a checkpoint as they are published: bf16 weights in
shards of about 1 GB with a model.safetensors.index.json, of a 1.1 B-parameter Llama in
TinyLlama's shape (hidden 2048, 22 layers, 32 heads, 4 KV heads, MLP 5632, vocabulary
32000; random weights, fixed seed, made here with numpy and written as safetensors without
any other library; nothing is downloaded).

Each conversion runs in a process of its own; this script samples its /proc status every
10 ms and reports:
  - the wall time of the conversion (the checkpoint's files in the page cache: the script
    reads them once before the first conversion);
  - peak anonymous memory (RssAnon: what the converter allocated, the checkpoint's mapped
    pages not counted), beside the largest tensor of the checkpoint, the target being
    under 1.5x that tensor plus a fixed few hundred MB whatever the model's size;
  - peak resident memory (VmHWM: anonymous and the mapped pages of the checkpoint and of
    the file being written).

    PYTHONPATH=build/release/python python3 tests/bench/convert_bench.py \\
        --model-dir /tmp/tinyllama-bf16 --modes bf16,int4-q8

Needs numpy and ml_dtypes, and the built axrt package.
"""
from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

CONFIG = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=2048,
              intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
              num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048,
              rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
              bos_token_id=1, eos_token_id=2, torch_dtype="bfloat16", hidden_act="silu")
SHARD_BYTES = 1 << 30


def tensor_shapes(cfg: Dict) -> List[Tuple[str, Tuple[int, ...]]]:
    h, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    kv = h // cfg["num_attention_heads"] * cfg["num_key_value_heads"]
    shapes = [("model.embed_tokens.weight", (v, h))]
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        shapes += [(p + "input_layernorm.weight", (h,)),
                   (p + "self_attn.q_proj.weight", (h, h)),
                   (p + "self_attn.k_proj.weight", (kv, h)),
                   (p + "self_attn.v_proj.weight", (kv, h)),
                   (p + "self_attn.o_proj.weight", (h, h)),
                   (p + "post_attention_layernorm.weight", (h,)),
                   (p + "mlp.gate_proj.weight", (f, h)),
                   (p + "mlp.up_proj.weight", (f, h)),
                   (p + "mlp.down_proj.weight", (h, f))]
    shapes += [("model.norm.weight", (h,)), ("lm_head.weight", (v, h))]
    return shapes


def _bf16_bytes(rng: np.random.Generator, shape: Tuple[int, ...], scale: float) -> bytes:
    import ml_dtypes

    values = rng.standard_normal(int(np.prod(shape)), dtype=np.float32) * scale
    if len(shape) == 1:
        values = 1.0 + values
    return values.astype(ml_dtypes.bfloat16).tobytes()


def write_checkpoint(model_dir: Path) -> None:
    """The checkpoint: config.json, model-0000i-of-0000n.safetensors of about SHARD_BYTES
    each, and their index."""
    model_dir.mkdir(parents=True, exist_ok=True)
    shapes = tensor_shapes(CONFIG)
    shards: List[List[Tuple[str, Tuple[int, ...]]]] = [[]]
    size = 0
    for name, shape in shapes:
        nbytes = 2 * int(np.prod(shape))
        if shards[-1] and size + nbytes > SHARD_BYTES:
            shards.append([])
            size = 0
        shards[-1].append((name, shape))
        size += nbytes
    rng = np.random.default_rng(1234)
    weight_map = {}
    for i, shard in enumerate(shards):
        file_name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        header, offset = {"__metadata__": {"format": "pt"}}, 0
        for name, shape in shard:
            nbytes = 2 * int(np.prod(shape))
            header[name] = {"dtype": "BF16", "shape": list(shape),
                            "data_offsets": [offset, offset + nbytes]}
            offset += nbytes
            weight_map[name] = file_name
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        with open(model_dir / file_name, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text)
            for name, shape in shard:
                f.write(_bf16_bytes(rng, shape, 0.02))
    (model_dir / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": sum(2 * int(np.prod(s)) for _, s in shapes)},
         "weight_map": weight_map}))
    (model_dir / "config.json").write_text(json.dumps(CONFIG))


def _status(pid: int) -> Dict[str, int]:
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("RssAnon", "RssFile", "VmHWM"):
                    out[key] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return out


CHILD = """
import sys, time
import axrt.llm
start = time.perf_counter()
axrt.llm.convert(sys.argv[1], sys.argv[2], weights=sys.argv[3], activations=sys.argv[4],
                 cuda=False)
print(time.perf_counter() - start)
"""


def convert(model_dir: Path, out: Path, mode: str) -> Dict[str, float]:
    weights, activations = {"bf16": ("bf16", "f32"), "int4": ("int4", "f32"),
                            "int4-q8": ("int4", "int8"), "int8": ("int8", "f32"),
                            "f32": ("f32", "f32")}[mode]
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(model_dir), str(out), weights,
                              activations], stdout=subprocess.PIPE, text=True)
    peak = {"RssAnon": 0, "VmHWM": 0}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            status = _status(child.pid)
            for key in peak:
                peak[key] = max(peak[key], status.get(key, 0))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    output, _ = child.communicate()
    done.set()
    sampler.join()
    if child.returncode != 0:
        raise SystemExit(f"convert_bench: the {mode} conversion failed")
    return {"seconds": float(output.strip().splitlines()[-1]), "anon": peak["RssAnon"],
            "hwm": peak["VmHWM"], "out": out.stat().st_size}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, default=Path(tempfile.gettempdir()) /
                        "axrt-tinyllama-bf16", help="where the checkpoint is made (reused)")
    parser.add_argument("--modes", default="bf16,int4-q8",
                        help="conversions to time: bf16, int8, int4, int4-q8, f32")
    args = parser.parse_args()
    if not (args.model_dir / "model.safetensors.index.json").is_file():
        print(f"writing the checkpoint to {args.model_dir} ...", flush=True)
        write_checkpoint(args.model_dir)
    files = sorted(args.model_dir.glob("*.safetensors"))
    for path in files:  # into the page cache
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass
    shapes = tensor_shapes(CONFIG)
    largest = max(2 * int(np.prod(s)) for _, s in shapes)
    total = sum(2 * int(np.prod(s)) for _, s in shapes)
    mb = 1 << 20
    print(f"checkpoint: {sum(int(np.prod(s)) for _, s in shapes) / 1e9:.2f} B parameters, "
          f"{total / mb:.0f} MiB bf16 in {len(files)} shards, largest tensor "
          f"{largest / mb:.0f} MiB; {os.cpu_count()} CPUs")
    print("| mode | time, s | peak anonymous, MiB | (x largest tensor) | peak RSS, MiB | "
          "output, MiB |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for mode in args.modes.split(","):
            r = convert(args.model_dir, Path(scratch) / f"{mode}.axe", mode)
            print(f"| {mode} | {r['seconds']:.1f} | {r['anon'] / mb:.0f} | "
                  f"{r['anon'] / largest:.2f} | {r['hwm'] / mb:.0f} | {r['out'] / mb:.0f} |",
                  flush=True)
            os.unlink(Path(scratch) / f"{mode}.axe")
    return 0


if __name__ == "__main__":
    sys.exit(main())
