//! The Fortran binding (`include 'mpif.h'` and `use mpi`) for gfortran.
//!
//! gfortran's conventions: every external name is lower case with one trailing
//! underscore (`mpi_send_`), every argument is passed by reference, `CHARACTER` arguments
//! add a hidden `size_t` length after all the others, and `LOGICAL` is a 4-byte integer
//! with `.true.` = 1. Each MPI function `MPI_X` is implemented as `pmpi_x_`; `mpi_x_` is
//! a weak alias of it ([`abi`]), as the C layer does for `MPI_X`/`PMPI_X`, so a Fortran
//! profiling library can interpose on `mpi_x_` and call `pmpi_x_`.
//!
//! Every wrapper calls the C entry point (`PMPI_X`, declared in [`cabi`]) and never the
//! C layer's internals. Handles are the C handles (`MPI_Fint` = `int` = C handle), except
//! for the Fortran-only datatypes, which [`handles`] maps onto C datatypes. Statuses are
//! converted between the `MPI_STATUS_SIZE` integer array and the C `MPI_Status`. The
//! sentinels `MPI_BOTTOM`, `MPI_IN_PLACE` and `MPI_STATUS(ES)_IGNORE` are variables in
//! named common blocks that this library defines ([`sentinel`]); the wrappers recognise
//! them by address.
//!
//! Panics never cross into Fortran: [`guard`] catches them and reports
//! `MPI_ERR_INTERN` through the communicator's error handler, as the C entry points do.

/// The Fortran entry points whose arguments all convert one by one ([`FArg`]): for each,
/// `pmpi_x_(args..., ierror)` converts the arguments, calls the C entry point and lets
/// every argument finish its conversion (statuses and flags copied back). The weak
/// `mpi_x_` names are listed in [`abi`].
macro_rules! fortran {
    ($($pname:ident => $cname:ident($($a:ident: $k:ty),* $(,)?);)*) => {$(
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $pname($($a: <$k as $crate::fortran::FArg>::F,)* ierr: *mut ::std::os::raw::c_int) {
            $crate::fortran::guard(&stringify!($cname)[1..], ierr, || {
                // SAFETY: gfortran passes every argument by reference to storage of the
                // kind MPI's Fortran binding gives it (FArg checks the sentinels), and
                // the C entry point has mpi.h's contract.
                unsafe {
                    $(let mut $a = (<$k as $crate::fortran::FArg>::pre($a), $a);)*
                    let rc = $crate::fortran::cabi::$cname(
                        $(<$k as $crate::fortran::FArg>::c(&mut $a.0)),*
                    );
                    $(<$k as $crate::fortran::FArg>::post($a.1, &$a.0);)*
                    rc
                }
            })
        }
    )*};
}

mod abi;
mod args;
mod cabi;
mod cabi_mpi4;
mod callbacks;
mod coll;
mod comm;
mod dtypes;
mod env;

pub(crate) mod handles;
mod icoll;
mod keyval;
mod mpi4;
mod mpireq;
mod p2p;
mod request;
mod sentinel;
mod types;

use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

pub(crate) use args::*;

/// `MPI_SUCCESS`.
const SUCCESS: c_int = 0;
/// `MPI_COMM_WORLD`.
const COMM_WORLD: c_int = 1;
/// `MPI_ERRORS_RETURN`.
const ERRORS_RETURN: c_int = 2;
/// Error classes the Fortran layer raises itself.
const ERR_TYPE: c_int = 3;
const ERR_OP: c_int = 10;
const ERR_ARG: c_int = 13;
const ERR_INTERN: c_int = 17;
/// `MPI_UNDEFINED`.
const UNDEFINED: c_int = -32766;

/// Run one Fortran entry point: store its return code in `ierror` and turn a panic into
/// `MPI_ERR_INTERN` handled like any other error.
/// Always inlined into the exported Fortran entry, whose frame then holds the call-site
/// marker (see `crate::error::entry`): the C entry it calls is nested and does not count.
#[inline(always)]
fn guard(name: &'static str, ierr: *mut c_int, f: impl FnOnce() -> c_int) {
    let marker = 0u8;
    let _site =
        strobe_runtime::callsite::enter_c(std::hint::black_box(&marker) as *const u8 as usize);
    let rc = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(rc) => rc,
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".to_string());
            fail(
                name,
                COMM_WORLD,
                ERR_INTERN,
                &format!("internal error: {what}"),
            )
        }
    };
    if !ierr.is_null() {
        // SAFETY: `ierror` is the caller's INTEGER, passed by reference.
        unsafe { ierr.write(rc) };
    }
}

/// An error the Fortran layer detects itself (the C layer never saw the call): applied
/// through `comm`'s error handler like the C layer's own errors. `MPI_ERRORS_RETURN`
/// returns the class; otherwise the message goes to stderr and the job aborts.
fn fail(name: &str, comm: c_int, class: c_int, msg: &str) -> c_int {
    let mut handler = 0;
    // SAFETY: plain C entry points with pointers to locals.
    let rc = unsafe { cabi::PMPI_Comm_get_errhandler(comm, &mut handler) };
    if rc == SUCCESS && handler == ERRORS_RETURN {
        return class;
    }
    let mut rank = -1;
    // SAFETY: as above.
    unsafe { cabi::PMPI_Comm_rank(COMM_WORLD, &mut rank) };
    let cname = match class {
        ERR_TYPE => "MPI_ERR_TYPE",
        ERR_OP => "MPI_ERR_OP",
        ERR_ARG => "MPI_ERR_ARG",
        _ => "MPI_ERR_INTERN",
    };
    eprintln!("strobe: {name} on rank {rank}: {cname}: {msg}");
    // SAFETY: as above; MPI_Abort does not return.
    unsafe { cabi::PMPI_Abort(COMM_WORLD, class) };
    class
}
