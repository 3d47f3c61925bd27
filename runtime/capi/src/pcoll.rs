//! MPI-4 persistent collectives (MPI-4.0 6.13): `MPI_Barrier_init`, `MPI_Bcast_init`, ...,
//! `MPI_Alltoallw_init`.
//!
//! A persistent collective is a persistent request (persist.rs, [`PersistOp::Coll`]) whose
//! body is the nonblocking collective's: `MPI_Start` runs it in [`Mode::Nonblocking`] and
//! files the posted collective under the request's handle, so the runtime, the recording
//! and replay see exactly the `MPI_Ibcast` (etc.) it stands for. Persistent collectives
//! match in the order they were *initialized* (MPI-4.0 6.13; MPICH's `p_order` starts
//! them in different orders on different ranks), so each runs on its own hidden context,
//! a dup of the communicator made at the `_init` call (which is therefore synchronizing,
//! as the standard allows). Wait/Test make the request inactive again;
//! `MPI_Request_free` forgets it.
//!
//! The arguments are checked when the request is started (the body's checks are the
//! nonblocking call's), not at the `_init` call: an invalid argument is reported by
//! `MPI_Start` with the class the nonblocking call would return. The info argument is
//! accepted and ignored (no hint changes what strobe does). The buffers and count tables
//! are the program's for the request's whole life (MPI-4.0 6.13), so the body keeps their
//! addresses.

use std::os::raw::{c_int, c_void};
use std::sync::Arc;

use strobe_runtime::calls::Call;

use crate::consts::*;
use crate::error::{entry, fail, MpiResult};
use crate::icoll::{Mode, Outcome};
use crate::persist::{PersistOp, PersistSpec};
use crate::state::{fresh_req, st};
use crate::util::put;
use crate::{coll, collv, reduce};

/// The body `MPI_Start` runs: the nonblocking collective, posted.
pub type CollBody = Arc<dyn Fn() -> MpiResult<Outcome> + Send + Sync>;

/// The communicator a persistent collective runs on: a hidden dup of an
/// intracommunicator, made at the `_init` call (MPI-4.0 6.13: persistent collectives match
/// in the order they were initialized, not started, so each gets its own context); an
/// intercommunicator's own handle (its collectives run over hidden contexts already).
/// The hidden communicator lives as long as the process (freeing it would be a collective
/// call inside the local `MPI_Request_free`).
fn own_context(comm: MpiComm) -> MpiResult<MpiComm> {
    if crate::intercomm::inter_of(comm).is_some() {
        return Ok(comm);
    }
    let c = crate::comm::comm_of(comm)?;
    let d = c.dup()?;
    Ok(crate::comm::new_comm_handle(comm, Some(d)))
}

/// A buffer or table address kept by a persistent request (raw pointers are not `Send`).
#[derive(Clone, Copy)]
struct Addr(usize);

impl Addr {
    fn of<T>(p: *const T) -> Addr {
        Addr(p as usize)
    }
    fn ptr<T>(self) -> *const T {
        self.0 as *const T
    }
    fn mut_ptr<T>(self) -> *mut T {
        self.0 as *mut T
    }
}

/// The shared shape of every `MPI_*_init`: check the request pointer, create the inactive
/// persistent request with `body`, hand back its handle.
///
/// # Safety
/// `req` must be NULL or valid for writing one handle; `body` may only touch memory the
/// program gave the `_init` call (MPI keeps it the library's while the request lives).
unsafe fn persistent(
    call: Call,
    comm: MpiComm,
    req: *mut MpiRequest,
    body: impl Fn(MpiComm) -> MpiResult<Outcome> + Send + Sync + 'static,
) -> c_int {
    entry(call, comm, || {
        crate::env::ready()?;
        if req.is_null() {
            fail!(class::REQUEST, "request is NULL");
        }
        if comm == COMM_NULL {
            fail!(class::COMM, "MPI_COMM_NULL is not a communicator");
        }
        let context = own_context(comm)?;
        let spec = PersistSpec {
            op: PersistOp::Coll,
            buf: 0,
            count: 0,
            ty: Arc::new(coll::byte_type()),
            peer: 0,
            tag: 0,
            comm,
            coll: Some(Arc::new(move || body(context))),
        };
        let h = {
            let mut s = st();
            let h = fresh_req(&mut s);
            s.persist.insert(h, spec);
            h
        };
        // SAFETY: `req` is a C output argument, checked non-NULL above.
        unsafe { put(req, h, "request") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Barrier_init(
    comm: MpiComm,
    _info: c_int,
    req: *mut MpiRequest,
) -> c_int {
    let body = move |comm| coll::barrier(Mode::Nonblocking, comm);
    // SAFETY: `req` is the caller's request handle (MPI contract); no buffer.
    unsafe { persistent(Call::BarrierInit, comm, req, body) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Bcast_init(
    buf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    root: c_int,
    comm: MpiComm,
    _info: c_int,
    req: *mut MpiRequest,
) -> c_int {
    let buf = Addr::of(buf);
    let body = move |comm| {
        // SAFETY: as above.
        unsafe { coll::bcast(Mode::Nonblocking, buf.mut_ptr(), n, dt, root, comm) }
    };
    // SAFETY: the buffer is the program's gift to the request for its life (MPI-4 6.13).
    unsafe { persistent(Call::BcastInit, comm, req, body) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Reduce_init(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    op: MpiOp,
    root: c_int,
    comm: MpiComm,
    _info: c_int,
    req: *mut MpiRequest,
) -> c_int {
    let (s, r) = (Addr::of(sbuf), Addr::of(rbuf));
    let body = move |comm| {
        // SAFETY: as above.
        unsafe {
            reduce::reduce(
                Mode::Nonblocking,
                s.ptr(),
                r.mut_ptr(),
                n,
                dt,
                op,
                root,
                comm,
            )
        }
    };
    // SAFETY: the buffers are the program's gift to the request for its life (MPI-4 6.13).
    unsafe { persistent(Call::ReduceInit, comm, req, body) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Allreduce_init(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    op: MpiOp,
    comm: MpiComm,
    _info: c_int,
    req: *mut MpiRequest,
) -> c_int {
    let (s, r) = (Addr::of(sbuf), Addr::of(rbuf));
    let body = move |comm| {
        // SAFETY: as above.
        unsafe { reduce::allreduce(Mode::Nonblocking, s.ptr(), r.mut_ptr(), n, dt, op, comm) }
    };
    // SAFETY: the buffers are the program's gift to the request for its life (MPI-4 6.13).
    unsafe { persistent(Call::AllreduceInit, comm, req, body) }
}

/// `MPI_Scan_init` and `MPI_Exscan_init`.
///
/// # Safety
/// As [`persistent`]; the buffers as `MPI_Scan`'s.
#[allow(clippy::too_many_arguments)]
unsafe fn scan_init(
    call: Call,
    exclusive: bool,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    op: MpiOp,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    let (s, r) = (Addr::of(sbuf), Addr::of(rbuf));
    let body = move |comm| {
        // SAFETY: as above.
        unsafe {
            reduce::scan(
                Mode::Nonblocking,
                exclusive,
                s.ptr(),
                r.mut_ptr(),
                n,
                dt,
                op,
                comm,
            )
        }
    };
    // SAFETY: the buffers are the program's gift to the request for its life (MPI-4 6.13).
    unsafe { persistent(call, comm, req, body) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Scan_init(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    op: MpiOp,
    comm: MpiComm,
    _info: c_int,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: this entry point's arguments, under MPI's rules.
    unsafe { scan_init(Call::ScanInit, false, sbuf, rbuf, n, dt, op, comm, req) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Exscan_init(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    op: MpiOp,
    comm: MpiComm,
    _info: c_int,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: this entry point's arguments, under MPI's rules.
    unsafe { scan_init(Call::ExscanInit, true, sbuf, rbuf, n, dt, op, comm, req) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Reduce_scatter_init(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    rcounts: *const c_int,
    dt: MpiDatatype,
    op: MpiOp,
    comm: MpiComm,
    _info: c_int,
    req: *mut MpiRequest,
) -> c_int {
    let (s, r, rc) = (Addr::of(sbuf), Addr::of(rbuf), Addr::of(rcounts));
    let body = move |comm| {
        // SAFETY: as above.
        unsafe {
            let counts = reduce::scatter_counts(comm, rc.ptr())?;
            reduce::reduce_scatter(
                Mode::Nonblocking,
                comm,
                s.ptr(),
                r.mut_ptr(),
                &counts,
                dt,
                op,
                false,
            )
        }
    };
    // SAFETY: the buffers and the table are the program's gift to the request for its
    // life (MPI-4 6.13).
    unsafe { persistent(Call::ReduceScatterInit, comm, req, body) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Reduce_scatter_block_init(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    rn: c_int,
    dt: MpiDatatype,
    op: MpiOp,
    comm: MpiComm,
    _info: c_int,
    req: *mut MpiRequest,
) -> c_int {
    let (s, r) = (Addr::of(sbuf), Addr::of(rbuf));
    let body = move |comm| {
        let n = reduce::local_size(comm)?;
        let k = crate::util::count(rn, "recvcount")?;
        // SAFETY: as above.
        unsafe {
            reduce::reduce_scatter(
                Mode::Nonblocking,
                comm,
                s.ptr(),
                r.mut_ptr(),
                &vec![k; n],
                dt,
                op,
                true,
            )
        }
    };
    // SAFETY: the buffers are the program's gift to the request for its life (MPI-4 6.13).
    unsafe { persistent(Call::ReduceScatterBlockInit, comm, req, body) }
}

/// `MPI_Gather_init` and `MPI_Scatter_init`: `scatter` picks the body.
///
/// # Safety
/// As [`persistent`]; the buffers as `MPI_Gather`'s (`MPI_Scatter`'s).
#[allow(clippy::too_many_arguments)]
unsafe fn rooted_init(
    call: Call,
    scatter: bool,
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
    let (s, r) = (Addr::of(sbuf), Addr::of(rbuf));
    let body = if scatter { coll::scatter } else { coll::gather };
    let body = move |comm| {
        // SAFETY: as above.
        unsafe {
            body(
                Mode::Nonblocking,
                s.ptr(),
                sn,
                sdt,
                r.mut_ptr(),
                rn,
                rdt,
                root,
                comm,
            )
        }
    };
    // SAFETY: the buffers are the program's gift to the request for its life (MPI-4 6.13).
    unsafe { persistent(call, comm, req, body) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Gather_init(
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    root: c_int,
    comm: MpiComm,
    _info: c_int,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: this entry point's arguments, under MPI's rules.
    unsafe {
        rooted_init(
            Call::GatherInit,
            false,
            sbuf,
            sn,
            sdt,
            rbuf,
            rn,
            rdt,
            root,
            comm,
            req,
        )
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Scatter_init(
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    root: c_int,
    comm: MpiComm,
    _info: c_int,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: this entry point's arguments, under MPI's rules.
    unsafe {
        rooted_init(
            Call::ScatterInit,
            true,
            sbuf,
            sn,
            sdt,
            rbuf,
            rn,
            rdt,
            root,
            comm,
            req,
        )
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Gatherv_init(
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rcounts: *const c_int,
    displs: *const c_int,
    rdt: MpiDatatype,
    root: c_int,
    comm: MpiComm,
    _info: c_int,
    req: *mut MpiRequest,
) -> c_int {
    let (s, r) = (Addr::of(sbuf), Addr::of(rbuf));
    let (rc, d) = (Addr::of(rcounts), Addr::of(displs));
    let body = move |comm| {
        // SAFETY: as above.
        unsafe {
            collv::gatherv(
                Mode::Nonblocking,
                s.ptr(),
                sn,
                sdt,
                r.mut_ptr(),
                rc.ptr(),
                d.ptr(),
                rdt,
                root,
                comm,
            )
        }
    };
    // SAFETY: the buffers and tables are the program's gift to the request for its life
    // (MPI-4 6.13).
    unsafe { persistent(Call::GathervInit, comm, req, body) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Scatterv_init(
    sbuf: *const c_void,
    scounts: *const c_int,
    displs: *const c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    root: c_int,
    comm: MpiComm,
    _info: c_int,
    req: *mut MpiRequest,
) -> c_int {
    let (s, r) = (Addr::of(sbuf), Addr::of(rbuf));
    let (sc, d) = (Addr::of(scounts), Addr::of(displs));
    let body = move |comm| {
        // SAFETY: as above.
        unsafe {
            collv::scatterv(
                Mode::Nonblocking,
                s.ptr(),
                sc.ptr(),
                d.ptr(),
                sdt,
                r.mut_ptr(),
                rn,
                rdt,
                root,
                comm,
            )
        }
    };
    // SAFETY: the buffers and tables are the program's gift to the request for its life
    // (MPI-4 6.13).
    unsafe { persistent(Call::ScattervInit, comm, req, body) }
}

/// `MPI_Allgather_init` and `MPI_Alltoall_init`: `all_to_all` picks the body.
///
/// # Safety
/// As [`persistent`]; the buffers as `MPI_Allgather`'s (`MPI_Alltoall`'s).
#[allow(clippy::too_many_arguments)]
unsafe fn all_init(
    call: Call,
    all_to_all: bool,
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    comm: MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    let (s, r) = (Addr::of(sbuf), Addr::of(rbuf));
    let body = if all_to_all {
        collv::alltoall
    } else {
        collv::allgather
    };
    let body = move |comm| {
        // SAFETY: as above.
        unsafe {
            body(
                Mode::Nonblocking,
                s.ptr(),
                sn,
                sdt,
                r.mut_ptr(),
                rn,
                rdt,
                comm,
            )
        }
    };
    // SAFETY: the buffers are the program's gift to the request for its life (MPI-4 6.13).
    unsafe { persistent(call, comm, req, body) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Allgather_init(
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    comm: MpiComm,
    _info: c_int,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: this entry point's arguments, under MPI's rules.
    unsafe {
        all_init(
            Call::AllgatherInit,
            false,
            sbuf,
            sn,
            sdt,
            rbuf,
            rn,
            rdt,
            comm,
            req,
        )
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Alltoall_init(
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rn: c_int,
    rdt: MpiDatatype,
    comm: MpiComm,
    _info: c_int,
    req: *mut MpiRequest,
) -> c_int {
    // SAFETY: this entry point's arguments, under MPI's rules.
    unsafe {
        all_init(
            Call::AlltoallInit,
            true,
            sbuf,
            sn,
            sdt,
            rbuf,
            rn,
            rdt,
            comm,
            req,
        )
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Allgatherv_init(
    sbuf: *const c_void,
    sn: c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rcounts: *const c_int,
    displs: *const c_int,
    rdt: MpiDatatype,
    comm: MpiComm,
    _info: c_int,
    req: *mut MpiRequest,
) -> c_int {
    let (s, r) = (Addr::of(sbuf), Addr::of(rbuf));
    let (rc, d) = (Addr::of(rcounts), Addr::of(displs));
    let body = move |comm| {
        // SAFETY: as above.
        unsafe {
            collv::allgatherv(
                Mode::Nonblocking,
                s.ptr(),
                sn,
                sdt,
                r.mut_ptr(),
                rc.ptr(),
                d.ptr(),
                rdt,
                comm,
            )
        }
    };
    // SAFETY: the buffers and tables are the program's gift to the request for its life
    // (MPI-4 6.13).
    unsafe { persistent(Call::AllgathervInit, comm, req, body) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Alltoallv_init(
    sbuf: *const c_void,
    scounts: *const c_int,
    sdispls: *const c_int,
    sdt: MpiDatatype,
    rbuf: *mut c_void,
    rcounts: *const c_int,
    rdispls: *const c_int,
    rdt: MpiDatatype,
    comm: MpiComm,
    _info: c_int,
    req: *mut MpiRequest,
) -> c_int {
    let (s, sc, sd) = (Addr::of(sbuf), Addr::of(scounts), Addr::of(sdispls));
    let (r, rc, rd) = (Addr::of(rbuf), Addr::of(rcounts), Addr::of(rdispls));
    let body = move |comm| {
        // SAFETY: as above.
        unsafe {
            collv::alltoallv(
                Mode::Nonblocking,
                s.ptr(),
                sc.ptr(),
                sd.ptr(),
                sdt,
                r.mut_ptr(),
                rc.ptr(),
                rd.ptr(),
                rdt,
                comm,
            )
        }
    };
    // SAFETY: the buffers and tables are the program's gift to the request for its life
    // (MPI-4 6.13).
    unsafe { persistent(Call::AlltoallvInit, comm, req, body) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Alltoallw_init(
    sbuf: *const c_void,
    scounts: *const c_int,
    sdispls: *const c_int,
    stypes: *const MpiDatatype,
    rbuf: *mut c_void,
    rcounts: *const c_int,
    rdispls: *const c_int,
    rtypes: *const MpiDatatype,
    comm: MpiComm,
    _info: c_int,
    req: *mut MpiRequest,
) -> c_int {
    let (s, sc, sd, st_) = (
        Addr::of(sbuf),
        Addr::of(scounts),
        Addr::of(sdispls),
        Addr::of(stypes),
    );
    let (r, rc, rd, rt) = (
        Addr::of(rbuf),
        Addr::of(rcounts),
        Addr::of(rdispls),
        Addr::of(rtypes),
    );
    let body = move |comm| {
        // SAFETY: as above.
        unsafe {
            crate::alltoallw::alltoallw(
                Mode::Nonblocking,
                s.ptr(),
                sc.ptr(),
                sd.ptr(),
                st_.ptr(),
                r.mut_ptr(),
                rc.ptr(),
                rd.ptr(),
                rt.ptr(),
                comm,
            )
        }
    };
    // SAFETY: the buffers and tables are the program's gift to the request for its life
    // (MPI-4 6.13).
    unsafe { persistent(Call::AlltoallwInit, comm, req, body) }
}
