# Sourced by the held-out experiments beside it: each committed CPU model fitted again from its
# own traces in a few ways (variants), and every run of its registrations validated against each
# fit. The sourcing script sets $here (its folder) and defines `variant_args MODEL VARIANT`, which
# prints the calibrate arguments of a variant one a line; this moves to the repository root and
# sets $ddpsim and $work (removed on exit).
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

# refit MODEL VARIANT: the model again from its own traces, into $work; prints its path.
refit() {
  local key=${1//\//_} out
  out=$work/${key%.json}-$2.json
  if [[ ! -f $out ]]; then
    local profile training args=() listed
    mapfile -t profile < <(traces_of "$1" profile)
    mapfile -t training < <(traces_of "$1" training)
    listed=$(variant_args "$1" "$2")  # an assignment, so that its failure stops the script
    [[ -z $listed ]] || mapfile -t args <<<"$listed"
    # ddptrain's small DistilBERT is fitted on its layout; a PyTorch model on the model itself.
    local base=$1
    [[ $(traces_of "$1" tool) == *ddptrain* ]] && base=traces/cpu/layout.json
    "$ddpsim" calibrate "${profile[@]}" --training "${training[@]}" --base "$base" ${args[@]+"${args[@]}"} \
      --name refit --gpu refit --out "$out" >/dev/null
  fi
  echo "$out"
}

# The model a registration's config names ("" when it names none or one without training runs).
model_of() {
  local model
  model=$(python3 -c 'import json, os, sys
c = json.load(open(sys.argv[1] + "/config.json"))
print(os.path.normpath(os.path.join(sys.argv[1], c["model"])) if isinstance(c.get("model"), str) else "")' "$1")
  [[ -f $model && -n $(traces_of "$model" training) ]] && echo "$model" || true
}

# row CAMPAIGN SET POLICY VARIANT VALIDATION.json: one line of results.csv.
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

RESULTS_HEADER=campaign,runs,policy,levels,mean_error_pct,baseline_mean_error_pct,p95_error_pct,baseline_p95_error_pct,measured_gain_pct,predicted_gain_pct,pi_low,pi_high,inside

# score_runs VARIANT...: every policy run of the registrations trained in turn (runs/, runs-2/,
# ddp-control/) against its own static run, with each variant's refit; rows to $work/results.csv.
score_runs() {
  local reg model set dir p variant policy extra fit
  for reg in traces/cpu/prereg*/; do
    reg=${reg%/}
    [[ -f $reg/config.json && -f $reg/runs/static/steps.csv ]] || continue
    model=$(model_of "$reg")
    [[ -n $model ]] || continue
    for set in runs runs-2 ddp-control; do
      [[ -f $reg/$set/static/steps.csv ]] || continue
      extra=()
      [[ $set == ddp-control ]] && extra=(--set training.data_parallel=ddp)
      for dir in "$reg/$set"/*/; do
        p=$(basename "$dir")
        [[ $p == static || $p == profile ]] && continue  # the baseline; a profile taken alongside
        for variant in "$@"; do
          rm -rf "$work/v"
          fit=$(refit "$model" "$variant")
          # Its notes (the config's sizes unused, the trace's instead) are no news here; its errors are.
          "$ddpsim" validate "$reg/config.json" ${extra[@]+"${extra[@]}"} --model "$fit" \
            --measured "$dir/steps.csv" --baseline "$reg/$set/static/steps.csv" --out "$work/v" >/dev/null \
            2>"$work/notes" || { cat "$work/notes" >&2; return 1; }
          policy=$(python3 -c 'import json, sys
v = json.load(open(sys.argv[1])); print(next(iter(v["policies"])))' "$work/v/validation.json")
          row "$(basename "$reg")" "$set" "$policy" "$variant" "$work/v/validation.json" >>"$work/results.csv"
        done
      done
    done
  done
}

# score_columns REGISTRATION VARIANT...: a registration of configs against each other (compare
# --against, its command in prediction.json): each column's gain as compare gives it with each
# variant's refit, against the gain each set of runs measured (validation-K/COLUMN).
score_columns() {
  local P=$1 variant model k c
  shift
  local against
  mapfile -t against < <(python3 -c 'import json, shlex, sys
words = shlex.split(json.load(open(sys.argv[1]))["command"])
for i, w in enumerate(words):
    if w == "--against": print(w); print(words[i + 1])' "$P/prediction.json")
  local columns  # the labels, as the command first names them
  mapfile -t columns < <(printf '%s\n' "${against[@]}" | grep -v '^--against$' | sed 's/:.*//' | awk '!seen[$0]++')
  for variant in "$@"; do
    model=$(refit "$P/model-2ranks-training.json" "$variant")
    grep -q '"model": "model-2ranks-training.json"' "$P/config.json" ||
      { echo "refits.sh: $P/config.json names another model than model-2ranks-training.json" >&2; return 1; }
    sed "s|\"model-2ranks-training.json\"|\"$model\"|" "$P/config.json" >"$work/config.json"
    rm -rf "$work/c"
    "$ddpsim" compare "$work/config.json" --replicates 20 --out "$work/c" ${against[@]+"${against[@]}"} >/dev/null
    for k in $(printf '%s\n' "$P"/validation-* | sed 's/.*validation-//' | sort -n); do
      for c in "${columns[@]}"; do
        python3 -c 'import json, sys
g = json.load(open(sys.argv[1]))["replicates"]["columns"][sys.argv[2]]["gain"]
v = json.load(open(sys.argv[3]))["registered"]["policies"][sys.argv[2]]
lo, hi = g["prediction_interval"]; m = v["measured_gain_pct"]
print(",".join([sys.argv[6], "pair-" + sys.argv[4], sys.argv[2], sys.argv[5], "", "", "", "",
      "%.2f" % m, "%.2f" % g["gain_pct"], "%.2f" % lo, "%.2f" % hi, "yes" if lo <= m <= hi else "no"]))' \
          "$work/c/summary.json" "$c" "$P/validation-$k/$c/validation.json" "$k" "$variant" "$(basename "$P")" \
          >>"$work/results.csv"
      done
    done
  done
}
