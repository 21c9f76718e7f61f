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
run = s["runs"][0]
assert run["label"] == "abstract", s
assert abs(run["step_time_mean"] - 33) < 1e-9, s
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
assert [r["label"] for r in s["runs"]] == ["static", "sorted"], s
assert s["units"]["time"] == "ms", s
assert sum(s["stage_layers"]) > 2 and len(s["stage_layers"]) == 2, s
for r in s["runs"]:
    assert r["step_time_mean"] > 0 and 0 < r["compute_share"] < 1, r
    assert r["max_in_flight"] == [2, 1] and len(r["stage_peak_mem_mib"]) == 2, r
    assert r["flows"]["grad_sync"]["transfers"] > 0, r
PY
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
expect_exit 2 '--timeline draws DDP steps' "$DDPSIM" run "$study" --timeline "$WORK/t.json"
[[ ! -e $out && ! -e $WORK/t.json ]] || fail "a refused pipeline run left output"
finish
