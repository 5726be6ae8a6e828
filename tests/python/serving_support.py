"""What the serving tests share: the tiny Llama converted once per test
process, and waiting for an engine to go idle."""
import time
from pathlib import Path

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
