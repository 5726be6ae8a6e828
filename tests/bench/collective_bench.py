"""All-reduce bus bandwidth of a group of CPU devices, against PyTorch's gloo, in one run.

axrt's side: a group of MEMBERS CPU devices (AXRT_CPU_DEVICES, set here
before axrt makes its instance) in this process, the "cpu" backend (a ring
over the devices' host memory, docs/multi-device.md). Each size is an
all-reduce (sum, float32, in place) of one tensor per member, queued back to
back through the Python API, then every member's stream synchronized; the
time per all-reduce is the total over the count.

With --processes, axrt's members run in MEMBERS processes too
(axrt.init_group over loopback TCP, through gloo's transport), each rank
timing the same count of all_reduce calls of a numpy array (each waits for
its result, as torch's does); the time is the slowest rank's.

The anchor: torch.distributed's gloo backend, MEMBERS processes on this
machine (loopback TCP, as gloo runs across processes), each rank timing the
same count of all_reduce calls of the same float32 tensor; the time is the
slowest rank's.

Both sides report as nccl-tests does:
    algbw = bytes / time
    busbw = algbw * 2 (n - 1) / n
busbw is what each member's link carries, comparable across member counts;
for CPU devices the "link" is the host's memory. ``speed`` is axrt's busbw
over gloo's (above 1: axrt is faster).

    AXRT_CPU_THREADS=1 PYTHONPATH=build/release/python python3 tests/bench/collective_bench.py

torch is only the anchor (``pip install torch``); without it the axrt side
still runs and the anchor columns are empty. --json FILE writes the records
of the regression gate's format (bench_results.py).
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import sys
import time
from typing import Dict, List, Optional

import numpy as np


def sizes_from(spec: str) -> List[int]:
    """'8:64M:4' -> 8 B to 64 MiB, times 4 each step (multiples of 4 bytes)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}

    def parse(text: str) -> int:
        return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)

    low, high, factor = spec.split(":")
    out, size = [], parse(low)
    while size <= parse(high):
        out.append(size)
        size *= int(factor)
    return out


def iterations(size: int) -> int:
    """Enough calls to take a measurable time, few for the large sizes."""
    return max(5, min(2000, (64 << 20) // max(size, 1) // 4))


def axrt_times(members: int, sizes: List[int]) -> Dict[int, float]:
    import axrt

    devices = [f"cpu:{i}" for i in range(members)]
    times = {}
    with axrt.group(devices, label="bench") as group:
        for size in sizes:
            n = size // 4
            tensors = [axrt.asarray(np.ones(n, np.float32), device=d) for d in devices]
            count = iterations(size)
            for _ in range(3):
                group.all_reduce(tensors)
            for t in tensors:
                t.synchronize()
            start = time.perf_counter()
            for _ in range(count):
                group.all_reduce(tensors)
            for t in tensors:
                t.synchronize()
            times[size] = (time.perf_counter() - start) / count
    return times


def time_calls(call, barrier, size: int) -> float:
    """Seconds per `call` at `size` bytes: 3 warm-up calls, a barrier, then the count."""
    count = iterations(size)
    for _ in range(3):
        call()
    barrier()
    start = time.perf_counter()
    for _ in range(count):
        call()
    return (time.perf_counter() - start) / count


def _axrt_rank(rank: int, members: int, port: int, sizes: List[int], out) -> None:
    import axrt

    member = axrt.init_group(rendezvous=f"tcp://127.0.0.1:{port}", rank=rank,
                             world_size=members, timeout=120)
    try:
        for size in sizes:
            t = np.ones(size // 4, np.float32)
            out.put((rank, size, time_calls(lambda: member.all_reduce(t), member.barrier, size)))
    finally:
        member.close()


def process_times(target, members: int, sizes: List[int]) -> Dict[int, float]:
    """Runs `target` in `members` processes (spawned, loopback TCP between them); the
    slowest rank's time per all-reduce at each size."""
    import multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=target, args=(r, members, port, sizes, queue))
             for r in range(members)]
    for p in procs:
        p.start()
    slowest: Dict[int, float] = {}
    for _ in range(members * len(sizes)):
        _, size, seconds = queue.get(timeout=600)
        slowest[size] = max(slowest.get(size, 0.0), seconds)
    for p in procs:
        p.join()
    return slowest


def _gloo_rank(rank: int, members: int, port: int, sizes: List[int], out) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=members)
    try:
        for size in sizes:
            t = torch.ones(size // 4, dtype=torch.float32)
            out.put((rank, size, time_calls(lambda: dist.all_reduce(t), dist.barrier, size)))
    finally:
        dist.destroy_process_group()


def gloo_times(members: int, sizes: List[int]) -> Optional[Dict[int, float]]:
    try:
        import torch.distributed  # noqa: F401
    except ImportError:
        return None
    return process_times(_gloo_rank, members, sizes)


def memcpy_bandwidth(size: int) -> float:
    """GB/s of one thread copying `size` bytes (numpy), the best of a few runs:
    the host memory's pace, for scale."""
    src = np.ones(size // 4, np.float32)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return size / best / 1e9


def busbw(size: int, seconds: float, members: int) -> float:
    return size / seconds * 2 * (members - 1) / members / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--sizes", default="8:64M:4", help="low:high:factor in bytes (K, M suffixes)")
    parser.add_argument("--no-anchor", action="store_true", help="skip the gloo side")
    parser.add_argument("--processes", action="store_true",
                        help="axrt's members in separate processes too (axrt.init_group, "
                             "loopback TCP, as gloo's): the 'procs' columns")
    parser.add_argument("--json", default="", help="write the gate's records to this file")
    args = parser.parse_args()
    os.environ["AXRT_CPU_DEVICES"] = str(args.members)
    sizes = sizes_from(args.sizes)

    mine = axrt_times(args.members, sizes)
    spread = process_times(_axrt_rank, args.members, sizes) if args.processes else None
    anchor = None if args.no_anchor else gloo_times(args.members, sizes)

    print(f"all-reduce, float32 sum, {args.members} CPU devices, {os.cpu_count()} CPUs "
          f"({platform.processor() or platform.machine()})")
    print(f"{'bytes':>10} {'axrt us':>10} {'algbw':>7} {'busbw':>7} {'gloo us':>10} {'busbw':>7} "
          f"{'speed':>6}" + (f" {'procs us':>10} {'busbw':>7} {'speed':>6}" if spread else ""))
    print(f"(one thread's memcpy of {sizes[-1]} bytes: {memcpy_bandwidth(sizes[-1]):.2f} GB/s)")
    records = []
    for size in sizes:
        t = mine[size]
        line = f"{size:>10} {t * 1e6:>10.1f} {size / t / 1e9:>7.3f} {busbw(size, t, args.members):>7.3f}"
        g = anchor.get(size) if anchor else None
        if g:
            line += (f" {g * 1e6:>10.1f} {busbw(size, g, args.members):>7.3f} "
                     f"{g / t:>6.2f}")
        if spread:
            p = spread[size]
            line += f" {p * 1e6:>10.1f} {busbw(size, p, args.members):>7.3f}"
            line += f" {g / p:>6.2f}" if g else ""
            records.append({"name": f"all_reduce_processes/members:{args.members}/bytes:{size}",
                            "unit": "GB/s", "axrt": busbw(size, p, args.members),
                            "anchor": busbw(size, g, args.members) if g else None,
                            "anchor_name": "torch.distributed gloo" if g else None,
                            "higher_is_better": True})
        print(line)
        records.append({"name": f"all_reduce/members:{args.members}/bytes:{size}", "unit": "GB/s",
                        "axrt": busbw(size, t, args.members),
                        "anchor": busbw(size, g, args.members) if g else None,
                        "anchor_name": "torch.distributed gloo" if g else None,
                        "higher_is_better": True})
    if args.json:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from bench_results import make_record, write_records

        write_records(args.json, "collective_bench",
                      [make_record(r.pop("name"), r.pop("unit"), r.pop("axrt"), r.pop("anchor"),
                                   r.pop("anchor_name"), r.pop("higher_is_better")) for r in records])
    return 0


if __name__ == "__main__":
    sys.exit(main())
