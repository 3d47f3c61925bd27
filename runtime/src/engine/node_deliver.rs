//! Delivering a slice's completions to the node's ranks (a child module of `node`, so it
//! sees the Node Manager's fields): the overflow of full completion queues, the wake-ups,
//! and tiny inline messages that ride in their receive's completion (`helpers::Carried`).

use std::sync::atomic::Ordering;

use super::super::helpers::Overrides;
use super::NodeManager;
use crate::descriptor::{
    Completion, DescKind, DescRef, RtError, COMPLETION_ARENA, COMPLETION_INLINE,
};
use crate::sched::{Decision, SliceDecisions};
use crate::segment::resume_computing;
use std::time::Instant;

/// Which of a slice's completions a delivery hands out.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Batch {
    All,
    /// Sends, receives, probes and cancels: final once P2P has moved their bytes, so they
    /// are delivered at the end of P2P instead of after BBM and RM (the woken rank starts
    /// that much earlier; docs/benchmarks-detail.md "Small messages"). Decisions do not
    /// change, only when within the slice a rank sees them.
    PointToPoint,
    /// Everything else (collectives, communicators, finalize), at RM.
    Rest,
}

impl Batch {
    fn takes(self, dec: &SliceDecisions, desc: DescRef) -> bool {
        if self == Batch::All {
            return true;
        }
        let p2p = dec
            .descriptor(desc)
            .and_then(|d| d.kind())
            .is_some_and(|k| (k as u8) <= DescKind::Cancel as u8);
        p2p == (self == Batch::PointToPoint)
    }
}

impl NodeManager {
    /// Hand completions (those of `batch`) to the local ranks and wake them.
    pub(super) fn deliver(&mut self, dec: &SliceDecisions, errs: &Overrides, batch: Batch) {
        for (desc, mut c) in dec.decisions.iter().filter_map(Decision::completion) {
            let Some(i) = self.local_index(desc.rank) else {
                continue;
            };
            if !batch.takes(dec, desc) {
                continue;
            }
            // A small collective's input not taken by its helpers (a broadcast member's,
            // a call that failed) is freed with its completion.
            self.shared.eager.inputs.forget(desc);
            // An inline send completed on its rank when it was posted.
            if c.request == 0 || c.flags & COMPLETION_INLINE != 0 {
                continue;
            }
            if let Some(e) = errs.get(&desc) {
                c.error = *e as u32;
            }
            if let Some((addr, data)) = self.carried.by_recv.remove(&desc) {
                // Up to 16 bytes in the completion, up to 64 in the receive arena, else
                // (a completion that already carries something) written now.
                if !c.carry_payload(addr, &data) {
                    if c.carry_in_arena(addr, data.len()) {
                        self.arena_bytes[i].push_back(data);
                    } else {
                        self.write_carried(desc, addr, &data, &mut c);
                    }
                }
            }
            self.overflow[i].push(c);
        }
        // Whatever no completion took (none is expected) is written as usual.
        let mut rest = std::mem::take(&mut self.carried.by_recv);
        for (desc, (addr, data)) in rest.take_rest() {
            let mut c = Completion::default();
            self.write_carried(desc, addr, &data, &mut c);
        }
        self.carried.by_recv = rest;
        // Ranks that poll see their word change at once; sleeping ones need a system
        // call, made only after every word is bumped: a woken rank may preempt this thread
        // on its core, and a rank still polling on the other core would then wait for its
        // completion until the woken one's time slice ends (measured: barrier slices of
        // 0.4 ms on average, up to 5 ms, at 10 ms granularity on 2 cores).
        let mut sleepers = std::mem::take(&mut self.wake_groups);
        let mut woke = false;
        for i in 0..self.local_ranks.len() {
            let q = &self.queues[i];
            // Two buffers trade places, so neither is allocated again each slice: the
            // completions move from `pending` into the queue or into `rest`, which becomes
            // the rank's backlog, and the emptied `pending` the next rank's `rest`.
            let mut pending = std::mem::take(&mut self.overflow[i]);
            let mut delivered = false;
            let mut rest = std::mem::take(&mut self.spares.overflow);
            let rank = self.local_ranks[i];
            for c in pending.drain(..) {
                let in_arena = c.flags & COMPLETION_ARENA != 0;
                let pushed = rest.is_empty()
                    && q.completions
                        .push_with(&c, |position| {
                            if let Some(data) =
                                in_arena.then(|| self.arena_bytes[i].front()).flatten()
                            {
                                self.shared.seg.recv_arena_write(rank, position, data);
                            }
                        })
                        .is_ok();
                if !pushed {
                    rest.push(c);
                    continue;
                }
                if in_arena {
                    self.arena_bytes[i].pop_front();
                }
                delivered = true;
            }
            if !rest.is_empty() {
                // Completions wait for queue space: no stretched timer until delivered.
                // Every node delivers before the RM microstrobe, so node 0 sees it in time.
                self.shared.backlog.store(true, Ordering::Release);
            }
            self.overflow[i] = rest;
            self.spares.overflow = super::super::spares::kept(pending);
            if delivered {
                woke = true;
                resume_computing(&self.shared.seg, rank);
                sleepers.bump(&self.shared.seg, rank);
            }
        }
        if woke {
            self.woken.woke(Instant::now());
        }
        // One system call per group of 32 ranks (`rank_wake.rs`): every sleeper is
        // runnable before this thread can be preempted.
        sleepers.wake(&self.shared.seg);
        self.wake_groups = sleepers;
    }

    /// The fallback of a carried payload: write it into the receiver now.
    fn write_carried(&self, desc: DescRef, addr: u64, data: &[u8], c: &mut Completion) {
        let pid = self.pids[desc.rank as usize];
        if crate::procmem::write_to(pid, addr, data).is_err() {
            c.error = RtError::Buffer as u32;
        }
    }
}
