#!/usr/bin/env bash
# Small messages (issue 14: inline sends, payloads in completions), before and after side by
# side with MPICH in one run: one-way latency of 1, 8 and 64 bytes and the message rate with
# windows of 8 and 64 messages (osu_mbw_mr-like), alternating per round.
#
#   scripts/bench-small-messages.sh ROUNDS BEFORE_BIN_DIR AFTER_BIN_DIR [OUT]
#
# Each BIN_DIR holds a release `strobe` and `libmpi.so`. Prints the load average before each
# block and the median and best of every figure. Needs MPICH (mpicc.mpich, mpiexec.mpich).
# Figures are measurements, never test assertions.
set -euo pipefail
cd "$(dirname "$0")/.."
R=${1:-3}
B=$2
A=$3
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
OUT=${4:-$W/samples}
SRC=fixtures/c
"$B/strobe" mpicc -std=c11 -O2 -o "$W/pp_b" $SRC/bench_pingpong.c -I $SRC 2>/dev/null
"$A/strobe" mpicc -std=c11 -O2 -o "$W/pp_a" $SRC/bench_pingpong.c -I $SRC 2>/dev/null
mpicc.mpich -std=c11 -O2 -o "$W/pp_m" $SRC/bench_pingpong.c -I $SRC 2>/dev/null
: >"$OUT"
for _ in $(seq 1 "$R"); do
  for win in 8 64; do
    uptime | sed 's/.*load average: /load /' >>"$OUT"
    args="sizes=1,8,64 reps=2000 window=$win"
    # shellcheck disable=SC2086
    "$B/strobe" run -n 2 -- "$W/pp_b" $args | sed -n "s/^RESULT /before w$win /p" >>"$OUT"
    # shellcheck disable=SC2086
    "$A/strobe" run -n 2 -- "$W/pp_a" $args | sed -n "s/^RESULT /after w$win /p" >>"$OUT"
    # shellcheck disable=SC2086
    mpiexec.mpich -n 2 "$W/pp_m" $args | sed -n "s/^RESULT /mpich w$win /p" >>"$OUT"
  done
done
python3 - "$OUT" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
loads = []
for line in open(sys.argv[1]):
    p = line.split()
    if p[0] == "load":
        loads.append(p[1].rstrip(","))
        continue
    imp, win = p[0], p[1]
    kv = dict(x.split("=") for x in p[2:])
    if kv["name"] == "latency" and win == "w64":
        continue  # the latency loop does not depend on the window
    d[(kv["name"], win, int(kv["bytes"]), imp)].append(float(kv.get("usec") or kv["mbps"]))
print("load averages:", " ".join(loads))
for k in sorted({k[:3] for k in d}):
    cells = []
    for imp in ("before", "after", "mpich"):
        v = d.get(k + (imp,), [])
        best = min(v) if k[0] == "latency" else max(v) if v else 0
        cells.append(f"{imp} median {statistics.median(v):.3g} best {best:.3g}" if v else f"{imp} -")
    print(k, " | ".join(cells))
PY
