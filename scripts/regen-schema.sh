#!/usr/bin/env bash
# Regenerate the checked-in Rust for the Cap'n Proto schema (schema/capnp/*.capnp ->
# schema/src/generated/strobe_capnp.rs). Needs the `capnp` compiler: installed with apt-get
# when missing (Debian/Ubuntu, as root). Normal builds never need it.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v capnp >/dev/null; then
    echo "regen-schema: installing capnproto (the capnp compiler)" >&2
    apt-get update -qq && apt-get install -y -qq capnproto
fi
cargo run --quiet --release --manifest-path schema/codegen/Cargo.toml \
    --target-dir target/schema-codegen -- schema/capnp schema/src/generated/strobe_capnp.rs
rustfmt --edition 2021 schema/src/generated/strobe_capnp.rs
