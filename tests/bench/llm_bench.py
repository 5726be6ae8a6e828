"""Language-model inference on the CPU: axrt.llm against transformers and llama.cpp, in one run.

One Llama-architecture checkpoint of about 125 M parameters with random
weights (fixed seed; hidden 768, 12 layers, 12 heads, 4 KV heads, MLP 2048,
vocabulary 32000) is built locally with transformers and saved as safetensors
under --model-dir (reused when present; nothing is downloaded). The same
checkpoint then runs on three engines with the same number of threads:

    engine          weights      how it is made
    axrt            f32, int4,   axrt.llm.convert (int4: AWQ layout, asymmetric,
                    int4-q8      groups of 128, f16 scales; int4-q8: the same
                                 weights in GPTQ's layout with
                                 activations="int8"), run by the
                                 serving engine (axrt.llm.Engine), one
                                 request at a time, prefix caching off
    transformers    f32          LlamaForCausalLM (PyTorch), with its KV cache
    llama.cpp       f32, Q4_1    llama.cpp's own convert_hf_to_gguf.py (run from
                                 the llama.cpp source tree named by
                                 --llama-cpp-source), Q4_1 through
                                 llama_model_quantize, run with llama-cpp-python

Q4_1 is the llama.cpp format closest to axrt's int4: asymmetric 4-bit with a
scale and a minimum per group, but groups of 32 with f16 scale and minimum
(0.625 bytes a weight against int4's 0.52). It is made "pure": every matrix,
the output projection included, is Q4_1, as every projection is int4 in axrt.

Measured for each engine and precision, under the same conditions:
  - prefill tokens/s of a 128- and a 512-token prompt (one call; the logits
    of the last token only);
  - decode tokens/s at batch 1: --steps greedy tokens after a 128-token
    prompt, the prefill excluded, each step taking the argmax of the logits
    (axrt: on the device, in the engine's sample function);
  - the bandwidth bound of decode: the weight bytes a token reads (every
    projection matrix and the output projection, in the engine's format;
    the embedding row, the norms and the KV cache are left out) over the
    memory read bandwidth measured here with --threads threads (np.max over
    a 1 GiB array split among them; the best pass of every round).
Each figure is the best of --repeats rounds (the engines take turns within a
round; before each round the script waits, up to --wait-quiet seconds, for
other processes to leave the CPUs idle) and comes with its spread, (best -
worst) / best; the medians and the CPU time other processes used during each
round are printed too.

Before timing, greedy generation from a 16-token prompt is compared with
transformers': the llama.cpp f32 GGUF must produce the same tokens, which
checks the conversion; axrt f32 is compared the same way.

The GGUF converter needs a tokenizer: the checkpoint gets a SentencePiece
model trained here on the project's docs/*.md (2000 pieces), which the
converter pads to the configuration's vocabulary with [PAD<i>] entries. The
prompts are random ids among the tokenizer's pieces.

Needs numpy, torch and transformers (to build the checkpoint), sentencepiece
(for the tokenizer), llama-cpp-python and the llama.cpp source tree (for the
llama.cpp rows), and PYTHONPATH naming the built axrt package:

    PYTHONPATH=build/bench/python python3 tests/bench/llm_bench.py \\
        --llama-cpp-source path/to/llama.cpp

What is missing is skipped with a message. axrt's CPU device runs as many
workgroup threads as the machine has CPUs; when --threads differs, the script
says so. --json FILE also writes axrt's figures as records for the
regression gate (bench_results.py), each against the same figure of
transformers and of llama.cpp at the same precision.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SEED = 0
PREFILL_LENGTHS = (128, 512)
DECODE_PROMPT = 128
CHECK_PROMPT = 16
CHECK_TOKENS = 16
TOKENIZER_PIECES = 2000
BANDWIDTH_BYTES = 1 << 30

CONFIG = dict(
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    num_key_value_heads=4,
    intermediate_size=2048,
    vocab_size=32000,
    max_position_embeddings=2048,
    rms_norm_eps=1e-5,
    rope_theta=10000.0,
    tie_word_embeddings=False,
    bos_token_id=1,
    eos_token_id=2,
)

# Bytes per weight of each stored format, scales and zero points included.
BYTES_PER_WEIGHT = {
    "f32": 4.0,
    "int4": 0.5 + (2 + 0.5) / 128,  # AWQ: 4-bit weights; per 128: f16 scale, 4-bit zero
    "int4-q8": 0.5 + (2 + 0.5) / 128,  # the same bytes in GPTQ's layout
    "q4_1": 20 / 32,  # per 32: f16 scale, f16 minimum, 16 bytes of 4-bit weights
}


def log(message: str = "") -> None:
    print(message, flush=True)


# ---------------------------------------------------------------------------
# The machine.


def cpu_description() -> Tuple[str, int]:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return model, os.cpu_count() or 1


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
# The checkpoint.


def checkpoint_ready(model_dir: Path) -> bool:
    config = model_dir / "config.json"
    if not (config.is_file() and (model_dir / "model.safetensors").is_file()):
        return False
    saved = json.loads(config.read_text())
    return all(saved.get(key) == value for key, value in CONFIG.items()
               if key not in ("rope_theta",))


def train_tokenizer(model_dir: Path) -> None:
    import sentencepiece as spm

    docs = sorted(str(p) for p in (ROOT / "docs").glob("*.md"))
    spm.SentencePieceTrainer.train(
        input=",".join(docs), model_prefix=str(model_dir / "tokenizer"),
        vocab_size=TOKENIZER_PIECES, hard_vocab_limit=False, model_type="bpe",
        byte_fallback=True, character_coverage=1.0, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        minloglevel=2)
    (model_dir / "tokenizer.vocab").unlink(missing_ok=True)


def build_checkpoint(model_dir: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    model_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(SEED)
    config = LlamaConfig(**CONFIG)
    model = LlamaForCausalLM(config).to(torch.float32).eval()
    model.save_pretrained(model_dir, safe_serialization=True)
    (model_dir / "tokenizer.model").unlink(missing_ok=True)


def tokenizer_pieces(model_dir: Path) -> Optional[int]:
    """The pieces of the checkpoint's tokenizer, trained first if need be; None without
    sentencepiece."""
    try:
        import sentencepiece as spm
    except ImportError:
        return None
    path = model_dir / "tokenizer.model"
    if not path.is_file():
        train_tokenizer(model_dir)
    return spm.SentencePieceProcessor(model_file=str(path)).vocab_size()


def matrix_weights(config: Dict) -> Tuple[int, int]:
    """(weights of the projection matrices a token reads, of which the output projection)."""
    h = config["hidden_size"]
    heads = config["num_attention_heads"]
    kv = config["num_key_value_heads"]
    d = config.get("head_dim") or h // heads
    i = config["intermediate_size"]
    per_layer = h * (heads * d + 2 * kv * d) + heads * d * h + 3 * h * i
    output = config["vocab_size"] * h
    return config["num_hidden_layers"] * per_layer + output, output


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
# llama.cpp's files.


def make_ggufs(source: Path, model_dir: Path, weights: Sequence[str], threads: int) -> Dict[str, Path]:
    """The f32 GGUF by llama.cpp's converter and its pure Q4_1 quantization (cached)."""
    import llama_cpp

    out_dir = model_dir / "gguf"
    out_dir.mkdir(exist_ok=True)
    stamp = max((model_dir / name).stat().st_mtime for name in ("model.safetensors", "tokenizer.model"))
    f32 = out_dir / "model-f32.gguf"
    if not f32.is_file() or f32.stat().st_mtime < stamp:
        log(f"llama.cpp: converting the checkpoint with {source.name}/convert_hf_to_gguf.py")
        start = time.perf_counter()
        result = subprocess.run(
            [sys.executable, str(source / "convert_hf_to_gguf.py"), str(model_dir),
             "--outfile", str(f32), "--outtype", "f32"],
            capture_output=True, text=True)
        if result.returncode != 0:
            f32.unlink(missing_ok=True)
            raise RuntimeError("convert_hf_to_gguf.py failed:\n" + result.stderr[-3000:])
        log(f"  {f32.name}: {f32.stat().st_size / 1e6:.1f} MB in {time.perf_counter() - start:.1f} s")
    files = {"f32": f32}
    if "int4" in weights:
        q4 = out_dir / "model-q4_1.gguf"
        if not q4.is_file() or q4.stat().st_mtime < f32.stat().st_mtime:
            params = llama_cpp.llama_model_quantize_default_params()
            params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_1
            params.nthread = threads
            params.pure = True
            start = time.perf_counter()
            status = llama_cpp.llama_model_quantize(str(f32).encode(), str(q4).encode(), params)
            if status != 0:
                q4.unlink(missing_ok=True)
                raise RuntimeError(f"llama_model_quantize to Q4_1 failed ({status})")
            log(f"  {q4.name}: {q4.stat().st_size / 1e6:.1f} MB in "
                f"{time.perf_counter() - start:.1f} s (llama_model_quantize, Q4_1, pure)")
        files["int4"] = q4
    return files


def describe_vocabulary(engine: LlamaCppEngine, pieces: int) -> str:
    llama_cpp = engine.llama_cpp
    vocab = llama_cpp.llama_model_get_vocab(engine.llm.model)

    def text(token: int) -> str:
        return llama_cpp.llama_vocab_get_text(vocab, token).decode("utf-8", "replace")

    return (f"the GGUF's vocabulary holds {engine.vocab} entries: ids 0..{pieces - 1} the "
            f"SentencePiece pieces ({text(pieces - 1)!r} last), then {text(pieces)!r} .. "
            f"{text(engine.vocab - 1)!r}")


# ---------------------------------------------------------------------------
# Measurement.


class Figure:
    def __init__(self) -> None:
        self.samples: List[float] = []

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
        if engine.weights == "f32":
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
    figures = {(e.name, e.weights): {key: Figure() for key in ("p128", "p512", "decode")}
               for e in engines}
    # Untimed warm-up: first calls page weights in and build caches and thread pools.
    for engine in engines:
        engine.prefill(prompts[PREFILL_LENGTHS[0]])
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
            for length in PREFILL_LENGTHS:
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


# ---------------------------------------------------------------------------



def prepare_checkpoint(tool: str, model_dir: Path) -> Tuple[bool, Optional[dict]]:
    """Whether torch and transformers import (said in the log), and the checkpoint's
    configuration, building the checkpoint in `model_dir` first when it is not there; None
    when it is not there and cannot be built."""
    try:
        import torch
        import transformers
        have_transformers = True
        log(f"torch {torch.__version__}, transformers {transformers.__version__}")
    except ImportError as error:
        have_transformers = False
        log(f"transformers side: skipped ({error})")

    if not checkpoint_ready(model_dir):
        if not have_transformers:
            log(f"{tool}: building the checkpoint needs torch and transformers; skipped")
            return have_transformers, None
        log(f"building the checkpoint (seed {SEED}) in {model_dir}")
        build_checkpoint(model_dir)
    return have_transformers, json.loads((model_dir / "config.json").read_text())

def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="threads for every engine (default 2)")
    parser.add_argument("--steps", type=int, default=64, help="decode steps timed (default 64)")
    parser.add_argument("--repeats", type=int, default=5,
                        help="rounds; each figure is the best of them (default 5)")
    parser.add_argument("--wait-quiet", type=float, default=30.0,
                        help="before each round, wait up to this many seconds for a second in "
                             "which other processes use under 0.1 CPU (default 30; 0: do not wait)")
    parser.add_argument("--weights", default="f32,int4,int4-q8",
                        help="precisions to run, a subset of f32,int4,int4-q8 (int4: axrt int4, "
                             "llama.cpp Q4_1; int4-q8: axrt int4 with int8 activations)")
    parser.add_argument("--model-dir", type=Path, default=ROOT / "build" / "bench" / "llm",
                        help="where the checkpoint, .axe and GGUF files are kept (default build/bench/llm)")
    parser.add_argument("--llama-cpp-source", type=Path, default=None,
                        help="a llama.cpp source tree (convert_hf_to_gguf.py, gguf-py)")
    parser.add_argument("--llama-flash-attn", action="store_true",
                        help="run llama.cpp with flash attention (default: off, llama-cpp-python's default)")
    parser.add_argument("--skip-axrt", action="store_true")
    parser.add_argument("--skip-transformers", action="store_true")
    parser.add_argument("--skip-llama-cpp", action="store_true")
    parser.add_argument("--json", default="",
                        help="also write the records of bench_results.py to this file")
    args = parser.parse_args(argv)
    weights = [w for w in args.weights.split(",") if w]
    if not weights or any(w not in ("f32", "int4", "int4-q8") for w in weights):
        parser.error(f"--weights takes a subset of f32,int4,int4-q8, not {args.weights!r}")
    for name in ("threads", "steps", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    threads = args.threads
    model_dir = args.model_dir.resolve()

    cpu, cpus = cpu_description()
    log(f"llm_bench: {cpu}, {cpus} CPUs, {threads} threads; Python {platform.python_version()}, "
        f"numpy {np.__version__}; load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")

    have_transformers, config = prepare_checkpoint("llm_bench", model_dir)
    if config is None:
        return 0
    matrices, output = matrix_weights(config)
    log(f"checkpoint: {model_dir}: {matrices / 1e6:.1f} M weights in the projections "
        f"({output / 1e6:.1f} M of them the output projection), plus "
        f"{config['vocab_size'] * config['hidden_size'] / 1e6:.1f} M in the embedding table")
    pieces = tokenizer_pieces(model_dir)
    if pieces is None:
        log("sentencepiece is not importable (pip install sentencepiece): no tokenizer, so no "
            "llama.cpp rows")
        args.skip_llama_cpp = True
    rng = np.random.default_rng(SEED)
    # Ids among the tokenizer's pieces (past the unknown, BOS and EOS ids).
    high = pieces or TOKENIZER_PIECES
    prompts = {n: rng.integers(3, high, n).tolist() for n in PREFILL_LENGTHS}
    decode_prompt = rng.integers(3, high, DECODE_PROMPT).tolist()
    check_prompt = rng.integers(3, high, CHECK_PROMPT).tolist()

    bandwidth = ReadBandwidth()

    engines: List[Engine] = []
    problems: List[str] = []
    reference: Optional[Engine] = None
    axe_bytes: Dict[str, int] = {}

    if have_transformers:
        reference = TransformersEngine(model_dir, threads)
        if not args.skip_transformers:
            engines.append(reference)

    if not args.skip_axrt:
        try:
            # The CPU device's thread count, read when axrt makes its first
            # instance (an explicit AXRT_CPU_THREADS wins).
            os.environ.setdefault("AXRT_CPU_THREADS", str(threads))
            import axrt
            import axrt.llm

            device = axrt.device("cpu:0")
            log(f"axrt {axrt.__version__} on {device.id} ({device.compute_units} workgroup threads"
                f"{'' if device.compute_units == threads else '; AXRT_CPU_THREADS overrides --threads'})")
            for w in weights:
                path = model_dir / f"model-{w}.axe"
                try:
                    start = time.perf_counter()
                    if w == "int4-q8":
                        axrt.llm.convert(model_dir, path, weights="int4", activations="int8")
                    else:
                        axrt.llm.convert(model_dir, path, weights=w)
                    took = time.perf_counter() - start
                    engine = AxrtEngine(path, w)
                    axe_bytes[w] = engine.engine.executable.constant_bytes
                    table = config["vocab_size"] * config["hidden_size"] * (4 if w == "f32" else 2)
                    log(f"  {path.name}: {path.stat().st_size / 1e6:.1f} MB, converted in {took:.1f} s; "
                        f"constants {axe_bytes[w] / 1e6:.1f} MB, {(axe_bytes[w] - table) / 1e6:.1f} MB "
                        f"without the embedding table (the bound counts "
                        f"{matrices * BYTES_PER_WEIGHT[w] / 1e6:.1f} MB)")
                    engine.prefill(check_prompt)
                    engines.append(engine)
                except Exception:
                    problems.append(f"axrt {w}:\n{traceback.format_exc()}")
                    log(f"axrt {w}: FAILED\n{traceback.format_exc()}")
        except ImportError as error:
            log(f"axrt side: skipped (axrt.llm is not importable: {error}; set PYTHONPATH to the "
                "built package)")

    if not args.skip_llama_cpp:
        source = args.llama_cpp_source
        try:
            import llama_cpp
        except ImportError as error:
            llama_cpp = None
            log(f"llama.cpp side: skipped (llama-cpp-python is not importable: {error})")
        if llama_cpp is None:
            pass
        elif source is None or not (source / "convert_hf_to_gguf.py").is_file():
            log("llama.cpp side: skipped (no llama.cpp source tree with convert_hf_to_gguf.py: "
                "give one with --llama-cpp-source)")
        else:
            info = llama_cpp.llama_print_system_info().decode().strip()
            log(f"llama-cpp-python {llama_cpp.__version__}; system info: {info}")
            log("  llama.cpp reports AMX paths" if "AMX" in info else
                "  llama.cpp reports no AMX path")
            try:
                # One llama.cpp row per precision: f32, and Q4_1 for the 4-bit ones.
                llama_weights = [w for w in ("f32", "int4")
                                 if w in weights or (w == "int4" and "int4-q8" in weights)]
                files = make_ggufs(source.resolve(), model_dir, llama_weights, threads)
                for w in llama_weights:
                    engine = LlamaCppEngine(files[w], "f32" if w == "f32" else "Q4_1", threads,
                                            args.llama_flash_attn)
                    if w == "f32":
                        log(f"  {describe_vocabulary(engine, pieces)}")
                    engines.append(engine)
                log(f"  n_ctx 1024, n_batch = n_ubatch = 512, flash attention "
                    f"{'on' if args.llama_flash_attn else 'off'}, KV cache f16")
            except Exception:
                problems.append(f"llama.cpp:\n{traceback.format_exc()}")
                log(f"llama.cpp: FAILED\n{traceback.format_exc()}")

    if not engines:
        log("llm_bench: nothing to run")
        return 0

    for line in greedy_check(engines, reference, check_prompt):
        log(line)
    if args.skip_transformers and reference is not None:
        reference.close()
        reference = None
        gc.collect()

    log(f"timing: {args.repeats} rounds; prefill at {', '.join(map(str, PREFILL_LENGTHS))} tokens, "
        f"decode {args.steps} tokens after a {DECODE_PROMPT}-token prompt")
    figures, loads, read = run_rounds(engines, prompts, decode_prompt, args.steps, args.repeats,
                                      args.wait_quiet, bandwidth, threads)
    bandwidth = read.best

    def bound(engine: Engine) -> float:
        fmt = {"f32": "f32", "int4": "int4", "int4-q8": "int4-q8", "Q4_1": "q4_1"}[engine.weights]
        return bandwidth / (matrices * BYTES_PER_WEIGHT[fmt])

    def decode_of(name: str, weights_: str) -> Optional[float]:
        entry = figures.get((name, weights_))
        return entry["decode"].best if entry else None

    log("")
    log(f"{cpu}, {threads} threads. tok/s: the best of {args.repeats} rounds, with the spread "
        f"(best - worst) / best; bound: {bandwidth / 1e9:.1f} GB/s over the bytes of the "
        "projection matrices in the engine's format")
    log("")
    log("| engine | weights | prefill@128 tok/s | prefill@512 tok/s | decode tok/s "
        "| axrt decode / this | bound tok/s | decode / bound |")
    log("|---|---|---|---|---|---|---|---|")
    for engine in engines:
        entry = figures[(engine.name, engine.weights)]
        ref = decode_of("axrt", "f32" if engine.weights == "f32" else "int4")
        decode = entry["decode"].best
        ratio = f"{ref / decode:.2f}" if ref else "-"
        log(f"| {engine.name} | {engine.weights} | {entry['p128']} | {entry['p512']} | "
            f"{entry['decode']} | {ratio} | {bound(engine):.0f} | {decode / bound(engine):.2f} |")
    log("")
    log("medians (prefill@128, prefill@512, decode tok/s):")
    for engine in engines:
        entry = figures[(engine.name, engine.weights)]
        log(f"  {engine.name} {engine.weights}: "
            + ", ".join(_rate(entry[key].median) for key in ("p128", "p512", "decode")))
    log(f"read bandwidth: best {bandwidth / 1e9:.1f} GB/s, median {read.median / 1e9:.1f} GB/s "
        f"({threads} threads, numpy max over 1 GiB, best of 5 passes each round)")
    log(f"other processes used {statistics.mean(loads):.2f} CPUs on average during the rounds "
        f"(per round: {' '.join(f'{v:.2f}' for v in loads)})")
    if max(loads) >= 0.1:
        log("CAUTION: other processes were busy during the timing; engines whose threads wait for "
            "each other suffer most, so these figures and the verdicts below do not hold for a "
            "quiet machine")

    # The project's targets for decode.
    def target(what: str, ours: Optional[float], theirs: Optional[float], factor: float) -> None:
        if ours is None or theirs is None:
            log(f"target {what}: not measured")
            return
        met = ours >= factor * theirs
        log(f"target {what}: {_rate(ours)} vs {_rate(theirs)} tok/s = {ours / theirs:.2f}x: "
            f"{'met' if met else 'missed'}")

    target("decode, axrt f32 >= llama.cpp f32", decode_of("axrt", "f32"),
           decode_of("llama.cpp", "f32"), 1)
    target("decode, axrt int4 >= llama.cpp Q4_1", decode_of("axrt", "int4"),
           decode_of("llama.cpp", "Q4_1"), 1)
    target("decode, axrt int4-q8 >= llama.cpp Q4_1", decode_of("axrt", "int4-q8"),
           decode_of("llama.cpp", "Q4_1"), 1)
    target("decode, axrt f32 >= 2x transformers f32", decode_of("axrt", "f32"),
           decode_of("transformers", "f32"), 2)
    log(f"load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if args.json:
        write_json(args.json, figures, loads)
    for engine in engines:
        engine.close()
    if problems:
        log(f"\n{len(problems)} engine(s) failed; see above")
        return 1
    return 0


# axrt's precisions and, for each, the other engines' rows its figures are set against.
JSON_ANCHORS = {"f32": [("transformers", "f32"), ("llama.cpp", "f32")],
                "int4": [("llama.cpp", "Q4_1")], "int4-q8": [("llama.cpp", "Q4_1")]}


def write_json(path: str, figures: Dict[Tuple[str, str], Dict[str, "Figure"]],
               loads: List[float]) -> None:
    """axrt's prefill and decode tokens/s (best of the rounds) as records, each against
    every anchor engine that ran, or alone when none did."""
    from bench_results import write_records
    records = []
    for weights, anchors in JSON_ANCHORS.items():
        ours = figures.get(("axrt", weights))
        if ours is None:
            continue
        ran = [a for a in anchors if a in figures]
        for key, what in (("p128", "prefill@128"), ("p512", "prefill@512"), ("decode", "decode")):
            for anchor in ran or [None]:
                theirs = figures[anchor][key].best if anchor else None
                records.append({
                    "name": f"{weights}/{what}" + (f"/vs:{anchor[0]}" if anchor else ""),
                    "unit": "tok/s", "axrt": ours[key].best, "anchor": theirs,
                    "anchor_name": f"{anchor[0]} {anchor[1]}" if anchor else None,
                    "higher_is_better": True})
    write_records(path, "llm_bench", records,
                  context={"others_cpu": round(statistics.mean(loads), 2) if loads else None})


if __name__ == "__main__":
    sys.exit(main())
