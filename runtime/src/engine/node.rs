//! A Node Manager: the slice loop of one node.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::deadlock::DeadlockReport;
use super::helpers::{self, DirectChunk, Memory, Overrides};
use super::sink::{
    Gate, GlobalMetrics, LocalMetrics, SliceRecord, SliceSink, SliceSource, StartReason,
};
use super::strobe::{self, Phase, STOP};
use super::{EngineConfig, EngineError, EngineOutcome, JobShared, StrobePolicy};
use crate::descriptor::{Completion, Descriptor};
use crate::futex;
use crate::outcome::OutcomeRec;
use crate::sched::{Decision, SchedConfig, Scheduler, SliceDecisions};
use crate::segment::{resume_computing, BlockedCall, DmaWork, RankQueues, RankState};
use crate::transport::{NodeSet, Transport};

pub const EVENTS: u32 = 4;
/// Global memory: variables in the first page, then one DEM mailbox per source node.
const MAILBOX_BASE: usize = 4096;
const MAILBOX_HEADER: usize = 64;

fn mailbox_size(cfg: &EngineConfig) -> usize {
    let per_node = (cfg.ranks as usize).div_ceil(cfg.nodes as usize) + 1;
    MAILBOX_HEADER + per_node * crate::rank::DESC_CAPACITY * std::mem::size_of::<Descriptor>()
}

pub fn global_size(cfg: &EngineConfig) -> usize {
    MAILBOX_BASE + cfg.nodes as usize * mailbox_size(cfg)
}

pub struct NodeManager {
    cfg: EngineConfig,
    node: u32,
    t: Box<dyn Transport>,
    shared: Arc<JobShared>,
    sink: Arc<dyn SliceSink>,
    source: Option<Arc<dyn SliceSource>>,
    sched: Scheduler,
    node_of_rank: Vec<u32>,
    local_ranks: Vec<u32>,
    queues: Vec<RankQueues>,
    /// Completions that did not fit a rank's completion queue yet.
    overflow: Vec<Vec<Completion>>,
    /// Direct copies queued so far to each local rank's DMA Helper (wrapping).
    dma_pushed: Vec<u32>,
    /// pid of every rank, once known.
    pids: Vec<i32>,
    bounce: Vec<u8>,
    // Strobe Sender state (node 0 only).
    last_start: Option<Instant>,
    /// When the current slice was *due*: timer slices are scheduled from this, not from
    /// the actual start, so wake-up latency does not accumulate into drift.
    due: Option<Instant>,
    idle_slices: u32,
}

impl NodeManager {
    pub fn new(
        cfg: EngineConfig,
        node: u32,
        t: Box<dyn Transport>,
        shared: Arc<JobShared>,
        sink: Arc<dyn SliceSink>,
        source: Option<Arc<dyn SliceSource>>,
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
        });
        NodeManager {
            overflow: vec![Vec::new(); local_ranks.len()],
            dma_pushed: vec![0; local_ranks.len()],
            pids: vec![0; cfg.ranks as usize],
            bounce: vec![0; 256 << 10],
            cfg,
            node,
            t,
            shared,
            sink,
            source,
            sched,
            node_of_rank,
            local_ranks,
            queues,
            last_start: None,
            due: None,
            idle_slices: 0,
        }
    }

    pub fn run(mut self) -> Result<(), EngineError> {
        if self.node == 0 {
            // Precise slice timers: the default 50 us timer slack would stretch every slice.
            // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's timer slack.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
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

    fn slice_loop(&mut self) -> Result<(), EngineError> {
        let mut slice = 0u64;
        loop {
            let (next, reason, getts) = if self.node == 0 {
                let start = match self.source.clone() {
                    Some(src) => self.await_logical(src.as_ref(), slice + 1),
                    None => self.await_start()?,
                };
                match start {
                    Some((reason, getts)) => {
                        strobe::send_strobe(self.t.as_ref(), slice + 1)?;
                        (slice + 1, reason, getts)
                    }
                    None => return Ok(()),
                }
            } else {
                let s = strobe::await_strobe(self.t.as_ref(), slice)?;
                (s, StartReason::Timer, Duration::ZERO)
            };
            if next == STOP {
                return Ok(());
            }
            slice = next;
            self.shared.slice.store(slice, Ordering::Release);
            self.run_slice(slice, reason, getts)?;
        }
    }

    /// Strobe Sender: wait until the next slice should start. `None`: the job is over.
    fn await_start(&mut self) -> Result<Option<(StartReason, Duration)>, EngineError> {
        let h = self.shared.seg.header();
        let Some(last) = self.last_start else {
            let now = Instant::now();
            self.last_start = Some(now);
            self.due = Some(now);
            return Ok(Some((StartReason::First, Duration::ZERO)));
        };
        let due = self.due.unwrap_or(last);
        // If the previous slice overran by more than a whole slice, resynchronise rather
        // than firing a burst of back-to-back catch-up slices.
        // A late slice is not followed by a near-empty catch-up slice: at least half a slice
        // separates two timer starts.
        let deadline = (due + self.cfg.slice)
            .max(Instant::now() - self.cfg.slice)
            .max(last + self.cfg.slice / 2);
        let reason = loop {
            if self.shared.stop.load(Ordering::Acquire) {
                return Ok(None);
            }
            if self.all_done() {
                *self.shared.outcome.lock().expect("outcome lock") =
                    Some(EngineOutcome::Finished {
                        slices: self.shared.slice.load(Ordering::Acquire),
                    });
                return Ok(None);
            }
            let bell = h.doorbell.load(Ordering::Acquire);
            if self.cfg.policy == StrobePolicy::Adaptive && h.computing.load(Ordering::Acquire) == 0
            {
                break StartReason::Early;
            }
            if Instant::now() >= deadline {
                break StartReason::Timer;
            }
            // Only the adaptive strobe can start early, so only it polls the doorbell; the
            // fixed strobe sleeps until its timer.
            let spin = match self.cfg.policy {
                StrobePolicy::Adaptive => futex::spin_budget(),
                StrobePolicy::Fixed => Duration::ZERO,
            }
            .min(deadline.saturating_duration_since(Instant::now()));
            if !futex::spin_while_eq(&h.doorbell, bell, spin) {
                futex::wait_until(&h.doorbell, bell, Some(deadline));
            }
        };
        let now = Instant::now();
        self.last_start = Some(now);
        self.due = Some(if reason == StartReason::Timer {
            deadline
        } else {
            now
        });
        Ok(Some((reason, now - last)))
    }

    /// Strobe Sender in replay (logical slices, model.md 4.4): no timer; slice `next`
    /// starts as soon as the slice source's gate opens. `None`: the job is over.
    fn await_logical(
        &mut self,
        src: &dyn SliceSource,
        next: u64,
    ) -> Option<(StartReason, Duration)> {
        let h = self.shared.seg.header();
        loop {
            if self.shared.stop.load(Ordering::Acquire) {
                return None;
            }
            let bell = h.doorbell.load(Ordering::Acquire);
            // The gate first: the recording may hold slices after the last rank finished
            // (they ran while the ranks were exiting); a replay runs them too.
            // Whether everyone is done is read before the gate: states only move towards
            // done, so a gate that still waits with everyone done waits for nothing.
            let done = self.all_done();
            let gate = src.gate(next, &self.shared.seg);
            if gate == Gate::Wait && done {
                *self.shared.outcome.lock().expect("outcome lock") =
                    Some(EngineOutcome::Finished {
                        slices: self.shared.slice.load(Ordering::Acquire),
                    });
                return None;
            }
            match gate {
                Gate::Open => {
                    self.shared.parked.store(0, Ordering::Release);
                    break;
                }
                Gate::Stop(why) => {
                    *self.shared.outcome.lock().expect("outcome lock") =
                        Some(EngineOutcome::SourceStopped(why));
                    self.shared.stop.store(true, Ordering::Release);
                    return None;
                }
                Gate::Wait => self.shared.parked.store(next, Ordering::Release),
            }
            // Replaying ranks ring the doorbell when they post, block or are held; the
            // timeout covers what rings nothing (a rank that exits, a user command).
            if !futex::spin_while_eq(&h.doorbell, bell, futex::spin_budget()) {
                futex::wait_until(
                    &h.doorbell,
                    bell,
                    Some(Instant::now() + Duration::from_millis(2)),
                );
            }
        }
        let now = Instant::now();
        let getts = self.last_start.map_or(Duration::ZERO, |l| now - l);
        let reason = if self.last_start.is_none() {
            StartReason::First
        } else {
            StartReason::Logical
        };
        self.last_start = Some(now);
        Some((reason, getts))
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
                slot.wake.fetch_add(1, Ordering::Release);
                futex::wake_all(&slot.wake);
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
        let seg = &self.shared.seg;
        ranks
            .filter(|&r| seg.slot(r).state() == RankState::Blocked)
            .map(|r| (r, seg.slot(r).blocked_call()))
            .collect()
    }

    /// Replay: the recorded blocked set restricted to `ranks`, with the calls the ranks are
    /// in (the replayer's gate waited for them to enter their calls).
    fn with_calls(&self, recorded: &[u32], local_only: bool) -> Vec<(u32, BlockedCall)> {
        let seg = &self.shared.seg;
        recorded
            .iter()
            .filter(|&&r| !local_only || self.is_local(r))
            .map(|&r| (r, seg.slot(r).blocked_call()))
            .collect()
    }

    fn all_done(&self) -> bool {
        (0..self.cfg.ranks).all(|r| self.shared.seg.slot(r).state().is_done())
    }

    fn run_slice(
        &mut self,
        slice: u64,
        reason: StartReason,
        getts: Duration,
    ) -> Result<(), EngineError> {
        let t0 = Instant::now();
        let mut local = LocalMetrics {
            node: self.node,
            letts: getts,
            ..Default::default()
        };
        let mut global = GlobalMetrics {
            getts,
            ..Default::default()
        };
        self.raise_post_limits(slice);
        // Who is blocked when the slice starts (for BPTS, the slice record and deadlock
        // detection). The job-wide list is also taken now: taken after the slice, it would
        // name calls ranks entered during the slice. Replay takes both from the recording,
        // once the batch is known (below).
        let mut blocked = self.observe_blocked(self.local_ranks.iter().copied());
        let mut all_blocked =
            (self.node == 0 && self.cfg.nodes > 1).then(|| self.observe_blocked(0..self.cfg.ranks));
        self.drain_outcomes();

        // DEM: the Buffer Sender drains the local ranks' queues and delivers the batch to
        // every node's Buffer Receiver.
        let batch = self.drain(slice);
        for d in &batch {
            match d.kind() {
                Some(k) if k.is_collective() => local.ncolldem += 1,
                Some(_) => local.np2pdem += 1,
                None => {}
            }
        }
        local.t_drain = t0.elapsed();
        let bytes = descriptors_as_bytes(&batch);
        let mut mail = Vec::with_capacity(8 + bytes.len());
        mail.extend_from_slice(&(batch.len() as u64).to_le_bytes());
        mail.resize(MAILBOX_HEADER, 0);
        mail.extend_from_slice(bytes);
        let all = NodeSet::all(self.cfg.nodes);
        self.t
            .xfer_and_signal(&mail, &all, self.mailbox(self.node), None, None)?;
        global.usrdem = strobe::microstrobe(self.t.as_ref(), slice, Phase::Dem)?;
        local.ltdem = t0.elapsed();
        global.gtdem = local.ltdem;

        // MSM: every node's scheduler replica schedules the global batch.
        let ts = Instant::now();
        let posted = self.collect_mail()?;
        let recorded_blocked = self.source.as_ref().and_then(|s| s.blocked(slice, &posted));
        if let Some(rec) = &recorded_blocked {
            blocked = self.with_calls(rec, true);
            all_blocked = (self.cfg.nodes > 1).then(|| self.with_calls(rec, false));
        }
        local.bpts = blocked.len() as u32;
        let dec = self.sched.schedule(slice, &posted)?;
        local.t_schedule = ts.elapsed();
        for d in &dec.decisions {
            match d {
                Decision::Chunk(c) if self.is_local(c.recv.rank) => local.np2pmsm += 1,
                Decision::Collective(run) if run.parts.iter().any(|p| self.is_local(p.rank)) => {
                    local.ncollmsm += 1
                }
                _ => {}
            }
        }
        global.usrmsm = strobe::microstrobe(self.t.as_ref(), slice, Phase::Msm)?;
        local.ltmsm = t0.elapsed();
        global.gtmsm = local.ltmsm;

        // P2P, BBM, RM: the helpers execute this node's share of the decisions.
        let mut errs = Overrides::new();
        // A rank's pid is set once, before it can post anything: refresh only unknown ones.
        for (r, pid) in self.pids.iter_mut().enumerate() {
            if *pid == 0 {
                *pid = self.shared.seg.slot(r as u32).pid.load(Ordering::Acquire) as i32;
            }
        }
        let pids = &self.pids;
        let node_of = &self.node_of_rank;
        let me = self.node;
        let is_local = move |r: u32| node_of[r as usize] == me;
        let mut mem = Memory {
            pids,
            local: &is_local,
            bounce: &mut self.bounce,
        };
        let tp = Instant::now();
        let direct = helpers::direct_chunks(&dec, &mem, self.cfg.direct_copy_min);
        let waits = dispatch_direct(
            &self.shared,
            &self.local_ranks,
            &self.queues,
            &mut self.dma_pushed,
            &direct,
        );
        helpers::run_p2p(&dec, &mut mem, &mut errs, self.cfg.direct_copy_min);
        await_direct(&self.shared, &waits, &direct, &mut errs);
        local.t_p2p = tp.elapsed();
        let mut usr = strobe::microstrobe(self.t.as_ref(), slice, Phase::P2p)?;
        let tb = Instant::now();
        let mut writes = Vec::new();
        helpers::run_collectives(&dec, &mut mem, &mut errs, false, &mut writes);
        local.t_bbm = tb.elapsed();
        usr += strobe::microstrobe(self.t.as_ref(), slice, Phase::Bbm)?;
        let tr = Instant::now();
        helpers::run_collectives(&dec, &mut mem, &mut errs, true, &mut writes);
        // Every node must have read its reduction inputs before any node writes results (an
        // in-place member's input is its output buffer). The decisions are the same on every
        // node, so every node takes part in this microstrobe or none does.
        if self.cfg.nodes > 1
            && dec
                .decisions
                .iter()
                .any(|d| matches!(d, Decision::Collective(run) if run.kind.is_reduction()))
        {
            usr += strobe::microstrobe(self.t.as_ref(), slice, Phase::RmRead)?;
        }
        helpers::apply_writes(writes, &mut mem, &mut errs);
        local.t_rm = tr.elapsed();
        let td = Instant::now();
        self.deliver(&dec, &errs);
        local.t_deliver = td.elapsed();
        usr += strobe::microstrobe(self.t.as_ref(), slice, Phase::Rm)?;
        local.ltts = t0.elapsed();
        global.gtts = local.ltts;
        global.usrsts = global.usrdem + global.usrmsm + usr;

        self.sink.node_metrics(slice, &local);
        if self.node == 0 {
            let digest = dec.digest();
            let all_blocked = all_blocked.unwrap_or(blocked);
            self.check_deadlock(slice, &posted, &dec, recorded_blocked.as_deref());
            self.sink.slice(&SliceRecord {
                slice,
                reason,
                start_ns: (t0 - self.shared.started).as_nanos() as u64,
                global,
                descriptors: posted,
                decisions: dec,
                digest,
                blocked: all_blocked,
            });
        }
        Ok(())
    }

    fn is_local(&self, rank: u32) -> bool {
        self.node_of_rank[rank as usize] == self.node
    }

    fn mailbox(&self, node: u32) -> usize {
        MAILBOX_BASE + node as usize * mailbox_size(&self.cfg)
    }

    /// Buffer Sender: take what the local ranks posted (up to the replayer's quota).
    fn drain(&mut self, slice: u64) -> Vec<Descriptor> {
        let mut batch = Vec::new();
        for (i, q) in self.queues.iter().enumerate() {
            let rank = self.local_ranks[i];
            match self.source.as_ref().and_then(|s| s.quota(slice, rank)) {
                None => {
                    q.descriptors.drain_into(&mut batch);
                }
                Some(k) => {
                    for _ in 0..k {
                        match q.descriptors.pop() {
                            Some(d) => batch.push(d),
                            None => break,
                        }
                    }
                }
            }
        }
        batch
    }

    /// Buffer Receiver: read every node's batch and merge into canonical order.
    fn collect_mail(&self) -> Result<Vec<Descriptor>, EngineError> {
        let mut all = Vec::new();
        for n in 0..self.cfg.nodes {
            let base = self.mailbox(n);
            let mut head = [0u8; 8];
            self.t.read_local(base, &mut head)?;
            let count = u64::from_le_bytes(head) as usize;
            let mut raw = vec![0u8; count * std::mem::size_of::<Descriptor>()];
            self.t.read_local(base + MAILBOX_HEADER, &mut raw)?;
            all.extend(
                raw.chunks_exact(std::mem::size_of::<Descriptor>())
                    .map(|c| {
                        // SAFETY: `c` holds the bytes of a Descriptor written by a Buffer Sender
                        // (plain data, every bit pattern valid); read_unaligned copes with alignment.
                        unsafe { std::ptr::read_unaligned(c.as_ptr() as *const Descriptor) }
                    }),
            );
        }
        // Canonical order: by rank, then sequence number.
        all.sort_unstable_by_key(|d| d.id());
        Ok(all)
    }

    /// Hand completions to the local ranks and wake them.
    fn deliver(&mut self, dec: &SliceDecisions, errs: &Overrides) {
        for (desc, mut c) in dec.decisions.iter().filter_map(Decision::completion) {
            let Some(i) = self.local_index(desc.rank) else {
                continue;
            };
            if c.request == 0 {
                continue;
            }
            if let Some(e) = errs.get(&desc) {
                c.error = *e as u32;
            }
            self.overflow[i].push(c);
        }
        for i in 0..self.local_ranks.len() {
            let q = &self.queues[i];
            let pending = std::mem::take(&mut self.overflow[i]);
            let mut delivered = false;
            let mut rest = Vec::new();
            for c in pending {
                if !rest.is_empty() || q.completions.push(&c).is_err() {
                    rest.push(c);
                } else {
                    delivered = true;
                }
            }
            self.overflow[i] = rest;
            if delivered {
                let rank = self.local_ranks[i];
                resume_computing(&self.shared.seg, rank);
                let slot = self.shared.seg.slot(rank);
                slot.wake.fetch_add(1, Ordering::Release);
                futex::wake_all(&slot.wake);
            }
        }
    }

    fn local_index(&self, rank: u32) -> Option<usize> {
        self.local_ranks.binary_search(&rank).ok()
    }

    /// Strobe Sender: every live rank blocked, nothing posted, nothing scheduled, nothing in
    /// flight, for `deadlock_slices` slices in a row: the job can never progress.
    ///
    /// In replay `recorded` is the recorded blocked set of the slice: whether a rank was
    /// already inside its blocking call when the strobe fired is timing, and the replay must
    /// declare the deadlock in the same slice as the recording.
    fn check_deadlock(
        &mut self,
        slice: u64,
        posted: &[Descriptor],
        dec: &SliceDecisions,
        recorded: Option<&[u32]>,
    ) {
        let seg = &self.shared.seg;
        let mut live = 0;
        let mut blocked = 0;
        for r in 0..self.cfg.ranks {
            let state = seg.slot(r).state();
            let is_live = state.is_live();
            let is_blocked = match recorded {
                Some(rec) => rec.contains(&r),
                None => state == RankState::Blocked,
            };
            if is_live || (recorded.is_some() && is_blocked) {
                live += 1;
                blocked += is_blocked as u32;
            }
        }
        let stuck = live > 0
            && blocked == live
            && posted.is_empty()
            && dec.is_empty()
            && self.sched.is_quiescent()
            && self.overflow.iter().all(|o| o.is_empty());
        self.idle_slices = if stuck { self.idle_slices + 1 } else { 0 };
        if self.idle_slices >= self.cfg.deadlock_slices {
            let report = DeadlockReport::build(slice, seg, &self.sched, self.cfg.ranks);
            *self.shared.outcome.lock().expect("outcome lock") =
                Some(EngineOutcome::Deadlock(report));
            self.shared.stop.store(true, Ordering::Release);
        }
    }
}

/// Queue each direct chunk to its receiver's DMA Helper and wake it. Returns, per rank,
/// the `dma_done` value that means "all done".
fn dispatch_direct(
    shared: &JobShared,
    local_ranks: &[u32],
    queues: &[RankQueues],
    pushed: &mut [u32],
    direct: &[DirectChunk],
) -> Vec<(u32, u32)> {
    let mut woken: Vec<(u32, u32)> = Vec::new();
    for (tag, c) in direct.iter().enumerate() {
        let i = local_ranks
            .binary_search(&c.recv.rank)
            .expect("direct chunks have local receivers");
        let w = DmaWork {
            src_pid: c.src_pid as u32,
            _pad: 0,
            src_addr: c.src_addr,
            dst_addr: c.dst_addr,
            len: c.len,
            tag: tag as u64,
        };
        // The queue holds far more than one slice's chunks (the budget bounds them); if it
        // is ever full, the copy still happens: the receiver's helper drains it meanwhile.
        while queues[i].dma.push(&w).is_err() {
            std::thread::yield_now();
        }
        pushed[i] = pushed[i].wrapping_add(1);
        match woken.iter_mut().find(|(r, _)| *r == c.recv.rank) {
            Some(e) => e.1 = pushed[i],
            None => woken.push((c.recv.rank, pushed[i])),
        }
    }
    for &(rank, _) in &woken {
        let slot = shared.seg.slot(rank);
        slot.dma_req.fetch_add(1, Ordering::Release);
        futex::wake_all(&slot.dma_req);
    }
    woken
}

/// Wait until every rank's DMA Helper finished the copies queued this slice.
fn await_direct(
    shared: &JobShared,
    waits: &[(u32, u32)],
    direct: &[DirectChunk],
    errs: &mut Overrides,
) {
    for &(rank, target) in waits {
        let slot = shared.seg.slot(rank);
        let mut spins = 0u32;
        loop {
            let done = slot.dma_done.load(Ordering::Acquire);
            if done == target {
                break;
            }
            if slot.state() == RankState::Exited
                || shared.seg.header().shutdown.load(Ordering::Acquire) != 0
            {
                for c in direct.iter().filter(|c| c.recv.rank == rank) {
                    errs.insert(c.recv, crate::descriptor::RtError::Aborted);
                }
                break;
            }
            spins += 1;
            if spins < 2000 {
                if spins % 32 == 0 {
                    std::thread::yield_now();
                }
                std::hint::spin_loop();
            } else {
                futex::wait(&slot.dma_done, done, Some(Duration::from_millis(5)));
            }
        }
        let e = slot.dma_error.swap(0, Ordering::AcqRel);
        if e != 0 {
            if let Some(c) = direct.get(e as usize - 1) {
                errs.insert(c.recv, crate::descriptor::RtError::Buffer);
            }
        }
    }
}

fn descriptors_as_bytes(d: &[Descriptor]) -> &[u8] {
    // SAFETY: Descriptor is repr(C) plain data without padding holes that matter (every
    // field is an integer; `_pad` fields are zeroed by Default), so viewing it as bytes is
    // sound; the length is exactly the slice's size.
    unsafe { std::slice::from_raw_parts(d.as_ptr() as *const u8, std::mem::size_of_val(d)) }
}
