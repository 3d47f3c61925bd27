//! The rank side of a job: posting descriptors and sleeping until woken.
//!
//! A rank is a separate process started by the launcher with the job segment's descriptor
//! in its environment. Every MPI call posts a descriptor into the rank's queue and returns
//! (non-blocking) or sleeps on the rank's futex word until the node manager delivers the
//! completion at a slice boundary (blocking). Ranks are single-threaded towards the runtime
//! (`MPI_THREAD_FUNNELED`); a mutex still guards the context so misuse cannot corrupt it.

use std::os::fd::{FromRawFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crate::calls::Primitive;
use crate::descriptor::{Completion, DescKind, Descriptor};
use crate::futex;
use crate::outcome::{LibcCall, Outcome, OutcomeCursor, OutcomeRec, ENV_REPLAY_OUTCOMES};
use crate::segment::{
    self, leave_computing, resume_computing, resume_computing_from, ring_doorbell,
    ring_if_stretched, BlockedCall, Divergence, JobSegment, RankQueues, RankState, ENV_FD, ENV_LEN,
    ENV_RANK, ENV_SIZE,
};

/// Capacity of each rank's descriptor queue.
pub const DESC_CAPACITY: usize = 1024;
/// Capacity of each rank's completion queue (more completions wait in the node manager).
pub const COMP_CAPACITY: usize = 1024;

#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("not started by `strobe run` ({0} is not set): run the program with `strobe run -n N -- PROGRAM`")]
    NotLaunched(&'static str),
    #[error("bad value of {0}: {1:?}")]
    BadEnv(&'static str, String),
    #[error("cannot map the job segment: {0}")]
    Segment(#[from] std::io::Error),
    #[error("the runtime is already initialized")]
    AlreadyInitialized,
}

#[path = "rank_hash.rs"]
mod hash;
#[path = "rank_outcomes.rs"]
mod outcomes;
pub use hash::{DoneMap, RequestHasher};

struct Inner {
    queues: RankQueues,
    next_seq: u64,
    next_request: u64,
    done: DoneMap,
    /// Requests the next slice completes whatever the other ranks do (see
    /// [`RankCtx::next_slice_completes`]), until their completion arrives: a rank that
    /// waits only for such requests asks for that slice at once.
    self_completing: RequestSet,
    /// Replay mode: the rank's recorded timing-dependent outcomes, consumed in order.
    replay: Option<OutcomeCursor>,
}

type RequestSet = std::collections::HashSet<u64, std::hash::BuildHasherDefault<RequestHasher>>;

impl Inner {
    /// Move delivered completions from the queue into the table (this rank's, `rank`, in
    /// `seg`: a small message's bytes are copied out of its receive arena entry before
    /// the entry's slot is freed).
    fn pump(&mut self, seg: &JobSegment, rank: u32) {
        while let Some(mut c) = self
            .queues
            .completions
            .pop_with(|c, position| crate::rank_inline::write_from_arena(seg, rank, c, position))
        {
            crate::rank_inline::write_carried(&mut c);
            if !self.self_completing.is_empty() {
                self.self_completing.remove(&c.request);
            }
            self.done.insert(c.request, c);
        }
    }
}

pub struct RankCtx {
    seg: JobSegment,
    rank: u32,
    size: u32,
    /// Largest standard-mode send carried inline in its descriptor (0: none), as the
    /// launcher set it in the segment header for this job's scheduler version.
    inline_max: u64,
    /// Largest standard-mode send the scheduler completes eagerly (0: none): a rank
    /// blocked in such a send asks for the next slice at once (`segment::ring_urgent`).
    eager_max: u64,
    /// Complete `MPI_PROC_NULL` sends and receives when they are posted
    /// (`descriptor::FLAG_LOCAL`, scheduler version 4), as the launcher set it.
    local_null: bool,
    /// A replay (recorded outcomes present): the recorded slices decide when slices start.
    replay_mode: bool,
    inner: Mutex<Inner>,
}

static CTX: OnceLock<RankCtx> = OnceLock::new();

fn env_u64(name: &'static str) -> Result<u64, InitError> {
    let v = std::env::var(name).map_err(|_| InitError::NotLaunched(name))?;
    v.parse().map_err(|_| InitError::BadEnv(name, v))
}

impl RankCtx {
    /// Attach to the job this process was launched into (once per process).
    pub fn init() -> Result<&'static RankCtx, InitError> {
        if CTX.get().is_some() {
            return Err(InitError::AlreadyInitialized);
        }
        let entered_ns = crate::mmds::now_ns();
        let fd = env_u64(ENV_FD)? as RawFd;
        let len = env_u64(ENV_LEN)? as usize;
        let rank = env_u64(ENV_RANK)? as u32;
        let size = env_u64(ENV_SIZE)? as u32;
        // SAFETY: the launcher passes this process the segment's descriptor under ENV_FD
        // for it to own; `init` runs once per process (checked above), so nothing else
        // takes ownership of the same number.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let seg = JobSegment::attach(fd, len)?;
        if rank >= seg.ranks() || size != seg.ranks() {
            return Err(InitError::BadEnv(ENV_RANK, rank.to_string()));
        }
        // Programs on the Rust API do not load libmpi, whose load-time hook does this
        // before `main` for C and Fortran programs (again here: harmless).
        crate::procmem::die_with_launcher();
        // Let our node manager (and, under Yama ptrace_scope=1, sibling helpers) reach our
        // buffers with cross-memory attach: strobe and its descendants only, any process
        // of the user only in a replay that holds ranks for a debugger.
        let _ = crate::procmem::restrict_cross_memory_attach();
        seg.slot(rank)
            .pid
            .store(std::process::id(), Ordering::Release);
        let queues = seg.queues(rank);
        // Timing perturbation for `strobe hunt` / `strobe explore` (never in a replay).
        crate::chaos::init(rank).map_err(|(var, why)| InitError::BadEnv(var, why))?;
        let replay = match std::env::var_os(ENV_REPLAY_OUTCOMES) {
            None => None,
            Some(path) => {
                let bytes = std::fs::read(&path)?;
                let recs = crate::outcome::decode_file(&bytes, rank)
                    .map_err(|e| InitError::BadEnv(ENV_REPLAY_OUTCOMES, e))?;
                Some(OutcomeCursor::new(recs))
            }
        };
        let inline_max = u64::from(seg.header().inline_max.load(Ordering::Acquire));
        let eager_max = u64::from(seg.header().eager_max.load(Ordering::Acquire));
        let local_null = seg.header().local_null.load(Ordering::Acquire) != 0;
        let ctx = RankCtx {
            rank,
            size,
            inline_max,
            eager_max,
            local_null,
            replay_mode: replay.is_some(),
            inner: Mutex::new(Inner {
                queues,
                next_seq: 0,
                next_request: 1,
                done: DoneMap::default(),
                self_completing: RequestSet::default(),
                replay,
            }),
            seg,
        };
        CTX.set(ctx).map_err(|_| InitError::AlreadyInitialized)?;
        let ctx = CTX.get().expect("just set");
        crate::mmds::attach(&ctx.seg, rank, entered_ns);
        std::thread::Builder::new()
            .name("strobe-dma".into())
            .spawn(move || ctx.dma_helper())
            .map_err(InitError::Segment)?;
        Ok(ctx)
    }

    /// The context, if `init` succeeded.
    pub fn get() -> Option<&'static RankCtx> {
        CTX.get()
    }

    pub fn rank(&self) -> u32 {
        self.rank
    }
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The slice the job is in (for `MPI_Wtime`-style diagnostics).
    pub fn slice(&self) -> u64 {
        self.seg.header().slice.load(Ordering::Relaxed)
    }

    /// The rank's DMA Helper thread: performs the direct copies its node manager queues for
    /// large chunks this rank receives (one `process_vm_readv` from the sender straight into
    /// the receive buffer) or sends (one `process_vm_writev` into the receiver: the other
    /// half of a split chunk, `engine/helpers.rs`). It never runs application code and
    /// never counts as computing.
    fn dma_helper(&self) {
        let dma = self.seg.queues(self.rank).dma;
        let slot = self.seg.slot(self.rank);
        let me = std::process::id() as i32;
        loop {
            let seen = slot.dma_req.load(Ordering::Acquire);
            while let Some(w) = dma.pop() {
                // Our own side is passed to the kernel as an address, never as a Rust slice:
                // the receive buffer belongs to a request the runtime owns until it completes.
                // A push names its receiver; a pull writes here.
                let dst = if w.dst_pid == 0 { me } else { w.dst_pid as i32 };
                let r = crate::procmem::copy_between(
                    w.src_pid as i32,
                    w.src_addr,
                    dst,
                    w.dst_addr,
                    w.len as usize,
                    &mut [],
                );
                if r.is_err() {
                    let _ = slot.dma_error.compare_exchange(
                        0,
                        (w.tag as u32).wrapping_add(1),
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    );
                }
                slot.dma_done.fetch_add(1, Ordering::SeqCst);
            }
            // The node manager waits for all of a slice's copies, so one wake after the
            // queue is drained, and only if it sleeps (a system call per copy was 2.5-3 us
            // each, on the node manager's critical path).
            if slot.dma_done_sleepers.load(Ordering::SeqCst) != 0 {
                futex::wake_all(&slot.dma_done);
            }
            futex::wait(&slot.dma_req, seen, None);
        }
    }

    /// Post a descriptor; returns its request id. `d.rank`, `seq` and `request` are filled in.
    pub fn post(&self, mut d: Descriptor) -> u64 {
        let mut g = self.inner.lock().expect("rank context lock");
        if g.replay.is_some() {
            // Where the program made this call, for the replay's holds and divergence
            // report (one stack walk per C call; a live run walks only when a call blocks
            // or polls in vain: a walk costs microseconds, docs/recording.md).
            self.seg
                .slot(self.rank)
                .set_site(crate::callsite::current());
        }
        if g.replay.is_none() && crate::chaos::active() {
            // The MPI call's entry, for `strobe hunt`'s delays and `strobe explore`'s
            // holds (chaos.rs): outside the lock, so the DMA Helper is never kept waiting.
            let seq = g.next_seq;
            drop(g);
            crate::chaos::before_post(seq);
            g = self.inner.lock().expect("rank context lock");
        }
        if g.replay.is_some() {
            // A replaying rank that runs ahead is held here until the slice its descriptor
            // was recorded in comes (logical slices, model.md 4.4).
            let seq = g.next_seq;
            drop(g);
            let blocking = d.flags & crate::descriptor::FLAG_BLOCKING != 0;
            self.hold_until_allowed(seq, blocking.then(|| BlockedCall::posted(d.kind)));
            g = self.inner.lock().expect("rank context lock");
        }
        d.rank = self.rank;
        d.seq = g.next_seq;
        d.request = g.next_request;
        crate::checks::stamp(&mut d);
        crate::rank_inline::copy_input(&d, &self.seg);
        let carried = crate::rank_inline::carry(&mut d, self.inline_max, &self.seg);
        let local = carried.is_none() && self.local_null && crate::rank_inline::make_local(&mut d);
        // Completed when posted: an inline send, or a local `MPI_PROC_NULL` call.
        let inline = carried.or_else(|| local.then(|| crate::rank_inline::local_completion(&d)));
        if inline.is_none() && g.replay.is_none() && self.next_slice_completes(&d) {
            g.self_completing.insert(d.request);
        }
        if inline.is_none() && g.replay.is_none() && d.blocking() {
            // A blocking call's site, published before its descriptor: a slice may exchange
            // the descriptor before this rank announces the block (another rank's block or
            // urgent request starts it), and its checks still name the call's line. The
            // walk is the one the block would do (the site is cached for the call).
            self.seg
                .slot(self.rank)
                .set_site(crate::callsite::current());
        }
        loop {
            match g.queues.descriptors.push(&d) {
                Ok(()) => break,
                Err(_) => {
                    // The queue is full until the next slice drains it: wait for the node
                    // manager rather than spin.
                    drop(g);
                    let slot = self.seg.slot(self.rank);
                    let seen = slot.wake.load(Ordering::Acquire);
                    ring_doorbell(&self.seg);
                    self.seg
                        .sleep_on_wake(self.rank, seen, Duration::from_micros(200));
                    g = self.inner.lock().expect("rank context lock");
                }
            }
        }
        g.next_seq += 1;
        g.next_request += 1;
        if let Some(done) = inline {
            g.done.insert(done.request, done);
        }
        let slot = self.seg.slot(self.rank);
        // An inline send never blocks, even posted by `MPI_Send` (whose flag stays, for
        // the checks and the decision log): the replayer's gate must not wait for it.
        let blocks = d.flags & crate::descriptor::FLAG_BLOCKING != 0 && inline.is_none();
        slot.last_post_blocking
            .store(u32::from(blocks), Ordering::Relaxed);
        slot.posted.store(g.next_seq, Ordering::Release);
        if g.replay.is_some() {
            // The replaying Strobe Sender waits for exactly these posts; it has no timer.
            ring_doorbell(&self.seg);
        } else if !local {
            // The adaptive strobe may sleep after a quiet slice until somebody posts (a
            // local call needs no slice soon: it waits in the queue for the next one).
            crate::segment::mark_posted(&self.seg, self.rank);
            if !crate::segment::post_waits_for_a_wait(&self.seg, &d) {
                ring_if_stretched(&self.seg);
            }
        }
        d.request
    }

    /// This rank stops computing, held (replay, or a divergence), and tells the Strobe
    /// Sender, which may be waiting for it.
    pub(super) fn announce_held(&self) {
        if leave_computing(&self.seg, self.rank, RankState::Held) {
            ring_doorbell(&self.seg);
        }
        ring_doorbell(&self.seg);
    }

    /// Replay: wait while descriptor `seq` belongs to a slice after the next one. `call`:
    /// the blocking call about to be made, published as the call the rank is in (with
    /// several nodes a recording may see a rank already blocked in a call whose descriptor
    /// another node drains only in the next slice; the replay holds it at the post).
    fn hold_until_allowed(&self, seq: u64, call: Option<BlockedCall>) {
        let slot = self.seg.slot(self.rank);
        let allowed = |limit: u64| limit == 0 || seq + 1 < limit;
        if allowed(slot.post_limit.load(Ordering::Acquire)) {
            return;
        }
        if let Some(c) = call {
            slot.set_blocked_call(c);
        }
        self.announce_held();
        loop {
            let seen = slot.wake.load(Ordering::Acquire);
            if allowed(slot.post_limit.load(Ordering::Acquire)) {
                break;
            }
            if self.seg.header().shutdown.load(Ordering::Acquire) != 0 {
                std::process::exit(1);
            }
            self.seg
                .sleep_on_wake(self.rank, seen, Duration::from_millis(50));
        }
        resume_computing_from(&self.seg, self.rank, RankState::Held);
    }

    /// Sleep until `ready` holds over the set of completed requests. `call` names the MPI
    /// call for deadlock reports.
    pub fn block_until(&self, call: BlockedCall, ready: impl FnMut(&DoneMap) -> bool) {
        self.block_until_urgent(call, false, ready)
    }

    /// [`Self::block_until`]; `urgent`: the next slice completes the call whatever the
    /// other ranks do, so ask the Strobe Sender for it now rather than when every rank
    /// blocked or the timer expires (a wavefront's upstream rank would otherwise wait up
    /// to a slice for a downstream rank still computing).
    fn block_until_urgent(
        &self,
        call: BlockedCall,
        urgent: bool,
        mut ready: impl FnMut(&DoneMap) -> bool,
    ) {
        let slot = self.seg.slot(self.rank);
        loop {
            let seen = slot.wake.load(Ordering::Acquire);
            {
                let mut g = self.inner.lock().expect("rank context lock");
                g.pump(&self.seg, self.rank);
                if ready(&g.done) {
                    return;
                }
            }
            slot.set_site(crate::callsite::current());
            slot.set_blocked_call(call);
            // A replaying Strobe Sender may be waiting for this rank to block (the recorded
            // blocked set of the next slice): tell it even if others still compute.
            if leave_computing(&self.seg, self.rank, RankState::Blocked) || self.replaying() {
                ring_doorbell(&self.seg);
            } else if urgent {
                // The next slice completes this call whatever it exchanges (the rank's own
                // post set `posted_since`, so that test below would always say now).
                crate::segment::ring_urgent(&self.seg, crate::segment::URGENT_SOON);
            } else if let Some(level) = crate::segment::block_wants_slice(&self.seg, self.rank) {
                crate::segment::ring_urgent(&self.seg, level);
            }
            // Re-check after announcing the block: a completion may have landed in between,
            // and the node manager only wakes ranks it sees blocked or bumps `wake`.
            let satisfied = {
                let mut g = self.inner.lock().expect("rank context lock");
                g.pump(&self.seg, self.rank);
                ready(&g.done)
            };
            if !satisfied && !futex::spin_while_eq(&slot.wake, seen, futex::spin_budget()) {
                self.seg
                    .sleep_on_wake(self.rank, seen, Duration::from_millis(100));
            }
            resume_computing(&self.seg, self.rank);
            if self.seg.header().shutdown.load(Ordering::Acquire) != 0 {
                // The job is going down (another rank died): leave without a fuss.
                std::process::exit(1);
            }
            if satisfied {
                return;
            }
        }
    }

    /// The timing-dependent choke point of the `MPI_Test*` family: which of the requests
    /// `ids` a non-blocking test reports complete, as indices into `ids` (per [`Want`]).
    /// Completions are not consumed (use [`RankCtx::take`]). Every test-like call of every
    /// API (Rust and C) goes through here, so the recorder captures each outcome and the
    /// replayer forces it in one place.
    pub fn poll_completed(&self, call: Primitive, ids: &[u64], want: Want) -> Vec<usize> {
        if self.replaying() {
            return self.forced_indices(call, ids, want, false);
        }
        match crate::chaos::next_test() {
            Some(crate::chaos::TestOutcome::Pending) => {
                self.capture_fail();
                return Vec::new();
            }
            Some(crate::chaos::TestOutcome::Complete) => self.await_forced(ids, want),
            Some(crate::chaos::TestOutcome::Index(n)) => {
                if let Some(got) = self.forced_index(ids, want, n) {
                    self.capture(&OutcomeRec::for_indices(&got, ids.len()));
                    return got;
                }
            }
            None => {}
        }
        let got = {
            let mut g = self.inner.lock().expect("rank context lock");
            g.pump(&self.seg, self.rank);
            want.select(ids, &g.done)
        };
        if got.is_empty() {
            self.capture_fail();
        } else {
            self.capture(&OutcomeRec::for_indices(&got, ids.len()));
        }
        got
    }

    /// The blocking counterpart of [`RankCtx::poll_completed`] (`MPI_Wait*`): sleeps until
    /// `want` is satisfied and returns the indices the call reports. Waitany's index and
    /// Waitsome's set depend on timing; they too are captured and forced here.
    pub fn wait_completed(&self, call: Primitive, ids: &[u64], want: Want) -> Vec<usize> {
        // Only Waitany/Waitsome over several requests can report different sets depending on
        // timing; Wait and Waitall always report everything.
        let timing_dependent = want != Want::All && ids.len() > 1;
        if timing_dependent && self.replaying() {
            return self.forced_indices(call, ids, want, true);
        }
        if timing_dependent {
            // Counted like a test (explore numbers the calls that record an outcome); a
            // wait reports success anyway, so only an index forcing changes it.
            if let Some(crate::chaos::TestOutcome::Index(n)) = crate::chaos::next_test() {
                if let Some(got) = self.forced_index(ids, want, n) {
                    self.capture(&OutcomeRec::for_indices(&got, ids.len()));
                    return got;
                }
            }
        }
        let urgent = self.only_self_completing(ids, want);
        self.block_until_urgent(call.into(), urgent, |done| want.satisfied(ids, done));
        let got = {
            let mut g = self.inner.lock().expect("rank context lock");
            g.pump(&self.seg, self.rank);
            want.select(ids, &g.done)
        };
        if timing_dependent {
            self.capture(&OutcomeRec::for_indices(&got, ids.len()));
        }
        got
    }

    /// Wait for one request and consume its completion.
    pub fn wait(&self, call: impl Into<BlockedCall>, request: u64) -> Completion {
        let urgent = self.only_self_completing(&[request], Want::All);
        self.block_until_urgent(call.into(), urgent, |done| done.contains_key(&request));
        self.take(request).expect("completion present after wait")
    }

    /// Consume a completion that `block_until` saw.
    /// The completion of `request` if it was delivered, left in place (for
    /// `MPI_Request_get_status`, which must not free the request).
    pub fn peek(&self, request: u64) -> Option<Completion> {
        self.inner
            .lock()
            .expect("rank context lock")
            .done
            .get(&request)
            .copied()
    }

    pub fn take(&self, request: u64) -> Option<Completion> {
        self.inner
            .lock()
            .expect("rank context lock")
            .done
            .remove(&request)
    }

    /// Post a send to world rank `receiver` (when known): as [`Self::post`], and if that
    /// rank is blocked, ask for the next slice at once (`segment::ring_urgent`): it may
    /// be waiting for this very message, and would otherwise wait for the timer while
    /// other ranks compute (a wavefront's downstream rank). Only a hint: a receiver
    /// blocked in something else gets an early slice that changes nothing, and slice
    /// timing never enters a decision.
    ///
    /// The request is marked before the post and rung after it. The post itself wakes a
    /// Strobe Sender that stretched its timer (`ring_if_stretched`), and that wake-up must
    /// already see the request: the Strobe Sender, woken on the core this rank computes on
    /// (the kernel wakes it where its waker runs), otherwise found nothing urgent, went on
    /// to poll its doorbell, and its first `sched_yield` handed the core back to this rank
    /// for the rest of a scheduler slice: the request rang 20 us later and was seen 1 to
    /// 3 ms later. The SWEEP3D-like non-blocking wavefront paid that at every octant (the
    /// downstream rank blocked for the first block's message). A slice that some other
    /// event starts between the mark and the post only comes early: the ring after the
    /// post asks again.
    pub fn post_send(&self, d: Descriptor, receiver: Option<u32>) -> u64 {
        let urgent = self.receiver_blocked(receiver);
        crate::segment::post_with_request(&self.seg, urgent, || self.post(d))
    }

    /// A blocking send ([`Self::call`]) with [`Self::post_send`]'s hint.
    pub fn call_send(&self, mut d: Descriptor, receiver: Option<u32>) -> Completion {
        d.flags |= crate::descriptor::FLAG_BLOCKING;
        let call = BlockedCall::posted(d.kind);
        let req = self.post_send(d, receiver);
        self.wait(call, req)
    }

    /// Whether a send to `receiver` should ask for the next slice at once: another rank of
    /// this job, blocked (a live run only: a replay's slices come from the recording).
    fn receiver_blocked(&self, receiver: Option<u32>) -> bool {
        let Some(r) = receiver.filter(|&r| r < self.seg.ranks() && r != self.rank) else {
            return false;
        };
        !self.replay_mode && self.seg.slot(r).state() == RankState::Blocked
    }

    /// Post a blocking descriptor and wait for its completion.
    pub fn call(&self, mut d: Descriptor) -> Completion {
        d.flags |= crate::descriptor::FLAG_BLOCKING;
        let call = BlockedCall::posted(d.kind);
        let req = self.post(d);
        self.wait(call, req)
    }

    /// Whether the scheduler completes `d` in the slice it is exchanged in, whatever the
    /// other ranks do: a send or receive with `MPI_PROC_NULL` as its peer (completed at
    /// once), a standard-mode or ready send of at most `eager_max` bytes (matched, or
    /// copied into node memory: `SchedConfig::eager_max`). An eager copy can still wait
    /// when node memory's eager budget is spent; the slice asked for is then only early.
    fn next_slice_completes(&self, d: &Descriptor) -> bool {
        match d.kind() {
            Some(DescKind::Send | DescKind::Ssend | DescKind::Rsend | DescKind::Recv)
                if d.peer == crate::descriptor::PROC_NULL =>
            {
                true
            }
            Some(DescKind::Send | DescKind::Rsend) => d.bytes <= self.eager_max,
            _ => false,
        }
    }

    /// A wait over `ids` that only the next slice's own work can satisfy: every request
    /// it still waits for (`Want::All`), or one of them (`Any`, `Some`), completes in the
    /// next slice whatever the other ranks do. Never in a replay, where the recorded
    /// slices decide when each slice starts.
    fn only_self_completing(&self, ids: &[u64], want: Want) -> bool {
        let mut g = self.inner.lock().expect("rank context lock");
        if g.self_completing.is_empty() || g.replay.is_some() {
            return false;
        }
        g.pump(&self.seg, self.rank);
        let mut pending = ids.iter().filter(|id| !g.done.contains_key(id)).peekable();
        if pending.peek().is_none() {
            return false;
        }
        match want {
            Want::All => pending.all(|id| g.self_completing.contains(id)),
            _ => pending.any(|id| g.self_completing.contains(id)),
        }
    }

    /// `MPI_Finalize`: the last descriptor; the rank stops counting as computing.
    pub fn finalize(&self) {
        self.finalize_with_leaks(&[]);
    }

    /// `MPI_Finalize` of a rank whose requests created by `leaked` were never completed
    /// or freed: the descriptor carries them for the checks (`checks.rs`).
    pub fn finalize_with_leaks(&self, leaked: &[Option<crate::calls::Call>]) {
        if !self.replaying() {
            // Close the open run of failed tests.
            self.capture(&[]);
        }
        let (aux, aux2) = crate::checks::encode_leaks(leaked);
        let d = Descriptor {
            kind: crate::descriptor::DescKind::Finalize as u8,
            aux,
            aux2,
            ..Default::default()
        };
        self.call(d);
        if leave_computing(&self.seg, self.rank, RankState::Finalized) {
            ring_doorbell(&self.seg);
        }
    }

    /// `MPI_Abort`: record the code for the launcher's report and exit with it.
    pub fn abort(&self, code: i32) -> ! {
        self.seg
            .slot(self.rank)
            .abort_code
            .store((code as u32).wrapping_add(1).max(1), Ordering::Release);
        std::process::exit(if code == 0 { 1 } else { code });
    }
}

/// What a Test/Wait-family call reports over its set of requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// `MPI_Test(any)` / `MPI_Wait(any)`: the lowest-indexed completed request.
    Any,
    /// `MPI_Test(all)` / `MPI_Wait(all)`: every request, or (test) none.
    All,
    /// `MPI_Testsome` / `MPI_Waitsome`: every completed request, ascending.
    Some,
}

impl Want {
    fn satisfied(self, ids: &[u64], done: &DoneMap) -> bool {
        match self {
            Want::All => ids.iter().all(|i| done.contains_key(i)),
            Want::Any | Want::Some => ids.is_empty() || ids.iter().any(|i| done.contains_key(i)),
        }
    }

    fn select(self, ids: &[u64], done: &DoneMap) -> Vec<usize> {
        let mut idx = (0..ids.len()).filter(|&i| done.contains_key(&ids[i]));
        match self {
            Want::Any => idx.next().into_iter().collect(),
            Want::Some => idx.collect(),
            Want::All => {
                if self.satisfied(ids, done) {
                    (0..ids.len()).collect()
                } else {
                    Vec::new()
                }
            }
        }
    }
}

/// Seconds on `CLOCK_MONOTONIC`.
pub fn monotonic_seconds() -> f64 {
    ns_to_seconds(monotonic_ns())
}

/// Nanoseconds on `CLOCK_MONOTONIC`.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The `MPI_Wtime` value of a nanosecond count (one formula for record and replay).
pub fn ns_to_seconds(ns: u64) -> f64 {
    (ns / 1_000_000_000) as f64 + (ns % 1_000_000_000) as f64 * 1e-9
}

/// Used by the launcher when it creates the segment.
/// The size of the segment [`create_segment`] makes for `ranks` ranks.
pub fn segment_bytes(ranks: u32) -> usize {
    segment::JobSegment::byte_len(ranks, DESC_CAPACITY, COMP_CAPACITY)
}

pub fn create_segment(ranks: u32, nodes: u32) -> std::io::Result<JobSegment> {
    segment::JobSegment::create(ranks, nodes, DESC_CAPACITY, COMP_CAPACITY)
}
