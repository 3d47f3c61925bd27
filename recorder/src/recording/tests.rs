//! The reading API on the previous release's recording (format 4, token_ring on 4 ranks,
//! `tests/data/v0.1-token_ring.db`), which must keep opening unchanged.

use std::path::PathBuf;

use super::*;

/// A copy of the old recording in a temporary directory (the original is never opened,
/// so no test can change it).
fn old_recording() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/v0.1-token_ring.db");
    let dst = dir.path().join("old.db");
    std::fs::copy(src, &dst).unwrap();
    (dir, dst)
}

#[test]
fn the_previous_release_recording_opens_with_its_defaults() {
    let (_dir, p) = old_recording();
    let rec = Recording::open(&p).unwrap();
    assert_eq!(rec.format_version(), 4);
    let job = rec.job();
    assert_eq!((job.ranks, job.nodes, job.format_version), (4, 1, 4));
    assert_eq!(job.outcome.as_deref(), Some("success"));
    // Made before the column existed: scheduler version 1.
    assert_eq!(job.scheduler_version, 1);
    assert_eq!(job.total_slices, Some(229));
    assert!(job.command[0].ends_with("token_ring"), "{:?}", job.command);
    assert!(job.failed_ranks.is_empty());
    assert_eq!(rec.last_slice(), 229);
    assert!(rec.has_mmds() && rec.has_summaries());
    let log = rec.replay_log().unwrap();
    assert_eq!(log.ranks.len(), 4);
    assert_eq!(log.last_slice(), 229);
}

#[test]
fn every_counted_decision_decodes_from_its_blob() {
    let (_dir, p) = old_recording();
    let rec = Recording::open(&p).unwrap();
    let mut decided = 0;
    for row in rec.slices(1..=rec.last_slice()).unwrap() {
        let decisions = rec.decisions(row.slice).unwrap().unwrap();
        decided += usize::from(!decisions.is_empty());
        let n = row.n_matches + row.n_chunks + row.n_collectives + row.n_completions;
        assert_eq!(decisions.len() as i64, n, "slice {}", row.slice);
    }
    assert_eq!(decided, 206);
    let detail = rec.slice_detail(5).unwrap();
    assert_eq!(detail.row.as_ref().map(|r| r.slice), Some(5));
    assert!(!detail.decisions.is_empty());
    assert_eq!(detail.nodes.len(), 1);
}

#[test]
fn stats_and_browsing_queries_answer_on_the_old_format() {
    let (_dir, p) = old_recording();
    let rec = Recording::open_with(&p, Check::UpTo(FULL_CHECK_MAX_BYTES)).unwrap();
    let s = rec.stats(None).unwrap();
    assert_eq!(
        (s.ranks, s.recorded_slices, s.mmds_ranks.len()),
        (4, 229, 4)
    );
    assert!(s.accurate);
    let json = serde_json::to_value(&s).unwrap();
    for key in [
        "recording",
        "format_version",
        "getts",
        "mmds",
        "mmds_ranks",
        "accurate",
    ] {
        assert!(json.get(key).is_some(), "{key} in {json}");
    }
    assert!(
        json.get("reasons").is_none(),
        "text-only figures stay out of the JSON"
    );
    assert_eq!(rec.stats(Some(2)).unwrap().mmds_ranks.len(), 1);
    assert!(matches!(rec.stats(Some(9)), Err(RecordError::NoMmds(9))));
    // Columns of whole summary blocks give what the slices themselves say.
    let coarse = rec.columns(1, 64, 3).unwrap();
    for (c, col) in coarse.iter().enumerate() {
        let first = 1 + 64 * c as u64;
        let getts: Vec<i64> = rec
            .slices(first..=first + 63)
            .unwrap()
            .iter()
            .filter(|r| r.reason != "first")
            .filter_map(|r| r.getts_ns)
            .collect();
        let want = getts.iter().min().zip(getts.iter().max());
        assert_eq!(col.getts_ns, want.map(|(a, b)| (*a, *b)), "column {c}");
    }
    let grid = rec.blocked_grid(1, 1, 40).unwrap();
    assert_eq!(grid.cells.len(), 4);
    assert!(rec.process_stats(None).unwrap().unwrap().totals.calls > 0);
    assert_eq!(rec.mmds_ranks().unwrap(), [0, 1, 2, 3]);
}

#[test]
fn a_format_1_file_opens_with_the_defaults_of_later_columns() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v1.db");
    let c = rusqlite::Connection::open(&p).unwrap();
    c.execute_batch(crate::migrations::MIGRATIONS[0]).unwrap();
    c.execute_batch(
        "PRAGMA user_version = 1;
         INSERT INTO job (format_version, strobe_version, command, cwd, program, env, ranks,
            nodes, slice_ns, policy, deadlock_slices, chunk_budget, direct_copy_min,
            schedule_log, metrics, started_at, outcome, total_slices)
         VALUES (1, '0.0.1', '[\"prog\", \"-x\"]', '/', 'prog', '{\"OMP_A\":\"1\"}', 2, 1,
            500000, 'adaptive', 20, 4194304, -1, 'on', 'on', 0, 'success', 1);
         INSERT INTO slice (slice, reason, start_ns, n_descriptors, n_matches, n_chunks,
            n_collectives, n_completions, n_blocked, digest)
         VALUES (1, 'first', 0, 0, 0, 0, 0, 0, 0, 0);
         INSERT INTO rank (rank, wait_status, exit_code, signal) VALUES (0, 0, 0, NULL),
            (1, 0, 0, NULL);",
    )
    .unwrap();
    drop(c);
    let rec = Recording::open(&p).unwrap();
    let job = rec.job();
    assert_eq!(job.scheduler_version, 1);
    assert_eq!(
        (job.wire_format_version, job.histogram_resolution),
        (None, None)
    );
    assert_eq!(job.command, ["prog", "-x"]);
    assert_eq!(job.env, [("OMP_A".to_string(), "1".to_string())]);
    assert_eq!(job.direct_copy_min, u64::MAX, "-1 means off");
    // No decision-set blobs in format 1: the recording cannot say what was decided.
    assert_eq!(rec.decisions(1).unwrap(), None);
    let s = rec.stats(None).unwrap();
    assert_eq!((s.recorded_slices, s.mmds.is_none()), (1, true));
    assert!(!rec.has_mmds() && !rec.has_summaries());
    // No replay log: a typed error, not a panic.
    assert!(matches!(
        rec.replay_log(),
        Err(RecordError::NotARecording(_))
    ));
}
