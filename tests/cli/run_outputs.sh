# `ddpsim run` and `compare`: the study's table, trace and summary contracts with every timed
# column filled, byte-identical reruns, the timeline.
source "$(dirname "$0")/lib.sh"
expect_ok "$DDPSIM" run --steps 40 --out "$WORK/a" --timeline "$WORK/a.json" --timeline-steps 2:4
for row in "max step time, mean (ms)" "max step time, P95 (ms)" "samples/s, mean" "samples/s, P95" "tokens/s, mean" \
           "tokens/s, P95" "std of step time" "std of compute" "std of padded tokens" "peak memory"; do
  grep -q "$row" "$WORK/out" || fail "run table lacks \"$row\""
done
grep -q "static.*minmax:buffer=64:cost=tokens" "$WORK/out" || fail "run table lacks a column per policy"
grep -q "(-[0-9.]*%)" "$WORK/out" && fail "run shows changes; only compare should"
expect_ok "$DDPSIM" run --steps 40 --out "$WORK/b" --timeline "$WORK/b.json" --timeline-steps 2:4
cmp -s "$WORK/a/steps.csv" "$WORK/b/steps.csv" || fail "steps.csv differs between identical runs"
cmp -s "$WORK/a.json" "$WORK/b.json" || fail "the timeline differs between identical runs"
diff <(grep -v sched_us "$WORK/a/summary.json") <(grep -v sched_us "$WORK/b/summary.json") >/dev/null ||
  fail "summary.json differs between identical runs beyond decision times"

# Every column of the trace schema is filled except loss (not modelled).
header=$(grep -v '^#' "$WORK/a/steps.csv" | head -1)
IFS=, read -ra columns <<<"$header"
row=$(grep -v '^#' "$WORK/a/steps.csv" | sed -n 2p)
IFS=, read -ra values <<<"$row,"
for i in "${!columns[@]}"; do
  [[ ${columns[$i]} == loss ]] && continue
  [[ -n ${values[$i]} ]] || fail "steps.csv column ${columns[$i]} is empty in: $row"
done
rows=$(grep -vc '^#' "$WORK/a/steps.csv")
[[ $rows == $((1 + 40 * 4 * 6)) ]] || fail "steps.csv has $rows lines, expected header + 40 steps x 4 ranks x 6 policies"
grep -q '^# model=built-in rtx3090-distilbert$' "$WORK/a/steps.csv" || fail "steps.csv lacks its model metadata"
for key in mean_max_step_ms p95_max_step_ms mean_samples_per_s p95_samples_per_s mean_tokens_per_s p95_tokens_per_s \
           mean_std_step_ms mean_std_compute_ms mean_std_padded_tokens mean_std_peak_mem_mib mean_sched_us; do
  grep -qE "\"$key\": [0-9]" "$WORK/a/summary.json" || fail "summary.json lacks a number for $key"
done
grep -q '"platform"' "$WORK/a/summary.json" || fail "summary.json config lacks the platform"
grep -q '"traceEvents"' "$WORK/a.json" || fail "timeline is not a Chrome trace"
grep -q '"name": "allreduce bucket 0"' "$WORK/a.json" || fail "timeline lacks bucket allreduce spans"
grep -q '"step": 1' "$WORK/a.json" && fail "timeline holds step 1, outside 2:4"

expect_ok "$DDPSIM" compare --steps 40 --policies static,minmax
grep -qE "minmax +$" "$WORK/out" || true
grep -qE "\((\+|-)[0-9.]+%\)" "$WORK/out" || fail "compare shows no change against the first policy"
expect_ok "$DDPSIM" run --steps 40 --set training.overlap=false --policies static --out "$WORK/c"
a=$(grep -o '"mean_max_step_ms": [0-9.]*' "$WORK/a/summary.json" | head -1 | grep -o '[0-9.]*$')
c=$(grep -o '"mean_max_step_ms": [0-9.]*' "$WORK/c/summary.json" | head -1 | grep -o '[0-9.]*$')
awk -v a="$a" -v c="$c" 'BEGIN { exit !(c > a) }' || fail "overlap off ($c ms) is not slower than on ($a ms)"

# The timeline is published with the other outputs: its folder is created as needed, and a
# timeline path that is a folder is refused before any work, with nothing written.
expect_ok "$DDPSIM" run --steps 5 --out "$WORK/new/run" --timeline "$WORK/new/run/t.json"
[[ -s $WORK/new/run/t.json && -s $WORK/new/run/steps.csv ]] || fail "outputs missing under a folder made for them"
mkdir -p "$WORK/folder"
expect_exit 2 "--timeline $WORK/folder: is a folder" "$DDPSIM" run --steps 5 --out "$WORK/d" --timeline "$WORK/folder"
[[ -e $WORK/d ]] && fail "a refused --timeline left $WORK/d behind"

# --print-config writes valid input: read back, it resolves to itself (a built-in model included).
expect_ok "$DDPSIM" run --print-config --set model=h100-distilbert
cp "$WORK/out" "$WORK/printed.json"
expect_ok "$DDPSIM" run "$WORK/printed.json" --print-config
cmp -s "$WORK/out" "$WORK/printed.json" || fail "--print-config output does not read back to itself"
# ... from any folder: a config's relative paths are printed absolute.
mkdir -p "$WORK/cfg" "$WORK/elsewhere"
cp "$SRC/models/rtx3090-distilbert.json" "$WORK/cfg/m.json"
printf '{"model": "m.json", "training": {"steps": 3}}' >"$WORK/cfg/c.json"
(cd "$WORK/cfg" && "$DDPSIM" run c.json --print-config) >"$WORK/elsewhere/printed.json" || fail "print-config failed"
(cd "$WORK/elsewhere" && "$DDPSIM" run printed.json --policies static >/dev/null) ||
  fail "a printed config does not run from another folder: $(cat "$WORK/elsewhere/printed.json")"
# A printed config is what the user asked for, and reads back under other sizes: the default's
# token_budget follows max_length, b_max "model" stays a request (8 ranks printed, 4 read back).
expect_ok "$DDPSIM" run --set training.max_length=2048 --print-config
cp "$WORK/out" "$WORK/long.json"
expect_ok "$DDPSIM" run "$WORK/long.json" --set training.world_size=4 --set training.max_length=2048 --steps 3
expect_ok "$DDPSIM" run --set model=h100-distilbert --set training.world_size=8 --set training.global_batch=64 \
  --set 'training.b_max="model"' --print-config
grep -q '"b_max": "model"' "$WORK/out" || fail "b_max \"model\" is printed resolved: $(grep -A2 b_max "$WORK/out")"
cp "$WORK/out" "$WORK/capped.json"
expect_ok "$DDPSIM" run "$WORK/capped.json" --set training.world_size=4 --set training.global_batch=32 \
  --set training.max_length=2048 --steps 3
# The LLM example config runs (spec-derived Qwen2-7B, lengths up to 16k, caps from its memory).
expect_ok "$DDPSIM" compare "$SRC/configs/llm-rollouts.json" --steps 3
grep -q "qwen2-7b-h200" "$WORK/out" || fail "configs/llm-rollouts.json does not use its model: $(cat "$WORK/out")"
# Batches the memory model says do not fit are run, with a warning naming the policy and the
# steps; capped from the model's memory, the same run has none.
long='{"source":"lognormal","mean":300,"std":80,"min":10,"max":512}'
expect_ok "$DDPSIM" run --steps 20 --policies static,sorted --set training.global_batch=512 \
  --set training.max_length=512 --set "data=$long" --out "$WORK/over"
grep -q 'warning: policy static: in 20 of 20 steps a rank needs more memory than rtx3090-distilbert.s capacity' "$WORK/err" ||
  fail "no warning for batches above the memory capacity: $(cat "$WORK/err")"
python3 - "$WORK/over/summary.json" <<'PY1' || fail "summary.json lacks the run's warnings"
import json, sys
warnings = json.load(open(sys.argv[1]))["provenance"]["warnings"]
assert warnings[0].startswith("policy static: in 20 of 20 steps a rank needs more memory"), warnings
PY1
expect_ok "$DDPSIM" run --steps 20 --policies minmax --set training.global_batch=256 --set training.max_length=512 \
  --set "data=$long" --set 'training.b_max="model"'
# (grep, not an empty stderr: SimGrid's context switches draw a warning from AddressSanitizer)
! grep -q 'ddpsim run: warning' "$WORK/err" || fail "a run capped by its memory model warns: $(cat "$WORK/err")"
# Output lost to a full disk is an error, not a success.
if [[ -w /dev/full ]]; then
  "$DDPSIM" run --print-config >/dev/full 2>"$WORK/err" && fail "ddpsim run > /dev/full exited 0"
  grep -q "cannot write to standard output" "$WORK/err" || fail "no message for a full stdout: $(cat "$WORK/err")"
fi
# Every prediction says where its figures came from: the model's source and the platform's.
expect_ok "$DDPSIM" run --steps 3 --out "$WORK/provenance"
python3 - "$WORK/provenance/summary.json" <<'PY2' || fail "summary.json lacks the model's and the platform's provenance"
import json, sys
p = json.load(open(sys.argv[1]))["provenance"]
assert p["model"] == "built-in rtx3090-distilbert" and p["model_source"].startswith("derived, not profiled")
assert "hypothesis" in p["platform_source"] and p["platform"]["topology"] == "pcie"
assert "notes" not in p
PY2
# The notes a run prints stay with its figures.
expect_ok "$DDPSIM" run --steps 3 --set training.data_parallel=fsdp --set training.bucket_mb=5 \
  --out "$WORK/noted"
python3 - "$WORK/noted/summary.json" <<'PY3' || fail "summary.json lacks the run's notes"
import json, sys
notes = json.load(open(sys.argv[1]))["provenance"]["notes"]
assert len(notes) == 1 and notes[0].startswith("training.overlap, bucket_mb and first_bucket_mb have no effect"), notes
PY3
finish
