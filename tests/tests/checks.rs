//! The correctness checks (issue 17 item 7, docs/debugging.md "Correctness checks"): each
//! C fixture made for one check is recorded with `strobe record` (real processes, the C
//! binding built with `strobe mpicc`); the finding must be on stderr with its rank and
//! call, in the recording (`strobe stats`, `check_finding`), and again in the replay. The
//! checks must stay silent on correct programs and with `--no-checks`.

use std::path::{Path, PathBuf};

use strobe_tests::c_fixtures::{build_all, manifest, Fixture};
use strobe_tests::replay::{replay, strobe_cmd, Out};

/// Builds the named C fixtures with `strobe mpicc` into a temporary directory.
fn built(names: &[&str]) -> (tempfile::TempDir, Vec<Fixture>) {
    let fixtures: Vec<Fixture> = manifest()
        .into_iter()
        .filter(|f| names.contains(&f.name.as_str()))
        .collect();
    assert_eq!(
        fixtures.len(),
        names.len(),
        "fixtures missing from the manifest"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let strobe = strobe_tests::strobe().to_string_lossy().into_owned();
    build_all(&[&strobe, "mpicc"], &fixtures, dir.path()).unwrap_or_else(|e| panic!("{e}"));
    (dir, fixtures)
}

fn prog(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

fn record(db: &Path, prog: &Path, ranks: &str, extra: &[&str]) -> Out {
    let (db, prog) = (db.display().to_string(), prog.display().to_string());
    let mut args = vec!["record", "-o", &db, "--force", "-n", ranks];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--timeout", "60s", "--", &prog]);
    strobe_cmd(&args, &[])
}

/// The `strobe: check: ...` lines of a run's stderr, sorted: findings are printed as
/// the ranks reach them, and which of two ranks reaches `MPI_Finalize` first (in a
/// earlier slice) is up to the run, so the tests compare them as a set.
fn check_lines(stderr: &str) -> Vec<String> {
    let mut lines: Vec<String> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("strobe: check: "))
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

/// Record `name` on `ranks` ranks; the run passes and reports exactly `expected` (the
/// start of each finding line); `strobe stats` shows the same findings and the replay
/// reports them again.
fn reported(name: &str, ranks: &str, expected: &[&str]) {
    let (dir, _) = built(&[name]);
    let db = dir.path().join(format!("{name}.db"));
    let rec = record(&db, &prog(dir.path(), name), ranks, &[]);
    assert_eq!(rec.code, 0, "{name}: record failed:\n{}", rec.stderr);
    let lines = check_lines(&rec.stderr);
    assert_eq!(
        lines.len(),
        expected.len(),
        "{name}: findings {lines:#?}\nstderr:\n{}",
        rec.stderr
    );
    for (line, want) in lines.iter().zip(expected) {
        assert!(
            line.starts_with(want),
            "{name}: {line:?} does not start with {want:?}"
        );
    }
    let stats = strobe_cmd(&["stats", &db.display().to_string()], &[]);
    assert_eq!(stats.code, 0, "{name}: stats: {}", stats.stderr);
    assert!(
        stats
            .stdout
            .contains(&format!("checks     {} finding(s)", expected.len())),
        "{name}: stats:\n{}",
        stats.stdout
    );
    for line in &lines {
        assert!(
            stats.stdout.contains(line.as_str()),
            "{name}: stats lacks {line:?}:\n{}",
            stats.stdout
        );
    }
    let json = strobe_cmd(&["stats", "--json", &db.display().to_string()], &[]);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("stats --json");
    let mut kinds: Vec<&str> = v["checks"]
        .as_array()
        .expect("checks in stats --json")
        .iter()
        .map(|c| c["kind"].as_str().unwrap_or_default())
        .collect();
    let mut want: Vec<&str> = expected
        .iter()
        .map(|e| e.split(':').next().unwrap())
        .collect();
    kinds.sort_unstable();
    want.sort_unstable();
    assert_eq!(kinds, want, "{name}: {}", json.stdout);
    let rep = replay(&db, &[], &[]);
    assert_eq!(rep.code, 0, "{name}: replay:\n{}", rep.stderr);
    assert_eq!(
        check_lines(&rep.stderr),
        lines,
        "{name}: the replay reports other findings"
    );
    let quiet = replay(&db, &["--no-checks"], &[]);
    assert!(check_lines(&quiet.stderr).is_empty(), "{}", quiet.stderr);
}

#[test]
fn an_int_received_as_four_bytes_is_a_type_mismatch() {
    // The 4-byte send is inline (it completes when posted), so the receive may match in
    // the slice rank 1 posts it, before rank 1 blocked there and published its call site:
    // the site is named when known, the rest of the finding always.
    let (dir, _) = built(&["type_mismatch"]);
    let db = dir.path().join("t.db");
    let rec = record(&db, &prog(dir.path(), "type_mismatch"), "2", &[]);
    assert_eq!(rec.code, 0, "record failed:\n{}", rec.stderr);
    let lines = check_lines(&rec.stderr);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    let line = lines[0].replace(" at type_mismatch.c:21 (in main)", "");
    assert!(
        line.starts_with("type-mismatch: rank 1: MPI_Recv (slice ")
            && line.contains("does not match the receive's datatype"),
        "{line:?}"
    );
}

#[test]
fn requests_never_completed_or_freed_are_reported_per_rank_with_their_call() {
    reported(
        "leaked_request",
        "2",
        &[
            "leaked-request: rank 0: MPI_Finalize at leaked_request.c:29 (in main) (slice ",
            "leaked-request: rank 1: MPI_Finalize at leaked_request.c:29 (in main) (slice ",
        ],
    );
    // The calls that created them are named.
    let (dir, _) = built(&["leaked_request"]);
    let db = dir.path().join("l.db");
    let rec = record(&db, &prog(dir.path(), "leaked_request"), "2", &[]);
    let lines = check_lines(&rec.stderr);
    assert!(
        lines[0].ends_with("1 request never completed or freed, created by MPI_Isend"),
        "{lines:?}"
    );
    assert!(
        lines[1].ends_with("1 request never completed or freed, created by MPI_Irecv"),
        "{lines:?}"
    );
}

#[test]
fn a_send_send_exchange_saved_by_eager_buffering_is_flagged_although_it_passed() {
    reported(
        "sendsend_unsafe",
        "2",
        &["unsafe-send-send: rank 0: MPI_Send at sendsend_unsafe.c:22 (in main) (slice "],
    );
}

#[test]
fn a_receive_into_the_buffer_of_a_pending_irecv_is_reported() {
    reported(
        "buffer_reuse",
        "2",
        &["buffer-reuse: rank 1: MPI_Recv at buffer_reuse.c:25 (in main) (slice "],
    );
}

#[test]
fn no_checks_silences_them_and_records_none() {
    let (dir, _) = built(&["type_mismatch"]);
    let db = dir.path().join("t.db");
    let rec = record(
        &db,
        &prog(dir.path(), "type_mismatch"),
        "2",
        &["--no-checks"],
    );
    assert_eq!(rec.code, 0, "{}", rec.stderr);
    assert!(check_lines(&rec.stderr).is_empty(), "{}", rec.stderr);
    let p = prog(dir.path(), "type_mismatch").display().to_string();
    let run = strobe_cmd(&["run", "-n", "2", "--no-checks", "--", &p], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.is_empty(), "{}", run.stderr);
    let loud = strobe_cmd(&["run", "-n", "2", "--", &p], &[]);
    assert_eq!(check_lines(&loud.stderr).len(), 1, "{}", loud.stderr);
}

/// Correct programs that use every kind of point-to-point call the checks look at (typed
/// and derived datatypes, non-blocking requests, persistent ones, matched probes, wildcard
/// receives) report nothing.
#[test]
fn correct_programs_report_nothing() {
    let names = [
        "comet_exchange",
        "req_persist",
        "req_mprobe",
        "wildcard_race",
        "icoll",
    ];
    let (dir, fixtures) = built(&names);
    for fx in &fixtures {
        let p = prog(dir.path(), fx.stem()).display().to_string();
        let mut args = vec!["run", "-n", "4", "--timeout", "60s", "--", &p];
        args.extend(fx.args.iter().map(String::as_str));
        let run = strobe_cmd(&args, &[]);
        assert_eq!(run.code, 0, "{}: {}", fx.name, run.stderr);
        assert!(
            check_lines(&run.stderr).is_empty(),
            "{}: false findings:\n{}",
            fx.name,
            run.stderr
        );
    }
}

/// The findings are a table of the recording like the others: a row strobe could not have
/// written (an unknown kind, a rank outside the job) is damage (exit 2), never shown.
#[test]
fn a_damaged_finding_is_a_damaged_recording() {
    let (dir, _) = built(&["type_mismatch"]);
    let db = dir.path().join("t.db");
    let rec = record(&db, &prog(dir.path(), "type_mismatch"), "2", &[]);
    assert_eq!(rec.code, 0, "{}", rec.stderr);
    let rows: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM check_finding WHERE kind = 'type-mismatch' AND rank = 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(rows, 1);
    for damage in [
        "UPDATE check_finding SET kind = 'rm -rf'",
        "UPDATE check_finding SET rank = 7",
        "UPDATE check_finding SET slice = -1",
    ] {
        let copy = dir.path().join("damaged.db");
        std::fs::copy(&db, &copy).unwrap();
        rusqlite::Connection::open(&copy)
            .unwrap()
            .execute_batch(damage)
            .unwrap();
        let stats = strobe_cmd(&["stats", &copy.display().to_string()], &[]);
        assert_eq!(stats.code, 2, "{damage}: {}{}", stats.stdout, stats.stderr);
        assert!(
            stats.stderr.contains("damaged recording"),
            "{damage}: {}",
            stats.stderr
        );
    }
}

/// The terminal UI's Overview lists the findings (wide) or counts them (narrow).
#[test]
fn the_overview_shows_the_findings() {
    use strobe_tui::ratatui::{backend::TestBackend, Terminal};
    let (dir, _) = built(&["leaked_request"]);
    let db = dir.path().join("l.db");
    let rec = record(&db, &prog(dir.path(), "leaked_request"), "2", &[]);
    assert_eq!(rec.code, 0, "{}", rec.stderr);
    for ((w, h), want) in [
        ((200, 60), "leaked_request.c:29 (in main) (slice "),
        ((80, 24), "checks: 2 finding(s)"),
    ] {
        let mut app = strobe_tui::App::new(
            strobe_tui::Recording::open(&db).unwrap(),
            strobe_tui::Theme { color: false },
        );
        let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
        strobe_tui::terminal::draw(&mut term, &mut app).unwrap();
        let buf = term.backend().buffer();
        let screen: String = (0..buf.area.height)
            .map(|y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol())
                    .collect::<String>()
                    + "\n"
            })
            .collect();
        assert!(
            screen.contains(want),
            "{w}x{h}: {want:?} not shown:\n{screen}"
        );
    }
}
