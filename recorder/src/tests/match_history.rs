//! `Recording::match_history` reads the `decision` rows with SQL instead of decoding every
//! slice's decision-set blob (issue 17, item 9: 135 s on a message-heavy recording). Both
//! say the same thing; this checks the query against the blobs on the previous release's
//! recording (tests/data/v0.1-token_ring.db, format 4), rank by rank.

use std::path::Path;

use strobe_runtime::sched::Decision;

use crate::Recording;

/// A copy of the previous release's recording (the original must never change).
fn v01_copy(dir: &Path) -> Recording {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/v0.1-token_ring.db");
    let p = dir.join("ring.db");
    std::fs::copy(&src, &p).unwrap();
    Recording::open(&p).unwrap()
}

/// What the former implementation computed: every match received by `rank`, decoded from
/// the blobs in slice order, as (slice, recv seq, sender, send seq, bytes, truncated).
fn decoded_matches(rec: &Recording, rank: u32) -> Vec<(u64, u64, u32, u64, u64, bool)> {
    let mut out = Vec::new();
    for slice in 1..=rec.last_slice() {
        for d in rec.decisions(slice).unwrap().unwrap_or_default() {
            if let Decision::Match(m) = d {
                if m.recv.rank == rank {
                    out.push((
                        slice,
                        m.recv.seq,
                        m.send.rank,
                        m.send.seq,
                        m.bytes,
                        m.truncated,
                    ));
                }
            }
        }
    }
    out
}

#[test]
fn the_history_query_says_what_the_decision_blobs_say() {
    let dir = tempfile::tempdir().unwrap();
    let rec = v01_copy(dir.path());
    let mut total = 0;
    for rank in 0..rec.job().ranks {
        let h = rec
            .match_history(rank, usize::MAX)
            .unwrap()
            .expect("a history");
        assert_eq!(h.rank, rank);
        assert!(!h.truncated && !h.partial);
        let got: Vec<_> = h
            .entries
            .iter()
            .map(|e| {
                (
                    e.slice,
                    e.recv_seq,
                    e.sender,
                    e.send_seq,
                    e.bytes,
                    e.truncated,
                )
            })
            .collect();
        let want = decoded_matches(&rec, rank);
        assert!(!want.is_empty(), "every rank of a ring receives");
        assert_eq!(got, want, "rank {rank}");
        // The descriptors are joined: the receive's call, source and tag, the send's tag.
        for e in &h.entries {
            assert!(e.call.contains("Recv"), "rank {rank}: {e:?}");
            assert_eq!(
                e.source_asked,
                i64::from(e.sender),
                "a ring names its source"
            );
            assert_eq!(e.tag, e.tag_asked, "{e:?}");
        }
        total += got.len();
    }
    assert!(total > 0);
}

#[test]
fn the_history_stops_at_the_limit_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let rec = v01_copy(dir.path());
    let all = rec.match_history(1, usize::MAX).unwrap().unwrap();
    assert!(all.entries.len() > 2);
    let two = rec.match_history(1, 2).unwrap().unwrap();
    assert!(two.truncated);
    assert_eq!(two.entries, all.entries[..2]);
    let exact = rec.match_history(1, all.entries.len()).unwrap().unwrap();
    assert!(!exact.truncated, "no more than asked for exist");
    assert_eq!(exact.entries, all.entries);
    assert_eq!(rec.match_history(1, 0).unwrap().unwrap().entries, vec![]);
}
