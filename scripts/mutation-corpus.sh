#!/usr/bin/env bash
# The big mutation corpus run (issue 11; docs/reliability.md, "Damage is data"):
# N damaged copies (default 1000) of real recordings (token_ring, deadlock, heisenbug),
# made deterministically from SEED — byte flips, truncations, zeroed pages, SQL tampering
# of job / slice / replay_log — each given to `strobe stats`, `strobe stats --json`,
# `strobe replay` and the terminal UI twice: its drawing code on a TestBackend, and the real
# `strobe tui` in a tmux pane (keys through every tab, q; the terminal must be restored).
# Fails on any panic, hang, impossible value, terminal left broken, or damage reported as
# a divergence; writes the table to OUT (markdown). TMUX_MUTANTS (default: all N) limits
# the tmux runs to the first ones (about 0.8 s each).
#
#   scripts/mutation-corpus.sh [N] [SEED] [OUT]
#
# CI runs the same test with 150 mutants (20 of them in tmux) (cargo test -p strobe-tests --test mutation).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000}
SEED=${2:-1376257}
OUT=${3:-target/mutation-table.md}
mkdir -p "$(dirname "$OUT")"
cargo build --workspace --bins
OUT_ABS=$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT")
command -v tmux >/dev/null || scripts/ensure-tools.sh
STROBE_MUTANTS=$N STROBE_MUTATION_SEED=$SEED STROBE_MUTATION_TABLE=$OUT_ABS \
    STROBE_MUTATION_TMUX=${TMUX_MUTANTS:-$N} \
    cargo test -p strobe-tests --test mutation damaged_recordings -- --nocapture
echo "table: $OUT"
