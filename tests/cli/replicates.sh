# compare --replicates: each policy's figures over R seeds with their range, the same on every
# run, the first seed's outputs unchanged, and the mean over seeds that runs of each seed give.
source "$(dirname "$0")/lib.sh"
args=(--steps 30 --policies static,minmax)
expect_ok "$DDPSIM" compare "${args[@]}" --replicates 4 --out "$WORK/r4"
cp "$WORK/out" "$WORK/r4.txt"
grep -q "^over 4 seeds (0 to 3), 30 steps each" "$WORK/r4.txt" || fail "no replicates table"
grep -Eq '^minmax +[0-9.]+ \[[0-9.]+, [0-9.]+\] +[0-9.]+ \[[0-9.]+, [0-9.]+\] +[-+][0-9.]+% \[' "$WORK/r4.txt" ||
  fail "the minmax row lacks its ranges: $(grep '^minmax' "$WORK/r4.txt")"
expect_ok "$DDPSIM" compare "${args[@]}" --replicates 4
diff <(grep -v '^simulated' "$WORK/r4.txt" | grep -v '^wrote') <(grep -v '^simulated' "$WORK/out") >/dev/null ||
  fail "two identical --replicates runs differ"
expect_ok "$DDPSIM" compare "${args[@]}" --out "$WORK/r1"
grep -q "^over " "$WORK/out" && fail "a run without --replicates prints a replicates table"
cmp -s "$WORK/r1/steps.csv" "$WORK/r4/steps.csv" || fail "--replicates changed the first seed's steps.csv"

# The mean over seeds is the mean of the runs at each seed.
sum=0
for seed in 0 1 2 3; do
  expect_ok "$DDPSIM" compare "${args[@]}" --set training.seed=$seed
  v=$(awk '/^max step time, mean/ { print $6; exit }' "$WORK/out")
  sum=$(awk -v s="$sum" -v v="$v" 'BEGIN { print s + v }')
done
want=$(awk -v s="$sum" 'BEGIN { printf "%.3f", s / 4 }')
got=$(awk '/^static / { print $2; exit }' "$WORK/r4.txt")
awk -v a="$got" -v b="$want" 'BEGIN { exit !(a - b < 0.011 && b - a < 0.011) }' ||  # each printed to 0.01
  fail "static's mean over seeds is $got, the four runs give $want"

expect_exit 2 "--replicates 0: expected 1 \(no replicates\) to 1000 seeds" "$DDPSIM" compare --replicates 0
expect_exit 2 "--replicates 1001: expected 1" "$DDPSIM" compare --replicates 1001
expect_exit 2 "an abstract pipeline job has no sample stream to redraw" "$DDPSIM" run "$SRC/configs/pipeline-study.json" \
  --replicates 3
# A replicate's refusal names its seed: the run printed before it had another, and passed.
expect_exit 1 "replicate 2 of 3 \\(training\\.seed 2\\): policy minmax, step 1: rank 0 runs 8 micro-batches" \
  "$DDPSIM" compare --set training.data_parallel=fsdp --set training.micro_batches=8 --set training.seed=1 \
  --steps 5 --policies static,minmax --replicates 3
# token_budget takes more samples a step: its gain is on time per sample, and says so.
expect_ok "$DDPSIM" compare --policies static,token_budget --replicates 3 --steps 40
grep -qE '^token_budget .*\+1[0-9]\.[0-9]+% \[.*\] per sample$' "$WORK/out" ||
  fail "token_budget's replicated gain is not per sample: $(tail -2 "$WORK/out")"
# A label longer than the policy column widens it: the figures stay under their headers.
expect_ok "$DDPSIM" compare --policies static,verl:max_token_len=256:micro_balance=off --replicates 2 --steps 10
header=$(grep '^policy ' "$WORK/out" | head -1)
row=$(grep '^verl:max_token_len=256:micro_balance=off ' "$WORK/out" | head -1)
label_column=${header%%max step time*}  # "policy" and its padding
label=${row%% [0-9]*}                      # the row up to its first figure
[[ -n $row && ${#label_column} -eq $((${#label} + 1)) ]] ||
  fail "the replicates table is misaligned: $header / $row"
finish
