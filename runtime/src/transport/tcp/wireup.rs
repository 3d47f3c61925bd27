//! Wire-up: every endpoint learns the others' addresses (from its caller), then node `i`
//! connects to every node `j < i` and accepts every node `j > i`, each connection
//! authenticated (see `transport::auth`): one connection per node pair, a full mesh.
//! Accepting runs on its own thread from the start, concurrently with connecting, so the
//! endpoints may start in any order (connects to a node not listening yet are retried
//! until the wire-up deadline).
//!
//! Where addresses come from is the caller's business: a list given on the command line
//! today; PMI's key-value space, Slurm's node list or an ssh launcher's output later. They
//! all fit the same two steps: [`super::TcpBinding::bind`] (then publish `local_addr`),
//! and [`super::TcpBinding::join`] with everybody's addresses.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use socket2::{SockRef, TcpKeepalive};
use strobe_schema::LinkMessage;

use super::frame;
use super::state::Shape;
use crate::transport::auth::{random_nonce, JobSecret, Role, Transcript};
use crate::transport::{NodeId, TransportError};

/// How long one handshake may take once connected.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

fn io(what: &str, e: impl std::fmt::Display) -> TransportError {
    TransportError::Io(format!("{what}: {e}"))
}

/// What both sides of a handshake know.
#[derive(Clone)]
pub struct Local {
    pub node: NodeId,
    pub shape: Shape,
    pub secret: JobSecret,
}

impl Local {
    fn transcript<'a>(
        &self,
        acceptor: u32,
        connector: u32,
        a: &'a [u8],
        c: &'a [u8],
    ) -> Transcript<'a> {
        Transcript {
            acceptor,
            connector,
            nodes: self.shape.nodes,
            global_size: self.shape.global_size as u64,
            events: self.shape.events,
            acceptor_nonce: a,
            connector_nonce: c,
        }
    }
}

fn read_message(stream: &mut TcpStream) -> io::Result<LinkMessage> {
    match frame::read(stream, 0)? {
        Some(f) => Ok(f.message),
        None => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the peer closed the connection",
        )),
    }
}

/// Socket options of an established node link: Nagle off (every frame is a whole
/// message someone waits for), keepalive probing and a user timeout so a vanished host
/// (no FIN, no RST) is noticed within seconds, and a send timeout so a peer that stops
/// reading cannot block a writer forever.
pub fn tune(stream: &TcpStream, request_timeout: Duration) -> Result<(), TransportError> {
    let s = SockRef::from(stream);
    s.set_tcp_nodelay(true).map_err(|e| io("TCP_NODELAY", e))?;
    let ka = TcpKeepalive::new()
        .with_time(Duration::from_secs(2))
        .with_interval(Duration::from_secs(1))
        .with_retries(3);
    s.set_tcp_keepalive(&ka).map_err(|e| io("keepalive", e))?;
    s.set_tcp_user_timeout(Some(request_timeout))
        .map_err(|e| io("TCP_USER_TIMEOUT", e))?;
    stream
        .set_write_timeout(Some(request_timeout))
        .map_err(|e| io("SO_SNDTIMEO", e))?;
    stream
        .set_read_timeout(None)
        .map_err(|e| io("SO_RCVTIMEO", e))
}

/// Connector side: connect to node `to` at `addr` (retrying refusals until `deadline`:
/// the peer may not be listening yet) and authenticate both ways.
pub fn connect(
    local: &Local,
    to: NodeId,
    addr: SocketAddr,
    deadline: Instant,
) -> Result<TcpStream, TransportError> {
    let mut stream = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(TransportError::Io(format!(
                "wire-up: node {to} at {addr} did not accept a connection in time"
            )));
        }
        match TcpStream::connect_timeout(&addr, left.min(Duration::from_secs(1))) {
            Ok(s) => break s,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionRefused | io::ErrorKind::TimedOut
                ) =>
            {
                thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(io(&format!("wire-up: connect to node {to} at {addr}"), e)),
        }
    };
    let fail = |e: io::Error| {
        TransportError::Io(format!(
            "wire-up: handshake with node {to} at {addr} failed: {e} \
             (refused: wrong job secret or job shape?)"
        ))
    };
    stream
        .set_read_timeout(Some(HANDSHAKE_TIMEOUT))
        .map_err(fail)?;
    stream.set_nodelay(true).map_err(fail)?;
    let (node, acceptor_nonce) = match read_message(&mut stream).map_err(fail)? {
        LinkMessage::Hello { node, nonce } => (node, nonce),
        other => {
            return Err(fail(io::Error::other(format!(
                "expected a hello, got {other:?}"
            ))))
        }
    };
    if node != to {
        return Err(TransportError::Io(format!(
            "wire-up: {addr} is node {node}, not node {to} (address list out of order?)"
        )));
    }
    let nonce = random_nonce()?;
    let t = local.transcript(to, local.node, &acceptor_nonce, &nonce);
    let auth = LinkMessage::Auth {
        node: local.node,
        nodes: local.shape.nodes,
        global_size: local.shape.global_size as u64,
        events: local.shape.events,
        nonce: nonce.to_vec(),
        mac: local.secret.prove(Role::Connector, &t),
    };
    frame::write(&mut stream, &auth, &[]).map_err(fail)?;
    match read_message(&mut stream).map_err(fail)? {
        LinkMessage::Accept { mac } if local.secret.verify(Role::Acceptor, &t, &mac) => Ok(stream),
        _ => Err(TransportError::Io(format!(
            "wire-up: node {to} at {addr} could not prove it holds the job secret"
        ))),
    }
}

/// Acceptor side of one connection: returns the connector's node id once it proved it
/// holds the secret and runs the same job shape.
fn accept_one(local: &Local, stream: &mut TcpStream) -> Result<NodeId, String> {
    stream
        .set_read_timeout(Some(HANDSHAKE_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let _ = stream.set_nodelay(true);
    let nonce = random_nonce().map_err(|e| e.to_string())?;
    let hello = LinkMessage::Hello {
        node: local.node,
        nonce: nonce.to_vec(),
    };
    frame::write(stream, &hello, &[]).map_err(|e| e.to_string())?;
    let msg = read_message(stream).map_err(|e| format!("no authentication: {e}"))?;
    let LinkMessage::Auth {
        node,
        nodes,
        global_size,
        events,
        nonce: theirs,
        mac,
    } = msg
    else {
        return Err(format!("expected an authentication, got {msg:?}"));
    };
    let t = local.transcript(local.node, node, &nonce, &theirs);
    if !local.secret.verify(Role::Connector, &t, &mac) {
        return Err(format!(
            "claims node {node} but failed authentication (wrong job secret)"
        ));
    }
    let shape = Shape {
        nodes,
        global_size: global_size as usize,
        events,
    };
    if shape != local.shape || global_size > usize::MAX as u64 {
        return Err(format!(
            "node {node} runs another job shape: {shape:?}, this is {:?}",
            local.shape
        ));
    }
    if node <= local.node || node >= nodes {
        return Err(format!(
            "node {node} may not connect to node {}",
            local.node
        ));
    }
    let accept = LinkMessage::Accept {
        mac: local.secret.prove(Role::Acceptor, &t),
    };
    frame::write(stream, &accept, &[]).map_err(|e| e.to_string())?;
    Ok(node)
}

/// Accepts until every node above `local.node` is connected, or `deadline`. Handshakes run
/// on their own threads so a silent or hostile client delays nobody; every refused
/// connection is logged and counted in `refused`. The listener is closed on return.
pub fn accept_all(
    local: &Local,
    listener: TcpListener,
    deadline: Instant,
    refused: &Arc<AtomicU64>,
) -> Result<Vec<(NodeId, TcpStream)>, TransportError> {
    let expected = (local.shape.nodes - local.node - 1) as usize;
    let mut got: Vec<(NodeId, TcpStream)> = Vec::new();
    listener
        .set_nonblocking(true)
        .map_err(|e| io("listener", e))?;
    let (tx, rx) = mpsc::channel::<(SocketAddr, Result<(NodeId, TcpStream), String>)>();
    // Only successful handshakes come back here; refusals are counted where they happen.
    while got.len() < expected {
        while let Ok((from, r)) = rx.try_recv() {
            match r {
                Ok((node, s)) if got.iter().all(|(n, _)| *n != node) => got.push((node, s)),
                Ok((node, _)) => refuse(
                    local,
                    refused,
                    from,
                    &format!("node {node} connected twice"),
                ),
                Err(why) => refuse(local, refused, from, &why),
            }
        }
        if got.len() == expected {
            break;
        }
        if Instant::now() >= deadline {
            let missing: Vec<u32> = (local.node + 1..local.shape.nodes)
                .filter(|n| got.iter().all(|(g, _)| g != n))
                .collect();
            return Err(TransportError::Io(format!(
                "wire-up: node {} waited in vain for nodes {missing:?} to connect",
                local.node
            )));
        }
        match listener.accept() {
            Ok((mut s, from)) => {
                let (local, tx, refused) = (local.clone(), tx.clone(), refused.clone());
                let _ = s.set_nonblocking(false);
                thread::spawn(move || match accept_one(&local, &mut s) {
                    Ok(n) => {
                        let _ = tx.send((from, Ok((n, s))));
                    }
                    // Counted and logged before the connection closes.
                    Err(why) => refuse(&local, &refused, from, &why),
                });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(io("wire-up: accept", e)),
        }
    }
    Ok(got)
}

fn refuse(local: &Local, refused: &AtomicU64, from: SocketAddr, why: &str) {
    refused.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(
        "node {}: refused a connection from {from}: {why}",
        local.node
    );
}
