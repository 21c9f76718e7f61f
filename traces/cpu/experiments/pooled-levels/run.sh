#!/usr/bin/env bash
# Held-out test of calibrate --pool-run-levels: every committed CPU model fitted from pre-runs is
# fitted again from the same traces twice, alone (its own pre-runs' run-level spread) and pooled
# with the earlier registrations' models of the same machine and ranks (refitted alone), as a
# user who kept them would have; each measured run of its registrations is validated against
# both. Pooled models are strictly earlier: no run scored here informs its own term. Also
# measures the quantity the term stands for directly: how far repeated runs of one setting (the
# same seed, so the same shapes) sat apart. Writes results.csv, spreads.csv and repeats.csv
# beside this script, and summary.txt (summarize.py's figures, which README.md quotes).
#
#   traces/cpu/experiments/pooled-levels/run.sh    # needs build/release/ddpsim; about a minute
set -euo pipefail
shopt -s inherit_errexit  # a failed refit inside $(...) stops the script
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../refits.sh"  # from the repository root, with $ddpsim and $work

# Every registration's model once, in registration order, with its machine (the model's gpu up
# to any parenthesis: ddptrain's and PyTorch's runs on one VM's two ranks are one machine).
for reg in $(printf '%s\n' traces/cpu/prereg*/ | sort -V); do
  [[ -f $reg/config.json ]] || continue
  model=$(model_of "${reg%/}")
  if [[ -n $model ]]; then echo "$model"; fi
done | awk '!seen[$0]++' >"$work/models"
machine() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["gpu"].split(" (")[0])' "$1"; }

variant_args() {
  [[ $2 == pooled ]] || return 0
  local earlier=() m fit
  grep -qxF "$1" "$work/models" || { echo "run.sh: $1 is no registration's model" >&2; return 1; }
  while read -r m; do
    [[ $m == "$1" ]] && break
    [[ $(machine "$m") == "$(machine "$1")" ]] || continue
    fit=$(refit "$m" alone)
    # A model whose runs' levels agreed, or of one run, writes none to pool.
    python3 -c 'import json, sys; sys.exit(0 if "run_level" in json.load(open(sys.argv[1])) else 1)' "$fit" &&
      earlier+=("$fit")
  done <"$work/models"
  ((${#earlier[@]})) || return 0
  echo --pool-run-levels
  printf '%s\n' "${earlier[@]}"
}

echo "$RESULTS_HEADER" >"$work/results.csv"
score_runs alone pooled
score_columns traces/cpu/prereg20 alone pooled
score_columns traces/cpu/prereg21 alone pooled
score_columns traces/cpu/prereg22 alone pooled

echo "model,machine,runs,alone_pct,pooled_pct,pooled_df" >"$work/spreads.csv"
while read -r m; do
  python3 -c 'import csv, json, sys
a, p = (json.load(open(f)).get("run_level", {}) for f in sys.argv[2:4])
pooled = p.get("pooled", [])
df = p.get("df", "")
csv.writer(sys.stdout, lineterminator="\n").writerow([sys.argv[1], sys.argv[4], len(a.get("levels", {})),
    "%.1f" % (100 * a.get("spread", 0)), "%.1f" % (100 * p.get("spread", 0)), df if pooled else ""])' \
    "$m" "$(refit "$m" alone)" "$(refit "$m" pooled)" "$(machine "$m")" >>"$work/spreads.csv"
done <"$work/models"

# Repeated runs of one setting: each registration's runs of the same policy, seed, batch and
# data parallelism in two directories; the ratio of their mean step over the steps both timed.
python3 - "$work/repeats.csv" <<'PY'
import csv, glob, itertools, math, os, sys
def load(path):
    with open(path) as f:
        lines = f.readlines()
    meta = dict(l[1:].strip().split("=", 1) for l in lines if l.startswith("#") and "=" in l)
    steps = {}
    for r in csv.DictReader(l for l in lines if not l.startswith("#")):
        if int(r["step"]) > 0:
            steps[int(r["step"])] = max(steps.get(int(r["step"]), 0.0), float(r["step_ms"]))
    return meta, steps
with open(sys.argv[1], "w") as out:
    out.write("campaign,first,second,steps,mean_ratio\n")
    for reg in sorted(glob.glob("traces/cpu/prereg*"), key=lambda p: int(p.rsplit("prereg", 1)[1] or 1)):
        runs = {}
        for path in sorted(glob.glob(reg + "/*/*/steps.csv")):
            if "/pre-run" in path or "/controls/" in path:
                continue
            meta, steps = load(path)
            key = tuple(meta.get(k) for k in ("policy", "seed", "global_batch", "model", "data_parallel", "world_size"))
            runs.setdefault(key, []).append((os.path.relpath(os.path.dirname(path), reg), steps))
        for lst in runs.values():
            for (a, sa), (b, sb) in itertools.combinations(lst, 2):
                both = sorted(set(sa) & set(sb))
                ratio = sum(sb[s] for s in both) / sum(sa[s] for s in both)
                out.write(f"{os.path.basename(reg)},{a},{b},{len(both)},{ratio:.4f}\n")
PY
cp "$work"/{results,spreads,repeats}.csv "$here/"
python3 "$here/summarize.py" | tee "$here/summary.txt"
echo "wrote $here/results.csv, spreads.csv, repeats.csv and summary.txt"
