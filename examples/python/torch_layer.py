"""An axrt function inside a PyTorch model, trained through it.

    python torch_layer.py [--backend inductor]

Builds torch_kernels.c (next to this file) with the C compiler into a host
shared object, writes an .axe executable with two functions over it,

    act(x: f32[n]) -> y: f32[n]                      y = 2 tanh(x)
    act_backward(x: f32[n], grad_y: f32[n]) -> grad_x: f32[n]

registers them as the PyTorch operator torch.ops.example.act (act_backward
becomes its gradient by axrt.torch's naming convention), and trains a small
MLP whose activation is that operator: first eagerly, then compiled with
torch.compile(fullgraph=True), with torch.compile's backend (--backend:
inductor by default; the test run takes aot_eager, which traces the same
graphs through the operator and its gradient without generating and
compiling C++ for the rest: tests/python/test_torch_ops.py compiles with
inductor). Prints the losses; exits 1 unless training brought the loss down
and the operator's gradient matched torch's own 2 tanh.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

import axrt
import axrt.torch
from axrt.builder import Buffer, Scalar

HERE = Path(__file__).resolve().parent
INCLUDE = HERE.parents[1] / "include"


def build_kernels(directory: Path) -> bytes:
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        sys.exit("torch_layer.py needs a C compiler (cc) to build torch_kernels.c")
    library = directory / "torch_kernels.so"
    subprocess.run([compiler, "-std=c11", "-O2", "-shared", "-fPIC", "-fvisibility=hidden",
                    f"-I{INCLUDE}", str(HERE / "torch_kernels.c"), "-o", str(library), "-lm"],
                   check=True)
    return library.read_bytes()


def build_executable(directory: Path) -> Path:
    b = axrt.Builder(producer="torch_layer example", producer_version="1.0")
    code = b.code_object("host_shared_object", axrt._axrt.AxeBuilder.HOST_TARGET,
                         build_kernels(directory))
    forward = b.kernel("tanh2_f32", code, [Buffer("x"), Buffer("y", access="write"),
                                           Scalar("n", "uint64")])
    backward = b.kernel("tanh2_grad_f32", code, [Buffer("x"), Buffer("g"),
                                                 Buffer("out", access="write"),
                                                 Scalar("n", "uint64")])
    f = b.function("act", inputs=[("x", "f32", ("n",))], outputs=[("y", "f32", ("n",))],
                   symbols={"n": 1 << 20})
    f.dispatch(forward, grid=1, args=[f.input("x"), f.output("y"), f.sym("n")])
    g = b.function(axrt.torch.backward_name("act"),
                   inputs=[("x", "f32", ("n",)), ("grad_y", "f32", ("n",))],
                   outputs=[("grad_x", "f32", ("n",))], symbols={"n": 1 << 20})
    g.dispatch(backward, grid=1,
               args=[g.input("x"), g.input("grad_y"), g.output("grad_x"), g.sym("n")])
    path = directory / "torch_layer.axe"
    b.save(path)
    return path


class AxrtActivation(torch.nn.Module):
    def forward(self, x):
        # The operator takes a 1-D tensor of any length (the symbol n).
        return torch.ops.example.act(x.reshape(-1)).reshape(x.shape)


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 32), AxrtActivation(), torch.nn.Linear(32, 1))


def train(model, step, steps=60):
    torch.manual_seed(1)
    x = torch.randn(256, 4)
    y = (x[:, :1] * x[:, 1:2]).sin() + 0.5 * x[:, 2:3]
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(step(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main():
    parser = argparse.ArgumentParser(description="An axrt function inside a PyTorch model.")
    parser.add_argument("--backend", default="inductor", help="torch.compile's backend")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        executable = axrt.load(build_executable(Path(tmp)), allow_native_code=True)
    axrt.torch.register(executable, "example")

    # The operator's gradient against torch's own 2 tanh.
    x = torch.randn(1000, requires_grad=True)
    torch.ops.example.act(x).sum().backward()
    reference = 2 * (1 - torch.tanh(x.detach()) ** 2)
    gradient_error = (x.grad - reference).abs().max().item()

    eager_model = make_model()
    eager = train(eager_model, eager_model)
    compiled_model = make_model()
    compiled = train(compiled_model, torch.compile(compiled_model, fullgraph=True,
                                                   backend=args.backend))
    print(f"gradient vs torch: max |difference| {gradient_error:.2e}")
    print(f"eager:    loss {eager[0]:.4f} -> {eager[-1]:.4f} in {len(eager)} steps")
    print(f"compiled: loss {compiled[0]:.4f} -> {compiled[-1]:.4f} in {len(compiled)} steps")
    ok = gradient_error < 1e-5 and eager[-1] < 0.5 * eager[0] and \
        abs(compiled[-1] - eager[-1]) < 1e-3 * max(1.0, eager[-1])
    print("torch_layer: OK" if ok else "torch_layer: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
