//! Open blocked spans (format 16, `docs/recording.md`): a recording whose strobe is killed
//! keeps the spans open at its last commit with `last_slice` NULL, and reads them as
//! blocked through its last slice; a finished recording has none. Real processes, a real
//! SIGKILL.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use strobe_recorder::Recording;
use strobe_tests::{fixture, strobe, strobe_cmd};

fn count(c: &Connection, sql: &str) -> i64 {
    c.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// Every slice's blocked count in the `blocked` view is its `n_blocked` (what the runtime
/// counted when the slice started).
const VIEW_DISAGREES: &str = "SELECT count(*) FROM slice s
     WHERE n_blocked != (SELECT count(*) FROM blocked b WHERE b.slice = s.slice)";

#[test]
fn a_killed_recording_reads_its_open_spans_through_its_last_slice() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("idle.db");
    // Ranks 1..3 sit in a barrier while rank 0 sleeps for ten minutes: three spans that
    // stay open for as long as the test lets the job run.
    let mut child = Command::new(strobe())
        .args(["record", "-o"])
        .arg(&db)
        .args(["-n", "4", "--timeout", "300s", "--"])
        .arg(fixture("idle"))
        .arg("600000")
        .env_remove("STROBE_SCHEDULE_LOG")
        .env_remove("STROBE_METRICS")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn strobe record");
    let t = Instant::now();
    // Committed and still growing: at least two commits after the spans opened.
    loop {
        let open = Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .ok()
            .and_then(|c| {
                c.query_row(
                    "SELECT (SELECT count(*) FROM blocked_span WHERE last_slice IS NULL),
                            (SELECT count(*) FROM slice)",
                    [],
                    |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)),
                )
                .ok()
            });
        if open.is_some_and(|(open, slices)| open == 3 && slices >= 300) {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no open spans: {open:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    child.kill().unwrap();
    child.wait().unwrap();

    // Fold the WAL back, as a user's sqlite3 would.
    let c = Connection::open(&db).unwrap();
    assert_eq!(
        c.query_row("PRAGMA integrity_check", [], |r| r.get::<_, String>(0))
            .unwrap(),
        "ok"
    );
    let outcome: Option<String> = c
        .query_row("SELECT outcome FROM job", [], |r| r.get(0))
        .unwrap();
    assert_eq!(outcome, None, "cut short");
    assert_eq!(
        count(
            &c,
            "SELECT count(*) FROM blocked_span WHERE last_slice IS NULL AND rank IN (1, 2, 3)
               AND call = 'MPI_Barrier'"
        ),
        3
    );
    assert_eq!(count(&c, VIEW_DISAGREES), 0);
    let last = count(&c, "SELECT max(slice) FROM slice") as u64;
    drop(c);

    let rec = Recording::open(&db).unwrap();
    assert_eq!(rec.last_slice(), last);
    let barrier = |r: u32| (r, "MPI_Barrier".to_string());
    assert_eq!(
        rec.blocked_at(last).unwrap(),
        [barrier(1), barrier(2), barrier(3)]
    );
    assert_eq!(
        rec.slice(last).unwrap().unwrap().n_blocked,
        3,
        "the runtime's count"
    );
    // The grid's last column, and the statistics: blocked to the end.
    let grid = rec.blocked_grid(last, 1, 1).unwrap();
    for r in 1..4 {
        assert_eq!(
            grid.cells[r][0].map(|i| grid.calls[i as usize].as_str()),
            Some("MPI_Barrier")
        );
    }
    assert_eq!(grid.cells[0][0], None, "rank 0 sleeps");
    let site = rec.blocked_site(2, last).unwrap();
    assert!(site.is_some(), "the open span's call site");
    let stats = rec.stats(None).unwrap();
    let b = stats
        .blocked
        .iter()
        .find(|b| b.call == "MPI_Barrier")
        .unwrap();
    assert!(b.rank_slices >= 3 * (last - 10), "{b:?} of {last} slices");
    drop(rec);
    let s = strobe_cmd(&["stats", &db.display().to_string()], &[]);
    assert_eq!(s.code, 0, "{}", s.stderr);
    assert!(s.stdout.contains("MPI_Barrier"), "{}", s.stdout);
}

/// A finished recording closes its open spans: none is NULL, and the view agrees with the
/// runtime's counts.
#[test]
fn a_finished_recording_has_no_open_span() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ring.db");
    let out = Command::new(strobe())
        .args(["record", "-o"])
        .arg(&db)
        .args(["-n", "8", "--"])
        .arg(fixture("token_ring"))
        .env_remove("STROBE_SCHEDULE_LOG")
        .env_remove("STROBE_METRICS")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let c = Connection::open(&db).unwrap();
    assert!(count(&c, "SELECT count(*) FROM blocked_span") > 0);
    assert_eq!(
        count(
            &c,
            "SELECT count(*) FROM blocked_span WHERE last_slice IS NULL"
        ),
        0
    );
    assert_eq!(count(&c, VIEW_DISAGREES), 0);
}
