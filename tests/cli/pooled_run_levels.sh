# calibrate --pool-run-levels: an earlier model's run levels pooled with the pre-run's, each about
# its own model's mean, into the spread the model writes and every gain's interval then carries.
source "$(dirname "$0")/lib.sh"
pre=$SRC/traces/cpu/prereg4/pre-run
earlier=$SRC/traces/cpu/prereg5/model-1core-training.json
xeon="CPU: Intel(R) Xeon(R) Processor, one core"
calibrate=("$DDPSIM" calibrate "$SRC/traces/cpu/prereg3/profile-1core/steps.csv" --base "$SRC/traces/cpu/layout.json"
  --training "$pre/static/steps.csv" "$pre/minmax-cost-tokens/steps.csv" "$pre/sorted/steps.csv")

# prereg5's model was fitted with one level for every shape: so is this one, so no warning.
expect_ok "${calibrate[@]}" --gpu "$xeon" --training-levels one --pool-run-levels "$earlier" --out "$WORK/pooled.json"
grep -q "pooled with 6 levels of 1 earlier model(s) (.*prereg5/model-1core-training.json 6), each about its session's mean within its model, 6 degrees of freedom in all (2 here, 4 pooled); these runs alone gave 35.9%" \
  "$WORK/out" || fail "the run-level line does not say what was pooled: $(grep 'run level' "$WORK/out")"
[[ -s $WORK/err ]] && fail "a model of the same machine and levels pooled with a warning: $(cat "$WORK/err")"
# The sessions by the pre-runs' folders (pre-run, pre-run-a, pre-run-b: a process each), not
# from the metadata ddpsim reads them from.
python3 - "$WORK/pooled.json" "$earlier" <<'PY' || fail "the pooled spread is not the levels' deviations about their sessions"
import json, math, os, sys
model, earlier = (json.load(open(f)) for f in sys.argv[1:])
r = model["run_level"]
squares, df = 0.0, 0
for levels in (r["levels"], earlier["run_level"]["levels"]):
    sessions = {}
    for run, level in levels.items():
        sessions.setdefault(os.path.dirname(os.path.dirname(run)), []).append(math.log(level))
    for logs in sessions.values():
        centre = sum(logs) / len(logs)
        squares += sum((x - centre) ** 2 for x in logs)
        df += len(logs) - 1
assert df == r["df"] == 6, (df, r["df"])
t = {2: 4.3027, 6: 2.4469}  # Student's t's 97.5% quantiles (a printed table's)
want = math.expm1(t[6] * math.sqrt(2) * math.sqrt(squares / df))
assert abs(r["spread"] - want) < 5e-4, (r["spread"], want)
assert abs(r["alone"] - 0.359) < 5e-4, r["alone"]
assert "t = 2.447, Student's t over 6 degrees of freedom" in r["source"], r["source"]
assert r["pooled"] == [{"model": sys.argv[2], "levels": 6}], r["pooled"]
assert "6 degrees of freedom in all (2 here, 4 pooled)" in r["source"], r["source"]
PY
# The model loads where a prediction uses it, and its term is the pooled spread.
printf '{"training": {"world_size": 1, "global_batch": 8, "steps": 20}, "policies": ["static", "sorted"], "model": "%s"}\n' \
  "$WORK/pooled.json" >"$WORK/config.json"
expect_ok "$DDPSIM" compare "$WORK/config.json" --replicates 3 --out "$WORK/compare"
grep -q "run level: .*6 degrees of freedom in all (2 here, 4 pooled)" "$WORK/out" ||
  fail "compare does not name the pooled run level's source: $(grep 'run level' "$WORK/out")"
# One run of its own: the earlier model's spread is the term, and the report says this run adds none.
expect_ok "$DDPSIM" calibrate "$SRC/traces/cpu/prereg3/profile-1core/steps.csv" --base "$SRC/traces/cpu/layout.json" \
  --training "$pre/static/steps.csv" --gpu "$xeon" --training-levels one --pool-run-levels "$earlier" --out "$WORK/one.json"
grep -q "4 degrees of freedom in all (0 here, 4 pooled); these runs alone give no spread" "$WORK/out" ||
  fail "one run with a pooled model: $(grep 'run level' "$WORK/out")"
python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["run_level"]; assert r["df"] == 4 and "alone" not in r, r' \
  "$WORK/one.json" || fail "one run's model does not carry the pooled spread alone"
# Levels read another way (prereg5's one level, this model's by tokens): pooled, with a warning.
expect_ok "${calibrate[@]}" --gpu "$xeon" --pool-run-levels "$earlier" --out "$WORK/tokens.json"
grep -q "warning: the run levels of .*prereg5/model-1core-training.json were read about one level for every shape, this model's about levels by shape" \
  "$WORK/err" || fail "no warning for levels read another way: $(cat "$WORK/err")"
# Another machine's model is pooled as asked, with a warning naming both.
expect_ok "${calibrate[@]}" --gpu "CPU: another" --training-levels one --pool-run-levels "$earlier" --out "$WORK/other.json"
grep -q "warning: .*prereg5/model-1core-training.json calibrated on \"$xeon\" and this model on \"CPU: another\"" \
  "$WORK/err" || fail "no warning for another machine's levels: $(cat "$WORK/err")"

# Refused, with no model left behind: runs counted twice, a model without levels, no runs.
expect_exit 1 "model-run-levels.json: its training run .*pre-run/.*steps.csv has the same bytes as this calibration's --training " \
  "${calibrate[@]}" --pool-run-levels "$SRC/traces/cpu/prereg4/posthoc/model-run-levels.json" --out "$WORK/twice.json"
expect_exit 1 "model-1core-training.json: no run_level: --pool-run-levels takes models" \
  "${calibrate[@]}" --pool-run-levels "$SRC/traces/cpu/prereg4/model-1core-training.json" --out "$WORK/none.json"
expect_exit 2 "given twice to --pool-run-levels" \
  "${calibrate[@]}" --pool-run-levels "$earlier" "$earlier" --out "$WORK/again.json"
expect_exit 2 "--pool-run-levels: expected the earlier models' JSON files after it, got --out" \
  "${calibrate[@]}" --pool-run-levels --out "$WORK/empty.json"
expect_exit 2 "--pool-run-levels adds to the --training runs' run-level spread" "$DDPSIM" calibrate \
  "$SRC/traces/cpu/prereg3/profile-1core/steps.csv" --pool-run-levels "$earlier" --out "$WORK/alone.json"
# The output may not be a pooled model: it would replace the levels it pools.
cp "$earlier" "$WORK/earlier.json"
expect_exit 2 "earlier.json" "${calibrate[@]}" --gpu "$xeon" --training-levels one --pool-run-levels "$WORK/earlier.json" \
  --out "$WORK/earlier.json"
cmp -s "$earlier" "$WORK/earlier.json" || fail "calibrate overwrote the model it pooled"
# A profile after the list is taken into it: said so, not "give a trace".
expect_exit 2 "profile-1core/steps.csv: a trace given to --pool-run-levels, which takes models" "$DDPSIM" calibrate \
  --base "$SRC/traces/cpu/layout.json" --training "$pre/static/steps.csv" --pool-run-levels "$earlier" \
  "$SRC/traces/cpu/prereg3/profile-1core/steps.csv" --out "$WORK/after.json"
for f in twice none again empty alone after; do [[ ! -e $WORK/$f.json ]] || fail "a refused calibrate left $f.json"; done
finish
