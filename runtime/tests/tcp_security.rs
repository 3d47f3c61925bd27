//! The TCP transport's security and lifetime rules (docs/multi-host.md, "Security model"):
//! a connection without the job secret is refused (and counted/logged) while the job's own
//! endpoints wire up; an endpoint with the wrong secret cannot join; the listener is bound
//! to the chosen address only and exists only during wire-up; an endpoint that leaves is
//! reported to the others as an error.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::Duration;

use strobe_runtime::transport::auth::{random_nonce, JobSecret, Role, Transcript};
use strobe_runtime::transport::tcp::{TcpBinding, TcpConfig, TcpEndpoint};
use strobe_runtime::transport::{EventId, NodeSet, Transport, TransportError, Wait};
use strobe_schema::{decode_link_message, encode_link_message, LinkMessage};

const GLOBAL: usize = 4096;
const EVENTS: u32 = 2;

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn config(nodes: u32, secret: &JobSecret) -> TcpConfig {
    let mut c = TcpConfig::new(nodes, GLOBAL, EVENTS, secret.clone());
    c.wireup_timeout = Duration::from_secs(20);
    c
}

/// Writes one frame as docs/multi-host.md describes it (no payload).
fn send(s: &mut TcpStream, m: &LinkMessage) {
    let h = encode_link_message(m);
    s.write_all(&(h.len() as u32).to_le_bytes()).unwrap();
    s.write_all(&0u32.to_le_bytes()).unwrap();
    s.write_all(&h).unwrap();
}

/// Reads one frame's message; `None` when the connection was closed instead.
fn recv(s: &mut TcpStream) -> Option<LinkMessage> {
    let mut lens = [0u8; 8];
    s.read_exact(&mut lens).ok()?;
    let h = u32::from_le_bytes(lens[..4].try_into().unwrap()) as usize;
    let mut header = vec![0; h];
    s.read_exact(&mut header).ok()?;
    Some(decode_link_message(&header).unwrap())
}

/// Everything the server sends after `rogue` tried: must be a hello, then nothing.
fn refused_after(mut s: TcpStream, rogue: impl FnOnce(&mut TcpStream, u32, &[u8])) {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let Some(LinkMessage::Hello { node, nonce }) = recv(&mut s) else {
        panic!("the acceptor starts with a hello");
    };
    rogue(&mut s, node, &nonce);
    let mut rest = Vec::new();
    // The acceptor closes the connection: end of stream (or a reset), never an Accept.
    let _ = s.read_to_end(&mut rest);
    assert!(
        rest.is_empty(),
        "the acceptor answered a refused client: {rest:?}"
    );
}

#[test]
fn clients_without_the_secret_are_refused_and_the_job_still_wires_up() {
    let secret = JobSecret::generate().unwrap();
    let b0 = TcpBinding::bind(0, loopback(), config(2, &secret)).unwrap();
    let b1 = TcpBinding::bind(1, loopback(), config(2, &secret)).unwrap();
    let addrs = [b0.local_addr().unwrap(), b1.local_addr().unwrap()];
    let node0 = thread::spawn(move || b0.join(&addrs).unwrap());

    // 1. Knows the protocol, not the secret: proves with another job's secret.
    let wrong = JobSecret::generate().unwrap();
    refused_after(
        TcpStream::connect(addrs[0]).unwrap(),
        |s, acceptor, nonce| {
            let mine = random_nonce().unwrap();
            let t = Transcript {
                acceptor,
                connector: 1,
                nodes: 2,
                global_size: GLOBAL as u64,
                events: EVENTS,
                acceptor_nonce: nonce,
                connector_nonce: &mine,
            };
            let auth = LinkMessage::Auth {
                node: 1,
                nodes: 2,
                global_size: GLOBAL as u64,
                events: EVENTS,
                nonce: mine.to_vec(),
                mac: wrong.prove(Role::Connector, &t),
            };
            send(s, &auth);
        },
    );
    // 2. Replays a proof made for another connection's challenge with the right secret.
    refused_after(
        TcpStream::connect(addrs[0]).unwrap(),
        |s, acceptor, _nonce| {
            let (old, mine) = (random_nonce().unwrap(), random_nonce().unwrap());
            let t = Transcript {
                acceptor,
                connector: 1,
                nodes: 2,
                global_size: GLOBAL as u64,
                events: EVENTS,
                acceptor_nonce: &old,
                connector_nonce: &mine,
            };
            send(
                s,
                &LinkMessage::Auth {
                    node: 1,
                    nodes: 2,
                    global_size: GLOBAL as u64,
                    events: EVENTS,
                    nonce: mine.to_vec(),
                    mac: secret.prove(Role::Connector, &t),
                },
            );
        },
    );
    // 3. Does not speak the protocol at all.
    refused_after(TcpStream::connect(addrs[0]).unwrap(), |s, _, _| {
        s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    });

    let ep1 = b1.join(&addrs).unwrap();
    let ep0 = node0.join().unwrap();
    assert_eq!(ep0.refused_connections(), 3);
    // The job works.
    ep1.xfer_and_signal(b"ok", &NodeSet::single(0), 0, None, Some(EventId(0)))
        .unwrap();
    assert!(ep0.test_event(EventId(0), Wait::Poll).unwrap());
    // Nothing listens once the job is wired up.
    assert!(
        TcpStream::connect(addrs[0]).is_err(),
        "node 0 still listens"
    );
    assert!(
        TcpStream::connect(addrs[1]).is_err(),
        "node 1 still listens"
    );
}

#[test]
fn an_endpoint_with_the_wrong_secret_cannot_join() {
    let secret = JobSecret::generate().unwrap();
    let mut c0 = config(2, &secret);
    c0.wireup_timeout = Duration::from_secs(3);
    let b0 = TcpBinding::bind(0, loopback(), c0).unwrap();
    let mut bad = config(2, &JobSecret::generate().unwrap());
    bad.wireup_timeout = Duration::from_secs(10);
    let b1 = TcpBinding::bind(1, loopback(), bad).unwrap();
    let addrs = [b0.local_addr().unwrap(), b1.local_addr().unwrap()];
    let node0 = thread::spawn(move || b0.join(&addrs));
    let e1 = b1.join(&addrs).unwrap_err();
    assert!(
        matches!(&e1, TransportError::Io(m) if m.contains("handshake with node 0")),
        "{e1}"
    );
    // Node 0 refused it and, nobody else coming, gives up at its deadline.
    let e0 = node0.join().unwrap().unwrap_err();
    assert!(
        matches!(&e0, TransportError::Io(m) if m.contains("[1]")),
        "{e0}"
    );
}

#[test]
fn another_job_shape_is_refused() {
    let secret = JobSecret::generate().unwrap();
    let mut c0 = config(2, &secret);
    c0.wireup_timeout = Duration::from_secs(3);
    let b0 = TcpBinding::bind(0, loopback(), c0).unwrap();
    let mut other = config(2, &secret);
    other.global_size = GLOBAL * 2;
    let b1 = TcpBinding::bind(1, loopback(), other).unwrap();
    let addrs = [b0.local_addr().unwrap(), b1.local_addr().unwrap()];
    let node0 = thread::spawn(move || b0.join(&addrs));
    assert!(b1.join(&addrs).is_err());
    assert!(node0.join().unwrap().is_err());
}

#[test]
fn the_listener_is_bound_to_the_chosen_address_only() {
    let secret = JobSecret::generate().unwrap();
    let b = TcpBinding::bind(0, "127.0.0.2:0".parse().unwrap(), config(1, &secret)).unwrap();
    let addr = b.local_addr().unwrap();
    assert_eq!(addr.ip().to_string(), "127.0.0.2");
    let other: SocketAddr = ([127, 0, 0, 1], addr.port()).into();
    assert!(TcpStream::connect(other).is_err(), "reachable on 127.0.0.1");
    assert!(TcpStream::connect(addr).is_ok());
}

#[test]
fn an_endpoint_that_leaves_is_an_error_for_the_others() {
    let mut eps = TcpEndpoint::loopback_job(3, GLOBAL, EVENTS).unwrap();
    let gone = eps.pop().unwrap();
    drop(gone);
    // The dropped endpoint stopped reading before it said goodbye: the xfer cannot be
    // acknowledged, whichever of the goodbye and the request is handled first.
    let err = eps[0]
        .xfer_and_signal(b"x", &NodeSet::all(3), 0, None, None)
        .unwrap_err();
    assert!(
        matches!(&err, TransportError::Io(m) if m.contains("node 2")),
        "{err}"
    );
    // Nodes still there still work together, and an orderly leave is not a failure.
    eps[0]
        .xfer_and_signal(b"y", &NodeSet::single(1), 0, None, Some(EventId(1)))
        .unwrap();
    assert!(eps[1].test_event(EventId(1), Wait::Poll).unwrap());
    assert_eq!(eps[0].failure(), None);
}

/// A peer that left in order closed its socket with our last frames unread, which resets
/// the link: the write that finds the reset fails, but the endpoint is not broken (the
/// hosts test saw a job that had ended well fail with "send failed: Broken pipe" when node
/// 1's status push met node 0's reset before node 1 had read node 0's last strobe).
#[test]
fn a_write_after_an_orderly_leave_does_not_break_the_endpoint() {
    for round in 0..20 {
        let mut eps = TcpEndpoint::loopback_job(2, GLOBAL, EVENTS).unwrap();
        // Frames the leaving node never reads: its close resets the link.
        let block = vec![7u8; 4096];
        eps[0]
            .xfer_and_signal_nowait(&block, &NodeSet::single(1), 0, None)
            .unwrap();
        drop(eps.pop());
        let t = std::time::Instant::now();
        let err = loop {
            match eps[0].xfer_and_signal_nowait(&block, &NodeSet::single(1), 0, None) {
                Ok(()) => assert!(t.elapsed().as_secs() < 10, "round {round}: still sending"),
                Err(e) => break e,
            }
        };
        assert!(
            matches!(&err, TransportError::Io(m) if m.contains("node 1")),
            "round {round}: {err}"
        );
        assert_eq!(eps[0].failure(), None, "round {round}: {err}");
    }
}
