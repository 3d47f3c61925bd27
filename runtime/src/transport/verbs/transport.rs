//! The verbs transport: the BCS primitives over reliable-connected (RC) queue pairs,
//! through the narrow provider interface (`provider.rs`: libibverbs, or the in-process
//! emulation `emu.rs`). docs/multi-host.md ("verbs transport: protocol") has the summary.
//!
//! - **Topology**: a full mesh, one RC queue pair per node pair, every queue pair's send
//!   and receive completions on one completion queue per endpoint. No loopback queue pair:
//!   a node's own part of a primitive is a CPU access to its own region.
//! - **Memory**: one registered *global region* per node: the global memory, then request
//!   mailboxes (a slot per sender and slot number), answer words and notice words. Peers
//!   only ever write into it with RDMA WRITE (WITH IMMEDIATE). Everything a node sends comes
//!   from its *staging region*: `chunks` data chunks plus staged requests and answers.
//! - **Wire-up** in two steps, like `TcpBinding`: [`VerbsBinding::open`] opens the device,
//!   registers the regions, creates one queue pair per peer and posts its receives; its
//!   [`VerbsBinding::address`] is one line of text (shape, region address, rkey, and per
//!   peer QP number, PSN, LID and GID: LID for InfiniBand, GID for RoCE) that the daemons'
//!   fabric-address exchange (or PMI) carries unchanged; [`VerbsBinding::join`] connects
//!   every queue pair to its peer's (INIT → RTR → RTS) and starts the threads.
//! - **Immediates** (32 bits, `wire::Imm`): kind (xfer, request, answer, notice), a slot
//!   number, and for an xfer the event + 1.
//! - **Xfer-And-Signal** validates everything first, takes a *slot* towards every remote
//!   destination, then streams the data through the staging chunks: each chunk is copied
//!   once and posted as an RDMA WRITE to every destination, the last one as a WRITE WITH
//!   IMMEDIATE carrying the event and the slot (RC executes a queue pair's requests in
//!   order, and the responder sees the bytes before the receive completion). A chunk is
//!   reused when every write from it has completed, so large transfers pipeline through
//!   the chunks. The destination's completion thread signals the event and answers the
//!   slot with a write with immediate. The call returns once every destination answered:
//!   the data is in place *and the event signalled* everywhere, as with the shm and TCP
//!   transports (the engine relies on it). A signaled send completion would not do: RC
//!   acknowledges when the responder's NIC has the data, not when anyone polled the
//!   receive completion that signals the event.
//! - **Test-Event** is local: the completion thread (spin 50 µs on an empty queue, then
//!   sleep on the completion channel) signals the counting events; Test-Event spins, then
//!   sleeps on a condition variable, like the TCP transport. Every receive is reposted as
//!   soon as it is polled; slots bound what a peer can have in flight (`SLOTS` requests and
//!   `SLOTS` answers per queue pair), which sizes the receive and send queues: a missing
//!   receive (RNR) is a protocol error, never flow control.
//! - **Compare-And-Write** uses the TCP transport's **coordinator at node 0**, over
//!   requests in mailbox slots: compare on every destination, then write everywhere if it
//!   held everywhere; one step at a single destination. Each node's part runs on its CPU
//!   under a lock. Remote atomics (`CompareSwap` on a lock word) were the alternative: they
//!   would need a lock word taken, the compare, the writes and the release, 4+ round trips
//!   with retries under contention, and no CPU store may touch a word a NIC atomic touches
//!   (atomics are atomic only among themselves) while the engine stores variables locally.
//!   The coordinator gives one global order (sequential consistency) in 2 round trips (4
//!   from another node), once per slice, and fails cleanly.
//! - **Failures**: any error completion (remote access error, retry exceeded, RNR, flush),
//!   a refused post, a request unanswered for `request_timeout`, or a protocol error breaks
//!   the endpoint: outstanding and later calls return `TransportError::Io("verbs: node N:
//!   remote access error on an Xfer-And-Signal write to node M")` (and so on), blocked
//!   Test-Events wake with that error, and every peer gets a failure notice so the whole
//!   job fails at once. A closed endpoint says goodbye: later requests to it fail.

mod link;
mod state;
mod wire;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use self::link::{Peer, Shared, COORDINATOR};
use self::state::{Chunks, Layout, Slots, WrId};
use self::wire::{Address, Request, MAX_EVENTS, SLOTS};
use super::emu::EmuFabric;
use super::provider::{CompletionQueue, Device, MemoryRegion, Provider, QueuePair};
use crate::transport::tcp::state::{Events, Shape};
use crate::transport::{CmpOp, EventId, NodeId, NodeSet, Transport, TransportError, Wait};

/// A job's verbs fabric parameters, the same on every endpoint.
#[derive(Clone, Debug)]
pub struct VerbsConfig {
    pub nodes: u32,
    pub global_size: usize,
    pub events: u32,
    /// How long a request may stay unanswered before the endpoint breaks.
    pub request_timeout: Duration,
    /// Bytes per staging chunk, and how many chunks stream a large transfer.
    pub chunk_size: usize,
    pub chunks: usize,
}

impl VerbsConfig {
    /// Defaults: 10 s per request; 8 chunks of 256 KiB (2 MiB of staging per node).
    pub fn new(nodes: u32, global_size: usize, events: u32) -> VerbsConfig {
        VerbsConfig {
            nodes,
            global_size,
            events,
            request_timeout: Duration::from_secs(10),
            chunk_size: 256 * 1024,
            chunks: 8,
        }
    }
}

fn io(node: NodeId, what: impl std::fmt::Display) -> TransportError {
    TransportError::Io(format!("verbs: node {node}: {what}"))
}

/// The device and port to use: `choice` is `NAME` (its first active port), `NAME:PORT`,
/// or `None` (the first device with an active port).
fn choose_port(provider: &dyn Provider, choice: Option<&str>) -> Result<(String, u8), String> {
    let (want, want_port) = match choice.map(|c| c.split_once(':')) {
        Some(Some((name, port))) => {
            let port = port
                .parse::<u8>()
                .map_err(|_| format!("{port:?} is not a port number"))?;
            (Some(name), Some(port))
        }
        Some(None) => (choice, None),
        None => (None, None),
    };
    let devices = provider.devices().map_err(|e| e.to_string())?;
    devices
        .iter()
        .filter(|d| want.is_none_or(|w| d.name == w))
        .find_map(|d| {
            let p = d
                .ports
                .iter()
                .find(|p| p.active && want_port.is_none_or(|w| p.port == w))?;
            Some((d.name.clone(), p.port))
        })
        .ok_or_else(|| match choice {
            Some(c) => format!("no active port {c}"),
            None => "no device with an active port".to_string(),
        })
}

/// Step one of wire-up: the device open, the regions registered, one queue pair per peer
/// with its receives posted.
pub struct VerbsBinding {
    node: NodeId,
    config: VerbsConfig,
    layout: Layout,
    device: Arc<dyn Device>,
    region: Arc<dyn MemoryRegion>,
    staging: Arc<dyn MemoryRegion>,
    cq: Arc<dyn CompletionQueue>,
    qps: Vec<Option<Arc<dyn QueuePair>>>,
}

impl std::fmt::Debug for VerbsBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsBinding")
            .field("node", &self.node)
            .field("config", &self.config)
            .finish()
    }
}

impl VerbsBinding {
    /// Opens `device` (`NAME` or `NAME:PORT`; `None`: the first device with an active
    /// port) of `provider` for `node`.
    pub fn open(
        provider: &dyn Provider,
        device: Option<&str>,
        node: NodeId,
        config: VerbsConfig,
    ) -> Result<VerbsBinding, TransportError> {
        if config.nodes == 0 || node >= config.nodes {
            return Err(TransportError::NoSuchNode {
                node,
                nodes: config.nodes,
            });
        }
        if config.events > MAX_EVENTS || config.chunk_size == 0 || config.chunks == 0 {
            return Err(io(node, "events, chunk size or chunk count out of range"));
        }
        let (name, port) = choose_port(provider, device).map_err(|e| io(node, e))?;
        let dev = provider.open(&name, port).map_err(|e| io(node, e))?;
        let layout = Layout::new(
            config.nodes,
            config.global_size,
            config.chunk_size,
            config.chunks,
        );
        let region = dev
            .alloc_region(layout.region_len())
            .map_err(|e| io(node, e))?;
        let staging = dev
            .alloc_region(layout.staging_len())
            .map_err(|e| io(node, e))?;
        // Per queue pair, inbound: SLOTS requests and SLOTS answers, 2 notices. Outbound
        // the same plus the chunks, doubled for requests and answers: a slot comes back
        // with its answer, which may be polled before the send completion of the request
        // that used it, so a request and its successor can both hold a send queue entry.
        let depth = 4 * SLOTS + config.chunks as u32 + 8;
        let cq_depth = (config.nodes - 1).max(1) * 2 * depth + 64;
        let cq = dev.create_cq(cq_depth).map_err(|e| io(node, e))?;
        let mut qps = Vec::with_capacity(config.nodes as usize);
        for peer in 0..config.nodes {
            if peer == node {
                qps.push(None);
                continue;
            }
            let qp = dev.create_qp(&cq, &cq, depth).map_err(|e| io(node, e))?;
            for _ in 0..depth {
                qp.post_recv(WrId::Recv(peer).encode())
                    .map_err(|e| io(node, e))?;
            }
            qps.push(Some(qp));
        }
        Ok(VerbsBinding {
            node,
            config,
            layout,
            device: dev,
            region,
            staging,
            cq,
            qps,
        })
    }

    /// The address to publish to the other endpoints (one line of text).
    pub fn address(&self) -> String {
        Address {
            node: self.node,
            nodes: self.config.nodes,
            global_size: self.config.global_size,
            events: self.config.events,
            addr: self.region.addr(),
            rkey: self.region.rkey(),
            len: self.region.len(),
            qps: self
                .qps
                .iter()
                .map(|q| q.as_ref().map(|q| q.endpoint()))
                .collect(),
        }
        .encode()
    }

    /// Step two: connect every queue pair to its peer's (`peers[n]` is node `n`'s address;
    /// this node's own entry is checked like the others) and start the endpoint.
    pub fn join(self, peers: &[String]) -> Result<VerbsEndpoint, TransportError> {
        let (node, cfg) = (self.node, &self.config);
        if peers.len() != cfg.nodes as usize {
            return Err(io(
                node,
                format!(
                    "wire-up: {} addresses for a {}-node job",
                    peers.len(),
                    cfg.nodes
                ),
            ));
        }
        let mut remote = Vec::with_capacity(peers.len());
        for (n, text) in peers.iter().enumerate() {
            let a = Address::decode(text).map_err(|e| io(node, format!("wire-up: {e}")))?;
            if a.node != n as NodeId
                || a.nodes != cfg.nodes
                || a.global_size != cfg.global_size
                || a.events != cfg.events
                || a.len < self.layout.region_len()
            {
                return Err(io(
                    node,
                    format!("wire-up: node {n}'s address is for another job shape: {text:?}"),
                ));
            }
            remote.push(a);
        }
        let mut peer_list = Vec::with_capacity(peers.len());
        let mut peer_of_qp = HashMap::new();
        for (n, qp) in self.qps.into_iter().enumerate() {
            let Some(qp) = qp else {
                peer_list.push(None);
                continue;
            };
            let a = &remote[n];
            let theirs = a.qps[node as usize]
                .ok_or_else(|| io(node, format!("wire-up: node {n} has no queue pair for us")))?;
            qp.connect(&theirs).map_err(|e| io(node, e))?;
            peer_of_qp.insert(qp.qp_num(), n as NodeId);
            peer_list.push(Some(Peer {
                qp,
                addr: a.addr,
                rkey: a.rkey,
                slots: Slots::new(),
            }));
        }
        let shared = Arc::new(Shared {
            node,
            shape: Shape {
                nodes: cfg.nodes,
                global_size: cfg.global_size,
                events: cfg.events,
            },
            layout: self.layout,
            region: self.region,
            staging: self.staging,
            cq: self.cq,
            peers: peer_list,
            peer_of_qp,
            events: Events::new(cfg.events),
            chunks: Chunks::new(cfg.chunks),
            var_lock: Mutex::new(()),
            caw_lock: Mutex::new(()),
            coordinator: Mutex::new(None),
            broken: Mutex::new(None),
            closing: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            request_timeout: cfg.request_timeout,
        });
        VerbsEndpoint::start(shared, self.device)
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, TransportError> {
    thread::Builder::new()
        .name(name.into())
        .stack_size(256 * 1024)
        .spawn(f)
        .map_err(|e| TransportError::Io(format!("verbs: cannot start a thread: {e}")))
}

/// One node's endpoint on a verbs fabric. Dropping it says goodbye to every peer, drains
/// what it posted and joins its threads.
pub struct VerbsEndpoint {
    shared: Arc<Shared>,
    poller: Option<JoinHandle<()>>,
    coordinator: Option<JoinHandle<()>>,
    _device: Arc<dyn Device>,
}

impl std::fmt::Debug for VerbsEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsEndpoint")
            .field("node", &self.shared.node)
            .field("shape", &self.shared.shape)
            .finish()
    }
}

impl VerbsEndpoint {
    fn start(
        shared: Arc<Shared>,
        device: Arc<dyn Device>,
    ) -> Result<VerbsEndpoint, TransportError> {
        let mut ep = VerbsEndpoint {
            shared: shared.clone(),
            poller: None,
            coordinator: None,
            _device: device,
        };
        let s = shared.clone();
        ep.poller = Some(spawn("strobe-verbs-cq", move || s.poll_loop())?);
        if shared.node == COORDINATOR {
            let (tx, rx) = mpsc::channel();
            *state::lock(&shared.coordinator) = Some(tx);
            ep.coordinator = Some(spawn("strobe-verbs-caw", move || {
                shared.coordinator_loop(rx)
            })?);
        }
        Ok(ep)
    }

    /// A whole job in this process over an emulated fabric: node `n` on device `emu{n}`
    /// (the fabric needs at least `nodes` devices). For tests and the isolated-nodes mode.
    pub fn emulated_job(
        fabric: &EmuFabric,
        config: VerbsConfig,
    ) -> Result<Vec<VerbsEndpoint>, TransportError> {
        let bindings = (0..config.nodes)
            .map(|n| {
                let name = EmuFabric::device_name(n);
                VerbsBinding::open(fabric, Some(&name), n, config.clone())
            })
            .collect::<Result<Vec<_>, _>>()?;
        let addrs: Vec<String> = bindings.iter().map(VerbsBinding::address).collect();
        bindings.into_iter().map(|b| b.join(&addrs)).collect()
    }

    /// Why this endpoint's fabric is broken, if it is.
    pub fn failure(&self) -> Option<String> {
        self.shared.broken()
    }

    fn check(&self) -> Result<(), TransportError> {
        self.shared
            .broken()
            .map_or(Ok(()), |why| Err(TransportError::Io(why)))
    }
}

impl Drop for VerbsEndpoint {
    /// Stop taking Compare-And-Writes, let the completion thread say goodbye and drain
    /// what this node posted (answers a peer waits for), then destroy the queue pairs.
    fn drop(&mut self) {
        let s = &self.shared;
        state::lock(&s.coordinator).take();
        if let Some(t) = self.coordinator.take() {
            let _ = t.join();
        }
        s.closing.store(true, Ordering::SeqCst);
        if let Some(t) = self.poller.take() {
            let _ = t.join();
        }
        for p in s.peers.iter().flatten() {
            p.slots.close("the endpoint was closed");
        }
    }
}

impl Transport for VerbsEndpoint {
    fn node(&self) -> NodeId {
        self.shared.node
    }

    fn nodes(&self) -> u32 {
        self.shared.shape.nodes
    }

    fn global_size(&self) -> usize {
        self.shared.shape.global_size
    }

    fn events(&self) -> u32 {
        self.shared.shape.events
    }

    fn xfer_and_signal(
        &self,
        data: &[u8],
        dest: &NodeSet,
        offset: usize,
        local: Option<EventId>,
        remote: Option<EventId>,
    ) -> Result<(), TransportError> {
        let s = &self.shared;
        s.shape.check_range(offset, data.len())?;
        s.shape.check_set(dest)?;
        for e in local.iter().chain(remote.iter()) {
            s.shape.check_event(*e)?;
        }
        self.check()?;
        let mut remotes = Vec::with_capacity(dest.len());
        for n in dest.iter().filter(|&n| n != s.node) {
            match s.acquire_slot(n) {
                Ok(slot) => remotes.push((n, slot)),
                Err(e) => {
                    for (n, slot) in remotes {
                        s.peer(n).slots.release(slot);
                    }
                    return Err(e);
                }
            }
        }
        if !remotes.is_empty() {
            s.post_xfer(data, &remotes, offset, remote)?;
        }
        if dest.contains(s.node) {
            s.region.write(offset, data);
            if let Some(e) = remote {
                s.events.signal(e);
            }
        }
        for (n, slot) in remotes {
            s.await_answer(n, slot, s.request_timeout)?;
        }
        if let Some(e) = local {
            s.events.signal(e);
        }
        Ok(())
    }

    fn test_event(&self, event: EventId, wait: Wait) -> Result<bool, TransportError> {
        let s = &self.shared;
        s.shape.check_event(event)?;
        s.events.test(event, wait, &|| s.broken())
    }

    fn compare_and_write(
        &self,
        var: usize,
        op: CmpOp,
        value: u64,
        dest: &NodeSet,
        write: Option<(usize, u64)>,
    ) -> Result<bool, TransportError> {
        let s = &self.shared;
        s.shape.check_var(var)?;
        if let Some((w, _)) = write {
            s.shape.check_var(w)?;
        }
        s.shape.check_set(dest)?;
        self.check()?;
        if s.node == COORDINATOR {
            return s.run_caw(var, op, value, dest, write);
        }
        let request = Request::Caw {
            var,
            op,
            value,
            dest: dest.clone(),
            write,
        };
        let slot = s.send_request(COORDINATOR, &request)?;
        // The coordinator may first run other nodes' requests: allow for a queue.
        Ok(s.await_answer(COORDINATOR, slot, s.request_timeout * 2)? != 0)
    }

    fn read_local(&self, offset: usize, buf: &mut [u8]) -> Result<(), TransportError> {
        self.shared.shape.check_range(offset, buf.len())?;
        self.shared.region.read(offset, buf);
        Ok(())
    }

    fn load_var(&self, var: usize) -> Result<u64, TransportError> {
        self.shared.shape.check_var(var)?;
        Ok(self.shared.region.load_u64(var))
    }

    fn store_var(&self, var: usize, value: u64) -> Result<(), TransportError> {
        self.shared.shape.check_var(var)?;
        self.shared.store_local(var, value);
        Ok(())
    }
}
