# training.pad_to_multiple_of: batches padded up to a multiple of N after the policy decided, as
# ddptrain --pad-to-multiple-of does, so that a run meets fewer distinct (b, L) shapes; with a
# model that charges a shape's first use, that is what makes minmax cheaper.
source "$(dirname "$0")/lib.sh"
shapes() {  # FOLDER POLICY: distinct shapes per rank from summary.json
  python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['policies'][sys.argv[2]]['distinct_shapes_per_rank'])" \
    "$1/summary.json" "$2"
}
mean() {
  python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['policies'][sys.argv[2]]['mean_max_step_ms'])" \
    "$1/summary.json" "$2"
}
# A bf16 H100 model with the measured first-use cost (140 ms a shape, docs/validation-gpu.md).
python3 - "$SRC/models/h100-distilbert-measured-bf16.json" "$WORK/first-use.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["first_use_ms"] = 140
json.dump(m, open(sys.argv[2], "w"))
PY
for pad in 1 8; do
  expect_ok "$DDPSIM" compare --policies static,minmax --steps 200 --set model="$WORK/first-use.json" \
    --set training.pad_to_multiple_of=$pad --out "$WORK/pad$pad"
done
grep -q "distinct (b, L) shapes per rank" "$WORK/out" || fail "the table has no distinct-shapes row"
for policy in static minmax; do
  before=$(shapes "$WORK/pad1" $policy) after=$(shapes "$WORK/pad8" $policy)
  awk -v a="$after" -v b="$before" 'BEGIN { exit !(a < b / 2) }' ||
    fail "$policy: pad_to_multiple_of 8 left $after shapes per rank of $before"
done
awk -v a="$(mean "$WORK/pad8" minmax)" -v b="$(mean "$WORK/pad1" minmax)" 'BEGIN { exit !(a < b) }' ||
  fail "with a first-use cost, padding to 8 did not make minmax faster"
grep -q '"pad_to_multiple_of": 8' "$WORK/pad8/summary.json" || fail "summary.json does not record the padding"
python3 - "$WORK/pad8/steps.csv" <<'PY' || fail "a padded run's lengths are not multiples of 8"
import csv, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith("#"))]
assert all(int(r["max_len"]) % 8 == 0 for r in rows if int(r["batch_size"]) > 0)
PY

expect_exit 1 "pad_to_multiple_of.*expected an integer from 1 to 256" "$DDPSIM" run --steps 2 \
  --set training.pad_to_multiple_of=1000
expect_exit 1 "attention \"packed\" has none to pad" "$DDPSIM" run --steps 2 --set training.pad_to_multiple_of=8 \
  --set training.attention=packed
expect_ok "$DDPSIM" run --steps 3 --out "$WORK/r"
expect_exit 2 "training.pad_to_multiple_of would have no effect" "$DDPSIM" replay "$WORK/r/steps.csv" \
  --model rtx3090-distilbert --set training.pad_to_multiple_of=8
finish
