#!/bin/bash
# Polling under load (issue 11 item 8; numbers in docs/benchmarks-detail.md):
# 3 runs of `exchange 0 5000 1024` on NR ranks (default 8), with no load of ours, then beside
# two busy loops. Extra arguments are environment settings, e.g. STROBE_SPIN_US=50 for the
# old always-poll behaviour.   usage: scripts/spin-under-load.sh LABEL [VAR=VALUE...]
set -u
S=${S:-target/release}
label=$1; shift
run3() {
  for _ in 1 2 3; do
    t0=$(date +%s.%N)
    env "$@" "$S/strobe" run -n "${NR:-8}" --timeout 120s -- "$S/exchange" 0 5000 1024 >/dev/null 2>&1 \
      || echo -n "(exit $?) "
    t1=$(date +%s.%N)
    printf "%.2f " "$(echo "$t1 - $t0" | bc)"
  done
}
echo -n "$label unloaded: "; run3 "$@"; echo
sh -c 'while :; do :; done' & b1=$!
sh -c 'while :; do :; done' & b2=$!
echo -n "$label 2 busy loops: "; run3 "$@"; echo
kill "$b1" "$b2"
