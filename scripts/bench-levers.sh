#!/usr/bin/env bash
# The runtime levers of issue 14 (eager sends, stretched strobe, wake-ups), measured side by
# side with MPICH in one run: small-message latency, 1-byte message rate, the SWEEP3D-like
# wavefront and the papers' synthetic benchmarks at 10 ms. Runs alternate strobe / MPICH
# per round; the script prints every sample and the median of each.
#
#   scripts/bench-levers.sh ROUNDS [STROBE_BIN_DIR...]
#
# Each STROBE_BIN_DIR is a release directory holding `strobe` and `libmpi.so` (default
# target/release of this tree); give another tree's too to measure "before" and "after" in
# the same run: they are labelled strobe1, strobe2, ... in the order given. Needs MPICH
# (mpicc.mpich, mpiexec.mpich). Figures are measurements, never test assertions.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
shift || true
BINS=("$@")
[ ${#BINS[@]} -gt 0 ] || BINS=(target/release)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
for stem in bench_pingpong sweep3d synth_barrier synth_neighbors; do
  for i in "${!BINS[@]}"; do
    "${BINS[$i]}/strobe" mpicc -std=c11 -O2 -o "$W/s${i}_$stem" fixtures/c/$stem.c -I fixtures/c
  done
  mpicc.mpich -std=c11 -O2 -o "$W/m_$stem" fixtures/c/$stem.c -I fixtures/c 2>/dev/null
done
# name: arguments; the RESULT lines' value to keep
runs=(
  "lat|bench_pingpong|sizes=1,8,64 reps=500 window=8"
  "sweep_b|sweep3d|mode=blocking nx=64 ny=64 nz=16 mk=4 work=3.5 iters=1 check=0"
  "sweep_nb|sweep3d|mode=nonblocking nx=64 ny=64 nz=16 mk=4 work=3.5 iters=1 check=0"
  "synth_bar|synth_barrier|gran=10 iters=50"
  "synth_nb|synth_neighbors|gran=10 iters=50 bytes=4096"
)
out=$W/samples
: >"$out"
for round in $(seq 1 "$ROUNDS"); do
  for r in "${runs[@]}"; do
    IFS='|' read -r name stem args <<<"$r"
    for i in "${!BINS[@]}"; do
      # shellcheck disable=SC2086
      "${BINS[$i]}/strobe" run -n 2 -- "$W/s${i}_$stem" $args |
        sed -n "s/^RESULT /strobe$((i + 1)) $name /p" >>"$out"
    done
    # shellcheck disable=SC2086
    mpiexec.mpich -n 2 "$W/m_$stem" $args | sed -n "s/^RESULT /mpich $name /p" >>"$out"
  done
done
# Medians per (implementation, result, bytes, metric).
awk '
  { imp=$1; key=""; for (i=3;i<=NF;i++) { split($i,kv,"="); if (kv[1]=="name"||kv[1]=="bytes") key=key kv[2] " ";
      if (kv[1]=="usec"||kv[1]=="mbps"||kv[1]=="elapsed_s") { k=imp " | " key kv[1]; v[k]=v[k] " " kv[2]; } } }
  END { for (k in v) print k " |" v[k] }' "$out" | sort | while IFS='|' read -r imp what vals; do
  med=$(tr ' ' '\n' <<<"$vals" | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2)? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}')
  printf '%-7s %-32s median %-10s samples%s\n' "$imp" "$what" "$med" "$vals"
done
