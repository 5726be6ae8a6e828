#!/usr/bin/env bash
# Installs what building and testing axrt needs, and nothing when all of it is
# already there. Debian packages through apt-get; Python packages through pip.
set -euo pipefail

debian_packages=(
  cmake ninja-build g++ clang libclang-rt-14-dev pkg-config binutils make
  libfmt-dev catch2 libbenchmark-dev libopenblas-dev
  libflatbuffers-dev flatbuffers-compiler libdlpack-dev
)
python_packages=()

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
for spec in "${python_packages[@]}"; do
  module=${spec%%=*}
  module=${module%%[<>]*}
  if ! "$python" -c "import ${module//-/_}" 2>/dev/null; then
    echo "bootstrap: installing Python package $spec"
    "$python" -m pip install --quiet "$spec"
  fi
done
