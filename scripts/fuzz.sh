#!/usr/bin/env bash
# The cargo-fuzz targets of fuzz/ (issue 11; docs/reliability.md, "Fuzzing"): each target
# for an equal share of a total time budget, libFuzzer with AddressSanitizer. Prints one
# summary line per target (runs, coverage, crashes) and keeps each target's log in
# fuzz/target/fuzz-TARGET.log; a crash leaves its input in fuzz/artifacts/TARGET/ and
# makes the script fail (an input that takes over 20 s is a hang, reported the same way).
#
#   scripts/fuzz.sh [TOTAL_SECONDS] [TARGET...]     (default 600 s over every target)
#
# Needs cargo-fuzz (installed when missing) and a nightly toolchain; without one it uses
# the stable toolchain with RUSTC_BOOTSTRAP=1 (cargo-fuzz passes -Z flags).
# FUZZ_SANITIZER=none runs without ASan (where its runtime is missing).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
total=${1:-600}
shift || true
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    fuzz=(cargo +nightly fuzz)
else
    export RUSTC_BOOTSTRAP=1
    fuzz=(cargo fuzz)
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <("${fuzz[@]}" list)
each=$((total / ${#targets[@]}))
san=(--sanitizer "${FUZZ_SANITIZER:-address}")
"${fuzz[@]}" build "${san[@]}"
mkdir -p target
# Seeds: arbitrary bytes rarely make an SQLite file, so the recording targets start from
# real recordings (the previous release's, in tests/data/).
for t in recording_file; do
    mkdir -p "corpus/$t"
    cp -n ../tests/data/*.db "corpus/$t/"
done
failed=0
for t in "${targets[@]}"; do
    log=target/fuzz-$t.log
    if "${fuzz[@]}" run "${san[@]}" "$t" -- -max_total_time="$each" -timeout=20 -rss_limit_mb=4096 \
        >"$log" 2>&1; then
        verdict=ok
    else
        verdict="FAILED (see $log and artifacts/$t/)"
        failed=1
    fi
    last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
    echo "$t (${each} s): $verdict; last: ${last:-no progress line}"
done
exit $failed
