#!/usr/bin/env bash
# Time travel in a replay (docs/replay-control.md, "Time travel"; numbers in
# docs/benchmarks-detail.md, "Time travel"). Records the `steps` fixture (a barrier and a
# printed line per round: a few thousand slices), then for each case: the plain replay's
# time (slices per second: the cost model of going back), and, on a replay held near the
# end (10 slices before it) through the control socket, how long `goto S` takes from the request to the `paused`
# event of the landing (every rank held before S), REPS times each, median and maximum.
# Usage: scripts/bench-travel.sh [ROUNDS] (default 5000). T=target/debug for a debug build,
# RANKS="2 4" the rank counts.
set -euo pipefail
cd "$(dirname "$0")/.."
T=${T:-target/release}
S=$T/strobe
ROUNDS=${1:-5000}
REPS=${REPS:-5}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT

now() { date +%s.%N; }

echo "strobe: $S, steps $ROUNDS, $REPS repetitions, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| ranks | slices | plain replay (s) | slices/s | goto | from | median (s) | max (s) |"
echo "|---:|---:|---:|---:|---|---:|---:|---:|"
for ranks in ${RANKS:-2 4}; do
    db=$DIR/steps-$ranks.db
    $S record -o "$db" --force -n "$ranks" -- "$T/steps" "$ROUNDS" >/dev/null 2>"$DIR/rec.err" ||
        { cat "$DIR/rec.err" >&2; exit 1; }
    # Held 10 slices before the end: at the very last slices the ranks finalize and exit,
    # and a job whose ranks are all gone ends even while held.
    last=$(( $(sed -n 's/.*recorded \([0-9]*\) slices.*/\1/p' "$DIR/rec.err") - 10 ))
    t0=$(now)
    $S replay "$db" >/dev/null 2>"$DIR/rep.err" || { cat "$DIR/rep.err" >&2; exit 1; }
    plain=$(echo "$(now) - $t0" | bc -l)
    sock=$DIR/ctl-$ranks.sock
    $S replay "$db" --until-slice "$last" --control "$sock" >/dev/null 2>"$DIR/held.err" &
    pid=$!
    python3 - "$sock" "$last" "$REPS" "$ranks" "$plain" <<'PY' || { cat "$DIR/held.err" >&2; kill "$pid" 2>/dev/null; exit 1; }
import json, socket, statistics, sys, time
path, last, reps, ranks, plain = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5])
for _ in range(1200):
    try:
        s = socket.socket(socket.AF_UNIX); s.connect(path); break
    except OSError:
        time.sleep(0.05)
else:
    sys.exit("the replay's control socket never appeared")
f = s.makefile("rw")
def req(o):
    f.write(json.dumps(o) + "\n"); f.flush()
    while True:
        m = json.loads(f.readline())
        if "ok" in m:
            assert m["ok"], m
            return m
def paused(slice):
    while True:
        m = json.loads(f.readline())
        if m.get("event") == "paused":
            assert m["slice"] == slice, m
            return m
st = req({"cmd": "status"})
while st["paused"] is None:
    time.sleep(0.05); st = req({"cmd": "status"})
here = st["paused"]["slice"]
cases = [("back to slice 1", 1), ("back to the middle", last // 2), ("back one slice (rs)", last - 1),
         ("forward 1 slice", None), ("forward 1000 slices", None)]
for name, target in cases:
    times = []
    for _ in range(reps):
        # Start every measurement held at the end (except forward: held at the start of it).
        if target is None:
            start = 1 if "1000" in name else last // 2
            req({"cmd": "goto", "slice": start}); paused(start)
            to = start + (1000 if "1000" in name else 1)
        else:
            if here != last:
                req({"cmd": "goto", "slice": last}); paused(last)
            to = target
        t = time.monotonic()
        req({"cmd": "goto", "slice": to})
        paused(to)
        times.append(time.monotonic() - t)
        here = to
    frm = "held at %d" % (last if target is not None else (1 if "1000" in name else last // 2))
    print("| %s | %d | %.2f | %.0f | %s (to %d) | %s | %.3f | %.3f |" % (
        ranks, last, plain, last / plain, name, to, frm, statistics.median(times), max(times)))
req({"cmd": "quit"})
PY
    wait "$pid" || true
done
