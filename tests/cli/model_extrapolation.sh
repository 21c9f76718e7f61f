# A prediction beyond a calibrated model's measured range says so: compare from the config
# (the registered GPU setting reaches L = 256 on a model measured to L = 66), and validate
# from the trace's own shapes, with the share of rank-steps in the JSON; a model fitted on
# those shapes says nothing. A run of another model than the one the model was calibrated on
# is named too.
source "$(dirname "$0")/lib.sh"
prereg=$SRC/traces/h100/prereg
link=(--set platform.link_GBps=50 --set platform.latency_us=5 --set platform.host_GBps=0 --set training.overlap=false)

expect_ok "$DDPSIM" compare "$prereg/config.json" --steps 5 --out "$WORK/compare"
grep -q "^note: model h100-distilbert-measured was measured up to b = 48, L = 66; a rank's even share of the batch at the data's longest length, b = 48, L = 256, lies beyond (a policy" \
  "$WORK/err" || fail "compare does not say that the registered setting extrapolates its model"
python3 - "$WORK/compare/summary.json" <<'PY' || fail "summary.json's provenance lacks the extrapolation note"
import json, sys
assert any("was measured up to b = 48, L = 66" in n for n in json.load(open(sys.argv[1]))["provenance"]["notes"])
PY
# A sweep's cells say it once the workers have loaded their data: one line for the cells whose
# notes differ only in their shapes, each shape's figure as its range.
printf '{"base": "%s", "set": {"training.steps": 3}, "policies": ["static"], "axes": {"training.global_batch": [96, 192, 128]}}\n' \
  "$prereg/config.json" >"$WORK/sweep.json"
expect_ok "$DDPSIM" sweep "$WORK/sweep.json" --out "$WORK/sweep" --jobs 1
[[ $(grep -c "^note: model h100-distilbert-measured was measured up to" "$WORK/err") == 1 ]] &&
  grep -q "^note: model h100-distilbert-measured was measured up to b = 48, L = 66; .*, b = 24 to 48, L = 256, .* (every cell)$" \
    "$WORK/err" || fail "the sweep does not say once that its cells extrapolate their model: $(cat "$WORK/err")"
python3 - "$WORK"/sweep/cells/*.json <<'PY' || fail "a sweep cell's provenance lacks the extrapolation note"
import json, sys
for path in sys.argv[1:]:
    assert any("was measured up to b = 48, L = 66" in n for n in json.load(open(path))["provenance"]["notes"]), path
PY
grep '^note:' "$WORK/err" >"$WORK/first-notes"  # the notes alone: a sanitizer warns of its workers too
expect_ok "$DDPSIM" sweep "$WORK/sweep.json" --out "$WORK/sweep"  # every cell reused: the same notes
grep '^note:' "$WORK/err" | diff "$WORK/first-notes" - >/dev/null || fail "reused cells say other notes: $(cat "$WORK/err")"
cell=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["cells"][1]["cell"])' "$WORK/sweep/sweep.json") ||
  fail "sweep.json names no cell 1"
python3 - "$WORK/sweep/cells/$cell.json" <<'PY' || fail "cell 1's file is not where sweep.json says"
import json, sys
doc = json.load(open(sys.argv[1]))
del doc["provenance"]  # as an earlier ddpsim wrote it
json.dump(doc, open(sys.argv[1], "w"))
PY
expect_ok "$DDPSIM" sweep "$WORK/sweep.json" --out "$WORK/sweep"
grep -q "^note: cells written by an earlier ddpsim keep no notes; remove their files to run them again (cell 1)$" \
  "$WORK/err" || fail "a cell without provenance is not named: $(cat "$WORK/err")"
expect_ok "$DDPSIM" compare --steps 5
grep -q "measured up to" "$WORK/out" "$WORK/err" && fail "the default job (an analytic model) carries an extrapolation note"

expect_ok "$DDPSIM" validate --measured "$prereg/runs/kk/steps.csv" --baseline "$prereg/runs/static/steps.csv" \
  --model "$SRC/models/h100-distilbert-measured.json" "${link[@]}" --out "$WORK/registered"
grep -q "lie beyond.*(100.0% of the measured rank-steps)" "$WORK/out" || fail "validate gives no extrapolation note"
grep -q '"model_extrapolated_rank_steps_pct": 100.0' "$WORK/registered/validation.json" ||
  fail "validation.json lacks the extrapolated share"
grep -q '"model_extrapolation": "model h100-distilbert-measured was measured up to' "$WORK/registered/validation.json" ||
  fail "validation.json lacks the extrapolation note"
expect_ok "$DDPSIM" replay "$prereg/runs/kk/steps.csv" --model "$SRC/models/h100-distilbert-measured.json" "${link[@]}" \
  --out "$WORK/replay"
grep -q "^note: model h100-distilbert-measured was measured up to.*(100.0% of the measured rank-steps)" "$WORK/out" ||
  fail "replay gives no extrapolation note"
python3 - "$WORK/replay/summary.json" <<'PY' || fail "replay's summary.json lacks the extrapolation note in its provenance"
import json, sys
assert any("(100.0% of the measured rank-steps)" in n for n in json.load(open(sys.argv[1]))["provenance"]["notes"])
PY

expect_ok "$DDPSIM" validate --measured "$prereg/runs/kk/steps.csv" --baseline "$prereg/runs/static/steps.csv" \
  --model "$SRC/traces/h100/validation2/models/prereg-posthoc.json" "${link[@]}" --out "$WORK/posthoc"
grep -q "note:" "$WORK/out" && fail "a model measured on the run's own shapes carries an extrapolation note"
grep -q model_extrapolated "$WORK/posthoc/validation.json" && fail "validation.json names an extrapolation that is none"
cpu=$SRC/traces/cpu/prereg8
sed 's/^# model=small$/# model=tiny/' "$cpu/runs/static/steps.csv" >"$WORK/tiny.csv"
expect_ok "$DDPSIM" validate --measured "$WORK/tiny.csv" --model "$cpu/model-1core-training.json" --out "$WORK/tiny"
grep -q '^warning: .*tiny.csv trained model "tiny", but cpu-distilbert-small-1core-trained was calibrated on traces of "small"' \
  "$WORK/out" || fail "validate does not say the run trained another model: $(head -8 "$WORK/out")"
grep -q '"model_trained_other"' "$WORK/tiny/validation.json" || fail "validation.json does not name the other model"
expect_ok "$DDPSIM" validate --measured "$cpu/runs/static/steps.csv" --model "$cpu/model-1core-training.json"
grep -q '^warning:' "$WORK/out" && fail "a run of the calibrated model is warned of: $(grep warning "$WORK/out")"
finish
