# ddptrain started by srun alone, without torchrun or --nproc-per-node: two tasks on a real
# single-node Slurm started here (munged, slurmctld, slurmd from a temporary folder, stopped at
# exit; the system's own Slurm and munge are neither used nor touched) take their ranks from
# SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID and meet at the node list's first host over Gloo.
source "$(dirname "$0")/lib.sh"
[[ -n ${WORK:-} && -d $WORK ]] || { echo "lib.sh did not load" >&2; exit 1; }
PATH=$PATH:/usr/sbin:/sbin
((EUID == 0)) || { echo "slurmd must run as root: skip"; exit 77; }
for tool in munged slurmctld slurmd srun sinfo squeue scontrol scancel; do
  command -v "$tool" >/dev/null || { echo "$tool is not installed (scripts/setup.sh): skip"; exit 77; }
done
# A test run inside a Slurm job must not pass that job's settings on to the private cluster.
unset $(compgen -e | grep -E '^(SLURM|SBATCH|SALLOC|SRUN|SQUEUE|SINFO)_') 2>/dev/null
unset RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR MASTER_PORT

tmp=$WORK/slurm
mkdir -m 700 "$tmp" "$tmp/munge" "$tmp/state" "$tmp/spool"
export SLURM_CONF=$tmp/slurm.conf
pids=()
dump_logs() {
  local log daemon
  for daemon in munged slurmctld slurmd; do
    log=$tmp/$daemon.log
    [[ -s $log ]] || log=$tmp/$daemon.out
    [[ -s $log ]] && { echo "== $log" >&2; tail -n 25 "$log" >&2; }
  done
}
stop_all() {
  if ((${#pids[@]} > 1)); then
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
munged --foreground --force --socket="$tmp/munge/socket" --key-file="$tmp/munge/munge.key" \
  --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/munge/munged.log" --seed-file="$tmp/munge/munged.seed" \
  >"$tmp/munged.out" 2>&1 &
pids+=($!)

host=$(hostname -s)
# ddptrain's rendezvous resolves the node list's host; where it cannot, this is no test of it.
getent hosts "$host" >/dev/null || { echo "host name $host does not resolve: skip"; exit 77; }
memory=$(slurmd -C | grep -o 'RealMemory=[0-9]*' | cut -d= -f2)
memory=${memory:-1}
ctld_port=$(free_port)
slurmd_port=$(free_port "$ctld_port")
cat >"$SLURM_CONF" <<EOF
ClusterName=ddptraintest
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
[[ -S $tmp/munge/socket ]] || { dump_logs; echo "munged did not start: skip"; exit 77; }
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
# Only a slurmd that cannot run here skips; a node that came up is tested.
[[ $state == idle ]] || { dump_logs; echo "slurmd did not bring the node up (state: '${state:-none}'): skip"; exit 77; }

# Two tasks, each one ddptrain process; no launcher variables but Slurm's own.
port=$(free_port "$ctld_port" "$slurmd_port")
expect_ok timeout 240 srun -N1 -n2 --export=ALL,MASTER_PORT=$port "$DDPTRAIN" --synthetic-lengths sst2 \
  --synthetic-samples 400 --model tiny --max-length 64 --global-batch 8 --steps 3 --policy minmax:buffer=16 \
  --backend gloo --out "$WORK/srun"
csv=$WORK/srun/steps.csv
[[ -f $csv ]] || die "srun -n2 wrote no steps.csv: $(cat "$WORK/out" "$WORK/err" 2>/dev/null | tail -20)"
grep -q '^# world_size=2$' "$csv" || fail "trace metadata lacks world_size=2"
grep -q '^# backend=gloo$' "$csv" || fail "trace metadata lacks backend=gloo"
[[ $(grep -vc '^#' "$csv") == $((1 + 3 * 2)) ]] || fail "steps.csv should hold 3 steps x 2 ranks"
ranks=$(grep -v '^#' "$csv" | tail -n +2 | cut -d, -f2 | sort -u | tr '\n' ' ')
[[ $ranks == "0 1 " ]] || fail "steps.csv should hold ranks 0 and 1, holds: $ranks"

((failures)) && dump_logs
finish
