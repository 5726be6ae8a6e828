"""axrt.llm: Llama-family language models on axrt.

    python -m axrt.llm convert HF_DIR model.axe --weights int4
    python -m axrt.llm generate model.axe --prompt-ids 1,2,3 --max-new-tokens 16
    python -m axrt.llm serve model.axe --port 8000     # OpenAI-compatible (axrt.llm.server)

    import axrt.llm
    model = axrt.llm.load("model.axe")
    ids = model.generate([1, 2, 3], max_new_tokens=16)          # greedy
    for token in model.stream([1, 2, 3], 16, temperature=0.8, top_p=0.9, seed=1):
        print(token)

    with axrt.llm.Engine("model.axe") as engine:                # continuous batching
        outputs = engine.generate([[1, 2, 3], [4, 5]], max_tokens=16)

    python -m axrt.llm convert HF_DIR model-tp2 --tensor-parallel 2
    model = axrt.llm.load("model-tp2", devices=["cuda:0", "cuda:1"])  # a ParallelModel
    with axrt.llm.Engine("model-tp2", devices=["cuda:0", "cuda:1"]) as engine:  # served

See docs/llm.md, docs/serving.md and docs/multi-device.md.
"""
from .config import ModelConfig, UnsupportedModelError
from .convert import WEIGHT_MODES, convert
from .engine import AsyncRequest, Engine, Request, RequestError, TokenEvent, follow
from .loading import load
from .model import LanguageModel, Model, Session
from .parallel import ParallelModel

__all__ = [
    "AsyncRequest",
    "Engine",
    "follow",
    "LanguageModel",
    "Model",
    "ModelConfig",
    "ParallelModel",
    "Request",
    "RequestError",
    "Session",
    "TokenEvent",
    "UnsupportedModelError",
    "WEIGHT_MODES",
    "convert",
    "load",
]
