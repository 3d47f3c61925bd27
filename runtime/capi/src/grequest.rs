//! Requests the C layer completes itself, without the runtime: generalized requests
//! (`MPI_Grequest_start`/`complete`, MPI-3.1 12.2) and requests complete at creation
//! (`MPI_Ibsend`, whose data is copied at once; `MPI_Imrecv` of `MPI_MESSAGE_NO_PROC`),
//! plus the status setters generalized requests need.
//!
//! Their completion is the program's own doing (`MPI_Grequest_complete`), so it is as
//! deterministic as the program: nothing here is timing-dependent or recorded.

use std::os::raw::{c_int, c_void};
use strobe_runtime::calls::{Call, Primitive};
use strobe_runtime::descriptor::{DescKind, Descriptor, COMPLETION_CANCELLED};
use strobe_runtime::rank::Want;

use crate::consts::*;
use crate::datatype::any_type;
use crate::error::{entry, fail, MpiErr, MpiResult};
use crate::request::empty_status;
use crate::state::{fresh_req, st};
use crate::util::put;

/// `MPI_Grequest_query_function`.
type QueryFn = unsafe extern "C" fn(*mut c_void, *mut MpiStatus) -> c_int;
/// `MPI_Grequest_free_function`.
type FreeFn = unsafe extern "C" fn(*mut c_void) -> c_int;
/// `MPI_Grequest_cancel_function`.
type CancelFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

pub struct Greq {
    query: Option<QueryFn>,
    free: Option<FreeFn>,
    cancel: Option<CancelFn>,
    extra: usize,
    complete: bool,
}

pub enum LocalReq {
    /// Complete since its creation, with this status. `bsend`: the runtime request of the
    /// buffered message it sent (`MPI_Ibsend`), which `MPI_Cancel` may still cancel.
    Done {
        status: MpiStatus,
        bsend: Option<u64>,
    },
    Greq(Greq),
}

impl LocalReq {
    /// The request of a buffered send whose message is runtime request `id`.
    pub fn bsend(id: u64) -> LocalReq {
        LocalReq::Done {
            status: empty_status(),
            bsend: Some(id),
        }
    }
}

fn insert_local(r: LocalReq) -> MpiRequest {
    let mut g = st();
    let h = fresh_req(&mut g);
    g.local_reqs.insert(h, r);
    h
}

/// Register a request that is already complete.
pub fn insert_done(status: MpiStatus) -> MpiRequest {
    insert_local(LocalReq::Done {
        status,
        bsend: None,
    })
}

/// Register the request of a buffered send (see [`LocalReq::bsend`]).
pub fn insert_bsend(id: u64) -> MpiRequest {
    insert_local(LocalReq::bsend(id))
}

/// Whether `h` is a local request.
pub fn is_local(h: MpiRequest) -> bool {
    st().local_reqs.contains_key(&h)
}

/// Whether local request `h` is complete.
pub fn is_done(h: MpiRequest) -> bool {
    match st().local_reqs.get(&h) {
        Some(LocalReq::Done { .. }) => true,
        Some(LocalReq::Greq(g)) => g.complete,
        None => false,
    }
}

/// Block until local request `h` is complete (a generalized request is completed by
/// the program, possibly from another thread).
pub fn wait_done(h: MpiRequest) {
    while !is_done(h) {
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

/// The status of complete local request `h`, without freeing it.
pub fn peek_status(h: MpiRequest) -> (MpiStatus, Option<MpiErr>) {
    let (query, extra) = match st().local_reqs.get(&h) {
        Some(LocalReq::Done { status, .. }) => return (*status, None),
        Some(LocalReq::Greq(g)) => (g.query, g.extra),
        None => return (empty_status(), None),
    };
    let mut s = empty_status();
    let err = match query {
        // SAFETY: the program's query function, called as MPI specifies, without our lock.
        Some(q) => match unsafe { q(extra as *mut c_void, &mut s) } {
            0 => None,
            e => Some(MpiErr::new(
                e,
                "the generalized request's query function failed",
            )),
        },
        None => None,
    };
    if let Some(e) = &err {
        s.error = e.class;
    }
    (s, err)
}

/// Consume complete local request `h`: its status (query function), then its free
/// function.
pub fn finish(h: MpiRequest) -> (MpiStatus, Option<MpiErr>) {
    let (s, err) = peek_status(h);
    let free_err = free_local(h);
    (s, err.or(free_err))
}

/// Remove local request `h`, calling a generalized request's free function.
pub fn free_local(h: MpiRequest) -> Option<MpiErr> {
    let r = {
        let mut s = st();
        let r = s.local_reqs.remove(&h);
        crate::state::forget_request(&mut s, h);
        r
    };
    if let Some(LocalReq::Greq(Greq {
        free: Some(f),
        extra,
        ..
    })) = r
    {
        // SAFETY: the program's free function, called once, without our lock.
        let e = unsafe { f(extra as *mut c_void) };
        if e != 0 {
            return Some(MpiErr::new(
                e,
                "the generalized request's free function failed",
            ));
        }
    }
    None
}

/// `MPI_Cancel` of a local request: a generalized request's cancel function, or the
/// cancellation of a buffered send's message.
pub fn cancel_local(h: MpiRequest) -> MpiResult {
    let (greq, bsend) = {
        let s = st();
        match s.local_reqs.get(&h) {
            Some(LocalReq::Greq(g)) => (Some((g.cancel, g.extra, g.complete)), None),
            Some(LocalReq::Done { bsend, .. }) => (None, *bsend),
            None => (None, None),
        }
    };
    if let Some(id) = bsend {
        return cancel_bsend(h, id);
    }
    let Some((cancel, extra, complete)) = greq else {
        return Ok(());
    };
    if let Some(c) = cancel {
        // SAFETY: the program's cancel function, called as MPI specifies, without our lock.
        let e = unsafe { c(extra as *mut c_void, complete as c_int) };
        if e != 0 {
            fail!(e, "the generalized request's cancel function failed");
        }
    }
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Grequest_start(
    query: Option<QueryFn>,
    free: Option<FreeFn>,
    cancel: Option<CancelFn>,
    extra: *mut c_void,
    req: *mut MpiRequest,
) -> c_int {
    entry(Call::GrequestStart, COMM_WORLD, || {
        if req.is_null() {
            fail!(class::ARG, "request is NULL");
        }
        let g = Greq {
            query,
            free,
            cancel,
            extra: extra as usize,
            complete: false,
        };
        let h = {
            let mut s = st();
            let h = fresh_req(&mut s);
            s.local_reqs.insert(h, LocalReq::Greq(g));
            h
        };
        // SAFETY: `req` is a C output argument, checked non-NULL above.
        unsafe { put(req, h, "request") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Grequest_complete(req: MpiRequest) -> c_int {
    entry(Call::GrequestComplete, COMM_WORLD, || {
        match st().local_reqs.get_mut(&req) {
            Some(LocalReq::Greq(g)) => g.complete = true,
            _ => fail!(class::REQUEST, "{req} is not a generalized request"),
        }
        Ok(())
    })
}

/// Check a status pointer a setter writes to.
fn status_mut<'a>(status: *mut MpiStatus) -> MpiResult<&'a mut MpiStatus> {
    if status.is_null() || status as usize == STATUS_IGNORE {
        fail!(class::ARG, "status is NULL or MPI_STATUS_IGNORE");
    }
    // SAFETY: non-null, not the ignore sentinel: the program's status (MPI contract).
    Ok(unsafe { &mut *status })
}

fn set_elements(status: *mut MpiStatus, dt: MpiDatatype, n: i64) -> MpiResult {
    let s = status_mut(status)?;
    let t = any_type(dt)?;
    if n < 0 {
        fail!(class::COUNT, "negative count {n}");
    }
    s.bytes = n.saturating_mul(t.size as i64);
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Status_set_elements(
    status: *mut MpiStatus,
    dt: MpiDatatype,
    n: c_int,
) -> c_int {
    entry(Call::StatusSetElements, COMM_WORLD, || {
        set_elements(status, dt, n as i64)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Status_set_elements_x(
    status: *mut MpiStatus,
    dt: MpiDatatype,
    n: i64,
) -> c_int {
    entry(Call::StatusSetElementsX, COMM_WORLD, || {
        set_elements(status, dt, n)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Status_set_cancelled(status: *mut MpiStatus, flag: c_int) -> c_int {
    entry(Call::StatusSetCancelled, COMM_WORLD, || {
        status_mut(status)?.cancelled = (flag != 0) as c_int;
        Ok(())
    })
}

/// Cancel the buffered message (runtime request `id`) of buffered-send request `h`. The
/// scheduler decides at the slice boundary whether it was still unmatched; its cancelled
/// completion, if any, is delivered with the Cancel's own, and `poll_completed` records
/// what this rank saw, so replay decides the same.
fn cancel_bsend(h: MpiRequest, id: u64) -> MpiResult {
    let c = crate::request::ctx()?;
    let d = Descriptor {
        kind: DescKind::Cancel as u8,
        aux: id,
        ..Default::default()
    };
    c.call(d);
    if c.poll_completed(Primitive::Cancel, &[id], Want::Any)
        .is_empty()
    {
        return Ok(());
    }
    let cancelled = c
        .peek(id)
        .is_some_and(|x| x.flags & COMPLETION_CANCELLED != 0);
    if cancelled {
        let mut g = st();
        if let Some(LocalReq::Done { status, .. }) = g.local_reqs.get_mut(&h) {
            status.cancelled = 1;
        }
        // The message is gone: its copy and its room in the attached buffer are free.
        if let Some(p) = g.bsends.iter().position(|e| e.id == id) {
            let e = g.bsends.remove(p);
            g.bsend_used = g
                .bsend_used
                .saturating_sub(e.send_tmp.as_ref().map_or(0, |t| t.len()) + BSEND_OVERHEAD);
            drop(g);
            c.take(id);
        }
    }
    Ok(())
}
