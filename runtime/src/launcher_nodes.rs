//! The launcher's job segments: one shared by every node (the default), or one per node
//! with `STROBE_ISOLATE_NODES=1` ("isolated nodes", a test mode: every node sees only its
//! own ranks' slots and learns the others' through the transport, as node daemons on
//! separate hosts do; docs/multi-host.md). A child module of `launcher`.

use std::sync::Arc;

use crate::engine::{
    global_size, Engine, EngineConfig, EngineError, JobShared, NodePart, SliceSink, SliceSource,
    EVENTS,
};
use crate::segment::JobSegment;
use crate::transport::select::emulated_verbs;
use crate::transport::shm::ShmFabric;
use crate::transport::verbs::emu::EmuFabric;
use crate::transport::verbs::{VerbsConfig, VerbsEndpoint};
use crate::transport::Transport;

/// Hidden switch of the isolated-nodes test mode (read by `strobe run|record|replay`
/// through [`super::launch`]).
pub const ENV_ISOLATE_NODES: &str = "STROBE_ISOLATE_NODES";

/// Whether this process runs jobs with one segment per node.
pub fn isolate_nodes() -> bool {
    std::env::var_os(ENV_ISOLATE_NODES).is_some_and(|v| v == "1")
}

/// The isolated nodes' endpoints, in node order: shared memory, or with
/// `STROBE_VERBS_PROVIDER=emulated` the verbs transport over an in-process emulated RC
/// fabric (a test hook: the verbs protocol under real MPI programs, without a device).
fn node_transports(e: &EngineConfig) -> Result<Vec<Arc<dyn Transport>>, EngineError> {
    if emulated_verbs() {
        let fabric = EmuFabric::new(e.nodes);
        let cfg = VerbsConfig::new(e.nodes, global_size(e), EVENTS);
        return Ok(VerbsEndpoint::emulated_job(&fabric, cfg)?
            .into_iter()
            .map(|ep| Arc::new(ep) as Arc<dyn Transport>)
            .collect());
    }
    let fabric = ShmFabric::create(e.nodes, global_size(e), EVENTS)?;
    Ok((0..e.nodes)
        .map(|n| Arc::new(fabric.endpoint(n)) as Arc<dyn Transport>)
        .collect())
}

/// The job's `JobShared`s: one, or one per node (node `n`'s at index `n`).
pub(super) struct JobSegments {
    shared: Vec<Arc<JobShared>>,
    node_of_rank: Vec<u32>,
}

impl JobSegments {
    /// One segment for every node, or with `isolated` (and several nodes) one per node.
    pub(super) fn create(e: &EngineConfig, isolated: bool) -> std::io::Result<Self> {
        let node_of_rank = e.node_of_rank();
        let segs = if isolated && e.nodes > 1 {
            (0..e.nodes)
                .map(|n| {
                    JobSegment::create_for_node(
                        e.ranks,
                        e.nodes,
                        crate::rank::DESC_CAPACITY,
                        crate::rank::COMP_CAPACITY,
                        n,
                        &node_of_rank,
                    )
                })
                .collect::<std::io::Result<Vec<_>>>()?
        } else {
            vec![crate::rank::create_segment(e.ranks, e.nodes)?]
        };
        for s in &segs {
            crate::segment::set_send_limits(s, e.inline_max, e.eager_max, e.local_null);
        }
        // Each node has its own node memory for eager bytes, as a daemon does: bytes for a
        // receiver on another node cross through the transport when the receive matches
        // (`engine/remote.rs`).
        let shared = segs
            .into_iter()
            .map(|s| Arc::new(JobShared::new(s)))
            .collect();
        Ok(JobSegments {
            shared,
            node_of_rank,
        })
    }

    /// Node 0's: the job's slice, outcome and replay state live there.
    pub(super) fn lead(&self) -> &Arc<JobShared> {
        &self.shared[0]
    }

    pub(super) fn all(&self) -> &[Arc<JobShared>] {
        &self.shared
    }

    /// The segment `rank` attaches to.
    pub(super) fn of(&self, rank: u32) -> &JobShared {
        match self.shared.len() {
            1 => &self.shared[0],
            _ => &self.shared[self.node_of_rank[rank as usize] as usize],
        }
    }

    /// The launcher knows a rank's pid: publish it in the rank's slot, in its own node's
    /// segment only (the data plane moves bytes between nodes through the transport;
    /// node 0 learns other nodes' ranks from the slot mirror).
    pub(super) fn publish_pid(&self, rank: u32, pid: u32) {
        self.of(rank)
            .seg
            .slot(rank)
            .pid
            .store(pid, std::sync::atomic::Ordering::Release);
    }

    /// Start the engine: today's threads over one segment, or every node over its own.
    pub(super) fn start_engine(
        &self,
        e: &EngineConfig,
        sink: Arc<dyn SliceSink>,
        source: Option<Arc<dyn SliceSource>>,
    ) -> Result<Engine, EngineError> {
        if self.shared.len() == 1 {
            return Engine::start(e.clone(), self.shared[0].clone(), sink, source);
        }
        let transports = node_transports(e)?;
        let parts = self
            .shared
            .iter()
            .zip(transports)
            .enumerate()
            .map(|(n, (s, transport))| NodePart {
                node: n as u32,
                transport,
                shared: s.clone(),
            })
            .collect();
        Engine::start_nodes(e.clone(), parts, sink, source)
    }

    /// The first node that stopped, with its outcome (node 0's first).
    pub(super) fn stopped(&self) -> Option<&JobShared> {
        self.shared
            .iter()
            .find(|s| s.stop.load(std::sync::atomic::Ordering::Acquire))
            .map(|s| s.as_ref())
    }
}
