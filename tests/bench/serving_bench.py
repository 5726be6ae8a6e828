"""Serving on the CPU: axrt's serving engine, many requests at once against one at a time
and against transformers' batched generate, in one run.

The model is llm_bench.py's: a Llama-architecture checkpoint of about 125 M
parameters with random weights (fixed seed), built locally with transformers
under --model-dir (shared with llm_bench.py; reused when present; nothing is
downloaded). It is converted with axrt.llm.convert (--weights, default f32;
no CUDA variants) and driven through the low-level serving engine,
axrt._axrt.Engine (include/axrt/serving.h), one fresh engine per measured
run, so that no run finds the previous run's prompts in the prefix cache.

The workload: --requests requests (default 64) with random prompts (ids
drawn uniformly from the vocabulary) whose lengths are uniform in
--prompt-len (default 16..256) and whose output lengths (max_tokens) are
uniform in --output-len (default 16..128), all from a fixed seed; greedy, no
stop ids, so every request generates exactly its max_tokens tokens.

Measured:
  1. Offline throughput: the whole workload submitted at once, timed from
     the first submission to the last token, on
       - the engine with its defaults (continuous batching: up to the step
         function's bound of running sequences, chunked prefill under the
         step's token budget);
       - the same engine one request at a time (max_running=1, all
         submitted at once, served first come first served);
       - transformers' LlamaForCausalLM.generate in batches of --hf-batch
         requests in submission order (left padding, greedy, the end-of-
         sequence id disabled). A batch runs max_new_tokens = the largest
         max_tokens in it, so shorter requests ride along: only each
         request's own tokens (prompt and max_tokens) count as useful.
     Output tokens/s counts the generated tokens; total tokens/s the prompt
     tokens too. The concurrency-16 point (--concurrency) two ways: the
     first 16 requests alone, all at once against one at a time; and the
     whole workload with at most 16 running (max_running=16: the engine
     admits the next request when one finishes) against the one-at-a-time
     run above.
     The one-at-a-time run is split into prefill (from a request's last
     token to the next one's first) and decode; and the decode step is
     timed alone with 1, 4, 16 and 64 sequences running (128-token prompts,
     48 tokens each: the median gap between token events once every
     request has its first token), which shows what batching buys.
  2. Online latency: --online-requests requests (default 64, drawn like the
     offline ones) arriving as a Poisson process at --rate requests/s and at
     twice that rate (the same draws, arrival times halved), each submitted
     when it arrives, on the engine with its defaults and on the one-at-a-
     time engine. Per request: the time to first token (arrival to the first
     token's event), the inter-token latencies (between the events of its
     consecutive tokens; pooled over all requests) and the end-to-end
     latency (arrival to the last token); p50 and p99 of each. Event times
     are taken when poll() hands the events to Python.
  3. KV-cache waste during the continuous-batching offline run: once a step,
     a millisecond after poll() returned the step's events (when the next
     step runs), stats() gives the blocks held and the token slots written
     in them or being written by the step in flight; the waste is
     1 - kv_slots_used / (kv_blocks_used * block_size). Mean and maximum,
     also over the samples taken once every request had its first token
     (the decode phase).

The outputs are compared too: the continuous-batching run must give every
request the same tokens as the one-at-a-time run (the engine's results do not depend on what else runs); the agreement with
transformers is printed as well (floating-point differences may move greedy
choices of random weights after some tokens, so it is not required).

Threads: --threads (default AXRT_CPU_THREADS when set, else the number of
CPUs) sets axrt's CPU device (through AXRT_CPU_THREADS, unless that is set
already: then the device's count wins and the script says so) and torch's
intra-op threads alike. Before each timed run the script waits, up to
--wait-quiet seconds, for a second in which other processes use under 0.1
CPU, and it prints the CPU time others used during the run.

Needs numpy, torch and transformers (for the checkpoint and the
transformers rows), and PYTHONPATH naming the built axrt package:

    PYTHONPATH=build/bench/python python3 tests/bench/serving_bench.py

--quick runs a smaller workload (16 requests, outputs 16..64, 16 online
requests) in about a minute. --json FILE also writes the throughput figures
as records for the regression gate (bench_results.py), each against the
figure the tables set it against.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from llm_bench import (ROOT, SEED, OtherLoad, _rate, cpu_description, log,  # noqa: E402
                       prepare_checkpoint)

WEIGHTS = ("f32", "bf16", "int8", "int4")
# The decode-step table: sequences at once, their prompts and outputs.
SCALING_RUNNING = (1, 4, 16, 64)
SCALING_PROMPT = 128
SCALING_TOKENS = 48
# Every poll waits at most this long, so that a stuck engine ends the run with a message.
POLL_SECONDS = 60.0


@dataclass
class Request:
    prompt: np.ndarray  # int32
    max_tokens: int


@dataclass
class Run:
    """One measured run: its wall time and every request's tokens."""
    name: str
    how: str
    seconds: float
    outputs: List[List[int]]
    useful_prompt: int
    useful_output: int
    others_cpu: float = float("nan")
    note: str = ""

    @property
    def output_rate(self) -> float:
        return self.useful_output / self.seconds

    @property
    def total_rate(self) -> float:
        return (self.useful_prompt + self.useful_output) / self.seconds


@dataclass
class KvSamples:
    """stats() read once a step, while the step runs, during an offline run.

    kv_slots_used counts the slots the step in flight writes as used, so a sample gives the
    cache as that step leaves it (before finished requests give their blocks back)."""
    block_size: int = 0
    samples: List[Dict] = field(default_factory=list)

    def sample(self, stats: Dict, decoding: bool) -> None:
        if self.samples and stats["steps"] == self.samples[-1]["steps"]:
            return
        self.block_size = stats["block_size"]
        if stats["kv_blocks_used"] > 0:
            self.samples.append(dict(stats, decoding=decoding))

    def waste(self, decoding_only: bool = False) -> List[Tuple[float, Dict]]:
        return [(1.0 - s["kv_slots_used"] / (s["kv_blocks_used"] * self.block_size), s)
                for s in self.samples if s["decoding"] or not decoding_only]

    def describe(self, decoding_only: bool = False) -> str:
        values = self.waste(decoding_only)
        if not values:
            return "no samples"
        worst, at = max(values, key=lambda v: v[0])
        return (f"mean {100 * float(np.mean([w for w, _ in values])):.2f} %, max "
                f"{100 * worst:.2f} % (with {at['running']} sequences running, "
                f"{at['kv_blocks_used']} blocks held); {len(values)} samples, least "
                f"{100 * min(w for w, _ in values):.2f} %")


def make_workload(count: int, prompt_len: Tuple[int, int], output_len: Tuple[int, int],
                  vocab: int, seed: int) -> List[Request]:
    rng = np.random.default_rng(seed)
    requests = []
    for _ in range(count):
        n = int(rng.integers(prompt_len[0], prompt_len[1] + 1))
        out = int(rng.integers(output_len[0], output_len[1] + 1))
        # Past the unknown, BOS and EOS ids.
        requests.append(Request(rng.integers(3, vocab, n).astype(np.int32), out))
    return requests


def token_counts(requests: Sequence[Request]) -> Tuple[int, int]:
    return sum(r.prompt.size for r in requests), sum(r.max_tokens for r in requests)


def mean_of(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else float("nan")


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else float("nan")


# ---------------------------------------------------------------------------
# The engines.


class EngineDriver:
    """A fresh axrt._axrt.Engine over `executable`, warmed up, with its events recorded."""

    def __init__(self, executable, max_running: int = 0) -> None:
        from axrt import _axrt

        self.engine = _axrt.Engine(executable, max_running=max_running)
        self.next_id = 1 << 32  # warm-up requests; the measured ones use 0..n-1
        self.tokens: Dict[int, List[int]] = {}
        self.times: Dict[int, List[float]] = {}
        self.finished: Dict[int, float] = {}
        # First calls page the weights in and build the thread pools and scratch.
        rng = np.random.default_rng(SEED + 99)
        warm = [Request(rng.integers(3, 1000, 48).astype(np.int32), 8) for _ in range(4)]
        ids = []
        for r in warm:
            ids.append(self.next_id)
            self.engine.add_request(self.next_id, r.prompt, r.max_tokens)
            self.next_id += 1
        self.wait(ids)
        self.tokens.clear()
        self.times.clear()
        self.finished.clear()

    def add(self, request_id: int, request: Request) -> None:
        self.tokens[request_id] = []
        self.times[request_id] = []
        self.engine.add_request(request_id, request.prompt, request.max_tokens)

    def poll(self, timeout: float, kv: Optional[KvSamples] = None) -> int:
        """Takes the events there are (waiting up to `timeout` s for one); returns how many."""
        events = self.engine.poll(timeout)
        now = time.perf_counter()
        for rid, token, index, finish, error, *_ in events:
            if error is not None:
                raise RuntimeError(f"request {rid}: {error}")
            if token >= 0:
                self.tokens.setdefault(rid, []).append(token)
                self.times.setdefault(rid, []).append(now)
            if finish is not None:
                if finish not in ("length", "stop"):
                    raise RuntimeError(f"request {rid} ended with {finish}")
                self.finished[rid] = now
        if kv is not None and events:
            # The step's last events and the scheduling of the next step take microseconds:
            # after a millisecond the next step runs (steps here take several).
            time.sleep(0.001)
            kv.sample(self.engine.stats(), all(self.tokens.values()))
        return len(events)

    def wait(self, ids: Sequence[int], kv: Optional[KvSamples] = None) -> None:
        pending = set(ids)
        while not pending.issubset(self.finished):
            if self.poll(POLL_SECONDS, kv) == 0 and not pending.issubset(self.finished):
                raise RuntimeError(f"no event in {POLL_SECONDS:.0f} s; engine stats: "
                                   f"{self.engine.stats()}")

    def close(self) -> None:
        self.engine.close()


def run_engine_offline(executable, requests: Sequence[Request], max_running: int,
                       kv: Optional[KvSamples] = None) -> Tuple[float, List[List[int]], Dict]:
    driver = EngineDriver(executable, max_running)
    try:
        start = time.perf_counter()
        for i, r in enumerate(requests):
            driver.add(i, r)
        driver.wait(range(len(requests)), kv)
        seconds = time.perf_counter() - start
        stats = driver.engine.stats()
        if kv is not None:
            kv.sample(stats, True)
        if max_running == 1:
            # One at a time, a request's first token comes after the previous one's last
            # token and its own prefill; the rest is decode.
            ends = [start] + [driver.finished[i] for i in range(len(requests) - 1)]
            stats["prefill_seconds"] = sum(driver.times[i][0] - ends[i]
                                           for i in range(len(requests)))
        return seconds, [driver.tokens[i] for i in range(len(requests))], stats
    finally:
        driver.close()


def decode_steps(executable, running: int, prompt: int, tokens: int, vocab: int) -> float:
    """The median time of a decode step with `running` sequences after `prompt`-token prompts:
    the gaps between token events once every request has its first token."""
    rng = np.random.default_rng(SEED + running)
    driver = EngineDriver(executable)
    try:
        for i in range(running):
            driver.add(i, Request(rng.integers(3, vocab, prompt).astype(np.int32), tokens))
        driver.wait(range(running))
        settled = max(driver.times[i][0] for i in range(running))
        gaps = []
        for i in range(running):
            times = [t for t in driver.times[i] if t >= settled]
            gaps.extend(np.diff(times).tolist())
        return float(np.median(gaps))
    finally:
        driver.close()


@dataclass
class Online:
    name: str
    rate: float
    seconds: float  # first arrival to last token
    ttft: List[float]
    itl: List[float]
    e2e: List[float]
    output_tokens: int
    others_cpu: float = float("nan")


def run_online(executable, requests: Sequence[Request], arrivals: np.ndarray, max_running: int,
               name: str, rate: float) -> Online:
    driver = EngineDriver(executable, max_running)
    try:
        start = time.perf_counter()
        due = start + arrivals
        submitted = 0
        n = len(requests)
        while len(driver.finished) < n:
            now = time.perf_counter()
            while submitted < n and due[submitted] <= now:
                driver.add(submitted, requests[submitted])
                submitted += 1
            wait = (due[submitted] - time.perf_counter()) if submitted < n else POLL_SECONDS
            if driver.poll(max(wait, 0.0)) == 0 and submitted == n and len(driver.finished) < n:
                raise RuntimeError(f"no event in {POLL_SECONDS:.0f} s; engine stats: "
                                   f"{driver.engine.stats()}")
        end = max(driver.finished.values())
        ttft, itl, e2e = [], [], []
        for i in range(n):
            times = driver.times[i]
            ttft.append(times[0] - due[i])
            itl.extend(np.diff(times).tolist())
            e2e.append(driver.finished[i] - due[i])
        return Online(name, rate, end - start, ttft, itl, e2e,
                      sum(len(driver.tokens[i]) for i in range(n)))
    finally:
        driver.close()


class TransformersRunner:
    def __init__(self, model_dir: Path, threads: int) -> None:
        import torch
        from transformers import LlamaForCausalLM

        torch.set_num_threads(threads)
        self.torch = torch
        self.model = LlamaForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        # No stop ids, as for axrt: every sequence runs to max_new_tokens.
        self.model.generation_config.eos_token_id = None
        self.model.generation_config.pad_token_id = 0

    def _batch(self, batch: Sequence[Request]) -> Tuple[List[List[int]], int]:
        """Each request's own tokens, and the tokens the batch computed (padding included)."""
        torch = self.torch
        longest = max(r.prompt.size for r in batch)
        new = max(r.max_tokens for r in batch)
        ids = torch.zeros((len(batch), longest), dtype=torch.long)
        mask = torch.zeros((len(batch), longest), dtype=torch.long)
        for row, r in enumerate(batch):  # left padding
            ids[row, longest - r.prompt.size:] = torch.from_numpy(r.prompt.astype(np.int64))
            mask[row, longest - r.prompt.size:] = 1
        with torch.inference_mode():
            out = self.model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new,
                                      min_new_tokens=new, do_sample=False)
        generated = out[:, longest:]
        if generated.shape[1] != new:
            raise RuntimeError(f"transformers generated {generated.shape[1]} tokens, not {new}")
        return ([generated[row, :r.max_tokens].tolist() for row, r in enumerate(batch)],
                len(batch) * (longest + new))

    def run(self, requests: Sequence[Request], batch: int) -> Tuple[float, List[List[int]], int]:
        self._batch(requests[:2])  # warm-up
        start = time.perf_counter()
        outputs: List[List[int]] = []
        computed = 0
        for first in range(0, len(requests), batch):
            tokens, n = self._batch(requests[first:first + batch])
            outputs.extend(tokens)
            computed += n
        return time.perf_counter() - start, outputs, computed


# ---------------------------------------------------------------------------
# Reporting.


def agreement(a: Sequence[List[int]], b: Sequence[List[int]]) -> str:
    same = sum(x == y for x, y in zip(a, b))
    prefix = []
    for x, y in zip(a, b):
        k = 0
        while k < min(len(x), len(y)) and x[k] == y[k]:
            k += 1
        prefix.append(k / max(len(x), 1))
    return (f"{same} of {len(a)} requests identical; on average the first "
            f"{100 * mean_of(prefix):.0f} % of each request's tokens agree")


def throughput_table(title: str, runs: List[Run], baseline: Optional[Run]) -> None:
    log("")
    log(title)
    log("")
    log("| engine | how | seconds | output tok/s | total tok/s | output tok/s vs one at a time "
        "| others' CPU |")
    log("|---|---|---|---|---|---|---|")
    for run in runs:
        ratio = f"{run.output_rate / baseline.output_rate:.2f}x" if baseline else "-"
        log(f"| {run.name} | {run.how} | {run.seconds:.1f} | {_rate(run.output_rate)} | "
            f"{_rate(run.total_rate)} | {ratio} | {run.others_cpu:.2f} |")
    for run in runs:
        if run.note:
            log(f"  {run.name}, {run.how}: {run.note}")


def ms(value: float) -> str:
    return f"{value * 1e3:.0f}" if value >= 0.1 else f"{value * 1e3:.1f}"


def online_table(runs: List[Online]) -> None:
    log("")
    log("Online (Poisson arrivals; latencies in ms: TTFT time to first token, ITL between tokens, "
        "E2E arrival to last token):")
    log("")
    log("| engine | rate req/s | served req/s | output tok/s | TTFT p50 | TTFT p99 | ITL p50 | "
        "ITL p99 | E2E p50 | E2E p99 | others' CPU |")
    log("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        n = len(r.ttft)
        log(f"| {r.name} | {r.rate:g} | {n / r.seconds:.2f} | {_rate(r.output_tokens / r.seconds)} | "
            f"{ms(percentile(r.ttft, 50))} | {ms(percentile(r.ttft, 99))} | "
            f"{ms(percentile(r.itl, 50))} | {ms(percentile(r.itl, 99))} | "
            f"{ms(percentile(r.e2e, 50))} | {ms(percentile(r.e2e, 99))} | {r.others_cpu:.2f} |")


def write_json(path: str, runs: List[Run], single: Run, point: List[Run], sustained: Optional[Run],
               scaling: List[Tuple[int, float, float]], kv: KvSamples) -> None:
    """The output tokens/s of the tables as records, each against what its table sets it
    against: one at a time, transformers' batched generate, one running sequence."""
    from bench_results import write_records

    def rate(name: str, ours: float, theirs: Optional[float], anchor: Optional[str]) -> dict:
        return {"name": name, "unit": "tok/s", "axrt": ours, "anchor": theirs,
                "anchor_name": anchor, "higher_is_better": True}

    hf = next((r for r in runs if r.name == "transformers"), None)
    batched = runs[0]
    records = [rate("offline/continuous_batching/vs:one_at_a_time", batched.output_rate,
                    single.output_rate, "the engine, one at a time")]
    for run, what in ((batched, "continuous_batching"), (single, "one_at_a_time")):
        records.append(rate(f"offline/{what}/vs:transformers", run.output_rate,
                            hf.output_rate if hf else None,
                            f"transformers {hf.how}" if hf else None))
    if len(point) > 1 and point[1] is not single:
        records.append(rate(f"concurrency/{len(point[0].outputs)}_at_once/vs:one_at_a_time",
                            point[0].output_rate, point[1].output_rate,
                            "the same requests, one at a time"))
    if sustained is not None:
        records.append(rate("concurrency/sustained/vs:one_at_a_time", sustained.output_rate,
                            single.output_rate, "the engine, one at a time"))
    for running, step, _ in scaling[1:]:
        records.append(rate(f"decode_step/running:{running}/vs:running:1", running / step,
                            1 / scaling[0][1], "one sequence running"))
    if kv.samples:
        records.append({"name": "kv_cache_waste_mean", "unit": "%",
                        "axrt": 100 * mean_of([w for w, _ in kv.waste()]),
                        "higher_is_better": False})
    write_records(path, "serving_bench", records)


def parse_range(text: str) -> Tuple[int, int]:
    try:
        low, high = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LOW,HIGH, not {text!r}")
    if not 1 <= low <= high:
        raise argparse.ArgumentTypeError(f"expected 1 <= LOW <= HIGH, not {text!r}")
    return low, high


# ---------------------------------------------------------------------------


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=None,
                        help="threads for axrt and torch (default: AXRT_CPU_THREADS when set, "
                             "else the number of CPUs)")
    parser.add_argument("--weights", default="f32", choices=WEIGHTS,
                        help="axrt's weights (default f32; transformers runs f32 always)")
    parser.add_argument("--model-dir", type=Path, default=ROOT / "build" / "bench" / "llm",
                        help="where the checkpoint and .axe files are kept (default "
                             "build/bench/llm, shared with llm_bench.py)")
    parser.add_argument("--requests", type=int, default=64, help="offline requests (default 64)")
    parser.add_argument("--prompt-len", type=parse_range, default=(16, 256),
                        help="prompt lengths, LOW,HIGH, uniform (default 16,256)")
    parser.add_argument("--output-len", type=parse_range, default=(16, 128),
                        help="output lengths, LOW,HIGH, uniform (default 16,128)")
    parser.add_argument("--concurrency", type=int, default=16,
                        help="requests of the concurrency point (default 16)")
    parser.add_argument("--hf-batch", type=int, default=16,
                        help="transformers' batch size (default 16)")
    parser.add_argument("--online-requests", type=int, default=64,
                        help="requests of each online run (default 64)")
    parser.add_argument("--rate", type=float, default=2.0,
                        help="online arrival rate, requests/s; 2x that is run too (default 2)")
    parser.add_argument("--seed", type=int, default=SEED, help=f"workload seed (default {SEED})")
    parser.add_argument("--wait-quiet", type=float, default=10.0,
                        help="before each timed run, wait up to this many seconds for a second "
                             "in which other processes use under 0.1 CPU (default 10; 0: do not)")
    parser.add_argument("--quick", action="store_true",
                        help="a smaller run: 16 requests, outputs 16..64, 16 online requests")
    parser.add_argument("--skip-transformers", action="store_true")
    parser.add_argument("--skip-online", action="store_true")
    parser.add_argument("--json", default="",
                        help="also write the records of bench_results.py to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.requests = min(args.requests, 16)
        args.output_len = (args.output_len[0], min(args.output_len[1], 64))
        args.online_requests = min(args.online_requests, 16)
    for name in ("requests", "concurrency", "hf_batch", "online_requests"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.rate <= 0:
        parser.error("--rate must be positive")
    env_threads = os.environ.get("AXRT_CPU_THREADS")
    threads = args.threads or (int(env_threads) if env_threads else (os.cpu_count() or 1))
    if threads < 1:
        parser.error("--threads must be at least 1")
    model_dir = args.model_dir.resolve()

    cpu, cpus = cpu_description()
    log(f"serving_bench: {cpu}, {cpus} CPUs; Python {platform.python_version()}, numpy "
        f"{np.__version__}; load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    have_transformers, config = prepare_checkpoint("serving_bench", model_dir)
    if config is None:
        return 0
    vocab = config["vocab_size"]

    # The CPU device's thread count is read when axrt makes its first instance.
    os.environ.setdefault("AXRT_CPU_THREADS", str(threads))
    try:
        import axrt
        import axrt.llm
        from axrt.llm.modelfile import read_model
    except ImportError as error:
        log(f"serving_bench: skipped (axrt.llm is not importable: {error}; set PYTHONPATH to the "
            "built package)")
        return 0
    device = axrt.device("cpu:0")
    if device.compute_units != threads:
        log(f"AXRT_CPU_THREADS={os.environ['AXRT_CPU_THREADS']} overrides --threads {threads}")
        threads = device.compute_units
    log(f"axrt {axrt.__version__} on {device.id}: {device.compute_units} workgroup threads; "
        f"torch gets {threads} threads")

    path = model_dir / f"serving-{args.weights}.axe"
    start = time.perf_counter()
    axrt.llm.convert(model_dir, path, weights=args.weights, cuda=False)
    executable = axrt.load(path)
    cfg, _ = read_model(executable)
    log(f"{path.name}: {args.weights} weights, converted in {time.perf_counter() - start:.1f} s; "
        f"context {cfg.max_context}, KV block {cfg.block_size} tokens, up to {cfg.max_batch} "
        f"sequences and {max(cfg.prefill_chunk, cfg.max_batch)} tokens a step")

    requests = make_workload(args.requests, args.prompt_len, args.output_len, vocab, args.seed)
    prompt_tokens, output_tokens = token_counts(requests)
    log(f"workload: {len(requests)} requests (seed {args.seed}), prompts "
        f"{args.prompt_len[0]}..{args.prompt_len[1]} tokens ({prompt_tokens} in all), outputs "
        f"{args.output_len[0]}..{args.output_len[1]} tokens ({output_tokens} in all); greedy, "
        "no stop ids")

    monitor = OtherLoad()

    def timed(fn, *fn_args):
        before = monitor.wait_quiet(0.1, args.wait_quiet)
        monitor.start()
        result = fn(*fn_args)
        load = monitor.stop()
        waited = "" if before != before else f"; the second before: {before:.2f}"  # NaN: no wait
        time.sleep(0.1)  # let spinning worker threads go idle before the next run
        return result, load, waited

    # 1. Offline throughput.
    log("")
    log("offline:")
    kv = KvSamples()
    (seconds, batched_out, batched_stats), load, waited = timed(
        run_engine_offline, executable, requests, 0, kv)
    batched = Run("axrt", "continuous batching (engine defaults)", seconds, batched_out,
                  prompt_tokens, output_tokens, load,
                  f"{batched_stats['steps']} steps, {batched_stats['computed_tokens']} tokens "
                  f"computed, {batched_stats['preemptions']} preemptions, "
                  f"{batched_stats['kv_blocks_total']} KV blocks")
    log(f"  {batched.how}: {seconds:.1f} s (others used {load:.2f} CPUs{waited})")
    (seconds, single_out, single_stats), load, waited = timed(
        run_engine_offline, executable, requests, 1)
    prefill = single_stats["prefill_seconds"]
    single = Run("axrt", "one at a time (max_running=1)", seconds, single_out, prompt_tokens,
                 output_tokens, load,
                 f"{single_stats['steps']} steps; {prefill:.1f} s from a request's end to the "
                 f"next one's first token (prefill, {_rate(prompt_tokens / prefill)} prompt tok/s), "
                 f"{seconds - prefill:.1f} s of decode "
                 f"({_rate((output_tokens - len(requests)) / (seconds - prefill))} tok/s)")
    log(f"  {single.how}: {seconds:.1f} s (others used {load:.2f} CPUs{waited})")
    runs = [batched, single]
    hf = None
    if have_transformers and not args.skip_transformers:
        hf = TransformersRunner(model_dir, threads)
        (seconds, hf_out, computed), load, waited = timed(hf.run, requests, args.hf_batch)
        padded = computed - prompt_tokens - output_tokens
        runs.append(Run("transformers", f"generate, batches of {args.hf_batch}, left padding",
                        seconds, hf_out, prompt_tokens, output_tokens, load,
                        f"{computed} token positions computed, {padded} of them padding or "
                        "past a request's own length (not counted)"))
        log(f"  transformers: {seconds:.1f} s (others used {load:.2f} CPUs{waited})")

    log("")
    log(f"check: continuous batching against one at a time: {agreement(batched_out, single_out)}")
    problems = 0 if batched_out == single_out else 1
    for run in runs[2:]:
        log(f"check: continuous batching against {run.name} {run.how}: "
            f"{agreement(batched_out, run.outputs)}")
        if run.name == "axrt" and run.outputs != batched_out:
            problems += 1

    # The concurrency point.
    point: List[Run] = []
    if args.concurrency < len(requests):
        subset = requests[:args.concurrency]
        p, o = token_counts(subset)
        log("")
        log(f"concurrency {len(subset)}: the first {len(subset)} requests ({p} prompt, {o} output "
            "tokens)")
        (seconds, out, _), load, _ = timed(run_engine_offline, executable, subset, 0)
        point.append(Run("axrt", f"{len(subset)} at once (engine defaults)", seconds, out, p, o, load))
        (seconds, out1, _), load, _ = timed(run_engine_offline, executable, subset, 1)
        point.append(Run("axrt", "one at a time (max_running=1)", seconds, out1, p, o, load))
        if out != out1:
            log("check: the concurrency point's outputs DIFFER between the two runs")
            problems += 1
    else:
        point = [batched, single] + [r for r in runs[2:] if r.name == "axrt"]
    # The same concurrency sustained: the whole workload, never more than that many running
    # (the engine admits the next request when one finishes).
    sustained: Optional[Run] = None
    if args.concurrency < len(requests):
        (seconds, out, stats), load, waited = timed(run_engine_offline, executable, requests,
                                                    args.concurrency)
        sustained = Run("axrt", f"at most {args.concurrency} running (max_running="
                        f"{args.concurrency})", seconds, out, prompt_tokens, output_tokens, load,
                        f"{stats['steps']} steps")
        log(f"concurrency {args.concurrency} sustained: all {len(requests)} requests, "
            f"max_running={args.concurrency}: {seconds:.1f} s (others used {load:.2f} CPUs{waited})")
        if out != single_out:
            log("check: the sustained run's outputs DIFFER from the one-at-a-time run's")
            problems += 1

    # What a decode step costs with more sequences running.
    scaling: List[Tuple[int, float, float]] = []
    log("")
    log(f"decode steps: {SCALING_TOKENS} tokens after {SCALING_PROMPT}-token prompts, "
        f"{', '.join(map(str, SCALING_RUNNING))} sequences at once")
    for running in SCALING_RUNNING:
        step, load, _ = timed(decode_steps, executable, running, SCALING_PROMPT, SCALING_TOKENS,
                              vocab)
        scaling.append((running, step, load))

    # 2. Online.
    online: List[Online] = []
    if not args.skip_online:
        online_requests = make_workload(args.online_requests, args.prompt_len, args.output_len,
                                        vocab, args.seed + 1)
        gaps = np.random.default_rng(args.seed + 2).exponential(1.0, len(online_requests))
        gaps[0] = 0.0  # the first request arrives at once
        base = np.cumsum(gaps)
        p, o = token_counts(online_requests)
        log("")
        log(f"online: {len(online_requests)} requests ({p} prompt, {o} output tokens), Poisson "
            f"arrivals at {args.rate:g} and {2 * args.rate:g} requests/s")
        for rate in (args.rate, 2 * args.rate):
            for name, max_running in (("axrt, continuous batching", 0),
                                      ("axrt, one at a time", 1)):
                result, load, waited = timed(run_online, executable, online_requests,
                                             base / rate, max_running, name, rate)
                result.others_cpu = load
                online.append(result)
                log(f"  {name} at {rate:g} req/s: {result.seconds:.1f} s "
                    f"(others used {load:.2f} CPUs{waited})")

    # The tables.
    log("")
    log(f"{cpu}, {threads} threads; axrt {args.weights} weights")
    throughput_table(f"Offline, {len(requests)} requests ({prompt_tokens} prompt, {output_tokens} "
                     "output tokens), all submitted at once:", runs, single)
    if args.concurrency < len(requests):
        throughput_table(f"Concurrency {args.concurrency}, the first {args.concurrency} requests "
                         "alone:", point, point[1])
    else:
        log(f"\nConcurrency {len(requests)}: the offline table above")
    if sustained is not None:
        throughput_table(f"Concurrency {args.concurrency} sustained, the {len(requests)} requests "
                         f"with at most {args.concurrency} running:", [sustained, single], single)
    log("")
    log(f"Decode step time (median, once every request has its first token; "
        f"{SCALING_PROMPT}-token prompts):")
    log("")
    log("| sequences running | step ms | decode tok/s | vs 1 sequence | others' CPU |")
    log("|---|---|---|---|---|")
    for running, step, load in scaling:
        log(f"| {running} | {ms(step)} | {_rate(running / step)} | "
            f"{running / step / (1 / scaling[0][1]):.2f}x | {load:.2f} |")
    if online:
        online_table(online)
    if kv.samples:
        log("")
        log(f"KV-cache waste, 1 - kv_slots_used / (kv_blocks_used * block_size), blocks of "
            f"{kv.block_size} tokens, in the continuous-batching offline run (at most "
            f"{max(s['kv_blocks_used'] for s in kv.samples)} blocks held):")
        log(f"  stats() once a step: {kv.describe()}")
        log(f"    of which once every request had its first token: {kv.describe(True)}")

    log("")
    def target(what: str, ours: Run, theirs: Run) -> None:
        ratio = ours.output_rate / theirs.output_rate
        log(f"target: {what} at least 4x one at a time: {_rate(ours.output_rate)} vs "
            f"{_rate(theirs.output_rate)} output tok/s = {ratio:.2f}x: "
            f"{'met' if ratio >= 4 else 'missed'}")

    target(f"concurrency {min(args.concurrency, len(requests))}, requests all at once", point[0],
           point[1])
    if sustained is not None:
        target(f"concurrency {args.concurrency} sustained", sustained, single)
    if kv.samples:
        mean = mean_of([w for w, _ in kv.waste()])
        log(f"target: KV-cache waste under 4 % (mean): {100 * mean:.2f} %: "
            f"{'met' if mean < 0.04 else 'missed'}")
    busy = [f"{r.name} {r.how}" for r in runs + point + ([sustained] if sustained else [])
            if r.others_cpu >= 0.1]
    busy += [f"{r.name} at {r.rate:g} req/s" for r in online if r.others_cpu >= 0.1]
    busy += [f"decode steps of {n}" for n, _, load in scaling if load >= 0.1]
    if busy:
        log(f"CAUTION: other processes used 0.1 CPU or more during: {'; '.join(dict.fromkeys(busy))}. "
            "Those figures, and the ratios against them, do not hold for a quiet machine")
    log(f"load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if args.json:
        write_json(args.json, runs, single, point, sustained, scaling, kv)
    if hf is not None:
        del hf
    del executable
    gc.collect()
    if problems:
        log(f"\n{problems} output check(s) failed; see above")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
