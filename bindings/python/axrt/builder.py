"""Building .axe executables from Python.

A compiler written in Python emits an ``.axe`` file with a :class:`Builder`:
the code objects that hold kernels, the kernels with their parameter tables,
constants (weights, from numpy arrays) and functions whose commands dispatch
kernels, copy and fill::

    import numpy as np
    import axrt
    from axrt.builder import Buffer, Scalar, ceildiv

    b = axrt.Builder(producer="mycompiler", producer_version="1.0")
    cpu = b.kernel_library("axrt.cpu", min_version=1)
    add = b.kernel("axrt_add_f32", cpu, params=[
        Buffer("a"), Buffer("b"), Buffer("out", access="write"), Scalar("n", "uint64")])
    bias = b.constant("bias", np.ones(1024, np.float32))
    f = b.function("main", inputs=[("x", "f32", ("n",))], outputs=[("y", "f32", ("n",))],
                   symbols={"n": 1024})
    n = f.sym("n")
    f.dispatch(add, grid=ceildiv(n, 4096), args=[f.input("x"), bias, f.output("y"), n])
    b.save("add.axe")

Each addition is checked by the runtime when it is made, and the whole file
once more when it is written, so a builder never writes a file the runtime
would refuse. Refusals raise the :class:`axrt.Error` subclass of the status
(``axrt.AlreadyExistsError``, ``axrt.NotFoundError``, ...) with the runtime's
message; Python arguments of the wrong type or value raise ``TypeError`` or
``ValueError`` first. The format is specified in docs/format.md; the kernels
of the built-in library ``"axrt.cpu"`` in docs/kernels.md.

Dtypes are given as the runtime names them (``"f32"``, ``"bf16"``,
``"uint64"``, ``"int4"``, ``"fp8_e4m3fn"``), with the short integer names
``"i8"`` ... ``"u64"``, or as numpy dtypes (bfloat16, fp8 and the sub-byte
types through ml_dtypes).
"""

from __future__ import annotations

import dataclasses
import operator
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Literal, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ._axrt import DTYPES as _axrt_dtypes
from ._axrt import numpy_dtype as _axrt_numpy_dtype
from ._axrt import AxeBuilder as _AxeBuilder

__all__ = [
    "Access",
    "Arg",
    "Binding",
    "Buffer",
    "Builder",
    "CodeObject",
    "CodeObjectKind",
    "Constant",
    "DTypeLike",
    "ElementOrder",
    "Expr",
    "ExprLike",
    "FunctionBuilder",
    "Kernel",
    "Packing",
    "PaddingRule",
    "Param",
    "QuantLayout",
    "Scalar",
    "ScaleLayout",
    "ScaleRef",
    "SignEncoding",
    "ZeroPoint",
    "ZeroPointKind",
    "ceildiv",
    "literal",
    "maximum",
    "minimum",
]

# ---------------------------------------------------------------------------
# Dtypes and enumerations (the numbers of include/axrt/format.h)

DTypeLike = Union[str, np.dtype, type]
"""A dtype: an axrt name such as ``"f32"``, or anything ``numpy.dtype()`` takes."""

# The runtime's names (axrt_dtype_name): (number, bits per element).
_DTYPES: Dict[str, Tuple[int, int]] = {
    name: (code, bits) for name, (code, bits) in _axrt_dtypes.items()}

# Other spellings: numpy's and ml_dtypes' names, short integer names.
_ALIASES: Dict[str, str] = {
    "float16": "f16",
    "float32": "f32",
    "float64": "f64",
    "bfloat16": "bf16",
    "float8_e4m3fn": "fp8_e4m3fn",
    "float8_e5m2": "fp8_e5m2",
    "float8_e4m3fnuz": "fp8_e4m3fnuz",
    "float8_e5m2fnuz": "fp8_e5m2fnuz",
    "float4_e2m1fn": "fp4_e2m1",
    "float8_e8m0fnu": "ue8m0",
    "i8": "int8",
    "u8": "uint8",
    "i16": "int16",
    "u16": "uint16",
    "i32": "int32",
    "u32": "uint32",
    "i64": "int64",
    "u64": "uint64",
}

_FLOAT_DTYPES = frozenset(
    ["f16", "bf16", "f32", "f64", "fp8_e4m3fn", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e5m2fnuz",
     "fp4_e2m1", "ue8m0"])
# Scalar parameters of these types take negative literals (format 1.3).
_SIGNED_INT_DTYPES = frozenset(["int8", "int16", "int32", "int64"])

CodeObjectKind = Literal["cuda_cubin", "cuda_fatbin", "cuda_ptx", "host_shared_object"]
"""The kinds of code object that carry bytes (kernel libraries: Builder.kernel_library)."""
Access = Literal["none", "read", "write", "read_write"]
"""How a kernel uses a buffer parameter."""
ZeroPointKind = Literal["none", "integer", "float"]
"""How zero points apply: none, ``(q - zp) * s`` or ``q * s + m``."""
ElementOrder = Literal["sequential", "awq"]
"""The order of packed elements in a word."""
SignEncoding = Literal["twos_complement", "offset_binary"]
"""How packed signed elements are stored."""
PaddingRule = Literal["exact", "zero"]
"""Whether packed rows fill whole words or end in a zero-padded one."""
ScaleLayout = Literal["grid", "grid_transposed", "swizzled_128x4"]
"""How a scale tensor is laid out over the block grid."""

_CODE_OBJECT_KINDS = {"cuda_cubin": 1, "cuda_fatbin": 2, "cuda_ptx": 3, "host_shared_object": 4,
                      "kernel_library": 5}
_PARAM_BUFFER, _PARAM_SCALAR = 1, 2
_ACCESS = {"none": 0, "read": 1, "write": 2, "read_write": 3}
_ZERO_POINT_KINDS = {"none": 0, "integer": 1, "float": 2}
_ORDERS = {"sequential": 0, "awq": 1}
_SIGNS = {"twos_complement": 0, "offset_binary": 1}
_PADDINGS = {"exact": 0, "zero": 1}
_SCALE_LAYOUTS = {"grid": 0, "grid_transposed": 1, "swizzled_128x4": 2}
_OP_CONST, _OP_SYMBOL, _OP_ADD, _OP_SUB, _OP_MUL = 1, 2, 3, 4, 5
_OP_DIV_FLOOR, _OP_DIV_CEIL, _OP_MOD, _OP_MINIMUM, _OP_MAXIMUM = 6, 7, 8, 9, 10
_BIND_INPUT, _BIND_OUTPUT, _BIND_CONSTANT, _BIND_ARENA, _BIND_SCALAR = 1, 2, 3, 4, 5
_SIG_FLAG_MUTABLE = 1


def _dtype_name(dtype: DTypeLike, what: str = "dtype") -> str:
    """The runtime's name of `dtype`; TypeError when axrt has no such type."""
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype, dtype)
        if name in _DTYPES:
            return name
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{what}: {dtype!r} is not a dtype (axrt names: "
                        f"{', '.join(_DTYPES)})") from None
    name = _ALIASES.get(dt.name, dt.name)
    if name not in _DTYPES:
        raise TypeError(f"{what}: numpy dtype {dt} has no axrt dtype")
    if not dt.isnative:
        raise TypeError(f"{what}: numpy dtype {dt.str} is not in the host's byte order")
    return name


def _dtype_code(dtype: DTypeLike, what: str = "dtype") -> int:
    return _DTYPES[_dtype_name(dtype, what)][0]


def _numpy_dtype(name: str) -> Optional[np.dtype]:
    """The numpy dtype of axrt dtype `name`, or None when ml_dtypes is missing."""
    dt: Optional[np.dtype] = _axrt_numpy_dtype(name)
    return dt


def _own_dtype_name(array: np.ndarray) -> Optional[str]:
    name = _ALIASES.get(array.dtype.name, array.dtype.name)
    return name if name in _DTYPES else None


def _choice(table: Mapping[str, int], value: str, what: str) -> int:
    if isinstance(value, str) and value.lower() in table:
        return table[value.lower()]
    raise ValueError(f"{what} must be one of {', '.join(map(repr, table))}; got {value!r}")


def _index(value: Any, what: str) -> int:
    """A non-negative Python int from an int or numpy integer."""
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, not {type(value).__name__}") from None
    if number < 0:
        raise ValueError(f"{what} must not be negative; got {number}")
    return number


def _dims3(value: Union[int, Sequence[int]], pad: int, what: str) -> Tuple[int, int, int]:
    items = [value] if not isinstance(value, (tuple, list)) else list(value)
    if not 1 <= len(items) <= 3:
        raise ValueError(f"{what} takes 1 to 3 integers; got {len(items)}")
    dims = [_index(v, f"{what}[{i}]") for i, v in enumerate(items)]
    dims += [pad] * (3 - len(dims))
    return dims[0], dims[1], dims[2]


def _cluster_dims(value: Optional[Union[int, Sequence[int]]]) -> Tuple[int, int, int]:
    return (0, 0, 0) if value is None else _dims3(value, 1, "cluster_dims")


# ---------------------------------------------------------------------------
# Expressions


class Expr:
    """An unsigned 64-bit value computed from integers and a function's symbols.

    Made by :meth:`FunctionBuilder.sym` or :func:`literal` and combined with
    ``+ - * // %`` (with ints and other expressions), :func:`ceildiv`,
    :func:`minimum` and :func:`maximum`; it compiles to the reverse Polish
    ops of docs/format.md section 6.2. The call fails at run time on
    overflow, a negative difference or a division by zero.
    """

    __slots__ = ("_ops", "_function", "_text", "_precedence")

    def __init__(self, ops: Sequence[Tuple[int, int]], function: Optional[FunctionBuilder],
                 text: str, precedence: int = 3) -> None:
        self._ops = tuple(ops)
        self._function = function
        self._text = text
        self._precedence = precedence

    @property
    def ops(self) -> Tuple[Tuple[int, int], ...]:
        """The (opcode, operand) pairs, in reverse Polish order."""
        return self._ops

    @property
    def function(self) -> Optional[FunctionBuilder]:
        """The function whose symbols it reads; None when it reads none."""
        return self._function

    def __repr__(self) -> str:
        return f"Expr({self._text})"

    def __str__(self) -> str:
        return self._text

    def _binary(self, other: ExprLike, opcode: int, symbol: str, precedence: int,
                reverse: bool = False) -> Expr:
        operand = _as_expr(other, "operand")
        left, right = (operand, self) if reverse else (self, operand)
        a = left._text if left._precedence >= precedence else f"({left._text})"
        b = right._text if right._precedence > precedence else f"({right._text})"
        return Expr(left._ops + right._ops + ((opcode, 0),), _common_function(left, right),
                    f"{a} {symbol} {b}", precedence)

    def __add__(self, other: ExprLike) -> Expr:
        return self._binary(other, _OP_ADD, "+", 1)

    def __radd__(self, other: ExprLike) -> Expr:
        return self._binary(other, _OP_ADD, "+", 1, reverse=True)

    def __sub__(self, other: ExprLike) -> Expr:
        return self._binary(other, _OP_SUB, "-", 1)

    def __rsub__(self, other: ExprLike) -> Expr:
        return self._binary(other, _OP_SUB, "-", 1, reverse=True)

    def __mul__(self, other: ExprLike) -> Expr:
        return self._binary(other, _OP_MUL, "*", 2)

    def __rmul__(self, other: ExprLike) -> Expr:
        return self._binary(other, _OP_MUL, "*", 2, reverse=True)

    def __floordiv__(self, other: ExprLike) -> Expr:
        return self._binary(other, _OP_DIV_FLOOR, "//", 2)

    def __rfloordiv__(self, other: ExprLike) -> Expr:
        return self._binary(other, _OP_DIV_FLOOR, "//", 2, reverse=True)

    def __mod__(self, other: ExprLike) -> Expr:
        return self._binary(other, _OP_MOD, "%", 2)

    def __rmod__(self, other: ExprLike) -> Expr:
        return self._binary(other, _OP_MOD, "%", 2, reverse=True)

    def __bool__(self) -> bool:
        raise TypeError("an Expr has no truth value until the function is called")


ExprLike = Union[int, Expr]
"""An expression, or a non-negative int (a literal)."""

_MAX_LITERAL = (1 << 63) - 1


def literal(value: int) -> Expr:
    """The expression of the constant `value` (0 <= value < 2**63).

    Ints are literals wherever an expression is taken; ``literal`` makes one
    explicitly, for instance to pass raw bits to a floating-point scalar
    parameter (``literal(0x3727C5AC)`` is the f32 1e-5).
    """
    number = _index(value, "a literal")
    if number > _MAX_LITERAL:
        raise ValueError(f"a literal must be below 2**63; got {number}")
    return Expr(((_OP_CONST, number),), None, str(number))


def _as_expr(value: ExprLike, what: str) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be an int or an axrt.builder.Expr, "
                        f"not {type(value).__name__}")
    return literal(value)


def _common_function(a: Expr, b: Expr) -> Optional[FunctionBuilder]:
    if a._function is not None and b._function is not None and a._function is not b._function:
        raise ValueError(f"an expression cannot mix the symbols of functions "
                         f"'{a._function.name}' and '{b._function.name}'")
    return a._function if a._function is not None else b._function


def _call(name: str, opcode: int, a: ExprLike, b: ExprLike) -> Expr:
    left = _as_expr(a, f"{name}()'s first argument")
    right = _as_expr(b, f"{name}()'s second argument")
    return Expr(left._ops + right._ops + ((opcode, 0),), _common_function(left, right),
                f"{name}({left._text}, {right._text})")


def ceildiv(a: ExprLike, b: ExprLike) -> ExprLike:
    """ceil(a / b): an int for two ints, else an :class:`Expr` (DIV_CEIL)."""
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        return -(-_index(a, "ceildiv()'s first argument")
                 // _index(b, "ceildiv()'s second argument"))
    return _call("ceildiv", _OP_DIV_CEIL, a, b)


def minimum(a: ExprLike, b: ExprLike) -> ExprLike:
    """The smaller of a and b: an int for two ints, else an :class:`Expr` (MINIMUM)."""
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        return min(_index(a, "minimum()'s first argument"),
                   _index(b, "minimum()'s second argument"))
    return _call("minimum", _OP_MINIMUM, a, b)


def maximum(a: ExprLike, b: ExprLike) -> ExprLike:
    """The larger of a and b: an int for two ints, else an :class:`Expr` (MAXIMUM)."""
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        return max(_index(a, "maximum()'s first argument"),
                   _index(b, "maximum()'s second argument"))
    return _call("maximum", _OP_MAXIMUM, a, b)


def _expr_ops(value: Optional[ExprLike], function: FunctionBuilder, what: str
              ) -> Optional[Tuple[Tuple[int, int], ...]]:
    """The ops of `value` for a command of `function`; None stays absent."""
    if value is None:
        return None
    expr = _as_expr(value, what)
    if expr._function is not None and expr._function is not function:
        raise ValueError(f"{what} reads symbols of function '{expr._function.name}', "
                         f"not of '{function.name}'")
    return expr._ops


# ---------------------------------------------------------------------------
# Quantization layouts (docs/format.md section 5)


@dataclass(frozen=True)
class Packing:
    """How sub-word elements sit in container words (axrt_axe_packing_t).

    ``bits`` per element go ``container_bits`` to a word along dimension
    ``axis``; ``order`` "awq" is AWQ's int4 order in 32-bit words.
    """

    bits: int
    container_bits: int
    axis: int
    order: ElementOrder = "sequential"
    sign: SignEncoding = "twos_complement"
    padding: PaddingRule = "exact"

    def _to_c(self) -> Dict[str, Any]:
        return {
            "bits": self.bits,
            "container_bits": self.container_bits,
            "axis": self.axis,
            "order": _choice(_ORDERS, self.order, "Packing.order"),
            "sign": _choice(_SIGNS, self.sign, "Packing.sign"),
            "padding": _choice(_PADDINGS, self.padding, "Packing.padding"),
        }


def _constant_index(constant: Union[Constant, int, None], owner: Builder, what: str) -> int:
    if constant is None:
        return -1
    if isinstance(constant, Constant):
        owner._check_owner(constant, what)
        return constant.index
    return _index(constant, what)


@dataclass(frozen=True)
class ScaleRef:
    """A reference to a scale tensor (axrt_axe_scale_ref_t).

    ``constant`` is the scale :class:`Constant` (or its index); a kernel
    parameter's layout names none. ``dtype`` defaults to the constant's.
    """

    constant: Union[Constant, int, None] = None
    dtype: Optional[DTypeLike] = None
    layout: ScaleLayout = "grid"

    def _to_c(self, owner: Builder, what: str) -> Dict[str, Any]:
        dtype = self.dtype
        if dtype is None:
            if not isinstance(self.constant, Constant):
                raise ValueError(f"{what} needs a dtype when it names no Constant")
            dtype = self.constant.dtype
        return {
            "constant": _constant_index(self.constant, owner, f"{what}.constant"),
            "dtype": _dtype_code(dtype, f"{what}.dtype"),
            "layout": _choice(_SCALE_LAYOUTS, self.layout, f"{what}.layout"),
        }


@dataclass(frozen=True)
class ZeroPoint:
    """Zero points ("integer": ``(q - zp) * s``) or mins ("float": ``q * s + m``).

    Mirrors axrt_axe_zero_point_t. ``dtype`` is one zero point's type (
    ``"uint4"`` for AWQ and GPTQ) and defaults to the constant's when the
    zero points are not packed; ``stored_bias`` is 1 for GPTQ v1.
    """

    kind: ZeroPointKind
    constant: Union[Constant, int, None] = None
    dtype: Optional[DTypeLike] = None
    packing: Optional[Packing] = None
    stored_bias: int = 0

    def _to_c(self, owner: Builder, what: str) -> Dict[str, Any]:
        dtype = self.dtype
        if dtype is None:
            if not isinstance(self.constant, Constant) or self.packing is not None:
                raise ValueError(f"{what} needs a dtype (one zero point's type)")
            dtype = self.constant.dtype
        return {
            "kind": _choice(_ZERO_POINT_KINDS, self.kind, f"{what}.kind"),
            "constant": _constant_index(self.constant, owner, f"{what}.constant"),
            "dtype": _dtype_code(dtype, f"{what}.dtype"),
            "packing": self.packing._to_c() if self.packing is not None else None,
            "stored_bias": self.stored_bias,
        }


@dataclass(frozen=True)
class QuantLayout:
    """How a constant's stored values become numbers (axrt_axe_quant_layout_t).

    The same description serves a kernel parameter (the layout it requires,
    with no constants named) and a constant (with its scale and zero-point
    constants): ``layout.with_constants(scale=s, zero_point=z)`` turns the
    first into the second. docs/format.md section 9 has worked examples.
    """

    layout_id: str
    element_type: DTypeLike
    dequantized_type: DTypeLike
    block_shape: Sequence[int]
    scale: Optional[ScaleRef] = None
    zero_point: Optional[ZeroPoint] = None
    second_level_scale: Optional[ScaleRef] = None
    second_level_block_shape: Optional[Sequence[int]] = None
    packing: Optional[Packing] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "block_shape", tuple(self.block_shape))
        if self.second_level_block_shape is not None:
            object.__setattr__(self, "second_level_block_shape",
                               tuple(self.second_level_block_shape))

    def with_constants(self, *, scale: Union[Constant, int, None] = None,
                       zero_point: Union[Constant, int, None] = None,
                       second_level_scale: Union[Constant, int, None] = None) -> QuantLayout:
        """A copy whose scale, zero point and second-level scale name these constants.

        Each one given replaces the constant of the part of that name, which
        must exist in this layout; dtypes and layouts are kept.
        """
        changes: Dict[str, Any] = {}
        for name, constant in (("scale", scale), ("zero_point", zero_point),
                               ("second_level_scale", second_level_scale)):
            if constant is None:
                continue
            part = getattr(self, name)
            if part is None:
                raise ValueError(f"layout '{self.layout_id}' has no {name} to name a constant for")
            changes[name] = dataclasses.replace(part, constant=constant)
        return dataclasses.replace(self, **changes)

    def _to_c(self, owner: Builder, what: str) -> Dict[str, Any]:
        return {
            "layout_id": self.layout_id,
            "element_type": _dtype_code(self.element_type, f"{what}.element_type"),
            "dequantized_type": _dtype_code(self.dequantized_type, f"{what}.dequantized_type"),
            "block_shape": [_index(v, f"{what}.block_shape[{i}]")
                            for i, v in enumerate(self.block_shape)],
            "scale": self.scale._to_c(owner, f"{what}.scale") if self.scale else None,
            "zero_point": (self.zero_point._to_c(owner, f"{what}.zero_point")
                           if self.zero_point else None),
            "second_level_scale": (
                self.second_level_scale._to_c(owner, f"{what}.second_level_scale")
                if self.second_level_scale else None),
            "second_level_block_shape": (list(self.second_level_block_shape)
                                         if self.second_level_block_shape is not None else None),
            "packing": self.packing._to_c() if self.packing else None,
        }


# ---------------------------------------------------------------------------
# Kernel parameters and the handles of added objects


@dataclass(frozen=True)
class Buffer:
    """A buffer parameter of a kernel: a 64-bit device address.

    ``layout``: the quantization layout the kernel requires of a constant
    bound to it (docs/format.md section 5.6). ``dtype``: optionally, the
    element type the kernel reads or writes there, which only debugging
    tools use (the intermediates ``Function.__call__(dump_dir=...)`` writes
    and checks; docs/debugging.md).
    """

    name: str
    access: Access = "read"
    layout: Optional[QuantLayout] = None
    dtype: Optional[DTypeLike] = None


@dataclass(frozen=True)
class Scalar:
    """A scalar parameter of a kernel, passed by value: a whole-byte dtype."""

    name: str
    dtype: DTypeLike = "uint64"


Param = Union[Buffer, Scalar]
"""A kernel parameter."""


@dataclass(frozen=True)
class CodeObject:
    """A code object added to a :class:`Builder`: where kernels live."""

    index: int
    kind: str
    target: str
    library_name: Optional[str] = None
    _owner: Optional[Builder] = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Kernel:
    """A kernel added to a :class:`Builder`; dispatch it with :meth:`FunctionBuilder.dispatch`."""

    index: int
    name: str
    params: Tuple[Param, ...]
    _owner: Optional[Builder] = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Constant:
    """A constant added to a :class:`Builder`.

    Pass it as a dispatch argument or copy source, or name it in a
    :class:`ScaleRef` or :class:`ZeroPoint`. ``dtype`` and ``shape`` are the
    stored type and the logical shape.
    """

    index: int
    name: str
    dtype: str
    shape: Tuple[int, ...]
    layout: Optional[QuantLayout] = None
    _owner: Optional[Builder] = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Binding:
    """Memory a command reads or writes: a function's input or output, or arena bytes.

    Made by :meth:`FunctionBuilder.input`, :meth:`~FunctionBuilder.output`
    and :meth:`~FunctionBuilder.arena`.
    """

    kind: Literal["input", "output", "arena"]
    index: int = 0
    offset: int = 0
    size: int = 0
    _function: Optional[FunctionBuilder] = field(default=None, repr=False, compare=False)


Arg = Union[Binding, Constant, Expr, int, float]
"""A dispatch argument: memory for a buffer parameter, a value for a scalar one."""

_BINDING_KINDS = {"input": _BIND_INPUT, "output": _BIND_OUTPUT, "arena": _BIND_ARENA}


def _scalar_bits(value: Union[int, float], dtype: str, what: str) -> int:
    """The bit pattern of `value` as the floating-point `dtype` (kernel ABI)."""
    np_dtype = _numpy_dtype(dtype)
    if np_dtype is None:
        raise TypeError(f"{what}: encoding a {dtype} scalar needs ml_dtypes (pip install "
                        "ml_dtypes); or pass its bits as axrt.builder.literal(bits)")
    with np.errstate(over="ignore"):
        raw = np.array(value, dtype=np_dtype).tobytes()
    return int.from_bytes(raw, "little")


# ---------------------------------------------------------------------------
# Functions


class FunctionBuilder:
    """A function of the file being built: its signature, and commands added in order.

    Made by :meth:`Builder.function`.
    """

    def __init__(self, owner: Builder, index: int, name: str, symbols: Dict[str, int],
                 inputs: Tuple[str, ...], outputs: Tuple[str, ...], arena_size: int,
                 mutable: Tuple[str, ...] = (), channels: Tuple[str, ...] = ()) -> None:
        self._owner = owner
        self._index = index
        self._name = name
        self._symbols = dict(symbols)
        self._inputs = inputs
        self._outputs = outputs
        self._arena_size = arena_size
        self._mutable = mutable
        self._channels = channels

    @property
    def index(self) -> int:
        """The function's index in the file."""
        return self._index

    @property
    def name(self) -> str:
        """The function's name."""
        return self._name

    @property
    def symbols(self) -> Dict[str, int]:
        """The symbolic dimensions, in order: name to upper bound."""
        return dict(self._symbols)

    @property
    def inputs(self) -> Tuple[str, ...]:
        """The inputs' names, in order."""
        return self._inputs

    @property
    def outputs(self) -> Tuple[str, ...]:
        """The outputs' names, in order."""
        return self._outputs

    @property
    def arena_size(self) -> int:
        """The bytes of transient memory the commands may use."""
        return self._arena_size

    @property
    def mutable(self) -> Tuple[str, ...]:
        """The names of the inputs the commands may write, in input order."""
        return self._mutable

    @property
    def channels(self) -> Tuple[str, ...]:
        """The channels' names, in order (format 1.4)."""
        return self._channels

    def __repr__(self) -> str:
        return f"<axrt.builder.FunctionBuilder {self._index} '{self._name}'>"

    def sym(self, name: str) -> Expr:
        """The value of symbol `name` when the function is called."""
        names = list(self._symbols)
        if name not in self._symbols:
            raise KeyError(f"function '{self._name}' has no symbol {name!r}; "
                           f"its symbols: {', '.join(names) or 'none'}")
        return Expr(((_OP_SYMBOL, names.index(name)),), self, name)

    def _slot(self, which: Union[int, str], names: Tuple[str, ...], what: str) -> int:
        if isinstance(which, str):
            if which not in names:
                raise KeyError(f"function '{self._name}' has no {what} {which!r}; "
                               f"its {what}s: {', '.join(names) or 'none'}")
            return names.index(which)
        return _index(which, f"{what} index")

    def input(self, which: Union[int, str]) -> Binding:
        """Input `which` (its index or name): read-only memory, unless the input
        is mutable: then writable, by kernel parameters of "write" or
        "read_write" access and as the destination of copies and fills."""
        return Binding("input", self._slot(which, self._inputs, "input"), _function=self)

    def output(self, which: Union[int, str]) -> Binding:
        """Output `which` (its index or name)."""
        return Binding("output", self._slot(which, self._outputs, "output"), _function=self)

    def arena(self, offset: int, size: int) -> Binding:
        """Bytes [offset, offset + size) of the function's arena."""
        return Binding("arena", offset=_index(offset, "arena offset"),
                       size=_index(size, "arena size"), _function=self)

    def _memory(self, value: Union[Binding, Constant], what: str) -> Dict[str, Any]:
        if isinstance(value, Constant):
            self._owner._check_owner(value, what)
            return {"kind": _BIND_CONSTANT, "index": value.index}
        if isinstance(value, Binding):
            if value._function is not self:
                raise ValueError(f"{what} is a binding of another function than '{self._name}'")
            return {"kind": _BINDING_KINDS[value.kind], "index": value.index,
                    "offset": value.offset, "size": value.size}
        raise TypeError(f"{what} must be a Binding (function.input/output/arena) or a Constant, "
                        f"not {type(value).__name__}")

    def _argument(self, value: Arg, param: Optional[Param], what: str) -> Dict[str, Any]:
        if isinstance(value, (Binding, Constant)):
            return self._memory(value, what)
        float_type = None
        signed = False
        if isinstance(param, Scalar):
            name = _dtype_name(param.dtype, f"parameter '{param.name}'")
            float_type = name if name in _FLOAT_DTYPES else None
            signed = name in _SIGNED_INT_DTYPES
        if float_type is None or isinstance(value, Expr):
            if isinstance(value, (float, np.floating)):
                raise TypeError(f"{what} is a float, but the parameter is not a floating-point "
                                "scalar")
            if (signed and isinstance(value, (int, np.integer))
                    and not isinstance(value, (bool, np.bool_)) and value < 0):
                # A signed parameter's negative literal, on its own (format 1.3).
                number = operator.index(value)
                if number < -(1 << 63):
                    raise ValueError(f"{what} must be at least -2**63; got {number}")
                return {"kind": _BIND_SCALAR, "value": [(_OP_CONST, number)]}
            return {"kind": _BIND_SCALAR, "value": _expr_ops(value, self, what)}
        # A number for a floating-point parameter: its bits as that type, a
        # negative literal when they fill 64 bits with the sign bit set (f64).
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"{what} must be a number or an Expr for {float_type} parameter, "
                            f"not {type(value).__name__}")
        bits = _scalar_bits(value, float_type, what)
        if bits >= 1 << 63:
            bits -= 1 << 64
        return {"kind": _BIND_SCALAR, "value": [(_OP_CONST, bits)]}

    def dispatch(self, kernel: Kernel, grid: Union[ExprLike, Sequence[ExprLike]],
                 args: Union[Sequence[Arg], Mapping[str, Arg]]) -> None:
        """Appends a launch of `kernel` over `grid` workgroups.

        `grid`: one to three workgroup counts (x, then y and z, which
        default to 1), ints or expressions. `args`: one per kernel
        parameter, in order or by parameter name: a :class:`Binding` or
        :class:`Constant` for a buffer, an int or :class:`Expr` for a
        scalar. A number for a floating-point scalar parameter is encoded
        as that type; an Expr gives its raw bits. A parameter of a signed
        type (int8 to int64, floating point) takes a negative number, on its
        own (format 1.3: the file then requires "signed-scalars.v1").
        """
        self._owner._check_owner(kernel, "kernel")
        counts: List[ExprLike] = ([grid] if isinstance(grid, (int, Expr, np.integer))
                                  else list(grid))
        if not 1 <= len(counts) <= 3:
            raise ValueError(f"grid takes 1 to 3 workgroup counts; got {len(counts)}")
        if isinstance(args, Mapping):
            names = [p.name for p in kernel.params]
            unknown = [k for k in args if k not in names]
            missing = [n for n in names if n not in args]
            if unknown or missing:
                takes = ", ".join(names) or "no arguments"
                raise ValueError(f"kernel '{kernel.name}' takes {takes}"
                                 + (f"; unknown: {', '.join(unknown)}" if unknown else "")
                                 + (f"; missing: {', '.join(missing)}" if missing else ""))
            args = [args[n] for n in names]
        elif isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
            raise TypeError(f"args must be a list or a dict, not {type(args).__name__}")
        bindings = []
        for i, arg in enumerate(args):
            param = kernel.params[i] if i < len(kernel.params) else None
            what = f"args[{i}]" + (f" ('{param.name}')" if param is not None else "")
            bindings.append(self._argument(arg, param, what))
        axes = "xyz"
        ops = [_expr_ops(c, self, f"grid {axes[i]}") for i, c in enumerate(counts)]
        ops += [None] * (3 - len(ops))
        self._owner._c.add_dispatch(self._index, kernel.index, ops[0], ops[1], ops[2], bindings)

    def copy(self, src: Union[Binding, Constant], dst: Binding, length: ExprLike, *,
             src_offset: Optional[ExprLike] = None, dst_offset: Optional[ExprLike] = None) -> None:
        """Appends a copy of `length` bytes from `src` + `src_offset` to `dst` + `dst_offset`.

        Offsets default to 0; `dst` is an output, the arena or a mutable input.
        """
        self._owner._c.add_copy(self._index, self._memory(src, "src"), self._memory(dst, "dst"),
                                _expr_ops(length, self, "length"),
                                src_offset=_expr_ops(src_offset, self, "src_offset"),
                                dst_offset=_expr_ops(dst_offset, self, "dst_offset"))

    def fill(self, target: Binding, length: ExprLike, pattern: Union[int, np.generic] = 0, *,
             pattern_size: Optional[int] = None, offset: Optional[ExprLike] = None) -> None:
        """Appends a fill of `length` bytes of `target` + `offset` with `pattern`.

        `pattern`: an int of `pattern_size` bytes (1 by default; 1, 2, 4 or
        8), or a numpy scalar such as ``np.float32(1.0)`` or ``np.int32(-1)``,
        whose bytes and size are used. `target` is an output, the arena or a
        mutable input.
        """
        if isinstance(pattern, np.generic):
            raw = np.asarray(pattern).astype(pattern.dtype.newbyteorder("<")).tobytes()
            if pattern_size is not None and pattern_size != len(raw):
                raise ValueError(f"pattern {pattern!r} has {len(raw)} bytes, not {pattern_size}")
            value, size = int.from_bytes(raw, "little"), len(raw)
        elif isinstance(pattern, float):
            raise TypeError("a float pattern needs a size: pass a numpy scalar such as "
                            f"np.float32({pattern!r})")
        else:
            value = _index(pattern, "pattern")
            size = 1 if pattern_size is None else _index(pattern_size, "pattern_size")
        self._owner._c.add_fill(self._index, self._memory(target, "target"),
                                _expr_ops(length, self, "length"), value, size,
                                offset=_expr_ops(offset, self, "offset"))


    def collective(self, kind: str, channel: Union[int, str], dtype: DTypeLike, count: ExprLike,
                   send: Union[Binding, Constant], recv: Binding, *, op: str = "sum",
                   root: int = 0, send_offset: Optional[ExprLike] = None,
                   recv_offset: Optional[ExprLike] = None) -> None:
        """Appends a collective over `channel` (format 1.4), in order with the other commands.

        `kind`: ``"all_reduce"``, ``"all_gather"``, ``"reduce_scatter"`` or
        ``"broadcast"``; `count` elements of `dtype` in each member's block,
        as :class:`axrt.Group` takes them: `send` holds a block per member
        for a reduce-scatter, `recv` one per member for an all-gather; they
        may be one range (in place). `op`: ``"sum"``, ``"max"`` or ``"min"``
        for reductions; `root`: the member whose `send` a broadcast reads.
        Offsets are bytes; `recv` is an output, the arena or a mutable input.
        """
        if kind not in _COLLECTIVE_KINDS:
            raise ValueError(f"kind must be one of {', '.join(_COLLECTIVE_KINDS)}; got {kind!r}")
        if op not in _REDUCE_OPS:
            raise ValueError(f"op must be one of {', '.join(_REDUCE_OPS)}; got {op!r}")
        self._owner._c.add_collective(
            self._index, _COLLECTIVE_KINDS[kind], self._slot(channel, self._channels, "channel"),
            _dtype_code(dtype, "dtype"), _expr_ops(count, self, "count"),
            self._memory(send, "send"), self._memory(recv, "recv"), op=_REDUCE_OPS[op],
            root=_index(root, "root"), send_offset=_expr_ops(send_offset, self, "send_offset"),
            recv_offset=_expr_ops(recv_offset, self, "recv_offset"))


_COLLECTIVE_KINDS = {"all_reduce": 1, "all_gather": 2, "reduce_scatter": 3, "broadcast": 4}
_REDUCE_OPS = {"sum": 0, "max": 1, "min": 2}


def _channel_name(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"a channel's name must be a str, not {type(value).__name__}")
    return value


# ---------------------------------------------------------------------------
# The builder


def _native(dtype: np.dtype) -> np.dtype:
    return dtype if dtype.isnative else dtype.newbyteorder("=")


def _to_native(array: np.ndarray) -> np.ndarray:
    return array if array.dtype.isnative else array.astype(_native(array.dtype))


def _as_bytes(array: np.ndarray) -> np.ndarray:
    """`array`'s elements, in the host's byte order and row-major, as uint8: a
    view when they already are, else a copy."""
    return np.ascontiguousarray(_to_native(array)).reshape(-1).view(np.uint8)


def _stored_size(name: str, stored: str, shape: Tuple[int, ...],
                 strides: Optional[Sequence[int]], layout: Optional[QuantLayout]) -> int:
    """The bytes a constant of `stored` elements and logical `shape` holds
    (docs/format.md section 4.2); the runtime checks the same when writing."""
    bits = _DTYPES[stored][1]
    if strides is not None:
        if len(strides) != len(shape):
            raise ValueError(f"constant '{name}': {len(strides)} strides for a shape of rank "
                             f"{len(shape)}")
        if any(extent == 0 for extent in shape):
            return 0
        reach = 1 + sum((extent - 1) * _index(stride, f"strides[{i}]")
                        for i, (extent, stride) in enumerate(zip(shape, strides)))
        return reach * max(bits, 8) // 8
    packing = layout.packing if layout is not None else None
    if packing is None and bits >= 8:
        return int(np.prod(shape, dtype=object)) * bits // 8
    if not shape:
        return 1  # a sub-byte scalar takes one byte
    if packing is None:
        axis, container, padding = len(shape) - 1, 8, "zero"
    else:
        axis, container, padding = packing.axis, packing.container_bits, packing.padding
    if not 0 <= axis < len(shape) or container <= 0:
        raise ValueError(f"constant '{name}': packing axis {axis} is outside rank {len(shape)}")
    row_bits = shape[axis] * bits
    words = -(-row_bits // container) if padding == "zero" else row_bits // container
    others = int(np.prod(shape[:axis] + shape[axis + 1:], dtype=object))
    return others * words * container // 8


def _pack_subbyte(values: np.ndarray, bits: int) -> np.ndarray:
    """Packs sub-byte codes the default way: along the last axis into bytes,
    element 0 in the low bits, each row zero-padded to a whole byte."""
    codes = np.ascontiguousarray(values).view(np.uint8) & np.uint8((1 << bits) - 1)
    if codes.ndim == 0:
        codes = codes.reshape(1)
    per_byte = 8 // bits
    pad = -codes.shape[-1] % per_byte
    if pad:
        codes = np.concatenate([codes, np.zeros(codes.shape[:-1] + (pad,), np.uint8)], axis=-1)
    codes = codes.reshape(codes.shape[:-1] + (-1, per_byte))
    packed = np.zeros(codes.shape[:-1], np.uint8)
    for i in range(per_byte):
        packed |= codes[..., i] << np.uint8(i * bits)
    return packed


class Builder:
    """Builds one .axe executable; write it with :meth:`save` or :meth:`to_bytes`.

    Objects are numbered in the order they are added and must be added
    before they are named (a kernel after its code object, a quantized
    constant after its scales); names of kernels, constants and functions
    are unique. The builder may be written, extended and written again.
    A builder serves one thread at a time; calls from several threads take
    turns.
    """

    def __init__(self, producer: str = "", producer_version: str = "") -> None:
        """`producer` and `producer_version` name the compiler in the file."""
        self._c = _AxeBuilder(producer, producer_version)

    def _check_owner(self, obj: Union[CodeObject, Kernel, Constant], what: str) -> None:
        if not isinstance(obj, (CodeObject, Kernel, Constant)):
            raise TypeError(f"{what} must be an axrt.builder object, not {type(obj).__name__}")
        if obj._owner is not self:
            raise ValueError(f"{what} ({type(obj).__name__} {obj.index}) belongs to another "
                             "Builder")

    def require_feature(self, name: str) -> None:
        """Declares that readers must understand feature `name` to run the file.

        The format's own features that the file uses ("quantization.v1",
        "kernel-library.v1" ...) need no call: the builder lists each one.
        """
        self._c.add_required_feature(name)

    def metadata(self, key: str, value: str) -> None:
        """Adds the free-form entry `key` = `value` (model name, license, flags ...)."""
        self._c.add_metadata(key, value)

    def code_object(self, kind: CodeObjectKind, target: str, data: Any) -> CodeObject:
        """Adds a code object of `kind` for `target` holding `data` (bytes-like).

        ``"cuda_fatbin"`` for ``"sm_80,sm_90"``, ``"cuda_ptx"`` for
        ``"compute_80"``, ``"host_shared_object"`` for ``"x86_64"`` ...
        (docs/format.md section 3.1); its bytes are judged when the file is
        written.
        """
        code = _choice(_CODE_OBJECT_KINDS, kind, "kind")
        if code == _CODE_OBJECT_KINDS["kernel_library"]:
            raise ValueError("a kernel library carries no bytes: use Builder.kernel_library()")
        index = self._c.add_code_object(code, target, data)
        return CodeObject(index, kind.lower(), target, None, _owner=self)

    def kernel_library(self, name: str, *, min_version: int = 1,
                       target: Optional[str] = None) -> CodeObject:
        """Adds a reference to the kernel library `name` the runtime already has.

        `min_version`: the lowest library version that serves. `target`
        defaults to this host's architecture (``"x86_64"``, ``"aarch64"``),
        the target of a CPU library such as the built-in ``"axrt.cpu"``.
        """
        target = _AxeBuilder.HOST_TARGET if target is None else target
        index = self._c.add_code_object(_CODE_OBJECT_KINDS["kernel_library"], target, None,
                                        library_name=name, library_min_version=min_version)
        return CodeObject(index, "kernel_library", target, name, _owner=self)

    def kernel(self, name: str, code_object: CodeObject, params: Sequence[Param] = (), *,
               entry_symbol: Optional[str] = None,
               workgroup_size: Union[int, Sequence[int]] = (1, 1, 1),
               dynamic_shared_memory: int = 0,
               cluster_dims: Optional[Union[int, Sequence[int]]] = None) -> Kernel:
        """Adds kernel `name`, implemented by `code_object` at `entry_symbol` (default: `name`).

        `params`: the parameter table, in argument-block order (docs/kernels.md
        lists those of the built-in kernels). `workgroup_size` (threads per
        workgroup: the CUDA block, informational on the CPU) and
        `cluster_dims` take 1 to 3 integers.
        """
        self._check_owner(code_object, "code_object")
        c_params = []
        for i, param in enumerate(params):
            what = f"params[{i}]"
            if isinstance(param, Buffer):
                c_params.append({
                    "name": param.name, "kind": _PARAM_BUFFER,
                    "access": _choice(_ACCESS, param.access, f"{what}.access"),
                    "layout": param.layout._to_c(self, f"{what}.layout") if param.layout else None,
                    "scalar_type": (_dtype_code(param.dtype, f"{what}.dtype")
                                    if param.dtype is not None else 0),
                })
            elif isinstance(param, Scalar):
                c_params.append({"name": param.name, "kind": _PARAM_SCALAR, "access": 0,
                                 "scalar_type": _dtype_code(param.dtype, f"{what}.dtype")})
            else:
                raise TypeError(f"{what} must be an axrt.builder.Buffer or Scalar, "
                                f"not {type(param).__name__}")
        index = self._c.add_kernel(
            name, code_object.index, c_params, entry_symbol=entry_symbol,
            workgroup_size=_dims3(workgroup_size, 1, "workgroup_size"),
            dynamic_shared_memory=dynamic_shared_memory,
            cluster_dims=_cluster_dims(cluster_dims))
        return Kernel(index, name, tuple(params), _owner=self)

    def kernel_variant(self, kernel: Kernel, code_object: CodeObject, *,
                       entry_symbol: Optional[str] = None,
                       workgroup_size: Union[int, Sequence[int]] = (1, 1, 1),
                       dynamic_shared_memory: int = 0,
                       cluster_dims: Optional[Union[int, Sequence[int]]] = None) -> None:
        """Adds another implementation of `kernel` in `code_object`, for another device.

        It shares the kernel's parameters and grid; a loader runs the first
        implementation it can load, the kernel's own first, then variants
        in the order added. `entry_symbol` defaults to the kernel's.
        """
        self._check_owner(kernel, "kernel")
        self._check_owner(code_object, "code_object")
        self._c.add_kernel_variant(
            kernel.index, code_object.index, entry_symbol=entry_symbol,
            workgroup_size=_dims3(workgroup_size, 1, "workgroup_size"),
            dynamic_shared_memory=dynamic_shared_memory,
            cluster_dims=_cluster_dims(cluster_dims))

    def constant(self, name: str, data: Any, *, dtype: Optional[DTypeLike] = None,
                 shape: Optional[Sequence[int]] = None, strides: Optional[Sequence[int]] = None,
                 layout: Optional[QuantLayout] = None, alignment: int = 0) -> Constant:
        """Adds constant `name` (weights) holding `data`.

        `data` is a numpy array or anything ``numpy.asarray`` takes; its
        dtype is the constant's (ml_dtypes bfloat16 and fp8 arrays included;
        an ml_dtypes int4, uint4, int2, uint2 or float4_e2m1fn array is
        packed the default way: along the last axis into bytes, low bits
        first). Non-contiguous arrays are copied to row-major order.

        What is kept until the file is written: a writable array, bytes and
        Python values are copied now, so the caller may change or free them
        at once. An array that cannot be written through (read-only, such as
        ``np.load(path, mmap_mode="r")``) or any ``np.memmap`` is referenced
        instead: its bytes are read while the file is written (converted
        then, if they need converting), one constant at a time, so a
        checkpoint larger than memory can be converted. It must not change
        until the last :meth:`save` or :meth:`to_bytes`.

        `data` may also be a callable taking no arguments, which then needs
        `dtype` and `shape`: it is called once per write of the file, when
        the constant's bytes are written, and its result (read as
        ``constant(name, result, dtype=dtype, shape=shape)`` would read it)
        is released as soon as they are. An exception it raises ends the
        write, reaches the caller of :meth:`save` or :meth:`to_bytes`
        unchanged, and leaves no file behind.

        `dtype` converts Python values (lists, scalars) to that type. For
        an array or a bytes-like object it instead says what its bytes are,
        such as ``"int4"`` for packed int4 given as uint8 bytes; the logical
        `shape` then defaults to the array's with the packed axis (the
        layout's packing axis, else the last) counting elements instead of
        words, or to the array's shape when the element sizes agree.
        `strides` (in elements, with `shape`) describe a strided constant
        over the bytes of `data`. `layout`: the quantization layout, whose
        scale and zero-point constants were added before. `alignment`: of
        the data in the file, a power of two up to 4096 (0: 64).
        """
        if callable(data) and not isinstance(data, (np.ndarray, bytes, bytearray, memoryview)):
            return self._deferred_constant(name, data, dtype, shape, strides, layout, alignment)
        referenced = False
        if isinstance(data, (bytes, bytearray, memoryview)):
            if dtype is None:
                raise TypeError(f"constant '{name}': bytes need dtype= (and shape=) to say what "
                                "they hold")
            array = np.frombuffer(data, dtype=np.uint8)
        elif isinstance(data, np.ndarray):
            array = data
            referenced = isinstance(data, np.memmap) or not data.flags.writeable
        else:
            # Python values are converted to the dtype asked for.
            np_dtype = None
            if dtype is not None:
                np_dtype = _numpy_dtype(_dtype_name(dtype, f"constant '{name}'"))
                if np_dtype is None:
                    raise TypeError(f"constant '{name}': converting Python values to "
                                    f"{_dtype_name(dtype)} needs ml_dtypes (pip install ml_dtypes)")
            array = np.asarray(data, dtype=np_dtype)
            dtype = None
        if dtype is not None and _own_dtype_name(array) == _dtype_name(dtype, f"constant '{name}'"):
            dtype = None  # the array's own type: nothing to reinterpret
        if array.dtype.hasobject:
            raise TypeError(f"constant '{name}': data of dtype {array.dtype} holds Python objects")

        payload: np.ndarray = array
        if dtype is None:
            stored = _dtype_name(_native(array.dtype), f"constant '{name}'")
            bits = _DTYPES[stored][1]
            logical = tuple(array.shape) if shape is None else tuple(shape)
            if bits < 8:
                if (layout is not None and layout.packing is not None) or strides is not None:
                    raise ValueError(f"constant '{name}': {stored} values are packed the default "
                                     "way only; for a layout's packing or strides pass the packed "
                                     f"words with dtype='{stored}'")
                payload = _pack_subbyte(_to_native(array), bits)
                referenced = False  # packing made a copy
        else:
            stored = _dtype_name(dtype, f"constant '{name}'")
            if shape is not None:
                logical = tuple(shape)
            else:
                logical = self._logical_shape(name, array, stored, layout)
        c_shape = [_index(v, f"shape[{i}]") for i, v in enumerate(logical)]
        c_strides = list(strides) if strides is not None else None
        c_layout = layout._to_c(self, "layout") if layout is not None else None
        if referenced:
            # Read when the file is written; a view when no conversion is due.
            index = self._c.add_constant_source(
                name, lambda: _as_bytes(payload), payload.nbytes, c_shape, _DTYPES[stored][0],
                strides=c_strides, alignment=alignment, layout=c_layout)
        else:
            index = self._c.add_constant(
                name, _as_bytes(payload), c_shape, _DTYPES[stored][0],
                strides=c_strides, alignment=alignment, layout=c_layout)
        return Constant(index, name, stored, tuple(c_shape), layout, _owner=self)

    def _deferred_constant(self, name: str, produce: Any, dtype: Optional[DTypeLike],
                           shape: Optional[Sequence[int]], strides: Optional[Sequence[int]],
                           layout: Optional[QuantLayout], alignment: int) -> Constant:
        """A constant whose data `produce()` makes when the file is written."""
        if dtype is None or shape is None:
            raise TypeError(f"constant '{name}': data given as a callable needs dtype= and shape=")
        stored = _dtype_name(dtype, f"constant '{name}'")
        logical = tuple(_index(v, f"shape[{i}]") for i, v in enumerate(shape))
        size = _stored_size(name, stored, logical, strides, layout)

        def payload() -> np.ndarray:
            result = produce()
            if isinstance(result, (bytes, bytearray, memoryview)):
                array = np.frombuffer(result, dtype=np.uint8)
            else:
                array = np.asarray(result)
            if array.dtype.hasobject:
                raise TypeError(f"constant '{name}': the callable returned data of dtype "
                                f"{array.dtype}, which holds Python objects")
            if _own_dtype_name(array) == stored:
                if strides is None and tuple(array.shape) != logical:
                    raise ValueError(f"constant '{name}': the callable returned shape "
                                     f"{tuple(array.shape)}, but shape= is {logical}")
                bits = _DTYPES[stored][1]
                if bits < 8:
                    array = _pack_subbyte(_to_native(array), bits)
            out = _as_bytes(array)
            if out.nbytes != size:
                raise ValueError(f"constant '{name}': the callable returned {out.nbytes} bytes "
                                 f"({array.dtype} {tuple(array.shape)}), but {stored} "
                                 f"{list(logical)} holds {size}")
            return out

        index = self._c.add_constant_source(
            name, payload, size, list(logical), _DTYPES[stored][0],
            strides=list(strides) if strides is not None else None, alignment=alignment,
            layout=layout._to_c(self, "layout") if layout is not None else None)
        return Constant(index, name, stored, logical, layout, _owner=self)

    @staticmethod
    def _logical_shape(name: str, array: np.ndarray, stored: str,
                       layout: Optional[QuantLayout]) -> Tuple[int, ...]:
        """The logical shape of `array`'s bytes read as `stored` elements."""
        bits = _DTYPES[stored][1]
        word_bits = array.dtype.itemsize * 8
        if word_bits == bits:
            return tuple(array.shape)
        packing = layout.packing if layout is not None else None
        container = packing.container_bits if packing is not None else 8
        if bits < 8 and word_bits == container and array.ndim > 0:
            axis = packing.axis if packing is not None else array.ndim - 1
            if not 0 <= axis < array.ndim:
                raise ValueError(f"constant '{name}': packing axis {axis} is outside rank "
                                 f"{array.ndim}")
            shape = list(array.shape)
            shape[axis] *= container // bits
            return tuple(shape)
        raise ValueError(f"constant '{name}': cannot tell the shape of {stored} elements from an "
                         f"array of {array.dtype} {tuple(array.shape)}; give shape=")

    def prepacked_copy(self, constant: Constant, target: str, layout_id: str, data: Any) -> None:
        """Adds `constant`'s weights pre-packed for `target` in layout `layout_id`.

        `data` is bytes-like or a numpy array (its bytes, row-major).
        """
        self._check_owner(constant, "constant")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            data = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        self._c.add_prepacked_copy(constant.index, target, layout_id, data)

    def function(self, name: str,
                 inputs: Sequence[Tuple[str, DTypeLike, Sequence[Union[int, str]]]] = (),
                 outputs: Sequence[Tuple[str, DTypeLike, Sequence[Union[int, str]]]] = (), *,
                 symbols: Optional[Mapping[str, int]] = None,
                 arena_size: int = 0, mutable: Sequence[str] = (),
                 channels: Union[Sequence[str], Mapping[str, int]] = ()) -> FunctionBuilder:
        """Adds function `name` with no commands yet; add them to what it returns.

        `inputs` and `outputs`: ``(name, dtype, shape)`` each, a dimension
        being an int or the name of a symbol. `symbols`: the symbolic
        dimensions, name to upper bound, in order. `arena_size`: bytes of
        transient memory the commands may use (:meth:`FunctionBuilder.arena`).
        `mutable`: names of inputs the commands may write in place (format
        1.2: a KV cache, a step counter); the caller passes a writable tensor
        that each call updates, and the file requires "mutable-inputs.v1".
        `channels`: the groups of devices its collectives run over (format
        1.4), by name, or name to the number of members each needs (0: any);
        each is bound to a device group when the function is called
        (:meth:`FunctionBuilder.collective`; the file requires
        "collectives.v1").
        """
        if isinstance(channels, (str, bytes)):
            raise TypeError("channels must be a sequence of names or a dict of name to size, "
                            f"not a single {type(channels).__name__}")
        channel_map = (dict(channels) if isinstance(channels, Mapping)
                       else {_channel_name(c): 0 for c in channels})
        symbol_map = dict(symbols or {})
        order = list(symbol_map)
        if isinstance(mutable, (str, bytes)):
            raise TypeError("mutable must be a sequence of input names, not a single "
                            f"{type(mutable).__name__}")
        mutable_names = list(mutable)

        def signature(spec: Any, what: str) -> Dict[str, Any]:
            if not isinstance(spec, (tuple, list)) or len(spec) != 3:
                raise TypeError(f"{what} must be a (name, dtype, shape) tuple, not {spec!r}")
            tensor, dtype, dims = spec
            if isinstance(dims, (str, bytes)) or not isinstance(dims, Sequence):
                raise TypeError(f"{what} shape must be a sequence of ints and symbol names")
            c_dims = []
            for d, extent in enumerate(dims):
                if isinstance(extent, str):
                    if extent not in symbol_map:
                        raise ValueError(f"{what} '{tensor}' dimension {d} names symbol "
                                         f"{extent!r}, which symbols= does not declare")
                    c_dims.append((0, order.index(extent)))
                else:
                    c_dims.append((_index(extent, f"{what} '{tensor}' dimension {d}"), -1))
            return {"name": tensor, "dtype": _dtype_code(dtype, f"{what} '{tensor}'"),
                    "dims": c_dims}

        c_inputs = [signature(s, f"inputs[{i}]") for i, s in enumerate(inputs)]
        c_outputs = [signature(s, f"outputs[{i}]") for i, s in enumerate(outputs)]
        input_names = [s["name"] for s in c_inputs]
        for entry in mutable_names:
            if entry not in input_names:
                where = ("an output" if any(s["name"] == entry for s in c_outputs)
                         else "not an input")
                raise ValueError(f"function '{name}': mutable names {entry!r}, which is {where}; "
                                 f"only inputs can be mutable (inputs: "
                                 f"{', '.join(input_names) or 'none'})")
        for spec in c_inputs:
            if spec["name"] in mutable_names:
                spec["flags"] = _SIG_FLAG_MUTABLE
        c_symbols = [{"name": k, "upper_bound": v} for k, v in symbol_map.items()]
        c_channels = [{"name": k, "size": _index(v, f"channel '{k}' size")}
                      for k, v in channel_map.items()]
        index = self._c.add_function(name, c_symbols, c_inputs, c_outputs, arena_size=arena_size,
                                     channels=c_channels)
        return FunctionBuilder(self, index, name, symbol_map, tuple(input_names),
                               tuple(s["name"] for s in c_outputs), arena_size,
                               tuple(n for n in input_names if n in mutable_names),
                               tuple(channel_map))

    def to_bytes(self) -> bytes:
        """The verified file, as bytes (what :meth:`save` writes)."""
        return self._c.write_memory()

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the verified file to `path`, replacing it whole or not at all."""
        self._c.write_file(path)

