//! The TCP transport: the BCS primitives between node endpoints in different processes or
//! on different hosts (docs/multi-host.md has the protocol and the design decisions).
//!
//! - **Topology**: a full mesh, one authenticated TCP connection per node pair
//!   ([`wireup`]), Nagle off. Every node keeps its own global memory and events locally.
//! - **Frames**: a length-prefixed Cap'n Proto header (schema `LinkMessage`) followed by a
//!   raw payload ([`frame`]).
//! - **Xfer-And-Signal** validates everything first (so a refusal moves nothing), sends the
//!   data to every remote destination at once, writes locally, then waits until every
//!   destination has applied it and signalled its event: when the call returns, the data is
//!   in place everywhere, as with the shm transport.
//! - **Test-Event** is local: spin for a short while, then sleep on a condition variable
//!   the link readers signal ([`state::Events`]).
//! - **Compare-And-Write** is serialised by a **coordinator at node 0**: a node sends its
//!   request to node 0, which runs one at a time: compare on every destination (in
//!   parallel), then, if it held everywhere, write everywhere and wait for every
//!   acknowledgement before answering. A single destination is compared and written in one
//!   step on that node. Every Compare-And-Write is thus one atomic step in one global
//!   order (sequential consistency) at the cost of 2 round trips (4 with a remote
//!   requester), which the strobe pays once per slice. Per-variable owners would spread
//!   that load, but the strobe uses one variable, so its owner would be the bottleneck
//!   all the same; a coordinator is simpler to reason about and to make fail cleanly.
//! - **Failures**: a peer that dies (EOF, reset) or vanishes (keepalive, TCP user timeout)
//!   breaks the endpoint: outstanding and later requests involving it fail with
//!   [`TransportError::Io`], and blocked Test-Events wake up with that error. A request
//!   unanswered for [`TcpConfig::request_timeout`] fails the same way. Nothing hangs.
//! - **Security**: see [`super::auth`]. The listener exists only during wire-up: once every
//!   peer is connected it is closed, and dropping the endpoint closes every connection.

pub(crate) mod frame;
mod link;
pub(crate) mod state;
mod wireup;

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use strobe_schema::LinkMessage;

use self::link::{cmp_to_link, wait, CawJob, Outcome, Peer, Unanswered};
use self::state::{Events, Memory, Shape};
use self::wireup::Local;
use super::auth::JobSecret;
use super::{CmpOp, EventId, NodeId, NodeSet, Transport, TransportError, Wait};

/// The coordinator of Compare-And-Write.
pub const COORDINATOR: NodeId = 0;

/// A job's TCP fabric parameters, the same on every endpoint.
#[derive(Clone, Debug)]
pub struct TcpConfig {
    pub nodes: u32,
    pub global_size: usize,
    pub events: u32,
    pub secret: JobSecret,
    /// How long wire-up may take (every peer started, listening and authenticated).
    pub wireup_timeout: Duration,
    /// How long a request may stay unanswered before it fails (also the TCP user timeout
    /// and the send timeout of every link).
    pub request_timeout: Duration,
}

impl TcpConfig {
    /// Defaults: 30 s for wire-up, 10 s per request.
    pub fn new(nodes: u32, global_size: usize, events: u32, secret: JobSecret) -> TcpConfig {
        TcpConfig {
            nodes,
            global_size,
            events,
            secret,
            wireup_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(10),
        }
    }
}

/// Step one of wire-up: an endpoint listening on its chosen address.
#[derive(Debug)]
pub struct TcpBinding {
    node: NodeId,
    config: TcpConfig,
    listener: TcpListener,
}

impl TcpBinding {
    /// Listens on `addr` (a chosen interface's address, port 0 for any free port).
    pub fn bind(
        node: NodeId,
        addr: SocketAddr,
        config: TcpConfig,
    ) -> Result<TcpBinding, TransportError> {
        if config.nodes == 0 || node >= config.nodes {
            return Err(TransportError::NoSuchNode {
                node,
                nodes: config.nodes,
            });
        }
        let listener = TcpListener::bind(addr)
            .map_err(|e| TransportError::Io(format!("listen on {addr}: {e}")))?;
        Ok(TcpBinding {
            node,
            config,
            listener,
        })
    }

    /// The address to publish to the other endpoints.
    pub fn local_addr(&self) -> Result<SocketAddr, TransportError> {
        self.listener
            .local_addr()
            .map_err(|e| TransportError::Io(e.to_string()))
    }

    /// Step two: connect to every other endpoint (`peers[n]` is node `n`'s address; this
    /// node's own entry is ignored) and start serving the links.
    pub fn join(self, peers: &[SocketAddr]) -> Result<TcpEndpoint, TransportError> {
        let cfg = &self.config;
        if peers.len() != cfg.nodes as usize {
            return Err(TransportError::Io(format!(
                "wire-up: {} addresses for a {}-node job",
                peers.len(),
                cfg.nodes
            )));
        }
        let local = Local {
            node: self.node,
            shape: Shape {
                nodes: cfg.nodes,
                global_size: cfg.global_size,
                events: cfg.events,
            },
            secret: cfg.secret.clone(),
        };
        let deadline = Instant::now() + cfg.wireup_timeout;
        let refused = Arc::new(AtomicU64::new(0));
        let acceptor = {
            let (local, refused, listener) = (local.clone(), refused.clone(), self.listener);
            thread::spawn(move || wireup::accept_all(&local, listener, deadline, &refused))
        };
        let mut streams = Vec::new();
        for (to, addr) in peers.iter().enumerate().take(self.node as usize) {
            streams.push((
                to as NodeId,
                wireup::connect(&local, to as NodeId, *addr, deadline)?,
            ));
        }
        let accepted = acceptor
            .join()
            .map_err(|_| TransportError::Io("wire-up: the accepting thread panicked".into()))??;
        streams.extend(accepted);
        TcpEndpoint::start(local, self.config.request_timeout, streams, refused)
    }
}

/// How long a failed write waits for the link's reader to say whether the peer left in
/// order ([`Shared::sent`]): the reader has only the frames in its buffer left to apply.
const GOODBYE_GRACE: Duration = Duration::from_secs(1);

/// Stack size of the link threads: they hold a frame buffer on the heap and recurse
/// nowhere, and a 64-node endpoint runs 126 of them.
const LINK_THREAD_STACK: usize = 256 * 1024;

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, TransportError> {
    thread::Builder::new()
        .name(name.into())
        .stack_size(LINK_THREAD_STACK)
        .spawn(f)
        .map_err(|e| TransportError::Io(format!("cannot start a link thread: {e}")))
}

/// What the link threads and the endpoint share.
pub(crate) struct Shared {
    node: NodeId,
    shape: Shape,
    memory: Memory,
    events: Events,
    /// Indexed by node; `None` for this node.
    peers: Vec<Option<Arc<Peer>>>,
    next_request: AtomicU64,
    /// Serialises Compare-And-Write (used at the coordinator only).
    caw_lock: Mutex<()>,
    coordinator: Mutex<Option<mpsc::Sender<CawJob>>>,
    broken: Mutex<Option<String>>,
    closing: AtomicBool,
    request_timeout: Duration,
}

impl Shared {
    fn is_closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }

    fn set_broken(&self, why: String) {
        self.broken
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(why);
        self.events.wake_all();
    }

    fn broken(&self) -> Option<String> {
        self.broken
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn peer(&self, node: NodeId) -> &Arc<Peer> {
        self.peers[node as usize]
            .as_ref()
            .expect("a node has no link to itself")
    }

    /// Waits for `node`'s answer. A peer that leaves a request unanswered that long is
    /// treated as lost (a partition, a hung daemon): its link is closed and the endpoint
    /// broken, so everything else waiting on it fails now rather than one timeout each.
    fn await_answer(
        &self,
        rx: mpsc::Receiver<Outcome>,
        node: NodeId,
        timeout: Duration,
    ) -> Result<bool, TransportError> {
        wait(rx, node, timeout).map_err(|e| match e {
            Unanswered::Failed(e) => e,
            Unanswered::TimedOut(why) => {
                tracing::warn!("{why}");
                self.set_broken(why.clone());
                self.peer(node).close(&why);
                TransportError::Io(why)
            }
        })
    }

    /// Passes on the outcome of a send to `node`. A write that failed breaks the endpoint
    /// at once, as a lost reader or an unanswered request does: the caller sees the error
    /// and every later wait fails too, whichever thread noticed first. Unless the peer
    /// left in order: at the end of a job node 0 leaves once it sent the last strobe, and
    /// a status push of ours it never read resets the link; our next write fails while
    /// that strobe may still wait unread here. Breaking the endpoint then failed a job
    /// that had ended well (its node manager, still to read the strobe, saw the failure).
    fn sent<T>(&self, node: NodeId, r: Result<T, TransportError>) -> Result<T, TransportError> {
        if r.is_err() {
            let peer = self.peer(node);
            if let Some(why) = peer.send_failure() {
                if !peer.left_in_order(GOODBYE_GRACE) {
                    self.set_broken(why.to_string());
                }
            }
        }
        r
    }

    fn request_id(&self) -> u64 {
        self.next_request.fetch_add(1, Ordering::Relaxed)
    }

    fn check_caw(
        &self,
        var: usize,
        dest: &NodeSet,
        write: Option<(usize, u64)>,
    ) -> Result<(), TransportError> {
        self.shape.check_var(var)?;
        if let Some((w, _)) = write {
            self.shape.check_var(w)?;
        }
        self.shape.check_set(dest)
    }

    /// Queues a remote node's Compare-And-Write for the coordinator thread.
    fn submit_caw(&self, job: CawJob) -> Result<(), TransportError> {
        self.check_caw(job.var, &job.dest, job.write)?;
        let tx = self.coordinator.lock().unwrap_or_else(|p| p.into_inner());
        match tx.as_ref() {
            Some(tx) => tx
                .send(job)
                .map_err(|_| TransportError::Io("the coordinator has stopped".into())),
            None => Err(TransportError::Io(format!(
                "node {} is not the Compare-And-Write coordinator",
                self.node
            ))),
        }
    }

    /// Sends `message` to every remote node of `dest` and waits for all answers; true when
    /// every answer was true. `local` runs on this node, if it is in `dest`, while the
    /// remote ones are in flight.
    fn fan_out(
        &self,
        dest: &NodeSet,
        message: impl Fn(u64) -> LinkMessage,
        payload: &[u8],
        local: impl FnOnce() -> bool,
    ) -> Result<bool, TransportError> {
        let mut waits = Vec::with_capacity(dest.len());
        for n in dest.iter().filter(|&n| n != self.node) {
            let id = self.request_id();
            let rx = self.sent(n, self.peer(n).request(id, &message(id), payload))?;
            waits.push((n, rx));
        }
        let mut all = if dest.contains(self.node) {
            local()
        } else {
            true
        };
        for (n, rx) in waits {
            all &= self.await_answer(rx, n, self.request_timeout)?;
        }
        Ok(all)
    }

    /// One Compare-And-Write, at the coordinator, in the global order.
    fn run_caw(
        &self,
        var: usize,
        op: CmpOp,
        value: u64,
        dest: &NodeSet,
        write: Option<(usize, u64)>,
    ) -> Result<bool, TransportError> {
        self.check_caw(var, dest, write)?;
        let _serial = self.caw_lock.lock().unwrap_or_else(|p| p.into_inner());
        let single = dest.len() == 1;
        // One destination: compare and write in one step there.
        let first_write = if single { write } else { None };
        let compare = |request| LinkMessage::Compare {
            request,
            var: var as u64,
            op: cmp_to_link(op),
            value,
            write: first_write.map(|(w, v)| (w as u64, v)),
        };
        let held = self.fan_out(dest, compare, &[], || {
            self.memory.compare_and_write(var, op, value, first_write)
        })?;
        let Some((w, v)) = write.filter(|_| held && !single) else {
            return Ok(held);
        };
        let store = |request| LinkMessage::Store {
            request,
            var: w as u64,
            value: v,
        };
        self.fan_out(dest, store, &[], || {
            self.memory.store(w, v);
            true
        })
    }
}

/// One node's endpoint on a TCP fabric. Dropping it says goodbye to every peer, closes
/// every connection and joins its threads.
pub struct TcpEndpoint {
    shared: Arc<Shared>,
    readers: Vec<JoinHandle<()>>,
    responders: Vec<JoinHandle<()>>,
    coordinator: Option<JoinHandle<()>>,
    refused: Arc<AtomicU64>,
}

impl std::fmt::Debug for TcpEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpEndpoint")
            .field("node", &self.shared.node)
            .field("shape", &self.shared.shape)
            .finish()
    }
}

impl TcpEndpoint {
    fn start(
        local: Local,
        request_timeout: Duration,
        streams: Vec<(NodeId, std::net::TcpStream)>,
        refused: Arc<AtomicU64>,
    ) -> Result<TcpEndpoint, TransportError> {
        let shape = local.shape;
        let mut peers: Vec<Option<Arc<Peer>>> = vec![None; shape.nodes as usize];
        let mut queues = Vec::new();
        for (node, stream) in streams {
            wireup::tune(&stream, request_timeout)?;
            let (peer, queue) = Peer::new(node, stream)?;
            peers[node as usize] = Some(peer.clone());
            queues.push((peer, queue));
        }
        let (caw_tx, caw_rx) = mpsc::channel();
        let is_coordinator = local.node == COORDINATOR;
        let shared = Arc::new(Shared {
            node: local.node,
            shape,
            memory: Memory::new(shape.global_size),
            events: Events::new(shape.events),
            peers,
            next_request: AtomicU64::new(1),
            caw_lock: Mutex::new(()),
            coordinator: Mutex::new(is_coordinator.then_some(caw_tx)),
            broken: Mutex::new(None),
            closing: AtomicBool::new(false),
            request_timeout,
        });
        // Built first, so a thread that fails to start tears the others down (Drop).
        let mut ep = TcpEndpoint {
            shared: shared.clone(),
            readers: Vec::new(),
            responders: Vec::new(),
            coordinator: None,
            refused,
        };
        for (peer, queue) in queues {
            let stream = peer.reader_stream()?;
            let (s, p) = (shared.clone(), peer.clone());
            ep.readers.push(spawn("strobe-tcp-rx", move || {
                link::reader_loop(s, p, stream)
            })?);
            ep.responders.push(spawn("strobe-tcp-tx", move || {
                link::responder_loop(peer, queue)
            })?);
        }
        if is_coordinator {
            ep.coordinator = Some(spawn("strobe-tcp-caw", move || {
                link::coordinator_loop(shared, caw_rx)
            })?);
        }
        Ok(ep)
    }

    /// A whole job in this process over loopback TCP: `nodes` endpoints, wired up
    /// concurrently, in node order. For tests and benchmarks.
    pub fn loopback_job(
        nodes: u32,
        global_size: usize,
        events: u32,
    ) -> Result<Vec<TcpEndpoint>, TransportError> {
        let config = TcpConfig::new(nodes, global_size, events, JobSecret::generate()?);
        let loopback: SocketAddr = ([127, 0, 0, 1], 0).into();
        let bindings = (0..nodes)
            .map(|n| TcpBinding::bind(n, loopback, config.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        let addrs = bindings
            .iter()
            .map(TcpBinding::local_addr)
            .collect::<Result<Vec<_>, _>>()?;
        thread::scope(|s| {
            let joins: Vec<_> = bindings
                .into_iter()
                .map(|b| s.spawn(|| b.join(&addrs)))
                .collect();
            joins
                .into_iter()
                .map(|j| j.join().expect("wire-up thread panicked"))
                .collect()
        })
    }

    /// How many connections wire-up refused (failed authentication, wrong job shape,
    /// duplicates). Each was also logged.
    pub fn refused_connections(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Why this endpoint's fabric is broken, if it is.
    pub fn failure(&self) -> Option<String> {
        self.shared.broken()
    }
}

impl Drop for TcpEndpoint {
    /// An orderly end, in an order that never loses an answer a peer waits for (say, the
    /// acknowledgement of its last xfer, whose signal this node may already have consumed):
    /// stop reading, let the readers finish the frames in hand, fail whatever this node
    /// still waits for, let the coordinator and the responders flush their answers, and
    /// only then say goodbye and close.
    fn drop(&mut self) {
        let s = &self.shared;
        s.closing.store(true, Ordering::SeqCst);
        for peer in s.peers.iter().flatten() {
            peer.stop_reading();
        }
        for t in self.readers.drain(..) {
            let _ = t.join();
        }
        for peer in s.peers.iter().flatten() {
            peer.close("the endpoint was closed");
        }
        s.coordinator
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(t) = self.coordinator.take() {
            let _ = t.join();
        }
        for peer in s.peers.iter().flatten() {
            peer.stop_answers();
        }
        for t in self.responders.drain(..) {
            let _ = t.join();
        }
        for peer in s.peers.iter().flatten() {
            peer.shut_down();
        }
    }
}

impl Transport for TcpEndpoint {
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
        let message = |request| LinkMessage::Xfer {
            request,
            offset: offset as u64,
            remote_event: remote.map(|e| e.0),
        };
        s.fan_out(dest, message, data, || {
            s.memory.write(offset, data);
            if let Some(e) = remote {
                s.events.signal(e);
            }
            true
        })?;
        if let Some(e) = local {
            s.events.signal(e);
        }
        Ok(())
    }

    /// Sent to every remote destination without waiting for an answer (request number
    /// `NO_ANSWER`): the peer's reader applies frames in link order, and a link that fails
    /// breaks the endpoint, which every later call reports.
    fn xfer_and_signal_nowait(
        &self,
        data: &[u8],
        dest: &NodeSet,
        offset: usize,
        remote: Option<EventId>,
    ) -> Result<(), TransportError> {
        let s = &self.shared;
        s.shape.check_range(offset, data.len())?;
        s.shape.check_set(dest)?;
        if let Some(e) = remote {
            s.shape.check_event(e)?;
        }
        if let Some(why) = s.broken() {
            return Err(TransportError::Io(why));
        }
        let message = LinkMessage::Xfer {
            request: link::NO_ANSWER,
            offset: offset as u64,
            remote_event: remote.map(|e| e.0),
        };
        for n in dest.iter().filter(|&n| n != s.node) {
            s.sent(n, s.peer(n).post(&message, data))?;
        }
        if dest.contains(s.node) {
            s.memory.write(offset, data);
            if let Some(e) = remote {
                s.events.signal(e);
            }
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
        s.check_caw(var, dest, write)?;
        if s.node == COORDINATOR {
            return s.run_caw(var, op, value, dest, write);
        }
        let id = s.request_id();
        let request = LinkMessage::CawRequest {
            request: id,
            var: var as u64,
            op: cmp_to_link(op),
            value,
            dest: dest.iter().collect(),
            write: write.map(|(w, v)| (w as u64, v)),
        };
        let rx = s.sent(COORDINATOR, s.peer(COORDINATOR).request(id, &request, &[]))?;
        // The coordinator may first run other nodes' requests: allow for a queue.
        s.await_answer(rx, COORDINATOR, s.request_timeout * 2)
    }

    fn read_local(&self, offset: usize, buf: &mut [u8]) -> Result<(), TransportError> {
        self.shared.shape.check_range(offset, buf.len())?;
        self.shared.memory.read(offset, buf);
        Ok(())
    }

    /// Under the memory's read lock: link readers writing other ranges wait meanwhile
    /// (the data plane holds it for one process_vm_writev of at most a staging window).
    fn with_local(
        &self,
        offset: usize,
        len: usize,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<(), TransportError> {
        self.shared.shape.check_range(offset, len)?;
        self.shared.memory.with(offset, len, f);
        Ok(())
    }

    fn load_var(&self, var: usize) -> Result<u64, TransportError> {
        self.shared.shape.check_var(var)?;
        Ok(self.shared.memory.load(var))
    }

    fn store_var(&self, var: usize, value: u64) -> Result<(), TransportError> {
        self.shared.shape.check_var(var)?;
        self.shared.memory.store(var, value);
        Ok(())
    }
}
