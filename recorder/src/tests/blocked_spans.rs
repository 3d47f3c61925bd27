//! Blocked sets as spans (format 6): the writer's span tracking, the migration that folds
//! an older file's `blocked` rows, and the `blocked` view and its triggers.

use rusqlite::Connection;
use strobe_runtime::calls::Primitive;
use strobe_runtime::descriptor::DescKind;
use strobe_runtime::segment::BlockedCall;

use crate::blocked_spans::BlockedSpans;
use crate::migrations::{self, MIGRATIONS};
use crate::Recording;

fn rows(c: &Connection, sql: &str) -> Vec<(i64, i64, String)> {
    let mut st = c.prepare(sql).unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// A file of format 5 (before spans) with slices 1..=9 and the given blocked rows.
fn format5(path: &std::path::Path, blocked: &[(i64, i64, &str)]) -> Connection {
    let c = Connection::open(path).unwrap();
    for script in &MIGRATIONS[..5] {
        c.execute_batch(script).unwrap();
    }
    c.execute_batch("PRAGMA user_version = 5").unwrap();
    c.execute_batch(
        "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 9)
         INSERT INTO slice (slice, reason, start_ns, n_descriptors, n_matches, n_chunks,
            n_collectives, n_completions, n_blocked, digest)
         SELECT i, 'timer', i * 1000, 0, 0, 0, 0, 0, 0, 0 FROM s",
    )
    .unwrap();
    for (slice, rank, call) in blocked {
        c.execute(
            "INSERT INTO blocked (slice, rank, call) VALUES (?1, ?2, ?3)",
            rusqlite::params![slice, rank, call],
        )
        .unwrap();
    }
    c
}

/// Rank 0 in MPI_Recv for 1..=3 then MPI_Wait at 4, rank 1 in MPI_Recv at 2..=3 and again
/// at 6 (a gap), rank 2 in MPI_Barrier at 9.
const ROWS: &[(i64, i64, &str)] = &[
    (1, 0, "MPI_Recv"),
    (2, 0, "MPI_Recv"),
    (3, 0, "MPI_Recv"),
    (4, 0, "MPI_Wait"),
    (2, 1, "MPI_Recv"),
    (3, 1, "MPI_Recv"),
    (6, 1, "MPI_Recv"),
    (9, 2, "MPI_Barrier"),
];

const SPANS: &str = "SELECT rank, first_slice, last_slice || ' ' || call FROM blocked_span
                     ORDER BY rank, first_slice";
const EXPANDED: &str = "SELECT slice, rank, call FROM blocked ORDER BY slice, rank";

fn expected_spans() -> Vec<(i64, i64, String)> {
    [
        (0, 1, "3 MPI_Recv"),
        (0, 4, "4 MPI_Wait"),
        (1, 2, "3 MPI_Recv"),
        (1, 6, "6 MPI_Recv"),
        (2, 9, "9 MPI_Barrier"),
    ]
    .iter()
    .map(|&(r, f, t)| (r, f, t.to_string()))
    .collect()
}

fn expected_rows() -> Vec<(i64, i64, String)> {
    let mut v: Vec<_> = ROWS
        .iter()
        .map(|&(s, r, c)| (s, r, c.to_string()))
        .collect();
    v.sort();
    v
}

#[test]
fn the_writer_folds_consecutive_slices_into_spans() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Connection::open(dir.path().join("w.db")).unwrap();
    migrations::migrate(&mut c).unwrap();
    c.execute_batch(
        "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 9)
         INSERT INTO slice (slice, reason, start_ns, n_descriptors, n_matches, n_chunks,
            n_collectives, n_completions, n_blocked, digest)
         SELECT i, 'timer', i * 1000, 0, 0, 0, 0, 0, 0, 0 FROM s",
    )
    .unwrap();
    let call = |name: &str| match name {
        "MPI_Recv" => BlockedCall::Posted(DescKind::Recv),
        "MPI_Wait" => BlockedCall::Call(Primitive::Wait),
        _ => BlockedCall::Posted(DescKind::Barrier),
    };
    let mut spans = BlockedSpans::default();
    for slice in 1..=9 {
        let set: Vec<(u32, BlockedCall)> = ROWS
            .iter()
            .filter(|r| r.0 == slice)
            .map(|r| (r.1 as u32, call(r.2)))
            .collect();
        spans.slice::<std::sync::Arc<strobe_runtime::symbolize::CallSite>>(slice as u64, &set, &[]);
        // A commit in the middle of open spans: they are written open, then closed.
        if slice == 2 || slice == 5 {
            spans.flush(&c).unwrap();
        }
    }
    // The recording is finished: every open span is closed at its last slice.
    spans.close_all();
    spans.flush(&c).unwrap();
    assert_eq!(rows(&c, SPANS), expected_spans());
    assert_eq!(rows(&c, EXPANDED), expected_rows());
}

#[test]
fn migration_folds_old_rows_and_the_view_and_triggers_keep_old_queries_working() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("old.db");
    let mut c = format5(&p, ROWS);
    migrations::migrate(&mut c).unwrap();
    assert_eq!(rows(&c, SPANS), expected_spans());
    assert_eq!(rows(&c, EXPANDED), expected_rows());
    assert_eq!(
        rows(
            &c,
            "SELECT slice, n_blocked, ranks FROM blocked_per_slice WHERE slice = 3"
        ),
        [(3, 2, "0:MPI_Recv 1:MPI_Recv".to_string())]
    );
    // Deleting one rank-slice from the middle of a span splits it.
    c.execute_batch("DELETE FROM blocked WHERE slice = 2 AND rank = 0")
        .unwrap();
    let mut want = expected_rows();
    want.retain(|r| !(r.0 == 2 && r.1 == 0));
    assert_eq!(rows(&c, EXPANDED), want);
    // Inserting it back extends the span before it.
    c.execute_batch("INSERT INTO blocked VALUES (2, 0, 'MPI_Recv')")
        .unwrap();
    assert_eq!(rows(&c, EXPANDED), expected_rows());
    c.execute_batch("DELETE FROM blocked").unwrap();
    assert_eq!(
        c.query_row("SELECT count(*) FROM blocked_span", [], |r| r
            .get::<_, i64>(0))
            .unwrap(),
        0
    );
}

#[test]
fn an_old_file_opened_read_only_reads_as_spans() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("old.db");
    let c = format5(&p, ROWS);
    c.execute(
        "INSERT INTO job (format_version, strobe_version, command, cwd, program, env, ranks,
            nodes, slice_ns, policy, deadlock_slices, chunk_budget, direct_copy_min,
            schedule_log, metrics, started_at, total_slices)
         VALUES (5, 'test', '[\"/x\"]', '/', '/x', '{}', 3, 1, 1000, 'adaptive', 20, 1, 1, 'on',
            'on', 0, 9)",
        [],
    )
    .unwrap();
    drop(c);
    let before = std::fs::read(&p).unwrap();
    let rec = Recording::open(&p).unwrap();
    assert_eq!(rec.format_version(), 5);
    let calls = rec.stats(None).unwrap().blocked;
    let recv = calls.iter().find(|b| b.call == "MPI_Recv").unwrap();
    assert_eq!((recv.rank_slices, recv.ranks), (6, 2));
    let detail = rec.slice_detail(3).unwrap();
    let ranks: Vec<u32> = detail.blocked.iter().map(|b| b.rank).collect();
    assert_eq!(ranks, [0, 1]);
    // Every grid strategy reads the temporary spans (their indexes have the same names).
    use crate::recording::GridStrategy;
    for s in [
        GridStrategy::Exact,
        GridStrategy::Window(0),
        GridStrategy::Seek,
    ] {
        let g = rec.blocked_grid_by(1, 1, 9, s).unwrap();
        assert_eq!(
            g.cells[0][1].map(|i| g.calls[i as usize].as_str()),
            Some("MPI_Recv")
        );
    }
    drop(rec);
    assert_eq!(std::fs::read(&p).unwrap(), before, "opening never writes");
}

/// The blocked grid's three ways of reading spans agree: every slice sampled (16 per
/// column of 16) is the exact count, and the two sampled ways see the same samples.
#[test]
fn the_grid_strategies_agree() {
    use crate::recording::GridStrategy;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("synth.db");
    crate::synthetic::generate(&p, 3000, 16, 2).unwrap();
    let rec = Recording::open(&p).unwrap();
    let names = |g: crate::recording::BlockedGrid| -> Vec<Vec<Option<String>>> {
        g.cells
            .iter()
            .map(|row| {
                row.iter()
                    .map(|c| c.map(|i| g.calls[i as usize].clone()))
                    .collect()
            })
            .collect()
    };
    let by = |per_col, s| names(rec.blocked_grid_by(1, per_col, 40, s).unwrap());
    let exact = by(16, GridStrategy::Exact);
    assert!(
        exact.iter().flatten().any(Option::is_some),
        "something is blocked"
    );
    assert_eq!(by(16, GridStrategy::Window(24)), exact);
    assert_eq!(by(16, GridStrategy::Seek), exact);
    let window = by(75, GridStrategy::Window(24));
    assert_eq!(by(75, GridStrategy::Seek), window);
    for k in [0, 1, 3, 7] {
        assert_eq!(by(75, GridStrategy::Window(k)), window, "split at {k}");
    }
    // Sampling sees every 4th slice here, where rank 0 is blocked every 4th slice.
    assert_ne!(window, by(75, GridStrategy::Exact));
    // The chosen strategy gives one of the two (which, the cost estimate decides).
    let exact = by(75, GridStrategy::Exact);
    let auto = names(rec.blocked_grid(1, 75, 40).unwrap());
    assert!(auto == exact || auto == window);
    // The deadlock's spans (ranks 0 and 1, the last 25 slices) show in the last column.
    assert_eq!(exact[0][39].as_deref(), Some("MPI_Recv"));
    // One slice's blocked ranks (a window of short spans here) are the view's rows.
    let c = Connection::open(&p).unwrap();
    for slice in [1u64, 2, 97, 1500, 2975, 2976, 2999, 3000] {
        let mut st = c
            .prepare("SELECT rank, call FROM blocked WHERE slice = ?1 ORDER BY rank")
            .unwrap();
        let want: Vec<(u32, String)> = st
            .query_map([slice], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rec.blocked_at(slice).unwrap(), want, "slice {slice}");
    }
}

/// With one long span the per-rank lookups answer: the same rows.
#[test]
fn blocked_at_with_long_spans_uses_lookups_and_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("long.db");
    crate::synthetic::generate(&p, 3000, 16, 2).unwrap();
    let c = Connection::open(&p).unwrap();
    // Rank 2 blocked from slice 3 to 2970 in one span (its short spans removed).
    c.execute_batch(
        "DELETE FROM blocked_span WHERE rank = 2;
         INSERT INTO blocked_span VALUES (2, 3, 2970, 'MPI_Wait');",
    )
    .unwrap();
    let rec = Recording::open(&p).unwrap();
    for slice in [2u64, 3, 4, 1500, 2970, 2971, 2990] {
        let mut st = c
            .prepare("SELECT rank, call FROM blocked WHERE slice = ?1 ORDER BY rank")
            .unwrap();
        let want: Vec<(u32, String)> = st
            .query_map([slice], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rec.blocked_at(slice).unwrap(), want, "slice {slice}");
    }
}

/// Overlapping or backwards spans are damage: refused on opening, never shown.
#[test]
fn impossible_spans_are_damage() {
    for bad in [
        "INSERT INTO blocked_span VALUES (0, 2, 5, 'MPI_Recv')",
        "UPDATE blocked_span SET last_slice = 0 WHERE rank = 2",
        "UPDATE blocked_span SET call = x'00' WHERE rank = 2",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.db");
        let mut c = format5(&p, ROWS);
        c.execute(
            "INSERT INTO job (format_version, strobe_version, command, cwd, program, env,
                ranks, nodes, slice_ns, policy, deadlock_slices, chunk_budget,
                direct_copy_min, schedule_log, metrics, started_at, total_slices)
             VALUES (5, 'test', '[\"/x\"]', '/', '/x', '{}', 3, 1, 1000, 'adaptive', 20, 1,
                1, 'on', 'on', 0, 9)",
            [],
        )
        .unwrap();
        migrations::migrate(&mut c).unwrap();
        assert!(Recording::open(&p).is_ok());
        c.execute_batch(bad).unwrap();
        drop(c);
        let e = Recording::open(&p).err().expect(bad);
        assert!(matches!(e, crate::RecordError::Corrupt(_)), "{bad}: {e}");
    }
}

/// Call sites: each distinct site is one `call_site` row; a rank whose site changes while
/// it stays blocked in the same call starts a new span; `blocked_where` joins them; and a
/// deleted span takes its site row with it.
#[test]
fn spans_carry_their_call_sites_and_split_where_the_site_changes() {
    use std::sync::Arc;
    use strobe_runtime::symbolize::CallSite;
    let dir = tempfile::tempdir().unwrap();
    let mut c = Connection::open(dir.path().join("s.db")).unwrap();
    migrations::migrate(&mut c).unwrap();
    let site = |line| {
        Arc::new(CallSite {
            object: "/bin/prog".into(),
            offset: 0x1000 + u64::from(line),
            function: Some("exchange".into()),
            file: Some("/src/x.c".into()),
            line: Some(line),
        })
    };
    let recv: BlockedCall = DescKind::Recv.into();
    let mut spans = BlockedSpans::default();
    // Rank 0 at line 10 for slices 1-2, then line 12 in slice 3; rank 1 at line 10 all along.
    spans.slice(1, &[(0, recv), (1, recv)], &[(0, site(10)), (1, site(10))]);
    spans.slice(2, &[(0, recv), (1, recv)], &[(0, site(10)), (1, site(10))]);
    spans.slice(3, &[(0, recv), (1, recv)], &[(0, site(12)), (1, site(10))]);
    spans.flush(&c).unwrap();
    let n: i64 = c
        .query_row("SELECT count(*) FROM call_site", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 2);
    assert_eq!(
        rows(
            &c,
            "SELECT rank, first_slice, file || ':' || line || ' ' || function
             FROM blocked_where ORDER BY rank, first_slice"
        ),
        [
            (0, 1, "/src/x.c:10 exchange".to_string()),
            (0, 3, "/src/x.c:12 exchange".to_string()),
            (1, 1, "/src/x.c:10 exchange".to_string()),
        ]
    );
    c.execute_batch("DELETE FROM blocked_span WHERE rank = 1")
        .unwrap();
    let n: i64 = c
        .query_row("SELECT count(*) FROM blocked_site", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 2);
}
