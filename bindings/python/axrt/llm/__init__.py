"""axrt.llm: Llama-family language models on axrt.

    python -m axrt.llm convert HF_DIR model.axe --weights int4
    python -m axrt.llm generate model.axe --prompt-ids 1,2,3 --max-new-tokens 16

    import axrt.llm
    model = axrt.llm.load("model.axe")
    ids = model.generate([1, 2, 3], max_new_tokens=16)          # greedy
    for token in model.stream([1, 2, 3], 16, temperature=0.8, top_p=0.9, seed=1):
        print(token)

See docs/llm.md.
"""
from .config import ModelConfig, UnsupportedModelError
from .convert import WEIGHT_MODES, convert
from .model import BlockAllocator, Model, Session, load

__all__ = [
    "BlockAllocator",
    "Model",
    "ModelConfig",
    "Session",
    "UnsupportedModelError",
    "WEIGHT_MODES",
    "convert",
    "load",
]
