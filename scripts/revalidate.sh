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
for reg in traces/{cpu,h100,h200}/prereg?*/; do
  reg=${reg%/}
  # Registered and run, by compare --register (h100/prereg3's runs are per padding, scored above).
  [[ -f $reg/prediction.json && -f $reg/runs/static/steps.csv ]] || continue
  for dir in "$reg"/runs/*/; do
    p=$(basename "$dir")
    [[ $p == static || $p == profile ]] && continue  # the baseline, and the profile taken alongside
    validate_into "$reg/validation/$p" --registered "$reg/prediction.json" \
      --measured "$reg/runs/$p/steps.csv" --baseline "$reg/runs/static/steps.csv"
  done
done
# Configs against each other, registered by compare --against --register: each column's run k
# (runs-COLUMN-k) against the base column's run k. A run of static alone: RUN/static/steps.csv
# as scripts/zero1_pytorch.py writes it, RUN/steps.csv as ddptrain does.
policy_trace() {
  local trace
  for trace in "$1/static/steps.csv" "$1/steps.csv"; do [[ -f $trace ]] && { echo "$trace"; return; }; done
  echo "revalidate: $1 holds neither static/steps.csv nor steps.csv" >&2
  exit 1
}
for run in traces/{cpu,h100,h200}/prereg*/runs-*/; do
  run=${run%/} P=$(dirname "${run%/}")
  [[ -d $run && ${run##*/runs-} =~ ^(.+)-([0-9]+)$ ]] || continue  # no such registration, or not a column's run
  c=${BASH_REMATCH[1]} k=${BASH_REMATCH[2]}
  [[ $c == base ]] && continue
  [[ -d $P/runs-base-$k ]] || { echo "revalidate: $run has no $P/runs-base-$k to be scored against" >&2; exit 1; }
  measured=$(policy_trace "$run")  # alone, so that set -e stops at a run without a trace
  baseline=$(policy_trace "$P/runs-base-$k")
  registered=$P/prediction.json  # prediction-COLUMN.json where prediction.json registers policies
  [[ -f $P/prediction-$c.json ]] && registered=$P/prediction-$c.json
  validate_into "$P/validation-$k/$c" --registered "$registered" --column "$c" \
    --measured "$measured" --baseline "$baseline"
done
# Policies trained in turn in a base column's runs, registered by prediction.json: each against
# that run's static.
for dir in traces/{cpu,h100,h200}/prereg*/runs-base-*/*/; do
  [[ -f $dir/steps.csv ]] || continue
  dir=${dir%/} p=$(basename "$dir") run=$(dirname "$dir")
  [[ $p == static ]] && continue
  P=$(dirname "$run") k=${run##*-}
  [[ -f $P/prediction.json ]] || { echo "revalidate: $dir has no $P/prediction.json registering it" >&2; exit 1; }
  validate_into "$P/validation-$k/${p//[:=,]/-}" --registered "$P/prediction.json" \
    --measured "$dir/steps.csv" --baseline "$run/static/steps.csv"
done
# The DDP run that followed prereg11's registered ZeRO-1 one, on its seed: the same model under ddp.
P=traces/cpu/prereg11
validate_into $P/validation-ddp-control/sorted $P/config.json --set training.data_parallel=ddp \
  --model $P/model-2ranks-training.json --measured $P/ddp-control/sorted/steps.csv \
  --baseline $P/ddp-control/static/steps.csv
# Campaign 4's compute-bound H200 runs replayed after the fact with the H200's measured fp32
# model, fitted on the study's shapes only (docs/validation-gpu.md, "The fourth campaign").
for p in minmax-buffer-128-cost-tokens kk; do
  validate_into traces/h200/prereg4/replay-measured/$p traces/h200/prereg4/config.json \
    --model models/h200-distilbert-measured.json --measured traces/h200/prereg4/runs/$p/steps.csv \
    --baseline traces/h200/prereg4/runs/static/steps.csv
done
# Campaign 5 (H200): prereg4's compute-bound runs made again in a later session, against the same
# registration; and the registered peer, its minmax trace with the policy as ddpsim names it (the
# peer wrote "minmax" then: traces/h200/peer5/README.md).
for p in minmax-buffer-128-cost-tokens kk; do
  validate_into traces/h200/prereg4-repeat/validation/$p --registered traces/h200/prereg4/prediction.json \
    --measured traces/h200/prereg4-repeat/runs/$p/steps.csv --baseline traces/h200/prereg4-repeat/runs/static/steps.csv
done
validate_into traces/h200/peer5/validation/minmax-cost-tokens --registered traces/h200/peer5/prediction.json \
  --measured traces/h200/peer5/fp32-minmax/steps-labelled.csv --baseline traces/h200/peer5/fp32-static/steps.csv
# The peer in bf16, not registered: after the fact against prereg5's model (ddptrain's first-use cost).
validate_into traces/h200/peer6/validation-posthoc --measured traces/h200/peer6/bf16-minmax/steps.csv \
  --baseline traces/h200/peer6/bf16-static/steps.csv --model traces/h200/prereg5/model-bf16-training.json
# Campaign 4's traced decoder run (H200): against its profile's model, and its last 30 steps
# against the model that took the first 30 as --training (traces/h200/README.md).
dec=traces/h200/decoder
validate_into $dec/calibrated/validation-run --measured $dec/smollm-135m-run/steps.csv --model $dec/calibrated/smollm-135m.json
validate_into $dec/calibrated/validation-last30 --measured $dec/calibrated/run-last30.csv \
  --model $dec/calibrated/smollm-135m-first30.json
"$ddpsim" scorecard traces --out docs/scorecard.md
