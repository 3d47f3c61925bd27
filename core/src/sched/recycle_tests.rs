//! A scheduler handed its spent decisions back ([`Scheduler::recycle`]) decides exactly
//! what a scheduler that allocates afresh every slice decides.

use super::*;
use crate::descriptor::*;

fn desc(seq: &mut [u64], rank: u32, kind: DescKind, peer: i32, bytes: u64) -> Descriptor {
    let s = seq[rank as usize];
    seq[rank as usize] += 1;
    Descriptor {
        rank,
        kind: kind as u8,
        seq: s,
        request: s + 1,
        comm: COMM_WORLD,
        peer,
        tag: 7,
        bytes,
        rbytes: bytes,
        ..Default::default()
    }
}

/// Slices of sends, receives (small, eager, chunked over slices) and collectives.
fn slices(ranks: u32) -> Vec<Vec<Descriptor>> {
    let mut seq = vec![0; ranks as usize];
    let mut out = Vec::new();
    for round in 0..12u64 {
        let mut posted = Vec::new();
        for r in 0..ranks {
            let peer = ((r + 1) % ranks) as i32;
            let from = ((r + ranks - 1) % ranks) as i32;
            let bytes = [1, 64, 5000, 3 << 20][(round % 4) as usize];
            posted.push(desc(&mut seq, r, DescKind::Send, peer, bytes));
            if round % 3 != 2 {
                // Every third round's receives come a slice late.
                posted.push(desc(&mut seq, r, DescKind::Recv, from, bytes));
            }
            if round % 3 == 0 && round > 0 {
                posted.push(desc(&mut seq, r, DescKind::Recv, from, bytes));
            }
            if round % 5 == 4 {
                posted.push(desc(&mut seq, r, DescKind::Allreduce, -1, 8));
            }
        }
        posted.sort_by_key(|d| d.id());
        out.push(posted);
    }
    // Slices with nothing posted let chunked messages finish.
    out.extend(std::iter::repeat_with(Vec::new).take(8));
    out
}

#[test]
fn recycled_decisions_are_the_decisions_of_a_fresh_scheduler() {
    let ranks = 4;
    let mut fresh = Scheduler::new(SchedConfig::single_node(ranks));
    let mut recycling = Scheduler::new(SchedConfig::single_node(ranks));
    let mut cited_twice = false;
    for (i, posted) in slices(ranks).iter().enumerate() {
        let slice = i as u64 + 1;
        let want = fresh.schedule(slice, posted).expect("canonical");
        let got = recycling.schedule(slice, posted).expect("canonical");
        assert_eq!(got, want, "slice {slice}");
        assert!(got.catalog.windows(2).all(|w| w[0].id() < w[1].id()));
        cited_twice |= want
            .decisions
            .iter()
            .any(|d| matches!(d, Decision::Match(_)))
            && want
                .decisions
                .iter()
                .any(|d| matches!(d, Decision::Complete(_)));
        recycling.recycle(got);
    }
    assert!(
        cited_twice,
        "some slice matched and completed the same descriptors"
    );
}

#[test]
fn the_vectors_of_a_very_large_slice_are_not_kept() {
    let mut sched = Scheduler::new(SchedConfig::single_node(2));
    let small = SliceDecisions {
        catalog: Vec::with_capacity(16),
        ..Default::default()
    };
    sched.recycle(small);
    assert!(sched.spare.is_some());
    let large = SliceDecisions {
        catalog: Vec::with_capacity(MAX_RECYCLED + 1),
        ..Default::default()
    };
    sched.recycle(large);
    assert!(sched.spare.is_none(), "a grown catalog is freed, not held");
}

/// The catalog comes out by id, each descriptor once, as its last citation had it, in
/// both of `Out::finish`'s paths (already in order, and not).
#[test]
fn the_catalog_is_by_id_with_each_descriptors_last_citation() {
    let d = |rank: u32, seq: u64, bytes: u64| Descriptor {
        rank,
        seq,
        bytes,
        ..Default::default()
    };
    let mut order = CatalogOrder::default();
    let ids = |s: &SliceDecisions| {
        s.catalog
            .iter()
            .map(|c| (c.rank, c.seq, c.bytes))
            .collect::<Vec<_>>()
    };
    for round in 0..2 {
        let mut out = Out::new(None);
        for c in [d(1, 0, 10), d(0, 3, 1), d(1, 0, 20), d(0, 1, 5), d(0, 3, 2)] {
            out.cite(&c);
        }
        let s = out.finish(9, &mut order);
        assert_eq!(ids(&s), [(0, 1, 5), (0, 3, 2), (1, 0, 20)], "round {round}");
        let mut out = Out::new(Some(s));
        for c in [d(0, 0, 1), d(0, 2, 1), d(3, 0, 1)] {
            out.cite(&c);
        }
        let s = out.finish(10, &mut order);
        assert_eq!(ids(&s), [(0, 0, 1), (0, 2, 1), (3, 0, 1)], "round {round}");
    }
}
