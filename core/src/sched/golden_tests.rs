//! Golden digests: the digest is stored in every recording and verified on replay, so it
//! must never change. The values below were computed by the code before the field visitor
//! (the hand-written encoding of releases up to format 4) over this fixed corpus.

use super::*;
use crate::descriptor::{Completion, DescKind, DescRef};

fn r(rank: u32, seq: u64) -> DescRef {
    DescRef { rank, seq }
}

/// Every kind of decision, with extreme and signed values, every collective kind and every
/// error code.
pub(super) fn corpus() -> Vec<Decision> {
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
        Decision::Chunk(Chunk {
            send: r(7, 0),
            recv: r(3, 9),
            offset: 0,
            len: u64::MAX,
        }),
        Decision::NewComm(NewComm {
            parent: 0,
            comm: 2,
            members: vec![3, 1, 0],
        }),
        Decision::NewComm(NewComm {
            parent: u32::MAX,
            comm: 3,
            members: vec![],
        }),
    ];
    let collectives = (0..=255u8)
        .filter_map(DescKind::from_u8)
        .filter(|k| k.is_collective());
    for (i, k) in collectives.enumerate() {
        v.push(Decision::Collective(CollectiveRun {
            comm: 0x8000_0001 + i as u32,
            coll_seq: 9 * i as u64,
            kind: k,
            root: i as i32 - 2,
            parts: (0..i as u32 % 4).map(|p| r(p, 4 + p as u64 * 3)).collect(),
        }));
    }
    for e in 0..10u32 {
        v.push(Decision::Complete(Completed {
            desc: r(e, 10 + e as u64),
            completion: Completion {
                request: 77 * e as u64,
                source: -1 - e as i32,
                tag: if e % 2 == 0 {
                    i32::MAX
                } else {
                    i32::MIN + e as i32
                },
                bytes: 123 << e,
                error: e,
                flags: e & 3,
                value: u64::MAX - e as u64,
                value2: (5 << 32) | e as u64,
                _pad: 0,
            },
        }));
    }
    v
}

/// The digest of a slice holding only `corpus()[i]`, for every i.
const GOLDEN_ONE: [u64; 35] = [
    0xe7a1d80447116357,
    0x60c759fa3625ba30,
    0xd5c4f45e0fd74020,
    0x8006f5791665c737,
    0x6eda9c28de2dcc43,
    0x8d74c51674b899bf,
    0xb54c625c219abac3,
    0x984600121d5d0032,
    0xada0c915324a1368,
    0xbc7e9488bc1490fd,
    0xdfa9d24a0b05d69c,
    0x1c607504565e5355,
    0x529a2ffb3641c148,
    0x0df50cf961039415,
    0xe61168adf58fda64,
    0x31ac257cffdbf955,
    0x55508db851be9968,
    0xc1a3e252d6aadd6d,
    0x4ef83a2d8a9cc17c,
    0xa0222754bbe2fda5,
    0x7832e5df6c3e5ea8,
    0x2b41e306b3db3695,
    0xb230b5edf7cba560,
    0xd5642642459965e9,
    0x9ef32d691c4a67a4,
    0x2eaf83277f18787b,
    0x8b6d5ced2e483b23,
    0x1fd15b17faa0eea7,
    0xbcd10b235dd210e6,
    0xd469d7b014a9385a,
    0x29818a1152d9f157,
    0x756853ed83ad8849,
    0xcebf178e86cc8c1a,
    0x7e2ec339cf8fc2ef,
    0x38d566256d7db329,
];
/// The digest of the whole corpus as one slice.
const GOLDEN_ALL: u64 = 0x65191141094f70b8;
/// The digest of a slice without decisions.
const GOLDEN_EMPTY: u64 = 0xa8c7f832281a39c5;

fn digest_of(decisions: Vec<Decision>) -> u64 {
    SliceDecisions {
        slice: 1,
        decisions,
        ..SliceDecisions::default()
    }
    .digest()
}

#[test]
fn every_decision_digests_as_in_every_release_so_far() {
    let corpus = corpus();
    assert_eq!(corpus.len(), GOLDEN_ONE.len());
    for (i, (d, want)) in corpus.into_iter().zip(GOLDEN_ONE).enumerate() {
        let got = digest_of(vec![d.clone()]);
        assert_eq!(got, want, "decision #{i} ({d}): {got:#018x}");
    }
}

#[test]
fn slice_digests_are_as_in_every_release_so_far() {
    assert_eq!(digest_of(corpus()), GOLDEN_ALL);
    assert_eq!(digest_of(Vec::new()), GOLDEN_EMPTY);
    // Neither the slice number nor the wake list nor the catalog is digested.
    let other = SliceDecisions {
        slice: 99,
        decisions: corpus(),
        wake: vec![1, 2],
        catalog: vec![crate::descriptor::Descriptor::default()],
    };
    assert_eq!(other.digest(), GOLDEN_ALL);
}

#[test]
fn fnv_u64_equals_the_bytewise_digest() {
    use super::decision::Fnv64;
    let mut values: Vec<u64> = vec![0, 1, 0xff, 0x100, u64::MAX, u64::MAX - 1, 1 << 63];
    values.extend((0..64).flat_map(|k| [1u64 << k, (1u64 << k) - 1, (1u64 << k) + 1]));
    // A fixed pseudo-random walk over every magnitude (an LCG, masked to a random width).
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..20_000 {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        values.push(x >> (x % 64));
    }
    let (mut fast, mut slow) = (Fnv64::new(), Fnv64::new());
    for v in values {
        fast.u64(v);
        slow.bytes(&v.to_le_bytes());
        assert_eq!(fast.finish(), slow.finish(), "after {v:#x}");
    }
}
