//! `MPI_COMM_CREATE_KEYVAL` from Fortran, and the predefined Fortran callbacks
//! `MPI_COMM_NULL_COPY_FN`, `MPI_COMM_DUP_FN` and `MPI_COMM_NULL_DELETE_FN`.
//!
//! The C layer calls C callbacks; a keyval made from Fortran gets the trampolines below,
//! with the Fortran callbacks and extra state in a [`FKeyval`] passed as the C extra
//! state. The predefined Fortran callbacks are recognised by address and become the C
//! constants, so `MPI_Comm_dup` copies (or not) without a round trip through Fortran.

use std::ffi::CStr;
use std::os::raw::{c_int, c_void};

use super::{cabi, guard, SUCCESS};

/// `SUBROUTINE COPY(OLDCOMM, KEYVAL, EXTRA_STATE, ATTRIBUTE_VAL_IN, ATTRIBUTE_VAL_OUT,
/// FLAG, IERROR)`.
type FCopy = unsafe extern "C" fn(
    *const c_int,
    *const c_int,
    *const isize,
    *const isize,
    *mut isize,
    *mut c_int,
    *mut c_int,
);
/// `SUBROUTINE DELETE(COMM, KEYVAL, ATTRIBUTE_VAL, EXTRA_STATE, IERROR)`.
type FDelete =
    unsafe extern "C" fn(*const c_int, *const c_int, *const isize, *const isize, *mut c_int);

/// What a Fortran keyval's trampolines need.
struct FKeyval {
    copy: FCopy,
    delete: FDelete,
    extra: isize,
}

/// `MPI_COMM_NULL_COPY_FN`: the attribute is not copied.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpi_comm_null_copy_fn_(
    _oldcomm: *const c_int,
    _keyval: *const c_int,
    _extra: *const isize,
    _in: *const isize,
    _out: *mut isize,
    flag: *mut c_int,
    ierr: *mut c_int,
) {
    // SAFETY: a LOGICAL and an INTEGER by reference.
    unsafe {
        flag.write(0);
        ierr.write(SUCCESS);
    }
}

/// `MPI_COMM_DUP_FN`: the attribute is copied as is.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpi_comm_dup_fn_(
    _oldcomm: *const c_int,
    _keyval: *const c_int,
    _extra: *const isize,
    input: *const isize,
    out: *mut isize,
    flag: *mut c_int,
    ierr: *mut c_int,
) {
    // SAFETY: the Fortran callback's arguments, by reference.
    unsafe {
        out.write(input.read());
        flag.write(1);
        ierr.write(SUCCESS);
    }
}

/// `MPI_COMM_NULL_DELETE_FN`: nothing to do.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpi_comm_null_delete_fn_(
    _comm: *const c_int,
    _keyval: *const c_int,
    _value: *const isize,
    _extra: *const isize,
    ierr: *mut c_int,
) {
    // SAFETY: an INTEGER by reference.
    unsafe { ierr.write(SUCCESS) };
}

/// Whether `p` is the function `own` (also under the address the dynamic linker gives
/// `name`, which is what a program sees when it takes the address itself).
fn is_fn(p: *const c_void, own: usize, name: &CStr) -> bool {
    if p as usize == own {
        return true;
    }
    // SAFETY: dlsym with a NUL-terminated name.
    let d = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    !d.is_null() && std::ptr::eq(d, p)
}

unsafe extern "C" fn copy_trampoline(
    oldcomm: c_int,
    keyval: c_int,
    extra: *mut c_void,
    value_in: *mut c_void,
    value_out: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    // SAFETY: `extra` is the FKeyval this keyval was created with (never freed);
    // `value_out` is the C layer's `void *` to fill and `flag` its int.
    unsafe {
        let k = &*(extra as *const FKeyval);
        let (mut out, mut fflag, mut ierr) = (0isize, 0, SUCCESS);
        (k.copy)(
            &oldcomm,
            &keyval,
            &k.extra,
            &(value_in as isize),
            &mut out,
            &mut fflag,
            &mut ierr,
        );
        (value_out as *mut *mut c_void).write(out as *mut c_void);
        flag.write(c_int::from(fflag != 0));
        ierr
    }
}

unsafe extern "C" fn delete_trampoline(
    comm: c_int,
    keyval: c_int,
    value: *mut c_void,
    extra: *mut c_void,
) -> c_int {
    // SAFETY: `extra` is the FKeyval this keyval was created with (never freed).
    unsafe {
        let k = &*(extra as *const FKeyval);
        let mut ierr = SUCCESS;
        (k.delete)(&comm, &keyval, &(value as isize), &k.extra, &mut ierr);
        ierr
    }
}

/// `MPI_COMM_CREATE_KEYVAL(comm_copy_attr_fn, comm_delete_attr_fn, comm_keyval,
/// extra_state, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_comm_create_keyval_(
    copy: *const c_void,
    delete: *const c_void,
    keyval: *mut c_int,
    extra: *const isize,
    ierr: *mut c_int,
) {
    // SAFETY: two procedures with the Fortran callback signatures, an INTEGER and an
    // INTEGER(KIND=MPI_ADDRESS_KIND) by reference.
    guard("MPI_Comm_create_keyval", ierr, || unsafe {
        let null_copy = is_fn(
            copy,
            mpi_comm_null_copy_fn_ as *const () as usize,
            c"mpi_comm_null_copy_fn_",
        );
        let dup = is_fn(
            copy,
            mpi_comm_dup_fn_ as *const () as usize,
            c"mpi_comm_dup_fn_",
        );
        let null_delete = is_fn(
            delete,
            mpi_comm_null_delete_fn_ as *const () as usize,
            c"mpi_comm_null_delete_fn_",
        );
        if (null_copy || dup) && null_delete {
            // No Fortran code to call: C's MPI_COMM_NULL_COPY_FN (0) / MPI_COMM_DUP_FN (1)
            // and MPI_COMM_NULL_DELETE_FN (0).
            let c_copy = usize::from(dup) as *mut c_void;
            return cabi::PMPI_Comm_create_keyval(
                c_copy,
                std::ptr::null_mut(),
                keyval,
                std::ptr::null_mut(),
            );
        }
        // Deliberately leaked: the C layer may call the callbacks for as long as any
        // communicator carries the attribute, even after MPI_Comm_free_keyval; one small
        // record per keyval created.
        let k = Box::into_raw(Box::new(FKeyval {
            copy: std::mem::transmute::<*const c_void, FCopy>(copy),
            delete: std::mem::transmute::<*const c_void, FDelete>(delete),
            extra: extra.read(),
        }));
        cabi::PMPI_Comm_create_keyval(
            copy_trampoline as *mut c_void,
            delete_trampoline as *mut c_void,
            keyval,
            k as *mut c_void,
        )
    })
}
