//! Matched probes (MPI-3.1 3.8.2): `MPI_Mprobe`, `MPI_Improbe`, `MPI_Mrecv`, `MPI_Imrecv`.
//!
//! A matched probe must take the message it reports out of the matching, so no other
//! receive can get it. strobe does it with what the scheduler already guarantees: the
//! probe reports the first unmatched message that fits (at a slice boundary, so the answer
//! is deterministic), and at once a receive for exactly that source and tag is posted into
//! a staging buffer of exactly its size. By non-overtaking, that receive takes the
//! reported message: an earlier message of the same source and tag would have been
//! reported instead, and an earlier pending receive of this rank that accepts the message
//! would have matched it before the probe saw it. `MPI_Mrecv`/`MPI_Imrecv` then wait for
//! that receive and unpack the staging buffer into the program's buffer and type.
//!
//! Deviation: a receive buffer too small for the message is reported by `MPI_Mrecv`/
//! `MPI_Imrecv` itself (`MPI_ERR_TRUNCATE`, the message is consumed), not by the Wait.

use std::os::raw::{c_int, c_void};
use strobe_runtime::api;
use strobe_runtime::calls::Call;

use crate::comm::comm_of;
use crate::consts::*;
use crate::datatype::comm_type;
use crate::error::{entry, fail, MpiResult};
use crate::p2p::{check_recv_tag, check_source};
use crate::request::{register, status_of, write_status, ReqEntry, Unpack};
use crate::state::st;
use crate::util::{count, put, Bytes};

/// `MPI_MESSAGE_NULL`.
pub const MESSAGE_NULL: c_int = 0;
/// `MPI_MESSAGE_NO_PROC`: the message of a probe of `MPI_PROC_NULL`.
pub const MESSAGE_NO_PROC: c_int = 1;
const FIRST_MESSAGE: c_int = 2;

/// A matched message: the receive posted for it and its staging buffer.
pub struct Message {
    id: u64,
    comm: MpiComm,
    tmp: Bytes,
}

/// The status a probe of `MPI_PROC_NULL` reports.
fn proc_null_status() -> MpiStatus {
    MpiStatus {
        source: PROC_NULL,
        tag: ANY_TAG,
        error: class::SUCCESS,
        cancelled: 0,
        bytes: 0,
    }
}

/// Take the probed message out of the matching: post a receive for it.
fn claim(c: &api::Comm, comm: MpiComm, s: &api::Status) -> MpiResult<c_int> {
    let mut tmp = Bytes::zeroed(s.bytes as usize);
    // SAFETY: `tmp` moves into the message table (its heap block does not move) and lives
    // until the receive completed (Mrecv/Imrecv hand it to the request).
    let id = unsafe { c.post_recv_unscoped(tmp.as_raw_mut(), s.source, s.tag)? };
    let mut g = st();
    let st = &mut *g;
    let mut h = st.next_message.max(FIRST_MESSAGE);
    while st.messages.contains_key(&h) {
        h = if h == c_int::MAX {
            FIRST_MESSAGE
        } else {
            h + 1
        };
    }
    st.next_message = h.checked_add(1).unwrap_or(FIRST_MESSAGE);
    st.messages.insert(h, Message { id, comm, tmp });
    Ok(h)
}

fn probe_args(src: c_int, tag: c_int, comm: MpiComm) -> MpiResult<api::Comm> {
    let c = comm_of(comm)?;
    check_source(&c, src)?;
    check_recv_tag(tag)?;
    Ok(c)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Mprobe(
    src: c_int,
    tag: c_int,
    comm: MpiComm,
    msg: *mut c_int,
    status: *mut MpiStatus,
) -> c_int {
    entry(Call::Mprobe, comm, || {
        let c = probe_args(src, tag, comm)?;
        if msg.is_null() {
            fail!(class::ARG, "message is NULL");
        }
        let (h, s) = if src == PROC_NULL {
            (MESSAGE_NO_PROC, proc_null_status())
        } else {
            let s = c.probe(src, tag)?;
            (claim(&c, comm, &s)?, status_of(&s))
        };
        // SAFETY: `status` is MPI_STATUS_IGNORE, NULL, or writable (MPI contract).
        unsafe { write_status(status, 0, s) };
        // SAFETY: `msg` is a C output argument, checked non-NULL above.
        unsafe { put(msg, h, "message") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Improbe(
    src: c_int,
    tag: c_int,
    comm: MpiComm,
    flag: *mut c_int,
    msg: *mut c_int,
    status: *mut MpiStatus,
) -> c_int {
    entry(Call::Improbe, comm, || {
        let c = probe_args(src, tag, comm)?;
        if msg.is_null() {
            fail!(class::ARG, "message is NULL");
        }
        let found = if src == PROC_NULL {
            Some((MESSAGE_NO_PROC, proc_null_status()))
        } else {
            match c.iprobe(src, tag)? {
                Some(s) => Some((claim(&c, comm, &s)?, status_of(&s))),
                None => None,
            }
        };
        let Some((h, s)) = found else {
            // SAFETY: `flag` is a C output argument: NULL or writable (MPI contract).
            return unsafe { put(flag, 0, "flag") };
        };
        // SAFETY: `status` is MPI_STATUS_IGNORE, NULL, or writable (MPI contract).
        unsafe { write_status(status, 0, s) };
        // SAFETY: `msg` is a C output argument, checked non-NULL above.
        unsafe { put(msg, h, "message") }?;
        // SAFETY: `flag` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(flag, 1, "flag") }
    })
}

/// `MPI_Imrecv`'s work: the request that delivers message `*msg` into `buf`.
///
/// # Safety
/// `msg` must be NULL or valid for reading and writing one handle; `buf` must hold `n`
/// writable elements of `dt`, untouched by the program until the request completes.
unsafe fn imrecv(
    buf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    msg: *mut c_int,
) -> MpiResult<MpiRequest> {
    if msg.is_null() {
        fail!(class::ARG, "message is NULL");
    }
    // SAFETY: non-null pointer to the caller's message handle.
    let h = unsafe { *msg };
    let n = count(n, "count")?;
    let ty = comm_type(dt)?;
    if h == MESSAGE_NO_PROC {
        // SAFETY: as above.
        unsafe { *msg = MESSAGE_NULL };
        return Ok(crate::grequest::insert_done(proc_null_status()));
    }
    let Some(m) = st().messages.remove(&h) else {
        fail!(class::REQUEST, "invalid message handle {h}");
    };
    // SAFETY: as above.
    unsafe { *msg = MESSAGE_NULL };
    let truncated = m.tmp.len() > n * ty.size;
    let e = ReqEntry {
        id: m.id,
        comm: m.comm,
        is_recv: true,
        send_tmp: None,
        unpack: Some(Unpack {
            tmp: m.tmp,
            base: buf as usize,
            count: n,
            ty,
        }),
    };
    let r = register(e);
    if truncated {
        // The receive still completes and frees its staging buffer in the background.
        let mut s = st();
        if let Some(mut e) = s.reqs.remove(&r) {
            e.unpack = None;
            s.detached.push(e);
        }
        crate::state::forget_request(&mut s, r);
        drop(s);
        fail!(
            class::TRUNCATE,
            "message truncated: the receive buffer holds {} bytes",
            n * comm_type(dt)?.size
        );
    }
    Ok(r)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Imrecv(
    buf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    msg: *mut c_int,
    req: *mut MpiRequest,
) -> c_int {
    entry(Call::Imrecv, message_comm(msg), || {
        if req.is_null() {
            fail!(class::ARG, "request is NULL");
        }
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        let r = unsafe { imrecv(buf, n, dt, msg) }?;
        // SAFETY: `req` is a C output argument, checked non-NULL above.
        unsafe { put(req, r, "request") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Mrecv(
    buf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    msg: *mut c_int,
    status: *mut MpiStatus,
) -> c_int {
    entry(Call::Mrecv, message_comm(msg), || {
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        let mut r = unsafe { imrecv(buf, n, dt, msg) }?;
        // SAFETY: `r` is a local handle; `status` is the caller's (MPI contract).
        unsafe { crate::request::wait_one(&mut r, status) }
    })
}

/// The communicator of message `*msg` (for the error handler).
fn message_comm(msg: *const c_int) -> MpiComm {
    if msg.is_null() {
        return COMM_WORLD;
    }
    // SAFETY: non-null pointer to the caller's message handle.
    let h = unsafe { *msg };
    st().messages.get(&h).map_or(COMM_WORLD, |m| m.comm)
}
