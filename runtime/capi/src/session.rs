//! MPI-4 sessions (MPI-4.0 11.3), minimal but correct: `MPI_Session_init`/`finalize`,
//! `MPI_SESSION_NULL`, the process sets `mpi://WORLD` and `mpi://SELF`
//! (`MPI_Session_get_num_psets`, `get_nth_pset`, `get_pset_info`,
//! `MPI_Group_from_session_pset`), `MPI_Session_get_info` and `MPI_Comm_create_from_group`.
//!
//! A session attaches the rank to the job as `MPI_Init` does if nothing has yet (the
//! runtime has one attachment per process); the last session finalized detaches it as
//! `MPI_Finalize` does, unless the world model (`MPI_Init`) holds it too.
//! `MPI_Comm_create_from_group` is a creation over the group's members only (the
//! runtime's group creation, as `MPI_Comm_create_group`), keyed by the string tag, so it
//! is scheduled, recorded and replayed like every communicator creation. Pset names are
//! compared without regard to case (MPICH does the same). The thread level is the one
//! strobe provides, at most `MPI_THREAD_FUNNELED` (a deterministic replay needs the
//! calls of a rank in one order), whatever the `thread_level` hint asks.

use std::collections::HashMap;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int};
use std::sync::{Arc, LazyLock, Mutex};

use strobe_runtime::calls::Call;

use crate::comm::comm_of;
use crate::consts::*;
use crate::error::{entry, fail, MpiResult};
use crate::info::{info_of, insert_info, InfoObj, INFO_NULL};
use crate::state::{insert_comm, insert_group, st};
use crate::util::put;

pub const SESSION_NULL: c_int = 0;
const PSETS: [&str; 2] = ["mpi://WORLD", "mpi://SELF"];
const LEVELS: [&str; 4] = [
    "MPI_THREAD_SINGLE",
    "MPI_THREAD_FUNNELED",
    "MPI_THREAD_SERIALIZED",
    "MPI_THREAD_MULTIPLE",
];

struct Session {
    thread_level: c_int,
}

#[derive(Default)]
struct Sessions {
    live: HashMap<c_int, Session>,
    next: c_int,
    /// The sessions attached the rank (no `MPI_Init` before the first one).
    own_runtime: bool,
}

static SESSIONS: LazyLock<Mutex<Sessions>> = LazyLock::new(Default::default);

fn sessions() -> std::sync::MutexGuard<'static, Sessions> {
    SESSIONS.lock().unwrap_or_else(|e| e.into_inner())
}

fn check(h: c_int) -> MpiResult<c_int> {
    match sessions().live.get(&h) {
        Some(s) => Ok(s.thread_level),
        None => fail!(class::ARG, "invalid session handle {h}"),
    }
}

/// A C string argument.
///
/// # Safety
/// `p` must be NULL or NUL-terminated.
unsafe fn c_string(p: *const c_char, what: &str) -> MpiResult<String> {
    if p.is_null() {
        fail!(class::ARG, "{what} is NULL");
    }
    // SAFETY: non-NULL and NUL-terminated (MPI contract).
    Ok(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// The world ranks of process set `name`.
fn pset_members(name: &str) -> MpiResult<Vec<u32>> {
    let world = comm_of(COMM_WORLD)?;
    if name.eq_ignore_ascii_case(PSETS[0]) {
        Ok(crate::comm::members(&world))
    } else if name.eq_ignore_ascii_case(PSETS[1]) {
        Ok(world.world_rank_of(world.rank()).into_iter().collect())
    } else {
        fail!(
            class::ARG,
            "unknown process set {name:?} (strobe has mpi://WORLD and mpi://SELF)"
        )
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Session_init(
    info: c_int,
    _errhandler: MpiErrhandler,
    session: *mut c_int,
) -> c_int {
    entry(Call::SessionInit, COMM_WORLD, || {
        if session.is_null() {
            fail!(class::ARG, "session is NULL");
        }
        let asked = if info == INFO_NULL {
            None
        } else {
            info_of(info)?.get("thread_level").map(str::to_owned)
        };
        let level = match asked {
            Some(a) => match LEVELS.iter().position(|l| l.eq_ignore_ascii_case(&a)) {
                Some(i) => (i as c_int).min(THREAD_FUNNELED),
                None => fail!(class::ARG, "unknown thread_level {a:?}"),
            },
            None => THREAD_FUNNELED,
        };
        let started = st().initialized && !st().finalized;
        if !started {
            crate::env::init(level)?;
        }
        let mut s = sessions();
        s.own_runtime |= !started;
        let mut h = s.next.max(1);
        while s.live.contains_key(&h) {
            h = h.checked_add(1).unwrap_or(1);
        }
        s.next = h.checked_add(1).unwrap_or(1);
        s.live.insert(
            h,
            Session {
                thread_level: level,
            },
        );
        // SAFETY: checked non-NULL; the program's output argument.
        unsafe { put(session, h, "session") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Session_finalize(session: *mut c_int) -> c_int {
    entry(Call::SessionFinalize, COMM_WORLD, || {
        if session.is_null() {
            fail!(class::ARG, "session is NULL");
        }
        // SAFETY: non-NULL; the program's session handle.
        let h = unsafe { *session };
        let last_owner = {
            let mut s = sessions();
            if s.live.remove(&h).is_none() {
                fail!(class::ARG, "invalid session handle {h}");
            }
            let last = s.live.is_empty() && s.own_runtime;
            if last {
                s.own_runtime = false;
            }
            last
        };
        if last_owner {
            // SAFETY: no arguments.
            let rc = unsafe { crate::env::PMPI_Finalize() };
            if rc != class::SUCCESS {
                fail!(rc, "detaching from the job failed");
            }
        }
        // SAFETY: non-NULL; the program's session handle.
        unsafe { put(session, SESSION_NULL, "session") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Session_get_info(session: c_int, out: *mut c_int) -> c_int {
    entry(Call::SessionGetInfo, COMM_WORLD, || {
        let level = check(session)?;
        let mut i = InfoObj::default();
        i.set("thread_level".into(), LEVELS[level as usize].into());
        // SAFETY: the program's output argument.
        unsafe { put(out, insert_info(i), "info_used") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Session_get_num_psets(
    session: c_int,
    _info: c_int,
    n: *mut c_int,
) -> c_int {
    entry(Call::SessionGetNumPsets, COMM_WORLD, || {
        check(session)?;
        // SAFETY: the program's output argument.
        unsafe { put(n, PSETS.len() as c_int, "npset_names") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Session_get_nth_pset(
    session: c_int,
    _info: c_int,
    n: c_int,
    len: *mut c_int,
    name: *mut c_char,
) -> c_int {
    entry(Call::SessionGetNthPset, COMM_WORLD, || {
        check(session)?;
        let Some(p) = usize::try_from(n).ok().and_then(|i| PSETS.get(i)) else {
            fail!(
                class::ARG,
                "no process set number {n} (there are {})",
                PSETS.len()
            );
        };
        if len.is_null() {
            fail!(class::ARG, "pset_len is NULL");
        }
        // SAFETY: non-NULL; the program's in/out argument.
        let room = unsafe { *len };
        // MPI-4.0 11.3.2: a pset_len of 0 asks for the length (with the NUL) only.
        if room > 0 {
            if name.is_null() {
                fail!(class::ARG, "pset_name is NULL");
            }
            let k = p.len().min(room as usize - 1);
            // SAFETY: `name` holds `room` > `k` bytes (MPI contract).
            unsafe {
                std::ptr::copy_nonoverlapping(p.as_ptr().cast::<c_char>(), name, k);
                name.add(k).write(0);
            }
        }
        // SAFETY: non-NULL; the program's in/out argument.
        unsafe { put(len, p.len() as c_int + 1, "pset_len") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Session_get_pset_info(
    session: c_int,
    pset: *const c_char,
    out: *mut c_int,
) -> c_int {
    entry(Call::SessionGetPsetInfo, COMM_WORLD, || {
        check(session)?;
        // SAFETY: a C string argument (MPI contract).
        let name = unsafe { c_string(pset, "pset_name") }?;
        let n = pset_members(&name)?.len();
        let mut i = InfoObj::default();
        i.set("mpi_size".into(), n.to_string());
        // SAFETY: the program's output argument.
        unsafe { put(out, insert_info(i), "info") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Group_from_session_pset(
    session: c_int,
    pset: *const c_char,
    group: *mut MpiGroup,
) -> c_int {
    entry(Call::GroupFromSessionPset, COMM_WORLD, || {
        check(session)?;
        // SAFETY: a C string argument (MPI contract).
        let name = unsafe { c_string(pset, "pset_name") }?;
        let m = pset_members(&name)?;
        // SAFETY: the program's output argument.
        unsafe { put(group, insert_group(Arc::from(m)), "newgroup") }
    })
}

/// `MPI_Comm_create_from_group`'s key: the same on every member (FNV-1a over the tag and
/// the members).
fn tag_key(tag: &str, members: &[u32]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ 0x5e55;
    let bytes = tag
        .bytes()
        .chain(members.iter().flat_map(|m| m.to_le_bytes()));
    for b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_create_from_group(
    group: MpiGroup,
    tag: *const c_char,
    _info: c_int,
    errhandler: MpiErrhandler,
    out: *mut MpiComm,
) -> c_int {
    entry(Call::CommCreateFromGroup, COMM_WORLD, || {
        // SAFETY: a C string argument (MPI contract).
        let tag = unsafe { c_string(tag, "stringtag") }?;
        if out.is_null() {
            fail!(class::ARG, "newcomm is NULL");
        }
        let members: Vec<u32> = match st().groups.get(&group) {
            Some(g) if group != GROUP_NULL => g.to_vec(),
            _ => fail!(class::GROUP, "invalid group handle {group}"),
        };
        let world = comm_of(COMM_WORLD)?;
        let me = world.world_rank_of(world.rank()).unwrap_or(u32::MAX);
        if !members.contains(&me) {
            fail!(class::GROUP, "the calling process is not in the group");
        }
        let c = world.create_group(tag_key(&tag, &members), &members, 0)?;
        let eh = if errhandler == 0 {
            ERRORS_ARE_FATAL
        } else {
            errhandler
        };
        // SAFETY: checked non-NULL; the program's output argument.
        unsafe { put(out, insert_comm(c, eh), "newcomm") }
    })
}
