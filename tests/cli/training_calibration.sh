# calibrate --training: the H100 bf16 profile plus the static run it trained beside gives a
# model with the run's spread and a shape's first-use cost, which predicts minmax's run (which
# meets six times static's shapes) within 10% — without them the replay is a third short.
source "$(dirname "$0")/lib.sh"
h100=$SRC/traces/h100
link=(--set platform.link_GBps=10 --set platform.latency_us=5 --set platform.host_GBps=0 --set training.overlap=false)

expect_ok "$DDPSIM" calibrate "$h100/profile-bf16/steps.csv" --training "$h100/bf16/static/steps.csv" \
  --base "$h100/layout.json" --out "$WORK/bf16.json"
grep -q "first use of a shape in a process: +1[0-9][0-9]" "$WORK/out" || fail "no first-use cost of 100-199 ms reported"
python3 - "$WORK/bf16.json" <<'PY' || fail "the model lacks the training run's steps or first-use cost"
import json, sys
m = json.load(open(sys.argv[1]))
assert 100 < m["first_use_ms"] < 200, m["first_use_ms"]
assert len(m["noise"]["steps"]) == 799 and all(len(s) == 4 for s in m["noise"]["steps"])
assert any(t.get("role") == "training" for t in m["calibration"]["traces"])
assert "training run(s) static/steps.csv" in m["source"], m["source"]
PY

# Several runs trained in turn: each run's level, and the spread every gain's interval then carries.
pre=$SRC/traces/cpu/prereg4/pre-run
expect_ok "$DDPSIM" calibrate "$SRC/traces/cpu/prereg3/profile-1core/steps.csv" --base "$SRC/traces/cpu/layout.json" \
  --training "$pre/static/steps.csv" "$pre/minmax-cost-tokens/steps.csv" "$pre/sorted/steps.csv" --out "$WORK/levels.json"
grep -q "run level: two runs' levels may differ by 36.6% (95%; levels static ×0.980, minmax:cost=tokens ×1.059, sorted ×0.962)" \
  "$WORK/out" || fail "the run-level line is not the prereg4 pre-run's"
grep -q "only 2 degree(s) of freedom: Student's t widens the spread" "$WORK/out" || fail "few degrees of freedom not said"
grep -q "levels by padded tokens a rank-step (the medians of 5 bins of at least 150 steady rank-steps, each run's own level taken out): 28 ×1.323, 68 ×1.263, " \
  "$WORK/out" || fail "the levels by tokens are not the prereg4 pre-run's"
grep -q "not all trained in turn" "$WORK/out" && fail "runs trained in turn reported as not"
# One level, as models were fitted before levels by tokens: the committed prereg4 model's levels
# (its spread, 15.0% at the normal's 1.96, is 35.9% at Student's t over two degrees of freedom).
expect_ok "$DDPSIM" calibrate "$SRC/traces/cpu/prereg3/profile-1core/steps.csv" --base "$SRC/traces/cpu/layout.json" \
  --training "$pre/static/steps.csv" "$pre/minmax-cost-tokens/steps.csv" "$pre/sorted/steps.csv" \
  --training-levels one --out "$WORK/one.json"
grep -q "run level: two runs' levels may differ by 35.9% (95%; levels static ×0.981, minmax:cost=tokens ×1.059, sorted ×0.963)" \
  "$WORK/out" || fail "--training-levels one did not give the one-level fit"
grep -q "one level for every shape (--training-levels one)" "$WORK/out" || fail "the report does not say one level was asked"
python3 - "$WORK/one.json" <<'PY' || fail "--training-levels one wrote levels"
import json, sys
assert "steps_levels" not in json.load(open(sys.argv[1]))["noise"]
PY
expect_exit 2 "--training-levels is tokens or one, got \"two\"" "$DDPSIM" calibrate \
  "$SRC/traces/cpu/prereg3/profile-1core/steps.csv" --training "$pre/static/steps.csv" --training-levels two \
  --out "$WORK/two.json"
expect_exit 2 "--training-levels describes the --training runs' fit" "$DDPSIM" calibrate \
  "$SRC/traces/cpu/prereg3/profile-1core/steps.csv" --training-levels one --out "$WORK/x.json"
[[ ! -e $WORK/two.json && ! -e $WORK/x.json ]] || fail "a refused calibrate left a model behind"
expect_ok "$DDPSIM" calibrate "$SRC/traces/cpu/prereg3/profile-1core/steps.csv" --base "$SRC/traces/cpu/layout.json" \
  --training "$pre/static/steps.csv" "$SRC/traces/cpu/prereg3/controls/static-alone/steps.csv" --out "$WORK/apart.json"
grep -q "levels .*pre-run/static/steps.csv ×[0-9.]* | .*static-alone/steps.csv ×" "$WORK/out" ||
  fail "two runs of one policy are not told apart by their traces"
grep -q "the runs were not all trained in turn" "$WORK/out" || fail "runs made apart not said to be"
grep -q "optimizer, the same work" "$WORK/out" && fail "an optimizer control over runs not trained in turn"

# The optimizer as a control: the same work in every model of a process. On the Xeon VM each
# model ran at a level of its own (prereg5's pre-runs); on the AMD VM none did (prereg6's).
for reg in prereg5 prereg6; do
  P=$SRC/traces/cpu/$reg
  expect_ok "$DDPSIM" calibrate "$SRC/traces/cpu/profile-1core/steps.csv" --base "$SRC/traces/cpu/layout.json" \
    --training "$P"/pre-run-a/{static,kk,sorted}/steps.csv "$P"/pre-run-b/{static,kk,sorted}/steps.csv \
    --out "$WORK/$reg.json"
  cp "$WORK/out" "$WORK/$reg.txt"
done
grep -q "optimizer, the same work in every run: its medians within a session at most 42.0% apart (static 321.8, kk" \
  "$WORK/prereg5.txt" || fail "prereg5's optimizer control is not 42.0%"
grep -q "at a level of its own" "$WORK/prereg5.txt" || fail "prereg5's models at their own levels not said"
grep -q "its medians within a session at most 1.4% apart" "$WORK/prereg6.txt" || fail "prereg6's control is not 1.4%"
grep -q "at a level of its own" "$WORK/prereg6.txt" && fail "prereg6's models said to run at levels of their own"
for reg in prereg5 prereg6; do
  R=$SRC/traces/cpu/$reg/runs
  expect_ok "$DDPSIM" validate --registered "$SRC/traces/cpu/$reg/prediction.json" --measured "$R/kk/steps.csv" \
    --baseline "$R/static/steps.csv"
  cp "$WORK/out" "$WORK/$reg-kk.txt"
done
grep -q "the optimizer, the same work in both runs, took 159.4 ms a rank-step under kk and 199.1 under the baseline (medians, 24.9% apart)" \
  "$WORK/prereg5-kk.txt" || fail "validate does not say that prereg5's kk model ran at a level of its own"
grep -q "the same work in both runs" "$WORK/prereg6-kk.txt" && fail "validate warns of prereg6's kk"

mean_error() {  # the steady-state mean's error of the policy row in validate's report
  awk -v p="$1" '$1 == p && $2 ~ /^[0-9]+$/ { for (i = 1; i <= NF; ++i) if ($i ~ /^\(/) { gsub(/[(%)]/, "", $i); print $i; exit } }' "$WORK/out"
}
expect_ok "$DDPSIM" validate --measured "$h100/bf16/minmax-cost-tokens/steps.csv" --model "$WORK/bf16.json" "${link[@]}"
e=$(mean_error minmax:cost=tokens)
[[ -n $e ]] || fail "no mean error for minmax in validate's report"
echo "minmax mean error with the first-use cost: ${e}%"
awk -v e="$e" 'BEGIN { exit !(e > -10 && e < 10) }' || fail "minmax's mean predicted ${e}% off (within 10% expected)"
expect_ok "$DDPSIM" validate --measured "$h100/bf16/minmax-cost-tokens/steps.csv" --model "$WORK/bf16.json" "${link[@]}" \
  --set simulation.first_use=off
e_off=$(mean_error minmax:cost=tokens)
awk -v e="$e_off" 'BEGIN { exit !(e < -25) }' || fail "without the first-use cost the mean is off by ${e_off}%, not a quarter short"

expect_exit 2 "steps.csv: given twice" "$DDPSIM" calibrate "$h100/profile-bf16/steps.csv" \
  --training "$h100/profile-bf16/steps.csv" --out "$WORK/twice.json"
[[ -e $WORK/twice.json ]] && fail "a refused calibration left its model behind"
# --training takes runs of the profiled setting: not a profile, nor another device's run (issue 36).
expect_exit 1 "profile-fp32/steps.csv: a profile \(policy=profile\), not a training run" "$DDPSIM" calibrate \
  "$h100/profile-bf16/steps.csv" --base "$h100/layout.json" --training "$h100/profile-fp32/steps.csv" --out "$WORK/p.json"
expect_exit 1 "static/steps.csv: device=cpu, and the profile .*profile-bf16/steps.csv has device=NVIDIA H100" \
  "$DDPSIM" calibrate "$h100/profile-bf16/steps.csv" --base "$h100/layout.json" \
  --training "$SRC/traces/cpu/2ranks/static/steps.csv" --out "$WORK/p.json"
# ... nor a ZeRO-1 run, whose optimizer column is a shard's step (traces/cpu/prereg11)
z1="$SRC/traces/cpu/prereg11"
expect_exit 1 "runs/static/steps.csv: a run under data_parallel zero1, whose optimizer column is a shard's step" \
  "$DDPSIM" calibrate "$z1/profile/steps.csv" --base "$SRC/traces/cpu/layout.json" \
  --training "$z1/runs/static/steps.csv" --out "$WORK/p.json"
# validate takes the ZeRO-1 trace's data_parallel where the config gives none, and says what it simulates
expect_ok "$DDPSIM" validate --measured "$z1/runs/sorted/steps.csv" --baseline "$z1/runs/static/steps.csv" \
  --model "$z1/model-2ranks-training.json"
grep -q "optimizer (shard)\|data parallel: zero1" "$WORK/out" || fail "validate did not simulate the trace's zero1"
# ... and a StepTracer's zero_partition (ZeroRedundancyOptimizer's shards of a tied-embedding decoder)
z1py="$SRC/traces/cpu/prereg18"
expect_ok "$DDPSIM" replay "$z1py/runs/sorted/steps.csv" --model "$z1py/model-2ranks-training.json"
grep -q "optimizer state sharded by whole parameters, 27.1% to 72.9% of them a rank" "$WORK/out" ||
  fail "replay did not shard the trace's zero1 by whole parameters"
expect_ok "$DDPSIM" replay "$z1py/runs/sorted/steps.csv" --model "$z1py/model-2ranks-training.json" \
  --set training.data_parallel=ddp
grep -q "data parallel:" "$WORK/out" && fail "--set training.data_parallel=ddp still simulated a sharded step"
grep -q "recorded data_parallel zero1; .* simulates \"ddp\" in its place" "$WORK/err" ||
  fail "replay did not note that --set overrides the trace's data_parallel"
# ... nor a byte copy of the profile under another name, runs of two world sizes, or packed runs
# for a padded profile (issue 47 probe).
cp "$h100/profile-bf16/steps.csv" "$WORK/same.csv"
expect_exit 1 "same.csv holds the same bytes as the profile" "$DDPSIM" calibrate "$h100/profile-bf16/steps.csv" \
  --base "$h100/layout.json" --training "$WORK/same.csv" --out "$WORK/p.json"
cp "$h100/bf16/static/steps.csv" "$WORK/copy.csv"
expect_exit 1 "copy.csv holds the same bytes as .*bf16/static/steps.csv: a training run given twice" "$DDPSIM" \
  calibrate "$h100/profile-bf16/steps.csv" --base "$h100/layout.json" --training "$h100/bf16/static/steps.csv" \
  "$WORK/copy.csv" --out "$WORK/p.json"
expect_exit 1 "nccl-1rank/steps.csv: 1 ranks, and .*bf16/static/steps.csv 4: .* share one world size" "$DDPSIM" \
  calibrate "$h100/profile-bf16/steps.csv" --base "$h100/layout.json" --training "$h100/bf16/static/steps.csv" \
  "$h100/nccl-1rank/steps.csv" --out "$WORK/p.json"
expect_exit 2 "--training: expected the training runs' trace files after it, got --out" "$DDPSIM" calibrate \
  "$h100/profile-bf16/steps.csv" --base "$h100/layout.json" --training --out "$WORK/p.json"
[[ -e $WORK/p.json ]] && fail "a refused calibration left its model behind"
expect_exit 1 "global_batch=48, .*large.* global_batch=256: a gain compares runs of one global batch" "$DDPSIM" validate \
  --measured "$(ls "$h100"/large/*/steps.csv | head -1)" --baseline "$h100/emulated4/static/steps.csv" --model "$WORK/bf16.json"
expect_exit 1 "first_use is \"own\"" "$DDPSIM" validate --measured "$h100/bf16/static/steps.csv" --model "$WORK/bf16.json" \
  --set simulation.first_use=maybe
finish
