# scripts/slurm_sweep.sh's own checks, with stand-ins for sbatch and scancel (no cluster needed):
# numbers out of ddpsim's ranges and a bad sweep file are refused before anything is submitted,
# and a failed submission says so first, carries sbatch's reason and leaves no job script behind.
source "$(dirname "$0")/lib.sh"
script=$SRC/scripts/slurm_sweep.sh
bin=$WORK/bin
mkdir -p "$bin"
# sbatch accepts a job array (id 17) unless FAIL_ARRAY is set, and refuses every other job.
cat >"$bin/sbatch" <<'STUB'
#!/bin/bash
echo "sbatch $*" >>"$CALLS"
if [[ " $* " == *" --array="* && -z ${FAIL_ARRAY:-} ]]; then echo 17; exit 0; fi
echo "sbatch: error: Batch job submission failed: Invalid partition name specified" >&2
exit 1
STUB
printf '#!/bin/bash\necho "scancel $*" >>"$CALLS"\n' >"$bin/scancel"
chmod +x "$bin/sbatch" "$bin/scancel"
export PATH=$bin:$PATH CALLS=$WORK/calls
first_line() {  # first_line PATTERN: the script's own message comes first on stderr
  head -n 1 "$WORK/err" | grep -qE -- "$1" || fail "stderr does not start with /$1/: $(cat "$WORK/err")"
}
printf '{"set": {"training.steps": 2}, "axes": {"training.seed": [1, 2]}}' >"$WORK/ok.json"

for bad in "--shards 99999999999999999999" "--shards 100001" "--shards 0" "--shards 1e3" \
  "--jobs-per-shard 99999999999999999999" "--jobs-per-shard 1025" "--jobs-per-shard 0"; do
  read -r option value <<<"$bad"
  expect_exit 2 "$option $value: expected a whole number from 1 to" "$script" --ddpsim "$DDPSIM" "$option" "$value" \
    "$WORK/ok.json" "$WORK/o1"
  first_line "^slurm_sweep: $option $value"
done
[[ ! -e $WORK/o1 ]] || fail "a usage error made $WORK/o1"

# A sweep ddpsim refuses is named before any folder or job exists.
printf '{"axes": {"training.wrld_size": [2]}}' >"$WORK/bad.json"
expect_exit 1 'bad.json: nothing submitted, ddpsim sweep --dry-run refused it: .*unknown key "wrld_size"' "$script" \
  --ddpsim "$DDPSIM" "$WORK/bad.json" "$WORK/o2"
first_line '^slurm_sweep: '
[[ ! -e $WORK/o2 ]] || fail "a refused sweep made $WORK/o2"
[[ ! -e $CALLS ]] || fail "a refused sweep reached sbatch: $(cat "$CALLS")"

# A refused array: the folders this run made are taken away again.
FAIL_ARRAY=1 expect_exit 1 'submitting the shard array failed, nothing submitted; sbatch: sbatch: error: Batch job submission failed: Invalid partition' \
  "$script" --ddpsim "$DDPSIM" "$WORK/ok.json" "$WORK/o3"
first_line '^slurm_sweep: submitting the shard array failed'
[[ ! -e $WORK/o3 ]] || fail "a failed submission left $(find "$WORK/o3")"
# A refused merge job cancels the array; a folder that was there stays, without the job scripts.
mkdir -p "$WORK/o4/logs" && touch "$WORK/o4/logs/notes.txt"
expect_exit 1 'submitting the merge job failed, shard array 17 cancelled; sbatch: sbatch: error:' "$script" \
  --ddpsim "$DDPSIM" "$WORK/ok.json" "$WORK/o4"
first_line '^slurm_sweep: submitting the merge job failed'
grep -qx 'scancel 17' "$CALLS" || fail "the shard array was not cancelled: $(cat "$CALLS")"
[[ -z $(compgen -G "$WORK/o4/logs/*.sbatch") ]] || fail "job scripts left behind: $(ls "$WORK/o4/logs")"
[[ -e $WORK/o4/logs/notes.txt ]] || fail "a file that was there before was taken away"
finish
