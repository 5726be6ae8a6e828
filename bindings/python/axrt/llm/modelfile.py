"""What a converted file says about itself, and the checks every way of running it shares:
its :class:`ModelConfig` and tokenizer, token ids and sampling options."""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np

from .._extras import require
from .config import METADATA_KEY, SHARD_KEY, TOKENIZER_KEY, ModelConfig, ShardInfo, UnsupportedModelError


def read_model(executable, *, shard: bool = False) -> Tuple[ModelConfig, Optional[str]]:
    """The :class:`ModelConfig` and the tokenizer.json (or None) of a converted model.

    A shard of a tensor-parallel set is refused unless `shard` is True.
    """
    metadata = executable.metadata
    if METADATA_KEY not in metadata:
        raise UnsupportedModelError(f"{executable.name} is not a model converted by "
                                    "axrt.llm (its metadata has no model configuration)")
    if SHARD_KEY in metadata and not shard:
        info = ShardInfo.from_json(metadata[SHARD_KEY])
        raise UnsupportedModelError(
            f"{executable.name} is rank {info.rank} of a {info.size}-way tensor-parallel set: "
            f"load the set's directory with axrt.llm.load(path, devices=[...]), one device "
            "per shard")
    return ModelConfig.from_json(metadata[METADATA_KEY]), metadata.get(TOKENIZER_KEY)


def make_tokenizer(tokenizer_json: Optional[str]):
    """A ``tokenizers.Tokenizer`` of `tokenizer_json`, or None when there is none."""
    if tokenizer_json is None:
        return None
    tokenizers = require("tokenizers", "the model's tokenizer (text prompts of axrt.llm)")
    return tokenizers.Tokenizer.from_str(tokenizer_json)


def check_token_ids(token_ids: Sequence[int], vocab_size: int) -> np.ndarray:
    """`token_ids` as int32 ``[n]``; ValueError unless they are integers in ``[0, vocab_size)``."""
    if isinstance(token_ids, (str, bytes)):
        raise ValueError("token ids must be a sequence of integers, not a string")
    ids = np.asarray(list(token_ids) if not isinstance(token_ids, np.ndarray) else token_ids)
    if ids.ndim != 1 or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
        raise ValueError("token ids must be a sequence of integers")
    ids = ids.astype(np.int64)
    bad = ids[(ids < 0) | (ids >= vocab_size)]
    if bad.size:
        raise ValueError(f"token id {int(bad[0])} is outside the vocabulary [0, {vocab_size})")
    return ids.astype(np.int32)


def check_sampling(temperature: float, top_k: int, top_p: float) -> None:
    """ValueError unless the sampling options are ones :meth:`Model.stream` takes."""
    if not (temperature >= 0 and np.isfinite(temperature)):
        raise ValueError(f"temperature must be finite and >= 0, not {temperature}")
    if top_k < 0:
        raise ValueError(f"top_k must be >= 0 (0: all tokens), not {top_k}")
    if not (0 < top_p <= 1):
        raise ValueError(f"top_p must be in (0, 1], not {top_p}")
