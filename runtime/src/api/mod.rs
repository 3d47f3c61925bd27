//! The Rust API for MPI programs.
//!
//! Every call builds a [`Descriptor`] and posts it through the rank context
//! ([`crate::rank::RankCtx`]): non-blocking calls return a [`Request`] at once (inside a
//! [`scope`], which completes every request posted in it before it returns), blocking
//! calls sleep until the completion arrives at a slice boundary. Ranks are always
//! communicator-relative. Buffers are passed as slices of [`Equivalence`] types and reach
//! the runtime as (address, bytes); the DMA Helper reads and writes them directly.
//!
//! Arguments are checked on the rank side *before* anything is posted (bad ranks, tags,
//! counts tables, buffers too small, ops undefined on the element type), so an invalid call
//! returns an error without a trace in the schedule. Errors the runtime finds (truncation,
//! collective mismatches, ...) come back in the completion and are mapped to [`Error`].
//!
//! ```no_run
//! use strobe_runtime::api;
//! let world = api::init().expect("init");
//! let mut x = [world.rank() as i32];
//! world.allreduce_in_place(&mut x, api::ReduceOp::Sum).expect("allreduce");
//! api::finalize();
//! ```
//!
//! [`Descriptor`]: crate::descriptor::Descriptor

use crate::mmds::{self, Primitive};
use std::sync::Arc;

pub use crate::datatype::{ElemType, ReduceOp};
pub use crate::descriptor::{ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB};
pub use crate::rank::InitError;

use crate::descriptor::{self, COMM_WORLD};
use crate::rank::RankCtx;

mod check;
mod collective;
mod comm;
mod icollective;
mod p2p;
mod request;
mod types;

pub use collective::{post_unscoped, PostedCollective};
pub use comm::{Comm, PendingDup};
pub use p2p::SendMode;
pub use request::{
    scope, test_all, test_any, test_some, wait_all, wait_any, wait_some, Request, Scope,
};
pub use types::{DoubleInt, Equivalence, Error, FloatInt, LongInt, ShortInt, Status, TwoInt};

pub type Result<T, E = Error> = std::result::Result<T, E>;

fn addr<T>(b: &[T]) -> u64 {
    b.as_ptr() as u64
}

fn addr_mut<T>(b: &mut [T]) -> u64 {
    b.as_mut_ptr() as u64
}

fn nbytes<T>(b: &[T]) -> u64 {
    std::mem::size_of_val(b) as u64
}

fn ctx() -> &'static RankCtx {
    RankCtx::get().expect("strobe: MPI call before api::init() (or after it failed)")
}

/// `MPI_Init`: attach to the job and return `MPI_COMM_WORLD`.
pub fn init() -> Result<Comm> {
    let c = RankCtx::init()?;
    Ok(Comm {
        id: COMM_WORLD,
        rank: c.rank(),
        size: c.size(),
        members: (0..c.size()).collect(),
    })
}

/// `MPI_Finalize`. Does nothing if `init` was never called.
#[track_caller]
pub fn finalize() {
    finalize_with_leaks(&[]);
}

/// `MPI_Finalize` of a program whose requests created by `leaked` (one entry per request)
/// were never completed or freed, for the checks (`crate::checks`).
#[track_caller]
pub fn finalize_with_leaks(leaked: &[Option<crate::calls::Call>]) {
    let _site = crate::callsite::enter_rust(std::panic::Location::caller());
    let _mmds = mmds::enter(Primitive::Finalize);
    if let Some(c) = RankCtx::get() {
        c.finalize_with_leaks(leaked);
    }
}

/// `MPI_Abort`: the whole job goes down; this process exits with `code` (1 if `code` is 0).
#[track_caller]
pub fn abort(code: i32) -> ! {
    let _site = crate::callsite::enter_rust(std::panic::Location::caller());
    let _mmds = mmds::enter(Primitive::Abort);
    match RankCtx::get() {
        Some(c) => c.abort(code),
        None => std::process::exit(if code == 0 { 1 } else { code }),
    }
}

/// `MPI_Wtime`: seconds on `CLOCK_MONOTONIC` (recorded, and forced in replay).
pub fn wtime() -> f64 {
    let _mmds = mmds::enter(Primitive::Wtime);
    match RankCtx::get() {
        Some(c) => c.wtime(),
        None => crate::rank::monotonic_seconds(),
    }
}

/// `MPI_COMM_SELF`. Panics if `init` has not succeeded.
pub fn comm_self() -> Comm {
    let me = ctx().rank();
    Comm {
        id: descriptor::comm_self(me),
        rank: 0,
        size: 1,
        members: Arc::from([me]),
    }
}
