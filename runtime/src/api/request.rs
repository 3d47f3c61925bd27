//! Non-blocking requests: [`Request`] and the `wait_*`/`test_*` functions.

use crate::mmds::{self, Primitive};
use std::marker::PhantomData;

use super::types::finish;
use super::{ctx, Error, Result, Status};
use crate::descriptor::{DescKind, Descriptor};
use crate::rank::{RankCtx, Want};

/// A non-blocking operation in flight. It borrows its buffer for `'a`, so the buffer
/// cannot be touched or freed while the runtime may still read or write it. Dropping an
/// unfinished request blocks until it completes (the DMA Helper may still be writing).
#[must_use = "dropping a request blocks until it completes"]
#[derive(Debug)]
pub struct Request<'a> {
    id: u64,
    kind: DescKind,
    completed: bool,
    _borrow: PhantomData<&'a mut [u8]>,
}

impl Request<'_> {
    pub(super) fn new(id: u64, kind: DescKind) -> Self {
        Request {
            id,
            kind,
            completed: false,
            _borrow: PhantomData,
        }
    }

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

    /// `MPI_Wait`.
    pub fn wait(mut self) -> Result<Status> {
        let _mmds = mmds::enter(Primitive::Wait);
        if self.completed {
            return Ok(Status::EMPTY);
        }
        let c = ctx().wait(Primitive::Wait, self.id);
        self.completed = true;
        finish(&c)
    }

    /// `MPI_Test`: `Some` once complete (later calls give the empty status).
    pub fn test(&mut self) -> Result<Option<Status>> {
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
        self.completed = true;
        finish(&comp).map(Some)
    }

    /// `MPI_Cancel`: only receives can be cancelled; it succeeds if the receive is not
    /// matched yet, and the request then completes with `Status::cancelled`. Blocks until
    /// the next slice boundary (when the runtime processes the cancel). The request must
    /// still be waited on or tested.
    pub fn cancel(&mut self) -> Result<()> {
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
            self.completed = true;
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
        reqs[i].completed = true;
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
pub fn wait_all(mut reqs: Vec<Request<'_>>) -> Result<Vec<Status>> {
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
pub fn wait_any(reqs: &mut Vec<Request<'_>>) -> Result<(usize, Status)> {
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
pub fn wait_some(reqs: &mut Vec<Request<'_>>) -> Result<Vec<(usize, Status)>> {
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
pub fn test_all(reqs: &mut [Request<'_>]) -> Result<Option<Vec<Status>>> {
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
pub fn test_any(reqs: &mut [Request<'_>]) -> Result<Option<(usize, Status)>> {
    let _mmds = mmds::enter(Primitive::Testany);
    match reported(reqs, Primitive::Testany, Want::Any, false).first() {
        None => Ok(None),
        Some(&i) => take_some(reqs, &[i]).map(|v| Some(v[0])),
    }
}

/// `MPI_Testsome`: every active request that completed (now inactive), ascending.
pub fn test_some(reqs: &mut [Request<'_>]) -> Result<Vec<(usize, Status)>> {
    let _mmds = mmds::enter(Primitive::Testsome);
    let idx = reported(reqs, Primitive::Testsome, Want::Some, false);
    take_some(reqs, &idx)
}
