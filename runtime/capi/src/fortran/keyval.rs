//! `MPI_COMM_CREATE_KEYVAL`, `MPI_TYPE_CREATE_KEYVAL` and MPI-1's `MPI_KEYVAL_CREATE`
//! from Fortran, and the predefined Fortran callbacks (`MPI_COMM_NULL_COPY_FN`,
//! `MPI_COMM_DUP_FN`, `MPI_COMM_NULL_DELETE_FN`, their `MPI_TYPE_` twins and MPI-1's
//! `MPI_NULL_COPY_FN`, `MPI_DUP_FN`, `MPI_NULL_DELETE_FN`).
//!
//! The C layer calls C callbacks; a keyval made from Fortran gets the trampolines below,
//! with the Fortran callbacks and extra state in a [`FKeyval`] passed as the C extra
//! state. The predefined Fortran callbacks are recognised by address and become the C
//! constants, so `MPI_Comm_dup` copies (or not) without a round trip through Fortran.
//! MPI-1's callbacks take default INTEGERs (extra state and attribute values) where the
//! MPI-2 ones take `INTEGER(KIND=MPI_ADDRESS_KIND)`: [`FKeyval::mpi1`] says which.

use std::ffi::CStr;
use std::os::raw::{c_int, c_void};

use super::{cabi, guard, SUCCESS};

/// `SUBROUTINE COPY(OLDCOMM, KEYVAL, EXTRA_STATE, ATTRIBUTE_VAL_IN, ATTRIBUTE_VAL_OUT,
/// FLAG, IERROR)` (the datatype one has the same shape).
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
    /// MPI-1 callbacks: default INTEGER extra state and attribute values.
    mpi1: bool,
}

/// Defines the predefined Fortran callbacks of one family: NULL_COPY (not copied), DUP
/// (copied as is: `$val` is the kind of the attribute value) and NULL_DELETE.
macro_rules! predefined_callbacks {
    ($null_copy:ident, $dup:ident, $null_delete:ident, $val:ty) => {
        /// The predefined "do not copy" callback.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $null_copy(
            _old: *const c_int,
            _keyval: *const c_int,
            _extra: *const $val,
            _in: *const $val,
            _out: *mut $val,
            flag: *mut c_int,
            ierr: *mut c_int,
        ) {
            // SAFETY: a LOGICAL and an INTEGER by reference.
            unsafe {
                flag.write(0);
                ierr.write(SUCCESS);
            }
        }

        /// The predefined "copy as is" callback.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $dup(
            _old: *const c_int,
            _keyval: *const c_int,
            _extra: *const $val,
            input: *const $val,
            out: *mut $val,
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

        /// The predefined "nothing to do" delete callback.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $null_delete(
            _handle: *const c_int,
            _keyval: *const c_int,
            _value: *const $val,
            _extra: *const $val,
            ierr: *mut c_int,
        ) {
            // SAFETY: an INTEGER by reference.
            unsafe { ierr.write(SUCCESS) };
        }
    };
}

predefined_callbacks!(
    mpi_comm_null_copy_fn_,
    mpi_comm_dup_fn_,
    mpi_comm_null_delete_fn_,
    isize
);
predefined_callbacks!(
    mpi_type_null_copy_fn_,
    mpi_type_dup_fn_,
    mpi_type_null_delete_fn_,
    isize
);
predefined_callbacks!(mpi_null_copy_fn_, mpi_dup_fn_, mpi_null_delete_fn_, c_int);

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
    old: c_int,
    keyval: c_int,
    extra: *mut c_void,
    value_in: *mut c_void,
    value_out: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    // SAFETY: `extra` is the FKeyval this keyval was created with (never freed);
    // `value_out` is the C layer's `void *` to fill and `flag` its int. An MPI-1 callback
    // reads and writes default INTEGERs: it gets pointers to 4-byte values.
    unsafe {
        let k = &*(extra as *const FKeyval);
        let (mut out, mut fflag, mut ierr) = (0isize, 0, SUCCESS);
        if k.mpi1 {
            let (ex, vin, mut out32) = (k.extra as c_int, value_in as isize as c_int, 0 as c_int);
            (k.copy)(
                &old,
                &keyval,
                &ex as *const c_int as *const isize,
                &vin as *const c_int as *const isize,
                &mut out32 as *mut c_int as *mut isize,
                &mut fflag,
                &mut ierr,
            );
            out = out32 as isize;
        } else {
            (k.copy)(
                &old,
                &keyval,
                &k.extra,
                &(value_in as isize),
                &mut out,
                &mut fflag,
                &mut ierr,
            );
        }
        (value_out as *mut *mut c_void).write(out as *mut c_void);
        flag.write(c_int::from(fflag != 0));
        ierr
    }
}

unsafe extern "C" fn delete_trampoline(
    handle: c_int,
    keyval: c_int,
    value: *mut c_void,
    extra: *mut c_void,
) -> c_int {
    // SAFETY: `extra` is the FKeyval this keyval was created with (never freed).
    unsafe {
        let k = &*(extra as *const FKeyval);
        let mut ierr = SUCCESS;
        if k.mpi1 {
            let (v, ex) = (value as isize as c_int, k.extra as c_int);
            (k.delete)(
                &handle,
                &keyval,
                &v as *const c_int as *const isize,
                &ex as *const c_int as *const isize,
                &mut ierr,
            );
        } else {
            (k.delete)(&handle, &keyval, &(value as isize), &k.extra, &mut ierr);
        }
        ierr
    }
}

/// The predefined Fortran callbacks of one family, by address and by name.
struct Predefined {
    null_copy: (usize, &'static CStr),
    dup: (usize, &'static CStr),
    null_delete: (usize, &'static CStr),
}

/// The predefined callbacks of the three families: communicator, datatype, MPI-1.
fn families() -> [Predefined; 3] {
    [
        Predefined {
            null_copy: (
                mpi_comm_null_copy_fn_ as *const () as usize,
                c"mpi_comm_null_copy_fn_",
            ),
            dup: (mpi_comm_dup_fn_ as *const () as usize, c"mpi_comm_dup_fn_"),
            null_delete: (
                mpi_comm_null_delete_fn_ as *const () as usize,
                c"mpi_comm_null_delete_fn_",
            ),
        },
        Predefined {
            null_copy: (
                mpi_type_null_copy_fn_ as *const () as usize,
                c"mpi_type_null_copy_fn_",
            ),
            dup: (mpi_type_dup_fn_ as *const () as usize, c"mpi_type_dup_fn_"),
            null_delete: (
                mpi_type_null_delete_fn_ as *const () as usize,
                c"mpi_type_null_delete_fn_",
            ),
        },
        Predefined {
            null_copy: (
                mpi_null_copy_fn_ as *const () as usize,
                c"mpi_null_copy_fn_",
            ),
            dup: (mpi_dup_fn_ as *const () as usize, c"mpi_dup_fn_"),
            null_delete: (
                mpi_null_delete_fn_ as *const () as usize,
                c"mpi_null_delete_fn_",
            ),
        },
    ]
}

type CCreate = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut c_void) -> c_int;

/// Create a keyval with Fortran callbacks `copy` and `delete` through the C entry point
/// `create`.
///
/// # Safety
/// `copy` and `delete` are Fortran procedures with the callback signatures of the
/// family (`mpi1`: MPI-1's), `keyval` an INTEGER, `extra` the extra state.
unsafe fn create_keyval(
    create: CCreate,
    copy: *const c_void,
    delete: *const c_void,
    keyval: *mut c_int,
    extra: isize,
    mpi1: bool,
) -> c_int {
    // Any family's predefined callbacks are recognised (programs mix them: MPICH's
    // commattr4f passes MPI-1's MPI_NULL_DELETE_FN to MPI_COMM_CREATE_KEYVAL).
    let any = |p: *const c_void, pick: fn(&Predefined) -> (usize, &'static CStr)| {
        families().iter().any(|f| {
            let (addr, name) = pick(f);
            is_fn(p, addr, name)
        })
    };
    let null_copy = any(copy, |f| f.null_copy);
    let dup = any(copy, |f| f.dup);
    let null_delete = any(delete, |f| f.null_delete);
    if (null_copy || dup) && null_delete {
        // No Fortran code to call: C's NULL_COPY_FN (0) / DUP_FN (1) and
        // NULL_DELETE_FN (0).
        let c_copy = usize::from(dup) as *mut c_void;
        // SAFETY: the C entry point with its own constants and the caller's INTEGER.
        return unsafe { create(c_copy, std::ptr::null_mut(), keyval, std::ptr::null_mut()) };
    }
    // Deliberately leaked: the C layer may call the callbacks for as long as any object
    // carries the attribute, even after the keyval is freed; one small record per keyval
    // created.
    // SAFETY: the caller passes Fortran procedures with the callback signatures.
    let k = Box::into_raw(Box::new(FKeyval {
        copy: unsafe { std::mem::transmute::<*const c_void, FCopy>(copy) },
        delete: unsafe { std::mem::transmute::<*const c_void, FDelete>(delete) },
        extra,
        mpi1,
    }));
    // SAFETY: the trampolines have the C callback signatures; `k` lives forever.
    unsafe {
        create(
            copy_trampoline as *mut c_void,
            delete_trampoline as *mut c_void,
            keyval,
            k as *mut c_void,
        )
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
        let c: CCreate = cabi::PMPI_Comm_create_keyval;
        create_keyval(c, copy, delete, keyval, extra.read(), false)
    })
}

/// `MPI_TYPE_CREATE_KEYVAL(type_copy_attr_fn, type_delete_attr_fn, type_keyval,
/// extra_state, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_type_create_keyval_(
    copy: *const c_void,
    delete: *const c_void,
    keyval: *mut c_int,
    extra: *const isize,
    ierr: *mut c_int,
) {
    // SAFETY: as in pmpi_comm_create_keyval_.
    guard("MPI_Type_create_keyval", ierr, || unsafe {
        let c: CCreate = cabi::PMPI_Type_create_keyval;
        create_keyval(c, copy, delete, keyval, extra.read(), false)
    })
}

/// MPI-1's `MPI_KEYVAL_CREATE(copy_fn, delete_fn, keyval, extra_state, ierror)`: INTEGER
/// extra state and attribute values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_keyval_create_(
    copy: *const c_void,
    delete: *const c_void,
    keyval: *mut c_int,
    extra: *const c_int,
    ierr: *mut c_int,
) {
    // SAFETY: as in pmpi_comm_create_keyval_, with a default INTEGER extra state.
    guard("MPI_Keyval_create", ierr, || unsafe {
        let c: CCreate = cabi::PMPI_Keyval_create;
        create_keyval(c, copy, delete, keyval, extra.read() as isize, true)
    })
}
