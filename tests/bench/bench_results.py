"""The benchmarks' figures as records, for the regression gate (docs/performance.md,
"Regression gate").

Every figure becomes a record: its name, axrt's value, the value of its anchor
measured in the same run (memcpy, OpenBLAS, ONNX Runtime, a direct kernel
call, numpy...), the unit, and

    ratio = axrt's cost over the anchor's: axrt / anchor for times,
            anchor / axrt for rates (GB/s, GFLOP/s, tokens/s).

Above 1 axrt is slower than its anchor; in every record a bigger ratio is
worse. A figure without an anchor in its run is a record whose anchor and
ratio are null; bench_check.py does not gate it.

    bench_results.py collect [--suite NAME] --out RESULTS RAW...
    bench_results.py quick BENCH_DIR OUT_DIR

`collect` reads Google Benchmark's JSON (--benchmark_out) and the JSON the
Python benchmarks write with --json, and writes RESULTS. `quick` runs the
quick suite of `make bench-check` and `make bench-baseline` with the
binaries and the package of BENCH_DIR, keeps the raw files in OUT_DIR and
collects them into OUT_DIR/results.json. Python 3 standard library only.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

SCHEMA = 1
RATIO_MEANING = ("axrt's cost over the anchor's: axrt / anchor for times, anchor / axrt for "
                 "rates; above 1 axrt is slower; bigger is worse")

# --- Google Benchmark: which figure is whose anchor ---------------------------------------
#
# Each rule pairs the axrt benchmarks whose name matches `pattern` (the name
# without /real_time, /manual_time and /iterations:N) with the anchor named by
# `anchor` (a template over the pattern's groups; "{memcpy_all}" is BM_Memcpy
# on every CPU). `metric`: "auto" takes FLOPS, else bytes/s, else the time per
# iteration; "p50" the median single call of the manually timed benchmarks.
# A time is read with the axrt benchmark's own clock (wall clock for
# UseRealTime and manual time, else CPU time) on both sides, so that what
# slows one side's clock slows the other's. `tag` names a second record of
# the same figure against another anchor. `cpu` adds a record "<name>/cpu"
# read with the calling thread's CPU time on both sides, for work that runs
# on the calling thread: on a machine that other processes keep busy, the
# wall clock also counts the time the thread waited for a core.
GBENCH_RULES: List[Tuple[str, str, str, str, bool]] = [
    # (pattern, anchor, metric, tag, cpu)
    # axrt_bench: host-side costs against the C library and memcpy.
    (r"BM_BufferAllocateRelease/(\d+)", "BM_HostMallocFree/{0}", "auto", "", False),
    (r"BM_StreamAllocateDeallocate/(\d+)", "BM_HostMallocFree/{0}", "auto", "", True),
    (r"BM_SmallCopySynchronize/to_host:\d", "BM_SmallMemcpy", "time", "", True),
    (r"BM_CopyFromHost|BM_CopyToHost|BM_CopyBuffer/from_pinned:\d", "{memcpy_all}", "auto", "",
     False),
    # dispatch_bench.cc: a dispatch against calling the same kernels directly
    # (back to back, the calls run inline on the calling thread).
    (r"BM_InvokeSynchronize/dispatches:(\d+)/allocated:\d", "BM_DispatchDirectCall/dispatches:{0}",
     "auto", "", True),
    (r"BM_InvokeSynchronizeAfterIdle/dispatches:(\d+)/allocated:\d/sleep:(\d)",
     "BM_DispatchDirectCallAfterIdle/dispatches:{0}/sleep:{1}", "p50", "", False),
    (r"BM_InvokeWorkerPathAfterIdle/allocated:\d",
     "BM_DispatchDirectCallAfterIdle/dispatches:1/sleep:1", "p50", "", False),
    # A traced call against the same call untraced: what tracing costs.
    (r"BM_InvokeSynchronizeTraced/dispatches:(\d+)",
     "BM_InvokeSynchronize/dispatches:{0}/allocated:0", "auto", "", True),
    # axrt_kernel_bench: the f32 matmul against OpenBLAS (1 thread direct,
    # every CPU through the runtime) and the naive loop; the MLP through the
    # runtime against its kernels called directly.
    (r"BM_MatmulKernelDirect/size:(\d+)", "BM_MatmulOpenBlas/size:{0}/threads:1", "auto", "", True),
    (r"BM_MatmulKernelDirect/size:(\d+)", "BM_MatmulNaive/size:{0}", "auto", "naive", False),
    (r"BM_MatmulRuntime/size:(\d+)", "BM_MatmulOpenBlas/size:{0}/threads:0", "auto", "", False),
    (r"BM_MlpRuntime/(.*)", "BM_MlpKernelsDirect/{0}", "auto", "", False),
    # axrt_cuda_bench: every runtime benchmark against its raw Driver API twin.
    (r"BM_Cuda(\w+?)Runtime(.*)", "BM_Cuda{0}Raw{1}", "auto", "", False),
]
# Figures that are only anchors (not axrt's), so no records of their own.
GBENCH_ANCHORS = (r"BM_HostMallocFree/.*|BM_SmallMemcpy|BM_Memcpy/.*|BM_DispatchDirectCall/.*|"
                  r"BM_DispatchDirectCallAfterIdle/.*|BM_MatmulOpenBlas/.*|BM_MatmulNaive/.*|"
                  r"BM_Cuda\w+Raw.*")

_NAME_NOISE = re.compile(r"/(real_time|manual_time|iterations:\d+|min_time:[0-9.]+)")
_TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


class Figure:
    """One Google Benchmark benchmark: its values over the repetitions."""

    def __init__(self, name: str, clock: str, order: Tuple[int, int] = (0, 0)) -> None:
        self.name = name
        self.clock = clock  # "real_time" or "cpu_time"
        self.order = order  # registration order, whatever order the repetitions ran in
        self.runs: List[dict] = []
        self.aggregates: Dict[str, dict] = {}
        self.error: Optional[str] = None

    def values(self, metric: str, clock: Optional[str] = None) -> List[float]:
        """The metric over the repetitions: "FLOPS", "bytes", "time" (seconds) or "p50"
        (seconds), by `clock` ("real_time" or "cpu_time"; the benchmark's own by default)."""
        clock = clock or self.clock
        runs = self.runs or ([self.aggregates["median"]] if "median" in self.aggregates else [])
        out = []
        for run in runs:
            if metric == "time":
                value = run.get(clock)
                if value is not None:
                    value *= _TIME_UNITS[run.get("time_unit", "ns")]
            else:
                value = run.get({"bytes": "bytes_per_second"}.get(metric, metric))
                if value is not None and metric != "p50" and clock != self.clock:
                    # A rate of the benchmark's clock, turned into one of `clock`.
                    own, other = run.get(self.clock), run.get(clock)
                    value = value * own / other if own and other else None
            if isinstance(value, (int, float)):
                out.append(float(value))
        return out

    def metric(self, requested: str) -> str:
        if requested != "auto":
            return requested
        for candidate in ("FLOPS", "bytes"):
            if self.values(candidate):
                return candidate
        return "time"


# The record's unit, scale and direction for each metric.
_METRICS = {
    "FLOPS": ("GFLOP/s", 1e-9, True),
    "bytes": ("GB/s", 1e-9, True),
    "time": ("us", 1e6, False),
    "p50": ("us", 1e6, False),
}


def gbench_figures(doc: dict) -> Dict[str, Figure]:
    figures: Dict[str, Figure] = {}
    for entry in doc.get("benchmarks", []):
        raw = entry.get("run_name", entry.get("name", ""))
        clock = "real_time" if re.search(r"/(real_time|manual_time)", raw) else "cpu_time"
        name = _NAME_NOISE.sub("", raw)
        order = (entry.get("family_index", 0), entry.get("per_family_instance_index", 0))
        figure = figures.setdefault(name, Figure(name, clock, order))
        if entry.get("error_occurred"):
            figure.error = entry.get("error_message") or "skipped with an error"
            continue
        if entry.get("run_type") == "aggregate":
            figure.aggregates[entry.get("aggregate_name", "")] = entry
        else:
            figure.runs.append(entry)
    return figures


def _cv(values: Sequence[float]) -> Optional[float]:
    if len(values) < 3:
        return None
    mean = statistics.fmean(values)
    return round(statistics.stdev(values) / mean, 4) if mean else None


def make_record(name: str, unit: str, axrt: Optional[float], anchor: Optional[float],
                anchor_name: Optional[str], higher_is_better: bool, **extra) -> dict:
    """A record with its ratio (null when either side is missing)."""
    ratio = None
    if axrt and anchor and axrt > 0 and anchor > 0:
        ratio = anchor / axrt if higher_is_better else axrt / anchor
    record = {"name": name, "unit": unit, "axrt": _round(axrt), "anchor": _round(anchor),
              "anchor_name": anchor_name, "ratio": _round(ratio),
              "higher_is_better": higher_is_better}
    record.update({k: v for k, v in extra.items() if v is not None})
    return record


def _round(value: Optional[float]) -> Optional[float]:
    return None if value is None else float(f"{value:.5g}")


def gbench_records(doc: dict, source: str) -> List[dict]:
    figures = gbench_figures(doc)
    memcpy = [n for n in figures if re.fullmatch(r"BM_Memcpy/threads:\d+", n)]
    memcpy_all = max(memcpy, key=lambda n: int(n.rsplit(":", 1)[1])) if memcpy else "BM_Memcpy"
    records = []
    for name, figure in sorted(figures.items(), key=lambda item: item[1].order):
        paired = False
        for pattern, anchor_template, requested, tag, cpu in GBENCH_RULES:
            match = re.fullmatch(pattern, name)
            if not match:
                continue
            paired = True
            anchor_name = anchor_template.format(*match.groups(), memcpy_all=memcpy_all)
            anchor = figures.get(anchor_name)
            records.append(_pair(source, figure, anchor, anchor_name, requested, tag))
            if cpu and figure.clock != "cpu_time":
                records.append(_pair(source, figure, anchor, anchor_name, requested, tag,
                                     "cpu_time"))
        if not paired and not re.fullmatch(GBENCH_ANCHORS, name):
            records.append(_pair(source, figure, None, None, "auto", ""))
    return records


def _pair(source: str, figure: Figure, anchor: Optional[Figure], anchor_name: Optional[str],
          requested: str, tag: str, clock: Optional[str] = None) -> dict:
    """The record of `figure` against `anchor`, both read with `clock` (by default the
    figure's own; p50 is always wall clock)."""
    metric = figure.metric(requested)
    unit, scale, higher = _METRICS[metric]
    clock = clock or figure.clock
    name = (f"{source}/{figure.name}" + (f"/vs:{tag}" if tag else "") +
            ("/cpu" if clock != figure.clock else ""))
    mine = figure.values(metric, clock)
    theirs = anchor.values(metric, clock) if anchor is not None else []
    error = figure.error
    if error is None and anchor_name is not None:
        if anchor is None:
            error = f"anchor {anchor_name}: not in this run"
        elif anchor.error is not None:
            error = f"anchor {anchor_name}: {anchor.error}"
    return make_record(
        name, unit,
        statistics.median(mine) * scale if mine else None,
        statistics.median(theirs) * scale if theirs else None,
        anchor_name, higher,
        clock="p50 of single calls" if metric == "p50" else clock,
        repetitions=len(mine) if len(mine) > 1 else None,
        cv=[_cv(mine), _cv(theirs)] if len(mine) >= 3 else None,
        error=error)


# --- Reading and writing --------------------------------------------------------------------


def write_records(path: str, source: str, records: Iterable[dict], skipped: Optional[str] = None,
                  context: Optional[dict] = None) -> None:
    """What a Python benchmark writes with --json: its records (make_record's fields
    without the ratio are enough), or why it did not run."""
    doc = {"source": source, "skipped": skipped, "context": context or {},
           "records": list(records)}
    Path(path).write_text(json.dumps(doc, indent=1) + "\n")


def collect(paths: Sequence[str]) -> Tuple[List[dict], List[dict], dict]:
    """The records of the raw files, the sources that did not run, and the first context."""
    records: List[dict] = []
    skipped: List[dict] = []
    context: dict = {}
    for path in paths:
        doc = json.loads(Path(path).read_text())
        source = Path(path).stem
        if "suite" in doc:
            continue  # a results file of this script, not a benchmark's
        if "benchmarks" in doc:
            context = context or doc.get("context", {})
            source = Path(doc.get("context", {}).get("executable", source)).name or source
            records.extend(gbench_records(doc, source))
        else:
            source = doc.get("source", source)
            if doc.get("skipped"):
                skipped.append({"source": source, "reason": doc["skipped"]})
            for r in doc.get("records", []):
                records.append(make_record(
                    f"{source}/{r['name']}", r["unit"], r.get("axrt"), r.get("anchor"),
                    r.get("anchor_name"), bool(r.get("higher_is_better")),
                    **{k: v for k, v in r.items() if k not in (
                        "name", "unit", "axrt", "anchor", "anchor_name", "higher_is_better",
                        "ratio")}))
    return records, skipped, context


def machine(context: Optional[dict] = None) -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info = {"cpu": cpu, "cpus": os.cpu_count()}
    if context:
        for key in ("axrt_version", "axrt_device"):
            if key in context:
                info[key] = context[key]
    return info


def dump(doc: dict, path: str) -> None:
    """JSON with one record a line, so that a diff shows which records moved."""
    head = {k: v for k, v in doc.items() if k != "records"}
    lines = ["{"] + [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    records = [f"  {json.dumps(r)}" for r in doc.get("records", [])]
    lines.append(' "records": [')
    lines.append(",\n".join(records))
    lines.append(" ]")
    lines.append("}")
    Path(path).write_text("\n".join(line for line in lines if line) + "\n")


def write_results(path: str, suite: str, raw: Sequence[str], extra: Optional[dict] = None) -> dict:
    records, skipped, context = collect(raw)
    info = machine(context)
    info["load_average_after"] = [round(v, 2) for v in os.getloadavg()]
    if extra:
        info.update(extra)
    doc = {"schema": SCHEMA, "suite": suite, "ratio": RATIO_MEANING,
           "date": datetime.datetime.now().isoformat(timespec="seconds"),
           "machine": info, "skipped": skipped, "records": records}
    dump(doc, path)
    gated = sum(1 for r in records if r["ratio"] is not None)
    print(f"bench_results: {len(records)} records ({gated} with a ratio) -> {path}")
    return doc


# --- The quick suite ------------------------------------------------------------------------
#
# What `make bench-check` times: the C++ benchmarks with an anchor in the
# same binary, minus the slow and the anchorless (the naive matmul, decode
# attention, the idle-gap benchmarks, the CUDA benchmarks); short runs, nine
# repetitions in random order (so that a burst of other load falls on both
# sides of a ratio alike), medians of the nine; the Python layer; and the
# matmul kernels against ONNX Runtime at K = N = 1024 on one thread a side
# (ONNX Runtime's spinning pool and axrt's workgroup pool measure the
# machine's other load more than themselves when it is shared). No torch or
# transformers.
QUICK_GBENCH = {
    "axrt_bench": "BM_BufferAllocateRelease|BM_StreamAllocateDeallocate|BM_HostMallocFree|"
                  "BM_SmallCopySynchronize|BM_SmallMemcpy|BM_Memcpy|BM_CopyFromHost|"
                  "BM_CopyToHost|BM_CopyBuffer|BM_DispatchDirectCall/|BM_InvokeSynchronize/|"
                  "BM_InvokeSynchronizeTraced",
    "axrt_kernel_bench": "BM_MatmulKernelDirect|BM_MatmulRuntime|BM_MatmulOpenBlas|"
                         "BM_MlpKernelsDirect|BM_MlpRuntime",
}
QUICK_GBENCH_FLAGS = ["--benchmark_min_time=0.05", "--benchmark_repetitions=9",
                      "--benchmark_enable_random_interleaving=true",
                      "--benchmark_display_aggregates_only=true",
                      "--benchmark_counters_tabular=true", "--benchmark_out_format=json"]
QUICK_ORT_FLAGS = ["--sizes", "1024", "--rows", "1,16,256", "--rounds", "5", "--seconds", "0.05",
                   "--threads", "1"]
QUICK_ORT_ENV = {"AXRT_CPU_THREADS": "1"}


class OtherLoad:
    """CPUs kept busy by other processes while the suite ran: the machine's busy
    time (/proc/stat) less the CPU time of the suite's processes, over the wall time."""

    def __init__(self) -> None:
        self.begin = (time.perf_counter(), self._busy(), self._ours())

    @staticmethod
    def _busy() -> Optional[float]:
        try:
            with open("/proc/stat") as f:
                fields = [int(v) for v in f.readline().split()[1:]]
        except OSError:
            return None
        return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _ours() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def others(self) -> Optional[float]:
        wall, busy, ours = self.begin
        now = self._busy()
        if busy is None or now is None:
            return None
        used = (now - busy) - (self._ours() - ours)
        return round(max(0.0, used / max(time.perf_counter() - wall, 1e-9)), 2)


def run_quick(bench_dir: Path, out_dir: Path) -> int:
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("*.json"):
        old.unlink()
    tools = bench_dir / "tests" / "bench"
    here = Path(__file__).resolve().parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(bench_dir / "python"), os.environ.get("PYTHONPATH", "")) if p))
    load_before = [round(v, 2) for v in os.getloadavg()]
    load = OtherLoad()
    start = time.perf_counter()
    steps = [({}, [str(tools / tool), f"--benchmark_filter={pattern}",
                   f"--benchmark_out={out_dir / (tool + '.json')}"] + QUICK_GBENCH_FLAGS)
             for tool, pattern in QUICK_GBENCH.items()]
    steps.append(({}, [sys.executable, str(here / "python_bench.py"),
                       "--json", str(out_dir / "python_bench.json")]))
    steps.append((QUICK_ORT_ENV, [sys.executable, str(here / "matmul_vs_onnxruntime.py"),
                                  *QUICK_ORT_FLAGS,
                                  "--kernel-bench", str(tools / "axrt_matmul_kernel_bench"),
                                  "--json", str(out_dir / "matmul_vs_onnxruntime.json")]))
    for extra_env, step in steps:
        print("+ " + " ".join([f"{k}={v}" for k, v in extra_env.items()] + step), flush=True)
        began = time.perf_counter()
        result = subprocess.run(step, env=dict(env, **extra_env))
        what = Path(step[1] if step[0] == sys.executable else step[0]).name
        if result.returncode != 0:
            print(f"bench_results: {what} failed (exit {result.returncode})", file=sys.stderr)
            return 1
        print(f"bench_results: {what}: {time.perf_counter() - began:.0f} s", flush=True)
    seconds = time.perf_counter() - start
    others = load.others()
    raw = sorted(str(p) for p in out_dir.glob("*.json") if p.name != "results.json")
    write_results(str(out_dir / "results.json"), "quick", raw,
                  {"load_average_before": load_before, "others_cpu": others,
                   "seconds": round(seconds, 1)})
    print(f"bench_results: the quick suite took {seconds:.0f} s; other processes used "
          f"{'?' if others is None else f'{others:.2f}'} CPUs on average meanwhile")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="raw benchmark JSON -> results")
    c.add_argument("--suite", default="full")
    c.add_argument("--out", required=True)
    c.add_argument("raw", nargs="*")
    q = sub.add_parser("quick", help="run the quick suite and collect it")
    q.add_argument("bench_dir", type=Path)
    q.add_argument("out_dir", type=Path)
    args = parser.parse_args(argv)
    if args.command == "quick":
        return run_quick(args.bench_dir, args.out_dir)
    write_results(args.out, args.suite, [p for p in args.raw if Path(p).is_file()])
    return 0


if __name__ == "__main__":
    sys.exit(main())
