#!/usr/bin/env bash
# Recording at scale, two strobe builds side by side (issue 14, docs/benchmarks-detail.md).
#
# Usage: scripts/bench-scale-record.sh ROUNDS RANKS BEFORE_STROBE AFTER_STROBE [TOKEN_RING]
#   e.g. scripts/bench-scale-record.sh 3 1000 /tmp/spans-before/strobe target/release/strobe
#
# Per round, alternating so machine load hits both builds alike: `strobe run -n RANKS --
# token_ring` (with AFTER_STROBE; the ranks' runtime is the same), then for each build
# (order swapped every round) `strobe record -o DB --force -n RANKS -- token_ring` (every
# layer on) and `strobe stats DB`, each under /usr/bin/time -f "%e %U %S" (wall, user, sys
# seconds). Prints one line per measurement (round, what, build, wall, user, sys, file
# bytes, load average) and at the end the medians per build: run, record, record/run (per
# round, then the median), stats, file size. TOKEN_RING defaults to
# target/release/token_ring (`cargo build --release -p strobe-fixtures --bin token_ring`).
# Files go to ${OUT:-/tmp/bench-scale-record}.
set -euo pipefail

rounds=${1:?rounds}
ranks=${2:?ranks}
before=$(realpath "${3:?before strobe}")
after=$(realpath "${4:?after strobe}")
ring=$(realpath "${5:-target/release/token_ring}")
out=${OUT:-/tmp/bench-scale-record}
mkdir -p "$out"
log="$out/results.txt"
: >"$log"
unset STROBE_SCHEDULE_LOG STROBE_METRICS

load() { cut -d' ' -f1 /proc/loadavg; }

# measure ROUND WHAT BUILD CMD...: one line "round what build wall user sys bytes load".
measure() {
    local round=$1 what=$2 build=$3
    shift 3
    local t="$out/time.txt"
    /usr/bin/time -o "$t" -f "%e %U %S" "$@" >/dev/null 2>"$out/stderr.txt" || {
        echo "failed: $* (see $out/stderr.txt)" >&2
        exit 1
    }
    local bytes=0
    if [ "$what" = record ]; then bytes=$(stat -c %s "$out/$build.db"); fi
    echo "$round $what $build $(tail -1 "$t") $bytes $(load)" | tee -a "$log"
}

echo "# round what build wall_s user_s sys_s file_bytes load1 ($(uptime))"
for round in $(seq 1 "$rounds"); do
    measure "$round" run - "$after" run -n "$ranks" -- "$ring"
    if [ $((round % 2)) -eq 1 ]; then order="before after"; else order="after before"; fi
    for build in $order; do
        if [ "$build" = before ]; then bin=$before; else bin=$after; fi
        measure "$round" record "$build" "$bin" record -o "$out/$build.db" --force \
            -n "$ranks" -- "$ring"
        measure "$round" stats "$build" "$bin" stats "$out/$build.db"
    done
done
echo "# $(uptime)"

# Medians: per build, the wall times and the per-round record/run ratio.
python3 - "$log" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
run = {r[0]: float(r[3]) for r in rows if r[1] == "run"}
med = statistics.median
print(f"run wall median {med(run.values()):.2f} s over {len(run)} rounds")
for build in ("before", "after"):
    rec = [r for r in rows if r[1] == "record" and r[2] == build]
    st = [float(r[3]) for r in rows if r[1] == "stats" and r[2] == build]
    ratios = [float(r[3]) / run[r[0]] for r in rec]
    cpu = [float(r[4]) + float(r[5]) for r in rec]
    print(f"{build:6}: record wall median {med(float(r[3]) for r in rec):.2f} s, "
          f"record/run median {med(ratios):.2f} (rounds: {', '.join(f'{x:.2f}' for x in ratios)}), "
          f"record user+sys median {med(cpu):.1f} s, stats median {med(st):.2f} s, "
          f"file {med(int(r[6]) for r in rec) / 1e6:.1f} MB")
run_cpu = [float(r[4]) + float(r[5]) for r in rows if r[1] == "run"]
print(f"run user+sys median {med(run_cpu):.1f} s")
EOF
