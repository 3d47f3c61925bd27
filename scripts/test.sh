#!/usr/bin/env bash
# The whole test suite: builds every binary the end-to-end tests launch (strobe, the
# fixtures), then runs every test of the workspace. Needs the Rust toolchain; installs what
# else the tests need with apt-get when it is missing: Debian's MPICH (the C fixtures are
# checked against it, see fixtures/c/) and tmux (the terminal UI's end-to-end test).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
scripts/ensure-mpich.sh
if ! command -v tmux >/dev/null 2>&1; then
    echo "test.sh: installing tmux for the terminal UI's end-to-end test"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq tmux >/dev/null
fi
cargo build --workspace --lib --bins --examples
cargo test --workspace -- --test-threads=2
