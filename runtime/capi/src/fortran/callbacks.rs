//! Fortran functions that take callbacks besides the keyvals ([`super::keyval`]):
//! `MPI_GREQUEST_START`, `MPI_COMM_CREATE_ERRHANDLER` and MPI-1's
//! `MPI_ERRHANDLER_CREATE`.
//!
//! An error handler needs no trampoline: C calls it as `f(MPI_Comm *, int *, ...)`, which
//! is a Fortran `SUBROUTINE HANDLER(COMM, ERROR_CODE)` (both INTEGERs by reference, no
//! hidden arguments; the C variadic part is ignored). A generalized request's callbacks
//! take the extra state by reference and return `ierror` in an argument: they get
//! trampolines, with the Fortran procedures and the extra state in a [`FGreq`] passed as
//! the C extra state and freed after the free callback ran.

use std::os::raw::{c_int, c_void};

use super::args::{status_c2f, status_f2c};
use super::cabi::{self, CStatus};
use super::sentinel::STATUS_SIZE;
use super::{guard, SUCCESS};

/// `SUBROUTINE QUERY_FN(EXTRA_STATE, STATUS, IERROR)`.
type FQuery = unsafe extern "C" fn(*const isize, *mut c_int, *mut c_int);
/// `SUBROUTINE FREE_FN(EXTRA_STATE, IERROR)`.
type FFree = unsafe extern "C" fn(*const isize, *mut c_int);
/// `SUBROUTINE CANCEL_FN(EXTRA_STATE, COMPLETE, IERROR)` (`COMPLETE` a LOGICAL).
type FCancel = unsafe extern "C" fn(*const isize, *const c_int, *mut c_int);

/// A generalized request started from Fortran.
struct FGreq {
    query: FQuery,
    free: FFree,
    cancel: FCancel,
    /// The program's EXTRA_STATE variable itself: the callbacks get it by reference and
    /// may change it, and the program sees the change (MPICH's greqf relies on it).
    extra: *const isize,
}

unsafe extern "C" fn query_trampoline(extra: *mut c_void, status: *mut CStatus) -> c_int {
    // SAFETY: `extra` is the FGreq of this request (freed only by free_trampoline, which
    // MPI calls last); `status` is the C layer's status to fill.
    unsafe {
        let g = &*(extra as *const FGreq);
        let mut f = [0 as c_int; STATUS_SIZE];
        status_c2f(&*status, f.as_mut_ptr());
        let mut ierr = SUCCESS;
        (g.query)(g.extra, f.as_mut_ptr(), &mut ierr);
        *status = status_f2c(f.as_ptr());
        ierr
    }
}

unsafe extern "C" fn free_trampoline(extra: *mut c_void) -> c_int {
    // SAFETY: as in query_trampoline; this is the request's last callback, so its FGreq
    // is released here.
    unsafe {
        let g = Box::from_raw(extra as *mut FGreq);
        let mut ierr = SUCCESS;
        (g.free)(g.extra, &mut ierr);
        ierr
    }
}

unsafe extern "C" fn cancel_trampoline(extra: *mut c_void, complete: c_int) -> c_int {
    // SAFETY: as in query_trampoline.
    unsafe {
        let g = &*(extra as *const FGreq);
        let mut ierr = SUCCESS;
        let complete = c_int::from(complete != 0);
        (g.cancel)(g.extra, &complete, &mut ierr);
        ierr
    }
}

/// `MPI_GREQUEST_START(query_fn, free_fn, cancel_fn, extra_state, request, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_grequest_start_(
    query: *const c_void,
    free: *const c_void,
    cancel: *const c_void,
    extra: *const isize,
    request: *mut c_int,
    ierr: *mut c_int,
) {
    // SAFETY: three procedures with the Fortran callback signatures, an
    // INTEGER(KIND=MPI_ADDRESS_KIND) and an INTEGER by reference.
    guard("MPI_Grequest_start", ierr, || unsafe {
        let g = Box::into_raw(Box::new(FGreq {
            query: std::mem::transmute::<*const c_void, FQuery>(query),
            free: std::mem::transmute::<*const c_void, FFree>(free),
            cancel: std::mem::transmute::<*const c_void, FCancel>(cancel),
            extra,
        }));
        let rc = cabi::PMPI_Grequest_start(
            query_trampoline as *mut c_void,
            free_trampoline as *mut c_void,
            cancel_trampoline as *mut c_void,
            g as *mut c_void,
            request,
        );
        if rc != SUCCESS {
            drop(Box::from_raw(g));
        }
        rc
    })
}

/// `MPI_COMM_CREATE_ERRHANDLER(comm_errhandler_fn, errhandler, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_comm_create_errhandler_(
    function: *const c_void,
    errhandler: *mut c_int,
    ierr: *mut c_int,
) {
    // SAFETY: a procedure called as C calls an error handler (see the module
    // documentation) and an INTEGER by reference.
    guard("MPI_Comm_create_errhandler", ierr, || unsafe {
        cabi::PMPI_Comm_create_errhandler(function as *mut c_void, errhandler)
    })
}

/// MPI-1's `MPI_ERRHANDLER_CREATE(function, errhandler, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_errhandler_create_(
    function: *const c_void,
    errhandler: *mut c_int,
    ierr: *mut c_int,
) {
    // SAFETY: as in pmpi_comm_create_errhandler_.
    guard("MPI_Errhandler_create", ierr, || unsafe {
        cabi::PMPI_Errhandler_create(function as *mut c_void, errhandler)
    })
}
