//! The emulation keeps the semantics provider.rs promises (the transport relies on them).

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::super::provider::{
    Completion, CompletionQueue, MemoryRegion, Provider, QueuePair, RemoteAddr, Sge, WcOpcode,
    WcStatus, WorkRequest,
};
use super::{EmuFabric, FaultTarget};

/// One side of a connected pair: its region, its CQ (sends and receives) and its QP.
struct Side {
    mr: Arc<dyn MemoryRegion>,
    cq: Arc<dyn CompletionQueue>,
    qp: Arc<dyn QueuePair>,
}

fn pair(fabric: &Arc<EmuFabric>) -> (Side, Side) {
    let side = |n: u32| {
        let dev = fabric.open(&EmuFabric::device_name(n), 1).unwrap();
        let mr = dev.alloc_region(4096).unwrap();
        let cq = dev.create_cq(256).unwrap();
        let qp = dev.create_qp(&cq, &cq, 64).unwrap();
        Side { mr, cq, qp }
    };
    let (a, b) = (side(0), side(1));
    a.qp.connect(&b.qp.endpoint()).unwrap();
    b.qp.connect(&a.qp.endpoint()).unwrap();
    (a, b)
}

/// Waits (blocking on the CQ) for the next completion.
fn next(cq: &Arc<dyn CompletionQueue>) -> Completion {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut out = Vec::new();
    loop {
        if cq.poll(&mut out, 1).unwrap() == 1 {
            return out[0];
        }
        assert!(Instant::now() < deadline, "no completion within 20 s");
        cq.wait(Duration::from_millis(100)).unwrap();
    }
}

fn write_imm(from: &Side, to: &Side, offset: u64, len: usize, imm: u32, wr_id: u64) -> WorkRequest {
    WorkRequest::WriteWithImm {
        wr_id,
        local: Sge {
            mr: from.mr.clone(),
            offset: 0,
            len,
        },
        remote: RemoteAddr {
            addr: to.mr.addr() + offset,
            rkey: to.mr.rkey(),
        },
        imm,
        signaled: true,
    }
}

#[test]
fn write_with_immediate_lands_before_its_receive_completion() {
    let fabric = EmuFabric::new(2);
    let (a, b) = pair(&fabric);
    a.mr.write(0, b"hello, verbs");
    b.qp.post_recv(77).unwrap();
    a.qp.post_send(write_imm(&a, &b, 100, 12, 0xabc, 5))
        .unwrap();
    let recv = next(&b.cq);
    assert_eq!(recv.wr_id, 77);
    assert_eq!(recv.opcode, WcOpcode::RecvWithImm);
    assert_eq!((recv.imm, recv.byte_len), (Some(0xabc), 12));
    let mut got = [0u8; 12];
    b.mr.read(100, &mut got);
    assert_eq!(&got, b"hello, verbs");
    let sent = next(&a.cq);
    assert_eq!((sent.wr_id, sent.status), (5, WcStatus::Success));
}

#[test]
fn no_receive_posted_is_rnr_and_the_queue_pair_then_flushes() {
    let fabric = EmuFabric::new(2);
    let (a, b) = pair(&fabric);
    a.mr.write(0, &[1; 8]);
    a.qp.post_send(write_imm(&a, &b, 0, 8, 1, 1)).unwrap();
    a.qp.post_send(write_imm(&a, &b, 0, 8, 1, 2)).unwrap();
    assert_eq!(next(&a.cq).status, WcStatus::RnrRetryExceeded);
    assert_eq!(next(&a.cq).status, WcStatus::WrFlushError);
    let mut got = [0u8; 8];
    b.mr.read(0, &mut got);
    assert_eq!(got, [0; 8], "an RNR write must not land");
}

#[test]
fn bad_rkey_or_bounds_is_a_remote_access_error() {
    let fabric = EmuFabric::new(2);
    for bad in [
        |b: &Side| RemoteAddr {
            addr: b.mr.addr(),
            rkey: b.mr.rkey() ^ 1,
        },
        |b: &Side| RemoteAddr {
            addr: b.mr.addr() + 4090,
            rkey: b.mr.rkey(),
        },
        |b: &Side| RemoteAddr {
            addr: b.mr.addr() - 8,
            rkey: b.mr.rkey(),
        },
    ] {
        let (a, b) = pair(&fabric);
        let wr = WorkRequest::Write {
            wr_id: 9,
            local: Sge {
                mr: a.mr.clone(),
                offset: 0,
                len: 16,
            },
            remote: bad(&b),
            signaled: false,
        };
        a.qp.post_send(wr.clone()).unwrap();
        a.qp.post_send(wr).unwrap();
        let c = next(&a.cq);
        assert_eq!((c.wr_id, c.status), (9, WcStatus::RemoteAccessError));
        assert_eq!(next(&a.cq).status, WcStatus::WrFlushError);
    }
}

#[test]
fn atomics_are_atomic_among_themselves() {
    let fabric = EmuFabric::new(3);
    let target = fabric.open("emu2", 1).unwrap();
    let word = target.alloc_region(64).unwrap();
    let tcq = target.create_cq(16).unwrap();
    let threads: Vec<_> = (0..2)
        .map(|n| {
            let dev = fabric.open(&EmuFabric::device_name(n), 1).unwrap();
            let cq = dev.create_cq(16).unwrap();
            let qp = dev.create_qp(&cq, &cq, 8).unwrap();
            let theirs = target.create_qp(&tcq, &tcq, 8).unwrap();
            qp.connect(&theirs.endpoint()).unwrap();
            theirs.connect(&qp.endpoint()).unwrap();
            let result = dev.alloc_region(8).unwrap();
            let remote = RemoteAddr {
                addr: word.addr() + 8,
                rkey: word.rkey(),
            };
            thread::spawn(move || {
                let _keep = theirs;
                for i in 0..500 {
                    let result = Sge {
                        mr: result.clone(),
                        offset: 0,
                        len: 8,
                    };
                    let wr = if i % 2 == 0 {
                        WorkRequest::FetchAdd {
                            wr_id: i,
                            result,
                            remote,
                            add: 1,
                        }
                    } else {
                        // Retry a compare-and-swap increment until it wins.
                        loop {
                            let seen = {
                                let probe = WorkRequest::FetchAdd {
                                    wr_id: i,
                                    result: result.clone(),
                                    remote,
                                    add: 0,
                                };
                                qp.post_send(probe).unwrap();
                                assert_eq!(next(&cq).status, WcStatus::Success);
                                result.mr.load_u64(0)
                            };
                            let cas = WorkRequest::CompareSwap {
                                wr_id: i,
                                result: result.clone(),
                                remote,
                                compare: seen,
                                swap: seen + 1,
                            };
                            qp.post_send(cas).unwrap();
                            assert_eq!(next(&cq).status, WcStatus::Success);
                            if result.mr.load_u64(0) == seen {
                                break;
                            }
                        }
                        continue;
                    };
                    qp.post_send(wr).unwrap();
                    assert_eq!(next(&cq).status, WcStatus::Success);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(word.load_u64(8), 1000);
}

#[test]
fn injected_faults_hit_the_next_requests_then_stop() {
    let fabric = EmuFabric::new(2);
    let (a, b) = pair(&fabric);
    fabric.inject(FaultTarget::Towards(1), WcStatus::RetryExceeded, 1);
    b.qp.post_recv(1).unwrap();
    a.qp.post_send(write_imm(&a, &b, 0, 8, 1, 1)).unwrap();
    assert_eq!(next(&a.cq).status, WcStatus::RetryExceeded);
    // A fresh pair is not hit again: the fault was for one request.
    let (c, d) = pair(&fabric);
    d.qp.post_recv(1).unwrap();
    c.qp.post_send(write_imm(&c, &d, 0, 8, 1, 1)).unwrap();
    assert_eq!(next(&c.cq).status, WcStatus::Success);
    assert_eq!(next(&d.cq).status, WcStatus::Success);
}

#[test]
fn an_unplugged_device_gives_retry_exceeded() {
    let fabric = EmuFabric::new(2);
    let (a, b) = pair(&fabric);
    fabric.unplug(1);
    b.qp.post_recv(1).unwrap();
    a.qp.post_send(write_imm(&a, &b, 0, 8, 1, 1)).unwrap();
    assert_eq!(next(&a.cq).status, WcStatus::RetryExceeded);
}

#[test]
fn posting_before_connect_is_refused_and_wait_blocks_until_notified() {
    let fabric = EmuFabric::new(2);
    let dev = fabric.open("emu0", 1).unwrap();
    let mr = dev.alloc_region(8).unwrap();
    let cq = dev.create_cq(4).unwrap();
    let qp = dev.create_qp(&cq, &cq, 4).unwrap();
    let wr = WorkRequest::Write {
        wr_id: 1,
        local: Sge {
            mr: mr.clone(),
            offset: 0,
            len: 8,
        },
        remote: RemoteAddr {
            addr: mr.addr(),
            rkey: mr.rkey(),
        },
        signaled: true,
    };
    assert!(qp.post_send(wr).is_err());
    assert!(fabric.open("emu2", 1).is_err());
    assert!(fabric.open("emu0", 2).is_err());
    let (a, b) = pair(&fabric);
    let waiter = {
        let cq = b.cq.clone();
        thread::spawn(move || while !cq.wait(Duration::from_secs(20)).unwrap() {})
    };
    b.qp.post_recv(3).unwrap();
    a.qp.post_send(write_imm(&a, &b, 0, 8, 1, 1)).unwrap();
    waiter.join().unwrap();
    assert_eq!(next(&b.cq).wr_id, 3);
}
