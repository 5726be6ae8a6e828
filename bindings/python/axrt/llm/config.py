"""The configuration of a Llama-family model: read from a Hugging Face config.json,
stored in an .axe file's metadata, read back by :func:`axrt.llm.load`."""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

# The architectures the converter knows, and what each adds to Llama's.
ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "Qwen2ForCausalLM": "qwen2",
}

#: The metadata key holding the configuration (JSON) in a converted .axe.
METADATA_KEY = "axrt.llm.config"
#: The metadata key holding the checkpoint's tokenizer.json, when it had one.
TOKENIZER_KEY = "axrt.llm.tokenizer"
#: The metadata key holding the chat template and the special tokens it reads (JSON,
#: :class:`axrt.llm.chat.ChatTemplate`), when the checkpoint had a template.
CHAT_KEY = "axrt.llm.chat"
#: Version of the function signatures a converted file provides (docs/llm.md).
ABI_VERSION = 1
#: The metadata key of a tensor-parallel shard: its :class:`ShardInfo` (JSON).
SHARD_KEY = "axrt.llm.shard"
#: Version of a shard's functions and of :class:`ShardInfo` (docs/multi-device.md).
SHARD_VERSION = 2


class UnsupportedModelError(ValueError):
    """The checkpoint uses an architecture or an option the converter does not support."""


@dataclass
class ModelConfig:
    """What the program of a converted model depends on (docs/llm.md)."""

    architecture: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: Optional[Dict[str, Any]]
    max_context: int
    tie_word_embeddings: bool
    attention_bias: bool
    mlp_bias: bool
    bos_token_id: Optional[int] = None
    eos_token_ids: List[int] = field(default_factory=list)
    # Set by the converter:
    weights: str = "f32"
    activations: str = "f32"
    # int4: the group size asked for (32, 64 or 128), or None: each projection takes the
    # largest that divides its inputs (docs/llm.md, "Weights"); the layouts record each.
    int4_group_size: Optional[int] = None
    kv_cache_dtype: str = "f32"  # "f32", "bf16" or "fp8_e4m3" (docs/kernels.md, "KV cache")
    fused_kernels: bool = False  # add + RMSNorm, rope + cache write as one kernel each
    decode_matmuls: bool = False  # projections on the decode grids (docs/kernels.md)
    tensor_core_matmuls: bool = False  # bf16 projections on tensor cores, x rounded to bf16
    split_attention: bool = False  # attention split over chunks of the context, then combined
    attention_splits: int = 8  # the chunks of split attention (docs/kernels.md)
    flash_attention: bool = False  # attention on tensor cores, bf16 operands (docs/kernels.md)
    block_size: int = 16
    prefill_chunk: int = 512
    max_batch: int = 64
    abi_version: int = ABI_VERSION

    @property
    def max_blocks_per_sequence(self) -> int:
        return -(-self.max_context // self.block_size)

    @property
    def qkv_size(self) -> int:
        return (self.num_heads + 2 * self.num_kv_heads) * self.head_dim

    @property
    def kv_cache_row(self) -> int:
        """The cache's last dimension: head_dim elements, or for fp8 head_dim codes and the
        row's f32 scale (4 bytes)."""
        return self.head_dim + 4 if self.kv_cache_dtype == "fp8_e4m3" else self.head_dim

    def kv_cache_shape(self, num_blocks: int) -> tuple:
        return (self.num_layers, 2, num_blocks, self.num_kv_heads, self.block_size,
                self.kv_cache_row)

    def kv_cache_bytes_per_block(self) -> int:
        element = {"f32": 4, "bf16": 2, "fp8_e4m3": 1}[self.kv_cache_dtype]
        return (self.num_layers * 2 * self.num_kv_heads * self.block_size * self.kv_cache_row *
                element)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "ModelConfig":
        data = json.loads(text)
        version = data.get("abi_version")
        if version != ABI_VERSION:
            raise UnsupportedModelError(
                f"the model was converted for version {version} of the axrt.llm functions; "
                f"this axrt runs version {ABI_VERSION}: convert it again")
        return cls(**data)

    def inv_freq(self):
        """The rotary frequencies in float64, with the checkpoint's rope scaling applied."""
        import numpy as np

        d = self.head_dim
        inv = 1.0 / (self.rope_theta ** (np.arange(0, d, 2, dtype=np.float64) / d))
        scaling = self.rope_scaling or {}
        kind = scaling.get("rope_type", scaling.get("type", "default"))
        if kind in ("default", None):
            return inv
        if kind == "linear":
            return inv / float(scaling["factor"])
        if kind == "llama3":
            factor = float(scaling["factor"])
            low = float(scaling["low_freq_factor"])
            high = float(scaling["high_freq_factor"])
            old_context = float(scaling["original_max_position_embeddings"])
            low_wavelen = old_context / low
            high_wavelen = old_context / high
            wavelen = 2.0 * math.pi / inv
            scaled = np.where(wavelen > low_wavelen, inv / factor, inv)
            smooth = (old_context / wavelen - low) / (high - low)
            smoothed = (1.0 - smooth) * scaled / factor + smooth * scaled
            medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
            return np.where(medium, smoothed, scaled)
        raise UnsupportedModelError(f"rope scaling '{kind}' is not supported "
                                    "(supported: default, linear, llama3)")


def _get(config: Dict[str, Any], key: str, default: Any = None, *, required: bool = False) -> Any:
    if key in config and config[key] is not None:
        return config[key]
    if required:
        raise UnsupportedModelError(f"config.json has no '{key}'")
    return default


def from_hf_config(config: Dict[str, Any], *, max_context: Optional[int] = None) -> ModelConfig:
    """Reads a Hugging Face config.json (as a dict); refuses what the converter cannot run."""
    architectures = config.get("architectures") or []
    if len(architectures) != 1 or architectures[0] not in ARCHITECTURES:
        raise UnsupportedModelError(
            f"architecture {architectures or config.get('model_type')!r} is not supported "
            f"(supported: {', '.join(ARCHITECTURES)})")
    architecture = architectures[0]
    family = ARCHITECTURES[architecture]
    act = _get(config, "hidden_act", "silu")
    if act != "silu":
        raise UnsupportedModelError(f"hidden_act '{act}' is not supported (supported: silu)")
    hidden = int(_get(config, "hidden_size", required=True))
    heads = int(_get(config, "num_attention_heads", required=True))
    kv_heads = int(_get(config, "num_key_value_heads", heads))
    head_dim = int(_get(config, "head_dim", hidden // heads))
    if heads % kv_heads != 0:
        raise UnsupportedModelError(f"num_attention_heads {heads} is not a multiple of "
                                    f"num_key_value_heads {kv_heads}")
    if head_dim % 2 != 0:
        raise UnsupportedModelError(f"head_dim {head_dim} is odd; rotary embeddings need pairs")
    # Transformers 5 keeps rope settings in rope_parameters; older files use
    # rope_theta and rope_scaling.
    rope = dict(_get(config, "rope_parameters", {}) or {})
    theta = float(rope.pop("rope_theta", _get(config, "rope_theta", 10000.0)))
    scaling = rope or _get(config, "rope_scaling")
    if scaling is not None:
        scaling = dict(scaling)
        kind = scaling.get("rope_type", scaling.get("type", "default"))
        if kind not in ("default", "linear", "llama3"):
            raise UnsupportedModelError(f"rope scaling '{kind}' is not supported "
                                        "(supported: default, linear, llama3)")
        if kind == "default":
            scaling = None
    if _get(config, "partial_rotary_factor", 1.0) != 1.0:
        raise UnsupportedModelError("partial_rotary_factor other than 1 is not supported")
    positions = int(_get(config, "max_position_embeddings", 2048))
    context = positions if max_context is None else int(max_context)
    if context < 1 or context > positions:
        raise UnsupportedModelError(f"max context {context} is outside [1, "
                                    f"max_position_embeddings = {positions}]")
    window = _get(config, "sliding_window")
    uses_window = family == "mistral" or bool(_get(config, "use_sliding_window", False))
    if uses_window and window is not None and int(window) < context:
        # Full attention equals sliding-window attention up to the window.
        context = int(window)
    attention_bias = bool(_get(config, "attention_bias", family == "qwen2"))
    eos = _get(config, "eos_token_id")
    eos_ids = [] if eos is None else ([int(eos)] if isinstance(eos, int) else [int(e) for e in eos])
    bos = _get(config, "bos_token_id")
    return ModelConfig(
        architecture=architecture,
        vocab_size=int(_get(config, "vocab_size", required=True)),
        hidden_size=hidden,
        intermediate_size=int(_get(config, "intermediate_size", required=True)),
        num_layers=int(_get(config, "num_hidden_layers", required=True)),
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        rms_norm_eps=float(_get(config, "rms_norm_eps", 1e-6)),
        rope_theta=theta,
        rope_scaling=scaling,
        max_context=context,
        tie_word_embeddings=bool(_get(config, "tie_word_embeddings", False)),
        attention_bias=attention_bias,
        mlp_bias=bool(_get(config, "mlp_bias", False)),
        bos_token_id=None if bos is None else int(bos),
        eos_token_ids=eos_ids,
    )


def shard_file_name(rank: int) -> str:
    """The name of rank `rank`'s file in a tensor-parallel set's directory."""
    return f"rank{rank}.axe"


@dataclass
class ShardInfo:
    """Which part of a tensor-parallel set a shard file holds (docs/multi-device.md).

    Rank `rank` of `size` keeps query heads ``heads[0]..heads[1]-1``, KV heads
    ``kv_heads[0]..``, and MLP columns ``intermediate[0]..`` of every layer;
    embeddings and norms are in every shard, the final norm, lm_head and
    ``sample`` in rank `head_rank`'s only. `set_id` is the same in every
    shard of one conversion and differs between conversions.
    """

    rank: int
    size: int
    set_id: str
    heads: List[int]
    kv_heads: List[int]
    intermediate: List[int]
    head_rank: int = 0
    version: int = SHARD_VERSION

    @classmethod
    def of(cls, config: ModelConfig, rank: int, size: int, set_id: str) -> "ShardInfo":
        """Rank `rank`'s part of `config`'s model split `size` ways (the sizes divide)."""
        heads = config.num_heads // size
        kv_heads = config.num_kv_heads // size
        columns = config.intermediate_size // size
        return cls(rank=rank, size=size, set_id=set_id,
                   heads=[rank * heads, (rank + 1) * heads],
                   kv_heads=[rank * kv_heads, (rank + 1) * kv_heads],
                   intermediate=[rank * columns, (rank + 1) * columns])

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "ShardInfo":
        data = json.loads(text)
        version = data.get("version")
        if version != SHARD_VERSION:
            raise UnsupportedModelError(
                f"the shard was written for version {version} of the tensor-parallel functions; "
                f"this axrt runs version {SHARD_VERSION}: convert it again")
        return cls(**data)


def check_tensor_parallel(config: ModelConfig, size: int) -> None:
    """UnsupportedModelError unless `config`'s heads, KV heads and MLP split `size` ways."""
    for what, count in (("num_attention_heads", config.num_heads),
                        ("num_key_value_heads", config.num_kv_heads),
                        ("intermediate_size", config.intermediate_size)):
        if count % size != 0:
            raise UnsupportedModelError(
                f"--tensor-parallel {size}: {what} {count} is not a multiple of {size} "
                "(each rank takes an equal share of the query heads, the KV heads and the MLP)")
