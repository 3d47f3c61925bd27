//! Requests: Wait, Test and their any/all/some forms, Request_free, Cancel.
//!
//! Request handles are ints in both languages, so request arrays pass through as is;
//! status arrays (`INTEGER statuses(MPI_STATUS_SIZE, *)`) are converted, and indices
//! returned to Fortran count from 1.

use std::os::raw::c_int;

use super::args::{status_c2f, Flag, In, Index, Ptr, Status, C_STATUS_IGNORE as C_STATUSES_IGNORE};
use super::cabi::{self, CStatus};
use super::sentinel::{self, STATUS_SIZE};
use super::{guard, UNDEFINED};

fortran! {
    pmpi_wait_ => PMPI_Wait(request: Ptr<*mut c_int>, status: Status);
    pmpi_test_ => PMPI_Test(request: Ptr<*mut c_int>, flag: Flag, status: Status);
    pmpi_waitany_ => PMPI_Waitany(
        count: In, requests: Ptr<*mut c_int>, index: Index, status: Status,
    );
    pmpi_testany_ => PMPI_Testany(
        count: In, requests: Ptr<*mut c_int>, index: Index, flag: Flag, status: Status,
    );
    pmpi_request_free_ => PMPI_Request_free(request: Ptr<*mut c_int>);
    pmpi_cancel_ => PMPI_Cancel(request: Ptr<*mut c_int>);
}

/// C statuses for a Fortran status array of `n` entries (None: `MPI_STATUSES_IGNORE`).
fn statuses_for(n: c_int, f: *const c_int) -> Option<Vec<CStatus>> {
    (!sentinel::status_ignored(f))
        .then(|| vec![CStatus::default(); usize::try_from(n).unwrap_or(0)])
}

fn c_statuses(v: &mut Option<Vec<CStatus>>) -> *mut CStatus {
    match v {
        Some(v) => v.as_mut_ptr(),
        None => C_STATUSES_IGNORE,
    }
}

/// Copy the C statuses at `which` positions to the same positions of the Fortran array.
///
/// # Safety
/// `f` is an `INTEGER(MPI_STATUS_SIZE, *)` array with room for every position.
unsafe fn copy_back(v: &Option<Vec<CStatus>>, f: *mut c_int, which: impl Iterator<Item = usize>) {
    let Some(v) = v else { return };
    for i in which {
        if let Some(s) = v.get(i) {
            // SAFETY: the caller's contract.
            unsafe { status_c2f(s, f.add(i * STATUS_SIZE)) };
        }
    }
}

/// `MPI_WAITALL(count, array_of_requests, array_of_statuses, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_waitall_(
    count: *const c_int,
    requests: *mut c_int,
    statuses: *mut c_int,
    ierr: *mut c_int,
) {
    // SAFETY: INTEGERs and arrays of `count` requests and statuses, by reference.
    guard("MPI_Waitall", ierr, || unsafe {
        let n = count.read();
        let mut st = statuses_for(n, statuses);
        let rc = cabi::PMPI_Waitall(n, requests, c_statuses(&mut st));
        copy_back(&st, statuses, 0..usize::try_from(n).unwrap_or(0));
        rc
    })
}

/// `MPI_TESTALL(count, array_of_requests, flag, array_of_statuses, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_testall_(
    count: *const c_int,
    requests: *mut c_int,
    flag: *mut c_int,
    statuses: *mut c_int,
    ierr: *mut c_int,
) {
    // SAFETY: as for pmpi_waitall_; `flag` is a LOGICAL.
    guard("MPI_Testall", ierr, || unsafe {
        let n = count.read();
        let mut st = statuses_for(n, statuses);
        let rc = cabi::PMPI_Testall(n, requests, flag, c_statuses(&mut st));
        let done = flag.read() != 0;
        flag.write(c_int::from(done));
        if done {
            copy_back(&st, statuses, 0..usize::try_from(n).unwrap_or(0));
        }
        rc
    })
}

type SomeFn =
    unsafe extern "C" fn(c_int, *mut c_int, *mut c_int, *mut c_int, *mut CStatus) -> c_int;

/// Waitsome and Testsome: the first `outcount` statuses are those of the completed
/// requests; indices become 1-based.
///
/// # Safety
/// Fortran arguments of `MPI_WAITSOME`.
unsafe fn some(
    f: SomeFn,
    incount: *const c_int,
    requests: *mut c_int,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut c_int,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        let n = incount.read();
        let mut st = statuses_for(n, statuses);
        let rc = f(n, requests, outcount, indices, c_statuses(&mut st));
        let done = outcount.read();
        if done != UNDEFINED {
            let done = usize::try_from(done).unwrap_or(0);
            for i in 0..done {
                *indices.add(i) += 1;
            }
            copy_back(&st, statuses, 0..done);
        }
        rc
    }
}

/// `MPI_WAITSOME(incount, array_of_requests, outcount, array_of_indices,
/// array_of_statuses, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_waitsome_(
    incount: *const c_int,
    requests: *mut c_int,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut c_int,
    ierr: *mut c_int,
) {
    // SAFETY: the Fortran arguments of MPI_WAITSOME, by reference.
    guard("MPI_Waitsome", ierr, || unsafe {
        some(
            cabi::PMPI_Waitsome,
            incount,
            requests,
            outcount,
            indices,
            statuses,
        )
    })
}

/// `MPI_TESTSOME(...)`: as `MPI_WAITSOME`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_testsome_(
    incount: *const c_int,
    requests: *mut c_int,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut c_int,
    ierr: *mut c_int,
) {
    // SAFETY: the Fortran arguments of MPI_TESTSOME, by reference.
    guard("MPI_Testsome", ierr, || unsafe {
        some(
            cabi::PMPI_Testsome,
            incount,
            requests,
            outcount,
            indices,
            statuses,
        )
    })
}
