#!/usr/bin/env bash
# The whole test suite: builds every binary the end-to-end tests launch (strobe, the
# fixtures), then runs every test of the workspace. Needs the Rust toolchain; installs what
# else the tests need with apt-get when it is missing: Debian's MPICH (the C fixtures are
# checked against it, see fixtures/c/), tmux (the terminal UI's end-to-end test), sqlite3,
# a C compiler and gfortran (scripts/ensure-tools.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
scripts/ensure-mpich.sh
scripts/ensure-tools.sh
cargo build --workspace --lib --bins --examples
cargo test --workspace -- --test-threads=2
