"""Python-layer benchmarks, each against its baseline in the same run.

1. exe.main(a, b) for a one-kernel function (axrt_add_f32 on 256 floats)
   against the same calls made straight through the C API
   (axrt_function_invoke, results released) with the inputs converted once.
2. DLPack export + import: np.from_dlpack(axrt tensor) and
   axrt.from_dlpack(numpy array) against numpy's own np.from_dlpack(array).

Times are the best of several repeats, in microseconds per call; ratios are
against the baseline. Run with PYTHONPATH naming the built package (`make
bench` does); --json FILE also writes the figures as records for the
regression gate (bench_results.py)."""

import argparse
import sys
import time

import numpy as np

import axrt
from axrt._axrt import _c_api_call_loop
from axrt.builder import Buffer, Scalar, ceildiv

REPEATS = 7


# The process CPU time of the best repeat of each figure, by figure: what
# --json records beside the wall clock, since it leaves out the time the
# process waited for a core while other processes ran.
CPU_US = {}


def best_us(fn, iterations, key=None):
    best = best_cpu = float("inf")
    for _ in range(REPEATS):
        start, cpu = time.perf_counter(), time.process_time()
        fn(iterations)
        best_cpu = min(best_cpu, time.process_time() - cpu)
        best = min(best, time.perf_counter() - start)
    CPU_US[key or fn.__name__] = best_cpu / iterations * 1e6
    return best / iterations * 1e6


def one_kernel_executable():
    b = axrt.Builder(producer="python_bench")
    cpu = b.kernel_library("axrt.cpu")
    add = b.kernel("axrt_add_f32", cpu, params=[
        Buffer("a"), Buffer("b"), Buffer("out", access="write"), Scalar("n", "uint64")])
    f = b.function("main", inputs=[("a", "f32", ("n",)), ("b", "f32", ("n",))],
                   outputs=[("out", "f32", ("n",))], symbols={"n": 1 << 20})
    n = f.sym("n")
    f.dispatch(add, grid=ceildiv(n, 4096), args=[f.input(0), f.input(1), f.output(0), n])
    return axrt.load(b.to_bytes())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", default="",
                        help="also write the records of bench_results.py to this file")
    args = parser.parse_args()
    exe = one_kernel_executable()
    a = np.ones(256, np.float32)
    b = np.ones(256, np.float32)
    main_fn = exe.main
    t = exe.main(a, b)

    def python_calls(n):
        for _ in range(n):
            main_fn(a, b)
        exe.device.default_stream.synchronize()

    def python_calls_tensors(n):
        for _ in range(n):
            main_fn(t, t)
        exe.device.default_stream.synchronize()

    # The C loop times itself; take its best too.
    c_best = min(_c_api_call_loop(main_fn, a, b, iterations=20000) for _ in range(REPEATS)) / 20000 * 1e6
    best_us(lambda n: _c_api_call_loop(main_fn, a, b, iterations=n), 20000, "c_api")
    py_numpy = best_us(python_calls, 20000)
    py_tensor = best_us(python_calls_tensors, 20000)

    x = np.ones((64, 64), np.float32)

    def numpy_numpy(n):
        for _ in range(n):
            np.from_dlpack(x)

    def axrt_to_numpy(n):
        for _ in range(n):
            np.from_dlpack(t)

    def numpy_to_axrt(n):
        for _ in range(n):
            axrt.from_dlpack(x)

    base = best_us(numpy_numpy, 50000)
    export = best_us(axrt_to_numpy, 50000)
    imp = best_us(numpy_to_axrt, 50000)

    rows = [
        ("exe.main(a, b), numpy inputs", py_numpy, c_best, "C API invoke"),
        ("exe.main(t, t), axrt.Tensor inputs", py_tensor, c_best, "C API invoke"),
        ("C API invoke + release (baseline)", c_best, c_best, "C API invoke"),
        ("np.from_dlpack(axrt.Tensor)", export, base, "np.from_dlpack(ndarray)"),
        ("axrt.from_dlpack(ndarray)", imp, base, "np.from_dlpack(ndarray)"),
        ("np.from_dlpack(ndarray) (baseline)", base, base, "np.from_dlpack(ndarray)"),
    ]
    print(f"axrt {axrt.__version__}, Python {sys.version.split()[0]}, numpy {np.__version__}, "
          f"device {exe.device.id} ({exe.device.name})")
    print(f"{'what':40} {'us/call':>9} {'ratio':>7}  against")
    for name, us, baseline, against in rows:
        print(f"{name:40} {us:9.3f} {us / baseline:7.2f}  {against}")
    if args.json:
        from bench_results import write_records
        cpu = CPU_US
        records = [
            ("call_numpy_inputs", py_numpy, c_best, "C API invoke + release"),
            ("call_tensor_inputs", py_tensor, c_best, "C API invoke + release"),
            ("dlpack_export_to_numpy", export, base, "np.from_dlpack(ndarray)"),
            ("dlpack_import_from_numpy", imp, base, "np.from_dlpack(ndarray)"),
            ("call_numpy_inputs/cpu", cpu["python_calls"], cpu["c_api"], "C API invoke + release"),
            ("call_tensor_inputs/cpu", cpu["python_calls_tensors"], cpu["c_api"],
             "C API invoke + release"),
            ("dlpack_export_to_numpy/cpu", cpu["axrt_to_numpy"], cpu["numpy_numpy"],
             "np.from_dlpack(ndarray)"),
            ("dlpack_import_from_numpy/cpu", cpu["numpy_to_axrt"], cpu["numpy_numpy"],
             "np.from_dlpack(ndarray)"),
        ]
        write_records(args.json, "python_bench", [
            {"name": name, "unit": "us", "axrt": us, "anchor": anchor, "anchor_name": against,
             "higher_is_better": False} for name, us, anchor, against in records])


if __name__ == "__main__":
    main()
