"""The ABI gate catches what it must: against copies of the baseline edited
to look like the library gained a function (a compatible change: the gate
asks for the baseline to be rewritten) and lost one (incompatible), it
fails with the right verdict (abi.gate checks the library against the
baseline itself). The library is described once (check_abi.sh write), and
the gate then compares that description with each edited baseline.

    python3 check_abi_selftest.py CHECK_ABI_SH LIBRARY BASELINE HEADERS_DIR
"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path


def gate(script, library, baseline, headers):
    r = subprocess.run([script, "check", library, baseline, headers], capture_output=True,
                       text=True)
    return r.returncode, r.stdout + r.stderr


def main():
    script, library, baseline, headers = sys.argv[1:5]
    text = Path(baseline).read_text()
    name = "axrt_trace_is_active"
    if f"<elf-symbol name='{name}'" not in text:
        sys.exit(f"the baseline has no {name} to edit")
    with tempfile.TemporaryDirectory() as tmp:
        added = Path(tmp) / "added.abi"
        edited = re.sub(rf"\s*<elf-symbol name='{name}'[^>]*/>", "", text)
        edited = re.sub(rf"\s*<function-decl name='{name}'.*?</function-decl>", "", edited,
                        flags=re.S)
        added.write_text(edited)
        removed = Path(tmp) / "removed.abi"
        removed.write_text(text.replace(
            f"<elf-symbol name='{name}'",
            "<elf-symbol name='axrt_selftest_removed' type='func-type' binding='global-binding'"
            " visibility='default-visibility' is-defined='yes'/>\n    "
            f"<elf-symbol name='{name}'", 1))
        current = Path(tmp) / "current.abi"
        r = subprocess.run([script, "write", library, str(current), headers, "/"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"check_abi.sh write failed:\n{r.stdout}{r.stderr}")
        library = str(current)
        failures = []
        code, out = gate(script, library, str(added), headers)
        if code == 0 or "changed compatibly" not in out or name not in out:
            failures.append(f"an added function was not reported as compatible:\n{out}")
        code, out = gate(script, library, str(removed), headers)
        if code == 0 or "INCOMPATIBLE" not in out or "axrt_selftest_removed" not in out:
            failures.append(f"a removed function was not reported as incompatible:\n{out}")
    if failures:
        sys.exit("\n".join(failures))
    print("abi gate: an addition is asked to update the baseline, a removal is refused")


if __name__ == "__main__":
    main()
