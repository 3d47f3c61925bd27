#!/usr/bin/env bash
# The main job: build strobe and its fixtures, run a fixture job on the BCS runtime and
# print what the runtime did (the recording's stats: slices, start reasons, GETTS, decisions).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --workspace --bins
exec target/release/strobe demo "$@"
