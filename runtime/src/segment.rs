//! The job segment: shared memory between the node managers (in the launcher) and the ranks
//! (separate processes), the stand-in for the papers' NIC memory. One memfd per job, so
//! nothing is ever left in `/dev/shm`; ranks inherit its descriptor.
//!
//! Layout: a [`JobHeader`] page, then one [`RankSlot`] per rank, each followed by its
//! descriptor queue (rank -> node manager) and completion queue (node manager -> rank).

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::descriptor::{Completion, Descriptor};
use crate::outcome::{OutcomeRec, OUTCOME_CAPACITY};
use crate::ring::{ring_bytes, Ring};
use crate::shm_region::ShmRegion;

pub const MAGIC: u64 = 0x5354_524f_4245_4a31; // "STROBEJ1"
pub const LAYOUT_VERSION: u32 = 4;

/// Rank states, in `RankSlot::state`.
pub const STATE_COMPUTING: u32 = 0;
pub const STATE_BLOCKED: u32 = 1;
pub const STATE_FINALIZED: u32 = 2;
pub const STATE_EXITED: u32 = 3;
/// Replay only: the rank tried to post a descriptor that belongs to a later slice than the
/// one running and is held at that call until the slice comes (not computing, not blocked).
pub const STATE_HELD: u32 = 4;

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
    _p0: [u8; 20],
    /// Ranks currently computing (not blocked, not finalized, not exited). The adaptive
    /// Strobe Sender starts a slice early when it reaches zero.
    pub computing: AtomicU32,
    _p1: [u8; 60],
    /// Futex word the Strobe Sender sleeps on; bumped when `computing` reaches zero and
    /// when a rank posts into a full queue.
    pub doorbell: AtomicU32,
    _p2: [u8; 60],
    /// Non-zero once the job is being torn down: ranks stop waiting and exit.
    pub shutdown: AtomicU32,
    _p3: [u8; 60],
}

/// What a rank is blocked in, for deadlock reports: a `DescKind` value or one of these.
pub const CALL_WAIT: u32 = 100;
pub const CALL_WAITALL: u32 = 101;
pub const CALL_WAITANY: u32 = 102;
pub const CALL_WAITSOME: u32 = 103;
pub const CALL_QUEUE_FULL: u32 = 104;
/// Non-blocking test calls (never blocked in; they name timing-dependent outcomes).
pub const CALL_TEST: u32 = 105;
pub const CALL_TESTALL: u32 = 106;
pub const CALL_TESTANY: u32 = 107;
pub const CALL_TESTSOME: u32 = 108;

pub fn call_name(call: u32) -> &'static str {
    match call {
        CALL_WAIT => "MPI_Wait",
        CALL_WAITALL => "MPI_Waitall",
        CALL_WAITANY => "MPI_Waitany",
        CALL_WAITSOME => "MPI_Waitsome",
        CALL_QUEUE_FULL => "(descriptor queue full)",
        CALL_TEST => "MPI_Test",
        CALL_TESTALL => "MPI_Testall",
        CALL_TESTANY => "MPI_Testany",
        CALL_TESTSOME => "MPI_Testsome",
        c => crate::descriptor::DescKind::from_u8(c as u8).map_or("?", |k| k.mpi_name()),
    }
}

#[repr(C, align(64))]
pub struct RankSlot {
    pub pid: AtomicU32,
    pub state: AtomicU32,
    /// Futex word the rank sleeps on; the node manager bumps it to wake the rank.
    pub wake: AtomicU32,
    /// The call the rank is blocked in (`CALL_*` or a `DescKind`).
    pub blocked_call: AtomicU32,
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
    /// rank then waits to be stopped; the replayer reports it).
    pub diverged: AtomicU32,
    /// Replay: the rank may post descriptors with sequence numbers below `post_limit - 1`
    /// (the recorded descriptors up to the next slice); 0 means no limit (live runs).
    pub post_limit: AtomicU64,
    /// Non-zero when the last descriptor the rank posted was a blocking call (the
    /// replayer's gate: that rank is about to block).
    pub last_post_blocking: AtomicU32,
    _p: [u8; 4],
}

const _: () = assert!(std::mem::size_of::<RankSlot>() == 64);

/// A copy the node manager asks a rank's own DMA Helper thread to do: read `len` bytes at
/// `src_addr` in process `src_pid` straight into this rank's memory at `dst_addr`, with
/// one `process_vm_readv` (one copy, instead of two through the node manager).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DmaWork {
    pub src_pid: u32,
    pub _pad: u32,
    pub src_addr: u64,
    pub dst_addr: u64,
    pub len: u64,
    /// The node manager's reference for error reports.
    pub tag: u64,
}

/// Capacity of each rank's direct-copy queue.
pub const DMA_CAPACITY: usize = 256;

const HEADER_BYTES: usize = 4096;
const SLOT_HEADER: usize = 64;

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

fn slot_stride(desc_cap: usize, comp_cap: usize) -> usize {
    align_up(
        mmds_offset(desc_cap, comp_cap) + crate::mmds::BLOCK_BYTES,
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
    /// Create a job segment (launcher side).
    pub fn create(ranks: u32, nodes: u32, desc_cap: usize, comp_cap: usize) -> io::Result<Self> {
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
            for r in 0..ranks {
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
pub fn count_state(seg: &JobSegment, ranks: impl Iterator<Item = u32>, state: u32) -> u32 {
    ranks
        .filter(|&r| seg.slot(r).state.load(Ordering::Acquire) == state)
        .count() as u32
}

/// Mark `rank` no longer computing (blocked, finalized or exited): returns true when it
/// was the last computing rank, so the caller rings the doorbell.
pub fn leave_computing(seg: &JobSegment, rank: u32, new_state: u32) -> bool {
    let slot = seg.slot(rank);
    let prev = slot.state.swap(new_state, Ordering::AcqRel);
    if prev == STATE_COMPUTING {
        return seg.header().computing.fetch_sub(1, Ordering::AcqRel) == 1;
    }
    false
}

/// Move `rank` from blocked back to computing; exactly one of the rank and its node manager
/// wins this for a given block, so `computing` is never counted twice.
pub fn resume_computing(seg: &JobSegment, rank: u32) -> bool {
    let slot = seg.slot(rank);
    if slot
        .state
        .compare_exchange(
            STATE_BLOCKED,
            STATE_COMPUTING,
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_ok()
    {
        seg.header().computing.fetch_add(1, Ordering::AcqRel);
        return true;
    }
    false
}

/// Ring the Strobe Sender's doorbell.
pub fn ring_doorbell(seg: &JobSegment) {
    let h = seg.header();
    h.doorbell.fetch_add(1, Ordering::Release);
    crate::futex::wake_all(&h.doorbell);
}
