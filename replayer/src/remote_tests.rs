use super::*;

fn log() -> ReplayLog {
    ReplayLog {
        ranks: vec![
            RankLog {
                posting: vec![(1, 2), (4, 1), (200, 300)],
                outcomes: vec![OutcomeRec {
                    kind: 3,
                    n: 0,
                    value: 1234,
                }],
                blocked_flips: vec![3, 5],
            },
            RankLog {
                posting: vec![(2, 1)],
                outcomes: vec![OutcomeRec {
                    kind: 0,
                    n: 7,
                    value: 0,
                }],
                blocked_flips: Vec::new(),
            },
            RankLog::default(),
        ],
        digests: vec![0; 250],
    }
}

fn package() -> ReplayPackage {
    ReplayPackage::from_log(log(), Some("success"), 3)
}

#[test]
fn a_node_gets_every_rank_s_tables_and_only_its_own_outcomes() {
    let bytes = package().encode_for_node(1, |r| r == 1);
    let p = ReplayPackage::decode(&bytes).unwrap();
    assert_eq!((p.ranks(), p.last_slice(), p.node), (3, 250, Some(1)));
    for (got, want) in p.log.ranks.iter().zip(log().ranks) {
        assert_eq!(got.posting, want.posting);
        assert_eq!(got.blocked_flips, want.blocked_flips);
    }
    assert_eq!(
        p.outcomes(),
        vec![Vec::new(), log().ranks[1].outcomes.clone(), Vec::new()]
    );
}

#[test]
fn the_daemon_s_source_answers_as_the_local_replay_s() {
    let full = package();
    let local = ReplaySource::new(
        &log(),
        Some("success"),
        Arc::new(Shared::new(Arc::new(Controller::new()), 3)),
    );
    for node in [0, 1] {
        let p = ReplayPackage::decode(&full.encode_for_node(node, |_| true)).unwrap();
        let src = p.node_replay(node).source();
        for rank in 0..3 {
            for slice in 0..=252 {
                assert_eq!(src.quota(slice, rank), local.quota(slice, rank));
                assert_eq!(src.post_limit(slice, rank), local.post_limit(slice, rank));
            }
        }
        let none: &[Descriptor] = &[];
        let got: Vec<_> = (1..=5).map(|s| src.blocked(s, none)).collect();
        if node == 0 {
            // The recorded blocked sets (flips at 3 and 5 for rank 0).
            let want: Vec<_> = (1..=5).map(|s| local.blocked(s, none)).collect();
            assert_eq!(got, want);
            assert_eq!(got[2], Some(vec![0]));
        } else {
            // Other nodes observe (no slice records reach them).
            assert!(got.iter().all(Option::is_none));
        }
    }
}

#[test]
fn the_tap_feeds_the_prediction_and_passes_everything_on() {
    use strobe_runtime::descriptor::Completion;
    use strobe_runtime::descriptor::{DescKind, DescRef};
    use strobe_runtime::engine::{GlobalMetrics, StartReason};
    use strobe_runtime::sched::{Completed, Decision, SliceDecisions};

    #[derive(Default)]
    struct Count(std::sync::atomic::AtomicU32);
    impl SliceSink for Count {
        fn slice(&self, _: &SliceRecord) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
    // Rank 2 posts a blocking receive in slice 1 (predicted blocked from slice 1) and it
    // completes in slice 1: predicted not blocked at slice 2.
    let log = ReplayLog {
        ranks: vec![RankLog::default(), RankLog::default(), RankLog::default()],
        digests: vec![0; 4],
    };
    let p = ReplayPackage::from_log(log, Some("success"), 1);
    let nr = p.node_replay(0);
    let count = Arc::new(Count::default());
    let sink = nr.tap(count.clone());
    let src = nr.source();
    let recv = Descriptor {
        rank: 2,
        seq: 1,
        kind: DescKind::Recv as u8,
        flags: 1,
        ..Descriptor::default()
    };
    assert_eq!(src.blocked(1, &[recv]), Some(vec![2]));
    let dec = SliceDecisions {
        slice: 1,
        decisions: vec![Decision::Complete(Completed {
            desc: DescRef { rank: 2, seq: 1 },
            completion: Completion {
                tag: 0,
                bytes: 0,
                value: u64::MAX,
                ..Completion::default()
            },
        })],
        wake: vec![2],
        catalog: vec![recv],
    };
    sink.slice(&SliceRecord {
        slice: 1,
        reason: StartReason::Logical,
        start_ns: 0,
        global: GlobalMetrics::default(),
        descriptors: vec![recv],
        digest: dec.digest(),
        decisions: dec,
        blocked: Vec::new(),
        sites: Vec::new(),
    });
    assert_eq!(count.0.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert_eq!(src.blocked(2, &[]), Some(vec![]));
}

#[test]
fn damaged_packages_are_errors_never_panics() {
    let bytes = package().encode_for_node(0, |_| true);
    let mut x = 0x1234_5678_9abc_def1u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut refused = 0;
    for _ in 0..5000 {
        let mut b = bytes.clone();
        if next() % 2 == 0 {
            b.truncate((next() % b.len() as u64) as usize);
        } else {
            let i = (next() % b.len() as u64) as usize;
            b[i] ^= (next() as u8) | 1;
        }
        if ReplayPackage::decode(&b).is_err() {
            refused += 1;
        }
    }
    assert!(refused > 1000, "only {refused} refused");
    // A posting table that goes past the last slice is caught.
    let mut w = decode_replay_package(&bytes).unwrap();
    w.last_slice = 10;
    let e = ReplayPackage::decode(&encode_replay_package(&w)).unwrap_err();
    assert!(e.to_string().contains("past slice 10"), "{e}");
}
