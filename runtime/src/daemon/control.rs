//! The control connection between a node daemon and the Machine Manager.
//!
//! Frames as on node links (`transport/tcp/frame.rs`): `u32 LE header length | u32 LE
//! payload length | header | payload`. The connection opens with the node links' mutual
//! HMAC handshake (`transport/auth.rs`, `LinkHello`/`LinkAuth`/`LinkAccept` headers): the
//! Machine Manager accepts as node `nodes` (one past the last daemon), the daemon connects
//! as its node index, and the transcript's global size is [`CONTROL_SHAPE`], which no
//! fabric uses, so a proof made for a control connection is never valid on a node link.
//! Every later header is a packed `ControlMessage`; its payload carries the bulk bytes
//! (rank output, sink frames) raw.

use std::io::{self, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Mutex;
use std::time::Duration;

use socket2::{SockRef, TcpKeepalive};
use strobe_schema::{
    decode_control_message, decode_link_message, encode_control_message, encode_link_message,
    ControlMessage, LinkMessage,
};

use super::DaemonError;
use crate::transport::auth::{random_nonce, JobSecret, Role, Transcript};
use crate::transport::tcp::frame::{frame_bytes, Limits};

/// The global size a control handshake's transcript names: no fabric has it.
pub const CONTROL_SHAPE: u64 = u64::MAX;
/// The largest header accepted on a control connection.
pub const MAX_HEADER: usize = 1 << 20;
/// The largest payload accepted (a sink frame or a chunk of rank output).
pub const MAX_PAYLOAD: usize = 64 << 20;
/// How long a handshake may take once connected.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Every side sends a heartbeat this often.
pub const HEARTBEAT_EVERY: Duration = Duration::from_millis(500);
/// A peer silent for this long is lost (four heartbeats missed).
pub const HEARTBEAT_LATE: Duration = Duration::from_secs(2);

/// When a connection last delivered anything, updated by its reader thread (so a busy
/// main loop never mistakes its own delay for a silent peer).
#[derive(Debug)]
pub struct LastHeard {
    base: std::time::Instant,
    ms: std::sync::atomic::AtomicU64,
}

impl Default for LastHeard {
    fn default() -> Self {
        LastHeard {
            base: std::time::Instant::now(),
            ms: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

impl LastHeard {
    pub fn touch(&self) {
        let now = self.base.elapsed().as_millis() as u64;
        self.ms.store(now, std::sync::atomic::Ordering::Release);
    }

    /// How long since the peer was last heard.
    pub fn quiet(&self) -> Duration {
        let at = Duration::from_millis(self.ms.load(std::sync::atomic::Ordering::Acquire));
        self.base.elapsed().saturating_sub(at)
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Reads one raw frame: `Ok(None)` on a clean end of stream before it starts. The layout
/// is the node links' (`transport/tcp/frame.rs`), with the control connection's limits.
fn read_raw(stream: &mut impl Read) -> io::Result<Option<(Vec<u8>, Vec<u8>)>> {
    let limits = Limits {
        what: "control frame",
        max_header: MAX_HEADER,
        max_payload: MAX_PAYLOAD,
        payload_limit: "the control connection's limit",
    };
    crate::transport::tcp::frame::read_raw(stream, &limits)
}

fn read_link(stream: &mut TcpStream) -> io::Result<LinkMessage> {
    match read_raw(stream)? {
        Some((h, _)) => decode_link_message(&h).map_err(|e| invalid(e.to_string())),
        None => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the peer closed the connection",
        )),
    }
}

fn write_link(stream: &mut TcpStream, m: &LinkMessage) -> io::Result<()> {
    stream.write_all(&frame_bytes(&encode_link_message(m), &[]))
}

/// The sending half of a control connection; any thread may send (one frame at a time).
#[derive(Debug)]
pub struct ControlWriter {
    stream: Mutex<TcpStream>,
}

impl ControlWriter {
    /// Sends one message with its payload, as one `write`.
    pub fn send(&self, m: &ControlMessage, payload: &[u8]) -> io::Result<()> {
        let bytes = frame_bytes(&encode_control_message(m), payload);
        let mut s = self.stream.lock().unwrap_or_else(|e| e.into_inner());
        s.write_all(&bytes)
    }

    /// Closes both directions: the reader on either side sees the end at once.
    pub fn shutdown(&self) {
        let s = self.stream.lock().unwrap_or_else(|e| e.into_inner());
        let _ = s.shutdown(std::net::Shutdown::Both);
    }
}

/// The receiving half of a control connection.
#[derive(Debug)]
pub struct ControlReader {
    stream: BufReader<TcpStream>,
}

impl ControlReader {
    /// The next message and its payload; `Ok(None)` when the peer closed the connection.
    pub fn recv(&mut self) -> io::Result<Option<(ControlMessage, Vec<u8>)>> {
        let Some((header, payload)) = read_raw(&mut self.stream)? else {
            return Ok(None);
        };
        let m = decode_control_message(&header).map_err(|e| invalid(e.to_string()))?;
        Ok(Some((m, payload)))
    }
}

fn transcript<'a>(node: u32, nodes: u32, a: &'a [u8], c: &'a [u8]) -> Transcript<'a> {
    Transcript {
        acceptor: nodes,
        connector: node,
        nodes,
        global_size: CONTROL_SHAPE,
        events: 0,
        acceptor_nonce: a,
        connector_nonce: c,
    }
}

/// Socket options of an established control connection: Nagle off, keepalive probing
/// (a vanished host is noticed even while nobody writes), and a send timeout so a peer
/// that stops reading cannot block a writer forever.
fn tune(stream: &TcpStream) -> io::Result<()> {
    let s = SockRef::from(stream);
    s.set_tcp_nodelay(true)?;
    let ka = TcpKeepalive::new()
        .with_time(Duration::from_secs(2))
        .with_interval(Duration::from_secs(1))
        .with_retries(2);
    s.set_tcp_keepalive(&ka)?;
    s.set_tcp_user_timeout(Some(HEARTBEAT_LATE * 2))?;
    stream.set_write_timeout(Some(HEARTBEAT_LATE * 2))?;
    stream.set_read_timeout(None)
}

fn split(stream: TcpStream) -> io::Result<(ControlReader, ControlWriter)> {
    tune(&stream)?;
    let r = stream.try_clone()?;
    Ok((
        ControlReader {
            stream: BufReader::with_capacity(64 * 1024, r),
        },
        ControlWriter {
            stream: Mutex::new(stream),
        },
    ))
}

/// Daemon side: connect to the Machine Manager at `addr` as node `node` of `nodes` and
/// prove the job secret (and check the Machine Manager's proof).
pub fn connect(
    addr: SocketAddr,
    node: u32,
    nodes: u32,
    secret: &JobSecret,
) -> Result<(ControlReader, ControlWriter, SocketAddr), DaemonError> {
    let fail = |e: io::Error| {
        DaemonError::Control(format!(
            "the Machine Manager at {addr}: {e} (wrong job secret?)"
        ))
    };
    let mut stream = TcpStream::connect_timeout(&addr, HANDSHAKE_TIMEOUT).map_err(|e| {
        DaemonError::Control(format!("cannot reach the Machine Manager at {addr}: {e}"))
    })?;
    let local = stream.local_addr().map_err(fail)?;
    stream
        .set_read_timeout(Some(HANDSHAKE_TIMEOUT))
        .map_err(fail)?;
    stream.set_nodelay(true).map_err(fail)?;
    let acceptor_nonce = match read_link(&mut stream).map_err(fail)? {
        LinkMessage::Hello { node: mm, nonce } if mm == nodes => nonce,
        other => return Err(fail(invalid(format!("expected its hello, got {other:?}")))),
    };
    let nonce = random_nonce().map_err(|e| DaemonError::Control(e.to_string()))?;
    let t = transcript(node, nodes, &acceptor_nonce, &nonce);
    let auth = LinkMessage::Auth {
        node,
        nodes,
        global_size: CONTROL_SHAPE,
        events: 0,
        nonce: nonce.to_vec(),
        mac: secret.prove(Role::Connector, &t),
    };
    write_link(&mut stream, &auth).map_err(fail)?;
    match read_link(&mut stream).map_err(fail)? {
        LinkMessage::Accept { mac } if secret.verify(Role::Acceptor, &t, &mac) => {}
        _ => {
            return Err(DaemonError::Control(format!(
                "the Machine Manager at {addr} could not prove it holds the job secret"
            )))
        }
    }
    let (r, w) = split(stream).map_err(fail)?;
    Ok((r, w, local))
}

/// Machine Manager side of one connection: returns the daemon's node index once it proved
/// it holds the secret. The caller refuses duplicates.
pub fn accept(
    mut stream: TcpStream,
    nodes: u32,
    secret: &JobSecret,
) -> Result<(u32, ControlReader, ControlWriter), String> {
    stream
        .set_read_timeout(Some(HANDSHAKE_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let _ = stream.set_nodelay(true);
    let nonce = random_nonce().map_err(|e| e.to_string())?;
    let hello = LinkMessage::Hello {
        node: nodes,
        nonce: nonce.to_vec(),
    };
    write_link(&mut stream, &hello).map_err(|e| e.to_string())?;
    let msg = read_link(&mut stream).map_err(|e| format!("no authentication: {e}"))?;
    let LinkMessage::Auth {
        node,
        nodes: theirs_nodes,
        global_size,
        events: _,
        nonce: theirs,
        mac,
    } = msg
    else {
        return Err(format!("expected an authentication, got {msg:?}"));
    };
    let t = transcript(node, nodes, &nonce, &theirs);
    if !secret.verify(Role::Connector, &t, &mac) {
        return Err(format!(
            "claims node {node} but failed authentication (wrong job secret)"
        ));
    }
    if theirs_nodes != nodes || global_size != CONTROL_SHAPE || node >= nodes {
        return Err(format!(
            "node {node} of {theirs_nodes} is not a daemon of this {nodes}-node job"
        ));
    }
    let accept = LinkMessage::Accept {
        mac: secret.prove(Role::Acceptor, &t),
    };
    write_link(&mut stream, &accept).map_err(|e| e.to_string())?;
    let (r, w) = split(stream).map_err(|e| e.to_string())?;
    Ok((node, r, w))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn listener() -> (TcpListener, SocketAddr) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        (l, a)
    }

    #[test]
    fn a_daemon_with_the_secret_connects_and_messages_flow() {
        let secret = JobSecret::generate().unwrap();
        let (l, addr) = listener();
        let s2 = secret.clone();
        let mm = std::thread::spawn(move || {
            let (stream, _) = l.accept().unwrap();
            let (node, mut r, w) = accept(stream, 3, &s2).unwrap();
            w.send(&ControlMessage::Heartbeat(7), &[]).unwrap();
            (node, r.recv().unwrap().unwrap())
        });
        let (mut r, w, _) = connect(addr, 2, 3, &secret).unwrap();
        w.send(
            &ControlMessage::RankOutput {
                rank: 4,
                stderr: false,
            },
            b"hello\n",
        )
        .unwrap();
        assert_eq!(r.recv().unwrap().unwrap().0, ControlMessage::Heartbeat(7));
        let (node, (m, payload)) = mm.join().unwrap();
        assert_eq!(node, 2);
        assert_eq!(
            m,
            ControlMessage::RankOutput {
                rank: 4,
                stderr: false
            }
        );
        assert_eq!(payload, b"hello\n");
    }

    #[test]
    fn a_client_without_the_secret_is_refused_both_ways() {
        let secret = JobSecret::generate().unwrap();
        let wrong = JobSecret::generate().unwrap();
        let (l, addr) = listener();
        let s2 = secret.clone();
        let mm = std::thread::spawn(move || {
            let (stream, _) = l.accept().unwrap();
            accept(stream, 2, &s2).map(|(n, _, _)| n)
        });
        let err = connect(addr, 0, 2, &wrong).unwrap_err().to_string();
        assert!(err.contains("Machine Manager"), "{err}");
        let why = mm.join().unwrap().unwrap_err();
        assert!(why.contains("wrong job secret"), "{why}");
    }

    #[test]
    fn a_client_of_another_shape_or_not_speaking_the_protocol_is_refused() {
        let secret = JobSecret::generate().unwrap();
        let (l, addr) = listener();
        let s2 = secret.clone();
        let mm = std::thread::spawn(move || {
            let mut out = Vec::new();
            for _ in 0..2 {
                let (stream, _) = l.accept().unwrap();
                out.push(accept(stream, 2, &s2).map(|(n, _, _)| n));
            }
            out
        });
        // Node 5 of a 2-node job: the proof is right for its claim, the claim is not.
        assert!(connect(addr, 5, 2, &secret).is_err());
        let mut junk = TcpStream::connect(addr).unwrap();
        junk.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        let out = mm.join().unwrap();
        assert!(out.iter().all(|r| r.is_err()), "{out:?}");
    }

    #[test]
    fn oversized_frames_are_refused() {
        let mut bytes = frame_bytes(b"x", b"");
        bytes[..4].copy_from_slice(&(MAX_HEADER as u32 + 1).to_le_bytes());
        assert!(read_raw(&mut &bytes[..]).is_err());
        let mut bytes = frame_bytes(b"x", b"");
        bytes[4..8].copy_from_slice(&(MAX_PAYLOAD as u32 + 1).to_le_bytes());
        assert!(read_raw(&mut &bytes[..]).is_err());
        assert!(read_raw(&mut &b""[..]).unwrap().is_none());
    }
}
