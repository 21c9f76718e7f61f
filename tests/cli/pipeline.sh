# A pipeline-parallel config through `ddpsim run`: the table, summary.json, byte-identical
# reruns, and bad parallel sections named by key.
source "$(dirname "$0")/lib.sh"
study=$SRC/configs/pipeline-study.json
PY=${PYTHON:-python3}
expect_ok "$DDPSIM" run "$study" --set parallel.stages=4 --set training.world_size=4 --set parallel.abstract.transfer=0 \
  --set parallel.fwd_impact=0 --set parallel.bwd_impact=0 --out "$WORK/a"
# One group, no transfers: (M + S - 1)(f + b) = 11 × 3.
grep -qE 'step time, mean \(units\) +33\.0000' "$WORK/out" || fail "no-communication step is not 33: $(cat "$WORK/out")"
"$PY" - "$WORK/a/summary.json" <<'PY' || fail "summary.json lacks the pipeline figures"
import json, sys
s = json.load(open(sys.argv[1]))
assert list(s["policies"]) == ["abstract"], s
run = s["policies"]["abstract"]
assert abs(run["mean_step_time"] - 33) < 1e-9, s
assert abs(run["compute_share"] - 24 / 33) < 1e-9, s
assert abs(run["bubble_mean"] - 9 / 33) < 1e-9, s
assert s["config"]["parallel"]["schedule"] == "gpipe", s
assert run["max_in_flight"] == [8, 8, 8, 8], s
PY
expect_ok "$DDPSIM" run "$study" --set parallel.channels.model=shared --out "$WORK/b"
expect_ok "$DDPSIM" run "$study" --set parallel.channels.model=shared --out "$WORK/c"
cmp -s "$WORK/b/summary.json" "$WORK/c/summary.json" || fail "two identical pipeline runs differ"
grep -q 'grad_sync: volume' "$WORK/out" || fail "no grad_sync traffic with two data-parallel groups"

# Model mode: stage times from the performance model for each policy's micro-batches of SST-2.
expect_ok "$DDPSIM" run --policies static,sorted --steps 5 --set training.world_size=8 --set training.global_batch=64 \
  --set 'parallel={"stages": 2, "schedule": "1f1b", "micro_batches": 4, "partition": "balanced"}' --out "$WORK/m"
"$PY" - "$WORK/m/summary.json" <<'PY' || fail "model-mode summary.json is not as expected"
import json, sys
s = json.load(open(sys.argv[1]))
assert list(s["policies"]) == ["static", "sorted"], s
assert s["units"]["time"] == "ms", s
assert sum(s["stage_layers"]) > 2 and len(s["stage_layers"]) == 2, s
for r in s["policies"].values():
    assert r["mean_step_time"] > 0 and 0 < r["compute_share"] < 1, r
    assert r["max_in_flight"] == [2, 1] and len(r["stage_peak_mem_mib"]) == 2, r
    assert r["grad_sync_transfers"] > 0 and 0 < r["grad_sync_utilisation"] < 1, r
import csv, os, statistics
rows = list(csv.DictReader(open(os.path.join(os.path.dirname(sys.argv[1]), "pipeline_steps.csv"))))
assert [(r["policy"], r["step"]) for r in rows] == [(p, str(t)) for p in ("static", "sorted") for t in range(5)], rows
for p, r in s["policies"].items():
    mine = [row for row in rows if row["policy"] == p]
    assert abs(statistics.mean(float(row["step_ms"]) for row in mine) - r["mean_step_time"]) < 1e-6, (p, mine)
    assert abs(statistics.mean(float(row["bubble"]) for row in mine) - r["bubble_mean"]) < 1e-6, (p, mine)
PY
# On a cluster, a group's stages share a node and the syncs cross NICs: a slower NIC slows the step.
cluster=(--policies kk --steps 3 --set training.world_size=16 --set training.global_batch=64
         --set 'platform={"topology": "cluster", "gpus_per_node": 8}'
         --set 'parallel={"stages": 4, "schedule": "1f1b", "micro_batches": 4, "channels": {"model": "shared"}}')
expect_ok "$DDPSIM" run "${cluster[@]}" --out "$WORK/fast-nic"
grep -q 'links: cluster, GPU links 450 GB/s and 2 us inside a node; 2 nodes, NICs 50 GB/s' "$WORK/out" ||
  fail "the pipeline header does not describe the cluster: $(cat "$WORK/out")"
expect_ok "$DDPSIM" run "${cluster[@]}" --set platform.nic_GBps=0.05 --out "$WORK/slow-nic"
"$PY" - "$WORK/fast-nic/summary.json" "$WORK/slow-nic/summary.json" <<'PY' || fail "a 1000x slower NIC did not slow the syncs"
import json, sys
fast, slow = (json.load(open(f))["policies"]["kk"] for f in sys.argv[1:])
assert slow["grad_sync_mean_transfer_time"] > 100 * fast["grad_sync_mean_transfer_time"], (fast, slow)
assert slow["fwd_prop_mean_transfer_time"] < 1.01 * fast["fwd_prop_mean_transfer_time"], (fast, slow)
PY
expect_exit 1 'platform.topology "xml": pipelines run on the built-in topologies' "$DDPSIM" run --steps 2 \
  --set 'platform={"topology": "xml", "file": "'"$SRC"'/models/pcie-4x-rtx3090.xml", "hosts": ["gpu0", "gpu1", "gpu2", "gpu3"]}' \
  --set 'parallel={"stages": 2, "micro_batches": 2}'
expect_exit 1 'policy verl:max_token_len=4096 forms its own number of micro-batches' "$DDPSIM" run --steps 2 \
  --policies verl:max_token_len=4096 --set 'parallel={"stages": 2, "micro_batches": 4}'

out="$WORK/bad"
expect_exit 1 'pipeline-study.json with --set parallel.stages=3: parallel: stages \(3\) must divide training.world_size \(8\)' \
  "$DDPSIM" run "$study" --set parallel.stages=3 --out "$out"
expect_exit 1 'parallel: 1f1b needs at least as many micro-batches as stages' \
  "$DDPSIM" run "$study" --set parallel.schedule=1f1b --set parallel.micro_batches=2 --out "$out"
expect_exit 1 'parallel: channels: weights: grad_sync must be > 0' \
  "$DDPSIM" run "$study" --set 'parallel.channels.weights={"grad_sync":-1}' --out "$out"
expect_exit 1 'parallel: channels: exclusive names one flow class' \
  "$DDPSIM" run "$study" --set 'parallel.channels.exclusive=["fwd_prop","bwd_prop"]' --out "$out"
expect_exit 1 'parallel: unknown key "stage" \(did you mean "stages"' "$DDPSIM" run "$study" --set parallel.stage=2
expect_exit 2 '--link-series is for pipeline jobs' "$DDPSIM" run --steps 2 --link-series "$WORK/l.csv"
expect_exit 2 '--link-bin sets the bins of a --link-series FILE' "$DDPSIM" run "$study" --link-bin 0.5
expect_exit 2 '--link-bin -1: expected a positive width' "$DDPSIM" run "$study" --link-series "$WORK/l.csv" --link-bin -1
expect_exit 2 '--link-bin 1e-12: .* bins over the 42.98.* units recorded \(abstract\), at most 1e\+06' \
  "$DDPSIM" run "$study" --link-series "$WORK/l.csv" --link-bin 1e-12 --out "$out"
expect_exit 1 'channels: exclusive decides how classes share a link, but model "separate" gives each class its own' \
  "$DDPSIM" run "$study" --set parallel.channels.exclusive=grad_sync --out "$out"
expect_exit 1 '--policies: parallel.abstract runs its unit times as one column, with no policy' \
  "$DDPSIM" run "$study" --policies minmax --out "$out"
expect_exit 2 './twice/summary.json: named twice' env -C "$WORK" "$DDPSIM" run "$study" --out twice \
  --timeline ./twice/summary.json
[[ ! -e $out && ! -e $WORK/l.csv && ! -e $WORK/twice ]] || fail "a refused pipeline run left output"

# The timeline and the link series: a lane per GPU and class, and series whose integral is
# each class's volume.
expect_ok "$DDPSIM" run "$study" --set parallel.channels.model=shared --set training.steps=2 --timeline-steps 1:2 \
  --timeline "$WORK/tl/t.json" --link-series "$WORK/tl/links.csv" --link-bin 0.5 --out "$WORK/tl"
"$PY" - "$WORK/tl" <<'PY' || fail "the pipeline timeline or link series is not as expected"
import csv, json, sys
d = sys.argv[1]
summary = json.load(open(d + "/summary.json"))["policies"]["abstract"]
events = json.load(open(d + "/t.json"))["traceEvents"]
lanes = {(e["pid"], e["args"]["name"]) for e in events if e["name"] == "thread_name"}
assert len(lanes) == 8 * 4 and {n for _, n in lanes} == {"compute", "fwd_prop", "bwd_prop", "grad_sync"}, lanes
boxes = [e for e in events if e["ph"] == "X"]
assert {e["args"]["step"] for e in boxes} == {1}, "only step 1 was asked for"
assert sum(e["name"].startswith("forward") for e in boxes) == 8 * 8, boxes
assert all(e["ts"] >= 0 and e["dur"] >= 0 for e in boxes)
# Steps are alike (no noise): step 1's boxes end by one step time after its start.
assert max(e["ts"] + e["dur"] for e in boxes) <= summary["mean_step_time"] * 1e3 + 1e-6
rows = list(csv.DictReader(open(d + "/links.csv")))
assert all(abs(float(r["end_unit"]) - float(r["start_unit"]) - 0.5) < 1e-9 for r in rows[:-1]), rows[:3]
for c in ("fwd_prop", "bwd_prop", "grad_sync"):
    moved = sum(float(r[c]) * (float(r["end_unit"]) - float(r["start_unit"])) * 8 for r in rows)
    assert abs(moved - summary[c + "_volume"] / 2) < 1e-3, (c, moved, summary[c + "_volume"])
    assert all(0 <= float(r[c]) <= 1 + 1e-9 for r in rows), c
assert all(float(r["fwd_prop"]) + float(r["bwd_prop"]) + float(r["grad_sync"]) <= 1 + 1e-9 for r in rows), \
    "one shared link per GPU cannot be more than busy"
PY

# What a pipeline job does not use is refused, not ignored; --print-config gives valid input.
small=(--steps 2 --set training.world_size=8 --set training.global_batch=4 --policies static,kk
       --set 'parallel={"stages": 4, "schedule": "gpipe", "micro_batches": 2}')
expect_ok "$DDPSIM" run "${small[@]}"  # B=4 over D=2 groups: the policies are checked against D, not G=8
expect_exit 1 'training.bucket_mb is not used by a pipeline job' "$DDPSIM" run "${small[@]}" --set training.bucket_mb=1

# --replicates on a model-mode pipeline: each gain over the seeds and its prediction interval, in
# the printout and in summary.json; the same command twice writes the same bytes.
for n in 1 2; do
  expect_ok "$DDPSIM" compare "${small[@]}" --replicates 3 --out "$WORK/rep$n"
done
grep -q "^over 3 seeds (0 to 2), 2 steps each" "$WORK/out" || fail "no table over the seeds: $(cat "$WORK/out")"
grep -qE '^  kk +[+-][0-9.]+% \(seeds \[.*\]; prediction \[.*\], mostly: ' "$WORK/out" ||
  fail "no prediction interval for kk: $(cat "$WORK/out")"
cmp "$WORK/rep1/summary.json" "$WORK/rep2/summary.json" || fail "--replicates on a pipeline is not reproducible"
python3 - "$WORK/rep1/summary.json" <<'PY' || fail "summary.json lacks the pipeline's replicates"
import json, sys
r = json.load(open(sys.argv[1]))["replicates"]
assert r["seeds"] == [0, 2] and r["baseline"] == "static", r
kk = r["policies"]["kk"]
lo, hi = kk["gain"]["prediction_interval"]
assert lo <= kk["gain"]["gain_pct"] <= hi and "session" in kk["gain"]["terms_half_width_pp"], kk
assert len(kk["mean_step_ms"]["interval95"]) == 2, kk
for name, p in r["policies"].items():  # each mean step's own interval, as a DDP job's
    lo, hi = p["step"]["prediction_interval_ms"]
    assert lo < p["step"]["mean_ms"] < hi and p["step"]["mean_ms"] == p["mean_step_ms"]["mean"], (name, p)
PY
grep -qE '^  static +[0-9.]+ ms \(seeds \[.*\]; prediction \[.*\] ms, mostly: ' "$WORK/out" ||
  fail "no step interval for static: $(cat "$WORK/out")"
grep -q "^each mean step time's 95% prediction interval" "$WORK/out" || fail "the step block names no pipeline step"
expect_exit 2 'an abstract pipeline job has no sample stream to redraw' "$DDPSIM" compare "$study" --replicates 3
expect_exit 2 'register .*no trainer here runs a pipeline job' "$DDPSIM" compare "${small[@]}" --replicates 2 \
  --register "$WORK/reg.json"
expect_exit 1 'training.micro_batches is not used by a pipeline job' "$DDPSIM" run "${small[@]}" \
  --set training.micro_batches=2
expect_exit 1 'simulation.sched_ms is not used by a pipeline job' "$DDPSIM" run "${small[@]}" --set simulation.sched_ms=1
expect_exit 1 'simulation.mode "fast" would not give this job full mode.s steps: parallel.channels.model is "shared"' \
  "$DDPSIM" run "${small[@]}" --set simulation.mode=fast --set parallel.channels.model=shared
# Fast mode gives full mode's steps to SimGrid's rounding (ten significant digits in the CSV).
for mode in fast full; do
  expect_ok "$DDPSIM" run "${small[@]:2}" --steps 6 --set platform.topology=nvlink --set simulation.mode=$mode \
    --out "$WORK/$mode"
done
expect_exit 2 'record their steps in full mode, which simulates at most 4096 GPUs; this job has 8192' \
  "$DDPSIM" run "${small[@]:2}" --steps 1 --set simulation.mode=fast --set platform.topology=cluster \
  --set training.world_size=8192 --set training.global_batch=8192 --timeline "$WORK/big.json"
expect_exit 1 'world_size is 8192: above 4096 GPUs fast mode keeps its syncs.* an abstract job.s GPUs share one node' \
  "$DDPSIM" run "$study" --set simulation.mode=fast --set parallel.fwd_impact=0 --set parallel.bwd_impact=0 \
  --set training.world_size=8192 --steps 1
[[ ! -e $WORK/big.json ]] || fail "a refused timeline was written"
python3 - "$WORK/fast/pipeline_steps.csv" "$WORK/full/pipeline_steps.csv" <<'PY' || fail "fast mode's steps are not full mode's"
import csv, sys
fast, full = (list(csv.DictReader(open(p))) for p in sys.argv[1:])
assert len(fast) == len(full) == 12, (len(fast), len(full))
for a, b in zip(fast, full):
    assert (a["policy"], a["step"]) == (b["policy"], b["step"]), (a, b)
    assert abs(float(a["step_ms"]) - float(b["step_ms"])) <= 1e-9 * float(b["step_ms"]), (a, b)
PY
expect_exit 1 'parallel.micro_batches \(4\) is more than a group.s share of the global batch \(4 over 2 groups: 2\)' \
  "$DDPSIM" run "${small[@]}" --set parallel.micro_batches=4
expect_exit 1 'training.b_max lists 8 ranks, the pipeline has 2 data-parallel groups' "$DDPSIM" run "${small[@]}" \
  --set 'training.b_max=[2,2,2,2,2,2,2,2]'
expect_exit 1 'receiver_limit contends a GPU.s incoming link' "$DDPSIM" run "$study" \
  --set parallel.channels.receiver_limit=false
expect_exit 1 'partition is for model mode' "$DDPSIM" run "$study" --set parallel.partition=uniform
expect_exit 1 'forward must be 0 or from 0.001 to 1e9 units' "$DDPSIM" run "$study" --set parallel.abstract.forward=1e-12
expect_exit 1 'every time is 0' "$DDPSIM" run "$study" \
  --set 'parallel.abstract={"forward": 0, "backward": 0, "transfer": 0, "sync": 0}'
expect_exit 1 'model is not used by a pipeline job \(parallel\): in abstract mode' "$DDPSIM" run "$study" \
  --set model=h100-distilbert
expect_exit 1 'parallel: partition: 104 layers cannot fill 128 stages' "$DDPSIM" run "${small[@]}" \
  --set training.world_size=128 --set training.global_batch=8 --set 'parallel={"stages": 128, "schedule": "gpipe"}' 
expect_exit 1 '10000000 steps × 8 GPUs × 8 micro-batches would hold 26.2 GiB of pipeline work' "$DDPSIM" run "$study" \
  --set training.steps=10000000
expect_ok "$DDPSIM" run "${small[@]}" --set training.b_max=2  # one cap for every group
expect_exit 1 'parallel.abstract: this pipeline job has no data and no policies to balance' "$DDPSIM" balance "$study"
for config in "$study" "small"; do
  if [[ $config == small ]]; then args=("${small[@]}"); else args=("$study"); fi
  expect_ok "$DDPSIM" run "${args[@]}" --print-config
  cp "$WORK/out" "$WORK/printed.json"
  expect_ok "$DDPSIM" run "$WORK/printed.json" --print-config
  cmp -s "$WORK/out" "$WORK/printed.json" || fail "--print-config of a pipeline job ($config) is not a fixpoint"
done
expect_exit 1 'parallel: replay and validate simulate the DDP steps a trace recorded' "$DDPSIM" replay \
  "$SRC/traces/cpu/2ranks/kk/steps.csv" --model "$SRC/models/cpu-distilbert-small-2ranks.json" \
  --set 'parallel={"stages": 2, "micro_batches": 2}'

# A sweep of pipeline jobs: its results.csv has the pipeline's figures, in one unit.
echo '{"base": "'"$study"'", "set": {"training.steps": 1}, "axes": {"parallel": [{"stages": 2, "abstract": {}}, {"stages": 2}]}}' \
  >"$WORK/mixed.json"
expect_exit 1 'cell 1 .* is a pipeline in model mode \(ms\), cell 0 .* in abstract mode: one sweep.s step times share one unit' \
  "$DDPSIM" sweep "$WORK/mixed.json" --out "$WORK/mixed"
# A sweep of pipeline jobs: its results.csv has the pipeline's figures.
cat > "$WORK/sweep.json" <<JSON
{"base": "$study", "set": {"parallel.channels.model": "shared"},
 "axes": {"parallel.schedule": ["gpipe", "1f1b"], "parallel.channels.exclusive": ["none", "grad_sync"]}}
JSON
expect_ok "$DDPSIM" sweep "$WORK/sweep.json" --out "$WORK/sw" --jobs 2
grep -q '^fastest: cell 0 (parallel.schedule=gpipe, parallel.channels.exclusive=none)' "$WORK/out" ||
  fail "the sweep digest does not name the fastest pipeline cell: $(cat "$WORK/out")"
"$PY" - "$WORK/sw/results.csv" <<'PY' || fail "the pipeline sweep's results.csv is not as expected"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 4 and {r["policy"] for r in rows} == {"abstract"}, rows
step = {(r["parallel.schedule"], r["parallel.channels.exclusive"]): float(r["mean_step_time"]) for r in rows}
assert abs(step["gpipe", "none"] - 46.53) < 0.01 and abs(step["1f1b", "grad_sync"] - 70.83) < 0.01, step
assert all(0 < float(r["grad_sync_utilisation"]) < 1 for r in rows), rows
PY
# A model-mode job's summary says where its model and platform came from; an abstract one's has none.
expect_ok "$DDPSIM" run "$SRC/configs/llama3-8b-pipeline.json" --steps 2 --out "$WORK/prov"
python3 - "$WORK/prov/summary.json" <<'PY' || fail "a pipeline job's summary.json lacks its provenance"
import json, sys
p = json.load(open(sys.argv[1]))["provenance"]
assert p["model_source"].startswith("derived from specs, not profiled") and p["platform"]["topology"] == "cluster", p
PY
expect_ok "$DDPSIM" run "$SRC/configs/pipeline-study.json" --steps 2 --out "$WORK/abstract"
! grep -q '"provenance"' "$WORK/abstract/summary.json" || fail "an abstract pipeline job names a model"
finish
