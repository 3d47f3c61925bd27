//! Conformance suite for the `Transport` trait (the three BCS core primitives).
//!
//! Every check is a generic function over a [`Factory`] that builds a fresh job: one
//! endpoint per node, index = node id. [`conformance!`] instantiates the whole suite for
//! one transport as a module of `#[test]`s. To add a transport, write its factory and add
//! one line: `conformance!(tcp, tcp_factory);`.

use std::thread;
use std::time::{Duration, Instant};

use strobe_runtime::transport::shm::ShmFabric;
use strobe_runtime::transport::tcp::TcpEndpoint;
use strobe_runtime::transport::verbs::emu::EmuFabric;
use strobe_runtime::transport::verbs::ibverbs::IbverbsProvider;
use strobe_runtime::transport::verbs::system::pinned_device_name;
use strobe_runtime::transport::verbs::{
    system_provider, Provider, VerbsBinding, VerbsConfig, VerbsEndpoint,
};
use strobe_runtime::transport::{CmpOp, EventId, NodeSet, Transport, TransportError, Wait};

/// Builds a job of `nodes` nodes with `global` bytes of global memory and `events` events
/// each; returns one endpoint per node, in node order.
type Factory = fn(nodes: u32, global: usize, events: u32) -> Vec<Box<dyn Transport>>;

fn shm_factory(nodes: u32, global: usize, events: u32) -> Vec<Box<dyn Transport>> {
    let fabric = ShmFabric::create(nodes, global, events).expect("create shm fabric");
    (0..nodes)
        .map(|n| Box::new(fabric.endpoint(n)) as Box<dyn Transport>)
        .collect()
}

/// Every node an endpoint of its own over loopback TCP, wired up in this process.
fn tcp_factory(nodes: u32, global: usize, events: u32) -> Vec<Box<dyn Transport>> {
    TcpEndpoint::loopback_job(nodes, global, events)
        .expect("wire up a loopback TCP job")
        .into_iter()
        .map(|ep| Box::new(ep) as Box<dyn Transport>)
        .collect()
}

/// Every node a verbs endpoint of its own, over the in-process emulated RC fabric.
fn verbs_emu_factory(nodes: u32, global: usize, events: u32) -> Vec<Box<dyn Transport>> {
    let fabric = EmuFabric::new(nodes);
    VerbsEndpoint::emulated_job(&fabric, VerbsConfig::new(nodes, global, events))
        .expect("wire up an emulated verbs job")
        .into_iter()
        .map(|ep| Box::new(ep) as Box<dyn Transport>)
        .collect()
}

/// Real verbs, only with `STROBE_VERBS_HW=1` (scripts/verbs-check.sh sets it on a host
/// with an RDMA device; CI has none): every node an endpoint on this host's device (the
/// first active port, or `STROBE_VERBS_DEVICE`), loopback through the HCA.
fn verbs_hw_enabled() -> bool {
    let on = std::env::var("STROBE_VERBS_HW").as_deref() == Ok("1");
    if !on {
        eprintln!("skipped: set STROBE_VERBS_HW=1 on a host with an RDMA device");
    }
    on
}

fn verbs_hw_factory(nodes: u32, global: usize, events: u32) -> Vec<Box<dyn Transport>> {
    let provider = system_provider().unwrap_or_else(|e| panic!("STROBE_VERBS_HW=1 but {e}"));
    let device = pinned_device_name();
    verbs_job(
        provider.as_ref(),
        device.as_deref(),
        VerbsConfig::new(nodes, global, events),
    )
}

#[path = "support/fake_ibverbs.rs"]
mod fake_ibverbs;

/// The verbs transport over the libibverbs provider over `support/fake_ibverbs.c` (a
/// stand-in libibverbs.so.1 with one loopback device, `fake0`): the transport and the real
/// provider's FFI path together, where no RDMA device exists.
fn verbs_fake_enabled() -> bool {
    fake_ibverbs::library().is_some()
}

fn verbs_fake_factory(nodes: u32, global: usize, events: u32) -> Vec<Box<dyn Transport>> {
    let lib = fake_ibverbs::library().expect("the fake libibverbs");
    let provider = IbverbsProvider::load_from(lib.to_str().unwrap()).expect("load the fake");
    verbs_job(
        &provider,
        Some("fake0"),
        VerbsConfig::new(nodes, global, events),
    )
}

/// Every node an endpoint on `device` of `provider`, wired up in this process.
fn verbs_job(
    provider: &dyn Provider,
    device: Option<&str>,
    config: VerbsConfig,
) -> Vec<Box<dyn Transport>> {
    let bindings: Vec<VerbsBinding> = (0..config.nodes)
        .map(|n| VerbsBinding::open(provider, device, n, config.clone()))
        .collect::<Result<_, _>>()
        .expect("open the RDMA device for every node");
    let addrs: Vec<String> = bindings.iter().map(VerbsBinding::address).collect();
    bindings
        .into_iter()
        .map(|b| Box::new(b.join(&addrs).expect("connect the queue pairs")) as Box<dyn Transport>)
        .collect()
}

/// The same over a fabric whose devices deliver after random delays (up to 50 us each).
fn verbs_emu_jitter_factory(nodes: u32, global: usize, events: u32) -> Vec<Box<dyn Transport>> {
    let fabric = EmuFabric::new(nodes);
    fabric.set_jitter(Duration::from_micros(50));
    VerbsEndpoint::emulated_job(&fabric, VerbsConfig::new(nodes, global, events))
        .expect("wire up an emulated verbs job")
        .into_iter()
        .map(|ep| Box::new(ep) as Box<dyn Transport>)
        .collect()
}

macro_rules! conformance {
    ($name:ident, $factory:expr) => {
        conformance!($name, $factory, only_if = || true);
    };
    ($name:ident, $factory:expr, only_if = $enabled:expr) => {
        mod $name {
            use super::*;
            conformance!(@tests $factory, $enabled;
                metadata, xfer_to_one_node, xfer_to_set, xfer_to_all, zero_length_xfer,
                refused_xfers_write_nothing, events_signalled_once, test_event_modes,
                events_count, blocking_test_woken_by_thread, ping_pong_orders_data,
                nowait_xfers_apply_in_order,
                caw_true_writes_everywhere, caw_false_on_one_writes_nowhere,
                caw_refuses_bad_arguments, concurrent_caw_counter, variables_local);
        }
    };
    (@tests $factory:expr, $enabled:expr; $($test:ident),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                let enabled: fn() -> bool = $enabled;
                if enabled() {
                    super::suite::$test($factory);
                }
            }
        )*
    };
}

conformance!(shm, shm_factory);
conformance!(tcp, tcp_factory);
conformance!(verbs_emu, verbs_emu_factory);
conformance!(verbs_fake, verbs_fake_factory, only_if = verbs_fake_enabled);
conformance!(verbs_hw, verbs_hw_factory, only_if = verbs_hw_enabled);
conformance!(verbs_emu_jitter, verbs_emu_jitter_factory);

mod suite {
    use super::*;

    const LONG: Duration = Duration::from_secs(20);

    /// Reads `len` bytes at `offset` from `ep`'s own global memory.
    fn read(ep: &dyn Transport, offset: usize, len: usize) -> Vec<u8> {
        let mut buf = vec![0; len];
        ep.read_local(offset, &mut buf).unwrap();
        buf
    }

    /// Every node's whole global memory is still zero.
    fn assert_all_zero(eps: &[Box<dyn Transport>]) {
        for ep in eps {
            let mem = read(ep.as_ref(), 0, ep.global_size());
            assert!(
                mem.iter().all(|&b| b == 0),
                "node {} global memory was written",
                ep.node()
            );
        }
    }

    /// How many signals of `event` are pending on `ep` (consumes them).
    fn drain(ep: &dyn Transport, event: u32) -> usize {
        let mut n = 0;
        while ep.test_event(EventId(event), Wait::Poll).unwrap() {
            n += 1;
        }
        n
    }

    /// No event of any node has a pending signal.
    fn assert_no_signals(eps: &[Box<dyn Transport>]) {
        for ep in eps {
            for e in 0..ep.events() {
                assert_eq!(drain(ep.as_ref(), e), 0, "node {} event {e}", ep.node());
            }
        }
    }

    pub fn metadata(f: Factory) {
        let eps = f(3, 256, 5);
        assert_eq!(eps.len(), 3);
        for (i, ep) in eps.iter().enumerate() {
            assert_eq!(ep.node(), i as u32);
            assert_eq!(ep.nodes(), 3);
            assert_eq!(ep.global_size(), 256);
            assert_eq!(ep.events(), 5);
        }
        assert_all_zero(&eps);
        assert_no_signals(&eps);
    }

    /// xfer `data` from node `from` to `dest` at `offset`; check it landed at that offset on
    /// exactly the nodes of `dest` and nowhere else.
    fn xfer_and_check(eps: &[Box<dyn Transport>], from: usize, dest: &NodeSet, offset: usize) {
        let data: Vec<u8> = (1..=37).collect();
        eps[from]
            .xfer_and_signal(&data, dest, offset, None, None)
            .unwrap();
        for ep in eps {
            let mem = read(ep.as_ref(), 0, ep.global_size());
            if dest.contains(ep.node()) {
                assert_eq!(
                    &mem[offset..offset + data.len()],
                    &data[..],
                    "node {}",
                    ep.node()
                );
                assert!(mem[..offset].iter().all(|&b| b == 0));
                assert!(mem[offset + data.len()..].iter().all(|&b| b == 0));
            } else {
                assert!(
                    mem.iter().all(|&b| b == 0),
                    "node {} outside the set",
                    ep.node()
                );
            }
        }
    }

    pub fn xfer_to_one_node(f: Factory) {
        let eps = f(4, 512, 2);
        xfer_and_check(&eps, 0, &NodeSet::single(2), 100);
    }

    pub fn xfer_to_set(f: Factory) {
        let eps = f(4, 512, 2);
        // The sender is in the set too: it writes its own global memory.
        xfer_and_check(&eps, 1, &NodeSet::from_nodes([3, 1, 0, 3]), 475);
    }

    pub fn xfer_to_all(f: Factory) {
        let eps = f(5, 512, 2);
        xfer_and_check(&eps, 4, &NodeSet::all(5), 0);
    }

    pub fn zero_length_xfer(f: Factory) {
        let eps = f(2, 64, 1);
        // An empty block at the very end is in bounds and still signals.
        eps[0]
            .xfer_and_signal(&[], &NodeSet::single(1), 64, None, Some(EventId(0)))
            .unwrap();
        assert_eq!(drain(eps[1].as_ref(), 0), 1);
        assert_all_zero(&eps);
    }

    pub fn refused_xfers_write_nothing(f: Factory) {
        let eps = f(3, 128, 2);
        let all = NodeSet::all(3);
        let d = [0xAAu8; 16];
        let ev = Some(EventId(0));
        let cases: Vec<(Result<(), TransportError>, TransportError)> = vec![
            (
                eps[0].xfer_and_signal(&d, &all, 120, ev, ev),
                TransportError::OutOfBounds {
                    offset: 120,
                    end: 136,
                    size: 128,
                },
            ),
            (
                eps[0].xfer_and_signal(&d, &all, 129, ev, ev),
                TransportError::OutOfBounds {
                    offset: 129,
                    end: 145,
                    size: 128,
                },
            ),
            (
                eps[0].xfer_and_signal(&d, &all, usize::MAX - 3, ev, ev),
                TransportError::OutOfBounds {
                    offset: usize::MAX - 3,
                    end: usize::MAX,
                    size: 128,
                },
            ),
            // A bad node anywhere in the set: the valid nodes must not be written either.
            (
                eps[0].xfer_and_signal(&d, &NodeSet::from_nodes([0, 1, 3]), 0, ev, ev),
                TransportError::NoSuchNode { node: 3, nodes: 3 },
            ),
            (
                eps[0].xfer_and_signal(&d, &all, 0, Some(EventId(2)), ev),
                TransportError::NoSuchEvent(2),
            ),
            (
                eps[0].xfer_and_signal(&d, &all, 0, ev, Some(EventId(7))),
                TransportError::NoSuchEvent(7),
            ),
            (
                eps[0].xfer_and_signal(&d, &NodeSet::from_nodes([]), 0, ev, ev),
                TransportError::EmptyNodeSet,
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got, Err(want));
        }
        assert_all_zero(&eps);
        assert_no_signals(&eps);
        // read_local is bounds-checked the same way.
        let mut buf = [0u8; 8];
        assert!(matches!(
            eps[1].read_local(125, &mut buf),
            Err(TransportError::OutOfBounds { .. })
        ));
    }

    pub fn events_signalled_once(f: Factory) {
        let eps = f(4, 64, 3);
        // Node 0 sends to {1, 2}: local event 0 on node 0, remote event 1 on 1 and 2.
        eps[0]
            .xfer_and_signal(
                b"x",
                &NodeSet::from_nodes([1, 2]),
                0,
                Some(EventId(0)),
                Some(EventId(1)),
            )
            .unwrap();
        let pending = |ep: &dyn Transport| -> Vec<usize> { (0..3).map(|e| drain(ep, e)).collect() };
        assert_eq!(pending(eps[0].as_ref()), [1, 0, 0]);
        assert_eq!(pending(eps[1].as_ref()), [0, 1, 0]);
        assert_eq!(pending(eps[2].as_ref()), [0, 1, 0]);
        assert_eq!(pending(eps[3].as_ref()), [0, 0, 0]);

        // The sender inside the set with local == remote: it gets both signals.
        eps[3]
            .xfer_and_signal(
                b"y",
                &NodeSet::all(4),
                8,
                Some(EventId(2)),
                Some(EventId(2)),
            )
            .unwrap();
        assert_eq!(pending(eps[3].as_ref()), [0, 0, 2]);
        for ep in &eps[..3] {
            assert_eq!(pending(ep.as_ref()), [0, 0, 1]);
        }

        // No events requested: data moves, nothing is signalled.
        eps[1]
            .xfer_and_signal(b"z", &NodeSet::all(4), 16, None, None)
            .unwrap();
        assert_no_signals(&eps);
    }

    pub fn test_event_modes(f: Factory) {
        let eps = f(2, 64, 2);
        let e = EventId(1);
        // Nothing pending: poll and timeout say false, the timeout after waiting.
        assert!(!eps[1].test_event(e, Wait::Poll).unwrap());
        let t = Instant::now();
        assert!(!eps[1]
            .test_event(e, Wait::Timeout(Duration::from_millis(50)))
            .unwrap());
        assert!(t.elapsed() >= Duration::from_millis(50));
        assert!(!eps[1].test_event(e, Wait::Timeout(Duration::ZERO)).unwrap());

        let signal = || {
            eps[0]
                .xfer_and_signal(&[], &NodeSet::single(1), 0, None, Some(e))
                .unwrap()
        };
        signal();
        assert!(eps[1].test_event(e, Wait::Block).unwrap());
        signal();
        assert!(eps[1].test_event(e, Wait::BlockSpinning).unwrap());
        signal();
        assert!(eps[1].test_event(e, Wait::Timeout(LONG)).unwrap());
        signal();
        assert!(eps[1].test_event(e, Wait::Timeout(Duration::ZERO)).unwrap());
        signal();
        assert!(eps[1].test_event(e, Wait::Poll).unwrap());
        assert!(!eps[1].test_event(e, Wait::Poll).unwrap());
        // Events of another node are not this node's.
        assert!(!eps[0].test_event(e, Wait::Poll).unwrap());
        assert_eq!(
            eps[1].test_event(EventId(2), Wait::Poll),
            Err(TransportError::NoSuchEvent(2))
        );
        assert_eq!(
            eps[1].test_event(EventId(9), Wait::Block),
            Err(TransportError::NoSuchEvent(9))
        );
    }

    pub fn events_count(f: Factory) {
        let eps = f(2, 64, 1);
        for _ in 0..3 {
            eps[1]
                .xfer_and_signal(&[1], &NodeSet::single(0), 0, None, Some(EventId(0)))
                .unwrap();
        }
        for _ in 0..3 {
            assert!(eps[0].test_event(EventId(0), Wait::Poll).unwrap());
        }
        assert!(!eps[0].test_event(EventId(0), Wait::Poll).unwrap());
    }

    pub fn blocking_test_woken_by_thread(f: Factory) {
        let eps = f(2, 64, 2);
        thread::scope(|s| {
            let waiter = s.spawn(|| {
                let t = Instant::now();
                assert!(eps[1].test_event(EventId(0), Wait::Block).unwrap());
                assert!(eps[1].test_event(EventId(0), Wait::BlockSpinning).unwrap());
                t.elapsed()
            });
            let timed = s.spawn(|| eps[1].test_event(EventId(1), Wait::Timeout(LONG)).unwrap());
            // Let both really block before signalling.
            thread::sleep(Duration::from_millis(50));
            eps[0]
                .xfer_and_signal(&[], &NodeSet::single(1), 0, None, Some(EventId(0)))
                .unwrap();
            eps[0]
                .xfer_and_signal(&[], &NodeSet::single(1), 0, None, Some(EventId(1)))
                .unwrap();
            // The spinning wait gives up spinning and sleeps; a later signal still wakes it.
            thread::sleep(Duration::from_millis(50));
            eps[0]
                .xfer_and_signal(&[], &NodeSet::single(1), 0, None, Some(EventId(0)))
                .unwrap();
            assert!(waiter.join().unwrap() >= Duration::from_millis(90));
            assert!(timed.join().unwrap());
        });
        assert_no_signals(&eps);
    }

    /// Data written before a signal is visible to the node that consumes it.
    pub fn ping_pong_orders_data(f: Factory) {
        const ROUNDS: u64 = 2000;
        let eps = f(2, 64, 1);
        let ping = |me: usize, other: u32, first: bool| {
            let ep = eps[me].as_ref();
            for i in 0..ROUNDS {
                if !first || i > 0 {
                    assert!(ep.test_event(EventId(0), Wait::Timeout(LONG)).unwrap());
                    let got = u64::from_le_bytes(read(ep, 8, 8).try_into().unwrap());
                    assert_eq!(got, if first { i * 2 - 1 } else { i * 2 });
                }
                let v: u64 = if first { i * 2 } else { i * 2 + 1 };
                ep.xfer_and_signal(
                    &v.to_le_bytes(),
                    &NodeSet::single(other),
                    8,
                    None,
                    Some(EventId(0)),
                )
                .unwrap();
            }
        };
        thread::scope(|s| {
            s.spawn(|| ping(0, 1, true));
            s.spawn(|| ping(1, 0, false));
        });
        // Node 0 still has the last reply pending.
        assert!(eps[0].test_event(EventId(0), Wait::Poll).unwrap());
        assert_no_signals(&eps);
    }

    /// `xfer_and_signal_nowait`: each destination applies the transfers in the order they
    /// were sent, each before its signal: after consuming k signals, the data of the first
    /// k transfers is there (a large one included).
    pub fn nowait_xfers_apply_in_order(f: Factory) {
        const SMALL: usize = 400;
        const BIG: usize = 300_000;
        let big_at = 8 * (SMALL + 1);
        let eps = f(3, big_at + BIG, 1);
        let big: Vec<u8> = (0..BIG).map(|i| (i * 7 + 3) as u8).collect();
        let to = NodeSet::from_nodes([1, 2]);
        for i in 0..SMALL {
            if i == SMALL / 2 {
                eps[0]
                    .xfer_and_signal_nowait(&big, &to, big_at, Some(EventId(0)))
                    .unwrap();
            }
            let v = (i as u64 + 1).to_le_bytes();
            eps[0]
                .xfer_and_signal_nowait(&v, &to, 8 * (i + 1), Some(EventId(0)))
                .unwrap();
        }
        for ep in &eps[1..] {
            for k in 0..=SMALL {
                assert!(ep.test_event(EventId(0), Wait::Timeout(LONG)).unwrap());
                // k + 1 signals consumed: the first k + 1 transfers are applied.
                // The large one is the (SMALL / 2 + 1)-th.
                let smalls = if k >= SMALL / 2 { k } else { k + 1 };
                for i in 0..smalls {
                    let got =
                        u64::from_le_bytes(read(ep.as_ref(), 8 * (i + 1), 8).try_into().unwrap());
                    assert_eq!(
                        got,
                        i as u64 + 1,
                        "node {}: transfer {i} after {k} signals",
                        ep.node()
                    );
                }
                if k == SMALL / 2 || k == SMALL {
                    assert_eq!(read(ep.as_ref(), big_at, BIG), big, "the large transfer");
                }
            }
        }
        assert_eq!(
            read(eps[0].as_ref(), 8, 8),
            [0; 8],
            "node 0 was no destination"
        );
        assert_no_signals(&eps);
    }

    const OPS: [(CmpOp, u64); 4] = [
        (CmpOp::Ge, 10),
        (CmpOp::Lt, 11),
        (CmpOp::Eq, 10),
        (CmpOp::Ne, 11),
    ];

    fn set_var(eps: &[Box<dyn Transport>], var: usize, v: u64) {
        for ep in eps {
            ep.store_var(var, v).unwrap();
        }
    }

    fn vars(eps: &[Box<dyn Transport>], var: usize) -> Vec<u64> {
        eps.iter().map(|ep| ep.load_var(var).unwrap()).collect()
    }

    pub fn caw_true_writes_everywhere(f: Factory) {
        let eps = f(4, 256, 1);
        let dest = NodeSet::from_nodes([0, 1, 3]);
        for (i, (op, cmp)) in OPS.into_iter().enumerate() {
            set_var(&eps, 8, 10);
            set_var(&eps, 64, 0);
            let w = 100 + i as u64;
            assert!(
                eps[2]
                    .compare_and_write(8, op, cmp, &dest, Some((64, w)))
                    .unwrap(),
                "{op:?}"
            );
            assert_eq!(
                vars(&eps, 64),
                [w, w, 0, w],
                "{op:?}: only the set is written"
            );
            assert_eq!(vars(&eps, 8), [10; 4]);
            // Without a write it only reports.
            assert!(eps[0].compare_and_write(8, op, cmp, &dest, None).unwrap());
            assert_eq!(vars(&eps, 64), [w, w, 0, w]);
        }
        // Writing the compared variable itself.
        set_var(&eps, 8, 10);
        assert!(eps[1]
            .compare_and_write(8, CmpOp::Eq, 10, &NodeSet::all(4), Some((8, 11)))
            .unwrap());
        assert_eq!(vars(&eps, 8), [11; 4]);
        // Nothing else moved: the data area outside the variables is still zero.
        for ep in &eps {
            assert!(read(ep.as_ref(), 16, 48).iter().all(|&b| b == 0));
        }
    }

    pub fn caw_false_on_one_writes_nowhere(f: Factory) {
        let eps = f(4, 256, 1);
        // (op, compared value, the odd node's value making it false on that node only)
        let cases = [
            (CmpOp::Ge, 10, 9),
            (CmpOp::Lt, 11, 11),
            (CmpOp::Eq, 10, 12),
            (CmpOp::Ne, 11, 11),
        ];
        for (op, cmp, odd) in cases {
            for odd_node in 0..4 {
                set_var(&eps, 8, 10);
                eps[odd_node].store_var(8, odd).unwrap();
                set_var(&eps, 64, 7);
                let r = eps[0]
                    .compare_and_write(8, op, cmp, &NodeSet::all(4), Some((64, 99)))
                    .unwrap();
                assert!(!r, "{op:?} with node {odd_node} = {odd}");
                assert_eq!(vars(&eps, 64), [7; 4], "{op:?}: nothing written");
            }
        }
        // False on a node outside the set does not matter.
        set_var(&eps, 8, 10);
        eps[3].store_var(8, 0).unwrap();
        set_var(&eps, 64, 7);
        assert!(eps[3]
            .compare_and_write(
                8,
                CmpOp::Eq,
                10,
                &NodeSet::from_nodes([0, 1, 2]),
                Some((64, 1))
            )
            .unwrap());
        assert_eq!(vars(&eps, 64), [1, 1, 1, 7]);
    }

    pub fn caw_refuses_bad_arguments(f: Factory) {
        let eps = f(3, 128, 1);
        let all = NodeSet::all(3);
        let caw =
            |var, dest: &NodeSet, write| eps[0].compare_and_write(var, CmpOp::Eq, 0, dest, write);
        assert_eq!(caw(3, &all, None), Err(TransportError::Misaligned(3)));
        assert_eq!(
            caw(8, &all, Some((12, 1))),
            Err(TransportError::Misaligned(12))
        );
        assert_eq!(
            caw(128, &all, None),
            Err(TransportError::OutOfBounds {
                offset: 128,
                end: 136,
                size: 128
            })
        );
        assert_eq!(
            caw(0, &all, Some((128, 1))),
            Err(TransportError::OutOfBounds {
                offset: 128,
                end: 136,
                size: 128
            })
        );
        assert_eq!(
            caw(0, &NodeSet::from_nodes([]), Some((8, 1))),
            Err(TransportError::EmptyNodeSet)
        );
        assert_eq!(
            caw(0, &NodeSet::from_nodes([1, 5]), Some((8, 1))),
            Err(TransportError::NoSuchNode { node: 5, nodes: 3 })
        );
        // The last variable is in bounds; the comparison would hold (all zero), so the
        // refusals above really wrote nothing.
        assert!(caw(120, &all, None).unwrap());
        assert_all_zero(&eps);
        assert_eq!(eps[1].load_var(4), Err(TransportError::Misaligned(4)));
        assert_eq!(eps[1].store_var(9, 1), Err(TransportError::Misaligned(9)));
        assert!(matches!(
            eps[1].load_var(128),
            Err(TransportError::OutOfBounds { .. })
        ));
        assert!(matches!(
            eps[1].store_var(usize::MAX - 7, 1),
            Err(TransportError::OutOfBounds { .. })
        ));
        assert_all_zero(&eps);
    }

    /// Many threads increment one counter on every node with CAW(var == k) -> k + 1.
    /// Sequential consistency means no increment is lost or applied twice.
    pub fn concurrent_caw_counter(f: Factory) {
        const PER_THREAD: u64 = 300;
        const THREADS_PER_NODE: usize = 2;
        let eps = f(4, 64, 1);
        let all = NodeSet::all(4);
        thread::scope(|s| {
            for ep in &eps {
                for _ in 0..THREADS_PER_NODE {
                    let all = &all;
                    s.spawn(move || {
                        for _ in 0..PER_THREAD {
                            let mut k = ep.load_var(16).unwrap();
                            while !ep
                                .compare_and_write(16, CmpOp::Eq, k, all, Some((16, k + 1)))
                                .unwrap()
                            {
                                k = ep.load_var(16).unwrap();
                            }
                        }
                    });
                }
            }
        });
        let total = PER_THREAD * (THREADS_PER_NODE * eps.len()) as u64;
        assert_eq!(vars(&eps, 16), [total; 4]);
    }

    pub fn variables_local(f: Factory) {
        let eps = f(2, 64, 1);
        eps[0].store_var(56, u64::MAX - 1).unwrap();
        assert_eq!(eps[0].load_var(56).unwrap(), u64::MAX - 1);
        assert_eq!(eps[1].load_var(56).unwrap(), 0, "store_var is local");
        assert_eq!(read(eps[0].as_ref(), 56, 8), (u64::MAX - 1).to_ne_bytes());
    }
}

/// The shm transport across processes: a forked child attaches to the fabric through its
/// descriptor and runs node 1 while this process runs node 0. The child only does raw
/// transport operations and leaves with `_exit`, never returning into the test harness.
#[test]
fn shm_across_processes() {
    const INCREMENTS: u64 = 500;
    let fabric = ShmFabric::create(2, 4096, 2).unwrap();
    let fd = fabric.fd();
    let all = NodeSet::all(2);
    let increment = |ep: &dyn Transport| {
        for _ in 0..INCREMENTS {
            let mut k = ep.load_var(0).unwrap();
            while !ep
                .compare_and_write(0, CmpOp::Eq, k, &all, Some((0, k + 1)))
                .unwrap()
            {
                k = ep.load_var(0).unwrap();
            }
        }
    };

    // SAFETY: fork in a multithreaded test binary; the child only uses the transport
    // (memory it maps itself, futexes, and malloc, which glibc keeps usable after fork)
    // and leaves with _exit, so no state of other threads is touched.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = std::panic::catch_unwind(|| {
            // A fresh mapping of the segment through the inherited descriptor.
            // SAFETY: the descriptor was inherited across fork and stays open while
            // borrowed (the parent's fabric owns it in this process too).
            let child_fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }
                .try_clone_to_owned()
                .unwrap();
            let attached = ShmFabric::attach(child_fd).unwrap();
            let ep = attached.endpoint(1);
            assert!(ep
                .test_event(EventId(0), Wait::Timeout(Duration::from_secs(20)))
                .unwrap());
            let mut buf = [0u8; 5];
            ep.read_local(64, &mut buf).unwrap();
            assert_eq!(&buf, b"ping!");
            increment(&ep);
            ep.xfer_and_signal(b"pong!", &NodeSet::single(0), 64, None, Some(EventId(1)))
                .unwrap();
        })
        .map_or(1, |_| 0);
        // SAFETY: terminates the child without running the harness or atexit handlers.
        unsafe { libc::_exit(code) };
    }

    let ep = fabric.endpoint(0);
    ep.xfer_and_signal(b"ping!", &NodeSet::single(1), 64, None, Some(EventId(0)))
        .unwrap();
    increment(&ep);
    let got_reply = ep
        .test_event(EventId(1), Wait::Timeout(Duration::from_secs(20)))
        .unwrap();
    let mut status = 0;
    // SAFETY: waiting for our own child; `status` is a valid out-pointer.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(r, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child failed: {status:#x}"
    );
    assert!(got_reply);
    let mut buf = [0u8; 5];
    ep.read_local(64, &mut buf).unwrap();
    assert_eq!(&buf, b"pong!");
    assert_eq!(ep.load_var(0).unwrap(), 2 * INCREMENTS);
    assert_eq!(fabric.endpoint(1).load_var(0).unwrap(), 2 * INCREMENTS);
}
