#!/usr/bin/env bash
# Builds and runs the whole test suite: the Release build (unit tests, end-to-end CLI tests),
# an AddressSanitizer + UndefinedBehaviorSanitizer build of ddpsim's tests, and the parsers'
# libFuzzer harnesses for a fixed time each (FUZZ_SECONDS, default 25). The sanitized build is
# clang's and holds the harnesses too: its libraries, built once with libFuzzer's coverage hooks,
# serve both (a third build of them, for the fuzzers alone, took 5.5 minutes on a 2-core Intel
# VM). It leaves the trainer out: its inputs (TSV, safetensors header) are parsed by code the
# fuzzers cover, and LibTorch code under ASan took half of that build's time (11 → 6 minutes, 2
# cores). It builds at -O1 with line tables only (-g1, enough for a sanitizer's stack trace):
# with GCC, 689 → 389 s on a 2-core AMD VM, for 9 s more of its tests (245 → 254 s).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
# Each stage's start, in minutes since this script began: where a slow CI run spent its time.
stage() { echo "== [$((SECONDS / 60))m$((SECONDS % 60))s] $*"; }

for variant in release asan; do
  dir=build/$variant
  flags=(-DCMAKE_BUILD_TYPE=Release)
  compiler=()
  if [[ $variant == asan ]]; then
    flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
      "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" -DDDPSIM_FUZZ=ON -DDDPSIM_BUILD_TRAINER=OFF)
    compiler=(env CXX=clang++)
    # A tree an earlier version of this script configured with GCC keeps GCC: started afresh.
    [[ -f $dir/CMakeCache.txt ]] && ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang' "$dir/CMakeCache.txt" && rm -rf "$dir"
  fi
  stage "$variant: configure and build ($dir)"
  "${compiler[@]}" cmake -S . -B "$dir" "${flags[@]}" >/dev/null
  cmake --build "$dir" -j "$jobs"
  stage "$variant: ctest"
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" | tee "$dir/ctest.txt"
  # A skipped test names its reason in its output: say each one here, where the run ends.
  sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (Skipped)$/\1/p' "$dir/ctest.txt" | while read -r name; do
    reason=$(awk -v t="$name" '$0 ~ "^[0-9]+/[0-9]+ Test: " t "$" { f = 1 } f && /skip/ { print; exit }
                              /<end of output>/ { f = 0 }' "$dir/Testing/Temporary/LastTest.log")
    echo "== $variant: skipped $name: ${reason:-it printed no reason}"
  done
done

# The GPU machine's build (no SimGrid) must configure, with the trainer's tests and none of ddpsim's.
stage "trainer-only configure (DDPSIM_BUILD_SIM=OFF)"
cmake -S . -B build/trainer-only -DDDPSIM_BUILD_SIM=OFF >/dev/null
tests=$(ctest --test-dir build/trainer-only -N | sed -n 's/^ *Test *#[0-9]*: //p')
grep -qx ddptrain_train_test <<<"$tests" && ! grep -q '^cli_' <<<"$tests" ||
  { echo "trainer-only build: expected the trainer's tests and none of ddpsim's, got: $(echo $tests)" >&2; exit 1; }

stage "fuzz"
FUZZ_BUILD=build/asan scripts/fuzz.sh "${FUZZ_SECONDS:-25}"
stage "done"
