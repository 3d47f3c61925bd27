//! The libibverbs provider: the [`Provider`] interface over rdma-core's libibverbs.so.1,
//! loaded at run time (`ibverbs_sys.rs` has the declarations and the loader).
//!
//! Ownership mirrors libibverbs' own rules, so that `Drop` frees in the order it demands
//! (QP, CQ, completion channel, MR, PD, context): every memory region, completion queue
//! and queue pair holds an `Arc` of the [`Context`] (context + protection domain), and a
//! queue pair holds `Arc`s of its two completion queues; the last user of each frees it.
//!
//! Threads: libibverbs' verbs are thread-safe (rdma-core documents every `ibv_*` call and
//! the data-path ops as safe to call concurrently on the same objects), which is what the
//! `Send`/`Sync` impls below rest on.

use std::collections::{HashMap, VecDeque};
use std::ffi::{c_int, c_void};
use std::io;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::ibverbs_qp::IbvQueuePair;
use super::ibverbs_sys::*;
use super::provider::{
    Completion, CompletionQueue, Device, DeviceInfo, LinkLayer, MemoryRegion, PortInfo, Provider,
    QueuePair, VerbsError, WcOpcode, WcStatus,
};

/// Largest port number probed when a device cannot report its port count.
const MAX_PORTS: u8 = 8;

/// Outstanding RDMA reads/atomics per QP, capped by what the device supports.
const RD_ATOMIC: c_int = 16;

/// The GID table index used for RoCE addressing: `STROBE_VERBS_GID_INDEX`, default 0
/// (docs/multi-host.md, "RDMA (verbs)": RoCE v2 over IPv4 is usually index 1 or 3).
pub const GID_INDEX_ENV: &str = "STROBE_VERBS_GID_INDEX";

fn errno_error(verb: &'static str) -> VerbsError {
    VerbsError::Call {
        verb,
        reason: io::Error::last_os_error().to_string(),
    }
}

/// Verbs that return an errno value (not -1 + errno).
fn rc_error(verb: &'static str, rc: c_int) -> VerbsError {
    VerbsError::Call {
        verb,
        reason: io::Error::from_raw_os_error(rc.abs()).to_string(),
    }
}

/// libibverbs, loaded.
pub struct IbverbsProvider {
    lib: Arc<IbvLib>,
}

impl IbverbsProvider {
    /// Loads libibverbs.so.1.
    pub fn load() -> Result<IbverbsProvider, VerbsError> {
        Self::load_from(LIBIBVERBS)
    }

    /// Loads the library of that name (tests point it at one that does not exist).
    pub fn load_from(library: &str) -> Result<IbverbsProvider, VerbsError> {
        let lib = IbvLib::load(library).map_err(|e| VerbsError::Unavailable(e.to_string()))?;
        Ok(IbverbsProvider { lib: Arc::new(lib) })
    }

    /// Runs `f` over the device list (freed afterwards).
    fn with_device_list<T>(
        &self,
        f: impl FnOnce(&[*mut IbvDevice]) -> Result<T, VerbsError>,
    ) -> Result<T, VerbsError> {
        let mut n: c_int = 0;
        // SAFETY: `n` is a valid out-pointer; the returned list is NULL or `n` device
        // pointers followed by NULL, freed below with ibv_free_device_list.
        let list = unsafe { (self.lib.get_device_list)(&mut n) };
        if list.is_null() {
            // No kernel support for uverbs at all (ENOSYS): no device, as far as we care.
            let err = io::Error::last_os_error();
            return match err.raw_os_error() {
                Some(libc::ENOSYS) | Some(libc::ENOENT) => f(&[]),
                _ => Err(VerbsError::Call {
                    verb: "ibv_get_device_list",
                    reason: err.to_string(),
                }),
            };
        }
        // SAFETY: `list` holds `n` valid device pointers (see above).
        let devices = unsafe { std::slice::from_raw_parts(list, n.max(0) as usize) };
        let out = f(devices);
        // SAFETY: `list` came from ibv_get_device_list and is freed once; contexts opened
        // from it stay valid after the free (libibverbs keeps its own reference).
        unsafe { (self.lib.free_device_list)(list) };
        out
    }
}

/// The name of a listed device.
fn device_name(dev: *mut IbvDevice) -> String {
    // SAFETY: `dev` is an element of a live device list; `name` is a NUL-terminated array
    // inside it.
    c_name(unsafe { &(*dev).name })
}

impl Provider for IbverbsProvider {
    fn name(&self) -> &'static str {
        "libibverbs"
    }

    fn devices(&self) -> Result<Vec<DeviceInfo>, VerbsError> {
        self.with_device_list(|devs| {
            devs.iter()
                .map(|&dev| {
                    let ctx = Context::open(&self.lib, dev)?;
                    Ok(DeviceInfo {
                        name: device_name(dev),
                        ports: ctx.ports()?,
                    })
                })
                .collect()
        })
    }

    fn open(&self, device: &str, port: u8) -> Result<Arc<dyn Device>, VerbsError> {
        let ctx = self.with_device_list(|devs| {
            let dev = devs
                .iter()
                .copied()
                .find(|&d| device_name(d) == device)
                .ok_or_else(|| VerbsError::Unavailable(format!("no RDMA device {device}")))?;
            Context::open(&self.lib, dev)
        })?;
        let gid_index = std::env::var(GID_INDEX_ENV)
            .ok()
            .map(|v| {
                v.parse::<u8>().map_err(|_| {
                    VerbsError::Unavailable(format!("{GID_INDEX_ENV}={v}: not a GID index"))
                })
            })
            .transpose()?
            .unwrap_or(0);
        IbvDeviceHandle::new(Arc::new(ctx), device, port, gid_index)
            .map(|d| Arc::new(d) as Arc<dyn Device>)
    }
}

/// An open device context with its protection domain.
pub(super) struct Context {
    pub(super) lib: Arc<IbvLib>,
    pub(super) ctx: *mut IbvContext,
    pub(super) pd: *mut IbvPd,
    /// Our completion queues by object address (`Arc::as_ptr`) → their `ibv_cq`, so that
    /// `create_qp`, given `Arc<dyn CompletionQueue>`s, finds the raw CQs (and refuses CQs
    /// of another provider or device).
    cqs: Mutex<HashMap<usize, usize>>,
}

// SAFETY: libibverbs contexts and PDs may be used from any thread (see the module doc);
// the pointers are only freed in Drop, once.
unsafe impl Send for Context {}
// SAFETY: as above: every verb on them is thread-safe.
unsafe impl Sync for Context {}

impl Context {
    fn open(lib: &Arc<IbvLib>, dev: *mut IbvDevice) -> Result<Context, VerbsError> {
        // SAFETY: `dev` is an element of a live device list.
        let ctx = unsafe { (lib.open_device)(dev) };
        if ctx.is_null() {
            return Err(errno_error("ibv_open_device"));
        }
        // SAFETY: `ctx` is the context just opened.
        let pd = unsafe { (lib.alloc_pd)(ctx) };
        if pd.is_null() {
            let err = errno_error("ibv_alloc_pd");
            // SAFETY: closing the context we opened, nothing else uses it.
            unsafe { (lib.close_device)(ctx) };
            return Err(err);
        }
        Ok(Context {
            lib: lib.clone(),
            ctx,
            pd,
            cqs: Mutex::new(HashMap::new()),
        })
    }

    fn device_attr(&self) -> Result<IbvDeviceAttr, VerbsError> {
        // SAFETY: IbvDeviceAttr is plain C data; all-zero is a valid value.
        let mut attr: IbvDeviceAttr = unsafe { std::mem::zeroed() };
        // SAFETY: `self.ctx` is open and `attr` a valid out-pointer of the header's layout.
        let rc = unsafe { (self.lib.query_device)(self.ctx, &mut attr) };
        if rc != 0 {
            return Err(rc_error("ibv_query_device", rc));
        }
        Ok(attr)
    }

    fn port(&self, port: u8, gid_index: u8) -> Result<Option<PortInfo>, VerbsError> {
        // SAFETY: zeroed first, as the header's inline wrapper does before calling the
        // exported ibv_query_port; the struct is plain C data.
        let mut attr: IbvPortAttr = unsafe { std::mem::zeroed() };
        // SAFETY: `self.ctx` is open and `attr` a valid out-pointer of the header's layout.
        let rc = unsafe { (self.lib.query_port)(self.ctx, port, &mut attr) };
        if rc != 0 {
            return Ok(None);
        }
        let mut gid = IbvGid { raw: [0; 16] };
        // SAFETY: as above; `gid` is a 16-byte out-pointer. A port without a GID table
        // (some IB ports before the SM sets it) leaves it zero.
        unsafe { (self.lib.query_gid)(self.ctx, port, c_int::from(gid_index), &mut gid) };
        Ok(Some(PortInfo {
            port,
            active: attr.state == IBV_PORT_ACTIVE,
            link_layer: link_layer(attr.link_layer),
            lid: attr.lid,
            gid: gid.raw,
            mtu: mtu_bytes(attr.active_mtu),
        }))
    }

    fn ports(&self) -> Result<Vec<PortInfo>, VerbsError> {
        let count = self
            .device_attr()
            .map(|a| a.phys_port_cnt)
            .unwrap_or(MAX_PORTS);
        let mut ports = Vec::new();
        for port in 1..=count {
            if let Some(info) = self.port(port, 0)? {
                ports.push(info);
            }
        }
        Ok(ports)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: every MR, CQ and QP holds an Arc of this context, so none is left: the PD
        // and then the context can go, each exactly once.
        unsafe {
            (self.lib.dealloc_pd)(self.pd);
            (self.lib.close_device)(self.ctx);
        }
    }
}

/// `IBV_LINK_LAYER_*` as the interface's enum ("unspecified" is what old InfiniBand
/// drivers report).
pub fn link_layer(raw: u8) -> LinkLayer {
    match raw {
        IBV_LINK_LAYER_ETHERNET => LinkLayer::Ethernet,
        _ => LinkLayer::InfiniBand,
    }
}

/// An opened device bound to one port.
pub(super) struct IbvDeviceHandle {
    pub(super) ctx: Arc<Context>,
    name: String,
    pub(super) port: PortInfo,
    /// The port's active MTU as an `ibv_mtu` value (the path MTU of every QP).
    pub(super) mtu_enum: u32,
    /// The GID table index of this host's address on RoCE.
    pub(super) gid_index: u8,
    /// Outstanding atomics per QP (ours and the responder's).
    pub(super) rd_atomic: c_int,
}

impl IbvDeviceHandle {
    fn new(
        ctx: Arc<Context>,
        name: &str,
        port: u8,
        gid_index: u8,
    ) -> Result<IbvDeviceHandle, VerbsError> {
        let info = ctx
            .port(port, gid_index)?
            .ok_or_else(|| VerbsError::Unavailable(format!("device {name} has no port {port}")))?;
        if !info.active {
            return Err(VerbsError::Unavailable(format!(
                "device {name} port {port} is not active"
            )));
        }
        let attr = ctx.device_attr()?;
        let rd_atomic = RD_ATOMIC
            .min(attr.max_qp_rd_atom.max(1))
            .min(attr.max_qp_init_rd_atom.max(1));
        let mtu_enum = (1..=5u32).find(|&e| mtu_bytes(e) == info.mtu).unwrap_or(3);
        Ok(IbvDeviceHandle {
            ctx,
            name: name.to_string(),
            port: info,
            mtu_enum,
            gid_index,
            rd_atomic,
        })
    }
}

impl Device for IbvDeviceHandle {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            name: self.name.clone(),
            ports: self.ctx.ports().unwrap_or_else(|_| vec![self.port.clone()]),
        }
    }

    fn port(&self) -> PortInfo {
        self.port.clone()
    }

    fn alloc_region(&self, len: usize) -> Result<Arc<dyn MemoryRegion>, VerbsError> {
        IbvRegion::new(&self.ctx, len).map(|r| Arc::new(r) as Arc<dyn MemoryRegion>)
    }

    fn create_cq(&self, depth: u32) -> Result<Arc<dyn CompletionQueue>, VerbsError> {
        let cq = Arc::new(IbvCompletionQueue::new(&self.ctx, depth)?);
        self.ctx
            .cqs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(Arc::as_ptr(&cq) as usize, cq.cq as usize);
        Ok(cq)
    }

    fn create_qp(
        &self,
        send_cq: &Arc<dyn CompletionQueue>,
        recv_cq: &Arc<dyn CompletionQueue>,
        depth: u32,
    ) -> Result<Arc<dyn QueuePair>, VerbsError> {
        let raw = |cq: &Arc<dyn CompletionQueue>| {
            let key = Arc::as_ptr(cq) as *const () as usize;
            let cqs = self.ctx.cqs.lock().unwrap_or_else(|e| e.into_inner());
            cqs.get(&key)
                .map(|&p| p as *mut IbvCq)
                .ok_or_else(|| VerbsError::Call {
                    verb: "ibv_create_qp",
                    reason: "completion queue of another device or provider".to_string(),
                })
        };
        let (send_raw, recv_raw) = (raw(send_cq)?, raw(recv_cq)?);
        let qp = IbvQueuePair::new(
            self,
            [send_cq.clone(), recv_cq.clone()],
            send_raw,
            recv_raw,
            depth,
        )?;
        Ok(Arc::new(qp))
    }
}

/// A page-aligned anonymous mapping registered with `ibv_reg_mr`.
struct IbvRegion {
    ctx: Arc<Context>,
    mr: *mut IbvMr,
    base: *mut u8,
    len: usize,
    map_len: usize,
}

// SAFETY: the mapping is plain memory the CPU accesses through bounds-checked copies and
// atomics; the MR handle is only freed in Drop.
unsafe impl Send for IbvRegion {}
// SAFETY: as above (concurrent CPU access is through copies/atomics; races with the NIC
// are the transport's protocol, as the trait documents).
unsafe impl Sync for IbvRegion {}

impl IbvRegion {
    fn new(ctx: &Arc<Context>, len: usize) -> Result<IbvRegion, VerbsError> {
        // SAFETY: sysconf has no memory effects.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|&p| p > 0)
            .unwrap_or(4096);
        let map_len = len.max(1).div_ceil(page) * page;
        // SAFETY: a fresh private anonymous mapping (zeroed by the kernel); nothing else
        // refers to that address range.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(errno_error("mmap"));
        }
        // A node daemon forks its ranks after registering: without this, a page the daemon
        // writes between a fork and the child's exec would be copied on write, and the NIC
        // would go on using the old page, now the child's (what `ibv_fork_init` guards
        // against). The children never need these pages.
        // SAFETY: advice on our own fresh mapping; it changes only what fork copies.
        if unsafe { libc::madvise(base, map_len, libc::MADV_DONTFORK) } != 0 {
            let err = errno_error("madvise(MADV_DONTFORK)");
            // SAFETY: unmapping the mapping made above, not registered.
            unsafe { libc::munmap(base, map_len) };
            return Err(err);
        }
        let access = IBV_ACCESS_LOCAL_WRITE
            | IBV_ACCESS_REMOTE_WRITE
            | IBV_ACCESS_REMOTE_READ
            | IBV_ACCESS_REMOTE_ATOMIC;
        // SAFETY: `base..base+map_len` is our live mapping; the PD is open (held by `ctx`).
        let mr = unsafe { (ctx.lib.reg_mr)(ctx.pd, base, map_len, access) };
        if mr.is_null() {
            let err = io::Error::last_os_error();
            // SAFETY: unmapping the mapping made above, not registered.
            unsafe { libc::munmap(base, map_len) };
            return Err(match err.raw_os_error() {
                Some(libc::ENOMEM) | Some(libc::EPERM) => VerbsError::Limit(format!(
                    "ibv_reg_mr of {map_len} bytes failed: {err} (locked-memory limit too \
                     low? `ulimit -l unlimited`; docs/multi-host.md)"
                )),
                _ => VerbsError::Call {
                    verb: "ibv_reg_mr",
                    reason: err.to_string(),
                },
            });
        }
        Ok(IbvRegion {
            ctx: ctx.clone(),
            mr,
            base: base.cast(),
            len,
            map_len,
        })
    }

    fn check(&self, offset: usize, len: usize) {
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= self.len),
            "memory region access {offset}+{len} out of bounds ({} bytes)",
            self.len
        );
    }

    fn word(&self, offset: usize) -> &AtomicU64 {
        self.check(offset, 8);
        assert!(offset % 8 == 0, "unaligned 64-bit word at {offset}");
        // SAFETY: in bounds (checked), 8-byte aligned (the base is page-aligned), and the
        // mapping lives as long as `self`.
        unsafe { AtomicU64::from_ptr(self.base.add(offset).cast()) }
    }
}

impl MemoryRegion for IbvRegion {
    fn len(&self) -> usize {
        self.len
    }
    fn addr(&self) -> u64 {
        self.base as u64
    }
    fn lkey(&self) -> u32 {
        // SAFETY: `mr` is registered until Drop.
        unsafe { (*self.mr).lkey }
    }
    fn rkey(&self) -> u32 {
        // SAFETY: as above.
        unsafe { (*self.mr).rkey }
    }
    fn read(&self, offset: usize, buf: &mut [u8]) {
        self.check(offset, buf.len());
        // SAFETY: the source range is inside the mapping (checked) and does not overlap
        // the caller's buffer (which is not part of a region's mapping we hand out).
        unsafe { ptr::copy_nonoverlapping(self.base.add(offset), buf.as_mut_ptr(), buf.len()) }
    }
    fn write(&self, offset: usize, data: &[u8]) {
        self.check(offset, data.len());
        // SAFETY: as in `read`, the other way.
        unsafe { ptr::copy_nonoverlapping(data.as_ptr(), self.base.add(offset), data.len()) }
    }
    fn load_u64(&self, offset: usize) -> u64 {
        self.word(offset).load(Ordering::Acquire)
    }
    fn store_u64(&self, offset: usize, value: u64) {
        self.word(offset).store(value, Ordering::Release)
    }
}

impl Drop for IbvRegion {
    fn drop(&mut self) {
        // SAFETY: deregister first (the NIC stops using the pages), then unmap; each once.
        unsafe {
            (self.ctx.lib.dereg_mr)(self.mr);
            libc::munmap(self.base.cast(), self.map_len);
        }
    }
}

/// A completion queue with its own completion channel. Completions polled while arming
/// the notification in `wait` are kept in `stash` and handed out first by `poll`, so none
/// is lost and `wait` never sleeps on a completion that is already there.
struct IbvCompletionQueue {
    ctx: Arc<Context>,
    cq: *mut IbvCq,
    channel: *mut IbvCompChannel,
    stash: Mutex<VecDeque<Completion>>,
}

// SAFETY: CQ polling and arming are thread-safe in libibverbs; the stash has its lock.
unsafe impl Send for IbvCompletionQueue {}
// SAFETY: as above.
unsafe impl Sync for IbvCompletionQueue {}

impl IbvCompletionQueue {
    fn new(ctx: &Arc<Context>, depth: u32) -> Result<IbvCompletionQueue, VerbsError> {
        // SAFETY: the context is open.
        let channel = unsafe { (ctx.lib.create_comp_channel)(ctx.ctx) };
        if channel.is_null() {
            return Err(errno_error("ibv_create_comp_channel"));
        }
        // Non-blocking channel: `wait` polls the fd with a timeout, and another thread may
        // take the event between that poll and ibv_get_cq_event.
        // SAFETY: `fd` is the channel's open descriptor.
        unsafe {
            let fd = (*channel).fd;
            let flags = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
        let cqe = c_int::try_from(depth.max(1)).unwrap_or(c_int::MAX);
        // SAFETY: context and channel are live; no cq_context; completion vector 0.
        let cq = unsafe { (ctx.lib.create_cq)(ctx.ctx, cqe, ptr::null_mut(), channel, 0) };
        if cq.is_null() {
            let err = errno_error("ibv_create_cq");
            // SAFETY: the channel has no CQ yet; destroyed once.
            unsafe { (ctx.lib.destroy_comp_channel)(channel) };
            return Err(err);
        }
        Ok(IbvCompletionQueue {
            ctx: ctx.clone(),
            cq,
            channel,
            stash: Mutex::new(VecDeque::new()),
        })
    }

    /// `ibv_poll_cq` through the context's ops table, as the header's inline does.
    fn poll_raw(&self, out: &mut Vec<Completion>, max: usize) -> Result<usize, VerbsError> {
        const BATCH: usize = 32;
        // SAFETY: IbvWc is plain C data; zeroed is valid.
        let mut wcs: [IbvWc; BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: the context (held by `self.ctx`) is open; the ops table is filled by the
        // driver at open and never changes.
        let poll_cq = unsafe { (*self.ctx.ctx).ops.poll_cq }
            .ok_or_else(|| rc_error("ibv_poll_cq", libc::ENOSYS))?;
        let want = max.min(BATCH) as c_int;
        // SAFETY: `cq` is live; `wcs` has room for `want` entries.
        let n = unsafe { poll_cq(self.cq, want, wcs.as_mut_ptr()) };
        if n < 0 {
            return Err(rc_error("ibv_poll_cq", -n));
        }
        for wc in &wcs[..n as usize] {
            out.push(completion_from_wc(wc)?);
        }
        Ok(n as usize)
    }
}

/// Maps `ibv_wc_status`.
pub fn wc_status(raw: u32) -> WcStatus {
    match raw {
        IBV_WC_SUCCESS => WcStatus::Success,
        IBV_WC_REM_ACCESS_ERR => WcStatus::RemoteAccessError,
        IBV_WC_RETRY_EXC_ERR => WcStatus::RetryExceeded,
        IBV_WC_RNR_RETRY_EXC_ERR => WcStatus::RnrRetryExceeded,
        IBV_WC_WR_FLUSH_ERR => WcStatus::WrFlushError,
        IBV_WC_LOC_PROT_ERR | IBV_WC_LOC_LEN_ERR => WcStatus::LocalError,
        other => WcStatus::Other(other),
    }
}

/// Maps `ibv_wc_opcode` (None for opcodes the transport never causes: sends, reads).
pub fn wc_opcode(raw: u32) -> Option<WcOpcode> {
    match raw {
        IBV_WC_RDMA_WRITE => Some(WcOpcode::Write),
        IBV_WC_COMP_SWAP => Some(WcOpcode::CompareSwap),
        IBV_WC_FETCH_ADD => Some(WcOpcode::FetchAdd),
        IBV_WC_RECV_RDMA_WITH_IMM => Some(WcOpcode::RecvWithImm),
        _ => None,
    }
}

/// One `ibv_wc` as a [`Completion`]. On an error status libibverbs leaves `opcode`
/// undefined, so it is reported as `Write` (the interface says only `wr_id`, `status` and
/// `qp_num` mean anything then).
pub fn completion_from_wc(wc: &IbvWc) -> Result<Completion, VerbsError> {
    let status = wc_status(wc.status);
    let opcode = match (status, wc_opcode(wc.opcode)) {
        (_, Some(op)) => op,
        (WcStatus::Success, None) => {
            return Err(VerbsError::Call {
                verb: "ibv_poll_cq",
                reason: format!("unexpected completion opcode {}", wc.opcode),
            })
        }
        (_, None) => WcOpcode::Write,
    };
    let ok_recv = status == WcStatus::Success && opcode == WcOpcode::RecvWithImm;
    Ok(Completion {
        wr_id: wc.wr_id,
        status,
        opcode,
        qp_num: wc.qp_num,
        byte_len: if ok_recv { wc.byte_len } else { 0 },
        imm: (ok_recv && wc.wc_flags & IBV_WC_WITH_IMM != 0).then(|| u32::from_be(wc.imm_data)),
    })
}

impl CompletionQueue for IbvCompletionQueue {
    fn poll(&self, out: &mut Vec<Completion>, max: usize) -> Result<usize, VerbsError> {
        let mut taken = 0;
        {
            let mut stash = self.stash.lock().unwrap_or_else(|e| e.into_inner());
            while taken < max {
                match stash.pop_front() {
                    Some(c) => {
                        out.push(c);
                        taken += 1;
                    }
                    None => break,
                }
            }
        }
        while taken < max {
            let n = self.poll_raw(out, max - taken)?;
            if n == 0 {
                break;
            }
            taken += n;
        }
        Ok(taken)
    }

    fn wait(&self, timeout: Duration) -> Result<bool, VerbsError> {
        // SAFETY: as in poll_raw.
        let arm = unsafe { (*self.ctx.ctx).ops.req_notify_cq }
            .ok_or_else(|| rc_error("ibv_req_notify_cq", libc::ENOSYS))?;
        // SAFETY: `cq` is live; 0 = notify on any completion, not only solicited ones.
        let rc = unsafe { arm(self.cq, 0) };
        if rc != 0 {
            return Err(rc_error("ibv_req_notify_cq", rc));
        }
        // A completion that arrived before arming raises no event: look once more.
        let mut early = Vec::new();
        self.poll_raw(&mut early, 32)?;
        if !early.is_empty() {
            let mut stash = self.stash.lock().unwrap_or_else(|e| e.into_inner());
            stash.extend(early);
            return Ok(true);
        }
        // SAFETY: the channel is live until Drop.
        let fd = unsafe { (*self.channel).fd };
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = c_int::try_from(timeout.as_millis()).unwrap_or(c_int::MAX);
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut pfd, 1, ms) };
        if ready < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(VerbsError::Call {
                verb: "poll",
                reason: err.to_string(),
            });
        }
        if ready == 0 {
            return Ok(false);
        }
        let mut ev_cq: *mut IbvCq = ptr::null_mut();
        let mut ev_ctx: *mut c_void = ptr::null_mut();
        // SAFETY: channel live, out-pointers valid; the fd is non-blocking, so a lost race
        // for the event returns -1/EAGAIN instead of blocking.
        let got = unsafe { (self.ctx.lib.get_cq_event)(self.channel, &mut ev_cq, &mut ev_ctx) };
        if got == 0 {
            // SAFETY: one event of this CQ was taken; acknowledging it is required before
            // ibv_destroy_cq can return.
            unsafe { (self.ctx.lib.ack_cq_events)(ev_cq, 1) };
        }
        Ok(true)
    }
}

impl Drop for IbvCompletionQueue {
    fn drop(&mut self) {
        self.ctx
            .cqs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(self as *const Self as usize));
        // SAFETY: no QP refers to this CQ any more (each holds an Arc of it); every event
        // taken was acknowledged; the CQ goes before its channel, each once.
        unsafe {
            (self.ctx.lib.destroy_cq)(self.cq);
            (self.ctx.lib.destroy_comp_channel)(self.channel);
        }
    }
}
