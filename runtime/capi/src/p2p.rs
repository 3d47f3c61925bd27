//! Point-to-point: Send/Ssend/Rsend/Bsend, Recv, the non-blocking variants, Sendrecv,
//! Probe and Iprobe. Blocking calls use the Rust API's blocking calls (so deadlock
//! reports name them); non-blocking calls register their request with the C table.

use std::os::raw::{c_int, c_void};
use std::sync::Arc;
use strobe_runtime::calls::Call;

use strobe_runtime::api::{Comm, SendMode};

use crate::comm::comm_of;
use crate::consts::*;
use crate::datatype::{comm_type, TypeInfo};
use crate::error::{entry, fail, MpiResult};
use crate::request::{register, status_of, write_status, ReqEntry, Unpack};
use crate::state::st;
use crate::util::{count, put, raw_bytes, raw_bytes_mut, Bytes, RawByte};

/// Outgoing data: the user's buffer itself (contiguous types) or a packed copy.
pub enum Outgoing {
    Borrowed(&'static [RawByte]),
    Packed(Bytes),
}

impl Outgoing {
    pub fn bytes(&self) -> &[RawByte] {
        match self {
            Outgoing::Borrowed(b) => b,
            Outgoing::Packed(p) => p.as_raw(),
        }
    }
    pub fn into_tmp(self) -> Option<Bytes> {
        match self {
            Outgoing::Borrowed(_) => None,
            Outgoing::Packed(p) => Some(p),
        }
    }
}

/// `count` elements of `ty` at `buf`, ready to hand to the runtime.
///
/// # Safety
/// `buf` must be NULL, `MPI_IN_PLACE` or hold `n` readable elements of `ty` that stay valid
/// and unmodified for as long as the result (which may borrow them) is used, including by
/// a non-blocking operation until it completes.
pub unsafe fn outgoing(buf: *const c_void, n: usize, ty: &TypeInfo) -> MpiResult<Outgoing> {
    if crate::util::in_place(buf) {
        fail!(class::BUFFER, "MPI_IN_PLACE is not allowed here");
    }
    if buf.is_null() && n > 0 && ty.size > 0 && ty.true_lb == 0 && ty.lb == 0 {
        fail!(class::BUFFER, "buffer is NULL but count is {n}");
    }
    if ty.dense_for(n) {
        // SAFETY: MPI's contract: `buf` holds `n` elements and is not modified until the
        // operation completes.
        Ok(Outgoing::Borrowed(unsafe {
            raw_bytes(buf as *const u8, n * ty.size)
        }))
    } else {
        // SAFETY: as above.
        Ok(Outgoing::Packed(unsafe { ty.pack(buf as *const u8, n) }))
    }
}

/// Incoming data: the user's buffer itself or a temporary to unpack from.
pub enum Incoming {
    Direct(&'static mut [RawByte]),
    Staged(Unpack),
}

/// A receive buffer of `n` elements of `ty` at `buf`, ready to hand to the runtime.
///
/// # Safety
/// `buf` must be NULL, `MPI_IN_PLACE` or hold `n` writable elements of `ty` that stay valid,
/// and are accessed by no one else, for as long as the result is used (until
/// [`Incoming::finish`], or the completion of a non-blocking operation).
pub unsafe fn incoming(buf: *mut c_void, n: usize, ty: &Arc<TypeInfo>) -> MpiResult<Incoming> {
    if crate::util::in_place(buf) {
        fail!(class::BUFFER, "MPI_IN_PLACE is not allowed here");
    }
    if buf.is_null() && n > 0 && ty.size > 0 && ty.true_lb == 0 && ty.lb == 0 {
        fail!(class::BUFFER, "buffer is NULL but count is {n}");
    }
    if ty.dense_for(n) {
        // SAFETY: MPI's contract: `buf` holds `n` writable elements, untouched until the
        // operation completes.
        Ok(Incoming::Direct(unsafe {
            raw_bytes_mut(buf as *mut u8, n * ty.size)
        }))
    } else {
        Ok(Incoming::Staged(Unpack {
            tmp: Bytes::zeroed(n * ty.size),
            base: buf as usize,
            count: n,
            ty: ty.clone(),
        }))
    }
}

impl Incoming {
    pub fn bytes(&mut self) -> &mut [RawByte] {
        match self {
            Incoming::Direct(b) => b,
            Incoming::Staged(u) => u.tmp.as_raw_mut(),
        }
    }
    /// Copy staged data into the user's buffer (`bytes` received).
    pub fn finish(self, bytes: usize) {
        if let Incoming::Staged(u) = self {
            // SAFETY: the user's buffer holds `count` elements (MPI contract).
            unsafe {
                u.ty.unpack(u.tmp.as_slice(), bytes, u.base as *mut u8, u.count)
            };
        }
    }
    pub fn into_unpack(self) -> Option<Unpack> {
        match self {
            Incoming::Direct(_) => None,
            Incoming::Staged(u) => Some(u),
        }
    }
}

pub fn check_dest(c: &Comm, dest: c_int) -> MpiResult {
    if dest == PROC_NULL || (0..c.size()).contains(&dest) {
        return Ok(());
    }
    fail!(
        class::RANK,
        "invalid rank {dest} (communicator of size {})",
        c.size()
    )
}

pub fn check_source(c: &Comm, src: c_int) -> MpiResult {
    if src == ANY_SOURCE {
        return Ok(());
    }
    check_dest(c, src)
}

pub fn check_send_tag(tag: c_int) -> MpiResult {
    if tag < 0 {
        fail!(
            class::TAG,
            "invalid tag {tag} (send tags are 0..=MPI_TAG_UB)"
        );
    }
    Ok(())
}

pub fn check_recv_tag(tag: c_int) -> MpiResult {
    if tag < 0 && tag != ANY_TAG {
        fail!(
            class::TAG,
            "invalid tag {tag} (receive tags are MPI_ANY_TAG or 0..=MPI_TAG_UB)"
        );
    }
    Ok(())
}

/// Checked arguments of a send.
///
/// # Safety
/// `buf` must be NULL, or hold `n` elements of `dt` valid and unmodified until the send completes (MPI's rule for send buffers).
unsafe fn send_args(
    buf: *const c_void,
    n: c_int,
    dt: MpiDatatype,
    dest: c_int,
    tag: c_int,
    comm: MpiComm,
) -> MpiResult<(Comm, Outgoing)> {
    let c = comm_of(comm)?;
    let n = count(n, "count")?;
    let ty = comm_type(dt)?;
    check_dest(&c, dest)?;
    check_send_tag(tag)?;
    strobe_runtime::checks::set_send_sig(ty.sig, n as u64);
    // SAFETY: `buf` is a C send buffer of the given count and type, valid until the operation
    // completes (MPI contract).
    Ok((c, unsafe { outgoing(buf, n, &ty) }?))
}

/// # Safety
/// As [`send_args`].
unsafe fn blocking_send(
    mode: SendMode,
    buf: *const c_void,
    n: c_int,
    dt: MpiDatatype,
    dest: c_int,
    tag: c_int,
    comm: MpiComm,
) -> MpiResult {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    let (c, data) = unsafe { send_args(buf, n, dt, dest, tag, comm) }?;
    let b = data.bytes();
    match mode {
        SendMode::Standard => c.send(b, dest, tag)?,
        SendMode::Synchronous => c.ssend(b, dest, tag)?,
        SendMode::Ready => c.rsend(b, dest, tag)?,
    }
    drop(data);
    Ok(())
}

/// # Safety
/// As [`send_args`]: the send buffer stays valid and unmodified until the request completes.
unsafe fn post_send(
    mode: SendMode,
    buf: *const c_void,
    n: c_int,
    dt: MpiDatatype,
    dest: c_int,
    tag: c_int,
    comm: MpiComm,
) -> MpiResult<ReqEntry> {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    let (c, data) = unsafe { send_args(buf, n, dt, dest, tag, comm) }?;
    // SAFETY: the memory stays valid until the request completes: a packed copy moves
    // into the request table below (its heap block does not move) and is freed only once
    // the request completed; the user's own buffer is MPI's contract (not to be freed or
    // modified until the request completes).
    let id = unsafe { c.post_send_unscoped(mode, data.bytes(), dest, tag)? };
    Ok(ReqEntry {
        id,
        comm,
        is_recv: false,
        send_tmp: data.into_tmp(),
        unpack: None,
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Send(
    buf: *const c_void,
    n: c_int,
    dt: MpiDatatype,
    dest: c_int,
    tag: c_int,
    comm: MpiComm,
) -> c_int {
    entry(Call::Send, comm, || {
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        unsafe { blocking_send(SendMode::Standard, buf, n, dt, dest, tag, comm) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Ssend(
    buf: *const c_void,
    n: c_int,
    dt: MpiDatatype,
    dest: c_int,
    tag: c_int,
    comm: MpiComm,
) -> c_int {
    entry(Call::Ssend, comm, || {
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        unsafe { blocking_send(SendMode::Synchronous, buf, n, dt, dest, tag, comm) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Rsend(
    buf: *const c_void,
    n: c_int,
    dt: MpiDatatype,
    dest: c_int,
    tag: c_int,
    comm: MpiComm,
) -> c_int {
    entry(Call::Rsend, comm, || {
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        unsafe { blocking_send(SendMode::Ready, buf, n, dt, dest, tag, comm) }
    })
}

/// # Safety
/// As [`post_send`]; `req` must be NULL or valid for writing one handle.
unsafe fn isend_like(
    call: Call,
    mode: SendMode,
    buf: *const c_void,
    n: c_int,
    dt: MpiDatatype,
    dest: c_int,
    tag: c_int,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    entry(call, comm, || {
        if req.is_null() {
            fail!(class::ARG, "request is NULL");
        }
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        let e = unsafe { post_send(mode, buf, n, dt, dest, tag, comm) }?;
        // SAFETY: `req` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(req, register(e), "request") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Isend(
    buf: *const c_void,
    n: c_int,
    dt: MpiDatatype,
    dest: c_int,
    tag: c_int,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    unsafe {
        isend_like(
            Call::Isend,
            SendMode::Standard,
            buf,
            n,
            dt,
            dest,
            tag,
            comm,
            req,
        )
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Issend(
    buf: *const c_void,
    n: c_int,
    dt: MpiDatatype,
    dest: c_int,
    tag: c_int,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    unsafe {
        isend_like(
            Call::Issend,
            SendMode::Synchronous,
            buf,
            n,
            dt,
            dest,
            tag,
            comm,
            req,
        )
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Irsend(
    buf: *const c_void,
    n: c_int,
    dt: MpiDatatype,
    dest: c_int,
    tag: c_int,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    unsafe {
        isend_like(
            Call::Irsend,
            SendMode::Ready,
            buf,
            n,
            dt,
            dest,
            tag,
            comm,
            req,
        )
    }
}

/// Post a buffered send of `n` elements of `ty` at `buf`: the data is copied at once, so
/// the call returns without waiting for the receiver. The attached buffer's size is
/// enforced (`MPI_ERR_BUFFER` if the message cannot fit even in an empty buffer); when
/// earlier buffered sends still hold the space, it first waits for them to be delivered
/// (deviation: MPI would return an error).
///
/// # Safety
/// `buf` must be NULL or hold `n` readable elements of `ty` (read before returning).
pub unsafe fn bsend_post(
    c: &Comm,
    comm: MpiComm,
    buf: *const c_void,
    n: usize,
    ty: &TypeInfo,
    dest: c_int,
    tag: c_int,
) -> MpiResult<u64> {
    // SAFETY: `buf` holds `n` elements of `ty` (this function's contract); `data` is
    // dropped before returning.
    let data = unsafe { outgoing(buf, n, ty) }?;
    let Some((_, cap)) = st().bsend_buffer else {
        fail!(
            class::BUFFER,
            "no buffer attached (call MPI_Buffer_attach first)"
        );
    };
    let need = data.bytes().len() + BSEND_OVERHEAD;
    if need > cap {
        fail!(class::BUFFER, "message of {} bytes (+{BSEND_OVERHEAD} overhead) does not fit the attached buffer of {cap} bytes", need - BSEND_OVERHEAD);
    }
    if st().bsend_used + need > cap {
        crate::request::reap_bsends();
    }
    let copy = copy_of(data.bytes());
    // SAFETY: `copy` moves into `bsends` below (its heap block does not move) and is
    // freed only once the request completed (`reap_bsends`, `MPI_Buffer_detach`,
    // `MPI_Finalize`).
    let id = unsafe { c.post_send_unscoped(SendMode::Standard, copy.as_raw(), dest, tag)? };
    let mut s = st();
    s.bsend_used += need;
    s.bsends.push(ReqEntry {
        id,
        comm,
        is_recv: false,
        send_tmp: Some(copy),
        unpack: None,
    });
    Ok(id)
}

/// A private copy of outgoing bytes.
fn copy_of(src: &[RawByte]) -> Bytes {
    let mut copy = Bytes::zeroed(src.len());
    // SAFETY: RawByte is a transparent u8; both buffers hold src.len() bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr() as *const u8, copy.as_mut_ptr(), src.len())
    };
    copy
}

/// `MPI_Bsend`: see [`bsend_post`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Bsend(
    buf: *const c_void,
    n: c_int,
    dt: MpiDatatype,
    dest: c_int,
    tag: c_int,
    comm: MpiComm,
) -> c_int {
    entry(Call::Bsend, comm, || {
        let (c, n, ty) = bsend_args(n, dt, dest, tag, comm)?;
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        unsafe { bsend_post(&c, comm, buf, n, &ty, dest, tag) }?;
        Ok(())
    })
}

fn bsend_args(
    n: c_int,
    dt: MpiDatatype,
    dest: c_int,
    tag: c_int,
    comm: MpiComm,
) -> MpiResult<(Comm, usize, Arc<TypeInfo>)> {
    let c = comm_of(comm)?;
    let n = count(n, "count")?;
    let ty = comm_type(dt)?;
    check_dest(&c, dest)?;
    check_send_tag(tag)?;
    Ok((c, n, ty))
}

/// `MPI_Ibsend`: the data is copied at once (as `MPI_Bsend`), so the request is complete
/// from the start; `MPI_Cancel` can still cancel the buffered message while it is
/// unmatched (see `grequest::cancel_local`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Ibsend(
    buf: *const c_void,
    n: c_int,
    dt: MpiDatatype,
    dest: c_int,
    tag: c_int,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    entry(Call::Ibsend, comm, || {
        if req.is_null() {
            fail!(class::ARG, "request is NULL");
        }
        let (c, n, ty) = bsend_args(n, dt, dest, tag, comm)?;
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        let id = unsafe { bsend_post(&c, comm, buf, n, &ty, dest, tag) }?;
        let h = crate::grequest::insert_bsend(id);
        // SAFETY: `req` is a C output argument, checked non-NULL above.
        unsafe { put(req, h, "request") }
    })
}

/// Post a send of a private copy of the data, completing in the background (its copy
/// lives in the detached list until it is delivered): what `MPI_Isendrecv` needs, whose
/// one request is the receive's.
fn post_detached_send(
    c: &Comm,
    comm: MpiComm,
    data: &[RawByte],
    dest: c_int,
    tag: c_int,
) -> MpiResult {
    let copy = copy_of(data);
    // SAFETY: `copy` moves into the detached list (its heap block does not move), reaped
    // only once the send completed.
    let id = unsafe { c.post_send_unscoped(SendMode::Standard, copy.as_raw(), dest, tag)? };
    st().detached.push(ReqEntry {
        id,
        comm,
        is_recv: false,
        send_tmp: Some(copy),
        unpack: None,
    });
    Ok(())
}

/// `MPI_Isendrecv`: the send goes out from a private copy (so the send buffer is free as
/// soon as the call returns) and the request is the receive's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Isendrecv(
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    dest: c_int,
    stag: c_int,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    src: c_int,
    rtag: c_int,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    entry(Call::Isendrecv, comm, || {
        if req.is_null() {
            fail!(class::ARG, "request is NULL");
        }
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        let (c, data) = unsafe { send_args(sbuf, sn, sdt, dest, stag, comm) }?;
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        let (_, mut into) = unsafe { recv_args(rbuf, rn, rdt, src, rtag, comm) }?;
        // SAFETY: as in MPI_Irecv.
        let id = unsafe { c.post_recv_unscoped(into.bytes(), src, rtag)? };
        post_detached_send(&c, comm, data.bytes(), dest, stag)?;
        let e = ReqEntry {
            id,
            comm,
            is_recv: true,
            send_tmp: None,
            unpack: into.into_unpack(),
        };
        // SAFETY: `req` is a C output argument, checked non-NULL above.
        unsafe { put(req, register(e), "request") }
    })
}

/// `MPI_Isendrecv_replace`: the outgoing data is copied at once, then the same buffer
/// receives.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Isendrecv_replace(
    buf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    dest: c_int,
    stag: c_int,
    src: c_int,
    rtag: c_int,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    entry(Call::IsendrecvReplace, comm, || {
        if req.is_null() {
            fail!(class::ARG, "request is NULL");
        }
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        let (c, data) = unsafe { send_args(buf, n, dt, dest, stag, comm) }?;
        let copy = copy_of(data.bytes());
        drop(data);
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        let (_, mut into) = unsafe { recv_args(buf, n, dt, src, rtag, comm) }?;
        // SAFETY: as in MPI_Irecv.
        let id = unsafe { c.post_recv_unscoped(into.bytes(), src, rtag)? };
        post_detached_send(&c, comm, copy.as_raw(), dest, stag)?;
        let e = ReqEntry {
            id,
            comm,
            is_recv: true,
            send_tmp: None,
            unpack: into.into_unpack(),
        };
        // SAFETY: `req` is a C output argument, checked non-NULL above.
        unsafe { put(req, register(e), "request") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Buffer_attach(buf: *mut c_void, size: c_int) -> c_int {
    entry(Call::BufferAttach, COMM_WORLD, || {
        let size = count(size, "size")?;
        let mut s = st();
        if s.bsend_buffer.is_some() {
            fail!(
                class::BUFFER,
                "a buffer is already attached (MPI_Buffer_detach it first)"
            );
        }
        s.bsend_buffer = Some((buf as usize, size));
        Ok(())
    })
}

/// `MPI_Buffer_detach` blocks until every buffered message has been delivered.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Buffer_detach(addr: *mut c_void, size: *mut c_int) -> c_int {
    entry(Call::BufferDetach, COMM_WORLD, || {
        crate::request::reap_bsends();
        let (a, n) = st().bsend_buffer.take().unwrap_or((0, 0));
        // SAFETY: `addr as *mut *mut c_void` is a C output argument: NULL or writable (MPI
        // contract).
        unsafe { put(addr as *mut *mut c_void, a as *mut c_void, "buffer_addr") }?;
        // SAFETY: `size` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(size, n as c_int, "size") }
    })
}

/// # Safety
/// `buf` must be NULL, or hold `n` writable elements of `dt` that nobody else accesses until the receive completes (MPI's rule for receive buffers).
unsafe fn recv_args(
    buf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    src: c_int,
    tag: c_int,
    comm: MpiComm,
) -> MpiResult<(Comm, Incoming)> {
    let c = comm_of(comm)?;
    let n = count(n, "count")?;
    let ty = comm_type(dt)?;
    check_source(&c, src)?;
    check_recv_tag(tag)?;
    strobe_runtime::checks::set_recv_sig(ty.sig, n as u64);
    // SAFETY: `buf` is a C receive buffer of the given count and type, untouched until the
    // operation completes (MPI contract).
    Ok((c, unsafe { incoming(buf, n, &ty) }?))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Recv(
    buf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    src: c_int,
    tag: c_int,
    comm: MpiComm,
    status: *mut MpiStatus,
) -> c_int {
    entry(Call::Recv, comm, || {
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        let (c, mut into) = unsafe { recv_args(buf, n, dt, src, tag, comm) }?;
        let s = c.recv(into.bytes(), src, tag)?;
        into.finish(s.bytes as usize);
        // SAFETY: `status` is MPI_STATUS(ES)_IGNORE, NULL, or has an entry per request (MPI
        // contract).
        unsafe { write_status(status, 0, status_of(&s)) };
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Irecv(
    buf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    src: c_int,
    tag: c_int,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    entry(Call::Irecv, comm, || {
        if req.is_null() {
            fail!(class::ARG, "request is NULL");
        }
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        let (c, mut into) = unsafe { recv_args(buf, n, dt, src, tag, comm) }?;
        // SAFETY: a staging buffer moves into the request table with `into` (its heap block
        // does not move) and is unpacked and freed at completion; the user's own buffer is
        // MPI's contract (not to be accessed until the request completes).
        let id = unsafe { c.post_recv_unscoped(into.bytes(), src, tag)? };
        let e = ReqEntry {
            id,
            comm,
            is_recv: true,
            send_tmp: None,
            unpack: into.into_unpack(),
        };
        // SAFETY: `req` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(req, register(e), "request") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Sendrecv(
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    dest: c_int,
    stag: c_int,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    src: c_int,
    rtag: c_int,
    comm: MpiComm,
    status: *mut MpiStatus,
) -> c_int {
    entry(Call::Sendrecv, comm, || {
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        let (c, data) = unsafe { send_args(sbuf, sn, sdt, dest, stag, comm) }?;
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        let (_, mut into) = unsafe { recv_args(rbuf, rn, rdt, src, rtag, comm) }?;
        let s = c.sendrecv(data.bytes(), dest, stag, into.bytes(), src, rtag)?;
        drop(data);
        into.finish(s.bytes as usize);
        // SAFETY: `status` is MPI_STATUS(ES)_IGNORE, NULL, or has an entry per request (MPI
        // contract).
        unsafe { write_status(status, 0, status_of(&s)) };
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Sendrecv_replace(
    buf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    dest: c_int,
    stag: c_int,
    src: c_int,
    rtag: c_int,
    comm: MpiComm,
    status: *mut MpiStatus,
) -> c_int {
    entry(Call::SendrecvReplace, comm, || {
        let c = comm_of(comm)?;
        let k = count(n, "count")?;
        let ty = comm_type(dt)?;
        check_dest(&c, dest)?;
        check_send_tag(stag)?;
        // The outgoing data is always copied: the same buffer receives.
        // SAFETY: MPI's contract: `buf` holds `n` elements of `dt`.
        let copy = unsafe { ty.pack(buf as *const u8, k) };
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        let (_, mut into) = unsafe { recv_args(buf, n, dt, src, rtag, comm) }?;
        let s = c.sendrecv(copy.as_raw(), dest, stag, into.bytes(), src, rtag)?;
        drop(copy);
        into.finish(s.bytes as usize);
        // SAFETY: `status` is MPI_STATUS(ES)_IGNORE, NULL, or has an entry per request (MPI
        // contract).
        unsafe { write_status(status, 0, status_of(&s)) };
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Probe(
    src: c_int,
    tag: c_int,
    comm: MpiComm,
    status: *mut MpiStatus,
) -> c_int {
    entry(Call::Probe, comm, || {
        let c = comm_of(comm)?;
        check_source(&c, src)?;
        check_recv_tag(tag)?;
        let s = c.probe(src, tag)?;
        // SAFETY: `status` is MPI_STATUS(ES)_IGNORE, NULL, or has an entry per request (MPI
        // contract).
        unsafe { write_status(status, 0, status_of(&s)) };
        Ok(())
    })
}

/// `MPI_Iprobe` is answered at the next slice boundary, from the scheduler's view, so its
/// outcome is deterministic.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Iprobe(
    src: c_int,
    tag: c_int,
    comm: MpiComm,
    flag: *mut c_int,
    status: *mut MpiStatus,
) -> c_int {
    entry(Call::Iprobe, comm, || {
        let c = comm_of(comm)?;
        check_source(&c, src)?;
        check_recv_tag(tag)?;
        match c.iprobe(src, tag)? {
            Some(s) => {
                // SAFETY: `status` is MPI_STATUS(ES)_IGNORE, NULL, or has an entry per request (MPI
                // contract).
                unsafe { write_status(status, 0, status_of(&s)) };
                // SAFETY: `flag` is a C output argument: NULL or writable (MPI contract).
                unsafe { put(flag, 1, "flag") }
            }
            // SAFETY: `flag` is a C output argument: NULL or writable (MPI contract).
            None => unsafe { put(flag, 0, "flag") },
        }
    })
}
