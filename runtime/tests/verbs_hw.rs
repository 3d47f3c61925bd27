//! The provider interface's semantics (`transport/verbs/provider.rs`) checked on a provider
//! through two queue pairs connected to each other: RDMA WRITE and WRITE WITH IMMEDIATE
//! (bytes visible before the receive completion, the immediate decoded), compare-and-swap
//! and fetch-and-add, completion-channel waits, and the error completions the transport
//! relies on (remote access error, then flushes; no receive posted).
//!
//! Over the libibverbs provider loaded from **a stand-in library** (tests/support/
//! fake_ibverbs.c, compiled against the real verbs.h) always, so the provider's FFI path
//! runs in CI; over the in-process **emulation** always (so the suite is exercised in CI and the
//! emulation keeps real verbs' semantics); over **real verbs** (libibverbs, loopback on one HCA: both queue pairs on the first
//! active port) only with `STROBE_VERBS_HW=1`, which `scripts/verbs-check.sh` sets on a
//! host with an RDMA device; CI has none, so there it prints why it checks nothing.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use strobe_runtime::transport::verbs::emu::EmuFabric;
use strobe_runtime::transport::verbs::ibverbs::IbverbsProvider;
use strobe_runtime::transport::verbs::provider::{
    Completion, CompletionQueue, Device, MemoryRegion, Provider, QueuePair, RemoteAddr, Sge,
    WcOpcode, WcStatus, WorkRequest,
};
use strobe_runtime::transport::verbs::system::{choose_port, memlock_limit};
use strobe_runtime::transport::verbs::system_provider;

const HW_ENV: &str = "STROBE_VERBS_HW";
const LONG: Duration = Duration::from_secs(10);

/// The real provider and its device name, when this run is asked to test hardware.
fn hardware() -> Option<(Arc<dyn Provider>, String)> {
    if std::env::var(HW_ENV).as_deref() != Ok("1") {
        eprintln!("skipped: set {HW_ENV}=1 on a host with an RDMA device (scripts/verbs-check.sh)");
        return None;
    }
    let provider = system_provider().unwrap_or_else(|e| panic!("{HW_ENV}=1 but {e}"));
    let devices = provider.devices().expect("list devices");
    let pinned = std::env::var("STROBE_VERBS_DEVICE").ok();
    let (name, _) = choose_port(&devices, memlock_limit(), pinned.as_deref())
        .unwrap_or_else(|e| panic!("{HW_ENV}=1 but {e}"));
    Some((provider, name))
}

/// One side of the pair: its device, region, completion queues and queue pair.
struct Side {
    _dev: Arc<dyn Device>,
    mr: Arc<dyn MemoryRegion>,
    send_cq: Arc<dyn CompletionQueue>,
    recv_cq: Arc<dyn CompletionQueue>,
    qp: Arc<dyn QueuePair>,
}

impl Side {
    fn open(provider: &dyn Provider, device: &str) -> Side {
        let info = provider
            .devices()
            .unwrap()
            .into_iter()
            .find(|d| d.name == device)
            .expect("device listed");
        let port = info.active_port().expect("an active port").port;
        let dev = provider.open(device, port).expect("open device");
        let mr = dev.alloc_region(1 << 20).expect("register 1 MiB");
        let send_cq = dev.create_cq(64).expect("send CQ");
        let recv_cq = dev.create_cq(64).expect("recv CQ");
        let qp = dev.create_qp(&send_cq, &recv_cq, 16).expect("create RC QP");
        Side {
            _dev: dev,
            mr,
            send_cq,
            recv_cq,
            qp,
        }
    }

    fn remote(&self, offset: u64) -> RemoteAddr {
        RemoteAddr {
            addr: self.mr.addr() + offset,
            rkey: self.mr.rkey(),
        }
    }

    fn sge(&self, offset: usize, len: usize) -> Sge {
        Sge {
            mr: self.mr.clone(),
            offset,
            len,
        }
    }
}

/// Two queue pairs connected to each other (on one device: loopback through the HCA).
fn connected_pair(provider: &dyn Provider, a: &str, b: &str) -> (Side, Side) {
    let (x, y) = (Side::open(provider, a), Side::open(provider, b));
    x.qp.connect(&y.qp.endpoint()).expect("connect a → b");
    y.qp.connect(&x.qp.endpoint()).expect("connect b → a");
    (x, y)
}

/// The next completion of `cq`, blocking on its channel between polls.
fn next(cq: &dyn CompletionQueue) -> Completion {
    let deadline = Instant::now() + LONG;
    let mut out = Vec::new();
    loop {
        if cq.poll(&mut out, 1).expect("poll CQ") == 1 {
            return out[0];
        }
        assert!(Instant::now() < deadline, "no completion within {LONG:?}");
        cq.wait(Duration::from_millis(100))
            .expect("wait on the channel");
    }
}

fn write_with_immediate_lands_before_its_receive_completion(
    provider: &dyn Provider,
    a: &str,
    b: &str,
) {
    let (x, y) = connected_pair(provider, a, b);
    y.qp.post_recv(77).unwrap();
    let payload: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 251) as u8).collect();
    x.mr.write(0, &payload);
    x.qp.post_send(WorkRequest::Write {
        wr_id: 1,
        local: x.sge(0, 1024),
        remote: y.remote(8192),
        signaled: true,
    })
    .unwrap();
    x.qp.post_send(WorkRequest::WriteWithImm {
        wr_id: 2,
        local: x.sge(1024, 3072),
        remote: y.remote(8192 + 1024),
        imm: 0xfeed_0042,
        signaled: true,
    })
    .unwrap();
    let (c1, c2) = (next(x.send_cq.as_ref()), next(x.send_cq.as_ref()));
    assert_eq!(
        (c1.wr_id, c1.status, c1.opcode),
        (1, WcStatus::Success, WcOpcode::Write)
    );
    assert_eq!(
        (c2.wr_id, c2.status, c2.opcode),
        (2, WcStatus::Success, WcOpcode::Write)
    );
    let r = next(y.recv_cq.as_ref());
    assert_eq!(
        (r.wr_id, r.status, r.opcode),
        (77, WcStatus::Success, WcOpcode::RecvWithImm)
    );
    assert_eq!(
        (r.imm, r.byte_len, r.qp_num),
        (Some(0xfeed_0042), 3072, y.qp.qp_num())
    );
    let mut got = vec![0; 4096];
    y.mr.read(8192, &mut got);
    assert_eq!(
        got, payload,
        "every byte of both writes is there at the receive completion"
    );
}

fn atomics_return_the_old_value(provider: &dyn Provider, a: &str, b: &str) {
    let (x, y) = connected_pair(provider, a, b);
    y.mr.store_u64(64, 5);
    let cas = |wr_id, compare, swap| WorkRequest::CompareSwap {
        wr_id,
        result: x.sge(0, 8),
        remote: y.remote(64),
        compare,
        swap,
    };
    x.qp.post_send(cas(10, 5, 9)).unwrap();
    let c = next(x.send_cq.as_ref());
    assert_eq!(
        (c.wr_id, c.status, c.opcode),
        (10, WcStatus::Success, WcOpcode::CompareSwap)
    );
    assert_eq!((x.mr.load_u64(0), y.mr.load_u64(64)), (5, 9), "swapped");
    x.qp.post_send(cas(11, 5, 1)).unwrap();
    next(x.send_cq.as_ref());
    assert_eq!(
        (x.mr.load_u64(0), y.mr.load_u64(64)),
        (9, 9),
        "compare failed: unchanged"
    );
    x.qp.post_send(WorkRequest::FetchAdd {
        wr_id: 12,
        result: x.sge(8, 8),
        remote: y.remote(64),
        add: 3,
    })
    .unwrap();
    let c = next(x.send_cq.as_ref());
    assert_eq!((c.wr_id, c.opcode), (12, WcOpcode::FetchAdd));
    assert_eq!((x.mr.load_u64(8), y.mr.load_u64(64)), (9, 12));
}

fn a_wrong_rkey_fails_and_flushes_what_follows(provider: &dyn Provider, a: &str, b: &str) {
    let (x, y) = connected_pair(provider, a, b);
    let bad = RemoteAddr {
        addr: y.mr.addr(),
        rkey: y.mr.rkey() ^ 0x5a5a_0000,
    };
    x.qp.post_send(WorkRequest::Write {
        wr_id: 20,
        local: x.sge(0, 64),
        remote: bad,
        signaled: true,
    })
    .unwrap();
    let c = next(x.send_cq.as_ref());
    assert_eq!((c.wr_id, c.status), (20, WcStatus::RemoteAccessError));
    // The QP is in the error state now: the next request is flushed (or refused at post).
    let posted = x.qp.post_send(WorkRequest::Write {
        wr_id: 21,
        local: x.sge(0, 64),
        remote: y.remote(0),
        signaled: true,
    });
    if posted.is_ok() {
        let c = next(x.send_cq.as_ref());
        assert_eq!((c.wr_id, c.status), (21, WcStatus::WrFlushError));
    }
}

fn a_write_with_immediate_without_receive_is_rnr(provider: &dyn Provider, a: &str, b: &str) {
    let (x, y) = connected_pair(provider, a, b);
    x.qp.post_send(WorkRequest::WriteWithImm {
        wr_id: 30,
        local: x.sge(0, 8),
        remote: y.remote(0),
        imm: 1,
        signaled: true,
    })
    .unwrap();
    let c = next(x.send_cq.as_ref());
    assert_eq!((c.wr_id, c.status), (30, WcStatus::RnrRetryExceeded));
}

fn an_idle_wait_times_out(provider: &dyn Provider, a: &str, b: &str) {
    let (x, _y) = connected_pair(provider, a, b);
    let mut out = Vec::new();
    assert_eq!(x.recv_cq.poll(&mut out, 8).unwrap(), 0);
    assert!(!x.recv_cq.wait(Duration::from_millis(20)).unwrap());
}

/// What a suite's tests run on: a provider, the devices of the two queue pairs, and what
/// to check after each test (with whatever must stay alive until then).
struct Setup {
    provider: Arc<dyn Provider>,
    a: String,
    b: String,
    after: Option<Box<dyn FnOnce()>>,
}

macro_rules! provider_suite {
    ($name:ident, $setup:expr) => {
        mod $name {
            use super::*;
            provider_suite!(@tests $setup;
                write_with_immediate_lands_before_its_receive_completion,
                atomics_return_the_old_value,
                a_wrong_rkey_fails_and_flushes_what_follows,
                a_write_with_immediate_without_receive_is_rnr,
                an_idle_wait_times_out);
        }
    };
    (@tests $setup:expr; $($test:ident),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                let setup: fn() -> Option<Setup> = $setup;
                if let Some(s) = setup() {
                    super::$test(s.provider.as_ref(), &s.a, &s.b);
                    drop(s.provider);
                    if let Some(after) = s.after {
                        after();
                    }
                }
            }
        )*
    };
}

/// Real verbs: both queue pairs on the chosen device (loopback through the HCA).
fn hardware_pair() -> Option<Setup> {
    hardware().map(|(provider, name)| Setup {
        provider,
        a: name.clone(),
        b: name,
        after: None,
    })
}

/// The in-process emulation (verbs/emu.rs), two devices: runs everywhere, so the suite
/// itself is checked in CI, and the emulation is held to what real verbs does.
fn emulated_pair() -> Option<Setup> {
    Some(Setup {
        provider: EmuFabric::new(2),
        a: EmuFabric::device_name(0),
        b: EmuFabric::device_name(1),
        after: None,
    })
}

/// The libibverbs provider over `tests/support/fake_ibverbs.c` (a stand-in for
/// libibverbs.so.1 built against the real verbs.h, one loopback device `fake0`): the
/// provider's whole FFI path (dlopen, the header's structs, the ops table, completion
/// channels, teardown order) runs here without a device. Serialized, so that after each
/// test every object the fake handed out is freed, and none before its users.
fn fake_pair() -> Option<Setup> {
    static SERIAL: Mutex<()> = Mutex::new(());
    let lib = fake_ibverbs::library()?;
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let provider = IbverbsProvider::load_from(lib.to_str().unwrap()).expect("load the fake");
    Some(Setup {
        provider: Arc::new(provider),
        a: "fake0".into(),
        b: "fake0".into(),
        after: Some(Box::new(move || {
            let (errors, live) = fake_ibverbs::counters(&lib);
            drop(guard);
            assert_eq!(errors, 0, "an object was freed while still in use");
            assert_eq!(live, 0, "objects left allocated in libibverbs");
        })),
    })
}

provider_suite!(libibverbs, hardware_pair);
provider_suite!(emulated, emulated_pair);
provider_suite!(fake_libibverbs, fake_pair);

#[path = "support/fake_ibverbs.rs"]
mod fake_ibverbs;

/// Registered regions are not copied into forked children (`MADV_DONTFORK`, the kernel's
/// `dc` flag): a daemon forks its ranks after registering, and a copy-on-write page would
/// leave the NIC writing into the child's copy. Checked in /proc/self/smaps, over the
/// stand-in libibverbs.
#[test]
fn registered_regions_are_not_copied_into_forked_children() {
    let Some(setup) = fake_pair() else { return };
    let dev = setup.provider.open("fake0", 1).expect("open fake0");
    let mr = dev.alloc_region(3 * 4096).expect("register");
    let start = format!("{:x}-", mr.addr());
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mapping = smaps
        .split_inclusive('\n')
        .skip_while(|l| !l.starts_with(&start))
        .take_while(|l| l.starts_with(&start) || !l.contains('-') || l.contains(':'))
        .collect::<String>();
    let flags = mapping
        .lines()
        .find_map(|l| l.strip_prefix("VmFlags:"))
        .unwrap_or_else(|| panic!("no mapping at {start} in smaps:\n{mapping}"));
    assert!(
        flags.split_whitespace().any(|f| f == "dc"),
        "VmFlags:{flags}"
    );
    drop((mr, dev));
    drop(setup.provider);
    if let Some(after) = setup.after {
        after();
    }
}
