"""The language-model figures of the GPU command (docs/gpu-validation.md, `make gpu-check`'s
step "figures"): a random Llama in TinyLlama's shape, built here with numpy, converted, and
timed through the serving engine on the device, beside the device's measured memory
bandwidth.

    python3 tools/gpu_llm_figures.py --out DIR [--device cuda:0] [--shape tinyllama|small]
                                     [--variants bf16,bf16+decode+fused,int4] [--work DIR]

Needs only the axrt package and numpy. Writes DIR/figures.md (a table) and
DIR/figures.json. The checkpoint and the converted files go to --work (default: a
temporary folder, removed at the end): about 2.2 GB for the checkpoint and as much again
per converted precision at TinyLlama's shape.

A variant is a weight precision, with `+decode` (the decode matmuls), `+fused` (the fused
kernels), `+split` (split-K decode attention), `+tc` (the tensor-core matmuls), `+flash`
(flash attention), `+kv-bf16` or
`+kv-fp8_e4m3` (the KV cache's element type) and `+graphs` (decode steps of up to 64
sequences replayed from graphs, graph_max_batch=64) where wanted: what is not yet the
default, timed beside the defaults. A variant that fails is recorded with its error, and the
others still run.

Figures, for each variant:
- decode at batch 1: the time per output token after a 128-token prompt (64 tokens, the
  prefill's time taken out), as tokens/s and as a fraction of the bound, the weight bytes a
  token reads over the measured read bandwidth; and after a 1,920-token prompt;
- throughput at 16 and 64 concurrent requests of 128 prompt + 64 generated tokens each;
- prefill at 512 and 2048 tokens (one request, one generated token), tokens/s.
The bandwidth is a device-to-device copy of 1 GiB (64 MiB for the small shape), counted once.
`--shape small` runs a model small enough for a CPU device or the mock, to rehearse.

Beside them, the bf16 matmul kernels alone (`axrt_matmul_bf16_f32`, its decode grid and the
tensor-core `axrt_matmul_bf16_tc_f32`) at M = 1 and 16 against the bandwidth (N = K = 2048)
and at M = N = K = 2048 in TFLOP/s; and, as anchors in the same run (figures.json,
"kernels"), cuBLAS's bf16 GEMM where the machine has the CUDA toolkit's libraries, and
torch.matmul and scaled_dot_product_attention in bf16 where torch with CUDA is installed.
"""
from __future__ import annotations

import argparse
import json
import shutil
import signal
import struct
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SHAPES = {
    # TinyLlama-1.1B's shape.
    "tinyllama": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                      num_attention_heads=32, num_key_value_heads=4, vocab_size=32000),
    "small": dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, vocab_size=2048),
}


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """f32 -> bf16 bit patterns, rounding to nearest even."""
    bits = x.view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def write_checkpoint(path: Path, shape: dict, max_context: int, seed: int = 0) -> int:
    """A random bf16 Llama checkpoint (config.json, model.safetensors) in `path`; returns
    its parameter count."""
    H, I, L = shape["hidden_size"], shape["intermediate_size"], shape["num_hidden_layers"]
    heads, kv_heads, V = (shape["num_attention_heads"], shape["num_key_value_heads"],
                          shape["vocab_size"])
    D = H // heads
    config = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_act="silu",
                  max_position_embeddings=max_context, rms_norm_eps=1e-5, rope_theta=10000.0,
                  tie_word_embeddings=False, torch_dtype="bfloat16", bos_token_id=1,
                  eos_token_id=2, **shape)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config, indent=1))
    tensors = [("model.embed_tokens.weight", (V, H))]
    for l in range(L):
        p = f"model.layers.{l}."
        tensors += [(p + "input_layernorm.weight", (H,)),
                    (p + "self_attn.q_proj.weight", (heads * D, H)),
                    (p + "self_attn.k_proj.weight", (kv_heads * D, H)),
                    (p + "self_attn.v_proj.weight", (kv_heads * D, H)),
                    (p + "self_attn.o_proj.weight", (H, heads * D)),
                    (p + "post_attention_layernorm.weight", (H,)),
                    (p + "mlp.gate_proj.weight", (I, H)),
                    (p + "mlp.up_proj.weight", (I, H)),
                    (p + "mlp.down_proj.weight", (H, I))]
    tensors += [("model.norm.weight", (H,)), ("lm_head.weight", (V, H))]
    header, offset = {}, 0
    for name, dims in tensors:
        size = int(np.prod(dims)) * 2
        header[name] = dict(dtype="BF16", shape=list(dims), data_offsets=[offset, offset + size])
        offset += size
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    rng = np.random.default_rng(seed)
    with open(path / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name, dims in tensors:
            if len(dims) == 1:  # norms near 1
                w = 1.0 + 0.1 * rng.standard_normal(dims, dtype=np.float32)
            else:
                w = rng.standard_normal(dims, dtype=np.float32) * np.float32(0.02)
            f.write(bf16_bits(w).tobytes())
    return offset // 2


def read_bandwidth(device, size: int) -> float:
    """Bytes read per second by a device-to-device copy of `size` bytes."""
    import axrt

    b = axrt.Builder(producer="gpu_llm_figures", producer_version="1")
    f = b.function("copy", inputs=[("x", "uint8", [size])], outputs=[("y", "uint8", [size])])
    f.copy(f.input(0), f.output(0), size)
    exe = axrt.load(b.to_bytes(), device=device)
    x = axrt.empty([size], "uint8", device=device)
    y = axrt.empty([size], "uint8", device=device)
    stream = axrt.Stream(device=device)

    def call():
        exe.copy(x, out=y, stream=stream)
        stream.synchronize()

    return size / time_call(call, repeats=4)  # one read of every byte (and one write)


def time_call(call, repeats: int = 10) -> float:
    """The best of a few timings of `repeats` calls of `call` (which ends with a wait)."""
    call()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeats):
            call()
        best = min(best, (time.perf_counter() - start) / repeats)
    return best


def cublas_figures(size: int) -> dict:
    """cuBLAS's bf16 GEMM (f32 accumulation and output, tensor cores) at the matmul kernels'
    shapes, y[M, N] = x[M, K] . w[N, K]^T, where the machine has the CUDA toolkit's cuBLAS and
    runtime libraries (loaded with ctypes, on the device's primary context): the anchor of the
    matmul figures in the same run, torch or not. Without them, or without a GPU, the reason."""
    import ctypes
    import ctypes.util
    import glob

    def load(name: str):
        found = ctypes.util.find_library(name)
        candidates = ([found] if found else []) + sorted(
            glob.glob(f"/usr/local/cuda/lib64/lib{name}.so*"), reverse=True)
        for candidate in candidates:
            try:
                return ctypes.CDLL(candidate)
            except OSError:
                continue
        raise OSError(f"lib{name} is not installed")

    try:
        cudart, cublas = load("cudart"), load("cublas")
    except OSError as e:
        return {"cublas": f"unavailable: {e}"}

    def check(rc: int, what: str) -> None:
        if rc != 0:
            raise RuntimeError(f"{what} returned {rc}")

    bf16, f32, compute_32f, op_n, op_t, default_algo = 14, 0, 68, 0, 1, -1
    figures = {}
    handle = ctypes.c_void_p()
    pointers = []
    try:
        check(cublas.cublasCreate_v2(ctypes.byref(handle)), "cublasCreate")

        def device_alloc(nbytes: int) -> ctypes.c_void_p:
            p = ctypes.c_void_p()
            check(cudart.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(nbytes)), "cudaMalloc")
            pointers.append(p)
            # bf16 0x3c00 (2^-7) in every element: finite products whatever the sizes.
            check(cudart.cudaMemset(p, 0x3c, ctypes.c_size_t(nbytes)), "cudaMemset")
            return p

        w = device_alloc(2 * size * size)
        alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
        for m in (1, 16, size):
            x = device_alloc(2 * m * size)
            y = device_alloc(4 * m * size)

            def call():
                # Column-major: y^T [N, M] = (w as [K, N])^T . (x as [K, M]).
                check(cublas.cublasGemmEx(handle, op_t, op_n, size, m, size, ctypes.byref(alpha),
                                          w, bf16, size, x, bf16, size, ctypes.byref(beta), y,
                                          f32, size, compute_32f, default_algo), "cublasGemmEx")
                check(cudart.cudaDeviceSynchronize(), "cudaDeviceSynchronize")

            seconds = time_call(call)
            if m == size:
                figures[f"cublas_gemm_bf16_m{m}_tflop_s"] = 2 * m * size * size / seconds / 1e12
            else:
                figures[f"cublas_gemm_bf16_m{m}_weight_gb_s"] = 2 * size * size / seconds / 1e9
    except (RuntimeError, AttributeError) as e:
        figures["cublas"] = f"unavailable: {e}"
    finally:
        for p in pointers:
            cudart.cudaFree(p)
        if handle.value:
            cublas.cublasDestroy_v2(handle)
    return figures


def kernel_figures(device, small: bool) -> dict:
    """The bf16 matmul kernels by themselves, and torch's where it runs on a GPU."""
    import axrt
    from axrt.builder import ceildiv
    from axrt.llm.convert import KERNELS, default_fatbin

    size = 256 if small else 2048
    figures = {}
    fatbin = default_fatbin()
    for kernel, tile in (("axrt_matmul_bf16_f32", (64, 64)),
                         ("axrt_matmul_bf16_f32_decode", (8, 16)),
                         ("axrt_matmul_bf16_tc_f32", (128, 128))):
        for m in (1, 16, size):
            n = k = size
            b = axrt.Builder(producer="gpu_llm_figures", producer_version="1")
            kern = b.kernel(kernel, b.kernel_library("axrt.cpu"), KERNELS[kernel][0])
            if device.type == "cuda" and fatbin is not None:
                code = b.code_object("cuda_fatbin", "sm_80,sm_90", fatbin.read_bytes())
                b.kernel_variant(kern, code, workgroup_size=KERNELS[kernel][1])
            f = b.function("mm", inputs=[("x", "float32", [m, k]), ("w", "uint16", [n, k]),
                                         ("bias", "float32", [n])],
                           outputs=[("y", "float32", [m, n])])
            f.dispatch(kern, [ceildiv(n, tile[0]), ceildiv(m, tile[1])],
                       [f.input(0), f.input(1), f.input(2), f.output(0), m, n, k])
            exe = axrt.load(b.to_bytes(), device=device)
            rng = np.random.default_rng(2)
            x = axrt.asarray(rng.standard_normal((m, k), dtype=np.float32), device=device)
            w = axrt.asarray(bf16_bits(rng.standard_normal((n, k), dtype=np.float32)),
                             device=device)
            bias = axrt.asarray(np.zeros(n, np.float32), device=device)
            y = axrt.empty([m, n], "float32", device=device)
            stream = axrt.Stream(device=device)

            def call():
                exe.mm(x, w, bias, out=y, stream=stream)
                stream.synchronize()

            seconds = time_call(call)
            key = f"{kernel}_m{m}"
            figures[key + "_us"] = seconds * 1e6
            if m == size:
                figures[key + "_tflop_s"] = 2 * m * n * k / seconds / 1e12
            else:
                figures[key + "_weight_gb_s"] = 2 * n * k / seconds / 1e9
    if device.type == "cuda":
        figures.update(cublas_figures(size))
    try:
        import torch
    except ImportError:
        return figures
    if device.type != "cuda" or not torch.cuda.is_available():
        return figures
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    for m in (1, 16, size):
        x = torch.randn(m, size, device="cuda", dtype=torch.bfloat16)

        def call():
            torch.matmul(x, a.T)
            torch.cuda.synchronize()

        seconds = time_call(call)
        if m == size:
            figures[f"torch_matmul_m{m}_tflop_s"] = 2 * m * size * size / seconds / 1e12
        else:
            figures[f"torch_matmul_m{m}_weight_gb_s"] = 2 * size * size / seconds / 1e9
    q = torch.randn(1, 32, 2048, 64, device="cuda", dtype=torch.bfloat16)

    def sdpa():
        torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
        torch.cuda.synchronize()

    seconds = time_call(sdpa)
    # Causal: half of the 4 T^2 D flops a head of full attention takes.
    figures["torch_sdpa_prefill2048_tflop_s"] = 2 * 32 * 2048 * 2048 * 64 / seconds / 1e12
    return figures


def time_engine(path: Path, device, weight_bytes: int, bandwidth: float, vocab: int,
                graph_max_batch: int = 0) -> dict:
    import axrt.llm

    rng = np.random.default_rng(1)

    def prompt(n):
        return [int(t) for t in rng.integers(3, vocab, n)]

    figures = {}
    with axrt.llm.Engine(path, device=device, graph_max_batch=graph_max_batch) as engine:
        engine.generate([prompt(16)], 4, stop_ids=())  # warm-up: modules, tuning
        def decode_rate(context: int) -> float:
            """Tokens/s of 64 tokens after a `context`-token prompt, the prefill's time out."""
            p = prompt(context)
            start = time.perf_counter()
            engine.generate([p], 1, stop_ids=())
            first = time.perf_counter() - start
            p = prompt(context)
            start = time.perf_counter()
            engine.generate([p], 65, stop_ids=())
            return 64 / (time.perf_counter() - start - first)

        # Decode at batch 1 after 128 tokens, and after 1,920 (where the KV cache's reads
        # count).
        figures["decode_tok_s"] = decode_rate(128)
        if 1920 + 65 <= engine.max_context:
            figures["decode_1920_tok_s"] = decode_rate(1920)
        figures["decode_bound_tok_s"] = bandwidth / weight_bytes
        figures["decode_of_bound"] = figures["decode_tok_s"] / figures["decode_bound_tok_s"]
        for n in (16, 64):
            prompts = [prompt(128) for _ in range(n)]
            start = time.perf_counter()
            out = engine.generate(prompts, 64, stop_ids=())
            figures[f"throughput_{n}_tok_s"] = sum(map(len, out)) / (time.perf_counter() - start)
        for n in (512, 2048):
            if n + 1 > engine.max_context:
                continue
            p = prompt(n)
            start = time.perf_counter()
            engine.generate([p], 1, stop_ids=())
            figures[f"prefill_{n}_tok_s"] = n / (time.perf_counter() - start)
        stats = engine.stats()
        figures["graph_steps"] = stats["graph_steps"]
        figures["steps"] = stats["steps"]
    return figures


def time_variant(work: Path, variant: str, shape: dict, device, bandwidth: float) -> dict:
    """Converts the checkpoint as `variant` says and times it through the engine."""
    import axrt.llm

    weights, *options = variant.split("+")
    path = work / f"model-{variant.replace('+', '-')}.axe"
    start = time.perf_counter()
    axrt.llm.convert(work / "checkpoint", path, weights=weights,
                     decode_matmuls="decode" in options, fused_kernels="fused" in options,
                     split_attention="split" in options,
                     tensor_core_matmuls="tc" in options,
                     flash_attention="flash" in options,
                     kv_cache_dtype=next((o[len("kv-"):] for o in options
                                          if o.startswith("kv-")), "f32"))
    convert_s = time.perf_counter() - start
    try:
        # What a decode token reads: every weight the matmuls hold (the file's constants
        # less the embedding table, of which a token reads one row).
        embed = shape["vocab_size"] * shape["hidden_size"] * (4 if weights == "f32" else 2)
        weight_bytes = path.stat().st_size - embed
        figures = time_engine(path, device, weight_bytes, bandwidth, shape["vocab_size"],
                              graph_max_batch=64 if "graphs" in options else 0)
    finally:
        path.unlink()
    figures["convert_s"] = convert_s
    figures["weight_bytes"] = weight_bytes
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--shape", default="tinyllama", choices=sorted(SHAPES))
    # The defaults first, then each opt-in path, most wanted first: a step cut short by
    # its time limit keeps the variants it finished.
    parser.add_argument("--variants", default="bf16,int4,fp8,bf16+decode+fused+graphs,"
                        "int4+decode+fused+graphs,fp8+decode+fused+graphs,bf16+tc+flash+fused,"
                        "bf16+decode+fused+split,int8+tc+flash,int4+tc+flash,"
                        "bf16+kv-fp8_e4m3,bf16+decode+fused")
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()

    import axrt
    import axrt.llm

    device = axrt.device(args.device)
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work or Path(tempfile.mkdtemp(prefix="axrt-llm-figures-"))
    results = {"device": str(device), "shape": args.shape, "models": {}}
    variants = args.variants.split(",")
    # Cut short by the step's time limit (SIGTERM): the work folder still goes, and the
    # report keeps the variants that ended.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))
    try:
        shape = SHAPES[args.shape]
        start = time.perf_counter()
        params = write_checkpoint(work / "checkpoint", shape, max_context=2048 + 64)
        results["parameters"] = params
        results["checkpoint_s"] = time.perf_counter() - start
        bandwidth = read_bandwidth(device, (1 << 30) if args.shape == "tinyllama" else (64 << 20))
        results["read_bandwidth_gb_s"] = bandwidth / 1e9
        results["kernels"] = kernel_figures(device, args.shape == "small")
        for variant in variants:
            # One variant's failure is recorded and the others run; the results so far are
            # written after each, so that a step cut short by its time limit keeps them.
            try:
                results["models"][variant] = time_variant(work, variant, shape, device,
                                                          bandwidth)
            except Exception as e:
                results["models"][variant] = {"error": f"{type(e).__name__}: {e}"}
                print(f"figures: {variant}: {type(e).__name__}: {e}", flush=True)
            write_report(args.out, args.shape, results, len(variants))
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    write_report(args.out, args.shape, results, len(variants))
    return 0


def write_report(out: Path, shape: str, results: dict, planned: int) -> None:
    """figures.json and figures.md with the variants timed so far (of `planned`)."""
    (out / "figures.json").write_text(json.dumps(results, indent=1))
    lines = [f"# Language-model figures on {results['device']}", "",
             f"{results['parameters'] / 1e6:,.0f} M parameters ({shape}); read bandwidth "
             f"{results['read_bandwidth_gb_s']:.0f} GB/s (device-to-device copy); "
             f"{len(results['models'])} of {planned} variants", "",
             "| variant | decode tok/s (of the bound) | decode@1920 tok/s | 16 concurrent tok/s "
             "| 64 concurrent tok/s | prefill@512 tok/s | prefill@2048 tok/s |",
             "|---|---|---|---|---|---|---|"]
    for variant, f in results["models"].items():
        if "error" in f:
            lines.append(f"| {variant} | failed: {f['error']} | | | | | |")
            continue
        lines.append(
            f"| {variant} | {f['decode_tok_s']:.1f} ({f['decode_of_bound']:.1%}) | "
            f"{f.get('decode_1920_tok_s', float('nan')):.1f} | "
            f"{f['throughput_16_tok_s']:.0f} | {f['throughput_64_tok_s']:.0f} | "
            f"{f.get('prefill_512_tok_s', float('nan')):.0f} | "
            f"{f.get('prefill_2048_tok_s', float('nan')):.0f} |")
    lines += ["", "| kernel figure | value |", "|---|---|"]
    lines += [f"| {key} | {value:.3g} |" if isinstance(value, (int, float)) else
              f"| {key} | {value} |" for key, value in results.get("kernels", {}).items()]
    (out / "figures.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
