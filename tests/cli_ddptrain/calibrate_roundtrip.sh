# The whole loop on CPU: ddptrain profiles the tiny model, ddpsim calibrates a model from the
# sweep, ddptrain measures static and minmax in turn with two Gloo ranks, ddpsim replays and
# validates them. CPU timings are noisy and this run is short: it checks the pipeline, and that the
# prediction lands within loose bounds of the measurement (a broken model misses them by far).
source "$(dirname "$0")/lib.sh"
DDPSIM=$(dirname "$DDPTRAIN")/ddpsim
[[ -x $DDPSIM ]] || { echo "skip: no ddpsim beside ddptrain (a trainer-only build)"; exit 77; }
tiny=(--model tiny --max-length 64 --synthetic-lengths sst2 --synthetic-samples 2000 --threads 1)
expect_ok "$DDPTRAIN" "${tiny[@]}" --profile --profile-batches 1,4,16 --profile-lengths 8,24,64 \
  --profile-warmup 1 --profile-reps 3 --out "$WORK/profile"
grep -q '^# profile=warmup 1 (9 runs in all), repetitions 3, 9 points in a seeded random order$' "$WORK/profile/steps.csv" ||
  fail "profile trace lacks its sweep metadata"
grep -q '^# threads=1$' "$WORK/profile/steps.csv" || fail "profile trace lacks its thread count"
[[ $(grep -vc '^#' "$WORK/profile/steps.csv") == $((1 + 3 * 3 * 3)) ]] || fail "profile trace should hold 27 rows"

# Sizes up to 16 MiB, where the line leaves the latency: the fitted network is what the replay
# simulates, and a fit from sizes up to 1 MiB put the link anywhere from 0.28 to 1.5 GB/s.
expect_ok "$DDPTRAIN" "${tiny[@]}" --profile --nproc-per-node 2 --profile-bytes 262144,1048576,4194304,16777216 \
  --profile-batches 1,4,16 --profile-lengths 8,24,64 --profile-warmup 1 --profile-reps 3 --out "$WORK/allreduce"
[[ $(grep -c ',profile,' "$WORK/allreduce/steps.csv") == 54 ]] || fail "two ranks should time the 27-row grid together"
[[ $(grep -c '^[0-9]*,1,profile,' "$WORK/allreduce/steps.csv") == 27 ]] || fail "rank 1's profile rows are not in the trace"
grep -q ',allreduce_bytes,allreduce_ms,concurrent_allreduce_bytes$' "$WORK/allreduce/steps.csv" ||
  fail "the allreduce profile lacks its columns"
[[ $(nproc) -lt 2 ]] || grep -q '^# cpus=[0-9]* (pinned)$' "$WORK/allreduce/steps.csv" || fail "two ranks of one thread are not pinned"

expect_exit 2 "profiled with ddptrain --model tiny, and --base defaults to distilbert-base's layout" "$DDPSIM" \
  calibrate "$WORK/profile/steps.csv" --out "$WORK/model.json"
expect_exit 2 "profiled with ddptrain --model tiny, and --base h100-distilbert is not its layout" "$DDPSIM" \
  calibrate "$WORK/profile/steps.csv" --base h100-distilbert --out "$WORK/model.json"
expect_ok "$DDPTRAIN" --model small --write-layout "$WORK/small.json"
expect_exit 2 "profiled with ddptrain --model tiny, and --base .*small.json is the layout of --model small" "$DDPSIM" \
  calibrate "$WORK/profile/steps.csv" --base "$WORK/small.json" --out "$WORK/model.json"
expect_ok "$DDPTRAIN" --model tiny --write-layout "$WORK/layout.json"
expect_ok "$DDPSIM" calibrate "$WORK/profile/steps.csv" "$WORK/allreduce/steps.csv" --gpu "CPU (tiny)" \
  --base "$WORK/layout.json" --out "$WORK/model.json" --residuals "$WORK/residuals.csv"
cp "$WORK/out" "$WORK/calibrate.txt"
grep -q "held-out MAPE" "$WORK/out" || fail "calibrate printed no fit report"
grep -q "interference: backward runs" "$WORK/out" || fail "calibrate did not fit the interference"
grep -q "allreduce 2 ranks, as a ring" "$WORK/out" || fail "calibrate did not fit the allreduce"
grep -q '"fnv1a64"' "$WORK/model.json" || fail "the model does not record its source trace"
[[ $(wc -l <"$WORK/residuals.csv") == $((1 + 2 * 81)) ]] || fail "residuals.csv should hold 2 phases x 81 rows"
grep -q "split over the 2 ranks that timed each step at once" "$WORK/out" || fail "calibrate did not split the noise"
grep -q '"shared_sigma"' "$WORK/model.json" || fail "the model lacks the shared noise"
grep -q '"platform": {' "$WORK/model.json" || fail "the model does not carry the network its allreduce measured"

# Both policies in one run, a step of each in turn: a shared machine whose speed drifts over the
# run (CI's did, by 28% between two runs one after the other) gives both the same minutes.
expect_ok "$DDPTRAIN" "${tiny[@]}" --policy static,minmax:buffer=16 --global-batch 16 --steps 100 \
  --nproc-per-node 2 --out "$WORK/runs"
expect_ok "$DDPSIM" replay "$WORK/runs/minmax-buffer-16/steps.csv" --model "$WORK/model.json" --out "$WORK/replayed"
[[ $(grep -vc '^#' "$WORK/replayed/steps.csv") == $((1 + 100 * 2)) ]] || fail "the replay should hold 100 steps x 2 ranks"
expect_ok "$DDPSIM" validate --measured "$WORK/runs/minmax-buffer-16/steps.csv" \
  --baseline "$WORK/runs/static/steps.csv" --model "$WORK/model.json" --out "$WORK/validation"
grep -q "gain of minmax:buffer=16 over the baseline" "$WORK/out" || fail "validate states no gain"
grep -q "^  from: .*link_GBps.* from model calibrated (fitted by ddpsim calibrate" "$WORK/out" ||
  fail "validate does not say that the platform's figures came from the calibrated model"
grep -Eq '^static \(baseline\) +[0-9.]+ -> [0-9.]+ \([-+][0-9.]+%\) ' "$WORK/out" || fail "validate shows no phase table"
grep -q '"optimizer": {' "$WORK/validation/validation.json" || fail "validation.json lacks the phases"
grep -q '"mean_error_pct"' "$WORK/validation/validation.json" || fail "validation.json lacks mean_error_pct"
[[ $(grep -c '^minmax' "$WORK/validation/validation.csv") == 100 ]] || fail "validation.csv should hold 100 minmax steps"
echo "round trip on this CPU:"
cat "$WORK/calibrate.txt" "$WORK/out"
if [[ -n ${DDPSIM_TEST_SANITIZED:-} ]]; then
  echo "sanitizer build: the instrumented timings are not held to the bounds"
else
  # Loose bounds: within 60% on the mean step time, and the gain within 25 percentage points
  # (steady-state and all-steps figures alike; awk, since a minimal Debian has no python3).
  # docs/calibration.md's loop as written, with no --set platform: the model's own network is simulated,
  # so the exposed comm wait is not predicted far short of the measured one (the default pcie
  # platform predicted it 83% short here before models carried their network). Taken beyond the
  # compute's own miss where compute too is predicted short, since a run on a VM that happens to
  # go at half its profile's speed misses every phase alike (one here: forward and backward about
  # -50%, the comm wait -67%; usually -17%, -40% and -40%). Over-predictions are not held to it:
  # when the machine runs backward slower than its profile (CI's drifted so by 30%), backward
  # hides more of the allreduce and the measured wait shrinks.
  errors=$(awk -F': ' '/"forward"/ { phase = "f" } /"backward"/ { phase = "b" } /"comm wait"/ { phase = "c" }
                       /"optimizer"/ { phase = "" }
                       phase && /"error_pct"/ { e[phase] = $2 + 0
                                                compute = (e["f"] + e["b"]) / 2
                                                if (phase == "c") printf "%.1f ", e["c"] - (compute < 0 ? compute : 0)
                                                phase = "" }' "$WORK/validation/validation.json")
  [[ -n $errors ]] || fail "validation.json has no comm wait error to check"
  for e in $errors; do
    if awk -v e="$e" 'BEGIN { exit !(e < -50) }'; then
      fail "the comm wait is predicted far short of the measured, beyond the compute's miss: $errors pp"
      break
    fi
  done
  awk -F': ' '/"mean_error_pct"/ { v = $2 + 0; if (v > 60 || v < -60) bad = 1 }
              /"gain_error_pp"/  { v = $2 + 0; if (v > 25 || v < -25) bad = 1 }
              END { exit bad }' "$WORK/validation/validation.json" || fail "the prediction is out of the loose bounds"
fi
finish
