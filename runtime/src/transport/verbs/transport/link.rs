//! What the endpoint, its completion thread and its coordinator thread share: posting
//! work requests, handling completions, running requests, and failing cleanly.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use crate::transport::tcp::state::{Events, Shape};
use crate::transport::{CmpOp, EventId, NodeId, NodeSet, TransportError};

use super::super::provider::{
    Completion, CompletionQueue, MemoryRegion, QueuePair, RemoteAddr, Sge, WcOpcode, WcStatus,
    WorkRequest,
};
use super::state::{lock, Chunks, Layout, Slots, Stop, WrId};
use super::wire::{Imm, Request, SLOTS};

/// The coordinator of Compare-And-Write.
pub const COORDINATOR: NodeId = 0;

/// How long the completion thread polls an empty queue before it sleeps on the
/// completion channel (as the TCP transport's Test-Event spins before it sleeps).
const SPIN: Duration = Duration::from_micros(50);

/// One peer: the queue pair to it, its global region, and this node's slots towards it.
pub(super) struct Peer {
    pub qp: Arc<dyn QueuePair>,
    pub addr: u64,
    pub rkey: u32,
    pub slots: Slots,
}

impl Peer {
    fn at(&self, offset: usize) -> RemoteAddr {
        RemoteAddr {
            addr: self.addr + offset as u64,
            rkey: self.rkey,
        }
    }
}

/// A remote node's Compare-And-Write, queued for the coordinator thread.
pub(super) struct CawJob {
    pub from: NodeId,
    pub slot: u32,
    pub var: usize,
    pub op: CmpOp,
    pub value: u64,
    pub dest: NodeSet,
    pub write: Option<(usize, u64)>,
}

pub(super) struct Shared {
    pub node: NodeId,
    pub shape: Shape,
    pub layout: Layout,
    pub region: Arc<dyn MemoryRegion>,
    pub staging: Arc<dyn MemoryRegion>,
    pub cq: Arc<dyn CompletionQueue>,
    /// Indexed by node; `None` for this node.
    pub peers: Vec<Option<Peer>>,
    pub peer_of_qp: HashMap<u32, NodeId>,
    pub events: Events,
    pub chunks: Chunks,
    /// Makes a local compare-then-write one step with respect to local variable stores.
    pub var_lock: Mutex<()>,
    /// Serialises Compare-And-Write (at the coordinator).
    pub caw_lock: Mutex<()>,
    pub coordinator: Mutex<Option<mpsc::Sender<CawJob>>>,
    pub broken: Mutex<Option<String>>,
    pub closing: AtomicBool,
    /// Send work requests posted whose completion has not been polled yet.
    pub in_flight: AtomicUsize,
    pub request_timeout: Duration,
}

fn status_text(status: WcStatus) -> String {
    match status {
        WcStatus::Success => "success".into(),
        WcStatus::RemoteAccessError => "remote access error".into(),
        WcStatus::RetryExceeded => "retry exceeded (peer unreachable)".into(),
        WcStatus::RnrRetryExceeded => "receiver not ready (no receive posted)".into(),
        WcStatus::WrFlushError => "work request flushed".into(),
        WcStatus::LocalError => "local protection or length error".into(),
        WcStatus::Other(n) => format!("completion status {n}"),
    }
}

impl Shared {
    pub fn peer(&self, node: NodeId) -> &Peer {
        self.peers[node as usize]
            .as_ref()
            .expect("a node has no queue pair to itself")
    }

    pub fn broken(&self) -> Option<String> {
        lock(&self.broken).clone()
    }

    fn check_ok(&self) -> Result<(), TransportError> {
        self.broken()
            .map_or(Ok(()), |why| Err(TransportError::Io(why)))
    }

    /// Breaks the endpoint (the first reason wins): every waiter wakes with the error, and
    /// every peer is told, so the whole job fails now rather than one timeout at a time.
    pub fn set_broken(&self, why: String) {
        {
            let mut b = lock(&self.broken);
            if b.is_some() {
                return;
            }
            tracing::warn!("{why}");
            *b = Some(why.clone());
        }
        for p in self.peers.iter().flatten() {
            p.slots.close(&why);
        }
        self.chunks.close(&why);
        self.events.wake_all();
        if !self.closing.load(Ordering::SeqCst) {
            self.notify_peers(Imm::Abort);
        }
    }

    /// Posts a goodbye or failure notice to every peer (best effort: errors are ignored).
    pub fn notify_peers(&self, imm: Imm) {
        for p in self.peers.iter().flatten() {
            let wr = WorkRequest::WriteWithImm {
                wr_id: WrId::Notice.encode(),
                local: self.staged(self.layout.out_notice(), 8),
                remote: p.at(self.layout.notice(self.node)),
                imm: imm.encode(),
                signaled: true,
            };
            self.in_flight.fetch_add(1, Ordering::SeqCst);
            if p.qp.post_send(wr).is_err() {
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    fn staged(&self, offset: usize, len: usize) -> Sge {
        Sge {
            mr: self.staging.clone(),
            offset,
            len,
        }
    }

    /// Posts one send work request to `node`; a refusal breaks the endpoint.
    fn post(&self, node: NodeId, wr: WorkRequest) -> Result<(), TransportError> {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.peer(node).qp.post_send(wr).map_err(|e| {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            let why = format!("verbs: node {}: posting to node {node}: {e}", self.node);
            self.set_broken(why.clone());
            TransportError::Io(why)
        })
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.request_timeout
    }

    /// A wait that ended without an answer: a timeout means the peer is lost (a hung or
    /// dead process keeps its NIC answering at the transport level): break the endpoint.
    fn stopped(&self, node: NodeId, stop: Stop, timeout: Duration) -> TransportError {
        match stop {
            Stop::Broken(why) => TransportError::Io(why),
            Stop::TimedOut => {
                let why = format!(
                    "verbs: node {}: node {node} left a request unanswered for {timeout:?}",
                    self.node
                );
                self.set_broken(why.clone());
                TransportError::Io(why)
            }
        }
    }

    pub fn acquire_slot(&self, node: NodeId) -> Result<u32, TransportError> {
        self.check_ok()?;
        self.peer(node)
            .slots
            .acquire(self.deadline())
            .map_err(|s| self.stopped(node, s, self.request_timeout))
    }

    pub fn await_answer(
        &self,
        node: NodeId,
        slot: u32,
        timeout: Duration,
    ) -> Result<u64, TransportError> {
        self.peer(node)
            .slots
            .await_answer(slot, Instant::now() + timeout)
            .map_err(|s| self.stopped(node, s, timeout))
    }

    /// Sends `request` to `node` in a fresh slot; returns the slot to await.
    pub fn send_request(&self, node: NodeId, request: &Request) -> Result<u32, TransportError> {
        let slot = self.acquire_slot(node)?;
        let at = self.layout.out_request(node, slot);
        self.staging.write(at, &request.encode(self.layout.nodes));
        let wr = WorkRequest::WriteWithImm {
            wr_id: WrId::Request.encode(),
            local: self.staged(at, self.layout.slot),
            remote: self.peer(node).at(self.layout.inbox(self.node, slot)),
            imm: Imm::Request { slot }.encode(),
            signaled: true,
        };
        self.post(node, wr)
            .inspect_err(|_| self.peer(node).slots.release(slot))?;
        Ok(slot)
    }

    /// Writes `data` at `offset` of every node of `remotes` (each with its slot), the last
    /// chunk with the immediate that signals `event` there: chunk by chunk through the
    /// staging buffers, each chunk posted to every destination before the next is copied.
    pub fn post_xfer(
        &self,
        data: &[u8],
        remotes: &[(NodeId, u32)],
        offset: usize,
        event: Option<EventId>,
    ) -> Result<(), TransportError> {
        let event = event.map(|e| e.0);
        if data.is_empty() {
            // Nothing to write: the signal alone, 8 bytes into the mailbox slot.
            for &(n, slot) in remotes {
                let wr = WorkRequest::WriteWithImm {
                    wr_id: WrId::Request.encode(),
                    local: self.staged(self.layout.out_request(n, slot), 8),
                    remote: self.peer(n).at(self.layout.inbox(self.node, slot)),
                    imm: Imm::Xfer { slot, event }.encode(),
                    signaled: true,
                };
                self.post(n, wr)?;
            }
            return Ok(());
        }
        let last = data.len().div_ceil(self.layout.chunk) - 1;
        for (i, part) in data.chunks(self.layout.chunk).enumerate() {
            let chunk = self
                .chunks
                .acquire(remotes.len(), self.deadline())
                .map_err(|stop| match stop {
                    Stop::Broken(why) => TransportError::Io(why),
                    Stop::TimedOut => {
                        let why = format!(
                            "verbs: node {}: no staging chunk came free within {:?} (writes are not completing)",
                            self.node, self.request_timeout
                        );
                        self.set_broken(why.clone());
                        TransportError::Io(why)
                    }
                })?;
            let at = self.layout.chunk_at(chunk);
            self.staging.write(at, part);
            for (k, &(n, slot)) in remotes.iter().enumerate() {
                let local = self.staged(at, part.len());
                let remote = self.peer(n).at(offset + i * self.layout.chunk);
                let wr_id = WrId::Chunk(chunk).encode();
                let wr = if i == last {
                    let imm = Imm::Xfer { slot, event }.encode();
                    WorkRequest::WriteWithImm {
                        wr_id,
                        local,
                        remote,
                        imm,
                        signaled: true,
                    }
                } else {
                    WorkRequest::Write {
                        wr_id,
                        local,
                        remote,
                        signaled: true,
                    }
                };
                if let Err(e) = self.post(n, wr) {
                    for _ in k..remotes.len() {
                        self.chunks.written(chunk);
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    fn answer(&self, node: NodeId, slot: u32, value: u64) -> Result<(), TransportError> {
        let at = self.layout.out_answer(node, slot);
        self.staging.store_u64(at, value);
        let wr = WorkRequest::WriteWithImm {
            wr_id: WrId::Answer.encode(),
            local: self.staged(at, 8),
            remote: self.peer(node).at(self.layout.answer(self.node, slot)),
            imm: Imm::Answer { slot }.encode(),
            signaled: true,
        };
        self.post(node, wr)
    }

    /// `global[var] OP value` here, and the write in the same step if it holds.
    pub fn compare_local(
        &self,
        var: usize,
        op: CmpOp,
        value: u64,
        write: Option<(usize, u64)>,
    ) -> bool {
        let _g = lock(&self.var_lock);
        let holds = op.holds(self.region.load_u64(var), value);
        if let (true, Some((w, v))) = (holds, write) {
            self.region.store_u64(w, v);
        }
        holds
    }

    pub fn store_local(&self, var: usize, value: u64) {
        let _g = lock(&self.var_lock);
        self.region.store_u64(var, value);
    }

    /// Sends `request(node)` to every remote node of `dest`, runs `local` here if this node
    /// is in `dest`, and waits for every answer: true when all were true.
    fn fan_out(
        &self,
        dest: &NodeSet,
        request: &Request,
        local: impl FnOnce() -> bool,
    ) -> Result<bool, TransportError> {
        let mut sent = Vec::with_capacity(dest.len());
        for n in dest.iter().filter(|&n| n != self.node) {
            sent.push((n, self.send_request(n, request)?));
        }
        let mut all = !dest.contains(self.node) || local();
        for (n, slot) in sent {
            all &= self.await_answer(n, slot, self.request_timeout)? != 0;
        }
        Ok(all)
    }

    /// One Compare-And-Write, at the coordinator, in the global order (as tcp.rs: compare
    /// everywhere, then write everywhere if it held everywhere; one step for one node).
    pub fn run_caw(
        &self,
        var: usize,
        op: CmpOp,
        value: u64,
        dest: &NodeSet,
        write: Option<(usize, u64)>,
    ) -> Result<bool, TransportError> {
        let _serial = lock(&self.caw_lock);
        self.check_ok()?;
        let single = dest.len() == 1;
        let first_write = if single { write } else { None };
        let compare = Request::Compare {
            var,
            op,
            value,
            write: first_write,
        };
        let held = self.fan_out(dest, &compare, || {
            self.compare_local(var, op, value, first_write)
        })?;
        let Some((w, v)) = write.filter(|_| held && !single) else {
            return Ok(held);
        };
        self.fan_out(dest, &Request::Store { var: w, value: v }, || {
            self.store_local(w, v);
            true
        })
    }

    /// The completion thread: polls, spins a little when idle, then sleeps on the
    /// completion channel. When the endpoint closes it says goodbye to every peer itself
    /// (so the goodbye follows every answer it posted, on each queue pair), then drains
    /// what it posted (at most a second) before the queue pairs are destroyed.
    pub fn poll_loop(&self) {
        let mut batch = Vec::with_capacity(64);
        let mut idle_since: Option<Instant> = None;
        let mut closed_at: Option<Instant> = None;
        loop {
            if self.closing.load(Ordering::SeqCst) {
                let t = *closed_at.get_or_insert_with(|| {
                    if self.broken().is_none() {
                        self.notify_peers(Imm::Bye);
                    }
                    Instant::now()
                });
                if self.in_flight.load(Ordering::SeqCst) == 0
                    || t.elapsed() > Duration::from_secs(1)
                {
                    return;
                }
            }
            batch.clear();
            match self.cq.poll(&mut batch, 64) {
                Err(e) => {
                    self.set_broken(format!("verbs: node {}: {e}", self.node));
                    return;
                }
                Ok(0) => {
                    let since = *idle_since.get_or_insert_with(Instant::now);
                    if since.elapsed() < SPIN {
                        std::hint::spin_loop();
                    } else if let Err(e) = self.cq.wait(Duration::from_millis(10)) {
                        self.set_broken(format!("verbs: node {}: {e}", self.node));
                        return;
                    }
                    continue;
                }
                Ok(_) => idle_since = None,
            }
            for c in &batch {
                self.on_completion(c);
            }
        }
    }

    fn on_completion(&self, c: &Completion) {
        let id = WrId::decode(c.wr_id);
        let peer = self.peer_of_qp.get(&c.qp_num).copied();
        if c.opcode != WcOpcode::RecvWithImm || c.status != WcStatus::Success {
            // A send completion (errors carry no reliable opcode: tell by the wr_id).
            if !matches!(id, Some(WrId::Recv(_))) {
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
            }
            if let Some(WrId::Chunk(chunk)) = id {
                self.chunks.written(chunk);
            }
            if c.status != WcStatus::Success && !self.closing.load(Ordering::SeqCst) {
                let what = id.map_or("a work request", WrId::describe);
                let to = peer.map_or_else(|| "an unknown peer".into(), |p| format!("node {p}"));
                self.set_broken(format!(
                    "verbs: node {}: {} on {what} to {to}",
                    self.node,
                    status_text(c.status)
                ));
            }
            return;
        }
        let Some(node) = peer else {
            return self.set_broken(format!(
                "verbs: node {}: a completion from unknown queue pair {}",
                self.node, c.qp_num
            ));
        };
        if let Err(e) = self.on_receive(node, c.imm) {
            self.set_broken(match e {
                TransportError::Io(why) => why,
                other => format!("verbs: node {}: from node {node}: {other}", self.node),
            });
        }
    }

    /// A write with immediate arrived from `node`: its bytes are in place.
    fn on_receive(&self, node: NodeId, imm: Option<u32>) -> Result<(), TransportError> {
        let p = self.peer(node);
        if let Err(e) = p.qp.post_recv(WrId::Recv(node).encode()) {
            return Err(TransportError::Io(format!(
                "verbs: node {}: reposting a receive for node {node}: {e}",
                self.node
            )));
        }
        let protocol = |what: String| {
            TransportError::Io(format!(
                "verbs: node {}: protocol error from node {node}: {what}",
                self.node
            ))
        };
        let imm = Imm::decode(imm.ok_or_else(|| protocol("a receive without immediate".into()))?);
        match imm {
            Imm::Xfer { slot, .. } | Imm::Request { slot } | Imm::Answer { slot }
                if slot >= SLOTS =>
            {
                Err(protocol(format!("slot {slot}")))
            }
            Imm::Xfer { slot, event } => {
                if let Some(e) = event {
                    self.shape.check_event(EventId(e))?;
                    self.events.signal(EventId(e));
                }
                self.answer(node, slot, 1)
            }
            Imm::Request { slot } => {
                let mut bytes = vec![0; self.layout.slot];
                self.region.read(self.layout.inbox(node, slot), &mut bytes);
                let request = Request::decode(&bytes, self.layout.nodes)
                    .ok_or_else(|| protocol(format!("an unreadable request in slot {slot}")))?;
                self.run_request(node, slot, request)
            }
            Imm::Answer { slot } => {
                let v = self.region.load_u64(self.layout.answer(node, slot));
                p.slots.complete(slot, v);
                Ok(())
            }
            Imm::Bye => {
                p.slots.close(&format!(
                    "verbs: node {}: node {node} closed its endpoint",
                    self.node
                ));
                Ok(())
            }
            Imm::Abort => {
                self.set_broken(format!(
                    "verbs: node {}: node {node} reported a transport failure",
                    self.node
                ));
                Ok(())
            }
        }
    }

    fn run_request(&self, node: NodeId, slot: u32, r: Request) -> Result<(), TransportError> {
        match r {
            Request::Compare {
                var,
                op,
                value,
                write,
            } => {
                self.shape.check_var(var)?;
                if let Some((w, _)) = write {
                    self.shape.check_var(w)?;
                }
                let held = self.compare_local(var, op, value, write);
                self.answer(node, slot, u64::from(held))
            }
            Request::Store { var, value } => {
                self.shape.check_var(var)?;
                self.store_local(var, value);
                self.answer(node, slot, 1)
            }
            Request::Caw {
                var,
                op,
                value,
                dest,
                write,
            } => {
                self.shape.check_var(var)?;
                if let Some((w, _)) = write {
                    self.shape.check_var(w)?;
                }
                self.shape.check_set(&dest)?;
                let job = CawJob {
                    from: node,
                    slot,
                    var,
                    op,
                    value,
                    dest,
                    write,
                };
                let tx = lock(&self.coordinator);
                match tx.as_ref() {
                    Some(tx) => tx.send(job).map_err(|_| {
                        TransportError::Io("verbs: the coordinator has stopped".into())
                    }),
                    None if self.node != COORDINATOR => Err(TransportError::Io(format!(
                        "verbs: node {}: node {node} sent a Compare-And-Write to a node that is not the coordinator",
                        self.node
                    ))),
                    None => Ok(()), // closing
                }
            }
        }
    }

    /// The coordinator thread: runs remote nodes' Compare-And-Writes one at a time.
    pub fn coordinator_loop(&self, jobs: mpsc::Receiver<CawJob>) {
        for j in jobs {
            match self.run_caw(j.var, j.op, j.value, &j.dest, j.write) {
                Ok(held) => {
                    if self.answer(j.from, j.slot, u64::from(held)).is_err() {
                        return;
                    }
                }
                // Broken: every peer has been told, the requester fails too.
                Err(_) => return,
            }
        }
    }
}
