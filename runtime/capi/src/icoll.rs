//! Nonblocking collectives (`MPI_Ibarrier`, `MPI_Ibcast`, ..., `MPI_Ialltoallw`).
//!
//! Each collective's body is written once (in `coll.rs` and `reduce.rs`) and run in a
//! [`Mode`]. Blocking, it posts and waits as it always did. Nonblocking, the runtime
//! collective is posted through [`api::post_unscoped`] (the same descriptor, so the same
//! checks, schedule and bit-identical reductions), and what the blocking call would do
//! after the wait (unpack a staged receive buffer, copy out a reduction result) is kept as
//! a [`Finish`] that runs when Wait/Test consumes the request's completion (the one hook in
//! `request.rs`). Completion is asked only through the rank context's choke point, so a
//! Test outcome on a collective request is recorded and replayed like any other.
//!
//! The runtime queues each member's collectives on a communicator and matches them in
//! posting order, blocking and nonblocking alike, as the standard requires.
//!
//! Reductions that run on the rank side (user ops, `long double`) are several runtime
//! collectives in a row; their nonblocking form computes the result at the call (it blocks
//! until every member has called) and returns a request that completes at the next slice
//! (a barrier on `MPI_COMM_SELF`). docs/mpi-support.md lists this deviation.

use std::collections::HashMap;
use std::os::raw::{c_int, c_void};
use std::sync::{LazyLock, Mutex};

use strobe_runtime::api::{self, PostedCollective};
use strobe_runtime::calls::Call;

use crate::consts::*;
use crate::error::{entry, fail, MpiErr, MpiResult};
use crate::request::ReqEntry;
use crate::state::insert_req;
use crate::{coll, collv, reduce};

/// How a collective's body runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Post and wait (`MPI_Bcast`).
    Blocking,
    /// Post and return a request (`MPI_Ibcast`).
    Nonblocking,
}

/// What is left to do once the runtime has completed the collective.
pub type Finish = Box<dyn FnOnce() -> MpiResult>;

/// The result of a collective's body.
pub enum Outcome {
    /// Complete (always so when blocking).
    Done,
    /// Posted: finish when the request completes.
    Pending(PostedCollective, Finish),
}

/// A posted collective's finishing work. It holds the user's buffers (raw pointers) and
/// the staging copies the runtime reads and writes until completion.
struct Pending {
    _posted: PostedCollective,
    finish: Finish,
}

// SAFETY: a `Pending` is created by the thread that posted it and run by whichever thread
// completes the request; MPI gives the library the buffers it points at until completion,
// and the C layer serializes calls (`MPI_THREAD_FUNNELED` at most), so the closure never
// runs concurrently with anything touching the same memory.
unsafe impl Send for Pending {}

/// Finishing work of the pending nonblocking collectives, by runtime request id.
static PENDING: LazyLock<Mutex<HashMap<u64, Pending>>> = LazyLock::new(Default::default);

fn pending() -> std::sync::MutexGuard<'static, HashMap<u64, Pending>> {
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Run the runtime collective `post` in `mode`: `None` once done (blocking), or the
/// posted request (nonblocking).
pub fn run(
    mode: Mode,
    post: impl FnOnce() -> api::Result<()>,
) -> MpiResult<Option<PostedCollective>> {
    match mode {
        Mode::Blocking => {
            post()?;
            Ok(None)
        }
        // SAFETY: the callers (the bodies in coll.rs and reduce.rs) hand the runtime the
        // user's buffers, which MPI leaves to the library until the request completes, or
        // staging copies that the `Finish` passed to `then` owns until then.
        Mode::Nonblocking => Ok(Some(unsafe { api::post_unscoped(post) }?)),
    }
}

/// After [`run`]: finish now if the collective is done, or keep `finish` for completion.
pub fn then(
    posted: Option<PostedCollective>,
    finish: impl FnOnce() -> MpiResult + 'static,
) -> MpiResult<Outcome> {
    match posted {
        None => finish().map(|()| Outcome::Done),
        Some(p) => Ok(Outcome::Pending(p, Box::new(finish))),
    }
}

/// Called when Wait/Test consumes the completion of runtime request `id`: run the
/// finishing work of a nonblocking collective, if `id` is one. `ok`: the collective
/// succeeded (on an error the buffers are left as the blocking call leaves them).
pub fn on_complete(id: u64, ok: bool) -> Option<MpiErr> {
    let p = pending().remove(&id)?;
    if !ok {
        return None;
    }
    (p.finish)().err()
}

/// Turn a body's outcome into the caller's request handle.
///
/// # Safety
/// `req` must be valid for writing one handle (checked non-NULL here).
unsafe fn start(o: Outcome, comm: MpiComm, req: *mut MpiRequest) -> MpiResult {
    let h = insert_req(activate(o, comm)?);
    // SAFETY: checked non-NULL by the caller; MPI's contract for the request argument.
    unsafe { req.write(h) };
    Ok(())
}

/// The request-table entry of a body's outcome, its finishing work filed for Wait/Test
/// (also `MPI_Start` of a persistent collective, which files it under its own handle).
pub fn activate(o: Outcome, comm: MpiComm) -> MpiResult<ReqEntry> {
    let (posted, finish) = match o {
        Outcome::Pending(p, f) => (p, f),
        // Computed at the call: a request that completes at the next slice boundary.
        Outcome::Done => {
            // SAFETY: a barrier uses no buffer.
            let p = unsafe { api::post_unscoped(|| api::comm_self().barrier()) }?;
            (p, Box::new(|| Ok(())) as Finish)
        }
    };
    let id = posted.id();
    pending().insert(
        id,
        Pending {
            _posted: posted,
            finish,
        },
    );
    Ok(ReqEntry {
        id,
        comm,
        is_recv: false,
        send_tmp: None,
        unpack: None,
    })
}

/// The shared shape of every `MPI_I*` entry point: check the request pointer, run the
/// body nonblocking, hand back the request.
///
/// # Safety
/// `req` must be NULL or valid for writing one handle.
unsafe fn nonblocking(
    call: Call,
    comm: MpiComm,
    req: *mut MpiRequest,
    body: impl FnOnce() -> MpiResult<Outcome>,
) -> c_int {
    entry(call, comm, || {
        crate::env::ready()?;
        if req.is_null() {
            fail!(class::REQUEST, "request is NULL");
        }
        let o = body()?;
        // SAFETY: `req` is non-NULL and the caller's handle (MPI contract).
        unsafe { start(o, comm, req) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Ibarrier(comm: MpiComm, req: *mut MpiRequest) -> c_int {
    // SAFETY: `req` is the caller's request handle (MPI contract).
    unsafe {
        nonblocking(Call::Ibarrier, comm, req, || {
            coll::barrier(Mode::Nonblocking, comm)
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Ibcast(
    buf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    root: c_int,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    unsafe {
        nonblocking(Call::Ibcast, comm, req, || {
            coll::bcast(Mode::Nonblocking, buf, n, dt, root, comm)
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Ireduce(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    op: MpiOp,
    root: c_int,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    unsafe {
        nonblocking(Call::Ireduce, comm, req, || {
            reduce::reduce(Mode::Nonblocking, sbuf, rbuf, n, dt, op, root, comm)
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Iallreduce(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    op: MpiOp,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    unsafe {
        nonblocking(Call::Iallreduce, comm, req, || {
            reduce::allreduce(Mode::Nonblocking, sbuf, rbuf, n, dt, op, comm)
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Iscan(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    op: MpiOp,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    unsafe {
        nonblocking(Call::Iscan, comm, req, || {
            reduce::scan(Mode::Nonblocking, false, sbuf, rbuf, n, dt, op, comm)
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Iexscan(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    op: MpiOp,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    unsafe {
        nonblocking(Call::Iexscan, comm, req, || {
            reduce::scan(Mode::Nonblocking, true, sbuf, rbuf, n, dt, op, comm)
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Ireduce_scatter(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    rcounts: *const c_int,
    dt: MpiDatatype,
    op: MpiOp,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    unsafe {
        nonblocking(Call::IreduceScatter, comm, req, || {
            let counts = reduce::scatter_counts(comm, rcounts)?;
            reduce::reduce_scatter(Mode::Nonblocking, comm, sbuf, rbuf, &counts, dt, op, false)
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Ireduce_scatter_block(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    rn: c_int,
    dt: MpiDatatype,
    op: MpiOp,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    unsafe {
        nonblocking(Call::IreduceScatterBlock, comm, req, || {
            let n = reduce::local_size(comm)?;
            let k = crate::util::count(rn, "recvcount")?;
            reduce::reduce_scatter(
                Mode::Nonblocking,
                comm,
                sbuf,
                rbuf,
                &vec![k; n],
                dt,
                op,
                true,
            )
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Igather(
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    root: c_int,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    unsafe {
        nonblocking(Call::Igather, comm, req, || {
            coll::gather(Mode::Nonblocking, sbuf, sn, sdt, rbuf, rn, rdt, root, comm)
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Igatherv(
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rcounts: *const c_int,
    displs: *const c_int,
    rdt: MpiDatatype,
    root: c_int,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    unsafe {
        nonblocking(Call::Igatherv, comm, req, || {
            collv::gatherv(
                Mode::Nonblocking,
                sbuf,
                sn,
                sdt,
                rbuf,
                rcounts,
                displs,
                rdt,
                root,
                comm,
            )
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Iscatter(
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    root: c_int,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    unsafe {
        nonblocking(Call::Iscatter, comm, req, || {
            coll::scatter(Mode::Nonblocking, sbuf, sn, sdt, rbuf, rn, rdt, root, comm)
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Iscatterv(
    sbuf: *const c_void,
    scounts: *const c_int,
    displs: *const c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    root: c_int,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    unsafe {
        nonblocking(Call::Iscatterv, comm, req, || {
            collv::scatterv(
                Mode::Nonblocking,
                sbuf,
                scounts,
                displs,
                sdt,
                rbuf,
                rn,
                rdt,
                root,
                comm,
            )
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Iallgather(
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    unsafe {
        nonblocking(Call::Iallgather, comm, req, || {
            collv::allgather(Mode::Nonblocking, sbuf, sn, sdt, rbuf, rn, rdt, comm)
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Iallgatherv(
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rcounts: *const c_int,
    displs: *const c_int,
    rdt: MpiDatatype,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    unsafe {
        nonblocking(Call::Iallgatherv, comm, req, || {
            collv::allgatherv(
                Mode::Nonblocking,
                sbuf,
                sn,
                sdt,
                rbuf,
                rcounts,
                displs,
                rdt,
                comm,
            )
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Ialltoall(
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    unsafe {
        nonblocking(Call::Ialltoall, comm, req, || {
            collv::alltoall(Mode::Nonblocking, sbuf, sn, sdt, rbuf, rn, rdt, comm)
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Ialltoallv(
    sbuf: *const c_void,
    scounts: *const c_int,
    sdispls: *const c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rcounts: *const c_int,
    rdispls: *const c_int,
    rdt: MpiDatatype,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    unsafe {
        nonblocking(Call::Ialltoallv, comm, req, || {
            collv::alltoallv(
                Mode::Nonblocking,
                sbuf,
                scounts,
                sdispls,
                sdt,
                rbuf,
                rcounts,
                rdispls,
                rdt,
                comm,
            )
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Ialltoallw(
    sbuf: *const c_void,
    scounts: *const c_int,
    sdispls: *const c_int,
    stypes: *const MpiDatatype,
    rbuf: *mut c_void,
    rcounts: *const c_int,
    rdispls: *const c_int,
    rtypes: *const MpiDatatype,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    unsafe {
        nonblocking(Call::Ialltoallw, comm, req, || {
            crate::alltoallw::alltoallw(
                Mode::Nonblocking,
                sbuf,
                scounts,
                sdispls,
                stypes,
                rbuf,
                rcounts,
                rdispls,
                rtypes,
                comm,
            )
        })
    }
}
