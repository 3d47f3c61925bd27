//! The content checksum (`checksum.rs`): written when a recording is finished, verified on
//! opening; damage that validation cannot see is refused; files without it are unverified.

use rusqlite::Connection;

use super::{record_n, RecordOptions};
use crate::checksum::{self, ChecksumState, ALGORITHM, COVERED};
use crate::Recording;

fn recorded() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("run.db");
    record_n(&p, 10, RecordOptions::default());
    (dir, p)
}

fn tamper(p: &std::path::Path, sql: &str) {
    Connection::open(p).unwrap().execute_batch(sql).unwrap();
}

fn open_err(p: &std::path::Path) -> String {
    match Recording::open(p) {
        Ok(_) => panic!("opened a tampered recording"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_finished_recording_is_sealed_and_verified() {
    let (_dir, p) = recorded();
    let c = Connection::open(&p).unwrap();
    let (algorithm, covers, digest) = checksum::stored(&c).unwrap().expect("a checksum row");
    assert_eq!(algorithm, ALGORITHM);
    let all: Vec<&str> = COVERED.iter().map(|c| c.table).collect();
    assert_eq!(covers, all.join(","));
    assert_eq!(digest.len(), 64);
    assert_eq!(checksum::compute(&c, COVERED).unwrap(), digest);
    let rec = Recording::open(&p).unwrap();
    assert_eq!(rec.checksum(), &ChecksumState::Verified);
    assert_eq!(rec.stats(None).unwrap().content_checksum, "verified");
}

/// Changes that validation accepts (each is a value strobe could have written) but that
/// make another run's recording: each is refused as damage by the checksum.
#[test]
fn damage_validation_cannot_see_is_refused_by_the_checksum() {
    for sql in [
        "UPDATE job SET deadlock_slices = deadlock_slices - 1",
        "UPDATE job SET cwd = '/'",
        "UPDATE job SET exit_status = 1",
        "UPDATE slice SET digest = digest + 1 WHERE slice = 3",
        "UPDATE rank SET exit_code = 3 WHERE rank = 0",
        "DELETE FROM replay_log WHERE (stream, rank, chunk) =
           (SELECT stream, rank, max(chunk) FROM replay_log GROUP BY stream, rank LIMIT 1)",
        "UPDATE slice SET start_ns = start_ns + 1 WHERE slice = 5",
        // A second checksum row, another algorithm, a table strobe does not cover.
        "INSERT INTO content_checksum SELECT * FROM content_checksum",
        "UPDATE content_checksum SET algorithm = 'md5'",
        "UPDATE content_checksum SET covers = 'job,sqlite_master'",
        "UPDATE content_checksum SET digest = upper(digest)",
    ] {
        let (_dir, p) = recorded();
        tamper(&p, sql);
        let e = open_err(&p);
        assert!(
            e.starts_with("damaged recording: content checksum"),
            "{sql}: {e}"
        );
    }
}

#[test]
fn a_file_without_a_checksum_opens_unverified() {
    // Cut by a crash (the checksum is written at the end), or older than the checksum.
    let (_dir, p) = recorded();
    tamper(&p, "DELETE FROM content_checksum");
    let rec = Recording::open(&p).unwrap();
    assert!(matches!(rec.checksum(), ChecksumState::Absent(why) if why.contains("cut short")));
    assert!(rec
        .stats(None)
        .unwrap()
        .content_checksum
        .starts_with("unverified"));
    let (_dir, p) = recorded();
    tamper(&p, "DROP TABLE content_checksum");
    let rec = Recording::open(&p).unwrap();
    assert!(matches!(rec.checksum(), ChecksumState::Absent(why) if why.contains("before")));
}

#[test]
fn covered_tables_are_the_ones_replay_and_stats_act_on() {
    let names: Vec<&str> = COVERED.iter().map(|c| c.table).collect();
    for t in ["job", "rank", "slice", "replay_log", "mmds_rank"] {
        assert!(names.contains(&t), "{t}");
    }
    // Each covered table exists in a new file and its order names real columns.
    let (_dir, p) = recorded();
    let c = Connection::open(&p).unwrap();
    for cov in COVERED {
        checksum::compute(&c, &[*cov]).unwrap();
    }
}

/// The encoding tells values apart by type and by row boundaries, not only by bytes.
#[test]
fn the_encoding_separates_types_and_rows() {
    let c = Connection::open_in_memory().unwrap();
    let t = [checksum::Covered {
        table: "t",
        order: "rowid",
    }];
    let digest_of = |rows: &str| {
        c.execute_batch(&format!(
            "DROP TABLE IF EXISTS t; CREATE TABLE t (a, b); {rows}"
        ))
        .unwrap();
        checksum::compute(&c, &t).unwrap()
    };
    let variants = [
        "INSERT INTO t VALUES (1, NULL)",
        "INSERT INTO t VALUES ('1', NULL)",
        "INSERT INTO t VALUES (1.0, NULL)",
        "INSERT INTO t VALUES (x'01', NULL)",
        "INSERT INTO t VALUES (1, '')",
        "INSERT INTO t VALUES ('ab', 'c')",
        "INSERT INTO t VALUES ('a', 'bc')",
        "INSERT INTO t VALUES (1, NULL); INSERT INTO t VALUES (1, NULL)",
        "",
    ];
    let digests: Vec<String> = variants.iter().map(|v| digest_of(v)).collect();
    for (i, a) in digests.iter().enumerate() {
        for b in &digests[i + 1..] {
            assert_ne!(a, b);
        }
    }
    assert_eq!(digest_of(variants[0]), digests[0], "deterministic");
}

/// Format 20 and older files carry `sha256-rows-v1`: still verified, damage still seen.
#[test]
fn a_v1_checksum_still_verifies_and_still_sees_damage() {
    let (_dir, p) = recorded();
    let c = Connection::open(&p).unwrap();
    checksum::seal_as(&c, checksum::ALGORITHM_V1, None).unwrap();
    let (algorithm, _, v1) = checksum::stored(&c).unwrap().unwrap();
    assert_eq!(algorithm, checksum::ALGORITHM_V1);
    assert_ne!(
        v1,
        checksum::compute(&c, COVERED).unwrap(),
        "another encoding"
    );
    drop(c);
    assert_eq!(
        Recording::open(&p).unwrap().checksum(),
        &ChecksumState::Verified
    );
    tamper(&p, "UPDATE slice SET digest = digest + 1 WHERE slice = 3");
    assert!(open_err(&p).starts_with("damaged recording: content checksum"));
    // Resealing a file of an older format keeps that format's encoding.
    let (_dir, p) = recorded();
    let c = Connection::open(&p).unwrap();
    c.pragma_update(
        None,
        "user_version",
        crate::migrations::TABLES_CHECKSUM_VERSION - 1,
    )
    .unwrap();
    checksum::seal(&c).unwrap();
    assert_eq!(
        checksum::stored(&c).unwrap().unwrap().0,
        checksum::ALGORITHM_V1
    );
}

/// The writer's `slice` rows hashed as inserted stand for reading the table back only
/// while they are its rows: the same columns, as many rows, keys in order.
#[test]
fn rows_hashed_as_inserted_stand_for_the_table_only_while_they_hold() {
    let (_dir, p) = recorded();
    let c = Connection::open(&p).unwrap();
    let read_back = checksum::compute(&c, COVERED).unwrap();
    let rows: Vec<Vec<rusqlite::types::Value>> = {
        let mut st = c.prepare("SELECT * FROM slice ORDER BY slice").unwrap();
        let n = st.column_count();
        st.query_map([], |r| (0..n).map(|i| r.get(i)).collect())
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert!(rows.len() >= 3);
    let hashed = |rows: &[Vec<rusqlite::types::Value>], keys: &dyn Fn(usize) -> i64| {
        let mut t = checksum::TableRows::new("slice", &crate::writer::SLICE_COLUMNS);
        for (i, r) in rows.iter().enumerate() {
            t.row(keys(i), r.iter().map(rusqlite::types::ValueRef::from));
        }
        checksum::compute_as(&c, COVERED, checksum::ALGORITHM, Some(t)).unwrap()
    };
    let key = |i: usize| i as i64 + 1;
    assert_eq!(hashed(&rows, &key), read_back, "the rows as inserted");
    // A changed value with everything else in place is taken as given (proof that the
    // table is not read back): never happens in the writer, whose values are the rows.
    let mut changed = rows.clone();
    changed[1][2] = rusqlite::types::Value::Integer(-1);
    assert_ne!(hashed(&changed, &key), read_back);
    // One row short, or keys out of order: the table is read back instead.
    assert_eq!(hashed(&changed[1..], &key), read_back);
    assert_eq!(hashed(&changed, &|i| 10 - i as i64), read_back);
}

#[test]
fn the_slice_insert_names_every_column_in_table_order() {
    let mut c = Connection::open_in_memory().unwrap();
    crate::migrations::migrate(&mut c).unwrap();
    let st = c.prepare("SELECT * FROM slice LIMIT 0").unwrap();
    assert_eq!(st.column_names(), crate::writer::SLICE_COLUMNS);
}
