//! Reliable-connected queue pairs of the libibverbs provider: creation in INIT, the
//! INIT → RTR → RTS connection with InfiniBand (LID) or RoCE (GID) addressing, and posting
//! work requests through the context's ops table (`ibv_post_send`/`ibv_post_recv` are
//! `static inline` in verbs.h).

use std::ffi::c_int;
use std::ptr;
use std::sync::Arc;

use super::ibverbs::{Context, IbvDeviceHandle};
use super::ibverbs_sys::*;
use super::provider::{
    CompletionQueue, LinkLayer, PortInfo, QpEndpoint, QueuePair, RemoteAddr, Sge, VerbsError,
    WorkRequest,
};

/// RC timing: local ACK timeout 4.096 µs × 2^14 ≈ 67 ms, 7 transport retries (the most the
/// field holds) before `RetryExceeded`.
pub const ACK_TIMEOUT: u8 = 14;
pub const RETRY_COUNT: u8 = 7;
/// Receiver-not-ready: 0.64 ms between tries (timer code 12), 6 tries. Not 7 ("retry
/// forever"): the transport keeps receives posted, so a missing one is a protocol error
/// that must surface as `RnrRetryExceeded` instead of a hang.
pub const MIN_RNR_TIMER: u8 = 12;
pub const RNR_RETRY: u8 = 6;
/// Hop limit of RoCE v2 packets (routable across one IP hop boundary or more).
const HOP_LIMIT: u8 = 64;

/// An RC queue pair. Holds its context and both completion queues, so they outlive it.
pub(super) struct IbvQueuePair {
    ctx: Arc<Context>,
    _cqs: [Arc<dyn CompletionQueue>; 2],
    qp: *mut IbvQp,
    port: PortInfo,
    mtu_enum: u32,
    gid_index: u8,
    rd_atomic: c_int,
    psn: u32,
}

// SAFETY: posting to and modifying a QP are thread-safe in libibverbs; the pointer is
// freed only in Drop.
unsafe impl Send for IbvQueuePair {}
// SAFETY: as above.
unsafe impl Sync for IbvQueuePair {}

impl IbvQueuePair {
    pub(super) fn new(
        dev: &IbvDeviceHandle,
        cqs: [Arc<dyn CompletionQueue>; 2],
        send_cq: *mut IbvCq,
        recv_cq: *mut IbvCq,
        depth: u32,
    ) -> Result<IbvQueuePair, VerbsError> {
        let ctx = dev.ctx.clone();
        let mut init = IbvQpInitAttr {
            qp_context: ptr::null_mut(),
            send_cq,
            recv_cq,
            srq: ptr::null_mut(),
            cap: IbvQpCap {
                max_send_wr: depth.max(1),
                max_recv_wr: depth.max(1),
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: IBV_QPT_RC,
            sq_sig_all: 0,
        };
        // SAFETY: the PD and both CQs are live (held by `ctx` and `cqs`); `init` is a valid
        // attribute struct of the header's layout.
        let qp = unsafe { (ctx.lib.create_qp)(ctx.pd, &mut init) };
        if qp.is_null() {
            let err = std::io::Error::last_os_error();
            return Err(VerbsError::Limit(format!(
                "ibv_create_qp (depth {depth}) failed: {err}"
            )));
        }
        let mut psn_bytes = [0u8; 4];
        getrandom::fill(&mut psn_bytes).map_err(|e| VerbsError::Call {
            verb: "getrandom",
            reason: e.to_string(),
        })?;
        let this = IbvQueuePair {
            ctx,
            _cqs: cqs,
            qp,
            port: dev.port.clone(),
            mtu_enum: dev.mtu_enum,
            gid_index: dev.gid_index,
            rd_atomic: dev.rd_atomic,
            psn: u32::from_le_bytes(psn_bytes) & 0x00ff_ffff,
        };
        this.to_init()?;
        Ok(this)
    }

    fn modify(
        &self,
        attr: &mut IbvQpAttr,
        mask: c_int,
        verb: &'static str,
    ) -> Result<(), VerbsError> {
        // SAFETY: the QP is live; `attr` is a valid attribute struct; libibverbs reads only
        // the fields named by `mask`.
        let rc = unsafe { (self.ctx.lib.modify_qp)(self.qp, attr, mask) };
        if rc != 0 {
            return Err(VerbsError::Call {
                verb,
                reason: std::io::Error::from_raw_os_error(rc.abs()).to_string(),
            });
        }
        Ok(())
    }

    fn to_init(&self) -> Result<(), VerbsError> {
        let mut attr = zeroed_attr();
        attr.qp_state = IBV_QPS_INIT;
        attr.pkey_index = 0;
        attr.port_num = self.port.port;
        attr.qp_access_flags = access_flags() as u32;
        self.modify(&mut attr, INIT_MASK, "ibv_modify_qp(INIT)")
    }
}

/// The access a connected QP grants its peer: write and atomics (and read, unused).
pub fn access_flags() -> c_int {
    IBV_ACCESS_LOCAL_WRITE
        | IBV_ACCESS_REMOTE_WRITE
        | IBV_ACCESS_REMOTE_READ
        | IBV_ACCESS_REMOTE_ATOMIC
}

fn zeroed_attr() -> IbvQpAttr {
    // SAFETY: IbvQpAttr is plain C data (integers and nested integer structs): all-zero is
    // a valid value, and the one the header's users start from (memset).
    unsafe { std::mem::zeroed() }
}

/// The RTR attributes towards `remote`: LID addressing on InfiniBand, GID addressing
/// (`is_global`, our GID table index) on RoCE, or on InfiniBand when the peer has no LID.
pub fn rtr_attr(
    port: &PortInfo,
    mtu_enum: u32,
    gid_index: u8,
    rd_atomic: c_int,
    remote: &QpEndpoint,
) -> IbvQpAttr {
    let mut attr = zeroed_attr();
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = mtu_enum;
    attr.dest_qp_num = remote.qpn;
    attr.rq_psn = remote.psn & 0x00ff_ffff;
    attr.max_dest_rd_atomic = rd_atomic.clamp(1, 255) as u8;
    attr.min_rnr_timer = MIN_RNR_TIMER;
    attr.ah_attr.dlid = remote.lid;
    attr.ah_attr.sl = 0;
    attr.ah_attr.src_path_bits = 0;
    attr.ah_attr.port_num = port.port;
    if port.link_layer == LinkLayer::Ethernet || remote.lid == 0 {
        attr.ah_attr.is_global = 1;
        attr.ah_attr.grh.dgid = IbvGid { raw: remote.gid };
        attr.ah_attr.grh.sgid_index = gid_index;
        attr.ah_attr.grh.hop_limit = HOP_LIMIT;
        attr.ah_attr.grh.traffic_class = 0;
        attr.ah_attr.grh.flow_label = 0;
    }
    attr
}

/// The RTS attributes (our own PSN).
pub fn rts_attr(psn: u32, rd_atomic: c_int) -> IbvQpAttr {
    let mut attr = zeroed_attr();
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = ACK_TIMEOUT;
    attr.retry_cnt = RETRY_COUNT;
    attr.rnr_retry = RNR_RETRY;
    attr.sq_psn = psn & 0x00ff_ffff;
    attr.max_rd_atomic = rd_atomic.clamp(1, 255) as u8;
    attr
}

/// The `ibv_sge` of a local scatter/gather element. The NIC checks it against the lkey's
/// region (a bad one completes with a local protection error); the length must fit 32 bits.
fn raw_sge(sge: &Sge) -> Result<IbvSge, VerbsError> {
    let length = u32::try_from(sge.len).map_err(|_| {
        VerbsError::Limit(format!("work request of {} bytes exceeds 4 GiB", sge.len))
    })?;
    Ok(IbvSge {
        addr: sge.mr.addr() + sge.offset as u64,
        length,
        lkey: sge.mr.lkey(),
    })
}

/// Builds the `ibv_send_wr` of a work request, its single SGE stored in `sge` (which must
/// outlive the post). Writes are signaled as asked; atomics always (their result is only
/// known at completion).
pub fn send_wr(wr: &WorkRequest, sge: &mut IbvSge) -> Result<IbvSendWr, VerbsError> {
    // SAFETY: IbvSendWr is plain C data (integers, pointers, unions of those): all-zero is
    // valid and what the header's users start from.
    let mut raw: IbvSendWr = unsafe { std::mem::zeroed() };
    raw.wr_id = wr.wr_id();
    let rdma = |remote: &RemoteAddr| IbvSendWrUnion {
        rdma: IbvRdmaWr {
            remote_addr: remote.addr,
            rkey: remote.rkey,
        },
    };
    let atomic = |remote: &RemoteAddr, compare_add: u64, swap: u64| IbvSendWrUnion {
        atomic: IbvAtomicWr {
            remote_addr: remote.addr,
            compare_add,
            swap,
            rkey: remote.rkey,
        },
    };
    let signal = |s: bool| if s { IBV_SEND_SIGNALED } else { 0 };
    let local = match wr {
        WorkRequest::Write {
            local,
            remote,
            signaled,
            ..
        } => {
            raw.opcode = IBV_WR_RDMA_WRITE;
            raw.send_flags = signal(*signaled);
            raw.wr = rdma(remote);
            local
        }
        WorkRequest::WriteWithImm {
            local,
            remote,
            imm,
            signaled,
            ..
        } => {
            raw.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
            raw.send_flags = signal(*signaled);
            raw.imm_data = imm.to_be();
            raw.wr = rdma(remote);
            local
        }
        WorkRequest::CompareSwap {
            result,
            remote,
            compare,
            swap,
            ..
        } => {
            raw.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
            raw.send_flags = IBV_SEND_SIGNALED;
            raw.wr = atomic(remote, *compare, *swap);
            result
        }
        WorkRequest::FetchAdd {
            result,
            remote,
            add,
            ..
        } => {
            raw.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
            raw.send_flags = IBV_SEND_SIGNALED;
            raw.wr = atomic(remote, *add, 0);
            result
        }
    };
    *sge = raw_sge(local)?;
    if sge.length > 0 {
        raw.sg_list = sge;
        raw.num_sge = 1;
    }
    Ok(raw)
}

impl QueuePair for IbvQueuePair {
    fn qp_num(&self) -> u32 {
        // SAFETY: the QP is live until Drop; qp_num never changes.
        unsafe { (*self.qp).qp_num }
    }

    fn endpoint(&self) -> QpEndpoint {
        QpEndpoint {
            qpn: self.qp_num(),
            psn: self.psn,
            lid: self.port.lid,
            gid: self.port.gid,
        }
    }

    fn connect(&self, remote: &QpEndpoint) -> Result<(), VerbsError> {
        let mut rtr = rtr_attr(
            &self.port,
            self.mtu_enum,
            self.gid_index,
            self.rd_atomic,
            remote,
        );
        self.modify(&mut rtr, RTR_MASK, "ibv_modify_qp(RTR)")?;
        let mut rts = rts_attr(self.psn, self.rd_atomic);
        self.modify(&mut rts, RTS_MASK, "ibv_modify_qp(RTS)")
    }

    fn post_send(&self, wr: WorkRequest) -> Result<(), VerbsError> {
        let mut sge = IbvSge {
            addr: 0,
            length: 0,
            lkey: 0,
        };
        let mut raw = send_wr(&wr, &mut sge)?;
        let mut bad: *mut IbvSendWr = ptr::null_mut();
        // SAFETY: the context is open; its ops table is set by the driver at open.
        let post = unsafe { (*self.ctx.ctx).ops.post_send }.ok_or_else(|| VerbsError::Call {
            verb: "ibv_post_send",
            reason: "the driver has no post_send".to_string(),
        })?;
        // SAFETY: QP live; `raw` and the `sge` it points to live across the call (the
        // driver copies the request into the send queue before returning).
        let rc = unsafe { post(self.qp, &mut raw, &mut bad) };
        post_result("ibv_post_send", rc)
    }

    fn post_recv(&self, wr_id: u64) -> Result<(), VerbsError> {
        let mut raw = IbvRecvWr {
            wr_id,
            next: ptr::null_mut(),
            sg_list: ptr::null_mut(),
            num_sge: 0,
        };
        let mut bad: *mut IbvRecvWr = ptr::null_mut();
        // SAFETY: as in post_send.
        let post = unsafe { (*self.ctx.ctx).ops.post_recv }.ok_or_else(|| VerbsError::Call {
            verb: "ibv_post_recv",
            reason: "the driver has no post_recv".to_string(),
        })?;
        // SAFETY: QP live; `raw` lives across the call (a receive without scatter list:
        // a write with immediate consumes it and writes nothing through it).
        let rc = unsafe { post(self.qp, &mut raw, &mut bad) };
        post_result("ibv_post_recv", rc)
    }
}

/// A post's return value: 0, or an errno (ENOMEM: the queue is full).
fn post_result(verb: &'static str, rc: c_int) -> Result<(), VerbsError> {
    match rc {
        0 => Ok(()),
        libc::ENOMEM => Err(VerbsError::Limit(format!("{verb}: queue full"))),
        rc => Err(VerbsError::Call {
            verb,
            reason: std::io::Error::from_raw_os_error(rc.abs()).to_string(),
        }),
    }
}

impl Drop for IbvQueuePair {
    fn drop(&mut self) {
        // SAFETY: the QP is destroyed once, before its CQs and PD (held by this struct's
        // fields, dropped after this body).
        unsafe { (self.ctx.lib.destroy_qp)(self.qp) };
    }
}
