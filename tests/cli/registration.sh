# compare --register, validate --registered and scorecard: a registration pins its config and
# model by hash and every gain's interval; scoring refuses another setting (naming the key) and
# changed inputs; the committed scorecard is what the committed traces give, byte for byte.
source "$(dirname "$0")/lib.sh"
cd "$SRC" || exit 1
prereg=traces/cpu/prereg
runs=$prereg/runs
mkdir -p "$WORK/reg"
cp "$prereg/config.json" "$prereg/model-1core.json" "$WORK/reg/"

expect_exit 2 "needs the seeds' range: add --replicates" "$DDPSIM" compare "$WORK/reg/config.json" \
  --register "$WORK/reg/p.json"
expect_exit 2 "gains over the first policy" "$DDPSIM" compare "$WORK/reg/config.json" --policies static \
  --replicates 3 --register "$WORK/reg/p.json"
expect_ok "$DDPSIM" compare "$WORK/reg/config.json" --replicates 3 --register "$WORK/reg/p.json"
grep -q '"format": "ddpsim-registered/1"' "$WORK/reg/p.json" || fail "no format key in the registration"
grep -q '"file": "model-1core.json"' "$WORK/reg/p.json" || fail "the model is not named beside the registration"
grep -q '"prediction_interval"' "$WORK/reg/p.json" || fail "no prediction interval registered"
cp "$WORK/reg/p.json" "$WORK/reg/first.json"
expect_ok "$DDPSIM" compare "$WORK/reg/config.json" --replicates 3 --register "$WORK/reg/p.json"
cmp -s "$WORK/reg/p.json" "$WORK/reg/first.json" || fail "two registrations of one prediction differ"

expect_ok "$DDPSIM" validate --registered "$WORK/reg/p.json" --measured "$runs/minmax-cost-tokens/steps.csv" \
  --baseline "$runs/static/steps.csv" --out "$WORK/val"
grep -q "^the registered prediction" "$WORK/out" || fail "validate --registered printed no score"
grep -Eq '^  minmax:cost=tokens: gain registered [-+][0-9.]+% \(seeds \[.*prediction \[' "$WORK/out" ||
  fail "the registered gain line lacks its intervals: $(grep 'gain registered' "$WORK/out")"
grep -q '"measured_in_prediction_interval"' "$WORK/val/validation.json" || fail "validation.json has no score"
# Each mean step is registered with its interval and scored against it.
grep -q '"prediction_interval_ms"' "$WORK/reg/p.json" || fail "no step time's interval registered"
grep -Eq '^  static \(baseline\): mean [0-9.]+ ms registered \[[0-9.]+, [0-9.]+\], [0-9.]+ measured \([-+][0-9.]+%\): (inside|OUTSIDE) the prediction interval; P95 / mean [0-9.]+ registered, [0-9.]+ measured \([-+][0-9.]+%\)$' "$WORK/out" ||
  fail "the registered mean step is not scored against its interval: $(grep 'baseline): mean' "$WORK/out")"
grep -q '"registered_mean_pi95"' "$WORK/val/validation.json" || fail "validation.json has no step score"
# The tail, P95 over mean, scored level-free: the registered ratio against the run's over every step.
python3 - "$WORK/reg/p.json" "$WORK/val/validation.json" <<'PY' || fail "the registered tail is not scored"
import json, sys
reg, val = (json.load(open(p)) for p in sys.argv[1:])
for policy, score in [("static", val["registered"]["baseline"])] + list(val["registered"]["policies"].items()):
    want = reg["predicted"]["policies"][policy]
    ratio = want["p95_max_step_ms"]["mean"] / want["mean_max_step_ms"]["mean"]
    assert abs(score["registered_p95_over_mean"] - ratio) < 1e-9, (policy, score)
    measured = score["measured_p95_over_mean"]
    assert 1 < measured < 3, (policy, measured)
    assert abs(score["tail_error_pct"] - 100 * (ratio / measured - 1)) < 1e-9, (policy, score)
PY

# Another setting, changed inputs, or the user's own model beside a registration: refused.
expect_ok "$DDPSIM" compare "$WORK/reg/config.json" --set training.global_batch=48 --replicates 3 \
  --register "$WORK/reg/b48.json"
expect_exit 1 "training.global_batch is 96, the registered prediction's .* 48" "$DDPSIM" validate \
  --registered "$WORK/reg/b48.json" --measured "$runs/kk/steps.csv" --baseline "$runs/static/steps.csv"
expect_ok "$DDPSIM" compare "$WORK/reg/config.json" --steps 100 --replicates 3 --register "$WORK/reg/s100.json"
expect_exit 1 "training.steps is 150, the registered prediction's .* 100" "$DDPSIM" validate \
  --registered "$WORK/reg/s100.json" --measured "$runs/kk/steps.csv" --baseline "$runs/static/steps.csv"
expect_exit 1 "the baseline policy is kk, the registered prediction's .* static" "$DDPSIM" validate \
  --registered "$WORK/reg/p.json" --measured "$runs/minmax-cost-tokens/steps.csv" --baseline "$runs/kk/steps.csv"
expect_exit 2 "--model beside --registered" "$DDPSIM" validate --registered "$WORK/reg/p.json" \
  --measured "$runs/kk/steps.csv" --baseline "$runs/static/steps.csv" --model h100-distilbert
expect_exit 2 "give --baseline" "$DDPSIM" validate --registered "$WORK/reg/p.json" --measured "$runs/kk/steps.csv"
# A registration edited by hand or cut short: refused before any report, naming its key.
edited() {  # edited NAME PYTHON-STATEMENT-ON-d: a copy of p.json beside it, changed
  python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(d, open(sys.argv[2], "w"))' "$WORK/reg/p.json" "$WORK/reg/$1.json" "$2"
}
gain='d["predicted"]["policies"]["minmax:cost=tokens"]["gain"]'
edited no-gain "del $gain[\"gain_pct\"]"
edited text-gain "$gain[\"gain_pct\"] = \"high\""
edited far-gain "$gain[\"gain_pct\"] = 50"
edited no-static 'del d["predicted"]["policies"]["static"]'
edited set-number 'd["config"]["set"] = [5]'
edited other-base 'd["predicted"]["baseline"] = "kk"'
edited per-sample "$gain[\"per_sample\"] = True"
edited step-one 'd["predicted"]["policies"]["static"]["step"]["prediction_interval_ms"] = [1]'
edited p95-text 'd["predicted"]["policies"]["kk"]["p95_max_step_ms"]["mean"] = "long"'
expect_ok "$DDPSIM" validate --registered "$WORK/reg/per-sample.json" --measured "$runs/minmax-cost-tokens/steps.csv" \
  --baseline "$runs/static/steps.csv"
grep -q 'minmax:cost=tokens: gain registered .*NOT the same quantity' "$WORK/out" ||
  fail "a gain registered per sample and measured per step is scored without a word: $(grep 'gain registered' "$WORK/out")"
for case in 'no-gain:key predicted.policies."minmax:cost=tokens".gain.gain_pct is missing' \
  'text-gain:key predicted.policies."minmax:cost=tokens".gain.gain_pct is string: expected a finite number' \
  'far-gain:gain_pct is 50, outside its own prediction_interval: the file was edited since' \
  'no-static:key predicted.policies.static is missing' 'set-number:key config.set\[0\] is number 5: expected a string' \
  'other-base:key predicted.baseline is "kk", not the first registered policy "static"' \
  'step-one:key predicted.policies.static.step.prediction_interval_ms: expected \[low, high\]' \
  'p95-text:key predicted.policies.kk.p95_max_step_ms.mean is string: expected a finite number'; do
  expect_exit 1 "${case#*:}" "$DDPSIM" validate --registered "$WORK/reg/${case%%:*}.json" \
    --measured "$runs/minmax-cost-tokens/steps.csv" --baseline "$runs/static/steps.csv"
  [[ ! -s $WORK/out ]] || fail "${case%%:*}: a report was printed before the refusal: $(head -2 "$WORK/out")"
done
# The baseline's own run has no gain to score.
sed '1s/$/ /' "$runs/static/steps.csv" >"$WORK/static-copy.csv"
expect_exit 1 'static-copy.csv: the policy is static, the registered baseline' "$DDPSIM" validate \
  --registered "$WORK/reg/p.json" --measured "$WORK/static-copy.csv" --baseline "$runs/static/steps.csv"
[[ ! -s $WORK/out ]] || fail "the baseline scored as measured printed a report first: $(head -2 "$WORK/out")"
echo " " >>"$WORK/reg/model-1core.json"
expect_exit 1 "model .*model-1core.json has changed since the prediction was registered" "$DDPSIM" validate \
  --registered "$WORK/reg/p.json" --measured "$runs/kk/steps.csv" --baseline "$runs/static/steps.csv"
expect_exit 1 "not a registered prediction" "$DDPSIM" validate --registered "$prereg/config.json" \
  --measured "$runs/kk/steps.csv" --baseline "$runs/static/steps.csv"

# The committed scorecard, regenerated from the committed traces.
expect_ok "$DDPSIM" scorecard traces
diff "$WORK/out" docs/scorecard.md >"$WORK/diff" || fail "docs/scorecard.md is not what ddpsim scorecard traces gives: $(head -20 "$WORK/diff")"
grep -Eq "^Registered P95 / mean of the max step against the measured .*: within 5% in [0-9]+ of [0-9]+, median" "$WORK/out" ||
  fail "the scorecard does not count the registered tails"
# A registration read with the regime test since corrected says both readings.
grep -q "^| cpu/prereg8/validation | verl:max_token_len=128 | compute-bound (now one regime) |" "$WORK/out" ||
  fail "the scorecard should show prereg8's registered regime beside today's reading"
grep -q "^| cpu/prereg2/validation | sorted | one regime |" "$WORK/out" ||
  fail "a registered regime the validation reads alike should stand alone"
expect_exit 1 "not a folder" "$DDPSIM" scorecard "$WORK/none"
expect_exit 2 "give at least one folder" "$DDPSIM" scorecard
finish
