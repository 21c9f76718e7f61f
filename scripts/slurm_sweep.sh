#!/usr/bin/env bash
# Runs a `ddpsim sweep` on a Slurm cluster: a job array with one task per shard, then a merge
# job that starts once every shard has succeeded and writes OUT_DIR/results.csv, the same file
# a local `ddpsim sweep SWEEP.json --out OUT_DIR` writes.
#
#   scripts/slurm_sweep.sh [options] SWEEP.json OUT_DIR
#
#   --shards N           array tasks, 1 to 100000 (default 4); task i runs `--shard i/N` into
#                        OUT_DIR/shards/i
#   --ddpsim PATH        the binary the jobs run (default: ddpsim on PATH, else build/release/ddpsim)
#   --jobs-per-shard N   `--jobs` of each shard, 1 to 1024 (default: the task's SLURM_CPUS_PER_TASK,
#                        else 1)
#   --sbatch-args "..."  extra sbatch options for both jobs, split on spaces
#                        (e.g. "--partition=cpu --time=2:00:00 --cpus-per-task=8")
#   --wait               block until the merge job ends; exit with its status (an interrupt
#                        stops the waiting, not the jobs)
#
# The sweep file is checked first (`ddpsim sweep --dry-run`): a bad one submits nothing. Job
# scripts and logs go to OUT_DIR/logs/; a failed submission takes its job scripts away. The binary, the sweep file and OUT_DIR must be
# visible from the compute nodes at the same paths (a shared file system). Exit status: 2 for
# bad usage, 1 for any other failure (with --wait: the merge job's own status if it failed).
set -euo pipefail

me=slurm_sweep
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
die() { echo "$me: $*" >&2; exit 1; }
usage_error() { echo "$me: $*" >&2; echo "usage: $0 [options] SWEEP.json OUT_DIR (see --help)" >&2; exit 2; }
# whole N MAX: N is written in digits and lies in 1..MAX (a long number would wrap in $((...))).
whole() { [[ $1 =~ ^[0-9]{1,9}$ ]] && ((10#$1 >= 1 && 10#$1 <= $2)); }

shards=4
ddpsim=
jobs_per_shard=
wait=0
sbatch_args=()
args=()
while (($#)); do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --wait) wait=1; shift ;;
    --shards|--ddpsim|--jobs-per-shard|--sbatch-args)
      (($# >= 2)) || usage_error "$1 needs a value"
      set -- "$1=$2" "${@:3}" ;;
    --shards=*) shards=${1#*=}; shift ;;
    --ddpsim=*) ddpsim=${1#*=}; shift ;;
    --jobs-per-shard=*) jobs_per_shard=${1#*=}; shift ;;
    --sbatch-args=*) read -r -a extra <<<"${1#*=}"; sbatch_args+=("${extra[@]}"); shift ;;
    --) shift; args+=("$@"); break ;;
    -*) usage_error "unknown option $1" ;;
    *) args+=("$1"); shift ;;
  esac
done
((${#args[@]} == 2)) || usage_error "expected SWEEP.json and OUT_DIR, got ${#args[@]} argument(s)"
# The bounds are ddpsim's own: --shard I/N takes N up to 100000, --jobs up to 1024.
whole "$shards" 100000 || usage_error "--shards $shards: expected a whole number from 1 to 100000"
[[ -z $jobs_per_shard ]] || whole "$jobs_per_shard" 1024 ||
  usage_error "--jobs-per-shard $jobs_per_shard: expected a whole number from 1 to 1024"
shards=$((10#$shards))

sweep=${args[0]}
out=${args[1]}
[[ -e $sweep ]] || usage_error "$sweep: no such sweep file"
[[ -f $sweep && -r $sweep ]] || usage_error "$sweep: not a readable file"
command -v sbatch >/dev/null || die "sbatch not found on PATH (run this on a Slurm login node)"

if [[ -z $ddpsim ]]; then
  ddpsim=$(command -v ddpsim || true)
  [[ -n $ddpsim ]] || ddpsim=$(dirname "$0")/../build/release/ddpsim
  [[ -x $ddpsim ]] || die "no ddpsim on PATH nor at $ddpsim; build it or pass --ddpsim PATH"
fi
[[ -f $ddpsim && -x $ddpsim ]] || die "--ddpsim $ddpsim: not an executable file"

# Jobs may start in another directory, on another node: every path they get is absolute.
ddpsim=$(realpath -e "$ddpsim")
sweep=$(realpath -e "$sweep")
[[ ! -e $out || -d $out ]] || die "$out exists and is not a folder"
# Every cell is checked here, on the login node, so that a bad sweep is named once, now, rather
# than by every array task after a wait in the queue.
check=$("$ddpsim" sweep "$sweep" --out "$out" --dry-run 2>&1 >/dev/null) ||
  die "$sweep: nothing submitted, ddpsim sweep --dry-run refused it: ${check%%$'\n'*}"
made=()  # the folders this run made, taken away again if nothing is submitted
for dir in "$out" "$out/shards" "$out/logs"; do
  [[ -e $dir ]] && continue
  mkdir -p "$dir" || die "cannot create $dir"
  made+=("$dir")
done
out=$(realpath -e "$out")
errors=$(mktemp)
trap 'rm -f "$errors"' EXIT
# A failed submission leaves no job script (nor folder) of its own behind.
undo() {
  rm -f "$out/logs/shard.sbatch" "$out/logs/merge.sbatch"
  for ((i = ${#made[@]} - 1; i >= 0; i--)); do rmdir "${made[$i]}" 2>/dev/null || true; done
}

if [[ -n $jobs_per_shard ]]; then
  jobs_line="jobs=$((10#$jobs_per_shard))"
else
  jobs_line='jobs=${SLURM_CPUS_PER_TASK:-1}'
fi
# The shard count is written into the script rather than read from SLURM_ARRAY_TASK_COUNT, so
# that a failed shard resubmitted alone (sbatch --array=3 OUT_DIR/logs/shard.sbatch) is still i/N.
cat >"$out/logs/shard.sbatch" <<EOF
#!/bin/bash
# One shard of a ddpsim sweep (scripts/slurm_sweep.sh); run as task i of an array 1-$shards.
set -euo pipefail
$jobs_line
exec $(printf '%q' "$ddpsim") sweep $(printf '%q' "$sweep") --out $(printf '%q' "$out/shards")/"\$SLURM_ARRAY_TASK_ID" \\
  --shard "\$SLURM_ARRAY_TASK_ID/$shards" --jobs "\$jobs"
EOF
{
  echo '#!/bin/bash'
  echo "# The merge of a ddpsim sweep's $shards shards (scripts/slurm_sweep.sh)."
  printf 'exec %q sweep --merge' "$ddpsim"
  for ((i = 1; i <= shards; i++)); do printf ' %q' "$out/shards/$i"; done
  printf ' --out %q\n' "$out"
} >"$out/logs/merge.sbatch"

# --parsable prints "id" or "id;cluster". sbatch's own complaint goes to $errors, so that this
# script's message comes first and carries it.
submit() {
  local reply
  reply=$(sbatch --parsable "$@" 2>"$errors") || return 1
  reply=${reply%%;*}
  [[ $reply =~ ^[0-9]+$ ]] || { echo "unexpected reply: $reply" >"$errors"; return 1; }
  echo "$reply"
}
said() { local text; text=$(tr '\n' ' ' <"$errors"); echo "${text% }"; }

array_id=$(submit --array="1-$shards" --job-name=ddpsim-sweep --output="$out/logs/shard-%A_%a.log" \
  "${sbatch_args[@]}" "$out/logs/shard.sbatch") || {
  undo
  die "submitting the shard array failed, nothing submitted; sbatch: $(said)"
}
# Without --kill-on-invalid-dep a failed shard would leave the merge pending forever.
merge_id=$(submit --dependency="afterok:$array_id" --kill-on-invalid-dep=yes --job-name=ddpsim-merge \
  --output="$out/logs/merge-%j.log" "${sbatch_args[@]}" "$out/logs/merge.sbatch") || {
  scancel "$array_id" 2>/dev/null || true
  undo
  die "submitting the merge job failed, shard array $array_id cancelled; sbatch: $(said)"
}
echo "$me: shards: job array $array_id (tasks 1-$shards), logs in $out/logs"
echo "$me: merge: job $merge_id, after every shard succeeds"
echo "$me: results: $out/results.csv"
((wait)) || exit 0

# Polls the controller (accounting once the controller has forgotten the job) until the merge
# job ends; an unreachable controller (a restart) is waited out.
field() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$2"; }
waited=0
warned=0
while :; do
  if record=$(scontrol -o show job "$merge_id" 2>&1); then
    state=$(field JobState "$record")
    code=$(field ExitCode "$record")
    reason=$(field Reason "$record")
  elif [[ $record == *"Invalid job id"* ]]; then
    record=$(sacct -n -X -P -j "$merge_id" -o State,ExitCode 2>/dev/null) && [[ -n $record ]] ||
      die "merge job $merge_id is no longer known to Slurm; look for $out/results.csv and $out/logs"
    IFS='|' read -r state code <<<"${record%%$'\n'*}"
    state=${state%% *}
    reason=None
  else
    ((warned++)) || echo "$me: cannot query merge job $merge_id, still trying: ${record%%$'\n'*}" >&2
    state=UNKNOWN
  fi
  case $state in
    PENDING|CONFIGURING|RUNNING|COMPLETING|SUSPENDED|REQUEUED|REQUEUE_HOLD|REQUEUE_FED|RESIZING|STAGE_OUT|SIGNALING|UNKNOWN)
      pause=$((waited < 60 ? 2 : waited < 600 ? 10 : 30))
      sleep "$pause"
      waited=$((waited + pause)) ;;
    COMPLETED)
      echo "$me: done: $out/results.csv"
      exit 0 ;;
    *)
      status=${code%%:*}
      [[ $status =~ ^[0-9]+$ ]] && ((status > 0 && status < 256)) || status=1
      why="exit code $code, reason $reason"
      [[ $reason == DependencyNeverSatisfied ]] && why="a shard failed: see $out/logs/shard-${array_id}_*.log"
      echo "$me: merge job $merge_id ended $state ($why)" >&2
      exit "$status" ;;
  esac
done
