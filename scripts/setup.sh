#!/usr/bin/env bash
# Installs the Debian 12 packages ddpsim builds against; safe to run again (asks dpkg first,
# calls apt-get only for what is missing). Works as root or through sudo.
set -euo pipefail

packages=(
  build-essential cmake pkg-config           # toolchain: a fresh Debian may have none of it
  libsimgrid-dev                             # network simulation (pkg-config: simgrid)
  nlohmann-json3-dev                         # config, histogram and summary JSON
  libboost-program-options-dev               # command-line parsing
  doctest-dev                                # unit tests
  libutf8proc-dev                            # Unicode NFD, categories, lower-casing for the tokenizer
  libtorch-dev libgloo-dev                   # ddptrain: LibTorch 1.13 (CPU) with c10d's Gloo backend
  libopenblas0-openmp                        # an optimised BLAS for LibTorch (the reference one is ~20x slower)
  libeigen3-dev                              # least squares for ddpsim calibrate
  clang libclang-rt-14-dev                   # the sanitized build and the parsers' libFuzzer harnesses (scripts/test.sh)
  slurmctld slurmd slurm-client munge        # real Slurm for sweep arrays (scripts/slurm_sweep.sh) and its test
  python3-matplotlib                         # figures (plots/, ddpsim.plots)
  python3-pandas                             # results as DataFrames (ddpsim.run(...).to_pandas())
  python3-nbclient python3-ipykernel         # executes docs/notebooks/*.ipynb headless in the tests
  chromium                                   # a real headless browser for the one-page reports' test
  pybind11-dev python3-dev python3-torch     # the Python package (python/): bindings, and its tests on real torch
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

if ((EUID == 0)); then
  as_root=()
elif command -v sudo >/dev/null; then
  as_root=(sudo)
else
  echo "setup: need root or sudo to install: ${missing[*]}" >&2
  exit 1
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -q
"${as_root[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
