//! The compact schedule log (format 14) answers what the per-row tables answered: the
//! previous release's recording (tests/data/v0.1-token_ring.db, format 4, with `descriptor`
//! and `decision` rows) is written again through today's writer, and its match history, its
//! `message_life` rows, its descriptors and decisions per slice, and `strobe stats`' counts
//! are compared with the original's.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};
use strobe_runtime::descriptor::{DescKind, Descriptor};
use strobe_runtime::engine::{SliceRecord, SliceSink};
use strobe_runtime::launcher::JobOutcome;

use super::{job, record, report};
use crate::{RecordOptions, Recorder, Recording};

fn v01() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/v0.1-token_ring.db")
}

fn kind_code(name: &str) -> u8 {
    (0..=u8::MAX)
        .find(|c| DescKind::from_u8(*c).is_some_and(|k| k.mpi_name() == name))
        .unwrap_or_else(|| panic!("unknown call {name}"))
}

/// The v0.1 recording's descriptor rows handled by `slice`, as descriptors.
fn descriptors(c: &Connection, slice: u64) -> Vec<Descriptor> {
    let mut st = c
        .prepare(
            "SELECT rank, seq, kind, peer, tag, comm, bytes, rbytes, request, flags
             FROM descriptor WHERE slice = ?1 ORDER BY rank, seq",
        )
        .unwrap();
    st.query_map([slice as i64], |r| {
        Ok(Descriptor {
            rank: r.get(0)?,
            seq: r.get::<_, i64>(1)? as u64,
            kind: kind_code(&r.get::<_, String>(2)?),
            peer: r.get(3)?,
            tag: r.get(4)?,
            comm: r.get::<_, i64>(5)? as u32,
            bytes: r.get::<_, i64>(6)? as u64,
            rbytes: r.get::<_, i64>(7)? as u64,
            request: r.get::<_, i64>(8)? as u64,
            flags: r.get::<_, i64>(9)? as u8,
            ..Descriptor::default()
        })
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// The v0.1 recording written again by today's writer (compact schedule log).
fn rewritten(dir: &Path) -> std::path::PathBuf {
    let old = Recording::open(&v01()).unwrap();
    let c = Connection::open_with_flags(v01(), OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let p = dir.join("again.db");
    let mut j = job();
    j.ranks = old.job().ranks;
    let rec = Recorder::create(&p, &j, RecordOptions::default()).unwrap();
    let last = old.last_slice();
    for slice in 1..=last {
        let Some(row) = old.slice(slice).unwrap() else {
            continue;
        };
        let mut sr = record(1);
        sr.slice = slice;
        sr.digest = row.digest as u64;
        sr.descriptors = descriptors(&c, slice);
        sr.decisions.slice = slice;
        sr.decisions.decisions = old.decisions(slice).unwrap().unwrap_or_default();
        sr.decisions.wake = Vec::new();
        sr.blocked = Vec::new();
        let set = &sr.decisions;
        assert_eq!(set.digest(), sr.digest, "slice {slice}");
        SliceSink::slice(&rec, &SliceRecord { ..sr });
    }
    let mut rep = report(JobOutcome::Success, last);
    rep.rank_status = vec![Some(0); j.ranks as usize];
    rec.finish(&rep).unwrap();
    p
}

fn rows(c: &Connection, sql: &str) -> Vec<String> {
    let mut st = c.prepare(sql).unwrap();
    let n = st.column_count();
    st.query_map([], |r| {
        Ok((0..n)
            .map(|i| format!("{:?}", r.get_ref(i).unwrap()))
            .collect::<Vec<_>>()
            .join("|"))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

#[test]
fn the_compact_schedule_answers_what_the_rows_answered() {
    let dir = tempfile::tempdir().unwrap();
    let p = rewritten(dir.path());
    let (old, new) = (
        Recording::open(&v01()).unwrap(),
        Recording::open(&p).unwrap(),
    );
    let c = crate::open_recording(&p).unwrap();
    assert_eq!(rows(&c, "SELECT count(*) FROM descriptor"), ["Integer(0)"]);
    assert_eq!(rows(&c, "SELECT count(*) FROM decision"), ["Integer(0)"]);
    // The History tab, rank by rank.
    for rank in 0..old.job().ranks {
        let (a, b) = (
            old.match_history(rank, usize::MAX).unwrap().unwrap(),
            new.match_history(rank, usize::MAX).unwrap().unwrap(),
        );
        assert!(!a.entries.is_empty(), "rank {rank}");
        assert_eq!(a.entries, b.entries, "rank {rank}");
        // From the blobs (no `message` rows), a limit cuts as the query's LIMIT did.
        let two = new.match_history(rank, 2).unwrap().unwrap();
        assert!(two.truncated && !b.truncated);
        assert_eq!(two.entries, b.entries[..2]);
        let exact = new.match_history(rank, b.entries.len()).unwrap().unwrap();
        assert!(!exact.truncated);
    }
    // No `message` rows are written (format 17): `message_life` is empty until exported.
    let oc = Connection::open_with_flags(v01(), OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let life = "SELECT * FROM message_life ORDER BY send_rank, send_seq";
    assert_eq!(rows(&oc, life).len(), 200);
    assert_eq!(rows(&c, "SELECT count(*) FROM message"), ["Integer(0)"]);
    assert_eq!(rows(&c, life), Vec::<String>::new());
    // Slice by slice, the same descriptors and decisions.
    for slice in 1..=old.last_slice() {
        assert_eq!(
            old.descriptors(slice).unwrap(),
            new.descriptors(slice).unwrap()
        );
        assert_eq!(old.decisions(slice).unwrap(), new.decisions(slice).unwrap());
    }
    let (sa, sb) = (old.stats(None).unwrap(), new.stats(None).unwrap());
    assert_eq!(sa.decisions, sb.decisions);
    assert_eq!(sa.descriptors, sb.descriptors);
    // And the search finds the same slices (the rewritten file has no blocked spans, so
    // its answers are the descriptors' alone, as SQL over the old rows gives them).
    let nearest = |from: u64, forward: bool, pattern: &str, rank: Option<u32>| -> Option<u64> {
        let (op, order) = if forward { (">", "") } else { ("<", "DESC") };
        let rank = rank.map_or(String::new(), |r| format!("AND rank = {r}"));
        let sql = format!(
            "SELECT slice FROM descriptor WHERE slice {op} {from} AND kind LIKE '{pattern}'
             {rank} ORDER BY slice {order} LIMIT 1"
        );
        oc.query_row(&sql, [], |r| r.get::<_, i64>(0))
            .ok()
            .map(|s| s as u64)
    };
    for from in [1, 50, 150, 400] {
        for forward in [true, false] {
            for pattern in ["MPI_Send", "%Recv", "%Barrier%", "MPI_Bcast"] {
                assert_eq!(
                    new.search_call(pattern, from, forward).unwrap(),
                    nearest(from, forward, pattern, None),
                    "{pattern} from {from} forward {forward}"
                );
                assert_eq!(
                    new.search_rank_call(2, pattern, from, forward).unwrap(),
                    nearest(from, forward, pattern, Some(2)),
                    "rank 2 {pattern} from {from} forward {forward}"
                );
            }
        }
    }
    // A blocked rank's call: the last descriptor it posted, found in the blobs.
    for slice in [10, 100, old.last_slice()] {
        for rank in 0..old.job().ranks {
            assert_eq!(
                old.last_descriptor(rank, slice).unwrap(),
                new.last_descriptor(rank, slice).unwrap(),
                "rank {rank} slice {slice}"
            );
        }
    }
    // The rows expanded from the blobs are the original rows.
    let mut w = Connection::open(&p).unwrap();
    crate::expand::expand_schedule(&mut w).unwrap();
    for sql in [
        "SELECT rank, seq, slice, kind, peer, tag, comm, bytes, rbytes, request, flags
         FROM descriptor ORDER BY rank, seq",
        "SELECT * FROM decision ORDER BY slice, idx",
    ] {
        assert_eq!(rows(&oc, sql), rows(&w, sql), "{sql}");
    }
    // Expanded, nothing is counted twice; every message's life, from the `message` rows
    // export wrote, as the old view computed it; the History tab reads those rows.
    let again = Recording::open(&p).unwrap();
    assert_eq!(again.stats(None).unwrap().decisions, sa.decisions);
    assert_eq!(rows(&w, life), rows(&oc, life));
    for rank in 0..old.job().ranks {
        assert_eq!(
            old.match_history(rank, usize::MAX).unwrap(),
            again.match_history(rank, usize::MAX).unwrap(),
            "rank {rank}"
        );
    }
}

#[test]
fn a_migrated_file_keeps_its_rows_and_answers_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("migrated.db");
    std::fs::copy(v01(), &p).unwrap();
    let mut w = Connection::open(&p).unwrap();
    crate::migrations::migrate(&mut w).unwrap();
    // Nothing to expand: its schedule is in rows.
    assert_eq!(crate::expand::expand_schedule(&mut w).unwrap(), (0, 0));
    drop(w);
    let (old, new) = (
        Recording::open(&v01()).unwrap(),
        Recording::open(&p).unwrap(),
    );
    for rank in 0..old.job().ranks {
        assert_eq!(
            old.match_history(rank, usize::MAX).unwrap(),
            new.match_history(rank, usize::MAX).unwrap()
        );
    }
    let life = "SELECT * FROM message_life ORDER BY send_rank, send_seq";
    let oc = Connection::open_with_flags(v01(), OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    assert_eq!(
        rows(&crate::open_recording(&p).unwrap(), life),
        rows(&oc, life)
    );
    assert_eq!(
        old.stats(None).unwrap().decisions,
        new.stats(None).unwrap().decisions
    );
    assert_eq!(old.descriptors(7).unwrap(), new.descriptors(7).unwrap());
    assert_eq!(old.decisions(7).unwrap(), new.decisions(7).unwrap());
    // `node_slice`, a view over `node_metrics` from format 17, reads the rows as they were.
    let nc = crate::open_recording(&p).unwrap();
    for sql in [
        "SELECT * FROM node_slice ORDER BY slice, node",
        "SELECT * FROM summary_node ORDER BY span, block",
    ] {
        assert!(!rows(&oc, sql).is_empty(), "{sql}");
        assert_eq!(rows(&nc, sql), rows(&oc, sql), "{sql}");
    }
    assert_eq!(
        old.metrics(1..=old.last_slice()).unwrap(),
        new.metrics(1..=old.last_slice()).unwrap()
    );
}
