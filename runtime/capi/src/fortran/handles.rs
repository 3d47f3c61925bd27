//! Handles between Fortran and C, and the Fortran datatypes.
//!
//! A Fortran handle (`MPI_Fint`, an `INTEGER`) is the C handle: C handles are ints, so
//! `MPI_Comm_f2c` and friends are identities. The exception is the Fortran-only
//! datatypes, which mpif.h gives negative values (no C handle is negative) and which
//! [`dt_f2c`] maps onto C datatypes:
//!
//! | Fortran                 | C datatype                                       |
//! |-------------------------|--------------------------------------------------|
//! | `MPI_LOGICAL`           | itself: a 4-byte integer (gfortran: `.true.` = 1) |
//! | `MPI_COMPLEX`           | contiguous 2 x `MPI_FLOAT`, made on first use    |
//! | `MPI_DOUBLE_COMPLEX`    | contiguous 2 x `MPI_DOUBLE`, made on first use   |
//! | `MPI_2REAL`             | contiguous 2 x `MPI_FLOAT`, made on first use    |
//! | `MPI_2DOUBLE_PRECISION` | contiguous 2 x `MPI_DOUBLE`, made on first use   |
//!
//! The other Fortran datatypes are C handles outright (`MPI_INTEGER` = `MPI_INT`,
//! `MPI_DOUBLE_PRECISION` = `MPI_DOUBLE`, ...; see mpif.h). The runtime has no complex
//! or pair-of-reals element type, so reductions on these map the op too
//! ([`reduce_args`]): `MPI_SUM` on a complex type is the element-wise sum of the two
//! halves, which is the complex sum; `MPI_PROD` on complex and `MPI_MINLOC`/`MPI_MAXLOC`
//! on the pair types become user ops made here on first use (reduced on the rank side,
//! in rank order, by the C layer); ordering ops on complex numbers are refused.

use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicI32, Ordering};

use super::args::{status_c2f, status_f2c};
use super::cabi::{self, CStatus};
use super::{fail, ERR_ARG, ERR_OP, SUCCESS};

/// Fortran-only datatype handles (mpif.h).
pub const F_LOGICAL: c_int = -101;
pub const F_COMPLEX: c_int = -102;
pub const F_DOUBLE_COMPLEX: c_int = -103;
pub const F_2REAL: c_int = -104;
pub const F_2DOUBLE_PRECISION: c_int = -105;

const C_FLOAT: c_int = 14;
const C_DOUBLE: c_int = 15;
const DATATYPE_NULL: c_int = 0;

const OP_SUM: c_int = 3;
const OP_PROD: c_int = 4;
const OP_MINLOC: c_int = 11;
const OP_MAXLOC: c_int = 12;
const OP_REPLACE: c_int = 13;
const OP_NO_OP: c_int = 14;

/// The C types behind the Fortran-only types that need a derived type, made on first use
/// (0: not yet). Handles are per process, like every C handle.
static DERIVED: [AtomicI32; 4] = [const { AtomicI32::new(0) }; 4];
const DERIVED_OF: [(c_int, c_int); 4] = [
    (F_COMPLEX, C_FLOAT),
    (F_DOUBLE_COMPLEX, C_DOUBLE),
    (F_2REAL, C_FLOAT),
    (F_2DOUBLE_PRECISION, C_DOUBLE),
];

/// The C datatype of Fortran datatype handle `f`.
pub fn dt_f2c(f: c_int) -> c_int {
    if f == F_LOGICAL {
        // The C layer knows MPI_LOGICAL (a 4-byte integer named MPI_LOGICAL).
        return F_LOGICAL;
    }
    let Some(slot) = DERIVED_OF.iter().position(|(h, _)| *h == f) else {
        return f;
    };
    let have = DERIVED[slot].load(Ordering::Acquire);
    if have != 0 {
        return have;
    }
    let mut h = DATATYPE_NULL;
    // SAFETY: C entry points with pointers to a local.
    let ok = unsafe {
        cabi::PMPI_Type_contiguous(2, DERIVED_OF[slot].1, &mut h) == SUCCESS
            && cabi::PMPI_Type_commit(&mut h) == SUCCESS
    };
    if !ok {
        // MPI_DATATYPE_NULL: the C entry point reports an invalid datatype.
        return DATATYPE_NULL;
    }
    // Named as the Fortran type (MPI_TYPE_GET_NAME, messages).
    const NAMES: [&std::ffi::CStr; 4] = [
        c"MPI_COMPLEX",
        c"MPI_DOUBLE_COMPLEX",
        c"MPI_2REAL",
        c"MPI_2DOUBLE_PRECISION",
    ];
    // SAFETY: a C entry point with a NUL-terminated name.
    unsafe { cabi::PMPI_Type_set_name(h, NAMES[slot].as_ptr()) };
    // Ranks are MPI_THREAD_FUNNELED, so there is no race to lose; if there were, the loser
    // would only leak one type.
    DERIVED[slot].store(h, Ordering::Release);
    h
}

/// The Fortran handle of C datatype `c` (the inverse of [`dt_f2c`] on the derived types
/// it made; `MPI_INT` stays `MPI_INTEGER`).
pub fn dt_c2f(c: c_int) -> c_int {
    DERIVED
        .iter()
        .position(|d| c != 0 && d.load(Ordering::Acquire) == c)
        .map_or(c, |i| DERIVED_OF[i].0)
}

type UserFn = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut c_int);

/// User ops made on first use: complex products (f32, f64), MINLOC and MAXLOC on pairs
/// of reals (f32, f64).
static OPS: [AtomicI32; 6] = [const { AtomicI32::new(0) }; 6];

fn user_op(slot: usize) -> c_int {
    const FNS: [UserFn; 6] = [
        cprod::<f32>,
        cprod::<f64>,
        pairloc::<f32, true>,
        pairloc::<f64, true>,
        pairloc::<f32, false>,
        pairloc::<f64, false>,
    ];
    let have = OPS[slot].load(Ordering::Acquire);
    if have != 0 {
        return have;
    }
    let mut op = 0;
    // SAFETY: a C entry point; the function has MPI_User_function's signature.
    if unsafe { cabi::PMPI_Op_create(FNS[slot] as *mut c_void, 1, &mut op) } != SUCCESS {
        return 0;
    }
    OPS[slot].store(op, Ordering::Release);
    op
}

/// Element type of the complex and pair reductions.
trait Real:
    Copy
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Sub<Output = Self>
{
}
impl Real for f32 {}
impl Real for f64 {}

/// `inout[i] = in[i] * inout[i]` on complex numbers stored as (re, im).
unsafe extern "C" fn cprod<R: Real>(
    inv: *mut c_void,
    inout: *mut c_void,
    len: *mut c_int,
    _dt: *mut c_int,
) {
    // SAFETY: the C layer passes two buffers of `*len` elements of the derived type the
    // op was used with, each two R's.
    let (a, b) = unsafe {
        let n = usize::try_from(*len).unwrap_or(0) * 2;
        (
            std::slice::from_raw_parts(inv as *const R, n),
            std::slice::from_raw_parts_mut(inout as *mut R, n),
        )
    };
    for (x, y) in a.chunks_exact(2).zip(b.chunks_exact_mut(2)) {
        let re = (x[0] * y[0]) - (x[1] * y[1]);
        let im = (x[0] * y[1]) + (x[1] * y[0]);
        y[0] = re;
        y[1] = im;
    }
}

/// MINLOC (`MIN` = true) or MAXLOC on (value, index) pairs of reals: the better value,
/// the smaller index on a tie (MPI's definition).
unsafe extern "C" fn pairloc<R: Real, const MIN: bool>(
    inv: *mut c_void,
    inout: *mut c_void,
    len: *mut c_int,
    _dt: *mut c_int,
) {
    // SAFETY: as in cprod.
    let (a, b) = unsafe {
        let n = usize::try_from(*len).unwrap_or(0) * 2;
        (
            std::slice::from_raw_parts(inv as *const R, n),
            std::slice::from_raw_parts_mut(inout as *mut R, n),
        )
    };
    for (x, y) in a.chunks_exact(2).zip(b.chunks_exact_mut(2)) {
        let better = if MIN { x[0] < y[0] } else { x[0] > y[0] };
        if better || (x[0] == y[0] && x[1] < y[1]) {
            y[0] = x[0];
            y[1] = x[1];
        }
    }
}

/// The C (datatype, op) of a reduction over Fortran datatype `dt` with `op`; Err is the
/// return code of a refused combination (see the module doc).
pub fn reduce_args(name: &str, comm: c_int, dt: c_int, op: c_int) -> Result<(c_int, c_int), c_int> {
    let cdt = dt_f2c(dt);
    let complex = dt == F_COMPLEX || dt == F_DOUBLE_COMPLEX;
    let pair = dt == F_2REAL || dt == F_2DOUBLE_PRECISION;
    let wide = usize::from(dt == F_DOUBLE_COMPLEX || dt == F_2DOUBLE_PRECISION);
    let cop = match op {
        OP_PROD if complex => user_op(wide),
        OP_MINLOC if pair => user_op(2 + wide),
        OP_MAXLOC if pair => user_op(4 + wide),
        OP_SUM | OP_REPLACE | OP_NO_OP => op,
        _ if complex => {
            return Err(fail(
                name,
                comm,
                ERR_OP,
                &format!(
                    "{} is not defined on complex numbers (only MPI_SUM and MPI_PROD are)",
                    op_name(op)
                ),
            ))
        }
        _ => op,
    };
    Ok((cdt, cop))
}

fn op_name(op: c_int) -> String {
    const NAMES: [&str; 13] = [
        "MPI_OP_NULL",
        "MPI_MAX",
        "MPI_MIN",
        "MPI_SUM",
        "MPI_PROD",
        "MPI_LAND",
        "MPI_BAND",
        "MPI_LOR",
        "MPI_BOR",
        "MPI_LXOR",
        "MPI_BXOR",
        "MPI_MINLOC",
        "MPI_MAXLOC",
    ];
    usize::try_from(op)
        .ok()
        .and_then(|i| NAMES.get(i))
        .map_or_else(|| format!("op {op}"), |n| n.to_string())
}

macro_rules! identity_conversions {
    ($($f2c:ident $c2f:ident;)*) => {$(
        /// Fortran handle -> C handle: the same int.
        #[unsafe(no_mangle)]
        pub extern "C" fn $f2c(h: c_int) -> c_int {
            h
        }
        /// C handle -> Fortran handle: the same int.
        #[unsafe(no_mangle)]
        pub extern "C" fn $c2f(h: c_int) -> c_int {
            h
        }
    )*};
}

identity_conversions! {
    PMPI_Comm_f2c PMPI_Comm_c2f;
    PMPI_Group_f2c PMPI_Group_c2f;
    PMPI_Op_f2c PMPI_Op_c2f;
    PMPI_Request_f2c PMPI_Request_c2f;
    PMPI_Errhandler_f2c PMPI_Errhandler_c2f;
    PMPI_Info_f2c PMPI_Info_c2f;
    PMPI_Message_f2c PMPI_Message_c2f;
}

/// `MPI_Type_f2c`: the Fortran-only datatypes become their C datatype.
#[unsafe(no_mangle)]
pub extern "C" fn PMPI_Type_f2c(h: c_int) -> c_int {
    dt_f2c(h)
}

/// `MPI_Type_c2f`.
#[unsafe(no_mangle)]
pub extern "C" fn PMPI_Type_c2f(h: c_int) -> c_int {
    dt_c2f(h)
}

/// `MPI_Status_f2c`: a Fortran status array into a C `MPI_Status`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Status_f2c(f: *const c_int, c: *mut CStatus) -> c_int {
    if f.is_null() || c.is_null() {
        return fail(
            "MPI_Status_f2c",
            super::COMM_WORLD,
            ERR_ARG,
            "status is NULL",
        );
    }
    // SAFETY: MPI's contract: f holds MPI_STATUS_SIZE integers, c is an MPI_Status.
    unsafe { c.write(status_f2c(f)) };
    SUCCESS
}

/// `MPI_Status_c2f`: a C `MPI_Status` into a Fortran status array.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Status_c2f(c: *const CStatus, f: *mut c_int) -> c_int {
    if f.is_null() || c.is_null() {
        return fail(
            "MPI_Status_c2f",
            super::COMM_WORLD,
            ERR_ARG,
            "status is NULL",
        );
    }
    // SAFETY: MPI's contract, as above.
    unsafe { status_c2f(&c.read(), f) };
    SUCCESS
}
