"""axrt functions as PyTorch custom operators (axrt.torch.register): eager,
autograd through the executable's backward functions (gradcheck in float64),
torch.library.opcheck, torch.compile(fullgraph=True) with static and dynamic
shapes, mutable inputs, and refusals. References are torch's own ops."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="tools/bootstrap.sh installs torch (CPU)")

import axrt  # noqa: E402
import axrt.torch as axt  # noqa: E402
from axrt.builder import Buffer, Scalar  # noqa: E402
import torch_support  # noqa: E402

NS = "axrt_test"


@pytest.fixture(scope="module")
def exe(tmp_path_factory):
    return torch_support.load(tmp_path_factory.mktemp("torch_ops"))


@pytest.fixture(scope="module")
def ops(exe):
    registered = axt.register(exe, NS)
    assert set(registered) == set(exe)
    assert registered["tanh2"].backward.name == "tanh2_backward"
    assert registered["tanh2_f32"].backward is None
    return getattr(torch.ops, NS)


def f64(*shape, grad=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=torch.float64, generator=g).requires_grad_(grad)


def test_eager_matches_torch(ops):
    x, a, b, m = f64(100), f64(33, seed=1), f64(33, seed=2), f64(7, 13, seed=3)
    torch.testing.assert_close(ops.tanh2(x), 2 * torch.tanh(x), rtol=0, atol=1e-15)
    torch.testing.assert_close(ops.mul(a, b), a * b, rtol=0, atol=0)
    torch.testing.assert_close(ops.rowsum(m), m.sum(dim=1), rtol=1e-14, atol=1e-14)
    x32 = x.float()
    torch.testing.assert_close(ops.tanh2_f32(x32), 2 * torch.tanh(x32), rtol=1e-6, atol=1e-6)
    # Non-contiguous inputs are made contiguous first.
    torch.testing.assert_close(ops.rowsum(m.t()), m.t().sum(dim=1), rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(ops.tanh2(x[::3]), 2 * torch.tanh(x[::3]), rtol=0, atol=1e-15)
    # Empty tensors: the symbolic dimension may be 0.
    assert ops.tanh2(f64(0)).shape == (0,)


def test_outputs_are_torch_tensors_over_axrt_memory(ops):
    y = ops.tanh2(f64(8))
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float64 and y.device.type == "cpu"
    ga, gb = ops.mul_backward(f64(5), f64(5, seed=1), f64(5, seed=2))
    assert ga.shape == gb.shape == (5,)


@pytest.mark.parametrize("name,shapes", [("tanh2", [(9,)]), ("mul", [(6,), (6,)]),
                                         ("rowsum", [(4, 5)])])
def test_gradcheck_in_double_precision(ops, name, shapes):
    inputs = tuple(f64(*s, grad=True, seed=i) for i, s in enumerate(shapes))
    assert torch.autograd.gradcheck(getattr(ops, name), inputs)


def test_backward_matches_torch_autograd(ops):
    a, b = f64(16, grad=True), f64(16, grad=True, seed=1)
    (ops.mul(ops.tanh2(a), b) * torch.arange(16.0, dtype=torch.float64)).sum().backward()
    ra, rb = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    (2 * torch.tanh(ra) * rb * torch.arange(16.0, dtype=torch.float64)).sum().backward()
    torch.testing.assert_close(a.grad, ra.grad, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(b.grad, rb.grad, rtol=1e-13, atol=1e-13)
    # The backward functions are operators too.
    a, b = f64(5, grad=True), f64(5, grad=True, seed=1)
    ga, gb = ops.mul_backward(a, b, torch.ones(5, dtype=torch.float64))
    torch.testing.assert_close(ga, b.detach())


@pytest.mark.parametrize("name,args", [
    ("tanh2", lambda: (f64(10),)),
    ("tanh2_f32", lambda: (f64(10).float(),)),
    ("mul", lambda: (f64(10), f64(10, seed=1))),
    ("rowsum", lambda: (f64(3, 4),)),
    ("tanh2_backward", lambda: (f64(10), f64(10, seed=1))),
    ("mul_backward", lambda: (f64(10), f64(10, seed=1), f64(10, seed=2))),
    ("rowsum_backward", lambda: (f64(3, 4), f64(3, seed=1))),
    ("accumulate", lambda: (f64(10), f64(10, seed=1))),
])
def test_opcheck(ops, name, args):
    torch.library.opcheck(getattr(ops, name).default, args())


def test_opcheck_with_gradients(ops):
    torch.library.opcheck(ops.mul.default, (f64(10, grad=True), f64(10, grad=True, seed=1)))
    torch.library.opcheck(ops.rowsum.default, (f64(3, 4, grad=True),))


def test_mutable_input_is_written_in_place(ops):
    acc = torch.zeros(6, dtype=torch.float64)
    pointer = acc.data_ptr()
    x = torch.arange(6, dtype=torch.float64)
    y = ops.accumulate(acc, x)
    y = ops.accumulate(acc, x)
    assert acc.data_ptr() == pointer
    torch.testing.assert_close(acc, 2 * x)
    torch.testing.assert_close(y, 2 * x)
    assert "Tensor(a0!) acc" in str(ops.accumulate.default._schema)


def model(ops):
    def f(x, y):
        return ops.rowsum(ops.mul(ops.tanh2(x), y).reshape(4, -1)) + 1
    return f


def test_compile_fullgraph_static_and_dynamic(ops):
    f = model(ops)
    compiled = torch.compile(f, fullgraph=True)
    for n in (8, 8, 12):
        x, y = f64(n), f64(n, seed=1)
        torch.testing.assert_close(compiled(x, y), f(x, y), rtol=1e-14, atol=1e-14)
    dynamic = torch.compile(f, fullgraph=True, dynamic=True)
    for n in (16, 20, 24):
        x, y = f64(n), f64(n, seed=1)
        torch.testing.assert_close(dynamic(x, y), f(x, y), rtol=1e-14, atol=1e-14)
    explanation = torch._dynamo.explain(f)(f64(8), f64(8, seed=1))
    assert explanation.graph_break_count == 0


def test_compiled_training_steps(ops):
    """A module whose layer is an axrt operator, trained with the gradient
    through it, eager and compiled: the loss falls and both agree."""

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.full((32,), 0.5, dtype=torch.float64))

        def forward(self, x):
            return ops.mul(ops.tanh2(x), self.scale)

    def train(layer, step_fn, steps=30):
        opt = torch.optim.SGD(layer.parameters(), lr=0.05)
        x = f64(32, seed=5)
        target = 2 * torch.tanh(x) * 1.5  # reachable: scale 1.5 everywhere
        losses = []
        for _ in range(steps):
            opt.zero_grad()
            loss = ((step_fn(x) - target) ** 2).sum()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, layer.scale.detach().clone()

    eager_layer, compiled_layer = Layer(), Layer()
    eager_losses, eager_scale = train(eager_layer, eager_layer)
    compiled_losses, compiled_scale = train(compiled_layer,
                                            torch.compile(compiled_layer, fullgraph=True))
    assert eager_losses[-1] < 0.01 * eager_losses[0]
    np.testing.assert_allclose(compiled_losses, eager_losses, rtol=1e-12)
    torch.testing.assert_close(compiled_scale, eager_scale, rtol=1e-12, atol=1e-12)


def test_refusals(exe, ops, tmp_path):
    with pytest.raises(ValueError, match="namespace"):
        axt.register(exe, "not a namespace")
    with pytest.raises(RuntimeError, match="already registered"):
        axt.register(exe, NS)
    with pytest.raises(TypeError, match="axrt.Function or axrt.Executable"):
        axt.register("tanh2", "elsewhere")
    # Bad calls are axrt's errors, raised before anything runs.
    with pytest.raises(axrt.InvalidArgumentError, match="f64"):
        ops.tanh2(torch.ones(4, dtype=torch.float32))
    with pytest.raises(axrt.InvalidArgumentError):
        ops.mul(f64(4), f64(5))
    # A backward that breaks the convention is refused before registering.
    b = axrt.Builder()
    cpu = b.kernel_library("axrt.cpu")
    add = b.kernel("axrt_add_f32", cpu, params=[Buffer("a"), Buffer("b"),
                                                Buffer("out", access="write"),
                                                Scalar("n", "uint64")])
    for name, inputs in (("f", [("x", "f32", (4,))]),
                         ("f_backward", [("x", "f32", (4,))])):  # lacks the output's gradient
        fb = b.function(name, inputs=inputs, outputs=[("y", "f32", (4,))])
        fb.dispatch(add, grid=1, args=[fb.input("x"), fb.input("x"), fb.output("y"), 4])
    bad = axrt.load(b.to_bytes())
    with pytest.raises(ValueError, match="backward convention"):
        axt.register(bad, "axrt_test_bad")
    with pytest.raises(AttributeError):
        torch.ops.axrt_test_bad.f  # nothing of the refused executable was registered
    # Registering one function alone leaves out a backward it cannot see.
    single = axt.register(bad["f"], "axrt_test_single")
    assert single["f"].backward is None
    y = torch.ops.axrt_test_single.f(torch.ones(4))
    torch.testing.assert_close(y, torch.full((4,), 2.0))


def test_element_types_are_named_as_signatures_name_them():
    # Signatures say "int32", "fp8_e4m3fn" (axrt_dtype_name); each maps to
    # torch's type of the same width and kind.
    assert axt.DTYPES["int32"] is torch.int32
    assert axt.DTYPES["uint8"] is torch.uint8
    assert axt.DTYPES["bf16"] is torch.bfloat16
    assert axt.DTYPES["fp8_e4m3fn"] is torch.float8_e4m3fn
    assert "int4" not in axt.DTYPES
