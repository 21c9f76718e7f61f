# The default job's outputs follow the trace and summary contracts and are reproducible.
source "$(dirname "$0")/lib.sh"
expect_ok "$DDPSIM" balance --steps 50 --out "$WORK/a"
grep -q "minmax:buffer=64:cost=tokens" "$WORK/out" || fail "table lacks the minmax column"
expect_ok "$DDPSIM" balance --steps 50 --out "$WORK/b"
cmp -s "$WORK/a/steps.csv" "$WORK/b/steps.csv" || fail "steps.csv differs between identical runs"
# Decision times are measurements; everything else in summary.json must match.
diff <(grep -v sched_us "$WORK/a/summary.json") <(grep -v sched_us "$WORK/b/summary.json") >/dev/null ||
  fail "summary.json differs between identical runs beyond decision times"

header=$(grep -v '^#' "$WORK/a/steps.csv" | head -1)
for column in step rank policy batch_size max_len real_tokens padded_tokens fwd_ms bwd_ms comm_wait_ms opt_ms \
              step_ms peak_mem_mib loss; do
  [[ ",$header," == *",$column,"* ]] || fail "steps.csv lacks column $column"
done
rows=$(grep -vc '^#' "$WORK/a/steps.csv")
[[ $rows == $((1 + 50 * 4 * 6)) ]] || fail "steps.csv has $rows lines, expected header + 50 steps x 4 ranks x 6 policies"
grep -q '^# seed=0$' "$WORK/a/steps.csv" || fail "steps.csv lacks its seed metadata"
for key in steps mean_max_step_ms p95_max_step_ms mean_samples_per_s p95_samples_per_s mean_tokens_per_s \
           p95_tokens_per_s mean_std_step_ms mean_std_compute_ms mean_std_padded_tokens mean_std_peak_mem_mib \
           mean_sched_us; do
  grep -q "\"$key\"" "$WORK/a/summary.json" || fail "summary.json lacks $key"
done

expect_ok "$DDPSIM" balance --steps 50 --set training.seed=1 --out "$WORK/c"
cmp -s "$WORK/a/steps.csv" "$WORK/c/steps.csv" && fail "another seed gave the same steps.csv"
finish
