#!/usr/bin/env bash
# The whole test suite: builds every binary the end-to-end tests launch (strobe, the
# fixtures), then runs every test of the workspace. Needs the Rust toolchain; installs
# Debian's MPICH when missing (the C fixtures are checked against it, see fixtures/c/).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
scripts/ensure-mpich.sh
cargo build --workspace --lib --bins --examples
cargo test --workspace -- --test-threads=2
