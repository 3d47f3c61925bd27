//! The slot mirror: how node 0 sees the ranks of other nodes when every node has a job
//! segment of its own (nodes on different hosts, or `STROBE_ISOLATE_NODES=1`).
//!
//! Node 0's code reads every rank's slot: `all_done`, deadlock and livelock detection, the
//! blocked set of the slice record, the adaptive strobe's `computing` count and the
//! replayer's gate. With one segment per node, a rank attaches to its own node's segment
//! only, and node 0's slot of a remote rank is written by the mirror and nothing else:
//!
//! * On every other node a [`Pusher`] builds a *status block* of the node's ranks (state,
//!   blocked call, divergence, posted count, whether the rank's descriptor queue holds
//!   anything, call-site words, pid, failed tests of its open run; the node's `computing` count and backlog flag) and,
//!   when it changed, puts it into the node's block of node 0's global memory with
//!   Xfer-And-Signal, signalling [`EV_MIRROR`]. A mirror thread pushes whenever the node's
//!   doorbell rings (the node's segment is `mirrored`: with `stretched` set by the thread
//!   before it sleeps, a post or any change of a rank's state rings it) or after
//!   [`PUSH_PERIOD`]; the node manager also pushes synchronously at the end of every slice,
//!   before it reports RM done, so node 0 ends the slice with every node's status as of
//!   after its deliveries (deadlock detection relies on it, see docs/architecture.md).
//! * On node 0 an [`Applier`] reads the blocks (a checksum rejects a block read while it
//!   was being rewritten; the newer block's signal follows), copies each rank's status
//!   into node 0's slot of that rank ([`crate::segment::RankSlot::mirror`]), keeps each
//!   node's `computing` count and flags in [`RemoteNodes`] and rings node 0's doorbell. A
//!   mirror thread applies on every `EV_MIRROR`; the node manager applies too when a slice
//!   starts and ends.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{EngineConfig, JobShared};
use crate::segment::{RankQueues, SlotStatus};
use crate::transport::{EventId, NodeSet, Transport, TransportError, Wait};

/// Signalled on node 0 by every status block a node pushes.
pub const EV_MIRROR: EventId = EventId(3);

/// How long a node's mirror thread sleeps without a doorbell before it looks anyway (what
/// rings nothing: a divergence word, a pid).
const PUSH_PERIOD: Duration = Duration::from_millis(5);
/// How long node 0's mirror thread waits for a block before it checks whether to stop.
const APPLY_PERIOD: Duration = Duration::from_millis(20);

/// Block header: checksum, sequence number, computing count, flags, entry count.
const HEAD: usize = 32;
/// One rank's entry.
const ENTRY: usize = 64;

const FLAG_BACKLOG: u32 = 1;
const FLAG_QUEUED: u32 = 2;

fn block_size(cfg: &EngineConfig) -> usize {
    (HEAD + cfg.max_ranks_per_node() * ENTRY).next_multiple_of(64)
}

/// Bytes of global memory the mirror's blocks take (one per node; node 0's is unused).
pub(crate) fn region_size(cfg: &EngineConfig) -> usize {
    cfg.nodes as usize * block_size(cfg)
}

/// Node 0's view of the other nodes, as their last status blocks said.
#[derive(Debug)]
pub struct RemoteNodes {
    computing: Vec<AtomicU32>,
    flags: Vec<AtomicU32>,
}

impl RemoteNodes {
    pub(crate) fn new(nodes: u32) -> Self {
        RemoteNodes {
            computing: (0..nodes).map(|_| AtomicU32::new(0)).collect(),
            flags: (0..nodes).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// Ranks computing on the other nodes.
    pub fn computing(&self) -> u32 {
        self.computing
            .iter()
            .map(|c| c.load(Ordering::Acquire))
            .sum()
    }

    /// Some remote rank's descriptor queue holds descriptors not drained yet.
    pub fn queued(&self) -> bool {
        self.flags
            .iter()
            .any(|f| f.load(Ordering::Acquire) & FLAG_QUEUED != 0)
    }

    /// Some other node has completions waiting for queue space.
    pub fn backlog(&self) -> bool {
        self.flags
            .iter()
            .any(|f| f.load(Ordering::Acquire) & FLAG_BACKLOG != 0)
    }

    fn set(&self, node: u32, computing: u32, flags: u32) {
        if let (Some(c), Some(f)) = (
            self.computing.get(node as usize),
            self.flags.get(node as usize),
        ) {
            c.store(computing, Ordering::Release);
            f.store(flags, Ordering::Release);
        }
    }
}

/// One node's status, as a block carries it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Status {
    computing: u32,
    flags: u32,
    ranks: Vec<(u32, SlotStatus)>,
}

impl Status {
    /// Equal, or with `counts` false equal but for the counters that change on every
    /// call (posted descriptors, failed tests): a live run's node 0 needs those only at
    /// the end of a slice, and a change of them alone must not wake anyone.
    fn same(&self, o: &Status, counts: bool) -> bool {
        let strip = |s: &SlotStatus| match counts {
            true => *s,
            false => SlotStatus {
                posted: 0,
                last_post_blocking: 0,
                pending_fails: 0,
                ..*s
            },
        };
        self.computing == o.computing
            && self.flags == o.flags
            && self.ranks.len() == o.ranks.len()
            && self
                .ranks
                .iter()
                .zip(&o.ranks)
                .all(|(a, b)| a.0 == b.0 && strip(&a.1) == strip(&b.1))
    }

    fn encode(&self, seq: u64, size: usize) -> Vec<u8> {
        let mut b = vec![0u8; size];
        b[8..16].copy_from_slice(&seq.to_le_bytes());
        b[16..20].copy_from_slice(&self.computing.to_le_bytes());
        b[20..24].copy_from_slice(&self.flags.to_le_bytes());
        b[24..28].copy_from_slice(&(self.ranks.len() as u32).to_le_bytes());
        for (i, (rank, s)) in self.ranks.iter().enumerate() {
            let e = &mut b[HEAD + i * ENTRY..HEAD + (i + 1) * ENTRY];
            let words32 = [
                *rank,
                s.pid,
                s.state,
                s.blocked_call,
                s.diverged,
                s.last_post_blocking,
            ];
            for (j, w) in words32.iter().enumerate() {
                e[j * 4..j * 4 + 4].copy_from_slice(&w.to_le_bytes());
            }
            for (j, w) in [s.posted, s.site_addr, s.site_info].iter().enumerate() {
                e[24 + j * 8..32 + j * 8].copy_from_slice(&w.to_le_bytes());
            }
            e[48..52].copy_from_slice(&s.pending_fails.to_le_bytes());
        }
        let sum = fnv(&b[8..]);
        b[..8].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// The block's sequence number and status; `None` for a block never written or read
    /// while it was rewritten (checksum mismatch) or malformed.
    fn decode(b: &[u8]) -> Option<(u64, Status)> {
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        let seq = u64_at(8);
        if seq == 0 || u64_at(0) != fnv(&b[8..]) {
            return None;
        }
        let count = u32_at(24) as usize;
        if HEAD + count * ENTRY > b.len() {
            return None;
        }
        let ranks = (0..count)
            .map(|i| {
                let e = HEAD + i * ENTRY;
                let status = SlotStatus {
                    pid: u32_at(e + 4),
                    state: u32_at(e + 8),
                    blocked_call: u32_at(e + 12),
                    diverged: u32_at(e + 16),
                    last_post_blocking: u32_at(e + 20),
                    posted: u64_at(e + 24),
                    site_addr: u64_at(e + 32),
                    site_info: u64_at(e + 40),
                    pending_fails: u32_at(e + 48),
                };
                (u32_at(e), status)
            })
            .collect();
        let status = Status {
            computing: u32_at(16),
            flags: u32_at(20),
            ranks,
        };
        Some((seq, status))
    }
}

/// FNV-1a 64 (a torn read is a rewrite in progress, not an attack).
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

fn block_offset(base: usize, cfg: &EngineConfig, node: u32) -> usize {
    base + node as usize * block_size(cfg)
}

/// A node other than 0: pushes its ranks' status to node 0.
pub(crate) struct Pusher {
    t: Arc<dyn Transport>,
    shared: Arc<JobShared>,
    offset: usize,
    size: usize,
    ranks: Vec<u32>,
    queues: Vec<RankQueues>,
    /// Replay: node 0's gate waits for posts, so a new post is a change.
    track_posts: bool,
    last: Option<Status>,
    seq: u64,
}

impl Pusher {
    fn status(&self) -> Status {
        let seg = &self.shared.seg;
        let queued = self.queues.iter().any(|q| !q.descriptors.is_empty());
        let backlog = self.shared.backlog.load(Ordering::Acquire);
        Status {
            computing: seg.header().computing.load(Ordering::Acquire),
            flags: if backlog { FLAG_BACKLOG } else { 0 } | if queued { FLAG_QUEUED } else { 0 },
            ranks: self
                .ranks
                .iter()
                .map(|&r| (r, seg.slot(r).status()))
                .collect(),
        }
    }

    /// Push the node's status if it changed since the last push (`counts`: a change of a
    /// counter alone counts too; always in replay, whose gate waits for posts); true if
    /// it pushed.
    pub(crate) fn push(&mut self, counts: bool) -> Result<bool, TransportError> {
        let now = self.status();
        let counts = counts || self.track_posts;
        let unchanged = self.last.as_ref().is_some_and(|l| l.same(&now, counts));
        if unchanged {
            return Ok(false);
        }
        self.seq += 1;
        let block = now.encode(self.seq, self.size);
        // No acknowledgement: node 0's reader applies the block, and signals EV_MIRROR,
        // before anything this node sends it later on the same link, so the end-of-slice
        // push still lands before the RM done signal that follows it.
        self.t
            .xfer_and_signal_nowait(&block, &NodeSet::single(0), self.offset, Some(EV_MIRROR))?;
        self.last = Some(now);
        Ok(true)
    }
}

/// Node 0: copies the other nodes' status blocks into its slots of their ranks.
pub(crate) struct Applier {
    t: Arc<dyn Transport>,
    shared: Arc<JobShared>,
    base: usize,
    cfg: EngineConfig,
    node_of_rank: Vec<u32>,
    applied: Vec<u64>,
    /// Each node's last status applied (whether a new one is worth a doorbell).
    last: Vec<Option<Status>>,
    /// Replay: a new post wakes the Strobe Sender (its gate waits for posts).
    track_posts: bool,
    buf: Vec<u8>,
}

impl Applier {
    /// Whether some node's block is newer than the one applied (reads one word per node).
    fn newer(&self) -> Result<bool, TransportError> {
        let mut seq = [0u8; 8];
        for n in 1..self.cfg.nodes {
            let off = block_offset(self.base, &self.cfg, n) + 8;
            self.t.read_local(off, &mut seq)?;
            if u64::from_le_bytes(seq) > self.applied[n as usize] {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Apply every block newer than the one applied last; rings node 0's doorbell if
    /// anything but a counter changed (anything, in replay). Returns whether it applied.
    pub(crate) fn apply(&mut self) -> Result<bool, TransportError> {
        let mut changed = false;
        let mut ring = false;
        for n in 1..self.cfg.nodes {
            self.t
                .read_local(block_offset(self.base, &self.cfg, n), &mut self.buf)?;
            let Some((seq, status)) = Status::decode(&self.buf) else {
                continue;
            };
            if seq <= self.applied[n as usize] {
                continue;
            }
            self.applied[n as usize] = seq;
            for (rank, s) in &status.ranks {
                // Only a rank of that node: a block never writes another node's slot.
                if self.node_of_rank.get(*rank as usize) == Some(&n) {
                    self.shared.seg.slot(*rank).mirror(s);
                }
            }
            self.shared.remote.set(n, status.computing, status.flags);
            changed = true;
            let last = &mut self.last[n as usize];
            ring |= !last
                .as_ref()
                .is_some_and(|l| l.same(&status, self.track_posts));
            *last = Some(status);
        }
        if ring {
            crate::segment::ring_doorbell(&self.shared.seg);
        }
        Ok(changed)
    }
}

/// A node's part of the slot mirror (nothing when all nodes share one segment).
#[derive(Clone, Default)]
pub(crate) struct NodeMirror {
    pub(crate) pusher: Option<Arc<Mutex<Pusher>>>,
    pub(crate) applier: Option<Arc<Mutex<Applier>>>,
}

impl NodeMirror {
    /// The mirror of `node` in a job whose nodes have a segment each; `base` is the
    /// mirror's region in global memory.
    pub(crate) fn new(
        cfg: &EngineConfig,
        base: usize,
        node: u32,
        t: Arc<dyn Transport>,
        shared: Arc<JobShared>,
        track_posts: bool,
    ) -> Self {
        let node_of_rank = cfg.node_of_rank();
        if node == 0 {
            // Until a node's first block arrives, its ranks compute (they just started).
            for n in 1..cfg.nodes {
                let ranks = node_of_rank.iter().filter(|&&m| m == n).count() as u32;
                shared.remote.set(n, ranks, 0);
            }
            let applier = Applier {
                t,
                shared,
                base,
                buf: vec![0; block_size(cfg)],
                applied: vec![0; cfg.nodes as usize],
                last: vec![None; cfg.nodes as usize],
                track_posts,
                cfg: cfg.clone(),
                node_of_rank,
            };
            return NodeMirror {
                applier: Some(Arc::new(Mutex::new(applier))),
                pusher: None,
            };
        }
        let ranks: Vec<u32> = (0..cfg.ranks)
            .filter(|&r| node_of_rank[r as usize] == node)
            .collect();
        let queues = ranks.iter().map(|&r| shared.seg.queues(r)).collect();
        let pusher = Pusher {
            t,
            offset: block_offset(base, cfg, node),
            size: block_size(cfg),
            shared,
            ranks,
            queues,
            track_posts,
            last: None,
            seq: 0,
        };
        NodeMirror {
            pusher: Some(Arc::new(Mutex::new(pusher))),
            applier: None,
        }
    }

    /// Node manager: push now if the status changed, counters included (end of a slice,
    /// before RM done: node 0's livelock watch reads the failed tests then).
    pub(crate) fn push(&self) -> Result<(), TransportError> {
        if let Some(p) = &self.pusher {
            p.lock().unwrap_or_else(|e| e.into_inner()).push(true)?;
        }
        Ok(())
    }

    /// Node manager of node 0: bring the slots of remote ranks up to date.
    pub(crate) fn apply(&self) -> Result<(), TransportError> {
        if let Some(a) = &self.applier {
            a.lock().unwrap_or_else(|e| e.into_inner()).apply()?;
        }
        Ok(())
    }

    /// Strobe Sender while it polls its doorbell: apply a newly arrived block at once
    /// rather than wait for the mirror thread's wake-up (applying rings the doorbell).
    pub(crate) fn poll(&self) -> Result<(), TransportError> {
        let Some(a) = &self.applier else {
            return Ok(());
        };
        // The mirror thread applies meanwhile: skip rather than wait for it.
        let Ok(mut a) = a.try_lock() else {
            return Ok(());
        };
        if a.newer()? {
            a.apply()?;
        }
        Ok(())
    }

    /// Start the node's mirror thread (none without a mirror).
    pub(crate) fn spawn(
        &self,
        node: u32,
        t: Arc<dyn Transport>,
        shared: Arc<JobShared>,
        stop: Arc<AtomicBool>,
    ) -> std::io::Result<Option<JoinHandle<()>>> {
        let name = format!("strobe-mirror{node}");
        let b = std::thread::Builder::new().name(name);
        if let Some(p) = self.pusher.clone() {
            return b.spawn(move || push_loop(&p, &shared, &stop)).map(Some);
        }
        if let Some(a) = self.applier.clone() {
            return b.spawn(move || apply_loop(&a, t.as_ref(), &stop)).map(Some);
        }
        Ok(None)
    }
}

/// A node's mirror thread: push whenever the doorbell rings (or every [`PUSH_PERIOD`]).
fn push_loop(p: &Mutex<Pusher>, shared: &JobShared, stop: &AtomicBool) {
    let h = shared.seg.header();
    while !stop.load(Ordering::Acquire) {
        let bell = h.doorbell.load(Ordering::Acquire);
        // The next change of a rank's state or post rings (`ring_if_mirrored`,
        // `ring_if_stretched`); the fence pairs with theirs: a change either rings or is
        // seen by the push below.
        h.stretched.store(1, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        if let Err(e) = p.lock().unwrap_or_else(|e| e.into_inner()).push(false) {
            // Not a warning: node 0 may have left at the end of the job (the transport
            // tells that apart), and a real failure reaches the node manager through the
            // broken endpoint, which reports it.
            tracing::debug!("slot mirror stopped: {e}");
            return;
        }
        // No polling here: on a loaded host a spinning mirror per node costs the ranks
        // more than the wake-up it saves (measured with pingpong, 2 nodes).
        crate::futex::wait_counted(
            &h.doorbell,
            bell,
            &h.doorbell_sleepers,
            Some(Instant::now() + PUSH_PERIOD),
        );
    }
}

/// Node 0's mirror thread: apply every block pushed.
fn apply_loop(a: &Mutex<Applier>, t: &dyn Transport, stop: &AtomicBool) {
    while !stop.load(Ordering::Acquire) {
        let signalled = match t.test_event(EV_MIRROR, Wait::Timeout(APPLY_PERIOD)) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("slot mirror stopped: {e}");
                return;
            }
        };
        if signalled {
            if let Err(e) = a.lock().unwrap_or_else(|e| e.into_inner()).apply() {
                tracing::warn!("slot mirror stopped: {e}");
                return;
            }
        }
    }
}

#[cfg(test)]
#[path = "mirror_tests.rs"]
mod tests;
