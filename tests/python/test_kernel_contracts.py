"""The built-in kernels' contracts, written once (kernels/contracts.json): the CPU library's
parameter tables are generated from them at build time (cmake/axrt_kernel_contracts.cmake,
which checks each argument struct's size), the converter's kernel table reads them, and here
docs/kernels.md's tables and the converter are checked against them."""
import importlib
import json
import re
from pathlib import Path

# The module (axrt.llm.convert is also the name of its function).
convert = importlib.import_module("axrt.llm.convert")

ROOT = Path(__file__).resolve().parent.parent.parent
CONTRACTS = json.loads((ROOT / "kernels" / "contracts.json").read_text())["kernels"]
ACCESS = {"read": "R", "write": "W", "read_write": "RW"}


def render(kernel) -> str:
    """A kernel's parameter cell as docs/kernels.md writes it."""
    cells = []
    for p in kernel["params"]:
        if "scalar" in p:
            cells.append(f"`{p['name']}: {'u64' if p['scalar'] == 'uint64' else 'f32'}`")
        else:
            shape = f", `{p['shape']}`" if "shape" in p else ""
            cells.append(f"`{p['name']}` ({ACCESS[p['access']]}{shape})")
    return ", ".join(cells)


def doc_rows():
    rows = {}
    for line in (ROOT / "docs" / "kernels.md").read_text().splitlines():
        m = re.match(r"\| `(axrt_\w+)` \| ([^|]*) \|(.*)$", line)
        if m:
            assert m.group(1) not in rows, f"{m.group(1)} has two rows"
            rows[m.group(1)] = (m.group(2).strip(), [c.strip() for c in m.group(3).split("|")])
    return rows


def test_every_kernel_has_one_contract_and_one_row_that_says_it():
    names = [k["name"] for k in CONTRACTS]
    assert len(names) == len(set(names))
    rows = doc_rows()
    assert sorted(rows) == sorted(names), "docs/kernels.md and kernels/contracts.json list " \
                                          "different kernels"
    for kernel in CONTRACTS:
        assert rows[kernel["name"]][0] == render(kernel), kernel["name"]


def test_the_cuda_block_sizes_in_the_docs_are_the_contracts():
    rows = doc_rows()
    for kernel in CONTRACTS:
        cells = rows[kernel["name"]][1]
        # The transformer kernels' table has a "CUDA block" column (the others
        # give it per section).
        if kernel["section"] == "transformer":
            assert cells[1] == str(kernel["cuda_block"]), kernel["name"]


def test_the_converter_reads_its_kernels_from_the_contracts():
    assert convert.contracts_path().read_text() == (ROOT / "kernels" / "contracts.json").read_text()
    by_name = {k["name"]: k for k in CONTRACTS}
    used = set()
    for name, (params, block) in convert.KERNELS.items():
        contract = by_name[name]
        assert block == contract["cuda_block"]
        assert [p.name for p in params] == [p["name"] for p in contract["params"]], name
        for p, c in zip(params, contract["params"]):
            if "scalar" in c:
                assert p.dtype == c["scalar"], (name, p.name)
            else:
                assert p.access == c["access"], (name, p.name)
                layout = getattr(p, "layout", None)
                assert (layout.layout_id if layout is not None else None) == c.get("layout")
        used.add(name)
    # Every kernel the converter writes into a model has a contract.
    assert {"axrt_rmsnorm_f32", "axrt_attention_decode_f32", "axrt_sample_f32",
            "axrt_matmul_gptq_int4_q8_f32"} <= used
