//! strobe's deterministic core (the quinn-proto of strobe): everything that decides what a
//! BCS job does, with no I/O. Descriptors in, decisions out; the slice counter is the only
//! clock. The runtime drives it with real shared memory, processes and transports; the
//! wire format (`strobe-schema`) and the recorder name its types.
//!
//! Rules, checked by `core_is_pure` in the tests crate: no `unsafe`, no libc, no
//! `std::time`, no `std::fs`/`std::net`/`std::process`, no threads.
#![forbid(unsafe_code)]

pub mod datatype;
pub mod descriptor;
pub mod ops;
pub mod sched;
pub mod slice;
pub mod waitfor;
