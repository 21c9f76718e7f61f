# Gradient accumulation and packed sequences end to end: a fixed micro-batch count and VeRL's
# dynamic batching in one run, the micro-batch trace columns, replays of such traces
# reproducing their runs, and the errors around them.
source "$(dirname "$0")/lib.sh"
run=$WORK/run
expect_ok "$DDPSIM" run --steps 4 --policies static,verl:max_token_len=300 --set training.micro_batches=3 \
  --set training.global_batch=64 --out "$run"
head -n 20 "$run/steps.csv" | grep -q '^step,.*,micro_batches,micro_sizes,micro_max_lens,micro_tokens$' ||
  fail "steps.csv lacks the micro-batch columns: $(grep '^step' "$run/steps.csv")"
# static: three micro-batches of 16/3 samples in order; their sizes and tokens add up to the row's.
awk -F, '$3 == "static" { if ($17 != 3 || $18 != "6;5;5") bad++ }
         $3 ~ /^verl/ { n = split($18, s, ";"); t = split($20, k, ";"); sum = 0; tok = 0
                        for (i = 1; i <= n; i++) { sum += s[i]; tok += k[i] }
                        if (n != $17 || t != $17 || sum != $4 || tok != $6) bad++ }
         END { exit bad > 0 }' <(grep -v '^#' "$run/steps.csv" | tail -n +2) ||
  fail "micro-batch columns do not add up: $(grep -v '^#' "$run/steps.csv" | head -4)"
grep -q '"mean_micro_batches": 3' "$run/summary.json" || fail "summary.json lacks mean_micro_batches 3"
grep -q 'training.micro_batches 3 is for static; verl forms its own' "$WORK/err" ||
  fail "no note that verl ignores the micro-batch count: $(cat "$WORK/err")"
grep -q '3 micro-batches a rank' "$WORK/out" || fail "the header does not name the micro-batch count"
# A count given for verl alone would be read by nothing: refused, as ddptrain refuses it.
expect_exit 1 'training.micro_batches 2: verl forms its own micro-batches' \
  "$DDPSIM" run --policies verl --set training.micro_batches=2
# A config's policy object may switch verl's options with JSON's true and false.
printf '{"policies": ["static", {"name": "verl", "balance": false, "max_token_len": 300}]}' >"$WORK/switch.json"
expect_ok "$DDPSIM" compare "$WORK/switch.json" --steps 2
grep -q 'verl:balance=off:max_token_len=300' "$WORK/out" || fail "balance: false is not verl's balance=off"
# The figure is in summary.json for every policy once one accumulates (1 where none does).
expect_ok "$DDPSIM" compare --steps 3 --policies static,verl:max_token_len=128 --set training.max_length=128 \
  --out "$WORK/one"
python3 -c 'import json, sys
p = json.load(open(sys.argv[1]))["policies"]
assert p["static"]["mean_micro_batches"] == 1 and p["verl:max_token_len=128"]["mean_micro_batches"] > 1, p' \
  "$WORK/one/summary.json" || fail "summary.json lacks mean_micro_batches for a policy of one micro-batch"
expect_ok "$DDPSIM" replay "$run/steps.csv" --model rtx3090-distilbert \
  --out "$WORK/replay"
cmp <(grep -v '^#' "$run/steps.csv") <(grep -v '^#' "$WORK/replay/steps.csv") ||
  fail "replaying a micro-batched trace does not reproduce the run"

# Calibration says why such a trace gives no point: each row timed several shapes (issue 36).
expect_ok "$DDPSIM" run --steps 4 --policies static --set training.micro_batches=3 --set training.global_batch=48 \
  --out "$WORK/micro3"
expect_exit 1 'steps.csv: 0 distinct \(batch size, length\) point\(s\) with 0 distinct length\(s\) and 0 distinct padded-token count\(s\) \(16 row\(s\) left out: each timed its micro-batches together' \
  "$DDPSIM" calibrate "$WORK/micro3/steps.csv" --out "$WORK/m.json"
[[ ! -e $WORK/m.json ]] || fail "a refused calibration wrote its model"
expect_exit 1 'verl: max_token_len=100 is below max_length=256' "$DDPSIM" run --policies verl:max_token_len=100
expect_exit 1 'training: key "micro_batches" is number 0: expected an integer from 1 to 10000' "$DDPSIM" run --set training.micro_batches=0
expect_exit 1 'verl: option balance must be on or off, got "maybe"' "$DDPSIM" run --policies verl:balance=maybe
# A trace whose micro-batches do not add up to its row is named by line and column.
sed '0,/^0,0,static,16,/s/,3,6;5;5,/,3,6;5;4,/' "$run/steps.csv" >"$WORK/bad.csv"
expect_exit 1 'bad.csv:[0-9]+: column micro_sizes: the micro-batches hold 15 samples, the row 16' \
  "$DDPSIM" replay "$WORK/bad.csv" --model rtx3090-distilbert
sed '0,/^0,0,static,16,/s/,3,6;5;5,/,3,6;5,/' "$run/steps.csv" >"$WORK/short.csv"
expect_exit 1 'short.csv:[0-9]+: column micro_sizes: 2 values, but micro_batches is 3' \
  "$DDPSIM" replay "$WORK/short.csv" --model rtx3090-distilbert
# Each micro-batch must be possible, the columns come as a set, and values stay in range.
bad_row() {  # bad_row NAME SED-EXPRESSION: a copy of the run's trace with its first static row edited
  sed "0,/^0,0,static,16,/{/^0,0,static,16,/$2}" "$run/steps.csv" >"$WORK/$1.csv"
}
bad_row huge 's/,3,6;5;5,/,3,9223372036854775807;9223372036854775807;18,/'
expect_exit 1 'huge.csv:[0-9]+: column micro_sizes: expected integers from 0 to 2147483647' \
  "$DDPSIM" replay "$WORK/huge.csv" --model rtx3090-distilbert
bad_row empty 's/,3,6;5;5,/,,6;5;5,/'
expect_exit 1 'empty.csv:[0-9]+: column micro_batches: empty, but micro_sizes lists micro-batches' \
  "$DDPSIM" replay "$WORK/empty.csv" --model rtx3090-distilbert
cut -d, -f1-16,18- <(grep -v '^#' "$run/steps.csv") >"$WORK/nocount.csv"
expect_exit 1 'nocount.csv:1: the header has micro-batch columns but lacks "micro_batches"' \
  "$DDPSIM" replay "$WORK/nocount.csv" --model rtx3090-distilbert
sed 's/^# attention=padded$/# attention=packed/' "$run/steps.csv" >"$WORK/says-packed.csv"
expect_exit 1 'says-packed.csv:[0-9]+: metadata says attention=packed but the header lacks .*"sq_tokens"' \
  "$DDPSIM" replay "$WORK/says-packed.csv" --model rtx3090-distilbert

# Packed sequences: sq_tokens columns, nothing padded, and a replay that must know it.
packed=$WORK/packed
expect_ok "$DDPSIM" run --steps 3 --policies static,verl:max_token_len=300 --set training.micro_batches=2 \
  --set training.attention=packed --out "$packed"
grep -q '^# attention=packed$' "$packed/steps.csv" || fail "a packed trace does not say so in its metadata"
grep -v '^#' "$packed/steps.csv" | head -1 | grep -q ',micro_tokens,sq_tokens,micro_sq_tokens$' ||
  fail "a packed trace lacks sq_tokens and micro_sq_tokens: $(grep '^step' "$packed/steps.csv")"
awk -F, 'NR > 1 && $6 != $7 { bad++ } END { exit bad > 0 }' <(grep -v '^#' "$packed/steps.csv") ||
  fail "packed rows should compute on their real tokens (padded_tokens = real_tokens)"
expect_ok "$DDPSIM" replay "$packed/steps.csv" --model rtx3090-distilbert --out "$WORK/packed-replay"
cmp <(grep -v '^#' "$packed/steps.csv") <(grep -v '^#' "$WORK/packed-replay/steps.csv") ||
  fail "replaying a packed trace does not reproduce the run"
for attention in packed padded; do
  expect_ok "$DDPSIM" run --steps 3 --policies static --set training.attention=$attention --out "$WORK/static-$attention"
done
expect_exit 1 'static-padded/steps.csv padded batches, .*static-packed/steps.csv packed sequences: a gain compares runs of one attention' \
  "$DDPSIM" validate --measured "$WORK/static-packed/steps.csv" --baseline "$WORK/static-padded/steps.csv" \
  --model rtx3090-distilbert
sed '0,/^0,0,static,16,/s/,\([0-9]*\);\([0-9]*\)$/,1;\2/' "$packed/steps.csv" >"$WORK/pairs.csv"
expect_exit 1 'pairs.csv:[0-9]+: column micro_sq_tokens: micro-batch 1 of 2: Σ s² = 1 is impossible' \
  "$DDPSIM" replay "$WORK/pairs.csv" --model rtx3090-distilbert --set training.attention=packed
expect_exit 1 'recorded packed sequences \(column sq_tokens\), which training.attention "padded" cannot replay' \
  "$DDPSIM" replay "$packed/steps.csv" --model rtx3090-distilbert --set training.attention=padded
expect_exit 1 'the config packs sequences .* but the trace has no sq_tokens column' \
  "$DDPSIM" replay "$run/steps.csv" --model rtx3090-distilbert --set training.attention=packed
sed '0,/"form": "analytic"/s//"form": "grid"/' "$SRC/models/cpu-distilbert-small-1core.json" >"$WORK/grid.json"
expect_exit 1 'training.attention "packed" needs the analytic or roofline form .* uses a measured grid' \
  "$DDPSIM" run --set model="$WORK/grid.json" --set training.attention=packed
expect_exit 1 'attention is "padded" .* or "packed" .*, got "ragged"' "$DDPSIM" run --set training.attention=ragged
# Under FSDP every micro-batch gathers every unit: no_sync drops all but the last reduce-scatter
# (a shorter step) and holds the unsharded gradients (more memory); a policy that leaves a rank
# fewer samples than micro-batches is refused at that step, and writes nothing.
for sync in false true; do
  expect_ok "$DDPSIM" run --steps 20 --policies static,verl --set training.data_parallel=fsdp \
    --set training.micro_batches=2 --set training.no_sync=$sync --out "$WORK/fsdp-$sync"
  said=$([[ $sync == true ]] && echo 'after the last micro-batch \(no_sync\)' || echo 'after every micro-batch')
  grep -qE "data parallel: fsdp .*reduce-scattered $said" "$WORK/out" ||
    fail "the no_sync=$sync run's header does not say how it reduce-scatters: $(grep 'data parallel' "$WORK/out")"
done
python3 - "$WORK/fsdp-false/summary.json" "$WORK/fsdp-true/summary.json" <<'PY' ||
import json, sys
every, last = (json.load(open(f))["policies"]["static"] for f in sys.argv[1:])
sys.exit(0 if last["mean_max_step_ms"] < every["mean_max_step_ms"]
         and last["mean_max_peak_mem_mib"] > every["mean_max_peak_mem_mib"] else 1)
PY
  fail "no_sync's step is not shorter, or its memory not larger, than with a reduce-scatter per micro-batch"
expect_exit 1 'policy minmax, step [0-9]+: rank [0-9]+ runs [0-9]+ micro-batches and rank [0-9]+ runs [0-9]+ .* under training.data_parallel "fsdp" every rank runs as many' \
  "$DDPSIM" run --steps 50 --policies static,minmax --set training.data_parallel=fsdp --set training.micro_batches=10 \
  --out "$WORK/unequal"
[[ ! -e $WORK/unequal ]] || fail "a refused run left $WORK/unequal behind"
expect_exit 1 'training: backward_prefetch sets FSDP.s re-gathers .* data_parallel "ddp" has none' \
  "$DDPSIM" run --set training.backward_prefetch=none
expect_exit 1 'no_sync picks FSDP.s gradient accumulation .* data_parallel "zero2" reduce-scatters every micro-batch' \
  "$DDPSIM" run --set training.data_parallel=zero2 --set training.micro_batches=2 --set training.no_sync=true
finish
