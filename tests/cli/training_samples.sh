# calibrate --training records how many samples the runs' (micro-)batches held, and a config of
# another size is told that the runs' level there is not measured (the twenty-second registered
# CPU prediction: pre-runs of 8 samples a rank-step, B = 8's step 22-26% over the model).
source "$(dirname "$0")/lib.sh"
P=$SRC/traces/cpu/prereg4
expect_ok "$DDPSIM" calibrate "$SRC/traces/cpu/prereg3/profile-1core/steps.csv" --base "$SRC/traces/cpu/layout.json" \
  --training "$P/pre-run/static/steps.csv" --out "$WORK/model.json"
grep -q "samples a (micro-)batch: 4;" "$WORK/out" || fail "the report does not give the runs' 4 samples a micro-batch"
python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["noise"]["steps_samples"] == [4, 4]' "$WORK/model.json" ||
  fail "the model does not record [4, 4] samples"
# The registration's own setting (B = 64 over 4 ranks of 4 micro-batches): 4 samples, no note.
sed "s|\"model-1core-training.json\"|\"$WORK/model.json\"|" "$P/config.json" >"$WORK/config.json"
expect_ok "$DDPSIM" run "$WORK/config.json" --set training.steps=5 --out "$WORK/run"
grep -q "samples a (micro-)batch" "$WORK/out" "$WORK/err" && fail "a note for the very size the runs trained"
# Twice the batch: 8 samples a micro-batch, a size the runs never held.
expect_ok "$DDPSIM" run "$WORK/config.json" --set training.steps=5 --set training.global_batch=128 --out "$WORK/run2"
grep -q "^note: model .*'s training runs held 4 samples a (micro-)batch, this config's 8: the runs' level at 8 is not measured" \
  "$WORK/err" || fail "no note for 8 samples a micro-batch: $(cat "$WORK/err")"
python3 - "$WORK/run2/summary.json" <<'PY' || fail "summary.json's provenance lacks the untrained-size note"
import json, sys
assert any("held 4 samples a (micro-)batch, this config's 8" in n for n in json.load(open(sys.argv[1]))["provenance"]["notes"])
PY
# A compare --against column of another size says so as its own note, the base column not.
expect_ok "$DDPSIM" compare "$WORK/config.json" --policies static --set training.steps=5 \
  --against big:training.global_batch=128 --out "$WORK/compare"
grep -q "^note (big): model .*'s training runs held 4 samples a (micro-)batch, this config's 8" "$WORK/err" ||
  fail "the column of 8 samples has no note: $(cat "$WORK/err")"
[[ $(cat "$WORK/out" "$WORK/err" | grep -c "samples a (micro-)batch") == 1 ]] || fail "the note is not the column's alone"
grep -q "untrained batch size\" term takes its level ×1.15 a doubling above them" "$WORK/err" ||
  fail "the note does not say what the interval takes for the untrained size"
python3 - "$WORK/compare/summary.json" <<'PY' || fail "the column's provenance lacks its note, or the base's has it"
import json, sys
doc = json.load(open(sys.argv[1]))
assert not any("samples a (micro-)batch" in n for n in doc["provenance"].get("notes", []))
assert any("this config's 8" in n for n in doc["columns"]["big"]["provenance"]["notes"]), doc["columns"]["big"]
PY
# A base of another size says so once, as itself, and a column of a third size as its own; with
# --print-config, as with run's, none (the notes are of the run, which it does not make).
expect_ok "$DDPSIM" compare "$WORK/config.json" --policies static --set training.steps=5 \
  --set training.global_batch=128 --against half:training.world_size=2
[[ $(grep -c "^note: model .*this config's 8:" "$WORK/err") == 1 ]] || fail "the base's note is not said once: $(cat "$WORK/err")"
grep -q "^note (half): model .*this config's 16:" "$WORK/err" || fail "the half-world column has no note: $(cat "$WORK/err")"
expect_ok "$DDPSIM" compare "$WORK/config.json" --policies static --set training.global_batch=128 \
  --against half:training.world_size=2 --print-config
grep -q "samples a (micro-)batch" "$WORK/err" && fail "--print-config says a run's notes: $(cat "$WORK/err")"
# A sweep over the batch size names the cells of another size than the runs'.
printf '{"base": "%s", "set": {"training.steps": 3}, "policies": ["static"], "axes": {"training.global_batch": [64, 128, 256]}}\n' \
  "$WORK/config.json" >"$WORK/sweep.json"
expect_ok "$DDPSIM" sweep "$WORK/sweep.json" --out "$WORK/sweep"
grep -q "^note: model .*this config's 8: .* (cell 1)$" "$WORK/err" || fail "the sweep's note does not name cell 1: $(cat "$WORK/err")"
grep -q "^note: model .*this config's 16: .* (cell 2)$" "$WORK/err" || fail "the sweep's note does not name cell 2: $(cat "$WORK/err")"
grep -q "this config's 4:" "$WORK/err" && fail "a sweep note for the size the runs trained"
# Its gain's interval holds the untrained size as a term of its own, in the text and summary.json.
expect_ok "$DDPSIM" compare "$WORK/config.json" --policies static --set training.steps=5 --replicates 2 \
  --against big:training.global_batch=128 --out "$WORK/compare-pi"
grep -q "untrained batch size (above) ±" "$WORK/out" || fail "no untrained batch size term: $(grep -A1 'prediction' "$WORK/out")"
python3 - "$WORK/compare-pi/summary.json" <<'PY' || fail "summary.json lacks the term"
import json, sys
terms = json.load(open(sys.argv[1]))["replicates"]["columns"]["big"]["gain"]["terms_half_width_pp"]
assert terms["untrained batch size (above)"] > 1 and "untrained batch size (below)" not in terms, terms
PY
# At the size the runs trained, the size variants change no fixed-size policy: no term; minmax
# sizes its micro-batches by tokens, some past the runs' 4 samples: a term above.
expect_ok "$DDPSIM" compare "$WORK/config.json" --policies static,sorted,minmax --set training.steps=5 \
  --replicates 2 --out "$WORK/compare-in"
grep -A1 "^  sorted " "$WORK/out" | grep -q "untrained" && fail "an untrained-size term at the size the runs trained"
grep -A1 "^  minmax " "$WORK/out" | grep -q "untrained batch size (above) ±" ||
  fail "minmax's micro-batches past the runs' size have no term: $(grep -A1 '^  minmax ' "$WORK/out")"
# A policy that sizes its own batches (token_budget) gets no note: B says nothing of its sizes.
expect_ok "$DDPSIM" run "$WORK/config.json" --policies token_budget:max_tokens=1024 --set training.micro_batches=1 \
  --set training.steps=5 --out "$WORK/budget"
grep -q "samples a (micro-)batch" "$WORK/out" "$WORK/err" && fail "a note for token_budget, whose batch sizes B does not give"
# A model whose samples are malformed is refused by key.
python3 - "$WORK/model.json" "$WORK/bad.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["noise"]["steps_samples"] = [8, 4]
json.dump(m, open(sys.argv[2], "w"))
PY
expect_exit 1 "noise: steps_samples is array \\[8,4\\]: expected \\[fewest, most\\] samples a \\(micro-\\)batch" \
  "$DDPSIM" run "$WORK/config.json" --set "model=$WORK/bad.json" --set training.steps=5
finish
