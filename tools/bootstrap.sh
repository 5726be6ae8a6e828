#!/usr/bin/env bash
# Installs what a target of the Makefile needs, and nothing when all of it is
# already there:
#
#   tools/bootstrap.sh build   Debian packages that building libaxrt, the
#                              `axrt` tool and the C examples needs (make demo)
#   tools/bootstrap.sh test    those, the test tools (Catch2, clang for the
#                              fuzzer, abigail-tools, Python headers), and
#                              the tests' own Python environment (make test)
#   tools/bootstrap.sh bench   those, Google Benchmark, OpenBLAS and the
#                              benchmarks' anchors in the same environment
#
# A second argument does part of it: --packages the Debian packages only,
# --venv the Python environment only, --venv-build only the first step of
# the environment, what building the extension module needs (`make test`
# installs the rest while the tree builds).
#
# Debian packages come through apt-get (root, or sudo). Python packages go
# into a virtual environment of the project's, never into the machine's
# Python: $AXRT_VENV (build/venv by default), made from $PYTHON (python3)
# without system site packages, from tools/requirements/*.txt through the
# package index pip is configured with. torch is first tried from PyPI's
# neighbour with the smaller CPU-only wheel, $AXRT_TORCH_INDEX_URL (empty: not
# tried), with a short timeout and no retries; where that index cannot be
# reached the default index serves it. The environment is made again from
# scratch when a requirements file, the base interpreter or what is installed
# in it (a package added by hand) changed since bootstrap last made it.
# docs/testing.md says more.
set -euo pipefail

level=${1:-test}
part=${2:-all}
case $level:$part in
  build:all | build:--packages | test:all | test:--packages | test:--venv | test:--venv-build | \
    bench:all | bench:--packages | bench:--venv) ;;
  *)
    echo "usage: tools/bootstrap.sh [build|test|bench] [--packages|--venv|--venv-build]" >&2
    exit 2
    ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
requirements=$root/tools/requirements

# --- Debian packages ---------------------------------------------------------

debian_packages=(cmake ninja-build g++ make pkg-config libfmt-dev libflatbuffers-dev
  flatbuffers-compiler libdlpack-dev)
if [[ $level != build ]]; then
  # Catch2 for the C++ tests, clang and its runtimes for the fuzzer,
  # abigail-tools for the ABI gate, gloo for device groups across
  # processes (libaxrt_gloo, docs/multi-device.md), and what making the
  # environment and building the extension module against its interpreter
  # need.
  debian_packages+=(catch2 clang libclang-rt-14-dev binutils abigail-tools libgloo-dev
    python3-dev python3-venv)
fi
if [[ $level == bench ]]; then
  debian_packages+=(libbenchmark-dev libopenblas-dev)
fi

[[ $part == --venv ]] && debian_packages=()
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

[[ $level == build || $part == --packages ]] && exit 0

# --- The Python environment ----------------------------------------------------

python=${PYTHON:-python3}
venv=${AXRT_VENV:-$root/build/venv}
venv_python=$venv/bin/python
torch_index=${AXRT_TORCH_INDEX_URL-https://download.pytorch.org/whl/cpu}

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null; then
  echo "bootstrap: $python is not a Python 3.9 or later (set PYTHON to one)" >&2
  exit 1
fi

# One bootstrap at a time makes or changes the environment.
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9

sha() { sha256sum "$@" | cut -d' ' -f1; }
# What the environment was made from and what it holds now.
base_identity() {
  "$python" -c 'import os, sys; print(os.path.realpath(sys.executable), sys.version.split()[0])'
}
installed() {
  (cd "$venv" && ls -d lib/python*/site-packages/*.dist-info 2>/dev/null | sort | sha256sum | cut -d' ' -f1)
}
stamp=$venv/axrt-environment
want_base="base $(base_identity)"
want_build="build $(sha "$requirements/build.txt")"
want_test="test $(sha "$requirements/test.txt")"
want_bench="bench $(sha "$requirements/bench.txt")"
stamp_has() { [[ -f $stamp ]] && grep -qxF "$1" "$stamp"; }
stamp_add() {
  grep -v "^${1%% *} " "$stamp" >"$stamp.new" || true
  echo "$1" >>"$stamp.new"
  mv "$stamp.new" "$stamp"
}
pip() { "$venv_python" -m pip --disable-pip-version-check "$@"; }

# The environment is made in two steps: first what building needs
# (build.txt: pybind11, a few seconds), so that the tree can be configured
# and built while the second step installs the rest (test.txt). The stamp
# records each step; a step that did not finish leaves no record.
started=$SECONDS
if [[ -x $venv_python ]] && "$venv_python" -c '' 2>/dev/null && stamp_has "$want_base" &&
  stamp_has "$want_build" && { ! grep -q '^test ' "$stamp" || { stamp_has "$want_test" &&
  stamp_has "installed $(installed)"; }; }; then
  :  # the first step is done, and nothing changed since the second
else
  if [[ -e $venv ]]; then
    echo "bootstrap: $venv does not match tools/requirements, $python or what bootstrap installed: making it again"
  else
    echo "bootstrap: making the test environment $venv (from $python)"
  fi
  rm -rf "$venv"
  "$python" -m venv "$venv"
  pip install --quiet --no-compile -r "$requirements/build.txt"
  printf '%s\n%s\n' "$want_base" "$want_build" >"$stamp"
fi
[[ $part == --venv-build ]] && exit 0

if ! stamp_has "$want_test"; then
  torch_requirement=$(grep -E '^torch[<>=~! ]' "$requirements/test.txt" | head -1)
  if [[ -n $torch_index ]]; then
    echo "bootstrap: trying $torch_index for ${torch_requirement} (CPU-only build)"
    if pip install --quiet --no-compile --no-deps --index-url "$torch_index" --timeout 10 \
      --retries 0 "$torch_requirement" 2>/dev/null; then
      echo "bootstrap: torch from $torch_index"
    else
      echo "bootstrap: $torch_index is out of reach: torch comes from the default index"
    fi
  fi
  echo "bootstrap: installing tools/requirements/test.txt into $venv"
  # No byte-compiling of every file of every package: what is imported is
  # compiled on first use.
  pip install --quiet --no-compile -r "$requirements/test.txt"
  stamp_add "$want_test"
fi
if [[ $level == bench ]] && ! stamp_has "$want_bench"; then
  echo "bootstrap: installing tools/requirements/bench.txt into $venv"
  pip install --quiet --no-compile -r "$requirements/bench.txt"
  stamp_add "$want_bench"
fi
if ! stamp_has "installed $(installed)"; then
  stamp_add "installed $(installed)"
  pip freeze >"$venv/axrt-freeze.txt"
  echo "bootstrap: $venv ready in $((SECONDS - started)) s ($(wc -l <"$venv/axrt-freeze.txt") packages, $(du -sh "$venv" | cut -f1); list in $venv/axrt-freeze.txt)"
fi
