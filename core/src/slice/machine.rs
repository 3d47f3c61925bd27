//! The slice loop of one Node Manager as a state machine, in the style of quinn-proto's
//! `Connection`: no I/O, no clock, no threads. The driver (the runtime's `engine/node.rs`)
//! asks it what to do next ([`SliceMachine::poll`]), does it with the real transport, the
//! job segment and the helpers, and reports what happened ([`SliceMachine::handle`]), with
//! the time as plain nanoseconds. The same machine plays the papers' roles:
//!
//! * node 0 is the **Strobe Sender**: it decides when a slice starts (timer, adaptive early
//!   start, or the replay gate for logical slices) and runs every **microstrobe**, the
//!   Compare-And-Write "every node's `VAR_DONE` >= code, then `VAR_GO` := code" that opens
//!   the next microphase; each failed attempt is one unsuccessful synchronization retry
//!   (USRDEM, USRMSM, USRSTS);
//! * every node is a **Strobe Receiver** (node 0 receives its own strobe), a **Buffer
//!   Sender** (DEM: drain and broadcast the descriptor batch), a **Buffer Receiver** (MSM:
//!   merge the mailboxes and run the scheduler replica) and runs the DMA, Collective and
//!   Reduce Helpers (P2P, BBM, RM).
//!
//! A slice is DEM → MSM → P2P → BBM → (RmRead) → RM; each microphase ends with
//! [`Command::SignalPhaseDone`] on every node and a microstrobe. `RmRead` is a microstrobe
//! inside RM, run only when the job has several nodes and the slice has a reduction: every
//! node must have read its reduction inputs before any node writes results. With several
//! nodes, the microstrobe before a phase that moves no bytes between nodes in this slice
//! is skipped ([`CrossNode`], reported with [`Event::Scheduled`]); DEM's is replaced by
//! each node counting the batches that reached it ([`Command::MergeAndSchedule`]); and
//! RM's is awaited by node 0 only (the other nodes' next step is the next strobe anyway).
//! Across hosts each microstrobe is a message each way through the link threads, so a
//! barrier's slice is now the strobe, the batches (one way) and RM's done signals.
//!
//! **Replica cross-check.** Every node runs a scheduler replica over the global batch, so
//! every node computes the same decision digest. Each DEM batch carries the digest the
//! sending node computed for the previous slice ([`Command::SendBatch`]); in MSM every node
//! compares the digests it received with its own, and a mismatch ends the job with
//! [`SliceError::ReplicaDivergence`]. Every node holds every digest, so every node sees a
//! mismatch in the same microphase and none is left waiting. The last slice of a job is not
//! cross-checked (no DEM follows it): the check costs no extra exchange.
//!
//! Events that do not apply to the current state are ignored (for instance
//! [`Event::NoRankComputing`] under the fixed policy, or a stale wake-up).

use std::collections::VecDeque;

use super::{code, Phase, StartReason, StrobePolicy};

/// What the machine needs to know about its node and the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MachineConfig {
    pub node: u32,
    pub nodes: u32,
    pub policy: StrobePolicy,
    /// The slice timer, in nanoseconds.
    pub slice_ns: u64,
    /// Logical slices (replay): no timer; the Strobe Sender starts a slice when the slice
    /// source's gate opens ([`Event::GateOpen`]).
    pub logical: bool,
}

/// The decision digest a node computed for a slice, as carried in its DEM batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaDigest {
    pub node: u32,
    /// The slice the digest is of; 0: nothing to compare yet (the first slice's batch).
    pub slice: u64,
    pub digest: u64,
}

/// Unsuccessful synchronization retries of one slice (the papers' USR* metrics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usr {
    /// Failed microstrobe attempts that closed DEM.
    pub dem: u32,
    /// Failed microstrobe attempts that closed MSM.
    pub msm: u32,
    /// Every failed microstrobe attempt of the slice (DEM and MSM included).
    pub sts: u32,
}

/// Which of a slice's data phases move bytes between nodes (the data plane's staging
/// rounds). With several nodes, the microstrobe that would open a phase moving nothing
/// between nodes is skipped (MSM before P2P, P2P before BBM, BBM before RM): each node's
/// work in such a phase touches only its own ranks, and the phase's staging rounds are
/// what the microstrobe keeps apart from the previous phase's (their signals are counted,
/// not tagged). DEM's and RM's have rules of their own (the module's documentation).
/// Every node computes the same answer, so every node skips the same microstrobes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrossNode {
    pub p2p: bool,
    pub bbm: bool,
    pub rm: bool,
}

impl CrossNode {
    /// Every phase may move bytes between nodes: every microstrobe runs.
    pub const ALL: CrossNode = CrossNode {
        p2p: true,
        bbm: true,
        rm: true,
    };

    /// Whether the phase after `done` moves bytes between nodes (true for the phases whose
    /// microstrobe is never skipped).
    fn next_moves(self, done: Phase) -> bool {
        match done {
            Phase::Msm => self.p2p,
            Phase::P2p => self.bbm,
            Phase::Bbm => self.rm,
            Phase::Dem | Phase::RmRead | Phase::Rm => true,
        }
    }
}

/// Why the slice loop ended without an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// Stop was requested (from outside, or by node 0's stop strobe).
    Requested,
    /// Every rank finalized or exited.
    AllRanksDone,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SliceError {
    #[error(
        "scheduler replicas diverged in slice {slice}: node {node} computed decision digest \
         {digest:016x}, node {other} computed {other_digest:016x}"
    )]
    ReplicaDivergence {
        slice: u64,
        node: u32,
        digest: u64,
        other: u32,
        other_digest: u64,
    },
}

/// What happened, as reported by the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// Leave the loop at the next slice boundary (node 0: asked from outside; other nodes:
    /// the stop strobe arrived).
    Stop,
    /// Strobe Sender: every rank finalized or exited.
    AllRanksDone,
    /// Strobe Sender: no rank is computing (every rank blocked, held or done) at `now`.
    NoRankComputing { now: u64 },
    /// Strobe Sender: the clock reads `now`; the timer may have expired.
    TimeAdvanced { now: u64 },
    /// Strobe Sender, adaptive policy: the slice that just ended was quiet (nothing posted,
    /// nothing decided, nothing in flight or waiting for delivery). The timer stretches:
    /// the next slice starts when the doorbell rings (a rank posts or blocks), not when the
    /// timer expires, so computing ranks lose no CPU to empty slices.
    QuietSlice,
    /// Strobe Sender: the doorbell rang at `now` while the timer was stretched (a rank
    /// posted a descriptor, or something else needs a slice): the timer runs again, the
    /// next slice one period after `now` (or earlier, when no rank computes).
    Doorbell { now: u64 },
    /// Strobe Sender, logical slices: the slice source's gate opened at `now`.
    GateOpen { now: u64 },
    /// Strobe Receiver: the global strobe of `slice` arrived.
    StrobeReceived { slice: u64 },
    /// The local work of a microphase other than MSM finished.
    PhaseWorkDone(Phase),
    /// MSM finished: the replica's digest of this slice, whether the slice has a reduction,
    /// and the digests every node carried in its DEM batch (its own included, or not).
    Scheduled {
        digest: u64,
        reductions: bool,
        /// Which data phases move bytes between nodes in this slice (a function of the
        /// decisions: the same on every node). See [`CrossNode`].
        cross_node: CrossNode,
        replicas: &'a [ReplicaDigest],
    },
    /// Strobe Sender: result of a microstrobe Compare-And-Write.
    MicrostrobeAttempt { opened: bool },
    /// Strobe Sender: one node's phase-done signal (`EV_DONE`) was consumed.
    PhaseDoneSignal,
    /// Other nodes: the microstrobe opened the next microphase (`VAR_GO` reached the code).
    MicrostrobeOpened,
}

/// What the driver must do next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Strobe Sender: report what could start the next slice (`Stop`, `AllRanksDone`,
    /// `NoRankComputing`, `TimeAdvanced`, `GateOpen`); if that does not start it, wait for
    /// a change or until [`SliceMachine::timeout`]. `early`: whether no rank computing
    /// starts a slice (worth polling the doorbell). `stretched`: the timer is stretched
    /// after a quiet slice; there is no timeout, and the driver reports `Doorbell` when
    /// the doorbell rings (ranks ring it at their next post).
    AwaitStart { early: bool, stretched: bool },
    /// Strobe Sender: send the global strobe of `slice` to every node.
    SendStrobe { slice: u64 },
    /// Strobe Receiver: wait for a strobe other than `last`, report `StrobeReceived` or `Stop`.
    AwaitStrobe { last: u64 },
    /// A slice starts on this node (post limits, the blocked set, outcomes).
    BeginSlice {
        slice: u64,
        reason: StartReason,
        getts_ns: u64,
    },
    /// DEM, Buffer Sender: drain the local descriptor queues and broadcast the batch,
    /// carrying `replica` (this node's digest of the previous slice) in its header; report
    /// `PhaseWorkDone(Dem)`.
    SendBatch {
        slice: u64,
        replica: Option<ReplicaDigest>,
    },
    /// MSM, Buffer Receiver: merge every mailbox, run the scheduler; report `Scheduled`.
    /// With several nodes no microstrobe closes DEM: the driver first waits until every
    /// node's batch of this slice arrived (counted signals, one per node and slice).
    MergeAndSchedule { slice: u64 },
    /// P2P: the DMA Helper moves this node's chunks; report `PhaseWorkDone(P2p)`.
    RunP2p,
    /// BBM: the Collective Helper runs barriers, broadcasts, scatters, gathers, ...;
    /// report `PhaseWorkDone(Bbm)`.
    RunBbm,
    /// RM, first part: the Reduce Helper reads its inputs and combines them; report
    /// `PhaseWorkDone(RmRead)`.
    ReduceRead,
    /// RM, second part: write the results, deliver completions, wake ranks; report
    /// `PhaseWorkDone(Rm)`.
    WriteAndDeliver,
    /// Store `code` in this node's `VAR_DONE` (and, off node 0, signal `EV_DONE` on node 0).
    SignalPhaseDone { code: u64 },
    /// Strobe Sender: Compare-And-Write for the microstrobe `code`; report the result.
    AttemptMicrostrobe { code: u64 },
    /// Strobe Sender: wait for one node's phase-done signal; report `PhaseDoneSignal`.
    AwaitPhaseDoneSignal,
    /// Strobe Sender: the microstrobe `code` opened: consume the `drain_signals` phase-done
    /// signals still owed for it (so none turns into a phantom retry later) and, if
    /// `wake_others`, wake the other nodes (`EV_MICRO`; not for RM's with several nodes,
    /// which nobody waits for).
    OpenMicrostrobe {
        code: u64,
        drain_signals: u32,
        wake_others: bool,
    },
    /// Other nodes: wait until the microstrobe `code` opens; report `MicrostrobeOpened`.
    AwaitMicrostrobe { code: u64 },
    /// The slice is over on this node (metrics, the slice record, deadlock detection).
    EndSlice { slice: u64, usr: Usr },
    /// End the job with this error.
    Fail(SliceError),
    /// Leave the slice loop.
    Finished(Stopped),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    AwaitingStart,
    AwaitingStrobe,
    /// A work command of `Phase` was handed out; waiting for its completion event.
    Working(Phase),
    /// `phase` is done locally; waiting for its microstrobe. On node 0, `owed` phase-done
    /// signals are still to come and `attempt` says whether to try the Compare-And-Write.
    Syncing {
        phase: Phase,
        owed: u32,
        attempt: bool,
    },
    Over,
}

/// One Node Manager's slice loop.
#[derive(Debug)]
pub struct SliceMachine {
    cfg: MachineConfig,
    state: State,
    queue: VecDeque<Command>,
    slice: u64,
    usr: Usr,
    reductions: bool,
    cross_node: CrossNode,
    /// This replica's digest of the last slice it scheduled.
    last_digest: Option<ReplicaDigest>,
    // Strobe Sender (node 0).
    last_start: Option<u64>,
    /// When the current slice was *due*: timer slices are scheduled from this, not from
    /// the actual start, so wake-up latency does not accumulate into drift.
    due: u64,
    /// When the timer starts the next slice; computed at the first time event after a
    /// slice ended, so the slice path itself never needs the clock.
    deadline: Option<u64>,
    /// Adaptive strobe after a quiet slice: no timer until the doorbell rings.
    stretched: bool,
}

impl SliceMachine {
    /// A machine at time `now` (ns). Node 0 without logical slices starts slice 1 at once.
    pub fn new(cfg: MachineConfig, now: u64) -> Self {
        let mut m = SliceMachine {
            cfg,
            state: if cfg.node == 0 {
                State::AwaitingStart
            } else {
                State::AwaitingStrobe
            },
            queue: VecDeque::with_capacity(8),
            slice: 0,
            usr: Usr::default(),
            reductions: false,
            cross_node: CrossNode::ALL,
            last_digest: None,
            last_start: None,
            due: now,
            deadline: None,
            stretched: false,
        };
        if cfg.node == 0 && !cfg.logical {
            m.start(now, StartReason::First);
        }
        m
    }

    /// The slice in progress (or the last one).
    pub fn slice(&self) -> u64 {
        self.slice
    }

    /// The Strobe Sender's timer: when the next slice starts unless something starts it
    /// earlier (ns). `None` off node 0, with logical slices, or before the first time
    /// event after a slice (the driver reports the time at once).
    pub fn timeout(&self) -> Option<u64> {
        match self.state {
            State::AwaitingStart if !self.cfg.logical && !self.stretched => self.deadline,
            _ => None,
        }
    }

    /// Whether the Strobe Sender is still waiting to start the next slice.
    pub fn awaiting_start(&self) -> bool {
        self.state == State::AwaitingStart && self.queue.is_empty()
    }

    /// The next thing to do. `None` while a work command is out (report its completion
    /// first) and after the loop ended.
    pub fn poll(&mut self) -> Option<Command> {
        if let Some(c) = self.queue.pop_front() {
            return Some(c);
        }
        let c = match self.state {
            State::AwaitingStart => Command::AwaitStart {
                early: !self.cfg.logical && self.cfg.policy == StrobePolicy::Adaptive,
                stretched: self.stretched,
            },
            State::AwaitingStrobe => Command::AwaitStrobe { last: self.slice },
            State::Syncing { phase, attempt, .. } => {
                let code = code(self.slice, phase);
                match (self.cfg.node == 0, attempt) {
                    (true, true) => Command::AttemptMicrostrobe { code },
                    (true, false) => Command::AwaitPhaseDoneSignal,
                    (false, _) => Command::AwaitMicrostrobe { code },
                }
            }
            State::Working(_) | State::Over => return None,
        };
        Some(c)
    }

    /// Report an event. Only the events that can start a slice carry the time.
    pub fn handle(&mut self, ev: Event<'_>) {
        match (self.state, ev) {
            (State::AwaitingStart | State::AwaitingStrobe, Event::Stop) => {
                self.finish(Stopped::Requested)
            }
            (State::AwaitingStart, Event::AllRanksDone) => self.finish(Stopped::AllRanksDone),
            (State::AwaitingStart, Event::NoRankComputing { now })
                if !self.cfg.logical && self.cfg.policy == StrobePolicy::Adaptive =>
            {
                self.start(now, StartReason::Early)
            }
            (State::AwaitingStart, Event::TimeAdvanced { now })
                if !self.cfg.logical && !self.stretched && now >= self.deadline_from(now) =>
            {
                self.start(now, StartReason::Timer)
            }
            (State::AwaitingStart, Event::QuietSlice)
                if !self.cfg.logical && self.cfg.policy == StrobePolicy::Adaptive =>
            {
                self.stretched = true;
                self.deadline = None;
            }
            // The doorbell ends the stretch: the timer restarts from the post, as if empty
            // slices had run all along. Not at once: a burst of posts (a window of
            // `MPI_Isend`s) would be cut over several slices.
            (State::AwaitingStart, Event::Doorbell { now }) if self.stretched => {
                self.stretched = false;
                self.due = now;
                self.deadline = None;
            }
            (State::AwaitingStart, Event::GateOpen { now }) if self.cfg.logical => {
                let reason = match self.last_start {
                    None => StartReason::First,
                    Some(_) => StartReason::Logical,
                };
                self.start(now, reason)
            }
            (State::AwaitingStrobe, Event::StrobeReceived { slice }) if slice != self.slice => {
                // The other nodes' GETTS is not measured: only node 0 knows when slices start.
                self.begin(slice, StartReason::Timer, 0)
            }
            (State::Working(p), Event::PhaseWorkDone(q)) if p == q && p != Phase::Msm => {
                self.work_done(p)
            }
            (
                State::Working(Phase::Msm),
                Event::Scheduled {
                    digest,
                    reductions,
                    cross_node,
                    replicas,
                },
            ) => {
                self.cross_node = cross_node;
                self.scheduled(digest, reductions, replicas)
            }
            (State::Syncing { phase, owed, .. }, Event::MicrostrobeAttempt { opened }) => {
                if opened {
                    self.queue.push_back(Command::OpenMicrostrobe {
                        code: code(self.slice, phase),
                        drain_signals: owed,
                        wake_others: self.others_await_microstrobe(phase),
                    });
                    self.advance(phase);
                } else {
                    self.count_retry(phase);
                    // With every signal consumed, retry at once: the last node's store is
                    // already on its way.
                    self.state = State::Syncing {
                        phase,
                        owed,
                        attempt: owed == 0,
                    };
                }
            }
            (State::Syncing { phase, owed, .. }, Event::PhaseDoneSignal) if owed > 0 => {
                self.state = State::Syncing {
                    phase,
                    owed: owed - 1,
                    attempt: true,
                };
            }
            (State::Syncing { phase, .. }, Event::MicrostrobeOpened) if self.cfg.node != 0 => {
                self.advance(phase)
            }
            _ => {}
        }
    }

    fn finish(&mut self, why: Stopped) {
        self.queue.push_back(Command::Finished(why));
        self.state = State::Over;
    }

    /// Strobe Sender: start the next slice now.
    fn start(&mut self, now: u64, reason: StartReason) {
        let getts = self.last_start.map_or(0, |l| now.saturating_sub(l));
        self.due = match reason {
            StartReason::Timer => self.deadline.unwrap_or(now),
            _ => now,
        };
        self.deadline = None;
        self.stretched = false;
        self.last_start = Some(now);
        let slice = self.slice + 1;
        self.queue.push_back(Command::SendStrobe { slice });
        self.begin(slice, reason, getts);
    }

    fn begin(&mut self, slice: u64, reason: StartReason, getts_ns: u64) {
        self.slice = slice;
        self.usr = Usr::default();
        self.reductions = false;
        self.cross_node = CrossNode::ALL;
        self.queue.push_back(Command::BeginSlice {
            slice,
            reason,
            getts_ns,
        });
        self.queue.push_back(Command::SendBatch {
            slice,
            replica: self.last_digest,
        });
        self.state = State::Working(Phase::Dem);
    }

    fn work_done(&mut self, phase: Phase) {
        if phase == Phase::RmRead && !(self.reductions && self.cfg.nodes > 1) {
            // Nothing to order between reading and writing: no microstrobe.
            self.advance(phase);
            return;
        }
        if self.cfg.nodes > 1 && !self.cross_node.next_moves(phase) {
            // Nothing crosses between nodes in the next phase: no microstrobe (CrossNode).
            self.advance(phase);
            return;
        }
        if self.cfg.nodes > 1 && phase == Phase::Dem {
            // Several nodes: MSM waits for every node's batch itself (the driver counts
            // their arrivals, `Command::MergeAndSchedule`), which is all DEM's microstrobe
            // would order: a node's batch of the next slice cannot arrive before this
            // slice ended everywhere (it follows the next strobe).
            self.advance(phase);
            return;
        }
        self.queue.push_back(Command::SignalPhaseDone {
            code: code(self.slice, phase),
        });
        if self.cfg.node != 0 && !self.others_await_microstrobe(phase) {
            self.end_slice();
            return;
        }
        self.state = State::Syncing {
            phase,
            // Every other node signals EV_DONE exactly once per phase.
            owed: self.cfg.nodes - 1,
            attempt: true,
        };
    }

    /// Whether the nodes other than 0 wait for the microstrobe that closes `phase`. Not
    /// for RM's with several nodes: nothing follows RM on them but the next strobe, which
    /// node 0 sends only once every node signalled RM done (a message and a wake-up per
    /// node and slice saved).
    fn others_await_microstrobe(&self, phase: Phase) -> bool {
        !(phase == Phase::Rm && self.cfg.nodes > 1)
    }

    fn scheduled(&mut self, digest: u64, reductions: bool, replicas: &[ReplicaDigest]) {
        if let Some(own) = self.last_digest {
            // Digests of another slice are not comparable; every node sends the previous
            // slice's, so they only differ if the exchange itself is broken.
            let other = replicas
                .iter()
                .find(|r| r.node != own.node && r.slice == own.slice && r.digest != own.digest);
            if let Some(o) = other {
                self.queue
                    .push_back(Command::Fail(SliceError::ReplicaDivergence {
                        slice: own.slice,
                        node: own.node,
                        digest: own.digest,
                        other: o.node,
                        other_digest: o.digest,
                    }));
                self.state = State::Over;
                return;
            }
        }
        self.last_digest = Some(ReplicaDigest {
            node: self.cfg.node,
            slice: self.slice,
            digest,
        });
        self.reductions = reductions;
        self.work_done(Phase::Msm);
    }

    fn count_retry(&mut self, phase: Phase) {
        match phase {
            Phase::Dem => self.usr.dem += 1,
            Phase::Msm => self.usr.msm += 1,
            _ => {}
        }
        self.usr.sts += 1;
    }

    /// The microstrobe of `phase` opened (or `phase` needed none): hand out the next work.
    fn advance(&mut self, phase: Phase) {
        let (next, work) = match phase {
            Phase::Dem => (Phase::Msm, Command::MergeAndSchedule { slice: self.slice }),
            Phase::Msm => (Phase::P2p, Command::RunP2p),
            Phase::P2p => (Phase::Bbm, Command::RunBbm),
            Phase::Bbm => (Phase::RmRead, Command::ReduceRead),
            Phase::RmRead => (Phase::Rm, Command::WriteAndDeliver),
            Phase::Rm => return self.end_slice(),
        };
        self.queue.push_back(work);
        self.state = State::Working(next);
    }

    fn end_slice(&mut self) {
        self.queue.push_back(Command::EndSlice {
            slice: self.slice,
            usr: self.usr,
        });
        self.state = if self.cfg.node == 0 {
            State::AwaitingStart
        } else {
            State::AwaitingStrobe
        };
    }

    /// The timer deadline of the next slice, computed at the first time event after the
    /// previous slice ended (`now`).
    fn deadline_from(&mut self, now: u64) -> u64 {
        if let Some(d) = self.deadline {
            return d;
        }
        let slice = self.cfg.slice_ns;
        let last = self.last_start.unwrap_or(now);
        // If the slice overran by more than a whole slice, resynchronise rather than fire a
        // burst of back-to-back catch-up slices; and a late slice is not followed by a
        // near-empty catch-up slice: at least half a slice separates two timer starts.
        let d = (self.due.saturating_add(slice))
            .max(now.saturating_sub(slice))
            .max(last.saturating_add(slice / 2));
        self.deadline = Some(d);
        d
    }
}

#[cfg(test)]
#[path = "machine_tests.rs"]
mod tests;
