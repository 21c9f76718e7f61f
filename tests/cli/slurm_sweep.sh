# scripts/slurm_sweep.sh on a real single-node Slurm started here: munged, slurmctld and slurmd
# run from a temporary folder (key, socket, ports, state, logs) and are stopped at exit; the
# system's own Slurm and munge set-up is neither used nor touched. A 4-shard array and its
# merge job must give the results.csv of a local sweep, byte for byte.
source "$(dirname "$0")/lib.sh"
[[ -n ${WORK:-} && -d $WORK ]] || { echo "lib.sh did not load" >&2; exit 1; }
PATH=$PATH:/usr/sbin:/sbin
((EUID == 0)) || { echo "slurmd must run as root: skip"; exit 77; }
for tool in munged slurmctld slurmd sbatch sinfo squeue scontrol scancel; do
  command -v "$tool" >/dev/null || { echo "$tool is not installed (scripts/setup.sh): skip"; exit 77; }
done
# A test run inside a Slurm job must not pass that job's settings on to the private cluster.
unset $(compgen -e | grep -E '^(SLURM|SBATCH|SALLOC|SRUN|SQUEUE|SINFO)_') 2>/dev/null

script=$SRC/scripts/slurm_sweep.sh
tmp=$WORK/slurm
mkdir -m 700 "$tmp" "$tmp/munge" "$tmp/state" "$tmp/spool"
export SLURM_CONF=$tmp/slurm.conf
pids=()
submitter=
dump_logs() {
  local log daemon
  for daemon in munged slurmctld slurmd; do
    # A daemon that dies before opening its log file says why on stderr (.out).
    log=$tmp/$daemon.log
    [[ -s $log ]] || log=$tmp/$daemon.out
    [[ -s $log ]] && { echo "== $log" >&2; tail -n 25 "$log" >&2; }
  done
  for log in "$WORK"/cluster/logs/*.log; do
    [[ -s $log ]] && { echo "== $log" >&2; tail -n 25 "$log" >&2; }
  done
}
stop_all() {
  [[ -n $submitter ]] && { kill "$submitter" 2>/dev/null; wait "$submitter" 2>/dev/null; }
  if ((${#pids[@]} > 1)); then
    # Jobs still running (a failed check) are cancelled while the controller is up.
    timeout 10 scancel --quiet --user=root 2>/dev/null
    for _ in $(seq 20); do [[ -z $(timeout 5 squeue -h -o %i 2>/dev/null) ]] && break; sleep 0.5; done
  fi
  local pid state
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    pid=${pids[$i]}
    kill "$pid" 2>/dev/null
    for _ in $(seq 40); do
      state=Z
      read -r _ _ state _ 2>/dev/null <"/proc/$pid/stat"
      [[ $state == Z ]] && break
      sleep 0.25
    done
    [[ $state == Z ]] || kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  rm -rf "$WORK"
}
trap stop_all EXIT
die() { fail "$*"; dump_logs; finish; }
# slurm_sweep.sh ARGS...: in the background, so that a signal to this test reaches the trap (and
# the trap, the script) at once; its output is left in $WORK/submit.out.
slurm_sweep() {
  timeout 240 "$script" "$@" >"$WORK/submit.out" 2>&1 &
  submitter=$!
  wait "$submitter"
  local status=$?
  submitter=
  return "$status"
}

# A TCP port nobody listens on or talks through, below the kernel's ephemeral range.
free_port() {
  local port hex
  while :; do
    port=$((10000 + RANDOM % 20000))
    hex=$(printf ':%04X ' "$port")
    grep -q "$hex" /proc/net/tcp /proc/net/tcp6 2>/dev/null || [[ " $* " == *" $port "* ]] || break
  done
  echo "$port"
}

dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1 count=1024 status=none
chmod 600 "$tmp/munge/munge.key"
# --force: munged refuses a socket in a folder other users cannot enter, which is the point here.
munged --foreground --force --socket="$tmp/munge/socket" --key-file="$tmp/munge/munge.key" \
  --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/munge/munged.log" --seed-file="$tmp/munge/munged.seed" \
  >"$tmp/munged.out" 2>&1 &
pids+=($!)

host=$(hostname -s)
memory=$(slurmd -C | grep -o 'RealMemory=[0-9]*' | cut -d= -f2)
memory=${memory:-1}
ctld_port=$(free_port)
slurmd_port=$(free_port "$ctld_port")
# NodeAddr and the controller's address are given, so the host name need not resolve.
# proctrack/linuxproc and task/none: containers seldom offer cgroups to a second slurmd.
# The scheduler parameters start a job as soon as a core is free, not in 3-second batches.
cat >"$SLURM_CONF" <<EOF
ClusterName=ddpsimtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge/socket
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0,sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$memory State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF

for _ in $(seq 20); do [[ -S $tmp/munge/socket ]] && break; sleep 0.25; done
[[ -S $tmp/munge/socket ]] || die "munged did not start"
slurmctld -D -f "$SLURM_CONF" >"$tmp/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" >"$tmp/slurmd.out" 2>&1 &
pids+=($!)
state=
for _ in $(seq 60); do
  state=$(sinfo -h -n "$host" -o %T 2>/dev/null)
  [[ $state == idle ]] && break
  sleep 0.5
done
[[ $state == idle ]] || die "the node is not idle 30 s after starting slurmctld and slurmd (state: '${state:-none}')"

cat >"$WORK/sweep.json" <<'EOF'
{"set": {"training.steps": 40}, "axes": {"training.world_size": [2, 4], "training.global_batch": [16, 32, 48]}, "policies": ["static", "minmax", "kk"]}
EOF

# Usage errors come before any submission.
expect_exit 2 "no such sweep file" "$script" "$WORK/missing.json" "$WORK/x"
expect_exit 2 "--shards 0: expected a whole number from 1 to 100000" "$script" --shards 0 "$WORK/sweep.json" "$WORK/x"
[[ -z $(squeue -h -o %i) ]] || fail "a usage error submitted jobs"

# The sweep as 4 array tasks (2 at a time on 2 cores) and the dependent merge.
slurm_sweep --shards 4 --wait --ddpsim "$DDPSIM" "$WORK/sweep.json" "$WORK/cluster" ||
  die "slurm_sweep.sh --wait exited $?: $(cat "$WORK/submit.out")"
grep -q "results: $WORK/cluster/results.csv" "$WORK/submit.out" || fail "no results path in: $(cat "$WORK/submit.out")"
for i in 1 2 3 4; do
  compgen -G "$WORK/cluster/logs/shard-*_$i.log" >/dev/null || fail "no Slurm log of array task $i"
  [[ -n $(ls -A "$WORK/cluster/shards/$i" 2>/dev/null) ]] || fail "shard $i wrote nothing"
done
compgen -G "$WORK/cluster/logs/merge-*.log" >/dev/null || fail "no Slurm log of the merge job"
expect_ok "$DDPSIM" sweep "$WORK/sweep.json" --out "$WORK/local" --jobs 2
cmp "$WORK/cluster/results.csv" "$WORK/local/results.csv" >&2 || fail "results.csv under Slurm differs from the local one"
rows=$(wc -l <"$WORK/cluster/results.csv")
[[ $rows == $((1 + 6 * 3)) ]] || fail "results.csv has $rows lines, expected a header and 6 cells x 3 policies"

# Failing shards cancel the merge, and --wait reports it instead of waiting forever. The stand-in
# passes the check before submission (--dry-run) and fails every job.
printf '#!/bin/bash\n[[ " $* " == *" --dry-run "* ]] && exec %q "$@"\nexit 1\n' "$DDPSIM" >"$WORK/failing-ddpsim"
chmod +x "$WORK/failing-ddpsim"
slurm_sweep --shards 2 --wait --ddpsim "$WORK/failing-ddpsim" "$WORK/sweep.json" "$WORK/failing"
status=$?
[[ $status == 1 ]] || fail "failing shards: slurm_sweep.sh --wait exited $status, expected 1: $(cat "$WORK/submit.out")"
grep -q "ended CANCELLED (a shard failed" "$WORK/submit.out" || fail "failing shards: no cancelled merge in: $(cat "$WORK/submit.out")"
[[ -e $WORK/failing/results.csv ]] && fail "failing shards still gave results.csv"

((failures)) && dump_logs
finish
