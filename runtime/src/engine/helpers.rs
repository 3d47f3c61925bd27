//! The node's helpers that execute a slice's decisions on its own ranks' memory:
//! the DMA Helper (P2P), the Collective Helper (BBM) and the Reduce Helper (RM).
//!
//! Data moves from the source rank's buffer to the destination rank's buffer by
//! cross-memory attach (`process_vm_readv`/`writev`) through a small cache-resident bounce
//! buffer: the node manager plays the papers' NIC thread that reads and writes application
//! memory directly. A node executes exactly the work whose *destination* is one of its ranks.
//! Cross-memory attach is for the node's own ranks only: what a helper reads from a rank
//! of another node was pushed to this node through the transport before the helper runs
//! (`remote.rs`) and is served from [`Memory::staged`].
//!
//! Buffer conventions per collective (set by the rank side, see `rank.rs`):
//! - Bcast: `buf`/`bytes` is the buffer on every member.
//! - Reduce, Allreduce, Scan, Exscan: `buf`/`bytes` input, `rbuf`/`rbytes` result;
//!   `FLAG_IN_PLACE`: the input is in `rbuf`.
//! - Scatter: root's `buf`/`bytes` holds n blocks; everyone's `rbuf`/`rbytes` one block
//!   (root with IN_PLACE receives nothing). Scatterv: root's `aux` table.
//! - Gather: `buf`/`bytes` my block; root's `rbuf`/`rbytes` n blocks. Gatherv: root's `aux`.
//! - Allgather: `buf` my block, `rbuf` n blocks; IN_PLACE: my block already at its place.
//!   Allgatherv: everyone's `aux` table.
//! - Alltoall: `buf` n send blocks, `rbuf` n receive blocks. Alltoallv: `aux` send table,
//!   `aux2` receive table.
//! - Reduce_scatter_block: `buf` n blocks, `rbuf` one block. Reduce_scatter: `aux` table.
//! - Comm_dup / Comm_split: `rbuf`/`rbytes` receives the new communicator's world ranks (u32).
//!
//! A table at `aux`/`aux2` is `n` little-endian `(bytes: u64, displacement: u64)` pairs.

use std::collections::BTreeMap;

use super::eager::EagerMemory;
use super::remote::RemoteStore;
use crate::datatype::{ElemType, ReduceOp};
use crate::descriptor::{DescKind, DescRef, Descriptor, RtError, RANK_COPY_MAX};
use crate::ops;
use crate::procmem::{self, ProcMemError};
use crate::sched::{Decision, SliceDecisions};

mod carried_payloads;
mod small;
pub use carried_payloads::CarriedPayloads;
use small::{small_alltoall, small_alltoall_block, small_bcast};

/// Errors found while executing, to be reported in the completion of the named descriptor.
pub type Overrides = BTreeMap<DescRef, RtError>;

/// What the helpers need to know about the node's ranks.
pub struct Memory<'a> {
    /// pid of every world rank of this node (0 for a rank that has not started and for
    /// every rank of another node: cross-memory attach to it fails).
    pub pids: &'a [i32],
    /// Whether a world rank is on this node.
    pub local: &'a dyn Fn(u32) -> bool,
    pub bounce: &'a mut Vec<u8>,
    /// Node memory holding eager sends (`eager.rs`).
    pub eager: &'a EagerMemory,
    /// BBM only: copies of at least this many bytes are not made here but collected for
    /// the receiving ranks' own DMA Helpers (one copy instead of two through the bounce
    /// buffer, and the ranks of a node copy in parallel instead of one after another).
    pub defer: Option<Deferred>,
    /// What the other nodes pushed this phase: the only source of remote ranks' bytes.
    pub staged: Option<&'a RemoteStore>,
}

/// Receives whose whole message the receiver writes itself: a message of at most 64 bytes
/// whose bytes the node holds (inline, eager or arena send) to a rank of this node that may
/// take it ([`Carried::allowed`]). Up to 16 bytes ride in the delivered completion
/// (`descriptor::Completion::take_payload`), up to 64 in the rank's receive arena
/// (`Completion::take_arena`, segment layout 13); the rank copies them when it takes the
/// completion, so P2P makes no system call for them. Reduction results of at most 64
/// bytes for such a rank go the same way ([`Carried::take_results`]). The decisions are
/// the same either way.
#[derive(Default)]
pub struct Carried {
    /// By world rank: whether its completions may carry payloads (a local rank whose
    /// results are not captured: `--capture-payloads` reads the buffers before delivery).
    pub allowed: Vec<bool>,
    /// This slice's: receive (or reduction member) -> (address in the rank, bytes).
    pub by_recv: CarriedPayloads,
}

/// At most `RANK_COPY_MAX` bytes, held inline: a carried payload is copied from node memory
/// into its completion or the receive arena without a heap allocation of its own.
#[derive(Clone, Copy)]
pub struct SmallBytes {
    len: u8,
    bytes: [u8; RANK_COPY_MAX as usize],
}

impl SmallBytes {
    /// `data` if it fits.
    pub fn new(data: &[u8]) -> Option<SmallBytes> {
        let mut bytes = [0u8; RANK_COPY_MAX as usize];
        bytes.get_mut(..data.len())?.copy_from_slice(data);
        Some(SmallBytes {
            len: data.len() as u8,
            bytes,
        })
    }
}

impl std::ops::Deref for SmallBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

impl std::fmt::Debug for SmallBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Carried {
    /// Take a chunk to carry: a whole message of at most `RANK_COPY_MAX` bytes whose bytes
    /// the node holds (inline in the descriptor, or in node memory: an eager or arena
    /// send), to an allowed rank. `false` leaves the chunk to the caller.
    fn take(
        &mut self,
        (s, r): (&Descriptor, &Descriptor),
        (offset, len): (u64, u64),
        eager: &super::eager::EagerMemory,
        errs: &mut Overrides,
    ) -> bool {
        let whole = offset == 0 && len <= RANK_COPY_MAX && len <= s.bytes;
        if !whole || !self.allowed.get(r.rank as usize).copied().unwrap_or(false) {
            return false;
        }
        match eager.take_small_chunk(s, r, offset, len) {
            None => false,
            Some(Ok(data)) => {
                self.by_recv.insert(r.id(), r.buf, data);
                true
            }
            Some(Err(e)) => {
                errs.insert(r.id(), e);
                true
            }
        }
    }
}

/// Large collective copies handed to the receivers' DMA Helpers (see [`Memory::defer`]).
#[derive(Debug, Default)]
pub struct Deferred {
    /// The smallest copy deferred.
    pub min: u64,
    /// The member descriptor whose buffer the copies being made now write (for errors).
    pub receiver: Option<DescRef>,
    pub chunks: Vec<DirectChunk>,
}

pub(super) fn pe(e: ProcMemError) -> RtError {
    let _ = e;
    RtError::Buffer
}

impl Memory<'_> {
    fn copy(&mut self, src: (u32, u64), dst: (u32, u64), len: u64) -> Result<(), RtError> {
        if len == 0 {
            return Ok(());
        }
        if !(self.local)(src.0) {
            let data = self.remote(src.0, src.1, len)?;
            return procmem::write_to(self.pids[dst.0 as usize], dst.1, data).map_err(pe);
        }
        if let Some(d) = self.defer.as_mut() {
            if let (true, Some(recv)) = (len >= d.min, d.receiver) {
                // A legal program does not touch a collective's buffers before it
                // completes, so the order of these copies against the ones made here does
                // not matter; the node manager waits for all of them before RM delivers.
                d.chunks.push(DirectChunk {
                    recv,
                    helper: recv.rank,
                    src_pid: self.pids[src.0 as usize],
                    dst_pid: 0,
                    src_addr: src.1,
                    dst_addr: dst.1,
                    len,
                });
                return Ok(());
            }
        }
        procmem::copy_between(
            self.pids[src.0 as usize],
            src.1,
            self.pids[dst.0 as usize],
            dst.1,
            len as usize,
            self.bounce,
        )
        .map_err(pe)
    }

    /// Bytes of a rank of another node, as its node pushed them (`remote.rs`).
    fn remote(&self, rank: u32, addr: u64, len: u64) -> Result<&[u8], RtError> {
        match self.staged {
            Some(s) => s.read(rank, addr, len),
            None => {
                tracing::debug!(rank, addr, len, "remote read outside a staged phase");
                Err(RtError::Buffer)
            }
        }
    }

    pub(super) fn read(&self, rank: u32, addr: u64, len: u64) -> Result<Vec<u8>, RtError> {
        if len > 0 && !(self.local)(rank) {
            return self.remote(rank, addr, len).map(<[u8]>::to_vec);
        }
        let mut v = vec![0u8; len as usize];
        if len > 0 {
            procmem::read_from(self.pids[rank as usize], addr, &mut v).map_err(pe)?;
        }
        Ok(v)
    }

    /// The input of collective member `p` at `(addr, len)`: held in node memory when its
    /// rank carried it in its send arena (`coll_inputs.rs`), else read from the rank.
    pub(super) fn input(&self, p: &Descriptor, addr: u64, len: u64) -> Result<Vec<u8>, RtError> {
        match self.eager.inputs.take(p.id(), addr, len) {
            Some(bytes) => Ok(bytes),
            None => self.read(p.rank, addr, len),
        }
    }

    fn write(&self, rank: u32, addr: u64, data: &[u8]) -> Result<(), RtError> {
        if data.is_empty() {
            return Ok(());
        }
        procmem::write_to(self.pids[rank as usize], addr, data).map_err(pe)
    }

    /// Read an n-entry (bytes, displacement) table.
    pub(super) fn table(&self, rank: u32, addr: u64, n: usize) -> Result<Vec<(u64, u64)>, RtError> {
        if addr == 0 {
            return Err(RtError::Arg);
        }
        let raw = self.read(rank, addr, (n * 16) as u64)?;
        Ok(raw
            .chunks_exact(16)
            .map(|c| {
                (
                    u64::from_le_bytes(c[..8].try_into().expect("8 bytes")),
                    u64::from_le_bytes(c[8..].try_into().expect("8 bytes")),
                )
            })
            .collect())
    }
}

/// A piece of a chunk that one rank's own DMA Helper thread copies (one copy): its
/// receiver's (a pull) or its sender's (a push, `dst_pid` set).
#[derive(Clone, Copy, Debug)]
pub struct DirectChunk {
    /// The receive the bytes are for (errors are reported in its completion).
    pub recv: DescRef,
    /// The world rank whose DMA Helper copies: `recv.rank` pulls, the sender pushes.
    pub helper: u32,
    pub src_pid: i32,
    /// 0 for a pull (into the helper's own process), else the receiver's pid (a push).
    pub dst_pid: i32,
    pub src_addr: u64,
    pub dst_addr: u64,
    pub len: u64,
}

/// A direct chunk at least this long is split between its two ranks' DMA Helpers. Below it
/// one helper's copy is short next to the second wake-up.
pub const SPLIT_MIN: u64 = 128 << 10;

/// Split a chunk between two local ranks into a pull by the receiver's DMA Helper (the
/// first half) and a push by the sender's (the rest, from a page boundary of the source),
/// so both copy at once: one helper alone moves a 1 MiB chunk at single-copy speed, and
/// in a bidirectional exchange the scheduler's match order (every chunk to rank 0 before
/// any to rank 1) would otherwise leave one helper idle while the other copies a whole
/// slice's budget. Which bytes move in the slice is unchanged (the decisions); only which
/// thread copies them, so replay is unaffected.
fn split_pull_push(c: DirectChunk, sender: u32, dst_pid: i32) -> Vec<DirectChunk> {
    const PAGE: u64 = 4096;
    let mid = (c.src_addr + c.len / 2).next_multiple_of(PAGE) - c.src_addr;
    let distinct = sender != c.helper && dst_pid > 0 && c.src_pid > 0;
    if c.len < SPLIT_MIN || mid == 0 || mid >= c.len || !distinct {
        return vec![c];
    }
    let pull = DirectChunk { len: mid, ..c };
    let push = DirectChunk {
        helper: sender,
        dst_pid,
        src_addr: c.src_addr + mid,
        dst_addr: c.dst_addr + mid,
        len: c.len - mid,
        ..c
    };
    vec![pull, push]
}

/// Every chunk of this slice whose receiver is local: (send, receive, offset, length).
pub(super) fn local_chunks<'d>(
    dec: &'d SliceDecisions,
    local: &'d dyn Fn(u32) -> bool,
) -> impl Iterator<Item = (&'d Descriptor, &'d Descriptor, u64, u64)> + 'd {
    dec.decisions.iter().filter_map(move |d| match d {
        Decision::Chunk(c) if local(c.recv.rank) => Some((
            dec.descriptor(c.send)?,
            dec.descriptor(c.recv)?,
            c.offset,
            c.len,
        )),
        _ => None,
    })
}

/// The chunks between two local ranks of at least `min` bytes: for these one copy by the
/// ranks' own DMA Helpers beats two through the node manager's bounce buffer; each is
/// split between the receiver's helper and the sender's ([`split_pull_push`]). (A chunk
/// from another node is written by the node manager from staging: its sender's pid means
/// nothing here.)
pub fn direct_chunks(dec: &SliceDecisions, mem: &Memory<'_>, min: u64) -> Vec<DirectChunk> {
    local_chunks(dec, mem.local)
        // An eager or inline send's buffer may be reused already: its bytes are in node
        // memory or in its descriptor.
        .filter(|&(s, _, _, len)| len >= min && (mem.local)(s.rank) && !mem.eager.holds(s))
        .flat_map(|(s, r, offset, len)| {
            let c = DirectChunk {
                recv: r.id(),
                helper: r.rank,
                src_pid: mem.pids[s.rank as usize],
                dst_pid: 0,
                src_addr: s.buf + offset,
                dst_addr: r.buf + offset,
                len,
            };
            split_pull_push(c, s.rank, mem.pids[r.rank as usize])
        })
        .collect()
}

/// P2P microphase: the node's DMA Helper moves every chunk of fewer than `direct_min` bytes
/// whose receiver is local (the larger ones went to the receivers' own DMA Helpers), every
/// chunk of an eager send, from node memory, and every chunk from another node, from
/// staging; a tiny inline message to a local rank goes into `carried` instead (its
/// receiver writes it).
pub fn run_p2p(
    dec: &SliceDecisions,
    mem: &mut Memory<'_>,
    errs: &mut Overrides,
    direct_min: u64,
    carried: &mut Carried,
) -> u32 {
    let local = mem.local;
    let mut moved = 0;
    for (s, r, offset, len) in local_chunks(dec, local) {
        if !local(s.rank) {
            if len == 0 {
                continue;
            }
            // Written into the receiver straight from the staging window already, or now
            // from the staged copy (a chunk that spanned rounds).
            let res = match mem.staged {
                Some(st) => match st.delivered(s.id(), offset) {
                    Some(done) => done,
                    None => st.chunk(s.id(), offset, len).and_then(|data| {
                        procmem::write_to(mem.pids[r.rank as usize], r.buf + offset, data)
                            .map_err(pe)
                    }),
                },
                None => Err(RtError::Buffer),
            };
            if let Err(e) = res {
                errs.insert(r.id(), e);
            }
            moved += 1;
            continue;
        }
        if carried.take((s, r), (offset, len), mem.eager, errs)
            || mem.eager.copy_out(s, r, offset, len, mem.pids, errs)
        {
            moved += 1;
            continue;
        }
        if len >= direct_min {
            continue;
        }
        if let Err(e) = mem.copy((s.rank, s.buf + offset), (r.rank, r.buf + offset), len) {
            errs.insert(r.id(), e);
        }
        moved += 1;
    }
    moved
}

/// A result the Reduce Helper computed, to be written once every node has read its inputs.
pub struct PendingWrite {
    desc: DescRef,
    addr: u64,
    data: Vec<u8>,
    /// Whether `data` fits the result buffer as its rank described it (`rbytes`): only
    /// then may the rank write it itself ([`Carried::take_results`]).
    fits: bool,
}

/// BBM (`reductions == false`) or the reading half of RM (`reductions == true`): for
/// reductions, the results are returned as writes, applied by [`apply_writes`] after a
/// microstrobe, because an in-place member's input buffer is also its output buffer and
/// another node may not have read it yet.
pub fn run_collectives(
    dec: &SliceDecisions,
    mem: &mut Memory<'_>,
    errs: &mut Overrides,
    reductions: bool,
    writes: &mut Vec<PendingWrite>,
) -> u32 {
    let mut n = 0;
    for d in &dec.decisions {
        match d {
            Decision::Collective(run) if run.kind.is_reduction() == reductions => {
                let (kind, root) = (&run.kind, &run.root);
                let parts: Vec<Descriptor> = run
                    .parts
                    .iter()
                    .filter_map(|p| dec.descriptor(*p).copied())
                    .collect();
                if !parts.iter().any(|p| (mem.local)(p.rank)) {
                    continue;
                }
                n += 1;
                let res = if reductions {
                    reduce(*kind, *root, &parts, mem, errs, writes)
                } else {
                    move_data(*kind, *root, &parts, mem, errs, writes)
                };
                if let Err(e) = res {
                    for p in parts.iter().filter(|p| (mem.local)(p.rank)) {
                        errs.entry(p.id()).or_insert(e);
                    }
                }
            }
            Decision::NewComm(created) if !reductions => {
                write_members(dec, created.comm, &created.members, mem, errs);
            }
            _ => {}
        }
    }
    n
}

/// Give each local member of a new communicator its member list, if it asked for it.
fn write_members(
    dec: &SliceDecisions,
    comm: u32,
    members: &[u32],
    mem: &mut Memory<'_>,
    errs: &mut Overrides,
) {
    let bytes: Vec<u8> = members.iter().flat_map(|m| m.to_le_bytes()).collect();
    for d in &dec.decisions {
        let Some((desc, done)) = d.completion() else {
            continue;
        };
        if done.value != comm as u64 || !(mem.local)(desc.rank) {
            continue;
        }
        let Some(p) = dec.descriptor(desc) else {
            continue;
        };
        if !matches!(p.kind(), Some(DescKind::CommDup | DescKind::CommSplit)) || p.rbuf == 0 {
            continue;
        }
        if p.rbytes < bytes.len() as u64 {
            errs.insert(p.id(), RtError::Count);
            continue;
        }
        if let Err(e) = mem.write(p.rank, p.rbuf, &bytes) {
            errs.insert(p.id(), e);
        }
    }
}

fn move_data(
    kind: DescKind,
    root: i32,
    parts: &[Descriptor],
    mem: &mut Memory<'_>,
    errs: &mut Overrides,
    writes: &mut Vec<PendingWrite>,
) -> Result<(), RtError> {
    let n = parts.len();
    let root_d = (root >= 0).then(|| parts[root as usize]);
    if kind == DescKind::Bcast {
        if let Some(rt) = root_d.filter(|rt| rt.bytes <= RANK_COPY_MAX) {
            return small_bcast(root as usize, &rt, parts, mem, writes);
        }
    }
    if kind == DescKind::Alltoall {
        if let Some(blk) = small_alltoall_block(parts) {
            return small_alltoall(blk, parts, mem, writes);
        }
    }
    for (i, p) in parts.iter().enumerate() {
        if !(mem.local)(p.rank) {
            continue;
        }
        if let Some(d) = mem.defer.as_mut() {
            d.receiver = Some(p.id());
        }
        let r = match kind {
            DescKind::Barrier | DescKind::CommDup | DescKind::CommSplit => Ok(()),
            DescKind::Bcast => {
                let rt = root_d.expect("rooted");
                if i == root as usize {
                    Ok(())
                } else {
                    mem.copy((rt.rank, rt.buf), (p.rank, p.buf), rt.bytes)
                }
            }
            DescKind::Scatter => {
                let rt = root_d.expect("rooted");
                if i == root as usize && p.in_place() {
                    Ok(())
                } else {
                    let blk = rt.bytes / n as u64;
                    if p.rbytes < blk {
                        Err(RtError::Truncate)
                    } else {
                        mem.copy((rt.rank, rt.buf + i as u64 * blk), (p.rank, p.rbuf), blk)
                    }
                }
            }
            DescKind::Scatterv => {
                let rt = root_d.expect("rooted");
                if i == root as usize && p.in_place() {
                    Ok(())
                } else {
                    let (cnt, disp) = mem.table(rt.rank, rt.aux, n)?[i];
                    if p.rbytes < cnt {
                        Err(RtError::Truncate)
                    } else {
                        mem.copy((rt.rank, rt.buf + disp), (p.rank, p.rbuf), cnt)
                    }
                }
            }
            DescKind::Gather | DescKind::Gatherv if i == root as usize => {
                let table = if kind == DescKind::Gatherv {
                    Some(mem.table(p.rank, p.aux, n)?)
                } else {
                    None
                };
                let blk = p.rbytes / n as u64;
                let mut res = Ok(());
                for (j, q) in parts.iter().enumerate() {
                    if j == i && p.in_place() {
                        continue;
                    }
                    let (cnt, disp) = table.as_ref().map_or((blk, j as u64 * blk), |t| t[j]);
                    let len = q.bytes.min(cnt);
                    if q.bytes > cnt {
                        res = Err(RtError::Truncate);
                    }
                    mem.copy((q.rank, q.buf), (p.rank, p.rbuf + disp), len)?;
                }
                res
            }
            DescKind::Gather | DescKind::Gatherv => Ok(()),
            DescKind::Allgather | DescKind::Allgatherv => {
                let table = if kind == DescKind::Allgatherv {
                    Some(mem.table(p.rank, p.aux, n)?)
                } else {
                    None
                };
                let blk = p.rbytes / n as u64;
                for (j, q) in parts.iter().enumerate() {
                    if j == i && p.in_place() {
                        continue;
                    }
                    let (cnt, disp) = table.as_ref().map_or((blk, j as u64 * blk), |t| t[j]);
                    // A member that contributed in place has its block in its receive buffer.
                    let src = if q.in_place() { q.rbuf + disp } else { q.buf };
                    mem.copy((q.rank, src), (p.rank, p.rbuf + disp), cnt)?;
                }
                Ok(())
            }
            DescKind::Alltoall => {
                for (j, q) in parts.iter().enumerate() {
                    let sblk = q.bytes / n as u64;
                    let rblk = p.rbytes / n as u64;
                    mem.copy(
                        (q.rank, q.buf + i as u64 * sblk),
                        (p.rank, p.rbuf + j as u64 * rblk),
                        sblk.min(rblk),
                    )?;
                }
                Ok(())
            }
            DescKind::Alltoallv => {
                let rt = mem.table(p.rank, p.aux2, n)?;
                for (j, q) in parts.iter().enumerate() {
                    let st = mem.table(q.rank, q.aux, n)?;
                    let (scnt, sdisp) = st[i];
                    let (rcnt, rdisp) = rt[j];
                    if scnt > rcnt {
                        errs.insert(p.id(), RtError::Truncate);
                    }
                    mem.copy(
                        (q.rank, q.buf + sdisp),
                        (p.rank, p.rbuf + rdisp),
                        scnt.min(rcnt),
                    )?;
                }
                Ok(())
            }
            _ => Ok(()),
        };
        if let Err(e) = r {
            errs.entry(p.id()).or_insert(e);
        }
    }
    Ok(())
}

/// The input of one member of a reduction (pushed by its node when remote).
fn contribution(p: &Descriptor, mem: &Memory<'_>) -> Result<Vec<u8>, RtError> {
    let (addr, len) = super::remote::contribution_region(p);
    mem.input(p, addr, len)
}

/// Combine `inputs` along a binomial tree rooted at index 0 (the papers' RM). The operand
/// order is always lower ranks on the left, so the result is the same fixed expression in
/// every run, whichever node computes it.
fn tree_reduce(op: ReduceOp, elem: ElemType, mut inputs: Vec<Vec<u8>>) -> Result<Vec<u8>, RtError> {
    let n = inputs.len();
    let mut step = 1;
    while step < n {
        let mut i = 0;
        while i + step < n {
            let right = std::mem::take(&mut inputs[i + step]);
            ops::reduce_into(op, elem, &mut inputs[i], &right).map_err(|_| RtError::Op)?;
            i += 2 * step;
        }
        step *= 2;
    }
    Ok(inputs.into_iter().next().unwrap_or_default())
}

/// Second half of RM: write the reduction results (and small broadcasts' copies).
pub fn apply_writes(writes: Vec<PendingWrite>, mem: &mut Memory<'_>, errs: &mut Overrides) {
    for w in writes {
        if let Err(e) = mem.write(w.desc.rank, w.addr, &w.data) {
            errs.entry(w.desc).or_insert(e);
        }
    }
}

fn reduce(
    kind: DescKind,
    root: i32,
    parts: &[Descriptor],
    mem: &mut Memory<'_>,
    errs: &mut Overrides,
    writes: &mut Vec<PendingWrite>,
) -> Result<(), RtError> {
    let mut out = |p: &Descriptor, data: &[u8]| -> Result<(), RtError> {
        writes.push(PendingWrite {
            desc: p.id(),
            addr: p.rbuf,
            data: data.to_vec(),
            fits: data.len() as u64 <= p.rbytes,
        });
        Ok(())
    };
    let first = parts[0];
    let op = first.reduce_op().ok_or(RtError::Op)?;
    let elem = first.elem_type().ok_or(RtError::Op)?;
    let inputs = parts
        .iter()
        .map(|p| contribution(p, mem))
        .collect::<Result<Vec<_>, _>>()?;
    let n = parts.len();
    match kind {
        DescKind::Scan | DescKind::Exscan => {
            // Prefix reductions: member i gets in_0 op ... op in_i (Exscan: up to in_{i-1}),
            // folded left to right.
            let mut acc: Option<Vec<u8>> = None;
            for (i, p) in parts.iter().enumerate() {
                let before = acc.clone();
                match &mut acc {
                    None => acc = Some(inputs[i].clone()),
                    Some(a) => {
                        ops::reduce_into(op, elem, a, &inputs[i]).map_err(|_| RtError::Op)?
                    }
                }
                if !(mem.local)(p.rank) {
                    continue;
                }
                let result = if kind == DescKind::Scan {
                    acc.as_ref()
                } else {
                    before.as_ref()
                };
                if let Some(v) = result {
                    out(p, v)?;
                }
            }
            Ok(())
        }
        _ => {
            let total = tree_reduce(op, elem, inputs)?;
            for (i, p) in parts.iter().enumerate() {
                if !(mem.local)(p.rank) {
                    continue;
                }
                let r = match kind {
                    DescKind::Reduce if i == root as usize => out(p, &total),
                    DescKind::Reduce => Ok(()),
                    DescKind::Allreduce => out(p, &total),
                    DescKind::ReduceScatterBlock => {
                        let blk = total.len() / n;
                        out(p, &total[i * blk..(i + 1) * blk])
                    }
                    DescKind::ReduceScatter => {
                        let t = mem.table(p.rank, p.aux, n)?;
                        let (cnt, disp) = t[i];
                        let (a, b) = (disp as usize, (disp + cnt) as usize);
                        if b > total.len() {
                            Err(RtError::Count)
                        } else {
                            out(p, &total[a..b])
                        }
                    }
                    _ => Ok(()),
                };
                if let Err(e) = r {
                    errs.insert(p.id(), e);
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(len: u64) -> DirectChunk {
        DirectChunk {
            recv: DescRef { rank: 1, seq: 7 },
            helper: 1,
            src_pid: 100,
            dst_pid: 0,
            src_addr: 0x10_0100,
            dst_addr: 0x20_0000,
            len,
        }
    }

    #[test]
    fn large_chunk_is_pulled_and_pushed_in_two_pieces_covering_it() {
        let c = chunk(1 << 20);
        let v = split_pull_push(c, 0, 200);
        assert_eq!(v.len(), 2);
        let (pull, push) = (v[0], v[1]);
        assert_eq!((pull.helper, pull.dst_pid, pull.src_pid), (1, 0, 100));
        assert_eq!((push.helper, push.dst_pid, push.src_pid), (0, 200, 100));
        assert_eq!(pull.len + push.len, c.len);
        assert_eq!(push.src_addr, c.src_addr + pull.len);
        assert_eq!(push.dst_addr, c.dst_addr + pull.len);
        assert_eq!(push.src_addr % 4096, 0, "the push starts on a source page");
        assert_eq!((pull.recv, push.recv), (c.recv, c.recv));
    }

    #[test]
    fn small_bytes_hold_up_to_the_rank_copy_limit() {
        let data: Vec<u8> = (0..RANK_COPY_MAX as u8).collect();
        let held = SmallBytes::new(&data).expect("64 bytes fit");
        assert_eq!(&*held, &data[..]);
        assert_eq!(&*SmallBytes::new(&[]).expect("empty"), &[] as &[u8]);
        assert!(SmallBytes::new(&[0; RANK_COPY_MAX as usize + 1]).is_none());
    }

    #[test]
    fn small_self_and_unknown_pid_chunks_stay_whole() {
        assert_eq!(split_pull_push(chunk(SPLIT_MIN - 1), 0, 200).len(), 1);
        assert_eq!(split_pull_push(chunk(1 << 20), 1, 200).len(), 1);
        assert_eq!(split_pull_push(chunk(1 << 20), 0, 0).len(), 1);
    }
}
