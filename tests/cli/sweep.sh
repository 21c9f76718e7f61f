# `ddpsim sweep`: the same results.csv whatever --jobs, sharding or interruption; finished
# cells reused; a sweep's own files and messages.
source "$(dirname "$0")/lib.sh"
cat >"$WORK/s.json" <<'JSON'
{"set": {"training.steps": 30},
 "axes": {"training.world_size": [2, 4], "training.global_batch": [16, 48]},
 "zip": [{"label.noise": ["low", "high"], "simulation.noise_sigma": [0.01, 0.2]}],
 "policies": ["static", "minmax", "kk"]}
JSON

expect_ok "$DDPSIM" sweep "$WORK/s.json" --out "$WORK/a" --jobs 2
grep -q "= 8 cells" "$WORK/out" || fail "the cell count is not shown before the run: $(cat "$WORK/out")"
grep -q "3 policies per cell" "$WORK/out" || fail "the policy count is not shown: $(cat "$WORK/out")"
header='cell,training.world_size,training.global_batch,label.noise,simulation.noise_sigma,policy,steps,mean_max_step_ms'
[[ $(head -1 "$WORK/a/results.csv") == "$header"* ]] || fail "results.csv header: $(head -1 "$WORK/a/results.csv")"
[[ $(wc -l <"$WORK/a/results.csv") == 25 ]] || fail "results.csv has $(wc -l <"$WORK/a/results.csv") lines, expected 1 + 8 cells x 3 policies"
[[ $(ls "$WORK/a/cells" | wc -l) == 8 ]] || fail "expected 8 cell files: $(ls "$WORK/a/cells")"
# Rows in grid order (last key fastest), policies in the config's order, the first policy's gain 0.
awk -F, 'NR==2 && !($2==2 && $3==16 && $4=="low" && $6=="static" && $(NF-7)==0 && $(NF-8)==0 && $(NF-3)=="") {exit 1}
         NR==3 && $6!="minmax" {exit 1} NR==5 && $4!="high" {exit 1}' "$WORK/a/results.csv" ||
  fail "results.csv rows out of order: $(head -5 "$WORK/a/results.csv")"
# gain_pct = 100 (1 - mean_max_step_ms / the cell's first policy's).
# Each gain lies inside its prediction interval, whose widest source is named; each mean step
# (the first policy's too) inside its own.
awk -F, 'NR>1 { if ($6=="static") base=$8; else { g = 100*(1-$8/base); d = g-$(NF-8); if ($(NF-6)!="step" || d>1e-6 || d<-1e-6) exit 1
                 if (!($(NF-5) <= g && g <= $(NF-4)) || $(NF-3)=="") exit 1 }
                if (!($(NF-2) < $8 && $8 < $(NF-1)) || $NF=="") exit 1 }' \
  "$WORK/a/results.csv" || fail "gain_pct is not 100 (1 - mean / first policy's mean) inside gain_lo95 .. gain_hi95, or a mean step outside step_lo95 .. step_hi95"
grep -q '^static ' "$WORK/out" || fail "no per-policy digest printed: $(cat "$WORK/out")"

# One job, and three shards merged: byte-identical results.
expect_ok "$DDPSIM" sweep "$WORK/s.json" --out "$WORK/b" --jobs 1
cmp -s "$WORK/a/results.csv" "$WORK/b/results.csv" || fail "--jobs 1 and --jobs 2 results differ"
for i in 1 2 3; do
  expect_ok "$DDPSIM" sweep "$WORK/s.json" --out "$WORK/shard$i" --shard "$i/3"
  [[ ! -e $WORK/shard$i/results.csv ]] || fail "a shard wrote results.csv"
done
[[ $(cat "$WORK"/shard*/cells/*.json | grep -c '"config"') == 8 ]] || fail "the shards did not split the 8 cells"
expect_ok "$DDPSIM" sweep --merge "$WORK/shard1" "$WORK/shard2" "$WORK/shard3" --out "$WORK/merged"
cmp -s "$WORK/a/results.csv" "$WORK/merged/results.csv" || fail "merged shards differ from one run"
cmp -s "$WORK/a/sweep.json" "$WORK/merged/sweep.json" || fail "merged sweep.json differs"

# Cells that share a seed share its dataset and permutation in the parent, whichever axis is
# fastest (cells then run grouped by seed): each cell's file is the same bytes as when the cell
# runs alone, the decision times measured on this machine's clock aside.
echo '{"set": {"training.steps": 20}, "axes": {"training.seed": [3, 4], "training.global_batch": [16, 48]}}' \
  >"$WORK/seed_slow.json"
echo '{"set": {"training.steps": 20}, "axes": {"training.global_batch": [16, 48], "training.seed": [3, 4]}}' \
  >"$WORK/seed_fast.json"
echo '{"set": {"training.steps": 20, "training.seed": 4}, "axes": {"training.global_batch": [48]}}' \
  >"$WORK/alone.json"
for grid in seed_slow seed_fast alone; do expect_ok "$DDPSIM" sweep "$WORK/$grid.json" --out "$WORK/$grid" --jobs 2; done
same_cell() { cmp -s <(grep -v '_sched_us"' "$1") <(grep -v '_sched_us"' "$2"); }
for cell in "$WORK"/seed_slow/cells/*.json; do
  same_cell "$cell" "$WORK/seed_fast/cells/${cell##*/}" || fail "${cell##*/} differs with the seed axis fastest"
done
alone=$(ls "$WORK/alone/cells")
same_cell "$WORK/alone/cells/$alone" "$WORK/seed_fast/cells/$alone" || fail "a cell run alone differs from its sweep's"

# A rerun runs nothing; --resume continues the same sweep only.
expect_ok "$DDPSIM" sweep "$WORK/s.json" --out "$WORK/a" --resume
grep -q "8 already done, 0 to run" "$WORK/out" || fail "a rerun ran cells again: $(cat "$WORK/out")"
cmp -s "$WORK/a/results.csv" "$WORK/b/results.csv" || fail "the rerun changed results.csv"
expect_exit 1 "holds no sweep.json: --resume continues the same sweep" \
  "$DDPSIM" sweep "$WORK/s.json" --out "$WORK/fresh" --resume
[[ ! -e $WORK/fresh/results.csv ]] || fail "--resume into a fresh folder wrote results"
# Another sweep into the same folder says what it replaces (issue 36 probe).
sed 's/"training.steps": 30/"training.steps": 20/' "$WORK/s.json" >"$WORK/s20.json"
expect_ok "$DDPSIM" sweep "$WORK/s20.json" --out "$WORK/b"
grep -q "note: .*/b held another sweep (grid .*): its sweep.json and results.csv are replaced" "$WORK/err" ||
  fail "a sweep replaced another's results in silence: $(cat "$WORK/err")"
# A grown sweep reuses the cells it shares with the previous one.
sed 's/\[2, 4\]/[2, 4, 8]/' "$WORK/s.json" >"$WORK/grown.json"
expect_ok "$DDPSIM" sweep "$WORK/grown.json" --out "$WORK/a"
grep -q "12 cells, 8 already done, 4 to run" "$WORK/out" || fail "a grown sweep did not reuse cells: $(cat "$WORK/out")"
[[ $(wc -l <"$WORK/a/results.csv") == 37 ]] || fail "the grown results.csv has $(wc -l <"$WORK/a/results.csv") lines"

# A killed sweep loses only the cells in flight: the rerun finishes with the same results.
cat >"$WORK/long.json" <<'JSON'
{"set": {"training.steps": 400, "simulation.mode": "full"}, "axes": {"training.seed": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]}}
JSON
"$DDPSIM" sweep "$WORK/long.json" --out "$WORK/killed" --jobs 2 >/dev/null 2>"$WORK/killed.err" &
pid=$!
for _ in $(seq 100); do [[ $(ls "$WORK/killed/cells" 2>/dev/null | grep -c 'json$') -ge 2 ]] && break; sleep 0.1; done
kill -INT "$pid"
wait "$pid"
code=$?
[[ $code == 130 ]] || fail "SIGINT ended the sweep with $code, expected 130"
# (ASan warns about SimGrid's context switches in the workers; those lines are not the message.)
message=$(asan_notes <"$WORK/killed.err")
[[ $message == "ddpsim sweep: stopped by SIGINT"* && $(wc -l <<<"$message") == 1 ]] ||
  fail "an interrupted sweep does not say so in one line: $(cat "$WORK/killed.err")"
pgrep -f "$WORK/long.json" >/dev/null && fail "workers still run after the sweep was interrupted"
[[ ! -e $WORK/killed/results.csv ]] || fail "an interrupted sweep wrote results.csv"
ls "$WORK/killed/cells" | grep -qv 'json$' && fail "temporaries left in cells/: $(ls "$WORK/killed/cells")"
done_before=$(ls "$WORK/killed/cells" | wc -l)
[[ -e $WORK/killed/sweep.json ]] || fail "an interrupted sweep left no sweep.json for --resume"
expect_ok "$DDPSIM" sweep "$WORK/long.json" --out "$WORK/killed" --jobs 2 --resume
grep -q "$done_before already done" "$WORK/out" || fail "the rerun did not skip the $done_before finished cells: $(cat "$WORK/out")"
expect_ok "$DDPSIM" sweep "$WORK/long.json" --out "$WORK/whole" --jobs 2
cmp -s "$WORK/killed/results.csv" "$WORK/whole/results.csv" || fail "the resumed sweep differs from an uninterrupted one"

# --dry-run checks every cell and writes nothing.
expect_ok "$DDPSIM" sweep "$WORK/s.json" --out "$WORK/dry" --dry-run
[[ ! -e $WORK/dry ]] || fail "--dry-run wrote $WORK/dry"
[[ $(grep -c '  cell [0-9]' "$WORK/out") == 8 ]] || fail "--dry-run does not list the cells: $(cat "$WORK/out")"
# The example sweeps in configs/ are valid.
for example in "$SRC"/configs/sweep-*.json; do
  expect_ok "$DDPSIM" sweep "$example" --out "$WORK/dry" --dry-run
done
# A sweep is named by its content, not by the folder it is started from: a base config with a
# relative model path, run from one folder and resumed from another, runs nothing again.
mkdir -p "$WORK/where/configs" "$WORK/where/models"
cp "$SRC/models/h100-distilbert-measured.json" "$WORK/where/models/m.json"
echo '{"model": "../models/m.json", "training": {"steps": 5}, "policies": ["static", "minmax"]}' \
  >"$WORK/where/configs/base.json"
echo '{"base": "base.json", "axes": {"training.global_batch": [16, 32]}}' >"$WORK/where/configs/sw.json"
(cd "$WORK/where" && "$DDPSIM" sweep configs/sw.json --out out >"$WORK/out" 2>&1) ||
  fail "the sweep from the root failed: $(cat "$WORK/out")"
(cd "$WORK/where/configs" && "$DDPSIM" sweep sw.json --out ../out --resume >"$WORK/out" 2>&1) ||
  fail "the sweep resumed from another folder was refused: $(cat "$WORK/out")"
grep -q "2 already done, 0 to run" "$WORK/out" ||
  fail "the sweep resumed from another folder ran cells again: $(cat "$WORK/out")"
# A cell's notes are the sweep's, each said once with the cells it holds for.
echo '{"set": {"training.steps": 3, "training.data_parallel": "fsdp"}, "axes": {"training.bucket_mb": [25, 10, 5]},
       "policies": ["static"]}' >"$WORK/noted.json"
expect_ok "$DDPSIM" sweep "$WORK/noted.json" --out "$WORK/noted" --jobs 1
[[ $(grep -c '^note: ' "$WORK/err") == 1 ]] &&
  grep -q '^note: training.overlap, bucket_mb and first_bucket_mb have no effect under .* (cells 1 and 2)$' "$WORK/err" ||
  fail "a sweep's cells' notes are not said once, with their cells: $(cat "$WORK/err")"
finish
