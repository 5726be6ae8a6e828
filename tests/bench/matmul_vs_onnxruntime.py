"""axrt's matmul kernels against ONNX Runtime on the CPU, side by side in one run.

Each case builds the same layer twice, y = x . W + bias with x f32 [M, K]:
an .axe executable with one dispatch of an axrt.cpu kernel (weights as
constants, run on cpu:0), and an ONNX model with ONNX Runtime's counterpart
(weights as initializers, CPU execution provider):

    axrt kernel                 ONNX Runtime
    axrt_matmul_f32             MatMul + Add (W f32 [K, N])
    axrt_matmul_f32_nk          the same, axrt's weights stored [N, K]
    axrt_matmul_bf16_f32        the same f32 MatMul, W widened from the bf16 weights
    axrt_matmul_int8_pc_f32     com.microsoft DynamicQuantizeMatMul: x quantized to
                                u8 on every call, int8 weights, per-column scales
                                (what ORT fuses DynamicQuantizeLinear + MatMulInteger
                                + scaling into)
    axrt_matmul_awq_int4_f32    com.microsoft MatMulNBits, 4 bits, blocks of 128,
                                zero points, accuracy_level 0 (f32 compute) and 4
                                (x quantized to int8 per block)
    axrt_matmul_gptq_int4_q8_f32  the same MatMulNBits at accuracy_level 4: both
                                quantize x to int8 per block of 128 and multiply
                                integers (axrt's weights in GPTQ's layout)

Both run with the same number of threads (ORT's intra-op pool, axrt's CPU
device pool; by default the device's compute units). A call is synchronous
on both sides: axrt's is invoke + stream synchronize with a supplied output
(the runtime path a client takes, dispatch and thread hand-offs included).
With --kernel-bench naming the axrt_matmul_kernel_bench tool, the same
kernel is also timed called directly on as many spinning threads, which is
the kernel's own speed. Each case runs in rounds, the sides one after the
other (an ORT session lives only while it is timed, so that its spinning
threads never compete with axrt's), and reports the median time per call;
"speed" is ORT's time over axrt's (above 1: axrt is faster).

Run with PYTHONPATH naming the built axrt package (``make bench`` does):

    PYTHONPATH=build/bench/python python3 tests/bench/matmul_vs_onnxruntime.py \
        --kernel-bench build/bench/tests/bench/axrt_matmul_kernel_bench

ONNX Runtime is only this benchmark's yardstick (``pip install
onnxruntime``); without it the script says so and exits 0. The ONNX models
are encoded here directly, so the ``onnx`` package is not needed.

--json FILE also writes every row as two records for the regression gate
(bench_results.py): runtime and kernel, each against the ORT op's time.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

GROUP = 128  # AWQ group and MatMulNBits block

# ---------------------------------------------------------------------------
# A minimal ONNX (protobuf) writer: the fields of onnx.proto that these
# models use.


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field_int(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _field_bytes(number: int, value: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _field_str(number: int, value: str) -> bytes:
    return _field_bytes(number, value.encode())


_ONNX_TYPES = {np.dtype(np.float32): 1, np.dtype(np.uint8): 2, np.dtype(np.int8): 3}


def _tensor(name: str, array: np.ndarray) -> bytes:
    array = np.ascontiguousarray(array)
    out = b"".join(_field_int(1, d) for d in array.shape)
    out += _field_int(2, _ONNX_TYPES[array.dtype])
    out += _field_str(8, name)
    out += _field_bytes(9, array.tobytes())
    return out


def _value_info(name: str, shape: Sequence[int]) -> bytes:
    dims = b"".join(_field_bytes(1, _field_int(1, d)) for d in shape)
    tensor_type = _field_int(1, 1) + _field_bytes(2, dims)  # FLOAT
    return _field_str(1, name) + _field_bytes(2, _field_bytes(1, tensor_type))


def _attribute_int(name: str, value: int) -> bytes:
    return _field_str(1, name) + _field_int(3, value) + _field_int(20, 2)  # INT


def _node(op: str, inputs: Sequence[str], outputs: Sequence[str], domain: str = "",
          attributes: Sequence[bytes] = ()) -> bytes:
    out = b"".join(_field_str(1, i) for i in inputs)
    out += b"".join(_field_str(2, o) for o in outputs)
    out += _field_str(4, op)
    out += b"".join(_field_bytes(5, a) for a in attributes)
    if domain:
        out += _field_str(7, domain)
    return out


def _model(nodes: Sequence[bytes], initializers: Dict[str, np.ndarray], m: int, k: int,
           n: int) -> bytes:
    graph = b"".join(_field_bytes(1, node) for node in nodes)
    graph += _field_str(2, "layer")
    graph += b"".join(_field_bytes(5, _tensor(name, a)) for name, a in initializers.items())
    graph += _field_bytes(11, _value_info("x", (m, k)))
    graph += _field_bytes(12, _value_info("y", (m, n)))
    opsets = _field_bytes(8, _field_str(1, "") + _field_int(2, 17))
    opsets += _field_bytes(8, _field_str(1, "com.microsoft") + _field_int(2, 1))
    return _field_int(1, 8) + _field_str(2, "axrt-bench") + _field_bytes(7, graph) + opsets


# ---------------------------------------------------------------------------
# Weights: one random layer in each format, and its exact f32 value.


class Layer:
    def __init__(self, k: int, n: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.k, self.n = k, n
        self.w = rng.uniform(-1, 1, size=(k, n)).astype(np.float32)  # [K, N]
        self.bias = rng.uniform(-1, 1, size=n).astype(np.float32)

    def bf16(self) -> Tuple[np.ndarray, np.ndarray]:
        """bf16 [N, K] bit patterns (rounded to nearest even) and their f32 value [K, N]."""
        bits = self.w.T.copy().view(np.uint32)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        patterns = rounded.astype(np.uint16)
        value = (patterns.astype(np.uint32) << 16).view(np.float32).T.copy()
        return patterns, value

    def int8(self) -> Tuple[np.ndarray, np.ndarray]:
        """int8 [N, K] codes and scales [N] (symmetric, per output channel)."""
        amax = np.abs(self.w).max(axis=0)
        scale = np.where(amax > 0, amax / 127, 1).astype(np.float32)
        codes = np.clip(np.rint(self.w / scale), -127, 127).astype(np.int8)
        return np.ascontiguousarray(codes.T), scale

    def int4(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Codes q [K, N] in 0..15, zero points z [K/g, N], f16 scales [K/g, N]."""
        g = self.w.reshape(self.k // GROUP, GROUP, self.n)
        lo = np.minimum(g.min(axis=1), 0)
        hi = np.maximum(g.max(axis=1), 0)
        scale = np.where(hi > lo, (hi - lo) / 15, 1).astype(np.float16)
        s = scale.astype(np.float32)
        z = np.clip(np.rint(-lo / s), 0, 15)
        q = np.clip(np.rint(g / s[:, None, :]) + z[:, None, :], 0, 15)
        return q.reshape(self.k, self.n).astype(np.uint32), z.astype(np.uint32), scale


AWQ_NIBBLE = np.array([0, 4, 1, 5, 2, 6, 3, 7], np.uint32)  # element e sits in nibble [e]


def sequential_pack(codes: np.ndarray, axis: int) -> np.ndarray:
    """u4 codes -> u32 words of eight along `axis` (0 or 1), element i in nibble i."""
    if axis == 0:
        return np.ascontiguousarray(sequential_pack(codes.T, 1).T)
    r, n = codes.shape
    c = codes.reshape(r, n // 8, 8).astype(np.uint32)
    return np.bitwise_or.reduce(c << (4 * np.arange(8, dtype=np.uint32)), axis=2).astype(np.uint32)


def quantize_rows(x: np.ndarray) -> np.ndarray:
    """x with each row's groups of GROUP quantized to int8 as the q8 kernel does
    (docs/kernels.md), back in float64."""
    m, k = x.shape
    g = x.astype(np.float32).reshape(m, k // GROUP, GROUP)
    a = np.max(np.abs(g), axis=2, keepdims=True)
    safe = np.where(a > 0, a, np.float32(1))
    inv = (np.float32(127) / safe).astype(np.float32)
    xq = np.where(a > 0, np.rint((g * inv).astype(np.float32)), 0)
    s = np.where(a > 0, (a / np.float32(127)).astype(np.float32), 0)
    return (xq.astype(np.float64) * s.astype(np.float64)).reshape(m, k)


def awq_pack(codes: np.ndarray) -> np.ndarray:
    """u4 [R, N] -> u32 [R, N/8] in the AWQ order."""
    r, n = codes.shape
    c = codes.reshape(r, n // 8, 8)
    return np.bitwise_or.reduce(c << (4 * AWQ_NIBBLE), axis=2).astype(np.uint32)


# ---------------------------------------------------------------------------
# The two sides of a case.


def axrt_layer(kind: str, layer: Layer, m: int):
    """A loaded one-dispatch executable computing the layer on cpu:0, and its weights' f32 value."""
    import axrt
    from axrt.builder import (Buffer, Packing, QuantLayout, Scalar, ScaleRef, ZeroPoint,
                              ceildiv)

    k, n = layer.k, layer.n
    b = axrt.Builder(producer="matmul_vs_onnxruntime")
    cpu = b.kernel_library("axrt.cpu")
    head = [Buffer("x")]
    tail = [Buffer("bias"), Buffer("y", access="write"), Scalar("M"), Scalar("N"), Scalar("K")]
    bias = b.constant("bias", layer.bias)
    if kind == "f32":
        kernel = b.kernel("axrt_matmul_f32", cpu, head + [Buffer("w")] + tail)
        weights = [b.constant("w", layer.w)]
        value = layer.w
    elif kind == "f32nk":
        kernel = b.kernel("axrt_matmul_f32_nk", cpu, head + [Buffer("w")] + tail)
        weights = [b.constant("w", np.ascontiguousarray(layer.w.T))]
        value = layer.w
    elif kind == "bf16":
        patterns, value = layer.bf16()
        kernel = b.kernel("axrt_matmul_bf16_f32", cpu, head + [Buffer("w")] + tail)
        weights = [b.constant("w", patterns, dtype="bf16")]
    elif kind == "int8":
        codes, scale = layer.int8()
        layout = QuantLayout("int8.per_channel", "int8", "f32", (1, 0), scale=ScaleRef(dtype="f32"))
        kernel = b.kernel("axrt_matmul_int8_pc_f32", cpu,
                          head + [Buffer("w", layout=layout), Buffer("scale")] + tail)
        s = b.constant("scale", scale.reshape(n, 1))
        weights = [b.constant("w", codes, layout=layout.with_constants(scale=s)), s]
        value = (codes.astype(np.float32) * scale[:, None]).T
    elif kind == "q8":
        q, z, scales = layer.int4()
        layout = QuantLayout("gptq_v2.int4.g128", "uint4", "f32", (GROUP, 1),
                             scale=ScaleRef(dtype="f16"),
                             zero_point=ZeroPoint("integer", dtype="uint4",
                                                  packing=Packing(4, 32, axis=1,
                                                                  order="sequential")),
                             packing=Packing(4, 32, axis=0, order="sequential"))
        kernel = b.kernel("axrt_matmul_gptq_int4_q8_f32", cpu,
                          head + [Buffer("qweight", layout=layout), Buffer("scales"),
                                  Buffer("qzeros")] + tail + [Scalar("group_size")])
        sc = b.constant("scales", scales)
        qz = b.constant("qzeros", sequential_pack(z, 1))
        qw = b.constant("qweight", sequential_pack(q, 0), dtype="uint4", shape=(k, n),
                        layout=layout.with_constants(scale=sc, zero_point=qz))
        weights = [qw, sc, qz]
        s = scales.astype(np.float32)
        value = ((q.reshape(k // GROUP, GROUP, n).astype(np.float32) - z[:, None, :]) *
                 s[:, None, :]).reshape(k, n)
    else:
        q, z, scales = layer.int4()
        packing = Packing(4, 32, axis=1, order="awq")
        layout = QuantLayout("awq.int4.g128", "uint4", "f32", (GROUP, 1),
                             scale=ScaleRef(dtype="f16"),
                             zero_point=ZeroPoint("integer", dtype="uint4", packing=packing),
                             packing=packing)
        kernel = b.kernel("axrt_matmul_awq_int4_f32", cpu,
                          head + [Buffer("qweight", layout=layout), Buffer("scales"),
                                  Buffer("qzeros")] + tail + [Scalar("group_size")])
        sc = b.constant("scales", scales)
        qz = b.constant("qzeros", awq_pack(z))
        qw = b.constant("qweight", awq_pack(q), dtype="uint4", shape=(k, n),
                        layout=layout.with_constants(scale=sc, zero_point=qz))
        weights = [qw, sc, qz]
        s = scales.astype(np.float32)
        value = ((q.reshape(k // GROUP, GROUP, n).astype(np.float32) - z[:, None, :]) *
                 s[:, None, :]).reshape(k, n)
    f = b.function("main", inputs=[("x", "f32", (m, k))], outputs=[("y", "f32", (m, n))])
    args = [f.input(0)] + weights + [bias, f.output(0), m, n, k]
    if kind in ("awq", "q8"):
        args.append(GROUP)
    f.dispatch(kernel, grid=(ceildiv(n, 64), ceildiv(m, 64)), args=args)
    return axrt.load(b.to_bytes()), value


def ort_layer(ort, kind: str, layer: Layer, m: int, threads: int, accuracy_level: int = 0):
    """An ONNX Runtime session computing ORT's counterpart of the layer."""
    k, n = layer.k, layer.n
    inits: Dict[str, np.ndarray] = {"bias": layer.bias}
    if kind in ("f32", "bf16", "int8-dequantized"):
        if kind == "f32":
            inits["w"] = layer.w
        elif kind == "bf16":
            inits["w"] = layer.bf16()[1]
        else:
            codes, scale = layer.int8()
            inits["w"] = np.ascontiguousarray((codes.astype(np.float32) * scale[:, None]).T)
        nodes = [_node("MatMul", ["x", "w"], ["t"]), _node("Add", ["t", "bias"], ["y"])]
    elif kind == "int8":
        codes, scale = layer.int8()
        inits["w"] = np.ascontiguousarray(codes.T)  # [K, N]
        inits["w_scale"] = scale
        nodes = [_node("DynamicQuantizeMatMul", ["x", "w", "w_scale", "", "bias"], ["y"],
                       domain="com.microsoft")]
    else:
        q, z, scales = layer.int4()
        blocks = k // GROUP
        qt = q.T.reshape(n, blocks, GROUP // 2, 2).astype(np.uint8)  # [N, blocks, blob, 2]
        inits["w"] = (qt[..., 0] | (qt[..., 1] << 4)).astype(np.uint8)
        inits["w_scale"] = np.ascontiguousarray(scales.astype(np.float32).T)  # [N, blocks]
        zt = z.T.astype(np.uint8)  # [N, blocks]
        if blocks % 2:
            zt = np.concatenate([zt, np.zeros((n, 1), np.uint8)], axis=1)
        inits["w_zero"] = (zt[:, 0::2] | (zt[:, 1::2] << 4)).astype(np.uint8)
        attributes = [_attribute_int("K", k), _attribute_int("N", n), _attribute_int("bits", 4),
                      _attribute_int("block_size", GROUP),
                      _attribute_int("accuracy_level", accuracy_level)]
        nodes = [_node("MatMulNBits", ["x", "w", "w_scale", "w_zero", "", "bias"], ["y"],
                       domain="com.microsoft", attributes=attributes)]
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(_model(nodes, inits, m, k, n), options,
                                providers=["CPUExecutionProvider"])


# ---------------------------------------------------------------------------
# Timing


def per_call(call: Callable[[], None], seconds: float) -> Callable[[], Tuple[float, float]]:
    """A timer of `call`: each use runs it for about `seconds` and returns s per call, wall
    clock and the process's CPU time (every thread's, spinning included)."""
    start = time.perf_counter()
    call()
    once = max(time.perf_counter() - start, 1e-7)
    count = max(1, int(seconds / once))

    def measure() -> Tuple[float, float]:
        begin, cpu = time.perf_counter(), time.process_time()
        for _ in range(count):
            call()
        return (time.perf_counter() - begin) / count, (time.process_time() - cpu) / count

    return measure


def kernel_direct(tool: str, kind: str, m: int, size: int, threads: int,
                  seconds: float) -> Tuple[Tuple[float, float], str]:
    """axrt_matmul_kernel_bench's seconds per call (wall clock, process CPU time) and the
    build it ran."""
    out = subprocess.run([tool, kind, str(m), str(size), str(size), str(threads), str(seconds)],
                         check=True, capture_output=True, text=True).stdout.split()
    return (float(out[0]), float(out[2]) if len(out) > 2 else float("nan")), out[1]


def medians(times: List[Tuple[float, float]]) -> Tuple[float, float]:
    """The median wall-clock and CPU times of per_call's or kernel_direct's rounds."""
    if not times:
        return float("nan"), float("nan")
    return statistics.median(w for w, _ in times), statistics.median(c for _, c in times)


def check(kind: str, got: np.ndarray, x: np.ndarray, value: np.ndarray, bias: np.ndarray) -> str:
    """axrt's result against the double-precision product with the exact weights
    (and, for q8, x quantized as the kernel does)."""
    if kind == "q8":
        x = quantize_rows(x)
    want = x.astype(np.float64) @ value.astype(np.float64) + bias
    bound = 1e-5 * (np.abs(x).astype(np.float64) @ np.abs(value).astype(np.float64)) + 1e-6
    worst = float(np.max(np.abs(got - want) / bound))
    if worst > 1.0:
        raise SystemExit(f"{kind}: axrt's result is outside the docs/kernels.md bound "
                         f"({worst:.2f} x the bound)")
    return f"{worst:.2f}"


ORT_OPS = {
    "f32": [("f32", 0, "MatMul+Add f32")],
    "f32nk": [("f32", 0, "MatMul+Add f32")],
    "bf16": [("bf16", 0, "MatMul+Add f32 (bf16 values)")],
    "int8": [("int8", 0, "DynamicQuantizeMatMul (u8 x s8)"),
             ("int8-dequantized", 0, "MatMul+Add f32 (dequantized)")],
    "awq": [("awq", 0, "MatMulNBits 4-bit, accuracy 0"),
            ("awq", 4, "MatMulNBits 4-bit, accuracy 4")],
    "q8": [("awq", 4, "MatMulNBits 4-bit, accuracy 4")],
}
# The ORT ops' names in the records of --json, by (ORT kind, accuracy level).
ORT_IDS = {("f32", 0): "MatMul", ("bf16", 0): "MatMul", ("int8", 0): "DynamicQuantizeMatMul",
           ("int8-dequantized", 0): "MatMul_dequantized", ("awq", 0): "MatMulNBits_acc0",
           ("awq", 4): "MatMulNBits_acc4"}
KERNELS = {"f32": "axrt_matmul_f32", "f32nk": "axrt_matmul_f32_nk", "bf16": "axrt_matmul_bf16_f32",
           "int8": "axrt_matmul_int8_pc_f32", "awq": "axrt_matmul_awq_int4_f32",
           "q8": "axrt_matmul_gptq_int4_q8_f32"}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", default="f32,f32nk,bf16,int8,awq,q8")
    parser.add_argument("--rows", default="1,16,256", help="values of M")
    parser.add_argument("--sizes", default="1024,4096", help="values of K = N")
    parser.add_argument("--threads", type=int, default=0,
                        help="ORT intra-op threads (default: axrt's CPU device compute units)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.1, help="per side, per round")
    parser.add_argument("--kernel-bench", default="",
                        help="path of axrt_matmul_kernel_bench, to time the kernels directly too")
    parser.add_argument("--json", default="",
                        help="also write the records of bench_results.py to this file")
    args = parser.parse_args(argv)
    records: List[dict] = []

    def write_json(skipped: Optional[str] = None) -> None:
        if args.json:
            from bench_results import write_records
            write_records(args.json, "matmul_vs_onnxruntime", records, skipped)

    try:
        import onnxruntime as ort
    except ImportError:
        print("matmul_vs_onnxruntime: onnxruntime is not installed (pip install onnxruntime); "
              "skipped")
        write_json("onnxruntime is not installed")
        return 0
    import axrt

    device = axrt.device("cpu:0")
    threads = args.threads or device.compute_units
    tool = args.kernel_bench if args.kernel_bench and os.path.exists(args.kernel_bench) else ""
    print(f"axrt {axrt.__version__} on {device.id} ({device.compute_units} threads), "
          f"onnxruntime {ort.__version__} ({threads} intra-op threads), numpy {np.__version__}, "
          f"Python {platform.python_version()}, {platform.machine()}, "
          f"AXRT_CPU_ISA={os.environ.get('AXRT_CPU_ISA', '(unset)')}")
    print(f"median of {args.rounds} rounds; speed = ORT time / axrt time (> 1: axrt faster); "
          "'runtime': invoke + synchronize on cpu:0; 'kernel': the kernel called directly"
          + ("" if tool else " (not timed: no --kernel-bench)"))
    print(f"{'kernel':25} {'M':>4} {'K=N':>5} {'runtime us':>10} {'kernel us':>9}  "
          f"{'ORT op':32} {'ORT us':>8} {'speed runtime':>13} {'speed kernel':>12} "
          f"{'err/bound':>9}")
    stream = device.default_stream
    for size in [int(v) for v in args.sizes.split(",")]:
        layer = Layer(size, size, seed=size)
        for kind in args.kinds.split(","):
            for m in [int(r) for r in args.rows.split(",")]:
                x = np.random.default_rng(m).uniform(-1, 1, size=(m, size)).astype(np.float32)
                exe, value = axrt_layer(kind, layer, m)
                out = axrt.empty((m, size), "f32", device=device)
                main_fn = exe.main

                def axrt_call() -> None:
                    main_fn(x, out=out)
                    stream.synchronize()

                axrt_call()
                error = check(kind, np.asarray(out), x, value, layer.bias)
                runtime_timer = per_call(axrt_call, args.seconds)
                figures: Dict[str, List[Tuple[float, float]]] = {"runtime": [], "kernel": []}
                for op in ORT_OPS[kind]:
                    figures[op[2]] = []
                isa = ""
                for _ in range(args.rounds):
                    figures["runtime"].append(runtime_timer())
                    if tool:
                        t, isa = kernel_direct(tool, kind, m, size, threads, args.seconds)
                        figures["kernel"].append(t)
                    for ort_kind, level, name in ORT_OPS[kind]:
                        session = ort_layer(ort, ort_kind, layer, m, threads, level)
                        feeds = {"x": x}
                        timer = per_call(lambda: session.run(None, feeds), args.seconds)
                        figures[name].append(timer())
                        del session, timer
                        gc.collect()
                (t_runtime, c_runtime) = medians(figures["runtime"])
                (t_kernel, c_kernel) = medians(figures["kernel"])
                for ort_kind, level, name in ORT_OPS[kind]:
                    t_ort, c_ort = medians(figures[name])
                    print(f"{KERNELS[kind]:25} {m:4} {size:5} {t_runtime * 1e6:10.1f} "
                          f"{t_kernel * 1e6:9.1f}  {name:32} {t_ort * 1e6:8.1f} "
                          f"{t_ort / t_runtime:13.2f} {t_ort / t_kernel:12.2f} {error:>9}")
                    # Each side twice: wall clock, and process CPU time ("/cpu"; with
                    # one thread a side, the work itself, whatever else the machine runs).
                    for side, clock, t, t_anchor in (
                            ("runtime", "", t_runtime, t_ort), ("kernel", "", t_kernel, t_ort),
                            ("runtime", "/cpu", c_runtime, c_ort),
                            ("kernel", "/cpu", c_kernel, c_ort)):
                        if t == t:  # not NaN: the kernel side needs --kernel-bench
                            records.append({
                                "name": f"{KERNELS[kind]}/M:{m}/KN:{size}/{side}"
                                        f"/{ORT_IDS[(ort_kind, level)]}{clock}",
                                "unit": "us", "axrt": t * 1e6, "anchor": t_anchor * 1e6,
                                "anchor_name": f"ONNX Runtime {name}",
                                "higher_is_better": False, "threads": threads})
                sys.stdout.flush()
                del exe, out
    if tool:
        print(f"kernel build: {isa}")
    write_json()
    return 0


if __name__ == "__main__":
    sys.exit(main())
