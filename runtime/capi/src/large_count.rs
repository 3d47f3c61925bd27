//! MPI-4 large-count (`_c`) functions (MPI-4.0 2.5.8): the same calls with `MPI_Count`
//! counts and `MPI_Aint` displacements. Each checks that its counts fit the `int`
//! interface and runs the `int` call (so everything posted, recorded and replayed is that
//! call's); a count beyond `INT_MAX` is refused with `MPI_ERR_COUNT` (strobe's datatype
//! engine describes at most `INT_MAX` elements per call). The query functions
//! (`MPI_Type_size_c`, `MPI_Type_get_(true_)extent_c`, `MPI_Get_count_c`) are the `_x`
//! ones, which already answer in `MPI_Count`.

use std::os::raw::{c_int, c_void};

use strobe_runtime::calls::Call;

use crate::consts::*;
use crate::error::{entry, fail, MpiResult};
use crate::util::array;

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

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_contiguous_c(
    n: MpiCount,
    old: MpiDatatype,
    out: *mut MpiDatatype,
) -> c_int {
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
