#!/usr/bin/env bash
# Held-out test of calibrate --training's levels by tokens: every committed CPU model fitted
# from pre-runs is fitted again from the same traces twice, with one level (--training-levels
# one, as the model was) and with levels by tokens, and each measured run of its registrations
# is validated against both. The pre-runs never include the runs validated. Writes results.csv
# beside this script; README.md reads it.
#
#   traces/cpu/experiments/step-levels/run.sh     # needs build/release/ddpsim; about a minute
set -euo pipefail
shopt -s inherit_errexit  # a failed refit inside $(...) stops the script
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../refits.sh"  # from the repository root, with $ddpsim and $work

variant_args() {
  echo --training-levels
  echo "$2"
  # With one level, the refit must be the committed model: else this compares another fit.
  [[ $2 == one ]] && echo "$1" >>"$work/check-one"
  return 0
}

echo "$RESULTS_HEADER" >"$work/results.csv"
score_runs one tokens
# The twentieth registration set configs against each other (compare --against): each column's
# gain as compare gives it with either refit, against the gain each pair of runs measured.
score_columns traces/cpu/prereg20 one tokens
while read -r model; do
  python3 -c 'import json, sys
a, b = (json.load(open(f))["noise"]["steps"] for f in sys.argv[1:])
sys.exit(0 if a == b else "run.sh: " + sys.argv[1] + "'"'"'s measured steps differ from its refit with one level")' \
    "$model" "$(refit "$model" one)"
done < <(sort -u "$work/check-one")
cp "$work/results.csv" "$here/results.csv"
echo "wrote $here/results.csv"
