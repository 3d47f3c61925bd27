//! The C ABI of strobe: `libmpi.so` / `libmpi.a` behind `include/mpi.h`.
//!
//! Every C function is implemented as `PMPI_name` here; `MPI_name` is a weak alias of it
//! ([`abi`]), so profiling libraries can interpose. Every entry point runs through one
//! wrapper, [`error::entry`], which catches panics, maps errors to MPI error classes and
//! applies the communicator's error handler.
//!
//! The layer is built on the runtime's Rust API (`strobe_runtime::api`) for everything that
//! posts descriptors, and on the rank context (`strobe_runtime::rank::RankCtx`) for the
//! timing-dependent outcomes: every Test goes through `poll_completed`, every Wait through
//! `wait_completed`, `MPI_Wtime` through `api::wtime`, so recording and replay see them all.
//!
//! C-layer state (handle tables for communicators, groups, datatypes, ops, requests,
//! keyvals) lives in [`state`]. Ranks are `MPI_THREAD_FUNNELED`: the tables sit behind one
//! mutex, which is never held while user code (user ops, attribute callbacks) runs.

// Every `PMPI_*` function takes raw pointers from C; their safety contract is MPI's.
#![allow(clippy::missing_safety_doc)]
#![allow(non_snake_case)]
// Entry points and their helpers mirror MPI's C signatures, argument for argument.
#![allow(clippy::too_many_arguments)]

mod abi;

/// Run when libmpi is loaded, before the program's `main`: a rank dies with the strobe
/// that started it (`procmem::die_with_launcher`; the launcher spawns with posix_spawn and
/// runs nothing in the child). An `.init_array` entry of the library itself (not of the
/// runtime rlib, whose unreferenced objects the linker may drop).
#[used]
#[link_section = ".init_array"]
static DIE_WITH_LAUNCHER: extern "C" fn() = die_with_launcher_at_load;

extern "C" fn die_with_launcher_at_load() {
    // A panic must not unwind out of a loader callback.
    let _ = std::panic::catch_unwind(strobe_runtime::procmem::die_with_launcher);
}
mod alltoallw;
mod attrs;
mod attrs_more;
mod coll;
mod collv;
mod comm;
mod consts;
mod darray;
mod datatype;
mod env;
mod errhan;
mod error;
mod external32;
mod fortran;
mod grequest;
mod group_more;
mod icoll;
mod idup;
mod info;
mod intercoll;
mod intercomm;
mod large_count;
mod libc_replay;
mod message;
mod neighbor;
mod p2p;
mod pack;
mod pcoll;
mod persist;
mod reduce;
mod request;
mod session;
mod state;
mod topo;
mod topo_dist;
mod typecontents;
mod typestore;
mod typex;
mod userops;
mod util;
