//! One node link (a TCP connection to one peer endpoint) and the threads serving it.
//!
//! Threads per link: a *reader* that applies what the peer asks (writes into global memory,
//! signals events, answers compares) and completes this endpoint's outstanding requests,
//! and a *responder* that writes the reader's answers. The reader never writes to a socket
//! itself: if it did, two endpoints sending each other large frames could each wait for
//! the other's reader to drain a full socket buffer while that reader waits to write an
//! answer. Callers write their requests directly (under the link's write lock) and wait for
//! the answer on a channel; node 0 also runs the Compare-And-Write coordinator thread.

use std::collections::HashMap;
use std::io::{BufReader, Read as _};
use std::net::{Shutdown, TcpStream};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use strobe_schema::{LinkCmp, LinkMessage};

use super::frame;
use super::Shared;
use crate::transport::{CmpOp, EventId, NodeId, NodeSet, TransportError};

/// The request number of a message that wants no answer (an Xfer-And-Signal sent with
/// `xfer_and_signal_nowait`). Real requests are numbered from 1.
pub const NO_ANSWER: u64 = 0;

/// What a request's answer carries: the outcome (a comparison's result, or true), or the
/// peer's refusal / the link's failure as text.
pub type Outcome = Result<bool, String>;

/// The responder's queue: encoded answer frames; `None` stops it.
pub type AnswerQueue = Receiver<Option<Vec<u8>>>;

struct Pending {
    waiting: HashMap<u64, SyncSender<Outcome>>,
    /// Set once the link is gone: why. New requests fail at once with it.
    closed: Option<String>,
}

/// This endpoint's side of the link to `node`.
pub struct Peer {
    pub node: NodeId,
    writer: Mutex<TcpStream>,
    /// A second handle on the socket, to shut it down while a writer may hold the lock.
    control: TcpStream,
    pending: Mutex<Pending>,
    answers: Mutex<Sender<Option<Vec<u8>>>>,
    /// Set when a write on this link failed (a reset, or the TCP user timeout of a peer
    /// that vanished): unlike a peer that said goodbye, that breaks the whole fabric.
    send_failure: OnceLock<String>,
    /// Set by the reader when it ends: whether the peer said goodbye first.
    reader_end: Mutex<Option<bool>>,
    reader_ended: Condvar,
}

/// A remote Compare-And-Write waiting for the coordinator (node 0).
pub struct CawJob {
    pub from: Arc<Peer>,
    pub request: u64,
    pub var: usize,
    pub op: CmpOp,
    pub value: u64,
    pub dest: NodeSet,
    pub write: Option<(usize, u64)>,
}

pub fn cmp_to_link(op: CmpOp) -> LinkCmp {
    match op {
        CmpOp::Ge => LinkCmp::Ge,
        CmpOp::Lt => LinkCmp::Lt,
        CmpOp::Eq => LinkCmp::Eq,
        CmpOp::Ne => LinkCmp::Ne,
    }
}

fn cmp_from_link(op: LinkCmp) -> CmpOp {
    match op {
        LinkCmp::Ge => CmpOp::Ge,
        LinkCmp::Lt => CmpOp::Lt,
        LinkCmp::Eq => CmpOp::Eq,
        LinkCmp::Ne => CmpOp::Ne,
    }
}

fn io(e: impl std::fmt::Display) -> TransportError {
    TransportError::Io(e.to_string())
}

impl Peer {
    /// Wraps an authenticated stream; returns the peer and the responder's queue end.
    pub fn new(
        node: NodeId,
        stream: TcpStream,
    ) -> Result<(Arc<Peer>, AnswerQueue), TransportError> {
        let control = stream.try_clone().map_err(io)?;
        let (tx, rx) = mpsc::channel();
        let peer = Peer {
            node,
            writer: Mutex::new(stream),
            control,
            pending: Mutex::new(Pending {
                waiting: HashMap::new(),
                closed: None,
            }),
            answers: Mutex::new(tx),
            send_failure: OnceLock::new(),
            reader_end: Mutex::new(None),
            reader_ended: Condvar::new(),
        };
        Ok((Arc::new(peer), rx))
    }

    pub fn reader_stream(&self) -> Result<TcpStream, TransportError> {
        self.control.try_clone().map_err(io)
    }

    fn write_bytes(&self, bytes: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        w.write_all(bytes)
    }

    /// Writes one frame, its payload straight from `payload` (no frame buffer).
    fn send(&self, message: &LinkMessage, payload: &[u8]) -> Result<(), TransportError> {
        let head = frame::head(message, payload.len());
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        frame::write_parts(&mut *w, &head, payload).map_err(|e| {
            drop(w);
            let why = format!("link to node {}: send failed: {e}", self.node);
            let _ = self.send_failure.set(why.clone());
            self.close(&why);
            TransportError::Io(why)
        })
    }

    /// Why a write on this link failed, if one did.
    pub fn send_failure(&self) -> Option<&str> {
        self.send_failure.get().map(String::as_str)
    }

    /// Whether the peer left in order (said goodbye), waiting at most `grace` for this
    /// link's reader to finish what the peer sent. A write can fail before the reader has
    /// read the peer's last frames: a node that ends its part of the job closes its socket
    /// with frames of ours unread, which resets the connection, and our next write fails
    /// while its strobe and goodbye still wait in our receive buffer.
    pub fn left_in_order(&self, grace: Duration) -> bool {
        let deadline = Instant::now() + grace;
        let mut end = self.reader_end.lock().unwrap_or_else(|p| p.into_inner());
        while end.is_none() {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return false;
            };
            end = match self.reader_ended.wait_timeout(end, left) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        *end == Some(true)
    }

    fn reader_ends(&self, said_goodbye: bool) {
        *self.reader_end.lock().unwrap_or_else(|p| p.into_inner()) = Some(said_goodbye);
        self.reader_ended.notify_all();
    }

    /// Sends a request and returns where its answer will arrive.
    pub fn request(
        &self,
        request: u64,
        message: &LinkMessage,
        payload: &[u8],
    ) -> Result<Receiver<Outcome>, TransportError> {
        let (tx, rx) = mpsc::sync_channel(1);
        {
            let mut p = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(why) = &p.closed {
                return Err(TransportError::Io(why.clone()));
            }
            p.waiting.insert(request, tx);
        }
        self.send(message, payload)?;
        Ok(rx)
    }

    /// Sends a message that wants no answer (request number [`NO_ANSWER`]): it is applied
    /// at the peer in link order, after everything sent before it.
    pub fn post(&self, message: &LinkMessage, payload: &[u8]) -> Result<(), TransportError> {
        if let Some(why) = &self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .closed
        {
            return Err(TransportError::Io(why.clone()));
        }
        self.send(message, payload)
    }

    /// Queues an answer for the responder thread.
    pub fn answer(&self, request: u64, outcome: Outcome) {
        let bytes = frame::encode(&LinkMessage::Reply { request, outcome }, &[]);
        let tx = self.answers.lock().unwrap_or_else(|p| p.into_inner());
        let _ = tx.send(Some(bytes));
    }

    fn complete(&self, request: u64, outcome: Outcome) {
        let tx = {
            let mut p = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            p.waiting.remove(&request)
        };
        // An answer nobody waits for (the caller timed out) is dropped.
        if let Some(tx) = tx {
            let _ = tx.try_send(outcome);
        }
    }

    /// The link is gone: every outstanding and future request fails with `why`.
    pub fn close(&self, why: &str) {
        let waiting = {
            let mut p = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            p.closed.get_or_insert_with(|| why.to_string());
            std::mem::take(&mut p.waiting)
        };
        for (_, tx) in waiting {
            let _ = tx.try_send(Err(why.to_string()));
        }
    }

    /// First step of an orderly end: read nothing more (the reader sees the end of the
    /// stream once it finished the frame in hand, whose answer it has queued by then).
    pub fn stop_reading(&self) {
        let _ = self.control.shutdown(Shutdown::Read);
    }

    /// Next step: the responder writes what it has queued, then stops.
    pub fn stop_answers(&self) {
        let tx = self.answers.lock().unwrap_or_else(|p| p.into_inner());
        let _ = tx.send(None);
    }

    /// Last step of an orderly end (after the responder stopped, so every answer already
    /// queued went out first): says goodbye (best effort) and shuts the socket down, which
    /// ends the reader.
    pub fn shut_down(&self) {
        self.close("the endpoint was closed");
        let bye = frame::encode(&LinkMessage::Goodbye, &[]);
        // Not under the write lock if a stuck writer holds it: then the peer sees EOF only.
        if let Ok(mut w) = self.writer.try_lock() {
            use std::io::Write;
            let _ = w.write_all(&bye);
        }
        let _ = self.control.shutdown(Shutdown::Both);
    }
}

/// Why no answer came.
pub enum Unanswered {
    /// The peer refused, or the link failed.
    Failed(TransportError),
    /// Nothing within the timeout (the text says so).
    TimedOut(String),
}

/// Waits for one answer from `node`.
pub fn wait(rx: Receiver<Outcome>, node: NodeId, timeout: Duration) -> Result<bool, Unanswered> {
    match rx.recv_timeout(timeout) {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(why)) => Err(Unanswered::Failed(TransportError::Io(why))),
        Err(RecvTimeoutError::Timeout) => Err(Unanswered::TimedOut(format!(
            "node {node} did not answer within {timeout:?}"
        ))),
        Err(RecvTimeoutError::Disconnected) => Err(Unanswered::Failed(TransportError::Io(
            format!("link to node {node} closed"),
        ))),
    }
}

/// The responder thread: writes queued answers until told to stop or the link fails.
pub fn responder_loop(peer: Arc<Peer>, queue: AnswerQueue) {
    while let Ok(Some(bytes)) = queue.recv() {
        if peer.write_bytes(&bytes).is_err() {
            break;
        }
    }
}

/// The reader thread of the link to `peer`.
pub fn reader_loop(shared: Arc<Shared>, peer: Arc<Peer>, stream: TcpStream) {
    let mut input = BufReader::with_capacity(1 << 16, stream);
    let lost = loop {
        match read_and_handle(&shared, &peer, &mut input) {
            Ok(true) => {}
            Ok(false) => break None,
            Err(why) => break Some(why),
        }
    };
    peer.reader_ends(lost.is_none());
    if shared.is_closing() {
        return;
    }
    match lost {
        None => peer.close(&format!("node {} has left the job", peer.node)),
        Some(reason) => {
            let why = format!("link to node {} lost: {reason}", peer.node);
            tracing::warn!("{why}");
            // Broken first: a sender that finds the link closed then finds the endpoint
            // broken too.
            shared.set_broken(why.clone());
            peer.close(&why);
        }
    }
}

/// Reads and applies one frame. `Ok(false)`: the peer said goodbye. `Err`: the link is
/// lost (the stream ended, failed, or broke the protocol).
fn read_and_handle(
    shared: &Arc<Shared>,
    peer: &Arc<Peer>,
    input: &mut BufReader<TcpStream>,
) -> Result<bool, String> {
    let head = match frame::read_head(input, shared.shape.global_size) {
        Ok(Some(h)) => h,
        Ok(None) => return Err("it closed the link without a goodbye (died?)".to_string()),
        Err(e) => return Err(format!("{e}")),
    };
    if let LinkMessage::Xfer {
        request,
        offset,
        remote_event,
    } = head.message
    {
        let outcome = receive_xfer(shared, input, offset, head.payload_len, remote_event)
            .map_err(|e| format!("{e}"))?;
        return match (request, outcome) {
            (NO_ANSWER, Ok(_)) => Ok(true),
            // Nobody hears a refusal of a message that wants no answer: the peer broke
            // the protocol (it checks the same shape before sending).
            (NO_ANSWER, Err(e)) => Err(format!("an unanswered transfer was refused: {e}")),
            (request, outcome) => {
                peer.answer(request, outcome.map_err(|e| e.to_string()));
                Ok(true)
            }
        };
    }
    // Only transfers carry data: any other message's payload is read and dropped.
    frame::read_payload(input, head.payload_len).map_err(|e| format!("{e}"))?;
    handle(shared, peer, head.message)
}

/// A peer's Xfer-And-Signal to this node: checked again (a peer is trusted only as far as
/// its authentication), its payload read from the socket straight into global memory,
/// then signalled. A refused one's payload is read and dropped (the stream stays in
/// step). The outer error: the stream failed.
fn receive_xfer(
    shared: &Shared,
    input: &mut impl std::io::Read,
    offset: u64,
    len: usize,
    remote_event: Option<u32>,
) -> std::io::Result<Result<bool, TransportError>> {
    let checked = usize::try_from(offset)
        .map_err(|_| TransportError::OutOfBounds {
            offset: usize::MAX,
            end: usize::MAX,
            size: shared.shape.global_size,
        })
        .and_then(|offset| {
            shared.shape.check_range(offset, len)?;
            if let Some(e) = remote_event {
                shared.shape.check_event(EventId(e))?;
            }
            Ok(offset)
        });
    let offset = match checked {
        Ok(o) => o,
        Err(e) => {
            std::io::copy(&mut input.take(len as u64), &mut std::io::sink())?;
            return Ok(Err(e));
        }
    };
    shared.memory.fill_from(offset, len, input)?;
    if let Some(e) = remote_event {
        shared.events.signal(EventId(e));
    }
    Ok(Ok(true))
}

/// The coordinator's compare (and, for a single destination, write) on this node.
fn apply_compare(
    shared: &Shared,
    var: usize,
    op: CmpOp,
    value: u64,
    write: Option<(usize, u64)>,
) -> Result<bool, TransportError> {
    shared.shape.check_var(var)?;
    if let Some((w, _)) = write {
        shared.shape.check_var(w)?;
    }
    Ok(shared.memory.compare_and_write(var, op, value, write))
}

/// Applies one frame. `Ok(false)`: the peer said goodbye. `Err`: a protocol violation.
fn handle(shared: &Arc<Shared>, peer: &Arc<Peer>, message: LinkMessage) -> Result<bool, String> {
    let shape = &shared.shape;
    let refuse = |request, e: TransportError| peer.answer(request, Err(e.to_string()));
    match message {
        LinkMessage::Compare {
            request,
            var,
            op,
            value,
            write,
        } => {
            let write = write.map(|(w, v)| (w as usize, v));
            let outcome = apply_compare(shared, var as usize, cmp_from_link(op), value, write);
            peer.answer(request, outcome.map_err(|e| e.to_string()));
        }
        LinkMessage::Store {
            request,
            var,
            value,
        } => match shape.check_var(var as usize) {
            Err(e) => refuse(request, e),
            Ok(()) => {
                shared.memory.store(var as usize, value);
                peer.answer(request, Ok(true));
            }
        },
        LinkMessage::CawRequest {
            request,
            var,
            op,
            value,
            dest,
            write,
        } => {
            let job = CawJob {
                from: peer.clone(),
                request,
                var: var as usize,
                op: cmp_from_link(op),
                value,
                dest: NodeSet::from_nodes(dest),
                write: write.map(|(w, v)| (w as usize, v)),
            };
            if let Err(e) = shared.submit_caw(job) {
                refuse(request, e);
            }
        }
        LinkMessage::Reply { request, outcome } => peer.complete(request, outcome),
        LinkMessage::Goodbye => return Ok(false),
        other => return Err(format!("unexpected message after the handshake: {other:?}")),
    }
    Ok(true)
}

/// The coordinator thread (node 0): runs remote Compare-And-Writes one at a time.
pub fn coordinator_loop(shared: Arc<Shared>, jobs: Receiver<CawJob>) {
    while let Ok(job) = jobs.recv() {
        let outcome = shared
            .run_caw(job.var, job.op, job.value, &job.dest, job.write)
            .map_err(|e| e.to_string());
        job.from.answer(job.request, outcome);
    }
}
