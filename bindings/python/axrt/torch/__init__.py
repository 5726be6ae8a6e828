"""axrt functions as PyTorch operators (docs/python.md, "PyTorch").

``axrt.torch.register(executable, namespace="mymodel")`` makes every function
of a loaded executable a ``torch.library`` custom operator,
``torch.ops.mymodel.<function name>``, that runs in eager mode, inside
``torch.compile(fullgraph=True)`` (a fake implementation derived from the
function's signature and symbolic dimensions gives the output shapes) and
under autograd when the executable holds the function's backward.

The backward convention: for a function ``f(x_1, ..., x_n) -> (y_1, ...,
y_m)``, a function named ``f_backward`` taking ``(x_1, ..., x_n,
grad_y_1, ..., grad_y_m)`` and returning ``(grad_x_1, ..., grad_x_n)``, each
gradient with the dtype and shape of its tensor (mutable inputs get no
gradient and have no output). :func:`backward_name` gives the name;
``axrt.builder`` writers follow it.

Tensors cross by DLPack without a copy: inputs must be on the function's
device (non-contiguous ones are made contiguous first), and outputs are
torch tensors over the memory axrt allocated.
"""

from __future__ import annotations

import keyword
import re
import threading
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from .._extras import require

torch = require("torch", "axrt.torch (PyTorch operators)")

from .. import _axrt  # noqa: E402

__all__ = ["register", "backward_name", "Registered", "DTYPES"]

BACKWARD_SUFFIX = "_backward"

# axrt dtype names (the signature's) to torch dtypes, where torch has one:
# the runtime's table of element types with their numpy (and ml_dtypes)
# counterparts, whose names are torch's too. Sub-byte types have none.
DTYPES: Dict[str, torch.dtype] = {
    _name: getattr(torch, _np.name)
    for _name, (_, _bits) in _axrt.DTYPES.items()
    if _bits % 8 == 0 and (_np := _axrt.numpy_dtype(_name)) is not None and hasattr(torch, _np.name)
}

_lock = threading.Lock()
# One torch.library.Library per namespace, kept alive for the process: the
# operators live as long as their library object.
_libraries: Dict[str, "torch.library.Library"] = {}
_registered: Dict[str, "Registered"] = {}


def backward_name(name: str) -> str:
    """The name of the function that computes ``name``'s gradients."""
    return name + BACKWARD_SUFFIX


@dataclass(frozen=True)
class Registered:
    """One registered operator: its qualified name (``"ns::f"``), the axrt
    function behind it, the backward function (or None) and the op."""

    qualname: str
    function: Any
    backward: Any
    op: Any


def _dtype(name: str, what: str) -> torch.dtype:
    try:
        return DTYPES[name]
    except KeyError:
        raise TypeError(f"{what} has element type {name}, which torch has no dtype for") from None


def _arg_name(name: str, used: set) -> str:
    ident = re.sub(r"\W", "_", name) or "arg"
    if ident[0].isdigit() or keyword.iskeyword(ident) or ident in ("self", "out"):
        ident = "a_" + ident
    base, k = ident, 1
    while ident in used:
        k += 1
        ident = f"{base}_{k}"
    used.add(ident)
    return ident


def _schema(function, op_name: str) -> str:
    used: set = set()
    args = []
    for i, sig in enumerate(function.inputs):
        alias = f"(a{i}!)" if sig["mutable"] else ""
        args.append(f"Tensor{alias} {_arg_name(sig['name'], used)}")
    outputs = function.outputs
    if len(outputs) == 1:
        returns = "Tensor"
    else:
        returns = "(" + ", ".join("Tensor" for _ in outputs) + ")"
    return f"{op_name}({', '.join(args)}) -> {returns}"


def _dispatch_key(function) -> str:
    device = function.device.type
    if device == "cpu":
        return "CPU"
    if device == "cuda":
        return "CUDA"
    raise ValueError(f"{function.name} runs on {function.device.id}, which torch has no "
                     "dispatch key for")


def _torch_device(function) -> torch.device:
    d = function.device
    return torch.device("cpu") if d.type == "cpu" else torch.device(d.type, d.ordinal)


def _check_backward(forward, backward) -> None:
    """Refuses a backward function whose signature breaks the convention."""
    fin = [s for s in forward.inputs if not s["mutable"]]
    want_in = [(s["dtype"], tuple(s["shape"])) for s in forward.inputs] + \
              [(s["dtype"], tuple(s["shape"])) for s in forward.outputs]
    want_out = [(s["dtype"], tuple(s["shape"])) for s in fin]
    have_in = [(s["dtype"], tuple(s["shape"])) for s in backward.inputs]
    have_out = [(s["dtype"], tuple(s["shape"])) for s in backward.outputs]
    if have_in != want_in or have_out != want_out:
        raise ValueError(
            f"{backward.name} does not follow the backward convention for {forward.name}: "
            f"it takes {backward.signature!r}, but must take the inputs of "
            f"{forward.name} and one gradient per output ({want_in}) and return one gradient "
            f"per non-mutable input ({want_out})")


# Host memory needs no stream ordering, so CPU operators exchange capsules
# directly: torch's Python-level __dlpack__ and __dlpack_device__ cost more
# than the call itself (docs/performance.md, "PyTorch").
_to_capsule = getattr(torch._C, "_to_dlpack_versioned", None) or torch._C._to_dlpack
_from_capsule = torch._C._from_dlpack


def _make_impl(function):
    mutable = [s["mutable"] for s in function.inputs]
    single = len(function.outputs) == 1
    host = function.device.type == "cpu"

    def impl(*args):
        inputs = []
        for t, is_mutable in zip(args, mutable):
            # DLPack exports no tensor that requires grad; the data is the same.
            t = t.detach()
            if not is_mutable and not t.is_contiguous():
                t = t.contiguous()
            inputs.append(_axrt.from_dlpack(_to_capsule(t)) if host and t.device.type == "cpu"
                          else t)
        results = function(*inputs)
        if single:
            results = (results,)
        if host:
            outs = tuple(_from_capsule(r.__dlpack__(max_version=(1, 1))) for r in results)
        else:
            outs = tuple(torch.from_dlpack(r) for r in results)
        return outs[0] if single else outs

    return impl


def _make_fake(function):
    inputs = function.inputs
    outputs = [(sig["shape"], _dtype(sig["dtype"], f"output '{sig['name']}' of {function.name}"))
               for sig in function.outputs]
    device = _torch_device(function)
    single = len(outputs) == 1

    def fake(*args):
        sizes: Dict[str, Any] = {}
        for t, sig in zip(args, inputs):
            for extent, dim in zip(t.shape, sig["shape"]):
                if isinstance(dim, str):
                    sizes.setdefault(dim, extent)
        made = []
        for shape, dtype in outputs:
            dims = []
            for dim in shape:
                if isinstance(dim, str):
                    if dim not in sizes:
                        # Not implied by any input: the call decides it.
                        sizes[dim] = torch.library.get_ctx().new_dynamic_size()
                    dims.append(sizes[dim])
                else:
                    dims.append(dim)
            made.append(torch.empty(dims, dtype=dtype, device=device))
        return made[0] if single else tuple(made)

    return fake


def _make_autograd(function, backward_op):
    mutable = [s["mutable"] for s in function.inputs]
    n_outputs = len(function.outputs)

    def setup_context(ctx, inputs, output):
        outs = (output,) if n_outputs == 1 else tuple(output)
        ctx.save_for_backward(*inputs, *outs)

    def backward(ctx, *grads):
        saved = ctx.saved_tensors
        inputs, outs = saved[:len(mutable)], saved[len(mutable):]
        grads = [torch.zeros_like(o) if g is None else g.contiguous()
                 for g, o in zip(grads, outs)]
        result = backward_op(*inputs, *grads)
        result = (result,) if not isinstance(result, (tuple, list)) else tuple(result)
        it = iter(result)
        return tuple(None if m else next(it) for m in mutable)

    return setup_context, backward


def _functions(target) -> List[Any]:
    if isinstance(target, _axrt.Function):
        return [target]
    if isinstance(target, _axrt.Executable):
        return [target[name] for name in target]
    raise TypeError("register takes an axrt.Function or axrt.Executable, not "
                    f"{type(target).__name__}")


def register(target: Union["_axrt.Function", "_axrt.Executable"], namespace: str, *,
             backward: bool = True) -> Dict[str, Registered]:
    """Registers ``target`` (a function, or every function of an executable)
    as custom operators ``torch.ops.<namespace>.<function name>``.

    Returns the registrations by function name. A function whose
    :func:`backward_name` is also in the executable gets autograd through it
    (``backward=False`` leaves autograd out); pass the executable to register
    a function with its backward. Registering a name twice in a
    namespace raises ``RuntimeError``; a function torch cannot express (an
    element type torch lacks, a device without a dispatch key) raises
    ``TypeError`` or ``ValueError`` before anything is registered.
    """
    if not isinstance(namespace, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", namespace):
        raise ValueError(f"namespace must be a Python identifier, not {namespace!r}")
    functions = _functions(target)
    by_name = {f.name: f for f in functions}
    plans = []
    for f in functions:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", f.name):
            raise ValueError(f"function name {f.name!r} is not an operator name")
        for sig in list(f.inputs) + list(f.outputs):
            _dtype(sig["dtype"], f"'{sig['name']}' of {f.name}")
        if not f.outputs:
            raise ValueError(f"{f.name} has no outputs; an operator returns at least one tensor")
        key = _dispatch_key(f)
        bwd = None
        if backward:
            bwd = by_name.get(backward_name(f.name))
            if bwd is not None:
                _check_backward(f, bwd)
        plans.append((f, key, bwd))
    with _lock:
        for f, _, _ in plans:
            qualname = f"{namespace}::{f.name}"
            if qualname in _registered:
                raise RuntimeError(f"{qualname} is already registered")
        lib = _libraries.get(namespace)
        if lib is None:
            lib = torch.library.Library(namespace, "FRAGMENT")
            _libraries[namespace] = lib
        out: Dict[str, Registered] = {}
        for f, key, _ in plans:
            lib.define(_schema(f, f.name))
            lib.impl(f.name, _make_impl(f), key)
            torch.library.register_fake(f"{namespace}::{f.name}", _make_fake(f), lib=lib)
        ops = getattr(torch.ops, namespace)
        for f, _, bwd in plans:
            qualname = f"{namespace}::{f.name}"
            if bwd is not None:
                setup, backward_fn = _make_autograd(f, getattr(ops, bwd.name).default)
                torch.library.register_autograd(qualname, backward_fn, setup_context=setup,
                                                lib=lib)
            reg = Registered(qualname, f, bwd, getattr(ops, f.name))
            _registered[qualname] = reg
            out[f.name] = reg
        return out
