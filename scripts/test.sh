#!/usr/bin/env bash
# Builds and runs the whole test suite: the Release build (unit tests, end-to-end CLI tests),
# an AddressSanitizer + UndefinedBehaviorSanitizer build of the same tests, and the parsers'
# libFuzzer harnesses for a fixed time each (FUZZ_SECONDS, default 25).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

for variant in release asan; do
  dir=build/$variant
  flags=(-DCMAKE_BUILD_TYPE=Release)
  [[ $variant == asan ]] && flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DDDPSIM_SANITIZE=ON)
  echo "== $variant: configure and build ($dir)"
  cmake -S . -B "$dir" "${flags[@]}" >/dev/null
  cmake --build "$dir" -j "$jobs"
  echo "== $variant: ctest"
  ctest --test-dir "$dir" --output-on-failure -j "$jobs"
done

scripts/fuzz.sh "${FUZZ_SECONDS:-25}"
