//! The BCS core primitives as a transport trait.
//!
//! Everything above this trait (the slice engine, the scheduler, MPI semantics) is
//! transport-independent. A transport connects the *nodes* of a job (node managers),
//! never ranks: ranks talk to their own node manager through the job segment, as an
//! application process talks to its NIC in the papers.
//!
//! The three primitives (002_... section 2):
//! - **Xfer-And-Signal**: put a block of local data at the same *global address* (an offset
//!   into every node's global memory) on a set of nodes, atomically (all or none), then
//!   optionally signal a local and/or a remote event. Non-blocking in the papers; the
//!   shared-memory transport completes it before returning, which is a legal implementation.
//! - **Test-Event**: poll a local event, or block until it is signalled. Events count: every
//!   signal is consumed by exactly one successful test.
//! - **Compare-And-Write**: compare a global 64-bit variable on a set of nodes with a local
//!   value (>=, <, =, !=); if the comparison holds on *all* of them, optionally write a value
//!   to a (possibly different) global variable on all of them. Sequentially consistent.

pub mod auth;
pub mod select;
pub mod shm;
pub mod tcp;
pub mod verbs;

use std::time::Duration;

/// Index of a node (a node manager) in the job, `0..nodes`.
pub type NodeId = u32;

/// A set of destination nodes: a range of node ids (every node, one node: the sets of the
/// slice path, several a slice, so they must not allocate) or a sorted, deduplicated list
/// for any other set.
#[derive(Clone, Debug)]
pub struct NodeSet(NodeSetRepr);

#[derive(Clone, Debug)]
enum NodeSetRepr {
    /// `start..end`.
    Range(NodeId, NodeId),
    List(Vec<NodeId>),
}

impl NodeSet {
    /// Every node of a job of `nodes` nodes.
    pub fn all(nodes: u32) -> Self {
        NodeSet(NodeSetRepr::Range(0, nodes))
    }
    pub fn single(node: NodeId) -> Self {
        NodeSet(NodeSetRepr::Range(node, node.saturating_add(1)))
    }
    pub fn from_nodes(nodes: impl IntoIterator<Item = NodeId>) -> Self {
        let mut v: Vec<NodeId> = nodes.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        NodeSet(NodeSetRepr::List(v))
    }
    /// The nodes, ascending.
    pub fn iter(&self) -> impl Iterator<Item = NodeId> + '_ {
        let (range, list): (std::ops::Range<NodeId>, &[NodeId]) = match &self.0 {
            NodeSetRepr::Range(start, end) => (*start..*end, &[]),
            NodeSetRepr::List(v) => (0..0, v),
        };
        range.chain(list.iter().copied())
    }
    pub fn len(&self) -> usize {
        match &self.0 {
            NodeSetRepr::Range(start, end) => end.saturating_sub(*start) as usize,
            NodeSetRepr::List(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn contains(&self, node: NodeId) -> bool {
        match &self.0 {
            NodeSetRepr::Range(start, end) => (*start..*end).contains(&node),
            NodeSetRepr::List(v) => v.binary_search(&node).is_ok(),
        }
    }
}

/// Equal when they hold the same nodes, whichever form each has.
impl PartialEq for NodeSet {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for NodeSet {}

impl std::hash::Hash for NodeSet {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.len().hash(state);
        for n in self.iter() {
            n.hash(state);
        }
    }
}

/// The comparisons Compare-And-Write offers (the papers' >=, <, =, !=).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    Ge,
    Lt,
    Eq,
    Ne,
}

impl CmpOp {
    /// `global OP local`.
    pub fn holds(self, global: u64, local: u64) -> bool {
        match self {
            CmpOp::Ge => global >= local,
            CmpOp::Lt => global < local,
            CmpOp::Eq => global == local,
            CmpOp::Ne => global != local,
        }
    }
}

/// A node-local event, signalled by Xfer-And-Signal (locally or remotely) and consumed by
/// Test-Event. Events are numbered `0..events` per node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventId(pub u32);

/// How Test-Event waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Return at once.
    Poll,
    /// Block until signalled.
    Block,
    /// Block until signalled, polling for a few microseconds before sleeping: for waits
    /// expected to be short, such as microstrobes, where a sleep/wake pair costs more than
    /// the wait itself.
    BlockSpinning,
    /// Block at most this long.
    Timeout(Duration),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TransportError {
    #[error("global address range {offset}..{end} is outside the {size}-byte global memory")]
    OutOfBounds {
        offset: usize,
        end: usize,
        size: usize,
    },
    #[error("global variable at offset {0} is not 8-byte aligned")]
    Misaligned(usize),
    #[error("node {node} does not exist (the job has {nodes} nodes)")]
    NoSuchNode { node: NodeId, nodes: u32 },
    #[error("event {0} does not exist")]
    NoSuchEvent(u32),
    #[error("the destination node set is empty")]
    EmptyNodeSet,
    #[error("transport failure: {0}")]
    Io(String),
}

/// One node's endpoint onto the job's fabric. Implementations must be usable from several
/// threads of the node at once.
pub trait Transport: Send + Sync {
    /// This endpoint's node.
    fn node(&self) -> NodeId;
    /// Number of nodes in the job.
    fn nodes(&self) -> u32;
    /// Size in bytes of each node's global memory.
    fn global_size(&self) -> usize;
    /// Number of events per node.
    fn events(&self) -> u32;

    /// Xfer-And-Signal: copy `data` to `offset` in the global memory of every node of
    /// `dest` (all or none: every check happens before the first byte moves), then signal
    /// `remote` on each destination node and `local` on this node.
    fn xfer_and_signal(
        &self,
        data: &[u8],
        dest: &NodeSet,
        offset: usize,
        local: Option<EventId>,
        remote: Option<EventId>,
    ) -> Result<(), TransportError>;

    /// Xfer-And-Signal that may return before the data is applied at the destinations,
    /// as the papers' primitive does (it is non-blocking there). What it guarantees: the
    /// checks of [`Transport::xfer_and_signal`] (a refusal moves nothing), and every
    /// destination applies it, then signals `remote`, after everything this node
    /// transferred to it before and before anything it transfers to it later. A failure
    /// found later (a link lost) surfaces on a later call. The default waits, which is a
    /// legal implementation (shm completes every transfer before returning anyway).
    fn xfer_and_signal_nowait(
        &self,
        data: &[u8],
        dest: &NodeSet,
        offset: usize,
        remote: Option<EventId>,
    ) -> Result<(), TransportError> {
        self.xfer_and_signal(data, dest, offset, None, remote)
    }

    /// Test-Event: consume one signal of `event` on this node. Returns whether a signal
    /// was consumed (always true for `Wait::Block` and `Wait::BlockSpinning`).
    fn test_event(&self, event: EventId, wait: Wait) -> Result<bool, TransportError>;

    /// Compare-And-Write: if `global[var] OP value` holds on every node of `dest`, write
    /// `write.1` to `global[write.0]` on every node of `dest` and return true. The compare
    /// and the write are one atomic step with respect to every other Compare-And-Write.
    fn compare_and_write(
        &self,
        var: usize,
        op: CmpOp,
        value: u64,
        dest: &NodeSet,
        write: Option<(usize, u64)>,
    ) -> Result<bool, TransportError>;

    /// Read this node's own global memory (local access, no network).
    fn read_local(&self, offset: usize, buf: &mut [u8]) -> Result<(), TransportError>;

    /// Lend `len` bytes of this node's own global memory at `offset` to `f`, where
    /// `read_local` would copy them out: the data plane writes a staged chunk from there
    /// straight into its receiving rank. As with `read_local`, writers of the range must
    /// be ordered before the call by the event protocol. The default copies.
    fn with_local(
        &self,
        offset: usize,
        len: usize,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<(), TransportError> {
        let mut buf = vec![0u8; len];
        self.read_local(offset, &mut buf)?;
        f(&buf);
        Ok(())
    }

    /// Atomically load a 64-bit global variable of this node.
    fn load_var(&self, var: usize) -> Result<u64, TransportError>;

    /// Atomically store a 64-bit global variable of this node (local access).
    fn store_var(&self, var: usize, value: u64) -> Result<(), TransportError>;
}

#[cfg(test)]
mod tests {
    use super::NodeSet;

    #[test]
    fn node_sets_are_equal_by_their_nodes_whatever_their_form() {
        let all = NodeSet::all(3);
        let listed = NodeSet::from_nodes([2, 0, 1, 1]);
        assert_eq!(all, listed);
        assert_eq!(all.iter().collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!((all.len(), listed.len()), (3, 3));
        assert!(all.contains(2) && !all.contains(3));
        let one = NodeSet::single(4);
        assert_eq!(one, NodeSet::from_nodes([4]));
        assert!(one.contains(4) && !one.contains(3) && !one.contains(5));
        assert_ne!(one, NodeSet::all(4));
        assert!(NodeSet::all(0).is_empty() && NodeSet::from_nodes([]).is_empty());
        assert_eq!(NodeSet::all(0), NodeSet::from_nodes([]));
    }
}
