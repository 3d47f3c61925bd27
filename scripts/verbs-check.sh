#!/usr/bin/env bash
# verbs-check.sh: checks strobe's verbs (RDMA) transport on a host with an RDMA device,
# loopback on one HCA (docs/multi-host.md, "RDMA (verbs)"):
#   1. what verbs sees here (`ibv_devinfo`, `strobe doctor`);
#   2. the provider's semantics over real verbs (runtime/tests/verbs_hw.rs) and the
#      transport conformance suite over real verbs (transport_conformance.rs, verbs_hw::),
#      both with STROBE_VERBS_HW=1;
#   3. the fixture matrix across two local node daemons with `--transport verbs`: the Rust
#      fixtures on 2 and 4 ranks, every C fixture whose verdict is "pass"
#      (fixtures/c/manifest.toml) on its smallest rank count;
# and prints a pass table.
#
# Exit status: 0 when everything passed, or when this host has no RDMA device (it prints
# "no RDMA device: nothing to check": the script is meant to run anywhere, CI included,
# and a machine without the hardware is not a failure of strobe; the line says plainly
# that nothing was checked); 1 when a check failed or a device is present but verbs is
# unusable (`strobe doctor` says why); 2 for a bad command line.
#
#   scripts/verbs-check.sh                      # everything (builds release first)
#   scripts/verbs-check.sh --matrix-only tcp    # only the fixture matrix, with another
#                                               # transport (`default`: no --transport),
#                                               # even without a device: checks this
#                                               # script's own machinery
#   --debug                                     # debug build instead of release
set -uo pipefail

cd "$(dirname "$0")/.."
root=$PWD
transport=verbs
matrix_only=0
profile=release
usage() { echo "usage: $0 [--debug] [--matrix-only TRANSPORT]" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
        --debug) profile=debug ;;
        --matrix-only)
            [ $# -ge 2 ] || usage
            matrix_only=1
            transport=$2
            shift
            ;;
        *) usage ;;
    esac
    shift
done

if [ "$matrix_only" -eq 0 ]; then
    if ! compgen -G "/sys/class/infiniband/*" >/dev/null; then
        echo "no RDMA device: nothing to check"
        exit 0
    fi
fi

echo "== building ($profile)" >&2
cargo_profile=(--release)
[ "$profile" = debug ] && cargo_profile=()
if ! cargo build ${cargo_profile[@]+"${cargo_profile[@]}"} -q -p strobe -p strobe-fixtures \
    --bins >&2; then
    echo "verbs-check: the $profile build failed" >&2
    exit 1
fi
bindir=$root/target/$profile
strobe=$bindir/strobe

rows=()   # "check|result|detail"
failed=0
record() { # NAME RESULT DETAIL
    rows+=("$1|$2|$3")
    [ "$2" = pass ] || failed=1
}

if [ "$matrix_only" -eq 0 ]; then
    echo "== this host" >&2
    command -v ibv_devinfo >/dev/null && ibv_devinfo >&2
    if ! "$strobe" doctor; then
        echo "verbs-check: an RDMA device is present but verbs is unusable (above)" >&2
        exit 1
    fi
    ulimit -l unlimited 2>/dev/null || true

    for suite in "verbs_hw|provider semantics (verbs_hw.rs)|" \
        "transport_conformance|transport conformance, real verbs|verbs_hw::"; do
        IFS='|' read -r test what filter <<<"$suite"
        log=$(mktemp)
        echo "== $what" >&2
        if STROBE_VERBS_HW=1 cargo test ${cargo_profile[@]+"${cargo_profile[@]}"} -q -p strobe-runtime --test "$test" \
            -- --test-threads=1 $filter >"$log" 2>&1; then
            record "$what" pass "$(grep -E '^test result' "$log" | tail -n 1)"
        else
            record "$what" FAIL "see $log"
            tail -n 30 "$log" >&2
        fi
    done
fi

# The fixture matrix: two local node daemons, every byte between them through $transport.
transport_args=()
[ "$transport" = default ] || transport_args=(--transport "$transport")
fixdir=$(mktemp -d)
trap 'rm -rf "$fixdir"' EXIT

fxenv=()  # extra environment of the fixture being run ("KEY=VALUE" words)
run_fixture() { # LABEL RANKS PROGRAM ARGS...
    local label=$1 ranks=$2 status
    shift 2
    local log="$fixdir/$label.$ranks.log" start ms
    start=$(date +%s%N)
    env ${fxenv[@]+"${fxenv[@]}"} "$strobe" run --launcher local --nodes 2 \
        ${transport_args[@]+"${transport_args[@]}"} -n "$ranks" --timeout 120s -- "$@" \
        </dev/null >"$log" 2>&1
    status=$?
    ms=$((($(date +%s%N) - start) / 1000000))
    if [ "$status" -eq 0 ]; then
        record "$label -n $ranks --nodes 2" pass "$((ms / 1000)).$((ms % 1000 / 100)) s"
    else
        record "$label -n $ranks --nodes 2" FAIL "exit $status: $(tail -n 1 "$log")"
    fi
}

echo "== fixture matrix, 2 daemons, --transport $transport" >&2
for fx in p2p collectives comms token_ring; do
    for ranks in 2 4; do
        run_fixture "$fx" "$ranks" "$bindir/$fx"
    done
done

# C fixtures of verdict "pass", from the manifest (one [[fixture]] table per program;
# `args` and `ranks` are one-line arrays there).
manifest=fixtures/c/manifest.toml
while IFS="|" read -r name source ranks args env; do
    bin="$fixdir/${source%.c}"
    if [ ! -x "$bin" ] && ! "$strobe" mpicc -std=c11 -O2 -g -o "$bin" "fixtures/c/$source" \
        -I fixtures/c </dev/null >"$fixdir/$name.build.log" 2>&1; then
        record "$name" FAIL "does not build: $(tail -n 1 "$fixdir/$name.build.log")"
        continue
    fi
    read -r -a argv <<<"$args"
    read -r -a fxenv <<<"$env"
    run_fixture "$name" "$ranks" "$bin" ${argv[@]+"${argv[@]}"}
    fxenv=()
done < <(awk '
    function flush() {
        if (name != "" && verdict == "pass") {
            r = ranks; gsub(/[\[\] ]/, "", r); split(r, rs, ","); pick = rs[1]
            for (i in rs) if (rs[i] + 0 >= 2 && (pick + 0 < 2 || rs[i] + 0 < pick + 0)) pick = rs[i]
            if (pick + 0 < 2) pick = 2
            printf "%s|%s|%s|%s|%s\n", name, source, pick, args, env
        }
        name = source = ranks = args = env = verdict = ""
    }
    function strlist(v) { gsub(/^\[|\]$/, "", v); gsub(/", *"/, " ", v); gsub(/"/, "", v); return v }
    /^\[\[fixture\]\]/ { flush(); next }
    /^[a-z_]+ *=/ {
        key = $0; sub(/ *=.*/, "", key); val = $0; sub(/^[a-z_]+ *= */, "", val)
        if (key == "name") { gsub(/"/, "", val); name = val }
        else if (key == "source") { gsub(/"/, "", val); source = val }
        else if (key == "verdict") { gsub(/"/, "", val); verdict = val }
        else if (key == "ranks") ranks = val
        else if (key == "args") args = strlist(val)
        else if (key == "env") env = strlist(val)
    }
    END { flush() }' "$manifest")

echo
printf '%-48s %-6s %s\n' "check" "result" "detail"
printf '%-48s %-6s %s\n' "-----" "------" "------"
passed=0
total=0
for row in "${rows[@]}"; do
    IFS='|' read -r what result detail <<<"$row"
    printf '%-48s %-6s %s\n' "$what" "$result" "$detail"
    total=$((total + 1))
    [ "$result" = pass ] && passed=$((passed + 1))
done
echo
echo "verbs-check: $passed passed, $((total - passed)) failed (transport $transport)"
exit $failed
