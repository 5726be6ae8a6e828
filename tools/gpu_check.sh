#!/usr/bin/env bash
# The one GPU command (`make gpu-check`): every check that needs a real GPU,
# in one run, from a copy of the tree that carries build/gpu-bundle
# (tools/gpu_bundle.sh, `make gpu-bundle` on a build machine). Nothing is
# built or downloaded here. Every result and figure goes under one folder.
#
#   tools/gpu_check.sh [--out DIR] [--device cuda:0] [--bundle DIR] [--mock] [--pack]
#
# Steps, each with its own time limit, the last (figures) with what is
# left of 7.5 minutes, so that the command ends within 8 minutes on a GPU;
# each writes OUT/<step>.log and a line of OUT/summary.md:
#   devices      `axrt devices`: what the driver sees (name, memory, driver)
#   conformance  the conformance suite on the device (JUnit in
#                OUT/conformance.xml); the device-code cases load the
#                bundle's fatbin
#   models       each test model of the bundle generated greedily on the
#                device through the serving engine (`axrt_llm`, the C
#                example: step and sample on the device), its tokens against
#                the CPU device's (and transformers' where the model is
#                exact); OUT/models.md is the table
#   python       the Python package on the device with this machine's own
#                interpreter (the bundle carries the package built for its
#                version, and numpy): tensors, DLPack, the engine and a
#                session against the CPU's tokens and logits; OUT/python.md
#   kernels      the tree's CUDA tests on the device with that interpreter
#                (pytest): every transformer kernel against its float64
#                reference (tests/python/test_llm_kernels.py), DLPack
#   bench        the CUDA driver against the raw Driver API (dispatch,
#                copies, allocation; JSON in OUT/cuda_bench.json), when the
#                bundle has it
#   figures      a random 1.1 B Llama in TinyLlama's shape, made here,
#                converted in bf16, int4 and fp8, then with the opt-in
#                paths (the decode matmuls, the fused kernels, graphs,
#                the tensor-core matmuls, flash attention, split
#                attention, an fp8 KV cache), timed through the engine
#                until its time is up (figures.json keeps each variant
#                as it ends):
#                decode at batch 1 against the memory-bandwidth bound,
#                16 and 64 concurrent requests, prefill at 512 and 2048
#                (tools/gpu_llm_figures.py; OUT/figures.md and .json)
# --pack leaves OUT with two files, summary.md and gpu-check.tar.gz (all
# the rest), for machines that hand back only a few files.
# --mock runs the same steps on the mock Driver API of the bundle
# (tests/mock_cuda), to rehearse the command on a machine without a GPU.
# Exits 0 when every step that ran passed; a step that cannot run (no
# device, no benchmark) is reported as skipped with the reason.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bundle="$root/build/gpu-bundle"
out="${OUT:-$root/build/gpu-check}"
device=cuda:0
mock=0
pack=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --out) out=$(realpath -m "$2"); shift ;;
    --device) device=$2; shift ;;
    --bundle) bundle=$(realpath -m "$2"); shift ;;
    --mock) mock=1 ;;
    --pack) pack=1 ;;
    -h|--help) sed -n '2,40p' "$0"; exit 0 ;;
    *) echo "gpu_check: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
if [[ ! -x $bundle/tools/axrt/axrt && -f $bundle/bundle.tar.xz ]]; then
  # A packed bundle (tools/gpu_bundle.sh): unpacked for this run only.
  unpacked=$(mktemp -d "${TMPDIR:-/tmp}/axrt-gpu-bundle.XXXXXX")
  trap 'rm -rf "$unpacked"' EXIT
  if command -v xz >/dev/null; then
    unpack() { xz -dc "$bundle/bundle.tar.xz" | tar -C "$unpacked" -xf -; }
  else  # Python's own lzma, where xz is not installed
    unpack() { python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
                 "$bundle/bundle.tar.xz" "$unpacked"; }
  fi
  if ! unpack; then
    echo "gpu_check: $bundle/bundle.tar.xz does not unpack" >&2
    exit 2
  fi
  bundle=$unpacked
fi
if [[ ! -x $bundle/tools/axrt/axrt ]]; then
  echo "gpu_check: no bundle at $bundle: make one with \`make gpu-bundle\` on a build machine" \
       "and carry build/gpu-bundle with the tree" >&2
  exit 2
fi
mkdir -p "$out"
summary="$out/summary.md"
started=$(date +%s)
{
  echo "# gpu-check, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
  echo "bundle: $(head -1 "$bundle/MANIFEST" 2>/dev/null); device $device; host $(hostname)"
  echo
  echo "| step | result | seconds | detail |"
  echo "|---|---|---|---|"
} > "$summary"

if [[ $mock == 1 ]]; then
  export AXRT_CUDA_DRIVER_LIBRARY="$bundle/tests/mock_cuda/libaxrt_mock_cuda.so"
fi
export AXRT_CTS_CUDA_FATBIN_PATH="$bundle/kernels/cuda/axrt_kernels.fatbin"
export AXRT_CUDA_KERNELS_FATBIN_PATH="$AXRT_CTS_CUDA_FATBIN_PATH"
export AXRT_CTS_GOLDEN_PATH="$bundle/golden"
failed=0

# record STEP RESULT SECONDS DETAIL
record() {
  echo "| $1 | $2 | $3 | $4 |" >> "$summary"
  echo "gpu_check: $1: $2 ($3 s) $4"
  if [[ $2 == failed ]]; then failed=1; fi
}

# 1. What the driver sees.
t=$(date +%s)
if timeout 60 "$bundle/tools/axrt/axrt" devices > "$out/devices.log" 2>&1; then
  if grep -q "^${device}\b\|${device} " "$out/devices.log"; then
    record devices passed $(($(date +%s) - t)) "$(grep -A1 -m1 "$device" "$out/devices.log" | tr -s ' \n|' ' ')"
  else
    record devices skipped $(($(date +%s) - t)) "no $device: $(tr '\n' ' ' < "$out/devices.log" | cut -c1-200)"
    echo "gpu_check: no $device here; nothing else can run" >&2
    exit 1
  fi
else
  record devices failed $(($(date +%s) - t)) "axrt devices failed (see devices.log)"
  exit 1
fi

# 2. The conformance suite on the device.
t=$(date +%s)
if AXRT_CTS_DEVICE=$device timeout 300 "$bundle/abi/cts/axrt_cts" -r junit \
     -o "$out/conformance.xml" > "$out/conformance.log" 2>&1; then
  record conformance passed $(($(date +%s) - t)) "$(grep -c "<testcase" "$out/conformance.xml") cases"
else
  cases=$(grep -c "<failure" "$out/conformance.xml" 2>/dev/null || echo "?")
  record conformance failed $(($(date +%s) - t)) "$cases failing case(s): conformance.xml"
fi

# 3. The test models through the serving engine on the device.
t=$(date +%s)
{
  echo "| model | tokens on $device = the CPU's | = transformers' | first differing index |"
  echo "|---|---|---|---|"
} > "$out/models.md"
models_failed=0
models_run=0
for model in "$bundle"/models/*.axe; do
  stem=${model%.axe}
  name=$(basename "$stem")
  models_run=$((models_run + 1))
  if ! timeout 120 "$bundle/examples/c/axrt_llm" --device "$device" --max-new-tokens 32 \
         "$model" "$(cat "$stem.prompt")" > "$out/$name.tokens" 2>> "$out/models.log"; then
    echo "| $name | failed to run (models.log) | | |" >> "$out/models.md"
    models_failed=$((models_failed + 1))
    continue
  fi
  got=$(cat "$out/$name.tokens")
  want=$(cat "$stem.tokens")
  reference="(not exact)"
  if [[ -f $stem.reference ]]; then
    [[ $got == "$(cat "$stem.reference")" ]] && reference=yes || reference=no
  fi
  if [[ $got == "$want" ]]; then
    echo "| $name | yes | $reference | |" >> "$out/models.md"
  else
    read -ra a <<< "$got"
    read -ra b <<< "$want"
    i=0
    while [[ $i -lt ${#b[@]} && ${a[$i]:-} == "${b[$i]}" ]]; do i=$((i + 1)); done
    echo "| $name | no | $reference | $i |" >> "$out/models.md"
    models_failed=$((models_failed + 1))
  fi
done
if [[ $models_failed == 0 ]]; then
  record models passed $(($(date +%s) - t)) "$models_run models, the CPU's tokens (models.md)"
else
  record models failed $(($(date +%s) - t)) "$models_failed of $models_run differ or fail (models.md)"
fi

# 4. The Python package on the device, with the machine's own interpreter of
# the version the bundle's module was built for.
t=$(date +%s)
version=$(sed -n 's/^python //p' "$bundle/MANIFEST" 2>/dev/null)
interpreter=""
if [[ -n $version ]]; then
  for candidate in "python$version" python3 python; do
    if command -v "$candidate" >/dev/null &&
       [[ $("$candidate" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) == "$version" ]]; then
      interpreter=$(command -v "$candidate")
      break
    fi
  done
fi
if [[ -z $version ]]; then
  record python skipped 0 "the bundle has no Python package (make gpu-bundle GPU_PYTHON=python3.X)"
elif [[ -z $interpreter ]]; then
  record python skipped 0 "no Python $version here: $(python3 --version 2>&1 | tr -d '\n'); the bundle needs one built for it"
elif PYTHONPATH="$bundle/python" timeout 240 "$interpreter" \
       "$bundle/python/gpu_python_check.py" "$bundle" "$device" "$out" > "$out/python.log" 2>&1; then
  record python passed $(($(date +%s) - t)) "$interpreter (python.md)"
else
  record python failed $(($(date +%s) - t)) "see python.log, python.md"
fi

# 5. The kernels' and the Python layer's CUDA tests of the tree, on the
# device: every transformer kernel against its float64 reference, DLPack.
t=$(date +%s)
if [[ -z $interpreter ]]; then
  record kernels skipped 0 "no Python $version with the bundle's package here"
elif ! "$interpreter" -c "import pytest" 2>/dev/null; then
  record kernels skipped 0 "pytest is not importable by $interpreter"
elif PYTHONPATH="$bundle/python:$root/tests/python" AXRT_TEST_BUILD_DIR="$bundle" \
       timeout 300 "$interpreter" -m pytest -q -p no:cacheprovider \
       "$root/tests/python/test_llm_kernels.py" "$root/tests/python/test_dlpack.py" \
       "$root/tests/python/test_tensor_core_quantized.py" \
       "$root/tests/python/test_matmul_fp8_int4_decode.py" \
       "$root/tests/python/test_flash_attention.py" \
       "$root/tests/python/test_logits_process.py" -k "cuda" --junitxml="$out/kernels.xml" > "$out/kernels.log" 2>&1; then
  record kernels passed $(($(date +%s) - t)) "$(tail -1 "$out/kernels.log")"
else
  record kernels failed $(($(date +%s) - t)) "$(tail -1 "$out/kernels.log") (kernels.log)"
fi

# 6. The CUDA driver's costs against the raw Driver API.
t=$(date +%s)
if [[ -x $bundle/tests/bench/axrt_cuda_bench ]]; then
  if timeout 180 "$bundle/tests/bench/axrt_cuda_bench" --benchmark_min_time=0.05 \
       --benchmark_counters_tabular=true --benchmark_out="$out/cuda_bench.json" \
       --benchmark_out_format=json > "$out/bench.log" 2>&1; then
    record bench passed $(($(date +%s) - t)) "cuda_bench.json, bench.log"
  else
    record bench failed $(($(date +%s) - t)) "see bench.log"
  fi
else
  record bench skipped 0 "the bundle was built without Google Benchmark"
fi

# 7. The language-model figures: a random Llama in TinyLlama's shape built
# here, converted in bf16 and int4, timed through the engine on the device
# beside the measured memory bandwidth (tools/gpu_llm_figures.py; a small
# shape on the mock).
t=$(date +%s)
shape=tinyllama
if [[ $mock == 1 ]]; then shape=small; fi
left=$((450 - ($(date +%s) - started)))  # of 7.5 minutes; at least 2 whatever came before
if [[ -z $interpreter ]]; then
  record figures skipped 0 "no Python $version with the bundle's package here"
elif PYTHONPATH="$bundle/python" timeout $((left > 120 ? left : 120)) \
       "$interpreter" "$root/tools/gpu_llm_figures.py" \
       --out "$out" --device "$device" --shape "$shape" > "$out/figures.log" 2>&1; then
  record figures passed $(($(date +%s) - t)) "$(sed -n 3p "$out/figures.md") (figures.md)"
elif [[ $? == 124 && -f $out/figures.md ]]; then  # its time was up: what it timed
  record figures partial $(($(date +%s) - t)) "$(sed -n 3p "$out/figures.md") (figures.md)"
else
  record figures failed $(($(date +%s) - t)) "$(tail -1 "$out/figures.log") (figures.log)"
fi

echo >> "$summary"
echo "in all $(($(date +%s) - started)) s" >> "$summary"
if [[ $pack == 1 ]]; then
  (cd "$out" && find . -maxdepth 1 -type f ! -name summary.md ! -name gpu-check.tar.gz ! -name .packed \
     -printf '%P\n' | sort > .packed && tar -czf gpu-check.tar.gz -T .packed &&
   xargs rm -f < .packed && rm -f .packed)
fi
echo "gpu_check: results in $out (summary.md)"
exit $failed
