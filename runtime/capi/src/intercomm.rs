//! Intercommunicators: `MPI_Intercomm_create`, `MPI_Intercomm_merge`, point to point
//! between the two groups, and collectives across them.
//!
//! An intercommunicator is three runtime communicators:
//!
//! - its *context*, created over both groups with `Comm::create_group(.., first)`: the
//!   scheduler knows it as an intercommunicator and lets each group's ranks name the other
//!   group's, so point-to-point calls (and their statuses) work unchanged through the
//!   handle, which holds `Comm::intercomm_view`;
//! - `local`, a dup of the local communicator, and `union`, an intracommunicator over both
//!   groups (the group with the lowest world rank first), both hidden handles with
//!   `MPI_ERRORS_RETURN`: collectives on the intercommunicator run over them with the
//!   intracommunicator code (so datatypes and ops behave the same), the hops between the
//!   groups as point-to-point messages on `union`, which carries nothing else.
//!
//! The contexts are created collectively over the members only (no other rank of
//! `MPI_COMM_WORLD` takes part), keyed by a hash of the members, the tag and the purpose.

use std::collections::HashMap;
use std::os::raw::{c_int, c_void};
use std::sync::{Arc, LazyLock, Mutex};

use strobe_runtime::api::Comm;
use strobe_runtime::calls::Call;

use crate::comm::{comm_of, members};
use crate::consts::*;
use crate::error::{entry, fail, MpiErr, MpiResult};
use crate::state::{self, st};
use crate::util::put;

/// `MPI_ROOT`: the root's own argument in a rooted collective on an intercommunicator.
pub const MPI_ROOT: c_int = -3;
/// Tag of the messages between the groups on `union` (which carries nothing else).
pub const HOP_TAG: c_int = 7;

/// One intercommunicator, as one member sees it.
pub struct Inter {
    /// Hidden handle of an intracommunicator over my group (my rank there is my rank in
    /// the intercommunicator).
    pub local: MpiComm,
    /// Hidden handle of an intracommunicator over both groups, the first group first.
    pub union: MpiComm,
    pub local_members: Arc<[u32]>,
    pub remote_members: Arc<[u32]>,
    /// My group is the first one in `union`.
    pub first: bool,
}

impl Inter {
    /// Rank in `union` of rank `r` of the remote group.
    pub fn remote_in_union(&self, r: c_int) -> c_int {
        if self.first {
            self.local_members.len() as c_int + r
        } else {
            r
        }
    }
}

static INTER: LazyLock<Mutex<HashMap<MpiComm, Arc<Inter>>>> = LazyLock::new(Default::default);

fn table() -> std::sync::MutexGuard<'static, HashMap<MpiComm, Arc<Inter>>> {
    INTER.lock().unwrap_or_else(|e| e.into_inner())
}

/// The intercommunicator behind handle `h`, if it is one.
pub fn inter_of(h: MpiComm) -> Option<Arc<Inter>> {
    table().get(&h).cloned()
}

/// FNV-1a over words: the same on every member (no per-process seed).
fn key(purpose: u64, words: impl IntoIterator<Item = u64>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ purpose;
    for w in words {
        for b in w.to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// Map a nested C call's return code to a result (hidden handles return their errors).
pub fn code(rc: c_int) -> MpiResult {
    if rc == class::SUCCESS {
        Ok(())
    } else {
        fail!(rc, "inside an intercommunicator operation")
    }
}

/// Register an intercommunicator between my group (`local`, an intracommunicator I own
/// and hand over) and `remote`; `salt` makes the creation's key unique.
fn build(eh: MpiErrhandler, local: Comm, remote: Vec<u32>, salt: &[u64]) -> MpiResult<MpiComm> {
    let mine = members(&local);
    if let Some(x) = remote.iter().find(|w| mine.contains(w)) {
        fail!(class::COMM, "world rank {x} is in both groups");
    }
    let first = mine.iter().min() < remote.iter().min();
    let (a, b) = if first {
        (&mine, &remote)
    } else {
        (&remote, &mine)
    };
    let union: Vec<u32> = a.iter().chain(b.iter()).copied().collect();
    let words = || {
        salt.iter()
            .copied()
            .chain(union.iter().map(|&w| u64::from(w)))
    };
    let world = comm_of(COMM_WORLD)?;
    let ctx = world.create_group(key(1, words()), &union, a.len())?;
    let u = world.create_group(key(2, words()), &union, 0)?;
    let view = Comm::intercomm_view(&ctx, local.rank(), &remote);
    let inter = Inter {
        local: state::insert_comm(local, ERRORS_RETURN),
        union: state::insert_comm(u, ERRORS_RETURN),
        local_members: Arc::from(mine),
        remote_members: Arc::from(remote),
        first,
    };
    let h = state::insert_comm(view, eh);
    table().insert(h, Arc::new(inter));
    Ok(h)
}

fn errhandler(h: MpiComm) -> MpiErrhandler {
    st().comms
        .get(&h)
        .map_or(ERRORS_ARE_FATAL, |e| e.errhandler)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Intercomm_create(
    local_comm: MpiComm,
    local_leader: c_int,
    peer_comm: MpiComm,
    remote_leader: c_int,
    tag: c_int,
    out: *mut MpiComm,
) -> c_int {
    entry(Call::IntercommCreate, local_comm, || {
        if out.is_null() {
            fail!(class::ARG, "newintercomm is NULL");
        }
        let l = comm_of(local_comm)?;
        if inter_of(local_comm).is_some() {
            fail!(class::COMM, "local_comm must be an intracommunicator");
        }
        if !(0..l.size()).contains(&local_leader) {
            fail!(class::RANK, "invalid local_leader {local_leader}");
        }
        let mine = members(&l);
        let mut remote: Vec<u32> = Vec::new();
        if l.rank() == local_leader {
            let p = comm_of(peer_comm)?;
            if inter_of(peer_comm).is_some() {
                fail!(class::COMM, "peer_comm must be an intracommunicator");
            }
            if !(0..p.size()).contains(&remote_leader) {
                fail!(class::RANK, "invalid remote_leader {remote_leader}");
            }
            let mut n = [0u32];
            let r = remote_leader;
            p.sendrecv(&[mine.len() as u32], r, tag, &mut n, r, tag)?;
            remote = vec![0; n[0] as usize];
            p.sendrecv(&mine, r, tag, &mut remote, r, tag)?;
        }
        let mut n = [remote.len() as u32];
        l.bcast(&mut n, local_leader)?;
        remote.resize(n[0] as usize, 0);
        l.bcast(&mut remote, local_leader)?;
        let local = l.dup()?;
        let h = build(errhandler(local_comm), local, remote, &[tag as u64])?;
        // SAFETY: `out` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(out, h, "newintercomm") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Intercomm_merge(
    inter: MpiComm,
    high: c_int,
    out: *mut MpiComm,
) -> c_int {
    entry(Call::IntercommMerge, inter, || {
        if out.is_null() {
            fail!(class::ARG, "newintracomm is NULL");
        }
        comm_of(inter)?;
        let Some(x) = inter_of(inter) else {
            fail!(class::COMM, "not an intercommunicator");
        };
        let u = comm_of(x.union)?;
        let n = u.size() as usize;
        let mut highs = vec![0i32; n];
        u.allgather(&[i32::from(high != 0)], &mut highs)?;
        // The group that passed high = false comes first; on a tie, the union's order.
        let k = if x.first {
            x.local_members.len()
        } else {
            x.remote_members.len()
        };
        let swap = highs[0] != 0 && highs[k] == 0;
        let me = u.rank() as usize;
        let key = match (swap, me < k) {
            (false, _) => me,
            (true, true) => me + (n - k),
            (true, false) => me - k,
        };
        let merged = u
            .split(Some(0), key as c_int)?
            .ok_or_else(|| MpiErr::new(class::INTERN, "merge produced no communicator"))?;
        let h = state::insert_comm(merged, errhandler(inter));
        // SAFETY: `out` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(out, h, "newintracomm") }
    })
}

/// `MPI_Comm_dup` of an intercommunicator: the same groups, new contexts.
pub fn dup(h: MpiComm, x: &Inter) -> MpiResult<MpiComm> {
    let local = comm_of(x.local)?.dup()?;
    let u2 = comm_of(x.union)?.dup()?;
    dup_from(h, x, local, u2)
}

/// `MPI_Comm_idup` of an intercommunicator, once the union is duplicated (`u2`, posted
/// without waiting by idup.rs): the local group's dup, then the new contexts.
pub fn dup_with(h: MpiComm, x: &Inter, u2: Comm) -> MpiResult<MpiComm> {
    let local = comm_of(x.local)?.dup()?;
    dup_from(h, x, local, u2)
}

/// The intercommunicator of [`dup`] from the dups of the local group and of the union.
fn dup_from(h: MpiComm, x: &Inter, local: Comm, u2: Comm) -> MpiResult<MpiComm> {
    let salt = [u64::from(u2.id()), 0xd0b];
    let out = build(errhandler(h), local, x.remote_members.to_vec(), &salt);
    u2.free()?;
    out
}

/// `MPI_Comm_split` of an intercommunicator (`colour` None: `MPI_UNDEFINED`): each group
/// splits by colour, and the members of one colour in both groups form a new
/// intercommunicator, ordered by key then old rank; `MPI_COMM_NULL` for a colour only
/// one group has. `MPI_Comm_create` on an intercommunicator is the split whose colour says
/// whether the rank is in its group's argument.
pub fn split(h: MpiComm, x: &Inter, colour: Option<c_int>, key: c_int) -> MpiResult<MpiComm> {
    let u = comm_of(x.union)?;
    let n = u.size() as usize;
    // Everyone's (colour, key), in union order.
    let mine = [colour.map_or(-1, i64::from), i64::from(key)];
    let mut all = vec![0i64; 2 * n];
    u.allgather(&mine, &mut all)?;
    let local_new = comm_of(x.local)?.split(colour, key)?;
    let Some(c) = colour else {
        return Ok(COMM_NULL);
    };
    let k = x.local_members.len();
    // The remote group's members, in union order, with their (colour, key).
    let remote_at = if x.first { k } else { 0 };
    let mut remote: Vec<(i64, usize, u32)> = (0..x.remote_members.len())
        .filter(|&r| all[2 * (remote_at + r)] == i64::from(c))
        .map(|r| (all[2 * (remote_at + r) + 1], r, x.remote_members[r]))
        .collect();
    remote.sort_unstable();
    let local_new = local_new.ok_or_else(|| MpiErr::new(class::INTERN, "split lost my colour"))?;
    if remote.is_empty() {
        local_new.free()?;
        return Ok(COMM_NULL);
    }
    let salt = [u64::from(u.id()), c as u64, 0x5b1];
    build(
        errhandler(h),
        local_new,
        remote.into_iter().map(|(_, _, w)| w).collect(),
        &salt,
    )
}

/// `MPI_Comm_free` of an intercommunicator: its hidden communicators go too.
pub fn free(h: MpiComm, x: &Inter) -> MpiResult {
    for hidden in [x.local, x.union] {
        let c = comm_of(hidden)?;
        c.free()?;
        st().comms.remove(&hidden);
    }
    table().remove(&h);
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_remote_group(comm: MpiComm, group: *mut MpiGroup) -> c_int {
    entry(Call::CommRemoteGroup, comm, || {
        comm_of(comm)?;
        let Some(x) = inter_of(comm) else {
            fail!(class::COMM, "not an intercommunicator");
        };
        if group.is_null() {
            fail!(class::ARG, "group is NULL");
        }
        let g = state::insert_group(x.remote_members.clone());
        // SAFETY: `group` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(group, g, "group") }
    })
}

/// What a rooted collective's `root` argument makes of this member.
pub enum Role {
    /// `MPI_ROOT`: the root itself.
    Root,
    /// `MPI_PROC_NULL`: a member of the root's group that takes no part.
    Idle,
    /// A member of the other group; the root is this rank of my remote group.
    Leaf(c_int),
}

pub fn role(x: &Inter, root: c_int) -> MpiResult<Role> {
    match root {
        MPI_ROOT => Ok(Role::Root),
        PROC_NULL => Ok(Role::Idle),
        r if (0..x.remote_members.len() as c_int).contains(&r) => Ok(Role::Leaf(r)),
        r => fail!(
            class::ROOT,
            "invalid root {r} on an intercommunicator (remote group of size {}; the root's \
             group passes MPI_ROOT or MPI_PROC_NULL)",
            x.remote_members.len()
        ),
    }
}

/// Send `n` elements of `dt` at `buf` to rank `r` of the remote group.
///
/// # Safety
/// `buf` holds `n` elements of `dt`.
pub unsafe fn hop_send(
    x: &Inter,
    buf: *const c_void,
    n: c_int,
    dt: MpiDatatype,
    r: c_int,
) -> MpiResult {
    let to = x.remote_in_union(r);
    // SAFETY: this function's contract.
    code(unsafe { crate::p2p::PMPI_Send(buf, n, dt, to, HOP_TAG, x.union) })
}

/// Receive `n` elements of `dt` into `buf` from rank `r` of the remote group.
///
/// # Safety
/// `buf` holds `n` writable elements of `dt`.
pub unsafe fn hop_recv(
    x: &Inter,
    buf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    r: c_int,
) -> MpiResult {
    let from = x.remote_in_union(r);
    let ignore = STATUS_IGNORE as *mut MpiStatus;
    // SAFETY: this function's contract.
    code(unsafe { crate::p2p::PMPI_Recv(buf, n, dt, from, HOP_TAG, x.union, ignore) })
}
