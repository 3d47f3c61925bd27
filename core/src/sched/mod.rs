//! The scheduler: a deterministic core with no I/O.
//!
//! Input for slice *i*: the descriptors posted during slice *i-1*, in canonical order
//! (by rank, then by that rank's sequence number), applied to the state left by slice *i-1*.
//! Output: that slice's [`SliceDecisions`]. Nothing else enters: no clock, no thread timing,
//! no hash-map iteration order (only ordered maps and vectors are used), no arrival order.
//! The same inputs give the same decisions, which is what the recorder stores and the
//! replayer verifies (model.md section 4).
//!
//! Every node runs its own replica of the scheduler over the same global descriptor set
//! (DEM delivers every node's descriptors to every node), then executes only its own part
//! of the decisions; replicas cross-check each other through the slice digest. This keeps
//! the schedule a pure function of the global inputs no matter how the job is cut into
//! nodes. See docs/architecture.md for why we chose replication over the papers' per-node
//! partition of matching.

mod collective;
mod comm;
pub mod decision;
mod decision_text;
mod group;
mod p2p;
pub mod visit;

/// The version of the scheduling rules. Bump it whenever a change alters the decisions the
/// scheduler makes for the same input (a new protocol, a new matching rule): recordings
/// carry it, and replaying a recording made under another version is refused (exit 2)
/// instead of being reported as a divergence. Version 1 is every release up to and
/// including the one that introduced this constant. Version 2 adds the eager protocol for
/// small standard-mode sends ([`SchedConfig::eager_max`]); a version-1 recording replays
/// with it off ([`SchedConfig::eager_max_for_version`]), so its decisions are unchanged.
/// Version 3 adds inline sends (`descriptor::FLAG_INLINE`: a send of at most
/// `descriptor::INLINE_MAX` bytes carries them in its descriptor and completes when it is
/// posted); the ranks choose it, so a version-1 or -2 recording replays with the ranks
/// told not to ([`SchedConfig::inline_max_for_version`]).
/// Version 4 adds local completions of `MPI_PROC_NULL` sends and receives
/// (`descriptor::FLAG_LOCAL`: the rank completes them when it posts; their recorded
/// completion is flagged `COMPLETION_INLINE`); again the ranks choose, and an older
/// recording replays with them told not to ([`SchedConfig::local_null_for_version`]).
/// Version 5 completes standard-mode sends of up to `descriptor::RANK_COPY_MAX` (64) bytes
/// when posted (those above `INLINE_MAX` travel in the rank's send arena); an older
/// recording replays with the ranks told the old limit
/// ([`SchedConfig::inline_max_for_version`]).
pub const SCHEDULER_VERSION: u32 = 5;

/// The oldest scheduler version whose recordings this scheduler still reproduces.
pub const OLDEST_SCHEDULER_VERSION: u32 = 1;

pub use comm::{Comm, CommTable, CommView};
pub use decision::{
    Chunk, CollectiveRun, Completed, Decision, DecisionCounts, DecisionKind, Fnv64, Match, NewComm,
    SliceDecisions,
};
pub use decision_text::error_name;
pub use visit::{DecisionSource, DecisionVisitor};

use std::collections::BTreeMap;

use crate::descriptor::{Completion, DescKind, DescRef, Descriptor, RtError};

/// Static facts the scheduler needs about the job.
#[derive(Clone, Debug)]
pub struct SchedConfig {
    pub ranks: u32,
    /// Node of each world rank.
    pub node_of_rank: Vec<u32>,
    /// Bytes the DMA Helpers of one node may receive per slice; larger messages are chunked
    /// over several slices.
    pub chunk_budget: u64,
    /// Eager protocol (scheduler version 2): a standard-mode send (`MPI_Send`, `MPI_Isend`,
    /// `MPI_Rsend`) of at most this many bytes that no receive matches in the slice it is
    /// exchanged in completes in that slice, its bytes copied into node memory; 0 turns the
    /// protocol off (version 1). `MPI_Ssend` always waits for its match.
    pub eager_max: u64,
    /// Bytes of eager messages node memory may hold at once for the whole job; a send that
    /// would exceed it waits for its match like a large one.
    pub eager_budget: u64,
}

impl SchedConfig {
    /// All ranks on one node with the default budget and the eager protocol off.
    pub fn single_node(ranks: u32) -> Self {
        SchedConfig {
            ranks,
            node_of_rank: vec![0; ranks as usize],
            chunk_budget: DEFAULT_CHUNK_BUDGET,
            eager_max: 0,
            eager_budget: DEFAULT_EAGER_BUDGET,
        }
    }

    /// The eager threshold of a scheduler version: off in version 1, [`DEFAULT_EAGER_MAX`]
    /// from version 2 (the threshold is part of the rules, so a recording's version fixes it).
    pub fn eager_max_for_version(version: u32) -> u64 {
        if version >= 2 {
            DEFAULT_EAGER_MAX
        } else {
            0
        }
    }

    /// The largest send ranks complete when posted under a scheduler version: none before
    /// version 3, `descriptor::INLINE_MAX` (in the descriptor) in versions 3 and 4,
    /// `descriptor::RANK_COPY_MAX` (above `INLINE_MAX` in the rank's send arena) from 5.
    /// The scheduler itself honours whatever the descriptors say; this is what the
    /// launcher tells the ranks (the segment header).
    pub fn inline_max_for_version(version: u32) -> u64 {
        match version {
            0..=2 => 0,
            3 | 4 => crate::descriptor::INLINE_MAX,
            _ => crate::descriptor::RANK_COPY_MAX,
        }
    }

    /// Whether ranks complete `MPI_PROC_NULL` sends and receives themselves under a
    /// scheduler version (`descriptor::FLAG_LOCAL`): from version 4.
    pub fn local_null_for_version(version: u32) -> bool {
        version >= 4
    }

    pub fn nodes(&self) -> u32 {
        self.node_of_rank.iter().copied().max().map_or(1, |m| m + 1)
    }
}

/// Default per-node, per-slice receive budget: 16 MiB. Each slice costs a few exchanges
/// besides the copying, and the ranks' DMA Helpers copy a node's chunks in parallel, so a
/// window of eight 1 MiB messages each way (16 MiB) now moves in one slice instead of four:
/// bidirectional 1 MiB bandwidth 0.61 -> 0.88 of MPICH's (`docs/benchmarks-detail.md`,
/// "1 MiB bandwidth"). It was 4 MiB. A recording keeps its job's budget, so older ones
/// replay with theirs.
pub const DEFAULT_CHUNK_BUDGET: u64 = 16 << 20;

/// The eager threshold of scheduler version 2: 16 KiB, the size below which MPICH's shared
/// memory channel also sends eagerly; above it the copy into node memory costs more than
/// the wait for the match saves.
pub const DEFAULT_EAGER_MAX: u64 = 16 << 10;

/// Node memory for eager messages, for the whole job: 64 MiB (4096 messages at the
/// threshold). Past it, sends wait for their match: a sender cannot flood memory with
/// messages nobody receives.
pub const DEFAULT_EAGER_BUDGET: u64 = 64 << 20;

/// What a pending operation of a blocked rank waits for, for deadlock reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingOp {
    pub desc: DescRef,
    pub kind: DescKind,
    pub comm: u32,
    /// Communicator-relative peer/root as posted.
    pub peer: i32,
    pub tag: i32,
    pub bytes: u64,
    /// World ranks this operation waits for (for `ANY_SOURCE`: every other member).
    pub waits_for: Vec<u32>,
}

pub struct Scheduler {
    cfg: SchedConfig,
    comms: CommTable,
    p2p: p2p::P2p,
    coll: collective::Collectives,
    /// Ranks that posted `MPI_Finalize`.
    finalized: Vec<bool>,
    /// Descriptors still referenced by pending operations, by id.
    live: BTreeMap<DescRef, Descriptor>,
    /// Next expected sequence number per rank: the canonical-order check.
    next_seq: Vec<u64>,
    /// The vectors of a spent slice's decisions ([`Scheduler::recycle`]), for the next
    /// slice to fill: no allocation a slice for them once their capacity suffices.
    spare: Option<SliceDecisions>,
    /// Scratch for putting a slice's catalog in order ([`Out::finish`]).
    order: CatalogOrder,
}

/// The catalog is sorted through keys of 16 bytes, not by moving its 128-byte
/// descriptors: a stable sort of the descriptors themselves (with a scratch buffer above
/// 20 of them) was about a twentieth of a ping-pong slice's node-manager work.
#[derive(Default)]
struct CatalogOrder {
    /// (id, citation position) of each citation.
    keys: Vec<(DescRef, u32)>,
    /// The vector the ordered catalog is gathered into: the last slice's citation-order
    /// vector.
    spare: Vec<Descriptor>,
}

/// A descriptor the scheduler refused before it could be scheduled (malformed input). It
/// still completes, with an error, so the rank is never left waiting.
fn reject(out: &mut Out, d: &Descriptor, error: RtError) {
    out.complete(d, error, |_| {});
}

/// The most entries a recycled decision vector may have room for ([`Scheduler::recycle`]).
pub const MAX_RECYCLED: usize = 4096;

/// Decisions under construction for one slice.
pub(crate) struct Out {
    decisions: Vec<Decision>,
    /// Every descriptor cited, in citation order (sorted and deduplicated at the end).
    catalog: Vec<Descriptor>,
    wake: Vec<u32>,
}

impl Out {
    /// Empty, in the vectors of `spare` (a spent slice's decisions) if there are some.
    fn new(spare: Option<SliceDecisions>) -> Self {
        let (mut decisions, mut catalog, mut wake) = spare
            .map(|s| (s.decisions, s.catalog, s.wake))
            .unwrap_or_default();
        decisions.clear();
        catalog.clear();
        wake.clear();
        Out {
            decisions,
            catalog,
            wake,
        }
    }
    fn push(&mut self, d: Decision) {
        self.decisions.push(d);
    }
    fn cite(&mut self, d: &Descriptor) {
        self.catalog.push(*d);
    }
    /// Complete `d`; `fill` adjusts the completion's status fields.
    fn complete(&mut self, d: &Descriptor, error: RtError, fill: impl FnOnce(&mut Completion)) {
        self.cite(d);
        let mut completion = Completion {
            request: d.request,
            error: error as u32,
            ..Completion::default()
        };
        fill(&mut completion);
        self.decisions.push(Decision::Complete(Completed {
            desc: d.id(),
            completion,
        }));
        self.wake.push(d.rank);
    }
    /// A completion that wakes nobody: the rank has it already (an inline send).
    fn complete_quietly(&mut self, d: &Descriptor, fill: impl FnOnce(&mut Completion)) {
        self.cite(d);
        let mut completion = Completion {
            request: d.request,
            ..Completion::default()
        };
        fill(&mut completion);
        self.decisions.push(Decision::Complete(Completed {
            desc: d.id(),
            completion,
        }));
    }
    fn finish(mut self, slice: u64, order: &mut CatalogOrder) -> SliceDecisions {
        self.wake.sort_unstable();
        self.wake.dedup();
        // By id, each descriptor once, its last citation (as a map by id would keep it).
        let sorted = self.catalog.windows(2).all(|w| w[0].id() < w[1].id());
        if !sorted {
            let keys = &mut order.keys;
            keys.clear();
            keys.extend(
                self.catalog
                    .iter()
                    .enumerate()
                    .map(|(i, d)| (d.id(), i as u32)),
            );
            // Within an id the last citation first; `dedup` keeps the first of each id.
            keys.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
            keys.dedup_by_key(|k| k.0);
            let mut ordered = std::mem::take(&mut order.spare);
            ordered.clear();
            ordered.extend(keys.iter().map(|&(_, i)| self.catalog[i as usize]));
            let cited = std::mem::replace(&mut self.catalog, ordered);
            if cited.capacity() <= MAX_RECYCLED {
                order.spare = cited;
            }
            if keys.capacity() > MAX_RECYCLED {
                *keys = Vec::new();
            }
        }
        SliceDecisions {
            slice,
            decisions: self.decisions,
            wake: self.wake,
            catalog: self.catalog,
        }
    }
}

/// Sets the status fields of a completion.
pub(crate) fn set_status(c: &mut Completion, s: i32, t: i32, b: u64) {
    c.source = s;
    c.tag = t;
    c.bytes = b;
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SchedError {
    #[error(
        "descriptor {got:?} of rank {rank} out of canonical order (expected sequence {expected})"
    )]
    OutOfOrder {
        rank: u32,
        expected: u64,
        got: DescRef,
    },
    #[error("descriptor from rank {0}, which is not in the job")]
    NoSuchRank(u32),
}

impl Scheduler {
    pub fn new(cfg: SchedConfig) -> Self {
        let n = cfg.ranks as usize;
        Scheduler {
            comms: CommTable::new(cfg.ranks),
            p2p: p2p::P2p::new(cfg.ranks),
            coll: collective::Collectives::default(),
            finalized: vec![false; n],
            live: BTreeMap::new(),
            next_seq: vec![0; n],
            spare: None,
            order: CatalogOrder::default(),
            cfg,
        }
    }

    pub fn config(&self) -> &SchedConfig {
        &self.cfg
    }

    /// Schedule one slice. `posted` must be in canonical order and each rank's sequence
    /// numbers must continue where the previous slice left off.
    pub fn schedule(
        &mut self,
        slice: u64,
        posted: &[Descriptor],
    ) -> Result<SliceDecisions, SchedError> {
        self.check_order(posted)?;
        let mut out = Out::new(self.spare.take());
        let mut iprobes = Vec::new();
        for d in posted {
            self.ingest(d, &mut out, &mut iprobes);
        }
        // MSM: point-to-point matching, then chunking (P2P), then collectives (BBM, RM).
        self.p2p
            .match_pending(&self.comms, &mut self.live, &mut out);
        self.p2p
            .answer_iprobes(&iprobes, &self.comms, &self.live, &mut out);
        self.p2p
            .schedule_chunks(&self.cfg, &self.comms, &mut self.live, &mut out);
        self.p2p.complete_eager(&self.cfg, &self.live, &mut out);
        self.coll
            .schedule_ready(&mut self.comms, &mut self.live, &mut out);
        Ok(out.finish(slice, &mut self.order))
    }

    /// Hand back a slice's decisions once nothing needs them: the next [`Self::schedule`]
    /// fills their vectors instead of allocating new ones. Never changes a decision. The
    /// vectors of a slice that grew past [`MAX_RECYCLED`] entries are freed instead of
    /// held for the rest of the job.
    pub fn recycle(&mut self, spent: SliceDecisions) {
        let small = spent.decisions.capacity() <= MAX_RECYCLED
            && spent.catalog.capacity() <= MAX_RECYCLED
            && spent.wake.capacity() <= MAX_RECYCLED;
        self.spare = small.then_some(spent);
    }

    fn check_order(&mut self, posted: &[Descriptor]) -> Result<(), SchedError> {
        let mut prev: Option<DescRef> = None;
        for d in posted {
            let id = d.id();
            let Some(next) = self.next_seq.get_mut(d.rank as usize) else {
                return Err(SchedError::NoSuchRank(d.rank));
            };
            if *next != d.seq || prev.is_some_and(|p| p >= id) {
                return Err(SchedError::OutOfOrder {
                    rank: d.rank,
                    expected: *next,
                    got: id,
                });
            }
            *next += 1;
            prev = Some(id);
        }
        Ok(())
    }

    fn ingest(&mut self, d: &Descriptor, out: &mut Out, iprobes: &mut Vec<Descriptor>) {
        let Some(kind) = d.kind() else {
            return reject(out, d, RtError::Arg);
        };
        match kind {
            k if k.is_send() => self.p2p.post_send(d, &self.comms, &mut self.live, out),
            DescKind::Recv | DescKind::Probe => {
                self.p2p.post_recv(d, &self.comms, &mut self.live, out)
            }
            DescKind::Iprobe => iprobes.push(*d),
            DescKind::Cancel => self.p2p.cancel(d, &mut self.live, out),
            DescKind::CommFree => {
                let ok = self.comms.free(d.comm, d.rank);
                if d.request != 0 {
                    out.complete(d, if ok { RtError::Ok } else { RtError::Comm }, |_| {});
                }
            }
            DescKind::Finalize => {
                // MPI_Finalize is collective over every process (MPI-3.1 8.7): it is
                // scheduled like a barrier on MPI_COMM_WORLD, which also keeps the end of
                // a run the same in every run.
                self.finalized[d.rank as usize] = true;
                let mut f = *d;
                f.comm = crate::descriptor::COMM_WORLD;
                self.coll.post(&f, &self.comms, &mut self.live, out);
            }
            _ => self.coll.post(d, &self.comms, &mut self.live, out),
        }
    }

    /// Operations rank `rank` has pending, with what each waits for (deadlock reports).
    pub fn pending_of(&self, rank: u32) -> Vec<PendingOp> {
        let mut ops = self.p2p.pending_of(rank, &self.comms, &self.live);
        ops.extend(self.coll.pending_of(rank, &self.comms, &self.live));
        ops.sort_by_key(|o| o.desc);
        ops
    }

    /// True when no transfer is in flight (nothing would be scheduled without new input).
    pub fn is_quiescent(&self) -> bool {
        self.p2p.in_flight() == 0
    }

    pub fn finalized(&self, rank: u32) -> bool {
        self.finalized.get(rank as usize).copied().unwrap_or(false)
    }

    pub fn comms(&self) -> &CommTable {
        &self.comms
    }

    /// Number of descriptors still referenced by pending operations.
    pub fn live_descriptors(&self) -> usize {
        self.live.len()
    }
}

#[cfg(test)]
mod golden_tests;
#[cfg(test)]
mod recycle_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod visit_tests;
