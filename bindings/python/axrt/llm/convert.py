"""Converts a Hugging Face Llama-family checkpoint into one .axe file, or the shards of a
tensor-parallel set (docs/llm.md, docs/multi-device.md).

A file holds the weights in the chosen precision, the functions ``step``
(the serving engine's, docs/serving.md), ``sample`` and ``process_logits``
over a paged KV cache, which every way of running a model goes through, the
model's configuration in the metadata (``axrt.llm.config``) and, when the
checkpoint has one, its
``tokenizer.json`` (``axrt.llm.tokenizer``). One layer writer serves every
file; a shard's ``step`` holds its part of every layer and the two
all-reduces per layer that complete it, as collective commands.

Weights are read from the memory-mapped checkpoint and converted one tensor
at a time while the file is written, so converting never holds two copies of
the model in memory.
"""
from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from .. import builder as axb
from ..builder import Builder, QuantLayout, ceildiv
from . import quantize
from .chat import ChatTemplate
from .checkpoint import Checkpoint
from .config import (CHAT_KEY, METADATA_KEY, SHARD_KEY, TOKENIZER_KEY, ModelConfig, ShardInfo,
                     UnsupportedModelError, check_tensor_parallel, from_hf_config,
                     shard_file_name)
# The kernels and layouts the converter binds (KERNELS, contracts_path and
# default_fatbin are also read from here by the tools and tests).
from .kernel_table import (FP8_LAYOUT, GPTQ_LAYOUT, INT4_LAYOUT, INT8_LAYOUT,  # noqa: F401
                           CUDA_ENTRIES, KERNELS, awq_layout, contracts_path,
                           default_fatbin, gptq_layout, int4_kernel)

WEIGHT_MODES = ("f32", "bf16", "int8", "fp8", "int4")
ACTIVATION_MODES = ("f32", "int8")
# The KV cache's element types: the step's `kv_cache` dtype, its last
# dimension beyond head_dim (fp8 rows carry an f32 scale), and the suffix of
# the kernels that write it (axrt_kv_cache_write_*, with fused kernels
# axrt_rope_kv_cache_write_*) and read it (axrt_attention_decode_*)
# (docs/kernels.md, "KV cache").
KV_CACHE_DTYPES = {
    "f32": ("float32", 0, "f32", "f32"),
    "bf16": ("bfloat16", 0, "bf16", "kv_bf16"),
    "fp8_e4m3": ("uint8", 4, "fp8_e4m3", "kv_fp8_e4m3"),
}
_FP8_HEAD_DIM_MULTIPLE = 16

# Tile of the matmul grids (docs/kernels.md).
_MATMUL_TILE = 64
# The decode matmuls' workgroup: output columns by rows (docs/kernels.md).
_DECODE_COLS, _DECODE_ROWS = 8, 16
_INT4_DECODE_COLS = 16  # the int4 decode matmul's columns a workgroup
# axrt_matmul_int8_pc_q8_f32 quantizes its inputs in groups of 128, 64 or 32
# (the largest that divides them): the inputs must be a multiple of 32.
_Q8_INT8_INPUTS = 32
# Gate rows, then as many up rows, a workgroup of the gated decode matmul.
_GATED_ROWS = _DECODE_COLS // 2
# The tensor-core matmul's workgroup: a tile of 128 x 128 (docs/kernels.md).
_TENSOR_CORE_TILE = 128
# The chunks split attention cuts each token's context into by default
# (docs/kernels.md, "Split attention").
ATTENTION_SPLITS = 8
_MAX_ATTENTION_SPLITS = 65535
# Flash attention's workgroup: 16 tokens of one KV group (grid x = ceil(T /
# 16), y = kv_heads), and the head sizes it takes (docs/kernels.md, "Flash
# attention").
_FLASH_TOKENS = 16
_FLASH_HEAD_DIMS = range(16, 129, 16)
_ELEMENTWISE_CHUNK = 4096
_F32 = 4
_EMBED = "model.embed_tokens.weight"
# The channel of a tensor-parallel set's all-reduces (docs/multi-device.md).
TP_CHANNEL = "tensor_parallel"


def _arena(sizes: Dict[str, int]) -> Tuple[Dict[str, int], int]:
    """The byte offset in a function's arena of each activation of `sizes` (f32
    counts, at their largest), 64-byte aligned, and the arena's size."""
    offsets: Dict[str, int] = {}
    arena = 0
    for key, count in sizes.items():
        offsets[key] = arena
        arena += (count * _F32 + 63) // 64 * 64
    return offsets, arena


@dataclass
class _Linear:
    """A projection as the program binds it: the kernel and its weight constants."""

    kernel: str
    weights: Tuple[axb.Constant, ...]  # bound after x, before bias
    bias: axb.Constant
    n: int
    k: int
    group: int = 0  # int4: the group size, the kernel's last argument


class _Converter:
    def __init__(self, checkpoint: Checkpoint, config: ModelConfig, weights: str,
                 fatbin: Optional[Path], info: ShardInfo,
                 chat: Optional[ChatTemplate] = None) -> None:
        self.ckpt = checkpoint
        self.chat = chat
        self.info = info
        self.cfg = config
        self.mode = weights
        self.activations = config.activations
        self.b = Builder(producer="axrt.llm.convert", producer_version="1")
        self.cpu = self.b.kernel_library("axrt.cpu")
        self.cuda = (self.b.code_object("cuda_fatbin", "sm_80,sm_90", fatbin.read_bytes())
                     if fatbin is not None else None)
        self.kernels: Dict[str, axb.Kernel] = {}
        self.zero_bias: Optional[axb.Constant] = None
        # The checkpoint tensors the constant being made has read: their mapped
        # pages are let go once it is written (when the next one is made).
        self.touched: List[str] = []
        # Said after a projection's shape in messages ("in each of 4 shards").
        self.part_note = f" in each of {info.size} tensor-parallel shards" if info.size > 1 else ""

    # -- constants ------------------------------------------------------
    def constant(self, name: str, make: Callable[[], np.ndarray], dtype: str,
                 shape: Sequence[int], layout: Optional[QuantLayout] = None) -> axb.Constant:
        """A constant whose bytes `make` produces when the file is written. The builder
        writes constants one after another: when one is made, the checkpoint's pages that
        the one before read are released, so that they do not add up to the model."""
        def produce() -> np.ndarray:
            self.release_touched()
            return make()

        return self.b.constant(name, produce, dtype=dtype, shape=tuple(shape), layout=layout)

    def release_touched(self) -> None:
        for name in self.touched:
            self.ckpt.release(name)
        self.touched.clear()

    def tensor(self, name: str) -> np.ndarray:
        self.touched.append(name)
        return self.ckpt.tensor(name)

    def stacked(self, names: Sequence[str], rows: Optional[Sequence[Tuple[int, int]]] = None,
                cols: Optional[Tuple[int, int]] = None) -> np.ndarray:
        """Rows of several [out, in] weights (or biases) one after another, in f32.

        `rows`: for each name, the range of its rows to take (default: all);
        `cols`: the range of columns to take (default: all).
        """
        return np.concatenate([np.asarray(w, dtype=np.float32)
                               for w in self.parts(names, rows, cols)], axis=0)

    def parts(self, names: Sequence[str], rows: Optional[Sequence[Tuple[int, int]]],
              cols: Optional[Tuple[int, int]]) -> Iterator[np.ndarray]:
        """The checkpoint's weights `names` (views), each cut to its `rows` and to `cols`."""
        for i, name in enumerate(names):
            w = self.tensor(name)
            if rows is not None:
                w = w[rows[i][0]:rows[i][1]]
            if cols is not None:
                w = w[:, cols[0]:cols[1]]
            yield w

    def stacked_source(self, names: Sequence[str],
                       rows: Optional[Sequence[Tuple[int, int]]] = None,
                       cols: Optional[Tuple[int, int]] = None) -> np.ndarray:
        """:meth:`stacked` in the weights' own float type when they share one (bf16, f16 or
        f32), else in f32: for quantizers that read a block at a time, so that a bf16
        checkpoint's projection has no f32 copy of the whole."""
        import ml_dtypes

        kinds = {self.ckpt.tensor(name).dtype for name in names}
        if len(kinds) != 1 or next(iter(kinds)) not in (np.float32, np.float16,
                                                         ml_dtypes.bfloat16):
            return self.stacked(names, rows, cols)
        return np.concatenate(list(self.parts(names, rows, cols)), axis=0)

    def stacked_bf16(self, names: Sequence[str], rows: Optional[Sequence[Tuple[int, int]]],
                     cols: Optional[Tuple[int, int]], n: int, k: int) -> np.ndarray:
        """:meth:`stacked` rounded to bf16, written part by part into the one [n, k] array:
        a bf16 checkpoint's weights are copied as they are, and no part of any checkpoint
        has an f32 copy of more than a block of rows (quantize.bf16)."""
        import ml_dtypes

        out = np.empty((n, k), ml_dtypes.bfloat16)
        at = 0
        for w in self.parts(names, rows, cols):
            quantize.bf16(w, out[at:at + w.shape[0]])
            at += w.shape[0]
        return out

    def bias(self, label: str, names: Sequence[str], n: int,
             rows: Optional[Sequence[Tuple[int, int]]] = None) -> axb.Constant:
        """The biases of stacked projections (the `rows` of each); zeros for those without one."""
        if not any(name in self.ckpt for name in names):
            return self.zero_bias

        def make():
            parts = []
            for i, name in enumerate(names):
                if name in self.ckpt:
                    b = np.asarray(self.tensor(name), dtype=np.float32).reshape(-1)
                else:
                    b = np.zeros(self.tensor(name[:-len("bias")] + "weight").shape[0], np.float32)
                parts.append(b if rows is None else b[rows[i][0]:rows[i][1]])
            return np.concatenate(parts)

        return self.constant(label + ".bias", make, "f32", (n,))

    def linear(self, label: str, names: Sequence[str], bias_names: Sequence[str], *,
               rows: Optional[Sequence[Tuple[int, int]]] = None,
               cols: Optional[Tuple[int, int]] = None, with_bias: bool = True,
               gated: bool = False) -> _Linear:
        """A projection from the [out, in] weights `names`, stacked along out.

        A tensor-parallel shard keeps part of it: `rows`, for each name, the
        range of its outputs (column-parallel); `cols` the range of the
        inputs (row-parallel); `with_bias` False leaves the bias out (all
        ranks but one of a row-parallel projection). Quantized, the part
        holds exactly the codes and scales of the whole projection there.
        `gated` (gate and up, in that order): with bf16 weights, fused
        kernels and decode matmuls, no bias and a multiple of 4 rows each,
        the rows interleaved 4 gate, 4 up for axrt_matmul_bf16_f32_decode_silu,
        whose output is the gated SiLU.
        """
        shapes = [self.tensor(n).shape for n in names]
        k = whole_k = shapes[0][1]
        if any(len(s) != 2 or s[1] != k for s in shapes):
            raise UnsupportedModelError(f"{label}: weights {names} have shapes {shapes}, "
                                        "not [out, in] with one in")
        n = sum(s[0] for s in shapes)
        if rows is not None:
            n = sum(stop - start for start, stop in rows)
        if cols is not None:
            k = cols[1] - cols[0]
        bias = self.bias(label, bias_names, n, rows) if with_bias else self.zero_bias

        mode = self.mode
        if mode == "f32":
            w = self.constant(label, lambda: self.stacked(names, rows, cols), "f32", (n, k))
            return _Linear("axrt_matmul_f32_nk", (w,), bias, n, k)
        if mode == "bf16":
            if (gated and self.cfg.fused_kernels and self.cfg.decode_matmuls
                    and bias is self.zero_bias and n % (2 * _GATED_ROWS) == 0):
                def interleaved() -> np.ndarray:
                    halves = self.stacked_bf16(names, rows, cols, n, k).reshape(
                        2, n // (2 * _GATED_ROWS), _GATED_ROWS, k)
                    return halves.transpose(1, 0, 2, 3).reshape(n, k)

                w = self.constant(label, interleaved, "bf16", (n, k))
                return _Linear("axrt_matmul_bf16_f32_decode_silu", (w,), bias, n, k)
            w = self.constant(label, lambda: self.stacked_bf16(names, rows, cols, n, k), "bf16",
                              (n, k))
            return _Linear(self.bf16_kernel(), (w,), bias, n, k)
        if mode in ("int8", "fp8"):
            if mode == "int8" and self.activations == "int8" and k % _Q8_INT8_INPUTS != 0:
                raise UnsupportedModelError(
                    f"--weights int8 --activations int8: {label} is [{n}, {k}]{self.part_note}; "
                    f"int8 activations need inputs a multiple of {_Q8_INT8_INPUTS} (the "
                    "activations are quantized in groups of 128, 64 or 32 inputs)")
            cache: Dict[str, Tuple[np.ndarray, np.ndarray]] = {}
            per_channel = (quantize.int8_per_channel if mode == "int8"
                           else quantize.fp8_e4m3_per_channel)

            def q8():
                if "q" not in cache:
                    # Part of the inputs: each row's scale is still its whole row's.
                    peak = None
                    if cols is not None:
                        whole_rows = self.stacked_source(names, rows)
                        peak = np.max(np.abs(whole_rows), axis=1, keepdims=True).astype(
                            np.float32)
                        del whole_rows
                    cache["q"] = per_channel(self.stacked_source(names, rows, cols), peak)
                return cache["q"]

            def take_scale():
                return q8()[1]

            def take_q():
                q = q8()[0]
                cache.clear()
                return q

            scale = self.constant(label + ".scale", take_scale, "f32", (n, 1))
            if mode == "fp8":
                w = self.constant(label, take_q, "fp8_e4m3fn", (n, k),
                                  FP8_LAYOUT.with_constants(scale=scale))
                kernel = ("axrt_matmul_fp8_e4m3_pc_tc_f32" if self.cfg.tensor_core_matmuls
                          else "axrt_matmul_fp8_e4m3_pc_f32_decode" if self.cfg.decode_matmuls
                          else "axrt_matmul_fp8_e4m3_pc_f32")
                return _Linear(kernel, (w, scale), bias, n, k)
            w = self.constant(label, take_q, "int8", (n, k), INT8_LAYOUT.with_constants(scale=scale))
            kernel = ("axrt_matmul_int8_pc_q8_f32" if self.activations == "int8"
                      else "axrt_matmul_int8_pc_tc_f32" if self.cfg.tensor_core_matmuls
                      else "axrt_matmul_int8_pc_f32_decode" if self.cfg.decode_matmuls
                      else "axrt_matmul_int8_pc_f32")
            return _Linear(kernel, (w, scale), bias, n, k)
        if mode == "int4":
            group = self.int4_group(label, n, k, whole_k)
            cache4: Dict[str, Tuple[np.ndarray, ...]] = {}

            # GPTQ's storage (packed along K) but for the tensor-core matmul:
            # the integer dot products read it directly, a warp of the decode
            # matmul reads across its word rows, and the CPU's batch-1 tiles
            # read 256 contiguous bytes of it per 8 inputs, where AWQ's rows
            # give 32 (1.5x the decode of AWQ on the CPU, docs/performance.md).
            q8 = self.activations == "int8"
            gptq = not self.cfg.tensor_core_matmuls

            def q4():
                if "q" not in cache4:
                    pack = quantize.int4_gptq if gptq else quantize.int4_awq
                    cache4["q"] = pack(self.stacked_source(names, rows, cols), group)
                return cache4["q"]

            groups = k // group
            scales = self.constant(label + ".scales", lambda: q4()[1], "f16", (groups, n))
            qzeros = self.constant(label + ".qzeros", lambda: q4()[2], "uint32", (groups, n // 8))

            def take_qweight():
                q = q4()[0]
                cache4.clear()
                return q

            layout = (gptq_layout if gptq else awq_layout)(group).with_constants(
                scale=scales, zero_point=qzeros)
            w = self.constant(label, take_qweight, "uint4", (k, n), layout)
            kernel = ("axrt_matmul_gptq_int4_q8_f32" if q8
                      else "axrt_matmul_gptq_int4_f32_decode" if self.cfg.decode_matmuls
                      else "axrt_matmul_awq_int4_tc_f32" if self.cfg.tensor_core_matmuls
                      else "axrt_matmul_gptq_int4_f32")
            return _Linear(int4_kernel(kernel, group), (w, scales, qzeros), bias, n, k, group)
        raise UnsupportedModelError(f"--weights {mode} is not supported ({', '.join(WEIGHT_MODES)})")

    def int4_group(self, label: str, n: int, k: int, whole_k: int) -> int:
        """The group size of int4 projection `label`, [n, k] here and `whole_k` inputs whole:
        the one asked for, else the first of 128, 64 and 32 that divides `whole_k`. A
        row-parallel part's inputs start at rank x k, so with k a multiple of the group its
        groups are the whole projection's, as one device has them."""
        sizes = ", ".join(str(g) for g in quantize.INT4_GROUP_SIZES)
        if n % 8 != 0:
            raise UnsupportedModelError(
                f"--weights int4: {label} is [{n}, {k}]{self.part_note}; int4 needs outputs a "
                "multiple of 8 (eight 4-bit codes a u32 word)")
        group = self.cfg.int4_group_size
        if group is not None and whole_k % group != 0:
            raise UnsupportedModelError(
                f"--int4-group-size {group}: {label} has {whole_k} inputs, not a multiple of "
                f"{group}; leave the size out to let each projection take the largest of "
                f"{sizes} that divides its inputs")
        if group is None:
            group = quantize.int4_group_size(whole_k)
            if group is None:
                raise UnsupportedModelError(
                    f"--weights int4: {label} has {whole_k} inputs, which no int4 group size "
                    f"({sizes}) divides")
        if k % group != 0:
            raise UnsupportedModelError(
                f"--weights int4: {label} is [{n}, {k}]{self.part_note}; its groups of {group} "
                f"inputs would straddle the shards (pass a smaller --int4-group-size that "
                f"divides {k})")
        return group

    def bf16_kernel(self) -> str:
        """The kernel of bf16 [N, K] projections: on tensor cores with tensor-core matmuls, on
        the decode grid with decode matmuls."""
        if self.cfg.tensor_core_matmuls:
            return "axrt_matmul_bf16_tc_f32"
        return ("axrt_matmul_bf16_f32_decode" if self.cfg.decode_matmuls
                else "axrt_matmul_bf16_f32")

    def kernel(self, name: str) -> axb.Kernel:
        if name not in self.kernels:
            params, block = KERNELS[name]
            k = self.b.kernel(name, self.cpu, params)
            if self.cuda is not None:
                self.b.kernel_variant(k, self.cuda, workgroup_size=block,
                                      entry_symbol=CUDA_ENTRIES.get(name))
            self.kernels[name] = k
        return self.kernels[name]

    # -- what every program binds -----------------------------------------
    def embedding(self) -> Tuple[axb.Constant, str]:
        """The embedding table (f32, or bf16 with any other weights) and its kernel."""
        cfg = self.cfg
        H, V = cfg.hidden_size, cfg.vocab_size
        table_shape = self.ckpt.tensor(_EMBED).shape
        if table_shape != (V, H):
            raise UnsupportedModelError(f"{_EMBED} is {list(table_shape)}, not [{V}, {H}]")
        if self.mode == "f32":
            embed = self.constant("embed_tokens", lambda: np.asarray(self.tensor(_EMBED),
                                                                     np.float32), "f32", (V, H))
            return embed, "axrt_embedding_f32"
        embed = self.constant("embed_tokens", lambda: quantize.bf16(self.tensor(_EMBED)),
                              "bf16", (V, H))
        return embed, "axrt_embedding_bf16"

    def norm(self, name: str) -> axb.Constant:
        return self.constant(name, lambda: np.asarray(self.tensor(name + ".weight"), np.float32),
                             "f32", (self.cfg.hidden_size,))

    def lm_head(self, embed: axb.Constant) -> _Linear:
        cfg = self.cfg
        head_name = "lm_head.weight"
        if cfg.tie_word_embeddings or head_name not in self.ckpt:
            head_name = _EMBED
        if self.mode in ("f32", "bf16") and head_name == _EMBED:
            # The embedding table is the head's [V, H] weights as it is.
            kernel = "axrt_matmul_f32_nk" if self.mode == "f32" else self.bf16_kernel()
            return _Linear(kernel, (embed,), self.zero_bias, cfg.vocab_size, cfg.hidden_size)
        return self.linear("lm_head", [head_name], [])

    # -- commands -----------------------------------------------------------
    def matmul(self, f, lin: _Linear, x, y, m) -> None:
        k = self.kernel(lin.kernel)
        args = [x, *lin.weights, lin.bias, y, m, lin.n, lin.k]
        if lin.group:
            args.append(lin.group)
        if lin.group and lin.kernel.endswith("_decode"):  # int4: 16 columns by 16 rows
            grid = [ceildiv(lin.n, _INT4_DECODE_COLS), ceildiv(m, _DECODE_ROWS)]
        elif lin.kernel.endswith(("_decode", "_decode_silu")):  # 8 columns by 16 rows
            grid = [ceildiv(lin.n, _DECODE_COLS), ceildiv(m, _DECODE_ROWS)]
        elif lin.kernel.endswith("_tc_f32"):  # 128 x 128 a workgroup
            grid = [ceildiv(lin.n, _TENSOR_CORE_TILE), ceildiv(m, _TENSOR_CORE_TILE)]
        else:
            grid = [ceildiv(lin.n, _MATMUL_TILE), ceildiv(m, _MATMUL_TILE)]
        f.dispatch(k, grid, args)

    def add(self, f, a, b, out, count) -> None:
        f.dispatch(self.kernel("axrt_add_f32"), [ceildiv(count, _ELEMENTWISE_CHUNK)],
                   [a, b, out, count])

    def rmsnorm(self, f, x, gamma, out, m) -> None:
        f.dispatch(self.kernel("axrt_rmsnorm_f32"), [m],
                   [x, gamma, out, m, self.cfg.hidden_size, float(self.cfg.rms_norm_eps)])

    def add_rmsnorm(self, f, x, residual, gamma, out, m) -> None:
        """x += residual, then out = rmsnorm(x): one fused dispatch with fused kernels, else
        the two it stands for (the same bits either way)."""
        if self.cfg.fused_kernels:
            f.dispatch(self.kernel("axrt_add_rmsnorm_f32"), [m],
                       [x, residual, gamma, out, m, self.cfg.hidden_size,
                        float(self.cfg.rms_norm_eps)])
        else:
            self.add(f, x, residual, x, m * self.cfg.hidden_size)
            self.rmsnorm(f, x, gamma, out, m)

    # -- the program ----------------------------------------------------
    def build(self) -> None:
        """Adds the weights and the functions; :meth:`save` writes them.

        One writer for every file: the whole model on one device (`info` of
        size 1) or rank ``info.rank`` of a tensor-parallel set, split
        Megatron-style: q/k/v and gate/up column-parallel (this rank's
        heads, KV heads and MLP columns), o_proj and down_proj row-parallel
        (the matching inputs; the bias on rank 0 only), so that a layer's
        attention and MLP each end in a partial sum, which an all-reduce
        over the function's channel ``tensor_parallel`` completes (format
        1.4). The final norm, lm_head and ``sample`` are the head rank's.
        """
        cfg, info = self.cfg, self.info
        H, V, L, D = cfg.hidden_size, cfg.vocab_size, cfg.num_layers, cfg.head_dim
        heads = info.heads[1] - info.heads[0]
        kv_heads = info.kv_heads[1] - info.kv_heads[0]
        columns = info.intermediate[1] - info.intermediate[0]
        holds_head = info.rank == info.head_rank
        widest = max((heads + 2 * kv_heads) * D, H, 2 * columns, V if holds_head else 0)
        self.zero_bias = self.b.constant("zero_bias", np.zeros(widest, np.float32))
        embed, embed_kernel = self.embedding()

        split = info.size > 1
        q_rows = (info.heads[0] * D, info.heads[1] * D)
        kv_rows = (info.kv_heads[0] * D, info.kv_heads[1] * D)
        mlp_rows = tuple(info.intermediate)
        layers = []
        for l in range(L):
            p = f"model.layers.{l}."
            attn = p + "self_attn."
            mlp = p + "mlp."
            layers.append(dict(
                ln1=self.norm(p + "input_layernorm"),
                qkv=self.linear(f"layers.{l}.qkv", [attn + "q_proj.weight", attn + "k_proj.weight",
                                                    attn + "v_proj.weight"],
                                [attn + "q_proj.bias", attn + "k_proj.bias", attn + "v_proj.bias"],
                                rows=[q_rows, kv_rows, kv_rows] if split else None),
                o=self.linear(f"layers.{l}.o_proj", [attn + "o_proj.weight"],
                              [attn + "o_proj.bias"], cols=q_rows if split else None,
                              with_bias=info.rank == 0),
                ln2=self.norm(p + "post_attention_layernorm"),
                gate_up=self.linear(f"layers.{l}.gate_up", [mlp + "gate_proj.weight",
                                                            mlp + "up_proj.weight"],
                                    [mlp + "gate_proj.bias", mlp + "up_proj.bias"],
                                    rows=[mlp_rows, mlp_rows] if split else None, gated=True),
                down=self.linear(f"layers.{l}.down_proj", [mlp + "down_proj.weight"],
                                 [mlp + "down_proj.bias"], cols=mlp_rows if split else None,
                                 with_bias=info.rank == 0),
            ))
        head = None
        if holds_head:
            head = (self.norm("model.norm"), self.lm_head(embed))
        inv_freq = self.b.constant("rope.inv_freq", cfg.inv_freq().astype(np.float32))

        self.step(embed, embed_kernel, layers, head, inv_freq)
        if holds_head:
            self.sampler()
            self.logits_processor()

        self.b.metadata(METADATA_KEY, cfg.to_json())
        if split:
            self.b.metadata(SHARD_KEY, info.to_json())
        if holds_head and self.ckpt.tokenizer_json is not None:
            self.b.metadata(TOKENIZER_KEY, self.ckpt.tokenizer_json)
            if self.chat is not None:
                self.b.metadata(CHAT_KEY, self.chat.to_json())

    def save(self, out: Path) -> None:
        self.b.save(out)
        self.release_touched()

    def step(self, embed, embed_kernel, layers, head, inv_freq) -> None:
        """The ``step`` function (the serving engine's, docs/serving.md) over this file's part
        of every layer; `head` (the final norm and lm_head) on the head rank, else None.

        A step runs any mix of tokens of any sequences, each with its own row
        of block table, attended one token at a time; it returns the logits
        of the rows `logit_rows` names. Every kernel computes a token's values
        from that token's inputs alone, in an order that does not depend on
        the others, and the all-reduces of a set sum every element in rank
        order whatever the step's size, so a sequence's logits do not depend
        on what it is batched with."""
        cfg, info = self.cfg, self.info
        H, V = cfg.hidden_size, cfg.vocab_size
        D = cfg.head_dim
        nh = info.heads[1] - info.heads[0]
        nkv = info.kv_heads[1] - info.kv_heads[0]
        I = info.intermediate[1] - info.intermediate[0]
        QKV = (nh + 2 * nkv) * D
        BS, MBS = cfg.block_size, cfg.max_blocks_per_sequence
        rows_max = max(cfg.prefill_chunk, cfg.max_batch)
        cache_dtype, row_extra, written, read = KV_CACHE_DTYPES[cfg.kv_cache_dtype]
        cache_shape = [cfg.num_layers, 2, "NB", nkv, BS, D + row_extra]
        inputs = [("tokens", "int32", ["T"]), ("positions", "int32", ["T"]),
                  ("block_tables", "int32", ["T", MBS]), ("logit_rows", "int32", ["S"]),
                  ("kv_cache", cache_dtype, cache_shape)]
        outputs = [("logits", "float32", ["S", V])] if head is not None else []
        symbols = {"T": rows_max, "NB": 1 << 24, "S": cfg.max_batch}
        channels = {TP_CHANNEL: info.size} if info.size > 1 else {}

        sizes = dict(h=rows_max * H, xn=rows_max * H, qkv=rows_max * QKV, attn=rows_max * nh * D,
                     tmp=rows_max * H, gu=rows_max * 2 * I, act=rows_max * I)
        splits = cfg.attention_splits
        if cfg.split_attention:
            # Each chunk's record {m, l, acc[D]} per token and query head.
            sizes["partials"] = rows_max * nh * splits * (D + 2)
        offsets, arena = _arena(sizes)
        f = self.b.function("step", inputs, outputs, symbols=symbols, arena_size=arena,
                            mutable=("kv_cache",), channels=channels)

        def buf(key: str):
            return f.arena(offsets[key], sizes[key] * _F32)

        def all_reduce(key: str, count) -> None:
            # A partial sum of the set: complete it on every rank.
            if channels:
                f.collective("all_reduce", TP_CHANNEL, "float32", count, buf(key), buf(key))

        rows = f.sym("T")
        nb = f.sym("NB")
        tokens, positions, tables, logit_rows, cache = (f.input(i) for i in range(5))

        f.dispatch(self.kernel(embed_kernel), [rows], [tokens, embed, buf("h"), rows, H, V])
        scale = float(1.0 / np.sqrt(D))
        self.rmsnorm(f, buf("h"), layers[0]["ln1"], buf("xn"), rows)
        for l, layer in enumerate(layers):
            self.matmul(f, layer["qkv"], buf("xn"), buf("qkv"), rows)
            if cfg.fused_kernels:
                f.dispatch(self.kernel(f"axrt_rope_kv_cache_write_{written}"), [rows],
                           [buf("qkv"), positions, inv_freq, tables, cache, rows, 1, nh + nkv, l,
                            nb, nkv, BS, D, MBS, QKV, nh * D, 1.0])
            else:
                f.dispatch(self.kernel("axrt_rope_f32"), [rows],
                           [buf("qkv"), positions, inv_freq, rows, nh + nkv, D, QKV, 1.0])
                f.dispatch(self.kernel(f"axrt_kv_cache_write_{written}"), [rows],
                           [buf("qkv"), positions, tables, cache, rows, 1, l, nb,
                            nkv, BS, D, MBS, QKV, nh * D])
            if cfg.split_attention:
                f.dispatch(self.kernel(f"axrt_attention_decode_split_{read}"), [rows, nkv, splits],
                           [buf("qkv"), positions, tables, cache, buf("partials"), rows, nh, nkv,
                            D, l, nb, BS, MBS, QKV, scale, splits])
                f.dispatch(self.kernel("axrt_attention_combine_f32"), [rows, nh],
                           [buf("partials"), buf("attn"), rows, nh, D, splits])
            elif cfg.flash_attention:
                f.dispatch(self.kernel(f"axrt_attention_flash_{read}"),
                           [ceildiv(rows, _FLASH_TOKENS), nkv],
                           [buf("qkv"), positions, tables, cache, buf("attn"), rows, nh, nkv, D,
                            l, nb, BS, MBS, QKV, scale])
            else:
                f.dispatch(self.kernel(f"axrt_attention_decode_{read}"), [rows, nkv],
                           [buf("qkv"), positions, tables, cache, buf("attn"), rows, nh, nkv, D,
                            l, nb, BS, MBS, QKV, scale])
            self.matmul(f, layer["o"], buf("attn"), buf("tmp"), rows)
            all_reduce("tmp", rows * H)
            self.add_rmsnorm(f, buf("h"), buf("tmp"), layer["ln2"], buf("xn"), rows)
            if layer["gate_up"].kernel.endswith("_silu"):  # the gated SiLU in its epilogue
                self.matmul(f, layer["gate_up"], buf("xn"), buf("act"), rows)
            else:
                self.matmul(f, layer["gate_up"], buf("xn"), buf("gu"), rows)
                f.dispatch(self.kernel("axrt_silu_mul_f32"), [rows],
                           [buf("gu"), buf("act"), rows, I])
            self.matmul(f, layer["down"], buf("act"), buf("tmp"), rows)
            all_reduce("tmp", rows * H)
            if l + 1 < len(layers):  # the residual, and the next layer's first norm
                self.add_rmsnorm(f, buf("h"), buf("tmp"), layers[l + 1]["ln1"], buf("xn"), rows)
            else:
                self.add(f, buf("h"), buf("tmp"), buf("h"), rows * H)
        if head is None:
            return
        final_norm, lm_head = head
        # The rows that need logits, gathered (an embedding lookup into the
        # hidden rows), normed, projected.
        selected = f.sym("S")
        f.dispatch(self.kernel("axrt_embedding_f32"), [selected],
                   [logit_rows, buf("h"), buf("xn"), selected, H, rows])
        self.rmsnorm(f, buf("xn"), final_norm, buf("tmp"), selected)
        self.matmul(f, lm_head, buf("tmp"), f.output(0), selected)

    def sampler(self) -> None:
        cfg = self.cfg
        V = cfg.vocab_size
        f = self.b.function(
            "sample",
            [("logits", "float32", ["B", V]), ("temperature", "float32", ["B"]),
             ("top_k", "int32", ["B"]), ("top_p", "float32", ["B"]), ("seeds", "uint64", ["B"]),
             ("positions", "int32", ["B"])],
            [("tokens", "int32", ["B"])], symbols={"B": cfg.max_batch})
        rows = f.sym("B")
        f.dispatch(self.kernel("axrt_sample_f32"), [rows],
                   [*(f.input(i) for i in range(6)), f.output(0), rows, V])

    def logits_processor(self) -> None:
        """The ``process_logits`` function (docs/serving.md): the sampling options beyond
        ``sample``'s (a logit bias, the repetition, frequency and presence penalties, min_p)
        applied to ``logits`` in place, by the rows' lists of `E` entries (token -1: none;
        `E` at most the vocabulary, every token once). The engine calls it between ``step``
        and ``sample`` in the steps where a sampled row has such options."""
        V = self.cfg.vocab_size
        per_row = [(name, "float32", ["B"]) for name in (
            "temperature", "repetition_penalty", "frequency_penalty", "presence_penalty",
            "min_p")]
        entries = [("entry_tokens", "int32", ["B", "E"]), ("entry_counts", "int32", ["B", "E"]),
                   ("entry_in_prompt", "int32", ["B", "E"]),
                   ("entry_bias", "float32", ["B", "E"])]
        f = self.b.function("process_logits", [("logits", "float32", ["B", V]), *per_row,
                                               *entries],
                            [], symbols={"B": self.cfg.max_batch, "E": V}, mutable=("logits",))
        rows = f.sym("B")
        f.dispatch(self.kernel("axrt_logits_process_f32"), [rows],
                   [*(f.input(i) for i in range(10)), rows, V, f.sym("E")])


def convert(hf_dir: os.PathLike, out: os.PathLike, *, weights: str = "f32",
            max_context: Optional[int] = None, block_size: int = 16, prefill_chunk: int = 512,
            max_batch: int = 64, cuda_fatbin: Optional[os.PathLike] = None,
            cuda: bool = True, activations: str = "f32", kv_cache_dtype: str = "f32",
            int4_group_size: Optional[int] = None,
            fused_kernels: bool = False, decode_matmuls: bool = False,
            tensor_core_matmuls: bool = False,
            split_attention: bool = False, attention_splits: int = ATTENTION_SPLITS,
            flash_attention: bool = False,
            tensor_parallel: int = 1,
            chat_template: Optional[os.PathLike] = None) -> ModelConfig:
    """Converts the checkpoint in `hf_dir` to the .axe file `out`; returns its configuration.

    `weights`: ``"f32"``, ``"bf16"``, ``"int8"`` or ``"fp8"`` (e4m3fn; both
    with a scale per output channel) or ``"int4"`` (GPTQ's layout, a scale
    and zero point per group of inputs; AWQ's with `tensor_core_matmuls`).
    `activations`: ``"f32"``, or ``"int8"`` with int4 or int8 weights: the
    projections quantize their inputs to int8 per group and multiply
    integers (``axrt_matmul_gptq_int4_q8_f32``; for int8, in the same
    per-channel layout, ``axrt_matmul_int8_pc_q8_f32``, whose projections
    need inputs a multiple of 32); faster where docs/performance.md says, not
    exact: docs/kernels.md states the bounds. `int4_group_size` (int4
    weights): the inputs a group holds, 32, 64 or 128; by default (None) each
    projection takes the largest of 128, 64 and 32 that divides its inputs,
    and the layout ids (``gptq_v2.int4.g64`` ...) and kernels record
    which; a size that does not divide some projection's inputs is refused,
    naming it. `kv_cache_dtype`: the KV cache's
    element type, ``"f32"``, ``"bf16"`` (half the bytes) or ``"fp8_e4m3"``
    (a quarter, plus a scale per token and KV head; head_dim a multiple of
    16); the smaller ones are not exact (docs/kernels.md, "KV cache"), and
    the serving engine fits that many more blocks in the same bytes.
    `fused_kernels`: each residual add and the norm after it run as one
    kernel (``axrt_add_rmsnorm_f32``), and so do rope and the KV-cache write
    (``axrt_rope_kv_cache_write_*``), the same bits as the kernels they
    replace (docs/kernels.md, "Fused kernels"); with `decode_matmuls` and
    bf16 weights, the gate/up projection also computes the gated SiLU
    (``axrt_matmul_bf16_f32_decode_silu``, its rows interleaved). Off by
    default until their CUDA bodies have passed a GPU run
    (docs/gpu-validation.md).
    `decode_matmuls` (bf16, int8, fp8 and int4 weights, f32 activations):
    the projections take ``axrt_matmul_bf16_f32_decode``,
    ``axrt_matmul_int8_pc_f32_decode``,
    ``axrt_matmul_fp8_e4m3_pc_f32_decode`` or (int4, stored in GPTQ's
    layout) ``axrt_matmul_gptq_int4_f32_decode``, whose grids of 8 (int4:
    16) columns by 16 rows a workgroup suit a GPU's decode (on the CPU, the
    same bits as the matching tile kernels); off by default until their
    CUDA bodies have passed a GPU run.
    `tensor_core_matmuls` (bf16, int8, fp8 and int4 weights, f32
    activations): the projections take ``axrt_matmul_bf16_tc_f32``,
    ``axrt_matmul_int8_pc_tc_f32``, ``axrt_matmul_fp8_e4m3_pc_tc_f32`` or
    ``axrt_matmul_awq_int4_tc_f32``, which multiply on a GPU's tensor cores
    with the activations rounded to bf16 (int8 and fp8 codes are exact in
    bf16; int4 weights are each rounded to bf16 as well): within the f32
    matmul bound of that product, not the same bits as the default kernels
    (on the CPU either). One dispatch serves every step size, so decode
    steps take them as well and logits stay batch-invariant
    (docs/kernels.md, "Tensor-core matmul"); not with `decode_matmuls`. Off
    by default until their CUDA bodies have passed a GPU run.
    `split_attention`: attention cuts each token's context into
    `attention_splits` chunks of whole KV blocks, attended by workgroups of
    their own (``axrt_attention_decode_split_*``) and then combined
    (``axrt_attention_combine_f32``): more workgroups for a GPU's decode at
    small batches, within the f32 bound of the default kernels, not the
    same bits (docs/kernels.md, "Split attention"); off by default until
    its CUDA body has passed a GPU run.
    `flash_attention`: attention of every token of a step, prefill and decode,
    takes ``axrt_attention_flash_*``, which on a GPU multiplies on tensor
    cores with queries, keys, values and probabilities rounded to bf16:
    within its stated bound of the default kernels, not the same bits
    (docs/kernels.md, "Flash attention"); head_dim a multiple of 16 up to
    128, not with `split_attention`. Off by default until its CUDA body has
    passed a GPU run.
    `max_context`: the longest
    sequence (default: the checkpoint's ``max_position_embeddings``).
    `block_size`: tokens per KV-cache block. `prefill_chunk` and `max_batch`:
    the most tokens one ``step`` takes is the larger of the two, and the
    most sequences whose logits it returns is `max_batch` (the serving
    engine's default step budget and running sequences). The CUDA kernels are added as
    variants when axrt was built with them (or `cuda_fatbin` names a
    fatbin), unless `cuda` is False. `tensor_parallel` N > 1 writes, instead
    of one file, the directory `out` holding ``rank0.axe`` ..
    ``rank<N-1>.axe``, the shards of a set that :func:`axrt.llm.load` runs on
    N devices (docs/multi-device.md); the heads, KV heads and MLP size must
    be multiples of N. The checkpoint's chat template (chat_template.jinja,
    or ``chat_template`` in tokenizer_config.json) and the special tokens it
    reads are kept with the tokenizer, for chat completions
    (:mod:`axrt.llm.chat`); `chat_template` names a file whose template
    replaces it. Unsupported architectures, options and shapes raise
    :class:`UnsupportedModelError` naming them, and a template that does not
    compile :class:`~axrt.llm.chat.ChatError`, before anything is written.
    """
    if weights not in WEIGHT_MODES:
        raise UnsupportedModelError(f"--weights {weights!r} is not supported "
                                    f"(supported: {', '.join(WEIGHT_MODES)})")
    if activations not in ACTIVATION_MODES:
        raise UnsupportedModelError(f"--activations {activations!r} is not supported "
                                    f"(supported: {', '.join(ACTIVATION_MODES)})")
    if activations == "int8" and weights not in ("int4", "int8"):
        raise UnsupportedModelError(f"--activations int8 needs --weights int4 or int8, not "
                                    f"{weights}")
    if int4_group_size is not None:
        if weights != "int4":
            raise UnsupportedModelError(f"--int4-group-size needs --weights int4, not {weights}")
        if int4_group_size not in quantize.INT4_GROUP_SIZES:
            raise UnsupportedModelError(
                f"--int4-group-size {int4_group_size!r} is not supported (supported: "
                f"{', '.join(str(g) for g in sorted(quantize.INT4_GROUP_SIZES))})")
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise UnsupportedModelError(f"--kv-cache-dtype {kv_cache_dtype!r} is not supported "
                                    f"(supported: {', '.join(KV_CACHE_DTYPES)})")
    for what, value in (("block_size", block_size), ("prefill_chunk", prefill_chunk),
                        ("max_batch", max_batch), ("tensor_parallel", tensor_parallel),
                        ("attention_splits", attention_splits)):
        if int(value) < 1:
            raise ValueError(f"{what} must be at least 1, not {value}")
    if int(attention_splits) > _MAX_ATTENTION_SPLITS:
        raise ValueError(f"attention_splits must be at most {_MAX_ATTENTION_SPLITS} (a CUDA "
                         f"grid's z count), not {attention_splits}")
    checkpoint = Checkpoint(hf_dir)
    config = from_hf_config(checkpoint.config, max_context=max_context)
    chat = ChatTemplate.from_checkpoint(checkpoint.directory)
    if chat_template is not None:
        chat = ChatTemplate.from_file(Path(chat_template),
                                      chat.special_tokens if chat is not None else
                                      ChatTemplate.special_tokens_of(checkpoint.directory))
    elif chat is not None:
        chat.compiled()  # a template that does not compile is refused now
    config.weights = weights
    config.activations = activations
    config.int4_group_size = None if int4_group_size is None else int(int4_group_size)
    config.kv_cache_dtype = kv_cache_dtype
    config.fused_kernels = bool(fused_kernels)
    config.decode_matmuls = bool(decode_matmuls)
    config.tensor_core_matmuls = bool(tensor_core_matmuls)
    config.split_attention = bool(split_attention)
    config.attention_splits = int(attention_splits)
    config.flash_attention = bool(flash_attention)
    if flash_attention and split_attention:
        raise UnsupportedModelError("--flash-attention and --split-attention both choose the "
                                    "attention kernel of every step; pass one")
    if flash_attention and config.head_dim not in _FLASH_HEAD_DIMS:
        raise UnsupportedModelError(
            f"--flash-attention needs a head size that is a multiple of 16 up to 128; this "
            f"model's is {config.head_dim}")
    if decode_matmuls and weights not in ("bf16", "int8", "fp8", "int4"):
        raise UnsupportedModelError(f"--decode-matmuls needs --weights bf16, int8, fp8 or int4, "
                                    f"not {weights} (the decode matmuls cover those so far)")
    if decode_matmuls and activations != "f32":
        raise UnsupportedModelError(f"--decode-matmuls needs --activations f32, not "
                                    f"{activations} (int8 activations have a matmul of their "
                                    "own)")
    if tensor_core_matmuls and weights not in ("bf16", "int8", "fp8", "int4"):
        raise UnsupportedModelError(f"--tensor-core-matmuls needs --weights bf16, int8, fp8 or "
                                    f"int4, not {weights} (the tensor-core matmuls cover those "
                                    "so far)")
    if tensor_core_matmuls and activations != "f32":
        raise UnsupportedModelError(f"--tensor-core-matmuls needs --activations f32, not "
                                    f"{activations} (the tensor-core matmuls round activations "
                                    "to bf16; int8 activations have integer matmuls of their own)")
    if tensor_core_matmuls and decode_matmuls:
        raise UnsupportedModelError("--tensor-core-matmuls and --decode-matmuls both choose the "
                                    "projections' kernel, for every step size; pass one")
    if kv_cache_dtype == "fp8_e4m3" and config.head_dim % _FP8_HEAD_DIM_MULTIPLE != 0:
        raise UnsupportedModelError(
            f"--kv-cache-dtype fp8_e4m3 needs a head size that is a multiple of "
            f"{_FP8_HEAD_DIM_MULTIPLE}; this model's is {config.head_dim}")
    config.block_size = int(block_size)
    config.prefill_chunk = min(int(prefill_chunk), config.max_context)
    config.max_batch = int(max_batch)
    fatbin = None
    if cuda:
        fatbin = Path(cuda_fatbin) if cuda_fatbin is not None else default_fatbin()
    if int(tensor_parallel) > 1:
        _write_shards(checkpoint, config, weights, fatbin, int(tensor_parallel), Path(out), chat)
    else:
        whole = _Converter(checkpoint, config, weights, fatbin, ShardInfo.of(config, 0, 1, ""),
                           chat)
        whole.build()
        whole.save(Path(out))
    return config


def _write_shards(checkpoint: Checkpoint, config: ModelConfig, weights: str,
                  fatbin: Optional[Path], size: int, out: Path,
                  chat: Optional[ChatTemplate]) -> None:
    """Writes the `size` shards of a tensor-parallel set into the directory `out`."""
    check_tensor_parallel(config, size)
    if out.exists() and not out.is_dir():
        raise UnsupportedModelError(f"--tensor-parallel {size} writes a directory of shards; "
                                    f"{out} is a file")
    set_id = uuid.uuid4().hex
    shards = [_Converter(checkpoint, config, weights, fatbin,
                         ShardInfo.of(config, rank, size, set_id), chat) for rank in range(size)]
    # Every program is built, and so every refusal made, before a file is written.
    for shard in shards:
        shard.build()
    out.mkdir(parents=True, exist_ok=True)
    # The ranks of an earlier, larger set in the same directory go with it.
    for stale in out.glob("rank*.axe"):
        rank = stale.name[len("rank"):-len(".axe")]
        if rank.isdigit() and int(rank) >= size:
            stale.unlink()
    for rank, shard in enumerate(shards):
        shard.save(out / shard_file_name(rank))
