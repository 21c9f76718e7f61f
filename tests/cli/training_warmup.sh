# calibrate --training leaves each process's slow leading steps out of the runs' spread: the
# thirty-fifth registration's pre-runs ran step 1 (and one of them steps 1 to 3) at 2-3.4× their
# settled compute. --training-warmup 0 keeps every step from step 1, as the registered model was
# fitted.
source "$(dirname "$0")/lib.sh"
P=traces/cpu/prereg35
runs() { echo $P/pre-run-$1/{static,minmax-cost-workload}/steps.csv; }
calibrate=("$DDPSIM" calibrate $P/profile/profile.csv --training $(runs a) $(runs b) $(runs c) $(runs d)
  --base $P/profile/layout.json --name cpu-llama-11m-tied-packed-2ranks-amd17-interleaved
  --gpu "CPU: AMD EPYC (family 25, model 17), two ranks of one core each (PyTorch, Gloo, OpenBLAS Cooperlake kernels, its pick for this Zen 4, freed memory kept)")
cd "$SRC" || exit 1  # the model names its traces as given: relative, as the registered one does

expect_ok "${calibrate[@]}" --out "$WORK/auto.json"
grep -qE "warm-up: left out step 1 of $P/pre-run-a/static/steps.csv, $P/pre-run-a/minmax-cost-workload/steps.csv \(the slowest ×2\.[0-9]+" "$WORK/out" ||
  fail "pre-run a's slow step 1 not named: $(grep warm-up "$WORK/out")"
grep -qE "steps 1 to 3 of $P/pre-run-d/static/steps.csv" "$WORK/out" || fail "pre-run d's steps 1 to 3 not named"
grep -q "300 steps × 2 ranks (from step 1, each process's slow leading steps left out)" "$WORK/out" ||
  fail "the fit's source does not count the steps kept: $(grep 'training  ' "$WORK/out" | cut -c1-120)"
python3 - "$WORK/auto.json" $P/model-2ranks-training.json <<'PY' || fail "the warm-up did not leave the model's steps"
import json, sys
auto, every = (json.load(open(p)) for p in sys.argv[1:])
assert len(auto["noise"]["steps"]) == 300 and len(every["noise"]["steps"]) == 312
mean = lambda m: sum(map(sum, m["noise"]["steps"])) / (2 * len(m["noise"]["steps"]))
assert mean(auto) < 0.98 * mean(every), (mean(auto), mean(every))
PY

# The registered model took its spreads at the normal's 1.96; they are Student's t's now (over 4
# and 3 degrees of freedom): all else is written again as it was.
expect_ok "${calibrate[@]}" --training-warmup 0 --out "$WORK/every.json"
python3 - "$WORK/every.json" $P/model-2ranks-training.json <<'PY' || fail "--training-warmup 0 did not write the registered model"
import json, math, sys
now, registered = (json.load(open(p)) for p in sys.argv[1:])
a, b = now.pop("run_level"), registered.pop("run_level")
assert now == registered
assert a["levels"] == b["levels"]
for key, t in (("spread", 2.7764), ("process_spread", 3.1824)):
    assert abs(math.log1p(a[key]) / math.log1p(b[key]) - t / 1.96) < 2e-3, (key, a[key], b[key])
PY
grep -q "warm-up" "$WORK/out" && fail "--training-warmup 0 reported a warm-up"

expect_ok "$DDPSIM" calibrate $P/profile/profile.csv --training $(runs a) --training-warmup 2 --out "$WORK/two.json"
grep -q "warm-up: left out 2 step(s) after step 0 of every process, as --training-warmup asked" "$WORK/out" ||
  fail "a fixed warm-up not reported"
grep -q "74 steps × 2 ranks" "$WORK/out" || fail "--training-warmup 2 did not leave 74 of 78 steps (39 of each policy)"

expect_exit 2 '--training-warmup is a number of steps ≥ 0 or auto, got "x"' \
  "$DDPSIM" calibrate $P/profile/profile.csv --training $(runs a) --training-warmup x --out "$WORK/x.json"
expect_exit 2 '--training-warmup is a number of steps ≥ 0 or auto, got "-1"' \
  "$DDPSIM" calibrate $P/profile/profile.csv --training $(runs a) --training-warmup=-1 --out "$WORK/negative.json"
expect_exit 2 "--training-warmup describes the --training runs' fit" \
  "$DDPSIM" calibrate $P/profile/profile.csv --training-warmup 2 --out "$WORK/alone.json"
expect_exit 1 "pre-run-a/static/steps.csv: no step after step 0 and the 40 --training-warmup leaves out .*give a smaller one" \
  "$DDPSIM" calibrate $P/profile/profile.csv --training $P/pre-run-a/static/steps.csv --training-warmup 40 --out "$WORK/all.json"
for f in x negative alone all; do [[ ! -e $WORK/$f.json ]] || fail "a refused calibrate left $f.json"; done
finish
