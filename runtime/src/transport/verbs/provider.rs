//! The narrow interface between the verbs transport and an RDMA provider.
//!
//! The verbs transport (`transport/verbs/`) speaks to the network only through these
//! traits. Two providers implement them:
//! - **libibverbs**, loaded at run time (`dlopen`), so the `strobe` binary runs on machines
//!   without rdma-core and says plainly why verbs is unavailable;
//! - an **in-process emulation** of reliable-connected (RC) queue pairs with the same
//!   ordering and completion semantics, so the protocol logic (connection setup, rkey use,
//!   immediate decoding, completion handling, atomics, error completions) runs in CI where
//!   no RDMA device exists.
//!
//! The vocabulary is libibverbs' own (protection domain implied by the device, memory
//! regions with lkey/rkey, completion queues with a completion channel, RC queue pairs that
//! go INIT → RTR → RTS when connected), reduced to what the BCS primitives use:
//! RDMA WRITE (with and without immediate), receive work requests that a write with
//! immediate consumes, 64-bit remote atomics (compare-and-swap, fetch-and-add), and
//! completion polling.
//!
//! Semantics every provider must keep (the transport's correctness rests on them):
//! - A queue pair executes its send work requests **in post order**; on the responder, the
//!   bytes of an RDMA WRITE WITH IMMEDIATE (and of every earlier write on the same QP) are
//!   visible in the target memory region **before** its receive completion is polled.
//! - A write with immediate consumes one posted receive work request at the responder; with
//!   none posted the requester gets [`WcStatus::RnrRetryExceeded`] (the transport keeps
//!   receives posted, so this is a protocol error, not flow control).
//! - Remote atomics are atomic with respect to other atomics **through the same device
//!   ports** only (IBV_ATOMIC_HCA); a CPU store to the same word races with them. The
//!   transport therefore never mixes CPU writes and NIC atomics on one word.
//! - An access outside a registered region or with a wrong rkey completes with
//!   [`WcStatus::RemoteAccessError`] on the requester, and the QP goes to the error state:
//!   every later work request on it completes with [`WcStatus::WrFlushError`].
//! - A peer that is gone completes outstanding requests with [`WcStatus::RetryExceeded`].

use std::sync::Arc;
use std::time::Duration;

/// What can go wrong talking to a provider (not a completion: those carry a [`WcStatus`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerbsError {
    /// Verbs cannot be used on this machine at all: no rdma-core, no device, no active
    /// port. The text is the one-line explanation printed to the user.
    #[error("verbs unavailable: {0}")]
    Unavailable(String),
    /// A provider call failed (the verb, and errno or the emulation's reason).
    #[error("{verb} failed: {reason}")]
    Call { verb: &'static str, reason: String },
    /// A queue or region limit was hit (queue depth, registered memory).
    #[error("{0}")]
    Limit(String),
}

/// The link layer of a port: addressing differs (LID for InfiniBand, GID for RoCE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkLayer {
    InfiniBand,
    Ethernet,
}

/// One port of a device, as `ibv_query_port` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortInfo {
    /// Port number (1-based, as in libibverbs).
    pub port: u8,
    /// `IBV_PORT_ACTIVE`.
    pub active: bool,
    pub link_layer: LinkLayer,
    /// The port's LID (InfiniBand addressing; 0 on RoCE).
    pub lid: u16,
    /// GID index 0 of the port (RoCE addressing; also valid on InfiniBand).
    pub gid: [u8; 16],
    /// Active MTU in bytes (256..4096).
    pub mtu: u32,
}

/// A device and its ports, as listed by the provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The device name (`mlx5_0`, `rxe0`, `emu0`).
    pub name: String,
    pub ports: Vec<PortInfo>,
}

impl DeviceInfo {
    /// The first active port, if any.
    pub fn active_port(&self) -> Option<&PortInfo> {
        self.ports.iter().find(|p| p.active)
    }
}

/// Where a queue pair is reachable: what wire-up exchanges so that the remote end can be
/// connected (`ibv_modify_qp` to RTR needs the remote QP number, PSN, and LID or GID).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QpEndpoint {
    pub qpn: u32,
    /// Initial packet sequence number (24 bits).
    pub psn: u32,
    pub lid: u16,
    pub gid: [u8; 16],
}

/// A remote memory location a work request targets: the responder's region address
/// (as its [`MemoryRegion::addr`] reports) plus offset, and its rkey.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteAddr {
    pub addr: u64,
    pub rkey: u32,
}

/// A local scatter/gather element: `len` bytes at `offset` of a registered region.
#[derive(Clone)]
pub struct Sge {
    pub mr: Arc<dyn MemoryRegion>,
    pub offset: usize,
    pub len: usize,
}

impl std::fmt::Debug for Sge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sge")
            .field("lkey", &self.mr.lkey())
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish()
    }
}

/// A send-queue work request (the subset of `ibv_send_wr` the transport posts). `wr_id`
/// comes back in the completion; `signaled` asks for a completion on success (errors
/// always complete, as with `IBV_SEND_SIGNALED` unset).
#[derive(Clone, Debug)]
pub enum WorkRequest {
    /// `IBV_WR_RDMA_WRITE`.
    Write {
        wr_id: u64,
        local: Sge,
        remote: RemoteAddr,
        signaled: bool,
    },
    /// `IBV_WR_RDMA_WRITE_WITH_IMM`: the write, then a receive completion carrying `imm`
    /// at the responder.
    WriteWithImm {
        wr_id: u64,
        local: Sge,
        remote: RemoteAddr,
        imm: u32,
        signaled: bool,
    },
    /// `IBV_WR_ATOMIC_CMP_AND_SWP` on the 8-byte-aligned word at `remote`; the word's old
    /// value lands in `result` (8 bytes of a local region).
    CompareSwap {
        wr_id: u64,
        result: Sge,
        remote: RemoteAddr,
        compare: u64,
        swap: u64,
    },
    /// `IBV_WR_ATOMIC_FETCH_AND_ADD`; the old value lands in `result`.
    FetchAdd {
        wr_id: u64,
        result: Sge,
        remote: RemoteAddr,
        add: u64,
    },
}

impl WorkRequest {
    pub fn wr_id(&self) -> u64 {
        match self {
            WorkRequest::Write { wr_id, .. }
            | WorkRequest::WriteWithImm { wr_id, .. }
            | WorkRequest::CompareSwap { wr_id, .. }
            | WorkRequest::FetchAdd { wr_id, .. } => *wr_id,
        }
    }
}

/// `ibv_wc_status`, reduced to the cases the transport tells apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WcStatus {
    Success,
    /// `IBV_WC_REM_ACCESS_ERR`: bad rkey or out of the region's bounds.
    RemoteAccessError,
    /// `IBV_WC_RETRY_EXC_ERR`: the peer did not answer (gone, link down).
    RetryExceeded,
    /// `IBV_WC_RNR_RETRY_EXC_ERR`: no receive posted at the responder.
    RnrRetryExceeded,
    /// `IBV_WC_WR_FLUSH_ERR`: the QP is in the error state; the request never ran.
    WrFlushError,
    /// `IBV_WC_LOC_PROT_ERR` / `IBV_WC_LOC_LEN_ERR`: a bad local SGE.
    LocalError,
    /// Anything else, with the provider's status number.
    Other(u32),
}

/// What a completion completes (`ibv_wc_opcode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WcOpcode {
    Write,
    CompareSwap,
    FetchAdd,
    /// A receive consumed by a write with immediate (`IBV_WC_RECV_RDMA_WITH_IMM`).
    RecvWithImm,
}

/// One work completion (`ibv_wc`). On an error status only `wr_id`, `status` and `qp_num`
/// are meaningful, as in libibverbs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    pub wr_id: u64,
    pub status: WcStatus,
    pub opcode: WcOpcode,
    /// The local queue pair's number.
    pub qp_num: u32,
    /// Bytes written, for [`WcOpcode::RecvWithImm`].
    pub byte_len: u32,
    /// The immediate, for [`WcOpcode::RecvWithImm`].
    pub imm: Option<u32>,
}

/// An RDMA provider: libibverbs or the emulation. One per process.
pub trait Provider: Send + Sync {
    /// "libibverbs" or "emulated".
    fn name(&self) -> &'static str;
    /// The devices and their ports (`ibv_get_device_list` + `ibv_query_port`).
    fn devices(&self) -> Result<Vec<DeviceInfo>, VerbsError>;
    /// Opens a device (context + protection domain) for use through `port`.
    fn open(&self, device: &str, port: u8) -> Result<Arc<dyn Device>, VerbsError>;
}

/// An open device with its protection domain, bound to one port.
pub trait Device: Send + Sync {
    fn info(&self) -> DeviceInfo;
    /// The port this device was opened on.
    fn port(&self) -> PortInfo;
    /// Allocates `len` bytes of memory (zeroed, page-aligned) and registers it for local
    /// access, remote write and remote atomics (`ibv_reg_mr`).
    fn alloc_region(&self, len: usize) -> Result<Arc<dyn MemoryRegion>, VerbsError>;
    /// A completion queue of `depth` entries with a completion channel (for blocking).
    fn create_cq(&self, depth: u32) -> Result<Arc<dyn CompletionQueue>, VerbsError>;
    /// A reliable-connected queue pair in the INIT state, its send completions going to
    /// `send_cq` and its receive completions to `recv_cq`.
    fn create_qp(
        &self,
        send_cq: &Arc<dyn CompletionQueue>,
        recv_cq: &Arc<dyn CompletionQueue>,
        depth: u32,
    ) -> Result<Arc<dyn QueuePair>, VerbsError>;
}

/// A registered memory region. The CPU reads and writes it through these methods (the
/// provider owns the mapping, so no `unsafe` leaks into the transport). Concurrent remote
/// writes into a range the CPU is reading are a protocol error of the transport, as on a
/// real NIC; the provider only guarantees that it does not crash.
pub trait MemoryRegion: Send + Sync {
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The address remote peers target (with the rkey) for offset 0.
    fn addr(&self) -> u64;
    fn lkey(&self) -> u32;
    fn rkey(&self) -> u32;
    /// Copies `buf.len()` bytes at `offset` out (panics out of bounds: a transport bug).
    fn read(&self, offset: usize, buf: &mut [u8]);
    /// Copies `data` in at `offset` (panics out of bounds).
    fn write(&self, offset: usize, data: &[u8]);
    /// An 8-byte-aligned word, loaded with acquire ordering.
    fn load_u64(&self, offset: usize) -> u64;
    /// An 8-byte-aligned word, stored with release ordering.
    fn store_u64(&self, offset: usize, value: u64);
}

/// A completion queue with its completion channel.
pub trait CompletionQueue: Send + Sync {
    /// Appends up to `max` completions to `out` (`ibv_poll_cq`); returns how many.
    fn poll(&self, out: &mut Vec<Completion>, max: usize) -> Result<usize, VerbsError>;
    /// Blocks until a completion may be available or `timeout` passes
    /// (`ibv_req_notify_cq` + `ibv_get_cq_event` on the completion channel); returns
    /// whether it was notified. Callers poll again after it returns either way (a
    /// completion that arrived before the notification was armed is not lost).
    fn wait(&self, timeout: Duration) -> Result<bool, VerbsError>;
}

/// A reliable-connected queue pair.
pub trait QueuePair: Send + Sync {
    /// This QP's number.
    fn qp_num(&self) -> u32;
    /// What the remote end needs to connect to this QP.
    fn endpoint(&self) -> QpEndpoint;
    /// INIT → RTR → RTS towards `remote` (access flags: remote write and atomics).
    fn connect(&self, remote: &QpEndpoint) -> Result<(), VerbsError>;
    /// Posts one send work request (`ibv_post_send`).
    fn post_send(&self, wr: WorkRequest) -> Result<(), VerbsError>;
    /// Posts one receive work request with no scatter list (`ibv_post_recv`): the kind a
    /// write with immediate consumes.
    fn post_recv(&self, wr_id: u64) -> Result<(), VerbsError>;
}
