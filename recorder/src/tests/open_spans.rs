//! Open blocked spans written once (`migrations::OPEN_SPANS_VERSION`): a span is inserted
//! with `last_slice` NULL when it opens and updated once when it closes; a file cut at any
//! commit reads every slice's blocked set as the job had it (an open span through the last
//! slice); an older file reads the same blocked sets before and after its migration.

use rusqlite::{params, Connection};
use strobe_runtime::calls::Primitive;
use strobe_runtime::descriptor::DescKind;
use strobe_runtime::segment::BlockedCall;

use crate::blocked_spans::BlockedSpans;
use crate::migrations::{self, MIGRATIONS, OPEN_SPANS_VERSION};
use crate::recording::{BlockedGrid, GridStrategy};
use crate::Recording;

const RANKS: u32 = 6;
const SLICES: u64 = 40;

/// The blocked set of `slice` (ranks ascending): long spans, short ones, a call changing
/// in the middle of a stretch, gaps, and spans still open at the end.
fn truth(slice: u64) -> Vec<(u32, BlockedCall)> {
    let recv = BlockedCall::Posted(DescKind::Recv);
    let barrier = BlockedCall::Posted(DescKind::Barrier);
    let wait = BlockedCall::Call(Primitive::Wait);
    let mut v = Vec::new();
    if slice >= 3 {
        v.push((0, recv));
    }
    match slice {
        5..=12 => v.push((1, barrier)),
        13..=20 => v.push((1, wait)),
        _ => {}
    }
    if slice % 7 < 4 {
        v.push((2, recv));
    }
    if slice >= 30 {
        v.push((4, wait));
    }
    if slice.is_multiple_of(2) {
        v.push((5, barrier));
    }
    v
}

fn named(set: &[(u32, BlockedCall)]) -> Vec<(u32, String)> {
    set.iter()
        .map(|(r, c)| (*r, c.name().to_string()))
        .collect()
}

fn new_file(path: &std::path::Path, scripts: usize) -> Connection {
    let c = Connection::open(path).unwrap();
    for script in &MIGRATIONS[..scripts] {
        c.execute_batch(script).unwrap();
    }
    c.execute_batch(&format!("PRAGMA user_version = {scripts}"))
        .unwrap();
    c.execute(
        "INSERT INTO job (format_version, strobe_version, command, cwd, program, env, ranks,
            nodes, slice_ns, policy, deadlock_slices, chunk_budget, direct_copy_min,
            schedule_log, metrics, started_at)
         VALUES (?1, 'test', '[\"/x\"]', '/', '/x', '{}', ?2, 1, 1000, 'adaptive', 20, 1, 1,
            'on', 'on', 0)",
        params![scripts as i64, RANKS],
    )
    .unwrap();
    c
}

fn add_slice(c: &Connection, slice: u64) {
    c.execute(
        "INSERT INTO slice (slice, reason, start_ns, n_descriptors, n_matches, n_chunks,
            n_collectives, n_completions, n_blocked, digest)
         VALUES (?1, 'timer', ?1 * 1000, 0, 0, 0, 0, 0, ?2, 0)",
        params![slice as i64, truth(slice).len() as i64],
    )
    .unwrap();
}

/// Everything the reading API and the views say about the blocked ranks of slices
/// `1..=last`.
#[derive(Debug, PartialEq)]
struct Readout {
    at: Vec<Vec<(u32, String)>>,
    view: Vec<(i64, i64, String)>,
    per_slice: Vec<(i64, i64, String)>,
    grids: Vec<BlockedGrid>,
    stats: Vec<crate::recording::BlockedCall>,
    search: Vec<Option<u64>>,
}

fn readout(path: &std::path::Path, last: u64) -> Readout {
    let rec = Recording::open(path).unwrap();
    assert_eq!(rec.last_slice(), last);
    let at = (1..=last).map(|s| rec.blocked_at(s).unwrap()).collect();
    let mut grids = Vec::new();
    for per_col in [1, 3, 16, 17] {
        for s in [
            GridStrategy::Exact,
            GridStrategy::Window(0),
            GridStrategy::Window(7),
            GridStrategy::Seek,
        ] {
            grids.push(rec.blocked_grid_by(1, per_col, 16, s).unwrap());
        }
        // The automatic choice depends on the spans' shape (closed or open), and with
        // sampled columns so does its answer: compared where it is exact.
        if per_col <= crate::recording::GRID_SAMPLES {
            grids.push(rec.blocked_grid(1, per_col, 16).unwrap());
        }
    }
    let mut search = Vec::new();
    for from in [0, 1, 10, 25, last - 1, last] {
        for pattern in ["MPI_Wait", "%Recv", "MPI_Barrier"] {
            search.push(rec.search_call(pattern, from, true).unwrap());
            search.push(rec.search_call(pattern, from + 1, false).unwrap());
            search.push(rec.search_rank_call(4, pattern, from, true).unwrap());
            search.push(rec.search_rank_call(0, pattern, from + 1, false).unwrap());
        }
    }
    let stats = rec.stats(None).unwrap().blocked;
    drop(rec);
    let c = Connection::open(path).unwrap();
    let rows = |sql: &str| -> Vec<(i64, i64, String)> {
        let mut st = c.prepare(sql).unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    Readout {
        at,
        view: rows("SELECT slice, rank, call FROM blocked ORDER BY slice, rank"),
        // In no particular order within a slice.
        per_slice: rows("SELECT slice, n_blocked, ranks FROM blocked_per_slice ORDER BY slice")
            .into_iter()
            .map(|(s, n, ranks)| {
                let mut v: Vec<&str> = ranks.split(' ').collect();
                v.sort_unstable();
                (s, n, v.join(" "))
            })
            .collect(),
        grids,
        stats,
        search,
    }
}

/// The writer, committing every 4 slices: after each commit the file, read as a recording
/// cut there (strobe killed, open spans never closed), gives every slice's blocked set, and
/// the view's row count per slice is the slice's `n_blocked`. Finishing closes the open
/// spans and changes no answer.
#[test]
fn a_recording_cut_at_any_commit_reads_every_blocked_set() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cut.db");
    let mut c = new_file(&p, migrations::CURRENT_VERSION as usize);
    let mut spans = BlockedSpans::default();
    let mut saw_open = false;
    for slice in 1..=SLICES {
        add_slice(&c, slice);
        spans.slice::<std::sync::Arc<strobe_runtime::symbolize::CallSite>>(
            slice,
            &truth(slice),
            &[],
        );
        if slice % 4 != 0 {
            continue;
        }
        let tx = c.transaction().unwrap();
        spans.flush(&tx).unwrap();
        tx.commit().unwrap();
        let open: i64 = c
            .query_row(
                "SELECT count(*) FROM blocked_span WHERE last_slice IS NULL",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(open as usize, truth(slice).len(), "slice {slice}");
        saw_open |= open > 0;
        let r = readout(&p, slice);
        for s in 1..=slice {
            assert_eq!(r.at[s as usize - 1], named(&truth(s)), "{s} of {slice}");
        }
        let n_blocked: i64 = c
            .query_row(
                "SELECT count(*) FROM slice s
                 WHERE n_blocked != (SELECT count(*) FROM blocked b WHERE b.slice = s.slice)",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n_blocked, 0, "cut at {slice}");
        let want: u64 = (1..=slice).map(|s| truth(s).len() as u64).sum();
        assert_eq!(r.stats.iter().map(|b| b.rank_slices).sum::<u64>(), want);
    }
    assert!(saw_open);
    let cut = readout(&p, SLICES);
    spans.close_all();
    spans.flush(&c).unwrap();
    let open: i64 = c
        .query_row(
            "SELECT count(*) FROM blocked_span WHERE last_slice IS NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(open, 0, "a finished recording has no open span");
    assert_eq!(readout(&p, SLICES), cut);
}

/// The point of the format: a commit while spans stay open writes nothing for them; a span
/// that closes costs one row update.
#[test]
fn a_commit_rewrites_no_span_that_stays_open() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("w.db");
    let mut c = Connection::open(&p).unwrap();
    migrations::migrate(&mut c).unwrap();
    let base = c.total_changes();
    let recv = BlockedCall::Posted(DescKind::Recv);
    let all: Vec<(u32, BlockedCall)> = (0..1000).map(|r| (r, recv)).collect();
    let mut spans = BlockedSpans::default();
    spans.slice::<std::sync::Arc<strobe_runtime::symbolize::CallSite>>(1, &all, &[]);
    spans.flush(&c).unwrap();
    assert_eq!(c.total_changes() - base, 1000);
    for slice in 2..=100 {
        spans.slice::<std::sync::Arc<strobe_runtime::symbolize::CallSite>>(slice, &all, &[]);
        spans.flush(&c).unwrap();
    }
    assert_eq!(
        c.total_changes() - base,
        1000,
        "open spans are not rewritten"
    );
    let mut fewer = all.clone();
    fewer.remove(7);
    spans.slice::<std::sync::Arc<strobe_runtime::symbolize::CallSite>>(101, &fewer, &[]);
    spans.flush(&c).unwrap();
    assert_eq!(c.total_changes() - base, 1001);
    let (first, last): (i64, i64) = c
        .query_row(
            "SELECT first_slice, last_slice FROM blocked_span WHERE rank = 7",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((first, last), (1, 100));
}

/// A file of the format before open spans (written as that strobe did: every span closed)
/// reads the same blocked sets opened read-only (not migrated), after its migration, and
/// with its spans that reach the last slice turned into open spans. The migration keeps
/// the spans, their sites, and the views' and triggers' behaviour.
#[test]
fn an_older_file_reads_the_same_blocked_sets_before_and_after_its_migration() {
    let before = (OPEN_SPANS_VERSION - 1) as usize;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("old.db");
    let mut c = new_file(&p, before);
    for slice in 1..=SLICES {
        add_slice(&c, slice);
    }
    // The old writer's rows: every span with its last slice.
    let mut st = c
        .prepare("INSERT INTO blocked_span VALUES (?1, ?2, ?3, ?4)")
        .unwrap();
    let mut open: Vec<Option<(u64, BlockedCall)>> = vec![None; RANKS as usize];
    for slice in 1..=SLICES + 1 {
        let set = if slice <= SLICES {
            truth(slice)
        } else {
            vec![]
        };
        for r in 0..RANKS {
            let now = set.iter().find(|b| b.0 == r).map(|b| b.1);
            let was = open[r as usize];
            if was.map(|w| w.1) != now {
                if let Some((first, call)) = was {
                    st.execute(params![r, first as i64, slice as i64 - 1, call.name()])
                        .unwrap();
                }
                open[r as usize] = now.map(|c| (slice, c));
            }
        }
    }
    drop(st);
    c.execute_batch(
        "INSERT INTO call_site (id, object, offset, function, file, line)
             VALUES (1, '/x', 16, 'f', 'x.c', 3);
         INSERT INTO blocked_site SELECT rank, first_slice, 1 FROM blocked_span;",
    )
    .unwrap();
    let sites: i64 = c
        .query_row("SELECT count(*) FROM blocked_site", [], |r| r.get(0))
        .unwrap();
    let old = readout(&p, SLICES);
    for s in 1..=SLICES {
        assert_eq!(old.at[s as usize - 1], named(&truth(s)), "slice {s}");
    }
    migrations::migrate(&mut c).unwrap();
    assert_eq!(
        migrations::version(&c).unwrap(),
        migrations::CURRENT_VERSION
    );
    assert_eq!(readout(&p, SLICES), old, "migrated");
    // Spans reaching the last slice, left open (a recording cut there): the same answers.
    let n = c
        .execute(
            "UPDATE blocked_span SET last_slice = NULL WHERE last_slice = ?1",
            [SLICES as i64],
        )
        .unwrap();
    assert_eq!(n, 3, "ranks 0, 4 and 5 are blocked in the last slice");
    assert_eq!(readout(&p, SLICES), old, "open spans");
    // Their sites are kept; deleting a span (directly or through the view) takes its site.
    let count = |sql: &str| -> i64 { c.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(count("SELECT count(*) FROM blocked_site"), sites);
    assert_eq!(
        count("SELECT count(*) FROM blocked_where WHERE file = 'x.c'"),
        sites
    );
    // The view's triggers over an open span: deleting a slice in it splits it (the part
    // after stays open), inserting the slice back joins the part before.
    c.execute_batch("DELETE FROM blocked WHERE slice = 35 AND rank = 0")
        .unwrap();
    assert_eq!(
        count("SELECT count(*) FROM blocked_span WHERE rank = 0 AND last_slice IS NULL"),
        1
    );
    assert_eq!(count("SELECT count(*) FROM blocked WHERE rank = 0"), 37);
    c.execute_batch("INSERT INTO blocked VALUES (35, 0, 'MPI_Recv')")
        .unwrap();
    assert_eq!(count("SELECT count(*) FROM blocked WHERE rank = 0"), 38);
    c.execute_batch("DELETE FROM blocked").unwrap();
    assert_eq!(count("SELECT count(*) FROM blocked_span"), 0);
    assert_eq!(count("SELECT count(*) FROM blocked_site"), 0);
}

/// An open span that is not its rank's last is damage.
#[test]
fn an_open_span_before_another_of_its_rank_is_damage() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.db");
    let c = new_file(&p, migrations::CURRENT_VERSION as usize);
    for slice in 1..=9 {
        add_slice(&c, slice);
    }
    c.execute_batch("INSERT INTO blocked_span VALUES (0, 2, NULL, 'MPI_Recv')")
        .unwrap();
    assert!(Recording::open(&p).is_ok());
    c.execute_batch("INSERT INTO blocked_span VALUES (0, 5, 6, 'MPI_Recv')")
        .unwrap();
    let e = Recording::open(&p).err().expect("refused");
    assert!(matches!(e, crate::RecordError::Corrupt(_)), "{e}");
}

/// A schedule log window that starts late (the first blocked set is whole) and a gap (a
/// slice without a blocked set closes every span; the next set starts them again).
#[test]
fn spans_restart_after_a_gap() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Connection::open(dir.path().join("g.db")).unwrap();
    migrations::migrate(&mut c).unwrap();
    let recv = BlockedCall::Posted(DescKind::Recv);
    let wait = BlockedCall::Call(Primitive::Wait);
    let mut spans = BlockedSpans::default();
    let none: &[(u32, std::sync::Arc<strobe_runtime::symbolize::CallSite>)] = &[];
    spans.slice(5, &[(0, recv), (2, wait)], none);
    spans.slice(6, &[(0, recv), (2, wait)], none);
    spans.flush(&c).unwrap();
    spans.close_all();
    spans.slice(9, &[(0, recv), (2, wait)], none);
    spans.slice(10, &[(0, recv)], none);
    spans.close_all();
    spans.flush(&c).unwrap();
    let mut st = c
        .prepare(
            "SELECT rank, first_slice, last_slice FROM blocked_span ORDER BY rank, first_slice",
        )
        .unwrap();
    let got: Vec<(i64, i64, i64)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(got, [(0, 5, 6), (0, 9, 10), (2, 5, 6), (2, 9, 9)]);
}
