# calibrate --pool-run-levels: an earlier model's run levels pooled with the pre-run's, each about
# its own model's mean, into the spread the model writes and every gain's interval then carries.
source "$(dirname "$0")/lib.sh"
pre=$SRC/traces/cpu/prereg4/pre-run
earlier=$SRC/traces/cpu/prereg5/model-1core-training.json
xeon="CPU: Intel(R) Xeon(R) Processor, one core"
calibrate=("$DDPSIM" calibrate "$SRC/traces/cpu/prereg3/profile-1core/steps.csv" --base "$SRC/traces/cpu/layout.json"
  --training "$pre/static/steps.csv" "$pre/minmax-cost-tokens/steps.csv" "$pre/sorted/steps.csv")

expect_ok "${calibrate[@]}" --gpu "$xeon" --pool-run-levels "$earlier" --out "$WORK/pooled.json"
grep -q "pooled with 6 levels of 1 earlier model(s) (.*prereg5/model-1core-training.json 6), each about its own mean, 7 degrees of freedom; these runs alone gave 15.3%" \
  "$WORK/out" || fail "the run-level line does not say what was pooled: $(grep 'run level' "$WORK/out")"
[[ -s $WORK/err ]] && fail "a model of the same machine pooled with a warning: $(cat "$WORK/err")"
python3 - "$WORK/pooled.json" "$earlier" <<'PY' || fail "the pooled spread is not the levels' pooled deviations"
import json, math, sys
model, earlier = (json.load(open(f)) for f in sys.argv[1:])
r = model["run_level"]
squares, df = 0.0, 0
for levels in (r["levels"].values(), earlier["run_level"]["levels"].values()):
    logs = [math.log(x) for x in levels]
    centre = sum(logs) / len(logs)
    squares += sum((x - centre) ** 2 for x in logs)
    df += len(logs) - 1
want = math.expm1(1.96 * math.sqrt(2) * math.sqrt(squares / df))
assert abs(r["spread"] - want) < 5e-4, (r["spread"], want)
assert r["alone"] == 0.1527 or abs(r["alone"] - 0.153) < 5e-4, r["alone"]
assert r["pooled"] == [{"model": sys.argv[2], "levels": 6}], r["pooled"]
assert "pooled with 6 levels of 1 earlier model(s)" in r["source"], r["source"]
PY
# Another machine's model is pooled as asked, with a warning naming both.
expect_ok "${calibrate[@]}" --gpu "CPU: another" --pool-run-levels "$earlier" --out "$WORK/other.json"
grep -q "warning: .*prereg5/model-1core-training.json was calibrated on \"$xeon\" and this model on \"CPU: another\"" \
  "$WORK/err" || fail "no warning for another machine's levels: $(cat "$WORK/err")"

# Refused, with no model left behind: runs counted twice, a model without levels, no runs.
expect_exit 1 "model-run-levels.json: its training run .*pre-run/static/steps.csv is this calibration's --training .* \(the same bytes\)" \
  "${calibrate[@]}" --pool-run-levels "$SRC/traces/cpu/prereg4/posthoc/model-run-levels.json" --out "$WORK/twice.json"
expect_exit 1 "model-1core-training.json: no run_level: --pool-run-levels takes models" \
  "${calibrate[@]}" --pool-run-levels "$SRC/traces/cpu/prereg4/model-1core-training.json" --out "$WORK/none.json"
expect_exit 2 "given twice to --pool-run-levels" \
  "${calibrate[@]}" --pool-run-levels "$earlier" "$earlier" --out "$WORK/again.json"
expect_exit 2 "--pool-run-levels: expected the earlier models' JSON files after it, got --out" \
  "${calibrate[@]}" --pool-run-levels --out "$WORK/empty.json"
expect_exit 2 "--pool-run-levels adds to the --training runs' run-level spread" "$DDPSIM" calibrate \
  "$SRC/traces/cpu/prereg3/profile-1core/steps.csv" --pool-run-levels "$earlier" --out "$WORK/alone.json"
for f in twice none again empty alone; do [[ ! -e $WORK/$f.json ]] || fail "a refused calibrate left $f.json"; done
finish
