#!/usr/bin/env bash
# Test hosts on this machine: N "hosts" h1..hN, each in its own network, PID, UTS (hostname)
# and mount namespace, on a private bridge. Needs root (CI runs as root).
#
#   scripts/hosts.sh up N        make h1..hN; the last line printed is the strobe options
#                                that use them
#   scripts/hosts.sh exec H CMD  run CMD inside host H (its net, pid, uts and mount
#                                namespaces), in the current directory; exit status of CMD
#   scripts/hosts.sh rsh H CMD   the same with ssh's semantics (CMD joined into one line
#                                for `sh -c`); /run/strobe-hosts/<I>/rsh wraps it as one
#                                executable, the --launcher-exec of the printed options
#   scripts/hosts.sh status      list the hosts, their init pids and addresses
#   scripts/hosts.sh down        remove everything (idempotent)
#
# Each host has a long-lived init (`unshare --pid --fork --mount-proc`: PID 1 of the host's
# PID namespace, a bash that reaps orphans), started inside the host's network namespace;
# `exec` enters that init's namespaces with nsenter. Killing the init kills every process of
# the host (the kernel kills a PID namespace with its PID 1), which is what `down` does.
#
# Several harnesses can coexist: STROBE_HOSTS_ID (0..199, default 0) selects the instance.
# Instance I uses the subnet 10.213.I.0/24 (host hK is 10.213.I.K, this machine's side of
# the bridge is 10.213.I.254), the bridge `sh<I>br`, the veths `sh<I>h<K>`, the network
# namespaces `strobe<I>-h<K>` and the state directory /run/strobe-hosts/<I>. Every host
# sees /etc/hosts naming h1..hN (a bind mount in its mount namespace), so programs that
# resolve host names (MPICH's Hydra) find the others.
set -euo pipefail

ID="${STROBE_HOSTS_ID:-0}"
if ! [[ "$ID" =~ ^[0-9]+$ ]] || ((ID > 199)); then
    echo "hosts.sh: STROBE_HOSTS_ID must be 0..199, not '$ID'" >&2
    exit 2
fi
STATE="/run/strobe-hosts/$ID"
BRIDGE="sh${ID}br"
NET="10.213.$ID"
SCRIPT="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"

die() {
    echo "hosts.sh: $*" >&2
    exit 1
}

need_root() {
    [[ "$(id -u)" == 0 ]] || die "needs root (network and PID namespaces, bridges)"
}

netns_of() { echo "strobe${ID}-$1"; }
veth_of() { echo "sh${ID}$1"; }

# The pid (in this namespace) of host $1's init: the child of the recorded unshare.
init_pid() {
    local host="$1" unshare_pid child
    [[ -f "$STATE/$host.unshare" ]] || return 1
    unshare_pid="$(cat "$STATE/$host.unshare")"
    [[ -d "/proc/$unshare_pid" ]] || return 1
    child="$(cat "/proc/$unshare_pid/task/$unshare_pid/children" 2>/dev/null | awk '{print $1}')"
    [[ -n "$child" ]] || return 1
    echo "$child"
}

hosts_list() {
    [[ -f "$STATE/hosts" ]] && cat "$STATE/hosts"
    return 0
}

cmd_up() {
    local n="${1:-}"
    [[ "$n" =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 64)) || die "usage: hosts.sh up N (1..64)"
    need_root
    [[ -f "$STATE/hosts" ]] && die "instance $ID is already up (hosts.sh down first)"
    mkdir -p "$STATE"
    ip link add "$BRIDGE" type bridge
    ip addr add "$NET.254/24" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    # Bridged frames go through iptables when br_netfilter is loaded (Docker hosts): let
    # this bridge's traffic through, whatever the FORWARD policy.
    if command -v iptables >/dev/null && iptables -S FORWARD >/dev/null 2>&1; then
        iptables -I FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT -m comment \
            --comment "strobe-hosts-$ID" 2>/dev/null || true
    fi
    {
        echo "127.0.0.1 localhost"
        for k in $(seq 1 "$n"); do echo "$NET.$k h$k"; done
        # This machine, by its own name: launchers running here (Hydra's mpiexec, strobe's
        # Machine Manager) give that name to the processes they start in the hosts.
        echo "$NET.254 $(hostname)"
    } >"$STATE/etc-hosts"
    # An ssh-compatible remote shell for launchers that take one executable (Hydra's
    # -launcher rsh -launcher-exec, STROBE_RSH): `rsh HOST COMMAND...`.
    printf '#!/bin/sh\nexec env STROBE_HOSTS_ID=%s "%s" rsh "$@"\n' "$ID" "$SCRIPT" >"$STATE/rsh"
    chmod +x "$STATE/rsh"
    local names=()
    for k in $(seq 1 "$n"); do
        local host="h$k" ns veth
        ns="$(netns_of "$host")"
        veth="$(veth_of "$host")"
        ip netns add "$ns"
        ip link add "$veth" type veth peer name eth0 netns "$ns"
        ip link set "$veth" master "$BRIDGE" up
        ip -n "$ns" addr add "$NET.$k/24" dev eth0
        ip -n "$ns" link set eth0 up
        ip -n "$ns" link set lo up
        # The host's init: PID 1 of a new PID namespace with its own /proc, hostname and
        # /etc/hosts. bash as PID 1 reaps orphaned processes (its SIGCHLD handler waits).
        setsid ip netns exec "$ns" unshare --pid --fork --mount-proc --uts --mount \
            bash -c 'hostname "$1"; mount --bind "$2" /etc/hosts
                     trap "exit 0" TERM
                     while :; do sleep 3600 & wait $!; done' init "$host" "$STATE/etc-hosts" \
            </dev/null >/dev/null 2>&1 &
        echo $! >"$STATE/$host.unshare"
        names+=("$host")
    done
    printf '%s\n' "${names[@]}" >"$STATE/hosts"
    # Wait until every init runs with its hostname set.
    for host in "${names[@]}"; do
        local tries=0
        until [[ "$(cmd_exec_quiet "$host" hostname 2>/dev/null)" == "$host" ]]; do
            ((++tries < 100)) || die "host $host did not come up"
            sleep 0.05
        done
    done
    echo "hosts.sh: instance $ID up: ${names[*]} on $BRIDGE ($NET.0/24)" >&2
    local joined
    joined="$(
        IFS=,
        echo "${names[*]}"
    )"
    echo "--hosts $joined --launcher-exec $STATE/rsh"
}

cmd_exec_quiet() {
    local host="$1"
    shift
    local pid
    pid="$(init_pid "$host")" || return 125
    nsenter --target "$pid" --net --pid --uts --mount --wd="$PWD" -- "$@"
}

cmd_exec() {
    [[ $# -ge 2 ]] || die "usage: hosts.sh exec HOST CMD [ARGS...]"
    need_root
    local host="$1"
    grep -qx -- "$host" <(hosts_list) || die "no host '$host' in instance $ID (hosts.sh status)"
    init_pid "$host" >/dev/null || die "host '$host' has no running init"
    cmd_exec_quiet "$@"
}

# ssh semantics: the arguments after the host are joined into one command line for the
# remote shell, as `ssh HOST ARGS...` does (Hydra quotes its proxy command that way).
cmd_rsh() {
    [[ $# -ge 2 ]] || die "usage: hosts.sh rsh HOST COMMAND..."
    local host="$1"
    shift
    cmd_exec "$host" sh -c "$*"
}

cmd_status() {
    local any=0
    for host in $(hosts_list); do
        any=1
        local pid addr
        pid="$(init_pid "$host" || echo "-")"
        addr="$(ip -n "$(netns_of "$host")" -4 -o addr show dev eth0 2>/dev/null | awk '{print $4}')"
        echo "$host init=$pid addr=${addr:--} netns=$(netns_of "$host")"
    done
    ((any)) || echo "instance $ID: no hosts"
}

cmd_down() {
    need_root
    for f in "$STATE"/*.unshare; do
        [[ -f "$f" ]] || continue
        local host pid
        host="$(basename "$f" .unshare)"
        # Killing PID 1 of the host's PID namespace kills every process inside it.
        pid="$(init_pid "$host" || true)"
        [[ -n "$pid" ]] && kill -KILL "$pid" 2>/dev/null || true
        kill -KILL "$(cat "$f")" 2>/dev/null || true
    done
    for ns in $(ip netns list | awk '{print $1}' | grep -E "^strobe${ID}-h[0-9]+$" || true); do
        # Processes entered into the netns without its PID namespace (ip netns exec).
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
        ip netns delete "$ns" 2>/dev/null || true
    done
    # A namespace dies (with its end of each veth) only once its last process is gone,
    # asynchronously: delete the veths ourselves and wait for the killed inits to vanish.
    for dev in $(ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' |
        grep -E "^sh${ID}h[0-9]+$" || true); do
        ip link delete "$dev" 2>/dev/null || true
    done
    ip link delete "$BRIDGE" 2>/dev/null || true
    local tries=0
    while pgrep -f "^bash -c hostname .* $STATE/etc-hosts\$" >/dev/null && ((tries++ < 100)); do
        sleep 0.05
    done
    if command -v iptables >/dev/null; then
        while iptables -D FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT -m comment \
            --comment "strobe-hosts-$ID" 2>/dev/null; do :; done
    fi
    rm -rf "$STATE"
}

case "${1:-}" in
up) cmd_up "${2:-}" ;;
down) cmd_down ;;
exec)
    shift
    cmd_exec "$@"
    ;;
rsh)
    shift
    cmd_rsh "$@"
    ;;
status) cmd_status ;;
*)
    echo "usage: hosts.sh up N | down | exec HOST CMD... | rsh HOST CMD... | status" >&2
    exit 2
    ;;
esac
