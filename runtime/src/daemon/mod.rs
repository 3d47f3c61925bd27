//! What runs in a `strobe node` daemon besides the engine (docs/multi-host.md).

pub mod wire_sink;
