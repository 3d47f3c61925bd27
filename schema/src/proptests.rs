//! Property tests (issue 11, "Fuzzing"): a recording's decision-set blobs and the node
//! managers' messages are bytes from outside, so arbitrary bytes must decode to an error
//! or a value, never a panic; and arbitrary decision sets survive encode → decode whole
//! (the digest included, which `decode_slice_decisions` checks).

use proptest::prelude::*;
use strobe_core::descriptor::{Completion, DescKind, DescRef, RtError};
use strobe_core::sched::{
    Chunk, CollectiveRun, Completed, Decision, Match, NewComm, SliceDecisions,
};

use crate::convert::*;

fn desc_ref() -> impl Strategy<Value = DescRef> {
    (any::<u32>(), any::<u64>()).prop_map(|(rank, seq)| DescRef { rank, seq })
}

fn collective_kind() -> impl Strategy<Value = DescKind> {
    let kinds: Vec<DescKind> = (0..=255u8)
        .filter_map(DescKind::from_u8)
        .filter(|k| k.is_collective())
        .collect();
    proptest::sample::select(kinds)
}

fn completion() -> impl Strategy<Value = Completion> {
    (
        any::<u64>(),
        any::<i32>(),
        any::<i32>(),
        any::<u64>(),
        0u32..10,
        any::<u32>(),
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(
            |(request, source, tag, bytes, error, flags, value, value2)| Completion {
                request,
                source,
                tag,
                bytes,
                error: RtError::from_u32(error) as u32,
                flags,
                value,
                value2,
                _pad: 0,
            },
        )
}

fn decision() -> impl Strategy<Value = Decision> {
    prop_oneof![
        (desc_ref(), desc_ref(), any::<u64>(), any::<bool>()).prop_map(
            |(send, recv, bytes, truncated)| Decision::Match(Match {
                send,
                recv,
                bytes,
                truncated
            })
        ),
        (desc_ref(), desc_ref(), any::<u64>(), any::<u64>()).prop_map(
            |(send, recv, offset, len)| Decision::Chunk(Chunk {
                send,
                recv,
                offset,
                len
            })
        ),
        (
            any::<u32>(),
            any::<u64>(),
            collective_kind(),
            any::<i32>(),
            proptest::collection::vec(desc_ref(), 0..6)
        )
            .prop_map(|(comm, coll_seq, kind, root, parts)| {
                Decision::Collective(CollectiveRun {
                    comm,
                    coll_seq,
                    kind,
                    root,
                    parts,
                })
            }),
        (
            any::<u32>(),
            any::<u32>(),
            proptest::collection::vec(any::<u32>(), 0..6)
        )
            .prop_map(|(parent, comm, members)| Decision::NewComm(NewComm {
                parent,
                comm,
                members
            })),
        (desc_ref(), completion())
            .prop_map(|(desc, completion)| Decision::Complete(Completed { desc, completion })),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic_the_decoders(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_slice_decisions(&bytes);
        let _ = decode_node_message(&bytes);
        let _ = crate::sink::decode_sink_frame(&bytes);
        let _ = crate::sink::decode_replay_package(&bytes);
    }

    #[test]
    fn sink_frames_round_trip_and_survive_damage(
        slice in 1u64..u64::MAX,
        decisions in proptest::collection::vec(decision(), 0..8),
        blocked in proptest::collection::vec((any::<u32>(), any::<u32>()), 0..4),
        data in proptest::collection::vec(any::<u8>(), 0..64),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
    ) {
        use crate::sink::*;
        let sd = SliceDecisions { slice, decisions, wake: vec![], catalog: vec![] };
        let frames = [
            SinkFrame { node: 1, call: SinkCall::Slice(Box::new(WireSlice {
                slice,
                reason: strobe_core::slice::StartReason::Timer,
                start_ns: 5,
                global: WireGlobalMetrics { gtts_ns: 9, ..Default::default() },
                descriptors: vec![],
                digest: sd.digest(),
                decisions: sd,
                blocked,
                sites: vec![(2, WireCallSite { object: "a".into(), line: Some(3), ..Default::default() })],
            })) },
            SinkFrame { node: 2, call: SinkCall::Outcomes {
                rank: 1,
                recs: data.iter().map(|&b| WireOutcome { kind: b as u32, n: 1, value: 2 }).collect(),
            } },
        ];
        for f in frames {
            let mut blob = encode_sink_frame(&f);
            prop_assert_eq!(&decode_sink_frame(&blob).unwrap(), &f);
            for &(i, x) in &flips {
                let n = blob.len();
                blob[i % n] ^= x;
            }
            let _ = decode_sink_frame(&blob);
        }
    }

    #[test]
    fn a_damaged_encoding_never_panics(
        ds in proptest::collection::vec(decision(), 0..8),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        cut in any::<usize>(),
    ) {
        let sd = SliceDecisions { slice: 1, decisions: ds, wake: vec![], catalog: vec![] };
        let mut blob = encode_slice_decisions(&sd);
        for (i, x) in flips {
            let n = blob.len();
            blob[i % n] ^= x;
        }
        let _ = decode_slice_decisions(&blob);
        let n = blob.len();
        blob.truncate(cut % (n + 1));
        let _ = decode_slice_decisions(&blob);
    }

    #[test]
    fn arbitrary_decision_sets_round_trip(
        slice in any::<u64>(),
        decisions in proptest::collection::vec(decision(), 0..12),
        mut wake in proptest::collection::vec(any::<u32>(), 0..8),
    ) {
        wake.sort_unstable();
        wake.dedup();
        let sd = SliceDecisions { slice, decisions, wake, catalog: vec![] };
        let back = decode_slice_decisions(&encode_slice_decisions(&sd)).unwrap();
        prop_assert_eq!(back.digest(), sd.digest());
        prop_assert_eq!(back, sd);
    }
}
