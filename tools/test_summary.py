"""The last words of `make test`: how many tests ran in each tree, which were
skipped and why, and where the time went.

usage: test_summary.py [--slowest N] [--stages FILE] TREE...

Reads TREE/test-results.xml, the JUnit file each stage's CTest run writes
(with every test's output; Makefile, CTEST). A skip is either a whole CTest
test (exit 77, SKIP_RETURN_CODE) or a case inside a test that passed, and
each says why on a line of its output of the form

    skipped: <reason>                  (a CTest test as a whole; a pytest case,
                                        as tests/python/run_pytest.py prints it)
    skipped on <device>: <reason>      (a conformance case on one device)

With --stages, FILE holds one line per stage of `make test`, its name and
its wall time in seconds (Makefile, STAGE_TIMES); they are printed first.

Exits 1 when a tree's results are missing or hold a failure, else 0.
"""
from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

SKIP_LINE = re.compile(r"^\s*skipped(?: on ([^:]+))?: (.+?)\s*$")


class Test:
    def __init__(self, tree: str, case: ET.Element):
        self.tree = tree
        self.name = case.get("name", "?")
        self.seconds = float(case.get("time") or 0.0)
        self.output = "".join(e.text or "" for e in case.iter("system-out"))
        status = case.get("status", "")
        if case.find("failure") is not None or case.find("error") is not None or status == "fail":
            self.outcome = "failed"
        elif case.find("skipped") is not None or status in ("notrun", "disabled"):
            self.outcome = "skipped"
        else:
            self.outcome = "passed"

    def skip_lines(self):
        for line in self.output.splitlines():
            m = SKIP_LINE.match(line)
            if m:
                yield (f"on {m.group(1)}: " if m.group(1) else "") + m.group(2)


def read_tree(tree: str):
    path = Path(tree) / "test-results.xml"
    if not path.is_file():
        return None
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    tests = [Test(tree, case) for suite in suites for case in suite.iter("testcase")]
    wall = sum(float(s.get("time") or 0.0) for s in suites)
    return tests, wall


def main(argv) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+")
    parser.add_argument("--slowest", type=int, default=8)
    parser.add_argument("--stages", type=Path)
    args = parser.parse_args(argv)

    everything = []
    status = 0
    print("\n=== make test: summary ===")
    if args.stages is not None and args.stages.is_file():
        stages = [line.rsplit(" ", 1) for line in args.stages.read_text().splitlines() if line.strip()]
        total = sum(int(seconds) for _, seconds in stages)
        width = max(len(name) for name, _ in stages)
        for name, seconds in stages:
            print(f"{name:<{width}}  {int(seconds):5d} s")
        print(f"{'in all':<{width}}  {total:5d} s\n")
    for tree in args.trees:
        result = read_tree(tree)
        if result is None:
            print(f"{tree}: no test-results.xml (the stage did not run)")
            status = 1
            continue
        tests, wall = result
        everything += tests
        counts = defaultdict(int)
        for t in tests:
            counts[t.outcome] += 1
        if counts["failed"]:
            status = 1
        print(f"{tree}: {len(tests)} tests, {counts['passed']} passed, {counts['skipped']} skipped, "
              f"{counts['failed']} failed; {wall:.0f} s of tests, {sum(t.seconds for t in tests):.0f} s "
              "summed over tests")

    whole = [t for t in everything if t.outcome == "skipped"]
    partial = [(t, reason) for t in everything if t.outcome == "passed" for reason in t.skip_lines()]
    print(f"\nskipped: {len(whole)} tests, and {len(partial)} cases inside tests that passed")
    for t in whole:
        reasons = list(t.skip_lines()) or ["(the test gave no reason)"]
        print(f"  {t.tree} {t.name}: {reasons[0]}")
        for reason in reasons[1:]:
            print(f"      {reason}")
    by_reason = defaultdict(list)
    for t, reason in partial:
        by_reason[reason].append(f"{t.tree} {t.name}")
    for reason, where in sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print(f"  {len(where)} x {reason}")
        print(f"      in {', '.join(sorted(set(where)))}")

    if args.slowest > 0 and everything:
        print(f"\nslowest tests:")
        for t in sorted(everything, key=lambda t: -t.seconds)[:args.slowest]:
            print(f"  {t.seconds:7.1f} s  {t.tree} {t.name}")
    failed = [t for t in everything if t.outcome == "failed"]
    for t in failed:
        print(f"FAILED: {t.tree} {t.name}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
