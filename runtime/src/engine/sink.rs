//! Where the slice engine's output goes (a recorder) and where forced input comes from (a
//! replayer). The runtime defines these traits and never depends on their implementations.
//!
//! Sinks are called on the slice path, so an implementation must not do disk I/O there:
//! the recorder copies the record into a bounded queue drained by its writer thread.

use std::time::Duration;

use crate::descriptor::Descriptor;
use crate::mmds::RankMmds;
use crate::sched::SliceDecisions;

/// Why a slice started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum StartReason {
    /// The first slice of the job.
    First = 0,
    /// The slice timer expired (the papers' only reason).
    Timer = 1,
    /// Adaptive strobe: no rank was computing, so waiting longer could not change anything.
    Early = 2,
}

impl StartReason {
    pub fn name(self) -> &'static str {
        match self {
            StartReason::First => "first",
            StartReason::Timer => "timer",
            StartReason::Early => "early",
        }
    }
}

/// The papers' global per-slice metrics, measured by the Strobe Sender.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GlobalMetrics {
    /// GETTS: elapsed time since the previous slice began.
    pub getts: Duration,
    /// GTDEM / GTMSM / GTTS: time from the strobe until DEM / MSM / the whole slice finished
    /// on every node.
    pub gtdem: Duration,
    pub gtmsm: Duration,
    pub gtts: Duration,
    /// USRSTS / USRDEM / USRMSM: unsuccessful synchronization retries (Compare-And-Writes
    /// that found some node not done) before the slice / DEM / MSM was over.
    pub usrsts: u32,
    pub usrdem: u32,
    pub usrmsm: u32,
}

/// The papers' local per-slice, per-node metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LocalMetrics {
    pub node: u32,
    pub letts: Duration,
    pub ltdem: Duration,
    pub ltmsm: Duration,
    pub ltts: Duration,
    /// Point-to-point descriptors this node delivered in DEM.
    pub np2pdem: u32,
    /// Point-to-point operations (chunks) scheduled in MSM for this node's receivers.
    pub np2pmsm: u32,
    /// Collective descriptors this node delivered in DEM.
    pub ncolldem: u32,
    /// Collectives scheduled in MSM involving this node's ranks.
    pub ncollmsm: u32,
    /// BPTS: this node's ranks that were blocked when the slice started.
    pub bpts: u32,
    /// Time in the main internal routines (LTR_i): draining queues, scheduling, moving
    /// data, collectives, reductions, delivering completions.
    pub t_drain: Duration,
    pub t_schedule: Duration,
    pub t_p2p: Duration,
    pub t_bbm: Duration,
    pub t_rm: Duration,
    pub t_deliver: Duration,
}

/// Everything about one slice, as node 0 (the Strobe Sender's node) saw it.
#[derive(Clone, Debug)]
pub struct SliceRecord {
    pub slice: u64,
    pub reason: StartReason,
    /// Start of the slice, in nanoseconds since the job started.
    pub start_ns: u64,
    pub global: GlobalMetrics,
    /// Descriptors handled in this slice (posted during the previous one), canonical order.
    pub descriptors: Vec<Descriptor>,
    pub decisions: SliceDecisions,
    pub digest: u64,
    /// Ranks blocked when the slice started, with the call each was blocked in.
    pub blocked: Vec<(u32, u32)>,
}

/// Receives the slice engine's output. Called from node threads: keep it cheap.
pub trait SliceSink: Send + Sync {
    /// One slice, from node 0.
    fn slice(&self, rec: &SliceRecord);
    /// One node's local metrics for a slice.
    fn node_metrics(&self, slice: u64, m: &LocalMetrics) {
        let _ = (slice, m);
    }
    /// Every rank's per-process statistics (MMDS), once, when the job has ended and every
    /// rank was reaped; ranks that never got through `MPI_Init` are missing. Called by the
    /// launcher (not on the slice path) only when MMDS was on.
    fn mmds(&self, ranks: &[RankMmds]) {
        let _ = ranks;
    }
}

/// Discards everything.
pub struct NullSink;

impl SliceSink for NullSink {
    fn slice(&self, _rec: &SliceRecord) {}
}

/// Forces the input of each slice (the replayer): how many descriptors of `rank` the
/// Buffer Sender may take in `slice`. `None` means "all that are queued" (live runs).
pub trait SliceSource: Send + Sync {
    fn quota(&self, slice: u64, rank: u32) -> Option<u64>;
}
