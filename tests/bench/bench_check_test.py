"""The regression gate's scripts on synthetic figures: bench_check.py's verdicts and
bench_results.py's pairing of Google Benchmark figures with their anchors. Nothing is
timed (CTest: bench.check_selftest).

    python3 tests/bench/bench_check_test.py
"""

import io
import json
import sys
import tempfile
import unittest
import unittest.mock
from pathlib import Path

sys.dont_write_bytecode = True  # run from the source tree by CTest
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_check  # noqa: E402
import bench_results  # noqa: E402

MARGINS = [("src/noisy", 0.5), ("src/ungated", None), ("*", 0.2)]


def results(*records, skipped=()):
    return {"suite": "quick",
            "records": [dict(name=n, ratio=r, **extra) for n, r, extra in records],
            "skipped": [{"source": s, "reason": why} for s, why in skipped]}


def verdicts(current, baseline, margins=MARGINS):
    rows, new = bench_check.compare(current if isinstance(current, list) else [current], baseline,
                                    margins)
    return {r.name: (r.verdict, r.failed) for r in rows}, new


class CompareTest(unittest.TestCase):
    base = results(("src/a", 1.0, {}), ("src/noisy", 2.0, {}), ("src/ungated", 1.0, {}))

    def test_regression_beyond_the_margin_fails(self):
        v, _ = verdicts(results(("src/a", 1.25, {}), ("src/noisy", 2.0, {}),
                                ("src/ungated", 1.0, {})), self.base)
        self.assertEqual(v["src/a"], ("REGRESSED", True))

    def test_within_the_margin_passes(self):
        v, _ = verdicts(results(("src/a", 1.19, {}), ("src/noisy", 2.9, {}),
                                ("src/ungated", 1.0, {})), self.base)
        self.assertEqual(v["src/a"], ("ok", False))
        self.assertEqual(v["src/noisy"], ("ok", False))  # its own, wider margin

    def test_improvement_passes(self):
        v, _ = verdicts(results(("src/a", 0.5, {}), ("src/noisy", 2.0, {}),
                                ("src/ungated", 1.0, {})), self.base)
        self.assertEqual(v["src/a"], ("improved", False))

    def test_an_ungated_record_is_reported_only(self):
        v, _ = verdicts(results(("src/a", 1.0, {}), ("src/noisy", 2.0, {}),
                                ("src/ungated", 9.0, {})), self.base)
        self.assertEqual(v["src/ungated"], ("not gated", False))

    def test_missing_records_are_reported_and_gated_ones_fail(self):
        v, new = verdicts(results(("src/noisy", 2.0, {}), ("src/new", 1.0, {})), self.base)
        self.assertEqual(v["src/a"], ("MISSING", True))
        self.assertEqual(v["src/ungated"], ("missing", False))
        self.assertEqual(new, ["src/new"])

    def test_a_source_that_did_not_run_is_not_a_failure(self):
        v, _ = verdicts(results(("src/noisy", 2.0, {}), skipped=[("src", "onnxruntime is absent")]),
                        results(("src/a", 1.0, {}), ("other/b", 1.0, {})))
        self.assertEqual(v["src/a"], ("not run", False))
        self.assertEqual(v["other/b"], ("MISSING", True))

    def test_a_failed_benchmark_fails_its_gated_record(self):
        v, _ = verdicts(results(("src/a", None, {"error": "anchor BM_X: not in this run"}),
                                ("src/noisy", 2.0, {}), ("src/ungated", 1.0, {})), self.base)
        self.assertEqual(v["src/a"], ("ERROR", True))

    def test_a_regression_must_show_in_every_run(self):
        runs = [results(("src/a", 1.5, {}), ("src/noisy", 2.0, {}), ("src/ungated", 1.0, {})),
                results(("src/a", 1.1, {}), ("src/noisy", 2.0, {}), ("src/ungated", 1.0, {}))]
        v, _ = verdicts(runs, self.base)
        self.assertEqual(v["src/a"], ("ok", False))


class FilesTest(unittest.TestCase):
    def test_check_and_write_baseline(self):
        with tempfile.TemporaryDirectory() as tmp:
            paths = []
            for i, ratio in enumerate((1.0, 1.2, 1.1)):
                doc = {"schema": 1, "suite": "quick", "machine": {"cpu": "test", "cpus": 2},
                       "records": [bench_results.make_record("src/a", "us", ratio, 1.0, "anchor",
                                                             False),
                                   bench_results.make_record("src/b", "us", 1.0, None, None,
                                                             False)]}
                paths.append(Path(tmp) / f"r{i}.json")
                paths[-1].write_text(json.dumps(doc))
            baseline = Path(tmp) / "baseline.json"
            with unittest.mock.patch("sys.stdout", io.StringIO()):
                self.assertEqual(bench_check.write_baseline([str(p) for p in paths], baseline), 0)
            written = json.loads(baseline.read_text())
            self.assertEqual([r["name"] for r in written["records"]], ["src/a"])  # b: no ratio
            self.assertEqual(written["records"][0]["ratio"], 1.1)  # the median of the runs
            self.assertEqual(written["runs"], 3)

            out = io.StringIO()
            self.assertEqual(bench_check.check([str(paths[0])], baseline, out, MARGINS), 0)
            self.assertIn("passed", out.getvalue())  # 1.0 against 1.1: within the margin
            slow = Path(tmp) / "slow.json"
            doc = json.loads(paths[0].read_text())
            doc["records"][0]["ratio"] = 2.0
            slow.write_text(json.dumps(doc))
            out = io.StringIO()
            self.assertEqual(bench_check.check([str(slow)], baseline, out, MARGINS), 1)
            self.assertIn("REGRESSED", out.getvalue())


class CommittedBaselineTest(unittest.TestCase):
    def test_it_reads_and_gates(self):
        doc = bench_check.load(bench_check.DEFAULT_BASELINE)
        names = [r["name"] for r in doc["records"]]
        self.assertEqual(len(names), len(set(names)))
        gated = [n for n in names if bench_check.margin_for(n) is not None]
        self.assertTrue(gated)
        self.assertTrue(all(r["ratio"] > 0 for r in doc["records"]))


def gbench_run(name, real, cpu, **counters):
    return dict(name=name, run_name=name, run_type="iteration", time_unit="ns", real_time=real,
                cpu_time=cpu, **counters)


class PairingTest(unittest.TestCase):
    doc = {"context": {"executable": "/x/axrt_bench"}, "benchmarks": [
        gbench_run("BM_Memcpy/real_time/threads:1", 1e6, 1e6, bytes_per_second=8e9),
        gbench_run("BM_Memcpy/real_time/threads:2", 1e6, 1e6, bytes_per_second=12e9),
        gbench_run("BM_CopyFromHost/real_time", 1e6, 1e4, bytes_per_second=6e9),
        gbench_run("BM_BufferAllocateRelease/4096", 400, 200),
        gbench_run("BM_HostMallocFree/4096", 100, 50),
        gbench_run("BM_InvokeSynchronize/dispatches:1/allocated:0/real_time", 800, 600),
        gbench_run("BM_DispatchDirectCall/dispatches:1/real_time", 4, 3),
        gbench_run("BM_EventRecordQuery/real_time", 200, 200),
        dict(name="BM_SmallCopySynchronize/to_host:0/real_time",
             run_name="BM_SmallCopySynchronize/to_host:0/real_time", run_type="iteration",
             error_occurred=True, error_message="axrt_stream_copy_from_host: INTERNAL: broken"),
    ]}

    def records(self):
        return {r["name"]: r for r in bench_results.gbench_records(self.doc, "axrt_bench")}

    def test_rates_against_memcpy_on_every_cpu(self):
        r = self.records()["axrt_bench/BM_CopyFromHost"]
        self.assertEqual((r["unit"], r["axrt"], r["anchor"]), ("GB/s", 6.0, 12.0))
        self.assertEqual(r["ratio"], 2.0)  # anchor / axrt for a rate: bigger is worse

    def test_times_with_the_benchmarks_clock(self):
        r = self.records()["axrt_bench/BM_BufferAllocateRelease/4096"]  # a CPU-time benchmark
        self.assertEqual((r["unit"], r["axrt"], r["anchor"], r["ratio"]), ("us", 0.2, 0.05, 4.0))

    def test_a_cpu_record_beside_the_wall_clock_one(self):
        records = self.records()
        name = "axrt_bench/BM_InvokeSynchronize/dispatches:1/allocated:0"
        self.assertEqual(records[name]["ratio"], 200.0)  # wall clock: 800 / 4
        self.assertEqual(records[name + "/cpu"]["ratio"], 200.0)  # CPU time: 600 / 3

    def test_anchors_are_not_records_and_the_anchorless_have_no_ratio(self):
        records = self.records()
        self.assertFalse(any("Memcpy" in n or "MallocFree" in n or "DirectCall" in n
                             for n in records))
        self.assertIsNone(records["axrt_bench/BM_EventRecordQuery"]["ratio"])

    def test_a_failed_benchmark_becomes_an_error(self):
        r = self.records()["axrt_bench/BM_SmallCopySynchronize/to_host:0"]
        self.assertIsNone(r["ratio"])
        self.assertIn("INTERNAL", r["error"])


if __name__ == "__main__":
    unittest.main()
