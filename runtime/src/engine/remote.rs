//! The data plane between nodes: bytes of ranks on other nodes reach this node through the
//! [`Transport`], never by cross-memory attach (issue 15, item 4).
//!
//! A node reads and writes only its **own** ranks' memory (its pid table holds 0 for every
//! other rank, so a cross-node `process_vm_readv` left anywhere fails instead of silently
//! working on one host). What a helper of node X needs from a rank of node A this phase
//! is a function of the slice's decisions (every node has the same ones) and of A's ranks'
//! memory (tables of v-collectives, eager bytes), so A **pushes** it, unasked:
//!
//! * **P2P**: every chunk whose sender is on A and receiver on X, keyed by (send, offset),
//!   from A's eager memory if the send completed eagerly, else from the sender's buffer.
//! * **BBM**: for each data-moving collective with members on both nodes, the regions of
//!   A's members that X's members read: the root's buffer (Bcast), blocks (Scatter,
//!   Alltoall), the root's or sender's displacement table and the blocks it names
//!   (Scatterv, Alltoallv), whole send buffers (Gather[v], Allgather[v]: the reader takes
//!   the prefix its own counts ask for).
//! * **RM**: for each reduction with members on both nodes, the contribution of each of A's
//!   members (its input, or its receive buffer when in place). Every node with a member
//!   then combines all contributions in the one fixed order (`helpers::tree_reduce`, lower
//!   ranks on the left), so a reduction's result does not depend on the node layout.
//!
//! Which node pairs exchange in a phase ([`flows`]) is decided from the decisions alone, so
//! both ends agree on it without a message. Each node's global memory holds one **staging
//! window** per source node (`window` bytes, [`window_size`]); A writes its data for X in
//! *rounds*, each one Xfer-And-Signal of at most a window into `base + A * window` on X,
//! signalling [`EV_STAGE`]. A round is a frame: a 16-byte header (`more` flag, record count,
//! length) and records (48-byte header: kind, rank, key, total length, piece offset, piece
//! length; then the piece, padded to 8). A region larger than what is left of a window
//! continues in the next round. Rounds run in lock step, which keeps every read of a window
//! after the write that filled it (no torn reads, no per-pair events):
//!
//! 1. push this round to every destination still active (every related pair has a round 0,
//!    possibly empty; a pair stays active while the previous round said `more`);
//! 2. consume one `EV_STAGE` signal per source active in this round (a source cannot start
//!    its next round to us before step 3, so every signal counted is of this round);
//! 3. read each active source's window into the [`RemoteStore`] (a P2P chunk whole in
//!    the round is instead written into its receiving rank straight from the window, lent
//!    by `Transport::with_local`: one copy fewer, and the write overlaps the sources'
//!    next round), and give the window back with a zero-length Xfer-And-Signal of
//!    [`EV_CREDIT`] to that source;
//! 4. go on while any pair is active.
//!
//! Before step 1 pushes anything, the node consumes one `EV_CREDIT` for every round it
//! pushed earlier and has not been credited for (its windows on those nodes are free
//! again): the credits of a phase's last round are thus awaited at the next push, off the
//! phase's critical path. That wait needs only the destinations' step 3 of the previous
//! round, which needs only their sources' step 1, so the rounds cannot deadlock; a phase needs
//! `ceil(bytes A sends X / window)` rounds for its largest pair (a big Alltoall loops).
//! The helpers then run as on one node; a read or copy from a remote rank is served from
//! the store (`helpers::Memory`), and what cannot be served (a planning miss, or a
//! region the source could not read) is `MPI_ERR_BUFFER` for the receiving descriptor.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use strobe_core::slice::CrossNode;

use super::helpers::{self, Memory};
use super::{EngineConfig, EngineError};
use crate::descriptor::{DescKind, DescRef, Descriptor, RtError};
use crate::procmem;
use crate::sched::{Decision, SliceDecisions};
use crate::transport::{EventId, NodeSet, Transport, Wait};

#[path = "remote_store.rs"]
mod store;
pub use store::RemoteStore;
use store::{SPARE_BUFFERS, SPARE_BYTES};

/// The first event the data plane uses; `node::EVENTS` counts them in.
pub const STAGE_EVENT_BASE: u32 = 4;
/// A round arrived in one of this node's staging windows.
pub const EV_STAGE: EventId = EventId(STAGE_EVENT_BASE);
/// A destination consumed the round this node wrote into its window.
pub const EV_CREDIT: EventId = EventId(STAGE_EVENT_BASE + 1);
/// Events the data plane adds.
pub const STAGE_EVENTS: u32 = 2;

const FRAME_HEADER: usize = 16;
const RECORD_HEADER: usize = 48;
const KIND_MEM: u32 = 0;
const KIND_CHUNK: u32 = 1;
/// Record flag: the source could not read the region; the reader reports MPI_ERR_BUFFER.
const FLAG_FAILED: u32 = 1 << 16;

/// Bytes of one staging window: the per-slice receive budget, kept between 64 KiB (a
/// round always holds a record) and 2 MiB (global memory is allocated per node per source
/// node, and over TCP it is one buffer per endpoint). Measured on 2 test hosts (8 x 1 MiB
/// window): 1 MiB windows 992 MB/s, 2 MiB 1068-1136, 8 MiB 901-916: a large window
/// loses the overlap of packing round k+1 with the transfer of round k.
pub fn window_size(cfg: &EngineConfig) -> usize {
    (cfg.chunk_budget.min(2 << 20) as usize)
        .max(64 << 10)
        .next_multiple_of(4096)
}

/// Global memory the staging windows take on each node (none with one node).
pub fn staging_size(cfg: &EngineConfig) -> usize {
    if cfg.nodes <= 1 {
        return 0;
    }
    cfg.nodes as usize * window_size(cfg)
}

/// The microphase whose reads are staged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StagePhase {
    P2p,
    Bbm,
    Rm,
}

/// What one node pushes: a region (or a chunk) and where its bytes come from.
#[derive(Debug)]
pub struct Push {
    key: Key,
    total: u64,
    src: Source,
}

/// Where a push's bytes are read when its rounds are packed.
#[derive(Debug)]
enum Source {
    /// Held by the node (eager bytes).
    Bytes(Vec<u8>),
    /// In a local rank's memory: read straight into the round's frame.
    Rank { pid: i32, addr: u64 },
    /// The source could not read it: the reader reports MPI_ERR_BUFFER.
    Failed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    /// `len` bytes of rank memory at `addr`.
    Mem { rank: u32, addr: u64, len: u64 },
    /// A P2P chunk of `send`'s message at `offset`.
    Chunk { send: DescRef, offset: u64 },
}

/// The members of a collective run, in the communicator's rank order.
pub fn members(dec: &SliceDecisions, parts: &[DescRef]) -> Vec<Descriptor> {
    parts
        .iter()
        .filter_map(|p| dec.descriptor(*p).copied())
        .collect()
}

/// Which (source node, destination node) pairs a collective moves data between.
fn coll_flows(kind: DescKind, root: i32, parts: &[Descriptor], node_of: &[u32]) -> Vec<(u32, u32)> {
    let nodes: Vec<u32> = parts.iter().map(|p| node_of[p.rank as usize]).collect();
    let root_node = usize::try_from(root)
        .ok()
        .and_then(|r| nodes.get(r).copied());
    let mut v = Vec::new();
    match kind {
        DescKind::Bcast | DescKind::Scatter | DescKind::Scatterv => {
            if let Some(a) = root_node {
                v.extend(nodes.iter().filter(|&&x| x != a).map(|&x| (a, x)));
            }
        }
        DescKind::Gather | DescKind::Gatherv => {
            if let Some(x) = root_node {
                v.extend(nodes.iter().filter(|&&a| a != x).map(|&a| (a, x)));
            }
        }
        DescKind::Allgather | DescKind::Allgatherv | DescKind::Alltoall | DescKind::Alltoallv => {
            all_pairs(&nodes, &mut v)
        }
        k if k.is_reduction() => all_pairs(&nodes, &mut v),
        _ => {}
    }
    v.sort_unstable();
    v.dedup();
    v
}

fn all_pairs(nodes: &[u32], v: &mut Vec<(u32, u32)>) {
    for &a in nodes {
        v.extend(nodes.iter().filter(|&&x| x != a).map(|&x| (a, x)));
    }
}

/// Every collective of the phase with its members (BBM: data movement; RM: reductions).
fn phase_collectives(
    dec: &SliceDecisions,
    phase: StagePhase,
) -> impl Iterator<Item = (DescKind, i32, Vec<Descriptor>)> + '_ {
    dec.decisions.iter().filter_map(move |d| match d {
        Decision::Collective(run) if run.kind.is_reduction() == (phase == StagePhase::Rm) => {
            Some((run.kind, run.root, members(dec, &run.parts)))
        }
        _ => None,
    })
}

/// `related[a * nodes + x]`: node a sends node x a round 0 this phase. A function of the
/// decisions only: both ends compute the same matrix.
pub fn flows(dec: &SliceDecisions, phase: StagePhase, node_of: &[u32], nodes: u32) -> Vec<bool> {
    let n = nodes as usize;
    let mut rel = vec![false; n * n];
    match phase {
        StagePhase::P2p => {
            for d in &dec.decisions {
                if let Decision::Chunk(c) = d {
                    let (a, x) = (node_of[c.send.rank as usize], node_of[c.recv.rank as usize]);
                    if a != x {
                        rel[a as usize * n + x as usize] = true;
                    }
                }
            }
        }
        StagePhase::Bbm | StagePhase::Rm => {
            for (kind, root, parts) in phase_collectives(dec, phase) {
                for (a, x) in coll_flows(kind, root, &parts, node_of) {
                    rel[a as usize * n + x as usize] = true;
                }
            }
        }
    }
    rel
}

/// Which data phases of the slice move bytes between nodes (any staging flow): the slice
/// machine skips the microstrobe before a phase that moves none (`CrossNode`).
pub fn cross_node(dec: &SliceDecisions, node_of: &[u32], nodes: u32) -> CrossNode {
    let moves = |phase| nodes > 1 && flows(dec, phase, node_of, nodes).contains(&true);
    CrossNode {
        p2p: moves(StagePhase::P2p),
        bbm: moves(StagePhase::Bbm),
        rm: moves(StagePhase::Rm),
    }
}

/// The pushes node `me` owes every other node this phase (indexed by destination).
pub fn plan(
    dec: &SliceDecisions,
    phase: StagePhase,
    node_of: &[u32],
    me: u32,
    nodes: u32,
    mem: &Memory<'_>,
) -> Vec<Vec<Push>> {
    let mut out: Vec<Vec<Push>> = (0..nodes).map(|_| Vec::new()).collect();
    match phase {
        StagePhase::P2p => plan_chunks(dec, node_of, me, mem, &mut out),
        StagePhase::Bbm | StagePhase::Rm => {
            for (kind, root, parts) in phase_collectives(dec, phase) {
                for (a, x) in coll_flows(kind, root, &parts, node_of) {
                    if a == me {
                        let ctx = Ctx {
                            kind,
                            root,
                            parts: &parts,
                            node_of,
                            to: x,
                            mem,
                        };
                        ctx.plan_collective(&mut out[x as usize]);
                    }
                }
            }
        }
    }
    // Two collectives of a slice may read the same region (two broadcasts of one buffer):
    // it travels once.
    for pushes in &mut out {
        let mut seen = std::collections::BTreeSet::new();
        pushes.retain(|p| seen.insert(p.key));
    }
    out
}

/// A region of a local rank, read when packed (`Failed` for a rank of another node: a
/// node pushes only its own ranks' bytes).
fn rank_source(mem: &Memory<'_>, rank: u32, addr: u64) -> Source {
    match mem.pids.get(rank as usize) {
        Some(&pid) if (mem.local)(rank) => Source::Rank { pid, addr },
        _ => Source::Failed,
    }
}

fn mem_push(mem: &Memory<'_>, rank: u32, addr: u64, len: u64) -> Option<Push> {
    (len > 0).then(|| Push {
        key: Key::Mem { rank, addr, len },
        total: len,
        src: rank_source(mem, rank, addr),
    })
}

fn plan_chunks(
    dec: &SliceDecisions,
    node_of: &[u32],
    me: u32,
    mem: &Memory<'_>,
    out: &mut [Vec<Push>],
) {
    for d in &dec.decisions {
        let Decision::Chunk(c) = d else { continue };
        let x = node_of[c.recv.rank as usize];
        if node_of[c.send.rank as usize] != me || x == me || c.len == 0 {
            continue;
        }
        let (Some(s), Some(r)) = (dec.descriptor(c.send), dec.descriptor(c.recv)) else {
            continue;
        };
        // An eager send's bytes wait in this node's eager memory (its buffer may be reused).
        let src = match mem.eager.take_chunk(s, r, c.offset, c.len) {
            Some(Ok(bytes)) => Source::Bytes(bytes),
            Some(Err(_)) => Source::Failed,
            None => rank_source(mem, s.rank, s.buf + c.offset),
        };
        out[x as usize].push(Push {
            key: Key::Chunk {
                send: c.send,
                offset: c.offset,
            },
            total: c.len,
            src,
        });
    }
}

/// One collective seen from a source node pushing to node `to`.
struct Ctx<'c, 'm> {
    kind: DescKind,
    root: i32,
    parts: &'c [Descriptor],
    node_of: &'c [u32],
    to: u32,
    mem: &'c Memory<'m>,
}

impl Ctx<'_, '_> {
    fn on_dest(&self, p: &Descriptor) -> bool {
        self.node_of[p.rank as usize] == self.to
    }

    fn mine(&self, p: &Descriptor) -> bool {
        (self.mem.local)(p.rank)
    }

    /// Indices of the members on the destination node.
    fn dest_members(&self) -> Vec<usize> {
        (0..self.parts.len())
            .filter(|&i| self.on_dest(&self.parts[i]))
            .collect()
    }

    /// A displacement table of a local member, `None` when absent or unreadable (the
    /// pushed table record then carries the failure for the reader).
    fn table(&self, rank: u32, addr: u64, out: &mut Vec<Push>) -> Option<Vec<(u64, u64)>> {
        let n = self.parts.len();
        if addr == 0 {
            return None;
        }
        out.extend(mem_push(self.mem, rank, addr, (n * 16) as u64));
        self.mem.table(rank, addr, n).ok()
    }

    fn plan_collective(&self, out: &mut Vec<Push>) {
        let n = self.parts.len() as u64;
        let (mem, parts) = (self.mem, self.parts);
        let root = usize::try_from(self.root).ok().map(|r| parts[r]);
        match self.kind {
            DescKind::Bcast => {
                let rt = root.expect("rooted");
                out.extend(mem_push(mem, rt.rank, rt.buf, rt.bytes));
            }
            DescKind::Scatter => {
                let rt = root.expect("rooted");
                let blk = rt.bytes / n;
                for i in self.dest_members() {
                    out.extend(mem_push(mem, rt.rank, rt.buf + i as u64 * blk, blk));
                }
            }
            DescKind::Scatterv => {
                let rt = root.expect("rooted");
                if let Some(t) = self.table(rt.rank, rt.aux, out) {
                    for i in self.dest_members() {
                        let (cnt, disp) = t[i];
                        out.extend(mem_push(mem, rt.rank, rt.buf + disp, cnt));
                    }
                }
            }
            DescKind::Gather | DescKind::Gatherv => {
                for q in parts.iter().filter(|q| self.mine(q)) {
                    out.extend(mem_push(mem, q.rank, q.buf, q.bytes));
                }
            }
            DescKind::Allgather | DescKind::Allgatherv => {
                for (j, q) in parts.iter().enumerate().filter(|(_, q)| self.mine(q)) {
                    if !q.in_place() {
                        out.extend(mem_push(mem, q.rank, q.buf, q.bytes));
                    } else if self.kind == DescKind::Allgather {
                        let blk = q.rbytes / n;
                        out.extend(mem_push(mem, q.rank, q.rbuf + j as u64 * blk, blk));
                    } else if let Ok(t) = mem.table(q.rank, q.aux, parts.len()) {
                        // The block in place, where the member's own table puts it.
                        let (cnt, disp) = t[j];
                        out.extend(mem_push(mem, q.rank, q.rbuf + disp, cnt));
                    }
                }
            }
            DescKind::Alltoall => {
                for q in parts.iter().filter(|q| self.mine(q)) {
                    let sblk = q.bytes / n;
                    for i in self.dest_members() {
                        out.extend(mem_push(mem, q.rank, q.buf + i as u64 * sblk, sblk));
                    }
                }
            }
            DescKind::Alltoallv => {
                for q in parts.iter().filter(|q| self.mine(q)) {
                    if let Some(t) = self.table(q.rank, q.aux, out) {
                        for i in self.dest_members() {
                            let (cnt, disp) = t[i];
                            out.extend(mem_push(mem, q.rank, q.buf + disp, cnt));
                        }
                    }
                }
            }
            k if k.is_reduction() => {
                for q in parts.iter().filter(|q| self.mine(q)) {
                    let (addr, len) = contribution_region(q);
                    out.extend(mem_push(mem, q.rank, addr, len));
                }
            }
            _ => {}
        }
    }
}

/// Where a reduction member's input is: its receive buffer when in place.
pub fn contribution_region(p: &Descriptor) -> (u64, u64) {
    if p.in_place() {
        (p.rbuf, p.rbytes)
    } else {
        (p.buf, p.bytes)
    }
}

/// Fills frames (rounds) from a list of pushes, splitting regions at window boundaries.
struct Packer<'p> {
    pushes: &'p [Push],
    idx: usize,
    off: u64,
}

impl Packer<'_> {
    /// Fill `frame` with the next records, at most `window` bytes; returns the frame's
    /// length (its bytes are `frame[..len]`) and whether more rounds follow. The buffer
    /// keeps its length from round to round and phase to phase: each round overwrites it
    /// instead of zeroing it again (a page-faulting, zeroing 2 MiB buffer per round was a
    /// large part of a node manager's time in a 1 MiB exchange across hosts).
    fn next_frame(&mut self, frame: &mut Vec<u8>, window: usize) -> (usize, bool) {
        if frame.len() < window {
            frame.resize(window, 0);
        }
        let mut len = FRAME_HEADER;
        let mut count = 0u32;
        while let Some(p) = self.pushes.get(self.idx) {
            let room = window.saturating_sub(len);
            if room < RECORD_HEADER + 8 {
                break;
            }
            let (kind, rank, a, b) = match p.key {
                Key::Mem { rank, addr, .. } => (KIND_MEM, rank, addr, 0),
                Key::Chunk { send, offset } => (KIND_CHUNK, send.rank, send.seq, offset),
            };
            let left = (p.total - self.off) as usize;
            let n = match p.src {
                Source::Failed => 0,
                _ => left.min((room - RECORD_HEADER) & !7),
            };
            let head = len;
            let words = [
                kind as u64 | (rank as u64) << 32,
                a,
                b,
                p.total,
                self.off,
                n as u64,
            ];
            for (i, w) in words.iter().enumerate() {
                frame[head + i * 8..head + i * 8 + 8].copy_from_slice(&w.to_le_bytes());
            }
            let start = head + RECORD_HEADER;
            let piece = &mut frame[start..start + n];
            let read = match &p.src {
                Source::Bytes(d) => d
                    .get(self.off as usize..self.off as usize + n)
                    .map(|bytes| piece.copy_from_slice(bytes))
                    .is_some(),
                Source::Rank { pid, addr } => {
                    let at = addr.wrapping_add(self.off);
                    procmem::read_from(*pid, at, piece).is_ok()
                }
                Source::Failed => false,
            };
            len = if read {
                // Padding to 8: zeroed, so a frame's bytes never depend on old contents.
                let end = start + n;
                let padded = end.next_multiple_of(8);
                frame[end..padded].fill(0);
                padded
            } else {
                // The rest of the region is not sent: the reader reports the failure.
                frame[head..head + 8].copy_from_slice(
                    &((kind | FLAG_FAILED) as u64 | (rank as u64) << 32).to_le_bytes(),
                );
                frame[head + 40..head + 48].copy_from_slice(&0u64.to_le_bytes());
                start
            };
            count += 1;
            self.off += n as u64;
            if !read || self.off >= p.total {
                self.idx += 1;
                self.off = 0;
            }
        }
        let more = self.idx < self.pushes.len();
        let body = (len - FRAME_HEADER) as u64;
        frame[..4].copy_from_slice(&(more as u32).to_le_bytes());
        frame[4..8].copy_from_slice(&count.to_le_bytes());
        frame[8..16].copy_from_slice(&body.to_le_bytes());
        (len, more)
    }
}

fn malformed(from: u32, what: &str) -> EngineError {
    EngineError::Other(format!("malformed staging round from node {from}: {what}"))
}

/// Writes a P2P chunk into its receiver on this node: `Some(outcome)` when `send`'s chunk
/// at `offset` goes to a local rank (and this many bytes were asked for), `None` when the
/// chunk is to be kept in the store.
type DirectWrite<'w> = dyn Fn(DescRef, u64, &[u8]) -> Option<Result<(), RtError>> + 'w;

/// Read the records of one frame's `body` into `store`; a P2P chunk whole in this round
/// goes to `direct` first (the staging window is lent, not copied: `Transport::with_local`).
fn unpack(
    from: u32,
    count: u32,
    body: &[u8],
    store: &mut RemoteStore,
    direct: &DirectWrite<'_>,
) -> Result<(), EngineError> {
    let len = body.len();
    let mut at = 0usize;
    for _ in 0..count {
        if at + RECORD_HEADER > len {
            return Err(malformed(from, "record past the end"));
        }
        let head = &body[at..at + RECORD_HEADER];
        let w = |i: usize| u64::from_le_bytes(head[i * 8..i * 8 + 8].try_into().expect("8"));
        let (word, a, b, total, off, piece) = (w(0), w(1), w(2), w(3), w(4), w(5));
        let (kind, rank) = (word as u32 & 0xffff, (word >> 32) as u32);
        let failed = word as u32 & FLAG_FAILED != 0;
        let key = match kind {
            KIND_MEM => Key::Mem {
                rank,
                addr: a,
                len: total,
            },
            KIND_CHUNK => Key::Chunk {
                send: DescRef { rank, seq: a },
                offset: b,
            },
            _ => return Err(malformed(from, "unknown record kind")),
        };
        at += RECORD_HEADER;
        let piece = usize::try_from(piece)
            .ok()
            .filter(|&l| at.checked_add(l).is_some_and(|end| end <= len))
            .ok_or_else(|| malformed(from, "piece past the end"))?;
        let bytes = &body[at..at + piece];
        at = (at + piece).next_multiple_of(8);
        if let Key::Chunk { send, offset } = key {
            let whole = !failed && off == 0 && piece as u64 == total;
            let written = whole.then(|| direct(send, offset, bytes)).flatten();
            if let Some(outcome) = written {
                if store.delivered.insert((send, offset), outcome).is_some() {
                    return Err(malformed(from, "a chunk sent twice"));
                }
                store.bytes += piece as u64;
                continue;
            }
        }
        let slot = store
            .piece_slot(key, total, off, piece, failed)
            .ok_or_else(|| malformed(from, "piece out of order"))?;
        slot.copy_from_slice(bytes);
    }
    Ok(())
}

/// This node's end of the staging protocol (module docs).
pub struct Staging {
    base: usize,
    window: usize,
    node: u32,
    nodes: u32,
    /// Rounds pushed and not credited yet (module docs, step 1).
    owed: std::cell::Cell<usize>,
    /// One frame buffer per destination node, kept from phase to phase (see
    /// [`RemoteStore::spare`] for why).
    frames: std::cell::RefCell<Vec<Vec<u8>>>,
    /// Region buffers given back by [`Staging::recycle`].
    spare: std::cell::RefCell<Vec<Vec<u8>>>,
}

/// How long a node still waits for another node's round once the job is stopping: the
/// other nodes finish the slice's phases as usual (a stop takes effect at the slice
/// boundary), so this only ends a wait for a node that left its loop on an error.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Consume `count` signals of `ev`; give up [`STOP_GRACE`] after the job started stopping.
fn await_signals(
    t: &dyn Transport,
    ev: EventId,
    count: usize,
    stop: &AtomicBool,
) -> Result<(), EngineError> {
    let mut stopping_since = None;
    for _ in 0..count {
        let mut tries = 0u32;
        loop {
            let wait = if tries < 64 {
                Wait::Poll
            } else {
                Wait::Timeout(Duration::from_millis(20))
            };
            if t.test_event(ev, wait)? {
                break;
            }
            tries += 1;
            if tries > 64 && stop.load(Ordering::Acquire) {
                let since = *stopping_since.get_or_insert_with(std::time::Instant::now);
                if since.elapsed() > STOP_GRACE {
                    return Err(EngineError::Other(
                        "the job stopped while this node waited for another node's data".into(),
                    ));
                }
            }
            std::hint::spin_loop();
        }
    }
    Ok(())
}

impl Staging {
    /// The staging windows start at `base` in global memory (after the DEM mailboxes).
    pub fn new(cfg: &EngineConfig, base: usize, node: u32) -> Self {
        Self::with_window(base, window_size(cfg), node, cfg.nodes)
    }

    fn with_window(base: usize, window: usize, node: u32, nodes: u32) -> Self {
        Staging {
            base,
            window,
            node,
            nodes,
            owed: std::cell::Cell::new(0),
            frames: std::cell::RefCell::new((0..nodes).map(|_| Vec::new()).collect()),
            spare: std::cell::RefCell::new(Vec::new()),
        }
    }

    /// Take back a phase's store once the helpers are done with it: its buffers serve the
    /// next phases' regions (at most [`SPARE_BUFFERS`] of them, [`SPARE_BYTES`] in all).
    pub fn recycle(&self, store: RemoteStore) {
        let mut spare = self.spare.borrow_mut();
        let mut held: usize = spare.iter().map(Vec::capacity).sum();
        let buffers = store
            .spare
            .into_iter()
            .chain(store.regions.into_values().map(|s| s.data));
        for b in buffers {
            if spare.len() >= SPARE_BUFFERS || held + b.capacity() > SPARE_BYTES {
                continue;
            }
            held += b.capacity();
            spare.push(b);
        }
    }

    fn window_of(&self, source: u32) -> usize {
        self.base + source as usize * self.window
    }

    /// Push what the other nodes need from this node's ranks this phase and receive what
    /// this node needs from theirs (module docs: the rounds).
    pub fn exchange(
        &self,
        t: &dyn Transport,
        stop: &AtomicBool,
        phase: StagePhase,
        dec: &SliceDecisions,
        node_of: &[u32],
        mem: &Memory<'_>,
    ) -> Result<RemoteStore, EngineError> {
        let mut store = RemoteStore::default();
        if self.nodes <= 1 {
            return Ok(store);
        }
        store.spare = std::mem::take(&mut *self.spare.borrow_mut());
        let n = self.nodes as usize;
        let me = self.node as usize;
        let rel = flows(dec, phase, node_of, self.nodes);
        if !rel.iter().any(|&r| r) {
            return Ok(store);
        }
        let pushes = plan(dec, phase, node_of, self.node, self.nodes, mem);
        // P2P chunks from other nodes to ranks of this one: where each is written.
        let targets: HashMap<(DescRef, u64), (i32, u64, u64)> = match phase {
            StagePhase::P2p => helpers::local_chunks(dec, mem.local)
                .filter(|(s, ..)| !(mem.local)(s.rank))
                .map(|(s, r, offset, len)| {
                    let pid = mem.pids[r.rank as usize];
                    ((s.id(), offset), (pid, r.buf + offset, len))
                })
                .collect(),
            _ => HashMap::new(),
        };
        let direct = |send: DescRef, offset: u64, bytes: &[u8]| {
            let &(pid, addr, len) = targets.get(&(send, offset))?;
            (bytes.len() as u64 == len)
                .then(|| procmem::write_to(pid, addr, bytes).map_err(helpers::pe))
        };
        let mut packers: Vec<Option<Packer<'_>>> = (0..n)
            .map(|x| {
                rel[me * n + x].then(|| Packer {
                    pushes: &pushes[x],
                    idx: 0,
                    off: 0,
                })
            })
            .collect();
        let mut sources: Vec<bool> = (0..n).map(|a| rel[a * n + me]).collect();
        // One frame buffer per destination: a round is packed (read from the ranks) while
        // the destination may still be reading the previous one from its window; only the
        // send waits for the credit.
        let mut frames = self.frames.borrow_mut();
        let mut rounds = 0u32;
        loop {
            let dests: Vec<u32> = (0..n as u32)
                .filter(|&x| packers[x as usize].is_some())
                .collect();
            let srcs: Vec<u32> = (0..n as u32).filter(|&a| sources[a as usize]).collect();
            if dests.is_empty() && srcs.is_empty() {
                // The data-plane test reads this line (tests/tests/data_plane.rs).
                tracing::debug!(
                    node = self.node,
                    ?phase,
                    slice = dec.slice,
                    rounds,
                    bytes = store.bytes,
                    "staged from other nodes"
                );
                return Ok(store);
            }
            rounds += 1;
            let mut packed = Vec::with_capacity(dests.len());
            for &x in &dests {
                let p = packers[x as usize].as_mut().expect("active");
                packed.push(p.next_frame(&mut frames[x as usize], self.window));
            }
            if !dests.is_empty() {
                await_signals(t, EV_CREDIT, self.owed.replace(0), stop)?;
            }
            // Not waiting for the data to be applied: the destination reads the window
            // only after the round's EV_STAGE, which its transport signals after the data,
            // and the window is not written again before its credit.
            let at = self.window_of(self.node);
            for (&x, (len, more)) in dests.iter().zip(packed) {
                let frame = &frames[x as usize][..len];
                t.xfer_and_signal_nowait(frame, &NodeSet::single(x), at, Some(EV_STAGE))?;
                if !more {
                    packers[x as usize] = None;
                }
            }
            self.owed.set(self.owed.get() + dests.len());
            await_signals(t, EV_STAGE, srcs.len(), stop)?;
            for &a in &srcs {
                sources[a as usize] = self.receive(t, a, &mut store, &direct)?;
                t.xfer_and_signal_nowait(&[], &NodeSet::single(a), 0, Some(EV_CREDIT))?;
            }
        }
    }

    /// Read the round in source `a`'s window; returns whether more rounds follow.
    fn receive(
        &self,
        t: &dyn Transport,
        a: u32,
        store: &mut RemoteStore,
        direct: &DirectWrite<'_>,
    ) -> Result<bool, EngineError> {
        let at = self.window_of(a);
        let mut head = [0u8; FRAME_HEADER];
        t.read_local(at, &mut head)?;
        let more = u32::from_le_bytes(head[..4].try_into().expect("4")) != 0;
        let count = u32::from_le_bytes(head[4..8].try_into().expect("4"));
        let len = u64::from_le_bytes(head[8..16].try_into().expect("8")) as usize;
        if len > self.window - FRAME_HEADER {
            return Err(malformed(a, "longer than the window"));
        }
        let mut unpacked = Ok(());
        t.with_local(at + FRAME_HEADER, len, &mut |body| {
            unpacked = unpack(a, count, body, store, direct);
        })?;
        unpacked.map(|()| more)
    }
}

#[cfg(test)]
#[path = "remote_tests.rs"]
mod tests;
