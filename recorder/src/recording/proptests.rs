//! Property tests of the reading API (issue 11, "Fuzzing"): arbitrary bytes given as a
//! recording, and arbitrary values written into the previous release's recording by SQL,
//! never panic a reader; what a reader returns is never an impossible value (the
//! validation in `validate.rs` refuses those as "damaged recording").

use std::path::PathBuf;

use proptest::prelude::*;
use rusqlite::types::Value;

use super::*;

fn old_recording(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/v0.1-token_ring.db");
    let dst = dir.join("old.db");
    std::fs::copy(src, &dst).unwrap();
    dst
}

/// Everything a reader does with an open recording (stats, slices, decisions, replay log,
/// browsing); errors are fine, panics and impossible values are not.
fn read_all(p: &Path) {
    let Ok(rec) = Recording::open(p) else { return };
    let j = rec.job();
    assert!(
        j.ranks >= 1 && j.ranks <= validate::MAX_RANKS,
        "{}",
        j.ranks
    );
    assert!(
        j.nodes >= 1 && j.nodes <= j.ranks,
        "{} of {}",
        j.nodes,
        j.ranks
    );
    assert!(j.chunk_budget >= 1 && j.slice_ns >= 1);
    if let Some(o) = &j.outcome {
        assert!(validate::OUTCOMES.contains(&o.as_str()), "{o}");
    }
    if let Ok(s) = rec.stats(None) {
        assert!(s.ranks >= 1 && s.nodes >= 1);
    }
    let last = rec.last_slice().min(300);
    if let Ok(rows) = rec.slices(1..=last) {
        for r in rows {
            assert!(r.slice >= 1 && r.n_descriptors >= 0 && r.n_matches >= 0);
            assert!(validate::REASONS.contains(&r.reason.as_str()));
            let _ = rec.decisions(r.slice);
            let _ = rec.descriptors(r.slice);
        }
    }
    let _ = rec.replay_log();
    let _ = rec.metrics(1..=last);
    let _ = rec.slice_detail(1);
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<i64>().prop_map(Value::Integer),
        (-3i64..3).prop_map(Value::Integer),
        any::<f64>().prop_map(Value::Real),
        "[a-z_\\[\\]\"{}:,0-9]{0,12}".prop_map(Value::Text),
        proptest::collection::vec(any::<u8>(), 0..16).prop_map(Value::Blob),
    ]
}

const TABLES: &[(&str, &[&str])] = &[
    (
        "job",
        &[
            "format_version",
            "command",
            "env",
            "ranks",
            "nodes",
            "slice_ns",
            "policy",
            "deadlock_slices",
            "chunk_budget",
            "direct_copy_min",
            "schedule_log",
            "metrics",
            "started_at",
            "ended_at",
            "elapsed_ns",
            "outcome",
            "message",
            "exit_status",
            "total_slices",
            "scheduler_version",
        ],
    ),
    (
        "slice",
        &[
            "slice",
            "reason",
            "start_ns",
            "getts_ns",
            "n_descriptors",
            "n_matches",
            "n_chunks",
            "n_collectives",
            "n_completions",
            "n_blocked",
            "digest",
        ],
    ),
    ("replay_log", &["stream", "rank", "chunk", "data"]),
    ("slice_decisions", &["slice", "decisions"]),
    ("rank", &["rank", "exit_code", "signal"]),
    ("mmds_rank", &["rank"]),
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn arbitrary_bytes_as_a_recording_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..2048),
        header in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.db");
        let mut b = bytes;
        if header && b.len() >= 16 {
            b[..16].copy_from_slice(b"SQLite format 3\0");
        }
        std::fs::write(&p, &b).unwrap();
        read_all(&p);
    }

    #[test]
    fn arbitrary_field_values_never_panic_or_show(
        t in 0..TABLES.len(),
        c in any::<prop::sample::Index>(),
        v in value(),
        row in 0u32..300,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let p = old_recording(dir.path());
        let (table, cols) = TABLES[t];
        let col = c.get(cols);
        {
            let conn = rusqlite::Connection::open(&p).unwrap();
            // Tables without a rowid are addressed by their whole row (LIMIT/OFFSET).
            let sql = format!(
                "UPDATE {table} SET \"{col}\" = ?1 WHERE rowid IN
                 (SELECT rowid FROM {table} LIMIT 1 OFFSET {row})"
            );
            let sql_nr = format!("UPDATE {table} SET \"{col}\" = ?1");
            if conn.execute(&sql, [&v]).is_err() {
                let _ = conn.execute(&sql_nr, [&v]);
            }
        }
        read_all(&p);
    }
}
