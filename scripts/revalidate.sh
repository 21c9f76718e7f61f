#!/usr/bin/env bash
# Validates the committed runs again with the ddpsim built here, against the committed models
# (none refitted), then writes the scorecard: what a change to validate or to the prediction
# intervals makes of every comparison with a real run. The CPU campaigns' experiments
# (traces/cpu/experiments) keep the outputs of the ddpsim that made them.
#
#   scripts/revalidate.sh          # from anywhere; needs build/release/ddpsim
set -euo pipefail
cd "$(dirname "$0")/.."
ddpsim=${DDPSIM:-build/release/ddpsim}
[[ -x $ddpsim ]] || { echo "revalidate: $ddpsim is not built (cmake --build build/release)" >&2; exit 1; }

# validate into DIR and DIR.txt with paths relative to the repository. Arguments: DIR, validate's.
validate_into() {
  local dir=$1
  shift
  mkdir -p "$(dirname "$dir")"
  "$ddpsim" validate "$@" --out "$dir" >"$dir.txt" 2>/dev/null
  sed -i "s|$PWD/||g" "$dir.txt" "$dir"/*.json
}

KEEP_MODELS=1 STAGES=validate DDPSIM=$ddpsim scripts/validate_gpu.sh >/dev/null
STAGES=validate BUILD=$(dirname "$ddpsim") scripts/validate_cpu.sh >/dev/null

# The registered predictions: the first CPU one (scored before --registered existed, with the
# command its prediction.json records), campaign 3's from its config, and those written by
# compare --register.
for p in minmax-cost-tokens kk; do
  validate_into traces/cpu/prereg/validation/$p --measured traces/cpu/prereg/runs/$p/steps.csv \
    --baseline traces/cpu/prereg/runs/static/steps.csv --model traces/cpu/prereg/model-1core.json \
    --set platform.link_GBps=10 --set platform.latency_us=5 --set platform.host_GBps=0 \
    --set training.overlap=false --set simulation.spells=shared
done
for pad in 1 16; do
  validate_into traces/h100/prereg3/validation/pad$pad traces/h100/prereg3/config.json \
    --measured traces/h100/prereg3/runs/pad$pad/minmax-cost-tokens/steps.csv \
    --baseline traces/h100/prereg3/runs/pad$pad/static/steps.csv --model traces/h100/prereg3/model-bf16.json
done
for reg in traces/cpu/prereg?*/; do
  reg=$(basename "$reg")
  [[ -d traces/cpu/$reg/runs ]] || continue  # registered, its run not yet in
  for dir in traces/cpu/$reg/runs/*/; do
    p=$(basename "$dir")
    [[ $p == static || $p == profile ]] && continue  # the baseline, and the profile taken alongside
    validate_into traces/cpu/$reg/validation/$p --registered traces/cpu/$reg/prediction.json \
      --measured traces/cpu/$reg/runs/$p/steps.csv --baseline traces/cpu/$reg/runs/static/steps.csv
  done
done
"$ddpsim" scorecard traces --out docs/scorecard.md
