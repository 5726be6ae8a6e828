"""Runs one test file under pytest as one CTest test (tests/python/CMakeLists.txt).

usage: run_pytest.py TEST_FILE [pytest arguments...]

pytest's exit status says too little for CTest: a module skipped as a whole
(a missing optional package) exits 5, "no tests collected", which CTest
would count as a failure, and a file whose every test skipped exits 0, which
CTest would count as a pass. Here both become exit 77, which CTest reports
as skipped (SKIP_RETURN_CODE), and a file that collects nothing without
saying why stays a failure. Every skip, of the file or of one test, ends the
output as a line `skipped: <test>: <reason>`, which tools/test_summary.py
gathers at the end of `make test`.
"""
import sys

import pytest

SKIPPED = 77


class Outcomes:
    """What ran and what was skipped, with pytest's reasons."""

    def __init__(self):
        self.ran = 0
        self.skips = []

    def pytest_collectreport(self, report):
        if report.skipped:
            self.skips.append((report.nodeid or "(module)", _reason(report)))

    def pytest_runtest_logreport(self, report):
        if report.skipped:
            self.skips.append((report.nodeid, _reason(report)))
        elif report.when == "call":
            self.ran += 1


def _reason(report):
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text[len("Skipped: "):] if text.startswith("Skipped: ") else text


def main(argv):
    if not argv:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    outcomes = Outcomes()
    status = int(pytest.main(["-q", "-p", "no:cacheprovider", *argv], plugins=[outcomes]))
    for test, reason in outcomes.skips:
        print(f"skipped: {test}: {reason}")
    if status == pytest.ExitCode.NO_TESTS_COLLECTED:
        if outcomes.skips:
            return SKIPPED
        print(f"run_pytest: {argv[0]} collected no tests and gave no reason", file=sys.stderr)
        return status
    if status == pytest.ExitCode.OK and outcomes.ran == 0 and outcomes.skips:
        return SKIPPED
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
