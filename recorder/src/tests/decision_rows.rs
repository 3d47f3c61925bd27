//! The `decision` table looks exactly as it did before the field visitor filled it: rows
//! expanded now from the compact schedule (`expand.rs`) match rows written by the hand-written writer of earlier releases, both for
//! a synthetic slice with every kind and for the whole recording the previous release made
//! (tests/data/v0.1-token_ring.db, format 4).

use std::path::Path;

use rusqlite::{Connection, OpenFlags};
use strobe_runtime::descriptor::{Completion, DescKind, DescRef, RtError};
use strobe_runtime::engine::{SliceRecord, SliceSink};
use strobe_runtime::launcher::JobOutcome;
use strobe_runtime::sched::{CollectiveRun, Completed, Decision, Match, NewComm, SliceDecisions};

use super::{job, record, report};
use crate::{open_recording, RecordOptions, Recorder};

/// Every column of every `decision` row as text (NULL, integers, quoted strings), in order.
fn decision_rows(c: &Connection, slices: &str) -> Vec<String> {
    let sql = format!("SELECT * FROM decision WHERE slice IN ({slices}) ORDER BY slice, idx");
    let mut st = c.prepare(&sql).unwrap();
    let n = st.column_count();
    let rows = st
        .query_map([], |row| {
            let cols: Vec<String> = (0..n)
                .map(|i| match row.get_ref(i).unwrap() {
                    rusqlite::types::ValueRef::Null => "NULL".to_string(),
                    rusqlite::types::ValueRef::Integer(v) => v.to_string(),
                    rusqlite::types::ValueRef::Text(t) => {
                        format!("'{}'", String::from_utf8_lossy(t))
                    }
                    other => panic!("unexpected column value {other:?}"),
                })
                .collect();
            Ok(cols.join("|"))
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

/// Record `records` into a fresh file and return its decision rows.
fn rows_written(records: &[SliceRecord]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("run.db");
    let rec = Recorder::create(&p, &job(), RecordOptions::default()).unwrap();
    for r in records {
        rec.slice(r);
    }
    rec.finish(&report(JobOutcome::Success, records.len() as u64))
        .unwrap();
    // The recording holds compact blobs; its rows are what the expansion writes.
    crate::expand::expand_schedule(&mut Connection::open(&p).unwrap()).unwrap();
    decision_rows(&open_recording(&p).unwrap(), "SELECT slice FROM slice")
}

/// Rows of a slice holding every kind of decision, as the writer of earlier releases wrote
/// them (taken from its output).
const GOLDEN_ROWS: [&str; 10] = [
        "1|0|'match'|0|1|1|1|NULL|NULL|NULL|8|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|0|NULL|NULL",
        "1|1|'chunk'|0|1|1|1|NULL|NULL|0|8|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL",
        "1|2|'collective'|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|0|NULL|1|'MPI_Barrier'|0|'[[0,1],[1,1]]'|NULL|NULL|NULL|NULL|NULL|NULL|NULL",
        "1|3|'complete'|NULL|NULL|NULL|NULL|0|1|NULL|8|NULL|NULL|NULL|NULL|NULL|NULL|2|-1|7|'ok'|0|-1|0",
        "1|4|'complete'|NULL|NULL|NULL|NULL|1|1|NULL|8|NULL|NULL|NULL|NULL|NULL|NULL|2|0|7|'ok'|0|-1|0",
        "1|5|'match'|0|1|1|1|NULL|NULL|NULL|1099511627776|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|1|NULL|NULL",
        "1|6|'collective'|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|2147483649|NULL|3|'MPI_Allreduce'|-1|'[]'|NULL|NULL|NULL|NULL|NULL|NULL|NULL",
        "1|7|'new_comm'|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|2|0|NULL|NULL|NULL|'[3,1,0]'|NULL|NULL|NULL|NULL|NULL|NULL|NULL",
        "1|8|'new_comm'|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|3|2|NULL|NULL|NULL|'[]'|NULL|NULL|NULL|NULL|NULL|NULL|NULL",
        "1|9|'complete'|NULL|NULL|NULL|NULL|1|1|NULL|0|NULL|NULL|NULL|NULL|NULL|NULL|-1|-2|-2147483648|'truncate'|3|9|21474836488",
];

#[test]
fn every_kind_of_decision_is_a_row_as_before() {
    let mut sr = record(1);
    let (s, r) = (DescRef { rank: 0, seq: 1 }, DescRef { rank: 1, seq: 1 });
    sr.decisions.decisions.extend([
        Decision::Match(Match {
            send: s,
            recv: r,
            bytes: 1 << 40,
            truncated: true,
        }),
        Decision::Collective(CollectiveRun {
            comm: 0x8000_0001,
            coll_seq: 3,
            kind: DescKind::Allreduce,
            root: -1,
            parts: vec![],
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
    ]);
    sr.digest = sr.decisions.digest();
    assert_eq!(rows_written(&[sr]), GOLDEN_ROWS);
}

fn v01_recording() -> Connection {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/v0.1-token_ring.db");
    // Read-only: the file is the previous release's output and must never change.
    Connection::open_with_flags(&p, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap()
}

/// Every decision set the previous release stored, decoded through strobe-schema.
fn v01_decision_sets(c: &Connection) -> Vec<(SliceDecisions, u64)> {
    let mut st = c
        .prepare(
            "SELECT d.decisions, s.digest FROM slice_decisions d JOIN slice s USING (slice)
             ORDER BY slice",
        )
        .unwrap();
    let rows = st
        .query_map([], |r| Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, i64>(1)?)))
        .unwrap();
    rows.map(|row| {
        let (blob, digest) = row.unwrap();
        let set = strobe_schema::decode_slice_decisions(&blob).expect("a v0.1 blob decodes");
        (set, digest as u64)
    })
    .collect()
}

#[test]
fn the_previous_release_recording_digests_as_recorded() {
    let c = v01_recording();
    let sets = v01_decision_sets(&c);
    assert_eq!(sets.len(), 206, "every non-empty slice has a decision set");
    for (set, recorded) in &sets {
        assert_eq!(set.digest(), *recorded, "slice {}", set.slice);
        assert_ne!(set.digest(), 0);
    }
    // The re-encoded sets are the stored bytes (the wire format did not change either).
    let mut st = c
        .prepare("SELECT decisions FROM slice_decisions ORDER BY slice")
        .unwrap();
    let blobs = st.query_map([], |r| r.get::<_, Vec<u8>>(0)).unwrap();
    for ((set, _), blob) in sets.iter().zip(blobs) {
        assert_eq!(strobe_schema::encode_slice_decisions(set), blob.unwrap());
    }
}

#[test]
fn the_previous_release_recording_rows_are_written_again_identically() {
    let c = v01_recording();
    let records: Vec<SliceRecord> = v01_decision_sets(&c)
        .into_iter()
        .map(|(set, digest)| SliceRecord {
            slice: set.slice,
            digest,
            decisions: set,
            // Only the decisions are compared; record(1)'s calls would repeat.
            descriptors: Vec::new(),
            blocked: Vec::new(),
            ..record(1)
        })
        .collect();
    let written = rows_written(&records);
    let recorded = decision_rows(&c, "SELECT slice FROM slice_decisions");
    assert_eq!(recorded.len(), 830);
    assert_eq!(written, recorded);
}
