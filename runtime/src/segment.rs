//! The job segment: shared memory between the node managers (in the launcher) and the ranks
//! (separate processes), the stand-in for the papers' NIC memory. One memfd per job, so
//! nothing is ever left in `/dev/shm`; ranks inherit its descriptor.
//!
//! Layout: a [`JobHeader`] page, then one [`RankSlot`] per rank, each followed by its
//! descriptor queue (rank -> node manager) and completion queue (node manager -> rank).

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::calls::Primitive;
use crate::descriptor::{Completion, DescKind, Descriptor};
use crate::outcome::{OutcomeRec, OUTCOME_CAPACITY};
use crate::ring::{ring_bytes, Ring};
use crate::shm_region::ShmRegion;

pub const MAGIC: u64 = 0x5354_524f_4245_4a31; // "STROBEJ1"
/// 5: the header's `stretched` word (the adaptive strobe's stretched timer). Slot
/// encodings are unchanged since 4. 6: the slot's call-site words (128-byte slots).
/// 7: the header's `mirrored` word (a node's own segment watched by its slot mirror).
/// 8: `DmaWork::dst_pid` (pushes by the sender's DMA Helper): a rank of layout 7 would take
/// a push for a pull and copy into its own memory, so it must refuse to attach.
/// 11: `MmdsBlock::primitives_used` (a snapshot reads only the primitives a rank called).
/// 12: each slot's send arena (`segment_arena.rs`) after its MMDS block. 13: each slot's
/// receive arena after its send arena. 14: a rank sleeps on its group's `group_wake` word,
/// no longer on `wake` (a rank of layout 13 would never be woken). 15: `dma_done_sleepers`
/// (a DMA Helper of layout 14 would not wake a node manager counted there).
pub const LAYOUT_VERSION: u32 = 15;

/// What a rank is doing, as its slot publishes it. The values are the shared-memory
/// encoding (layout version 4): never renumber.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum RankState {
    /// Running application code (counted in `JobHeader::computing`).
    Computing = 0,
    /// Inside a blocking call, asleep until a completion arrives.
    Blocked = 1,
    /// `MPI_Finalize` returned.
    Finalized = 2,
    /// The process is gone (set by the launcher's reaper).
    Exited = 3,
    /// Replay only: the rank tried to post a descriptor that belongs to a later slice than
    /// the one running and is held at that call until the slice comes (not computing, not
    /// blocked).
    Held = 4,
}

impl RankState {
    /// Decode a slot word. A rank process can scribble on its own mapping of the segment,
    /// so a value we never write is read as [`RankState::Exited`]: nobody waits for such
    /// a rank, and the launcher reports how its process ended.
    const fn from_raw(v: u32) -> RankState {
        match v {
            0 => RankState::Computing,
            1 => RankState::Blocked,
            2 => RankState::Finalized,
            4 => RankState::Held,
            _ => RankState::Exited,
        }
    }

    /// Lower-case name for reports and the replay control API (`"blocked"`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            RankState::Computing => "computing",
            RankState::Blocked => "blocked",
            RankState::Finalized => "finalized",
            RankState::Exited => "exited",
            RankState::Held => "held",
        }
    }

    /// Still in the job: computing, blocked or held (not finalized, not exited).
    pub const fn is_live(self) -> bool {
        matches!(
            self,
            RankState::Computing | RankState::Blocked | RankState::Held
        )
    }

    /// Done with MPI: finalized or exited.
    pub const fn is_done(self) -> bool {
        matches!(self, RankState::Finalized | RankState::Exited)
    }
}

/// Why a replaying rank stopped (`RankSlot::diverged`). The values are the shared-memory
/// encoding (0 = not diverged): never renumber.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Divergence {
    /// The program made a different kind of timing-dependent call than recorded.
    OutcomeKind = 1,
    /// The program made more timing-dependent calls than recorded.
    LogExhausted = 2,
    /// A test or wait over a different set of requests than recorded.
    BadIndex = 3,
    /// The rank's outcome log is damaged.
    BadLog = 4,
    /// A code this build does not know (a newer rank library, or a scribbled slot).
    Unknown = u32::MAX,
}

impl Divergence {
    const fn from_raw(v: u32) -> Option<Divergence> {
        match v {
            0 => None,
            1 => Some(Divergence::OutcomeKind),
            2 => Some(Divergence::LogExhausted),
            3 => Some(Divergence::BadIndex),
            4 => Some(Divergence::BadLog),
            _ => Some(Divergence::Unknown),
        }
    }

    /// What the rank did, for the replayer's divergence report ("rank 3 {reason}").
    pub const fn reason(self) -> &'static str {
        match self {
            Divergence::OutcomeKind => "made a different timing-dependent call",
            Divergence::LogExhausted => "made more timing-dependent calls than recorded",
            Divergence::BadIndex => "made a test/wait over a different set of requests",
            Divergence::BadLog => "met a damaged outcome log",
            Divergence::Unknown => "diverged",
        }
    }
}

/// The call a rank is blocked (or held) in, as its slot publishes it for deadlock reports,
/// the recorder's blocked table and the replayer. Its own type: a posted descriptor's kind
/// and the table's MPI calls (`calls::Primitive`) are different variants, not one shared
/// number space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlockedCall {
    /// Waiting for the completion of a blocking descriptor of this kind.
    Posted(DescKind),
    /// Inside a completion call of the request API (`MPI_Wait`, `MPI_Waitall`, ...).
    Call(Primitive),
    /// Waiting for room in the descriptor queue.
    QueueFull,
    /// A slot word this build does not know (never written by this build).
    Unknown(u32),
}

/// Slot encoding of [`BlockedCall`] (layout version 4): a descriptor kind is its `DescKind`
/// value (below 100); the completion calls keep the codes they had as `CALL_*` constants
/// (100..=108); any other primitive is `CALL_BASE + slot`, slots being append-only.
const QUEUE_FULL_CODE: u32 = 104;
const CALL_BASE: u32 = 200;
const LEGACY_CALL_CODES: [(Primitive, u32); 8] = [
    (Primitive::Wait, 100),
    (Primitive::Waitall, 101),
    (Primitive::Waitany, 102),
    (Primitive::Waitsome, 103),
    (Primitive::Test, 105),
    (Primitive::Testall, 106),
    (Primitive::Testany, 107),
    (Primitive::Testsome, 108),
];

impl BlockedCall {
    pub(crate) fn to_raw(self) -> u32 {
        match self {
            BlockedCall::Posted(k) => k as u32,
            BlockedCall::Call(p) => LEGACY_CALL_CODES
                .iter()
                .find(|(q, _)| *q == p)
                .map_or(CALL_BASE + p as u32, |&(_, code)| code),
            BlockedCall::QueueFull => QUEUE_FULL_CODE,
            BlockedCall::Unknown(v) => v,
        }
    }

    pub(crate) fn from_raw(v: u32) -> BlockedCall {
        if v == QUEUE_FULL_CODE {
            return BlockedCall::QueueFull;
        }
        if let Some(&(p, _)) = LEGACY_CALL_CODES.iter().find(|(_, code)| *code == v) {
            return BlockedCall::Call(p);
        }
        let primitive = v
            .checked_sub(CALL_BASE)
            .and_then(|slot| Primitive::from_slot(slot as usize));
        if let Some(p) = primitive {
            return BlockedCall::Call(p);
        }
        u8::try_from(v)
            .ok()
            .and_then(DescKind::from_u8)
            .map_or(BlockedCall::Unknown(v), BlockedCall::Posted)
    }

    /// Waiting for a blocking descriptor whose `kind` byte is `kind`.
    pub fn posted(kind: u8) -> BlockedCall {
        DescKind::from_u8(kind).map_or(BlockedCall::Unknown(kind as u32), BlockedCall::Posted)
    }

    /// The MPI function name (`MPI_Recv`, `MPI_Waitall`, ...) for reports.
    pub fn name(self) -> &'static str {
        match self {
            BlockedCall::Posted(k) => k.mpi_name(),
            BlockedCall::Call(p) => p.mpi_name(),
            BlockedCall::QueueFull => "(descriptor queue full)",
            BlockedCall::Unknown(_) => "?",
        }
    }
}

impl From<DescKind> for BlockedCall {
    fn from(k: DescKind) -> Self {
        BlockedCall::Posted(k)
    }
}

impl From<Primitive> for BlockedCall {
    fn from(p: Primitive) -> Self {
        BlockedCall::Call(p)
    }
}

/// Environment variables through which the launcher hands a rank its job.
pub const ENV_FD: &str = "STROBE_JOB_FD";
pub const ENV_LEN: &str = "STROBE_JOB_LEN";
pub const ENV_RANK: &str = "STROBE_RANK";
pub const ENV_SIZE: &str = "STROBE_SIZE";

#[repr(C, align(64))]
pub struct JobHeader {
    pub magic: u64,
    pub version: u32,
    pub ranks: u32,
    pub nodes: u32,
    pub desc_capacity: u32,
    pub comp_capacity: u32,
    pub slot_stride: u32,
    /// The slice currently running (set by the Strobe Receiver of each rank's node).
    pub slice: AtomicU64,
    /// MMDS histogram resolution (buckets per power of two); 0 = MMDS off (`mmds.rs`).
    pub mmds_resolution: AtomicU32,
    /// Largest send the ranks complete when posted (`descriptor::FLAG_INLINE`, scheduler
    /// version 3: in the descriptor; version 5: above `INLINE_MAX`, in the rank's send
    /// arena); 0 = never (older layouts read their padding here: 0). Set by
    /// the launcher before any rank starts ([`set_send_limits`]), from the scheduler version
    /// of the job (a replay of an older recording turns it off).
    pub inline_max: AtomicU32,
    /// Largest standard-mode send the scheduler completes eagerly in the slice it is
    /// exchanged in (`SchedConfig::eager_max`); 0 = off. Set with `inline_max`
    /// ([`set_send_limits`]); a rank blocked in such a send asks for the slice at once
    /// ([`ring_urgent`]). Layout 9.
    pub eager_max: AtomicU32,
    /// Non-zero: ranks complete `MPI_PROC_NULL` sends and receives themselves
    /// (`descriptor::FLAG_LOCAL`, scheduler version 4). Set with `inline_max`. Layout 9.
    pub local_null: AtomicU32,
    _p0: [u8; 8],
    /// Ranks currently computing (not blocked, not finalized, not exited). The adaptive
    /// Strobe Sender starts a slice early when it reaches zero.
    pub computing: AtomicU32,
    _p1: [u8; 60],
    /// Futex word the Strobe Sender sleeps on; bumped when `computing` reaches zero and
    /// when a rank posts into a full queue.
    pub doorbell: AtomicU32,
    /// Non-zero while the adaptive Strobe Sender has stretched its timer after a quiet
    /// slice and sleeps on the doorbell: the next rank to post clears it and rings
    /// ([`ring_if_stretched`]). In the doorbell's cache line: both are written rarely.
    pub stretched: AtomicU32,
    /// Threads sleeping on `doorbell` (`futex::wait_counted`): ringing skips the system
    /// call while the Strobe Sender polls.
    pub doorbell_sleepers: AtomicU32,
    /// Non-zero on a node other than 0 whose segment is its own (one segment per node,
    /// `engine/mirror.rs`): every change of a rank's state then also rings the doorbell
    /// while `stretched` is set, for the node's slot mirror, the doorbell's only sleeper.
    pub mirrored: AtomicU32,
    /// Non-zero when a rank asked for the next slice before every rank blocked, as
    /// [`URGENT_NOW`] and [`URGENT_SOON`] bits: the adaptive Strobe Sender starts that
    /// slice at once (`NOW`), or once the ranks still computing block or had a few
    /// microseconds to (`SOON`). Cleared when a slice begins (layout 9; padding before).
    pub urgent: AtomicU32,
    /// Non-zero when a rank posted a descriptor (not a local one) since the current slice
    /// began: it waits in a queue for the next exchange. A rank that blocks then asks for
    /// that slice, at once if another rank posted, soon if only itself did ([`mark_posted`],
    /// [`block_wants_slice`]): the poster's rank + 1, or `u32::MAX` for several. Cleared
    /// with `urgent` (layout 10; padding before).
    pub posted_since: AtomicU32,
    _p2: [u8; 40],
    /// Non-zero once the job is being torn down: ranks stop waiting and exit.
    pub shutdown: AtomicU32,
    _p3: [u8; 60],
}

#[repr(C, align(64))]
pub struct RankSlot {
    pub pid: AtomicU32,
    /// A [`RankState`] (see [`RankSlot::state`]).
    state: AtomicU32,
    /// Futex word the rank sleeps on; the node manager bumps it to wake the rank.
    pub wake: AtomicU32,
    /// The call the rank is blocked in (a [`BlockedCall`], see [`RankSlot::blocked_call`]).
    blocked_call: AtomicU32,
    /// Descriptors posted so far (the next sequence number).
    pub posted: AtomicU64,
    /// Set when the rank called `MPI_Abort`: the error code plus one.
    pub abort_code: AtomicU32,
    /// Futex word of the rank's DMA Helper thread: bumped when direct copies are queued.
    pub dma_req: AtomicU32,
    /// Direct copies the rank's DMA Helper finished (wrapping); the node manager waits on it.
    pub dma_done: AtomicU32,
    /// First failed direct copy since the node manager last looked: its tag plus one.
    pub dma_error: AtomicU32,
    /// Failed tests since the rank's last outcome record (a run being counted; see
    /// `outcome.rs`). Written only by the rank; read by the launcher after the rank is gone.
    pub pending_fails: AtomicU32,
    /// Replay: non-zero once the rank found its program diverging from the recording (the
    /// rank then waits to be stopped; the replayer reports it). A [`Divergence`].
    diverged: AtomicU32,
    /// Replay: the rank may post descriptors with sequence numbers below `post_limit - 1`
    /// (the recorded descriptors up to the next slice); 0 means no limit (live runs).
    pub post_limit: AtomicU64,
    /// Non-zero when the last descriptor the rank posted was a blocking call (the
    /// replayer's gate: that rank is about to block).
    pub last_post_blocking: AtomicU32,
    /// Threads sleeping on `wake` (`futex::wait_counted`): a wake-up skips the system call
    /// while the rank polls (layout 5; padding before).
    pub wake_sleepers: AtomicU32,
    /// The call site of the MPI call the rank is (or was last) in, published when the call
    /// blocks, polls in vain or (replay) posts ([`crate::callsite::SiteWords`], layout 6; second cache line, written
    /// only by the rank).
    site_addr: AtomicU64,
    site_info: AtomicU64,
    /// In the slot of every 32nd rank: the futex word its group of 32 ranks sleeps on, one
    /// bit each, so that one system call wakes every sleeper of a delivery (`rank_wake.rs`,
    /// layout 14).
    pub(crate) group_wake: AtomicU32,
    /// Node manager threads sleeping on `dma_done` (`futex::wait_counted`): the DMA Helper
    /// wakes them only then, once per drained queue (layout 15).
    pub dma_done_sleepers: AtomicU32,
}

const _: () = assert!(std::mem::size_of::<RankSlot>() == 128);

impl RankSlot {
    /// What the rank is doing.
    pub fn state(&self) -> RankState {
        RankState::from_raw(self.state.load(Ordering::Acquire))
    }

    /// Publish the rank's state. Moves in and out of [`RankState::Computing`] must go
    /// through [`leave_computing`] / [`resume_computing`], which keep
    /// `JobHeader::computing` in step.
    pub fn set_state(&self, s: RankState) {
        self.state.store(s as u32, Ordering::Release);
    }

    /// The call the rank is (or was last) blocked or held in.
    pub fn blocked_call(&self) -> BlockedCall {
        BlockedCall::from_raw(self.blocked_call.load(Ordering::Acquire))
    }

    pub fn set_blocked_call(&self, call: BlockedCall) {
        self.blocked_call.store(call.to_raw(), Ordering::Release);
    }

    /// Replay: why the rank stopped, once it diverged from the recording.
    pub fn diverged(&self) -> Option<Divergence> {
        Divergence::from_raw(self.diverged.load(Ordering::Acquire))
    }

    pub fn set_diverged(&self, why: Divergence) {
        self.diverged.store(why as u32, Ordering::Release);
    }

    /// Where in the program the rank's current (or last) MPI call was made.
    pub fn site(&self) -> crate::callsite::SiteWords {
        crate::callsite::SiteWords {
            addr: self.site_addr.load(Ordering::Acquire),
            info: self.site_info.load(Ordering::Acquire),
        }
    }

    /// Publish the call site (before the state or blocked call that makes it interesting,
    /// which are stored with `Release`). Skips the stores when nothing changed.
    pub fn set_site(&self, w: crate::callsite::SiteWords) {
        if self.site_addr.load(Ordering::Relaxed) != w.addr
            || self.site_info.load(Ordering::Relaxed) != w.info
        {
            self.site_info.store(w.info, Ordering::Relaxed);
            self.site_addr.store(w.addr, Ordering::Release);
        }
    }
}

/// The words of a rank's slot that node 0 needs about a rank of another node, copied by
/// the slot mirror (`engine/mirror.rs`) from the rank's own node's segment into node 0's.
/// Raw slot encodings: [`RankSlot::mirror`] stores them as they are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotStatus {
    pub pid: u32,
    pub state: u32,
    pub blocked_call: u32,
    pub diverged: u32,
    pub posted: u64,
    pub last_post_blocking: u32,
    /// The failed tests of the rank's open run (node 0's livelock watch).
    pub pending_fails: u32,
    pub site_addr: u64,
    pub site_info: u64,
}

impl RankSlot {
    /// The words the slot mirror copies (each loaded on its own: the mirror runs again
    /// when any of them changes, so a torn set is superseded).
    pub fn status(&self) -> SlotStatus {
        SlotStatus {
            pid: self.pid.load(Ordering::Acquire),
            state: self.state.load(Ordering::Acquire),
            blocked_call: self.blocked_call.load(Ordering::Acquire),
            diverged: self.diverged.load(Ordering::Acquire),
            posted: self.posted.load(Ordering::Acquire),
            last_post_blocking: self.last_post_blocking.load(Ordering::Acquire),
            pending_fails: self.pending_fails.load(Ordering::Acquire),
            site_addr: self.site_addr.load(Ordering::Acquire),
            site_info: self.site_info.load(Ordering::Acquire),
        }
    }

    /// Node 0, slot mirror only: publish a remote rank's status in this (node 0's) slot of
    /// it. The state is stored last, so a reader that sees it sees the call it is in.
    /// `JobHeader::computing` is not touched: node 0 counts remote ranks per node.
    pub fn mirror(&self, s: &SlotStatus) {
        self.pid.store(s.pid, Ordering::Release);
        self.blocked_call.store(s.blocked_call, Ordering::Release);
        self.diverged.store(s.diverged, Ordering::Release);
        self.last_post_blocking
            .store(s.last_post_blocking, Ordering::Release);
        self.pending_fails.store(s.pending_fails, Ordering::Release);
        self.site_info.store(s.site_info, Ordering::Relaxed);
        self.site_addr.store(s.site_addr, Ordering::Release);
        self.posted.store(s.posted, Ordering::Release);
        self.state.store(s.state, Ordering::Release);
    }
}

/// A copy the node manager asks a rank's own DMA Helper thread to do, one copy instead of
/// two through the node manager: a *pull* (`dst_pid` 0) reads `len` bytes at `src_addr` in
/// process `src_pid` straight into this rank's memory at `dst_addr` with one
/// `process_vm_readv`; a *push* (`src_pid` is this rank's own pid, `dst_pid` the receiver's)
/// writes them from this rank's memory into process `dst_pid` with one `process_vm_writev`.
/// A large P2P chunk is split into a pull by its receiver and a push by its sender, so the
/// two ranks' helpers copy it in parallel (`engine/helpers.rs`, `split_pull_push`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DmaWork {
    pub src_pid: u32,
    /// 0: this rank (a pull). Was padding, always 0, before pushes existed.
    pub dst_pid: u32,
    pub src_addr: u64,
    pub dst_addr: u64,
    pub len: u64,
    /// The node manager's reference for error reports.
    pub tag: u64,
}

/// Capacity of each rank's direct-copy queue.
pub const DMA_CAPACITY: usize = 256;

const HEADER_BYTES: usize = 4096;
const SLOT_HEADER: usize = std::mem::size_of::<RankSlot>();

fn align_up(v: usize, a: usize) -> usize {
    v.div_ceil(a) * a
}

/// Offset of a rank's MMDS block in its slot: after the three queues, page-aligned so the
/// queues' hot lines never share a page with the counters.
fn mmds_offset(desc_cap: usize, comp_cap: usize) -> usize {
    align_up(
        SLOT_HEADER
            + ring_bytes::<Descriptor>(desc_cap)
            + ring_bytes::<Completion>(comp_cap)
            + ring_bytes::<DmaWork>(DMA_CAPACITY)
            + ring_bytes::<OutcomeRec>(OUTCOME_CAPACITY),
        4096,
    )
}

/// Offset of a rank's send arena in its slot (`segment_arena.rs`): after its MMDS block,
/// page-aligned. Layout 12.
fn arena_offset(desc_cap: usize, comp_cap: usize) -> usize {
    align_up(
        mmds_offset(desc_cap, comp_cap) + crate::mmds::BLOCK_BYTES,
        4096,
    )
}

/// Offset of a rank's receive arena (`segment_arena.rs`): after its send arena. Layout 13.
fn recv_arena_offset(desc_cap: usize, comp_cap: usize) -> usize {
    arena_offset(desc_cap, comp_cap) + arena::arena_bytes(desc_cap)
}

fn slot_stride(desc_cap: usize, comp_cap: usize) -> usize {
    align_up(
        recv_arena_offset(desc_cap, comp_cap) + arena::recv_arena_bytes(comp_cap),
        4096,
    )
}

fn outcome_ring_offset(desc_cap: usize, comp_cap: usize) -> usize {
    SLOT_HEADER
        + ring_bytes::<Descriptor>(desc_cap)
        + ring_bytes::<Completion>(comp_cap)
        + ring_bytes::<DmaWork>(DMA_CAPACITY)
}

/// A mapped job segment (either side).
pub struct JobSegment {
    region: ShmRegion,
    ranks: u32,
    stride: usize,
}

/// A rank's queues, as seen by either side.
pub struct RankQueues {
    pub descriptors: Ring<Descriptor>,
    pub completions: Ring<Completion>,
    /// Node manager -> the rank's DMA Helper thread.
    pub dma: Ring<DmaWork>,
    /// Rank -> node manager: timing-dependent outcomes (`outcome.rs`).
    pub outcomes: Ring<OutcomeRec>,
}

impl JobSegment {
    /// The size in bytes of a segment [`create`](Self::create) would make (the launcher's
    /// memory check runs before anything is created).
    pub fn byte_len(ranks: u32, desc_cap: usize, comp_cap: usize) -> usize {
        HEADER_BYTES + slot_stride(desc_cap, comp_cap) * ranks as usize
    }

    /// Create a job segment (launcher side) every rank attaches to.
    pub fn create(ranks: u32, nodes: u32, desc_cap: usize, comp_cap: usize) -> io::Result<Self> {
        Self::create_with(ranks, nodes, desc_cap, comp_cap, None)
    }

    /// Create the segment of `node` in a job with one segment per node: it has a slot for
    /// every rank (global rank numbers), but only the node's ranks (`node_of_rank[r] ==
    /// node`) attach to it and only their queues are set up. The other ranks' queues and
    /// MMDS blocks are never touched, at most the first page of their slots (the slot
    /// header: node 0's slot mirror writes it): a memfd page nobody touches takes no memory.
    pub fn create_for_node(
        ranks: u32,
        nodes: u32,
        desc_cap: usize,
        comp_cap: usize,
        node: u32,
        node_of_rank: &[u32],
    ) -> io::Result<Self> {
        if node_of_rank.len() != ranks as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the placement does not name every rank",
            ));
        }
        let seg = Self::create_with(ranks, nodes, desc_cap, comp_cap, Some((node, node_of_rank)))?;
        let local = node_of_rank.iter().filter(|&&n| n == node).count() as u32;
        let h = seg.header();
        h.computing.store(local, Ordering::Release);
        h.mirrored.store(u32::from(node != 0), Ordering::Release);
        Ok(seg)
    }

    fn create_with(
        ranks: u32,
        nodes: u32,
        desc_cap: usize,
        comp_cap: usize,
        node: Option<(u32, &[u32])>,
    ) -> io::Result<Self> {
        let stride = slot_stride(desc_cap, comp_cap);
        let len = HEADER_BYTES + stride * ranks as usize;
        let region = ShmRegion::create("strobe-job", len)?;
        let seg = JobSegment {
            region,
            ranks,
            stride,
        };
        // SAFETY: the region is fresh, zero-filled, page-aligned and `len` bytes long; nobody
        // else maps it yet, so writing the header and ring headers cannot race.
        unsafe {
            let h = seg.region.as_ptr() as *mut JobHeader;
            (*h).magic = MAGIC;
            (*h).version = LAYOUT_VERSION;
            (*h).ranks = ranks;
            (*h).nodes = nodes;
            (*h).desc_capacity = desc_cap as u32;
            (*h).comp_capacity = comp_cap as u32;
            (*h).slot_stride = stride as u32;
            (*h).computing.store(ranks, Ordering::Relaxed);
            let local = |r: u32| node.is_none_or(|(n, of)| of[r as usize] == n);
            for r in (0..ranks).filter(|&r| local(r)) {
                let base = seg.slot_ptr(r);
                Ring::<Descriptor>::init(base.add(SLOT_HEADER), desc_cap);
                Ring::<Completion>::init(
                    base.add(SLOT_HEADER + ring_bytes::<Descriptor>(desc_cap)),
                    comp_cap,
                );
                Ring::<DmaWork>::init(
                    base.add(
                        SLOT_HEADER
                            + ring_bytes::<Descriptor>(desc_cap)
                            + ring_bytes::<Completion>(comp_cap),
                    ),
                    DMA_CAPACITY,
                );
                Ring::<OutcomeRec>::init(
                    base.add(outcome_ring_offset(desc_cap, comp_cap)),
                    OUTCOME_CAPACITY,
                );
            }
        }
        Ok(seg)
    }

    /// Map an inherited job segment (rank side).
    pub fn attach(fd: std::os::fd::OwnedFd, len: usize) -> io::Result<Self> {
        let region = ShmRegion::from_fd(fd, len)?;
        if len < HEADER_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "job segment too small",
            ));
        }
        // SAFETY: the mapping is at least HEADER_BYTES long and page-aligned.
        let h = unsafe { &*(region.as_ptr() as *const JobHeader) };
        if h.magic != MAGIC || h.version != LAYOUT_VERSION {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not a strobe job segment of this version",
            ));
        }
        let stride = h.slot_stride as usize;
        let ranks = h.ranks;
        if HEADER_BYTES + stride * ranks as usize > len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "job segment truncated",
            ));
        }
        Ok(JobSegment {
            region,
            ranks,
            stride,
        })
    }

    pub fn fd(&self) -> RawFd {
        self.region.fd()
    }
    pub fn inheritable_fd(&self) -> io::Result<RawFd> {
        self.region.inheritable_fd()
    }
    pub fn len(&self) -> usize {
        self.region.len()
    }
    pub fn is_empty(&self) -> bool {
        self.region.len() == 0
    }
    pub fn ranks(&self) -> u32 {
        self.ranks
    }

    pub fn header(&self) -> &JobHeader {
        // SAFETY: validated/initialised in create/attach; the header's mutable fields are atomics.
        unsafe { &*(self.region.as_ptr() as *const JobHeader) }
    }

    fn slot_ptr(&self, rank: u32) -> *mut u8 {
        assert!(rank < self.ranks, "rank {rank} out of range");
        // SAFETY: in bounds: HEADER_BYTES + stride * rank + stride <= len (checked at map time).
        unsafe {
            self.region
                .as_ptr()
                .add(HEADER_BYTES + self.stride * rank as usize)
        }
    }

    pub fn slot(&self, rank: u32) -> &RankSlot {
        // SAFETY: each slot starts with a RankSlot (zero is a valid bit pattern: all atomics).
        unsafe { &*(self.slot_ptr(rank) as *const RankSlot) }
    }

    /// The MMDS counters of `rank` (zero-filled at creation; written only by the rank).
    pub fn mmds(&self, rank: u32) -> &crate::mmds::MmdsBlock {
        let h = self.header();
        let off = mmds_offset(h.desc_capacity as usize, h.comp_capacity as usize);
        // SAFETY: the block lies inside the slot (slot_stride reserves it after the queues,
        // page-aligned), every field is an atomic integer for which zero is valid, and the
        // mapping lives as long as `self`.
        unsafe { &*(self.slot_ptr(rank).add(off) as *const crate::mmds::MmdsBlock) }
    }

    /// The queues of `rank`. Each side must use only its end of each queue (single producer,
    /// single consumer): the rank pushes descriptors and pops completions, its node manager
    /// the reverse.
    pub fn queues(&self, rank: u32) -> RankQueues {
        let base = self.slot_ptr(rank);
        let dcap = self.header().desc_capacity as usize;
        let ccap = self.header().comp_capacity as usize;
        // SAFETY: the three rings were initialised by `create` at these offsets inside the slot,
        // and the mapping outlives the returned rings as long as the segment does (callers
        // keep the JobSegment alive, see RankCtx and NodeManager).
        unsafe {
            RankQueues {
                descriptors: Ring::attach(base.add(SLOT_HEADER)),
                completions: Ring::attach(base.add(SLOT_HEADER + ring_bytes::<Descriptor>(dcap))),
                dma: Ring::attach(base.add(
                    SLOT_HEADER + ring_bytes::<Descriptor>(dcap) + ring_bytes::<Completion>(ccap),
                )),
                outcomes: Ring::attach(base.add(outcome_ring_offset(dcap, ccap))),
            }
        }
    }
}

/// Count of ranks in the given state (reports, metrics).
pub fn count_state(seg: &JobSegment, ranks: impl Iterator<Item = u32>, state: RankState) -> u32 {
    ranks.filter(|&r| seg.slot(r).state() == state).count() as u32
}

/// Mark `rank` no longer computing (blocked, held, finalized or exited): returns true when
/// it was the last computing rank, so the caller rings the doorbell.
pub fn leave_computing(seg: &JobSegment, rank: u32, new_state: RankState) -> bool {
    debug_assert_ne!(new_state, RankState::Computing);
    let slot = seg.slot(rank);
    let prev = slot.state.swap(new_state as u32, Ordering::AcqRel);
    let last = prev == RankState::Computing as u32
        && seg.header().computing.fetch_sub(1, Ordering::AcqRel) == 1;
    ring_if_mirrored(seg);
    last
}

/// A rank's state changed: on a node whose slot mirror sleeps (`JobHeader::mirrored`),
/// wake it. One relaxed load otherwise.
fn ring_if_mirrored(seg: &JobSegment) {
    if seg.header().mirrored.load(Ordering::Relaxed) != 0 {
        ring_if_stretched(seg);
    }
}

/// Move `rank` from blocked back to computing; exactly one of the rank and its node manager
/// wins this for a given block, so `computing` is never counted twice.
pub fn resume_computing(seg: &JobSegment, rank: u32) -> bool {
    resume_computing_from(seg, rank, RankState::Blocked)
}

/// Move `rank` from `from` (blocked or held) back to computing, if it is still in `from`;
/// true if this call did it (and counted the rank as computing again).
pub fn resume_computing_from(seg: &JobSegment, rank: u32, from: RankState) -> bool {
    let slot = seg.slot(rank);
    if slot
        .state
        .compare_exchange(
            from as u32,
            RankState::Computing as u32,
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_ok()
    {
        seg.header().computing.fetch_add(1, Ordering::AcqRel);
        ring_if_mirrored(seg);
        return true;
    }
    false
}

/// Tell the ranks of `seg` the largest send to carry inline (0: none), the largest the
/// scheduler completes eagerly (0: none) and whether they complete `MPI_PROC_NULL` calls
/// themselves, before they start.
pub fn set_send_limits(seg: &JobSegment, inline_max: u64, eager_max: u64, local_null: bool) {
    let inline_max = inline_max.min(crate::descriptor::RANK_COPY_MAX) as u32;
    let h = seg.header();
    h.local_null.store(u32::from(local_null), Ordering::Release);
    h.inline_max.store(inline_max, Ordering::Release);
    h.eager_max
        .store(eager_max.min(u64::from(u32::MAX)) as u32, Ordering::Release);
}

#[path = "segment_bell.rs"]
mod bell;
pub use bell::*;

#[path = "segment_arena.rs"]
mod arena;

#[cfg(test)]
#[path = "segment_tests.rs"]
mod tests;
