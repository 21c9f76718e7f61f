#!/usr/bin/env bash
# The "untrained batch size" term against the committed registrations whose columns train a
# batch size their pre-runs never held (prereg20 to 22: pre-runs at B = 16 only): each model
# fitted again by today's calibrate, as its README's command did, and each column's gain
# predicted with the term and without it (the same model with noise.steps_samples taken out).
# Writes results.csv (one row a measured run: the measured gain and both intervals) and
# summary.txt. Usage: traces/cpu/experiments/untrained-sizes/run.sh (after building ddpsim).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../refits.sh"  # the repository root, $ddpsim and $work

# predict PREREG NAME COLUMNS POOLED...: refit, then compare with the term and without.
predict() {
  local p=$1 name=$2 columns=$3 P=traces/cpu/prereg$1
  shift 3
  local pool=()
  (($# == 0)) || pool=(--pool-run-levels "$@")
  "$ddpsim" calibrate $P/profile/profile.csv --training $P/pre-run-{a,b}/{static,sorted}/steps.csv \
    --base $P/profile/layout.json --name "$name" --gpu "CPU: AMD EPYC, two ranks of one core each (PyTorch, Gloo)" \
    ${pool[@]+"${pool[@]}"} --out "$work/$p-with.json" >/dev/null 2>&1
  python3 -c 'import json, sys
m = json.load(open(sys.argv[1])); del m["noise"]["steps_samples"]; json.dump(m, open(sys.argv[2], "w"))' \
    "$work/$p-with.json" "$work/$p-without.json"
  local against=()
  for c in $columns; do against+=(--against "$c:training.global_batch=${c#b}"); done
  for v in with without; do
    sed "s|\"model-2ranks-training.json\"|\"$work/$p-$v.json\"|" $P/config.json >"$work/$p-config-$v.json"
    "$ddpsim" compare "$work/$p-config-$v.json" --replicates 20 "${against[@]}" --out "$work/$p-$v" >/dev/null 2>&1
  done
}

predict 20 cpu-llama-11m-tied-2ranks-trained "b32"
predict 21 cpu-llama-18m-2ranks-trained "b24 b32"
predict 22 cpu-llama-18m-2ranks-trained "b8 b32" $(for p in 9 10 11 12 14 16 18 20 21; do echo traces/cpu/prereg$p/model-2ranks-training.json; done)

python3 - "$work" "$here" <<'PY'
import glob, json, math, statistics, sys
work, here = sys.argv[1:]
# The size terms of a gain, below and above the sizes trained, in quadrature as the interval adds them.
untrained = lambda g: math.hypot(*(g["terms_half_width_pp"].get(f"untrained batch size ({side})", 0)
                                   for side in ("below", "above")))
rows, lines = [], []
for p, columns in ((20, ["b32"]), (21, ["b24", "b32"]), (22, ["b8", "b32"])):
    pred = {v: json.load(open(f"{work}/{p}-{v}/summary.json"))["replicates"]["columns"] for v in ("with", "without")}
    for c in columns:
        w, wo = pred["with"][c]["gain"], pred["without"][c]["gain"]
        for f in sorted(glob.glob(f"traces/cpu/prereg{p}/validation-*/{c}/validation.json")):
            got = json.load(open(f))["registered"]["policies"][c]["measured_gain_pct"]
            inside = lambda g: g["prediction_interval"][0] <= got <= g["prediction_interval"][1]
            rows.append([f"prereg{p}", c, f.split("/")[3], f"{got:.2f}", f"{w['gain_pct']:.2f}",
                         *(f"{x:.1f}" for x in w["prediction_interval"]), f"{untrained(w):.2f}",
                         *(f"{x:.1f}" for x in wo["prediction_interval"]), int(inside(w)), int(inside(wo))])
head = ["registration", "column", "set", "measured_gain_pct", "predicted_gain_pct", "with_lo", "with_hi",
        "term_pp", "without_lo", "without_hi", "inside_with", "inside_without"]
with open(f"{here}/results.csv", "w") as out:
    out.write(",".join(head) + "\n")
    for r in rows: out.write(",".join(map(str, r)) + "\n")
n = len(rows)
width = lambda i, j: sorted(float(r[j]) - float(r[i]) for r in rows)
with open(f"{here}/summary.txt", "w") as out:
    out.write(f"{n} measured gains of untrained columns (prereg20-22)\n")
    out.write(f"inside with the term: {sum(r[10] for r in rows)}, without: {sum(r[11] for r in rows)}\n")
    for name, (i, j) in (("with", (5, 6)), ("without", (8, 9))):
        w = width(i, j)
        out.write(f"interval width {name}: median {statistics.median(w):.1f} pp, from {w[0]:.1f} to {w[-1]:.1f}\n")
print(open(f"{here}/summary.txt").read(), end="")
PY
