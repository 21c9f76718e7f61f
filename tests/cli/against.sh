# compare --against: configs as columns. Each column's figures are those of its own compare run
# with the values set, the gains are against the config's own column, the intervals carry the
# network term only where a column's network is a preset's, and what --against cannot do is
# refused in one line.
source "$(dirname "$0")/lib.sh"
base=(--steps 40 --policies sorted)
mean_of() { awk '/^max step time, mean/ { print $NF; exit }' "$WORK/out"; }

expect_ok "$DDPSIM" compare "${base[@]}" --against zero1:training.data_parallel=zero1 \
  --against 8gpus:training.world_size=8 --against 8gpus:platform.topology=nvlink
cp "$WORK/out" "$WORK/against.txt"
header=$(grep -E '^ +base +zero1 +8gpus$' "$WORK/against.txt")
[[ -n $header ]] || fail "the table's columns are not base, zero1, 8gpus: $(grep -m1 '^ ' "$WORK/against.txt")"
grep -q '^  8gpus: training.world_size=8, platform.topology=nvlink$' "$WORK/against.txt" ||
  fail "the 8gpus column does not say what it sets"
grep -q '^    G=8 ranks, B=48, 40 steps' "$WORK/against.txt" || fail "the 8gpus column does not show its world"
grep -q '^    data parallel: zero1 ' "$WORK/against.txt" || fail "the zero1 column does not show its sharding"
row=$(grep '^max step time, mean' "$WORK/against.txt")
read -r -a cells <<<"${row#max step time, mean (ms)}"  # base, zero1 (change), 8gpus (change)
for column in "base:" "zero1:--set training.data_parallel=zero1" \
  "8gpus:--set training.world_size=8 --set platform.topology=nvlink"; do
  label=${column%%:*}
  read -r -a sets <<<"${column#*:}"
  expect_ok "$DDPSIM" compare "${base[@]}" "${sets[@]}"
  want=$(mean_of)
  case $label in base) got=${cells[0]} ;; zero1) got=${cells[1]} ;; 8gpus) got=${cells[3]} ;; esac
  [[ $got == "$want" ]] || fail "column $label's mean step is $got, its own run gives $want"
done
expect_ok "$DDPSIM" compare "${base[@]}" --against zero1:training.data_parallel=zero1 \
  --against 8gpus:training.world_size=8 --against 8gpus:platform.topology=nvlink
cmp -s "$WORK/out" "$WORK/against.txt" || fail "two identical --against runs differ"
# An unlabelled value whose JSON holds ':' is one column, named by itself.
expect_ok "$DDPSIM" compare "${base[@]}" --against 'platform={"topology":"nvlink"}'
grep -qE '^ +base +platform=\{"topology":"nvlink"\}$' "$WORK/out" ||
  fail "an unlabelled JSON value is not its own column: $(grep -m1 '^ ' "$WORK/out")"

# Intervals: the zero1 column keeps the model's measured network, the NVLink column's is a
# preset's and carries the network term; a label-less value is its own column, named by itself.
expect_ok "$DDPSIM" compare "${base[@]}" --against training.data_parallel=zero1 --against nv:platform.topology=nvlink \
  --replicates 3
grep -qE '^training.data_parallel=zero1 +[0-9.]+ \[' "$WORK/out" || fail "no replicates row for the label-less column"
zero1=$(grep -A1 -E '^  training.data_parallel=zero1 +[-+][0-9.]+% \(seeds' "$WORK/out" | tail -1)
nv=$(grep -A1 -E '^  nv +[-+][0-9.]+% \(seeds' "$WORK/out" | tail -1)
[[ -n $zero1 && -n $nv ]] || fail "no prediction intervals: $(tail -8 "$WORK/out")"
[[ $zero1 == *network* ]] && fail "the zero1 column's network is the model's, yet it has a network term: $zero1"
[[ $nv == *network* ]] || fail "the NVLink column's network is a preset's, and has no network term: $nv"
[[ $nv == *"session ±5.50"* ]] || fail "a column's session term is not that of runs apart (2.2 x 2.5): $nv"

# --out: summary.json alone, each column's values, config and figures.
expect_ok "$DDPSIM" compare "${base[@]}" --against nv:platform.topology=nvlink --replicates 2 --out "$WORK/o2"
expect_ok "$DDPSIM" compare "${base[@]}" --against nv:platform.topology=nvlink --replicates 2 --out "$WORK/o"
diff <(grep -v _sched_us "$WORK/o/summary.json") <(grep -v _sched_us "$WORK/o2/summary.json") >/dev/null ||
  fail "two identical --against runs wrote different summaries (decision times, measured, aside)"
[[ $(ls "$WORK/o") == summary.json ]] || fail "--against --out wrote $(ls "$WORK/o"), expected summary.json alone"
python3 - "$WORK/o/summary.json" <<'PY' || fail "summary.json lacks the columns"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["policy"] == "sorted" and list(s["columns"]) == ["base", "nv"], s.keys()
assert s["columns"]["nv"]["sets"] == ["platform.topology=nvlink"]
assert s["columns"]["nv"]["config"]["platform"]["topology"] == "nvlink"
assert "network" in s["replicates"]["columns"]["nv"]["gain"]["terms_half_width_pp"]
PY

# --register, then validate --registered --column: the simulator's own runs of each column as
# the "measured" ones, so each measured gain is the registered seed's, inside its interval.
reg=(--steps 40 --policies sorted --against zero1:training.data_parallel=zero1 --against b96:training.global_batch=96)
expect_ok "$DDPSIM" compare "${reg[@]}" --replicates 3 --register "$WORK/reg.json"
expect_ok "$DDPSIM" run --steps 40 --policies sorted --out "$WORK/runs/base"
expect_ok "$DDPSIM" run --steps 40 --policies sorted --set training.data_parallel=zero1 --out "$WORK/runs/zero1"
expect_ok "$DDPSIM" run --steps 40 --policies sorted --set training.global_batch=96 --out "$WORK/runs/b96"
expect_ok "$DDPSIM" run --steps 40 --policies sorted --set training.world_size=8 --out "$WORK/runs/w8"
for c in zero1 b96; do
  expect_ok "$DDPSIM" validate --registered "$WORK/reg.json" --column $c --measured "$WORK/runs/$c/steps.csv" \
    --baseline "$WORK/runs/base/steps.csv" --out "$WORK/val-$c"
  python3 - "$WORK/val-$c/validation.json" "$WORK/reg.json" $c <<'PY' || fail "column $c's score is not the registered seed's gain"
import json, sys
v, r, c = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
s = v["registered"]["policies"][c]
assert s["measured_in_prediction_interval"], s
assert s["per_sample"] == (c == "b96") == s["registered_per_sample"], s
lo, hi = r["predicted"]["columns"][c]["gain"]["seeds_interval"]  # the run is one of the seeds (traces keep 3 decimals)
assert lo - 0.01 <= s["measured_gain_pct"] <= hi + 0.01, (lo, s["measured_gain_pct"], hi)
# Each column's mean step, and the base's, registered with its interval and scored against it.
for score, col in ((s, c), (v["registered"]["baseline"], "base")):
    step = r["predicted"]["columns"][col]["step"]
    assert score["registered_mean_pi95"] == step["prediction_interval_ms"], (col, score)
    assert score["measured_mean_in_prediction_interval"], (col, score)
PY
done
grep -Eq '^  base \(baseline\): mean [0-9.]+ ms registered \[[0-9.]+, [0-9.]+\], .*: inside the prediction interval; P95 / mean [0-9.]+ registered, [0-9.]+ measured \([-+][0-9.]+%\)$' \
  "$WORK/out" || fail "the base column's step is not scored: $(grep 'baseline): mean' "$WORK/out")"
"$DDPSIM" scorecard "$WORK" >"$WORK/card.md" 2>/dev/null || fail "scorecard does not read a column's validation"
grep -qE '\| zero1 \| .* \| yes \|' "$WORK/card.md" || fail "the scorecard lacks the zero1 column's score"
grep -q "^Measured inside the registered prediction interval: 2 of 2 (configs against each other, which the table above leaves out: 2 of 2)" \
  "$WORK/card.md" || fail "the scorecard does not count the columns' scores: $(grep -i 'measured inside' "$WORK/card.md")"
expect_exit 2 'registers configs against each other \(.*\): give --column LABEL' "$DDPSIM" validate \
  --registered "$WORK/reg.json" --measured "$WORK/runs/zero1/steps.csv" --baseline "$WORK/runs/base/steps.csv"
expect_exit 1 'runs/base/steps.csv: training.data_parallel is ddp, column zero1.s in the registered prediction' \
  "$DDPSIM" validate --registered "$WORK/reg.json" --column zero1 --measured "$WORK/runs/base/steps.csv" \
  --baseline "$WORK/runs/zero1/steps.csv"
expect_exit 2 '--column nope: .* registers the columns b96, zero1 against base' "$DDPSIM" validate \
  --registered "$WORK/reg.json" --column nope --measured "$WORK/runs/zero1/steps.csv" \
  --baseline "$WORK/runs/base/steps.csv"
mkdir -p "$WORK/stale-val" && : >"$WORK/stale-val/validation.csv"
expect_exit 2 'holds a validation.csv, which a column.s score does not write' "$DDPSIM" validate \
  --registered "$WORK/reg.json" --column zero1 --measured "$WORK/runs/zero1/steps.csv" \
  --baseline "$WORK/runs/base/steps.csv" --out "$WORK/stale-val"
expect_exit 2 '--print-config prints the columns. configs and runs nothing, so --register' "$DDPSIM" compare \
  "${reg[@]}" --replicates 3 --register "$WORK/never.json" --print-config
expect_exit 2 '--column base: .* registers the columns b96, zero1 against base' "$DDPSIM" validate \
  --registered "$WORK/reg.json" --column base --measured "$WORK/runs/zero1/steps.csv" \
  --baseline "$WORK/runs/base/steps.csv"
expect_exit 1 'training.world_size is 8, column zero1.s in the registered prediction .* 4' "$DDPSIM" validate \
  --registered "$WORK/reg.json" --column zero1 --measured "$WORK/runs/w8/steps.csv" --baseline "$WORK/runs/base/steps.csv"
expect_exit 1 'training.global_batch is 96, column base.s in the registered prediction .* 48' "$DDPSIM" validate \
  --registered "$WORK/reg.json" --column zero1 --measured "$WORK/runs/zero1/steps.csv" --baseline "$WORK/runs/b96/steps.csv"
expect_exit 2 '--warmup: a registration of configs is scored over every step' "$DDPSIM" validate --warmup 5 \
  --registered "$WORK/reg.json" --column zero1 --measured "$WORK/runs/zero1/steps.csv" --baseline "$WORK/runs/base/steps.csv"
expect_exit 2 '--column zero1 names a column of a registration of configs' "$DDPSIM" validate --column zero1 \
  --measured "$WORK/runs/zero1/steps.csv" --baseline "$WORK/runs/base/steps.csv" --model rtx3090-distilbert

# An edited registration of columns is refused naming its key, before anything is scored.
for edit in 'del d["setting"]["columns"]["zero1"]["world_size"]:setting.columns.zero1.world_size is missing' \
  'd["predicted"]["baseline"] = "b97":predicted.baseline is "b97", not a column of' \
  'd["predicted"]["columns"]["zero1"]["gain"]["gain_pct"] = 99:outside its own prediction_interval'; do
  python3 - "$WORK/reg.json" "$WORK/edited.json" "${edit%%:*}" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(d, open(sys.argv[2], "w"))
PY
  expect_exit 1 "${edit#*:}" "$DDPSIM" validate --registered "$WORK/edited.json" --column zero1 \
    --measured "$WORK/runs/zero1/steps.csv" --baseline "$WORK/runs/base/steps.csv"
done

# traces/cpu/prereg20's registration, written after its runs, holds the prediction committed before
# them: prediction/summary.json, as committed in dc94a30 (its hash pinned here).
python3 - "$SRC/traces/cpu/prereg20" <<'PY' || fail "prereg20/prediction.json is not the prediction committed before the runs"
import hashlib, json, sys
summary = sys.argv[1] + "/prediction/summary.json"
assert hashlib.sha256(open(summary, "rb").read()).hexdigest() == \
    "03887f2751daccfacaf68a48ddfbe865fc2218b8d1f7f704cd8b89e30f388184", "prediction/summary.json changed"
assert json.load(open(sys.argv[1] + "/prediction.json"))["predicted"] == json.load(open(summary))["replicates"]
PY

# --print-config: every column's resolved config, by label.
expect_ok "$DDPSIM" compare "${base[@]}" --against nv:platform.topology=nvlink --print-config
python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); assert list(c) == ["base", "nv"], list(c)
assert c["nv"]["platform"]["topology"] == "nvlink" and c["base"]["platform"]["topology"] == "pcie"' "$WORK/out" ||
  fail "--print-config does not give each column's config"

# Refusals.
expect_exit 2 '--against "zero1:": expected \[LABEL:\]KEY=VALUE' "$DDPSIM" compare "${base[@]}" --against zero1:
expect_exit 2 '--against "training.world_size": expected' "$DDPSIM" compare "${base[@]}" --against training.world_size
expect_exit 2 '"base" names the config' "$DDPSIM" compare "${base[@]}" --against base:training.world_size=8
expect_exit 2 'compares configs under one policy, and the config has 2 \(static, sorted\)' \
  "$DDPSIM" compare --steps 5 --policies static,sorted --against training.world_size=8
expect_exit 2 '--against four \(training.world_size=4\) is the same config as the config itself' \
  "$DDPSIM" compare "${base[@]}" --against four:training.world_size=4
expect_exit 2 '--against b \(.*\) is the same config as --against a' \
  "$DDPSIM" compare "${base[@]}" --against a:training.world_size=8 --against b:training.world_size=8
expect_exit 2 '--against two \(.*\) sets the policies: every column runs the config.s sorted' \
  "$DDPSIM" compare "${base[@]}" --against 'two:policies=["static","kk"]'
expect_exit 2 '--against kk \(.*\) sets the policies' "$DDPSIM" compare "${base[@]}" --against 'kk:policies=["kk"]'
expect_exit 2 '--against s \(training.seed=3\) sets training.seed' "$DDPSIM" compare "${base[@]}" \
  --against s:training.seed=3
expect_exit 2 '--against training.steps=80 sets training.steps: every column runs the config.s 40 steps' \
  "$DDPSIM" compare "${base[@]}" --against training.steps=80
expect_exit 2 'column a sets training.world_size already \(training.world_size=8\)' "$DDPSIM" compare "${base[@]}" \
  --against a:training.world_size=8 --against a:training.world_size=16
expect_exit 2 'label "z.+ro": expected ASCII letters' "$DDPSIM" compare "${base[@]}" --against 'zéro:training.world_size=8'
expect_exit 2 'label " ": expected ASCII letters' "$DDPSIM" compare "${base[@]}" --against ' :training.world_size=8'
expect_exit 2 '--against pp \(.*\) makes a pipeline job' "$DDPSIM" compare "${base[@]}" \
  --against 'pp:parallel={"stages":2}'
expect_exit 2 '--against sets configs side by side, and --timeline-steps' "$DDPSIM" compare "${base[@]}" \
  --against nv:platform.topology=nvlink --timeline-steps 2:4
mkdir -p "$WORK/stale" && : >"$WORK/stale/steps.csv"
expect_exit 2 'holds a steps.csv, which --against does not write' "$DDPSIM" compare "${base[@]}" \
  --against nv:platform.topology=nvlink --out "$WORK/stale"
# A replicate's refusal names its seed and its column, and leaves no summary behind.
expect_exit 1 'replicate 2 of 3 \(training\.seed 2\): --against f \(training.data_parallel=fsdp, training.micro_batches=8\): policy minmax, step 1: rank 0 runs 8 micro-batches' \
  "$DDPSIM" compare --set training.seed=1 --steps 5 --policies minmax --against f:training.data_parallel=fsdp \
  --against f:training.micro_batches=8 --replicates 3 --out "$WORK/failed"
[[ -e $WORK/failed/summary.json ]] && fail "a failed --against run left its summary.json"
expect_exit 2 'run each config with ddpsim compare --set KEY=VALUE --timeline' \
  "$DDPSIM" compare "${base[@]}" --against training.world_size=8 --timeline "$WORK/never.json"
expect_exit 2 'the config is a pipeline job' "$DDPSIM" compare "$SRC/configs/pipeline-study.json" \
  --against parallel.stages=2
expect_exit 1 '^ddpsim compare: --against big \(training.world_size=0\): .*world_size' \
  "$DDPSIM" compare "${base[@]}" --against big:training.world_size=0
expect_exit 2 'against' "$DDPSIM" run "${base[@]}" --against training.world_size=8
finish
