//! The slice engine: one Node Manager per node, each running the slice loop
//! (Strobe Receiver, Buffer Sender/Receiver, scheduler replica, DMA/Collective/Reduce
//! Helpers), and on node 0 the Strobe Sender, which opens every slice and every microphase.
//!
//! Nodes talk to each other only through the [`Transport`](crate::transport::Transport)
//! trait. Ranks talk to their node manager through the [`JobSegment`].

pub mod capture;
mod deadlock;
mod direct;
pub mod eager;
pub mod helpers;
mod node;
pub mod remote;
pub mod sink;
mod strobe;
#[cfg(test)]
mod tests;

pub use deadlock::{
    set_livelock_slices, BlockedRank, DeadlockReport, LivelockWatch, DEFAULT_LIVELOCK_SLICES,
    EXIT_LIVELOCK,
};
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
use crate::transport::TransportError;
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
}

/// The eager threshold of new jobs (scheduler version 2): 16 KiB.
pub const DEFAULT_EAGER_MAX: u64 = strobe_core::sched::DEFAULT_EAGER_MAX;

/// Default threshold for direct copies (see `docs/benchmarks-detail.md` for the measurement).
pub const DEFAULT_DIRECT_COPY_MIN: u64 = 2 << 20;

impl EngineConfig {
    /// Node of each rank: contiguous blocks, as a batch system places ranks.
    pub fn node_of_rank(&self) -> Vec<u32> {
        (0..self.ranks)
            .map(|r| (r as u64 * self.nodes as u64 / self.ranks as u64) as u32)
            .collect()
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
    /// Node memory holding the bytes of eager sends until their receive takes them.
    pub eager: eager::EagerMemory,
    /// Some node has completions waiting for queue space (set at delivery, taken by the
    /// Strobe Sender at the end of the slice): the slice is not quiet.
    pub backlog: AtomicBool,
}

impl JobShared {
    pub fn new(seg: JobSegment) -> Self {
        JobShared {
            seg,
            stop: AtomicBool::new(false),
            slice: AtomicU64::new(0),
            started: Instant::now(),
            outcome: Mutex::new(None),
            parked: AtomicU64::new(0),
            diverge_replica: None,
            eager: eager::EagerMemory::default(),
            backlog: AtomicBool::new(false),
        }
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

/// A running engine: one thread per node.
pub struct Engine {
    threads: Vec<JoinHandle<Result<(), EngineError>>>,
    shared: Arc<JobShared>,
}

impl Engine {
    /// Start the node managers of a job over a fresh shared-memory fabric.
    pub fn start(
        cfg: EngineConfig,
        shared: Arc<JobShared>,
        sink: Arc<dyn SliceSink>,
        source: Option<Arc<dyn SliceSource>>,
    ) -> Result<Engine, EngineError> {
        let fabric = ShmFabric::create(cfg.nodes, node::global_size(&cfg), node::EVENTS)?;
        if let Some(src) = &source {
            // What the ranks may post before slice 1 starts.
            for r in 0..cfg.ranks {
                let limit = src.post_limit(0, r).map_or(0, |l| l + 1);
                shared
                    .seg
                    .slot(r)
                    .post_limit
                    .store(limit, Ordering::Release);
            }
        }
        let mut threads = Vec::new();
        for n in 0..cfg.nodes {
            let ep = fabric.endpoint(n);
            let nm = node::NodeManager::new(
                cfg.clone(),
                n,
                Box::new(ep),
                shared.clone(),
                sink.clone(),
                source.clone(),
            );
            let guard = shared.clone();
            let t = std::thread::Builder::new()
                .name(format!("strobe-node{n}"))
                .spawn(move || run_guarded(n, nm, &guard))
                .map_err(|e| EngineError::Other(format!("spawning node thread: {e}")))?;
            threads.push(t);
        }
        Ok(Engine { threads, shared })
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
        if let Some(f) = failure {
            return EngineOutcome::Failed(f);
        }
        let slices = self.shared.slice.load(Ordering::Acquire);
        self.shared
            .outcome
            .lock()
            .expect("outcome lock")
            .take()
            .unwrap_or(EngineOutcome::Stopped { slices })
    }
}
