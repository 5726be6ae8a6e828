"""Builds the tiny Llama checkpoints the model-path tests run, and their references.

    python3 tests/llm/make_tiny_llama.py [OUT_DIR [MODEL ...]]

needs torch, transformers and tokenizers. Everything is made here from fixed
seeds; nothing is downloaded. OUT_DIR (default: tests/llm/data) receives,
per model (every model of MODELS, or the MODELs named):

    <model>/config.json, model.safetensors, tokenizer.json, ...
        a Hugging Face checkpoint written by transformers' save_pretrained
    <model>.<weights>.npz, for weights f32, bf16, int8 and int4
        transformers' float32 outputs for the prompts of PROMPTS: the logits
        of every prompt position, and a greedy continuation of GREEDY_TOKENS
        tokens with the logits of each step. For f32 the model is the
        checkpoint; for the others it is the checkpoint with the weights the
        converter stores (axrt.llm.quantize) dequantized here, independently,
        in float64 by the formulas of docs/format.md section 5.
    <model>.kv-bf16.npz, <model>.kv-fp8_e4m3.npz (KV_MODELS only)
        the same for the f32 checkpoint with every key and value row (after
        rope) rounded as a bf16 or fp8 KV cache stores it (docs/kernels.md,
        "KV cache"), by ml_dtypes, before attention reads it.

The tests compare axrt with what is committed; test_llm_reference.py
recomputes the references from the committed checkpoints and compares,
where torch and transformers are installed.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

# A Llama 2 shape (separate lm_head, plain rope), a Llama 3 shape (tied
# embeddings, llama3 rope scaling, attention bias off), and one whose heads,
# KV heads and MLP split evenly over 2 and 4 ranks for the tensor-parallel
# tests, with biases on every projection (o_proj and down_proj included).
MODELS = {
    "tiny-llama": dict(
        vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
        num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=256,
        rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=False,
        bos_token_id=1, eos_token_id=2, initializer_range=0.06, seed=1234),
    "tiny-llama3": dict(
        vocab_size=1024, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=256,
        rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
        bos_token_id=1, eos_token_id=2, initializer_range=0.06, seed=4321),
    "tiny-llama-tp": dict(
        vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
        num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=256,
        rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
        attention_bias=True, mlp_bias=True,
        bos_token_id=1, eos_token_id=2, initializer_range=0.06, seed=2468),
}

# Prompts as token ids (the first starts with the BOS id). Lengths cross
# block boundaries of 16.
PROMPTS = [
    [1, 17, 250, 3, 999, 512, 64, 128, 700, 42, 5, 6, 7, 801, 33, 90, 91, 400, 12],
    [1, 300],
    [1] + [int(x) for x in np.random.default_rng(7).integers(3, 1024, size=40)],
]
GREEDY_TOKENS = 32


def build_tokenizer(path: Path, vocab_size: int) -> None:
    """A byte-level BPE trained on the project's documentation, special tokens first."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    texts = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md"))]
    tokenizer.train_from_iterator(texts, trainer=trainer)
    tokenizer.save(str(path))


def build_model(name: str, spec: dict, out: Path):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    spec = dict(spec)
    seed = spec.pop("seed")
    torch.manual_seed(seed)
    config = LlamaConfig(**spec)
    model = LlamaForCausalLM(config).to(torch.float32).eval()
    # Norm weights start at 1 and biases at 0; give them some spread so the
    # tests see them.
    with torch.no_grad():
        for module_name, param in model.named_parameters():
            if "norm" in module_name:
                param.copy_(1.0 + 0.2 * torch.randn_like(param))
            elif module_name.endswith(".bias"):
                param.copy_(0.1 * torch.randn_like(param))
    model_dir = out / name
    model_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(model_dir, safe_serialization=True)
    build_tokenizer(model_dir / "tokenizer.json", spec["vocab_size"])
    return model


def reference_outputs(model, prompts=PROMPTS, steps=GREEDY_TOKENS) -> dict:
    """transformers' float32 logits of each prompt and of a greedy continuation."""
    import torch

    result = {}
    with torch.no_grad():
        for i, prompt in enumerate(prompts):
            ids = torch.tensor([prompt], dtype=torch.long)
            prompt_logits = model(ids).logits[0].to(torch.float32).numpy()
            generated = []
            step_logits = []
            past = None
            step_ids = ids
            for _ in range(steps):
                out = model(step_ids, past_key_values=past, use_cache=True)
                past = out.past_key_values
                logits = out.logits[0, -1].to(torch.float32)
                token = int(torch.argmax(logits))
                step_logits.append(logits.numpy())
                generated.append(token)
                step_ids = torch.tensor([[token]], dtype=torch.long)
            result[f"prompt{i}"] = np.asarray(prompt, dtype=np.int32)
            result[f"prompt{i}_logits"] = prompt_logits
            result[f"prompt{i}_greedy"] = np.asarray(generated, dtype=np.int32)
            result[f"prompt{i}_greedy_logits"] = np.stack(step_logits)
    return result


def greedy_margin(reference: dict) -> float:
    """The smallest gap between the best and second-best logit of any greedy step."""
    margins = []
    for key, logits in reference.items():
        if key.endswith("_greedy_logits"):
            top2 = np.sort(logits, axis=-1)[:, -2:]
            margins.append(float(np.min(top2[:, 1] - top2[:, 0])))
    return min(margins)


WEIGHT_MODES = ("f32", "bf16", "int8", "fp8", "int4")
KV_MODES = ("kv-bf16", "kv-fp8_e4m3")
KV_MODELS = ("tiny-llama", "tiny-llama3")


def rounded_rows(x: np.ndarray, dtype: str) -> np.ndarray:
    """Rows [..., D] of f32 as a `dtype` KV cache reads them back: bf16 rounded to nearest
    even; or fp8 e4m3fn codes of x / s (nearest even), s = the row's largest magnitude / 448
    in f32, times s (a row of zeros stays zeros)."""
    import ml_dtypes

    if dtype == "bf16":
        return x.astype(ml_dtypes.bfloat16).astype(np.float32)
    scale = (np.abs(x).max(axis=-1, keepdims=True) / np.float32(448)).astype(np.float32)
    divisor = np.where(scale == 0, np.float32(1), scale)
    return (x / divisor).astype(ml_dtypes.float8_e4m3fn).astype(np.float32) * scale


def _kv_rounding_attention(dtype: str) -> str:
    """Registers with transformers an eager attention that reads keys and values rounded as
    a `dtype` cache holds them; returns its name."""
    import torch
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
    from transformers.models.llama import modeling_llama

    def attention(module, query, key, value, attention_mask, **kwargs):
        key = torch.from_numpy(rounded_rows(key.detach().numpy(), dtype))
        value = torch.from_numpy(rounded_rows(value.detach().numpy(), dtype))
        return modeling_llama.eager_attention_forward(module, query, key, value,
                                                      attention_mask, **kwargs)

    name = f"kv_rounded_{dtype}"
    AttentionInterface.register(name, attention)
    # The causal mask eager attention takes.
    AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS["eager"])
    return name


def _quantize_module():
    """axrt.llm.quantize, loaded from the source tree (it needs numpy and ml_dtypes only)."""
    import importlib.util

    path = ROOT / "bindings" / "python" / "axrt" / "llm" / "quantize.py"
    spec = importlib.util.spec_from_file_location("axrt_llm_quantize", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _unpack_awq(words: np.ndarray) -> np.ndarray:
    """u32 words [R, C/8] in the AWQ order to codes [R, C] (docs/format.md section 5.4)."""
    order = [0, 2, 4, 6, 1, 3, 5, 7]
    rows, count = words.shape
    codes = np.zeros((rows, count, 8), np.float64)
    for nibble, element in enumerate(order):
        codes[:, :, element] = (words >> np.uint32(4 * nibble)) & np.uint32(0xF)
    return codes.reshape(rows, count * 8)


def dequantized(weight: np.ndarray, mode: str, q) -> np.ndarray:
    """What the converter stores for an [out, in] weight in `mode`, as float64 [out, in]."""
    if mode == "bf16":
        return q.bf16(weight).astype(np.float64)
    if mode == "int8":
        codes, scale = q.int8_per_channel(weight)
        return codes.astype(np.float64) * scale.astype(np.float64)
    if mode == "fp8":
        codes, scale = q.fp8_e4m3_per_channel(weight)
        return codes.astype(np.float64) * scale.astype(np.float64)
    if mode == "int4":
        # The group size the converter picks: the largest of 128, 64, 32 dividing the inputs.
        qweight, scales, qzeros = q.int4_awq(weight, q.int4_group_size(weight.shape[1]))
        codes = _unpack_awq(qweight)                       # [K, N]
        zeros = _unpack_awq(qzeros)                        # [K/g, N]
        group = codes.shape[0] // zeros.shape[0]
        s = np.repeat(scales.astype(np.float64), group, axis=0)
        z = np.repeat(zeros, group, axis=0)
        return ((codes - z) * s).T
    raise ValueError(mode)


def load_model(model_dir: Path, mode: str):
    """transformers' model of the checkpoint, with its weights as `mode` stores them."""
    import torch
    from transformers import LlamaForCausalLM

    if mode in KV_MODES:
        return LlamaForCausalLM.from_pretrained(
            model_dir, dtype=torch.float32,
            attn_implementation=_kv_rounding_attention(mode[len("kv-"):])).eval()
    model = LlamaForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    if mode == "f32":
        return model
    q = _quantize_module()
    linear = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    with torch.no_grad():
        embed = model.model.embed_tokens.weight
        original = embed.numpy().copy()
        # Embeddings are stored in bf16 whenever the weights are not f32.
        embed.copy_(torch.from_numpy(q.bf16(original).astype(np.float32)))
        for name, module in model.named_modules():
            if name.split(".")[-1] not in linear:
                continue
            w = module.weight.numpy()
            module.weight.copy_(torch.from_numpy(dequantized(w, mode, q).astype(np.float32)))
        if model.config.tie_word_embeddings:
            # Tied: with bf16 weights the head is the bf16 embedding table
            # itself; with int8, fp8 and int4 it is the checkpoint's table
            # quantized like the other projections. Untie so the two can
            # differ.
            head = (embed.numpy().copy() if mode == "bf16"
                    else dequantized(original, mode, q).astype(np.float32))
            model.lm_head.weight = torch.nn.Parameter(torch.from_numpy(head))
        else:
            w = model.lm_head.weight.numpy()
            model.lm_head.weight.copy_(torch.from_numpy(dequantized(w, mode, q).astype(np.float32)))
    return model


def main(argv: list) -> int:
    import torch

    torch.set_num_threads(1)
    out = Path(argv[1]) if len(argv) > 1 else HERE / "data"
    names = argv[2:] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"unknown models {unknown}; known: {', '.join(MODELS)}", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        spec = MODELS[name]
        build_model(name, spec, out)
        for mode in WEIGHT_MODES + (KV_MODES if name in KV_MODELS else ()):
            model = load_model(out / name, mode)
            reference = reference_outputs(model)
            np.savez_compressed(out / f"{name}.{mode}.npz", **reference)
            print(f"{name} {mode}: {sum(p.numel() for p in model.parameters())} parameters, "
                  f"smallest greedy margin {greedy_margin(reference):.3e}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
