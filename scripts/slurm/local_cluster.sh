#!/usr/bin/env bash
# A throw-away two-node Slurm cluster on this machine, for trying scripts/slurm/train.sbatch and
# for the tests: the two nodes are the network namespaces of scripts/netns/two_hosts.sh (node0
# 10.77.0.1 also runs slurmctld, node1 10.77.0.2), with their own munged, key, spool and state in
# DIR. No systemd, nothing outside DIR and the namespaces is touched. Needs root, munge and Slurm
# (slurmctld, slurmd, slurm-client; scripts/bootstrap.sh installs them). The daemons' Unix
# sockets (munge, slurmd's spool) live under /tmp/shoplens-slurm-ID instead, since a socket path
# may not exceed 108 bytes and DIR may be long.
#
#   local_cluster.sh start ID DIR       start everything and wait for both nodes to be idle (exit 77 if impossible)
#   local_cluster.sh run ID DIR CMD...  run a client command (sbatch, squeue, scontrol ...) on node0
#   local_cluster.sh stop ID DIR        stop the daemons and remove the namespaces (DIR is kept; any DIR
#                                       stops a cluster whose DIR is gone)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
hosts="$here/../netns/two_hosts.sh"
die() { echo "local_cluster: $*" >&2; exit 1; }
skip() { echo "local_cluster: SKIP: $*" >&2; exit 77; }

write_conf() {
  local id=$1 dir=$2
  cat > "$dir/slurm.conf" <<CONF
ClusterName=shoplens
SlurmctldHost=shoplens-$id-node0(10.77.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sockets/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$sockets/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
# No cgroups, no accounting, no MPI: plain processes that this script can stop.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
JobRequeue=1
KillWait=20
NodeName=shoplens-$id-node0 NodeAddr=10.77.0.1 CPUs=1 State=UNKNOWN
NodeName=shoplens-$id-node1 NodeAddr=10.77.0.2 CPUs=1 State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
  # Only read at start-up here (no cgroup plugin is used); v1 is what a hybrid hierarchy offers.
  echo "CgroupPlugin=cgroup/v1" > "$dir/cgroup.conf"
}

start_munge() {
  local dir=$1
  mkdir -p "$dir/munge" && chmod 700 "$dir/munge"
  [ -f "$dir/munge/munge.key" ] || mungekey --create --keyfile "$dir/munge/munge.key" >/dev/null
  chmod 400 "$dir/munge/munge.key"
  munged --force --socket "$sockets/munge.socket" --key-file "$dir/munge/munge.key" --pid-file "$sockets/munged.pid" \
    --log-file "$dir/munge/munged.log" --seed-file "$dir/munge/munged.seed" 2>>"$dir/munge/start.err" ||
    die "munged did not start: $(cat "$dir/munge/start.err")"
}

wait_idle() {
  local id=$1 dir=$2 _
  for _ in $(seq 1 150); do
    if [ "$(run "$id" "$dir" sinfo -h -o '%t' 2>/dev/null | sort -u | tr -d '\n')" = idle ]; then return 0; fi
    sleep 0.2
  done
  die "the nodes did not become idle: $(run "$id" "$dir" sinfo 2>&1 | tail -n 3 | tr '\n' ' ') (logs in $dir/log)"
}

start() {
  local id=$1 dir=$2
  local tool
  for tool in slurmctld slurmd sbatch; do
    command -v "$tool" >/dev/null || skip "Slurm is not installed ($tool is missing: slurmctld, slurmd, slurm-client)"
  done
  command -v munged >/dev/null || skip "munge is not installed"
  bash "$hosts" up "$id" >/dev/null
  mkdir -p "$dir"/{state,run,log} "$sockets/shoplens-$id-node0" "$sockets/shoplens-$id-node1"
  chmod 700 "$sockets"
  write_conf "$id" "$dir"
  start_munge "$dir"
  bash "$hosts" exec "$id" 0 slurmctld -f "$dir/slurm.conf" -i || die "slurmctld did not start (see $dir/log/slurmctld.log)"
  bash "$hosts" exec "$id" 0 slurmd -f "$dir/slurm.conf" || die "slurmd on node0 did not start (see $dir/log)"
  bash "$hosts" exec "$id" 1 slurmd -f "$dir/slurm.conf" || die "slurmd on node1 did not start (see $dir/log)"
  wait_idle "$id" "$dir"
  echo "local_cluster: 2 nodes idle; submit with: $0 run $id $dir sbatch ..."
}

run() {
  local id=$1 dir=$2; shift 2
  SLURM_CONF="$dir/slurm.conf" bash "$hosts" exec "$id" 0 "$@"
}

stop() {
  local id=$1 dir=$2 f
  # The namespaces' processes (slurmctld, slurmd, jobs) die with them; munged runs outside.
  bash "$hosts" down "$id"
  f="$sockets/munged.pid"
  [ ! -f "$f" ] || kill "$(cat "$f")" 2>/dev/null || true
  rm -rf "$sockets"
}

cmd=${1:-}; shift || true
[ $# -ge 2 ] || die "usage: local_cluster.sh start|run|stop ID DIR [CMD...]"
[[ "$1" =~ ^[a-z0-9]{1,8}$ ]] || die "ID must be 1-8 lowercase letters or digits, got '$1'"
mkdir -p "$2"
dir=$(cd "$2" && pwd)
sockets=/tmp/shoplens-slurm-$1
case "$cmd" in
  start) start "$1" "$dir" ;;
  run) id=$1; shift 2; run "$id" "$dir" "$@" ;;
  stop) stop "$1" "$dir" ;;
  *) die "usage: local_cluster.sh start|run|stop ID DIR [CMD...]" ;;
esac
