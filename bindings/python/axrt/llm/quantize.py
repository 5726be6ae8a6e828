"""Weight quantization for the converter (docs/llm.md, "Weights").

Each function takes a linear layer's weight in the Hugging Face layout
``[out, in]`` (``[N, K]``) and returns what the matching axrt.cpu matmul
kernel reads, with the layouts of docs/format.md section 5.
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

#: AWQ's nibble order: nibble p of a word holds element AWQ_ORDER[p] of its eight.
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
INT4_GROUP = 128
#: The int4 group sizes (inputs per scale and zero point), largest first; AWQ and GPTQ
#: define each. The converter takes the first that divides a projection's inputs.
INT4_GROUP_SIZES = (128, 64, 32)


#: Weights (outputs x inputs) the per-channel quantizers take at once: their temporaries
#: are a few f32 copies of a block of rows, not of the whole weight.
_ROW_BLOCK = 1 << 22


def _by_rows(w: np.ndarray, peak: Optional[np.ndarray], quantize_rows, code_dtype
             ) -> Tuple[np.ndarray, np.ndarray]:
    """`quantize_rows(rows as f32, their peaks)` over blocks of rows of `w` (any float type):
    each row's codes and scale depend on that row alone, so the blocks give the bytes of the
    whole at once."""
    w = np.asarray(w)
    n, k = w.shape
    q = np.empty((n, k), code_dtype)
    scale = np.empty((n, 1), np.float32)
    rows = max(1, _ROW_BLOCK // max(1, k))
    for i in range(0, n, rows):
        block = np.asarray(w[i:i + rows], dtype=np.float32)
        block_peak = (np.max(np.abs(block), axis=1, keepdims=True) if peak is None
                      else np.asarray(peak[i:i + rows], dtype=np.float32))
        q[i:i + rows], scale[i:i + rows] = quantize_rows(block, block_peak)
    return q, scale


def int8_per_channel(w: np.ndarray, peak: Optional[np.ndarray] = None
                     ) -> Tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 with one f32 scale per output row: ``w ~ q * scale``.

    Returns ``q`` int8 ``[N, K]`` and ``scale`` f32 ``[N, 1]``; a row of zeros
    gets scale 1. `peak` (f32 ``[N, 1]``, default: each row's largest ``|w|``)
    is the largest ``|w|`` of each whole row when `w` holds only some of its
    columns (a row-parallel shard): the codes and scales are then the whole
    weight's, restricted to those columns. `w` may be bf16, f16 or f32.
    """
    def rows(w: np.ndarray, peak: np.ndarray):
        scale = np.where(peak > 0, peak / np.float32(127.0), np.float32(1.0)).astype(np.float32)
        return np.clip(np.rint(w / scale), -127, 127).astype(np.int8), scale

    return _by_rows(w, peak, rows, np.int8)


#: The largest finite e4m3fn value.
E4M3_MAX = 448.0


def fp8_e4m3_per_channel(w: np.ndarray, peak: Optional[np.ndarray] = None
                         ) -> Tuple[np.ndarray, np.ndarray]:
    """fp8 e4m3fn with one f32 scale per output row: ``w ~ e4m3(q) * scale``.

    ``scale = max |w[n, :]| / 448`` in f32 (1 for a row of zeros) and ``q``
    the e4m3fn codes of ``w / scale`` rounded to nearest even (ml_dtypes),
    ``[N, K]`` as ``ml_dtypes.float8_e4m3fn``; ``scale`` is f32 ``[N, 1]``.
    `peak` and `w`'s types as for :func:`int8_per_channel`.
    """
    import ml_dtypes

    def rows(w: np.ndarray, peak: np.ndarray):
        scale = np.where(peak > 0, peak / np.float32(E4M3_MAX), np.float32(1.0)).astype(
            np.float32)
        # |w / scale| <= 448 but for the rounding of the division; clip what
        # rounds past it (e4m3fn has no infinity: it would become NaN).
        return np.clip(w / scale, -E4M3_MAX, E4M3_MAX).astype(ml_dtypes.float8_e4m3fn), scale

    return _by_rows(w, peak, rows, ml_dtypes.float8_e4m3fn)


def pack_awq(codes: np.ndarray) -> np.ndarray:
    """Packs uint4 codes ``[R, C]`` (C a multiple of 8) into u32 words ``[R, C / 8]`` in the AWQ order."""
    rows, cols = codes.shape
    groups = codes.reshape(rows, cols // 8, 8).astype(np.uint32)
    words = np.zeros((rows, cols // 8), dtype=np.uint32)
    for nibble, element in enumerate(AWQ_ORDER):
        words |= groups[:, :, element] << np.uint32(4 * nibble)
    return words


def pack_sequential(codes: np.ndarray, axis: int) -> np.ndarray:
    """Packs uint4 codes eight to a u32 word along `axis` (0 or 1), element i in nibble i."""
    codes = np.asarray(codes, dtype=np.uint32)
    if axis == 0:
        return pack_sequential(codes.T, 1).T.copy()
    rows, cols = codes.shape
    groups = codes.reshape(rows, cols // 8, 8)
    words = np.zeros((rows, cols // 8), dtype=np.uint32)
    for nibble in range(8):
        words |= groups[:, :, nibble] << np.uint32(4 * nibble)
    return words


def int4_group_size(k: int) -> Optional[int]:
    """The group size int4 weights with `k` inputs take: the first of
    :data:`INT4_GROUP_SIZES` (128, 64, 32) that divides `k`, or None when none does."""
    return next((g for g in INT4_GROUP_SIZES if k % g == 0), None)


def int4_codes(w: np.ndarray, group: int = INT4_GROUP
               ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Asymmetric 4-bit with groups of `group` inputs per output.

    ``w`` is ``[N, K]``; K must be a multiple of `group` and N of 8. For each
    group, ``scale = (max - min) / 15`` rounded to f16 and ``zero =
    round(-min / scale)`` in [0, 15], ``q = clip(round(w / scale) + zero, 0,
    15)``, so ``w ~ (q - zero) * scale``. Returns the codes ``q`` u32
    ``[K, N]``, ``scales`` f16 ``[K/g, N]`` and ``zeros`` u32 ``[K/g, N]``,
    unpacked.
    """
    w = np.asarray(w, dtype=np.float32)
    n, k = w.shape
    if k % group != 0 or n % 8 != 0:
        raise ValueError(f"int4 needs inputs a multiple of {group} and outputs a multiple of 8; "
                         f"this weight is [{n}, {k}]")
    wt = w.T.reshape(k // group, group, n)  # [groups, group, N]
    low = np.minimum(wt.min(axis=1), 0.0)
    high = np.maximum(wt.max(axis=1), 0.0)
    scale = ((high - low) / 15.0).astype(np.float16)
    scale = np.where(scale > 0, scale, np.float16(1.0)).astype(np.float16)
    s32 = scale.astype(np.float32)
    zero = np.clip(np.rint(-low / s32), 0, 15).astype(np.uint32)
    q = np.clip(np.rint(wt / s32[:, None, :]) + zero[:, None, :], 0, 15).astype(np.uint32)
    return q.reshape(k, n), scale, zero


#: Weights (outputs x inputs) :func:`int4_awq` and :func:`int4_gptq` quantize at once: their
#: temporaries are a few f32 and u32 copies of a block of outputs, not of the whole weight.
_INT4_BLOCK = 1 << 22


def _int4_by_blocks(w: np.ndarray, group: int, pack) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`pack` of :func:`int4_codes` of each block of outputs (a multiple of 8: every output's
    groups and every packed word of outputs lie in one block), joined along N: the same
    bytes as the whole at once. `w` may be in any float type (bf16, f16, f32)."""
    w = np.asarray(w)
    n, k = w.shape
    if k % group != 0 or n % 8 != 0:
        raise ValueError(f"int4 needs inputs a multiple of {group} and outputs a multiple of 8; "
                         f"this weight is [{n}, {k}]")
    rows = max(8, _INT4_BLOCK // max(1, k) // 8 * 8)
    parts = [pack(*int4_codes(w[i:i + rows], group)) for i in range(0, n, rows)]
    if len(parts) == 1:
        return parts[0]
    return tuple(np.concatenate([p[j] for p in parts], axis=1) for j in range(3))


def int4_awq(w: np.ndarray, group: int = INT4_GROUP
             ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`int4_codes` in AWQ's storage: ``qweight`` u32 ``[K, N/8]``,
    ``scales`` f16 ``[K/g, N]`` and ``qzeros`` u32 ``[K/g, N/8]``, packed
    along N in the AWQ order."""
    return _int4_by_blocks(w, group, lambda q, scale, zero: (pack_awq(q), scale,
                                                            pack_awq(zero)))


def int4_gptq(w: np.ndarray, group: int = INT4_GROUP
              ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`int4_codes` in GPTQ's (v2) storage: ``qweight`` u32 ``[K/8, N]``
    packed along K, ``scales`` f16 ``[K/g, N]`` and ``qzeros`` u32
    ``[K/g, N/8]`` packed along N, element i of each eight in nibble i."""
    return _int4_by_blocks(w, group, lambda q, scale, zero: (pack_sequential(q, 0), scale,
                                                            pack_sequential(zero, 1)))


#: Elements of f32 a block of :func:`bf16` converts at once (64 MiB).
_BF16_BLOCK = 1 << 24


def bf16(w: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
    """Rounds to bfloat16 (nearest, ties to even), keeping the layout: into `out` (a bf16
    array of `w`'s shape) or a new array. bf16 data is copied as it is; other types go
    through f32 a block of rows at a time, so that a large tensor in bf16 or f16 never has
    an f32 copy of the whole."""
    import ml_dtypes

    w = np.asarray(w)
    if out is None:
        out = np.empty(w.shape, ml_dtypes.bfloat16)
    if w.dtype == ml_dtypes.bfloat16:
        out[...] = w
    elif w.ndim < 2:
        out[...] = w.astype(np.float32).astype(ml_dtypes.bfloat16)
    else:
        rows = max(1, _BF16_BLOCK // max(1, w[0].size))
        for i in range(0, w.shape[0], rows):
            out[i:i + rows] = np.asarray(w[i:i + rows], np.float32).astype(ml_dtypes.bfloat16)
    return out
