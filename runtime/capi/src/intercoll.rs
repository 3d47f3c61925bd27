//! Collectives on intercommunicators (see `intercomm.rs`): each runs over the hidden
//! intracommunicators with the ordinary collective code, plus point-to-point hops between
//! the groups' leaders on `union`. Blocking only: the nonblocking forms run the blocking
//! one at the call and hand back a completed request (docs/mpi-support.md).

use std::os::raw::{c_int, c_void};

use crate::consts::*;
use crate::datatype::comm_type;
use crate::error::{fail, MpiResult};
use crate::icoll::{Mode, Outcome};
use crate::intercomm::{hop_recv, hop_send, role, Inter, Role};
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

/// The collectives not available on intercommunicators yet.
pub fn unsupported(comm: MpiComm, what: &str) -> MpiResult {
    if crate::intercomm::inter_of(comm).is_some() {
        fail!(
            class::UNSUPPORTED_OPERATION,
            "{what} on an intercommunicator is not supported yet (Barrier, Bcast, Reduce and \
             Allreduce are)"
        );
    }
    Ok(())
}
