#!/usr/bin/env bash
# The fresh-machine check: `make demo` and then `make test` in a new clone, as
# far as one machine can pretend to be a fresh one.
#
#   tools/check_fresh.sh [--keep] [--test-only] [--again] [--jobs N] [--cpus LIST]
#                        [--isa avx2] [COMMIT]
#
# What it does:
#   - clones the repository (COMMIT, default HEAD: what is committed, not the
#     work tree) into a new temporary folder;
#   - gives pip an empty cache (PIP_CACHE_DIR), so that every Python package
#     of the tests' environment is downloaded again;
#   - hides the user's own Python packages (PYTHONNOUSERSITE=1, ~/.local/bin
#     off PATH, no PYTHONPATH or virtual environment of the caller);
#   - runs `make demo`, then `make test`, each timed, logs beside them;
#   - reports the time of each, the bytes this machine received meanwhile
#     (the downloads, as far as the network counters tell), and the summary
#     that `make test` printed.
# --test-only leaves out `make demo` (as CI does: `make test` alone on a fresh
# clone); --again runs `make test` a second time at the end (the environment
# and the trees kept, as on a developer's machine).
# --cpus LIST runs both under `taskset -c LIST` (for example --cpus 0 for one
# core); --isa avx2 sets AXRT_CPU_ISA=avx2 (the CPU device's AVX2 paths on an
# AVX-512 machine). Debian packages cannot be uninstalled for the check:
# those already on the machine stay. The clone is removed at the end unless
# --keep is given. Exits with the first failing command's status.
set -euo pipefail

keep=0
targets=(demo test)
again=0
jobs=
cpus=
isa=
commit=HEAD
while (($#)); do
  case $1 in
    --keep) keep=1 ;;
    --test-only) targets=(test) ;;
    --again) again=1 ;;
    --jobs) jobs=$2; shift ;;
    --cpus) cpus=$2; shift ;;
    --isa) isa=$2; shift ;;
    -h | --help) sed -n '2,26p' "$0"; exit 0 ;;
    -*) echo "check_fresh: unknown option $1" >&2; exit 2 ;;
    *) commit=$1 ;;
  esac
  shift
done

root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/axrt-fresh.XXXXXX")
cleanup() { if ((!keep)); then rm -rf "$work"; else echo "check_fresh: kept $work"; fi; }
trap cleanup EXIT

git clone --quiet --no-hardlinks "$root" "$work/axrt"
git -C "$work/axrt" checkout --quiet "$commit"
echo "check_fresh: $(git -C "$work/axrt" log -1 --format='%h %s' | cut -c1-100)"
echo "check_fresh: in $work/axrt"

# The machine as a new user finds it: no pip cache, no user site packages.
mkdir -p "$work/pip-cache"
export PIP_CACHE_DIR=$work/pip-cache
export PYTHONNOUSERSITE=1
unset PYTHONPATH VIRTUAL_ENV PYTHONHOME CONDA_PREFIX AXRT_VENV
PATH=$(tr ':' '\n' <<<"$PATH" | grep -vxF "$HOME/.local/bin" | paste -sd: -)
export PATH
[[ -n $isa ]] && export AXRT_CPU_ISA=$isa
make_args=()
[[ -n $jobs ]] && make_args+=(JOBS="$jobs")
pin=()
[[ -n $cpus ]] && pin=(taskset -c "$cpus")

received() { awk 'NR > 2 && $1 != "lo:" { sum += $2 } END { printf "%.0f\n", sum }' /proc/net/dev; }

status=0
report=()
((again)) && targets+=(test)
for target in "${targets[@]}"; do
  log=$work/make-$target.log
  [[ -e $log ]] && log=$work/make-$target-again.log
  before=$(received)
  start=$(date +%s)
  echo "check_fresh: make $target (log: $log)"
  if (cd "$work/axrt" && "${pin[@]}" make "${make_args[@]}" "$target") >"$log" 2>&1; then
    outcome=passed
  else
    status=$?
    outcome="FAILED (exit $status)"
  fi
  seconds=$(($(date +%s) - start))
  megabytes=$((($(received) - before) / 1000000))
  [[ $log == *-again.log ]] && target="$target again"
  report+=("make $target: $outcome in $seconds s, $megabytes MB received")
  echo "check_fresh: ${report[-1]}"
  if [[ $outcome != passed ]]; then
    tail -40 "$log"
    keep=1
    break
  fi
done
for log in "$work/make-test.log" "$work/make-test-again.log"; do
  if [[ -f $log ]]; then
    echo "check_fresh: from $log:"
    sed -n '/=== make test: summary ===/,$p' "$log"
  fi
done
echo
printf 'check_fresh: %s\n' "${report[@]}"
exit $status
