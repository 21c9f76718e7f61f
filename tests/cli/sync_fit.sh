# calibrate --training compares the runs' comm wait with the model's replay of them and makes up
# the difference as sync_ms, each rank's wait after its last collective (PyTorch DDP's
# finalisation, which no profile times): the twenty-sixth registered CPU prediction's pre-runs
# waited 69.9 ms a rank-step where the model replayed 48.4. Emulated ranks are not compared.
source "$(dirname "$0")/lib.sh"
P=$SRC/traces/cpu/prereg26
runs() { echo "$P/$1/static/steps.csv" "$P/$1/minmax-cost-workload/steps.csv"; }
mkdir "$WORK/tmp"  # its own temporary folder: another test's calibrate may be running beside it
TMPDIR=$WORK/tmp expect_ok "$DDPSIM" calibrate "$P/profile/profile.csv" --base "$P/profile/layout.json" \
  --training $(runs pre-run-a) $(runs pre-run-b) --out "$WORK/model.json"
grep -q "^  sync      comm wait of the training runs 69.90 ms a rank-step, the model's replay of them 48.38 (472 rank-steps of 4 run(s)): each rank waits the difference" \
  "$WORK/out" || fail "the report lacks the sync line: $(grep -i sync "$WORK/out")"
python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); assert m["sync_ms"] == 21.51, m["sync_ms"]' \
  "$WORK/model.json" || fail "the model's sync_ms is not 21.51"
[[ -z $(ls -A "$WORK/tmp") ]] || fail "calibrate left its temporary model behind: $(ls -A "$WORK/tmp")"

# A registered run the pre-runs did not train: its comm wait replayed within 5%, its step within 6%
# (the model without sync_ms: 34% and 10% short).
expect_ok "$DDPSIM" validate --measured "$P/runs-base-1/static/steps.csv" --model "$WORK/model.json"
python3 - "$WORK/out" <<'PY' || fail "the replay's comm wait or step is off: $(grep -A2 '^phases' "$WORK/out")"
import re, sys
text = open(sys.argv[1]).read()
phases = text[text.index("phases, mean ms"):].splitlines()[2]
wait = [float(x) for x in re.findall(r"(\d+\.\d+) -> (\d+\.\d+)", phases)[2]]
assert abs(wait[1] / wait[0] - 1) < 0.05, wait
step = re.search(r"^static +1 +149 +([\d.]+) -> ([\d.]+)", text, re.M)
assert abs(float(step.group(2)) / float(step.group(1)) - 1) < 0.06, step.group(0)
PY

# Emulated ranks measured no allreduce: said, and no sync_ms.
expect_ok "$DDPSIM" calibrate "$SRC/traces/cpu/prereg3/profile-1core/steps.csv" --base "$SRC/traces/cpu/layout.json" \
  --training "$SRC/traces/cpu/prereg4/pre-run/static/steps.csv" --out "$WORK/emulated.json"
grep -q "sync: not compared, .*prereg4/pre-run/static/steps.csv: emulated ranks, their allreduce modelled" "$WORK/out" ||
  fail "the emulated run is not said to be skipped: $(grep -i sync "$WORK/out")"
python3 -c 'import json, sys; assert "sync_ms" not in json.load(open(sys.argv[1]))' "$WORK/emulated.json" ||
  fail "a sync_ms from emulated ranks"

# No temporary folder: one clear line, no model written.
TMPDIR=$WORK/missing expect_exit 1 "^ddpsim calibrate: no temporary folder to replay the training runs from \\(TMPDIR\\)" \
  "$DDPSIM" calibrate "$P/profile/profile.csv" --base "$P/profile/layout.json" \
  --training $(runs pre-run-a) --out "$WORK/none.json"
[[ -e $WORK/none.json ]] && fail "a model written without its sync fit"

# A model's sync_ms is checked.
python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); m["sync_ms"] = -2; json.dump(m, open(sys.argv[2], "w"))' \
  "$WORK/model.json" "$WORK/bad.json"
expect_exit 1 "sync_ms must be a finite number ≥ 0" \
  "$DDPSIM" validate --measured "$P/runs-base-1/static/steps.csv" --model "$WORK/bad.json"
finish
