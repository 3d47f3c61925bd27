//! `MPI_Comm_idup` and `MPI_Comm_idup_with_info`: nonblocking communicator duplication.
//!
//! The dup descriptor is posted without waiting ([`Comm::post_dup`]); the scheduler
//! decides the new communicator at a slice boundary exactly as for `MPI_Comm_dup`, matched
//! with the members' other collectives on the parent in posting order, so several
//! outstanding idups and other traffic on the parent overlap as the standard allows.
//! When Wait/Test consume the completion (the hook in `request.rs`), the handle is made,
//! the parent's attributes are copied (MPI-3.1 6.4.2: at completion) and `*newcomm` is
//! written. Completion is asked through the rank context's choke point like any request,
//! so a Test outcome is recorded and replayed.
//!
//! An intercommunicator's dup is several runtime steps: the dup of its union (both groups)
//! is posted without waiting, the local group's dup and the new contexts are created when
//! the request completes (blocking collectives over its members, inside the Wait/Test
//! that completes it); docs/mpi-support.md lists this.

use std::collections::HashMap;
use std::os::raw::c_int;
use std::sync::{Arc, LazyLock, Mutex};

use strobe_runtime::api::{Comm, PendingDup};
use strobe_runtime::calls::Call;
use strobe_runtime::descriptor::Completion;

use crate::attrs::copy_attrs;
use crate::comm::{comm_of, new_comm_handle};
use crate::consts::*;
use crate::error::{entry, fail, MpiErr, MpiResult};
use crate::info::{comm_hints, InfoObj};
use crate::intercomm::{inter_of, Inter};
use crate::state::{insert_req, st};
use crate::util::put;

/// An idup waiting for its completion.
struct Idup {
    dup: PendingDup,
    parent: MpiComm,
    /// An intercommunicator's dup: `dup` is its union's; the rest is done at completion.
    inter: Option<Arc<Inter>>,
    /// Where the program wants the new handle (`MPI_Comm *`, kept as an address).
    out: usize,
    /// `MPI_Comm_idup_with_info`'s hints.
    hints: Option<InfoObj>,
}

/// Pending idups by runtime request id.
static PENDING: LazyLock<Mutex<HashMap<u64, Idup>>> = LazyLock::new(Default::default);

fn pending() -> std::sync::MutexGuard<'static, HashMap<u64, Idup>> {
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Called when Wait/Test consume the completion `c` of runtime request `id`: finish the
/// idup, if `id` is one. `ok`: the request succeeded.
pub fn on_complete(id: u64, c: &Completion, ok: bool) -> Option<MpiErr> {
    let p = pending().remove(&id)?;
    if !ok {
        return None;
    }
    let made: MpiResult = (|| {
        let comm = p.dup.finish(c)?;
        let h = match &p.inter {
            Some(x) => crate::intercomm::dup_with(p.parent, x, comm)?,
            None => new_comm_handle(p.parent, Some(comm)),
        };
        copy_attrs(p.parent, h)?;
        if let Some(i) = p.hints {
            st().comm_infos.insert(h, i);
        }
        // SAFETY: the program's `MPI_Comm *`, valid until the request completes (MPI
        // contract), checked non-NULL at the call.
        unsafe { put(p.out as *mut MpiComm, h, "newcomm") }
    })();
    made.err()
}

fn idup(
    comm: MpiComm,
    out: *mut MpiComm,
    req: *mut MpiRequest,
    hints: Option<InfoObj>,
) -> MpiResult {
    let c: Comm = comm_of(comm)?;
    if out.is_null() {
        fail!(class::ARG, "newcomm is NULL");
    }
    if req.is_null() {
        fail!(class::REQUEST, "request is NULL");
    }
    // An intercommunicator: its union (an intracommunicator over both groups) is
    // duplicated without waiting; the local group's dup and the new contexts are made at
    // completion (collectives over the members, which all complete the request).
    let inter = inter_of(comm);
    let posted_on = match &inter {
        Some(x) => comm_of(x.union)?,
        None => c,
    };
    // SAFETY: the pending dup (which owns the members buffer) stays in `PENDING` until
    // its completion is consumed.
    let dup = unsafe { posted_on.post_dup() }?;
    let id = dup.id();
    pending().insert(
        id,
        Idup {
            dup,
            parent: comm,
            inter,
            out: out as usize,
            hints,
        },
    );
    let entry = crate::request::ReqEntry {
        id,
        comm,
        is_recv: false,
        send_tmp: None,
        unpack: None,
    };
    let h = insert_req(entry);
    // SAFETY: checked non-NULL above; MPI's contract for the request argument.
    unsafe { put(req, h, "request") }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_idup(
    comm: MpiComm,
    out: *mut MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    entry(Call::CommIdup, comm, || idup(comm, out, req, None))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_idup_with_info(
    comm: MpiComm,
    info: c_int,
    out: *mut MpiComm,
    req: *mut MpiRequest,
) -> c_int {
    entry(Call::CommIdupWithInfo, comm, || {
        let hints = comm_hints(info)?;
        idup(comm, out, req, Some(hints))
    })
}
