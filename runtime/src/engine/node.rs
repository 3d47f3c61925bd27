//! A Node Manager: the slice loop of one node.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::direct::{await_direct, dispatch_direct};
use super::helpers::{self, Memory, Overrides, PendingWrite};
use super::remote::{self, StagePhase, Staging};
use super::sink::{GlobalMetrics, LocalMetrics, SliceRecord, SliceSink, SliceSource, StartReason};
use super::strobe::{self, Phase, STOP};
use super::{EngineConfig, EngineError, EngineOutcome, JobShared};
use crate::descriptor::{Completion, Descriptor};
use crate::outcome::OutcomeRec;
use crate::sched::{Decision, SchedConfig, Scheduler, SliceDecisions};
use crate::segment::{BlockedCall, RankQueues, RankState};
use crate::transport::{NodeSet, Transport, Wait};
use strobe_core::slice::{Command, Event, MachineConfig, ReplicaDigest, SliceMachine, Usr};
use tracing::{error, trace};

#[path = "node_deliver.rs"]
mod deliver;
#[path = "node_dem.rs"]
mod dem;
#[path = "node_watch.rs"]
mod job_watch;
#[path = "node_start.rs"]
mod start;

/// A DEM mailbox arrived (several nodes): every node signals it on every node, itself
/// included, exactly once per slice, and a node's MSM consumes `nodes` of them before it
/// reads the mailboxes. That count replaces DEM's microstrobe (`strobe_core::slice`), and
/// lets the mailboxes travel without an acknowledgement (`xfer_and_signal_nowait`). Across
/// hosts the acknowledged transfer and the microstrobe cost a round trip and a hop more
/// per slice, each through the link threads' hand-offs.
pub const EV_MAIL: crate::transport::EventId =
    crate::transport::EventId(remote::STAGE_EVENT_BASE + remote::STAGE_EVENTS);
pub const EVENTS: u32 = EV_MAIL.0 + 1;
/// Global memory: variables in the first page, then one DEM mailbox per source node.
const MAILBOX_BASE: usize = 4096;
const MAILBOX_HEADER: usize = 64;

fn mailbox_size(cfg: &EngineConfig) -> usize {
    // A node's batch holds at most a full descriptor queue of each of its ranks.
    let per_node = cfg.max_ranks_per_node() + 1;
    MAILBOX_HEADER + per_node * crate::rank::DESC_CAPACITY * std::mem::size_of::<Descriptor>()
}

/// Where the slot mirror's status blocks start (after the mailboxes).
pub(super) fn mirror_base(cfg: &EngineConfig) -> usize {
    MAILBOX_BASE + cfg.nodes as usize * mailbox_size(cfg)
}

/// Where the data plane's staging windows start (`remote.rs`): after the mirror's blocks.
fn staging_base(cfg: &EngineConfig) -> usize {
    mirror_base(cfg) + super::mirror::region_size(cfg)
}

/// Bytes of global memory each node needs (every region the engine uses lies inside).
pub fn global_size(cfg: &EngineConfig) -> usize {
    staging_base(cfg) + remote::staging_size(cfg)
}

pub struct NodeManager {
    cfg: EngineConfig,
    node: u32,
    t: Arc<dyn Transport>,
    shared: Arc<JobShared>,
    sink: Arc<dyn SliceSink>,
    source: Option<Arc<dyn SliceSource>>,
    sched: Scheduler,
    node_of_rank: Vec<u32>,
    local_ranks: Vec<u32>,
    queues: Vec<RankQueues>,
    /// Completions that did not fit a rank's completion queue yet.
    overflow: Vec<Vec<Completion>>,
    /// Per local rank, the bytes of its completions flagged `COMPLETION_ARENA` not yet
    /// pushed, in their order in `overflow`: written into the rank's receive arena as each
    /// is pushed (`node_deliver.rs`).
    arena_bytes: Vec<std::collections::VecDeque<super::helpers::SmallBytes>>,
    /// Direct copies queued so far to each local rank's DMA Helper (wrapping).
    dma_pushed: Vec<u32>,
    /// pid of every rank, once known.
    pids: Vec<i32>,
    bounce: Vec<u8>,
    /// Whether a world rank is on this node (for the helpers).
    is_local: Box<dyn Fn(u32) -> bool + Send>,
    /// The replica digests carried by this slice's DEM batches (reused buffer).
    replicas: Vec<ReplicaDigest>,
    /// Test hook: the slice whose digest this replica falsifies.
    diverge_at: Option<u64>,
    /// Deadlock detection (node 0): idle slices in a row.
    idle_slices: u32,
    /// Livelock detection (node 0): polling slices in a row.
    livelock: super::LivelockWatch,
    /// Node 0: every rank's queues, to see a post that raced with stretching the timer.
    watch: Vec<RankQueues>,
    /// `--capture-payloads`: what captured ranks were handed (`capture.rs`).
    capture: super::capture::PayloadCapture,
    /// Node 0: the blocked ranks' call sites, for the slice record.
    sites: crate::symbolize::SiteCache,
    /// Tiny inline messages whose receivers write them (`helpers::Carried`).
    carried: helpers::Carried,
    /// The slot mirror, when this node's segment is its own (`mirror.rs`).
    mirror: super::mirror::NodeMirror,
    /// The data plane between nodes (`remote.rs`).
    staging: Staging,
    /// One node: this slice's DEM batch, handed to MSM in memory (see `send_batch`).
    own_batch: Vec<Descriptor>,
    /// Point-to-point completions are delivered at the end of P2P (`deliver::Batch`);
    /// not when a local rank's payloads are captured (captured before delivery, at RM).
    early_delivery: bool,
    /// Adaptive strobe: when the Strobe Sender first saw this slice's urgent request while
    /// some rank still computed (`node_start.rs`, `URGENT_GRACE`).
    urgent_since: Option<Instant>,
    /// Whether the Strobe Sender polls after a delivery although every rank computes.
    woken: super::woken::ReturnWatch,
    /// The sleeping ranks a delivery wakes (kept: its list is reused every slice).
    wake_groups: crate::rank_wake::WakeGroups,
    /// The last slice's vectors, for the next to refill (`spares.rs`).
    spares: super::spares::Spares,
    /// Replay: how long the Strobe Sender sleeps for the gate without a doorbell
    /// (`node_start.rs`, `GATE_NAP_SHORTEST`..`GATE_NAP_LONGEST`).
    gate_nap: Duration,
}

/// What one slice accumulates on this node while the machine walks its microphases.
struct SliceWork {
    slice: u64,
    reason: StartReason,
    t0: Instant,
    local: LocalMetrics,
    global: GlobalMetrics,
    /// Local ranks blocked when the slice started, with their calls.
    blocked: Vec<(u32, BlockedCall)>,
    /// Node 0 with several nodes: every rank blocked when the slice started.
    all_blocked: Option<Vec<(u32, BlockedCall)>>,
    /// Replay: the recorded blocked set.
    recorded_blocked: Option<Vec<u32>>,
    /// Replay: every rank's blocked-call word when the slice began (`with_calls`).
    calls_at_start: Vec<BlockedCall>,
    /// Node 0: the call-site words (and pid) of every blocked rank, read when the blocked
    /// set was taken, so a site names the call the rank was blocked in then, not one it
    /// entered during the slice (the checks name a finding's call with it).
    site_words: Vec<(u32, i32, crate::callsite::SiteWords)>,
    posted: Vec<Descriptor>,
    dec: SliceDecisions,
    /// `dec.digest()`, computed once (MSM) for the cross-check and the slice record.
    digest: u64,
    errs: Overrides,
    writes: Vec<PendingWrite>,
    /// When the Reduce Helper started (RM spans two commands).
    t_rm: Option<Instant>,
}

fn no_slice() -> EngineError {
    EngineError::Other("slice work outside a slice".into())
}

impl NodeManager {
    pub fn new(
        cfg: EngineConfig,
        node: u32,
        t: Arc<dyn Transport>,
        shared: Arc<JobShared>,
        sink: Arc<dyn SliceSink>,
        source: Option<Arc<dyn SliceSource>>,
        mirror: super::mirror::NodeMirror,
    ) -> Self {
        let node_of_rank = cfg.node_of_rank();
        let local_ranks: Vec<u32> = (0..cfg.ranks)
            .filter(|&r| node_of_rank[r as usize] == node)
            .collect();
        let queues = local_ranks.iter().map(|&r| shared.seg.queues(r)).collect();
        let sched = Scheduler::new(SchedConfig {
            ranks: cfg.ranks,
            node_of_rank: node_of_rank.clone(),
            chunk_budget: cfg.chunk_budget,
            eager_max: cfg.eager_max,
            eager_budget: crate::sched::DEFAULT_EAGER_BUDGET,
        });
        let is_local_of = node_of_rank.clone();
        let cfg_nodes = cfg.nodes as usize;
        let diverge_at = shared
            .diverge_replica
            .and_then(|(n, s)| (n == node).then_some(s));
        // Node 0 watches the queues in its segment: every rank's, or with a segment per
        // node its own ranks' (the mirror reports the others').
        let watch = if node == 0 {
            let mirrored = mirror.applier.is_some();
            (0..cfg.ranks)
                .filter(|&r| !mirrored || node_of_rank[r as usize] == 0)
                .map(|r| shared.seg.queues(r))
                .collect()
        } else {
            Vec::new()
        };
        let carried = helpers::Carried {
            allowed: (0..cfg.ranks)
                .map(|r| node_of_rank[r as usize] == node && !sink.captures(r))
                .collect(),
            ..Default::default()
        };
        let early_delivery = local_ranks_uncaptured(&carried.allowed, &local_ranks);
        NodeManager {
            overflow: vec![Vec::new(); local_ranks.len()],
            arena_bytes: vec![Default::default(); local_ranks.len()],
            dma_pushed: vec![0; local_ranks.len()],
            pids: vec![0; cfg.ranks as usize],
            bounce: vec![0; 256 << 10],
            node,
            t,
            shared,
            sink,
            source,
            sched,
            node_of_rank,
            local_ranks,
            queues,
            is_local: Box::new(move |r: u32| is_local_of[r as usize] == node),
            replicas: Vec::with_capacity(cfg_nodes),
            diverge_at,
            idle_slices: 0,
            livelock: Default::default(),
            watch,
            capture: Default::default(),
            sites: Default::default(),
            carried,
            mirror,
            staging: Staging::new(&cfg, staging_base(&cfg), node),
            own_batch: Vec::new(),
            early_delivery,
            urgent_since: None,
            woken: Default::default(),
            wake_groups: Default::default(),
            spares: Default::default(),
            gate_nap: start::GATE_NAP_SHORTEST,
            cfg,
        }
    }

    pub fn run(mut self) -> Result<(), EngineError> {
        if self.node == 0 {
            // Precise slice timers: the default 50 us timer slack would stretch every slice.
            // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's timer slack.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
            start::keep_heap();
        }
        let res = self.slice_loop();
        if self.node == 0 {
            // Whatever happened, let the other nodes leave their loops.
            let _ = strobe::send_strobe(self.t.as_ref(), STOP);
        }
        if let Err(e) = &res {
            self.shared.request_stop();
            *self.shared.outcome.lock().expect("outcome lock") =
                Some(EngineOutcome::Failed(e.to_string()));
        }
        res
    }

    fn now_ns(&self) -> u64 {
        self.shared.started.elapsed().as_nanos() as u64
    }

    /// Drive the slice state machine: carry out each command with the transport, the job
    /// segment and the helpers, and report what happened.
    fn slice_loop(&mut self) -> Result<(), EngineError> {
        let mut m = SliceMachine::new(
            MachineConfig {
                node: self.node,
                nodes: self.cfg.nodes,
                policy: self.cfg.policy,
                slice_ns: self.cfg.slice.as_nanos() as u64,
                logical: self.source.is_some(),
            },
            self.now_ns(),
        );
        let mut work: Option<SliceWork> = None;
        loop {
            let Some(cmd) = m.poll() else {
                return Err(EngineError::Other("the slice machine stalled".into()));
            };
            let t = self.t.clone();
            let t = t.as_ref();
            match cmd {
                Command::AwaitStart { early, stretched } => match self.source.clone() {
                    Some(src) => self.await_gate(&mut m, src.as_ref()),
                    None => self.await_start(&mut m, early, stretched),
                },
                Command::SendStrobe { slice } => strobe::send_strobe(t, slice)?,
                Command::AwaitStrobe { last } => {
                    let ev = match strobe::await_strobe(t, last)? {
                        STOP => Event::Stop,
                        slice => Event::StrobeReceived { slice },
                    };
                    m.handle(ev);
                }
                Command::BeginSlice {
                    slice,
                    reason,
                    getts_ns,
                } => {
                    self.shared.slice.store(slice, Ordering::Release);
                    self.mirror.apply()?;
                    trace!(
                        node = self.node,
                        slice,
                        reason = reason.name(),
                        "slice starts"
                    );
                    work = Some(self.begin_slice(slice, reason, Duration::from_nanos(getts_ns)));
                }
                Command::SignalPhaseDone { code } => {
                    if code % 8 == Phase::Rm as u64 {
                        self.publish_status()?;
                    }
                    strobe::signal_done(t, code)?
                }
                // Several nodes: the counting barrier (strobe.rs): every other node's
                // signal, then open; no attempt can fail.
                Command::AttemptMicrostrobe { .. } if self.cfg.nodes > 1 => {
                    for _ in 1..self.cfg.nodes {
                        strobe::await_done_signal(t)?;
                        m.handle(Event::PhaseDoneSignal);
                    }
                    m.handle(Event::MicrostrobeAttempt { opened: true });
                }
                Command::AttemptMicrostrobe { code } => {
                    let opened = strobe::try_microstrobe(t, code)?;
                    if !opened {
                        trace!(code, "microstrobe retry (USR)");
                    }
                    m.handle(Event::MicrostrobeAttempt { opened });
                }
                Command::AwaitPhaseDoneSignal => {
                    strobe::await_done_signal(t)?;
                    m.handle(Event::PhaseDoneSignal);
                }
                Command::OpenMicrostrobe {
                    drain_signals,
                    code,
                    wake_others,
                } => strobe::open_microstrobe(t, drain_signals, code, wake_others)?,
                Command::AwaitMicrostrobe { code } => {
                    strobe::await_microstrobe(t, code)?;
                    m.handle(Event::MicrostrobeOpened);
                }
                Command::EndSlice { usr, .. } => {
                    let w = work.take().ok_or_else(no_slice)?;
                    self.mirror.apply()?;
                    if self.end_slice(w, usr) {
                        m.handle(Event::QuietSlice);
                    }
                }
                Command::Fail(e) => {
                    error!(node = self.node, "{e}");
                    return Err(e.into());
                }
                Command::Finished(_) => return Ok(()),
                phase_work => {
                    let w = work.as_mut().ok_or_else(no_slice)?;
                    self.run_phase(&mut m, w, phase_work)?;
                }
            }
        }
    }

    /// A node with a segment of its own, at the end of the slice (before RM done): push
    /// its ranks' status, with whether completions wait for queue space, to node 0, so
    /// node 0 ends the slice with every node's status as of after its deliveries.
    fn publish_status(&mut self) -> Result<(), EngineError> {
        if self.mirror.pusher.is_some() {
            let backlog = self.overflow.iter().any(|o| !o.is_empty());
            self.shared.backlog.store(backlog, Ordering::Release);
            self.mirror.push()?;
        }
        Ok(())
    }

    /// Whether node 0 may resolve `rank`'s call site from its pid: not a rank of another
    /// node with a segment of its own (its pid may be a process of another host).
    /// Those sites stay unresolved for now (docs/architecture.md, known gap).
    fn may_symbolize(&self, rank: u32) -> bool {
        self.mirror.applier.is_none() || self.is_local(rank)
    }

    /// The work of a microphase (DEM, MSM, P2P, BBM, RM), then its report to the machine.
    fn run_phase(
        &mut self,
        m: &mut SliceMachine,
        w: &mut SliceWork,
        cmd: Command,
    ) -> Result<(), EngineError> {
        let done = match cmd {
            Command::SendBatch { replica, .. } => {
                self.send_batch(w, replica)?;
                Phase::Dem
            }
            Command::MergeAndSchedule { .. } => {
                self.await_mailboxes()?;
                w.local.ltdem = w.t0.elapsed();
                w.global.gtdem = w.local.ltdem;
                let digest = self.merge_and_schedule(w)?;
                let reductions = w
                    .dec
                    .decisions
                    .iter()
                    .any(|d| matches!(d, Decision::Collective(run) if run.kind.is_reduction()));
                let replicas = std::mem::take(&mut self.replicas);
                let cross_node = remote::cross_node(&w.dec, &self.node_of_rank, self.cfg.nodes);
                m.handle(Event::Scheduled {
                    digest,
                    reductions,
                    cross_node,
                    replicas: &replicas,
                });
                self.replicas = replicas;
                return Ok(());
            }
            Command::RunP2p => {
                w.local.ltmsm = w.t0.elapsed();
                w.global.gtmsm = w.local.ltmsm;
                self.run_p2p(w)?;
                if self.early_delivery {
                    let td = Instant::now();
                    self.deliver(&w.dec, &w.errs, deliver::Batch::PointToPoint);
                    w.local.t_deliver = td.elapsed();
                }
                Phase::P2p
            }
            Command::RunBbm => {
                let tb = Instant::now();
                self.run_bbm(w)?;
                w.local.t_bbm = tb.elapsed();
                Phase::Bbm
            }
            Command::ReduceRead => {
                w.t_rm = Some(Instant::now());
                let store = self.stage(w, StagePhase::Rm)?;
                let mut mem = self.memory();
                mem.staged = Some(&store);
                helpers::run_collectives(&w.dec, &mut mem, &mut w.errs, true, &mut w.writes);
                drop(mem);
                self.staging.recycle(store);
                Phase::RmRead
            }
            Command::WriteAndDeliver => {
                let writes = self
                    .carried
                    .take_results(std::mem::take(&mut w.writes), &w.errs);
                let mut mem = self.memory();
                helpers::apply_writes(writes, &mut mem, &mut w.errs);
                w.local.t_rm = w.t_rm.map_or(Duration::ZERO, |t| t.elapsed());
                let td = Instant::now();
                let is_local = &*self.is_local;
                let sink = &*self.sink;
                self.capture
                    .observe(&w.dec, &w.errs, &self.pids, sink, is_local);
                let batch = match self.early_delivery {
                    true => deliver::Batch::Rest,
                    false => deliver::Batch::All,
                };
                self.deliver(&w.dec, &w.errs, batch);
                w.local.t_deliver += td.elapsed();
                Phase::Rm
            }
            other => {
                return Err(EngineError::Other(format!(
                    "unexpected slice command {other:?}"
                )))
            }
        };
        m.handle(Event::PhaseWorkDone(done));
        Ok(())
    }

    /// Replay: let each local rank post what the source allows while `slice` runs, and
    /// wake the ranks held at a post.
    fn raise_post_limits(&self, slice: u64) {
        let Some(src) = &self.source else { return };
        for &r in &self.local_ranks {
            let limit = src.post_limit(slice, r).map_or(0, |l| l + 1);
            let slot = self.shared.seg.slot(r);
            if slot.post_limit.swap(limit, Ordering::AcqRel) != limit
                && slot.state() == RankState::Held
            {
                self.shared.seg.wake_rank(r);
            }
        }
    }

    /// Hand the local ranks' timing-dependent outcomes to the sink (no copy when none).
    fn drain_outcomes(&mut self) {
        let mut buf: Vec<OutcomeRec> = Vec::new();
        for (i, q) in self.queues.iter().enumerate() {
            if q.outcomes.drain_into(&mut buf) > 0 {
                self.sink.outcomes(self.local_ranks[i], &buf);
                buf.clear();
            }
        }
    }

    /// Ranks among `ranks` blocked when the slice started, with their calls (live runs).
    fn observe_blocked(&self, ranks: impl Iterator<Item = u32>) -> Vec<(u32, BlockedCall)> {
        self.observe_blocked_into(Vec::new(), ranks)
    }

    /// [`Self::observe_blocked`] into `list`'s vector (emptied first).
    fn observe_blocked_into(
        &self,
        mut list: Vec<(u32, BlockedCall)>,
        ranks: impl Iterator<Item = u32>,
    ) -> Vec<(u32, BlockedCall)> {
        let seg = &self.shared.seg;
        list.clear();
        list.extend(
            ranks
                .filter(|&r| seg.slot(r).state() == RankState::Blocked)
                .map(|r| (r, seg.slot(r).blocked_call())),
        );
        list
    }

    /// Replay: the recorded blocked set restricted to `ranks`, with the calls the ranks were
    /// in when the slice began (`calls`, by rank: the replayer's gate waited for them to
    /// enter their calls). Read then, not at MSM: another node need not wait for this one
    /// between MSM and its delivery, so by this node's MSM a remote rank may already have
    /// been woken and be blocked in its next call (a regenerated recording named ranks of
    /// node 1 in `MPI_Bcast` at the slice that completed their `MPI_Barrier`).
    fn with_calls(
        &self,
        recorded: &[u32],
        local_only: bool,
        calls: &[BlockedCall],
    ) -> Vec<(u32, BlockedCall)> {
        recorded
            .iter()
            .filter(|&&r| !local_only || self.is_local(r))
            .map(|&r| {
                let call = calls.get(r as usize).copied();
                (
                    r,
                    call.unwrap_or_else(|| self.shared.seg.slot(r).blocked_call()),
                )
            })
            .collect()
    }

    fn all_done(&self) -> bool {
        (0..self.cfg.ranks).all(|r| self.shared.seg.slot(r).state().is_done())
    }

    /// A slice starts on this node: who is blocked (for BPTS, the slice record and
    /// deadlock detection), post limits and outcomes.
    fn begin_slice(&mut self, slice: u64, reason: StartReason, getts: Duration) -> SliceWork {
        let t0 = Instant::now();
        // Before DEM drains the queues: a rank that asks after this is served by the
        // next slice, one that asked before by this one.
        crate::segment::clear_urgent(&self.shared.seg);
        self.urgent_since = None;
        self.woken.slice_began(t0);
        self.raise_post_limits(slice);
        // The job-wide blocked list is also taken now: taken after the slice, it would name
        // calls ranks entered during the slice. Replay takes both from the recording, once
        // the batch is known (MSM).
        let spare = std::mem::take(&mut self.spares.blocked);
        let blocked = self.observe_blocked_into(spare, self.local_ranks.iter().copied());
        let all_blocked =
            (self.node == 0 && self.cfg.nodes > 1).then(|| self.observe_blocked(0..self.cfg.ranks));
        let spare = std::mem::take(&mut self.spares.words);
        let site_words = self.site_words_into(spare, all_blocked.as_ref().unwrap_or(&blocked));
        let calls_at_start = match self.source {
            Some(_) => (0..self.cfg.ranks)
                .map(|r| self.shared.seg.slot(r).blocked_call())
                .collect(),
            None => Vec::new(),
        };
        self.drain_outcomes();
        SliceWork {
            calls_at_start,
            slice,
            reason,
            t0,
            local: LocalMetrics {
                node: self.node,
                letts: getts,
                ..Default::default()
            },
            global: GlobalMetrics {
                getts,
                ..Default::default()
            },
            blocked,
            all_blocked,
            recorded_blocked: None,
            site_words,
            posted: Vec::new(),
            dec: SliceDecisions::default(),
            digest: 0,
            errs: Overrides::new(),
            writes: Vec::new(),
            t_rm: None,
        }
    }

    /// P2P: the DMA Helper moves every chunk whose receiver is local (large chunks between
    /// local ranks through the receiving rank's own DMA Helper thread; chunks from other
    /// nodes from staging).
    fn run_p2p(&mut self, w: &mut SliceWork) -> Result<(), EngineError> {
        // A rank's pid is set once, before it can post anything: refresh only unknown ones,
        // once per slice, before the first helper runs. Only this node's ranks: the pid of
        // a rank elsewhere stays 0, so no helper can reach it by cross-memory attach.
        for &r in &self.local_ranks {
            let pid = &mut self.pids[r as usize];
            if *pid == 0 {
                *pid = self.shared.seg.slot(r).pid.load(Ordering::Acquire) as i32;
            }
        }
        let min = self.cfg.direct_copy_min;
        let tp = Instant::now();
        // Eager sends completed this slice: their bytes go to node memory before the
        // completion is delivered (RM), and before chunks of them are pushed to other nodes.
        let shared = self.shared.clone();
        shared.eager.copy_in(&w.dec, &self.memory(), &mut w.errs);
        let store = self.stage(w, StagePhase::P2p)?;
        let mut mem = Memory {
            pids: &self.pids,
            local: &*self.is_local,
            bounce: &mut self.bounce,
            eager: &self.shared.eager,
            defer: None,
            staged: Some(&store),
        };
        let direct = helpers::direct_chunks(&w.dec, &mem, min);
        let waits = dispatch_direct(
            &self.shared,
            &self.local_ranks,
            &self.queues,
            &mut self.dma_pushed,
            &direct,
        );
        helpers::run_p2p(&w.dec, &mut mem, &mut w.errs, min, &mut self.carried);
        self.shared.eager.release_empty(&w.dec, mem.local);
        drop(mem);
        self.staging.recycle(store);
        await_direct(&self.shared, &waits, &direct, &mut w.errs);
        w.local.t_p2p = tp.elapsed();
        Ok(())
    }

    /// The data plane between nodes for one microphase (`remote.rs`): push what the other
    /// nodes' helpers will read from this node's ranks, and receive what ours will read.
    fn stage(
        &mut self,
        w: &SliceWork,
        phase: StagePhase,
    ) -> Result<remote::RemoteStore, EngineError> {
        let mem = Memory {
            pids: &self.pids,
            local: &*self.is_local,
            bounce: &mut self.bounce,
            eager: &self.shared.eager,
            defer: None,
            staged: None,
        };
        self.staging.exchange(
            self.t.as_ref(),
            &self.shared.stop,
            phase,
            &w.dec,
            &self.node_of_rank,
            &mem,
        )
    }

    /// BBM: the Collective Helper moves the data-movement collectives' blocks into the local
    /// members; blocks of `direct_copy_min` bytes or more between local ranks go to the
    /// receiving ranks' own DMA Helpers, as large P2P chunks do, and BBM ends when they are
    /// all copied. Blocks from other nodes come from staging.
    fn run_bbm(&mut self, w: &mut SliceWork) -> Result<(), EngineError> {
        let min = self.cfg.direct_copy_min;
        let store = self.stage(w, StagePhase::Bbm)?;
        let mut mem = self.memory();
        mem.staged = Some(&store);
        mem.defer = Some(helpers::Deferred {
            min,
            ..Default::default()
        });
        helpers::run_collectives(&w.dec, &mut mem, &mut w.errs, false, &mut w.writes);
        let direct = mem.defer.take().map(|d| d.chunks).unwrap_or_default();
        drop(mem);
        self.staging.recycle(store);
        if direct.is_empty() {
            return Ok(());
        }
        let waits = dispatch_direct(
            &self.shared,
            &self.local_ranks,
            &self.queues,
            &mut self.dma_pushed,
            &direct,
        );
        await_direct(&self.shared, &waits, &direct, &mut w.errs);
        Ok(())
    }

    /// The slice is over on this node: metrics, and on node 0 deadlock detection and the
    /// slice record. Returns whether the slice was quiet (node 0: nothing posted, decided,
    /// in flight or waiting for queue space anywhere), which lets the adaptive strobe
    /// stretch its timer.
    fn end_slice(&mut self, w: SliceWork, usr: Usr) -> bool {
        let mut local = w.local;
        let mut global = w.global;
        local.ltts = w.t0.elapsed();
        global.gtts = local.ltts;
        global.usrdem = usr.dem;
        global.usrmsm = usr.msm;
        global.usrsts = usr.sts;
        self.sink.node_metrics(w.slice, &local);
        if self.node != 0 {
            self.sched.recycle(w.dec);
            return false;
        }
        let backlog =
            self.shared.backlog.swap(false, Ordering::AcqRel) | self.shared.remote.backlog();
        // Nothing left to do: no descriptor waits for a match, no transfer is in flight,
        // no completion waits for queue space. The next slice can then only have work if
        // a rank posts, and posting rings the stretched Strobe Sender, so the timer stops
        // now rather than after one more, empty, slice (which took a core from a
        // computing rank every compute phase: the barrier of a synthetic benchmark).
        let quiet = self.sched.is_quiescent() && !backlog;
        let digest = w.digest;
        let all_blocked = w.all_blocked.unwrap_or(w.blocked);
        let spare = std::mem::take(&mut self.spares.sites);
        let sites = self.blocked_sites_into(spare, &w.site_words);
        self.spares.words = super::spares::kept(w.site_words);
        self.check_deadlock(w.slice, &w.posted, &w.dec, w.recorded_blocked.as_deref());
        let mut descriptors = w.posted;
        // A message's bytes never belong in the schedule (nor in a recording).
        for d in descriptors.iter_mut().filter(|d| d.is_inline()) {
            *d = d.without_payload();
        }
        let rec = SliceRecord {
            slice: w.slice,
            reason: w.reason,
            start_ns: (w.t0 - self.shared.started).as_nanos() as u64,
            global,
            descriptors,
            decisions: w.dec,
            digest,
            blocked: all_blocked,
            sites,
        };
        self.sink.slice(&rec);
        self.spares.keep(rec.descriptors, rec.blocked, rec.sites);
        self.sched.recycle(rec.decisions);
        quiet
    }

    /// The helpers' view of the node's memory (pids as refreshed at P2P).
    fn memory(&mut self) -> Memory<'_> {
        Memory {
            pids: &self.pids,
            local: &*self.is_local,
            bounce: &mut self.bounce,
            eager: &self.shared.eager,
            defer: None,
            staged: None,
        }
    }

    fn is_local(&self, rank: u32) -> bool {
        self.node_of_rank[rank as usize] == self.node
    }

    fn local_index(&self, rank: u32) -> Option<usize> {
        self.local_ranks.binary_search(&rank).ok()
    }
}

fn local_ranks_uncaptured(allowed: &[bool], local: &[u32]) -> bool {
    local.iter().all(|&r| allowed[r as usize])
}
