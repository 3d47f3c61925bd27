//! Persistent requests (MPI-3.1 3.9): `MPI_Send_init`, `Ssend_init`, `Rsend_init`,
//! `Bsend_init`, `Recv_init`, `MPI_Start`, `MPI_Startall`.
//!
//! A persistent request is a handle with its arguments ([`PersistSpec`]), created
//! *inactive*. `MPI_Start` posts the operation exactly as the non-blocking call would (so
//! the runtime, the recording and replay see an ordinary `Isend`/`Irecv` descriptor) and
//! files the runtime's request under the same handle: the request is *active*. The Wait or
//! Test that completes it makes it inactive again instead of freeing it (the handle stays),
//! and a Wait/Test on an inactive request returns at once with the empty status, as on
//! `MPI_REQUEST_NULL`. `MPI_Request_free` frees it (an active one completes in the
//! background, as any freed request).
//!
//! MPI-4's persistent collectives (`MPI_Bcast_init`, ...) are persistent requests of kind
//! [`PersistOp::Coll`] whose body is the nonblocking collective (pcoll.rs).

use std::os::raw::{c_int, c_void};
use std::sync::Arc;
use strobe_runtime::api::SendMode;
use strobe_runtime::calls::Call;

use crate::comm::comm_of;
use crate::consts::*;
use crate::datatype::{comm_type, TypeInfo};
use crate::error::{entry, fail, MpiResult};
use crate::p2p::{bsend_post, check_dest, check_recv_tag, check_send_tag, check_source};
use crate::p2p::{incoming, outgoing};
use crate::request::ReqEntry;
use crate::state::{fresh_req, st};
use crate::util::{count, put};

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum PersistOp {
    Send(SendMode),
    Bsend,
    Recv,
    /// An MPI-4 persistent collective (`MPI_Bcast_init`, ...): its body is
    /// [`PersistSpec::coll`] (pcoll.rs).
    Coll,
}

/// The arguments of a persistent request, checked at its creation.
#[derive(Clone)]
pub struct PersistSpec {
    pub op: PersistOp,
    pub buf: usize,
    pub count: usize,
    /// The type itself: the program may free `dt` while the request lives.
    pub ty: Arc<TypeInfo>,
    pub peer: c_int,
    pub tag: c_int,
    pub comm: MpiComm,
    /// The collective a persistent collective's `MPI_Start` posts (pcoll.rs).
    pub coll: Option<crate::pcoll::CollBody>,
}

/// Whether `h` is a persistent request (active or not).
pub fn is_persistent(h: MpiRequest) -> bool {
    st().persist.contains_key(&h)
}

/// `MPI_Request_free` of persistent request `h`: forget its arguments; an active one
/// completes in the background (a runtime request moves to the detached list).
pub fn free(h: MpiRequest) {
    let mut s = st();
    s.persist.remove(&h);
    s.local_reqs.remove(&h);
    if let Some(e) = s.reqs.remove(&h) {
        s.detached.push(e);
    }
    crate::state::forget_request(&mut s, h);
}

/// The communicator of persistent request `h` (for its error handler).
pub fn comm_of_persistent(h: MpiRequest) -> Option<MpiComm> {
    st().persist.get(&h).map(|p| p.comm)
}

fn create(
    op: PersistOp,
    buf: *const c_void,
    n: c_int,
    dt: MpiDatatype,
    peer: c_int,
    tag: c_int,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> MpiResult {
    if req.is_null() {
        fail!(class::ARG, "request is NULL");
    }
    let c = comm_of(comm)?;
    let n = count(n, "count")?;
    let ty = comm_type(dt)?;
    if op == PersistOp::Recv {
        check_source(&c, peer)?;
        check_recv_tag(tag)?;
    } else {
        check_dest(&c, peer)?;
        check_send_tag(tag)?;
    }
    let spec = PersistSpec {
        op,
        buf: buf as usize,
        count: n,
        ty,
        peer,
        tag,
        comm,
        coll: None,
    };
    let h = {
        let mut s = st();
        let h = fresh_req(&mut s);
        s.persist.insert(h, spec);
        h
    };
    // SAFETY: `req` is a C output argument, checked non-NULL above.
    unsafe { put(req, h, "request") }
}

/// `MPI_Start` of `h`: post its operation and file the runtime's request under `h`.
fn start(h: MpiRequest) -> MpiResult {
    let spec = {
        let s = st();
        let Some(spec) = s.persist.get(&h).cloned() else {
            fail!(class::REQUEST, "{h} is not a persistent request");
        };
        if s.reqs.contains_key(&h) || s.local_reqs.contains_key(&h) {
            fail!(class::REQUEST, "persistent request {h} is already active");
        }
        spec
    };
    let c = comm_of(spec.comm)?;
    let (ptr, n, peer, tag) = (spec.buf as *mut c_void, spec.count, spec.peer, spec.tag);
    let entry = match spec.op {
        PersistOp::Coll => match &spec.coll {
            Some(body) => crate::icoll::activate(body()?, spec.comm)?,
            None => fail!(class::INTERN, "persistent collective {h} has no body"),
        },
        PersistOp::Bsend => {
            // SAFETY: the buffer given to MPI_Bsend_init, valid while the request lives
            // (MPI contract); it is copied at once.
            let id = unsafe { bsend_post(&c, spec.comm, ptr, n, &spec.ty, peer, tag) }?;
            st().local_reqs
                .insert(h, crate::grequest::LocalReq::bsend(id));
            return Ok(());
        }
        PersistOp::Send(mode) => {
            // SAFETY: the buffer given to MPI_*send_init, valid and unmodified until the
            // request completes (MPI contract); a packed copy moves into the table.
            let data = unsafe { outgoing(ptr, n, &spec.ty) }?;
            // SAFETY: as above: the memory outlives the request.
            let id = unsafe { c.post_send_unscoped(mode, data.bytes(), peer, tag)? };
            ReqEntry {
                id,
                comm: spec.comm,
                is_recv: false,
                send_tmp: data.into_tmp(),
                unpack: None,
            }
        }
        PersistOp::Recv => {
            // SAFETY: the buffer given to MPI_Recv_init, untouched by the program until the
            // request completes (MPI contract).
            let mut into = unsafe { incoming(ptr, n, &spec.ty) }?;
            // SAFETY: as above; a staging buffer moves into the table with `into`.
            let id = unsafe { c.post_recv_unscoped(into.bytes(), peer, tag)? };
            ReqEntry {
                id,
                comm: spec.comm,
                is_recv: true,
                send_tmp: None,
                unpack: into.into_unpack(),
            }
        }
    };
    st().reqs.insert(h, entry);
    Ok(())
}

macro_rules! init_fn {
    ($name:ident, $call:ident, $op:expr, $buf:ty) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            buf: $buf,
            n: c_int,
            dt: MpiDatatype,
            peer: c_int,
            tag: c_int,
            comm: MpiComm,
            req: *mut MpiRequest,
        ) -> c_int {
            entry(Call::$call, comm, || {
                create($op, buf as *const c_void, n, dt, peer, tag, comm, req)
            })
        }
    };
}

init_fn!(
    PMPI_Send_init,
    SendInit,
    PersistOp::Send(SendMode::Standard),
    *const c_void
);
init_fn!(
    PMPI_Ssend_init,
    SsendInit,
    PersistOp::Send(SendMode::Synchronous),
    *const c_void
);
init_fn!(
    PMPI_Rsend_init,
    RsendInit,
    PersistOp::Send(SendMode::Ready),
    *const c_void
);
init_fn!(PMPI_Bsend_init, BsendInit, PersistOp::Bsend, *const c_void);
init_fn!(PMPI_Recv_init, RecvInit, PersistOp::Recv, *mut c_void);

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Start(req: *mut MpiRequest) -> c_int {
    let h = if req.is_null() {
        REQUEST_NULL
    } else {
        // SAFETY: non-null pointer to the caller's request handle.
        unsafe { *req }
    };
    let comm = comm_of_persistent(h).unwrap_or(COMM_WORLD);
    entry(Call::Start, comm, || {
        if req.is_null() {
            fail!(class::ARG, "request is NULL");
        }
        start(h)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Startall(n: c_int, reqs: *mut MpiRequest) -> c_int {
    entry(Call::Startall, COMM_WORLD, || {
        let n = count(n, "count")?;
        if n > 0 && reqs.is_null() {
            fail!(class::ARG, "array_of_requests is NULL");
        }
        for i in 0..n {
            // SAFETY: MPI requires the array to hold `n` handles.
            start(unsafe { *reqs.add(i) })?;
        }
        Ok(())
    })
}
