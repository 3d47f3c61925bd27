//! Requests: the C handle table and the Test/Wait family.
//!
//! A request is posted through the Rust API, which hands back its runtime id; the C layer
//! keeps the id with whatever must outlive the call (a packed send buffer, or a temporary
//! receive buffer to unpack into the user's non-contiguous datatype at completion).
//! Whether a request has completed is only ever asked through the rank context's choke
//! point: `RankCtx::poll_completed` for every Test, `RankCtx::wait_completed` for every
//! Wait, so recording and replay capture each timing-dependent outcome.

use std::os::raw::c_int;
use std::sync::Arc;
use strobe_runtime::calls::{Call, Primitive};

use strobe_runtime::api;
use strobe_runtime::descriptor::{Completion, DescKind, Descriptor, RtError, COMPLETION_CANCELLED};
use strobe_runtime::rank::{RankCtx, Want};

use crate::consts::*;
use crate::datatype::{any_type, TypeInfo};
use crate::env::ready;
use crate::error::{entry, fail, MpiErr, MpiResult};
use crate::state::{self, st};
use crate::util::{put, Bytes};

/// A receive into a non-contiguous datatype: unpack `tmp` into the user's buffer.
pub struct Unpack {
    pub tmp: Bytes,
    pub base: usize,
    pub count: usize,
    pub ty: Arc<TypeInfo>,
}

pub struct ReqEntry {
    /// The runtime's request id.
    pub id: u64,
    pub comm: MpiComm,
    /// Which side the request is (MPI_Cancel now cancels both; kept for diagnostics).
    #[allow(dead_code)]
    pub is_recv: bool,
    /// Keeps a packed send buffer alive until the runtime has read it (never read here).
    #[allow(dead_code)]
    pub send_tmp: Option<Bytes>,
    pub unpack: Option<Unpack>,
}

pub fn ctx() -> MpiResult<&'static RankCtx> {
    RankCtx::get().ok_or_else(|| MpiErr::new(class::OTHER, "MPI_Init has not been called"))
}

pub fn empty_status() -> MpiStatus {
    MpiStatus {
        source: ANY_SOURCE,
        tag: ANY_TAG,
        error: class::SUCCESS,
        cancelled: 0,
        bytes: 0,
    }
}

pub fn status_of(s: &api::Status) -> MpiStatus {
    MpiStatus {
        source: s.source,
        tag: s.tag,
        error: class::SUCCESS,
        cancelled: s.cancelled as c_int,
        bytes: s.bytes as i64,
    }
}

/// Store a status unless the caller passed `MPI_STATUS(ES)_IGNORE` (or NULL). A
/// successful status leaves the caller's `MPI_ERROR` field as it was: MPI-3.1 3.2.5,
/// calls set it only to report an error.
///
/// # Safety
/// `p` must be NULL, `MPI_STATUS(ES)_IGNORE`, or valid for writing `i + 1` statuses.
pub unsafe fn write_status(p: *mut MpiStatus, i: usize, s: MpiStatus) {
    if p.is_null() || p as usize == STATUS_IGNORE {
        return;
    }
    // SAFETY: MPI requires a status array with an entry per request.
    let slot = unsafe { p.add(i) };
    if s.error != class::SUCCESS {
        // SAFETY: as above.
        unsafe { slot.write(s) };
        return;
    }
    // Every field but MPI_ERROR, which may be uninitialised: written, never read.
    // SAFETY: as above; field pointers into the program's status.
    unsafe {
        std::ptr::addr_of_mut!((*slot).source).write(s.source);
        std::ptr::addr_of_mut!((*slot).tag).write(s.tag);
        std::ptr::addr_of_mut!((*slot).cancelled).write(s.cancelled);
        std::ptr::addr_of_mut!((*slot).bytes).write(s.bytes);
    }
}

/// Consume the completion of a finished request: its status, and its error if any.
fn finish(e: ReqEntry) -> (MpiStatus, Option<MpiErr>) {
    let Some(c) = RankCtx::get().and_then(|c| c.take(e.id)) else {
        let err = MpiErr::new(class::INTERN, format!("no completion for request {}", e.id));
        return (empty_status(), Some(err));
    };
    let (mut s, mut err) = completion_status(&c);
    // Nonblocking collectives (icoll.rs) finish here: unpack or copy out their results.
    // So do nonblocking dups (idup.rs): the new handle is made here.
    let late = crate::icoll::on_complete(e.id, err.is_none())
        .or_else(|| crate::idup::on_complete(e.id, &c, err.is_none()));
    if let Some(late) = late {
        if err.is_none() {
            s.error = late.class;
            err = Some(late);
        }
    }
    if let Some(u) = e.unpack {
        // SAFETY: the user's buffer was given to MPI_Irecv for `count` elements of `ty`
        // and is the program's until this completion is reported.
        unsafe {
            u.ty.unpack(
                u.tmp.as_slice(),
                c.bytes as usize,
                u.base as *mut u8,
                u.count,
            )
        };
    }
    (s, err)
}

/// The status and error a completion reports.
fn completion_status(c: &Completion) -> (MpiStatus, Option<MpiErr>) {
    let mut s = MpiStatus {
        source: c.source,
        tag: c.tag,
        error: class::SUCCESS,
        cancelled: (c.flags & COMPLETION_CANCELLED != 0) as c_int,
        bytes: c.bytes as i64,
    };
    let err = api::Error::from_rt(RtError::from_u32(c.error)).map(MpiErr::from);
    if let Some(e) = &err {
        s.error = e.class;
    }
    (s, err)
}

/// The communicator whose error handler applies to a call on `*req`.
///
/// # Safety
/// `req` must be NULL or valid for reading one handle.
pub unsafe fn req_comm(req: *const MpiRequest) -> MpiComm {
    if req.is_null() {
        return COMM_WORLD;
    }
    // SAFETY: non-null pointer to the caller's request handle.
    let h = unsafe { *req };
    let s = st();
    s.reqs
        .get(&h)
        .map(|r| r.comm)
        .or_else(|| s.persist.get(&h).map(|p| p.comm))
        .unwrap_or(COMM_WORLD)
}

/// The caller's array of `n` request handles (`MPI_ERR_ARG` if NULL while `n > 0`).
///
/// # Safety
/// `p` must be NULL or point at `n` handles, valid and not otherwise accessed for `'a`.
unsafe fn handles<'a>(p: *mut MpiRequest, n: c_int) -> MpiResult<&'a mut [MpiRequest]> {
    let n = crate::util::count(n, "count")?;
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        fail!(class::ARG, "array_of_requests is NULL");
    }
    // SAFETY: MPI requires the array to hold `n` handles.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
}

/// The active requests of an array: runtime ones (positions and ids) and local ones
/// (generalized, or complete at creation). Null handles and inactive persistent requests
/// are in neither: a Wait/Test treats them alike (MPI-3.1 3.7.3).
#[derive(Default)]
struct Pending {
    idx: Vec<usize>,
    ids: Vec<u64>,
    local: Vec<usize>,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.idx.is_empty() && self.local.is_empty()
    }
    fn is_active(&self, i: usize) -> bool {
        self.idx.contains(&i) || self.local.contains(&i)
    }
    /// Positions of the local requests already complete.
    fn local_done(&self, hs: &[MpiRequest]) -> Vec<usize> {
        self.local
            .iter()
            .copied()
            .filter(|&i| crate::grequest::is_done(hs[i]))
            .collect()
    }
    /// Block until every local request is complete.
    fn wait_local(&self, hs: &[MpiRequest]) {
        for &i in &self.local {
            crate::grequest::wait_done(hs[i]);
        }
    }
}

/// Sort the handles of `hs` (errors on unknown handles).
fn pending(hs: &[MpiRequest]) -> MpiResult<Pending> {
    let s = st();
    let mut p = Pending::default();
    for (i, &h) in hs.iter().enumerate() {
        if h == REQUEST_NULL {
            continue;
        }
        if let Some(r) = s.reqs.get(&h) {
            p.idx.push(i);
            p.ids.push(r.id);
        } else if s.local_reqs.contains_key(&h) {
            p.local.push(i);
        } else if !s.persist.contains_key(&h) {
            fail!(class::REQUEST, "invalid request handle {h}");
        }
    }
    Ok(p)
}

/// Write the empty status for every position of `hs` that is not active.
///
/// # Safety
/// As [`write_status`], for `hs.len()` statuses.
unsafe fn empty_statuses(hs: &[MpiRequest], p: &Pending, statuses: *mut MpiStatus) {
    for i in 0..hs.len() {
        if !p.is_active(i) {
            // SAFETY: this function's contract.
            unsafe { write_status(statuses, i, empty_status()) };
        }
    }
}

fn take_entry(h: MpiRequest) -> MpiResult<ReqEntry> {
    let mut s = st();
    let e = s.reqs.remove(&h);
    crate::state::forget_request(&mut s, h);
    drop(s);
    match e {
        Some(e) => Ok(e),
        None => fail!(class::REQUEST, "invalid request handle {h}"),
    }
}

/// Finish the requests at `done` (positions in `hs`), store their statuses, null their
/// handles (a persistent request's handle stays: it is inactive again). Returns the first
/// error. When one of them failed, a multi-completion call (`multi`: it returns
/// `MPI_ERR_IN_STATUS`) sets the `MPI_ERROR` field of every status it returns, to
/// `MPI_SUCCESS` for the others (MPI-3.1 3.7.5).
///
/// # Safety
/// `statuses` must be NULL, `MPI_STATUS(ES)_IGNORE` or hold a status for every slot `slot` gives.
unsafe fn complete(
    hs: &mut [MpiRequest],
    done: &[usize],
    statuses: *mut MpiStatus,
    multi: bool,
    slot: impl Fn(usize, usize) -> usize,
) -> MpiResult<Option<MpiErr>> {
    let mut results = Vec::with_capacity(done.len());
    for &i in done {
        let h = hs[i];
        let r = if crate::grequest::is_local(h) {
            crate::grequest::finish(h)
        } else {
            finish(take_entry(h)?)
        };
        if !crate::persist::is_persistent(h) {
            hs[i] = REQUEST_NULL;
        }
        results.push(r);
    }
    let failed = results.iter().any(|(_, e)| e.is_some());
    let mut first = None;
    for (k, (&i, (s, err))) in done.iter().zip(results).enumerate() {
        if multi && failed && !statuses.is_null() && statuses as usize != STATUS_IGNORE {
            // SAFETY: `statuses` has an entry per request (MPI contract).
            unsafe { statuses.add(slot(k, i)).write(s) };
        } else {
            // SAFETY: `statuses` is MPI_STATUS(ES)_IGNORE, NULL, or has an entry per
            // request (MPI contract).
            unsafe { write_status(statuses, slot(k, i), s) };
        }
        if first.is_none() {
            first = err;
        }
    }
    Ok(first)
}

/// `MPI_Wait` of `*req`.
///
/// # Safety
/// `req` must be NULL or valid for reading and writing one handle; `status` as
/// [`write_status`].
pub unsafe fn wait_one(req: *mut MpiRequest, status: *mut MpiStatus) -> MpiResult {
    ready()?;
    // SAFETY: `req` is the caller's array of request handles, or NULL (MPI contract).
    let hs = unsafe { handles(req, 1) }?;
    let p = pending(hs)?;
    if p.is_empty() {
        // SAFETY: `status` is MPI_STATUS(ES)_IGNORE, NULL, or has an entry per request (MPI
        // contract).
        unsafe { write_status(status, 0, empty_status()) };
        return Ok(());
    }
    if p.ids.is_empty() {
        p.wait_local(hs);
    } else {
        ctx()?.wait_completed(Primitive::Wait, &p.ids, Want::Any);
    }
    // SAFETY: the pointer arguments are this function's own, under MPI's rules for them.
    match unsafe { complete(hs, &[0], status, false, |_, _| 0) }? {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Wait(req: *mut MpiRequest, status: *mut MpiStatus) -> c_int {
    // SAFETY: `req` is NULL or points at a request handle (MPI contract).
    entry(Call::Wait, unsafe { req_comm(req) }, || {
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        unsafe { wait_one(req, status) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Test(
    req: *mut MpiRequest,
    flag: *mut c_int,
    status: *mut MpiStatus,
) -> c_int {
    // SAFETY: `req` is NULL or points at a request handle (MPI contract).
    entry(Call::Test, unsafe { req_comm(req) }, || {
        ready()?;
        // SAFETY: `req` is the caller's array of request handles, or NULL (MPI contract).
        let hs = unsafe { handles(req, 1) }?;
        let p = pending(hs)?;
        if p.is_empty() {
            // SAFETY: `status` is MPI_STATUS(ES)_IGNORE, NULL, or has an entry per request (MPI
            // contract).
            unsafe { write_status(status, 0, empty_status()) };
            // SAFETY: `flag` is a C output argument: NULL or writable (MPI contract).
            return unsafe { put(flag, 1, "flag") };
        }
        let done = if p.ids.is_empty() {
            !p.local_done(hs).is_empty()
        } else {
            !ctx()?
                .poll_completed(Primitive::Test, &p.ids, Want::Any)
                .is_empty()
        };
        if !done {
            // SAFETY: `flag` is a C output argument: NULL or writable (MPI contract).
            return unsafe { put(flag, 0, "flag") };
        }
        // SAFETY: `flag` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(flag, 1, "flag") }?;
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        match unsafe { complete(hs, &[0], status, false, |_, _| 0) }? {
            Some(e) => Err(e),
            None => Ok(()),
        }
    })
}

/// The communicator of the first active request of the caller's array.
///
/// # Safety
/// `p` must be NULL or point at `n` readable handles.
unsafe fn first_comm(p: *const MpiRequest, n: c_int) -> MpiComm {
    (0..n.max(0) as usize)
        .find_map(|i| {
            let h = if p.is_null() {
                REQUEST_NULL
            } else {
                // SAFETY: non-null, and holds `n` handles (this function's contract).
                unsafe { *p.add(i) }
            };
            // SAFETY: a pointer to a local handle.
            (h != REQUEST_NULL).then(|| unsafe { req_comm(&h) })
        })
        .unwrap_or(COMM_WORLD)
}

/// Statuses of a multi-completion call that hit errors: `MPI_ERR_IN_STATUS`.
fn in_status(e: Option<MpiErr>) -> MpiResult {
    match e {
        None => Ok(()),
        Some(e) => Err(MpiErr::new(
            class::IN_STATUS,
            format!(
                "a request failed: {}: {}",
                crate::error::class_name(e.class),
                e.msg
            ),
        )),
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Waitall(
    n: c_int,
    reqs: *mut MpiRequest,
    statuses: *mut MpiStatus,
) -> c_int {
    // SAFETY: `reqs` is NULL or the caller's array of request handles (MPI contract).
    entry(Call::Waitall, unsafe { first_comm(reqs, n) }, || {
        ready()?;
        // SAFETY: `reqs` is the caller's array of request handles, or NULL (MPI contract).
        let hs = unsafe { handles(reqs, n) }?;
        let p = pending(hs)?;
        // SAFETY: `statuses` is MPI_STATUSES_IGNORE, NULL, or has an entry per request.
        unsafe { empty_statuses(hs, &p, statuses) };
        if !p.ids.is_empty() {
            ctx()?.wait_completed(Primitive::Waitall, &p.ids, Want::All);
        }
        p.wait_local(hs);
        let mut all: Vec<usize> = p.idx.iter().chain(&p.local).copied().collect();
        all.sort_unstable();
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        in_status(unsafe { complete(hs, &all, statuses, true, |_, i| i) }?)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Testall(
    n: c_int,
    reqs: *mut MpiRequest,
    flag: *mut c_int,
    statuses: *mut MpiStatus,
) -> c_int {
    // SAFETY: `reqs` is NULL or the caller's array of request handles (MPI contract).
    entry(Call::Testall, unsafe { first_comm(reqs, n) }, || {
        ready()?;
        // SAFETY: `reqs` is the caller's array of request handles, or NULL (MPI contract).
        let hs = unsafe { handles(reqs, n) }?;
        let p = pending(hs)?;
        let all = p.local_done(hs).len() == p.local.len()
            && ctx()?
                .poll_completed(Primitive::Testall, &p.ids, Want::All)
                .len()
                == p.ids.len();
        if !all {
            // SAFETY: `flag` is a C output argument: NULL or writable (MPI contract).
            return unsafe { put(flag, 0, "flag") };
        }
        // SAFETY: `flag` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(flag, 1, "flag") }?;
        // SAFETY: `statuses` is MPI_STATUSES_IGNORE, NULL, or has an entry per request.
        unsafe { empty_statuses(hs, &p, statuses) };
        let mut all: Vec<usize> = p.idx.iter().chain(&p.local).copied().collect();
        all.sort_unstable();
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        in_status(unsafe { complete(hs, &all, statuses, true, |_, i| i) }?)
    })
}

/// `MPI_Waitany`/`MPI_Testany`: the position of one complete active request, if any
/// (`block`: wait for one). A complete local request is taken before asking the runtime.
fn any_done(
    hs: &[MpiRequest],
    p: &Pending,
    block: bool,
    call: Primitive,
) -> MpiResult<Option<usize>> {
    if let Some(&i) = p.local_done(hs).first() {
        return Ok(Some(i));
    }
    if p.ids.is_empty() {
        if !block {
            return Ok(None);
        }
        loop {
            if let Some(&i) = p.local_done(hs).first() {
                return Ok(Some(i));
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
    let got = if block {
        ctx()?.wait_completed(call, &p.ids, Want::Any)
    } else {
        ctx()?.poll_completed(call, &p.ids, Want::Any)
    };
    Ok(got.first().map(|&k| p.idx[k]))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Waitany(
    n: c_int,
    reqs: *mut MpiRequest,
    index: *mut c_int,
    status: *mut MpiStatus,
) -> c_int {
    // SAFETY: `reqs` is NULL or the caller's array of request handles (MPI contract).
    entry(Call::Waitany, unsafe { first_comm(reqs, n) }, || {
        ready()?;
        // SAFETY: `reqs` is the caller's array of request handles, or NULL (MPI contract).
        let hs = unsafe { handles(reqs, n) }?;
        let p = pending(hs)?;
        if p.is_empty() {
            // SAFETY: `status` is MPI_STATUS(ES)_IGNORE, NULL, or has an entry per request (MPI
            // contract).
            unsafe { write_status(status, 0, empty_status()) };
            // SAFETY: `index` is a C output argument: NULL or writable (MPI contract).
            return unsafe { put(index, UNDEFINED, "index") };
        }
        let i = any_done(hs, &p, true, Primitive::Waitany)?.expect("a blocking wait returns one");
        // SAFETY: `index` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(index, i as c_int, "index") }?;
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        match unsafe { complete(hs, &[i], status, false, |_, _| 0) }? {
            Some(e) => Err(e),
            None => Ok(()),
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Testany(
    n: c_int,
    reqs: *mut MpiRequest,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MpiStatus,
) -> c_int {
    // SAFETY: `reqs` is NULL or the caller's array of request handles (MPI contract).
    entry(Call::Testany, unsafe { first_comm(reqs, n) }, || {
        ready()?;
        // SAFETY: `reqs` is the caller's array of request handles, or NULL (MPI contract).
        let hs = unsafe { handles(reqs, n) }?;
        let p = pending(hs)?;
        if p.is_empty() {
            // SAFETY: `status` is MPI_STATUS(ES)_IGNORE, NULL, or has an entry per request (MPI
            // contract).
            unsafe { write_status(status, 0, empty_status()) };
            // SAFETY: `index` is a C output argument: NULL or writable (MPI contract).
            unsafe { put(index, UNDEFINED, "index") }?;
            // SAFETY: `flag` is a C output argument: NULL or writable (MPI contract).
            return unsafe { put(flag, 1, "flag") };
        }
        let Some(i) = any_done(hs, &p, false, Primitive::Testany)? else {
            // SAFETY: `index` is a C output argument: NULL or writable (MPI contract).
            unsafe { put(index, UNDEFINED, "index") }?;
            // SAFETY: `flag` is a C output argument: NULL or writable (MPI contract).
            return unsafe { put(flag, 0, "flag") };
        };
        // SAFETY: `index` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(index, i as c_int, "index") }?;
        // SAFETY: `flag` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(flag, 1, "flag") }?;
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        match unsafe { complete(hs, &[i], status, false, |_, _| 0) }? {
            Some(e) => Err(e),
            None => Ok(()),
        }
    })
}

/// `MPI_Waitsome`/`MPI_Testsome`: positions of the complete active requests (`block`:
/// at least one). Complete local requests are reported without asking the runtime.
fn some_done(hs: &[MpiRequest], p: &Pending, block: bool) -> MpiResult<Vec<usize>> {
    let local = p.local_done(hs);
    if !local.is_empty() || (p.ids.is_empty() && !block) {
        return Ok(local);
    }
    if p.ids.is_empty() {
        return Ok(any_done(hs, p, true, Primitive::Waitsome)?
            .into_iter()
            .collect());
    }
    let c = ctx()?;
    let got = if block {
        c.wait_completed(Primitive::Waitsome, &p.ids, Want::Some)
    } else {
        c.poll_completed(Primitive::Testsome, &p.ids, Want::Some)
    };
    let mut done: Vec<usize> = got.iter().map(|&k| p.idx[k]).collect();
    done.sort_unstable();
    Ok(done)
}

/// # Safety
/// `reqs` must hold `n` handles; `outcount`, `indices` (room for `n`) and `statuses` (room for `n`, or ignore) must be NULL or writable.
unsafe fn some(
    call: Call,
    block: bool,
    n: c_int,
    reqs: *mut MpiRequest,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MpiStatus,
) -> c_int {
    // SAFETY: `reqs` is NULL or the caller's array of request handles (MPI contract).
    entry(call, unsafe { first_comm(reqs, n) }, || {
        ready()?;
        // SAFETY: `reqs` is the caller's array of request handles, or NULL (MPI contract).
        let hs = unsafe { handles(reqs, n) }?;
        let p = pending(hs)?;
        if p.is_empty() {
            // SAFETY: `outcount` is a C output argument: NULL or writable (MPI contract).
            return unsafe { put(outcount, UNDEFINED, "outcount") };
        }
        let done = some_done(hs, &p, block)?;
        // SAFETY: `outcount` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(outcount, done.len() as c_int, "outcount") }?;
        if !done.is_empty() && indices.is_null() {
            fail!(class::ARG, "array_of_indices is NULL");
        }
        for (k, &i) in done.iter().enumerate() {
            // SAFETY: MPI requires room for `incount` indices; k < incount.
            unsafe { indices.add(k).write(i as c_int) };
        }
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        in_status(unsafe { complete(hs, &done, statuses, true, |k, _| k) }?)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Waitsome(
    n: c_int,
    reqs: *mut MpiRequest,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MpiStatus,
) -> c_int {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    unsafe { some(Call::Waitsome, true, n, reqs, outcount, indices, statuses) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Testsome(
    n: c_int,
    reqs: *mut MpiRequest,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MpiStatus,
) -> c_int {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    unsafe { some(Call::Testsome, false, n, reqs, outcount, indices, statuses) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Request_free(req: *mut MpiRequest) -> c_int {
    // SAFETY: `req` is NULL or points at a request handle (MPI contract).
    entry(Call::RequestFree, unsafe { req_comm(req) }, || {
        ready()?;
        // SAFETY: `req` is the caller's array of request handles, or NULL (MPI contract).
        let hs = unsafe { handles(req, 1) }?;
        let h = hs[0];
        if h == REQUEST_NULL {
            fail!(class::REQUEST, "MPI_REQUEST_NULL cannot be freed");
        }
        hs[0] = REQUEST_NULL;
        if crate::persist::is_persistent(h) {
            crate::persist::free(h);
            return Ok(());
        }
        if crate::grequest::is_local(h) {
            return crate::grequest::free_local(h).map_or(Ok(()), Err);
        }
        let e = take_entry(h)?;
        // It completes in the background; its buffers live until MPI_Finalize reaps it.
        st().detached.push(e);
        Ok(())
    })
}

/// `MPI_Cancel`: a send or receive not yet matched is cancelled at the next slice
/// boundary (the request then completes with `MPI_Test_cancelled` true); whether it was
/// still unmatched is the scheduler's decision there, recorded and replayed like any
/// other. A generalized request's cancel function is called; requests complete at
/// creation (`MPI_Ibsend`) and inactive persistent requests are left as they are.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Cancel(req: *mut MpiRequest) -> c_int {
    // SAFETY: `req` is NULL or points at a request handle (MPI contract).
    entry(Call::Cancel, unsafe { req_comm(req) }, || {
        ready()?;
        // SAFETY: `req` is the caller's array of request handles, or NULL (MPI contract).
        let hs = unsafe { handles(req, 1) }?;
        let h = hs[0];
        let id = st().reqs.get(&h).map(|r| r.id);
        match id {
            Some(id) => {
                let d = Descriptor {
                    kind: DescKind::Cancel as u8,
                    aux: id,
                    ..Default::default()
                };
                ctx()?.call(d);
                Ok(())
            }
            None if crate::grequest::is_local(h) => crate::grequest::cancel_local(h),
            None if crate::persist::is_persistent(h) => Ok(()),
            None => fail!(class::REQUEST, "invalid request handle {h}"),
        }
    })
}

/// `MPI_Request_get_status`: whether the request is complete, and its status, without
/// freeing it (the completion stays for the Wait/Test that frees the request; a staged
/// receive is unpacked now, as the program may read the buffer).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Request_get_status(
    h: MpiRequest,
    flag: *mut c_int,
    status: *mut MpiStatus,
) -> c_int {
    // SAFETY: a pointer to a local handle.
    entry(Call::RequestGetStatus, unsafe { req_comm(&h) }, || {
        ready()?;
        let p = pending(&[h])?;
        let (s, err) = if p.is_empty() {
            (empty_status(), None)
        } else if !p.local.is_empty() {
            if !crate::grequest::is_done(h) {
                // SAFETY: `flag` is a C output argument: NULL or writable (MPI contract).
                return unsafe { put(flag, 0, "flag") };
            }
            crate::grequest::peek_status(h)
        } else {
            let id = p.ids[0];
            let c = ctx()?;
            let found = !c
                .poll_completed(Primitive::Test, &[id], Want::Any)
                .is_empty();
            let Some(c) = found.then(|| c.peek(id)).flatten() else {
                // SAFETY: `flag` is a C output argument: NULL or writable (MPI contract).
                return unsafe { put(flag, 0, "flag") };
            };
            let unpack = st().reqs.get_mut(&h).and_then(|e| e.unpack.take());
            if let Some(u) = unpack {
                // SAFETY: as in `finish`: the program's receive buffer, complete now.
                unsafe {
                    u.ty.unpack(
                        u.tmp.as_slice(),
                        c.bytes as usize,
                        u.base as *mut u8,
                        u.count,
                    )
                };
            }
            completion_status(&c)
        };
        // SAFETY: `flag` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(flag, 1, "flag") }?;
        // SAFETY: `status` is MPI_STATUS_IGNORE, NULL, or writable (MPI contract).
        unsafe { write_status(status, 0, s) };
        err.map_or(Ok(()), Err)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Test_cancelled(status: *const MpiStatus, flag: *mut c_int) -> c_int {
    entry(Call::TestCancelled, COMM_WORLD, || {
        if status.is_null() || status as usize == STATUS_IGNORE {
            fail!(class::ARG, "status is NULL or MPI_STATUS_IGNORE");
        }
        // SAFETY: non-null pointer to a status the program owns.
        let s = unsafe { *status };
        // SAFETY: `flag` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(flag, s.cancelled, "flag") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Get_count(
    status: *const MpiStatus,
    dt: MpiDatatype,
    out: *mut c_int,
) -> c_int {
    entry(Call::GetCount, COMM_WORLD, || {
        if status.is_null() || status as usize == STATUS_IGNORE {
            fail!(class::ARG, "status is NULL or MPI_STATUS_IGNORE");
        }
        // SAFETY: non-null pointer to a status the program owns.
        let s = unsafe { *status };
        let t = any_type(dt)?;
        let bytes = s.bytes.max(0) as usize;
        let n = if t.size == 0 {
            if bytes == 0 {
                0
            } else {
                UNDEFINED
            }
        } else if bytes % t.size != 0 {
            UNDEFINED
        } else {
            c_int::try_from(bytes / t.size).unwrap_or(UNDEFINED)
        };
        // SAFETY: `out` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(out, n, "count") }
    })
}

/// Wait for every detached request (freed while active, buffered sends) and drop it.
pub fn reap_detached() {
    let list = std::mem::take(&mut st().detached);
    reap(list);
    reap_bsends();
}

/// Wait for every buffered send: the attached buffer is then free again.
pub fn reap_bsends() {
    let list = std::mem::take(&mut st().bsends);
    reap(list);
    st().bsend_used = 0;
}

fn reap(list: Vec<ReqEntry>) {
    if list.is_empty() {
        return;
    }
    if let Some(c) = RankCtx::get() {
        let ids: Vec<u64> = list.iter().map(|e| e.id).collect();
        c.wait_completed(Primitive::Waitall, &ids, Want::All);
        for id in ids {
            c.take(id);
        }
    }
    drop(list);
}

/// Register a posted request and return its handle.
pub fn register(e: ReqEntry) -> MpiRequest {
    state::insert_req(e)
}
