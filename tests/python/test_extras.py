"""What `pip install axrt` brings and what its extras add (pyproject.toml,
axrt/_extras.py): `import axrt` and `import axrt.llm` need only numpy and
ml_dtypes, and each optional part, reached without its extra, fails with an
error that names the extra to install, never with a traceback from deep
inside. The optional packages are hidden from a child interpreter by an
import hook, so the test runs in the full test environment."""

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

try:
    import tomllib
except ImportError:  # Python < 3.11: tools/requirements/test.txt installs tomli
    import tomli as tomllib

# Only the standard library, numpy, ml_dtypes and axrt itself can be imported.
BLOCKER = textwrap.dedent("""
    import importlib.abc, sys
    ALLOWED = {"numpy", "ml_dtypes", "axrt"}
    class HideOptional(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            top = name.split(".")[0]
            if top in ALLOWED or top in sys.stdlib_module_names:
                return None
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    sys.meta_path.insert(0, HideOptional())
""")


def run_bare(code, *args):
    """Runs `code` in a child interpreter that sees none of the optional packages."""
    if not hasattr(sys, "stdlib_module_names"):
        pytest.skip("needs Python 3.10 or later (sys.stdlib_module_names)")
    return subprocess.run([sys.executable, "-c", BLOCKER + textwrap.dedent(code), *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def project():
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


def names(requirements):
    return {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower().replace("_", "-")
            for r in requirements}


def test_required_dependencies_are_what_import_axrt_needs():
    assert names(project()["dependencies"]) == {"numpy", "ml-dtypes"}


def test_every_extra_is_in_the_test_environment():
    lines = (ROOT / "tools" / "requirements" / "test.txt").read_text().splitlines()
    environment = names(line for line in lines if line.strip() and not line.startswith("#"))
    extras = project()["optional-dependencies"]
    assert {"llm", "serve", "plot", "torch"} <= set(extras)
    for extra, requirements in extras.items():
        missing = names(requirements) - environment - {"axrt"}
        assert not missing, f"extra {extra!r}: {missing} not in tools/requirements/test.txt"


def test_import_axrt_needs_no_optional_package():
    result = run_bare("""
        import axrt, axrt.builder, axrt.llm, axrt.llm.convert, axrt.traceplot
        assert axrt.devices()
        hidden = {"torch", "tokenizers", "starlette", "uvicorn", "prometheus_client",
                  "matplotlib", "jax", "transformers"}
        print(sorted(hidden & set(sys.modules)))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("code, extra, package", [
    ("import axrt.torch", "torch", "torch"),
    ("import axrt.llm.server", "serve", "starlette"),
    ("import axrt.traceplot; axrt.traceplot.plot('t.json', 't.png')", "plot", "matplotlib"),
    ("import axrt.llm.model; axrt.llm.model.make_tokenizer('{}')", "llm", "tokenizers"),
])
def test_a_missing_extra_is_named(code, extra, package):
    result = run_bare(f"""
        try:
            {code}
        except ImportError as e:
            from axrt._extras import MissingExtraError
            assert isinstance(e, MissingExtraError), type(e)
            print(e)
    """)
    assert result.returncode == 0, result.stderr
    assert f"pip install 'axrt[{extra}]'" in result.stdout
    assert f"'{package}'" in result.stdout


def test_the_command_lines_name_the_extra(tmp_path):
    serve = run_bare("""
        import runpy
        sys.argv = ["axrt.llm", "serve", sys.argv[1]]
        runpy.run_module("axrt.llm", run_name="__main__")
    """, tmp_path / "model.axe")
    assert serve.returncode == 1
    assert "Traceback" not in serve.stderr
    assert "pip install 'axrt[serve]'" in serve.stderr

    (tmp_path / "trace.json").write_text('{"traceEvents": []}')
    plot = run_bare("""
        import runpy
        sys.argv = ["axrt.traceplot", sys.argv[1], sys.argv[2]]
        runpy.run_module("axrt.traceplot", run_name="__main__")
    """, tmp_path / "trace.json", tmp_path / "trace.png")
    assert plot.returncode == 2
    assert "Traceback" not in plot.stderr
    assert "pip install 'axrt[plot]'" in plot.stderr


def test_a_dependency_missing_inside_an_installed_package_is_not_blamed_on_the_extra():
    from axrt._extras import MissingExtraError, require

    with pytest.raises(ModuleNotFoundError) as info:
        require("tokenizers.axrt_no_such_module", "a test")
    assert not isinstance(info.value, MissingExtraError)
    assert info.value.name == "tokenizers.axrt_no_such_module"
