//! Where the slice engine's output goes (a recorder) and where forced input comes from (a
//! replayer). The runtime defines these traits and never depends on their implementations.
//!
//! Sinks are called on the slice path, so an implementation must not do disk I/O there:
//! the recorder copies the record into a bounded queue drained by its writer thread.

use std::time::Duration;

pub use strobe_core::slice::StartReason;

use crate::descriptor::{Completion, DescRef, Descriptor};
use crate::mmds::RankMmds;
use crate::outcome::OutcomeRec;
use crate::sched::SliceDecisions;
use crate::segment::{BlockedCall, JobSegment};

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
    pub blocked: Vec<(u32, BlockedCall)>,
    /// Where in the program those ranks made their calls (the call each was blocked in
    /// when the blocked set was taken), for those whose call site is known, in `blocked`'s
    /// order; then the sites of ranks not in `blocked` whose blocking call's descriptor
    /// this slice exchanged (published with the post: the slice began before they
    /// announced the block).
    pub sites: Vec<(u32, std::sync::Arc<crate::symbolize::CallSite>)>,
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

    /// Timing-dependent outcomes of `rank` (`outcome.rs`), in the rank's order: from its
    /// node thread at every slice, and from the launcher once after the job for what was
    /// left (a dying rank's last records and its open run of failed tests).
    fn outcomes(&self, rank: u32, recs: &[OutcomeRec]) {
        let _ = (rank, recs);
    }

    /// Whether the bytes delivered to `rank` are captured (`strobe record
    /// --capture-payloads`): then every completion of one of its descriptors reaches
    /// [`SliceSink::payload`]. Asked on the slice path: keep it a lookup.
    fn captures(&self, rank: u32) -> bool {
        let _ = rank;
        false
    }

    /// One completion of a captured rank, with the bytes its call received (`capture.rs`),
    /// from the rank's node thread just before the completion is delivered.
    fn payload(&self, p: &Payload) {
        let _ = p;
    }
}

/// What a captured rank was handed for one descriptor: enough to replay the rank alone
/// (`alone.rs`) without the other ranks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Payload {
    /// The slice whose decisions completed the descriptor.
    pub slice: u64,
    /// The descriptor as the rank posted it (its addresses mean nothing in another run).
    pub desc: Descriptor,
    /// The completion the rank received (errors found while executing included).
    pub completion: Completion,
    /// For a receive: the send it matched.
    pub matched_send: Option<DescRef>,
    /// The bytes the runtime wrote into the rank's memory for this call
    /// ([`crate::engine::capture::result_region`]); empty when it writes none.
    pub data: Vec<u8>,
}

/// Discards everything.
pub struct NullSink;

impl SliceSink for NullSink {
    fn slice(&self, _rec: &SliceRecord) {}
}

/// Whether the Strobe Sender may start a slice (replay's logical slices).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gate {
    Open,
    /// Not yet: ask again when a rank posts, blocks or exits (or after a short while).
    Wait,
    /// End the job now; the text says why (a divergence report, "stopped by the user").
    Stop(String),
}

/// Forces the input of each slice (the replayer). With a source the engine runs *logical*
/// slices (model.md 4.4): there is no timer, and the Strobe Sender starts slice `s` only
/// when [`SliceSource::gate`] opens.
pub trait SliceSource: Send + Sync {
    /// How many descriptors of `rank` the Buffer Sender may take in `slice`. `None` means
    /// "all that are queued" (live runs).
    fn quota(&self, slice: u64, rank: u32) -> Option<u64>;
    /// How many descriptors `rank` may have posted in total while `slice` runs (0 is the
    /// time before slice 1); a rank that tries to post more is held at that call. `None`:
    /// no limit.
    fn post_limit(&self, slice: u64, rank: u32) -> Option<u64> {
        let _ = (slice, rank);
        None
    }
    /// May slice `next` start now? Called by the Strobe Sender, repeatedly, with the job
    /// segment to look at the ranks (posted counts, states).
    fn gate(&self, next: u64, seg: &JobSegment) -> Gate {
        let _ = (next, seg);
        Gate::Open
    }
    /// The ranks blocked when `slice` started, as recorded: which rank happened to be
    /// inside a blocking call when the strobe fired is timing, so replay takes it from the
    /// recording (for the schedule log and deadlock detection). Asked once the slice's
    /// batch `handled` is known (the recording stores it relative to a prediction from the
    /// schedule); every node asks, for the same slice, before the slice's sink call.
    /// `None`: observe it.
    fn blocked(&self, slice: u64, handled: &[Descriptor]) -> Option<Vec<u32>> {
        let _ = (slice, handled);
        None
    }
}
