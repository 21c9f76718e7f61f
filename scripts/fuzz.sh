#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz, clang with ASan + UBSan) and runs each for
# SECONDS (default 25) from its committed seed corpus, after replaying its regression inputs.
# Fails on any crash, leak, timeout or untyped exception; prints executions per harness.
#   scripts/fuzz.sh [SECONDS] [HARNESS...]
# FUZZ_BUILD names a tree configured with -DDDPSIM_FUZZ=ON to build them in (scripts/test.sh's
# sanitized tree); without it, build/fuzz holds the harnesses alone.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-25}
shift || true
dir=${FUZZ_BUILD:-build/fuzz}
if [[ -z ${FUZZ_BUILD:-} ]]; then
  echo "== fuzz: configure ($dir, clang)"
  CXX=clang++ cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDDPSIM_FUZZ=ON -DDDPSIM_BUILD_TESTS=OFF >/dev/null
elif ! grep -q '^DDPSIM_FUZZ:BOOL=ON$' "$dir/CMakeCache.txt" 2>/dev/null; then
  echo "fuzz: FUZZ_BUILD=$dir is not a tree configured with -DDDPSIM_FUZZ=ON" >&2
  exit 2
fi
echo "== fuzz: build ($dir)"
cmake --build "$dir" -j "$(nproc 2>/dev/null || echo 2)" --target fuzzers

harnesses=("$@")
if ((${#harnesses[@]} == 0)); then
  for source in tests/fuzz/*_fuzz.cpp; do harnesses+=("$(basename "$source" .cpp)"); done
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
summary=()
for name in "${harnesses[@]}"; do
  binary=$dir/tests/fuzz/$name
  regressions=tests/fuzz/regressions/${name%_fuzz}
  if [[ -d $regressions ]] && compgen -G "$regressions/*" >/dev/null; then
    TMPDIR=$work "$binary" -runs=0 "$regressions"/* >"$work/$name.regressions.log" 2>&1 ||
      { cat "$work/$name.regressions.log"; echo "fuzz: $name fails on a regression input" >&2; exit 1; }
  fi
  # The committed corpus seeds a scratch copy, which the run may grow.
  mkdir -p "$work/$name"
  cp tests/fuzz/corpus/"${name%_fuzz}"/* "$work/$name"/
  if ! TMPDIR=$work "$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/$name-" "$work/$name" >"$work/$name.log" 2>&1; then
    tail -40 "$work/$name.log"
    mkdir -p build/fuzz-artifacts && cp "$work/$name"-* build/fuzz-artifacts/ 2>/dev/null || true
    echo "fuzz: $name failed; the input is in build/fuzz-artifacts (add it to $regressions once fixed)" >&2
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$name.log")
  summary+=("$(printf '%-26s %10s executions in %s s' "$name" "$runs" "$seconds")")
done
echo "== fuzz: all harnesses clean"
printf '%s\n' "${summary[@]}"
