"""The optional parts of axrt and the pip extra that brings each.

``pip install axrt`` installs what ``import axrt`` needs (numpy, ml_dtypes);
each extra of pyproject.toml brings the packages of one part:

    llm     tokenizers, jinja2                      text prompts and chats of axrt.llm
    serve   the above, starlette, uvicorn,          python -m axrt.llm serve
            prometheus-client
    plot    matplotlib                              python -m axrt.traceplot
    torch   torch                                   axrt.torch (PyTorch operators)
"""
from __future__ import annotations

import importlib
from types import ModuleType

# Module name -> (pip package, extra).
EXTRAS = {
    "tokenizers": ("tokenizers", "llm"),
    "jinja2": ("jinja2", "llm"),
    "starlette": ("starlette", "serve"),
    "uvicorn": ("uvicorn", "serve"),
    "prometheus_client": ("prometheus-client", "serve"),
    "matplotlib": ("matplotlib", "plot"),
    "torch": ("torch", "torch"),
}


class MissingExtraError(ModuleNotFoundError):
    """An optional package is not installed; the message names the extra that installs it."""


def require(module: str, feature: str) -> ModuleType:
    """Imports `module` (one of EXTRAS) for `feature`, or raises MissingExtraError naming the
    extra to install. A package that is there but misses a dependency of its own raises that
    error unchanged."""
    top = module.split(".")[0]
    package, extra = EXTRAS[top]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != top:
            raise
        raise MissingExtraError(
            f"{feature} needs the Python package '{package}', which is not installed: "
            f"pip install 'axrt[{extra}]' (or pip install {package})", name=e.name) from None
