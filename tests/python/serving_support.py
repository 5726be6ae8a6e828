"""What the language-model and serving tests share: the tiny Llama converted once per test
process, the references computed with transformers (tests/llm/data), and waiting for an
engine to go idle."""
import time
from pathlib import Path

import numpy as np
import pytest

import axrt.llm

DATA = Path(__file__).resolve().parent.parent / "llm" / "data"


@pytest.fixture(scope="session")
def tiny_llama_path(tmp_path_factory):
    """tests/llm/data/tiny-llama converted with f32 weights (CPU kernels only)."""
    path = tmp_path_factory.mktemp("serving") / "tiny-llama.axe"
    axrt.llm.convert(DATA / "tiny-llama", path, weights="f32", cuda=False)
    return path


def wait_for(predicate, timeout=10.0, what="the condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def idle(engine) -> bool:
    """No request running or waiting, and every KV block back in the pool."""
    s = engine.stats()
    return s["kv_blocks_used"] == 0 and s["running"] == 0 and s["waiting"] == 0


def reference(model: str, weights: str) -> dict:
    """transformers' outputs for `model` with `weights` (tests/llm/data/<model>.<weights>.npz)."""
    with np.load(DATA / f"{model}.{weights}.npz") as npz:
        return {k: npz[k] for k in npz.files}


def prompts(ref: dict):
    """(i, prompt i's ids) of a reference, in order."""
    i = 0
    while f"prompt{i}" in ref:
        yield i, [int(t) for t in ref[f"prompt{i}"]]
        i += 1


def ids_text(tokenizer, prompt, tokens):
    """The completion text of `tokens` after `prompt`, as the server decodes it."""
    full = tokenizer.decode(list(prompt) + list(tokens), skip_special_tokens=True)
    return full[len(tokenizer.decode(list(prompt), skip_special_tokens=True)):]
