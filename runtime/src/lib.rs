//! strobe's Buffered Coscheduling (BCS) runtime.
//!
//! Layers, bottom up (names follow the papers in `shared/seeds/`):
//! - [`transport`]: the three BCS core primitives (Xfer-And-Signal, Test-Event,
//!   Compare-And-Write) between node managers; [`transport::shm`] is the one-host transport.
//! - [`sched`]: the deterministic scheduler core (no I/O): descriptors in, decisions out.
//! - [`engine`]: the slice engine: Strobe Sender, Strobe Receiver, Buffer Sender/Receiver,
//!   DMA Helper, Collective and Reduce Helpers, running microphases DEM, MSM, P2P, BBM, RM.
//! - [`rank`]: the rank side of a job: posting descriptors, sleeping until woken.
//! - [`api`]: the Rust API for MPI programs; [`calls`]: the one table of MPI calls.
//! - [`launcher`]: the Machine Manager: creates the job, spawns ranks, watches them.

// The deterministic core lives in `strobe-core` (pure: no libc, no unsafe, no I/O, no
// clock); it is re-exported under its old paths so `strobe_runtime::sched` keeps working.
pub use strobe_core::{datatype, descriptor, ops, sched, slice, waitfor};

pub mod alone;
pub mod api;
pub mod calls;
pub mod callsite;
pub mod chaos;
pub mod checks;
pub mod daemon;
pub mod engine;
pub mod futex;
pub mod launcher;
pub mod limits;
pub mod mmds;
pub mod outcome;
pub mod procmem;
pub mod rank;
mod rank_inline;
pub mod rank_output;
pub mod rank_wake;
pub mod ring;
pub mod segment;
pub mod shm_region;
pub mod symbolize;
pub mod transport;
