//! The Strobe Sender's wait for the next slice: the timer, the adaptive strobe's early
//! start and stretched timer, and replay's gate (a child module of `node`, so it sees the
//! Node Manager's fields), and the node thread's heap setting.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::super::sink::{Gate, SliceSource};
use super::super::EngineOutcome;
use super::NodeManager;
use crate::futex;
use strobe_core::slice::{Event, SliceMachine};
use tracing::debug;

/// How long a stretched timer sleeps without a doorbell before it runs a slice anyway
/// (a safety net: every event that needs a slice rings the doorbell).
const STRETCH_LIMIT: Duration = Duration::from_millis(100);
/// How long the Strobe Sender polls its doorbell between looks at the mirror's blocks.
const MIRROR_POLL: Duration = Duration::from_micros(5);
/// How long an `URGENT_SOON` request (`segment::ring_urgent`: a rank blocked in a small
/// eager send) waits for the ranks that still compute to block as well. The rank it talks
/// to is often computing only for the microseconds between the completion the last slice
/// delivered and its next call (a ping-pong's partner between its `MPI_Send` and its
/// `MPI_Recv`). Starting the slice at once exchanged the send without that call, and a
/// third slice per round trip matched it: a 64-byte ping-pong ran 13,348 slices for 8,000
/// messages, 8,266 with the grace, one-way latency unchanged (12.6 us), a recording of it
/// 14% smaller. Not for `URGENT_NOW` (an inline send to a blocked receiver: that receiver's
/// wait is the latency; a 5 us grace there cost 1-byte messages 2 us). A wavefront's
/// rank whose neighbours compute for milliseconds loses at most this much.
const URGENT_GRACE: Duration = Duration::from_micros(5);

/// An `URGENT_SOON` request gets its [`URGENT_GRACE`] only this soon after the delivery
/// that woke the ranks still computing: they are then likely between a completion and
/// their next call (a ping-pong's or an exchange's partner). Later, a rank that computes
/// is in a computation phase (a wavefront's neighbour, milliseconds), the slice starts at
/// once: the grace's doorbell poll, on a core the Strobe Sender shares with a computing
/// rank, yielded that core for a scheduler slice (1-3 ms), which made the SWEEP3D-like
/// wavefront 3% slower once a block with only the rank's own posts waiting asked `SOON`
/// (`segment::block_wants_slice`).
const GRACE_AFTER_DELIVERY: Duration = Duration::from_micros(50);

/// Replay: the Strobe Sender's first sleep for the gate without a doorbell, and the
/// longest it doubles to while nothing rings (a user command waits at most that long).
pub(super) const GATE_NAP_SHORTEST: Duration = Duration::from_millis(2);
const GATE_NAP_LONGEST: Duration = Duration::from_millis(32);

/// [`URGENT_GRACE`] while the Strobe Sender may poll (none when the job's threads
/// outnumber the cores: polling would keep the computing rank from its core).
fn urgent_grace() -> Duration {
    URGENT_GRACE.min(futex::spin_budget())
}

impl NodeManager {
    /// Strobe Sender, one round: report whatever could start the next slice (or end the
    /// job); if nothing does, sleep until the doorbell rings or the machine's timer expires.
    pub(super) fn await_start(&mut self, m: &mut SliceMachine, early: bool, stretched: bool) {
        if self.shared.stop.load(Ordering::Acquire) {
            return m.handle(Event::Stop);
        }
        if self.all_done() {
            self.finished();
            return m.handle(Event::AllRanksDone);
        }
        let bell = self.shared.seg.header().doorbell.load(Ordering::Acquire);
        // Only the adaptive strobe can start early, so only it reads `computing`.
        let now = self.now_ns();
        if early && self.nothing_to_wait_for() {
            m.handle(Event::NoRankComputing { now });
        }
        if stretched {
            if m.awaiting_start() {
                self.sleep_stretched(m, early, bell);
            }
            return;
        }
        m.handle(Event::TimeAdvanced { now });
        let Some(deadline) = m.timeout().filter(|_| m.awaiting_start()) else {
            return;
        };
        let deadline = self.shared.started + Duration::from_nanos(deadline);
        // Only the adaptive strobe polls the doorbell; the fixed strobe sleeps until its timer.
        if let Some(end) = self.urgent_grace_end() {
            // An urgent request in its grace: poll until the grace ends (or a rank blocks,
            // which rings), then look again; never sleep past it.
            let spin = end.min(deadline).saturating_duration_since(Instant::now());
            self.spin_on_doorbell(bell, spin);
            return;
        }
        let spin = if early {
            self.doorbell_spin()
        } else {
            Duration::ZERO
        }
        .min(deadline.saturating_duration_since(Instant::now()));
        if !self.spin_on_doorbell(bell, spin) {
            let h = self.shared.seg.header();
            futex::wait_counted(&h.doorbell, bell, &h.doorbell_sleepers, Some(deadline));
        }
    }

    /// Adaptive strobe: waiting longer for the next slice cannot help. No rank computes
    /// (every rank blocked, finalized or exited), or one waits in a call the next slice
    /// completes whatever the others do (`segment::ring_urgent`: a small standard-mode
    /// send) and the ranks still computing had [`URGENT_GRACE`] to block too. Either way
    /// the slice starts now and is recorded as `early`.
    fn nothing_to_wait_for(&mut self) -> bool {
        if self.shared.computing_total() == 0 {
            return true;
        }
        let urgent = crate::segment::urgent(&self.shared.seg);
        if urgent & crate::segment::URGENT_NOW != 0 {
            return true;
        }
        if urgent == 0 {
            return false;
        }
        let now = Instant::now();
        if !self.woken.woke_within(now, GRACE_AFTER_DELIVERY) {
            // The ranks still computing were not woken a moment ago: they compute for a
            // while, and the grace would only delay the slice (while polling, the Strobe
            // Sender's yields can hand a computing rank its core for a scheduler slice).
            return true;
        }
        let since = *self.urgent_since.get_or_insert(now);
        now.duration_since(since) >= urgent_grace()
    }

    /// When the grace of a pending urgent request ends, if it has not yet.
    fn urgent_grace_end(&self) -> Option<Instant> {
        let end = self.urgent_since? + urgent_grace();
        (end > Instant::now()).then_some(end)
    }

    /// How long the Strobe Sender polls its doorbell before it sleeps: the spin policy's
    /// budget while some rank waits for a slice (the doorbell may ring within
    /// microseconds: a ping-pong). While every rank computes the doorbell rings only when
    /// a rank posts or blocks, typically a whole computation phase later, and polling
    /// would only take the core from a computing rank (on a host with as many ranks as
    /// cores, each poll is time the program loses: the synthetic benchmarks); except
    /// right after a delivery, while the ranks it woke have been coming back to MPI
    /// within microseconds (`woken.rs`).
    fn doorbell_spin(&mut self) -> Duration {
        if self.shared.computing_total() >= self.cfg.ranks {
            return self.woken.spin(Instant::now()).min(futex::spin_budget());
        }
        futex::spin_budget()
    }

    /// Poll the doorbell for up to `spin`; true when it rang. With a slot mirror, also
    /// apply the other nodes' status blocks as they arrive (one hop less than waiting for
    /// node 0's mirror thread to wake).
    fn spin_on_doorbell(&self, bell: u32, spin: Duration) -> bool {
        let h = self.shared.seg.header();
        if self.mirror.applier.is_none() || spin.is_zero() {
            return futex::spin_while_eq(&h.doorbell, bell, spin);
        }
        let until = Instant::now() + spin;
        loop {
            if futex::spin_while_eq(&h.doorbell, bell, MIRROR_POLL) {
                return true;
            }
            if let Err(e) = self.mirror.poll() {
                tracing::warn!("slot mirror: {e}");
            }
            if Instant::now() >= until {
                return h.doorbell.load(Ordering::Acquire) != bell;
            }
        }
    }

    /// Adaptive strobe after a quiet slice: no timer. Sleep until the doorbell rings (the
    /// next post clears `stretched` and rings, a rank that blocks last rings, so does an
    /// exit or a stop), then restart the timer (or start at once if no rank computes).
    fn sleep_stretched(&mut self, m: &mut SliceMachine, early: bool, bell: u32) {
        let spin = self.doorbell_spin().min(STRETCH_LIMIT);
        let h = self.shared.seg.header();
        h.stretched.store(1, Ordering::SeqCst);
        // Pairs with `ring_if_stretched`: a post that did not see the word is seen here.
        std::sync::atomic::fence(Ordering::SeqCst);
        let posted =
            self.watch.iter().any(|q| !q.descriptors.is_empty()) || self.shared.remote.queued();
        if !posted
            && !self.shared.stop.load(Ordering::Acquire)
            && !futex::spin_while_eq(&h.doorbell, bell, spin)
        {
            futex::wait_counted(
                &h.doorbell,
                bell,
                &h.doorbell_sleepers,
                Some(Instant::now() + STRETCH_LIMIT),
            );
        }
        h.stretched.store(0, Ordering::Release);
        let now = self.now_ns();
        if early && self.nothing_to_wait_for() {
            m.handle(Event::NoRankComputing { now });
        }
        m.handle(Event::Doorbell { now });
    }

    pub(super) fn finished(&self) {
        let slices = self.shared.slice.load(Ordering::Acquire);
        debug!(slices, "every rank finalized or exited");
        *self.shared.outcome.lock().expect("outcome lock") =
            Some(EngineOutcome::Finished { slices });
    }

    /// Strobe Sender in replay (logical slices, model.md 4.4), one round: no timer; the
    /// next slice starts as soon as the slice source's gate opens.
    pub(super) fn await_gate(&mut self, m: &mut SliceMachine, src: &dyn SliceSource) {
        let h = self.shared.seg.header();
        let next = m.slice() + 1;
        if self.shared.stop.load(Ordering::Acquire) {
            return m.handle(Event::Stop);
        }
        let bell = h.doorbell.load(Ordering::Acquire);
        // The gate first: the recording may hold slices after the last rank finished
        // (they ran while the ranks were exiting); a replay runs them too.
        // Whether everyone is done is read before the gate: states only move towards
        // done, so a gate that still waits with everyone done waits for nothing.
        let done = self.all_done();
        let gate = src.gate(next, &self.shared.seg);
        if gate == Gate::Wait && done {
            self.finished();
            return m.handle(Event::AllRanksDone);
        }
        match gate {
            Gate::Open => {
                self.shared.parked.store(0, Ordering::Release);
                return m.handle(Event::GateOpen { now: self.now_ns() });
            }
            Gate::Stop(why) => {
                *self.shared.outcome.lock().expect("outcome lock") =
                    Some(EngineOutcome::SourceStopped(why));
                self.shared.stop.store(true, Ordering::Release);
                return m.handle(Event::Stop);
            }
            Gate::Wait => self.shared.parked.store(next, Ordering::Release),
        }
        // Replaying ranks ring the doorbell when they post, block or are held; the
        // timeout covers what rings nothing (a rank that exits, a user command). It
        // doubles while nothing rings: a fixed 2 ms woke the Strobe Sender five times in
        // each 10 ms computation of `synth_barrier`, each time taking a core from a
        // computing rank (replay 1% slower than the recording it replays). It polls first
        // as the live Strobe Sender does (`doorbell_spin`): not while every rank computes,
        // except right after a delivery; it polled the whole spin budget, yielding, before
        // each of those sleeps.
        let spin = self.doorbell_spin();
        let h = self.shared.seg.header();
        let rang = futex::spin_while_eq(&h.doorbell, bell, spin)
            || futex::wait_counted(
                &h.doorbell,
                bell,
                &h.doorbell_sleepers,
                Some(Instant::now() + self.gate_nap),
            ) != futex::WaitResult::TimedOut;
        self.gate_nap = if rang {
            GATE_NAP_SHORTEST
        } else {
            (self.gate_nap * 2).min(GATE_NAP_LONGEST)
        };
    }
}

/// Keep freed heap memory instead of handing it back after every slice. A node thread's
/// heap is a glibc arena of its own, which glibc trims with `madvise(MADV_DONTNEED)` as
/// soon as its top exceeds the trim threshold: with a window of 64 small messages that was
/// one system call per slice (the scheduler's and the slice record's buffers, freed at the
/// end of each slice; `strace -f -c`, docs/benchmarks-detail.md). 64 MiB bounds what a
/// job's launcher may keep.
pub(super) fn keep_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes the allocator's tuning; it is thread-safe in glibc.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
    }
}
