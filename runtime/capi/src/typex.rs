//! More datatypes: the Fortran-named types for C programs (mpif.h's handles:
//! `datatype::any_type` maps them), the MPI-1 markers
//! and names (`MPI_LB`, `MPI_UB`, `MPI_Type_hvector`, `MPI_Type_hindexed`,
//! `MPI_Type_struct`, `MPI_Type_extent`, `MPI_Type_lb`, `MPI_Type_ub`),
//! `MPI_Type_create_subarray`, `MPI_Type_create_hindexed_block`, element counts
//! (`MPI_Get_elements(_x)`), the `_x` size and extent queries, and type names.
//!
//! The complex types are `complex_types()` below (reductions in reduce.rs).

use std::os::raw::{c_char, c_int};
use std::sync::Arc;
use strobe_runtime::calls::Call;

use strobe_runtime::datatype::ElemType;

use crate::consts::*;
use crate::datatype::{any_type, ElemKind, Prim, TypeInfo};
use crate::datatype::{
    PMPI_Type_contiguous, PMPI_Type_create_hindexed, PMPI_Type_create_hvector,
    PMPI_Type_create_resized, PMPI_Type_create_struct, PMPI_Type_free,
};
use crate::error::{entry, fail, MpiResult};
use crate::state::st;
use crate::util::{array, count, put, put_str};

pub const TYPE_LB: MpiDatatype = 39;
pub const TYPE_UB: MpiDatatype = 40;
pub const ORDER_C: c_int = 56;
pub const ORDER_FORTRAN: c_int = 57;
const COMBINER_HINDEXED_BLOCK: c_int = 9;
const COMBINER_SUBARRAY: c_int = 11;

/// The predefined types after `MPI_LONG_DOUBLE_INT` (handles 36..).
pub fn more_predefined() -> Vec<(MpiDatatype, TypeInfo)> {
    use ElemType as E;
    use Prim::*;
    // The complex types (36..38) are complex_types() below.
    let list: [(MpiDatatype, &'static str, usize, Prim); 20] = [
        (TYPE_LB, "MPI_LB", 0, Rt(E::Byte)),
        (TYPE_UB, "MPI_UB", 0, Rt(E::Byte)),
        // The Fortran types and the size-specific and C++ ones (mpi13b): handles of their
        // own, so that MPI_Type_get_name names them; they are what their C twins are.
        (41, "MPI_CHARACTER", 1, Rt(E::I8)),
        (42, "MPI_INTEGER", 4, Rt(E::I32)),
        (43, "MPI_REAL", 4, Rt(E::F32)),
        (44, "MPI_DOUBLE_PRECISION", 8, Rt(E::F64)),
        (45, "MPI_2INTEGER", 8, Rt(E::TwoInt)),
        (46, "MPI_INTEGER1", 1, Rt(E::I8)),
        (47, "MPI_INTEGER2", 2, Rt(E::I16)),
        (48, "MPI_INTEGER4", 4, Rt(E::I32)),
        (49, "MPI_INTEGER8", 8, Rt(E::I64)),
        (50, "MPI_REAL4", 4, Rt(E::F32)),
        (51, "MPI_REAL8", 8, Rt(E::F64)),
        (52, "MPI_COMPLEX8", 8, Complex(E::F32)),
        (53, "MPI_COMPLEX16", 16, Complex(E::F64)),
        (54, "MPI_CXX_BOOL", 1, Rt(E::Bool)),
        (55, "MPI_CXX_FLOAT_COMPLEX", 8, Complex(E::F32)),
        (58, "MPI_CXX_DOUBLE_COMPLEX", 16, Complex(E::F64)),
        (59, "MPI_CXX_LONG_DOUBLE_COMPLEX", 32, LongDoubleComplex),
        // Fortran's LOGICAL (gfortran: a 4-byte integer, .true. = 1).
        (-101, "MPI_LOGICAL", 4, Rt(E::I32)),
    ];
    list.into_iter()
        .map(|(h, n, s, p)| {
            let mut t = TypeInfo::predefined_named(n, s, p);
            if s == 0 {
                t.blocks.clear();
                t.elem = ElemKind::Empty;
                t.align = 1;
                t.elems = 0;
            }
            (h, t)
        })
        .collect()
}

/// Name the C type behind Fortran-only datatype `f` (`MPI_COMPLEX` ...: a contiguous
/// pair), so that reductions treat it as what it is (complex `MPI_PROD`, not an
/// element-wise product) and messages name it.
pub fn name_fortran_type(f: MpiDatatype, c: MpiDatatype) {
    let name = match f {
        -102 => "MPI_COMPLEX",
        -103 => "MPI_DOUBLE_COMPLEX",
        -104 => "MPI_2REAL",
        -105 => "MPI_2DOUBLE_PRECISION",
        _ => return,
    };
    if let Some(t) = st().types.get_mut(&c) {
        if t.name.is_empty() {
            Arc::make_mut(t).name = name;
        }
    }
}

/// `MPI_LB`/`MPI_UB` markers in a struct's parts: the explicit bounds they set.
pub fn marker_bounds(disps: &[MpiAint], types: &[MpiDatatype]) -> (Option<isize>, Option<isize>) {
    let mut lb = None;
    let mut ub = None;
    for (d, t) in disps.iter().zip(types) {
        if *t == TYPE_LB {
            lb = Some(lb.map_or(*d, |v: isize| v.min(*d)));
        } else if *t == TYPE_UB {
            ub = Some(ub.map_or(*d, |v: isize| v.max(*d)));
        }
    }
    (lb, ub)
}

/// Elements of basic types in `bytes` of data of type `t` (`None`: not a whole number).
/// A partial copy of a type mixing basic types of different sizes is not counted.
fn elements(t: &TypeInfo, dt: MpiDatatype, bytes: i64) -> Option<i64> {
    if bytes == 0 {
        return Some(0);
    }
    let (size, elems) = (t.size as i64, t.elems as i64);
    if size == 0 || elems == 0 {
        return None;
    }
    let whole = bytes / size * elems;
    let rest = bytes % size;
    if rest == 0 {
        return Some(whole);
    }
    match t.elem {
        // Every basic element has the same size: count the ones in the partial copy.
        ElemKind::Uniform(_) if size % elems == 0 && rest % (size / elems) == 0 => {
            Some(whole + rest / (size / elems))
        }
        // Mixed sizes: the basic elements in type-map order, as external32 finds them.
        _ => {
            let sizes = crate::external32::element_sizes(dt)?;
            let mut left = rest as usize;
            let mut n = 0;
            for s in sizes {
                if left == 0 || s > left {
                    break;
                }
                left -= s;
                n += 1;
            }
            (left == 0).then_some(whole + n)
        }
    }
}

fn get_elements(status: *const MpiStatus, dt: MpiDatatype) -> MpiResult<i64> {
    if status.is_null() || status as usize == STATUS_IGNORE {
        fail!(class::ARG, "status is NULL or MPI_STATUS_IGNORE");
    }
    // SAFETY: non-null pointer to a status the program owns.
    let s = unsafe { *status };
    let t = any_type(dt)?;
    Ok(elements(&t, dt, s.bytes.max(0)).unwrap_or(UNDEFINED as i64))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Get_elements(
    status: *const MpiStatus,
    dt: MpiDatatype,
    out: *mut c_int,
) -> c_int {
    entry(Call::GetElements, COMM_WORLD, || {
        let n = get_elements(status, dt)?;
        // SAFETY: C output argument (MPI contract).
        unsafe { put(out, c_int::try_from(n).unwrap_or(UNDEFINED), "count") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Get_elements_x(
    status: *const MpiStatus,
    dt: MpiDatatype,
    out: *mut i64,
) -> c_int {
    entry(Call::GetElementsX, COMM_WORLD, || {
        let n = get_elements(status, dt)?;
        // SAFETY: C output argument (MPI contract).
        unsafe { put(out, n, "count") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_size_x(dt: MpiDatatype, out: *mut i64) -> c_int {
    entry(Call::TypeSizeX, COMM_WORLD, || {
        let t = any_type(dt)?;
        // SAFETY: C output argument (MPI contract).
        unsafe { put(out, t.size as i64, "size") }
    })
}

/// # Safety
/// `a` and `b` must be NULL or writable (C output arguments).
unsafe fn put_pair(a: *mut i64, av: isize, b: *mut i64, bv: isize) -> MpiResult {
    // SAFETY: C output arguments (this function's contract).
    unsafe {
        put(a, av as i64, "lb")?;
        put(b, bv as i64, "extent")
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_get_extent_x(
    dt: MpiDatatype,
    lb: *mut i64,
    ext: *mut i64,
) -> c_int {
    entry(Call::TypeGetExtentX, COMM_WORLD, || {
        let t = any_type(dt)?;
        // SAFETY: C output arguments (MPI contract).
        unsafe { put_pair(lb, t.lb, ext, t.extent) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_get_true_extent_x(
    dt: MpiDatatype,
    lb: *mut i64,
    ext: *mut i64,
) -> c_int {
    entry(Call::TypeGetTrueExtentX, COMM_WORLD, || {
        let t = any_type(dt)?;
        // SAFETY: C output arguments (MPI contract).
        unsafe { put_pair(lb, t.true_lb, ext, t.true_ub - t.true_lb) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_extent(dt: MpiDatatype, out: *mut MpiAint) -> c_int {
    entry(Call::TypeExtent, COMM_WORLD, || {
        let t = any_type(dt)?;
        // SAFETY: C output argument (MPI contract).
        unsafe { put(out, t.extent, "extent") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_lb(dt: MpiDatatype, out: *mut MpiAint) -> c_int {
    entry(Call::TypeLb, COMM_WORLD, || {
        let t = any_type(dt)?;
        // SAFETY: C output argument (MPI contract).
        unsafe { put(out, t.lb, "displacement") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_ub(dt: MpiDatatype, out: *mut MpiAint) -> c_int {
    entry(Call::TypeUb, COMM_WORLD, || {
        let t = any_type(dt)?;
        // SAFETY: C output argument (MPI contract).
        unsafe { put(out, t.lb + t.extent, "displacement") }
    })
}

/// MPI-1 name of `MPI_Type_create_hvector`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_hvector(
    n: c_int,
    blen: c_int,
    stride: MpiAint,
    old: MpiDatatype,
    out: *mut MpiDatatype,
) -> c_int {
    // SAFETY: the same arguments, under the same contract.
    unsafe { PMPI_Type_create_hvector(n, blen, stride, old, out) }
}

/// MPI-1 name of `MPI_Type_create_hindexed`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_hindexed(
    n: c_int,
    blens: *const c_int,
    disps: *const MpiAint,
    old: MpiDatatype,
    out: *mut MpiDatatype,
) -> c_int {
    // SAFETY: the same arguments, under the same contract.
    unsafe { PMPI_Type_create_hindexed(n, blens, disps, old, out) }
}

/// MPI-1 name of `MPI_Type_create_struct` (which also honours `MPI_LB`/`MPI_UB`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_struct(
    n: c_int,
    blens: *const c_int,
    disps: *const MpiAint,
    types: *const MpiDatatype,
    out: *mut MpiDatatype,
) -> c_int {
    // SAFETY: the same arguments, under the same contract.
    unsafe { PMPI_Type_create_struct(n, blens, disps, types, out) }
}

/// Turn a C return code into a result.
fn rc(code: c_int, what: &str) -> MpiResult {
    if code != class::SUCCESS {
        fail!(code, "{what} failed");
    }
    Ok(())
}

/// Change a new type's combiner and envelope (it was built from simpler constructors).
pub fn relabel(h: MpiDatatype, combiner: c_int, envelope: (c_int, c_int, c_int)) {
    if let Some(t) = st().types.get_mut(&h) {
        let t = Arc::make_mut(t);
        t.combiner = combiner;
        t.envelope = envelope;
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_create_hindexed_block(
    n: c_int,
    blen: c_int,
    disps: *const MpiAint,
    old: MpiDatatype,
    out: *mut MpiDatatype,
) -> c_int {
    entry(Call::TypeCreateHindexedBlock, COMM_WORLD, || {
        let k = count(n, "count")?;
        count(blen, "blocklength")?;
        if out.is_null() {
            fail!(class::ARG, "newtype is NULL");
        }
        let blens = vec![blen; k];
        // SAFETY: `disps` holds `n` displacements (MPI contract); `out` is the caller's.
        rc(
            unsafe { PMPI_Type_create_hindexed(n, blens.as_ptr(), disps, old, out) },
            "MPI_Type_create_hindexed",
        )?;
        // SAFETY: checked non-NULL, and just written.
        let h = unsafe { *out };
        relabel(h, COMBINER_HINDEXED_BLOCK, (2, n, 1));
        // SAFETY: `disps` holds `n` displacements (read by the call above).
        let d = unsafe { array(disps, k, "array_of_displacements") }?;
        crate::typecontents::remember(h, vec![n, blen], d.to_vec(), &[old]);
        Ok(())
    })
}

/// `MPI_Type_create_subarray`, built as MPI-3.1 4.1.3 describes it: nested vectors of the
/// subarray's rows, moved to the subarray's start, resized to the whole array.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_create_subarray(
    ndims: c_int,
    sizes: *const c_int,
    subsizes: *const c_int,
    starts: *const c_int,
    order: c_int,
    old: MpiDatatype,
    out: *mut MpiDatatype,
) -> c_int {
    entry(Call::TypeCreateSubarray, COMM_WORLD, || {
        let nd = count(ndims, "ndims")?;
        if nd == 0 {
            fail!(class::ARG, "ndims must be positive");
        }
        // SAFETY: C input arrays of `ndims` elements (MPI contract).
        let (sz, sub, st0) = unsafe {
            (
                array(sizes, nd, "array_of_sizes")?,
                array(subsizes, nd, "array_of_subsizes")?,
                array(starts, nd, "array_of_starts")?,
            )
        };
        if out.is_null() {
            fail!(class::ARG, "newtype is NULL");
        }
        for i in 0..nd {
            if sz[i] <= 0 || sub[i] <= 0 || sub[i] > sz[i] || st0[i] < 0 || st0[i] > sz[i] - sub[i]
            {
                fail!(
                    class::ARG,
                    "dimension {i}: size {}, subsize {}, start {} do not describe a subarray",
                    sz[i],
                    sub[i],
                    st0[i]
                );
            }
        }
        // Dimensions from the fastest-varying one.
        let dims: Vec<usize> = match order {
            ORDER_FORTRAN => (0..nd).collect(),
            ORDER_C => (0..nd).rev().collect(),
            _ => fail!(class::ARG, "order must be MPI_ORDER_C or MPI_ORDER_FORTRAN"),
        };
        let ext = any_type(old)?.extent;
        let mut t = DATATYPE_NULL;
        let d0 = dims[0];
        // SAFETY: C entry points with pointers to locals.
        rc(
            unsafe { PMPI_Type_contiguous(sub[d0], old, &mut t) },
            "MPI_Type_contiguous",
        )?;
        let mut stride = ext * sz[d0] as isize;
        let mut disp = st0[d0] as isize * ext;
        for &d in &dims[1..] {
            let mut next = DATATYPE_NULL;
            // SAFETY: as above.
            rc(
                unsafe { PMPI_Type_create_hvector(sub[d], 1, stride, t, &mut next) },
                "MPI_Type_create_hvector",
            )?;
            // SAFETY: as above.
            unsafe { PMPI_Type_free(&mut t) };
            t = next;
            disp += st0[d] as isize * stride;
            stride *= sz[d] as isize;
        }
        let mut moved = DATATYPE_NULL;
        let one = 1;
        // SAFETY: as above.
        rc(
            unsafe { PMPI_Type_create_hindexed(1, &one, &disp, t, &mut moved) },
            "MPI_Type_create_hindexed",
        )?;
        // SAFETY: as above.
        unsafe { PMPI_Type_free(&mut t) };
        // SAFETY: as above; `out` checked non-NULL.
        rc(
            unsafe { PMPI_Type_create_resized(moved, 0, stride, out) },
            "MPI_Type_create_resized",
        )?;
        // SAFETY: as above.
        unsafe { PMPI_Type_free(&mut moved) };
        // SAFETY: checked non-NULL, and just written.
        let h = unsafe { *out };
        relabel(h, COMBINER_SUBARRAY, (3 * ndims + 2, 0, 1));
        let ints = [&[ndims][..], sz, sub, st0, &[order][..]].concat();
        crate::typecontents::remember(h, ints, vec![], &[old]);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_set_name(dt: MpiDatatype, name: *const c_char) -> c_int {
    entry(Call::TypeSetName, COMM_WORLD, || {
        any_type(dt)?;
        if name.is_null() {
            fail!(class::ARG, "type_name is NULL");
        }
        // SAFETY: non-null NUL-terminated C string (MPI contract).
        let s = unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy();
        let s: String = s.chars().take(MAX_OBJECT_NAME - 1).collect();
        st().type_names.insert(dt, s);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_get_name(
    dt: MpiDatatype,
    name: *mut c_char,
    len: *mut c_int,
) -> c_int {
    entry(Call::TypeGetName, COMM_WORLD, || {
        let t = any_type(dt)?;
        let n = st()
            .type_names
            .get(&dt)
            .cloned()
            .unwrap_or_else(|| t.name.to_string());
        // SAFETY: a buffer of MPI_MAX_OBJECT_NAME characters and an output length (MPI
        // contract).
        unsafe { put_str(name, MAX_OBJECT_NAME, &n, len) }
    })
}

// --- Complex datatypes (issue 13; reductions in reduce.rs) ---------------------------

/// The complex datatypes: handles 36..38, right after the other predefined ones
/// (`MPI_C_COMPLEX` is `MPI_C_FLOAT_COMPLEX`, named `MPI_C_COMPLEX` as MPICH names it); `MPI_COMPLEX` and `MPI_DOUBLE_COMPLEX` keep
/// Fortran's (negative) handles, so C programs can use them too.
pub fn complex_types() -> Vec<(MpiDatatype, TypeInfo)> {
    use ElemType as E;
    [
        (36, "MPI_C_COMPLEX", 8, Prim::Complex(E::F32)),
        (37, "MPI_C_DOUBLE_COMPLEX", 16, Prim::Complex(E::F64)),
        (38, "MPI_C_LONG_DOUBLE_COMPLEX", 32, Prim::LongDoubleComplex),
        // Fortran's handles (mpif.h), which its binding maps before calling C.
        (-102, "MPI_COMPLEX", 8, Prim::Complex(E::F32)),
        (-103, "MPI_DOUBLE_COMPLEX", 16, Prim::Complex(E::F64)),
    ]
    .into_iter()
    .map(|(h, n, s, p)| (h, TypeInfo::predefined_named(n, s, p)))
    .collect()
}

// --- end of the complex datatypes ----------------------------------------------------
