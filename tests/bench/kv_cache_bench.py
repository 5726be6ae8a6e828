"""Decode speed by KV-cache element type, and with the fused kernels (docs/performance.md,
"KV cache precision").

    PYTHONPATH=build/release/python build/venv/bin/python tests/bench/kv_cache_bench.py \
        [--model-dir build/bench/llm] [--weights int4-q8] [--contexts 128,1920]

Converts the benchmark checkpoint (made by `make bench`) once per KV-cache
element type (f32, bf16, fp8_e4m3) with the same weights, then for each
context length prefills a prompt of that many tokens through a session and
times --steps decode steps after it, one sequence; the best of --repeats
runs, the element types taking turns in each repeat so that the machine's
drift falls on all of them alike; the f32 cache once more with the fused
kernels (`--fused-kernels`). Prints tok/s and the KV-cache bytes a decode
step reads.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import axrt.llm

ROOT = Path(__file__).resolve().parent.parent.parent
DTYPES = ("f32", "bf16", "fp8_e4m3")
VARIANTS = DTYPES + ("f32 fused",)


def decode_rate(model, prompt, steps: int) -> float:
    with model.session() as seq:
        logits = seq.prefill(prompt)
        token = int(np.argmax(logits))
        start = time.perf_counter()
        for _ in range(steps):
            token = int(np.argmax(seq.decode(token)))
        return steps / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, default=ROOT / "build" / "bench" / "llm")
    parser.add_argument("--weights", default="int4-q8", choices=["f32", "bf16", "int4", "int4-q8"])
    parser.add_argument("--contexts", default="128,1920")
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not (args.model_dir / "config.json").is_file():
        print(f"no checkpoint in {args.model_dir}: run `make bench` first", file=sys.stderr)
        return 2
    weights, activations = ((args.weights[:-3], "int8") if args.weights.endswith("-q8")
                            else (args.weights, "f32"))
    contexts = [int(c) for c in args.contexts.split(",")]
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        models = {}
        for variant in VARIANTS:
            kv = variant.split()[0]
            path = Path(tmp) / f"{variant.replace(' ', '-')}.axe"
            axrt.llm.convert(args.model_dir, path, weights=weights, activations=activations,
                             kv_cache_dtype=kv, fused_kernels=variant.endswith("fused"),
                             max_context=max(contexts) + args.steps + 1, cuda=False)
            models[variant] = axrt.llm.load(path, device="cpu:0")
        config = models["f32"].config
        best = {(kv, c): 0.0 for kv in VARIANTS for c in contexts}
        for _ in range(args.repeats):
            for context in contexts:
                prompt = [int(t) for t in rng.integers(3, config.vocab_size, context)]
                for kv in VARIANTS:
                    rate = decode_rate(models[kv], prompt, args.steps)
                    best[kv, context] = max(best[kv, context], rate)
        print(f"weights {args.weights}, {config.num_layers} layers, {config.num_kv_heads} KV heads "
              f"of {config.head_dim}, one sequence, {args.steps} decode steps, best of "
              f"{args.repeats}")
        print("| KV cache | " + " | ".join(f"context {c}: tok/s (KV MB read a step)"
                                           for c in contexts) + " |")
        print("|---|" + "---|" * len(contexts))
        for kv in VARIANTS:
            per_token = models[kv].config.kv_cache_bytes_per_block() / config.block_size
            cells = [f"{best[kv, c]:.1f} ({per_token * (c + args.steps / 2) / 1e6:.1f}, "
                     f"{best[kv, c] / best['f32', c]:.2f}x)" for c in contexts]
            print(f"| {kv} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
