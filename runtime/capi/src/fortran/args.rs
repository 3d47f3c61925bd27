//! How each kind of Fortran argument becomes a C argument ([`FArg`]), and the status
//! conversions.
//!
//! A wrapper declared with [`fortran!`](super::fortran) runs, per argument, `pre` (read
//! the Fortran value), `c` (the value the C entry point gets) and after the call `post`
//! (copy results back in Fortran's representation).

use std::marker::PhantomData;
use std::os::raw::{c_int, c_void};

use super::cabi::CStatus;
use super::handles;
use super::sentinel::{self, STATUS_SIZE};

/// One kind of Fortran argument.
pub trait FArg {
    /// What gfortran passes (always a pointer: arguments are by reference).
    type F: Copy;
    /// What lives on the wrapper's stack during the call.
    type T;
    /// What the C entry point takes.
    type C;
    /// # Safety
    /// `f` is what a conforming Fortran caller passes for this argument.
    unsafe fn pre(f: Self::F) -> Self::T;
    fn c(t: &mut Self::T) -> Self::C;
    /// # Safety
    /// As for `pre`; runs after the C call.
    unsafe fn post(_f: Self::F, _t: &Self::T) {}
}

/// `INTEGER`, input: the C function takes the value.
pub struct In;
impl FArg for In {
    type F = *const c_int;
    type T = c_int;
    type C = c_int;
    unsafe fn pre(f: *const c_int) -> c_int {
        // SAFETY: an INTEGER passed by reference.
        unsafe { f.read() }
    }
    fn c(t: &mut c_int) -> c_int {
        *t
    }
}

/// `INTEGER(KIND=MPI_ADDRESS_KIND)`, input.
pub struct Aint;
impl FArg for Aint {
    type F = *const isize;
    type T = isize;
    type C = isize;
    unsafe fn pre(f: *const isize) -> isize {
        // SAFETY: an INTEGER(KIND=MPI_ADDRESS_KIND) passed by reference.
        unsafe { f.read() }
    }
    fn c(t: &mut isize) -> isize {
        *t
    }
}

/// A datatype handle, input: Fortran-only datatypes become their C datatype.
pub struct Dt;
impl FArg for Dt {
    type F = *const c_int;
    type T = c_int;
    type C = c_int;
    unsafe fn pre(f: *const c_int) -> c_int {
        // SAFETY: an INTEGER passed by reference.
        handles::dt_f2c(unsafe { f.read() })
    }
    fn c(t: &mut c_int) -> c_int {
        *t
    }
}

/// A choice buffer the C side reads (`MPI_BOTTOM`, `MPI_IN_PLACE` recognised).
pub struct Buf;
impl FArg for Buf {
    type F = *const c_void;
    type T = *const c_void;
    type C = *const c_void;
    unsafe fn pre(f: *const c_void) -> *const c_void {
        sentinel::buf(f)
    }
    fn c(t: &mut *const c_void) -> *const c_void {
        *t
    }
}

/// A choice buffer the C side writes.
pub struct BufMut;
impl FArg for BufMut {
    type F = *mut c_void;
    type T = *mut c_void;
    type C = *mut c_void;
    unsafe fn pre(f: *mut c_void) -> *mut c_void {
        sentinel::buf(f) as *mut c_void
    }
    fn c(t: &mut *mut c_void) -> *mut c_void {
        *t
    }
}

/// An output argument or an array the C side reads or writes as is (`INTEGER` results,
/// request handles and arrays, counts and displacements, `INTEGER(KIND=
/// MPI_ADDRESS_KIND)` results): Fortran's and C's representations are the same.
pub struct Ptr<T>(PhantomData<T>);
impl<P> FArg for Ptr<*mut P> {
    type F = *mut P;
    type T = *mut P;
    type C = *mut P;
    unsafe fn pre(f: *mut P) -> *mut P {
        f
    }
    fn c(t: &mut *mut P) -> *mut P {
        *t
    }
}
impl<P> FArg for Ptr<*const P> {
    type F = *const P;
    type T = *const P;
    type C = *const P;
    unsafe fn pre(f: *const P) -> *const P {
        f
    }
    fn c(t: &mut *const P) -> *const P {
        *t
    }
}

/// `LOGICAL`, output: C's 0/1 is gfortran's `.false.`/`.true.`; normalised to 0/1 in
/// case an entry point ever stores another nonzero value.
pub struct Flag;
impl FArg for Flag {
    type F = *mut c_int;
    type T = *mut c_int;
    type C = *mut c_int;
    unsafe fn pre(f: *mut c_int) -> *mut c_int {
        f
    }
    fn c(t: &mut *mut c_int) -> *mut c_int {
        *t
    }
    unsafe fn post(f: *mut c_int, _t: &*mut c_int) {
        // SAFETY: a LOGICAL passed by reference, written by the C call.
        unsafe { f.write(c_int::from(f.read() != 0)) };
    }
}

/// `LOGICAL`, input: any nonzero value is true in C.
pub struct FlagIn;
impl FArg for FlagIn {
    type F = *const c_int;
    type T = c_int;
    type C = c_int;
    unsafe fn pre(f: *const c_int) -> c_int {
        // SAFETY: a LOGICAL passed by reference.
        c_int::from(unsafe { f.read() } != 0)
    }
    fn c(t: &mut c_int) -> c_int {
        *t
    }
}

/// An index result (`MPI_Waitany`): Fortran counts from 1.
pub struct Index;
impl FArg for Index {
    type F = *mut c_int;
    type T = *mut c_int;
    type C = *mut c_int;
    unsafe fn pre(f: *mut c_int) -> *mut c_int {
        f
    }
    fn c(t: &mut *mut c_int) -> *mut c_int {
        *t
    }
    unsafe fn post(f: *mut c_int, _t: &*mut c_int) {
        // SAFETY: an INTEGER passed by reference, written by the C call.
        unsafe {
            let i = f.read();
            if i >= 0 {
                f.write(i + 1);
            }
        }
    }
}

/// C's `MPI_STATUS_IGNORE` and `MPI_STATUSES_IGNORE`: `(MPI_Status *)1`.
pub const C_STATUS_IGNORE: *mut CStatus = std::ptr::without_provenance_mut(1);

/// `INTEGER status(MPI_STATUS_SIZE)`, output (or `MPI_STATUS_IGNORE`).
pub struct Status;
impl FArg for Status {
    type F = *mut c_int;
    type T = Option<CStatus>;
    type C = *mut CStatus;
    unsafe fn pre(f: *mut c_int) -> Option<CStatus> {
        // Starts as the caller's status: the fields a call leaves alone (MPI_ERROR,
        // outside the multiple-completion calls) keep the caller's values, as in C.
        // SAFETY: not MPI_STATUS_IGNORE, so an INTEGER(MPI_STATUS_SIZE) array.
        (!sentinel::status_ignored(f)).then(|| unsafe { status_f2c(f) })
    }
    fn c(t: &mut Option<CStatus>) -> *mut CStatus {
        match t {
            Some(s) => s,
            None => C_STATUS_IGNORE,
        }
    }
    unsafe fn post(f: *mut c_int, t: &Option<CStatus>) {
        if let Some(s) = t {
            // SAFETY: not MPI_STATUS_IGNORE, so an INTEGER(MPI_STATUS_SIZE) array.
            unsafe { status_c2f(s, f) };
        }
    }
}

/// `INTEGER status(MPI_STATUS_SIZE)`, input.
pub struct StatusIn;
impl FArg for StatusIn {
    type F = *const c_int;
    type T = CStatus;
    type C = *const CStatus;
    unsafe fn pre(f: *const c_int) -> CStatus {
        // SAFETY: an INTEGER(MPI_STATUS_SIZE) array.
        unsafe { status_f2c(f) }
    }
    fn c(t: &mut CStatus) -> *const CStatus {
        t
    }
}

/// Fortran status array -> C `MPI_Status`. The byte count is split into two INTEGERs
/// (low, high) so a status holds any 64-bit count.
///
/// # Safety
/// `f` points to `MPI_STATUS_SIZE` readable INTEGERs.
pub unsafe fn status_f2c(f: *const c_int) -> CStatus {
    // SAFETY: the caller's contract.
    let a = unsafe { std::slice::from_raw_parts(f, STATUS_SIZE) };
    CStatus {
        source: a[0],
        tag: a[1],
        error: a[2],
        cancelled: a[3],
        bytes: i64::from(a[4] as u32) | (i64::from(a[5]) << 32),
    }
}

/// C `MPI_Status` -> Fortran status array (indices `MPI_SOURCE` = 1, `MPI_TAG` = 2,
/// `MPI_ERROR` = 3 in Fortran).
///
/// # Safety
/// `f` points to `MPI_STATUS_SIZE` writable INTEGERs.
pub unsafe fn status_c2f(s: &CStatus, f: *mut c_int) {
    // SAFETY: the caller's contract.
    let a = unsafe { std::slice::from_raw_parts_mut(f, STATUS_SIZE) };
    a[0] = s.source;
    a[1] = s.tag;
    a[2] = s.error;
    a[3] = s.cancelled;
    a[4] = s.bytes as u32 as c_int;
    a[5] = (s.bytes >> 32) as c_int;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_round_trips_with_a_64_bit_count() {
        let s = CStatus {
            source: 3,
            tag: -1,
            error: 15,
            cancelled: 1,
            bytes: (5_i64 << 32) + 0xffff_fff0,
        };
        let mut f = [0 as c_int; STATUS_SIZE];
        // SAFETY: f holds MPI_STATUS_SIZE integers.
        let back = unsafe {
            status_c2f(&s, f.as_mut_ptr());
            status_f2c(f.as_ptr())
        };
        assert_eq!(
            &f[..3],
            &[3, -1, 15],
            "MPI_SOURCE, MPI_TAG, MPI_ERROR first"
        );
        assert_eq!(
            (
                back.source,
                back.tag,
                back.error,
                back.cancelled,
                back.bytes
            ),
            (s.source, s.tag, s.error, s.cancelled, s.bytes)
        );
    }

    #[test]
    fn indices_count_from_one_and_undefined_stays() {
        for (c, f) in [
            (0, 1),
            (4, 5),
            (super::super::UNDEFINED, super::super::UNDEFINED),
        ] {
            let mut i = c;
            // SAFETY: a local int.
            unsafe { <Index as FArg>::post(&mut i, &std::ptr::null_mut()) };
            assert_eq!(i, f);
        }
    }
}
