# calibrate --training records the tokens its levels were measured over, and a gain whose
# rank-steps go beyond them carries an "untrained tokens" term (the twenty-fifth registered CPU
# prediction: levels measured packed at 81-119 tokens held to padded rank-steps of ~280, 13-24%
# over the runs). Its committed profile and pre-runs, refitted here.
source "$(dirname "$0")/lib.sh"
P=$SRC/traces/cpu/prereg25
runs() { echo "$P/$1/static/steps.csv" "$P/$1/minmax:cost=workload/steps.csv"; }
expect_ok "$DDPSIM" calibrate "$P/profile/profile.csv" --base "$P/profile/layout.json" \
  --training $(runs pre-run-a) $(runs pre-run-b) --out "$WORK/model.json"
grep -q "tokens a rank-step: 58 to 194; a prediction whose rank-steps go beyond carries an \"untrained tokens\" term" \
  "$WORK/out" || fail "the report does not give the levels' tokens: $(grep -i tokens "$WORK/out")"
python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["noise"]["steps_tokens"] == [58, 194]' \
  "$WORK/model.json" || fail "the model does not record [58, 194] tokens"
sed "s|\"model-2ranks-training.json\"|\"$WORK/model.json\"|" "$P/config.json" >"$WORK/config.json"

# Padded against packed: the padded column's rank-steps lie past 194 tokens, so the term is there,
# and the widest, in the text and in summary.json.
expect_ok "$DDPSIM" compare "$WORK/config.json" --policies static --set training.steps=40 --replicates 2 \
  --against padded:training.attention=padded --out "$WORK/against"
grep -A1 "^  padded " "$WORK/out" | grep -q "mostly: untrained tokens" ||
  fail "the padded column's interval is not mostly the untrained tokens: $(grep -A2 '^  padded ' "$WORK/out")"
python3 - "$WORK/against/summary.json" <<'PY' || fail "summary.json lacks the term"
import json, sys
terms = json.load(open(sys.argv[1]))["replicates"]["columns"]["padded"]["gain"]["terms_half_width_pp"]
assert terms["untrained tokens"] > 10, terms
PY
# The policies as the pre-runs trained them, packed: their rank-steps within the tokens, no term.
expect_ok "$DDPSIM" compare "$WORK/config.json" --set training.steps=40 --replicates 2
grep -q "untrained tokens" "$WORK/out" && fail "a term where the rank-steps stayed within the tokens: $(cat "$WORK/out")"

# Malformed tokens, or tokens without levels, are refused by key.
python3 - "$WORK/model.json" "$WORK" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["noise"]["steps_tokens"] = [194, 58]
json.dump(m, open(sys.argv[2] + "/reversed.json", "w"))
m["noise"]["steps_tokens"] = [100, 110]
json.dump(m, open(sys.argv[2] + "/narrow.json", "w"))
m["noise"]["steps_tokens"] = [58, 194]
del m["noise"]["steps_levels"]
json.dump(m, open(sys.argv[2] + "/no-levels.json", "w"))
PY
expect_exit 1 "noise: steps_tokens is array \\[194,58\\]: expected \\[fewest, most\\] tokens a rank-step" \
  "$DDPSIM" run "$WORK/config.json" --set "model=$WORK/reversed.json" --set training.steps=5
expect_exit 1 "noise: steps_tokens \\[100, 110\\] does not hold a level measured at 81 tokens: both describe the same training runs" \
  "$DDPSIM" run "$WORK/config.json" --set "model=$WORK/narrow.json" --set training.steps=5
expect_exit 1 "noise: steps_tokens without steps_levels or steps_levels_by_samples" \
  "$DDPSIM" run "$WORK/config.json" --set "model=$WORK/no-levels.json" --set training.steps=5
finish
