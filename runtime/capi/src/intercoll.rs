//! Collectives on intercommunicators (see `intercomm.rs`): each runs over the hidden
//! intracommunicators with the ordinary collective code, plus point-to-point hops between
//! the groups' leaders on `union`. Blocking only: the nonblocking forms run the blocking
//! one at the call and hand back a completed request (docs/mpi-support.md).

use std::os::raw::{c_int, c_void};

use crate::consts::*;
use crate::datatype::comm_type;
use crate::error::{fail, MpiErr, MpiResult};
use crate::icoll::{Mode, Outcome};
use crate::intercomm::{code, hop_recv, hop_send, role, Inter, Role, HOP_TAG};
use crate::reduce::Layout;
use crate::util::count;

/// `MPI_Barrier`: every member of both groups (a barrier over `union`).
pub fn barrier(mode: Mode, x: &Inter) -> MpiResult<Outcome> {
    crate::coll::barrier(mode, x.union)
}

/// `MPI_Bcast` from the root (`MPI_ROOT`) to every member of the other group.
///
/// # Safety
/// `buf` holds `n` elements of `dt` (readable at the root, writable at the receivers).
pub unsafe fn bcast(
    x: &Inter,
    buf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    root: c_int,
) -> MpiResult<Outcome> {
    match role(x, root)? {
        Role::Idle => {}
        Role::Root => {
            for r in 0..x.remote_members.len() as c_int {
                // SAFETY: the root's buffer holds `n` elements (MPI contract).
                unsafe { hop_send(x, buf, n, dt, r) }?;
            }
        }
        // SAFETY: the receiver's buffer holds `n` writable elements (MPI contract).
        Role::Leaf(r) => unsafe { hop_recv(x, buf, n, dt, r) }?,
    }
    Ok(Outcome::Done)
}

/// A scratch buffer for `n` elements of `dt`.
fn scratch(n: c_int, dt: MpiDatatype) -> MpiResult<Layout> {
    Ok(Layout::new(&*comm_type(dt)?, count(n, "count")?))
}

/// My group's reduction of `sbuf` at my group's rank 0 (in `tmp`).
///
/// # Safety
/// `sbuf` holds `n` elements of `dt`.
unsafe fn reduce_local(
    x: &Inter,
    sbuf: *const c_void,
    tmp: &mut Layout,
    n: c_int,
    dt: MpiDatatype,
    op: MpiOp,
) -> MpiResult {
    if crate::util::in_place(sbuf) {
        fail!(
            class::BUFFER,
            "MPI_IN_PLACE is not allowed on an intercommunicator"
        );
    }
    let at = tmp.base() as *mut c_void;
    // SAFETY: `sbuf` holds `n` elements (MPI contract); `tmp` is laid out for `n`.
    unsafe { crate::reduce::reduce(Mode::Blocking, sbuf, at, n, dt, op, 0, x.local) }.map(drop)
}

/// `MPI_Allreduce`: each group receives the reduction of the *other* group's data.
///
/// # Safety
/// `sbuf` holds `n` elements of `dt`, `rbuf` `n` writable ones.
pub unsafe fn allreduce(
    x: &Inter,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    op: MpiOp,
) -> MpiResult<Outcome> {
    let mut tmp = scratch(n, dt)?;
    // SAFETY: this function's contract.
    unsafe { reduce_local(x, sbuf, &mut tmp, n, dt, op) }?;
    let leader = crate::comm::comm_of(x.local)?.rank() == 0;
    if leader {
        // The group with the lower world ranks sends first; the leaders' blocking sends
        // would otherwise wait for each other.
        let mine = tmp.base() as *const c_void;
        // SAFETY: `tmp` holds `n` elements; `rbuf` has room for `n` (MPI contract).
        unsafe {
            if x.first {
                hop_send(x, mine, n, dt, 0)?;
                hop_recv(x, rbuf, n, dt, 0)?;
            } else {
                hop_recv(x, rbuf, n, dt, 0)?;
                hop_send(x, mine, n, dt, 0)?;
            }
        }
    }
    // SAFETY: `rbuf` holds `n` elements of `dt` (MPI contract).
    unsafe { crate::coll::bcast(Mode::Blocking, rbuf, n, dt, 0, x.local) }.map(drop)?;
    Ok(Outcome::Done)
}

/// `MPI_Reduce`: the root (`MPI_ROOT`) receives the reduction of the other group's data.
///
/// # Safety
/// `sbuf` holds `n` elements of `dt` in the contributing group; `rbuf` `n` writable ones at
/// the root.
pub unsafe fn reduce(
    x: &Inter,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    op: MpiOp,
    root: c_int,
) -> MpiResult<Outcome> {
    match role(x, root)? {
        Role::Idle => {}
        // SAFETY: the root's buffer has room for `n` elements (MPI contract).
        Role::Root => unsafe { hop_recv(x, rbuf, n, dt, 0) }?,
        Role::Leaf(r) => {
            let mut tmp = scratch(n, dt)?;
            // SAFETY: this function's contract.
            unsafe { reduce_local(x, sbuf, &mut tmp, n, dt, op) }?;
            if crate::comm::comm_of(x.local)?.rank() == 0 {
                // SAFETY: `tmp` holds `n` elements.
                unsafe { hop_send(x, tmp.base() as *const c_void, n, dt, r) }?;
            }
        }
    }
    Ok(Outcome::Done)
}

/// `MPI_Reduce_scatter(_block)`: the reduction of the *other* group's vectors (of
/// `sum(counts)` elements, `counts` being my group's) is scattered over my group.
///
/// # Safety
/// `sbuf` holds `sum(counts)` elements of `dt`, `rbuf` my count, writable.
pub unsafe fn reduce_scatter(
    x: &Inter,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    counts: &[usize],
    dt: MpiDatatype,
    op: MpiOp,
) -> MpiResult<Outcome> {
    let total: usize = counts.iter().sum();
    let n = c_int::try_from(total).map_err(|_| MpiErr::new(class::COUNT, "count too large"))?;
    let mut mine = scratch(n, dt)?;
    let mut theirs = scratch(n, dt)?;
    // SAFETY: this function's contract.
    unsafe { reduce_local(x, sbuf, &mut mine, n, dt, op) }?;
    let local = crate::comm::comm_of(x.local)?;
    if local.rank() == 0 {
        let (m, t) = (mine.base() as *const c_void, theirs.base() as *mut c_void);
        // SAFETY: both scratch buffers hold `n` elements.
        unsafe {
            if x.first {
                hop_send(x, m, n, dt, 0)?;
                hop_recv(x, t, n, dt, 0)?;
            } else {
                hop_recv(x, t, n, dt, 0)?;
                hop_send(x, m, n, dt, 0)?;
            }
        }
    }
    let ic = |v: usize| c_int::try_from(v).map_err(|_| MpiErr::new(class::COUNT, "too large"));
    let sc: Vec<c_int> = counts.iter().map(|&k| ic(k)).collect::<MpiResult<_>>()?;
    let mut at = 0;
    let mut displs = Vec::with_capacity(sc.len());
    for &k in &sc {
        displs.push(at);
        at += k;
    }
    let me = local.rank() as usize;
    // SAFETY: `theirs` holds the full vector at rank 0; `rbuf` my count (MPI contract).
    unsafe {
        crate::collv::scatterv(
            Mode::Blocking,
            theirs.base() as *const c_void,
            sc.as_ptr(),
            displs.as_ptr(),
            dt,
            rbuf,
            sc[me],
            dt,
            0,
            x.local,
        )
    }
    .map(drop)?;
    Ok(Outcome::Done)
}

/// One message of an exchange between the groups: (buffer, count, datatype, rank in the
/// remote group).
type Hop = (*mut c_void, c_int, MpiDatatype, c_int);

/// Post every receive, then every send, on `union`, and wait for all: the pattern of the
/// data-moving collectives across the groups (no pair of blocking sends can wait for each
/// other).
///
/// # Safety
/// Every buffer holds its count of its datatype (writable for the receives).
unsafe fn exchange(x: &Inter, recvs: &[Hop], sends: &[Hop]) -> MpiResult<Outcome> {
    let mut reqs = vec![REQUEST_NULL; recvs.len() + sends.len()];
    for (i, &(buf, n, dt, r)) in recvs.iter().enumerate() {
        let from = x.remote_in_union(r);
        // SAFETY: this function's contract; `reqs[i]` is a writable handle.
        code(unsafe { crate::p2p::PMPI_Irecv(buf, n, dt, from, HOP_TAG, x.union, &mut reqs[i]) })?;
    }
    for (i, &(buf, n, dt, r)) in sends.iter().enumerate() {
        let to = x.remote_in_union(r);
        let req = &mut reqs[recvs.len() + i];
        // SAFETY: this function's contract; `req` is a writable handle.
        code(unsafe { crate::p2p::PMPI_Isend(buf, n, dt, to, HOP_TAG, x.union, req) })?;
    }
    let n = reqs.len() as c_int;
    let ignore = STATUS_IGNORE as *mut MpiStatus;
    // SAFETY: `reqs` holds `n` handles; statuses are ignored.
    code(unsafe { crate::request::PMPI_Waitall(n, reqs.as_mut_ptr(), ignore) })?;
    Ok(Outcome::Done)
}

/// `buf` moved by `k` elements of `dt` (a block's start).
fn at(buf: *const c_void, k: isize, dt: MpiDatatype) -> MpiResult<*mut c_void> {
    let ext = comm_type(dt)?.extent;
    Ok((buf as *mut u8).wrapping_offset(k * ext) as *mut c_void)
}

/// `n` ints of a C array argument, one per remote rank.
///
/// # Safety
/// `p` is NULL or points at `n` ints.
unsafe fn per_remote<'a>(p: *const c_int, n: usize, what: &str) -> MpiResult<&'a [c_int]> {
    // SAFETY: this function's contract.
    unsafe { crate::util::array(p, n, what) }
}

/// The blocks of a uniform rooted collective: one of `k` elements per remote rank.
fn uniform(x: &Inter, buf: *const c_void, k: c_int, dt: MpiDatatype) -> MpiResult<Vec<Hop>> {
    (0..x.remote_members.len() as c_int)
        .map(|r| Ok((at(buf, (r * k) as isize, dt)?, k, dt, r)))
        .collect()
}

/// The blocks of a v-collective: `counts[r]` elements at displacement `displs[r]`.
///
/// # Safety
/// `counts` and `displs` are NULL or hold one int per remote rank.
unsafe fn varying(
    x: &Inter,
    buf: *const c_void,
    counts: *const c_int,
    displs: *const c_int,
    dt: MpiDatatype,
) -> MpiResult<Vec<Hop>> {
    let n = x.remote_members.len();
    // SAFETY: this function's contract.
    let (c, d) = unsafe {
        (
            per_remote(counts, n, "counts")?,
            per_remote(displs, n, "displs")?,
        )
    };
    (0..n)
        .map(|r| Ok((at(buf, d[r] as isize, dt)?, c[r], dt, r as c_int)))
        .collect()
}

/// `MPI_Gather`/`MPI_Gatherv` (`counts`, `displs` non-NULL) to the root, from the other
/// group; `MPI_Scatter`/`MPI_Scatterv` (`scatter`) the other way.
///
/// # Safety
/// The buffers and arrays follow MPI's rules for the call.
pub unsafe fn rooted(
    x: &Inter,
    scatter: bool,
    own: (*const c_void, c_int, MpiDatatype),
    root_buf: (*const c_void, c_int, MpiDatatype),
    v: Option<(*const c_int, *const c_int)>,
    root: c_int,
) -> MpiResult<Outcome> {
    let blocks = |x: &Inter| match v {
        // SAFETY: the arrays hold one int per remote rank at the root (MPI contract).
        Some((c, d)) => unsafe { varying(x, root_buf.0, c, d, root_buf.2) },
        None => uniform(x, root_buf.0, root_buf.1, root_buf.2),
    };
    let mine: Hop = (own.0 as *mut c_void, own.1, own.2, 0);
    // SAFETY: the buffers follow MPI's rules (this function's contract).
    unsafe {
        match (role(x, root)?, scatter) {
            (Role::Idle, _) => Ok(Outcome::Done),
            (Role::Root, false) => exchange(x, &blocks(x)?, &[]),
            (Role::Root, true) => exchange(x, &[], &blocks(x)?),
            (Role::Leaf(r), false) => exchange(x, &[], &[(mine.0, mine.1, mine.2, r)]),
            (Role::Leaf(r), true) => exchange(x, &[(mine.0, mine.1, mine.2, r)], &[]),
        }
    }
}

/// `MPI_Allgather`/`MPI_Allgatherv`: my block to every remote member, and theirs to me.
///
/// # Safety
/// The buffers and arrays follow MPI's rules for the call.
pub unsafe fn allgather(
    x: &Inter,
    send: (*const c_void, c_int, MpiDatatype),
    recv: (*mut c_void, c_int, MpiDatatype),
    v: Option<(*const c_int, *const c_int)>,
) -> MpiResult<Outcome> {
    if crate::util::in_place(send.0) {
        fail!(
            class::BUFFER,
            "MPI_IN_PLACE is not allowed on an intercommunicator"
        );
    }
    let recvs = match v {
        // SAFETY: the arrays hold one int per remote rank (MPI contract).
        Some((c, d)) => unsafe { varying(x, recv.0, c, d, recv.2) }?,
        None => uniform(x, recv.0, recv.1, recv.2)?,
    };
    let sends: Vec<Hop> = (0..x.remote_members.len() as c_int)
        .map(|r| (send.0 as *mut c_void, send.1, send.2, r))
        .collect();
    // SAFETY: this function's contract.
    unsafe { exchange(x, &recvs, &sends) }
}

/// `MPI_Alltoall` (`v` None), `MPI_Alltoallv` (element displacements) and
/// `MPI_Alltoallw` (`w`: byte displacements and per-peer types).
///
/// # Safety
/// The buffers and arrays follow MPI's rules for the call.
pub unsafe fn alltoall(
    x: &Inter,
    send: (*const c_void, c_int, MpiDatatype),
    recv: (*mut c_void, c_int, MpiDatatype),
    v: Option<[*const c_int; 4]>,
) -> MpiResult<Outcome> {
    if crate::util::in_place(send.0) {
        fail!(
            class::BUFFER,
            "MPI_IN_PLACE is not allowed on an intercommunicator"
        );
    }
    let (sends, recvs) = match v {
        // SAFETY: the arrays hold one int per remote rank (MPI contract).
        Some([sc, sd, rc, rd]) => unsafe {
            (
                varying(x, send.0, sc, sd, send.2)?,
                varying(x, recv.0, rc, rd, recv.2)?,
            )
        },
        None => (
            uniform(x, send.0, send.1, send.2)?,
            uniform(x, recv.0, recv.1, recv.2)?,
        ),
    };
    // SAFETY: this function's contract.
    unsafe { exchange(x, &recvs, &sends) }
}

/// `MPI_Alltoallw` across the groups: per-peer types and byte displacements.
///
/// # Safety
/// The buffers and arrays follow MPI's rules for `MPI_Alltoallw`.
pub unsafe fn alltoallw(
    x: &Inter,
    send: (
        *const c_void,
        *const c_int,
        *const c_int,
        *const MpiDatatype,
    ),
    recv: (*mut c_void, *const c_int, *const c_int, *const MpiDatatype),
) -> MpiResult<Outcome> {
    if crate::util::in_place(send.0) {
        fail!(
            class::BUFFER,
            "MPI_IN_PLACE is not allowed on an intercommunicator"
        );
    }
    let n = x.remote_members.len();
    let side = |buf: *const c_void, c: *const c_int, d: *const c_int, t: *const MpiDatatype| {
        // SAFETY: the arrays hold one entry per remote rank (MPI contract).
        let (c, d, t) = unsafe {
            (
                per_remote(c, n, "counts")?,
                per_remote(d, n, "displs")?,
                crate::util::array(t, n, "types")?,
            )
        };
        Ok::<Vec<Hop>, crate::error::MpiErr>(
            (0..n)
                .map(|r| {
                    let p = (buf as *mut u8).wrapping_offset(d[r] as isize) as *mut c_void;
                    (p, c[r], t[r], r as c_int)
                })
                .collect(),
        )
    };
    let sends = side(send.0, send.1, send.2, send.3)?;
    let recvs = side(recv.0 as *const c_void, recv.1, recv.2, recv.3)?;
    // SAFETY: this function's contract.
    unsafe { exchange(x, &recvs, &sends) }
}

/// The collectives not available on intercommunicators yet.
pub fn unsupported(comm: MpiComm, what: &str) -> MpiResult {
    if crate::intercomm::inter_of(comm).is_some() {
        fail!(
            class::UNSUPPORTED_OPERATION,
            "{what} on an intercommunicator is not supported yet (it is not defined on one, \
             or strobe does not implement it)"
        );
    }
    Ok(())
}
