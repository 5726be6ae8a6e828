"""What a converted file says about itself, and the checks every way of running it shares:
its :class:`ModelConfig` and tokenizer, token ids and sampling options."""
from __future__ import annotations

from typing import List, Mapping, Optional, Sequence, Tuple

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


#: The most entries of a logit bias (AXRT_ENGINE_MAX_LOGIT_BIAS, OpenAI's), and each value's
#: bound (AXRT_ENGINE_LOGIT_BIAS_BOUND).
MAX_LOGIT_BIAS = 300
LOGIT_BIAS_BOUND = 100.0
#: The most choices a request may ask for (AXRT_ENGINE_MAX_CHOICES).
MAX_CHOICES = 128


def check_logit_options(presence_penalty: float, frequency_penalty: float,
                        repetition_penalty: float, min_p: float,
                        logit_bias: Optional[Mapping[int, float]], n: int,
                        vocab_size: int) -> List[Tuple[int, float]]:
    """ValueError naming the option unless the serving engine's sampling options beyond
    :func:`check_sampling`'s are in range (docs/serving.md, "Sampling options"); returns the
    logit bias as ``[(token, bias)]``."""
    for name, value in (("presence_penalty", presence_penalty),
                        ("frequency_penalty", frequency_penalty),
                        ("repetition_penalty", repetition_penalty)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
                or not np.isfinite(value):
            raise ValueError(f"{name} must be a finite number, not {value!r}")
    if not repetition_penalty > 0:
        raise ValueError(f"repetition_penalty must be > 0 (1: none), not {repetition_penalty}")
    if isinstance(min_p, bool) or not isinstance(min_p, (int, float, np.integer, np.floating)) \
            or not 0 <= min_p <= 1:
        raise ValueError(f"min_p must be in [0, 1], not {min_p!r}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= MAX_CHOICES:
        raise ValueError(f"n must be an integer in [1, {MAX_CHOICES}], not {n!r}")
    if logit_bias is None:
        return []
    if not isinstance(logit_bias, Mapping):
        raise ValueError("logit_bias must be a dict of token id -> bias, not "
                         f"{type(logit_bias).__name__}")
    if len(logit_bias) > MAX_LOGIT_BIAS:
        raise ValueError(f"logit_bias has {len(logit_bias)} entries, more than {MAX_LOGIT_BIAS}")
    pairs = []
    for token, bias in logit_bias.items():
        if isinstance(token, bool) or not isinstance(token, (int, np.integer)) \
                or not 0 <= token < vocab_size:
            raise ValueError(f"logit_bias token {token!r} is not an id in the vocabulary "
                             f"[0, {vocab_size})")
        if isinstance(bias, bool) or not isinstance(bias, (int, float, np.integer, np.floating)) \
                or not -LOGIT_BIAS_BOUND <= bias <= LOGIT_BIAS_BOUND:
            raise ValueError(f"logit_bias of token {token} must be in [-{LOGIT_BIAS_BOUND:g}, "
                             f"{LOGIT_BIAS_BOUND:g}], not {bias!r}")
        pairs.append((int(token), float(bias)))
    return pairs
