#!/usr/bin/env bash
# Two builds side by side (issue 14): the SWEEP3D-like wavefront against MPICH, what
# `strobe record` costs on it (replay log only, everything on), and a recording's fixed
# start-up (`strobe record -n 1 -- /bin/true`). Alternating per round.
#
#   scripts/bench-sweep-record.sh ROUNDS BEFORE_BIN_DIR AFTER_BIN_DIR
#
# Each BIN_DIR holds a release `strobe` and `libmpi.so`; each build runs with
# LD_LIBRARY_PATH at its own directory (a `strobe mpicc` binary's RUNPATH yields to it).
# Needs MPICH (mpicc.mpich, mpiexec.mpich). Prints every round and the medians. Figures
# are measurements, never test assertions.
set -euo pipefail
cd "$(dirname "$0")/.."
R=${1:-5}
B=$(realpath "$2")
A=$(realpath "$3")
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
SRC=fixtures/c
"$A/strobe" mpicc -std=c11 -O2 -o "$W/sw_s" $SRC/sweep3d.c -I $SRC 2>/dev/null
mpicc.mpich -std=c11 -O2 -o "$W/sw_m" $SRC/sweep3d.c -I $SRC 2>/dev/null
ARGS="nx=64 ny=64 nz=32 mk=4 work=3.5 iters=2 check=0"
elapsed() { sed -n 's/.*elapsed_s=\([0-9.]*\).*/\1/p' | head -1; }
wall_ms() {
  local s e
  s=$(date +%s%N)
  "$@" >/dev/null 2>&1 || true
  e=$(date +%s%N)
  echo $(((e - s) / 1000000))
}
strobe_of() { env LD_LIBRARY_PATH="$1" "$1/strobe" "${@:2}"; }
OUT=$W/samples
: >"$OUT"
for _ in $(seq 1 "$R"); do
  echo "load $(cut -d' ' -f1 /proc/loadavg)" >>"$OUT"
  for mode in blocking nonblocking; do
    for who in before after; do
      d=$B; [ $who = after ] && d=$A
      # shellcheck disable=SC2086
      echo "sweep_$mode $who $(strobe_of "$d" run -n 2 -- "$W/sw_s" mode=$mode $ARGS | elapsed)" >>"$OUT"
    done
    # shellcheck disable=SC2086
    echo "sweep_$mode mpich $(mpiexec.mpich -n 2 "$W/sw_m" mode=$mode $ARGS | elapsed)" >>"$OUT"
  done
  for who in before after; do
    d=$B; [ $who = after ] && d=$A
    # shellcheck disable=SC2086
    echo "wall_run $who $(wall_ms strobe_of "$d" run -n 2 -- "$W/sw_s" mode=blocking $ARGS)" >>"$OUT"
    # shellcheck disable=SC2086
    echo "wall_record_log $who $(wall_ms strobe_of "$d" record -o "$W/r.db" --force \
      --schedule-log off --metrics off -n 2 -- "$W/sw_s" mode=blocking $ARGS)" >>"$OUT"
    # shellcheck disable=SC2086
    echo "wall_record_all $who $(wall_ms strobe_of "$d" record -o "$W/r.db" --force \
      -n 2 -- "$W/sw_s" mode=blocking $ARGS)" >>"$OUT"
    for _ in 1 2 3 4; do
      echo "wall_record_true $who $(wall_ms strobe_of "$d" record -o "$W/t.db" --force \
        -n 1 -- /bin/true)" >>"$OUT"
    done
  done
done
python3 - "$OUT" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    if f[0] == "load":
        print(line.strip())
    elif len(f) == 3 and f[2]:
        d[(f[0], f[1])].append(float(f[2]))
med = {k: statistics.median(v) for k, v in d.items()}
for (what, who), m in sorted(med.items()):
    print(f"{what:18} {who:7} median {m:10.3f}  ({len(d[(what, who)])} samples)")
for mode in ("blocking", "nonblocking"):
    mp = med.get((f"sweep_{mode}", "mpich"))
    for who in ("before", "after"):
        s = med.get((f"sweep_{mode}", who))
        if mp and s:
            print(f"sweep3d {mode} {who}: {100 * (s / mp - 1):+.1f}% vs MPICH")
for who in ("before", "after"):
    run = med.get(("wall_run", who))
    for k in ("wall_record_log", "wall_record_all"):
        if run and (k, who) in med:
            print(f"{k} {who}: {100 * (med[(k, who)] / run - 1):+.1f}% vs strobe run")
PY
