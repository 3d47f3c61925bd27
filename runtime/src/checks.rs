//! MUST-style correctness checks (`--no-checks` turns them off): errors the standard
//! names that a run may survive by luck, found from the slice engine's output alone.
//!
//! - **type mismatch**: a message whose type signature is not a prefix of its receive's
//!   (MPI-3.1 3.3.1: `MPI_INT` sent, 4 `MPI_BYTE` received). The C binding carries the
//!   signature of each point-to-point call in its descriptor ([`set_send_sig`],
//!   [`set_recv_sig`]); every `Match` decision is compared
//!   ([`strobe_core::datatype::compare_signatures`]).
//! - **leaked request**: requests neither completed nor freed at `MPI_Finalize`. Only the
//!   rank knows which of its requests were waited for, so the C binding counts them at
//!   `MPI_Finalize` and the `Finalize` descriptor carries the count and the calls that
//!   created the first few ([`encode_leaks`]).
//! - **buffer reuse**: a send or receive whose buffer overlaps the buffer of a pending
//!   non-blocking receive of the same rank, or a receive into the buffer of a pending
//!   non-blocking send (pending: posted, and not completed by the scheduler yet). A
//!   derived datatype is packed into a staging buffer, whose address is what the runtime
//!   sees: overlaps through such types are not seen.
//! - **unsafe send-send**: a rank posts a blocking standard-mode `MPI_Send` to a rank
//!   whose blocking standard-mode `MPI_Send` to it is still unreceived, one of the two
//!   having completed only because the eager protocol buffered it (MPI-3.1 3.5: such a
//!   program is unsafe; with larger messages it deadlocks). Peers are compared as posted,
//!   so only pairs on `MPI_COMM_WORLD` are recognised.
//!
//! Every check is a function of the descriptors posted and the scheduler's decisions,
//! which replay reproduces: a replay reports the same findings (buffer addresses differ
//! between runs, the overlaps they form do not).

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Mutex;

use crate::calls::Call;
use crate::datatype::{compare_signatures, SigMatch, TypeSig};
use crate::descriptor::{
    DescKind, DescRef, Descriptor, COMM_WORLD, COMPLETION_CANCELLED, COMPLETION_EAGER,
};
use crate::engine::{SliceRecord, SliceSink};
use crate::sched::Decision;

/// What a finding is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CheckKind {
    TypeMismatch,
    LeakedRequest,
    BufferReuse,
    UnsafeSendSend,
}

impl CheckKind {
    pub const ALL: [CheckKind; 4] = [
        CheckKind::TypeMismatch,
        CheckKind::LeakedRequest,
        CheckKind::BufferReuse,
        CheckKind::UnsafeSendSend,
    ];

    /// The name stored in recordings and printed: never change it.
    pub fn name(self) -> &'static str {
        match self {
            CheckKind::TypeMismatch => "type-mismatch",
            CheckKind::LeakedRequest => "leaked-request",
            CheckKind::BufferReuse => "buffer-reuse",
            CheckKind::UnsafeSendSend => "unsafe-send-send",
        }
    }

    pub fn from_name(s: &str) -> Option<CheckKind> {
        CheckKind::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// One finding: a rank, the call it is about, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub kind: CheckKind,
    /// The slice whose descriptors or decisions showed it.
    pub slice: u64,
    pub rank: u32,
    /// The MPI call (`MPI_Recv`, ...).
    pub call: String,
    /// The call's source location (`file.c:42`) when the recording knows call sites;
    /// `None` otherwise.
    pub call_site: Option<String>,
    pub detail: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: rank {}: {}", self.kind.name(), self.rank, self.call)?;
        if let Some(site) = &self.call_site {
            write!(f, " at {site}")?;
        }
        write!(f, " (slice {}): {}", self.slice, self.detail)
    }
}

// --- What the C binding hands the runtime -----------------------------------------------

thread_local! {
    /// The type signature of the point-to-point send / receive the calling thread is about
    /// to post: set by the C binding from the call's datatype, taken by the next post of
    /// that direction (a per-direction slot, so `MPI_Sendrecv` carries both).
    static SEND_SIG: Cell<Option<(TypeSig, u64)>> = const { Cell::new(None) };
    static RECV_SIG: Cell<Option<(TypeSig, u64)>> = const { Cell::new(None) };
}

/// The next send posted by this thread carries `count` elements of signature `sig`
/// (`None`: a type that matches anything, `MPI_PACKED`).
pub fn set_send_sig(sig: Option<TypeSig>, count: u64) {
    SEND_SIG.with(|s| s.set(sig.map(|g| (g, count))));
}

/// The next receive posted by this thread carries `count` elements of signature `sig`.
pub fn set_recv_sig(sig: Option<TypeSig>, count: u64) {
    RECV_SIG.with(|s| s.set(sig.map(|g| (g, count))));
}

/// Forget signatures set but not posted (a call that failed before posting): called at
/// the entry of every C call, so a signature never reaches another call's descriptor.
pub fn clear_sigs() {
    SEND_SIG.with(|s| s.set(None));
    RECV_SIG.with(|s| s.set(None));
}

/// Put the pending signature of `d`'s direction into `d` (on posting).
pub(crate) fn stamp(d: &mut Descriptor) {
    let slot = match d.kind() {
        Some(k) if k.is_send() => &SEND_SIG,
        Some(DescKind::Recv) => &RECV_SIG,
        _ => return,
    };
    if let Some((sig, count)) = slot.with(|s| s.take()) {
        d.set_type_sig(sig, count);
    }
}

/// How many creating calls a `Finalize` descriptor names (16 bits each in `aux2`).
pub const LEAKS_NAMED: usize = 4;

/// The `Finalize` descriptor's `aux` and `aux2` for requests created by `created_by` and
/// never completed or freed: the count, and the first [`LEAKS_NAMED`] calls.
/// `None`: a request whose creating call is not known.
pub fn encode_leaks(created_by: &[Option<Call>]) -> (u64, u64) {
    let mut packed = 0u64;
    for (i, call) in created_by.iter().take(LEAKS_NAMED).enumerate() {
        let code = Call::ALL
            .iter()
            .position(|c| Some(*c) == *call)
            .map_or(0, |p| p + 1);
        packed |= (code as u64 & 0xffff) << (16 * i);
    }
    (created_by.len() as u64, packed)
}

/// The inverse of [`encode_leaks`]: the count and the calls named.
pub fn decode_leaks(aux: u64, aux2: u64) -> (u64, Vec<&'static str>) {
    let named = (0..LEAKS_NAMED.min(aux as usize))
        .map(|i| {
            let code = ((aux2 >> (16 * i)) & 0xffff) as usize;
            code.checked_sub(1)
                .and_then(|c| Call::ALL.get(c))
                .map_or("an unknown call", |c| c.mpi_name())
        })
        .collect();
    (aux, named)
}

// --- The checker -------------------------------------------------------------------------

/// Runs the checks over a job's slices (a [`SliceSink`] beside the others).
#[derive(Default)]
pub struct Checker {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Non-blocking sends and receives with a buffer, posted and not completed yet.
    pending: BTreeMap<DescRef, Descriptor>,
    /// Blocking standard-mode sends posted and not matched yet.
    unmatched_sends: BTreeMap<DescRef, Descriptor>,
    /// Those of them that completed eagerly.
    eager: BTreeSet<DescRef>,
    /// Send-send pairs already reported (lower descriptor first).
    pairs: BTreeSet<(DescRef, DescRef)>,
    findings: Vec<Finding>,
}

fn call_name(d: &Descriptor) -> String {
    let Some(kind) = d.kind() else {
        return "?".to_string();
    };
    let nonblocking = !d.blocking() && d.request != 0;
    match kind {
        DescKind::Send if nonblocking => "MPI_Isend".into(),
        DescKind::Ssend if nonblocking => "MPI_Issend".into(),
        DescKind::Rsend if nonblocking => "MPI_Irsend".into(),
        DescKind::Recv if nonblocking => "MPI_Irecv".into(),
        k => k.mpi_name().into(),
    }
}

/// The buffer range a send or receive descriptor reads or writes, if any.
fn range(d: &Descriptor) -> Option<(u64, u64)> {
    let k = d.kind()?;
    (k.is_send() || k == DescKind::Recv)
        .then_some((d.buf, d.buf.saturating_add(d.bytes)))
        .filter(|&(lo, hi)| lo != 0 && hi > lo)
}

fn overlaps(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

impl Checker {
    pub fn new() -> Self {
        Checker::default()
    }

    /// Everything found so far, in the order found (by slice, then canonical order).
    pub fn findings(&self) -> Vec<Finding> {
        self.state.lock().expect("checker").findings.clone()
    }
}

impl State {
    fn finding(&mut self, kind: CheckKind, slice: u64, d: &Descriptor, detail: String) {
        self.findings.push(Finding {
            kind,
            slice,
            rank: d.rank,
            call: call_name(d),
            call_site: None,
            detail,
        });
    }

    fn posted(&mut self, slice: u64, d: &Descriptor) {
        if d.kind() == Some(DescKind::Finalize) && d.aux > 0 {
            let (count, named) = decode_leaks(d.aux, d.aux2);
            let more = count.saturating_sub(named.len() as u64);
            let mut detail = format!(
                "{count} request{} never completed or freed, created by {}",
                if count == 1 { "" } else { "s" },
                named.join(", ")
            );
            if more > 0 {
                detail.push_str(&format!(" and {more} more"));
            }
            return self.finding(CheckKind::LeakedRequest, slice, d, detail);
        }
        let Some(mine) = range(d) else { return };
        let is_recv = d.kind() == Some(DescKind::Recv);
        let clash = self.pending.values().find(|p| {
            let p_recv = p.kind() == Some(DescKind::Recv);
            p.rank == d.rank && (p_recv || is_recv) && range(p).is_some_and(|r| overlaps(r, mine))
        });
        if let Some(p) = clash.copied() {
            let what = if is_recv {
                "receives into"
            } else {
                "sends from"
            };
            let detail = format!(
                "{what} a buffer that overlaps the buffer of its pending {} #{} (request not completed yet)",
                call_name(&p),
                p.seq
            );
            self.finding(CheckKind::BufferReuse, slice, d, detail);
        }
        if !d.blocking() && d.request != 0 {
            self.pending.insert(d.id(), *d);
        }
    }

    fn matched(&mut self, slice: u64, send: &Descriptor, recv: &Descriptor) {
        let sig = |d: &Descriptor| d.type_sig().map_or((None, 0), |(s, n)| (Some(s), n));
        let ((s, sn), (r, rn)) = (sig(send), sig(recv));
        if compare_signatures(s, sn, r, rn) != SigMatch::Mismatch {
            return;
        }
        let basics = |g: Option<TypeSig>| g.map_or(0, |g| g.len);
        let detail = format!(
            "the type signature of the message from rank {}'s {} #{} ({sn} element(s) of {} basic type(s) each) does not match the receive's datatype ({rn} element(s) of {} basic type(s) each; MPI-3.1 3.3.1)",
            send.rank,
            call_name(send),
            send.seq,
            basics(s),
            basics(r),
        );
        self.finding(CheckKind::TypeMismatch, slice, recv, detail);
    }

    /// The unsafe send-send pattern, at the end of a slice: a blocking standard send B
    /// posted in this slice while a blocking standard send A the other way (same
    /// communicator, from B's destination to B's sender) is still unmatched after the
    /// slice's matching, one of them having completed eagerly. Without buffering the
    /// sender of A would still be in its send, and B's sender in its own: a deadlock.
    fn send_send(&mut self, slice: u64, fresh: &[Descriptor]) {
        for b in fresh {
            if b.comm != COMM_WORLD {
                continue;
            }
            let partner = self.unmatched_sends.values().find(|a| {
                a.comm == COMM_WORLD
                    && a.peer == b.rank as i32
                    && b.peer == a.rank as i32
                    && (self.eager.contains(&a.id()) || self.eager.contains(&b.id()))
            });
            let Some(a) = partner.copied() else { continue };
            let (first, second) = if a.id() < b.id() { (a, *b) } else { (*b, a) };
            if !self.pairs.insert((first.id(), second.id())) {
                continue;
            }
            let saved = if self.eager.contains(&a.id()) { &a } else { b };
            let detail = format!(
                "rank {} and rank {} each called a blocking MPI_Send to the other (#{} and #{}) before receiving; it completed only because rank {}'s message was buffered (eager): unsafe, it deadlocks without buffering (MPI-3.1 3.5)",
                first.rank, second.rank, first.seq, second.seq, saved.rank
            );
            self.finding(CheckKind::UnsafeSendSend, slice, &first, detail);
        }
    }
}

impl SliceSink for Checker {
    fn slice(&self, rec: &SliceRecord) {
        let mut st = self.state.lock().expect("checker");
        let mut fresh = Vec::new();
        for d in &rec.descriptors {
            st.posted(rec.slice, d);
            if d.kind() == Some(DescKind::Send) && d.blocking() {
                st.unmatched_sends.insert(d.id(), *d);
                fresh.push(*d);
            }
        }
        let decisions = &rec.decisions;
        for dec in &decisions.decisions {
            match dec {
                Decision::Match(m) => {
                    if let (Some(s), Some(r)) =
                        (decisions.descriptor(m.send), decisions.descriptor(m.recv))
                    {
                        st.matched(rec.slice, s, r);
                    }
                    st.unmatched_sends.remove(&m.send);
                    st.eager.remove(&m.send);
                }
                Decision::Complete(c) => {
                    st.pending.remove(&c.desc);
                    let eager = c.completion.flags & COMPLETION_EAGER != 0;
                    if eager && st.unmatched_sends.contains_key(&c.desc) {
                        st.eager.insert(c.desc);
                    } else if c.completion.flags & COMPLETION_CANCELLED != 0 {
                        st.unmatched_sends.remove(&c.desc);
                    }
                }
                _ => {}
            }
        }
        st.send_send(rec.slice, &fresh);
    }
}

/// A sink that feeds a [`Checker`] and passes everything on to another sink (the
/// replayer's regeneration recorder, when there is one).
pub struct Checked {
    pub checker: std::sync::Arc<Checker>,
    pub inner: Option<std::sync::Arc<dyn SliceSink>>,
}

impl SliceSink for Checked {
    fn slice(&self, rec: &SliceRecord) {
        self.checker.slice(rec);
        if let Some(s) = &self.inner {
            s.slice(rec);
        }
    }
    fn node_metrics(&self, slice: u64, m: &crate::engine::LocalMetrics) {
        if let Some(s) = &self.inner {
            s.node_metrics(slice, m);
        }
    }
    fn mmds(&self, ranks: &[crate::mmds::RankMmds]) {
        if let Some(s) = &self.inner {
            s.mmds(ranks);
        }
    }
    fn outcomes(&self, rank: u32, recs: &[crate::outcome::OutcomeRec]) {
        if let Some(s) = &self.inner {
            s.outcomes(rank, recs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaks_round_trip() {
        let calls = [
            Call::Isend,
            Call::Irecv,
            Call::Irecv,
            Call::SendInit,
            Call::Isend,
        ]
        .map(Some);
        let (aux, aux2) = encode_leaks(&calls);
        let (n, named) = decode_leaks(aux, aux2);
        assert_eq!(n, 5);
        assert_eq!(
            named,
            ["MPI_Isend", "MPI_Irecv", "MPI_Irecv", "MPI_Send_init"]
        );
    }

    #[test]
    fn kinds_have_stable_names() {
        for k in CheckKind::ALL {
            assert_eq!(CheckKind::from_name(k.name()), Some(k));
        }
    }
}
