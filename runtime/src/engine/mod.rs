//! The slice engine: one Node Manager per node, each running the slice loop
//! (Strobe Receiver, Buffer Sender/Receiver, scheduler replica, DMA/Collective/Reduce
//! Helpers), and on node 0 the Strobe Sender, which opens every slice and every microphase.
//!
//! Nodes talk to each other only through the [`Transport`](crate::transport::Transport)
//! trait. Ranks talk to their node manager through the [`JobSegment`].

pub mod capture;
pub mod coll_inputs;
mod deadlock;
mod direct;
pub mod eager;
pub mod helpers;
mod mirror;
mod node;
pub mod remote;
pub mod sink;
mod spares;
mod strobe;
#[cfg(test)]
mod tests;
mod woken;

pub use deadlock::{
    set_livelock_slices, BlockedRank, DeadlockReport, LivelockWatch, DEFAULT_LIVELOCK_SLICES,
    EXIT_LIVELOCK,
};
pub use mirror::{RemoteNodes, EV_MIRROR};
pub use node::{global_size, EVENTS};
pub use sink::{
    Gate, GlobalMetrics, LocalMetrics, NullSink, Payload, SliceRecord, SliceSink, SliceSource,
    StartReason,
};
pub use strobe::Phase;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::segment::JobSegment;
use crate::transport::shm::ShmFabric;
use crate::transport::{Transport, TransportError};
use strobe_core::slice::SliceError;

/// When the Strobe Sender starts the next slice (decided by the core's slice machine).
pub use strobe_core::slice::StrobePolicy;

#[derive(Clone, Debug)]
pub struct EngineConfig {
    pub ranks: u32,
    pub nodes: u32,
    pub slice: Duration,
    pub policy: StrobePolicy,
    /// Consecutive slices with every live rank blocked and nothing scheduled after which
    /// the job is declared deadlocked.
    pub deadlock_slices: u32,
    /// Per-node receive budget per slice, in bytes.
    pub chunk_budget: u64,
    /// Chunks of at least this many bytes are copied by the receiving rank's own DMA Helper
    /// thread (one copy); smaller ones by the node manager (two copies through a bounce
    /// buffer, but no thread hand-off). `u64::MAX` turns direct copies off.
    pub direct_copy_min: u64,
    /// Eager threshold of the scheduler (`SchedConfig::eager_max`; 0: off). Part of the
    /// scheduling rules: a recording's scheduler version fixes it
    /// (`SchedConfig::eager_max_for_version`); [`DEFAULT_EAGER_MAX`] for new jobs.
    pub eager_max: u64,
    /// Largest send the ranks complete when posted (`descriptor::FLAG_INLINE`: in the
    /// descriptor, or above `INLINE_MAX` in the send arena; 0: none). Like `eager_max`, fixed by a recording's scheduler version
    /// (`SchedConfig::inline_max_for_version`); [`DEFAULT_INLINE_MAX`] for new jobs.
    pub inline_max: u64,
    /// Ranks complete `MPI_PROC_NULL` sends and receives themselves
    /// (`descriptor::FLAG_LOCAL`). Fixed by a recording's scheduler version
    /// (`SchedConfig::local_null_for_version`); true for new jobs.
    pub local_null: bool,
    /// The node of each rank (`placement[rank]`), as the launcher placed them (`--ppn`,
    /// `--map-by`); `None`: contiguous blocks ([`EngineConfig::node_of_rank`]).
    pub placement: Option<Arc<[u32]>>,
}

/// The eager threshold of new jobs (scheduler version 2): 16 KiB.
pub const DEFAULT_EAGER_MAX: u64 = strobe_core::sched::DEFAULT_EAGER_MAX;

/// The inline threshold of new jobs (scheduler version 5): `descriptor::RANK_COPY_MAX`
/// (up to `INLINE_MAX` in the descriptor, above it in the rank's send arena).
pub const DEFAULT_INLINE_MAX: u64 = crate::descriptor::RANK_COPY_MAX;

/// Default threshold for direct copies (see `docs/benchmarks-detail.md` for the measurement:
/// with a chunk split between its receiver's and its sender's DMA Helpers, 64 KiB and up
/// are faster by the ranks' helpers than through the node manager's bounce buffer).
pub const DEFAULT_DIRECT_COPY_MIN: u64 = 64 << 10;

impl EngineConfig {
    /// Node of each rank: the placement when one was given, else contiguous blocks, as a
    /// batch system places ranks.
    pub fn node_of_rank(&self) -> Vec<u32> {
        if let Some(p) = &self.placement {
            return p.to_vec();
        }
        (0..self.ranks)
            .map(|r| (r as u64 * self.nodes as u64 / self.ranks as u64) as u32)
            .collect()
    }

    /// The most ranks any node holds.
    pub fn max_ranks_per_node(&self) -> usize {
        let mut per_node = vec![0usize; self.nodes as usize];
        for n in self.node_of_rank() {
            if let Some(c) = per_node.get_mut(n as usize) {
                *c += 1;
            }
        }
        per_node.into_iter().max().unwrap_or(0)
    }

    /// Why this configuration cannot run: a placement of the wrong length, naming a node
    /// the job does not have, or leaving a node without ranks.
    pub fn check_placement(&self) -> Result<(), String> {
        let Some(p) = &self.placement else {
            return Ok(());
        };
        if p.len() != self.ranks as usize {
            return Err(format!(
                "the placement names {} ranks, the job has {}",
                p.len(),
                self.ranks
            ));
        }
        if let Some((r, n)) = p.iter().enumerate().find(|(_, &n)| n >= self.nodes) {
            return Err(format!(
                "the placement puts rank {r} on node {n}, the job has {} nodes",
                self.nodes
            ));
        }
        match (0..self.nodes).find(|n| !p.contains(n)) {
            Some(n) => Err(format!("the placement leaves node {n} without ranks")),
            None => Ok(()),
        }
    }
}

/// How the engine ended.
#[derive(Debug)]
pub enum EngineOutcome {
    /// Every rank finalized or exited.
    Finished { slices: u64 },
    /// Every live rank blocked with nothing to schedule.
    Deadlock(DeadlockReport),
    /// Stopped from outside (a rank died, Ctrl-C).
    Stopped { slices: u64 },
    /// The engine itself failed (a transport error, replicas that disagree).
    Failed(String),
    /// The slice source ended the job (replay: a divergence, or the user stopped it).
    SourceStopped(String),
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("transport: {0}")]
    Transport(#[from] TransportError),
    #[error("scheduler: {0}")]
    Sched(#[from] crate::sched::SchedError),
    /// The slice state machine failed: two scheduler replicas computed different
    /// decisions for a slice (found by the digest cross-check of the next slice's DEM
    /// exchange).
    #[error(transparent)]
    Slice(#[from] SliceError),
    #[error("{0}")]
    Other(String),
}

/// State shared between the launcher and the engine's threads.
pub struct JobShared {
    pub seg: JobSegment,
    /// Set by the launcher to stop the engine.
    pub stop: AtomicBool,
    /// The slice the engine is in (for reports: "rank 3 died in slice 1234").
    pub slice: AtomicU64,
    /// When the job started (metrics are relative to it).
    pub started: Instant,
    /// The deadlock report, if there was one.
    pub outcome: Mutex<Option<EngineOutcome>>,
    /// Logical slices (replay): the slice the Strobe Sender is waiting to start at a closed
    /// gate, 0 while it is not waiting.
    pub parked: AtomicU64,
    /// Test hook: `(node, slice)` makes that node's scheduler replica report a wrong digest
    /// for that slice, as a diverging replica would (the replica cross-check must end the
    /// job). Set before `Engine::start`; not reachable from the command line or the
    /// environment.
    #[doc(hidden)]
    pub diverge_replica: Option<(u32, u64)>,
    /// Node memory holding the bytes of eager sends until their receive takes them
    /// (shared between the nodes of one process: the launcher's isolated-nodes test mode
    /// hands every node the same one, as its helpers still move bytes between nodes).
    pub eager: Arc<eager::EagerMemory>,
    /// Some node has completions waiting for queue space (set at delivery, taken by the
    /// Strobe Sender at the end of the slice): the slice is not quiet.
    pub backlog: AtomicBool,
    /// Node 0 of a job with one segment per node: the other nodes' `computing` counts
    /// and flags, as the slot mirror last saw them (`mirror.rs`); zero otherwise.
    pub remote: RemoteNodes,
}

impl JobShared {
    pub fn new(seg: JobSegment) -> Self {
        let nodes = seg.header().nodes;
        JobShared {
            remote: RemoteNodes::new(nodes),
            seg,
            stop: AtomicBool::new(false),
            slice: AtomicU64::new(0),
            started: Instant::now(),
            outcome: Mutex::new(None),
            parked: AtomicU64::new(0),
            diverge_replica: None,
            eager: Default::default(),
            backlog: AtomicBool::new(false),
        }
    }

    /// Ranks computing in the whole job, as node 0 knows it: its segment's count (every
    /// rank's when the nodes share one segment) plus the other nodes' mirrored counts.
    pub fn computing_total(&self) -> u32 {
        self.seg.header().computing.load(Ordering::Acquire) + self.remote.computing()
    }

    /// Ask the engine to stop at the next slice boundary and wake its Strobe Sender.
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Release);
        crate::segment::ring_doorbell(&self.seg);
    }
}

/// Run a node manager; a panic (a bug in strobe) ends the job at once with an engine failure
/// naming it, instead of leaving the ranks blocked until a timeout.
fn run_guarded(n: u32, nm: node::NodeManager, shared: &JobShared) -> Result<(), EngineError> {
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| nm.run()));
    res.unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let msg = format!("node manager {n} panicked (a bug in strobe): {what}");
        *shared.outcome.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(EngineOutcome::Failed(msg.clone()));
        shared.request_stop();
        Err(EngineError::Other(msg))
    })
}

/// One node of a job as [`Engine::start_nodes`] runs it: its endpoint onto the job's
/// fabric and its `JobShared` (job segment). Parts whose `shared` is the same `Arc` share
/// one segment (every node in one process: [`Engine::start`]); a node with a segment of
/// its own runs a slot mirror (`mirror.rs`).
pub struct NodePart {
    pub node: u32,
    pub transport: Arc<dyn Transport>,
    pub shared: Arc<JobShared>,
}

/// A running engine: one thread per node (and one slot-mirror thread per node that has a
/// segment of its own).
pub struct Engine {
    threads: Vec<JoinHandle<Result<(), EngineError>>>,
    mirrors: Vec<JoinHandle<()>>,
    mirror_stop: Arc<AtomicBool>,
    /// Each part's `JobShared`, lowest node first.
    shared: Vec<Arc<JobShared>>,
}

impl Engine {
    /// Start the node managers of a job over a fresh shared-memory fabric, every node
    /// sharing `shared`'s segment.
    pub fn start(
        cfg: EngineConfig,
        shared: Arc<JobShared>,
        sink: Arc<dyn SliceSink>,
        source: Option<Arc<dyn SliceSource>>,
    ) -> Result<Engine, EngineError> {
        let fabric = ShmFabric::create(cfg.nodes, global_size(&cfg), EVENTS)?;
        let parts = (0..cfg.nodes)
            .map(|n| NodePart {
                node: n,
                transport: Arc::new(fabric.endpoint(n)),
                shared: shared.clone(),
            })
            .collect();
        Engine::start_nodes(cfg, parts, sink, source)
    }

    /// Start the node managers of `parts` (all the job's nodes in one process, or the one
    /// node of a node daemon). The nodes need a slot mirror unless every node of the job is
    /// here and they all share one `JobShared`.
    pub fn start_nodes(
        cfg: EngineConfig,
        mut parts: Vec<NodePart>,
        sink: Arc<dyn SliceSink>,
        source: Option<Arc<dyn SliceSource>>,
    ) -> Result<Engine, EngineError> {
        cfg.check_placement().map_err(EngineError::Other)?;
        parts.sort_by_key(|p| p.node);
        if parts.is_empty() || parts.last().is_some_and(|p| p.node >= cfg.nodes) {
            return Err(EngineError::Other(format!(
                "no node to start, or a node outside 0..{}",
                cfg.nodes
            )));
        }
        let shared_segment = parts.len() == cfg.nodes as usize
            && parts
                .iter()
                .all(|p| Arc::ptr_eq(&p.shared, &parts[0].shared));
        let node_of_rank = cfg.node_of_rank();
        if let Some(src) = &source {
            // What the ranks may post before slice 1 starts.
            for p in &parts {
                for r in (0..cfg.ranks).filter(|&r| node_of_rank[r as usize] == p.node) {
                    let limit = src.post_limit(0, r).map_or(0, |l| l + 1);
                    let slot = p.shared.seg.slot(r);
                    slot.post_limit.store(limit, Ordering::Release);
                }
            }
        }
        let mut engine = Engine {
            threads: Vec::new(),
            mirrors: Vec::new(),
            mirror_stop: Arc::new(AtomicBool::new(false)),
            shared: parts.iter().map(|p| p.shared.clone()).collect(),
        };
        for p in parts {
            if let Err(e) = engine.spawn_node(&cfg, p, shared_segment, &sink, &source) {
                // Leave nothing running behind the error.
                engine.mirror_stop.store(true, Ordering::Release);
                engine.shared.iter().for_each(|s| s.request_stop());
                return Err(e);
            }
        }
        Ok(engine)
    }

    /// Start one node's manager thread, and its slot-mirror thread unless every node
    /// shares one segment.
    fn spawn_node(
        &mut self,
        cfg: &EngineConfig,
        p: NodePart,
        shared_segment: bool,
        sink: &Arc<dyn SliceSink>,
        source: &Option<Arc<dyn SliceSource>>,
    ) -> Result<(), EngineError> {
        let spawn_err = |e: std::io::Error| EngineError::Other(format!("spawning a thread: {e}"));
        let n = p.node;
        let mirror = if shared_segment || cfg.nodes == 1 {
            mirror::NodeMirror::default()
        } else {
            let base = node::mirror_base(cfg);
            let (t, shared) = (p.transport.clone(), p.shared.clone());
            mirror::NodeMirror::new(cfg, base, n, t, shared, source.is_some())
        };
        let stop = self.mirror_stop.clone();
        let thread = mirror
            .spawn(n, p.transport.clone(), p.shared.clone(), stop)
            .map_err(spawn_err)?;
        self.mirrors.extend(thread);
        let nm = node::NodeManager::new(
            cfg.clone(),
            n,
            p.transport,
            p.shared.clone(),
            sink.clone(),
            source.clone(),
            mirror,
        );
        let guard = p.shared;
        let t = std::thread::Builder::new()
            .name(format!("strobe-node{n}"))
            .spawn(move || run_guarded(n, nm, &guard))
            .map_err(spawn_err)?;
        self.threads.push(t);
        Ok(())
    }

    /// Wait for every node manager and return how the job's engine ended.
    pub fn join(self) -> EngineOutcome {
        let mut failure = None;
        for t in self.threads {
            match t.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failure = failure.or(Some(e.to_string())),
                Err(_) => failure = failure.or(Some("a node manager panicked".into())),
            }
        }
        self.mirror_stop.store(true, Ordering::Release);
        for s in &self.shared {
            crate::segment::ring_doorbell(&s.seg);
        }
        for m in self.mirrors {
            let _ = m.join();
        }
        if let Some(f) = failure {
            return EngineOutcome::Failed(f);
        }
        let slices = self.shared[0].slice.load(Ordering::Acquire);
        // The lowest node's outcome (node 0 decides the job's), else any node's.
        self.shared
            .iter()
            .find_map(|s| s.outcome.lock().expect("outcome lock").take())
            .unwrap_or(EngineOutcome::Stopped { slices })
    }
}
