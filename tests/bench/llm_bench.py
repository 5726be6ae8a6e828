"""Language-model inference on the CPU: axrt.llm against llama.cpp (and transformers), like
for like, at the machine's widest instruction set and held to AVX2 + FMA, in one run.

Two Llama-architecture checkpoints with random weights (fixed seeds) are built locally
under --model-dir (reused when present; nothing is downloaded):

    model   shape                                                    checkpoint
    125m    hidden 768, 12 layers, 12 heads, 4 KV heads, MLP 2048,  f32, by transformers
            vocabulary 32000 (125 M parameters)
    1.1b    TinyLlama's: hidden 2048, 22 layers, 32 heads, 4 KV     bf16 in shards of 1 GiB
            heads, MLP 5632, vocabulary 32000 (1.1 B parameters;     (convert_bench.py's)
            its weights are far beyond the caches)

Each gets a SentencePiece tokenizer trained here on the project's docs/*.md (2000 pieces;
llama.cpp's converter pads it to the vocabulary with [PAD<i>] entries). Every axrt
precision runs beside the llama.cpp format that computes the same way:

    axrt precision   axrt.llm.convert                          llama.cpp format (pure)
    f32              weights="f32"                             F32
    bf16             weights="bf16"                            BF16
    int8             weights="int8" (f32 activations)          Q8_0
    int8-q8          weights="int8", activations="int8"        Q8_0
    int4             weights="int4" (f32 activations)          Q4_1
    int4-q8          weights="int4", activations="int8"        Q4_0, Q4_1

llama.cpp's files come from its own convert_hf_to_gguf.py (F32, BF16) and
llama_model_quantize (Q8_0, Q4_0, Q4_1, "pure": every matrix, the output projection
included, as every projection is quantized in axrt). llama.cpp runs through
llama-cpp-python on libllama built here from --llama-cpp-source (the sources vendored in
llama-cpp-python's sdist, which its Python bindings match), twice:

    level   axrt                       llama.cpp build
    best    the CPU's widest build     GGML_NATIVE=ON (-march=native)
    avx2    AXRT_CPU_ISA=avx2          GGML_NATIVE=OFF, AVX, AVX2, FMA, F16C, BMI2 on,
                                       every AVX-512 option off

so that a machine with AVX-512 also gives the figures of one without. Each (model, level)
runs in a process of its own (the instruction set is chosen once a process). Within it the
precisions run in groups (f32; bf16; int8 and int8-q8; int4 and int4-q8), each group's
engines loaded together and taking turns within a round, then closed, so that the 1.1 B
model's files need not all be in memory at once.

Measured for each engine, under the same conditions:
  - prefill tokens/s of a 128-token prompt (and of 512 tokens for the 125m model): one
    call; the logits of the last token only;
  - decode tokens/s at batch 1: --steps greedy tokens after a 128-token prompt, the
    prefill excluded, each step taking the argmax of the logits (axrt: on the device);
  - the bandwidth bound of decode: the weight bytes a token reads (every projection matrix
    and the output projection, in the engine's format; the embedding row, the norms and
    the KV cache are left out) over the read bandwidth measured with --threads threads
    at the start of each round (numpy max over 1 GiB; the best pass).
Each figure is the best of --repeats rounds with its spread, (best - worst) / best; before
each round the process waits, up to --wait-quiet seconds, for the other processes to leave
the CPUs idle. Before timing the 125m model, greedy generation from a 16-token prompt is
compared with transformers' (the llama.cpp F32 file and axrt f32 must give its tokens).

The summary sets each axrt precision against its llama.cpp format at each level and model
with the targets' verdicts:

    f32 >= 1.0x F32, int8-q8 >= 1.0x Q8_0, int4-q8 >= 1.1x Q4_0, int4 >= 0.9x Q4_1 at
    decode; every precision >= 1.0x its format at prefill@128.

    PYTHONPATH=build/bench/python python3 tests/bench/llm_bench.py \\
        --llama-cpp-source path/to/llama.cpp --models 125m,1.1b --levels best,avx2

Needs numpy, torch and transformers (the 125m checkpoint, the reference), ml_dtypes (the
1.1b checkpoint), sentencepiece (the tokenizer), llama-cpp-python, cmake and ninja (the
llama.cpp rows), and PYTHONPATH naming the built axrt package; what is missing is skipped
with a message. --json FILE writes axrt's figures as records for the regression gate
(bench_results.py), each against its llama.cpp format of the same level.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from llm_bench_engines import (SEED, AxrtEngine, Engine, Figure, LlamaCppEngine,  # noqa: E402,F401
                               OtherLoad, ReadBandwidth, TransformersEngine, _rate, cpu_description,
                               greedy_check, log, run_rounds)

ROOT = Path(__file__).resolve().parents[2]
DECODE_PROMPT = 128
CHECK_PROMPT = 16
TOKENIZER_PIECES = 2000

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

# The models: the directory under --model-dir and the prefill lengths timed.
MODELS = {"125m": ("", (128, 512)), "1.1b": ("tinyllama-1.1b", (128,))}
LEVELS = ("best", "avx2")

# axrt's precisions: convert's arguments and the llama.cpp formats each is set beside (the
# first is the one of its targets).
PRECISIONS = {
    "f32": (dict(weights="f32"), ("F32",)),
    "bf16": (dict(weights="bf16"), ("BF16",)),
    "int8": (dict(weights="int8"), ("Q8_0",)),
    "int8-q8": (dict(weights="int8", activations="int8"), ("Q8_0",)),
    "int4": (dict(weights="int4"), ("Q4_1",)),
    "int4-q8": (dict(weights="int4", activations="int8"), ("Q4_0", "Q4_1")),
}
GROUPS = (("f32",), ("bf16",), ("int8", "int8-q8"), ("int4", "int4-q8"))

# Bytes per weight of each stored format, scales and zero points included.
BYTES_PER_WEIGHT = {
    "f32": 4.0, "F32": 4.0, "bf16": 2.0, "BF16": 2.0,
    "int8": 1.0, "int8-q8": 1.0,  # int8 codes; one f32 scale per output row (under 0.2 %)
    "int4": 0.5 + (2 + 0.5) / 128,  # AWQ: 4-bit weights; per 128: f16 scale, 4-bit zero
    "int4-q8": 0.5 + (2 + 0.5) / 128,  # the same bytes in GPTQ's layout
    "Q8_0": 34 / 32,  # per 32: f16 scale, 32 int8 codes
    "Q4_0": 18 / 32,  # per 32: f16 scale, 16 bytes of 4-bit codes
    "Q4_1": 20 / 32,  # per 32: f16 scale, f16 minimum, 16 bytes of 4-bit codes
}

# The targets: (axrt precision, llama.cpp format, figure, least ratio).
TARGETS = [("f32", "F32", "decode", 1.0), ("int8-q8", "Q8_0", "decode", 1.0),
           ("int4-q8", "Q4_0", "decode", 1.1), ("int4", "Q4_1", "decode", 0.9)] + [
    (p, formats[0], "p128", 1.0) for p, (_, formats) in PRECISIONS.items()]


# ---------------------------------------------------------------------------
# The checkpoints.


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


def prepare_checkpoint(tool: str, model_dir: Path) -> Tuple[bool, Optional[dict]]:
    """Whether torch and transformers import (said in the log), and the 125m checkpoint's
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


def prepare_large_checkpoint(model_dir: Path) -> Optional[dict]:
    """The 1.1b checkpoint (convert_bench.py's), written first when it is not there."""
    import convert_bench

    if not (model_dir / "model.safetensors.index.json").is_file():
        try:
            import ml_dtypes  # noqa: F401
        except ImportError as error:
            log(f"1.1b: writing the checkpoint needs ml_dtypes ({error}); skipped")
            return None
        log(f"building the 1.1b checkpoint (bf16) in {model_dir}")
        start = time.perf_counter()
        convert_bench.write_checkpoint(model_dir)
        log(f"  written in {time.perf_counter() - start:.0f} s")
    return json.loads((model_dir / "config.json").read_text())


def checkpoint_stamp(model_dir: Path) -> float:
    """The newest modification time of the checkpoint's files."""
    names = [p for p in model_dir.iterdir()
             if p.suffix in (".safetensors", ".json", ".model") and p.is_file()]
    return max(p.stat().st_mtime for p in names)


# ---------------------------------------------------------------------------
# axrt's and llama.cpp's files, made once in the parent process.


def convert_axrt(model_dir: Path, precisions: Sequence[str]) -> Dict[str, Path]:
    import axrt.llm

    files = {}
    for precision in precisions:
        path = model_dir / f"model-{precision}.axe"
        start = time.perf_counter()
        try:
            axrt.llm.convert(model_dir, path, **PRECISIONS[precision][0])
        except Exception as error:  # a precision this build cannot make
            log(f"axrt {precision}: not converted ({type(error).__name__}: {error})")
            continue
        log(f"  axrt {path.name}: {path.stat().st_size / 1e6:.1f} MB, converted in "
            f"{time.perf_counter() - start:.1f} s")
        files[precision] = path
    return files


LLAMA_BUILD_FLAGS = {
    "best": ["-DGGML_NATIVE=ON"],
    "avx2": ["-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON",
             "-DGGML_F16C=ON", "-DGGML_BMI2=ON", "-DGGML_AVX512=OFF", "-DGGML_AVX512_VBMI=OFF",
             "-DGGML_AVX512_VNNI=OFF", "-DGGML_AVX512_BF16=OFF", "-DGGML_AVX_VNNI=OFF"],
}


def build_llama(source: Path, out: Path, level: str) -> Path:
    """libllama (and its ggml libraries) built from `source` for `level`; the folder that
    holds libllama.so (cached: built again only when the sources are newer)."""
    marker = out / "built-from"
    want = f"{source.resolve()}\n{' '.join(LLAMA_BUILD_FLAGS[level])}\n"
    found = sorted(out.glob("**/libllama.so"))
    if found and marker.is_file() and marker.read_text() == want:
        return found[0].parent
    shutil.rmtree(out, ignore_errors=True)
    log(f"llama.cpp: building libllama for level {level} in {out} (a few minutes)")
    start = time.perf_counter()
    configure = ["cmake", "-S", str(source), "-B", str(out), "-G", "Ninja",
                 "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=ON", "-DLLAMA_CURL=OFF",
                 "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
                 "-DLLAMA_BUILD_TOOLS=OFF", "-DLLAMA_BUILD_SERVER=OFF",
                 "-DLLAMA_BUILD_COMMON=OFF"] + LLAMA_BUILD_FLAGS[level]
    for command in (configure, ["cmake", "--build", str(out), "--target", "llama"]):
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command[:3])} failed:\n{result.stdout[-2000:]}"
                               f"{result.stderr[-2000:]}")
    found = sorted(out.glob("**/libllama.so"))
    if not found:
        raise RuntimeError(f"no libllama.so under {out}")
    marker.write_text(want)
    log(f"  built in {time.perf_counter() - start:.0f} s")
    return found[0].parent


GGUF_QUANTIZED = {"Q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0", "Q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0",
                  "Q4_1": "LLAMA_FTYPE_MOSTLY_Q4_1"}


def make_ggufs(source: Path, model_dir: Path, formats: Sequence[str], threads: int) -> Dict[str, Path]:
    """The GGUF files of `formats`: F32 and BF16 by llama.cpp's converter, the others by
    llama_model_quantize of the F32 (125m) or BF16 (1.1b) one, pure (cached)."""
    import llama_cpp

    out_dir = model_dir / "gguf"
    out_dir.mkdir(exist_ok=True)
    stamp = checkpoint_stamp(model_dir)
    large = (model_dir / "model.safetensors.index.json").is_file()
    base = "BF16" if large else "F32"
    files: Dict[str, Path] = {}

    def convert(fmt: str) -> Path:
        path = out_dir / f"model-{fmt.lower()}.gguf"
        if path.is_file() and path.stat().st_mtime >= stamp:
            return path
        log(f"llama.cpp: converting the checkpoint to {fmt} with convert_hf_to_gguf.py")
        start = time.perf_counter()
        result = subprocess.run(
            [sys.executable, str(source / "convert_hf_to_gguf.py"), str(model_dir),
             "--outfile", str(path), "--outtype", fmt.lower()], capture_output=True, text=True)
        if result.returncode != 0:
            path.unlink(missing_ok=True)
            raise RuntimeError("convert_hf_to_gguf.py failed:\n" + result.stderr[-3000:])
        log(f"  {path.name}: {path.stat().st_size / 1e6:.1f} MB in "
            f"{time.perf_counter() - start:.1f} s")
        return path

    for fmt in formats:
        if fmt in ("F32", "BF16"):
            files[fmt] = convert(fmt)
            continue
        source_file = convert(base)
        path = out_dir / f"model-{fmt.lower()}.gguf"
        if not path.is_file() or path.stat().st_mtime < source_file.stat().st_mtime:
            params = llama_cpp.llama_model_quantize_default_params()
            params.ftype = getattr(llama_cpp, GGUF_QUANTIZED[fmt])
            params.nthread = threads
            params.pure = True
            start = time.perf_counter()
            status = llama_cpp.llama_model_quantize(str(source_file).encode(), str(path).encode(),
                                                    params)
            if status != 0:
                path.unlink(missing_ok=True)
                raise RuntimeError(f"llama_model_quantize to {fmt} failed ({status})")
            log(f"  {path.name}: {path.stat().st_size / 1e6:.1f} MB in "
                f"{time.perf_counter() - start:.1f} s (llama_model_quantize, {fmt}, pure)")
        files[fmt] = path
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
# One (model, level): a process of its own.


def run_level(spec: dict) -> dict:
    """Times every group of `spec` (written by the parent) and returns the figures."""
    threads = spec["threads"]
    model_dir = Path(spec["model_dir"])
    pieces = spec["pieces"] or TOKENIZER_PIECES
    lengths = tuple(spec["lengths"])
    rng = np.random.default_rng(SEED)
    # Ids among the tokenizer's pieces (past the unknown, BOS and EOS ids).
    prompts = {n: rng.integers(3, pieces, n).tolist() for n in lengths}
    decode_prompt = rng.integers(3, pieces, DECODE_PROMPT).tolist()
    check_prompt = rng.integers(3, pieces, CHECK_PROMPT).tolist()
    out: dict = {"engines": [], "bandwidth": [], "loads": [], "problems": []}

    axe = {k: Path(v) for k, v in spec["axe"].items()}
    gguf = {k: Path(v) for k, v in spec["gguf"].items()}
    if axe:
        os.environ.setdefault("AXRT_CPU_THREADS", str(threads))
        import axrt

        device = axrt.device("cpu:0")
        out["axrt"] = f"axrt {axrt.__version__} on {device.id} ({device.compute_units} threads)"
        log(f"  {out['axrt']}")
    if gguf:
        import llama_cpp

        info = llama_cpp.llama_print_system_info().decode().strip()
        out["llama_cpp"] = f"llama-cpp-python {llama_cpp.__version__}; {info}"
        log(f"  {out['llama_cpp']}")
    reference = None
    if spec["check"]:
        reference = TransformersEngine(model_dir, threads)

    bandwidth = ReadBandwidth()
    for group in GROUPS:
        engines: List[Engine] = []
        formats = []
        for precision in group:
            if precision in axe:
                try:
                    engines.append(AxrtEngine(axe[precision], precision))
                except Exception:
                    out["problems"].append(f"axrt {precision}:\n{traceback.format_exc()}")
            for fmt in PRECISIONS[precision][1]:
                if fmt in gguf and fmt not in formats:
                    formats.append(fmt)
        for fmt in formats:
            try:
                engines.append(LlamaCppEngine(gguf[fmt], fmt, threads, spec["flash_attn"]))
            except Exception:
                out["problems"].append(f"llama.cpp {fmt}:\n{traceback.format_exc()}")
        if spec["check"] and group == ("f32",):
            engines.append(reference)
        if not engines:
            continue
        log(f"  group {', '.join(group)}: {', '.join(f'{e.name} {e.weights}' for e in engines)}")
        if reference is not None:
            for line in greedy_check(engines, reference, check_prompt):
                log(f"    {line}")
        figures, loads, read = run_rounds(engines, prompts, decode_prompt, spec["steps"],
                                          spec["repeats"], spec["wait_quiet"], bandwidth, threads)
        out["bandwidth"] += read.samples
        out["loads"] += loads
        for engine in engines:
            entry = figures[(engine.name, engine.weights)]
            out["engines"].append({"name": engine.name, "weights": engine.weights,
                                   **{key: figure.samples for key, figure in entry.items()}})
            if engine is not reference:
                engine.close()
    if reference is not None:
        reference.close()
    return out


def run_child(spec: dict, level: str) -> Optional[dict]:
    """run_level in a child process with `level`'s environment."""
    env = dict(os.environ)
    env.pop("AXRT_CPU_ISA", None)
    if level == "avx2":
        env["AXRT_CPU_ISA"] = "avx2"
    if spec.get("llama_lib", {}).get(level):
        env["LLAMA_CPP_LIB_PATH"] = spec["llama_lib"][level]
    if not spec.get("llama_lib", {}).get(level):
        spec = dict(spec, gguf={})
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = Path(tmp) / "spec.json"
        out_path = Path(tmp) / "out.json"
        spec_path.write_text(json.dumps(spec))
        result = subprocess.run([sys.executable, __file__, "--child", str(spec_path), str(out_path)],
                                env=env)
        if result.returncode != 0 or not out_path.is_file():
            log(f"level {level}: the child process failed ({result.returncode})")
            return None
        return json.loads(out_path.read_text())


# ---------------------------------------------------------------------------
# The summary.


def summarize(results: Dict[Tuple[str, str], dict], configs: Dict[str, dict],
              threads: int, repeats: int) -> List[dict]:
    """Prints the tables and the targets' verdicts; returns the comparisons."""
    cpu, _ = cpu_description()
    comparisons = []
    log("")
    log(f"{cpu}, {threads} threads; tok/s, the best of {repeats} rounds (spread: (best - worst) "
        "/ best); bound: the best read bandwidth of the level's rounds over the bytes of the "
        "projection matrices in the engine's format")
    for (model, level), out in results.items():
        matrices, _ = matrix_weights(configs[model])
        bandwidth = Figure(out["bandwidth"]).best
        lengths = [key for key in out["engines"][0] if key.startswith("p")] if out["engines"] else []
        log("")
        log(f"### {model}, level {level} (read bandwidth {bandwidth / 1e9:.1f} GB/s; other "
            f"processes {statistics.mean(out['loads']) if out['loads'] else float('nan'):.2f} CPUs)")
        log("")
        log("| engine | weights | " + " | ".join(f"prefill@{k[1:]}" for k in lengths)
            + " | decode | decode / bound |")
        log("|---|---|" + "---|" * len(lengths) + "---|---|")
        for e in out["engines"]:
            bound = bandwidth / (matrices * BYTES_PER_WEIGHT.get(e["weights"], 4.0))
            cells = [str(Figure(e[k])) for k in lengths + ["decode"]]
            log(f"| {e['name']} | {e['weights']} | " + " | ".join(cells)
                + f" | {Figure(e['decode']).best / bound:.2f} |")
        figures = {(e["name"], e["weights"]): e for e in out["engines"]}
        for precision, (_, formats) in PRECISIONS.items():
            ours = figures.get(("axrt", precision))
            for fmt in formats:
                theirs = figures.get(("llama.cpp", fmt))
                if ours is None or theirs is None:
                    continue
                for key in ("p128", "decode"):
                    target = next((t[3] for t in TARGETS
                                   if t[:3] == (precision, fmt, key)), None)
                    comparisons.append(dict(
                        model=model, level=level, precision=precision, format=fmt, figure=key,
                        axrt=Figure(ours[key]).best, llama=Figure(theirs[key]).best,
                        target=target))
    log("")
    log("### axrt against llama.cpp, like for like")
    log("")
    log("| model | level | axrt | llama.cpp | prefill@128 ratio | decode ratio | verdict |")
    log("|---|---|---|---|---|---|---|")
    rows: Dict[Tuple[str, str, str, str], Dict[str, dict]] = {}
    for c in comparisons:
        rows.setdefault((c["model"], c["level"], c["precision"], c["format"]), {})[c["figure"]] = c
    for (model, level, precision, fmt), pair in rows.items():
        verdicts = []
        cells = []
        for key in ("p128", "decode"):
            c = pair.get(key)
            if c is None:
                cells.append("-")
                continue
            ratio = c["axrt"] / c["llama"]
            cells.append(f"{ratio:.2f}x ({_rate(c['axrt'])} / {_rate(c['llama'])})")
            if c["target"] is not None:
                met = ratio >= c["target"]
                verdicts.append(f"{'prefill' if key == 'p128' else 'decode'} >= "
                                f"{c['target']:.1f}x {'met' if met else 'MISSED'}")
        log(f"| {model} | {level} | {precision} | {fmt} | {cells[0]} | {cells[1]} | "
            f"{'; '.join(verdicts) or '-'} |")
    return comparisons


def write_json(path: str, comparisons: List[dict], loads: List[float]) -> None:
    """axrt's prefill@128 and decode tokens/s (best of the rounds) as records, each against
    its llama.cpp format of the same model and level."""
    from bench_results import write_records
    records = [{"name": f"{c['model']}/{c['level']}/{c['precision']}/"
                        f"{'prefill@128' if c['figure'] == 'p128' else 'decode'}/vs:{c['format']}",
                "unit": "tok/s", "axrt": c["axrt"], "anchor": c["llama"],
                "anchor_name": f"llama.cpp {c['format']}", "higher_is_better": True}
               for c in comparisons]
    write_records(path, "llm_bench", records,
                  context={"others_cpu": round(statistics.mean(loads), 2) if loads else None})


# ---------------------------------------------------------------------------


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        spec = json.loads(Path(argv[1]).read_text())
        out = run_level(spec)
        Path(argv[2]).write_text(json.dumps(out))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="threads for every engine (default 2)")
    parser.add_argument("--steps", type=int, default=64, help="decode steps timed (default 64)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="rounds; each figure is the best of them (default 3)")
    parser.add_argument("--wait-quiet", type=float, default=30.0,
                        help="before each round, wait up to this many seconds for a second in "
                             "which other processes use under 0.1 CPU (default 30; 0: do not wait)")
    parser.add_argument("--models", default="125m,1.1b", help="a subset of 125m,1.1b")
    parser.add_argument("--levels", default="best,avx2", help="a subset of best,avx2")
    parser.add_argument("--precisions", default=",".join(PRECISIONS),
                        help=f"axrt precisions, a subset of {','.join(PRECISIONS)} (their "
                             "llama.cpp formats come with them)")
    parser.add_argument("--model-dir", type=Path, default=ROOT / "build" / "bench" / "llm",
                        help="where the checkpoints, .axe and GGUF files and llama.cpp's builds "
                             "are kept (default build/bench/llm)")
    parser.add_argument("--llama-cpp-source", type=Path, default=None,
                        help="a llama.cpp source tree (convert_hf_to_gguf.py, gguf-py, "
                             "CMakeLists.txt): the one vendored in llama-cpp-python's sdist")
    parser.add_argument("--llama-flash-attn", action="store_true",
                        help="run llama.cpp with flash attention (default: off)")
    parser.add_argument("--skip-axrt", action="store_true")
    parser.add_argument("--skip-llama-cpp", action="store_true")
    parser.add_argument("--skip-check", action="store_true",
                        help="no greedy check against transformers (125m)")
    parser.add_argument("--json", default="",
                        help="also write the records of bench_results.py to this file")
    args = parser.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    levels = [v for v in args.levels.split(",") if v]
    precisions = [p for p in args.precisions.split(",") if p]
    if not models or any(m not in MODELS for m in models):
        parser.error(f"--models takes a subset of {','.join(MODELS)}, not {args.models!r}")
    if not levels or any(v not in LEVELS for v in levels):
        parser.error(f"--levels takes a subset of {','.join(LEVELS)}, not {args.levels!r}")
    if not precisions or any(p not in PRECISIONS for p in precisions):
        parser.error(f"--precisions takes a subset of {','.join(PRECISIONS)}, not {args.precisions!r}")
    for name in ("threads", "steps", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    threads = args.threads
    root = args.model_dir.resolve()

    cpu, cpus = cpu_description()
    log(f"llm_bench: {cpu}, {cpus} CPUs, {threads} threads; Python {platform.python_version()}, "
        f"numpy {np.__version__}; load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")

    have_transformers, _ = prepare_checkpoint("llm_bench", root) if "125m" in models else (False, None)

    # llama.cpp: a build per level, from the source tree.
    llama_lib: Dict[str, str] = {}
    source = args.llama_cpp_source
    if not args.skip_llama_cpp:
        if source is None or not (source / "convert_hf_to_gguf.py").is_file():
            log("llama.cpp side: skipped (no llama.cpp source tree with convert_hf_to_gguf.py: "
                "give one with --llama-cpp-source)")
        else:
            try:
                import llama_cpp  # noqa: F401  (the bindings; their own library is not used)
                for level in levels:
                    llama_lib[level] = str(build_llama(source.resolve(), root / f"llama.cpp-{level}",
                                                       level))
            except ImportError as error:
                log(f"llama.cpp side: skipped (llama-cpp-python is not importable: {error})")
            except Exception:
                log(f"llama.cpp side: skipped, the build failed:\n{traceback.format_exc()}")
                llama_lib = {}
    if llama_lib:
        # The parent's quantizations use the first level's library.
        os.environ["LLAMA_CPP_LIB_PATH"] = next(iter(llama_lib.values()))

    results: Dict[Tuple[str, str], dict] = {}
    configs: Dict[str, dict] = {}
    loads: List[float] = []
    failed = False
    for model in models:
        sub, lengths = MODELS[model]
        model_dir = root / sub if sub else root
        config = (json.loads((model_dir / "config.json").read_text()) if model == "125m"
                  and checkpoint_ready(model_dir) else prepare_large_checkpoint(model_dir)
                  if model == "1.1b" else None)
        if config is None:
            log(f"{model}: no checkpoint; skipped")
            continue
        configs[model] = config
        pieces = tokenizer_pieces(model_dir)
        matrices, output = matrix_weights(config)
        log(f"{model}: {model_dir}: {matrices / 1e6:.1f} M weights in the projections "
            f"({output / 1e6:.1f} M of them the output projection)")
        axe: Dict[str, Path] = {}
        if not args.skip_axrt:
            try:
                axe = convert_axrt(model_dir, precisions)
            except ImportError as error:
                log(f"axrt side: skipped (axrt.llm is not importable: {error}; set PYTHONPATH to "
                    "the built package)")
        gguf: Dict[str, Path] = {}
        if llama_lib and pieces is not None:
            formats = []
            for p in precisions:
                formats += [f for f in PRECISIONS[p][1] if f not in formats]
            try:
                gguf = make_ggufs(source.resolve(), model_dir, formats, threads)
            except Exception:
                log(f"llama.cpp {model}: FAILED\n{traceback.format_exc()}")
                failed = True
        elif llama_lib:
            log("sentencepiece is not importable: no tokenizer, so no llama.cpp rows")
        spec = dict(threads=threads, model_dir=str(model_dir), pieces=pieces, lengths=lengths,
                    steps=args.steps, repeats=args.repeats, wait_quiet=args.wait_quiet,
                    flash_attn=args.llama_flash_attn, llama_lib=llama_lib,
                    axe={k: str(v) for k, v in axe.items()},
                    gguf={k: str(v) for k, v in gguf.items()},
                    check=(model == "125m" and have_transformers and not args.skip_check))
        for level in levels:
            log(f"{model}, level {level}:")
            out = run_child(spec, level)
            if out is None:
                failed = True
                continue
            for problem in out["problems"]:
                log(f"FAILED: {problem}")
                failed = True
            results[(model, level)] = out
            loads += out["loads"]
            spec["check"] = False  # once per model is enough
    if not results:
        log("llm_bench: nothing ran")
        return 1 if failed else 0
    comparisons = summarize(results, configs, threads, args.repeats)
    log("")
    log(f"other processes used {statistics.mean(loads) if loads else float('nan'):.2f} CPUs on "
        f"average during the rounds; load average at the end: "
        f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if loads and max(loads) >= 0.1:
        log("CAUTION: other processes were busy during some rounds; these figures and verdicts "
            "do not hold for a quiet machine")
    if args.json:
        write_json(args.json, comparisons, loads)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
