"""Build an .axe executable from numpy weights, load it and run it.

    y = gelu(x @ W + b),  x: f32[batch, 256], W: f32[256, 128], batch <= 64

Two kernels of the built-in CPU library do the work (docs/kernels.md):
axrt_matmul_f32 writes x @ W + b into the output, and axrt_gelu_f32 then
applies GELU to it in place.

    python quickstart.py [MODEL.axe]    # default: a temporary file

Prints the largest difference from a numpy reference; exits 1 when it is
beyond the kernels' accuracy.
"""

import math
import os
import sys
import tempfile

import numpy as np

import axrt
from axrt.builder import Buffer, Scalar, ceildiv

IN, OUT, MAX_BATCH = 256, 128, 64


def build(path, weight, bias):
    b = axrt.Builder(producer="quickstart", producer_version="1.0")
    cpu = b.kernel_library("axrt.cpu", min_version=1)
    matmul = b.kernel("axrt_matmul_f32", cpu, params=[
        Buffer("x"), Buffer("w"), Buffer("bias"), Buffer("y", access="write"),
        Scalar("M", "uint64"), Scalar("N", "uint64"), Scalar("K", "uint64")])
    gelu = b.kernel("axrt_gelu_f32", cpu, params=[
        Buffer("x"), Buffer("out", access="write"), Scalar("n", "uint64")])
    w = b.constant("fc.weight", weight)  # f32 [IN, OUT], as axrt_matmul_f32 takes it
    c = b.constant("fc.bias", bias)

    main = b.function("main", inputs=[("x", "f32", ("batch", IN))],
                      outputs=[("y", "f32", ("batch", OUT))], symbols={"batch": MAX_BATCH})
    batch = main.sym("batch")  # known when main is called
    x, y = main.input("x"), main.output("y")
    # Matmul grid: one workgroup per 64x64 tile of y; elementwise: per 4096 elements.
    main.dispatch(matmul, grid=(ceildiv(OUT, 64), ceildiv(batch, 64)),
                  args=[x, w, c, y, batch, OUT, IN])
    main.dispatch(gelu, grid=ceildiv(batch * OUT, 4096), args=[y, y, batch * OUT])
    b.save(path)


def reference(x, weight, bias):
    h = x.astype(np.float64) @ weight.astype(np.float64) + bias
    return 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2)))


def main():
    rng = np.random.default_rng(0)
    weight = rng.uniform(-1, 1, (IN, OUT)).astype(np.float32) / math.sqrt(IN)
    bias = rng.uniform(-0.1, 0.1, OUT).astype(np.float32)
    x = rng.standard_normal((8, IN), dtype=np.float32)

    with tempfile.TemporaryDirectory() as tmp:
        path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tmp, "quickstart.axe")
        build(path, weight, bias)
        exe = axrt.load(path)
        print(exe)
        y = exe.main(x).numpy()

    error = np.abs(y - reference(x, weight, bias)).max()
    print(f"y: {y.shape} {y.dtype}, max |y - reference| = {error:.3g}")
    return 0 if error <= 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
