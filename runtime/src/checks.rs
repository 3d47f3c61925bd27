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
use std::sync::{Arc, Mutex};

use crate::calls::Call;
use crate::datatype::{compare_signatures, SigMatch, TypeSig};
use crate::descriptor::{
    DescKind, DescRef, Descriptor, COMM_WORLD, COMPLETION_CANCELLED, COMPLETION_EAGER,
    COMPLETION_INLINE, PROC_NULL,
};
use crate::engine::{SliceRecord, SliceSink};
use crate::sched::Decision;
use crate::segment::BlockedCall;
use crate::symbolize::CallSite;

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

/// A signature set for the next post: `Some(None)` is "no signature" (`MPI_PACKED`).
type PendingSig = Option<Option<(TypeSig, u64)>>;

thread_local! {
    /// The type signature of the point-to-point send / receive the calling thread is about
    /// to post: set by the C binding from the call's datatype, taken by the next post of
    /// that direction (a per-direction slot, so `MPI_Sendrecv` carries both). It replaces
    /// the one the Rust API derives from the buffer's element type (bytes, for C).
    static SEND_SIG: Cell<PendingSig> = const { Cell::new(None) };
    static RECV_SIG: Cell<PendingSig> = const { Cell::new(None) };
    /// Inside a call of the C binding: a post it did not give a signature carries none
    /// (its buffers are bytes of a datatype the Rust API cannot see).
    static IN_C_CALL: Cell<bool> = const { Cell::new(false) };
}

/// The next send posted by this thread carries `count` elements of signature `sig`
/// (`None`: a type that matches anything, `MPI_PACKED`).
pub fn set_send_sig(sig: Option<TypeSig>, count: u64) {
    SEND_SIG.with(|s| s.set(Some(sig.map(|g| (g, count)))));
}

/// The next receive posted by this thread carries `count` elements of signature `sig`.
pub fn set_recv_sig(sig: Option<TypeSig>, count: u64) {
    RECV_SIG.with(|s| s.set(Some(sig.map(|g| (g, count)))));
}

/// The C binding enters one of its calls (the outermost): signatures set but not posted
/// by an earlier call (one that failed before posting) are forgotten, so a signature never
/// reaches another call's descriptor, and posts without one carry none until
/// [`end_c_call`].
pub fn begin_c_call() {
    SEND_SIG.with(|s| s.set(None));
    RECV_SIG.with(|s| s.set(None));
    IN_C_CALL.with(|c| c.set(true));
}

/// The C binding leaves its call.
pub fn end_c_call() {
    IN_C_CALL.with(|c| c.set(false));
}

/// Put the pending signature of `d`'s direction into `d` (on posting).
pub(crate) fn stamp(d: &mut Descriptor) {
    let slot = match d.kind() {
        Some(k) if k.is_send() => &SEND_SIG,
        Some(DescKind::Recv) => &RECV_SIG,
        _ => return,
    };
    match slot.with(|s| s.take()) {
        Some(Some((sig, count))) => d.set_type_sig(sig, count),
        Some(None) => d.sig_len = 0,
        None if IN_C_CALL.with(|c| c.get()) => d.sig_len = 0,
        None => {}
    }
}

/// How many distinct creating calls a `Finalize` descriptor names (16 bits each in
/// `aux2`: the call in the high 9 bits, how many of its requests in the low 7).
pub const LEAKS_NAMED: usize = 4;

const LEAK_COUNT_BITS: u32 = 7;
const LEAK_COUNT_MAX: u64 = (1 << LEAK_COUNT_BITS) - 1;
const _: () = assert!(Call::ALL.len() < 1 << (16 - LEAK_COUNT_BITS));

/// The `Finalize` descriptor's `aux` and `aux2` for requests created by `created_by` (one
/// entry per request; `None`: not known) and never completed or freed: the count, and the
/// first [`LEAKS_NAMED`] distinct calls with how many requests each created.
pub fn encode_leaks(created_by: &[Option<Call>]) -> (u64, u64) {
    let mut groups: Vec<(Option<Call>, u64)> = Vec::new();
    for call in created_by {
        match groups.iter_mut().find(|(c, _)| c == call) {
            Some((_, n)) => *n += 1,
            None => groups.push((*call, 1)),
        }
    }
    let mut packed = 0u64;
    for (i, (call, n)) in groups.iter().take(LEAKS_NAMED).enumerate() {
        let code = call
            .and_then(|call| Call::ALL.iter().position(|c| *c == call))
            .map_or(0, |p| p as u64 + 1);
        let entry = (code << LEAK_COUNT_BITS) | (*n).min(LEAK_COUNT_MAX);
        packed |= (entry & 0xffff) << (16 * i);
    }
    (created_by.len() as u64, packed)
}

/// The inverse of [`encode_leaks`]: the count, and the calls named with their counts
/// (a count of `LEAK_COUNT_MAX`, 127, means at least that many).
pub fn decode_leaks(aux: u64, aux2: u64) -> (u64, Vec<(&'static str, u64)>) {
    let named = (0..LEAKS_NAMED)
        .map(|i| (aux2 >> (16 * i)) & 0xffff)
        .take_while(|&entry| entry != 0)
        .map(|entry| {
            let code = (entry >> LEAK_COUNT_BITS) as usize;
            let name = code
                .checked_sub(1)
                .and_then(|c| Call::ALL.get(c))
                .map_or("an unknown call", |c| c.mpi_name());
            (name, entry & LEAK_COUNT_MAX)
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

/// Findings of one kind listed per run, at most: a mistake in a loop is one finding
/// repeated, and the list must stay readable (and the recording small). The next one of
/// the kind becomes a note that the rest are not listed.
pub const MAX_PER_KIND: usize = 100;

/// The checker's state. It runs on the slice path (node 0's thread), so every lookup is
/// indexed: pending buffers by (rank, start address), unmatched sends by (sender, peer).
#[derive(Default)]
struct State {
    /// Non-blocking sends and receives with a buffer, posted and not completed yet, by
    /// (rank, buffer start, descriptor)...
    pending: BTreeMap<(u32, u64, DescRef), Kept>,
    /// ...and where each is in `pending`.
    pending_at: BTreeMap<DescRef, (u32, u64)>,
    /// The longest pending buffer each rank ever had: how far below a range an
    /// overlapping one may start.
    longest: BTreeMap<u32, u64>,
    /// Blocking standard-mode sends on `MPI_COMM_WORLD` posted and not matched yet, by
    /// (sender, destination).
    /// One flat map (no inner map allocated and freed for every send of a ping-pong).
    unmatched_sends: BTreeMap<(u32, i32, DescRef), Kept>,
    /// Those of them that completed eagerly.
    eager: BTreeSet<DescRef>,
    /// Send-send pairs already reported (lower descriptor first).
    pairs: BTreeSet<(DescRef, DescRef)>,
    findings: Vec<Finding>,
    /// Findings per kind so far (listed or not).
    per_kind: BTreeMap<CheckKind, usize>,
    /// Where the program made the blocking calls of the slice being checked, and of the
    /// unmatched sends (a send-send finding names a send of an earlier slice), with the
    /// descriptor's peer (to look it up among the unmatched sends). Formatted only for a
    /// finding: two formatted sites a slice were a tenth of a ping-pong's slice.
    sites: BTreeMap<DescRef, (i32, Arc<CallSite>)>,
    /// This slice's blocking standard sends on `MPI_COMM_WORLD` (kept for its capacity).
    fresh: Vec<Kept>,
}

/// What the checks keep of a descriptor they wait on (a pending buffer, an unmatched
/// send): the fields a check or its finding reads, 48 bytes instead of the descriptor's
/// 128. The maps hold one per message in flight, inserted and removed on the slice path
/// (a fifth of a ping-pong slice's work on the node manager was these maps).
#[derive(Clone, Copy, Debug)]
struct Kept {
    seq: u64,
    request: u64,
    buf: u64,
    bytes: u64,
    rank: u32,
    peer: i32,
    kind: u8,
    flags: u8,
}

impl Kept {
    fn of(d: &Descriptor) -> Kept {
        Kept {
            seq: d.seq,
            request: d.request,
            buf: d.buf,
            bytes: d.bytes,
            rank: d.rank,
            peer: d.peer,
            kind: d.kind,
            flags: d.flags,
        }
    }

    /// The descriptor again, with the kept fields (for a finding's text).
    fn desc(&self) -> Descriptor {
        Descriptor {
            seq: self.seq,
            request: self.request,
            buf: self.buf,
            bytes: self.bytes,
            rank: self.rank,
            peer: self.peer,
            kind: self.kind,
            flags: self.flags,
            ..Descriptor::default()
        }
    }

    fn id(&self) -> DescRef {
        DescRef {
            rank: self.rank,
            seq: self.seq,
        }
    }
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

/// The buffer range a send or receive descriptor reads or writes, if any (none for
/// `MPI_PROC_NULL`: no data moves).
fn range(d: &Descriptor) -> Option<(u64, u64)> {
    let k = d.kind()?;
    let moves_data = (k.is_send() || k == DescKind::Recv) && d.peer != PROC_NULL;
    let (lo, hi) = (d.buf, d.buf.saturating_add(d.bytes));
    (moves_data && lo != 0 && hi > lo).then_some((lo, hi))
}

/// One element's signature in words: the basic type's name when it is one the runtime
/// knows (`i32` for `MPI_INT`, `byte` for `MPI_BYTE`), else its length.
fn sig_text(sig: Option<TypeSig>) -> String {
    let Some(sig) = sig else {
        return "no signature".to_string();
    };
    let named = crate::datatype::ElemType::ALL
        .into_iter()
        .find(|e| TypeSig::basic(e.sig_code()) == sig);
    match named {
        Some(e) => e.name().to_string(),
        None => format!("a datatype of {} basic elements", sig.len),
    }
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
        let seen = self.per_kind.entry(kind).or_default();
        *seen += 1;
        let detail = match (*seen).cmp(&(MAX_PER_KIND + 1)) {
            std::cmp::Ordering::Less => detail,
            std::cmp::Ordering::Equal => format!(
                "and more {} findings, not listed (at most {MAX_PER_KIND} of a kind per run)",
                kind.name()
            ),
            std::cmp::Ordering::Greater => return,
        };
        self.findings.push(Finding {
            kind,
            slice,
            rank: d.rank,
            call: call_name(d),
            call_site: self.sites.get(&d.id()).map(|(_, site)| site.short()),
            detail,
        });
    }

    fn posted(&mut self, slice: u64, d: &Descriptor) {
        if d.kind() == Some(DescKind::Finalize) && d.aux > 0 {
            let (count, named) = decode_leaks(d.aux, d.aux2);
            let listed: u64 = named.iter().map(|(_, n)| n).sum();
            let calls: Vec<String> = named
                .iter()
                .map(|(name, n)| match n {
                    1 => name.to_string(),
                    n => format!("{name} (x{n})"),
                })
                .collect();
            let mut detail = format!(
                "{count} request{} never completed or freed, created by {}",
                if count == 1 { "" } else { "s" },
                calls.join(", ")
            );
            if count > listed {
                detail.push_str(&format!(" and {} more", count - listed));
            }
            return self.finding(CheckKind::LeakedRequest, slice, d, detail);
        }
        let Some(mine) = range(d) else { return };
        let is_recv = d.kind() == Some(DescKind::Recv);
        if let Some(p) = self.clash(d.rank, mine, is_recv) {
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
            self.pending.insert((d.rank, mine.0, d.id()), Kept::of(d));
            self.pending_at.insert(d.id(), (d.rank, mine.0));
            let longest = self.longest.entry(d.rank).or_default();
            *longest = (*longest).max(mine.1 - mine.0);
        }
    }

    /// A pending operation of `rank` whose buffer overlaps `mine` and that clashes with
    /// it: a pending receive, or any pending operation when `mine` is a receive's.
    fn clash(&self, rank: u32, mine: (u64, u64), is_recv: bool) -> Option<Descriptor> {
        let recv = DescKind::Recv as u8;
        let longest = self.longest.get(&rank).copied().unwrap_or(0);
        let lowest = DescRef { rank: 0, seq: 0 };
        // Candidates start below `mine`'s end; none starting more than `longest` below
        // its start can reach it.
        self.pending
            .range((rank, 0, lowest)..(rank, mine.1, lowest))
            .rev()
            .take_while(|((_, start, _), _)| start.saturating_add(longest) > mine.0)
            .map(|(_, p)| p)
            .find(|p| {
                (is_recv || p.kind == recv) && range(&p.desc()).is_some_and(|r| overlaps(r, mine))
            })
            .map(Kept::desc)
    }

    fn is_unmatched(&self, d: &Descriptor) -> bool {
        self.unmatched_sends.contains_key(&(d.rank, d.peer, d.id()))
    }

    fn no_longer_unmatched(&mut self, d: &Descriptor) {
        self.unmatched_sends.remove(&(d.rank, d.peer, d.id()));
        self.eager.remove(&d.id());
    }

    /// The call sites of this slice's blocking descriptors. Only a blocking call has a
    /// site here: node 0 resolves the site of each rank blocked at the slice start (the
    /// call it is in; a blocking descriptor handled now is the call its rank is blocked
    /// in) and of each rank that posted a blocking descriptor and had not blocked yet (the
    /// site it published with the post). A finding about a non-blocking call (`MPI_Irecv`, `MPI_Isend`) has no site: its
    /// rank has moved on by the time the slice sees it, and resolving a site at every post
    /// would cost a stack walk per call (docs/debugging.md, "Correctness checks").
    fn note_sites(&mut self, rec: &SliceRecord) {
        let unmatched = &self.unmatched_sends;
        self.sites
            .retain(|id, (peer, _)| unmatched.contains_key(&(id.rank, *peer, *id)));
        for d in rec.descriptors.iter().filter(|d| d.blocking()) {
            let Some(kind) = d.kind() else { continue };
            // Blocked in this call, or not blocked yet: then the site is the one its rank
            // published with the descriptor (`SliceRecord::sites`).
            let in_it = rec
                .blocked
                .iter()
                .find(|&&(r, _)| r == d.rank)
                .is_none_or(|&(_, call)| call == BlockedCall::Posted(kind));
            let site = rec.sites.iter().find(|(r, _)| *r == d.rank);
            if let (true, Some((_, site))) = (in_it, site) {
                self.sites.insert(d.id(), (d.peer, Arc::clone(site)));
            }
        }
    }

    fn completed(&mut self, id: DescRef) {
        if let Some((rank, start)) = self.pending_at.remove(&id) {
            self.pending.remove(&(rank, start, id));
        }
    }

    fn matched(&mut self, slice: u64, send: &Descriptor, recv: &Descriptor) {
        let sig = |d: &Descriptor| d.type_sig().map_or((None, 0), |(s, n)| (Some(s), n));
        let ((s, sn), (r, rn)) = (sig(send), sig(recv));
        if compare_signatures(s, sn, r, rn) != SigMatch::Mismatch {
            return;
        }
        let detail = format!(
            "the message from rank {}'s {} #{} ({sn} x {}) does not match the receive's datatype ({rn} x {}): their type signatures differ (MPI-3.1 3.3.1)",
            send.rank,
            call_name(send),
            send.seq,
            sig_text(s),
            sig_text(r),
        );
        self.finding(CheckKind::TypeMismatch, slice, recv, detail);
    }

    /// The unsafe send-send pattern, at the end of a slice: a blocking standard send B
    /// posted in this slice while a blocking standard send A the other way (same
    /// communicator, from B's destination to B's sender) is still unmatched after the
    /// slice's matching, one of them having completed eagerly. Without buffering the
    /// sender of A would still be in its send, and B's sender in its own: a deadlock.
    fn send_send(&mut self, slice: u64) {
        let mut fresh = std::mem::take(&mut self.fresh);
        for b in &fresh {
            let Ok(dest) = u32::try_from(b.peer) else {
                continue;
            };
            let from = DescRef { rank: 0, seq: 0 };
            let to = DescRef {
                rank: u32::MAX,
                seq: u64::MAX,
            };
            let partner = self
                .unmatched_sends
                .range((dest, b.rank as i32, from)..=(dest, b.rank as i32, to))
                .map(|(_, a)| a)
                .find(|a| self.eager.contains(&a.id()) || self.eager.contains(&b.id()));
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
            self.finding(CheckKind::UnsafeSendSend, slice, &first.desc(), detail);
        }
        fresh.clear();
        self.fresh = fresh;
    }
}

impl SliceSink for Checker {
    fn slice(&self, rec: &SliceRecord) {
        let mut st = self.state.lock().expect("checker");
        st.note_sites(rec);
        for d in &rec.descriptors {
            st.posted(rec.slice, d);
            if d.kind() == Some(DescKind::Send) && d.blocking() && d.comm == COMM_WORLD {
                st.unmatched_sends
                    .insert((d.rank, d.peer, d.id()), Kept::of(d));
                st.fresh.push(Kept::of(d));
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
                        st.no_longer_unmatched(s);
                    }
                }
                Decision::Complete(c) => {
                    st.completed(c.desc);
                    let Some(d) = decisions.descriptor(c.desc) else {
                        continue;
                    };
                    let flags = c.completion.flags;
                    if flags & COMPLETION_CANCELLED != 0 {
                        st.no_longer_unmatched(d);
                    } else if flags & (COMPLETION_EAGER | COMPLETION_INLINE) != 0
                        && st.is_unmatched(d)
                    {
                        // Buffered either way: in node memory, or (inline) in the descriptor.
                        st.eager.insert(c.desc);
                    }
                }
                _ => {}
            }
        }
        st.send_send(rec.slice);
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
mod tests;
