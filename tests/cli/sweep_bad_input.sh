# Bad sweep input: one clear line naming the file and key, exit 1 or 2, nothing in DIR.
source "$(dirname "$0")/lib.sh"
out="$WORK/out_dir"
no_output() { [[ ! -e $out/results.csv && ! -e $out/sweep.json ]] || fail "output left behind after: $*"; }
bad() {  # bad CODE PATTERN SWEEP_TEXT [OPTIONS...]
  local code=$1 pattern=$2 text=$3; shift 3
  printf '%s' "$text" >"$WORK/s.json"
  expect_exit "$code" "$pattern" "$DDPSIM" sweep "$WORK/s.json" --out "$out" "$@"
  no_output "$text $*"
}
ok='{"set": {"training.steps": 5}, "axes": {"training.world_size": [2, 4]}}'

bad 1 's.json, cell 0 \(training.wrld_size=2\): training: unknown key "wrld_size" \(did you mean "world_size"' \
  '{"axes": {"training.wrld_size": [2, 4]}}'
bad 1 's.json: axes: "training.world_size" is an empty list' '{"axes": {"training.world_size": []}}'
bad 1 's.json: axes: "training.world_size" is number 4: expected a non-empty array' '{"axes": {"training.world_size": 4}}'
bad 1 's.json: zip\[0\]: "b" lists 1 value, "a" 2 values: zipped lists move together' \
  '{"zip": [{"a": [1, 2], "b": [1]}]}'
bad 1 's.json: zip\[0\] is array \[1,2\]: expected an object' '{"zip": [[1, 2]]}'
bad 1 's.json: zip\[1\]: an empty object: a zip group names at least one key' \
  '{"zip": [{"training.steps": [5, 6]}, {}]}'
bad 1 '"training.steps" \(zip\[0\]\) and "training.steps" \(zip\[1\]\) are both swept' \
  '{"zip": [{"training.steps": [5, 6]}, {"training.steps": [7, 8]}]}'
bad 1 's.json: no "axes" or "zip"' '{"set": {"training.steps": 5}}'
bad 1 's.json: set: "label.x" is a label, a results.csv column' '{"set": {"label.x": "a"}, "axes": {"training.steps": [5]}}'
bad 1 's.json: "label." has no name' '{"axes": {"label.": ["a"], "training.steps": [5]}}'
bad 1 's.json, cell 1 \(model=nosuch.json\): .*nosuch.json: cannot open JSON file' \
  '{"axes": {"model": ["h100-distilbert", "nosuch.json"]}}'
bad 1 's.json: key "base": .*: cannot open JSON file: it is a directory' '{"base": ".", "axes": {"training.steps": [5]}}'
bad 1 's.json: unknown key "axis" \(did you mean "axes"' '{"axis": {"training.steps": [5]}}'
bad 1 's.json: key "axes" appears twice in one object' '{"axes": {"training.steps": [5]}, "axes": {}}'
bad 1 's.json: expected a JSON object' '[1, 2]'
bad 1 '"training" \(axes\) and "training.steps" \(axes\) are both swept' '{"axes": {"training": [{}], "training.steps": [5]}}'
bad 1 '"training.steps" is swept and also fixed by "training.steps"' \
  '{"set": {"training.steps": 5}, "axes": {"training.steps": [5, 6]}}'
bad 1 's.json: the grid has 1000 × 1000 = 1000000 cells, more than the 100000' \
  "{\"axes\": {\"training.seed\": [$(seq -s, 1000)], \"training.steps\": [$(seq -s, 1000)]}}"
bad 1 'cell 1 \(training.world_size=2\) is the same config as cell 0 \(training.world_size=2\)' \
  '{"axes": {"training.world_size": [2, 2]}}'
bad 1 'cell 1 \(training.world_size=64\): policies\[0\]: static: infeasible: global batch B=48 is smaller than G=64' '{"axes": {"training.world_size": [2, 64]}}'
bad 1 's.json: key "policies"\[1\] is number 3: expected a string' '{"axes": {"training.seed": [1]}, "policies": ["static", 3]}'
bad 1 'policies\[1\]: .*buffer' '{"axes": {"training.seed": [1]}, "policies": ["static", "minmax:buffer=x"]}'
# A decision time measured on this machine's clock would make results.csv differ run to run (issue 36).
bad 1 's.json, cell 0 \(training.seed=1\): simulation.sched_ms "measured" times each decision on this machine.s clock' \
  '{"set": {"simulation.sched_ms": "measured"}, "axes": {"training.seed": [1]}}'
bad 1 's.json, cell 1 \(simulation.sched_ms=measured\): simulation.sched_ms "measured"' \
  '{"set": {"training.steps": 2}, "axes": {"simulation.sched_ms": [0.5, "measured"]}}'
bad 1 'missing.json: cannot open JSON file \(no such file\)' '{"base": "missing.json", "axes": {"training.seed": [1]}}'
bad 2 '--shard "3/2": expected I/N with 1 <= I <= N' "$ok" --shard 3/2
bad 2 '--shard "0/4": expected I/N' "$ok" --shard 0/4
bad 2 '--shard "1/x": expected I/N' "$ok" --shard 1/x
bad 2 '--shard " 1/2": expected I/N' "$ok" --shard " 1/2"
bad 2 '--shard "\+1/2": expected I/N' "$ok" --shard +1/2
bad 2 '--jobs 0: expected 1 to 1024' "$ok" --jobs 0
bad 2 '--jobs sets the worker processes that run cells, and --dry-run runs none' "$ok" --jobs 2 --dry-run
bad 2 '--merge combines finished shards; a SWEEP file belongs to a run' "$ok" --merge "$WORK"
expect_exit 2 '--merge combines finished shards; --jobs belongs to a run' "$DDPSIM" sweep --merge "$WORK" --jobs 2 --out "$out"
touch "$WORK/a_file"
expect_exit 2 "--out $WORK/a_file: exists and is not a folder" "$DDPSIM" sweep "$WORK/s.json" --out "$WORK/a_file"
expect_exit 2 "--out $WORK/a_file: exists and is not a folder" "$DDPSIM" sweep --merge "$WORK" --out "$WORK/a_file"
expect_exit 2 'missing SWEEP.json' "$DDPSIM" sweep --out "$out"
expect_exit 2 '--out DIR is required' "$DDPSIM" sweep "$WORK/s.json"
expect_exit 1 'nope.json: cannot open sweep file \(no such file\)' "$DDPSIM" sweep "$WORK/nope.json" --out "$out"
expect_exit 1 'cannot open sweep file: it is a directory' "$DDPSIM" sweep "$WORK" --out "$out"
no_output "missing files"

# Merging: different sweeps, missing cells, folders that are not a sweep's.
printf '%s' "$ok" >"$WORK/a.json"
printf '%s' '{"set": {"training.steps": 6}, "axes": {"training.world_size": [2, 4]}}' >"$WORK/b.json"
expect_ok "$DDPSIM" sweep "$WORK/a.json" --out "$WORK/a1" --shard 1/2
expect_ok "$DDPSIM" sweep "$WORK/b.json" --out "$WORK/b2" --shard 2/2
expect_exit 1 'b2/sweep.json is another sweep \(grid [0-9a-f]{16}, 2 cells\) than .*a1/sweep.json' \
  "$DDPSIM" sweep --merge "$WORK/a1" "$WORK/b2" --out "$out"
no_output "merge of different sweeps"
expect_exit 1 '1 of 2 cells are in none of .*a1: cell 1 \(training.world_size=4\) \(run the missing shards' \
  "$DDPSIM" sweep --merge "$WORK/a1" --out "$out"
no_output "merge with a missing cell"
# A sweep's own record, or a config, given as the sweep file or its base is named as what it is.
expect_exit 1 'a1/sweep.json is the grid record a sweep writes into its output folder, not a sweep file' \
  "$DDPSIM" sweep "$WORK/a1/sweep.json" --out "$out"
bad 1 's.json: key "base": .*a1/sweep.json is the grid record a sweep writes .*, not a config' \
  "{\"base\": \"$WORK/a1/sweep.json\", \"axes\": {\"training.steps\": [5]}}"
printf '{"training": {"steps": 5}}' >"$WORK/config.json"
expect_exit 1 'config.json is a config, not a sweep file: `ddpsim run` runs it' "$DDPSIM" sweep "$WORK/config.json" --out "$out"
no_output "a file of another kind"
expect_exit 1 'nowhere: not a folder' "$DDPSIM" sweep --merge "$WORK/nowhere" --out "$out"
expect_exit 2 '--merge read "--out" as a shard folder' "$DDPSIM" sweep --merge --out "$out"
mkdir -p "$WORK/empty"
expect_exit 1 'empty: no sweep.json' "$DDPSIM" sweep --merge "$WORK/empty" --out "$out"
# A damaged cell or grid is named, with what to do.
cell=$(ls "$WORK/a1/cells" | head -1)
cp "$WORK/a1/cells/$cell" "$WORK/cell.json"
sed 's/"mean_max_step_ms": [0-9.e+-]*/"mean_max_step_ms": "x"/' "$WORK/cell.json" >"$WORK/a1/cells/$cell"
expect_exit 1 "$cell: policy static: mean_max_step_ms is \"x\", not a number ≥ 0 \(an edited or damaged file\)" \
  "$DDPSIM" sweep "$WORK/a.json" --out "$WORK/a1"
sed 's/"p95_max_step_ms": [0-9.e+-]*,//' "$WORK/cell.json" >"$WORK/a1/cells/$cell"
expect_exit 1 "$cell: policy static: p95_max_step_ms is missing" "$DDPSIM" sweep --merge "$WORK/a1" --out "$out"
python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c["policies"]["static"]["steps"] += 0.5
print(json.dumps(c))' "$WORK/cell.json" >"$WORK/a1/cells/$cell"
expect_exit 1 "$cell: policy static: steps is [0-9]+.5, its config's training.steps [0-9]+ \(an edited" \
  "$DDPSIM" sweep --merge "$WORK/a1" --out "$out"
printf '{"config": {}, "policies": {"static": {}}}' >"$WORK/a1/cells/$cell"
expect_exit 1 "$cell: holds another config than its name says .*remove it" \
  "$DDPSIM" sweep "$WORK/a.json" --out "$WORK/a1"
printf 'garbage' >"$WORK/a1/cells/$cell"
expect_exit 1 "$cell: not a sweep cell" "$DDPSIM" sweep "$WORK/a.json" --out "$WORK/a1"
sed -i 's/"grid_hash": "./"grid_hash": "x/' "$WORK/a1/sweep.json"
expect_exit 1 'a1/sweep.json: grid_hash does not match its cells' "$DDPSIM" sweep --merge "$WORK/a1" --out "$out"
no_output "damaged inputs"
# results.csv that is a folder is refused before any cell runs.
mkdir -p "$WORK/busy/results.csv"
expect_exit 2 'results.csv' "$DDPSIM" sweep "$WORK/a.json" --out "$WORK/busy"
[[ ! -e $WORK/busy/cells ]] || fail "cells ran although results.csv could not be written"
# An output that is one of the sweep's inputs is refused before any cell runs.
mkdir -p "$WORK/o6"
echo '{"training": {"steps": 2}}' >"$WORK/o6/results.csv"
echo '{"base": "o6/results.csv", "axes": {"training.seed": [1, 2]}}' >"$WORK/s6.json"
expect_exit 2 'o6/results.csv: is also an input of this command' "$DDPSIM" sweep "$WORK/s6.json" --out "$WORK/o6"
[[ ! -e $WORK/o6/cells && ! -e $WORK/o6/sweep.json ]] || fail "a sweep whose output is its base ran cells"
expect_exit 1 'holds no sweep.json: --resume continues' "$DDPSIM" sweep "$WORK/s6.json" --out "$WORK/nowhere" --resume --dry-run
finish
