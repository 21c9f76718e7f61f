# calibrate, replay, validate: bad traces and missing arguments, one clear line, no output left.
source "$(dirname "$0")/lib.sh"
out="$WORK/out_dir"
mkdir -p "$out"
printf 'step,rank,batch_size,max_len,fwd_ms,bwd_ms\n0,0,4,9,1,x\n' >"$WORK/nan.csv"
expect_exit 1 "nan.csv:2: column bwd_ms: \"x\" is not a number" "$DDPSIM" calibrate "$WORK/nan.csv" --out "$out/m.json"
printf 'step,rank,batch_size,max_len\n0,0,4,9\n' >"$WORK/untimed.csv"
expect_exit 1 'untimed.csv: the header lacks column "fwd_ms"' "$DDPSIM" calibrate "$WORK/untimed.csv" --out "$out/m.json"
printf 'step,rank,batch_size,max_len,fwd_ms,bwd_ms\n0,0,4,9,1,2\n1,0,4,9,1,2\n' >"$WORK/one.csv"
expect_exit 1 "one.csv: 1 distinct .* add steps with other batch sizes and lengths" "$DDPSIM" calibrate "$WORK/one.csv" \
  --out "$out/m.json"
expect_exit 2 "out.*required|required.*out" "$DDPSIM" calibrate "$WORK/one.csv"
expect_exit 1 'untimed.csv:1: the header lacks column "step_ms"' "$DDPSIM" validate --measured "$WORK/untimed.csv" \
  --model rtx3090-distilbert --out "$out"
expect_exit 1 "absent.csv: cannot open trace" "$DDPSIM" replay "$WORK/absent.csv" --model rtx3090-distilbert --out "$out"
[[ -z $(ls -A "$out") ]] || fail "output left behind: $(ls -A "$out")"
# A built-in model by name replays a simulated trace.
expect_ok "$DDPSIM" run --steps 5 --policies static --out "$WORK/sim"
expect_ok "$DDPSIM" replay "$WORK/sim/steps.csv" --model rtx3090-distilbert
grep -q "max step time, mean" "$WORK/out" || fail "replay with a built-in model printed no table"
for verb in calibrate replay validate; do
  expect_ok "$DDPSIM" "$verb" --help
  grep -q "usage: ddpsim $verb" "$WORK/out" || fail "$verb --help lacks its usage line"
done
finish
