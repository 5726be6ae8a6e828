"""The committed references of the model path (tests/llm/data) recomputed with
transformers, where torch and transformers are installed: they must still be
what tests/llm/make_tiny_llama.py wrote."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

LLM = Path(__file__).resolve().parent.parent / "llm"


def _script():
    spec = importlib.util.spec_from_file_location("make_tiny_llama", LLM / "make_tiny_llama.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Every way of rounding the weights on one model, every model in f32 (their
# configurations differ: rope scaling, biases), and every KV-cache rounding on
# another model: each piece of make_tiny_llama.py at least once, with the
# committed files of the other pairs made by the same pieces.
CASES = ([("tiny-llama", weights) for weights in ("f32", "bf16", "int8", "fp8", "int4")] +
         [(model, "f32") for model in ("tiny-llama3", "tiny-llama-tp")] +
         [("tiny-llama3", kv) for kv in ("kv-bf16", "kv-fp8_e4m3")])


@pytest.mark.parametrize("model, weights", CASES)
def test_committed_references_are_what_transformers_computes(model, weights):
    script = _script()
    assert (weights in script.WEIGHT_MODES or
            (weights in script.KV_MODES and model in script.KV_MODELS))
    torch.set_num_threads(1)
    fresh = script.reference_outputs(script.load_model(LLM / "data" / model, weights))
    with np.load(LLM / "data" / f"{model}.{weights}.npz") as committed:
        assert set(committed.files) == set(fresh)
        for key in committed.files:
            want = committed[key]
            if want.dtype.kind == "i":
                assert np.array_equal(fresh[key], want), key
            else:
                scale = np.max(np.abs(want))
                assert np.max(np.abs(fresh[key] - want)) <= 1e-5 * scale, key
