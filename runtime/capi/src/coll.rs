//! Data-movement collectives: Barrier, Bcast, Gather, Scatter (the v-variants and the
//! all-to-all family are in `collv.rs`). Data travels as bytes (`ElemType::Byte`);
//! non-contiguous datatypes are packed before and unpacked after the runtime's
//! collective. Each body runs in a [`Mode`]: blocking, or nonblocking (`icoll.rs`).

use std::os::raw::{c_int, c_void};
use std::sync::Arc;
use strobe_runtime::calls::Call;

use strobe_runtime::api::Comm;

use crate::comm::comm_of;
use crate::consts::*;
use crate::datatype::{comm_type, TypeInfo};
use crate::error::{entry, fail, MpiResult};
use crate::icoll::{run, then, Mode, Outcome};
use crate::intercoll;
use crate::intercomm::inter_of;
use crate::p2p::{incoming, outgoing, Outgoing};
use crate::util::{count, in_place, Bytes};

pub fn check_root(c: &Comm, root: c_int) -> MpiResult {
    if (0..c.size()).contains(&root) {
        return Ok(());
    }
    fail!(
        class::ROOT,
        "invalid root {root} (communicator of size {})",
        c.size()
    )
}

pub fn barrier(mode: Mode, comm: MpiComm) -> MpiResult<Outcome> {
    if let Some(x) = inter_of(comm) {
        return intercoll::barrier(mode, &x);
    }
    let c = comm_of(comm)?;
    then(run(mode, || c.barrier())?, || Ok(()))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Barrier(comm: MpiComm) -> c_int {
    entry(Call::Barrier, comm, || {
        barrier(Mode::Blocking, comm).map(drop)
    })
}

/// # Safety
/// `buf` holds `n` elements of `dt` (MPI's rules for `MPI_Bcast`), until completion.
pub unsafe fn bcast(
    mode: Mode,
    buf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    root: c_int,
    comm: MpiComm,
) -> MpiResult<Outcome> {
    if let Some(x) = inter_of(comm) {
        // SAFETY: this function's contract.
        return unsafe { intercoll::bcast(&x, buf, n, dt, root) };
    }
    let c = comm_of(comm)?;
    let k = count(n, "count")?;
    let ty = comm_type(dt)?;
    check_root(&c, root)?;
    // SAFETY: `buf` is a C receive buffer of the given count and type, untouched until the
    // operation completes (MPI contract).
    let mut into = unsafe { incoming(buf, k, &ty) }?;
    if let crate::p2p::Incoming::Staged(u) = &mut into {
        if c.rank() == root {
            // SAFETY: the root's buffer holds `k` elements of `ty` (MPI contract).
            u.tmp = unsafe { ty.pack(buf as *const u8, k) };
        }
    }
    let posted = run(mode, || c.bcast(into.bytes(), root))?;
    then(posted, move || {
        into.finish(k * ty.size);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Bcast(
    buf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    root: c_int,
    comm: MpiComm,
) -> c_int {
    entry(Call::Bcast, comm, || {
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules.
        unsafe { bcast(Mode::Blocking, buf, n, dt, root, comm) }.map(drop)
    })
}

/// The caller's own block of a uniform collective, from the receive buffer
/// (`MPI_IN_PLACE`): `k` elements at block `i`.
///
/// # Safety
/// `rbuf` must hold at least `i + 1` blocks of `k` elements of `ty`, readable.
pub unsafe fn own_block(rbuf: *const c_void, i: usize, k: usize, ty: &TypeInfo) -> Outgoing {
    let at = (rbuf as *const u8).wrapping_offset((i * k) as isize * ty.extent);
    // SAFETY: the receive buffer holds `size` blocks of `k` elements (MPI contract).
    Outgoing::Packed(unsafe { ty.pack(at, k) })
}

/// # Safety
/// The buffers follow MPI's rules for `MPI_Gather`, valid until completion.
pub unsafe fn gather(
    mode: Mode,
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    root: c_int,
    comm: MpiComm,
) -> MpiResult<Outcome> {
    if let Some(x) = inter_of(comm) {
        // SAFETY: this function's contract.
        return unsafe {
            intercoll::rooted(&x, false, (sbuf, sn, sdt), (rbuf, rn, rdt), None, root)
        };
    }
    let c = comm_of(comm)?;
    check_root(&c, root)?;
    let me_root = c.rank() == root;
    let n = c.size() as usize;
    let data = if me_root && in_place(sbuf) {
        let rt = comm_type(rdt)?;
        // SAFETY: `rbuf` is the receive buffer, which holds a block per rank (MPI contract).
        unsafe { own_block(rbuf, root as usize, count(rn, "recvcount")?, &rt) }
    } else {
        // SAFETY: `sbuf` is a C send buffer of the given count and type, valid until the
        // operation completes (MPI contract).
        unsafe { outgoing(sbuf, count(sn, "sendcount")?, &*comm_type(sdt)?) }?
    };
    if me_root {
        let rt = comm_type(rdt)?;
        let rk = count(rn, "recvcount")?;
        if data.bytes().len() != rk * rt.size {
            fail!(
                class::TRUNCATE,
                "the root receives {} bytes per rank but its own contribution is {} bytes",
                rk * rt.size,
                data.bytes().len()
            );
        }
        // SAFETY: `rbuf` is a C receive buffer of the given count and type, untouched until the
        // operation completes (MPI contract).
        let mut into = unsafe { incoming(rbuf, rk * n, &rt) }?;
        let posted = run(mode, || c.gather(data.bytes(), Some(into.bytes()), root))?;
        then(posted, move || {
            drop(data);
            into.finish(rk * n * rt.size);
            Ok(())
        })
    } else {
        let posted = run(mode, || c.gather(data.bytes(), None, root))?;
        then(posted, move || {
            drop(data);
            Ok(())
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Gather(
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    root: c_int,
    comm: MpiComm,
) -> c_int {
    entry(Call::Gather, comm, || {
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules.
        unsafe { gather(Mode::Blocking, sbuf, sn, sdt, rbuf, rn, rdt, root, comm) }.map(drop)
    })
}

/// # Safety
/// The buffers follow MPI's rules for `MPI_Scatter`, valid until completion.
pub unsafe fn scatter(
    mode: Mode,
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    root: c_int,
    comm: MpiComm,
) -> MpiResult<Outcome> {
    if let Some(x) = inter_of(comm) {
        // SAFETY: this function's contract.
        return unsafe {
            intercoll::rooted(&x, true, (rbuf, rn, rdt), (sbuf, sn, sdt), None, root)
        };
    }
    let c = comm_of(comm)?;
    check_root(&c, root)?;
    let n = c.size() as usize;
    let me_root = c.rank() == root;
    let send = if me_root {
        let st = comm_type(sdt)?;
        // SAFETY: `sbuf` is a C send buffer of the given count and type, valid until the
        // operation completes (MPI contract).
        Some(unsafe { outgoing(sbuf, count(sn, "sendcount")? * n, &st) }?)
    } else {
        None
    };
    let (mut into, bytes) = if me_root && in_place(rbuf) {
        // The root's block stays where it is: receive it into a scratch buffer.
        let per = send.as_ref().map_or(0, |s| s.bytes().len() / n.max(1));
        (
            crate::p2p::Incoming::Staged(crate::request::Unpack {
                tmp: Bytes::zeroed(per),
                base: 0,
                count: 0,
                ty: Arc::new(byte_type()),
            }),
            per,
        )
    } else {
        let rt = comm_type(rdt)?;
        let rk = count(rn, "recvcount")?;
        // SAFETY: `rbuf` is a C receive buffer of the given count and type, untouched until the
        // operation completes (MPI contract).
        (unsafe { incoming(rbuf, rk, &rt) }?, rk * rt.size)
    };
    let posted = run(mode, || {
        c.scatter(send.as_ref().map(|s| s.bytes()), into.bytes(), root)
    })?;
    then(posted, move || {
        drop(send);
        into.finish(bytes);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Scatter(
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    root: c_int,
    comm: MpiComm,
) -> c_int {
    entry(Call::Scatter, comm, || {
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules.
        unsafe { scatter(Mode::Blocking, sbuf, sn, sdt, rbuf, rn, rdt, root, comm) }.map(drop)
    })
}

pub fn byte_type() -> TypeInfo {
    let mut t = (*crate::datatype::any_type(MPI_BYTE).expect("MPI_BYTE exists")).clone();
    t.committed = true;
    t
}

const MPI_BYTE: MpiDatatype = 4;
