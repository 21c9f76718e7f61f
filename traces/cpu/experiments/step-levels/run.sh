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
cd "$here/../../../.."
ddpsim=${DDPSIM:-build/release/ddpsim}
[[ -x $ddpsim ]] || { echo "run.sh: $ddpsim is not built" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The traces a committed model was calibrated from: "profile" or "training" files, one a line
# ("tool": each trace's tool metadata).
traces_of() {
  python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))
for t in m["calibration"]["traces"]:
    if sys.argv[2] == "tool": print(t.get("metadata", {}).get("tool", ""))
    elif t.get("role", "profile") == sys.argv[2]: print(t["file"])' "$1" "$2"
}

# refit MODEL LEVELS: the model again from its own traces, into $work.
refit() {
  local key=${1//\//_} out
  out=$work/${key%.json}-$2.json
  if [[ ! -f $out ]]; then
    mapfile -t profile < <(traces_of "$1" profile)
    mapfile -t training < <(traces_of "$1" training)
    # ddptrain's small DistilBERT is fitted on its layout; a PyTorch model on the model itself.
    local base=$1
    [[ $(traces_of "$1" tool) == *ddptrain* ]] && base=traces/cpu/layout.json
    "$ddpsim" calibrate "${profile[@]}" --training "${training[@]}" --base "$base" --training-levels "$2" \
      --name refit --gpu refit --out "$out" >/dev/null
    # With one level, the refit must be the committed model: else this compares another fit.
    [[ $2 != one ]] || python3 -c 'import json, sys
a, b = (json.load(open(f))["noise"]["steps"] for f in sys.argv[1:])
sys.exit(0 if a == b else "run.sh: " + sys.argv[1] + "'"'"'s measured steps differ from its refit with one level")' \
      "$1" "$out"
  fi
  echo "$out"
}

# row CAMPAIGN SET POLICY LEVELS VALIDATION.json: one line of results.csv.
row() {
  python3 -c 'import json, sys
v = json.load(open(sys.argv[5]))
p = v["policies"][sys.argv[3]]
b = v["baseline"]["figures"]
def f(x): return "%.2f" % x
lo, hi = p.get("predicted_gain_pi95", [float("nan")] * 2)
print(",".join(sys.argv[1:5] + [f(p["mean_error_pct"]), f(b.get("mean_error_pct", float("nan"))),
      f(p["p95_error_pct"]), f(b.get("p95_error_pct", float("nan"))),
      f(p["measured_gain_pct"]), f(p["predicted_gain_pct"]), f(lo), f(hi),
      "yes" if lo <= p["measured_gain_pct"] <= hi else "no"]))' "$@"
}

echo "campaign,runs,policy,levels,mean_error_pct,baseline_mean_error_pct,p95_error_pct,baseline_p95_error_pct,measured_gain_pct,predicted_gain_pct,pi_low,pi_high,inside" \
  >"$work/results.csv"
for reg in traces/cpu/prereg*/; do
  reg=${reg%/}
  [[ -f $reg/config.json && -f $reg/runs/static/steps.csv ]] || continue
  model=$(python3 -c 'import json, os, sys
c = json.load(open(sys.argv[1] + "/config.json"))
print(os.path.normpath(os.path.join(sys.argv[1], c["model"])) if isinstance(c.get("model"), str) else "")' "$reg")
  [[ -f $model && -n $(traces_of "$model" training) ]] || continue
  for set in runs runs-2 ddp-control; do
    [[ -f $reg/$set/static/steps.csv ]] || continue
    extra=()
    [[ $set == ddp-control ]] && extra=(--set training.data_parallel=ddp)
    for dir in "$reg/$set"/*/; do
      p=$(basename "$dir")
      [[ $p == static || $p == profile ]] && continue  # the baseline; a profile taken alongside
      for levels in one tokens; do
        rm -rf "$work/v"
        # Its notes (the config's sizes unused, the trace's instead) are no news here; its errors are.
        "$ddpsim" validate "$reg/config.json" ${extra[@]+"${extra[@]}"} --model "$(refit "$model" $levels)" \
          --measured "$dir/steps.csv" --baseline "$reg/$set/static/steps.csv" --out "$work/v" >/dev/null \
          2>"$work/notes" || { cat "$work/notes" >&2; exit 1; }
        policy=$(python3 -c 'import json, sys
v = json.load(open(sys.argv[1])); print(next(iter(v["policies"])))' "$work/v/validation.json")
        row "$(basename "$reg")" "$set" "$policy" "$levels" "$work/v/validation.json" >>"$work/results.csv"
      done
    done
  done
done
# The twentieth registration set configs against each other (compare --against): each column's
# gain as compare gives it with either refit, against the gain each pair of runs measured.
P=traces/cpu/prereg20
for levels in one tokens; do
  model=$(refit $P/model-2ranks-training.json $levels)
  sed "s|\"model-2ranks-training.json\"|\"$model\"|" $P/config.json >"$work/config.json"
  rm -rf "$work/c"
  "$ddpsim" compare "$work/config.json" --replicates 20 --out "$work/c" --against zero1:training.data_parallel=zero1 \
    --against zero1:training.zero_partition=parameters --against b32:training.global_batch=32 >/dev/null
  for k in 1 2; do
    for c in zero1 b32; do
      python3 -c 'import json, sys
g = json.load(open(sys.argv[1]))["replicates"]["columns"][sys.argv[2]]["gain"]
v = json.load(open(sys.argv[3]))["registered"]["policies"][sys.argv[2]]
lo, hi = g["prediction_interval"]; m = v["measured_gain_pct"]
print(",".join(["prereg20", "pair-" + sys.argv[4], sys.argv[2], sys.argv[5], "", "", "", "",
      "%.2f" % m, "%.2f" % g["gain_pct"], "%.2f" % lo, "%.2f" % hi, "yes" if lo <= m <= hi else "no"]))' \
        "$work/c/summary.json" $c $P/validation-$k/$c/validation.json $k $levels >>"$work/results.csv"
    done
  done
done
cp "$work/results.csv" "$here/results.csv"
echo "wrote $here/results.csv"
