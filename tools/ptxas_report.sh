#!/usr/bin/env bash
# What ptxas makes of every CUDA kernel, for each target the fatbin holds:
# registers, shared memory, stack, spills (docs/kernels.md, "CUDA
# resources"). Needs nvcc; no GPU.
#
#   tools/ptxas_report.sh [NVCC]      (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc)
#
# Prints a Markdown table, one row per kernel and target, from
# `nvcc -cubin -Xptxas -v` of kernels/cuda/all_kernels.cu with the flags
# kernels/cuda/CMakeLists.txt builds the fatbin with.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
nvcc=${1:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "| kernel | target | registers | shared memory (bytes) | stack (bytes) | spill stores / loads (bytes) |"
echo "|---|---|---|---|---|---|"
for arch in sm_80 sm_90; do
  "$nvcc" -cubin -O3 -std=c++17 -arch="$arch" -Xptxas -v -o "$work/$arch.cubin" \
    "$root/kernels/cuda/all_kernels.cu" 2> "$work/$arch.txt"
  awk -v arch="$arch" '
    /Compiling entry function/ { match($0, /'"'"'[^'"'"']+'"'"'/); kernel = substr($0, RSTART + 1, RLENGTH - 2) }
    /bytes stack frame/ { stack = $1; stores = $5; loads = $9 }
    /Used [0-9]+ registers/ {
      match($0, /Used [0-9]+ registers/); registers = substr($0, RSTART + 5, RLENGTH - 15)
      smem = 0
      if (match($0, /[0-9]+ bytes smem/)) smem = substr($0, RSTART, RLENGTH - 11)
      printf "| %s | %s | %s | %s | %s | %s / %s |\n", kernel, arch, registers, smem, stack, stores, loads
    }
  ' "$work/$arch.txt" | sort
done
