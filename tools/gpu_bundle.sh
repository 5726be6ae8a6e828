#!/usr/bin/env bash
# What `make gpu-check` runs on a GPU machine, made on a build machine
# (`make gpu-bundle`): a Release build with run paths relative to each
# binary ($ORIGIN), copied into one folder and packed as DIR/bundle.tar.xz
# (about 10 MB for 40 MB of files), which travels with a copy of the tree,
# so the GPU machine needs no compiler, no packages and no network;
# tools/gpu_check.sh unpacks it into a temporary folder there. The unpacked
# folder stays here as DIR.d (`tools/gpu_check.sh --bundle DIR.d` runs it
# as it is).
#
#   tools/gpu_bundle.sh [--out DIR] [--python PY]   (default build/gpu-bundle)
#
# The packed folder keeps the build tree's layout for what it holds:
#   runtime/libaxrt.so*          the library
#   tools/axrt/axrt              the command-line tool (`axrt devices`)
#   abi/cts/axrt_cts             the conformance suite
#   examples/c/axrt_llm          greedy generation through the serving engine
#   tests/bench/axrt_cuda_bench  the CUDA driver against the raw Driver API
#                                (when Google Benchmark is installed)
#   tests/mock_cuda/...          the mock Driver API, to rehearse the check
#                                on a machine without a GPU
#   kernels/cuda/                the CUDA kernels' fatbin and PTX
#   golden/                      the golden files the suite reads
#   models/NAME.axe              the test checkpoints (tests/llm/data)
#                                converted with their CUDA variants, with
#                                NAME.prompt (token ids), NAME.tokens (the 32
#                                greedy tokens the CPU device gives) and,
#                                where the model is exact, NAME.reference
#                                (transformers' tokens)
#   python/axrt                  with --python PY (or GPU_PYTHON): the Python
#                                package built for PY's version, which the
#                                GPU machine's own interpreter of that
#                                version runs (with its numpy and ml_dtypes)
#   MANIFEST                     the commit, the compiler, what was built
# Needs the CUDA toolkit (nvcc) for the kernels, and the project's test
# environment (make test's build/venv and build/release) to convert models.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/build/gpu-bundle"
gpu_python="${GPU_PYTHON:-}"
while [[ $# -gt 0 ]]; do
  case $1 in
    --out) out=$(realpath -m "$2"); shift ;;
    --python) gpu_python=$2; shift ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "gpu_bundle: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done

tree="$root/build/gpu"
python="${AXRT_VENV:-$root/build/venv}/bin/python"
package="$root/build/release/python"
if [[ ! -x $python || ! -d $package/axrt ]]; then
  echo "gpu_bundle: converting the test models needs build/venv and build/release (run make test first)" >&2
  exit 1
fi
if ! command -v nvcc >/dev/null && [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "gpu_bundle: nvcc (the CUDA toolkit) is needed for the CUDA kernels" >&2
  exit 1
fi

bench=OFF
if [[ -e /usr/include/benchmark/benchmark.h ]]; then bench=ON; fi
python_flags=(-DAXRT_BUILD_PYTHON=OFF)
gpu_venv="$root/build/gpu-python"
if [[ -n $gpu_python ]]; then
  # The interpreter of the GPU machine's version, with what building the
  # module needs (pybind11) and what the package needs at run time.
  if [[ ! -x $gpu_venv/bin/python ]]; then
    "$gpu_python" -m venv "$gpu_venv"
  fi
  "$gpu_venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r "$root/tools/requirements/build.txt" numpy ml_dtypes
  python_flags=(-DAXRT_BUILD_PYTHON=ON "-DPython_EXECUTABLE=$gpu_venv/bin/python")
fi
cmake -S "$root" -B "$tree" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON -DAXRT_BUILD_TESTS=ON "${python_flags[@]}" \
  -DAXRT_BUILD_BENCHMARKS=$bench >/dev/null
targets=(axrt_cli axrt_cts axrt_llm axrt_cuda_kernels axrt_mock_cuda)
if [[ $bench == ON ]]; then targets+=(axrt_cuda_bench); fi
if [[ -n $gpu_python ]]; then targets+=(axrt_python axrt_python_files); fi
cmake --build "$tree" -j "$(nproc)" --target "${targets[@]}"

carried=$out
out="$carried.d"
rm -rf "$out"
mkdir -p "$out"
copy() {  # copy PATH (relative to the tree) into the bundle, keeping links
  mkdir -p "$out/$(dirname "$1")"
  cp -P "$tree/$1" "$out/$1"
}
for f in "$tree"/runtime/libaxrt.so*; do copy "runtime/$(basename "$f")"; done
copy tools/axrt/axrt
copy abi/cts/axrt_cts
copy examples/c/axrt_llm
copy kernels/cuda/axrt_kernels.fatbin
copy kernels/cuda/axrt_kernels.ptx
for f in "$tree"/tests/mock_cuda/libaxrt_mock_cuda.so*; do copy "tests/mock_cuda/$(basename "$f")"; done
if [[ $bench == ON ]]; then copy tests/bench/axrt_cuda_bench; fi
mkdir -p "$out/golden/v1.3"
cp "$root/tests/golden/v1.3/signed_scalars.axe" "$out/golden/v1.3/"
if [[ -n $gpu_python ]]; then
  mkdir -p "$out/python"
  cp -r "$tree/python/axrt" "$out/python/"
  rm -rf "$out/python/axrt/torch" "$out/python/axrt/traceplot.py"
  strip --strip-unneeded "$out"/python/axrt/_axrt.*.so
  cp "$root/tools/gpu_python_check.py" "$out/python/"
fi
strip --strip-unneeded "$out"/runtime/libaxrt.so.*.* "$out"/tools/axrt/axrt \
  "$out"/abi/cts/axrt_cts "$out"/examples/c/axrt_llm 2>/dev/null || true

# The models, and what the CPU device gives for them: the check compares
# the GPU's tokens with these.
mkdir -p "$out/models"
PYTHONPATH="$package" "$python" - "$root/tests/llm/data" "$out/models" <<'EOF'
import sys
from pathlib import Path

import numpy as np
import axrt.llm

data, models = Path(sys.argv[1]), Path(sys.argv[2])
# Every weight mode, each on its smallest test model (tiny-llama in f32 is
# 12 MB; tiny-llama3 is the f32 one), the bf16 and fp8 KV caches, the fused
# kernels, split attention over each cache element type (tiny-llama's
# groups of 4 query heads a KV head), and each opt-in kernel: a model's name
# is its checkpoint, its weights and the options it was converted with.
MODELS = [
    ("tiny-llama3", "f32", {}),
    ("tiny-llama3", "int4", {}),
    ("tiny-llama3", "int4", {"activations": "int8"}),
    ("tiny-llama", "int8", {}),
    ("tiny-llama-tp", "bf16", {}),
    ("tiny-llama3", "f32", {"kv_cache_dtype": "bf16"}),
    ("tiny-llama3", "f32", {"kv_cache_dtype": "fp8_e4m3"}),
    ("tiny-llama3", "f32", {"fused_kernels": True}),
    ("tiny-llama3", "bf16", {"decode_matmuls": True, "fused_kernels": True}),
    ("tiny-llama3", "fp8", {"decode_matmuls": True}),
    ("tiny-llama3", "int4", {"decode_matmuls": True}),
    ("tiny-llama", "int8", {"split_attention": True}),
    ("tiny-llama3", "f32", {"kv_cache_dtype": "bf16", "split_attention": True}),
    ("tiny-llama3", "f32", {"kv_cache_dtype": "fp8_e4m3", "split_attention": True}),
    ("tiny-llama3", "fp8", {}),
    ("tiny-llama3", "bf16", {"tensor_core_matmuls": True}),
    ("tiny-llama", "int8", {"tensor_core_matmuls": True}),
    ("tiny-llama3", "int4", {"tensor_core_matmuls": True}),
    ("tiny-llama3", "fp8", {"tensor_core_matmuls": True}),
    ("tiny-llama3", "bf16", {"flash_attention": True}),
    ("tiny-llama3", "f32", {"kv_cache_dtype": "fp8_e4m3", "flash_attention": True}),
]
SHORT = {"activations": lambda v: "q8", "kv_cache_dtype": lambda v: f"kv-{v}",
         "fused_kernels": lambda v: "fused", "decode_matmuls": lambda v: "decode",
         "split_attention": lambda v: "split", "tensor_core_matmuls": lambda v: "tc",
         "flash_attention": lambda v: "flash"}
for name, weights, options in MODELS:
    stem = ".".join([name, weights] + [SHORT[k](v) for k, v in options.items()])
    axrt.llm.convert(data / name, models / f"{stem}.axe", weights=weights, **options)
    # The first prompt of the model's transformers reference (tests/llm/data;
    # for a bf16 or fp8 cache, transformers reading keys and values rounded so).
    kv = options.get("kv_cache_dtype", "f32")
    with np.load(data / f"{name}.{weights if kv == 'f32' else 'kv-' + kv}.npz") as ref:
        prompt = ref["prompt0"].tolist()
        greedy = ref["prompt0_greedy"].tolist()
    (models / f"{stem}.prompt").write_text(",".join(map(str, prompt)) + "\n")
    # transformers' greedy tokens (on the dequantized weights), where neither
    # the activations nor the tensor cores' inputs are rounded.
    rounded = options.get("activations") == "int8" or any(
        options.get(k) for k in ("tensor_core_matmuls", "flash_attention"))
    if not rounded:
        (models / f"{stem}.reference").write_text(" ".join(map(str, greedy)) + "\n")
EOF
for model in "$out"/models/*.axe; do
  stem=${model%.axe}
  "$tree/examples/c/axrt_llm" --device cpu:0 --max-new-tokens 32 \
    "$model" "$(cat "$stem.prompt")" > "$stem.tokens"
done

{
  echo "commit $(git -C "$root" describe --always --dirty --abbrev=12)"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), $(c++ --version | head -1)"
  echo "nvcc: $("$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" --version | tail -1)"
  echo "benchmarks $bench"
  if [[ -n $gpu_python ]]; then echo "python $("$gpu_venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"; fi
} > "$out/MANIFEST"

rm -rf "$carried"
mkdir -p "$carried"
# One xz stream with a dictionary wider than a model: the fatbin each model
# carries is then stored about once (11 MB for 54 MB, against 23 MB in
# independent blocks).
tar -C "$out" --sort=name -cf - . | xz -9 -T1 > "$carried/bundle.tar.xz"
cp "$out/MANIFEST" "$carried/MANIFEST"
echo "gpu_bundle: $carried/bundle.tar.xz, $(du -sh "$carried" | cut -f1) packed from" \
     "$(du -sh "$out" | cut -f1) in $out (carry $carried with the tree)"
