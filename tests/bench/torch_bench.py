"""The cost of PyTorch interop, side by side in one run (docs/performance.md,
"PyTorch"): one call of a registered axrt operator on a tiny tensor against
the same function called directly and a plain torch op, and DLPack exchange
of a small tensor both ways against numpy's and torch's own.

    PYTHONPATH=build/release/python:tests/python python3 tests/bench/torch_bench.py
"""
import argparse
import tempfile
import timeit
from pathlib import Path

import numpy as np
import torch

import axrt
import axrt.torch as axt
import torch_support


def best_us(fn, number, repeat):
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    n, r = args.number, args.repeat
    exe = torch_support.load(Path(tempfile.mkdtemp()))
    axt.register(exe, "bench")
    op = torch.ops.bench.tanh2
    t = torch.randn(16, dtype=torch.float64)
    a = np.asarray(t)
    x = axrt.asarray(a)

    rows = []
    rows.append(("torch op: 2 * torch.tanh(t)", best_us(lambda: 2 * torch.tanh(t), n, r)))
    rows.append(("axrt direct: exe.tanh2(axrt tensor) + sync",
                 best_us(lambda: exe.tanh2(x).synchronize(), n, r)))
    rows.append(("axrt direct: exe.tanh2(torch tensor) -> torch",
                 best_us(lambda: torch.from_dlpack(exe.tanh2(t)), n, r)))
    rows.append(("registered op: torch.ops.bench.tanh2(t)", best_us(lambda: op(t), n, r)))
    rows.append(("registered op, default overload", best_us(lambda: op.default(t), n, r)))
    rows.append(("axrt.from_dlpack(numpy)", best_us(lambda: axrt.from_dlpack(a), n, r)))
    rows.append(("axrt.from_dlpack(torch)", best_us(lambda: axrt.from_dlpack(t), n, r)))
    rows.append(("torch.from_dlpack(axrt)", best_us(lambda: torch.from_dlpack(x), n, r)))
    rows.append(("torch.from_dlpack(numpy) (anchor)", best_us(lambda: torch.from_dlpack(a), n, r)))
    rows.append(("np.from_dlpack(torch) (anchor)", best_us(lambda: np.from_dlpack(t), n, r)))
    rows.append(("round trip torch -> axrt -> torch",
                 best_us(lambda: torch.from_dlpack(axrt.from_dlpack(t)), n, r)))
    print(f"torch {torch.__version__}, axrt {axrt.__version__}; best of {r} x {n} calls")
    for name, us in rows:
        print(f"{us:9.2f} us  {name}")


if __name__ == "__main__":
    main()
