use std::sync::Mutex;

use super::*;
use crate::descriptor::{Completion, DescKind, DescRef, Descriptor};
use crate::engine::StartReason;
use crate::sched::{Completed, Decision, Match, SliceDecisions};

/// Remembers every call, as text (the runtime's records are `Debug`, not all `PartialEq`).
#[derive(Default)]
struct Log(Mutex<Vec<String>>);

impl Log {
    fn push(&self, s: String) {
        self.0.lock().unwrap().push(s);
    }
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

impl SliceSink for Log {
    fn slice(&self, rec: &SliceRecord) {
        self.push(format!("slice {rec:?}"));
    }
    fn node_metrics(&self, slice: u64, m: &LocalMetrics) {
        self.push(format!("node {slice} {m:?}"));
    }
    fn mmds(&self, ranks: &[RankMmds]) {
        self.push(format!("mmds {ranks:?}"));
    }
    fn outcomes(&self, rank: u32, recs: &[OutcomeRec]) {
        self.push(format!("outcomes {rank} {recs:?}"));
    }
    fn payload(&self, p: &Payload) {
        self.push(format!("payload {p:?}"));
    }
}

fn desc(rank: u32, seq: u64, kind: DescKind, peer: i32) -> Descriptor {
    Descriptor {
        rank,
        seq,
        kind: kind as u8,
        flags: 1,
        peer,
        tag: 7,
        buf: 0x1000 + seq,
        bytes: 64,
        ..Descriptor::default()
    }
}

fn record() -> SliceRecord {
    let send = desc(0, 1, DescKind::Send, 1);
    let recv = desc(1, 1, DescKind::Recv, 0);
    let decisions = SliceDecisions {
        slice: 5,
        decisions: vec![
            Decision::Match(Match {
                send: send.id(),
                recv: recv.id(),
                bytes: 64,
                truncated: false,
            }),
            Decision::Complete(Completed {
                desc: recv.id(),
                completion: Completion {
                    tag: 7,
                    bytes: 64,
                    value: u64::MAX,
                    ..Completion::default()
                },
            }),
        ],
        wake: vec![1],
        catalog: vec![send, recv],
    };
    SliceRecord {
        slice: 5,
        reason: StartReason::Early,
        start_ns: 123_456,
        global: GlobalMetrics {
            getts: Duration::from_micros(500),
            gtdem: Duration::from_nanos(77),
            gtmsm: Duration::from_nanos(88),
            gtts: Duration::from_nanos(99),
            usrsts: 1,
            usrdem: 2,
            usrmsm: 3,
        },
        descriptors: vec![send, recv],
        digest: decisions.digest(),
        decisions,
        blocked: vec![
            (1, BlockedCall::Posted(DescKind::Recv)),
            (2, BlockedCall::Call(Primitive::Waitall)),
            (3, BlockedCall::QueueFull),
        ],
        sites: vec![(
            1,
            Arc::new(CallSite {
                object: "/bin/prog".into(),
                offset: 0x42,
                function: Some("main".into()),
                file: None,
                line: Some(12),
            }),
        )],
    }
}

fn mmds() -> RankMmds {
    RankMmds {
        rank: 3,
        wall_ns: 10,
        compute_ns: 6,
        comm_ns: 4,
        calls: 2,
        finalized: true,
        granularity_min_max: Some((1, 5)),
        granularity: vec![Bucket {
            lo: 0,
            hi: 8,
            count: 2,
        }],
        overhead: Vec::new(),
        primitives: vec![PrimitiveStats {
            primitive: Primitive::Waitall,
            count: 2,
            min_ns: 1,
            max_ns: 3,
            total_ns: 4,
            bytes: 0,
            latency: vec![Bucket {
                lo: 1,
                hi: 2,
                count: 1,
            }],
            size: Vec::new(),
        }],
    }
}

fn payload() -> Payload {
    Payload {
        slice: 5,
        desc: desc(1, 1, DescKind::Recv, 0),
        completion: Completion {
            request: 9,
            source: 0,
            tag: 7,
            bytes: 3,
            ..Completion::default()
        },
        matched_send: Some(DescRef { rank: 0, seq: 1 }),
        data: vec![1, 2, 3],
    }
}

/// Every kind of call, made on `sink`.
fn every_call(sink: &dyn SliceSink) {
    sink.slice(&record());
    sink.node_metrics(
        5,
        &LocalMetrics {
            node: 2,
            letts: Duration::from_nanos(11),
            bpts: 4,
            np2pmsm: 3,
            t_deliver: Duration::from_nanos(5),
            ..LocalMetrics::default()
        },
    );
    sink.outcomes(
        1,
        &[OutcomeRec {
            kind: 3,
            n: 0,
            value: 99,
        }],
    );
    sink.payload(&payload());
    sink.mmds(&[mmds()]);
}

/// A wire sink whose frames go to `frames`.
fn wire(node: u32, captures: Vec<bool>) -> (WireSink, Arc<Mutex<Vec<Vec<u8>>>>) {
    let frames = Arc::new(Mutex::new(Vec::new()));
    let f = frames.clone();
    let sink = WireSink::new(node, captures, Box::new(move |b| f.lock().unwrap().push(b))).unwrap();
    (sink, frames)
}

#[test]
fn every_call_arrives_as_it_was_made_in_order() {
    let direct = Log::default();
    every_call(&direct);
    let (sink, frames) = wire(2, Vec::new());
    every_call(&sink);
    sink.flush();
    let frames = std::mem::take(&mut *frames.lock().unwrap());
    assert_eq!(frames.len(), 5);
    let st = sink.stats();
    assert_eq!((st.frames, st.slice_frames), (5, 1));
    assert_eq!(st.bytes, frames.iter().map(|f| f.len() as u64).sum::<u64>());
    let through = Log::default();
    for f in &frames {
        assert_eq!(apply_sink_frame(f, &through).unwrap(), 2);
    }
    assert_eq!(through.take(), direct.take());
}

#[test]
fn the_catalog_crosses_so_descriptors_can_be_looked_up() {
    struct Lookup(Mutex<Option<Descriptor>>);
    impl SliceSink for Lookup {
        fn slice(&self, rec: &SliceRecord) {
            *self.0.lock().unwrap() = rec
                .decisions
                .descriptor(DescRef { rank: 1, seq: 1 })
                .copied();
        }
    }
    let (sink, frames) = wire(0, Vec::new());
    sink.slice(&record());
    sink.finish();
    let l = Lookup(Mutex::new(None));
    apply_sink_frame(&frames.lock().unwrap()[0], &l).unwrap();
    assert_eq!(*l.0.lock().unwrap(), Some(desc(1, 1, DescKind::Recv, 0)));
}

#[test]
fn captures_come_from_the_construction_value() {
    let (sink, _) = wire(1, vec![false, true]);
    assert!(!sink.captures(0));
    assert!(sink.captures(1));
    assert!(!sink.captures(7));
}

#[test]
fn calls_after_finish_are_dropped_not_blocked() {
    let (sink, frames) = wire(0, Vec::new());
    sink.finish();
    every_call(&sink);
    sink.flush();
    assert!(frames.lock().unwrap().is_empty());
}

/// xorshift64*: deterministic "random" bytes without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[test]
fn damaged_frames_are_errors_or_valid_calls_never_panics() {
    let (sink, frames) = wire(0, Vec::new());
    every_call(&sink);
    sink.finish();
    let frames = frames.lock().unwrap().clone();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let log = Log::default();
    let mut errors = 0;
    for round in 0..20_000u32 {
        let mut f = frames[round as usize % frames.len()].clone();
        match rng.next() % 4 {
            // Flip a few bytes.
            0 | 1 => {
                for _ in 0..1 + rng.next() % 4 {
                    let i = (rng.next() % f.len() as u64) as usize;
                    f[i] ^= (rng.next() as u8) | 1;
                }
            }
            // Cut it short.
            2 => f.truncate((rng.next() % f.len() as u64) as usize),
            // Pure noise.
            _ => {
                let n = (rng.next() % 300) as usize;
                f = (0..n).map(|_| rng.next() as u8).collect();
            }
        }
        if apply_sink_frame(&f, &log).is_err() {
            errors += 1;
        }
    }
    // Most damage is detected (the rest decodes to some other well-formed call).
    assert!(errors > 10_000, "only {errors} damaged frames refused");
    assert!(apply_sink_frame(&[], &log).is_err());
}

#[test]
fn an_unknown_mmds_slot_is_refused() {
    let mut w = mmds_to_wire(&mmds());
    w.primitives[0].slot = u16::MAX;
    let frame = encode_sink_frame(&SinkFrame {
        node: 0,
        call: SinkCall::Mmds(vec![w]),
    });
    let e = apply_sink_frame(&frame, &Log::default()).unwrap_err();
    assert!(e.to_string().contains("names no MPI primitive"), "{e}");
}

#[test]
fn an_unsorted_catalog_is_refused() {
    let mut w = slice_to_wire(&record());
    w.decisions.catalog.reverse();
    let frame = encode_sink_frame(&SinkFrame {
        node: 0,
        call: SinkCall::Slice(Box::new(w)),
    });
    let e = apply_sink_frame(&frame, &Log::default()).unwrap_err();
    assert!(e.to_string().contains("not sorted"), "{e}");
}

#[test]
fn a_frame_in_another_node_s_name_is_refused() {
    let (sink, frames) = wire(2, Vec::new());
    every_call(&sink);
    sink.finish();
    let frames = frames.lock().unwrap().clone();
    let log = Log::default();
    // Node 2's frames on node 2's connection: all but the slice record (node 0's alone).
    let refused: Vec<String> = frames
        .iter()
        .filter_map(|f| apply_node_frame(f, 2, &log).err().map(|e| e.to_string()))
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(refused[0].contains("only node 0 makes slice records"));
    assert_eq!(log.take().len(), 4);
    // On node 1's connection, every one is refused and nothing is called.
    for f in &frames {
        let e = apply_node_frame(f, 1, &log).unwrap_err();
        assert!(e.to_string().contains("frame of node 2"), "{e}");
    }
    assert!(log.take().is_empty());
    // Node metrics that name another node.
    let (sink, frames) = wire(0, Vec::new());
    sink.node_metrics(
        1,
        &LocalMetrics {
            node: 3,
            ..LocalMetrics::default()
        },
    );
    sink.finish();
    let e = apply_node_frame(&frames.lock().unwrap()[0], 0, &log).unwrap_err();
    assert!(e.to_string().contains("node 3's metrics"), "{e}");
}

#[test]
fn the_applier_feeds_the_mm_s_sink_and_counts_refusals() {
    let (sink, frames) = wire(1, Vec::new());
    sink.node_metrics(
        4,
        &LocalMetrics {
            node: 1,
            ..LocalMetrics::default()
        },
    );
    sink.outcomes(
        3,
        &[OutcomeRec {
            kind: 0,
            n: 2,
            value: 0,
        }],
    );
    sink.finish();
    let log = Arc::new(Log::default());
    let mm = FrameApplier::new(log.clone());
    for f in frames.lock().unwrap().iter() {
        mm.frame(1, f);
    }
    assert_eq!(log.take().len(), 2);
    assert_eq!(mm.refused(), (0, None));
    mm.frame(1, b"not a frame");
    mm.frame(0, &frames.lock().unwrap()[0]);
    let (n, why) = mm.refused();
    assert_eq!(n, 2);
    assert!(why.unwrap().starts_with("node 1: malformed sink frame"));
    assert!(log.take().is_empty());
}
