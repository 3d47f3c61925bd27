use sha2::{Digest, Sha256};
use strobe_core::descriptor::{Completion, DescKind, DescRef, Descriptor, RtError, FLAG_BLOCKING};
use strobe_core::sched::{
    Chunk, CollectiveRun, Completed, Decision, Match, NewComm, SliceDecisions,
};
use strobe_core::slice::{Phase, StartReason};

use crate::convert::*;

/// Every kind code the runtime knows (DescKind::from_u8 over the whole byte range).
fn all_kinds() -> Vec<DescKind> {
    (0..=255u8).filter_map(DescKind::from_u8).collect()
}

fn r(rank: u32, seq: u64) -> DescRef {
    DescRef { rank, seq }
}

/// The same SHA-256 the generator stamps into the generated file (schema/codegen).
#[test]
fn generated_code_is_not_stale() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sources: Vec<_> = std::fs::read_dir(dir.join("capnp"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "capnp"))
        .collect();
    sources.sort();
    assert!(!sources.is_empty());
    let mut h = Sha256::new();
    for s in &sources {
        h.update(s.file_name().unwrap().to_string_lossy().as_bytes());
        h.update([0u8]);
        h.update(std::fs::read(s).unwrap());
    }
    let want: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    let generated = std::fs::read_to_string(dir.join("src/generated/strobe_capnp.rs")).unwrap();
    let stamp = generated
        .lines()
        .take(5)
        .find_map(|l| l.split("schema-sha256: ").nth(1))
        .expect("generated file carries a schema-sha256 stamp");
    assert_eq!(
        stamp.trim(),
        want,
        "schema/src/generated is stale: run scripts/regen-schema.sh"
    );
}

#[test]
fn every_descriptor_kind_round_trips_through_a_dem_batch() {
    let kinds = all_kinds();
    assert_eq!(kinds.len(), 27, "a new DescKind needs a schema enumerant");
    let descriptors: Vec<Descriptor> = kinds
        .iter()
        .enumerate()
        .map(|(i, k)| Descriptor {
            rank: 3,
            kind: *k as u8,
            flags: FLAG_BLOCKING | (i as u8 & 2),
            elem: (i % 17) as u8,
            op: (i % 14) as u8,
            seq: 1000 + i as u64,
            request: 7 + i as u64,
            comm: if i % 2 == 0 { 0 } else { 0x8000_0003 },
            peer: i as i32 - 2,
            tag: -1 + i as i32 * 1000,
            buf: 0x7fff_0000_0000 + i as u64,
            bytes: u64::MAX - i as u64,
            rbuf: 0x5555_0000 + i as u64,
            rbytes: i as u64 * 4096,
            aux: i64::MIN as u64,
            aux2: 42,
            ..Descriptor::default()
        })
        .collect();
    let m = NodeMessage::Batch {
        slice: 12,
        node: 1,
        descriptors: descriptors.clone(),
    };
    let back = decode_node_message(&encode_node_message(&m)).unwrap();
    assert_eq!(back, m);
}

#[test]
fn an_unknown_descriptor_kind_stays_invalid() {
    let d = Descriptor {
        kind: 99,
        seq: 5,
        ..Descriptor::default()
    };
    let m = NodeMessage::Batch {
        slice: 1,
        node: 0,
        descriptors: vec![d],
    };
    let NodeMessage::Batch { descriptors, .. } =
        decode_node_message(&encode_node_message(&m)).unwrap()
    else {
        panic!("not a batch");
    };
    assert_eq!(descriptors[0].kind, 0);
    assert!(descriptors[0].kind().is_none());
    assert_eq!(descriptors[0].seq, 5);
}

fn every_decision_variant() -> Vec<Decision> {
    let mut v = vec![
        Decision::Match(Match {
            send: r(0, 1),
            recv: r(1, 2),
            bytes: 4096,
            truncated: false,
        }),
        Decision::Match(Match {
            send: r(2, u64::MAX),
            recv: r(u32::MAX, 0),
            bytes: 0,
            truncated: true,
        }),
        Decision::Chunk(Chunk {
            send: r(0, 1),
            recv: r(1, 2),
            offset: 4 << 20,
            len: 1 << 20,
        }),
        Decision::NewComm(NewComm {
            parent: 0,
            comm: 2,
            members: vec![3, 1, 0],
        }),
        Decision::NewComm(NewComm {
            parent: 2,
            comm: 3,
            members: vec![],
        }),
    ];
    for k in all_kinds().into_iter().filter(|k| k.is_collective()) {
        v.push(Decision::Collective(CollectiveRun {
            comm: 0x8000_0001,
            coll_seq: 9,
            kind: k,
            root: -1,
            parts: vec![r(0, 4), r(1, 5), r(2, 6)],
        }));
    }
    for (i, e) in [
        RtError::Ok,
        RtError::Truncate,
        RtError::Rank,
        RtError::Comm,
        RtError::CollectiveMismatch,
        RtError::Op,
        RtError::Arg,
        RtError::Aborted,
        RtError::Count,
        RtError::Buffer,
    ]
    .into_iter()
    .enumerate()
    {
        v.push(Decision::Complete(Completed {
            desc: r(i as u32, 10 + i as u64),
            completion: Completion {
                request: 77,
                source: -1 - i as i32,
                tag: i32::MAX,
                bytes: 123,
                error: e as u32,
                flags: i as u32 & 3,
                value: u64::MAX,
                value2: (5 << 32) | 8,
                _pad: 0,
            },
        }));
    }
    v
}

/// A slice's decision set holding every variant.
fn every_variant_set(slice: u64, wake: Vec<u32>) -> SliceDecisions {
    SliceDecisions {
        slice,
        decisions: every_decision_variant(),
        wake,
        catalog: Vec::new(),
    }
}

#[test]
fn every_decision_variant_round_trips_in_a_slice_set() {
    let sd = every_variant_set(42, vec![0, 1, 2, 9]);
    let blob = encode_slice_decisions(&sd);
    let back = decode_slice_decisions(&blob).unwrap();
    assert_eq!(back, sd);
    assert_eq!(back.digest(), sd.digest());
}

#[test]
fn the_catalog_does_not_travel() {
    let sd = SliceDecisions {
        slice: 1,
        decisions: vec![],
        wake: vec![],
        catalog: vec![Descriptor::default()],
    };
    let back = decode_slice_decisions(&encode_slice_decisions(&sd)).unwrap();
    assert!(back.catalog.is_empty());
}

#[test]
fn every_node_message_round_trips() {
    let mut msgs = vec![NodeMessage::Shutdown];
    for reason in [StartReason::First, StartReason::Timer, StartReason::Early] {
        msgs.push(NodeMessage::Strobe { slice: 7, reason });
    }
    for phase in [
        Phase::Dem,
        Phase::Msm,
        Phase::P2p,
        Phase::Bbm,
        Phase::RmRead,
        Phase::Rm,
    ] {
        msgs.push(NodeMessage::Done {
            slice: 8,
            node: 3,
            phase,
        });
    }
    msgs.push(NodeMessage::Decisions(every_variant_set(9, vec![4])));
    msgs.push(NodeMessage::Batch {
        slice: 2,
        node: 0,
        descriptors: vec![],
    });
    for m in msgs {
        assert_eq!(decode_node_message(&encode_node_message(&m)).unwrap(), m);
    }
}

#[test]
fn an_empty_decision_set_is_a_few_bytes() {
    let sd = SliceDecisions {
        slice: 100_000,
        ..SliceDecisions::default()
    };
    let blob = encode_slice_decisions(&sd);
    assert!(blob.len() <= 32, "{} bytes", blob.len());
}

#[test]
fn garbage_and_truncated_input_is_an_error_not_a_panic() {
    assert!(decode_slice_decisions(&[]).is_err());
    assert!(decode_node_message(&[0xff; 7]).is_err());
    let sd = every_variant_set(3, vec![1]);
    let blob = encode_slice_decisions(&sd);
    for cut in [1, blob.len() / 2, blob.len() - 1] {
        assert!(
            decode_slice_decisions(&blob[..cut]).is_err(),
            "cut at {cut}"
        );
    }
    // Flipping bytes must never panic; most flips are detected by the digest.
    let mut detected = 0;
    for i in 0..blob.len() {
        let mut b = blob.clone();
        b[i] ^= 0x5a;
        if decode_slice_decisions(&b).map_or(true, |d| d != sd) {
            detected += 1;
        }
    }
    assert!(detected > blob.len() / 2, "{detected} of {}", blob.len());
}

#[test]
fn a_wrong_digest_is_reported() {
    let sd = every_variant_set(3, vec![]);
    // Tamper with a decision (not the digest) through the generated types.
    let blob = encode_slice_decisions(&sd);
    let mut input = &blob[..];
    let msg = capnp::serialize_packed::read_message(&mut input, Default::default()).unwrap();
    let root: crate::generated::strobe_capnp::slice_decisions::Reader = msg.get_root().unwrap();
    let mut copy = capnp::message::Builder::new_default();
    copy.set_root(root).unwrap();
    {
        let root = copy
            .get_root::<crate::generated::strobe_capnp::slice_decisions::Builder>()
            .unwrap();
        let d = root.get_decisions().unwrap().get(0);
        let crate::generated::strobe_capnp::decision::Which::Matched(m) = d.which().unwrap() else {
            panic!("first decision is a match");
        };
        m.unwrap().set_bytes(4097);
    }
    let mut tampered = Vec::new();
    capnp::serialize_packed::write_message(&mut tampered, &copy).unwrap();
    match decode_slice_decisions(&tampered) {
        Err(SchemaError::Digest { slice: 3, .. }) => {}
        other => panic!("expected a digest error, got {other:?}"),
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The bytes on the wire and in recordings' `slice_decisions` blobs are those of the
/// hand-written encoder of earlier releases: the hashes below were taken from its output.
#[test]
fn decision_sets_encode_to_the_same_bytes_as_before() {
    let sd = every_variant_set(42, vec![0, 1, 2, 9]);
    let blob = encode_slice_decisions(&sd);
    assert_eq!(blob.len(), 1263);
    assert_eq!(
        sha256_hex(&blob),
        "49e2d10df5ff95ab1b17222fe37d772d501459f247d9f3559eb5684f4e2191d9"
    );
    assert_eq!(
        sha256_hex(&encode_node_message(&NodeMessage::Decisions(sd))),
        "8f95ea5c63ed99a6b2b06b8f760d9189b5f1622e206ef5d20d3f0f48770c7e55"
    );
}
