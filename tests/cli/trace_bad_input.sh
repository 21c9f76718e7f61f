# calibrate, replay, validate: bad traces and missing arguments, one clear line, no output left.
source "$(dirname "$0")/lib.sh"
out="$WORK/out_dir"
mkdir -p "$out"
printf 'step,rank,batch_size,max_len,fwd_ms,bwd_ms\n0,0,4,9,1,x\n' >"$WORK/nan.csv"
expect_exit 1 "nan.csv:2: column bwd_ms: \"x\" is not a number" "$DDPSIM" calibrate "$WORK/nan.csv" --out "$out/m.json"
printf 'step,rank,batch_size,max_len,fwd_ms,bwd_ms\n0,0,4,9,1,1e307\n' >"$WORK/huge.csv"
expect_exit 1 "huge.csv:2: column bwd_ms: expected a time from 0 to 1e7 ms, got \"1e307\"" "$DDPSIM" calibrate \
  "$WORK/huge.csv" --out "$out/m.json"
printf '# world_size=2\nstep,rank,batch_size,max_len,step_ms\n0,0,4,9,1\n0,1,4,9,1\n1,0,4,9,1\n1,5,4,9,1\n' >"$WORK/rank5.csv"
expect_exit 1 "rank5.csv:6: rank 5, but metadata world_size=2 \(ranks 0 to 1\)" "$DDPSIM" replay "$WORK/rank5.csv" \
  --model rtx3090-distilbert --out "$out/r"
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
# Traces that contradict themselves: a column named twice, an explicit global batch of 0 or one
# that is not the step's sum, a row without its policy. A spreadsheet's byte order mark is fine.
printf 'step,rank,batch_size,max_len,fwd_ms,fwd_ms\n0,0,4,9,1,2\n' >"$WORK/twice.csv"
expect_exit 1 'twice.csv:1: column "fwd_ms" appears twice in the header' "$DDPSIM" calibrate "$WORK/twice.csv" --out "$out/m.json"
printf 'step,rank,batch_size,max_len,step_ms,global_batch\n0,0,4,9,1,0\n' >"$WORK/gb0.csv"
expect_exit 1 'gb0.csv:2: column global_batch: expected at least 1' "$DDPSIM" replay "$WORK/gb0.csv" --model rtx3090-distilbert
printf 'step,rank,batch_size,max_len,step_ms,global_batch\n0,0,4,9,1,8\n0,1,3,9,1,8\n' >"$WORK/gbsum.csv"
expect_exit 1 'gbsum.csv: policy trace, step 0: global_batch 8 is not the sum of the ranks. batch_size \(7\)' \
  "$DDPSIM" replay "$WORK/gbsum.csv" --model rtx3090-distilbert
# A step missing inside a trace (a resumed run's trace may start late, not skip), and steps
# whose batches do not sum to the metadata's global batch (token_budget's may).
printf 'step,rank,batch_size,max_len,step_ms\n3,0,4,9,1\n4,0,4,9,1\n6,0,4,9,1\n' >"$WORK/gap.csv"
expect_exit 1 'gap.csv:4: policy trace: step 6 follows step 4 \(a trace.s steps are consecutive' \
  "$DDPSIM" replay "$WORK/gap.csv" --model rtx3090-distilbert
printf '# global_batch=8\nstep,rank,batch_size,max_len,step_ms\n0,0,4,9,1\n0,1,4,9,1\n1,0,4,9,1\n1,1,3,9,1\n' \
  >"$WORK/gbmeta.csv"
expect_exit 1 'gbmeta.csv:5: policy trace, step 1: the ranks. batch_size sum to 7, but metadata global_batch=8' \
  "$DDPSIM" replay "$WORK/gbmeta.csv" --model rtx3090-distilbert
sed -i '1i # policy=token_budget' "$WORK/gbmeta.csv"
expect_ok "$DDPSIM" replay "$WORK/gbmeta.csv" --model rtx3090-distilbert
printf '# global_batch=-8\nstep,rank,batch_size,max_len,step_ms\n0,0,4,9,1\n' >"$WORK/gbneg.csv"
expect_exit 1 'gbneg.csv:1: metadata global_batch=-8: expected an integer from 1 to 10000000' \
  "$DDPSIM" replay "$WORK/gbneg.csv" --model rtx3090-distilbert
# Token counts the row's shape cannot hold, a length beyond any config's, metadata that
# disagrees with the rows.
printf 'step,rank,batch_size,max_len,real_tokens,padded_tokens,step_ms\n0,0,4,9,37,36,1\n' >"$WORK/real.csv"
expect_exit 1 'real.csv:2: column real_tokens: 37 tokens cannot be 4 samples of 1 to 9 tokens' \
  "$DDPSIM" replay "$WORK/real.csv" --model rtx3090-distilbert
printf 'step,rank,batch_size,max_len,real_tokens,padded_tokens,step_ms\n0,0,4,9,20,7,1\n' >"$WORK/padded.csv"
expect_exit 1 'padded.csv:2: column padded_tokens: expected 36 \(batch_size × max_len\), got 7' \
  "$DDPSIM" replay "$WORK/padded.csv" --model rtx3090-distilbert
printf 'step,rank,batch_size,max_len,step_ms\n0,0,4,2000000,1\n' >"$WORK/long.csv"
expect_exit 1 'long.csv:2: column max_len: expected at most 1000000 tokens' \
  "$DDPSIM" replay "$WORK/long.csv" --model rtx3090-distilbert
printf '# world_size=3\nstep,rank,batch_size,max_len,step_ms\n0,0,4,9,1\n0,1,4,9,1\n' >"$WORK/ws.csv"
expect_exit 1 'ws.csv: metadata world_size=3, but policy trace has ranks 0 to 1' \
  "$DDPSIM" replay "$WORK/ws.csv" --model rtx3090-distilbert
printf 'step,rank,batch_size,max_len,fwd_ms,bwd_ms\n0,0,4,9,0,0\n1,0,8,9,0,0\n2,0,4,30,0,0\n' >"$WORK/zero.csv"
expect_exit 1 'zero.csv: every fwd_ms is 0 \(3 rows\): nothing to fit' "$DDPSIM" calibrate "$WORK/zero.csv" --out "$out/m.json"
expect_exit 2 'one.csv: given twice' "$DDPSIM" calibrate "$WORK/one.csv" "$WORK/../$(basename "$WORK")/one.csv" \
  --out "$out/m.json"
printf 'step,rank,policy,batch_size,max_len,step_ms\n0,0,,4,9,1\n' >"$WORK/nopolicy.csv"
expect_exit 1 'nopolicy.csv:2: column policy: empty' "$DDPSIM" replay "$WORK/nopolicy.csv" --model rtx3090-distilbert
printf '\xef\xbb\xbfstep,rank,batch_size,max_len,step_ms\n0,0,4,9,1\n' >"$WORK/bom.csv"
expect_ok "$DDPSIM" replay "$WORK/bom.csv" --model rtx3090-distilbert
# An output's folder is created as needed.
expect_ok "$DDPSIM" calibrate "$WORK/sim/steps.csv" --out "$WORK/new/folder/m.json"
[[ -s $WORK/new/folder/m.json ]] || fail "calibrate did not create the --out folder"
# A gain compares runs of one world size.
expect_ok "$DDPSIM" run --steps 5 --policies minmax --set training.world_size=2 --set training.global_batch=8 --out "$WORK/g2"
expect_exit 1 'steps.csv: 4 ranks, .*g2/steps.csv 2: a gain compares runs of one world size' "$DDPSIM" validate \
  --measured "$WORK/g2/steps.csv" --baseline "$WORK/sim/steps.csv" --model rtx3090-distilbert
printf 'step,rank,batch_size,max_len,fwd_ms,bwd_ms\n0,0,4,9,1,2\n1,0,4,9,1,2\n2,3,4,9,1,2\n' >"$WORK/gap.csv"
expect_exit 1 "gap.csv:4: rank 3, but policy .*'s steps do not all have 4 ranks" "$DDPSIM" calibrate "$WORK/gap.csv" \
  --out "$out/m.json"
# A row timed in one phase only is left out of the fit, and the report says so.
printf 'step,rank,batch_size,max_len,fwd_ms,bwd_ms\n0,0,2,8,1,2\n1,0,4,8,2,4\n2,0,2,32,3,6\n3,0,8,16,4,8\n4,0,4,64,,9\n' \
  >"$WORK/half.csv"
expect_ok "$DDPSIM" calibrate "$WORK/half.csv" --out "$WORK/half.json"
grep -q "left out 1 row(s) with only one of fwd_ms and bwd_ms" "$WORK/out" || fail "calibrate did not say it left a row out"
# --set is checked against the trace's ranks, and what the trace fixes cannot be set.
expect_ok "$DDPSIM" replay "$WORK/g2/steps.csv" --model rtx3090-distilbert --set 'simulation.rank_speed=[1,2]'
expect_exit 1 'rank_speed lists 4 ranks, world_size is 2' "$DDPSIM" replay "$WORK/g2/steps.csv" \
  --model rtx3090-distilbert --set 'simulation.rank_speed=[1,2,1,1]'
expect_exit 1 'stragglers.*rank 3' "$DDPSIM" validate --measured "$WORK/g2/steps.csv" --model rtx3090-distilbert \
  --set 'simulation.stragglers=[{"rank": 3, "factor": 2, "from_step": 0, "to_step": 2}]'
expect_exit 1 'g2/steps.csv: the trace has 2 ranks, --set training.world_size says 4' "$DDPSIM" replay \
  "$WORK/g2/steps.csv" --model rtx3090-distilbert --set training.world_size=4
for key in training.steps=3 training.global_batch=8 training.max_length=64 'policies=["kk"]' data.source=sst2; do
  expect_exit 2 "--set ${key%%=*}: replay and validate take the steps, batches and lengths from .*, so .* would have no effect" \
    "$DDPSIM" validate --measured "$WORK/g2/steps.csv" --model rtx3090-distilbert --set "$key"
done
# Metadata is read once, before the header: a key given twice or a line among the rows would
# silently change what the lines before it said.
rows='step,rank,batch_size,max_len,fwd_ms,bwd_ms\n0,0,2,8,1,2\n0,1,2,8,1,2\n'
printf "# world_size=3\n# world_size =2\n$rows" >"$WORK/twice.csv"
expect_exit 1 'twice.csv:2: metadata world_size is given twice \(3 and 2\)' "$DDPSIM" replay "$WORK/twice.csv" \
  --model rtx3090-distilbert --out "$out/r"
printf "$rows# world_size=2\n" >"$WORK/late.csv"
expect_exit 1 'late.csv:4: metadata world_size after the header' "$DDPSIM" replay "$WORK/late.csv" \
  --model rtx3090-distilbert --out "$out/r"
printf 'step,rank,batch_size,max_len,fwd_ms,bwd_ms,opt_ms,step_ms\n0,0,2,8,10,20,2,5\n' >"$WORK/short_step.csv"
expect_exit 1 'short_step.csv:2: column step_ms: 5 is less than fwd_ms \+ bwd_ms \+ opt_ms \(32' "$DDPSIM" replay \
  "$WORK/short_step.csv" --model rtx3090-distilbert --out "$out/r"
printf 'step,rank,policy,batch_size,max_len,fwd_ms,bwd_ms\n0,0,"static,2,8,1,2\n' >"$WORK/quoted.csv"
expect_exit 1 'quoted.csv:2: column policy: "static: a trace.s fields are never quoted' "$DDPSIM" replay \
  "$WORK/quoted.csv" --model rtx3090-distilbert --out "$out/r"
# The last step an int can number is refused by the trace's line, not as a config's steps.
printf 'step,rank,batch_size,max_len,fwd_ms,bwd_ms\n2147483647,0,2,8,1,2\n' >"$WORK/last.csv"
expect_exit 1 'last.csv:2: column step: expected an integer from 0 to 2147483646' "$DDPSIM" replay "$WORK/last.csv" \
  --model rtx3090-distilbert --out "$out/r"
# Allreduce rows: whole byte counts; a time that does not grow with them fits no bandwidth, said so.
ar_rows() {  # ar_rows BYTES MS BYTES MS: a 2-rank profile with two allreduce sizes
  printf '# profile=test\n# world_size=2\nstep,rank,batch_size,max_len,fwd_ms,bwd_ms,allreduce_bytes,allreduce_ms\n'
  printf '0,0,2,8,1,2,,\n1,0,4,8,2,4,,\n2,0,2,32,3,6,,\n3,0,8,16,4,8,,\n4,0,0,0,,,%s,%s\n5,0,0,0,,,%s,%s\n' "$@"
}
ar_rows 65536.5 1 1048576 2 >"$WORK/ar_frac.csv"
expect_exit 1 'ar_frac.csv:8: column allreduce_bytes: expected a whole number of bytes from 0 to 1e15, got "65536.5"' \
  "$DDPSIM" calibrate "$WORK/ar_frac.csv" --out "$out/m.json"
ar_rows 65536 5 1048576 5 >"$WORK/ar_flat.csv"
expect_ok "$DDPSIM" calibrate "$WORK/ar_flat.csv" --out "$WORK/flat.json"
grep -q 'no link bandwidth: the time does not grow with the bytes reduced (2 sizes from 65536 to 1048576' "$WORK/out" ||
  fail "a flat allreduce fit is not said as such: $(cat "$WORK/out")"
grep -q '"link_GBps": null' "$WORK/flat.json" || fail "a flat allreduce fit wrote a bandwidth"
! grep -q 'platform.link_GBps' "$WORK/out" || fail "a flat allreduce fit advised a link bandwidth"
# A control byte in a metadata value (a config path with a newline) is written as \xNN, so the
# trace still reads back.
cp "$SRC/configs/default.json" "$WORK/a"$'\n'"b.json"
expect_ok "$DDPSIM" run "$WORK/a"$'\n'"b.json" --steps 2 --policies static --out "$WORK/nl"
grep -q '^# config=.*a\\x0ab.json$' "$WORK/nl/steps.csv" || fail "metadata value not escaped: $(head -3 "$WORK/nl/steps.csv")"
expect_ok "$DDPSIM" replay "$WORK/nl/steps.csv" --model rtx3090-distilbert
# A gain compares the step numbers both traces hold (issue 36): a baseline from steps 3 to 8
# against a policy from 0 to 5 is taken over steps 3 to 5 of each; one sharing no step is refused.
expect_ok "$DDPSIM" run --steps 6 --policies static,kk --set training.world_size=2 --set training.global_batch=8 \
  --out "$WORK/gain"
keep() {  # keep POLICY SHIFT: the run's trace of POLICY, its steps renumbered from SHIFT
  awk -F, -v OFS=, -v p="$1" -v shift="$2" '/^#/ { print; next }
    !h { h = 1; for (i = 1; i <= NF; i++) { if ($i == "policy") pc = i; if ($i == "step") sc = i }; print; next }
    $pc == p { $sc += shift; print }' "$WORK/gain/steps.csv"
}
keep kk 0 >"$WORK/kk.csv"
keep static 3 >"$WORK/late.csv"
keep static 100 >"$WORK/far.csv"
expect_exit 1 'far.csv holds steps 100 to 105, .*kk.csv \(policy kk\) steps 0 to 5: they share no step, and a gain compares the runs over the same steps' \
  "$DDPSIM" validate --measured "$WORK/kk.csv" --baseline "$WORK/far.csv" --model rtx3090-distilbert --out "$out/v"
expect_exit 1 "late.csv and .*kk.csv \(policy kk\) share steps 3 to 5, but none after the warm-ups \(the policy's steady state starts at step 4, the baseline's at step 7\)" \
  "$DDPSIM" validate --measured "$WORK/kk.csv" --baseline "$WORK/late.csv" --model rtx3090-distilbert --warmup 4 \
  --out "$out/v"
expect_ok "$DDPSIM" validate --measured "$WORK/kk.csv" --baseline "$WORK/late.csv" --model rtx3090-distilbert \
  --warmup 0 --out "$WORK/val"
grep -q "gain of kk over the baseline, both over steps 3 to 5: measured" "$WORK/out" ||
  fail "the gain line does not name the steps both traces hold: $(grep gain "$WORK/out")"
python3 - "$WORK/kk.csv" "$WORK/late.csv" "$WORK/val/validation.json" <<'PY' || fail "the gain is not taken over steps 3 to 5 of both"
import csv, json, sys
def max_step(path, first, last):
    rows = [r for r in csv.DictReader(l for l in open(path) if not l.startswith("#"))]
    steps = {}
    for r in rows:
        if first <= int(r["step"]) <= last:
            steps[int(r["step"])] = max(steps.get(int(r["step"]), 0.0), float(r["step_ms"]))
    assert len(steps) == 3, steps
    return sum(steps.values()) / len(steps)
want = 100 * (1 - max_step(sys.argv[1], 3, 5) / max_step(sys.argv[2], 3, 5))
got = json.load(open(sys.argv[3]))["policies"]["kk"]["all_steps"]
assert abs(got["measured_gain_pct"] - want) < 1e-6 * max(1, abs(want)), (got["measured_gain_pct"], want)
assert (got["gain_from_step"], got["gain_to_step"]) == (3, 5), got
PY
[[ -z $(ls -A "$out") ]] || fail "output left behind: $(ls -A "$out")"
for verb in calibrate replay validate; do
  expect_ok "$DDPSIM" "$verb" --help
  grep -q "usage: ddpsim $verb" "$WORK/out" || fail "$verb --help lacks its usage line"
done
finish
