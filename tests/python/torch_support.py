"""The executable of the PyTorch operator tests: functions over the kernels
of examples/python/torch_kernels.c (built here with the C compiler,
embedded as a host shared object), with backward functions named by
axrt.torch's convention."""
import os
import shutil
import subprocess
from pathlib import Path

import axrt
from axrt.builder import Buffer, Scalar

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "include"
SOURCE = ROOT / "examples" / "python" / "torch_kernels.c"


def build_kernels(directory: Path) -> bytes:
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError(f"no C compiler (cc) to build {SOURCE}")
    out = directory / "torch_kernels.so"
    subprocess.run([compiler, "-std=c11", "-O2", "-shared", "-fPIC", "-fvisibility=hidden",
                    f"-I{INCLUDE}", str(SOURCE), "-o", str(out),
                    "-lm"], check=True)
    return out.read_bytes()


def build_executable(directory: Path) -> Path:
    b = axrt.Builder(producer="test_torch_ops")
    code = b.code_object("host_shared_object", axrt._axrt.AxeBuilder.HOST_TARGET,
                         build_kernels(directory))
    n_bound, dim_bound = 1 << 16, 4096

    def kernel(name, *buffers, scalars=("n",)):
        params = [Buffer(p, access=a) for p, a in buffers] + [Scalar(s, "uint64") for s in scalars]
        return b.kernel(name, code, params)

    for t, suffix in (("f64", ""), ("f32", "_f32")):
        s = t
        tanh2 = kernel(f"tanh2_{s}", ("x", "read"), ("y", "write"))
        f = b.function(f"tanh2{suffix}", inputs=[("x", t, ("n",))], outputs=[("y", t, ("n",))],
                       symbols={"n": n_bound})
        f.dispatch(tanh2, grid=1, args=[f.input("x"), f.output("y"), f.sym("n")])
        if t != "f64":
            continue
        tanh2_grad = kernel(f"tanh2_grad_{s}", ("x", "read"), ("g", "read"), ("out", "write"))
        f = b.function("tanh2_backward", inputs=[("x", t, ("n",)), ("grad_y", t, ("n",))],
                       outputs=[("grad_x", t, ("n",))], symbols={"n": n_bound})
        f.dispatch(tanh2_grad, grid=1,
                   args=[f.input("x"), f.input("grad_y"), f.output("grad_x"), f.sym("n")])

        mul = kernel(f"mul_{s}", ("x", "read"), ("g", "read"), ("out", "write"))
        f = b.function("mul", inputs=[("a", t, ("n",)), ("b", t, ("n",))],
                       outputs=[("c", t, ("n",))], symbols={"n": n_bound})
        f.dispatch(mul, grid=1, args=[f.input("a"), f.input("b"), f.output("c"), f.sym("n")])
        mul_grad = kernel(f"mul_grad_{s}", ("a", "read"), ("b", "read"), ("gc", "read"),
                          ("ga", "write"), ("gb", "write"))
        f = b.function("mul_backward",
                       inputs=[("a", t, ("n",)), ("b", t, ("n",)), ("grad_c", t, ("n",))],
                       outputs=[("grad_a", t, ("n",)), ("grad_b", t, ("n",))],
                       symbols={"n": n_bound})
        f.dispatch(mul_grad, grid=1, args=[f.input("a"), f.input("b"), f.input("grad_c"),
                                           f.output("grad_a"), f.output("grad_b"), f.sym("n")])

        rows = {"rows": dim_bound, "cols": dim_bound}
        rowsum = kernel(f"rowsum_{s}", ("x", "read"), ("y", "write"), scalars=("rows", "cols"))
        f = b.function("rowsum", inputs=[("x", t, ("rows", "cols"))],
                       outputs=[("y", t, ("rows",))], symbols=rows)
        f.dispatch(rowsum, grid=1,
                   args=[f.input("x"), f.output("y"), f.sym("rows"), f.sym("cols")])
        rowsum_grad = kernel(f"rowsum_grad_{s}", ("x", "read"), ("y", "write"),
                             scalars=("rows", "cols"))
        f = b.function("rowsum_backward",
                       inputs=[("x", t, ("rows", "cols")), ("grad_y", t, ("rows",))],
                       outputs=[("grad_x", t, ("rows", "cols"))], symbols=rows)
        f.dispatch(rowsum_grad, grid=1,
                   args=[f.input("grad_y"), f.output("grad_x"), f.sym("rows"), f.sym("cols")])

        accumulate = kernel(f"accumulate_{s}", ("acc", "read_write"), ("x", "read"),
                            ("y", "write"))
        f = b.function("accumulate", inputs=[("acc", t, ("n",)), ("x", t, ("n",))],
                       outputs=[("y", t, ("n",))], symbols={"n": n_bound}, mutable=["acc"])
        f.dispatch(accumulate, grid=1,
                   args=[f.input("acc"), f.input("x"), f.output("y"), f.sym("n")])
    path = directory / "torch_ops.axe"
    b.save(path)
    return path


def load(directory: Path):
    return axrt.load(build_executable(directory), allow_native_code=True)
