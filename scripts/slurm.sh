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
#   scripts/hosts.sh up 3; scripts/slurm.sh up-hosts
#                             # a 3-node cluster over the test hosts of hosts.sh instance
#                             # $STROBE_HOSTS_ID: slurmctld here (on the bridge address
#                             # 10.213.I.254), one slurmd per test host, started inside it
#                             # (its network, PID, UTS and mount namespaces) as node hK.
#                             # hosts.sh down also ends them (they die with the host).
#
# Single node: the controller and the node daemon listen on 127.0.0.1 only (ports 6817/6818, or
# $STROBE_SLURM_PORT and the next one). munged gets its own socket and key in the state
# directory; slurm.conf points the clients and daemons at that socket (AuthInfo).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DIR="${STROBE_SLURM_DIR:-/run/strobe-slurm}"
PORT="${STROBE_SLURM_PORT:-6817}"
NODE="$(hostname -s)"
HOSTS_ID="${STROBE_HOSTS_ID:-0}"

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

# write_config CONTROLLER_ADDR NODE_LINES
write_config() {
    mkdir -p "$DIR/state" "$DIR/munge"
    cat >"$DIR/slurm.conf" <<EOF
ClusterName=strobe
SlurmctldHost=$NODE($1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool-%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd-%n.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd-%n.log
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
$2
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
        # Every node idle (or partly used), none down or unknown.
        local states
        states="$(SLURM_CONF="$DIR/slurm.conf" sinfo -h -N -o '%t' 2>/dev/null)" || states=""
        if [[ -n "$states" ]] && ! grep -qvE '^(idle|mix)$' <<<"$states"; then
            return 0
        fi
        sleep 0.2
    done
    echo "slurm.sh: the node did not become idle; logs:" >&2
    tail -n 20 "$DIR"/*.log >&2 || true
    SLURM_CONF="$DIR/slurm.conf" sinfo -N -l >&2 || true
    return 1
}

cmd_up() {
    need_root
    install_if_missing
    cmd_down
    write_config 127.0.0.1 "NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN"
    start_munge
    SLURM_CONF="$DIR/slurm.conf" slurmctld -c -f "$DIR/slurm.conf"
    SLURM_CONF="$DIR/slurm.conf" slurmd -f "$DIR/slurm.conf" -N "$NODE"
    wait_idle || { cmd_down; die "single-node Slurm did not start"; }
    echo "SLURM_CONF=$DIR/slurm.conf"
}

# The test hosts of hosts.sh instance $HOSTS_ID: "NAME ADDR" lines.
test_hosts() {
    STROBE_HOSTS_ID="$HOSTS_ID" "$SCRIPT_DIR/hosts.sh" status |
        sed -nE 's|^(h[0-9]+) .*addr=([0-9.]+)/.*|\1 \2|p'
}

cmd_up_hosts() {
    need_root
    install_if_missing
    cmd_down
    local hosts lines="" name addr
    hosts="$(test_hosts)"
    [[ -n "$hosts" ]] || die "no test hosts in instance $HOSTS_ID (scripts/hosts.sh up N first)"
    while read -r name addr; do
        lines+="NodeName=$name NodeAddr=$addr CPUs=$(nproc) State=UNKNOWN"$'\n'
    done <<<"$hosts"
    write_config "10.213.$HOSTS_ID.254" "$lines"
    awk '{print $1}' <<<"$hosts" >"$DIR/test-hosts"
    start_munge
    SLURM_CONF="$DIR/slurm.conf" slurmctld -c -f "$DIR/slurm.conf"
    while read -r name addr; do
        # A test host mounts its own sysfs (its network namespace's), without the cgroup
        # file systems slurmd insists on finding: mount them in the host's own mount
        # namespace (private: nothing propagates back here; gone with the host).
        STROBE_HOSTS_ID="$HOSTS_ID" "$SCRIPT_DIR/hosts.sh" exec "$name" sh -c '
            grep -q " /sys/fs/cgroup " /proc/mounts && exit 0
            mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup
            for c in cpu cpuacct cpuset memory devices freezer blkio pids; do
                mkdir -p /sys/fs/cgroup/$c && mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c
            done
            mkdir -p /sys/fs/cgroup/systemd
            mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd' </dev/null
        STROBE_HOSTS_ID="$HOSTS_ID" "$SCRIPT_DIR/hosts.sh" exec "$name" \
            env SLURM_CONF="$DIR/slurm.conf" slurmd -f "$DIR/slurm.conf" -N "$name" </dev/null || {
            tail -n 5 "$DIR/slurmd-$name.log" >&2 || true
            cmd_down
            die "slurmd did not start on $name"
        }
    done <<<"$hosts"
    wait_idle || { cmd_down; die "Slurm over the test hosts did not start"; }
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
    local name
    if [[ -f "$DIR/test-hosts" ]]; then
        # Each slurmd's pid file holds a pid of its host's PID namespace: kill it there.
        while read -r name; do
            STROBE_HOSTS_ID="$HOSTS_ID" "$SCRIPT_DIR/hosts.sh" exec "$name" \
                sh -c "kill \$(cat '$DIR/slurmd-$name.pid')" </dev/null 2>/dev/null || true
        done <"$DIR/test-hosts"
    else
        stop_pidfile "$DIR/slurmd-$NODE.pid"
    fi
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
up-hosts) cmd_up_hosts ;;
down) cmd_down ;;
status) cmd_status ;;
*)
    echo "usage: slurm.sh up | up-hosts | down | status" >&2
    exit 2
    ;;
esac
