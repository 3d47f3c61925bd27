#!/usr/bin/env bash
# The cost of a slice with K node daemons over TCP on this machine (docs/multi-host.md,
# "Scale"): `strobe run --launcher local --nodes K -n K` of `barrier_every 0 ITERS` (one
# rank per daemon, back-to-back barriers: every barrier is a slice with a collective, so
# the job's time per barrier is the cost of a slice across K daemons: the strobe, DEM's
# all-to-all, the microstrobes and the slot mirror), next to the same job in one process
# (`--nodes K` as threads over shared memory). Every daemon, rank and link runs on this
# machine's cores, so past a few daemons per core this measures the simulation as much as
# the protocol; read the table with docs/multi-host.md.
#
#   scripts/daemon-scale.sh [ITERS] [K...]     defaults: 300 and 2 4 8 16 32 64
#
# Uses target/release (cargo build --release --workspace first). Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
S=target/release/strobe
P=target/release/barrier_every
[[ -x $S && -x $P ]] || {
    echo "daemon-scale: build first: cargo build --release --workspace" >&2
    exit 2
}
ITERS="${1:-300}"
shift || true
NODES=("$@")
((${#NODES[@]})) || NODES=(2 4 8 16 32 64)

# Wall seconds of one run (the job's own start-up included, measured apart below).
wall() {
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }'
}

echo "| daemons | ranks | start-up, 1 barrier (s) | $ITERS barriers (s) | per slice, daemons (us) | per slice, threads (us) |"
echo "|---:|---:|---:|---:|---:|---:|"
for k in "${NODES[@]}"; do
    base=$(wall $S run --launcher local --nodes "$k" -n "$k" --timeout 600s -- $P 0 1)
    full=$(wall $S run --launcher local --nodes "$k" -n "$k" --timeout 600s -- $P 0 "$ITERS")
    tb=$(wall $S run --nodes "$k" -n "$k" --timeout 600s -- $P 0 1)
    tf=$(wall $S run --nodes "$k" -n "$k" --timeout 600s -- $P 0 "$ITERS")
    per=$(awk -v f="$full" -v b="$base" -v n="$ITERS" 'BEGIN { print (f - b) / (n - 1) * 1e6 }')
    pert=$(awk -v f="$tf" -v b="$tb" -v n="$ITERS" 'BEGIN { print (f - b) / (n - 1) * 1e6 }')
    printf '| %d | %d | %.2f | %.2f | %.0f | %.0f |\n' "$k" "$k" "$base" "$full" "$per" "$pert"
done
