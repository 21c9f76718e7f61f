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

# The GPU machine's build (no SimGrid): it must configure with the trainer's tests alone.
echo "== trainer-only configure (DDPSIM_BUILD_SIM=OFF)"
cmake -S . -B build/trainer-only -DDDPSIM_BUILD_SIM=OFF >/dev/null
tests=$(ctest --test-dir build/trainer-only -N | sed -n 's/^ *Test *#[0-9]*: //p' | sort | tr '\n' ' ')
[[ $tests == "ddptrain_cli_bad_input ddptrain_cli_calibrate_roundtrip ddptrain_cli_runs ddptrain_ddp_test ddptrain_model_test ddptrain_train_test glue_tsv_test interrupt_test karmarkar_karp_test minmax_solver_test tokenizer_test " ]] ||
  { echo "trainer-only build: unexpected tests: $tests" >&2; exit 1; }

scripts/fuzz.sh "${FUZZ_SECONDS:-25}"
