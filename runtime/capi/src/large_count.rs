//! MPI-4 large-count (`_c`) functions (MPI-4.0 2.5.8): the same calls with `MPI_Count`
//! counts and `MPI_Aint` displacements. Each checks that its counts fit the `int`
//! interface and runs the `int` call (so everything posted, recorded and replayed is that
//! call's); a count beyond `INT_MAX` is refused with `MPI_ERR_COUNT` (strobe's datatype
//! engine describes at most `INT_MAX` elements per call), except in the type constructors
//! over a dense old type (`MPI_CHAR`, `MPI_INT`, a contiguous type, ...), whose copies are
//! plain byte runs: those are built directly, whatever their counts ([`dense`]). The query functions
//! (`MPI_Type_size_c`, `MPI_Type_get_(true_)extent_c`, `MPI_Get_count_c`) are the `_x`
//! ones, which already answer in `MPI_Count`.

use std::os::raw::{c_int, c_void};

use strobe_runtime::calls::Call;
use strobe_runtime::datatype::TypeSig;

use crate::consts::*;
use crate::datatype::{any_type, TypeInfo};
use crate::error::{entry, fail, MpiResult};
use crate::util::{array, put};

/// `MPI_Count`.
type MpiCount = i64;

/// `n` as an `int` count, or `MPI_ERR_COUNT`.
fn small(n: MpiCount, what: &str) -> MpiResult<c_int> {
    match c_int::try_from(n) {
        Ok(v) => Ok(v),
        Err(_) => fail!(
            class::COUNT,
            "{what} {n} is beyond INT_MAX (strobe's large-count calls take int-sized counts)"
        ),
    }
}

/// Convert the `_c` arguments (`convert`, reporting errors as `call` on `comm`), then run
/// the `int` call `run` (which reports its own errors).
fn delegate<A>(
    call: Call,
    comm: MpiComm,
    convert: impl FnOnce() -> MpiResult<A>,
    run: impl FnOnce(A) -> c_int,
) -> c_int {
    let mut args = None;
    let rc = entry(call, comm, || {
        args = Some(convert()?);
        Ok(())
    });
    match args {
        Some(a) if rc == class::SUCCESS => run(a),
        _ => rc,
    }
}

/// `n` entries of a `MPI_Count` (or `MPI_Aint`) table as `int`s.
///
/// # Safety
/// `p` must be NULL or hold `n` entries.
unsafe fn small_table<T: Copy + Into<i64>>(
    p: *const T,
    n: usize,
    what: &str,
) -> MpiResult<Vec<c_int>> {
    // SAFETY: this function's contract.
    let t = unsafe { array(p, n, what) }?;
    t.iter().map(|&x| small(x.into(), what)).collect()
}

/// The size of `comm` (the length of a v-collective's tables).
fn comm_len(comm: MpiComm) -> MpiResult<usize> {
    crate::reduce::local_size(comm)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Send_c(
    buf: *const c_void,
    n: MpiCount,
    dt: MpiDatatype,
    dest: c_int,
    tag: c_int,
    comm: MpiComm,
) -> c_int {
    delegate(
        Call::SendC,
        comm,
        || small(n, "count"),
        |n| {
            // SAFETY: this entry point's arguments, passed on under MPI's rules.
            unsafe { crate::p2p::PMPI_Send(buf, n, dt, dest, tag, comm) }
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Recv_c(
    buf: *mut c_void,
    n: MpiCount,
    dt: MpiDatatype,
    src: c_int,
    tag: c_int,
    comm: MpiComm,
    status: *mut MpiStatus,
) -> c_int {
    delegate(
        Call::RecvC,
        comm,
        || small(n, "count"),
        |n| {
            // SAFETY: this entry point's arguments, passed on under MPI's rules.
            unsafe { crate::p2p::PMPI_Recv(buf, n, dt, src, tag, comm, status) }
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Isend_c(
    buf: *const c_void,
    n: MpiCount,
    dt: MpiDatatype,
    dest: c_int,
    tag: c_int,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    delegate(
        Call::IsendC,
        comm,
        || small(n, "count"),
        |n| {
            // SAFETY: this entry point's arguments, passed on under MPI's rules.
            unsafe { crate::p2p::PMPI_Isend(buf, n, dt, dest, tag, comm, req) }
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Irecv_c(
    buf: *mut c_void,
    n: MpiCount,
    dt: MpiDatatype,
    src: c_int,
    tag: c_int,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    delegate(
        Call::IrecvC,
        comm,
        || small(n, "count"),
        |n| {
            // SAFETY: this entry point's arguments, passed on under MPI's rules.
            unsafe { crate::p2p::PMPI_Irecv(buf, n, dt, src, tag, comm, req) }
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Bcast_c(
    buf: *mut c_void,
    n: MpiCount,
    dt: MpiDatatype,
    root: c_int,
    comm: MpiComm,
) -> c_int {
    delegate(
        Call::BcastC,
        comm,
        || small(n, "count"),
        |n| {
            // SAFETY: this entry point's arguments, passed on under MPI's rules.
            unsafe { crate::coll::PMPI_Bcast(buf, n, dt, root, comm) }
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Reduce_c(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    n: MpiCount,
    dt: MpiDatatype,
    op: MpiOp,
    root: c_int,
    comm: MpiComm,
) -> c_int {
    delegate(
        Call::ReduceC,
        comm,
        || small(n, "count"),
        |n| {
            // SAFETY: this entry point's arguments, passed on under MPI's rules.
            unsafe { crate::reduce::PMPI_Reduce(sbuf, rbuf, n, dt, op, root, comm) }
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Allreduce_c(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    n: MpiCount,
    dt: MpiDatatype,
    op: MpiOp,
    comm: MpiComm,
) -> c_int {
    delegate(
        Call::AllreduceC,
        comm,
        || small(n, "count"),
        |n| {
            // SAFETY: this entry point's arguments, passed on under MPI's rules.
            unsafe { crate::reduce::PMPI_Allreduce(sbuf, rbuf, n, dt, op, comm) }
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Alltoallv_c(
    sbuf: *const c_void,
    scounts: *const MpiCount,
    sdispls: *const MpiAint,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rcounts: *const MpiCount,
    rdispls: *const MpiAint,
    rdt: MpiDatatype,
    comm: MpiComm,
) -> c_int {
    let convert = || {
        let n = comm_len(comm)?;
        let sd: *const i64 = sdispls.cast();
        let rd: *const i64 = rdispls.cast();
        // SAFETY: MPI requires an entry per rank in each table.
        unsafe {
            Ok((
                small_table(scounts, n, "sendcounts")?,
                small_table(sd, n, "sdispls")?,
                small_table(rcounts, n, "recvcounts")?,
                small_table(rd, n, "rdispls")?,
            ))
        }
    };
    delegate(Call::AlltoallvC, comm, convert, |(sc, sd, rc, rd)| {
        // SAFETY: this entry point's buffers under MPI's rules, with `int` copies of its
        // tables (alive for the call).
        unsafe {
            crate::collv::PMPI_Alltoallv(
                sbuf,
                sc.as_ptr(),
                sd.as_ptr(),
                sdt,
                rbuf,
                rc.as_ptr(),
                rd.as_ptr(),
                rdt,
                comm,
            )
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Get_count_c(
    status: *const MpiStatus,
    dt: MpiDatatype,
    n: *mut MpiCount,
) -> c_int {
    let mut k: c_int = 0;
    // SAFETY: this entry point's arguments, passed on under MPI's rules.
    let rc = unsafe { crate::request::PMPI_Get_count(status, dt, &mut k) };
    if rc == class::SUCCESS {
        entry(Call::GetCountC, COMM_WORLD, || {
            // SAFETY: the program's output argument.
            unsafe { crate::util::put(n, MpiCount::from(k), "count") }
        })
    } else {
        rc
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_size_c(dt: MpiDatatype, size: *mut MpiCount) -> c_int {
    // SAFETY: this entry point's arguments, passed on under MPI's rules.
    unsafe { crate::typex::PMPI_Type_size_x(dt, size) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_get_extent_c(
    dt: MpiDatatype,
    lb: *mut MpiCount,
    extent: *mut MpiCount,
) -> c_int {
    // SAFETY: this entry point's arguments, passed on under MPI's rules.
    unsafe { crate::typex::PMPI_Type_get_extent_x(dt, lb, extent) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_get_true_extent_c(
    dt: MpiDatatype,
    lb: *mut MpiCount,
    extent: *mut MpiCount,
) -> c_int {
    // SAFETY: this entry point's arguments, passed on under MPI's rules.
    unsafe { crate::typex::PMPI_Type_get_true_extent_x(dt, lb, extent) }
}

/// A type made of `parts` ((byte displacement, element count) runs) of the dense type
/// `old`, or `None` when `old` is not dense (one block of its whole size at 0, extent =
/// size). Built directly: a run of any length is one block, so counts beyond `INT_MAX` cost
/// nothing (the `int` constructors' generic path walks every element).
fn dense(
    parts: &[(isize, usize)],
    old: &TypeInfo,
    combiner: c_int,
    envelope: (c_int, c_int, c_int),
) -> MpiResult<Option<TypeInfo>> {
    let size = old.size;
    if old.blocks.as_slice() != [(0, size)] || old.lb != 0 || old.extent != size as isize {
        return Ok(None);
    }
    let too_big = || crate::error::MpiErr::new(class::COUNT, "the type is larger than memory");
    let mut blocks: Vec<(isize, usize)> = Vec::new();
    let (mut total, mut elems, mut lb, mut ub) = (0usize, 0usize, None, None);
    for &(disp, n) in parts.iter().filter(|p| p.1 > 0) {
        let len = n.checked_mul(size).ok_or_else(too_big)?;
        total = total.checked_add(len).ok_or_else(too_big)?;
        elems = elems
            .checked_add(n.saturating_mul(old.elems))
            .ok_or_else(too_big)?;
        let end = disp
            .checked_add(isize::try_from(len).map_err(|_| too_big())?)
            .ok_or_else(too_big)?;
        lb = Some(lb.map_or(disp, |v: isize| v.min(disp)));
        ub = Some(ub.map_or(end, |v: isize| v.max(end)));
        match blocks.last_mut() {
            Some((po, pl)) if *po + *pl as isize == disp => *pl += len,
            _ => blocks.push((disp, len)),
        }
    }
    let (lb, ub) = (lb.unwrap_or(0), ub.unwrap_or(0));
    // The type signature, as the int constructors compute it (datatype.rs).
    let sig = parts
        .iter()
        .filter(|p| p.1 > 0)
        .try_fold(TypeSig::EMPTY, |sig, &(_, n)| {
            old.sig.map(|o| sig.concat(o.repeat(n as u64)))
        });
    Ok(Some(TypeInfo {
        sig,
        name: "",
        size: total,
        lb,
        extent: ub - lb,
        true_lb: blocks.iter().map(|b| b.0).min().unwrap_or(0),
        true_ub: blocks.iter().map(|b| b.0 + b.1 as isize).max().unwrap_or(0),
        blocks,
        elem: old.elem,
        committed: false,
        predefined: false,
        combiner,
        envelope,
        align: old.align,
        sticky_bounds: old.sticky_bounds,
        elems,
    }))
}

/// Build a type from dense runs (`parts` as [`dense`]); `Ok(false)` when `old` is not
/// dense and the `int` constructor must be used instead.
///
/// # Safety
/// `out` must be NULL or valid for writing one handle.
unsafe fn try_dense(
    parts: impl FnOnce() -> MpiResult<Vec<(isize, usize)>>,
    old: MpiDatatype,
    combiner: c_int,
    envelope: (c_int, c_int, c_int),
    out: *mut MpiDatatype,
) -> MpiResult<bool> {
    let t = any_type(old)?;
    let parts = parts()?;
    match dense(&parts, &t, combiner, envelope)? {
        None => Ok(false),
        Some(info) => {
            if out.is_null() {
                fail!(class::ARG, "newtype is NULL");
            }
            let h = crate::state::insert_type(info);
            // SAFETY: checked non-NULL; the program's output argument.
            unsafe { put(out, h, "newtype") }?;
            Ok(true)
        }
    }
}

/// Whether `old` is dense ([`dense`] builds types over it directly, whatever the counts:
/// the same type the `int` constructor builds, without walking every element).
fn is_dense(old: MpiDatatype) -> bool {
    any_type(old).is_ok_and(|t| {
        t.blocks.as_slice() == [(0, t.size)] && t.lb == 0 && t.extent == t.size as isize
    })
}

/// A `MPI_Count` that must be a non-negative element count.
fn ucount(n: MpiCount, what: &str) -> MpiResult<usize> {
    match usize::try_from(n) {
        Ok(v) => Ok(v),
        Err(_) => fail!(class::COUNT, "negative {what} {n}"),
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_contiguous_c(
    n: MpiCount,
    old: MpiDatatype,
    out: *mut MpiDatatype,
) -> c_int {
    if c_int::try_from(n).is_err() || is_dense(old) {
        return entry(Call::TypeContiguousC, COMM_WORLD, || {
            let parts = || Ok(vec![(0, ucount(n, "count")?)]);
            // SAFETY: `out` is this entry point's output argument.
            if unsafe { try_dense(parts, old, COMBINER_CONTIGUOUS, (1, 0, 1), out) }? {
                return Ok(());
            }
            small(n, "count").map(drop)
        });
    }
    delegate(
        Call::TypeContiguousC,
        COMM_WORLD,
        || small(n, "count"),
        |n| {
            // SAFETY: this entry point's arguments, passed on under MPI's rules.
            unsafe { crate::datatype::PMPI_Type_contiguous(n, old, out) }
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_create_hindexed_c(
    n: MpiCount,
    blens: *const MpiCount,
    disps: *const MpiCount,
    old: MpiDatatype,
    out: *mut MpiDatatype,
) -> c_int {
    let big = usize::try_from(n)
        .ok()
        .filter(|_| !blens.is_null())
        .is_some_and(|k| {
            // SAFETY: MPI requires `count` entries in array_of_blocklengths (non-NULL).
            let b = unsafe { std::slice::from_raw_parts(blens, k) };
            b.iter().any(|&x| c_int::try_from(x).is_err())
        });
    if big || is_dense(old) {
        return entry(Call::TypeCreateHindexedC, COMM_WORLD, || {
            let parts = || {
                let k = ucount(n, "count")?;
                // SAFETY: MPI requires `count` entries in each array.
                let (b, d) = unsafe {
                    (
                        array(blens, k, "array_of_blocklengths")?,
                        array(disps, k, "array_of_displacements")?,
                    )
                };
                let mut v = Vec::with_capacity(k);
                for (&b, &d) in b.iter().zip(d) {
                    v.push((d as isize, ucount(b, "blocklength")?));
                }
                Ok(v)
            };
            let env = (n.saturating_add(1) as c_int, n as c_int, 1);
            // SAFETY: `out` is this entry point's output argument.
            if unsafe { try_dense(parts, old, COMBINER_HINDEXED, env, out) }? {
                return Ok(());
            }
            fail!(
                class::COUNT,
                "a blocklength is beyond INT_MAX and the old type is not dense"
            )
        });
    }
    let convert = || {
        let k = small(n, "count")?;
        let len = crate::util::count(k, "count")?;
        // SAFETY: MPI requires `count` entries in each array.
        let (b, d) = unsafe {
            (
                small_table(blens, len, "array_of_blocklengths")?,
                array(disps, len, "array_of_displacements")?.to_vec(),
            )
        };
        let d: Vec<MpiAint> = d.into_iter().map(|x| x as MpiAint).collect();
        Ok((k, b, d))
    };
    delegate(
        Call::TypeCreateHindexedC,
        COMM_WORLD,
        convert,
        |(k, b, d)| {
            // SAFETY: `int`/`MPI_Aint` copies of the tables, alive for the call.
            unsafe {
                crate::datatype::PMPI_Type_create_hindexed(k, b.as_ptr(), d.as_ptr(), old, out)
            }
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_create_indexed_block_c(
    n: MpiCount,
    blen: MpiCount,
    disps: *const MpiCount,
    old: MpiDatatype,
    out: *mut MpiDatatype,
) -> c_int {
    if c_int::try_from(blen).is_err() || is_dense(old) {
        return entry(Call::TypeCreateIndexedBlockC, COMM_WORLD, || {
            let parts = || {
                let k = ucount(n, "count")?;
                let b = ucount(blen, "blocklength")?;
                let ext = any_type(old)?.extent;
                // SAFETY: MPI requires `count` entries.
                let d = unsafe { array(disps, k, "array_of_displacements")? };
                Ok(d.iter()
                    .map(|&x| ((x as isize).wrapping_mul(ext), b))
                    .collect())
            };
            let env = (n.saturating_add(2) as c_int, 0, 1);
            // SAFETY: `out` is this entry point's output argument.
            if unsafe { try_dense(parts, old, COMBINER_INDEXED_BLOCK, env, out) }? {
                return Ok(());
            }
            fail!(
                class::COUNT,
                "blocklength {blen} is beyond INT_MAX and the old type is not dense"
            )
        });
    }
    let convert = || {
        let k = small(n, "count")?;
        let b = small(blen, "blocklength")?;
        let len = crate::util::count(k, "count")?;
        // SAFETY: MPI requires `count` entries.
        let d = unsafe { small_table(disps, len, "array_of_displacements")? };
        Ok((k, b, d))
    };
    delegate(
        Call::TypeCreateIndexedBlockC,
        COMM_WORLD,
        convert,
        |(k, b, d)| {
            // SAFETY: an `int` copy of the table, alive for the call.
            unsafe { crate::datatype::PMPI_Type_create_indexed_block(k, b, d.as_ptr(), old, out) }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::predefined_types;

    fn named(name: &str) -> TypeInfo {
        predefined_types()
            .into_iter()
            .map(|(_, t)| t)
            .find(|t| t.name == name)
            .expect("predefined type")
    }

    #[test]
    fn dense_runs_beyond_int_max_are_one_block() {
        let int = named("MPI_INT");
        let n = 3_000_000_000usize;
        let t = dense(&[(0, n)], &int, COMBINER_CONTIGUOUS, (1, 0, 1))
            .expect("fits memory")
            .expect("MPI_INT is dense");
        assert_eq!(t.blocks, vec![(0, 4 * n)]);
        assert_eq!((t.size, t.extent, t.elems), (4 * n, 4 * n as isize, n));
        // Adjacent runs coalesce, a gap does not; zero-length runs are skipped.
        let t = dense(
            &[(0, 2), (8, 1), (12, 0), (16, 1)],
            &int,
            COMBINER_HINDEXED,
            (4, 3, 1),
        )
        .expect("fits memory")
        .expect("dense");
        assert_eq!(t.blocks, vec![(0, 12), (16, 4)]);
        assert_eq!((t.size, t.lb, t.extent, t.true_ub), (16, 0, 20, 20));
    }
}
