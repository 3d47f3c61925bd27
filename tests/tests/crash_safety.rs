//! Crash safety of recordings (issue 4): whatever happens to the job or to strobe itself,
//! the file opens, passes `PRAGMA integrity_check`, and holds every slice up to at most
//! the last 100 ms before the failure. Every case really kills a process.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OpenFlags};
use strobe_tests::{assert_processes_gone, fixture, record_fixture, strobe, strobe_cmd};

fn count(c: &Connection, sql: &str) -> i64 {
    c.query_row(sql, [], |r| r.get(0)).unwrap()
}

fn unix_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

/// The file passes SQLite's full integrity check and its slices run from 1 without a gap.
/// Opened read-write, as a user's `sqlite3` would: that also recovers a WAL left behind by
/// a killed writer.
fn assert_sound(db: &Path) -> Connection {
    let c = Connection::open(db).unwrap();
    let check: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok", "{}", db.display());
    let (n, lo, hi): (i64, i64, i64) = c
        .query_row(
            "SELECT count(*), coalesce(min(slice), 1), coalesce(max(slice), 0) FROM slice",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert!(n > 0, "no slice recorded");
    assert_eq!((lo, hi), (1, n), "slices are contiguous from 1");
    c
}

/// When the last recorded slice started, in Unix nanoseconds.
fn last_slice_unix_ns(c: &Connection) -> i64 {
    count(
        c,
        "SELECT (SELECT started_at FROM job) + max(start_ns) FROM slice",
    )
}

#[test]
fn rank_failures_and_deadlocks_leave_complete_files() {
    let dir = tempfile::tempdir().unwrap();
    // (fixture, its arguments, exit status, outcome)
    let cases: [(&str, &[&str], i32, &str); 4] = [
        ("crash", &["segv"], 128 + libc::SIGSEGV, "rank_failed"),
        ("crash", &[], 128 + libc::SIGABRT, "rank_failed"),
        ("abort", &[], 3, "rank_failed"),
        ("deadlock", &[], 3, "deadlock"),
    ];
    for (name, args, code, outcome) in cases {
        let db = dir.path().join(format!("{name}{}.db", args.len()));
        let r = record_fixture(&db, &["-n", "4"], name, args, &[]);
        assert_eq!(r.code, code, "{name} {args:?}: {}", r.stderr);
        let c = assert_sound(&db);
        let (out, total, exit): (String, i64, i64) = c
            .query_row(
                "SELECT outcome, total_slices, exit_status FROM job",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!((out.as_str(), exit), (outcome, code as i64), "{name}");
        let recorded = count(&c, "SELECT max(slice) FROM slice");
        assert!(
            recorded >= total - 1 && recorded <= total,
            "{name}: {recorded} of {total}"
        );
        assert_eq!(count(&c, "SELECT count(*) FROM rank"), 4, "{name}");
        // The per-process statistics of every rank survive, the dead one's included.
        assert_eq!(count(&c, "SELECT count(*) FROM mmds_rank"), 4, "{name}");
        assert!(!dir
            .path()
            .join(format!("{name}{}.db-wal", args.len()))
            .exists());
        let s = strobe_cmd(&["stats", &db.display().to_string()], &[]);
        assert_eq!(s.code, 0, "{name}: {}", s.stderr);
    }
}

/// A recording long enough to be interrupted: 4 ranks, 1 ms of computation then a
/// barrier, `iterations` times (far longer than the test waits; distinct per test so each
/// test can look for its own leftover ranks while the others run).
fn start_long_recording(db: &Path, iterations: &str) -> Child {
    Command::new(strobe())
        .args(["record", "-o"])
        .arg(db)
        .args(["-n", "4", "--timeout", "300s", "--"])
        .arg(fixture("barrier_every"))
        .args(["1000", iterations])
        .env_remove("STROBE_SCHEDULE_LOG")
        .env_remove("STROBE_METRICS")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn strobe record")
}

/// Slices in the recording, read by this process while strobe writes it.
fn live_slices(db: &Path) -> Option<i64> {
    let c = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).ok()?;
    c.query_row("SELECT count(*) FROM slice", [], |r| r.get(0))
        .ok()
}

fn wait_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            panic!("strobe record did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn interrupt_recording(sig: i32) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("long.db");
    let iterations = (100_000_000 + sig).to_string();
    let mut child = start_long_recording(&db, &iterations);

    // Read the recording from other processes while it is written: this one, then
    // `strobe stats`. Both must see a growing, consistent file.
    let t = Instant::now();
    let first = loop {
        match live_slices(&db) {
            Some(n) if n >= 100 => break n,
            _ if t.elapsed() > Duration::from_secs(60) => panic!("no slices after 60 s"),
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let s = strobe_cmd(&["stats", &db.display().to_string()], &[]);
    assert_eq!(s.code, 0, "stats on a live recording: {}", s.stderr);
    assert!(s.stdout.contains("still being recorded"), "{}", s.stdout);
    let t = Instant::now();
    while live_slices(&db).unwrap_or(0) <= first {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the recording stopped growing"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));

    let killed_at = unix_ns();
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
    let st = wait_exit(&mut child, Duration::from_secs(30));
    let c = assert_sound(&db);
    let lag = Duration::from_nanos((killed_at - last_slice_unix_ns(&c)).max(0) as u64);
    eprintln!("signal {sig}: last recorded slice started {lag:?} before the kill");
    assert!(
        lag <= Duration::from_millis(100),
        "signal {sig}: the last recorded slice started {lag:?} before the kill"
    );
    // Hashed beside the job (`hash_and_remember`), written long before the kill: a
    // replay can check the program it would run.
    let sha: Option<String> = c
        .query_row("SELECT program_sha256 FROM job", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        sha.map(|s| s.len()),
        Some(64),
        "signal {sig}: no program hash"
    );
    let outcome: Option<String> = c
        .query_row("SELECT outcome FROM job", [], |r| r.get(0))
        .unwrap();
    if sig == libc::SIGKILL {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(st.signal(), Some(libc::SIGKILL));
        assert_eq!(outcome, None, "a killed recorder cannot write the outcome");
    } else {
        assert_eq!(st.code(), Some(130), "signal {sig}");
        assert_eq!(outcome.as_deref(), Some("interrupted"));
        // Every slice up to the end, the ranks' statistics, one self-contained file.
        let (total, recorded): (i64, i64) = c
            .query_row(
                "SELECT total_slices, (SELECT max(slice) FROM slice) FROM job",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert!(
            recorded >= total - 1 && recorded <= total,
            "{recorded} of {total}"
        );
        assert_eq!(count(&c, "SELECT count(*) FROM mmds_rank"), 4);
    }
    drop(c);
    let s = strobe_cmd(&["stats", &db.display().to_string()], &[]);
    assert_eq!(s.code, 0, "stats after signal {sig}: {}", s.stderr);
    // No rank outlives its launcher (PR_SET_PDEATHSIG), whatever killed it.
    let needle = format!("{} 1000 {iterations}", fixture("barrier_every").display());
    assert_processes_gone(&needle, &format!("after signal {sig}"));
}

#[test]
fn sigint_to_the_launcher_finishes_the_recording() {
    interrupt_recording(libc::SIGINT);
}

#[test]
fn sigterm_to_the_launcher_finishes_the_recording() {
    interrupt_recording(libc::SIGTERM);
}

#[test]
fn sigkill_of_the_launcher_loses_at_most_the_last_100_ms() {
    interrupt_recording(libc::SIGKILL);
}
