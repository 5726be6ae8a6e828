#!/usr/bin/env bash
# Installs what building and testing axrt needs, and nothing when all of it is
# already there. Debian packages through apt-get; Python packages through pip.
set -euo pipefail

debian_packages=(
  cmake ninja-build g++ clang libclang-rt-14-dev pkg-config binutils make
  libfmt-dev catch2 libbenchmark-dev libopenblas-dev
  libflatbuffers-dev flatbuffers-compiler libdlpack-dev python3-dev abigail-tools
)
# "module|pip requirement": the Python package (bindings/python) and its
# tests. JAX on the CPU is what the DLPack interop tests exchange with;
# tokenizers runs the text prompts of axrt.llm; starlette, uvicorn and
# prometheus_client its server, which the tests call with the openai client;
# matplotlib draws trace timelines (python -m axrt.traceplot).
# torch (the CPU build, from PyTorch's own index, below) is what the PyTorch
# operator and DLPack tests exchange with. transformers, the model path's
# reference, is not installed: its outputs are committed (tests/llm/README.md).
python_packages=(
  "pybind11|pybind11>=2.10"
  "scikit_build_core|scikit-build-core>=0.8"
  "numpy|numpy>=1.22"
  "ml_dtypes|ml_dtypes>=0.3"
  "pytest|pytest>=7"
  "jax|jax[cpu]"
  "tokenizers|tokenizers>=0.13"
  "starlette|starlette>=0.37"
  "uvicorn|uvicorn>=0.29"
  "prometheus_client|prometheus-client>=0.19"
  "openai|openai>=1.0"
  "matplotlib|matplotlib>=3.5"
)

missing=()
for pkg in "${debian_packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
if ((${#missing[@]})); then
  echo "bootstrap: installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

python=${PYTHON:-python3}
missing=()
for entry in "${python_packages[@]}"; do
  if ! "$python" -c "import ${entry%%|*}" 2>/dev/null; then
    missing+=("${entry#*|}")
  fi
done
if ((${#missing[@]})); then
  echo "bootstrap: installing Python packages: ${missing[*]}"
  "$python" -m pip install --quiet "${missing[@]}"
fi
if ! "$python" -c "import torch" 2>/dev/null; then
  echo "bootstrap: installing torch (CPU build)"
  "$python" -m pip install --quiet torch --index-url https://download.pytorch.org/whl/cpu
fi
