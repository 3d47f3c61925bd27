#!/usr/bin/env bash
# The heisenbug acceptance run (issue 5), by hand: record the heisenbug fixture 20 times
# under timing noise (both outcomes must appear), then replay every recording 20 times
# while LOAD processes (default 2) keep the CPUs busy, and count replays that ended as
# their recording did. Needs a release build (cargo build --release --workspace --bins).
set -euo pipefail
cd "$(dirname "$0")/.."
T=target/release
S=$T/strobe
N=${N:-20}
LOAD=${LOAD:-2}
DIR=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$DIR"
}
trap cleanup EXIT

pass=0; fail=0
for i in $(seq "$N"); do
    if STROBE_FIXTURE_NOISE_US=3000 $S record -o "$DIR/h$i.db" -n 4 -- $T/heisenbug >"$DIR/h$i.out" 2>/dev/null; then
        pass=$((pass + 1)); echo 0 >"$DIR/h$i.code"
    else
        fail=$((fail + 1)); echo 1 >"$DIR/h$i.code"
    fi
done
echo "recordings: $N ($pass passed, $fail failed the assertion)"

for _ in $(seq "$LOAD"); do
    (while :; do :; done) &
    pids+=($!)
done
echo "replaying each $N times with $LOAD CPU-burning processes running"
total=0; same=0
for i in $(seq "$N"); do
    ok=0
    for _ in $(seq "$N"); do
        total=$((total + 1))
        if $S replay "$DIR/h$i.db" >"$DIR/r.out" 2>"$DIR/r.err" \
            && cmp -s "$DIR/r.out" "$DIR/h$i.out" \
            && { [ "$(cat "$DIR/h$i.code")" = 0 ] || grep -q "exited with status 1" "$DIR/r.err"; }; then
            ok=$((ok + 1)); same=$((same + 1))
        else
            echo "recording $i: replay differed:"; cat "$DIR/r.err"
        fi
    done
    echo "recording $i (outcome $(cat "$DIR/h$i.code")): $ok/$N replays matched"
done
echo "total: $same/$total replays reproduced their recording's outcome and output"
