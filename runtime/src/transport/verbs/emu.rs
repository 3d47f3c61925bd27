//! An in-process emulation of reliable-connected (RC) queue pairs: a software switch
//! ([`EmuFabric`]) whose devices (`emu0`, `emu1`, ...: one per node of a test job) implement
//! the provider interface with the semantics `provider.rs` lists, so the verbs transport's
//! protocol logic runs in CI where no RDMA device exists.
//!
//! - **Asynchrony**: every device has a delivery thread (its "NIC") that executes the send
//!   work requests of its queue pairs in post order; `post_send` only queues. The protocol
//!   can thus never rely on a post completing synchronously.
//! - **Ordering**: a write's bytes land in the target region before the responder's
//!   receive completion is queued (same thread, then the CQ's lock gives happens-before).
//! - **Receives**: a write with immediate consumes one posted receive; with none posted the
//!   requester gets `RnrRetryExceeded` and nothing is written.
//! - **Access checks**: an unknown rkey, a region of another device or a range outside the
//!   region completes with `RemoteAccessError`; any error puts the requester's QP in the
//!   error state, after which every request completes with `WrFlushError`.
//! - **Atomics**: regions are arrays of `AtomicU64` words, so compare-and-swap and
//!   fetch-and-add are atomic among themselves (and byte writes never tear a word another
//!   write does not touch). No `unsafe` anywhere.
//! - **Fault injection** ([`EmuFabric::inject`], [`EmuFabric::unplug`]): make the next N work
//!   requests towards a device (or between two devices) complete with a chosen error, or
//!   unplug a device: every queued and later request to or from it completes with
//!   `RetryExceeded`, as when a cable is pulled.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread;
use std::time::Duration;

mod memory;

use self::memory::{CqState, EmuCq, EmuRegion};
use super::provider::{
    Completion, CompletionQueue, Device, DeviceInfo, LinkLayer, MemoryRegion, PortInfo, Provider,
    QpEndpoint, QueuePair, RemoteAddr, Sge, VerbsError, WcOpcode, WcStatus, WorkRequest,
};

/// Where the emulated regions' addresses start, and how far apart regions are (each
/// region's remote addresses are `addr..addr + len`; 64 GiB apart never overlap).
const ADDR_BASE: u64 = 0x7f00_0000_0000;
const ADDR_STRIDE: u64 = 1 << 36;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Which work requests an injected fault hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultTarget {
    /// Requests from any device to this device.
    Towards(u32),
    /// Requests from device `from` to device `to`.
    Between { from: u32, to: u32 },
}

impl FaultTarget {
    fn hits(self, from: u32, to: u32) -> bool {
        match self {
            FaultTarget::Towards(t) => t == to,
            FaultTarget::Between { from: f, to: t } => f == from && t == to,
        }
    }
}

struct Fault {
    target: FaultTarget,
    status: WcStatus,
    left: u32,
}

#[derive(Default)]
struct FabricState {
    unplugged: Vec<bool>,
    qps: HashMap<u32, Weak<EmuQp>>,
    /// rkey → region.
    regions: HashMap<u32, Weak<EmuRegion>>,
    faults: Vec<Fault>,
    next_qpn: u32,
    next_key: u32,
}

/// The software switch: `devices` emulated HCAs with one active InfiniBand port each.
pub struct EmuFabric {
    devices: u32,
    state: Mutex<FabricState>,
    me: Weak<EmuFabric>,
    /// Upper bound of the random delay before each delivery, in nanoseconds (0: none).
    jitter_ns: AtomicU64,
    /// The jitter's pseudo-random state (xorshift).
    jitter_state: AtomicU64,
}

impl EmuFabric {
    /// A fabric of `devices` devices named `emu0`..`emu{devices-1}`.
    pub fn new(devices: u32) -> Arc<EmuFabric> {
        Arc::new_cyclic(|me| EmuFabric {
            devices,
            state: Mutex::new(FabricState {
                unplugged: vec![false; devices as usize],
                next_qpn: 0x100,
                next_key: 1,
                ..FabricState::default()
            }),
            me: me.clone(),
            jitter_ns: AtomicU64::new(0),
            jitter_state: AtomicU64::new(0x9e37_79b9_7f4a_7c15),
        })
    }

    /// Delays every delivery by a pseudo-random time below `max`, so devices run at
    /// different speeds: a protocol that leans on timing rather than on RC's guarantees
    /// fails under it (the conformance suite runs once this way).
    pub fn set_jitter(&self, max: Duration) {
        self.jitter_ns.store(
            max.as_nanos().min(u128::from(u64::MAX)) as u64,
            Ordering::Relaxed,
        );
    }

    fn jitter(&self) {
        let max = self.jitter_ns.load(Ordering::Relaxed);
        if max == 0 {
            return;
        }
        let mut x = self.jitter_state.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.jitter_state.store(x, Ordering::Relaxed);
        thread::sleep(Duration::from_nanos(x % max));
    }

    /// The name of device `index`.
    pub fn device_name(index: u32) -> String {
        format!("emu{index}")
    }

    /// The next `count` work requests matching `target` complete with `status` (and put
    /// their queue pair in the error state, as every error completion does). With
    /// `WcStatus::Success` they are *swallowed*: they complete successfully but have no
    /// effect at the responder, as when the peer's NIC acknowledges but its process has
    /// stopped answering.
    pub fn inject(&self, target: FaultTarget, status: WcStatus, count: u32) {
        lock(&self.state).faults.push(Fault {
            target,
            status,
            left: count,
        });
    }

    /// Unplugs device `index`: every queued and later request to or from it completes
    /// with `RetryExceeded`.
    pub fn unplug(&self, index: u32) {
        if let Some(u) = lock(&self.state).unplugged.get_mut(index as usize) {
            *u = true;
        }
    }

    fn port_info(index: u32) -> PortInfo {
        let mut gid = [0u8; 16];
        gid[0] = 0xfe;
        gid[1] = 0x80;
        gid[12..].copy_from_slice(&(index + 1).to_be_bytes());
        PortInfo {
            port: 1,
            active: true,
            link_layer: LinkLayer::InfiniBand,
            lid: (index + 1) as u16,
            gid,
            mtu: 4096,
        }
    }

    fn info(index: u32) -> DeviceInfo {
        DeviceInfo {
            name: Self::device_name(index),
            ports: vec![Self::port_info(index)],
        }
    }

    fn next_key(&self) -> u32 {
        let mut s = lock(&self.state);
        s.next_key += 1;
        s.next_key
    }

    /// Decides the fate of one request from device `from` to device `to` before it runs:
    /// unplugged devices and injected faults.
    fn fault(&self, from: u32, to: u32) -> Option<WcStatus> {
        let mut s = lock(&self.state);
        let gone = |d: u32| s.unplugged.get(d as usize).copied().unwrap_or(true);
        if gone(from) || gone(to) {
            return Some(WcStatus::RetryExceeded);
        }
        let i = s
            .faults
            .iter()
            .position(|f| f.left > 0 && f.target.hits(from, to))?;
        let f = &mut s.faults[i];
        f.left -= 1;
        let status = f.status;
        if f.left == 0 {
            s.faults.remove(i);
        }
        Some(status)
    }

    fn qp(&self, qpn: u32) -> Option<Arc<EmuQp>> {
        lock(&self.state).qps.get(&qpn).and_then(Weak::upgrade)
    }

    fn region(&self, rkey: u32) -> Option<Arc<EmuRegion>> {
        lock(&self.state).regions.get(&rkey).and_then(Weak::upgrade)
    }
}

impl Provider for EmuFabric {
    fn name(&self) -> &'static str {
        "emulated"
    }

    fn devices(&self) -> Result<Vec<DeviceInfo>, VerbsError> {
        Ok((0..self.devices).map(Self::info).collect())
    }

    fn open(&self, device: &str, port: u8) -> Result<Arc<dyn Device>, VerbsError> {
        let index = device
            .strip_prefix("emu")
            .and_then(|n| n.parse::<u32>().ok())
            .filter(|&n| n < self.devices)
            .ok_or_else(|| VerbsError::Call {
                verb: "ibv_open_device",
                reason: format!(
                    "no device {device} (the emulated fabric has {} devices)",
                    self.devices
                ),
            })?;
        if port != 1 {
            return Err(VerbsError::Call {
                verb: "ibv_query_port",
                reason: format!("{device} has no port {port}"),
            });
        }
        let fabric = self.me.upgrade().ok_or_else(|| VerbsError::Call {
            verb: "ibv_open_device",
            reason: "the emulated fabric is gone".into(),
        })?;
        let nic = Arc::new(Nic::default());
        {
            let (fabric, nic) = (fabric.clone(), nic.clone());
            thread::Builder::new()
                .name(format!("strobe-emu{index}"))
                .stack_size(256 * 1024)
                .spawn(move || nic.run(&fabric))
                .map_err(|e| VerbsError::Call {
                    verb: "ibv_open_device",
                    reason: format!("cannot start the emulated NIC thread: {e}"),
                })?;
        }
        Ok(Arc::new(EmuDevice {
            fabric,
            index,
            nic,
            cqs: Mutex::new(Vec::new()),
        }))
    }
}

/// A device's "NIC": the queue of posted send work requests its thread executes in order.
#[derive(Default)]
struct Nic {
    queue: Mutex<VecDeque<(Arc<EmuQp>, WorkRequest)>>,
    ready: Condvar,
}

impl Nic {
    /// Runs until only this thread holds the NIC (its device and every QP dropped) and the
    /// queue is empty.
    fn run(self: Arc<Self>, fabric: &EmuFabric) {
        loop {
            let job = {
                let mut q = lock(&self.queue);
                loop {
                    if let Some(job) = q.pop_front() {
                        break Some(job);
                    }
                    if Arc::strong_count(&self) == 1 {
                        break None;
                    }
                    q = self
                        .ready
                        .wait_timeout(q, Duration::from_millis(50))
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            };
            let Some((qp, wr)) = job else { return };
            fabric.jitter();
            qp.execute(fabric, wr);
        }
    }
}

struct EmuDevice {
    fabric: Arc<EmuFabric>,
    index: u32,
    nic: Arc<Nic>,
    /// The CQs this device created, to find the emulated one behind a `dyn` handle.
    cqs: Mutex<Vec<Weak<EmuCq>>>,
}

impl EmuDevice {
    fn find_cq(&self, cq: &Arc<dyn CompletionQueue>) -> Result<Arc<EmuCq>, VerbsError> {
        let wanted = Arc::as_ptr(cq) as *const u8;
        lock(&self.cqs)
            .iter()
            .filter_map(Weak::upgrade)
            .find(|c| Arc::as_ptr(c) as *const u8 == wanted)
            .ok_or_else(|| VerbsError::Call {
                verb: "ibv_create_qp",
                reason: "the completion queue belongs to another device".into(),
            })
    }
}

impl Device for EmuDevice {
    fn info(&self) -> DeviceInfo {
        EmuFabric::info(self.index)
    }

    fn port(&self) -> PortInfo {
        EmuFabric::port_info(self.index)
    }

    fn alloc_region(&self, len: usize) -> Result<Arc<dyn MemoryRegion>, VerbsError> {
        let key = self.fabric.next_key();
        let region = Arc::new(EmuRegion {
            device: self.index,
            words: (0..len.div_ceil(8)).map(|_| AtomicU64::new(0)).collect(),
            len,
            addr: ADDR_BASE + u64::from(key) * ADDR_STRIDE,
            lkey: key,
            rkey: key ^ 0x5a00_0000,
        });
        lock(&self.fabric.state)
            .regions
            .insert(region.rkey, Arc::downgrade(&region));
        Ok(region)
    }

    fn create_cq(&self, depth: u32) -> Result<Arc<dyn CompletionQueue>, VerbsError> {
        let cq = Arc::new(EmuCq {
            depth: depth as usize,
            state: Mutex::new(CqState::default()),
            ready: Condvar::new(),
        });
        let mut cqs = lock(&self.cqs);
        cqs.retain(|c| c.strong_count() > 0);
        cqs.push(Arc::downgrade(&cq));
        Ok(cq)
    }

    fn create_qp(
        &self,
        send_cq: &Arc<dyn CompletionQueue>,
        recv_cq: &Arc<dyn CompletionQueue>,
        depth: u32,
    ) -> Result<Arc<dyn QueuePair>, VerbsError> {
        let (send_cq, recv_cq) = (self.find_cq(send_cq)?, self.find_cq(recv_cq)?);
        let mut s = lock(&self.fabric.state);
        s.next_qpn += 1;
        let qpn = s.next_qpn;
        let qp = Arc::new_cyclic(|me| EmuQp {
            me: me.clone(),
            qpn,
            psn: qpn.wrapping_mul(2_654_435_761) & 0xff_ffff,
            device: self.index,
            depth: depth as usize,
            nic: self.nic.clone(),
            send_cq,
            recv_cq,
            state: Mutex::new(QpState::default()),
        });
        s.qps.insert(qpn, Arc::downgrade(&qp));
        Ok(qp)
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Phase {
    #[default]
    Init,
    Ready,
    Error,
}

#[derive(Default)]
struct QpState {
    phase: Phase,
    remote: Option<QpEndpoint>,
    recvs: VecDeque<u64>,
    /// Posted send work requests the NIC has not executed yet.
    queued: usize,
}

struct EmuQp {
    me: Weak<EmuQp>,
    qpn: u32,
    psn: u32,
    device: u32,
    depth: usize,
    nic: Arc<Nic>,
    send_cq: Arc<EmuCq>,
    recv_cq: Arc<EmuCq>,
    state: Mutex<QpState>,
}

/// What a work request writes at the responder.
enum Effect {
    Write { bytes: Vec<u8>, imm: Option<u32> },
    Atomic { result: Sge, op: AtomicOp },
}

enum AtomicOp {
    CompareSwap { compare: u64, swap: u64 },
    FetchAdd(u64),
}

/// How long a requester retries towards a queue pair not yet connected (a real RC queue
/// pair retries `retry_cnt` times `timeout`, seconds in all): wire-up connects the two
/// ends of a pair at slightly different times.
const RETRY_WINDOW: Duration = Duration::from_secs(2);

impl EmuQp {
    /// Whether this (responder) queue pair is ready, allowing it the retry window to
    /// finish connecting.
    fn wait_ready(&self) -> bool {
        let until = std::time::Instant::now() + RETRY_WINDOW;
        loop {
            match lock(&self.state).phase {
                Phase::Ready => return true,
                Phase::Error => return false,
                Phase::Init if std::time::Instant::now() >= until => return false,
                Phase::Init => thread::sleep(Duration::from_millis(1)),
            }
        }
    }

    /// Runs one send work request on the NIC thread and completes it.
    fn execute(&self, fabric: &EmuFabric, wr: WorkRequest) {
        let (wr_id, signaled, opcode) = match &wr {
            WorkRequest::Write {
                wr_id, signaled, ..
            }
            | WorkRequest::WriteWithImm {
                wr_id, signaled, ..
            } => (*wr_id, *signaled, WcOpcode::Write),
            WorkRequest::CompareSwap { wr_id, .. } => (*wr_id, true, WcOpcode::CompareSwap),
            WorkRequest::FetchAdd { wr_id, .. } => (*wr_id, true, WcOpcode::FetchAdd),
        };
        let status = self.deliver(fabric, wr);
        let mut s = lock(&self.state);
        s.queued -= 1;
        if status != WcStatus::Success {
            s.phase = Phase::Error;
        }
        drop(s);
        if signaled || status != WcStatus::Success {
            self.send_cq.push(Completion {
                wr_id,
                status,
                opcode,
                qp_num: self.qpn,
                byte_len: 0,
                imm: None,
            });
        }
    }

    fn deliver(&self, fabric: &EmuFabric, wr: WorkRequest) -> WcStatus {
        let (phase, remote) = {
            let s = lock(&self.state);
            (s.phase, s.remote)
        };
        if phase == Phase::Error {
            return WcStatus::WrFlushError;
        }
        let Some(responder) = remote.and_then(|r| {
            fabric
                .qp(r.qpn)
                .filter(|q| EmuFabric::port_info(q.device).lid == r.lid)
        }) else {
            return WcStatus::RetryExceeded;
        };
        if let Some(status) = fabric.fault(self.device, responder.device) {
            return status;
        }
        if !responder.wait_ready() {
            return WcStatus::RetryExceeded;
        }
        let (remote, len, effect) = match Self::effect(wr) {
            Ok(e) => e,
            Err(status) => return status,
        };
        let Some((region, offset)) = fabric
            .region(remote.rkey)
            .filter(|r| r.device == responder.device)
            .and_then(|r| r.offset_of(remote.addr, len).map(|o| (r, o)))
        else {
            return WcStatus::RemoteAccessError;
        };
        match effect {
            Effect::Write { bytes, imm } => {
                let recv = match imm {
                    Some(_) => match lock(&responder.state).recvs.pop_front() {
                        Some(r) => Some(r),
                        None => return WcStatus::RnrRetryExceeded,
                    },
                    None => None,
                };
                region.write(offset, &bytes);
                if let Some(recv_id) = recv {
                    responder.recv_cq.push(Completion {
                        wr_id: recv_id,
                        status: WcStatus::Success,
                        opcode: WcOpcode::RecvWithImm,
                        qp_num: responder.qpn,
                        byte_len: bytes.len() as u32,
                        imm,
                    });
                }
            }
            Effect::Atomic { result, op } => {
                if offset % 8 != 0 {
                    return WcStatus::RemoteAccessError;
                }
                let word = &region.words[offset / 8];
                let old = match op {
                    AtomicOp::CompareSwap { compare, swap } => word
                        .compare_exchange(compare, swap, Ordering::AcqRel, Ordering::Acquire)
                        .unwrap_or_else(|v| v),
                    AtomicOp::FetchAdd(add) => word.fetch_add(add, Ordering::AcqRel),
                };
                result.mr.write(result.offset, &old.to_ne_bytes());
            }
        }
        WcStatus::Success
    }

    /// The remote target, its length and what to do there; a bad local SGE is a
    /// `LocalError`.
    fn effect(wr: WorkRequest) -> Result<(RemoteAddr, usize, Effect), WcStatus> {
        let local_ok = |sge: &Sge| {
            sge.offset
                .checked_add(sge.len)
                .is_some_and(|end| end <= sge.mr.len())
        };
        let read = |sge: &Sge| {
            let mut bytes = vec![0; sge.len];
            sge.mr.read(sge.offset, &mut bytes);
            bytes
        };
        match wr {
            WorkRequest::Write { ref local, .. } | WorkRequest::WriteWithImm { ref local, .. }
                if !local_ok(local) =>
            {
                Err(WcStatus::LocalError)
            }
            WorkRequest::Write { local, remote, .. } => Ok((
                remote,
                local.len,
                Effect::Write {
                    bytes: read(&local),
                    imm: None,
                },
            )),
            WorkRequest::WriteWithImm {
                local, remote, imm, ..
            } => Ok((
                remote,
                local.len,
                Effect::Write {
                    bytes: read(&local),
                    imm: Some(imm),
                },
            )),
            WorkRequest::CompareSwap {
                result,
                remote,
                compare,
                swap,
                ..
            } if result.len == 8 && local_ok(&result) => Ok((
                remote,
                8,
                Effect::Atomic {
                    result,
                    op: AtomicOp::CompareSwap { compare, swap },
                },
            )),
            WorkRequest::FetchAdd {
                result,
                remote,
                add,
                ..
            } if result.len == 8 && local_ok(&result) => Ok((
                remote,
                8,
                Effect::Atomic {
                    result,
                    op: AtomicOp::FetchAdd(add),
                },
            )),
            _ => Err(WcStatus::LocalError),
        }
    }
}

impl QueuePair for EmuQp {
    fn qp_num(&self) -> u32 {
        self.qpn
    }

    fn endpoint(&self) -> QpEndpoint {
        let port = EmuFabric::port_info(self.device);
        QpEndpoint {
            qpn: self.qpn,
            psn: self.psn,
            lid: port.lid,
            gid: port.gid,
        }
    }

    fn connect(&self, remote: &QpEndpoint) -> Result<(), VerbsError> {
        let mut s = lock(&self.state);
        if s.phase != Phase::Init {
            return Err(VerbsError::Call {
                verb: "ibv_modify_qp",
                reason: format!("QP {} is not in the INIT state", self.qpn),
            });
        }
        s.remote = Some(*remote);
        s.phase = Phase::Ready;
        Ok(())
    }

    fn post_send(&self, wr: WorkRequest) -> Result<(), VerbsError> {
        let me = self.me.upgrade().expect("a QP is used through its Arc");
        let mut q = lock(&self.nic.queue);
        let mut s = lock(&self.state);
        if s.phase == Phase::Init {
            return Err(VerbsError::Call {
                verb: "ibv_post_send",
                reason: format!("QP {} is not connected", self.qpn),
            });
        }
        if s.queued >= self.depth {
            return Err(VerbsError::Limit(format!(
                "send queue of QP {} is full ({} work requests)",
                self.qpn, self.depth
            )));
        }
        s.queued += 1;
        drop(s);
        q.push_back((me, wr));
        self.nic.ready.notify_all();
        Ok(())
    }

    fn post_recv(&self, wr_id: u64) -> Result<(), VerbsError> {
        let mut s = lock(&self.state);
        if s.recvs.len() >= self.depth {
            return Err(VerbsError::Limit(format!(
                "receive queue of QP {} is full ({} work requests)",
                self.qpn, self.depth
            )));
        }
        s.recvs.push_back(wr_id);
        Ok(())
    }
}

#[cfg(test)]
#[path = "emu_tests.rs"]
mod tests;
