#!/usr/bin/env bash
# slurm.sh up|down|status: a single-node Slurm cluster on this machine, for the Slurm
# launcher's tests (runtime/src/daemon/launch/slurm.rs): munged, slurmctld and slurmd from
# Debian's slurm-wlm and munge (installed through scripts/apt-install.sh when missing),
# every file of theirs under one state directory (default /run/strobe-slurm, or
# $STROBE_SLURM_DIR). Needs root (CI runs as root).
#
#   scripts/slurm.sh up       # starts the daemons, waits until the node is idle; the last
#                             # line printed is the environment for clients:
#                             #   SLURM_CONF=/run/strobe-slurm/slurm.conf
#   SLURM_CONF=/run/strobe-slurm/slurm.conf srun -N1 hostname
#   scripts/slurm.sh down     # stops them and removes the state directory; idempotent
#
# The controller and the node daemon listen on 127.0.0.1 only (ports 6817/6818, or
# $STROBE_SLURM_PORT and the next one). munged gets its own socket and key in the state
# directory; slurm.conf points the clients and daemons at that socket (AuthInfo).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DIR="${STROBE_SLURM_DIR:-/run/strobe-slurm}"
PORT="${STROBE_SLURM_PORT:-6817}"
NODE="$(hostname -s)"

die() {
    echo "slurm.sh: $*" >&2
    exit 1
}

need_root() {
    [[ "$(id -u)" -eq 0 ]] || die "needs root (munged, slurmctld and slurmd run as root here)"
}

install_if_missing() {
    if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null ||
        ! command -v munged >/dev/null || ! command -v srun >/dev/null; then
        "$SCRIPT_DIR/apt-install.sh" slurm.sh slurm-wlm slurm-client munge
    fi
}

write_config() {
    local cpus
    cpus="$(nproc)"
    mkdir -p "$DIR/state" "$DIR/spool" "$DIR/munge"
    cat >"$DIR/slurm.conf" <<EOF
ClusterName=strobe
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
LaunchParameters=use_interactive_step
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=strobe Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
EOF
    # Slurm >= 21 reads cgroup.conf when it exists next to slurm.conf; none is needed.
}

start_munge() {
    [[ -s "$DIR/munge/munge.key" ]] ||
        dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
    chmod 700 "$DIR/munge"
    chmod 400 "$DIR/munge/munge.key"
    munged --force --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket" \
        --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/munge/munged.log" \
        --seed-file="$DIR/munge/munged.seed"
}

wait_idle() {
    local i
    for i in $(seq 1 150); do
        if SLURM_CONF="$DIR/slurm.conf" sinfo -h -N -o '%t' 2>/dev/null | grep -qE '^(idle|mix)'; then
            return 0
        fi
        sleep 0.2
    done
    echo "slurm.sh: the node did not become idle; logs:" >&2
    tail -n 20 "$DIR/slurmctld.log" "$DIR/slurmd.log" >&2 || true
    SLURM_CONF="$DIR/slurm.conf" sinfo -N -l >&2 || true
    return 1
}

cmd_up() {
    need_root
    install_if_missing
    cmd_down
    write_config
    start_munge
    SLURM_CONF="$DIR/slurm.conf" slurmctld -c -f "$DIR/slurm.conf"
    SLURM_CONF="$DIR/slurm.conf" slurmd -f "$DIR/slurm.conf"
    wait_idle || { cmd_down; die "single-node Slurm did not start"; }
    echo "SLURM_CONF=$DIR/slurm.conf"
}

stop_pidfile() {
    local file="$1" pid i
    [[ -s "$file" ]] || return 0
    pid="$(cat "$file")"
    kill "$pid" 2>/dev/null || return 0
    for i in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
}

cmd_down() {
    need_root
    [[ -d "$DIR" ]] || return 0
    stop_pidfile "$DIR/slurmd.pid"
    stop_pidfile "$DIR/slurmctld.pid"
    stop_pidfile "$DIR/munge/munged.pid"
    rm -rf "$DIR"
}

cmd_status() {
    [[ -f "$DIR/slurm.conf" ]] || { echo "not up"; return 0; }
    SLURM_CONF="$DIR/slurm.conf" sinfo -N -l
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
*)
    echo "usage: slurm.sh up | down | status" >&2
    exit 2
    ;;
esac
