#!/usr/bin/env bash
# Replay speed and replay-log size on the fixtures (docs/benchmarks-detail.md, "Replay").
# For each case: `strobe record` with only the replay log (as production records), then
# `strobe replay` of that file, side by side, REPS times; prints the median wall times, their
# ratio, and the replay log's bytes per descriptor. Then the cost of an empty slice: the
# `idle` fixture for two idle lengths (empty timer slices) and the replay-log bytes they add.
# Needs a release build (cargo build --release --workspace --bins) and sqlite3.
set -euo pipefail
cd "$(dirname "$0")/.."
T=target/release
S=$T/strobe
REPS=${REPS:-5}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "| case | ranks | record (s) | replay (s) | replay / record | descriptors | replay-log bytes | bytes / descriptor |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
while read -r name ranks args; do
    rec_t=(); rep_t=()
    for i in $(seq "$REPS"); do
        db=$DIR/$name-$i.db
        t0=$(now)
        $S record -o "$db" --force --schedule-log off --metrics off -n "$ranks" -- $T/$name $args >/dev/null 2>&1 || true
        t1=$(now)
        $S replay "$db" >/dev/null 2>"$DIR/rep.err" || { cat "$DIR/rep.err" >&2; exit 1; }
        t2=$(now)
        rec_t+=("$(echo "$t1 - $t0" | bc -l)")
        rep_t+=("$(echo "$t2 - $t1" | bc -l)")
    done
    r=$(printf '%s\n' "${rec_t[@]}" | median)
    p=$(printf '%s\n' "${rep_t[@]}" | median)
    db=$DIR/$name-1.db
    descs=$(sqlite3 "$db" "SELECT sum(n_descriptors) FROM slice")
    bytes=$(sqlite3 "$db" "SELECT coalesce(sum(length(data)), 0) FROM replay_log")
    printf '| %s %s | %s | %.3f | %.3f | %.2f | %s | %s | %.2f |\n' "$name" "$args" "$ranks" "$r" "$p" \
        "$(echo "$p / $r" | bc -l)" "$descs" "$bytes" "$(echo "$bytes / $descs" | bc -l)"
done <<'CASES'
barrier_every 4 10000 100
barrier_every 8 10000 50
token_ring 4
pingpong 2
p2p 4
collectives 4
comms 4
polling 4
CASES

echo
echo "| idle (ms) | slices | empty slices | replay-log bytes | slice-table bytes (dbstat) |"
echo "|---:|---:|---:|---:|---:|"
for ms in 100 1000; do
    db=$DIR/idle-$ms.db
    $S record -o "$db" --force --schedule-log off --metrics off -n 4 --strobe fixed -- $T/idle "$ms" >/dev/null 2>&1
    slices=$(sqlite3 "$db" "SELECT count(*) FROM slice")
    empty=$(sqlite3 "$db" "SELECT count(*) FROM slice WHERE n_descriptors = 0")
    bytes=$(sqlite3 "$db" "SELECT coalesce(sum(length(data)), 0) FROM replay_log")
    sbytes=$(sqlite3 "$db" "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = 'slice'" 2>/dev/null || echo "n/a")
    echo "| $ms | $slices | $empty | $bytes | $sbytes |"
done
