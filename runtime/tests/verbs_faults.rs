//! The verbs transport over the emulated fabric with injected error completions: each
//! ends with a clear error on every node, never a hang. Plus large transfers streaming
//! through the staging chunks.
//!
//! The timeouts here only fail a test that hung; nothing asserts speed.

use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use strobe_runtime::transport::verbs::emu::{EmuFabric, FaultTarget};
use strobe_runtime::transport::verbs::provider::WcStatus;
use strobe_runtime::transport::verbs::{VerbsConfig, VerbsEndpoint};
use strobe_runtime::transport::{CmpOp, EventId, NodeSet, Transport, TransportError, Wait};

const HANG: Duration = Duration::from_secs(60);

fn job(nodes: u32) -> (Arc<EmuFabric>, Vec<Arc<VerbsEndpoint>>) {
    let fabric = EmuFabric::new(nodes);
    let eps = VerbsEndpoint::emulated_job(&fabric, VerbsConfig::new(nodes, 4096, 4))
        .expect("wire up")
        .into_iter()
        .map(Arc::new)
        .collect();
    (fabric, eps)
}

/// Runs `f` on a thread; a result that does not come within [`HANG`] fails the test.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(HANG)
        .unwrap_or_else(|_| panic!("{what} hung (no result within {HANG:?})"))
}

fn io_text(r: Result<impl std::fmt::Debug, TransportError>) -> String {
    match r {
        Err(TransportError::Io(why)) => why,
        other => panic!("expected a transport failure, got {other:?}"),
    }
}

/// Node 2 blocks in Test-Event while `fail` runs; returns what `fail` gave and what the
/// blocked Test-Event woke with.
fn fail_while_blocked(
    eps: &[Arc<VerbsEndpoint>],
    fail: impl FnOnce() -> Result<bool, TransportError> + Send + 'static,
) -> (String, String) {
    let blocked = {
        let ep = eps[2].clone();
        thread::spawn(move || ep.test_event(EventId(3), Wait::Block))
    };
    let failed = io_text(within("the failing call", fail));
    let woke = io_text(within("the blocked Test-Event", move || {
        blocked.join().unwrap()
    }));
    (failed, woke)
}

/// Node 2, blocked, learns of the failure from node 0, which tells every peer, or from node
/// 1, which tells its peers too once told (when node 1's link still works): which notice
/// reaches node 2 first is timing.
fn assert_told_by_node_0_or_1(woke: &str) {
    assert!(
        [
            "verbs: node 2: node 0 reported a transport failure",
            "verbs: node 2: node 1 reported a transport failure"
        ]
        .contains(&woke),
        "{woke}"
    );
}

#[test]
fn remote_access_error_during_xfer_fails_every_node() {
    let (fabric, eps) = job(3);
    fabric.inject(FaultTarget::Towards(1), WcStatus::RemoteAccessError, 1);
    let ep = eps[0].clone();
    let (failed, woke) = fail_while_blocked(&eps, move || {
        ep.xfer_and_signal(
            b"data",
            &NodeSet::from_nodes([1, 2]),
            64,
            None,
            Some(EventId(0)),
        )
        .map(|_| true)
    });
    assert_eq!(
        failed,
        "verbs: node 0: remote access error on an Xfer-And-Signal write to node 1"
    );
    assert_told_by_node_0_or_1(&woke);
    // Later calls fail with the same error at once.
    let again = eps[0].xfer_and_signal(b"x", &NodeSet::single(2), 0, None, None);
    assert_eq!(io_text(again), failed);
    assert_eq!(eps[0].failure(), Some(failed));
}

#[test]
fn retry_exceeded_during_xfer_fails_every_node() {
    let (fabric, eps) = job(3);
    fabric.unplug(1);
    let ep = eps[0].clone();
    let (failed, woke) = fail_while_blocked(&eps, move || {
        ep.xfer_and_signal(&[7; 1000], &NodeSet::all(3), 0, None, None)
            .map(|_| true)
    });
    assert!(
        failed.starts_with("verbs: node 0: retry exceeded (peer unreachable) on an Xfer-And-Signal write to node 1"),
        "{failed}"
    );
    assert_told_by_node_0_or_1(&woke);
}

#[test]
fn remote_access_error_during_caw_from_another_node() {
    let (fabric, eps) = job(3);
    // Node 0 coordinates; its compare request to node 2 fails.
    fabric.inject(
        FaultTarget::Between { from: 0, to: 2 },
        WcStatus::RemoteAccessError,
        1,
    );
    let ep = eps[1].clone();
    let failed = io_text(within("Compare-And-Write", move || {
        ep.compare_and_write(0, CmpOp::Eq, 0, &NodeSet::all(3), Some((8, 1)))
    }));
    assert_eq!(failed, "verbs: node 1: node 0 reported a transport failure");
    assert_eq!(
        eps[0].failure().as_deref(),
        Some("verbs: node 0: remote access error on a request to node 2")
    );
    // Nothing was written anywhere: the compare failed before any write.
    for ep in &eps {
        assert_eq!(ep.load_var(8).unwrap(), 0);
    }
}

#[test]
fn retry_exceeded_during_caw_at_the_coordinator_wakes_a_blocked_node() {
    let (fabric, eps) = job(3);
    fabric.inject(FaultTarget::Towards(1), WcStatus::RetryExceeded, 1);
    let ep = eps[0].clone();
    let (failed, woke) = fail_while_blocked(&eps, move || {
        ep.compare_and_write(0, CmpOp::Ge, 0, &NodeSet::all(3), Some((8, 5)))
    });
    assert_eq!(
        failed,
        "verbs: node 0: retry exceeded (peer unreachable) on a request to node 1"
    );
    assert_told_by_node_0_or_1(&woke);
}

#[test]
fn a_closed_peer_is_reported_not_waited_for() {
    let (_fabric, mut eps) = job(2);
    let gone = eps.pop().unwrap();
    drop(Arc::try_unwrap(gone).expect("sole owner"));
    let ep = eps[0].clone();
    let failed = io_text(within("xfer to a closed peer", move || {
        ep.xfer_and_signal(b"late", &NodeSet::single(1), 0, None, None)
    }));
    assert_eq!(failed, "verbs: node 0: node 1 closed its endpoint");
}

#[test]
fn large_transfers_stream_through_the_chunks() {
    let fabric = EmuFabric::new(3);
    let mut cfg = VerbsConfig::new(3, 3 << 20, 2);
    // Small chunks, so a transfer needs many more chunks than there are.
    cfg.chunk_size = 4096;
    cfg.chunks = 3;
    let eps = VerbsEndpoint::emulated_job(&fabric, cfg).unwrap();
    let data: Vec<u8> = (0..(3 << 20) - 100)
        .map(|i| (i * 7 + i / 4096) as u8)
        .collect();
    eps[1]
        .xfer_and_signal(
            &data,
            &NodeSet::all(3),
            100,
            Some(EventId(0)),
            Some(EventId(1)),
        )
        .unwrap();
    for ep in &eps {
        let mut got = vec![0; data.len()];
        ep.read_local(100, &mut got).unwrap();
        assert!(got == data, "node {} has other bytes", ep.node());
        assert!(ep.test_event(EventId(1), Wait::Poll).unwrap());
    }
    assert!(eps[1].test_event(EventId(0), Wait::Poll).unwrap());
    // Concurrent large transfers from every node to every other, to distinct offsets.
    thread::scope(|s| {
        for ep in &eps {
            let data = &data;
            s.spawn(move || {
                let off = ep.node() as usize * (1 << 20);
                let me = NodeSet::from_nodes((0..3).filter(|&n| n != ep.node()));
                ep.xfer_and_signal(&data[..1 << 20], &me, off, None, Some(EventId(0)))
                    .unwrap();
            });
        }
    });
    for ep in &eps {
        for n in (0..3).filter(|&n| n != ep.node()) {
            let mut got = vec![0; 1 << 20];
            ep.read_local(n as usize * (1 << 20), &mut got).unwrap();
            assert!(got == data[..1 << 20], "node {} from node {n}", ep.node());
        }
        assert!(ep.test_event(EventId(0), Wait::Poll).unwrap());
        assert!(ep.test_event(EventId(0), Wait::Poll).unwrap());
    }
}

#[test]
fn wire_up_checks_devices_ports_and_addresses() {
    use strobe_runtime::transport::verbs::VerbsBinding;
    let fabric = EmuFabric::new(2);
    let cfg = VerbsConfig::new(2, 4096, 4);
    let open = |device: Option<&str>, node| VerbsBinding::open(&*fabric, device, node, cfg.clone());
    for (device, why) in [
        ("emu7", "no active port emu7"),
        ("emu0:2", "no active port emu0:2"),
        ("emu0:x", "\"x\" is not a port number"),
    ] {
        let e = open(Some(device), 0).unwrap_err();
        assert_eq!(e, TransportError::Io(format!("verbs: node 0: {why}")));
    }
    assert!(matches!(
        open(None, 2),
        Err(TransportError::NoSuchNode { node: 2, nodes: 2 })
    ));
    let a = open(Some("emu0:1"), 0).unwrap();
    let b = open(Some("emu1"), 1).unwrap();
    // Another job's shape, garbage, or too few addresses: refused, nothing connected.
    let other = VerbsBinding::open(&*fabric, None, 1, VerbsConfig::new(2, 8192, 4)).unwrap();
    let bad = [
        vec![a.address(), other.address()],
        vec![a.address(), "strobe-verbs/1 1 2".to_string()],
        vec![a.address()],
        vec![b.address(), a.address()],
    ];
    for peers in &bad {
        let fresh = open(None, 0).unwrap();
        let e = fresh.join(peers).unwrap_err();
        assert!(
            matches!(&e, TransportError::Io(m) if m.starts_with("verbs: node 0: wire-up: ")),
            "{e:?}"
        );
    }
    let addrs = [a.address(), b.address()];
    let (a, b) = (a.join(&addrs).unwrap(), b.join(&addrs).unwrap());
    a.xfer_and_signal(b"ok", &NodeSet::single(1), 8, None, Some(EventId(2)))
        .unwrap();
    assert!(b.test_event(EventId(2), Wait::Poll).unwrap());
}

#[test]
fn an_unanswered_request_times_out_and_fails_every_node() {
    let fabric = EmuFabric::new(3);
    let mut cfg = VerbsConfig::new(3, 4096, 4);
    cfg.request_timeout = Duration::from_millis(300);
    let eps: Vec<Arc<VerbsEndpoint>> = VerbsEndpoint::emulated_job(&fabric, cfg)
        .unwrap()
        .into_iter()
        .map(Arc::new)
        .collect();
    // Node 1's NIC acknowledges the write, but nothing reaches its process.
    fabric.inject(FaultTarget::Towards(1), WcStatus::Success, 1);
    let ep = eps[0].clone();
    let (failed, woke) = fail_while_blocked(&eps, move || {
        ep.xfer_and_signal(
            b"lost",
            &NodeSet::from_nodes([1, 2]),
            0,
            None,
            Some(EventId(0)),
        )
        .map(|_| true)
    });
    assert_eq!(
        failed,
        "verbs: node 0: node 1 left a request unanswered for 300ms"
    );
    assert_told_by_node_0_or_1(&woke);
}

#[test]
fn many_xfers_to_this_node_alone_keep_the_staging_chunks_free() {
    let fabric = EmuFabric::new(2);
    let mut cfg = VerbsConfig::new(2, 4096, 1);
    cfg.chunks = 2;
    cfg.request_timeout = Duration::from_secs(2);
    let eps = VerbsEndpoint::emulated_job(&fabric, cfg).unwrap();
    for i in 0..20u8 {
        eps[0]
            .xfer_and_signal(&[i; 100], &NodeSet::single(0), 0, None, Some(EventId(0)))
            .unwrap();
        assert!(eps[0].test_event(EventId(0), Wait::Poll).unwrap());
    }
    // The chunks are all still there for a transfer to the other node.
    eps[0]
        .xfer_and_signal(&[9; 100], &NodeSet::all(2), 0, None, None)
        .unwrap();
    let mut got = [0u8; 100];
    eps[1].read_local(0, &mut got).unwrap();
    assert_eq!(got, [9; 100]);
}
