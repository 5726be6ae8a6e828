"""The performance regression gate: the ratios of a benchmark run against the committed
baseline (docs/performance.md, "Regression gate").

    bench_check.py [--baseline FILE] RESULTS...       compare; exit 1 on a regression
    bench_check.py --write-baseline [--baseline FILE] RESULTS...
    bench_check.py --spread RESULTS...                 run-to-run spread of each ratio

RESULTS are files of bench_results.py. Every record's ratio is axrt's cost over
its anchor's, so bigger is worse. A record is gated when the baseline has a
ratio for it and MARGINS gives it a margin: it regresses when its ratio
exceeds the baseline's by more than that margin. Given several RESULTS, a
record takes its smallest ratio among them: a regression must show in every
run (`make bench-check` reruns the suite once to confirm a failure). Records
on one side only are reported; a gated record that is missing from the
results, or whose benchmark failed, fails the check unless the results say
its benchmark did not run (an optional dependency, such as onnxruntime, was
not installed). --write-baseline takes each record's median ratio over
RESULTS. Python 3 standard library only.
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import json
import statistics
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
DEFAULT_BASELINE = HERE / "baseline.json"

# How far a ratio may rise above the baseline's before the check fails, by
# record name (fnmatch patterns, first match wins; None: reported, not
# gated). Each margin is twice the largest run-to-run spread (max / min - 1
# of the ratio) that its records showed, rounded up to 5 %, over fifteen
# quick runs on the 2-vCPU VM of docs/performance.md while other builds used
# 0.4-1.4 of its two CPUs (nine runs with the suite's current settings for
# the C++ records; the spreads are in brackets). A false failure then needs
# a deviation twice the worst seen, in two runs in a row (`make bench-check`
# confirms a failure with a second run). The "/cpu" records, read by the CPU
# time of the work, carry the gate: on a shared machine the wall clock also
# counts the time a thread waited for a core.
Margins = Sequence[Tuple[str, Optional[float]]]
MARGINS: Margins = [
    # Host-side costs on the calling thread against malloc and memcpy.
    ("axrt_bench/BM_BufferAllocateRelease/*", 0.15),  # [7 %]
    ("axrt_bench/BM_StreamAllocateDeallocate/*/cpu", 0.20),  # [9 %]
    ("axrt_bench/BM_SmallCopySynchronize/*/cpu", 0.10),  # [4 %]
    ("axrt_bench/BM_InvokeSynchronizeTraced/*/cpu", 0.10),  # [5 %]
    # Against a direct call of the same kernels, 1.4 ns for one dispatch
    # [12 %; 32 % with five repetitions instead of nine].
    ("axrt_bench/BM_InvokeSynchronize/*/cpu", 0.25),
    # 64 MiB copies on both cores against memcpy on both [260 %].
    ("axrt_bench/BM_Copy*", None),
    # The wall clock of the calls above [113 %]: fails when a call starts to
    # wait for another thread (a stream worker's wake is about 20 us, 20-100
    # times these calls), which their CPU time does not show.
    ("axrt_bench/*", 2.50),
    # The f32 matmul kernel against OpenBLAS, one thread each [6 %].
    ("axrt_kernel_bench/BM_MatmulKernelDirect/*/cpu", 0.15),
    # Through the runtime on both cores [75-190 %]; the direct calls' wall
    # clock, which their /cpu records gate [35 %].
    ("axrt_kernel_bench/*", None),
    # The kernels called directly against ONNX Runtime, one thread each [14 %].
    ("matmul_vs_onnxruntime/*/kernel/*/cpu", 0.30),
    # The same through the runtime [41 %]; at M = 1 a call takes 10-50 us,
    # about the CPU stream's limit for running a call inline, so it runs
    # either way from one run to the next [73 %].
    ("matmul_vs_onnxruntime/*/M:1/*/runtime/*/cpu", None),
    ("matmul_vs_onnxruntime/*/runtime/*/cpu", 0.85),
    # The Python layer against the C API and numpy [17 %].
    ("python_bench/*/cpu", 0.35),
    # The wall clock of the Python benchmarks [90-230 %], and what only
    # `make bench` measures (serving, the language models, CUDA).
    ("*", None),
]


def margin_for(name: str, margins: Margins = MARGINS) -> Optional[float]:
    for pattern, margin in margins:
        if fnmatch.fnmatchcase(name, pattern):
            return margin
    return None


def load(path) -> dict:
    return json.loads(Path(path).read_text())


def _records(doc: dict) -> Dict[str, dict]:
    return {r["name"]: r for r in doc.get("records", [])}


# --- The check -----------------------------------------------------------------------------


class Row:
    def __init__(self, name: str, base: Optional[float], current: Optional[float],
                 margin: Optional[float], verdict: str, failed: bool, note: str = "") -> None:
        self.name, self.base, self.current, self.margin = name, base, current, margin
        self.verdict, self.failed, self.note = verdict, failed, note

    @property
    def change(self) -> Optional[float]:
        if self.base and self.current is not None:
            return self.current / self.base - 1
        return None


def compare(results: Sequence[dict], baseline: dict,
            margins: Margins = MARGINS) -> Tuple[List[Row], List[str]]:
    """The rows of the table (baseline records first, in its order) and the names
    of the records the results have and the baseline does not."""
    current: Dict[str, List[dict]] = {}
    skipped: Dict[str, str] = {}
    for doc in results:
        for name, record in _records(doc).items():
            current.setdefault(name, []).append(record)
        for s in doc.get("skipped", []):
            skipped[s["source"]] = s["reason"]
    rows: List[Row] = []
    base_records = _records(baseline)
    for name, base in base_records.items():
        ratio = base.get("ratio")
        margin = margin_for(name, margins)
        gated = ratio is not None and margin is not None
        seen = current.get(name, [])
        ratios = [r["ratio"] for r in seen if r.get("ratio") is not None]
        source = name.split("/", 1)[0]
        if not ratios:
            error = next((r.get("error") for r in seen if r.get("error")), None)
            if source in skipped and not seen:
                rows.append(Row(name, ratio, None, margin, "not run", False, skipped[source]))
            elif error:
                rows.append(Row(name, ratio, None, margin, "ERROR" if gated else "error", gated,
                                error))
            else:
                rows.append(Row(name, ratio, None, margin, "MISSING" if gated else "missing",
                                gated, "not in the results"))
            continue
        now = min(ratios)
        if not gated:
            rows.append(Row(name, ratio, now, margin, "not gated", False))
        elif now > ratio * (1 + margin):
            rows.append(Row(name, ratio, now, margin, "REGRESSED", True))
        elif now < ratio / (1 + margin):
            rows.append(Row(name, ratio, now, margin, "improved", False))
        else:
            rows.append(Row(name, ratio, now, margin, "ok", False))
    new = [name for name, seen in current.items()
           if name not in base_records and any(r.get("ratio") is not None for r in seen)]
    return rows, new


def _fmt(value: Optional[float]) -> str:
    return f"{'-':>9}" if value is None else f"{value:9.4g}"


def print_table(rows: Sequence[Row], new: Sequence[str], out=sys.stdout,
                everything: bool = False) -> None:
    """The gated records and those missing or failed (every record with `everything`); the
    records of a script that did not run are counted, not listed."""
    shown = [r for r in rows
             if r.verdict != "not run" and (everything or r.verdict != "not gated")]
    width = max([len("record")] + [len(r.name) for r in shown])
    print(f"{'record':{width}}  {'baseline':>9} {'current':>9} {'change':>8} {'margin':>7}  "
          "verdict", file=out)
    for r in shown:
        change = "-" if r.change is None else f"{100 * r.change:+.1f}%"
        margin = "-" if r.margin is None else f"{100 * r.margin:.0f}%"
        line = (f"{r.name:{width}}  {_fmt(r.base)} {_fmt(r.current)} "
                f"{change:>8} {margin:>7}  {r.verdict}")
        print(line + (f" ({r.note})" if r.note else ""), file=out)
    not_run: Dict[str, List[Row]] = {}
    for r in rows:
        if r.verdict == "not run":
            not_run.setdefault(r.note, []).append(r)
    for reason, skipped in not_run.items():
        gated = sum(1 for r in skipped if r.margin is not None)
        sources = sorted({r.name.split("/", 1)[0] for r in skipped})
        print(f"\n{len(skipped)} record(s) of {', '.join(sources)} not run ({reason}), "
              f"{gated} of them gated", file=out)
    hidden = sum(1 for r in rows if r.verdict == "not gated") if not everything else 0
    if hidden:
        print(f"\n{hidden} more record(s) in both, not gated (--all lists them)", file=out)
    if new:
        print(f"\n{len(new)} record(s) not in the baseline (reported, not gated):", file=out)
        for name in new:
            print(f"  {name}", file=out)


def check(result_paths: Sequence[str], baseline_path, out=sys.stdout, margins: Margins = MARGINS,
          everything: bool = False) -> int:
    results = [load(p) for p in result_paths]
    baseline = load(baseline_path)
    rows, new = compare(results, baseline, margins)
    for path, doc in zip(result_paths, results):
        m = doc.get("machine", {})
        load_average = m.get("load_average_before", m.get("load_average_after"))
        print(f"{path}: suite {doc.get('suite')}, {m.get('cpu')} ({m.get('cpus')} CPUs), load "
              f"average {load_average}, other processes used {m.get('others_cpu', '?')} CPUs "
              "during the run", file=out)
        if doc.get("suite") != baseline.get("suite"):
            print(f"  note: the baseline is of suite {baseline.get('suite')!r}", file=out)
    bm = baseline.get("machine", {})
    print(f"baseline {baseline_path}: {baseline.get('date')}, {bm.get('cpu')} ({bm.get('cpus')} "
          f"CPUs), median of {baseline.get('runs', 1)} run(s)", file=out)
    print("ratio = axrt's cost over its anchor's (bigger is worse); change = current / baseline - 1"
          + ("; current = the smallest ratio of the runs" if len(results) > 1 else ""), file=out)
    print(file=out)
    print_table(rows, new, out, everything)
    failed = [r for r in rows if r.failed]
    gated = [r for r in rows
             if r.margin is not None and r.base is not None and r.verdict != "not run"]
    improved = [r for r in rows if r.verdict == "improved"]
    print(file=out)
    if improved:
        print(f"{len(improved)} gated ratio(s) improved beyond their margin: if that is the change "
              "under test, `make bench-baseline` records it (in the same commit)", file=out)
    if failed:
        print(f"bench-check: FAILED: {len(failed)} of {len(gated)} gated records: "
              + ", ".join(f"{r.name} ({r.verdict.lower()})" for r in failed), file=out)
        return 1
    print(f"bench-check: passed ({len(gated)} gated records)", file=out)
    return 0


# --- The baseline and the spread ------------------------------------------------------------


def write_baseline(result_paths: Sequence[str], baseline_path) -> int:
    results = [load(p) for p in result_paths]
    order: List[str] = []
    seen: Dict[str, List[dict]] = {}
    for doc in results:
        for r in doc.get("records", []):
            if r.get("ratio") is None:
                continue
            if r["name"] not in seen:
                order.append(r["name"])
            seen.setdefault(r["name"], []).append(r)
    records = []
    for name in order:
        rs = seen[name]
        records.append({
            "name": name, "unit": rs[0]["unit"], "anchor_name": rs[0].get("anchor_name"),
            "ratio": _round(statistics.median(r["ratio"] for r in rs)),
            "axrt": _round(statistics.median(r["axrt"] for r in rs)),
            "anchor": _round(statistics.median(r["anchor"] for r in rs)),
            "runs": len(rs)})
    first = results[0] if results else {}
    doc = {"schema": first.get("schema", 1), "suite": first.get("suite"),
           "what": "ratios (axrt's cost over its anchor's) for bench_check.py; rewritten by "
                   "make bench-baseline, in the commit that moved them",
           "date": datetime.date.today().isoformat(),
           "machine": {k: v for k, v in first.get("machine", {}).items()
                       if k in ("cpu", "cpus", "axrt_version")},
           "runs": len(results), "records": records}
    sys.path.insert(0, str(HERE))
    from bench_results import dump
    dump(doc, str(baseline_path))
    gated = sum(1 for r in records if margin_for(r["name"]) is not None)
    print(f"bench_check: wrote {baseline_path}: {len(records)} records, {gated} gated, from "
          f"{len(results)} run(s)")
    return 0


def _round(value: Optional[float]) -> Optional[float]:
    return None if value is None else float(f"{value:.5g}")


def spread(result_paths: Sequence[str], out=sys.stdout) -> int:
    """Per record, its ratio's range over the runs: what the margins are chosen from."""
    ratios: Dict[str, List[float]] = {}
    for path in result_paths:
        for r in load(path).get("records", []):
            if r.get("ratio") is not None:
                ratios.setdefault(r["name"], []).append(r["ratio"])
    width = max([len("record")] + [len(n) for n in ratios])
    print(f"{'record':{width}}  {'runs':>4} {'min':>9} {'median':>9} {'max':>9} {'spread':>7} "
          f"{'margin':>7}", file=out)
    worst: Dict[Optional[float], float] = {}
    for name, values in ratios.items():
        s = max(values) / min(values) - 1
        margin = margin_for(name)
        worst[margin] = max(worst.get(margin, 0.0), s)
        flag = "  <- spread above margin" if margin is not None and s > margin else ""
        print(f"{name:{width}}  {len(values):4} {min(values):9.4g} "
              f"{statistics.median(values):9.4g} {max(values):9.4g} {100 * s:6.1f}% "
              f"{_fmt_margin(margin):>7}{flag}", file=out)
    print("\nspread = max / min - 1 over the runs; largest spread per margin: " + ", ".join(
        f"{_fmt_margin(m)}: {100 * s:.1f}%" for m, s in worst.items()), file=out)
    return 0


def _fmt_margin(margin: Optional[float]) -> str:
    return "-" if margin is None else f"{100 * margin:.0f}%"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", help="results files of bench_results.py")
    parser.add_argument("--baseline", default=str(DEFAULT_BASELINE))
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write-baseline", action="store_true",
                      help="write the baseline from the results (median ratio per record)")
    mode.add_argument("--spread", action="store_true",
                      help="print each ratio's range over the results instead of checking")
    parser.add_argument("--all", action="store_true",
                        help="list the records that are not gated too")
    args = parser.parse_args(argv)
    if args.spread:
        return spread(args.results)
    if args.write_baseline:
        return write_baseline(args.results, args.baseline)
    if not Path(args.baseline).is_file():
        print(f"bench_check: no baseline {args.baseline} (make bench-baseline writes it)",
              file=sys.stderr)
        return 1
    return check(args.results, args.baseline, everything=args.all)


if __name__ == "__main__":
    sys.exit(main())
