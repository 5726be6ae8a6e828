#!/usr/bin/env bash
# Runs the .axe reader fuzzer for a given time: fuzz/run.sh BUILD_DIR SECONDS
# [libFuzzer flags...]. BUILD_DIR is a tree configured with
# -DAXRT_BUILD_FUZZERS=ON (`make fuzz` does that). The corpus in
# BUILD_DIR/corpus is seeded with the golden files, the reproducers of past
# findings (fuzz/regressions, which must keep passing) and the CLI tests'
# files, written by SEEDS_TOOL (the axrt_make_test_files of an ordinary
# build; `make fuzz` names it), and grows from run to run; reproducers of
# new findings land in BUILD_DIR/artifacts and the log in BUILD_DIR/logs.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $# -lt 2 ]]; then
  echo "usage: fuzz/run.sh BUILD_DIR SECONDS [libFuzzer flags...]" >&2
  exit 2
fi
build=$1
seconds=$2
shift 2
fuzzer=$build/fuzz/axe_reader_fuzzer
seeds_tool=${SEEDS_TOOL:-build/release/tests/cli/axrt_make_test_files}
for tool in "$fuzzer" "$seeds_tool"; do
  if [[ ! -x $tool ]]; then
    echo "fuzz: $tool not built (make fuzz builds it)" >&2
    exit 2
  fi
done

corpus=$build/corpus
seeds=$build/seeds
artifacts=$build/artifacts
logs=$build/logs
mkdir -p "$corpus" "$seeds" "$artifacts" "$logs"
"$seeds_tool" "$seeds"
shopt -s nullglob
for seed in tests/golden/*/*.axe fuzz/regressions/* "$seeds"/*; do
  # Named by content, as libFuzzer names what it adds.
  cp -n "$seed" "$corpus/$(sha1sum "$seed" | cut -c1-40)"
done

# Inputs up to 256 KiB, or the largest seed if that is larger: segments sit
# on 4096-byte boundaries, so real files are tens of KiB.
max_len=262144
for seed in "$corpus"/*; do
  size=$(stat -c %s "$seed")
  (( size > max_len )) && max_len=$size
done

log=$logs/fuzz-$(date -u +%Y%m%dT%H%M%SZ).log
marker=$(mktemp)
trap 'rm -f "$marker"' EXIT
echo "fuzz: running $fuzzer for ${seconds}s on $corpus ($(ls "$corpus" | wc -l) inputs), log $log"
status=0
"$fuzzer" "$corpus" \
  -dict=fuzz/axe.dict \
  -max_total_time="$seconds" \
  -max_len="$max_len" \
  -timeout=20 \
  -rss_limit_mb=2048 \
  -malloc_limit_mb=2048 \
  -print_final_stats=1 \
  -artifact_prefix="$artifacts/" \
  "$@" >"$log" 2>&1 || status=$?

grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb|stat::new_units_added)' "$log" || true
new_reproducers=()
for reproducer in "$artifacts"/*; do
  [[ -n $(find "$reproducer" -newer "$marker" -print 2>/dev/null) ]] && new_reproducers+=("$reproducer")
done
# A finding fails the run even when libFuzzer went on past it
# (-fork=N -ignore_crashes=1).
if (( status != 0 || ${#new_reproducers[@]} > 0 )); then
  echo "fuzz: FAILED (exit status $status); the end of $log:" >&2
  tail -n 60 "$log" >&2
  for reproducer in "${new_reproducers[@]}"; do
    echo "fuzz: reproducer: $reproducer (rerun: $fuzzer $reproducer)" >&2
  done
  (( ${#new_reproducers[@]} > 0 )) || echo "fuzz: no reproducer was written; see $log" >&2
  exit 1
fi
echo "fuzz: OK, no findings in ${seconds}s"
