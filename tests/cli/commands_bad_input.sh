# Every command's bad usage and missing inputs: one line naming the option or file, exit 2 for
# usage and 1 for input, nothing written.
source "$(dirname "$0")/lib.sh"
out="$WORK/out_dir"
vocab=$SHARED/bert-base-uncased/vocab.txt
expect_exit 1 '--policies: unknown policy "bogus"' "$DDPSIM" compare --policies static,bogus --out "$out"
expect_exit 1 "nofile.json: cannot open JSON file \(no such file\)" "$DDPSIM" compare "$WORK/nofile.json" --out "$out"
expect_exit 2 '--timeline-steps chooses the steps of a --timeline FILE' "$DDPSIM" run --timeline-steps 1:2 --out "$out"
expect_exit 2 "--steps must be at least 1, got 0" "$DDPSIM" balance --steps 0 --out "$out"
expect_exit 2 '--only is sched, sim, sweep or validate, got "bogus"' "$DDPSIM" bench --only bogus
expect_exit 2 "unrecognised option '--bogus'" "$DDPSIM" bench --bogus
expect_exit 2 "'--measured' is required" "$DDPSIM" validate --model rtx3090-distilbert --out "$out"
expect_exit 1 "nofile.csv: cannot open trace \(no such file\)" "$DDPSIM" validate --measured "$WORK/nofile.csv" \
  --model rtx3090-distilbert --out "$out"
expect_exit 2 "'--model' is required" "$DDPSIM" replay "$WORK/nofile.csv" --out "$out"
expect_exit 2 "'--out' is required" "$DDPSIM" calibrate "$WORK/nofile.csv"
expect_exit 1 "nofile.csv: cannot open trace" "$DDPSIM" calibrate "$WORK/nofile.csv" --out "$out/m.json"
expect_exit 2 "'--vocab' is required" "$DDPSIM" lengths "$WORK/nofile.tsv" --out "$out/h.json"
expect_exit 2 "--max-length must be from 2 \\(\\[CLS\\] and \\[SEP\\]\\) to 1000000, got 0" "$DDPSIM" lengths \
  "$WORK/nofile.tsv" --vocab v --out "$out/h.json" --max-length 0
printf 'sentence\tlabel\ngood\t1\n' >"$WORK/ok.tsv"
expect_exit 1 "nofile.txt: cannot open" "$DDPSIM" lengths "$WORK/ok.tsv" --vocab "$WORK/nofile.txt" --out "$out/h.json"
if [[ -f $vocab ]]; then
  expect_exit 1 "nofile.tsv: cannot open GLUE TSV file \(no such file\)" "$DDPSIM" lengths "$WORK/nofile.tsv" \
    --vocab "$vocab" --out "$out/h.json"
fi
[[ -z $(ls -A "$out" 2>/dev/null) ]] || fail "output left behind: $(ls -A "$out")"

# An output never replaces an input, a device or a pipe, nor another output of the same command.
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\ngood\n' >"$WORK/vocab.txt"
cp "$WORK/ok.tsv" "$WORK/before.tsv"
expect_exit 2 "ok.tsv: is also an input of this command" "$DDPSIM" lengths "$WORK/ok.tsv" --vocab "$WORK/vocab.txt" \
  --out "$WORK/ok.tsv"
cmp -s "$WORK/ok.tsv" "$WORK/before.tsv" || fail "lengths overwrote its input"
mkfifo "$WORK/fifo"
expect_exit 2 "--timeline $WORK/fifo: is a device or a pipe" "$DDPSIM" run --steps 2 --timeline "$WORK/fifo" --out "$out"
expect_exit 2 "steps.csv: named twice among this command's outputs" "$DDPSIM" run --steps 2 --policies static \
  --out "$out" --timeline "$out/steps.csv"
[[ -z $(find "$out" -type f 2>/dev/null) ]] || fail "output left behind: $(find "$out" -type f)"
"$DDPSIM" run --steps 2 --policies static --out "$WORK/sim" >/dev/null || fail "a plain run failed"
cp "$WORK/sim/steps.csv" "$WORK/sim.csv"
expect_exit 2 "steps.csv: is also an input of this command" "$DDPSIM" replay "$WORK/sim/steps.csv" \
  --model rtx3090-distilbert --out "$WORK/sim"
cmp -s "$WORK/sim/steps.csv" "$WORK/sim.csv" || fail "replay overwrote the trace it replayed"
expect_exit 2 "m.json: named twice" "$DDPSIM" calibrate "$WORK/sim.csv" --out "$WORK/m.json" --residuals "$WORK/m.json"
[[ ! -e $WORK/m.json ]] || fail "calibrate wrote m.json though its outputs collide"
# replay keeps a trace's plan: a micro-batch split it cannot apply is refused, not ignored,
# whether a config asks for it or --set does (also where the trace recorded micro-batches: issue 36).
printf '{"training": {"micro_batches": 2}}\n' >"$WORK/micro2.json"
expect_exit 1 "sim.csv: the trace recorded one micro-batch per rank and step .* training.micro_batches 2 would be ignored" \
  "$DDPSIM" replay "$WORK/sim.csv" "$WORK/micro2.json" --model rtx3090-distilbert --out "$out"
"$DDPSIM" run --steps 2 --policies static --set training.micro_batches=3 --set training.global_batch=24 \
  --out "$WORK/micro" >/dev/null || fail "a micro-batched run failed"
for set in training.micro_batches=2 'training={"micro_batches": 2}'; do
  for verb in replay validate; do
    trace=(--measured "$WORK/micro/steps.csv")
    [[ $verb == replay ]] && trace=("$WORK/micro/steps.csv")
    expect_exit 2 "--set training(.micro_batches)?: replay and validate simulate the micro-batches .*micro/steps.csv recorded .* so training.micro_batches would have no effect" \
      "$DDPSIM" $verb "${trace[@]}" --model rtx3090-distilbert --set "$set" --out "$out"
  done
done
# ... and so is a config file's count that differs from the one the trace recorded.
printf '{"training": {"micro_batches": 2}}\n' >"$WORK/micro2.json"
expect_exit 1 "micro/steps.csv: step 0 of rank 0 recorded 3 micro-batches, and replay keeps the recorded plan: training.micro_batches 2 would be ignored" \
  "$DDPSIM" replay "$WORK/micro/steps.csv" "$WORK/micro2.json" --model rtx3090-distilbert --out "$out"
printf '{"training": {"micro_batches": 3, "steps": 50}}\n' >"$WORK/micro3.json"
expect_ok "$DDPSIM" replay "$WORK/micro/steps.csv" "$WORK/micro3.json" --model rtx3090-distilbert
grep -q "micro3.json sets training.steps; the steps, batches and lengths come from .*micro/steps.csv, so it is not used" \
  "$WORK/err" || fail "replay did not say the config's training.steps is not used"
# A config without a training section is a config (it crashed replay), and replay makes no
# decisions for sched_ms "measured" to time.
printf '{"simulation": {"noise_sigma": 0}}\n' >"$WORK/notraining.json"
expect_ok "$DDPSIM" replay "$WORK/micro/steps.csv" "$WORK/notraining.json" --model rtx3090-distilbert
printf '{"training": {"world_size": 8}}\n' >"$WORK/ws8.json"
expect_exit 1 "micro/steps.csv: the trace has 4 ranks, .*ws8.json.s training.world_size says 8" \
  "$DDPSIM" replay "$WORK/micro/steps.csv" "$WORK/ws8.json" --model rtx3090-distilbert --out "$out"
printf '{"simulation": {"sched_ms": "measured"}}\n' >"$WORK/measured.json"
expect_exit 1 'measured.json: simulation.sched_ms "measured" times the policy.s decisions, and replay and validate make none' \
  "$DDPSIM" replay "$WORK/micro/steps.csv" "$WORK/measured.json" --model rtx3090-distilbert --out "$out"
expect_exit 2 '--set simulation.sched_ms=measured: "measured" times the policy.s decisions' \
  "$DDPSIM" validate --measured "$WORK/micro/steps.csv" --model rtx3090-distilbert --set simulation.sched_ms=measured

expect_exit 1 "sim.csv: the trace has 4 ranks, --set training.world_size says 8" \
  "$DDPSIM" replay "$WORK/sim.csv" --model rtx3090-distilbert --set training.world_size=8
expect_exit 2 "--set model: the performance model comes from --model" \
  "$DDPSIM" validate --measured "$WORK/sim.csv" --model rtx3090-distilbert --set model=h100-distilbert

# An empty path is refused, not read as the current folder; a failed run takes away the output
# folders it made.
pushd "$WORK" >/dev/null || exit 1
expect_exit 2 "--out: empty value" "$DDPSIM" run --steps 2 --out ''
popd >/dev/null || exit 1
[[ ! -e $WORK/steps.csv ]] || fail "run --out '' wrote into the current folder"
expect_exit 2 "CONFIG: empty value" "$DDPSIM" run ''
touch "$WORK/afile"
expect_exit 2 "afile/t.json: .*afile is not a folder" "$DDPSIM" run --steps 2 \
  --out "$WORK/new/run" --timeline "$WORK/afile/t.json"
[[ ! -e $WORK/new ]] || fail "a refused run made its output folder: $(find "$WORK/new")"
# A file output named with a trailing "/" is a folder: refused before the run, nothing left.
expect_exit 2 "o10/sub/: names a folder, expected a file name" "$DDPSIM" run --steps 2 --out "$WORK/o10" \
  --timeline "$WORK/o10/sub/"
[[ ! -e $WORK/o10 ]] || fail "a refused run left $(find "$WORK/o10")"
expect_exit 2 "rdir/: names a folder" "$DDPSIM" calibrate "$WORK/sim.csv" --out "$WORK/m.json" --residuals "$WORK/rdir/"
[[ ! -e $WORK/m.json ]] || fail "calibrate wrote m.json though --residuals was refused"
# Replay checks stragglers against the trace's steps (2 here), and a baseline that is a copy.
expect_exit 1 "stragglers\[0\].*past the run's last step \(1\)" "$DDPSIM" replay "$WORK/sim.csv" \
  --model rtx3090-distilbert --set 'simulation.stragglers=[{"rank":1,"factor":2,"from_step":5}]' --out "$out"
cp "$WORK/sim.csv" "$WORK/copy.csv"
expect_exit 2 "--baseline .*copy.csv holds the same bytes as --measured" "$DDPSIM" validate --measured "$WORK/sim.csv" \
  --baseline "$WORK/copy.csv" --model rtx3090-distilbert --out "$out"
# --steps beside a --set of the steps: one of the two values would go unused.
expect_exit 2 "--steps and --set training.steps=-1 both set training.steps: give one" "$DDPSIM" run \
  --set training.steps=-1 --steps 3 --out "$out"
expect_exit 2 "--policies and --set policies=\[\"kk\"\] both set the policies" "$DDPSIM" run \
  --set 'policies=["kk"]' --policies static --out "$out"
expect_ok "$DDPSIM" run --set 'training={"world_size":2}' --set training.global_batch=8 --steps 2 --out "$WORK/refined"
# Trace metadata read exactly; a compressed trace named as such.
{ echo "# world_size=99999999999"; grep -v '^#' "$WORK/sim.csv"; } >"$WORK/wide.csv"
expect_exit 1 "wide.csv:1: metadata world_size=99999999999: expected an integer from 1 to 65536" "$DDPSIM" \
  calibrate "$WORK/wide.csv" --out "$WORK/m.json"
gzip -c "$WORK/sim.csv" >"$WORK/sim.csv.gz"
expect_exit 1 "sim.csv.gz: gzip-compressed" "$DDPSIM" replay "$WORK/sim.csv.gz" --model rtx3090-distilbert --out "$out"
expect_exit 1 'replay: --model "nosuch": not a built-in model' "$DDPSIM" replay "$WORK/sim.csv" --model nosuch --out "$out"
[[ -z $(find "$out" -type f 2>/dev/null) ]] || fail "output left behind: $(find "$out" -type f)"
finish
