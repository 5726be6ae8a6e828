#!/usr/bin/env bash
# The ABI gate: compares a built libaxrt with the committed baseline of its
# ABI (abi/baseline/libaxrt.abi) using libabigail's abidiff.
#   check_abi.sh check LIBRARY BASELINE HEADERS_DIR   fails on any difference
#   check_abi.sh write LIBRARY BASELINE HEADERS_DIR SOURCE_DIR   rewrites the baseline
# Incompatible changes fail with abidiff's report. Compatible ones (a new
# function, a struct grown at its end) fail too, asking for the baseline to
# be rewritten (`make abi-baseline`) in the same commit, so that every
# change of the ABI is reviewed. The library is read once, by abidw with the
# options that wrote the baseline, and the two descriptions are compared: the
# same view of the ABI on both sides, in a few seconds (abidiff reading the
# library's debug information itself takes several times longer). LIBRARY
# may also be such a description (an .abi file), which the gate's self-test
# passes.
set -uo pipefail
mode=$1 library=$2 baseline=$3 headers=$4

# The exported interface of a library, as abidw describes it, into $2.
describe() {
  abidw --no-corpus-path --no-show-locs --no-comp-dir-path --exported-interfaces-only \
    --headers-dir "$headers" --drop-private-types "$1" --out-file "$2"
}

if [[ $mode == write ]]; then
  source_dir=$5
  describe "$library" "$baseline.tmp" || exit 1
  # Translation units are named relative to the source tree, not this machine.
  sed "s|path='$source_dir/|path='|g" "$baseline.tmp" > "$baseline" && rm -f "$baseline.tmp"
  echo "abi: wrote $(grep -c '<elf-symbol' "$baseline") exported symbols to $baseline"
  exit 0
fi

current=$library
if [[ $library != *.abi ]]; then
  current=$(mktemp "${TMPDIR:-/tmp}/axrt-abi.XXXXXX")
  trap 'rm -f "$current"' EXIT
  if ! describe "$library" "$current"; then
    echo "abi: abidw could not describe $library"
    exit 1
  fi
fi
report=$(abidiff --no-show-locs "$baseline" "$current" 2>&1)
status=$?
if (( status == 0 )); then
  echo "abi: $library matches the baseline ($(grep -c '<elf-symbol' "$baseline") symbols)"
  exit 0
fi
echo "$report"
if (( status & 8 )); then
  echo "abi: INCOMPATIBLE change against the baseline: clients built against it would break"
elif (( status & 4 )); then
  echo "abi: the ABI changed compatibly; rewrite the baseline in the same commit: make abi-baseline"
else
  echo "abi: abidiff failed (status $status)"
fi
exit 1
