"""The engines and the measurement of llm_bench.py (and serving_bench.py): axrt's serving
engine, transformers and llama.cpp (through llama-cpp-python) behind one interface, the
machine's read bandwidth, the load of other processes, and the timed rounds."""

from __future__ import annotations

import inspect
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

SEED = 0
CHECK_PROMPT = 16
CHECK_TOKENS = 16
BANDWIDTH_BYTES = 1 << 30


def log(message: str = "") -> None:
    print(message, flush=True)


# ---------------------------------------------------------------------------
# The machine.


def cpu_description() -> Tuple[str, int]:
    """The CPU's model name (bench_results.machine's) and count."""
    from bench_results import machine

    return machine()["cpu"], os.cpu_count() or 1


class ReadBandwidth:
    """Memory read bandwidth: threads each reducing their share of a 1 GiB array."""

    def __init__(self) -> None:
        self.data = np.ones(BANDWIDTH_BYTES // 4, np.float32)
        self.data[:: 4096] = np.arange(self.data[:: 4096].size, dtype=np.float32)

    def measure(self, threads: int, repeats: int = 5) -> float:
        """Bytes per second, the best of `repeats` passes."""
        parts = np.array_split(self.data, threads)
        best = float("inf")
        # numpy releases the GIL in its reductions, so the threads read in parallel.
        with ThreadPoolExecutor(threads) as pool:
            for _ in range(repeats):
                start = time.perf_counter()
                list(pool.map(np.max, parts))
                best = min(best, time.perf_counter() - start)
        return self.data.nbytes / best



# ---------------------------------------------------------------------------
# Engines. Each runs greedy generation the same way: prefill, then one token
# at a time, each taking the argmax of the previous step's logits.


class Engine:
    name = ""
    weights = ""

    def prefill(self, ids: Sequence[int]) -> Tuple[float, np.ndarray]:
        """Seconds to prefill `ids` into a fresh sequence, and the last token's logits."""
        raise NotImplementedError

    def decode(self, prompt: Sequence[int], steps: int) -> Tuple[float, List[int]]:
        """Seconds of `steps` decode calls after prefilling `prompt` (not timed), and the
        greedy tokens (steps + 1: the prefill's and each decode's)."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class AxrtEngine(Engine):
    """The serving engine, serving one request at a time as Model.generate does. Its
    prefix cache is off, so that every prefill computes the whole prompt; greedy
    tokens are picked on the device (the sample function)."""
    name = "axrt"

    def __init__(self, path: Path, weights: str) -> None:
        import axrt.llm

        self.weights = weights
        self.engine = axrt.llm.Engine(path, max_running=1, prefix_caching=False)

    def prefill(self, ids):
        start = time.perf_counter()
        (event,) = self.engine.submit(ids, 1, stop_ids=(), logits=True)
        return time.perf_counter() - start, event.logits

    def decode(self, prompt, steps):
        # The first token comes with the prefill; the clock runs from it to the last.
        request = self.engine.submit(prompt, steps + 1, stop_ids=())
        times = [time.perf_counter() for _ in request]
        return times[-1] - times[0], list(request.tokens)

    def close(self):
        self.engine.close()


class TransformersEngine(Engine):
    name = "transformers"
    weights = "f32"

    def __init__(self, model_dir: Path, threads: int) -> None:
        import torch
        from transformers import LlamaForCausalLM

        torch.set_num_threads(threads)
        self.torch = torch
        self.model = LlamaForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        # Transformers 5.24 renamed forward's past_key_values to cache.
        params = inspect.signature(self.model.forward).parameters
        self.cache_arg = "cache" if "cache" in params else "past_key_values"

    def _run(self, ids, cache):
        """The logits of the last of `ids`, appending them to `cache` (a DynamicCache)."""
        out = self.model(input_ids=self.torch.tensor([list(ids)], dtype=self.torch.long),
                         use_cache=True, logits_to_keep=1, **{self.cache_arg: cache})
        return out.logits[0, -1]

    def _cache(self):
        from transformers import DynamicCache

        try:
            return DynamicCache(config=self.model.config)
        except TypeError:  # transformers 4 takes no configuration
            return DynamicCache()

    def prefill(self, ids):
        with self.torch.inference_mode():
            cache = self._cache()
            start = time.perf_counter()
            logits = self._run(ids, cache).numpy()
            return time.perf_counter() - start, logits

    def decode(self, prompt, steps):
        with self.torch.inference_mode():
            cache = self._cache()
            tokens = [int(self._run(prompt, cache).argmax())]
            start = time.perf_counter()
            for _ in range(steps):
                tokens.append(int(self._run(tokens[-1:], cache).argmax()))
            return time.perf_counter() - start, tokens

    def close(self):
        del self.model


class LlamaCppEngine(Engine):
    name = "llama.cpp"

    def __init__(self, path: Path, weights: str, threads: int, flash_attn: bool) -> None:
        import llama_cpp

        self.llama_cpp = llama_cpp
        self.weights = weights
        self.llm = llama_cpp.Llama(
            model_path=str(path), n_ctx=1024, n_batch=512, n_ubatch=512, n_threads=threads,
            n_threads_batch=threads, flash_attn=flash_attn, verbose=False, seed=SEED)
        self.vocab = self.llm.n_vocab()

    def _logits(self) -> np.ndarray:
        # The last eval asked for the logits of its last token only: one row.
        return np.ctypeslib.as_array(self.llama_cpp.llama_get_logits(self.llm.ctx),
                                     shape=(self.vocab,))

    def prefill(self, ids):
        self.llm.reset()
        start = time.perf_counter()
        self.llm.eval(list(ids))
        logits = self._logits().copy()
        return time.perf_counter() - start, logits

    def decode(self, prompt, steps):
        self.llm.reset()
        self.llm.eval(list(prompt))
        tokens = [int(np.argmax(self._logits()))]
        start = time.perf_counter()
        for _ in range(steps):
            self.llm.eval(tokens[-1:])
            tokens.append(int(np.argmax(self._logits())))
        return time.perf_counter() - start, tokens

    def close(self):
        self.llm.close()



# ---------------------------------------------------------------------------
# Measurement.


class Figure:
    def __init__(self, samples: Sequence[float] = ()) -> None:
        self.samples: List[float] = list(samples)

    def add(self, value: float) -> None:
        self.samples.append(value)

    @property
    def best(self) -> float:
        return max(self.samples) if self.samples else float("nan")

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else float("nan")

    @property
    def spread(self) -> float:
        """(best - worst) / best."""
        return (max(self.samples) - min(self.samples)) / self.best if self.samples else 0.0

    def __str__(self) -> str:
        if not self.samples:
            return "-"
        return f"{_rate(self.best)} ({self.spread * 100:.0f}%)"


def _rate(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}"


def greedy_check(engines: List[Engine], reference: Optional[Engine], prompt: List[int]) -> List[str]:
    lines = []
    if reference is None:
        return ["greedy check: skipped (transformers is not available as the reference)"]
    _, want = reference.decode(prompt, CHECK_TOKENS - 1)
    _, ref_logits = reference.prefill(prompt)
    top = np.sort(ref_logits)[-2:]
    lines.append(f"greedy check: transformers f32, {CHECK_PROMPT}-token prompt -> {want} "
                 f"(top-2 logit margin after the prompt: {top[1] - top[0]:.2e})")
    for engine in engines:
        if engine is reference:
            continue
        _, got = engine.decode(prompt, CHECK_TOKENS - 1)
        _, logits = engine.prefill(prompt)
        same = sum(a == b for a, b in zip(got, want))
        diff = float(np.max(np.abs(logits - ref_logits)))
        scale = float(np.max(np.abs(ref_logits)))
        if engine.weights in ("f32", "F32"):
            verdict = "same tokens" if got == want else f"DIFFERENT tokens: {got}"
        else:
            verdict = f"{same} of {CHECK_TOKENS} tokens equal (quantized weights: not expected to match)"
        lines.append(f"  {engine.name} {engine.weights}: {verdict}; largest logit difference after "
                     f"the prompt {diff:.2e} (largest logit {scale:.2e})")
    return lines


class OtherLoad:
    """CPUs kept busy by other processes over an interval: the machine's busy time
    (/proc/stat) less this process's CPU time, over the wall time."""

    def __init__(self) -> None:
        self.available = os.path.exists("/proc/stat")

    @staticmethod
    def _busy_seconds() -> float:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")

    def start(self) -> None:
        if self.available:
            t = os.times()
            self._begin = (time.perf_counter(), self._busy_seconds(), t.user + t.system)

    def stop(self) -> float:
        if not self.available:
            return float("nan")
        wall, busy, own = self._begin
        t = os.times()
        others = (self._busy_seconds() - busy) - (t.user + t.system - own)
        return max(0.0, others / max(time.perf_counter() - wall, 1e-9))

    def wait_quiet(self, threshold: float, longest: float) -> float:
        """Waits (up to `longest` seconds) for a second in which others use under `threshold` CPUs."""
        if not self.available or longest <= 0:
            return float("nan")
        deadline = time.perf_counter() + longest
        while True:
            self.start()
            time.sleep(1.0)
            load = self.stop()
            if load < threshold or time.perf_counter() >= deadline:
                return load


def run_rounds(engines: List[Engine], prompts: Dict[int, List[int]], decode_prompt: List[int],
               steps: int, repeats: int, wait_quiet: float, bandwidth: ReadBandwidth,
               threads: int) -> Tuple[Dict[Tuple[str, str], Dict[str, Figure]], List[float], Figure]:
    """The figures, the CPUs other processes used during each round, and the read
    bandwidth (bytes/s) measured at the start of each round."""
    figures = {(e.name, e.weights): {key: Figure() for key in [f"p{n}" for n in prompts] + ["decode"]}
               for e in engines}
    # Untimed warm-up: first calls page weights in and build caches and thread pools.
    for engine in engines:
        engine.prefill(prompts[min(prompts)])
        engine.decode(decode_prompt, 4)
    monitor = OtherLoad()
    loads = []
    read = Figure()
    for round_ in range(repeats):
        before = monitor.wait_quiet(0.1, wait_quiet)
        monitor.start()
        read.add(bandwidth.measure(threads))
        for engine in engines:
            entry = figures[(engine.name, engine.weights)]
            for length in prompts:
                seconds, _ = engine.prefill(prompts[length])
                entry[f"p{length}"].add(length / seconds)
                time.sleep(0.1)  # let spinning worker threads go idle before the next engine
            seconds, _ = engine.decode(decode_prompt, steps)
            entry["decode"].add(steps / seconds)
            time.sleep(0.1)
        loads.append(monitor.stop())
        waited = "" if before != before else f" (the second before: {before:.2f})"  # NaN: no wait
        log(f"  round {round_ + 1} of {repeats}: read bandwidth {read.samples[-1] / 1e9:.1f} GB/s; "
            f"other processes used {loads[-1]:.2f} CPUs{waited}")
    return figures, loads, read


