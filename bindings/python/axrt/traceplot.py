"""Draws a trace that axrt wrote (axrt.profile, AXRT_TRACE) as a timeline
picture, for documents and terminals without a trace viewer::

    python -m axrt.traceplot trace.json timeline.png [--start MS] [--end MS]

One row per host thread and per stream: API calls, ranges and engine steps
on the threads; function invocations on the streams with their kernels,
copies and fills drawn inside; each device's memory in use below. Needs
matplotlib (``pip install axrt[plot]``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from typing import Dict, List, Optional, Sequence, Tuple

from ._extras import MissingExtraError, require

__all__ = ["load", "plot", "main"]

_COLORS = {
    "api": "#9e9e9e", "range": "#7e57c2", "serving": "#26a69a", "function": "#90caf9",
    "kernel": "#1565c0", "copy": "#ef6c00", "fill": "#fbc02d", "host": "#8d6e63",
    "sync": "#bdbdbd",
}
# Inner slices (inside a function) are drawn thinner, on top.
_INNER = {"kernel", "copy", "fill"}


def load(path: "str | os.PathLike[str]") -> dict:
    """Reads a trace file (JSON object or bare array format)."""
    with open(path) as f:
        data = json.load(f)
    if isinstance(data, list):
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise ValueError(f"{os.fspath(path)} is not a Chrome trace: no traceEvents list")
    return data


def _names(events: Sequence[dict]) -> Tuple[Dict[int, str], Dict[Tuple[int, int], str]]:
    processes: Dict[int, str] = {}
    threads: Dict[Tuple[int, int], str] = {}
    for e in events:
        if e.get("ph") != "M":
            continue
        name = e.get("args", {}).get("name", "")
        if e.get("name") == "process_name":
            processes[e["pid"]] = name
        elif e.get("name") == "thread_name":
            threads[(e["pid"], e["tid"])] = name
    return processes, threads


def plot(path: "str | os.PathLike[str]", out: "str | os.PathLike[str]", *,
         start_ms: Optional[float] = None, end_ms: Optional[float] = None,
         title: Optional[str] = None, width: float = 14.0) -> None:
    """Draws the trace at ``path`` into the image ``out`` (its suffix picks the
    format: .png, .svg, .pdf). ``start_ms`` and ``end_ms`` crop the time axis."""
    matplotlib = require("matplotlib", "axrt.traceplot (trace timelines)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    trace = load(path)
    events = trace["traceEvents"]
    processes, threads = _names(events)
    lo = (start_ms or 0.0) * 1000.0
    hi = end_ms * 1000.0 if end_ms is not None else float("inf")
    slices: Dict[Tuple[int, int], List[dict]] = defaultdict(list)
    counters: Dict[Tuple[int, str], List[Tuple[float, float]]] = defaultdict(list)
    for e in events:
        ph = e.get("ph")
        if ph == "X" and e["ts"] + e.get("dur", 0) >= lo and e["ts"] <= hi:
            slices[(e["pid"], e["tid"])].append(e)
        elif ph == "C" and "bytes_in_use" in e.get("args", {}) and lo <= e["ts"] <= hi:
            counters[(e["pid"], e["name"])].append((e["ts"], e["args"]["bytes_in_use"]))
    if not slices:
        raise ValueError(f"{os.fspath(path)} holds no slices in the window drawn")
    # Host threads first, then each device's streams.
    rows = sorted(slices, key=lambda k: (k[0] != 1, k[0], k[1]))
    labels = []
    for pid, tid in rows:
        thread = threads.get((pid, tid), f"thread {tid}")
        process = processes.get(pid, f"process {pid}")
        labels.append(thread if pid == 1 else f"{process}: {thread}")
    memory = sorted(counters)
    height = 0.6 + 0.45 * len(rows) + (1.4 if memory else 0.0)
    fig = plt.figure(figsize=(width, max(2.5, height)))
    if memory:
        grid = fig.add_gridspec(2, 1, height_ratios=[0.45 * len(rows) + 0.3, 1.4], hspace=0.25)
        ax = fig.add_subplot(grid[0])
        mem_ax = fig.add_subplot(grid[1], sharex=ax)
    else:
        ax = fig.add_subplot(1, 1, 1)
        mem_ax = None
    used = set()
    for y, key in enumerate(rows):
        for e in slices[key]:
            cat = e.get("cat", "")
            inner = cat in _INNER and key[0] != 1
            h = 0.45 if inner else 0.8
            ax.broken_barh([(e["ts"] / 1000.0, max(e.get("dur", 0), 0.001) / 1000.0)],
                           (y - h / 2, h), facecolors=_COLORS.get(cat, "#616161"),
                           edgecolors="none", zorder=3 if inner else 2)
            used.add(cat)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(title or os.path.basename(os.fspath(path)), fontsize=10)
    ax.legend(handles=[Patch(color=_COLORS[c], label=c) for c in _COLORS if c in used],
              loc="upper right", fontsize=7, ncol=min(len(used), 5), framealpha=0.8)
    if mem_ax is not None:
        for pid, name in memory:
            points = sorted(counters[(pid, name)])
            xs = [t / 1000.0 for t, _ in points]
            ys = [v / (1 << 20) for _, v in points]
            mem_ax.step(xs, ys, where="post",
                        label=f"{processes.get(pid, pid)} {name} in use")
        mem_ax.set_ylabel("MiB", fontsize=8)
        mem_ax.legend(fontsize=7, loc="upper right")
        mem_ax.grid(alpha=0.3)
        mem_ax.set_xlabel("time (ms)")
    else:
        ax.set_xlabel("time (ms)")
    if start_ms is not None or end_ms is not None:
        ax.set_xlim(left=start_ms, right=end_ms)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m axrt.traceplot",
                                     description="Draws an axrt trace as a timeline picture.")
    parser.add_argument("trace", help="the trace file (Chrome Trace Event JSON)")
    parser.add_argument("out", help="the picture to write (.png, .svg, .pdf)")
    parser.add_argument("--start", type=float, default=None, help="first millisecond drawn")
    parser.add_argument("--end", type=float, default=None, help="last millisecond drawn")
    parser.add_argument("--title", default=None)
    parser.add_argument("--width", type=float, default=14.0, help="inches")
    args = parser.parse_args(argv)
    try:
        plot(args.trace, args.out, start_ms=args.start, end_ms=args.end, title=args.title,
             width=args.width)
    except MissingExtraError as e:
        print(f"axrt.traceplot: {e}", file=sys.stderr)
        return 2
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"axrt.traceplot: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
