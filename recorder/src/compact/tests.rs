//! The compact schedule codec: every decision kind and descriptor field round-trips, the
//! blobs are small, and damaged bytes are errors, never panics.

use proptest::prelude::*;
use strobe_core::descriptor::{Completion, DescKind, DescRef, Descriptor, RtError};
use strobe_core::sched::{Chunk, CollectiveRun, Completed, Decision, Match, NewComm};

use super::*;

fn every_kind() -> Vec<Decision> {
    let (s, r) = (
        DescRef {
            rank: 0,
            seq: 70_000,
        },
        DescRef {
            rank: 1,
            seq: 69_998,
        },
    );
    vec![
        Decision::Match(Match {
            send: s,
            recv: r,
            bytes: 1 << 40,
            truncated: true,
        }),
        Decision::Chunk(Chunk {
            send: s,
            recv: r,
            offset: 0,
            len: 8,
        }),
        Decision::Collective(CollectiveRun {
            comm: 0x8000_0001,
            coll_seq: 3,
            kind: DescKind::Allreduce,
            root: -1,
            parts: vec![s, r, DescRef { rank: 7, seq: 1 }],
        }),
        Decision::NewComm(NewComm {
            parent: 0,
            comm: 2,
            members: vec![3, 1, 0],
        }),
        Decision::Complete(Completed {
            desc: r,
            completion: Completion {
                request: u64::MAX,
                source: -2,
                tag: i32::MIN,
                bytes: 0,
                error: RtError::Truncate as u32,
                flags: 3,
                value: 9,
                value2: (5 << 32) | 8,
                _pad: 0,
            },
        }),
        Decision::Complete(Completed {
            desc: s,
            completion: Completion {
                request: 2,
                value: u64::MAX,
                value2: u64::MAX,
                ..Default::default()
            },
        }),
    ]
}

#[test]
fn every_decision_kind_round_trips() {
    let d = every_kind();
    let blob = encode_decisions(&d, &[0, 1, 7, 4000]);
    assert_eq!(decode_decisions(&blob).unwrap(), (d, vec![0, 1, 7, 4000]));
}

#[test]
fn a_ping_pong_message_costs_a_few_dozen_bytes() {
    // A match, its chunk and both completions: the decisions of one small message.
    let (s, r) = (
        DescRef {
            rank: 0,
            seq: 50_000,
        },
        DescRef {
            rank: 1,
            seq: 50_001,
        },
    );
    let done = |desc, request| {
        Decision::Complete(Completed {
            desc,
            completion: Completion {
                request,
                source: 0,
                tag: 1,
                bytes: 8,
                value: u64::MAX,
                value2: 0,
                ..Default::default()
            },
        })
    };
    let d = vec![
        Decision::Match(Match {
            send: s,
            recv: r,
            bytes: 8,
            truncated: false,
        }),
        Decision::Chunk(Chunk {
            send: s,
            recv: r,
            offset: 0,
            len: 8,
        }),
        done(s, 0),
        done(r, 0),
    ];
    let blob = encode_decisions(&d, &[0, 1]);
    assert!(blob.len() <= 48, "{} bytes", blob.len());
}

fn desc(rank: u32, seq: u64, kind: DescKind) -> Descriptor {
    Descriptor {
        rank,
        seq,
        kind: kind as u8,
        flags: 1,
        peer: -1,
        tag: -1,
        comm: 0x8000_0003,
        bytes: 1 << 33,
        rbytes: 5,
        request: 77,
        elem: 3,
        op: 2,
        ..Default::default()
    }
}

#[test]
fn descriptors_round_trip_without_addresses() {
    let mut split = desc(2, 0, DescKind::CommSplit);
    split.aux = 4;
    split.aux2 = 9;
    let mut send = desc(2, 1, DescKind::Send);
    send.buf = 0x7fff_0000;
    send.aux = 0x5555_0000;
    send.sig_hash = 1234;
    let ds = vec![
        desc(0, 5, DescKind::Recv),
        desc(0, 9, DescKind::Barrier),
        split,
        send,
        desc(1, 0, DescKind::Send),
    ];
    let back = decode_descriptors(&encode_descriptors(&ds)).unwrap();
    let mut want = ds.clone();
    // Addresses, a non-split aux and the type signature are not kept.
    want[3].buf = 0;
    want[3].aux = 0;
    want[3].sig_hash = 0;
    assert_eq!(back, want);
}

#[test]
fn damaged_blobs_are_errors() {
    let d = encode_decisions(&every_kind(), &[1]);
    for cut in 0..d.len() {
        assert!(decode_decisions(&d[..cut]).is_err(), "cut at {cut}");
    }
    let mut v3 = d.clone();
    v3[0] = 3;
    assert!(decode_decisions(&v3).unwrap_err().contains("codec version"));
    let ds = encode_descriptors(&[desc(0, 1, DescKind::Send)]);
    for cut in 0..ds.len() {
        assert!(decode_descriptors(&ds[..cut]).is_err(), "cut at {cut}");
    }
    assert!(decode_descriptors(&[CODEC_VERSION, 0xff, 0xff, 0xff, 0xff, 0x7f]).is_err());
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode_decisions(&tail);
        let _ = decode_descriptors(&tail);
        // Past the version byte, so the decoders get to the entries.
        let mut bytes = vec![CODEC_VERSION];
        bytes.extend(tail);
        // What decodes re-encodes stably (the fuzz target `compact_schedule` says the same).
        if let Ok((d, w)) = decode_decisions(&bytes) {
            let once = encode_decisions(&d, &w);
            let (d2, w2) = decode_decisions(&once).unwrap();
            prop_assert_eq!(encode_decisions(&d2, &w2), once);
        }
        if let Ok(ds) = decode_descriptors(&bytes) {
            let once = encode_descriptors(&ds);
            prop_assert_eq!(encode_descriptors(&decode_descriptors(&once).unwrap()), once);
        }
    }
}

#[test]
fn a_send_descriptor_costs_a_few_bytes() {
    // A blocking MPI_Send of 8 bytes to rank 1, tag 1, as rank 0's 50,000th call, and the
    // matching receive: the descriptors of one small message.
    let send = Descriptor {
        rank: 0,
        seq: 50_000,
        kind: DescKind::Send as u8,
        flags: 1,
        peer: 1,
        tag: 1,
        bytes: 8,
        ..Default::default()
    };
    let recv = Descriptor {
        rank: 1,
        seq: 50_001,
        kind: DescKind::Recv as u8,
        peer: 0,
        ..send
    };
    let blob = encode_descriptors(&[send, recv]);
    assert!(blob.len() <= 2 + 2 * 10, "{} bytes", blob.len());
    assert_eq!(decode_descriptors(&blob).unwrap(), vec![send, recv]);
}

/// The decisions and descriptors of a ping-pong slice: `n` small messages from rank 0 to 1.
fn ping_pong_slice(n: u64) -> (Vec<Descriptor>, Vec<Decision>) {
    let mut descs = Vec::new();
    let mut decisions = Vec::new();
    for i in 0..n {
        let (s, r) = (
            DescRef {
                rank: 0,
                seq: 50_000 + i,
            },
            DescRef {
                rank: 1,
                seq: 50_000 + i,
            },
        );
        let send = Descriptor {
            rank: 0,
            seq: s.seq,
            kind: DescKind::Send as u8,
            flags: 1,
            peer: 1,
            tag: 1,
            bytes: 8,
            ..Default::default()
        };
        descs.push(send);
        descs.push(Descriptor {
            rank: 1,
            seq: r.seq,
            kind: DescKind::Recv as u8,
            peer: 0,
            ..send
        });
        let done = |desc| {
            Decision::Complete(Completed {
                desc,
                completion: Completion {
                    source: 0,
                    tag: 1,
                    bytes: 8,
                    value: u64::MAX,
                    ..Default::default()
                },
            })
        };
        decisions.push(Decision::Match(Match {
            send: s,
            recv: r,
            bytes: 8,
            truncated: false,
        }));
        decisions.push(Decision::Chunk(Chunk {
            send: s,
            recv: r,
            offset: 0,
            len: 8,
        }));
        decisions.push(done(s));
        decisions.push(done(r));
    }
    descs.sort_by_key(|d| (d.rank, d.seq));
    (descs, decisions)
}

#[test]
fn packed_blobs_round_trip_and_shrink() {
    let (descs, decisions) = ping_pong_slice(8);
    let plain = encode_decisions(&decisions, &[0, 1]);
    let packed = pack(plain.clone());
    assert_eq!(packed[0], PACKED);
    assert!(
        packed.len() * 2 < plain.len(),
        "{} of {} bytes",
        packed.len(),
        plain.len()
    );
    assert_eq!(decode_decisions(&packed).unwrap(), (decisions, vec![0, 1]));
    let packed = pack(encode_descriptors(&descs));
    assert_eq!(packed[0], PACKED);
    assert_eq!(decode_descriptors(&packed).unwrap(), descs);
    // A short blob stays plain: packing it would make it longer.
    let short = encode_descriptors(&descs[..1]);
    assert_eq!(pack(short.clone()), short);
}

#[test]
fn damaged_packed_blobs_are_errors() {
    let (_, decisions) = ping_pong_slice(8);
    let packed = pack(encode_decisions(&decisions, &[0, 1]));
    for cut in 1..packed.len() {
        assert!(decode_decisions(&packed[..cut]).is_err(), "cut at {cut}");
    }
    // Unpacks, but not to a plain blob.
    assert!(decode_decisions(&[PACKED, 4, 9, 9, 9])
        .unwrap_err()
        .contains("plain blob"));
    // A copy from before the start.
    assert!(decode_decisions(&[PACKED, 0, 1, 1, 5]).is_err());
    // A blob unpacking past the cap is refused, never allocated in full: one literal,
    // then a copy of 2^40 bytes of it.
    let mut bomb = vec![PACKED, 0, CODEC_VERSION];
    crate::replay_log::put_varint(&mut bomb, (1 << 41) | 1);
    bomb.push(1);
    assert!(pack::unpack_at_most(&bomb, 1 << 12)
        .unwrap_err()
        .contains("past"));
    let mut small = vec![PACKED, 0, CODEC_VERSION];
    crate::replay_log::put_varint(&mut small, ((100 - 3) << 1) | 1);
    small.push(1);
    assert_eq!(pack::unpack_at_most(&small, 1 << 12).unwrap().len(), 101);
}

proptest! {
    #[test]
    fn packing_round_trips(body in proptest::collection::vec(0u8..4, 0..600)) {
        let mut plain = vec![CODEC_VERSION];
        plain.extend(body);
        let packed = pack(plain.clone());
        prop_assert!(packed.len() <= plain.len());
        prop_assert_eq!(&*unpack(&packed).unwrap(), &plain[..]);
    }

    #[test]
    fn arbitrary_packed_bytes_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut bytes = vec![PACKED];
        bytes.extend(tail);
        let _ = pack::unpack_at_most(&bytes, 1 << 16);
    }
}
