"""The built-in kernels as the converter binds them (docs/kernels.md): the
quantization layouts it writes, and each kernel's parameter table and CUDA
block size, read from the kernels' contracts (kernels/contracts.json)
packaged with axrt; and the packaged CUDA kernels.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from ..builder import Buffer, Packing, QuantLayout, Scalar, ScaleRef, ZeroPoint
from . import quantize


def _r(name: str, layout: Optional[QuantLayout] = None) -> Buffer:
    return Buffer(name, "read", layout)


# Written buffers declare their element type (docs/kernels.md), which the
# dumps and checks of a call read (docs/debugging.md).
def _w(name: str, dtype: str = "float32") -> Buffer:
    return Buffer(name, "write", dtype=dtype)


def _rw(name: str, dtype: str = "float32") -> Buffer:
    return Buffer(name, "read_write", dtype=dtype)


INT8_LAYOUT = QuantLayout("int8.per_channel", "int8", "f32", (1, 0), scale=ScaleRef(dtype="f32"))
FP8_LAYOUT = QuantLayout("fp8.e4m3fn.per_channel", "fp8_e4m3fn", "f32", (1, 0),
                         scale=ScaleRef(dtype="f32"))
_AWQ_PACKING = Packing(4, 32, axis=1, order="awq")


def awq_layout(group: int) -> QuantLayout:
    """AWQ's int4 storage in groups of `group` inputs (``awq.int4.g<group>``, docs/format.md
    9.2)."""
    return QuantLayout(f"awq.int4.g{group}", "uint4", "f32", (group, 1),
                       scale=ScaleRef(dtype="f16"),
                       zero_point=ZeroPoint("integer", dtype="uint4", packing=_AWQ_PACKING),
                       packing=_AWQ_PACKING)


def gptq_layout(group: int) -> QuantLayout:
    """GPTQ's (v2) int4 storage in groups of `group` inputs (``gptq_v2.int4.g<group>``,
    docs/format.md 9.3)."""
    return QuantLayout(f"gptq_v2.int4.g{group}", "uint4", "f32", (group, 1),
                       scale=ScaleRef(dtype="f16"),
                       zero_point=ZeroPoint("integer", dtype="uint4",
                                            packing=Packing(4, 32, axis=1, order="sequential")),
                       packing=Packing(4, 32, axis=0, order="sequential"))


def int4_kernel(kernel: str, group: int) -> str:
    """The name of int4 kernel `kernel` (the name of its groups of 128) whose contract declares
    the layout of groups of `group`: the same code, a layout id of its own (docs/kernels.md)."""
    return kernel if group == 128 else kernel.replace("_int4_", f"_int4_g{group}_", 1)


INT4_LAYOUT = awq_layout(128)
GPTQ_LAYOUT = gptq_layout(128)

# The layouts the converter writes, by the id a kernel's contract declares.
_LAYOUTS = {layout.layout_id: layout
            for layout in (INT8_LAYOUT, FP8_LAYOUT,
                           *(make(group) for make in (awq_layout, gptq_layout)
                             for group in quantize.INT4_GROUP_SIZES))}


def contracts_path() -> Path:
    """The built-in kernels' contracts (kernels/contracts.json), packaged with axrt."""
    return Path(__file__).absolute().parent.parent / "kernels" / "contracts.json"


def _contracts() -> List[dict]:
    with open(contracts_path(), encoding="utf-8") as f:
        return json.load(f)["kernels"]


def _kernel_table() -> Dict[str, Tuple[List, int]]:
    """Every kernel of the contracts whose layouts the converter writes: its parameter
    table and the CUDA block size of its CUDA implementation."""
    contracts = _contracts()
    table: Dict[str, Tuple[List, int]] = {}
    for kernel in contracts:
        params = []
        for p in kernel["params"]:
            if "scalar" in p:
                params.append(Scalar(p["name"], p["scalar"]))
            elif p["access"] == "read":
                if "layout" in p and p["layout"] not in _LAYOUTS:
                    break  # a layout the converter never writes
                params.append(_r(p["name"], _LAYOUTS.get(p.get("layout"))))
            elif p["access"] == "write":
                params.append(_w(p["name"], p["dtype"]))
            else:
                params.append(_rw(p["name"], p["dtype"]))
        else:
            table[kernel["name"]] = (params, int(kernel["cuda_block"]))
    return table


# Every kernel the program uses: its parameter table (from its contract,
# docs/kernels.md) and the CUDA block size of its CUDA implementation.
KERNELS: Dict[str, Tuple[List, int]] = _kernel_table()

# The kernels whose CUDA implementation is another kernel's entry point (the
# contract's cuda_entry: the int4 kernels' names for groups of 64 and 32 are
# their groups-of-128 kernels in CUDA), by name.
CUDA_ENTRIES: Dict[str, str] = {k["name"]: k["cuda_entry"] for k in _contracts()
                                if "cuda_entry" in k}


def default_fatbin() -> Optional[Path]:
    """The CUDA kernels packaged with axrt, when they were built."""
    path = Path(__file__).resolve().parent.parent / "kernels" / "axrt_kernels.fatbin"
    return path if path.is_file() else None
