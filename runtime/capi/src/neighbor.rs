//! Neighbour collectives (MPI-3.1 7.6, 7.7): `MPI_Neighbor_allgather(v)`,
//! `MPI_Neighbor_alltoall(v,w)` and their nonblocking `MPI_Ineighbor_*` forms.
//!
//! A neighbour collective is a set of point-to-point transfers on the topology's hidden
//! context (topo.rs): one receive per in-neighbour, one send per out-neighbour, posted as
//! ordinary `MPI_Irecv`/`MPI_Isend` descriptors and completed together, so they are
//! scheduled, recorded and replayed like any message. Transfers to `MPI_PROC_NULL` (an
//! edge of a non-periodic grid) are skipped. Tags keep the transfers apart where two
//! neighbours are the same rank: on a Cartesian grid the block sent in direction
//! (d, +1) is received in the receiver's (d, -1) slot, so a send at position k carries
//! tag k ^ 1 and a receive at position j expects tag j (a periodic dimension of size 1 or
//! 2 then still pairs the blocks as the standard says); on a graph the edges between two
//! ranks pair in order (messages do not overtake).
//!
//! The nonblocking forms complete the exchange at the call and return a request that
//! completes at the next slice boundary (as the rank-side reductions of icoll.rs);
//! docs/mpi-support.md lists this deviation.

use std::os::raw::{c_int, c_void};
use std::sync::Arc;

use strobe_runtime::api::SendMode;
use strobe_runtime::calls::Call;

use crate::comm::comm_of;
use crate::consts::*;
use crate::datatype::{comm_type, TypeInfo};
use crate::error::{entry, fail, MpiResult};
use crate::icoll::{activate, Outcome};
use crate::p2p::{incoming, outgoing};
use crate::request::ReqEntry;
use crate::state::insert_req;
use crate::topo::{need, neighbours, Shape};
use crate::util::{array, count, put};

/// One block of a neighbour collective: `n` elements of `ty` at address `at`.
struct Block {
    at: usize,
    n: usize,
    ty: Arc<TypeInfo>,
}

/// Where a block lives: `base` plus `index` elements of `ty` (by extent).
fn offset(base: *const c_void, index: usize, ty: &TypeInfo) -> usize {
    (base as isize).wrapping_add(index as isize * ty.extent) as usize
}

/// Post the exchange on `comm`'s hidden context and wait for it. `send(k)` and `recv(j)`
/// give the block of out-neighbour k and in-neighbour j.
///
/// # Safety
/// The blocks must be the program's buffers as the neighbour collective's arguments
/// describe them (MPI's rules).
unsafe fn exchange(
    comm: MpiComm,
    send: impl Fn(usize) -> MpiResult<Block>,
    recv: impl Fn(usize) -> MpiResult<Block>,
) -> MpiResult {
    let t = need(comm)?;
    let me = comm_of(comm)?.rank();
    let (ins, outs) = neighbours(&t.shape, me);
    let cart = matches!(t.shape, Shape::Cart { .. });
    let mut hs = Vec::with_capacity(ins.len() + outs.len());
    for (j, &src) in ins.iter().enumerate() {
        let b = recv(j)?;
        if src == PROC_NULL {
            continue;
        }
        let tag = if cart { j as c_int } else { 0 };
        // SAFETY: this function's contract: the program's receive block, untouched until
        // the Waitall below.
        let mut into = unsafe { incoming(b.at as *mut c_void, b.n, &b.ty) }?;
        // SAFETY: as above; a staging buffer moves into the request table with `into`.
        let id = unsafe { t.hidden.post_recv_unscoped(into.bytes(), src, tag)? };
        hs.push(insert_req(ReqEntry {
            id,
            comm,
            is_recv: true,
            send_tmp: None,
            unpack: into.into_unpack(),
        }));
    }
    for (k, &dst) in outs.iter().enumerate() {
        let b = send(k)?;
        if dst == PROC_NULL {
            continue;
        }
        let tag = if cart { (k ^ 1) as c_int } else { 0 };
        // SAFETY: this function's contract: the program's send block, unmodified until
        // the Waitall below.
        let data = unsafe { outgoing(b.at as *const c_void, b.n, &b.ty) }?;
        // SAFETY: as above; a packed copy moves into the request table.
        let id = unsafe {
            t.hidden
                .post_send_unscoped(SendMode::Standard, data.bytes(), dst, tag)?
        };
        hs.push(insert_req(ReqEntry {
            id,
            comm,
            is_recv: false,
            send_tmp: data.into_tmp(),
            unpack: None,
        }));
    }
    // SAFETY: `hs` holds the handles just registered; statuses ignored.
    let rc = unsafe {
        crate::request::PMPI_Waitall(hs.len() as c_int, hs.as_mut_ptr(), std::ptr::null_mut())
    };
    if rc != class::SUCCESS {
        fail!(rc, "a transfer of the neighbour collective failed");
    }
    Ok(())
}

/// Run a neighbour collective's exchange: at once (`req` NULL: the blocking call) or as a
/// request completing at the next slice boundary.
///
/// # Safety
/// `req` must be NULL (blocking) or the program's request handle.
unsafe fn run(
    call: Call,
    comm: MpiComm,
    req: Option<*mut MpiRequest>,
    body: impl FnOnce() -> MpiResult,
) -> c_int {
    entry(call, comm, || {
        crate::env::ready()?;
        if req.is_some_and(|r| r.is_null()) {
            fail!(class::REQUEST, "request is NULL");
        }
        body()?;
        if let Some(r) = req {
            let h = insert_req(activate(Outcome::Done, comm)?);
            // SAFETY: checked non-NULL; the program's request handle.
            unsafe { put(r, h, "request") }?;
        }
        Ok(())
    })
}

/// The number of in- and out-neighbours of the calling rank.
fn degrees(comm: MpiComm) -> MpiResult<(usize, usize)> {
    let t = need(comm)?;
    let (i, o) = neighbours(&t.shape, comm_of(comm)?.rank());
    Ok((i.len(), o.len()))
}

/// # Safety
/// MPI's rules for `MPI_Neighbor_allgather`'s arguments.
#[allow(clippy::too_many_arguments)]
unsafe fn allgather(
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    comm: MpiComm,
) -> MpiResult {
    let (sn, rn) = (count(sn, "sendcount")?, count(rn, "recvcount")?);
    let (st, rt) = (comm_type(sdt)?, comm_type(rdt)?);
    // SAFETY: the caller's contract.
    unsafe {
        exchange(
            comm,
            |_| {
                Ok(Block {
                    at: sbuf as usize,
                    n: sn,
                    ty: st.clone(),
                })
            },
            |j| {
                Ok(Block {
                    at: offset(rbuf, j * rn, &rt),
                    n: rn,
                    ty: rt.clone(),
                })
            },
        )
    }
}

/// # Safety
/// MPI's rules for `MPI_Neighbor_allgatherv`'s arguments.
#[allow(clippy::too_many_arguments)]
unsafe fn allgatherv(
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rcounts: *const c_int,
    displs: *const c_int,
    rdt: MpiDatatype,
    comm: MpiComm,
) -> MpiResult {
    let sn = count(sn, "sendcount")?;
    let (st, rt) = (comm_type(sdt)?, comm_type(rdt)?);
    let (ni, _) = degrees(comm)?;
    // SAFETY: MPI requires an entry per in-neighbour.
    let (rc, rd) = unsafe {
        (
            array(rcounts, ni, "recvcounts")?,
            array(displs, ni, "displs")?,
        )
    };
    // SAFETY: the caller's contract.
    unsafe {
        exchange(
            comm,
            |_| {
                Ok(Block {
                    at: sbuf as usize,
                    n: sn,
                    ty: st.clone(),
                })
            },
            |j| {
                let at = (rbuf as isize).wrapping_add(rd[j] as isize * rt.extent) as usize;
                Ok(Block {
                    at,
                    n: count(rc[j], "recvcounts")?,
                    ty: rt.clone(),
                })
            },
        )
    }
}

/// # Safety
/// MPI's rules for `MPI_Neighbor_alltoall`'s arguments.
#[allow(clippy::too_many_arguments)]
unsafe fn alltoall(
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    comm: MpiComm,
) -> MpiResult {
    let (sn, rn) = (count(sn, "sendcount")?, count(rn, "recvcount")?);
    let (st, rt) = (comm_type(sdt)?, comm_type(rdt)?);
    // SAFETY: the caller's contract.
    unsafe {
        exchange(
            comm,
            |k| {
                Ok(Block {
                    at: offset(sbuf, k * sn, &st),
                    n: sn,
                    ty: st.clone(),
                })
            },
            |j| {
                Ok(Block {
                    at: offset(rbuf, j * rn, &rt),
                    n: rn,
                    ty: rt.clone(),
                })
            },
        )
    }
}

/// # Safety
/// MPI's rules for `MPI_Neighbor_alltoallv`'s arguments.
#[allow(clippy::too_many_arguments)]
unsafe fn alltoallv(
    sbuf: *const c_void,
    scounts: *const c_int,
    sdispls: *const c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rcounts: *const c_int,
    rdispls: *const c_int,
    rdt: MpiDatatype,
    comm: MpiComm,
) -> MpiResult {
    let (st, rt) = (comm_type(sdt)?, comm_type(rdt)?);
    let (ni, no) = degrees(comm)?;
    // SAFETY: MPI requires an entry per neighbour in each table.
    let (sc, sd, rc, rd) = unsafe {
        (
            array(scounts, no, "sendcounts")?,
            array(sdispls, no, "sdispls")?,
            array(rcounts, ni, "recvcounts")?,
            array(rdispls, ni, "rdispls")?,
        )
    };
    let at = |base: *const c_void, d: c_int, ty: &TypeInfo| {
        (base as isize).wrapping_add(d as isize * ty.extent) as usize
    };
    // SAFETY: the caller's contract.
    unsafe {
        exchange(
            comm,
            |k| {
                Ok(Block {
                    at: at(sbuf, sd[k], &st),
                    n: count(sc[k], "sendcounts")?,
                    ty: st.clone(),
                })
            },
            |j| {
                Ok(Block {
                    at: at(rbuf, rd[j], &rt),
                    n: count(rc[j], "recvcounts")?,
                    ty: rt.clone(),
                })
            },
        )
    }
}

/// # Safety
/// MPI's rules for `MPI_Neighbor_alltoallw`'s arguments.
#[allow(clippy::too_many_arguments)]
unsafe fn alltoallw(
    sbuf: *const c_void,
    scounts: *const c_int,
    sdispls: *const MpiAint,
    stypes: *const MpiDatatype,
    rbuf: *mut c_void,
    rcounts: *const c_int,
    rdispls: *const MpiAint,
    rtypes: *const MpiDatatype,
    comm: MpiComm,
) -> MpiResult {
    let (ni, no) = degrees(comm)?;
    // SAFETY: MPI requires an entry per neighbour in each table.
    let (sc, sd, sty, rc, rd, rty) = unsafe {
        (
            array(scounts, no, "sendcounts")?,
            array(sdispls, no, "sdispls")?,
            array(stypes, no, "sendtypes")?,
            array(rcounts, ni, "recvcounts")?,
            array(rdispls, ni, "rdispls")?,
            array(rtypes, ni, "recvtypes")?,
        )
    };
    // SAFETY: the caller's contract.
    unsafe {
        exchange(
            comm,
            |k| {
                Ok(Block {
                    at: (sbuf as isize).wrapping_add(sd[k]) as usize,
                    n: count(sc[k], "sendcounts")?,
                    ty: comm_type(sty[k])?,
                })
            },
            |j| {
                Ok(Block {
                    at: (rbuf as isize).wrapping_add(rd[j]) as usize,
                    n: count(rc[j], "recvcounts")?,
                    ty: comm_type(rty[j])?,
                })
            },
        )
    }
}

/// The blocking and nonblocking entry points of one neighbour collective.
macro_rules! entry_points {
    ($blocking:ident, $bcall:ident, $nonblocking:ident, $ncall:ident, $body:ident,
     ($($arg:ident: $ty:ty),*)) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $blocking($($arg: $ty,)* comm: MpiComm) -> c_int {
            // SAFETY: this entry point's arguments, under MPI's rules.
            unsafe { run(Call::$bcall, comm, None, || $body($($arg,)* comm)) }
        }

        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $nonblocking(
            $($arg: $ty,)*
            comm: MpiComm,
            req: *mut MpiRequest,
        ) -> c_int {
            // SAFETY: this entry point's arguments, under MPI's rules.
            unsafe { run(Call::$ncall, comm, Some(req), || $body($($arg,)* comm)) }
        }
    };
}

entry_points!(PMPI_Neighbor_allgather, NeighborAllgather, PMPI_Ineighbor_allgather,
    IneighborAllgather, allgather,
    (sbuf: *const c_void, sn: c_int, sdt: MpiDatatype, rbuf: *mut c_void, rn: c_int,
     rdt: MpiDatatype));
entry_points!(PMPI_Neighbor_allgatherv, NeighborAllgatherv, PMPI_Ineighbor_allgatherv,
    IneighborAllgatherv, allgatherv,
    (sbuf: *const c_void, sn: c_int, sdt: MpiDatatype, rbuf: *mut c_void,
     rcounts: *const c_int, displs: *const c_int, rdt: MpiDatatype));
entry_points!(PMPI_Neighbor_alltoall, NeighborAlltoall, PMPI_Ineighbor_alltoall,
    IneighborAlltoall, alltoall,
    (sbuf: *const c_void, sn: c_int, sdt: MpiDatatype, rbuf: *mut c_void, rn: c_int,
     rdt: MpiDatatype));
entry_points!(PMPI_Neighbor_alltoallv, NeighborAlltoallv, PMPI_Ineighbor_alltoallv,
    IneighborAlltoallv, alltoallv,
    (sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_int, sdt: MpiDatatype,
     rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rdt: MpiDatatype));
entry_points!(PMPI_Neighbor_alltoallw, NeighborAlltoallw, PMPI_Ineighbor_alltoallw,
    IneighborAlltoallw, alltoallw,
    (sbuf: *const c_void, scounts: *const c_int, sdispls: *const MpiAint,
     stypes: *const MpiDatatype, rbuf: *mut c_void, rcounts: *const c_int,
     rdispls: *const MpiAint, rtypes: *const MpiDatatype));
