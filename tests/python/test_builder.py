"""Tests of axrt.builder (and of the private _axrt.AxeBuilder under it).

Tests marked `loads` load and run the files they build with axrt.load; they
need the whole extension module and fail, never skip, without it.
"""

import concurrent.futures
import contextlib
import re
import struct

import numpy as np
import pytest

import axrt
from axrt import builder as axb
from axrt._axrt import AxeBuilder
from axrt.builder import (Buffer, Builder, Expr, Packing, QuantLayout, Scalar,
                          ScaleRef, ZeroPoint, ceildiv, literal, maximum, minimum)

loads = pytest.mark.loads

MAGIC = b"\x89AXE\r\n\x1a\n"
CONST, SYMBOL, ADD, SUB, MUL, DIV_FLOOR, DIV_CEIL, MOD, MINIMUM, MAXIMUM = range(1, 11)

ELEMENTWISE = [Buffer("a"), Buffer("b"), Buffer("out", access="write"), Scalar("n", "uint64")]


def add_kernel(b, name="axrt_add_f32"):
    return b.kernel(name, b.kernel_library("axrt.cpu", min_version=1), ELEMENTWISE)


def add_executable(bias):
    """main(x: f32[n]) -> y = x + bias[:n], n <= len(bias)."""
    b = Builder(producer="test_builder", producer_version="1.2")
    add = add_kernel(b)
    c = b.constant("bias", bias)
    f = b.function("main", inputs=[("x", "f32", ("n",))], outputs=[("y", "f32", ("n",))],
                   symbols={"n": len(bias)})
    n = f.sym("n")
    f.dispatch(add, grid=ceildiv(n, 4096), args=[f.input("x"), c, f.output("y"), n])
    return b


@contextlib.contextmanager
def expect_error(cls, *fragments):
    """pytest.raises for axrt error class `cls`, whose code it checks, and whose
    message (the runtime's, unchanged) holds every fragment."""
    code = re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__[:-len("Error")]).upper()
    with pytest.raises(cls) as info:
        yield info
    assert isinstance(info.value, axrt.Error)
    assert info.value.code == code
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))


# ---------------------------------------------------------------------------
# Writing files


def test_empty_builder_writes_a_format_1_4_file():
    data = Builder().to_bytes()
    assert data[:8] == MAGIC
    assert struct.unpack_from("<HH", data, 8) == (1, 4)
    assert struct.unpack_from("<Q", data, 48)[0] == len(data)


def test_save_writes_what_to_bytes_returns(tmp_path):
    b = add_executable(np.arange(8, dtype=np.float32))
    b.save(str(tmp_path / "a.axe"))
    b.save(tmp_path / "b.axe")  # os.PathLike
    data = b.to_bytes()
    assert (tmp_path / "a.axe").read_bytes() == data
    assert (tmp_path / "b.axe").read_bytes() == data


def test_output_is_deterministic():
    bias = np.linspace(0, 1, 16, dtype=np.float32)
    assert add_executable(bias).to_bytes() == add_executable(bias).to_bytes()


def test_builder_can_be_extended_after_writing():
    b = Builder()
    first = b.to_bytes()
    b.metadata("later", "yes")
    assert b.to_bytes() != first
    assert b"later" in b.to_bytes()


def test_producer_metadata_and_features_are_in_the_file():
    b = Builder(producer="mycompiler", producer_version="9.8.7")
    b.metadata("model.name", "tiny-mlp")
    b.metadata("license", "Apache-2.0")
    b.require_feature("quantization.v1")
    data = b.to_bytes()
    for text in (b"mycompiler", b"9.8.7", b"model.name", b"tiny-mlp", b"license",
                 b"Apache-2.0", b"quantization.v1"):
        assert text in data


def test_save_to_a_missing_directory_raises_the_runtime_error(tmp_path):
    with expect_error(axrt.UnavailableError, "axrt_axe_builder_write_file",
                      "cannot create a temporary file beside"):
        Builder().save(tmp_path / "missing" / "x.axe")
    assert not (tmp_path / "missing").exists()


def test_save_with_an_empty_path_is_invalid():
    with expect_error(axrt.InvalidArgumentError, "the output path is empty"):
        Builder().save("")


def test_writes_from_several_threads_agree():
    b = add_executable(np.ones(64, np.float32))
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: b.to_bytes(), range(16)))
    assert all(r == results[0] for r in results)


# ---------------------------------------------------------------------------
# Expressions


def two_symbol_function():
    b = Builder()
    return b.function("f", inputs=[("x", "f32", ("m", "n"))], symbols={"m": 8, "n": 16})


def test_expression_ops_are_reverse_polish():
    f = two_symbol_function()
    m, n = f.sym("m"), f.sym("n")
    assert m.ops == ((SYMBOL, 0),)
    assert n.ops == ((SYMBOL, 1),)
    assert literal(5).ops == ((CONST, 5),)
    assert (m + 1).ops == ((SYMBOL, 0), (CONST, 1), (ADD, 0))
    assert (1 + m).ops == ((CONST, 1), (SYMBOL, 0), (ADD, 0))
    assert (10 - n).ops == ((CONST, 10), (SYMBOL, 1), (SUB, 0))
    assert (m * n).ops == ((SYMBOL, 0), (SYMBOL, 1), (MUL, 0))
    assert (n // 4).ops == ((SYMBOL, 1), (CONST, 4), (DIV_FLOOR, 0))
    assert (100 // n).ops == ((CONST, 100), (SYMBOL, 1), (DIV_FLOOR, 0))
    assert (n % 3).ops == ((SYMBOL, 1), (CONST, 3), (MOD, 0))
    assert (7 % n).ops == ((CONST, 7), (SYMBOL, 1), (MOD, 0))
    assert ceildiv(m * n, 64).ops == (
        (SYMBOL, 0), (SYMBOL, 1), (MUL, 0), (CONST, 64), (DIV_CEIL, 0))
    assert minimum(n, 4).ops == ((SYMBOL, 1), (CONST, 4), (MINIMUM, 0))
    assert maximum(2, m).ops == ((CONST, 2), (SYMBOL, 0), (MAXIMUM, 0))
    assert (m * 4 + n).function is f
    assert literal(3).function is None


def test_expression_text_keeps_precedence():
    f = two_symbol_function()
    m, n = f.sym("m"), f.sym("n")
    assert str(m * 4 + 1) == "m * 4 + 1"
    assert str((m + 1) * 4) == "(m + 1) * 4"
    assert str(m - (n - 1)) == "m - (n - 1)"
    assert str(ceildiv(m * n, 64)) == "ceildiv(m * n, 64)"
    assert repr(minimum(m, n) // 2) == "Expr(minimum(m, n) // 2)"


def test_helpers_on_ints_compute_ints():
    assert ceildiv(10, 3) == 4 and ceildiv(9, 3) == 3 and ceildiv(0, 5) == 0
    assert minimum(3, 9) == 3 and maximum(3, 9) == 9
    assert isinstance(ceildiv(literal(10), 3), Expr)


def test_bad_expression_operands():
    f = two_symbol_function()
    g = two_symbol_function()
    n = f.sym("n")
    with pytest.raises(TypeError):
        n + 1.5
    with pytest.raises(TypeError):
        n / 2
    with pytest.raises(TypeError):
        n + True
    with pytest.raises(TypeError, match="no truth value"):
        bool(n)
    with pytest.raises(ValueError, match="must not be negative"):
        n - (-1)
    with pytest.raises(ValueError, match="below 2\\*\\*63"):
        literal(2 ** 63)
    with pytest.raises(TypeError):
        literal("3")
    with pytest.raises(ValueError, match="cannot mix the symbols of functions"):
        n + g.sym("n")
    with pytest.raises(ValueError, match="cannot mix"):
        ceildiv(n, g.sym("m"))
    with pytest.raises(KeyError, match="no symbol 'k'"):
        f.sym("k")


@loads
def test_expressions_evaluate_as_compiled():
    """Each row r of y is filled with r + 1 for `length_r(n)` bytes."""
    rows = [
        lambda n: n,
        lambda n: ceildiv(n, 3),
        lambda n: n // 3,
        lambda n: n % 5 + 1,
        lambda n: minimum(n, 7),
        lambda n: maximum(n, 7),
        lambda n: 2 * n - 3 * (n // 2),
        lambda n: 70 - n,
        lambda n: ceildiv(n * n, 100) % 64,
    ]
    b = Builder()
    f = b.function("main", inputs=[("x", "uint8", ("n",))],
                   outputs=[("y", "uint8", (len(rows) + 1, 64))], symbols={"n": 64})
    n, y = f.sym("n"), f.output("y")
    f.fill(y, (len(rows) + 1) * 64, 0)
    for r, length in enumerate(rows):
        f.fill(y, length(n), r + 1, offset=r * 64)
    # A symbolic offset: one byte at n // 2 of the last row.
    f.fill(y, 1, 255, offset=len(rows) * 64 + n // 2)
    exe = axrt.load(b.to_bytes())
    for count in (6, 7, 10, 33, 64):
        out = exe.main(np.zeros(count, np.uint8)).numpy()
        for r, length in enumerate(rows):
            expected = length(count)  # the same formula on ints
            assert (out[r, :expected] == r + 1).all() and (out[r, expected:] == 0).all(), (r, count)
        assert out[-1].nonzero()[0].tolist() == [count // 2]


@loads
def test_negative_difference_fails_the_call():
    b = Builder()
    f = b.function("main", inputs=[("x", "uint8", ("n",))], outputs=[("y", "uint8", (8,))],
                   symbols={"n": 64})
    f.fill(f.output("y"), 8 - f.sym("n"), 1)
    exe = axrt.load(b.to_bytes())
    assert exe.main(np.zeros(3, np.uint8)).numpy().tolist()[:5] == [1] * 5
    with expect_error(axrt.InvalidArgumentError, "command 0 length",
                      "a subtraction goes below zero"):
        exe.main(np.zeros(9, np.uint8))
    assert exe.main(np.zeros(6, np.uint8)).numpy().tolist()[:2] == [1] * 2


# ---------------------------------------------------------------------------
# Functions, dispatches, copies and fills


@loads
def test_add_kernel_runs_with_a_symbolic_dimension():
    bias = np.arange(64, dtype=np.float32)
    exe = axrt.load(add_executable(bias).to_bytes())
    assert exe.producer == ("test_builder", "1.2")
    x = np.linspace(-1, 1, 10, dtype=np.float32)
    np.testing.assert_array_equal(exe.main(x).numpy(), x + bias[:10])
    x = np.ones(64, np.float32)
    np.testing.assert_array_equal(exe.main(x).numpy(), x + bias)


@loads
def test_saved_file_loads_from_its_path(tmp_path):
    path = tmp_path / "add.axe"
    add_executable(np.ones(4, np.float32)).save(path)
    exe = axrt.load(str(path))
    np.testing.assert_array_equal(exe.main(np.zeros(4, np.float32)).numpy(), np.ones(4))
    (arg,) = exe.main.inputs
    assert arg["name"] == "x" and arg["dtype"] == "f32" and list(arg["shape"]) == ["n"]


@loads
def test_arena_copy_and_named_arguments():
    """y = (x + x) copied through the arena, with arguments given by name."""
    b = Builder()
    add = add_kernel(b)
    f = b.function("main", inputs=[("x", "f32", ("n",))], outputs=[("y", "f32", ("n",))],
                   symbols={"n": 256}, arena_size=256 * 4)
    n, x = f.sym("n"), f.input(0)
    tmp = f.arena(0, 256 * 4)
    f.dispatch(add, grid=ceildiv(n, 4096), args={"a": x, "b": x, "out": tmp, "n": n})
    f.copy(tmp, f.output("y"), n * 4)
    exe = axrt.load(b.to_bytes())
    x = np.arange(100, dtype=np.float32)
    np.testing.assert_array_equal(exe.main(x).numpy(), 2 * x)


@loads
def test_buffer_element_types_reach_the_dumps(tmp_path):
    """Buffer(dtype=) travels through the file to the runtime: a call's dump
    writes the arena slice a typed parameter wrote as that type, and the one
    an untyped parameter wrote as bytes."""
    b = Builder()
    cpu = b.kernel_library("axrt.cpu", min_version=1)
    typed = b.kernel("axrt_add_f32", cpu, [Buffer("a"), Buffer("b"),
                                            Buffer("out", "write", dtype="f32"),
                                            Scalar("n", "uint64")])
    untyped = b.kernel("add_untyped", cpu, ELEMENTWISE, entry_symbol="axrt_add_f32")
    f = b.function("main", inputs=[("x", "f32", (4,))], outputs=[("y", "f32", (4,))],
                   arena_size=32)
    x, first, second = f.input(0), f.arena(0, 16), f.arena(16, 16)
    f.dispatch(typed, grid=1, args=[x, x, first, 4])
    f.dispatch(untyped, grid=1, args=[first, x, second, 4])
    f.copy(second, f.output(0), 16)
    exe = axrt.load(b.to_bytes())
    x = np.array([1, 2, 3, 4], np.float32)
    np.testing.assert_array_equal(exe.main(x, dump_dir=tmp_path).numpy(), 3 * x)
    (call,) = tmp_path.iterdir()
    np.testing.assert_array_equal(np.load(call / "c000-axrt_add_f32-out.npy"), 2 * x)
    raw = np.load(call / "c001-add_untyped-out.npy")
    assert raw.dtype == np.uint8 and raw.shape == (16,)
    np.testing.assert_array_equal(raw.view(np.float32), 3 * x)
    # The copy into the output has the output's type.
    assert np.load(call / "c002-copy-dst.npy").dtype == np.float32


@loads
def test_copy_offsets_and_fill_patterns():
    b = Builder()
    table = b.constant("table", np.arange(16, dtype=np.uint32))
    f = b.function("main", inputs=[("x", "uint32", ("n",))], outputs=[("y", "uint32", (16,))],
                   symbols={"n": 8})
    n, y = f.sym("n"), f.output("y")
    f.fill(y, 64, 0xDEADBEEF, pattern_size=4)
    f.copy(table, y, n * 4, src_offset=n * 4, dst_offset=4)
    f.fill(y, 4, np.uint32(7), offset=60)
    exe = axrt.load(b.to_bytes())
    out = exe.main(np.zeros(3, np.uint32)).numpy()
    assert out.tolist() == [0xDEADBEEF, 3, 4, 5] + [0xDEADBEEF] * 11 + [7]


@loads
def test_float_fill_pattern():
    b = Builder()
    f = b.function("main", outputs=[("y", "f32", (4,))])
    f.fill(f.output(0), 16, np.float32(1.5))
    assert axrt.load(b.to_bytes()).main().numpy().tolist() == [1.5] * 4


@loads
def test_float_scalar_arguments_are_encoded_as_their_type():
    """rmsnorm's epsilon: f32, given as a Python float and as raw bits."""
    cols, epsilon = 16, 0.5
    for eps_arg in (epsilon, literal(int.from_bytes(struct.pack("<f", epsilon), "little"))):
        b = Builder()
        cpu = b.kernel_library("axrt.cpu")
        rmsnorm = b.kernel("axrt_rmsnorm_f32", cpu, [
            Buffer("x"), Buffer("gamma"), Buffer("out", access="write"),
            Scalar("rows"), Scalar("cols"), Scalar("epsilon", "f32")])
        gamma = b.constant("gamma", np.linspace(0.5, 2, cols, dtype=np.float32))
        f = b.function("main", inputs=[("x", "f32", ("rows", cols))],
                       outputs=[("y", "f32", ("rows", cols))], symbols={"rows": 8})
        rows = f.sym("rows")
        f.dispatch(rmsnorm, grid=rows,
                   args=[f.input(0), gamma, f.output(0), rows, cols, eps_arg])
        x = np.random.default_rng(1).uniform(-0.5, 0.5, (3, cols)).astype(np.float32)
        y = axrt.load(b.to_bytes()).main(x).numpy()
        g = np.linspace(0.5, 2, cols, dtype=np.float32)
        ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(axis=1, keepdims=True) + epsilon) * g
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


def test_signed_scalar_arguments_take_negative_numbers():
    """Format 1.3: negative numbers for int32, int64 and f64 parameters are
    negative literals, and the file requires signed-scalars.v1."""
    b = Builder()
    cpu = b.kernel_library("axrt.cpu")
    k = b.kernel("affine", cpu, [
        Buffer("x"), Buffer("out", access="write"), Scalar("shift", "int32"),
        Scalar("step", "i64"), Scalar("bias", "f64"), Scalar("scale", "f32")])
    f = b.function("main", inputs=[("x", "f32", (4,))], outputs=[("y", "f32", (4,))])
    f.dispatch(k, 1, [f.input(0), f.output(0), -7, np.int64(-3), -0.25, -2.5])
    data = b.to_bytes()
    assert data[10:12] == (4).to_bytes(2, "little")  # format_minor
    assert b"signed-scalars.v1" in data and b"kernel-library.v1" in data
    f64_bits = struct.unpack("<q", struct.pack("<d", -0.25))[0]
    assert f64_bits < 0
    for operand in (-7, -3, f64_bits, 0xC0200000):  # f32 -2.5: its bits, positive
        assert operand.to_bytes(8, "little", signed=True) in data

    # Without a negative number the feature is not listed.
    b = Builder()
    k = b.kernel("k", b.kernel_library("axrt.cpu"), [Scalar("shift", "int32")])
    b.function("main").dispatch(k, 1, [7])
    assert b"signed-scalars.v1" not in b.to_bytes()


def test_negative_numbers_stay_refused_where_unsigned():
    b = Builder()
    cpu = b.kernel_library("axrt.cpu")
    k = b.kernel("k", cpu, [Scalar("n", "uint32"), Scalar("shift", "int32")])
    f = b.function("main", inputs=[("x", "f32", ("n",))], symbols={"n": 8})
    with pytest.raises(ValueError, match="must not be negative"):
        f.dispatch(k, 1, [-1, 0])
    with pytest.raises(ValueError, match="must not be negative"):
        f.dispatch(k, 1, [0, f.sym("n") - (-1)])  # expressions stay unsigned
    with pytest.raises(ValueError, match="at least -2\\*\\*63"):
        f.dispatch(k, 1, [0, -2 ** 63 - 1])
    # The runtime refuses them too, with the reason.
    with expect_error(axrt.InvalidArgumentError, "axrt_axe_builder_add_dispatch",
                      "op 0 is the negative literal -1; expressions compute unsigned values"):
        b._c.add_dispatch(f.index, k.index, [(CONST, 1)], None, None,
                          [{"kind": 5, "value": [(CONST, -1)]},
                           {"kind": 5, "value": [(CONST, 0)]}])
    with expect_error(axrt.InvalidArgumentError, "op 1 is the negative literal -1"):
        b._c.add_dispatch(f.index, k.index, [(CONST, 1)], None, None,
                          [{"kind": 5, "value": [(CONST, 0)]},
                           {"kind": 5, "value": [(SYMBOL, 0), (CONST, -1), (ADD, 0)]}])
    g = b.function("fill", outputs=[("y", "f32", (4,))])
    with expect_error(axrt.InvalidArgumentError, "op 0 is the negative literal -4"):
        b._c.add_fill(g.index, {"kind": 2, "index": 0}, [(CONST, -4)])


def test_dispatch_errors_come_from_the_runtime():
    b = Builder()
    add = add_kernel(b)
    f = b.function("main", inputs=[("x", "f32", (4,))], outputs=[("y", "f32", (4,))],
                   arena_size=64)
    x, y = f.input(0), f.output(0)
    with expect_error(axrt.InvalidArgumentError, "axrt_axe_builder_add_dispatch",
                      "3 binding(s) for 4 kernel parameter(s)"):
        f.dispatch(add, 1, [x, x, y])
    with expect_error(axrt.InvalidArgumentError,
                      "a SCALAR binding cannot serve a BUFFER parameter"):
        f.dispatch(add, 1, [x, 4, y, 4])
    with expect_error(axrt.OutOfRangeError,
                      "input index 3 is out of range: function 'main' has 1 input(s)"):
        f.dispatch(add, 1, [f.input(3), x, y, 4])
    with expect_error(axrt.OutOfRangeError,
                      "arena bytes [32, 32 + 64) do not fit in the 64-byte arena"):
        f.dispatch(add, 1, [x, x, f.arena(32, 64), 4])
    with expect_error(axrt.InvalidArgumentError,
                      "an ARENA binding covers at least 1 byte"):
        f.fill(f.arena(0, 0), 4)
    with expect_error(axrt.InvalidArgumentError,
                      "pattern 0x100 does not fit in 1 byte(s)"):
        f.fill(y, 4, 256)
    with expect_error(axrt.InvalidArgumentError,
                      "the destination must be an OUTPUT or ARENA binding, not INPUT"):
        f.copy(y, x, 4)
    # Writing a kernel's WRITE parameter through an input is caught when the
    # whole file is verified.
    f.dispatch(add, 1, [x, x, x, 4])
    with expect_error(axrt.InvalidArgumentError,
                      "the reader refuses the file built"):
        b.to_bytes()


def test_dispatch_bad_python_arguments():
    b = Builder()
    add = add_kernel(b)
    f = b.function("main", inputs=[("x", "f32", (4,))], outputs=[("y", "f32", (4,))])
    g = b.function("other", inputs=[("x", "f32", ("n",))], symbols={"n": 4})
    x, y = f.input(0), f.output(0)
    with pytest.raises(TypeError, match="is a float"):
        f.dispatch(add, 1, [x, x, y, 4.0])
    with pytest.raises(TypeError, match="must be an int or an axrt.builder.Expr"):
        f.dispatch(add, 1, [x, x, y, "4"])
    with pytest.raises(ValueError, match="binding of another function"):
        f.dispatch(add, 1, [g.input(0), x, y, 4])
    with pytest.raises(ValueError, match="reads symbols of function 'other'"):
        f.dispatch(add, g.sym("n"), [x, x, y, 4])
    with pytest.raises(ValueError, match="reads symbols of function 'other'"):
        f.dispatch(add, 1, [x, x, y, g.sym("n")])
    with pytest.raises(ValueError, match="1 to 3 workgroup counts"):
        f.dispatch(add, (1, 1, 1, 1), [x, x, y, 4])
    with pytest.raises(ValueError, match="missing: n"):
        f.dispatch(add, 1, {"a": x, "b": x, "out": y})
    with pytest.raises(ValueError, match="unknown: c"):
        f.dispatch(add, 1, {"a": x, "b": x, "out": y, "n": 4, "c": 1})
    with pytest.raises(ValueError, match="must not be negative"):
        f.dispatch(add, 1, [x, x, y, -4])
    with pytest.raises(ValueError, match="belongs to another Builder"):
        f.dispatch(add_kernel(Builder()), 1, [x, x, y, 4])
    with pytest.raises(ValueError, match="must not be negative"):
        f.arena(-1, 4)
    with pytest.raises(KeyError, match="no input 'z'"):
        f.input("z")
    with pytest.raises(KeyError, match="no output 'x'"):
        f.output("x")
    with pytest.raises(TypeError, match="must be a Binding"):
        f.copy(np.zeros(4), y, 4)
    with pytest.raises(TypeError, match="numpy scalar"):
        f.fill(y, 4, 1.5)
    with pytest.raises(ValueError, match="has 4 bytes, not 2"):
        f.fill(y, 4, np.float32(1), pattern_size=2)


def test_function_errors():
    b = Builder()
    b.function("main", inputs=[("x", "f32", (4,))])
    with expect_error(axrt.AlreadyExistsError, "axrt_axe_builder_add_function",
                      "function 'main' was already added"):
        b.function("main")
    with expect_error(axrt.AlreadyExistsError,
                      "the name is already used by another input or output"):
        b.function("f", inputs=[("x", "f32", (4,))], outputs=[("x", "f32", (4,))])
    with expect_error(axrt.InvalidArgumentError, "function 1 needs a name"):
        b.function("")
    with expect_error(axrt.InvalidArgumentError, "has upper bound 0"):
        b.function("g", inputs=[("x", "f32", ("n",))], symbols={"n": 0})
    with pytest.raises(ValueError, match="names symbol 'm', which symbols= does not declare"):
        b.function("h", inputs=[("x", "f32", ("m",))], symbols={"n": 4})
    with pytest.raises(TypeError, match="must be an integer"):
        b.function("h", inputs=[("x", "f32", (4.0,))])
    with pytest.raises(TypeError, match="\\(name, dtype, shape\\) tuple"):
        b.function("h", inputs=[("x", "f32")])
    with pytest.raises(TypeError, match="not a dtype"):
        b.function("h", inputs=[("x", "float33", (4,))])
    with pytest.raises(TypeError, match="has no axrt dtype"):
        b.function("h", inputs=[("x", np.complex64, (4,))])
    with pytest.raises(TypeError):
        b.function(3)


def test_function_properties():
    b = Builder()
    f = b.function("main", inputs=[("x", "f32", ("b", 4))], outputs=[("y", np.float16, ("b",))],
                   symbols={"b": 32}, arena_size=128)
    assert (f.index, f.name, f.inputs, f.outputs, f.arena_size) == (0, "main", ("x",), ("y",), 128)
    assert f.symbols == {"b": 32}
    assert f.input("x") == f.input(0) and f.output("y").kind == "output"
    assert b.function("second").index == 1


# ---------------------------------------------------------------------------
# Code objects and kernels


PTX = b"//\n.version 8.0\n.target sm_80\n.address_size 64\n\0"


def test_kernel_library_targets_the_host():
    b = Builder()
    lib = b.kernel_library("axrt.cpu", min_version=1)
    assert (lib.index, lib.kind, lib.library_name) == (0, "kernel_library", "axrt.cpu")
    assert lib.target == AxeBuilder.HOST_TARGET
    assert AxeBuilder.HOST_TARGET in ("x86_64", "aarch64", "riscv64", "ppc64le", "s390x",
                                      "loongarch64")
    assert b.kernel_library("other.lib", target="sm_90").index == 1


def test_kernels_and_variants():
    b = Builder()
    cpu = b.kernel_library("axrt.cpu")
    ptx = b.code_object("cuda_ptx", "compute_80", PTX)
    assert (ptx.index, ptx.kind, ptx.target) == (1, "cuda_ptx", "compute_80")
    k = b.kernel("axrt_add_f32", cpu, ELEMENTWISE)
    assert (k.index, k.name, k.params) == (0, "axrt_add_f32", tuple(ELEMENTWISE))
    b.kernel_variant(k, ptx, workgroup_size=256)
    with expect_error(axrt.AlreadyExistsError,
                      "axrt_axe_builder_add_kernel_variant",
                      "code object 1 already holds variant 0 of the kernel"):
        b.kernel_variant(k, ptx, workgroup_size=256)
    with expect_error(axrt.AlreadyExistsError,
                      "already holds the kernel's primary implementation"):
        b.kernel_variant(k, cpu)
    with expect_error(axrt.AlreadyExistsError, "kernel 'axrt_add_f32' was already added"):
        b.kernel("axrt_add_f32", cpu, ELEMENTWISE)
    with expect_error(axrt.AlreadyExistsError, "parameter 1 'a': the name is used twice"):
        b.kernel("dup", cpu, [Buffer("a"), Buffer("a")])
    with expect_error(axrt.InvalidArgumentError, "workgroup size 0x1x1 has a zero component"):
        b.kernel("zero", cpu, workgroup_size=0)
    with expect_error(axrt.InvalidArgumentError,
                      "cluster dims 2x0x1 must be all 0 (no clusters) or all at least 1"):
        b.kernel("cluster", cpu, cluster_dims=(2, 0, 1))
    with expect_error(axrt.InvalidArgumentError,
                      "a SCALAR parameter needs a whole-byte scalar type (got INT4)"):
        b.kernel("int4", cpu, [Scalar("q", "int4")])
    with expect_error(axrt.InvalidArgumentError, "kernel 1 needs a name"):
        b.kernel("", cpu)
    assert b"compute_80" in b.to_bytes()


def test_code_object_errors():
    b = Builder()
    with expect_error(axrt.InvalidArgumentError, "no bytes were given"):
        b.code_object("cuda_fatbin", "sm_90", b"")
    with expect_error(axrt.InvalidArgumentError, "the target is empty"):
        b.kernel_library("axrt.cpu", target="")
    b.code_object("cuda_ptx", "compute_80", b"not ptx at all")
    with expect_error(axrt.InvalidArgumentError, "axrt_axe_builder_write_memory",
                      "the reader refuses the file built", "CUDA_PTX"):
        b.to_bytes()
    with pytest.raises(ValueError, match="use Builder.kernel_library"):
        b.code_object("kernel_library", "x86_64", b"")
    with pytest.raises(ValueError, match="must be one of"):
        b.code_object("elf", "x86_64", b"\x7fELF")
    with pytest.raises(TypeError, match="bytes-like"):
        b.code_object("cuda_ptx", "compute_80", "text")


def test_kernel_bad_python_arguments():
    b = Builder()
    cpu = b.kernel_library("axrt.cpu")
    with pytest.raises(TypeError, match="code_object must be an axrt.builder object"):
        b.kernel("k", "axrt.cpu")
    with pytest.raises(ValueError, match="belongs to another Builder"):
        b.kernel("k", Builder().kernel_library("axrt.cpu"))
    with pytest.raises(TypeError, match="must be an axrt.builder.Buffer or Scalar"):
        b.kernel("k", cpu, ["x"])
    with pytest.raises(ValueError,
                       match="access must be one of 'none', 'read', 'write', 'read_write'"):
        b.kernel("k", cpu, [Buffer("x", access="rw")])
    with pytest.raises(TypeError, match="not a dtype"):
        b.kernel("k", cpu, [Scalar("n", "u65")])
    with pytest.raises(TypeError, match=r"params\[0\]\.dtype.*not a dtype"):
        b.kernel("k", cpu, [Buffer("x", dtype="u65")])
    with pytest.raises(ValueError, match="1 to 3 integers"):
        b.kernel("k", cpu, workgroup_size=(1, 1, 1, 1))


@loads
def test_kernel_without_implementation_fails_to_load():
    b = Builder()
    lib = b.kernel_library("no.such.library", min_version=1)
    k = b.kernel("k", lib, [Buffer("x")])
    f = b.function("main", inputs=[("x", "f32", (4,))])
    f.dispatch(k, 1, [f.input(0)])
    with pytest.raises(axrt.Error, match="no.such.library"):
        axrt.load(b.to_bytes())


@loads
def test_unknown_required_feature_is_refused_on_load():
    b = Builder()
    b.require_feature("teleportation.v1")
    with pytest.raises(axrt.UnimplementedError, match="teleportation.v1"):
        axrt.load(b.to_bytes())


# ---------------------------------------------------------------------------
# Metadata and features


def test_metadata_and_feature_errors():
    b = Builder()
    b.metadata("k", "v")
    with expect_error(axrt.AlreadyExistsError, "axrt_axe_builder_add_metadata",
                      "metadata key 'k' was already added"):
        b.metadata("k", "w")
    with expect_error(axrt.InvalidArgumentError, "a metadata entry needs a key"):
        b.metadata("", "v")
    b.require_feature("prepacked.v1")
    with expect_error(axrt.AlreadyExistsError,
                      "required feature 'prepacked.v1' was already added"):
        b.require_feature("prepacked.v1")
    with expect_error(axrt.InvalidArgumentError, "a required feature needs a name"):
        b.require_feature("")
    with pytest.raises(TypeError):
        b.metadata("k2", 3)
    with pytest.raises(ValueError, match="NUL"):
        b.metadata("a\0b", "v")


# ---------------------------------------------------------------------------
# Constants


def test_constant_dtype_and_shape_come_from_the_array():
    b = Builder()
    c = b.constant("w", np.zeros((3, 5), np.float16))
    assert (c.index, c.name, c.dtype, c.shape, c.layout) == (0, "w", "f16", (3, 5), None)
    assert b.constant("s", np.int64(7)).shape == ()
    assert b.constant("flags", [True, False]).dtype == "bool"
    assert b.constant("l", [1.0, 2.0], dtype="f32").dtype == "f32"  # Python values converted
    assert b.constant("t", np.arange(6, dtype=">i4").reshape(2, 3).T).shape == (3, 2)
    # A row repeated three times: strides in elements over the bytes given.
    c = b.constant("rows", np.arange(4, dtype=np.float32), shape=(3, 4), strides=(0, 1))
    assert c.shape == (3, 4)
    assert b.to_bytes()[:8] == MAGIC


def test_constant_dtype_override_reads_the_bytes():
    b = Builder()
    packed = np.array([[0x21, 0x43], [0x65, 0x07]], np.uint8)
    c = b.constant("q", packed, dtype="int4")
    assert (c.dtype, c.shape) == ("int4", (2, 4))
    c = b.constant("q3", packed, dtype="uint4", shape=(2, 3))
    assert c.shape == (2, 3)
    c = b.constant("raw", bytes(8), dtype="u16", shape=(4,))
    assert (c.dtype, c.shape) == ("uint16", (4,))
    c = b.constant("bits", np.zeros(4, np.uint16), dtype="bf16")
    assert (c.dtype, c.shape) == ("bf16", (4,))
    awq = Packing(4, 32, axis=1, order="awq")
    layout = QuantLayout("x", "uint4", "f32", (128, 1), scale=ScaleRef(dtype="f16"), packing=awq)
    scales = b.constant("scales", np.ones((1, 16), np.float16))
    c = b.constant("qweight", np.zeros((128, 2), np.uint32), dtype="uint4",
                   layout=layout.with_constants(scale=scales))
    assert c.shape == (128, 16)


def test_constant_errors():
    b = Builder()
    b.constant("w", np.zeros(4, np.float32))
    with expect_error(axrt.AlreadyExistsError, "axrt_axe_builder_add_constant",
                      "constant 'w' was already added"):
        b.constant("w", np.zeros(4, np.float32))
    with expect_error(axrt.InvalidArgumentError,
                      "constant 'c': shape [5] of FLOAT32 needs 20 bytes, but 16 were given"):
        b.constant("c", np.zeros(4, np.float32), dtype="f32", shape=(5,))
    with expect_error(axrt.InvalidArgumentError,
                      "alignment 3 is not a power of two at most 4096"):
        b.constant("c", np.zeros(4, np.float32), alignment=3)
    with expect_error(axrt.InvalidArgumentError, "constant 1 needs a name"):
        b.constant("", np.zeros(4, np.float32))
    with expect_error(axrt.NotFoundError,
                      "the scale names constant 7, but 1 constant(s) were added before it"):
        b.constant("q", np.zeros((2, 2), np.int8),
                   layout=QuantLayout("int8.per_channel", "int8", "f32", (1, 0),
                                      scale=ScaleRef(7, "f32")))
    with pytest.raises(TypeError, match="bytes need dtype="):
        b.constant("c", b"\0\0\0\0")
    with pytest.raises(TypeError, match="has no axrt dtype"):
        b.constant("c", np.zeros(2, np.complex64))
    with pytest.raises(TypeError, match="holds Python objects"):
        b.constant("c", np.array([object()]))
    with pytest.raises(ValueError, match="give shape="):
        b.constant("c", np.zeros(3, np.uint8), dtype="f32")
    with pytest.raises(ValueError, match="needs a dtype when it names no Constant"):
        b.constant("c", np.zeros((2, 2), np.int8),
                   layout=QuantLayout("x", "int8", "f32", (1, 0), scale=ScaleRef(0)))
    other = Builder().constant("s", np.ones(2, np.float32))
    with pytest.raises(ValueError, match="belongs to another Builder"):
        b.constant("c", np.zeros((2, 2), np.int8),
                   layout=QuantLayout("x", "int8", "f32", (1, 0), scale=ScaleRef(other)))


def test_prepacked_copies():
    b = Builder()
    c = b.constant("w", np.arange(8, dtype=np.float32))
    b.prepacked_copy(c, "sm_90", "w.tiled", np.arange(8, dtype=np.float32)[::-1])
    b.prepacked_copy(c, "sm_80", "w.tiled", b"\1\2\3\4")
    with expect_error(axrt.AlreadyExistsError, "axrt_axe_builder_add_prepacked_copy"):
        b.prepacked_copy(c, "sm_90", "w.tiled", b"\0")
    with expect_error(axrt.InvalidArgumentError, "pre-packed copy holds at least 1 byte"):
        b.prepacked_copy(c, "sm_90", "other", b"")
    assert b"w.tiled" in b.to_bytes()


def bytes_of_constant(b, constant, size):
    """Runs main() -> y: uint8[size], a copy of `constant`'s bytes."""
    f = b.function("main", outputs=[("y", "uint8", (size,))])
    f.copy(constant, f.output(0), size)
    return axrt.load(b.to_bytes()).main().numpy()


@loads
def test_constant_bytes_are_stored_as_given():
    b = Builder()
    data = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    c = b.constant("c", data, alignment=4096)
    assert bytes_of_constant(b, c, data.nbytes).tobytes() == data.tobytes()


@loads
def test_ml_dtypes_arrays():
    import ml_dtypes

    b = Builder()
    bf = np.array([1.0, -2.5, 3.25], ml_dtypes.bfloat16)
    c = b.constant("bf", bf)
    assert (c.dtype, c.shape) == ("bf16", (3,))
    assert b.constant("fp8", np.zeros(2, ml_dtypes.float8_e4m3fn)).dtype == "fp8_e4m3fn"
    assert bytes_of_constant(b, c, 6).tobytes() == bf.tobytes()


@loads
def test_subbyte_arrays_are_packed_along_the_last_axis():
    import ml_dtypes

    b = Builder()
    values = np.array([[-1, 2, 7], [-8, 0, 3]], ml_dtypes.int4)
    c = b.constant("q", values)
    assert (c.dtype, c.shape) == ("int4", (2, 3))
    # Two codes per byte, element 0 low; each row zero-padded to a byte.
    assert bytes_of_constant(b, c, 4).tolist() == [0x2F, 0x07, 0x08, 0x03]
    with pytest.raises(ValueError, match="packed the default way only"):
        b.constant("p", values, layout=QuantLayout("x", "int4", "f32", (1, 0),
                                                    packing=Packing(4, 8, 0)))


# ---------------------------------------------------------------------------
# Quantization layouts


INT8_PER_CHANNEL = QuantLayout("int8.per_channel", "int8", "f32", (1, 0),
                               scale=ScaleRef(dtype="f32"))


def int8_matmul(layout_of_weights):
    """main(x: f32[m, K]) -> x . dequant(w)^T + bias, w int8 [N, K]."""
    n_out, k_in = 16, 32
    rng = np.random.default_rng(3)
    w = rng.integers(-127, 128, (n_out, k_in), dtype=np.int8)
    scale = rng.uniform(0.001, 0.01, (n_out, 1)).astype(np.float32)
    bias = rng.uniform(-1, 1, n_out).astype(np.float32)
    b = Builder()
    cpu = b.kernel_library("axrt.cpu")
    matmul = b.kernel("axrt_matmul_int8_pc_f32", cpu, [
        Buffer("x"), Buffer("w", layout=INT8_PER_CHANNEL), Buffer("scale"), Buffer("bias"),
        Buffer("y", access="write"), Scalar("M"), Scalar("N"), Scalar("K")])
    s = b.constant("fc.scale", scale)
    wc = b.constant("fc.weight", w, layout=layout_of_weights(s))
    bc = b.constant("fc.bias", bias)
    f = b.function("main", inputs=[("x", "f32", ("m", k_in))], outputs=[("y", "f32", ("m", n_out))],
                   symbols={"m": 64})
    m = f.sym("m")
    f.dispatch(matmul, grid=(ceildiv(n_out, 64), ceildiv(m, 64)),
               args=[f.input(0), wc, s, bc, f.output(0), m, n_out, k_in])
    def reference(x):
        return x.astype(np.float64) @ (w * scale).T.astype(np.float64) + bias

    return b, reference


@loads
def test_quantized_constant_runs_with_its_layout():
    b, reference = int8_matmul(lambda s: INT8_PER_CHANNEL.with_constants(scale=s))
    x = np.random.default_rng(4).standard_normal((5, 32)).astype(np.float32)
    y = axrt.load(b.to_bytes()).main(x).numpy()
    np.testing.assert_allclose(y, reference(x), rtol=1e-5, atol=1e-5)


def test_layout_mismatch_is_refused_when_written():
    b, _ = int8_matmul(lambda s: QuantLayout("int8.other", "int8", "f32", (1, 0),
                                             scale=ScaleRef(s)))
    with expect_error(axrt.InvalidArgumentError, "the reader refuses the file built",
                      "int8.per_channel"):
        b.to_bytes()


def test_layout_description_round_trips_through_the_c_structs():
    """A full AWQ layout (docs/format.md section 9) is accepted and written."""
    k_in, n_out, group = 256, 16, 128
    awq = Packing(4, 32, axis=1, order="awq")
    layout = QuantLayout("awq.int4.g128", "uint4", "f32", (group, 1),
                         scale=ScaleRef(dtype="f16"),
                         zero_point=ZeroPoint("integer", dtype="uint4", packing=awq),
                         packing=awq)
    b = Builder()
    cpu = b.kernel_library("axrt.cpu")
    b.kernel("axrt_matmul_awq_int4_f32", cpu, [
        Buffer("x"), Buffer("qweight", layout=layout), Buffer("scales"), Buffer("qzeros"),
        Buffer("bias"), Buffer("y", access="write"),
        Scalar("M"), Scalar("N"), Scalar("K"), Scalar("group_size")])
    scales = b.constant("scales", np.ones((k_in // group, n_out), np.float16))
    qzeros = b.constant("qzeros", np.zeros((k_in // group, n_out // 8), np.int32))
    q = b.constant("qweight", np.zeros((k_in, n_out // 8), np.uint32), dtype="uint4",
                   layout=layout.with_constants(scale=scales, zero_point=qzeros))
    assert q.shape == (k_in, n_out)
    assert q.layout.scale.constant is scales and q.layout.zero_point.constant is qzeros
    assert b"awq.int4.g128" in b.to_bytes()
    with pytest.raises(ValueError, match="has no second_level_scale"):
        layout.with_constants(second_level_scale=scales)
    with pytest.raises(ValueError, match="Packing.order must be one of"):
        b.constant("bad", np.zeros((k_in, n_out // 8), np.uint32), dtype="uint4",
                   layout=QuantLayout("x", "uint4", "f32", (group, 1), scale=ScaleRef(scales),
                                      packing=Packing(4, 32, 1, order="gptq")))


# ---------------------------------------------------------------------------
# The private class: one method per C function, plain Python values


def test_private_class_reports_missing_objects():
    a = AxeBuilder("p", "1")
    with expect_error(axrt.NotFoundError, "axrt_axe_builder_add_kernel",
                      "kernel 'k' names code object 3, but 0 code object(s) were added"):
        a.add_kernel("k", 3, [])
    with expect_error(axrt.NotFoundError, "function 5 was not added (0 function(s) so far)"):
        a.add_dispatch(5, 0, [(CONST, 1)])
    with expect_error(axrt.NotFoundError, "kernel 2 was not added"):
        a.add_kernel_variant(2, 0)
    with expect_error(axrt.NotFoundError, "axrt_axe_builder_add_prepacked_copy"):
        a.add_prepacked_copy(0, "sm_90", "x", b"\0")
    with expect_error(axrt.InvalidArgumentError,
                      "`desc->params[0].kind` is 99, not a known axrt_axe_param_kind_t"):
        a.add_kernel("k", 0, [{"name": "x", "kind": 99}])


def test_private_class_checks_python_values():
    a = AxeBuilder()
    with pytest.raises(TypeError, match="layout has no field 'layout_idd'"):
        a.add_constant("c", bytes(8), [2], 12, layout={"layout_idd": "x"})
    with pytest.raises(ValueError, match="dtype is 4294967296, outside"):
        a.add_constant("c", bytes(8), [2], 2 ** 32)
    with pytest.raises(TypeError, match="dtype must be an integer, not str"):
        a.add_constant("c", bytes(8), [2], "f32")
    with pytest.raises(ValueError, match="strides has 2 entries for a shape of rank 1"):
        a.add_constant("c", bytes(8), [2], 12, strides=[1, 2])
    with pytest.raises(ValueError, match="not C-contiguous"):
        a.add_constant("c", np.zeros((4, 4), np.float32)[:, ::2], [4, 2], 12)
    with pytest.raises(TypeError, match="bytes-like"):
        a.add_constant("c", [1, 2], [2], 12)
    with pytest.raises(ValueError, match="workgroup_size must hold 3 integers"):
        a.add_kernel("k", 0, [], workgroup_size=(1, 1))
    with pytest.raises(ValueError, match="must be an \\(opcode, operand\\) pair"):
        a.add_dispatch(0, 0, [(1,)])
    with pytest.raises(ValueError, match="outside \\[-9223372036854775808"):
        a.add_dispatch(0, 0, [(1, 2 ** 63)])
    with pytest.raises(TypeError, match="must be a dict"):
        a.add_dispatch(0, 0, [(1, 1)], None, None, [(3, 0)])
    with pytest.raises(TypeError, match="must be a list or tuple"):
        a.add_function("f", {"n": 4})
    with pytest.raises(ValueError, match="NUL"):
        a.add_metadata("a\0b", "v")
    with pytest.raises(TypeError):
        a.write_file(3)


def test_private_class_writes_to_paths_of_every_kind(tmp_path):
    a = AxeBuilder("p", "1")
    a.add_metadata("k", "v")
    a.write_file(str(tmp_path / "s.axe"))
    a.write_file(tmp_path / "p.axe")
    a.write_file(bytes(tmp_path / "b.axe"))
    data = a.write_memory()
    for name in ("s.axe", "p.axe", "b.axe"):
        assert (tmp_path / name).read_bytes() == data


def test_public_names_are_documented():
    for name in axb.__all__:
        obj = getattr(axb, name)
        if isinstance(obj, type) or callable(obj) and hasattr(obj, "__code__"):
            assert obj.__doc__, name
    for cls in (Builder, axb.FunctionBuilder, Expr, QuantLayout):
        for attr, value in vars(cls).items():
            if not attr.startswith("_") and (callable(value) or isinstance(value, property)):
                assert value.__doc__, f"{cls.__name__}.{attr}"
    assert axrt.Builder is Builder
