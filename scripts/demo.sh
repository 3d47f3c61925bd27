#!/usr/bin/env bash
# The main job: build strobe, libmpi (for `strobe mpicc`), the benchmark tool and the
# fixtures, install what the README tour uses (sqlite3, tmux, a C compiler), run a fixture
# job on the BCS runtime and print what the runtime did (the recording's stats: slices,
# start reasons, GETTS, decisions). After it, every command of the README tour works.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-tools.sh
cargo build --release --workspace --lib --bins
exec target/release/strobe demo "$@"
