//! `MPI_Type_create_darray` (a process's part of a block/cyclic-distributed array,
//! MPI-3.1 4.1.4) and `MPI_Type_match_size` (MPI-3.1 17.1.9).
//!
//! A darray is built from the indices this process owns in each dimension: nested
//! `MPI_Type_create_hindexed` types from the fastest-varying dimension out, resized to
//! the whole array (lb 0, extent the global array's), so its type map lists the owned
//! elements in memory order, which is the local array's order.

use std::os::raw::c_int;
use strobe_runtime::calls::Call;

use crate::consts::*;
use crate::datatype::{
    any_type, PMPI_Type_create_hindexed, PMPI_Type_create_resized, PMPI_Type_free,
};
use crate::error::{entry, fail, MpiResult};
use crate::typex::{ORDER_C, ORDER_FORTRAN};
use crate::util::{array, count, put};

pub const DISTRIBUTE_BLOCK: c_int = 121;
pub const DISTRIBUTE_CYCLIC: c_int = 122;
pub const DISTRIBUTE_NONE: c_int = 123;
pub const DISTRIBUTE_DFLT_DARG: c_int = -49767;
const COMBINER_DARRAY: c_int = 12;
const TYPECLASS_REAL: c_int = 1;
const TYPECLASS_INTEGER: c_int = 2;
const TYPECLASS_COMPLEX: c_int = 3;

/// The indices process coordinate `p` of `np` owns in a dimension of `g` elements.
fn owned(g: c_int, distrib: c_int, darg: c_int, p: c_int, np: c_int) -> MpiResult<Vec<c_int>> {
    Ok(match distrib {
        DISTRIBUTE_NONE => {
            if np != 1 {
                fail!(
                    class::ARG,
                    "MPI_DISTRIBUTE_NONE needs a process-grid size of 1"
                );
            }
            (0..g).collect()
        }
        DISTRIBUTE_BLOCK => {
            let b = if darg == DISTRIBUTE_DFLT_DARG {
                (g + np - 1) / np
            } else {
                darg
            };
            if b <= 0 || b * np < g {
                fail!(
                    class::ARG,
                    "block size {b} does not cover {g} elements on {np} processes"
                );
            }
            (p * b..((p + 1) * b).min(g)).collect()
        }
        DISTRIBUTE_CYCLIC => {
            let b = if darg == DISTRIBUTE_DFLT_DARG {
                1
            } else {
                darg
            };
            if b <= 0 {
                fail!(class::ARG, "cyclic block size {b} is not positive");
            }
            (0..g).filter(|i| (i / b) % np == p).collect()
        }
        d => fail!(class::ARG, "invalid distribution {d}"),
    })
}

/// Turn a C return code into a result.
fn rc(code: c_int, what: &str) -> MpiResult {
    if code != class::SUCCESS {
        fail!(code, "{what} failed");
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_create_darray(
    size: c_int,
    rank: c_int,
    ndims: c_int,
    gsizes: *const c_int,
    distribs: *const c_int,
    dargs: *const c_int,
    psizes: *const c_int,
    order: c_int,
    old: MpiDatatype,
    out: *mut MpiDatatype,
) -> c_int {
    entry(Call::TypeCreateDarray, COMM_WORLD, || {
        let nd = count(ndims, "ndims")?;
        if nd == 0 || out.is_null() || rank < 0 || rank >= size {
            fail!(
                class::ARG,
                "ndims must be positive, newtype non-NULL and 0 <= rank < size"
            );
        }
        // SAFETY: C input arrays of `ndims` elements (MPI contract).
        let (g, dist, darg, ps) = unsafe {
            (
                array(gsizes, nd, "array_of_gsizes")?,
                array(distribs, nd, "array_of_distribs")?,
                array(dargs, nd, "array_of_dargs")?,
                array(psizes, nd, "array_of_psizes")?,
            )
        };
        if ps.iter().map(|&p| p as i64).product::<i64>() != size as i64 {
            fail!(
                class::ARG,
                "the process grid does not have {size} processes"
            );
        }
        // The process grid is row-major (MPI-3.1 4.1.4), whatever `order`.
        let mut coords = vec![0; nd];
        let mut r = rank;
        for d in (0..nd).rev() {
            coords[d] = r % ps[d];
            r /= ps[d];
        }
        let dims: Vec<usize> = match order {
            ORDER_C => (0..nd).rev().collect(),
            ORDER_FORTRAN => (0..nd).collect(),
            _ => fail!(class::ARG, "order must be MPI_ORDER_C or MPI_ORDER_FORTRAN"),
        };
        let ext = any_type(old)?.extent;
        let mut t = old;
        let mut stride = ext;
        for (k, &d) in dims.iter().enumerate() {
            let idx = owned(g[d], dist[d], darg[d], coords[d], ps[d])?;
            let disps: Vec<MpiAint> = idx.iter().map(|&i| i as MpiAint * stride).collect();
            let ones = vec![1; idx.len()];
            let mut next = DATATYPE_NULL;
            // SAFETY: C entry points with local arrays of `idx.len()` elements.
            rc(
                unsafe {
                    PMPI_Type_create_hindexed(
                        idx.len() as c_int,
                        ones.as_ptr(),
                        disps.as_ptr(),
                        t,
                        &mut next,
                    )
                },
                "MPI_Type_create_hindexed",
            )?;
            if k > 0 {
                // SAFETY: a type this function made.
                unsafe { PMPI_Type_free(&mut t) };
            }
            t = next;
            stride *= g[d] as MpiAint;
        }
        // SAFETY: as above; `out` checked non-NULL.
        rc(
            unsafe { PMPI_Type_create_resized(t, 0, stride, out) },
            "MPI_Type_create_resized",
        )?;
        // SAFETY: as above.
        unsafe { PMPI_Type_free(&mut t) };
        // SAFETY: checked non-NULL, and just written.
        let h = unsafe { *out };
        crate::typex::relabel(h, COMBINER_DARRAY, (4 * ndims + 4, 0, 1));
        let ints = [&[size, rank, ndims][..], g, dist, darg, ps, &[order][..]].concat();
        crate::typecontents::remember(h, ints, vec![], &[old]);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_match_size(
    typeclass: c_int,
    size: c_int,
    dt: *mut MpiDatatype,
) -> c_int {
    entry(Call::TypeMatchSize, COMM_WORLD, || {
        // The Fortran size-specific types where they exist (MPI-3.1 17.1.9), C's for
        // the sizes Fortran lacks here (16-byte reals and 32-byte complex numbers).
        let h: MpiDatatype = match (typeclass, size) {
            (TYPECLASS_REAL, 4) => 50,
            (TYPECLASS_REAL, 8) => 51,
            (TYPECLASS_REAL, 16) => 16,
            (TYPECLASS_INTEGER, 1) => 46,
            (TYPECLASS_INTEGER, 2) => 47,
            (TYPECLASS_INTEGER, 4) => 48,
            (TYPECLASS_INTEGER, 8) => 49,
            (TYPECLASS_COMPLEX, 8) => 52,
            (TYPECLASS_COMPLEX, 16) => 53,
            (TYPECLASS_COMPLEX, 32) => 38,
            (TYPECLASS_REAL | TYPECLASS_INTEGER | TYPECLASS_COMPLEX, s) => {
                fail!(
                    class::ARG,
                    "no predefined type of class {typeclass} has {s} bytes"
                )
            }
            (c, _) => fail!(class::ARG, "invalid type class {c}"),
        };
        // SAFETY: `dt` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(dt, h, "datatype") }
    })
}

/// The datatype of `MPI_Type_create_f90_*` for (`combiner`, p, r): the predefined type
/// `base` relabelled, made once per (combiner, p, r) and kept (MPI-3.1 17.1.9: the
/// program must not free it).
fn f90_type(
    combiner: c_int,
    p: c_int,
    r: c_int,
    base: MpiDatatype,
    out: *mut MpiDatatype,
) -> MpiResult {
    use std::collections::HashMap;
    use std::sync::Mutex;
    type Made = HashMap<(c_int, c_int, c_int), MpiDatatype>;
    static MADE: Mutex<Option<Made>> = Mutex::new(None);
    let key = (combiner, p, r);
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    let cached = made.get_or_insert_with(HashMap::new).get(&key).copied();
    let h = match cached {
        Some(h) if crate::state::st().types.contains_key(&h) => h,
        _ => {
            let mut t = (*any_type(base)?).clone();
            t.predefined = false;
            t.combiner = combiner;
            let ints = if combiner == COMBINER_F90_INTEGER {
                vec![r]
            } else {
                vec![p, r]
            };
            t.envelope = (ints.len() as c_int, 0, 0);
            let h = crate::state::insert_type(t);
            crate::typecontents::remember(h, ints, vec![], &[]);
            made.get_or_insert_with(HashMap::new).insert(key, h);
            h
        }
    };
    // SAFETY: `out` is a C output argument: NULL or writable (MPI contract).
    unsafe { put(out, h, "newtype") }
}

const COMBINER_F90_REAL: c_int = 13;
const COMBINER_F90_COMPLEX: c_int = 14;
const COMBINER_F90_INTEGER: c_int = 15;

/// The gfortran real kind `SELECTED_REAL_KIND(p, r)` selects, as (real, complex) C types.
fn real_kind(p: c_int, r: c_int) -> MpiResult<(MpiDatatype, MpiDatatype)> {
    let (p, r) = (
        if p == UNDEFINED { 0 } else { p },
        if r == UNDEFINED { 0 } else { r },
    );
    Ok(match (p, r) {
        (..=6, ..=37) => (50, 52),    // REAL(4): MPI_REAL4, MPI_COMPLEX8
        (..=15, ..=307) => (51, 53),  // REAL(8): MPI_REAL8, MPI_COMPLEX16
        (..=18, ..=4931) => (16, 38), // REAL(10): the x87 long double
        _ => fail!(
            class::ARG,
            "no real kind has precision {p} and range {r} here"
        ),
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_create_f90_integer(r: c_int, out: *mut MpiDatatype) -> c_int {
    entry(Call::TypeCreateF90Integer, COMM_WORLD, || {
        // SELECTED_INT_KIND(r): the smallest integer holding 10^r.
        let base = match r {
            ..=2 => 46,
            3..=4 => 47,
            5..=9 => 48,
            10..=18 => 49,
            _ => fail!(class::ARG, "no integer kind has range {r} here"),
        };
        f90_type(COMBINER_F90_INTEGER, 0, r, base, out)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_create_f90_real(
    p: c_int,
    r: c_int,
    out: *mut MpiDatatype,
) -> c_int {
    entry(Call::TypeCreateF90Real, COMM_WORLD, || {
        let (real, _) = real_kind(p, r)?;
        f90_type(COMBINER_F90_REAL, p, r, real, out)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_create_f90_complex(
    p: c_int,
    r: c_int,
    out: *mut MpiDatatype,
) -> c_int {
    entry(Call::TypeCreateF90Complex, COMM_WORLD, || {
        let (_, complex) = real_kind(p, r)?;
        f90_type(COMBINER_F90_COMPLEX, p, r, complex, out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_and_cyclic_ownership() {
        assert_eq!(
            owned(10, DISTRIBUTE_BLOCK, DISTRIBUTE_DFLT_DARG, 1, 3).unwrap(),
            vec![4, 5, 6, 7]
        );
        assert_eq!(
            owned(10, DISTRIBUTE_BLOCK, DISTRIBUTE_DFLT_DARG, 2, 3).unwrap(),
            vec![8, 9]
        );
        assert_eq!(owned(7, DISTRIBUTE_CYCLIC, 2, 1, 2).unwrap(), vec![2, 3, 6]);
        assert_eq!(
            owned(3, DISTRIBUTE_NONE, DISTRIBUTE_DFLT_DARG, 0, 1).unwrap(),
            vec![0, 1, 2]
        );
        assert!(owned(10, DISTRIBUTE_BLOCK, 2, 0, 3).is_err());
    }
}
