//! Non-blocking requests: [`scope`], [`Request`] and the `wait_*`/`test_*` functions.
//!
//! # Why requests live in a scope
//!
//! The runtime writes into a receive buffer (and reads a send buffer) until the request
//! completes, from another thread or process. A request that borrows its buffer is not
//! enough: `std::mem::forget` (or a leaked `Rc` cycle) ends the borrow without running the
//! request's `Drop`, and safe code could then free the buffer while the runtime still
//! writes into it. So, as in rsmpi and `std::thread::scope`, every non-blocking call takes
//! a [`Scope`] and borrows its buffer for the *whole* scope; [`scope`] does not return
//! before every request posted in it has completed, whether it was waited on, dropped,
//! forgotten or leaked. The buffers are therefore borrowed until nothing can touch them.
//!
//! See [`scope`] for examples, including what does not compile.
//!
//! The C ABI cannot use scopes (an `MPI_Request` outlives any Rust frame); it posts through
//! the `unsafe` raw path ([`super::Comm::post_send_unscoped`],
//! [`super::Comm::post_recv_unscoped`]), whose caller promises the memory stays valid until
//! completion.

use std::collections::HashSet;
use std::marker::PhantomData;
use std::sync::{Mutex, MutexGuard};

use super::types::finish;
use super::{ctx, Error, Result, Status};
use crate::descriptor::{DescKind, Descriptor};
use crate::mmds::{self, Primitive};
use crate::rank::{RankCtx, Want};

/// Ids of the requests posted in a scope that are not known complete yet.
#[derive(Debug, Default)]
pub(super) struct Outstanding(Mutex<HashSet<u64>>);

impl Outstanding {
    fn lock(&self) -> MutexGuard<'_, HashSet<u64>> {
        // Never held across user code, so a poisoned lock still holds a consistent set.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Where non-blocking calls post: see [`scope`]. `'scope` is the scope's own lifetime,
/// `'env` that of everything it borrows (as in `std::thread::Scope`).
#[derive(Debug)]
pub struct Scope<'scope, 'env: 'scope> {
    outstanding: Outstanding,
    // Invariant in both lifetimes, so `'scope` cannot be shortened to let a borrow end
    // before the scope does.
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

impl<'scope> Scope<'scope, '_> {
    /// Register a posted request with this scope.
    pub(super) fn adopt(&'scope self, id: u64, kind: DescKind) -> Request<'scope> {
        self.outstanding.lock().insert(id);
        Request {
            id,
            kind,
            completed: false,
            scope: &self.outstanding,
        }
    }

    /// Wait for every request of this scope that is still outstanding (forgotten or
    /// leaked ones: the others were completed or waited for when dropped).
    fn complete_outstanding(&self) {
        let ids: Vec<u64> = self.outstanding.lock().drain().collect();
        if ids.is_empty() {
            return;
        }
        // Measured and reported (deadlock reports) as the `MPI_Waitall` it is. Want::All
        // is not timing-dependent, so nothing is recorded and replay needs nothing.
        let _mmds = mmds::enter(Primitive::Waitall);
        if let Some(c) = RankCtx::get() {
            c.wait_completed(Primitive::Waitall, &ids, Want::All);
            for id in ids {
                c.take(id);
            }
        }
    }
}

/// Run `f` with a [`Scope`] for non-blocking calls, and return only once every request
/// posted in it has completed (those still outstanding when `f` returns or unwinds are
/// waited for here). Buffers given to non-blocking calls are borrowed for the whole scope,
/// so safe code cannot free or touch them while the runtime may use them, even if a
/// request is forgotten.
///
/// ```no_run
/// use strobe_runtime::api;
/// let world = api::init().expect("init");
/// let mut got = [0i32; 4];
/// let mine = [world.rank(); 4];
/// let peer = (world.rank() + 1) % world.size();
/// let from = (world.rank() + world.size() - 1) % world.size();
/// api::scope(|s| -> api::Result<()> {
///     let r = world.irecv(s, &mut got, from, 0)?;
///     let q = world.isend(s, &mine, peer, 0)?;
///     api::wait_all(vec![r, q])?;
///     Ok(())
/// })
/// .expect("exchange");
/// api::finalize();
/// ```
///
/// A buffer must outlive the scope, so a request cannot outlive its buffer:
///
/// ```compile_fail,E0597
/// use strobe_runtime::api;
/// let world = api::init().expect("init");
/// api::scope(|s| {
///     let buf = vec![0u8; 16];
///     let r = world.isend(s, &buf, 0, 0).expect("isend");
///     std::mem::forget(r);
///     // `buf` is dropped here, but the scope borrows it until its end: does not compile.
/// });
/// ```
///
/// and a forgotten request still keeps its buffer borrowed until the scope ends:
///
/// ```compile_fail,E0506
/// use strobe_runtime::api;
/// let world = api::init().expect("init");
/// let mut buf = [0u8; 16];
/// api::scope(|s| {
///     let r = world.irecv(s, &mut buf, 0, 0).expect("irecv");
///     std::mem::forget(r);
///     buf[0] = 1; // the runtime may still write here: does not compile.
/// });
/// ```
///
pub fn scope<'env, F, R>(f: F) -> R
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
{
    struct CompleteOnExit<'a, 'scope, 'env>(&'a Scope<'scope, 'env>);
    impl Drop for CompleteOnExit<'_, '_, '_> {
        fn drop(&mut self) {
            self.0.complete_outstanding();
        }
    }
    let s = Scope {
        outstanding: Outstanding::default(),
        _scope: PhantomData,
        _env: PhantomData,
    };
    // Also on unwinding: the buffers outside the scope are freed only after this.
    let _complete = CompleteOnExit(&s);
    f(&s)
}

/// A non-blocking operation in flight, posted in a [`Scope`] whose buffers it uses.
/// Dropping an unfinished request blocks until it completes; forgetting it leaves it to
/// the end of its scope.
#[must_use = "dropping a request blocks until it completes"]
#[derive(Debug)]
pub struct Request<'scope> {
    id: u64,
    kind: DescKind,
    completed: bool,
    scope: &'scope Outstanding,
}

impl Request<'_> {
    /// The runtime's request id.
    pub fn id(&self) -> u64 {
        self.id
    }
    /// What was posted.
    pub fn kind(&self) -> DescKind {
        self.kind
    }
    /// Whether `test`/`test_*` already reported this request complete (it is inactive).
    pub fn is_completed(&self) -> bool {
        self.completed
    }

    /// The request's completion was consumed: it is inactive, and its scope need not wait.
    fn set_completed(&mut self) {
        self.completed = true;
        self.scope.lock().remove(&self.id);
    }

    /// `MPI_Wait`.
    #[track_caller]
    pub fn wait(mut self) -> Result<Status> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = mmds::enter(Primitive::Wait);
        if self.completed {
            return Ok(Status::EMPTY);
        }
        let c = ctx().wait(Primitive::Wait, self.id);
        self.set_completed();
        finish(&c)
    }

    /// `MPI_Test`: `Some` once complete (later calls give the empty status).
    #[track_caller]
    pub fn test(&mut self) -> Result<Option<Status>> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = mmds::enter(Primitive::Test);
        if self.completed {
            return Ok(Some(Status::EMPTY));
        }
        let c = ctx();
        if c.poll_completed(Primitive::Test, &[self.id], Want::Any)
            .is_empty()
        {
            return Ok(None);
        }
        let comp = c.take(self.id).expect("completion present after test");
        self.set_completed();
        finish(&comp).map(Some)
    }

    /// `MPI_Cancel`: only receives can be cancelled; it succeeds if the receive is not
    /// matched yet, and the request then completes with `Status::cancelled`. Blocks until
    /// the next slice boundary (when the runtime processes the cancel). The request must
    /// still be waited on or tested.
    #[track_caller]
    pub fn cancel(&mut self) -> Result<()> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = mmds::enter(Primitive::Cancel);
        if self.completed || self.kind != DescKind::Recv {
            return Ok(());
        }
        let d = Descriptor {
            kind: DescKind::Cancel as u8,
            aux: self.id,
            ..Default::default()
        };
        finish(&ctx().call(d)).map(|_| ())
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        if !self.completed {
            // Dropping an active request waits for it: measured as the wait it is.
            let _mmds = mmds::enter(Primitive::Wait);
            if let Some(c) = RankCtx::get() {
                let _ = c.wait(Primitive::Wait, self.id);
            }
            self.set_completed();
        }
    }
}

/// Indices and ids of the active requests.
fn active(reqs: &[Request<'_>]) -> (Vec<usize>, Vec<u64>) {
    reqs.iter()
        .enumerate()
        .filter(|(_, r)| !r.completed)
        .map(|(i, r)| (i, r.id))
        .unzip()
}

/// Ask the rank context (the timing choke point) which active requests the call reports,
/// as indices into `reqs`.
fn reported(reqs: &[Request<'_>], call: Primitive, want: Want, block: bool) -> Vec<usize> {
    let (idx, ids) = active(reqs);
    let c = ctx();
    let got = if block {
        c.wait_completed(call, &ids, want)
    } else {
        c.poll_completed(call, &ids, want)
    };
    got.into_iter().map(|k| idx[k]).collect()
}

/// Consume the completions of `reqs[i]` for each `i` in `idx` (all complete).
fn take_some(reqs: &mut [Request<'_>], idx: &[usize]) -> Result<Vec<(usize, Status)>> {
    let c = ctx();
    let mut out = Vec::with_capacity(idx.len());
    let mut first_err = None;
    for &i in idx {
        let comp = c.take(reqs[i].id).expect("completion present");
        reqs[i].set_completed();
        match finish(&comp) {
            Ok(s) => out.push((i, s)),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        None => Ok(out),
        Some(e) => Err(e),
    }
}

/// `MPI_Waitall`. Statuses are in request order; on any error every request has still
/// completed and the first error is returned.
#[track_caller]
pub fn wait_all(mut reqs: Vec<Request<'_>>) -> Result<Vec<Status>> {
    let _site = crate::callsite::enter_rust(std::panic::Location::caller());
    let _mmds = mmds::enter(Primitive::Waitall);
    let idx = reported(&reqs, Primitive::Waitall, Want::All, true);
    let got = take_some(&mut reqs, &idx)?;
    let mut st = vec![Status::EMPTY; reqs.len()];
    for (i, s) in got {
        st[i] = s;
    }
    Ok(st)
}

/// `MPI_Waitany`: waits for one active request, removes it from `reqs` and returns its
/// index (the lowest among those completed) and status. `Error::Arg` if none is active.
#[track_caller]
pub fn wait_any(reqs: &mut Vec<Request<'_>>) -> Result<(usize, Status)> {
    let _site = crate::callsite::enter_rust(std::panic::Location::caller());
    let _mmds = mmds::enter(Primitive::Waitany);
    if active(reqs).0.is_empty() {
        return Err(Error::Arg);
    }
    let i = reported(reqs, Primitive::Waitany, Want::Any, true)[0];
    let r = take_some(reqs, &[i]);
    drop(reqs.remove(i));
    r.map(|v| v[0])
}

/// `MPI_Waitsome`: waits for at least one active request, removes every completed one
/// from `reqs` and returns their original indices (ascending) and statuses. On an error
/// the completed requests are still removed and the first error is returned.
#[track_caller]
pub fn wait_some(reqs: &mut Vec<Request<'_>>) -> Result<Vec<(usize, Status)>> {
    let _site = crate::callsite::enter_rust(std::panic::Location::caller());
    let _mmds = mmds::enter(Primitive::Waitsome);
    if active(reqs).0.is_empty() {
        return Ok(Vec::new());
    }
    let idx = reported(reqs, Primitive::Waitsome, Want::Some, true);
    let r = take_some(reqs, &idx);
    for &i in idx.iter().rev() {
        drop(reqs.remove(i));
    }
    r
}

/// `MPI_Testall`: all or nothing. `Some` (statuses in order; inactive requests give the
/// empty status) when every request has completed, and then they are all inactive.
#[track_caller]
pub fn test_all(reqs: &mut [Request<'_>]) -> Result<Option<Vec<Status>>> {
    let _site = crate::callsite::enter_rust(std::panic::Location::caller());
    let _mmds = mmds::enter(Primitive::Testall);
    let (act, _) = active(reqs);
    let idx = reported(reqs, Primitive::Testall, Want::All, false);
    if idx.len() != act.len() {
        return Ok(None);
    }
    let got = take_some(reqs, &idx)?;
    let mut st = vec![Status::EMPTY; reqs.len()];
    for (i, s) in got {
        st[i] = s;
    }
    Ok(Some(st))
}

/// `MPI_Testany`: the lowest-indexed active request that completed, now inactive.
/// `None` if none has (or none is active).
#[track_caller]
pub fn test_any(reqs: &mut [Request<'_>]) -> Result<Option<(usize, Status)>> {
    let _site = crate::callsite::enter_rust(std::panic::Location::caller());
    let _mmds = mmds::enter(Primitive::Testany);
    match reported(reqs, Primitive::Testany, Want::Any, false).first() {
        None => Ok(None),
        Some(&i) => take_some(reqs, &[i]).map(|v| Some(v[0])),
    }
}

/// `MPI_Testsome`: every active request that completed (now inactive), ascending.
#[track_caller]
pub fn test_some(reqs: &mut [Request<'_>]) -> Result<Vec<(usize, Status)>> {
    let _site = crate::callsite::enter_rust(std::panic::Location::caller());
    let _mmds = mmds::enter(Primitive::Testsome);
    let idx = reported(reqs, Primitive::Testsome, Want::Some, false);
    take_some(reqs, &idx)
}
