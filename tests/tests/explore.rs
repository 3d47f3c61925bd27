//! `strobe explore`: from a passing recording, the forced alternatives of its wildcard
//! receives find the heisenbug's failing order in one run, and a failure that needs two
//! perturbed receives in a row (fixture `wildcard_race`, depth 2) in four, the same way
//! every time; the saved recording replays to the failure every time. A program without
//! a failing order exhausts the space (exit 0).

use std::path::Path;

use strobe_tests::replay::{strobe_cmd, Out};
use strobe_tests::tools::{build_c, record_c, record_heisenbug};

fn explore(db: &Path, out: &Path, flags: &[&str]) -> Out {
    let (d, o) = (db.display().to_string(), out.display().to_string());
    let mut all = vec!["explore", d.as_str(), "-o", o.as_str(), "--force"];
    all.extend_from_slice(flags);
    strobe_cmd(&all, &[])
}

/// The "run N: ..." lines without their slice numbers (the slices are timing).
fn runs(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.starts_with("run "))
        .map(|l| match (l.find(" (slice "), l.find(") takes")) {
            (Some(a), Some(b)) => format!("{}{}", &l[..a], &l[b + 1..]),
            _ => l.to_string(),
        })
        .collect()
}

/// The TUI drawn on `db` (a `TestBackend` of `size`), after pressing `key` if any.
fn tui_screen(db: &Path, size: (u16, u16), key: Option<char>) -> String {
    use strobe_tui::app::Event;
    use strobe_tui::ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use strobe_tui::ratatui::{backend::TestBackend, Terminal};
    let mut app = strobe_tui::App::new(
        strobe_tui::Recording::open(db).unwrap(),
        strobe_tui::Theme { color: false },
    );
    if let Some(k) = key {
        app.handle(Event::Key(KeyEvent::new(
            KeyCode::Char(k),
            KeyModifiers::NONE,
        )));
    }
    let mut term = Terminal::new(TestBackend::new(size.0, size.1)).unwrap();
    strobe_tui::terminal::draw(&mut term, &mut app).unwrap();
    // The History tab loads off the UI thread: the first frame says "loading"; draw again
    // once the load is in.
    if app.wait_for_history() {
        strobe_tui::terminal::draw(&mut term, &mut app).unwrap();
    }
    let buf = term.backend().buffer();
    (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
                + "\n"
        })
        .collect()
}

fn replays_to(db: &Path, failure: &str) {
    for _ in 0..3 {
        let r = strobe_cmd(&["replay", &db.display().to_string()], &[]);
        assert!(
            r.stderr.contains("replay matched the recording") && r.stderr.contains(failure),
            "{}",
            r.stderr
        );
    }
}

/// Record `wildcard_race` until a run took its workers in the quiet order 1,2,3 (on a
/// loaded machine the sleeps that make that order can overrun).
fn record_quiet_order(db: &Path, prog: &Path, args: &[&str]) {
    for _ in 0..5 {
        let o = record_c(db, prog, 4, args, &[]);
        if o.code == 0 && o.stdout.contains("order=1,2,3") {
            return;
        }
    }
    panic!("no run of wildcard_race took the quiet order 1,2,3 in 5 tries");
}

#[test]
fn explore_finds_the_heisenbug_from_a_passing_recording() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("heisenbug", dir.path());
    let pass = dir.path().join("pass.db");
    record_heisenbug(&pass, &prog, true, 5);
    let found = dir.path().join("found.db");
    let first = explore(&pass, &found, &[]);
    assert_eq!(first.code, 1, "found: {}{}", first.stdout, first.stderr);
    assert!(first.stdout.contains("runs: 1"), "{}", first.stdout);
    assert_eq!(
        runs(&first.stderr),
        [
            "run 1: rank 0's wildcard receive 0#0 takes rank 2's message instead of rank 1's: \
          FAILED (exit status 134)"
        ]
    );
    replays_to(&found, "killed by SIGABRT");
    // The saved recording says what was forced: in the file, `strobe stats` and the TUI.
    let rec = strobe_recorder::Recording::open(&found).unwrap();
    let e = rec.explored().unwrap().expect("the explored row");
    assert_eq!((e.kind.as_str(), e.rank, e.runs), ("wildcard", 0, 1));
    let slice = e.slice.expect("the forced receive's slice");
    let matched = strobe_replayer::alternatives::Traffic::read(&rec)
        .unwrap()
        .wildcards()
        .into_iter()
        .find(|w| w.recv.rank == 0 && w.recv.seq == 0)
        .expect("rank 0's wildcard receive");
    assert_eq!((matched.slice, matched.matched.rank), (slice, 2));
    assert!(
        e.detail
            .starts_with("rank 0's wildcard receive 0#0 (slice ")
            && e.detail
                .ends_with("takes rank 2's message instead of rank 1's"),
        "{e:?}"
    );
    let stats = strobe_cmd(&["stats", &found.display().to_string()], &[]);
    assert!(
        stats.stdout.contains(&format!(
            "explored   {} (found by strobe explore in 1 run(s))",
            e.detail
        )),
        "{}",
        stats.stdout
    );
    let screen = tui_screen(&found, (200, 60), None);
    assert!(screen.contains("explored"), "{screen}");
    assert!(
        screen.contains("takes rank 2's message instead"),
        "{screen}"
    );
    let narrow = tui_screen(&found, (80, 24), None);
    assert!(
        narrow.contains(&format!("explored: forced in slice {slice}")),
        "{narrow}"
    );
    let history = tui_screen(&found, (200, 40), Some('5'));
    let marked: Vec<&str> = history
        .lines()
        .filter(|l| l.contains("<- forced by strobe explore (m)"))
        .collect();
    assert_eq!(marked.len(), 1, "{history}");
    assert!(marked[0].contains(&slice.to_string()), "{history}");
    // A row explore could not have written is damage (exit 2), never shown.
    for damage in [
        "UPDATE explored SET rank = 9",
        "UPDATE explored SET kind = 'guess'",
        "UPDATE explored SET slice = 100000",
        "UPDATE explored SET runs = 0",
    ] {
        let copy = dir.path().join("damaged.db");
        std::fs::copy(&found, &copy).unwrap();
        rusqlite::Connection::open(&copy)
            .unwrap()
            .execute_batch(damage)
            .unwrap();
        let o = strobe_cmd(&["stats", &copy.display().to_string()], &[]);
        assert_eq!(o.code, 2, "{damage}: {}{}", o.stdout, o.stderr);
        assert!(
            o.stderr.contains("damaged recording"),
            "{damage}: {}",
            o.stderr
        );
    }
    // The passing recording has no such row.
    let plain = strobe_recorder::Recording::open(&pass).unwrap();
    assert_eq!(plain.explored().unwrap(), None);
    // The diff of the two names the deciding match.
    let d = strobe_cmd(
        &[
            "diff",
            &pass.display().to_string(),
            &found.display().to_string(),
        ],
        &[],
    );
    assert_eq!(d.code, 1);
    assert!(
        d.stdout.contains("match send 2#0 -> recv 0#0"),
        "{}",
        d.stdout
    );
    // A recording this user did not make (another launch list) is run only with --yes.
    let other = dir.path().join("state");
    std::fs::create_dir(&other).unwrap();
    let (p, f) = (pass.display().to_string(), found.display().to_string());
    let args = ["explore", p.as_str(), "-o", f.as_str(), "--force"];
    let env = [("XDG_STATE_HOME", other.to_str().unwrap())];
    let o = strobe_cmd(&args, &env);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("--yes runs it"), "{}", o.stderr);
    let o = strobe_cmd(&[&args[..], &["--yes"]].concat(), &env);
    assert_eq!(o.code, 1, "{}", o.stderr);
    // Deterministic: the same search again finds the same order in the same run.
    let again = explore(&pass, &found, &[]);
    assert_eq!(again.code, 1);
    assert_eq!(runs(&again.stderr), runs(&first.stderr));
}

#[test]
fn explore_searches_depth_first_for_an_order_two_receives_deep() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("wildcard_race", dir.path());
    let pass = dir.path().join("pass.db");
    record_quiet_order(&pass, &prog, &["bad=3,2,1"]);
    let found = dir.path().join("found.db");
    let first = explore(&pass, &found, &[]);
    assert_eq!(first.code, 1, "{}{}", first.stdout, first.stderr);
    let want = [
        "run 1: rank 0's wildcard receive 0#0 takes rank 2's message instead of rank 1's: passed",
        "run 2: rank 0's wildcard receive 0#1 takes rank 3's message instead of rank 1's: passed",
        "run 3: rank 0's wildcard receive 0#0 takes rank 3's message instead of rank 1's: passed",
        "run 4: rank 0's wildcard receive 0#1 takes rank 2's message instead of rank 1's: \
         FAILED (exit status 1)",
    ];
    assert_eq!(runs(&first.stderr), want, "{}", first.stderr);
    // The failing run's output (the ranks' stdout and stderr) is shown.
    assert!(
        first.stdout.contains("arrived in the order 3,2,1"),
        "{}",
        first.stdout
    );
    replays_to(&found, "MPI_Abort");
    let again = explore(&pass, &found, &[]);
    assert_eq!(runs(&again.stderr), want, "{}", again.stderr);

    // A budget smaller than the search stops it without a verdict.
    let o = explore(&pass, &found, &["--max-runs", "2"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("--max-runs 2 reached"), "{}", o.stderr);
}

#[test]
fn explore_exhausts_a_program_without_a_failing_order() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("wildcard_race", dir.path());
    let pass = dir.path().join("pass.db");
    record_quiet_order(&pass, &prog, &[]);
    let found = dir.path().join("found.db");
    let o = explore(&pass, &found, &[]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    // The five other orders of three workers, every forcing taken.
    assert_eq!(runs(&o.stderr).len(), 5, "{}", o.stderr);
    assert!(
        runs(&o.stderr).iter().all(|l| l.ends_with(": passed")),
        "{}",
        o.stderr
    );
    assert!(o.stdout.contains("runs: 5"));
    assert!(!found.exists());

    // Without a schedule log there is nothing to explore.
    let quiet = dir.path().join("quiet.db");
    let (q, p) = (quiet.display().to_string(), prog.display().to_string());
    let r = strobe_cmd(
        &[
            "record",
            "-o",
            &q,
            "--schedule-log",
            "off",
            "-n",
            "4",
            "--",
            &p,
        ],
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let o = explore(&quiet, &found, &[]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("schedule log"), "{}", o.stderr);
}

/// An alternative that cannot happen (the sender only sends after the receive completed:
/// `wildcard_race chain=1`) is released after `--idle` and reported "not taken"; the search
/// goes on and ends without a failure.
#[test]
fn an_impossible_alternative_is_released_and_reported_not_taken() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("wildcard_race", dir.path());
    let pass = dir.path().join("pass.db");
    let o = record_c(&pass, &prog, 4, &["chain=1", "gap=200"], &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let found = dir.path().join("found.db");
    let o = explore(&pass, &found, &["--idle", "300ms"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let runs = runs(&o.stderr);
    assert_eq!(runs.len(), 3, "{}", o.stderr);
    assert!(
        runs.iter()
            .all(|l| l.ends_with("not taken (the forced sender never came first); passed")),
        "{}",
        o.stderr
    );
    assert!(!found.exists());
}

/// A Test-polling race (fixture `test_race`): from a passing recording, where rank 0's
/// first `MPI_Test` found nothing, explore forces that test to find the message complete
/// and finds the failure in one run, the same way every time; the saved recording replays
/// to it.
#[test]
fn explore_finds_a_test_polling_race_from_a_passing_recording() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("test_race", dir.path());
    let pass = dir.path().join("pass.db");
    let o = record_c(&pass, &prog, 2, &[], &[]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("first_try=0"), "{}", o.stdout);
    let found = dir.path().join("found.db");
    let want = [
        "run 1: rank 0's test-like call #0 finds its request complete instead of \
                 nothing (the message is faster): FAILED (exit status 134)",
    ];
    for _ in 0..2 {
        let first = explore(&pass, &found, &[]);
        assert_eq!(first.code, 1, "{}{}", first.stdout, first.stderr);
        assert!(first.stdout.contains("runs: 1"), "{}", first.stdout);
        assert!(
            first.stderr.contains("1 test outcome alternative(s)"),
            "{}",
            first.stderr
        );
        assert_eq!(runs(&first.stderr), want, "{}", first.stderr);
    }
    replays_to(&found, "killed by SIGABRT");
    let e = strobe_recorder::Recording::open(&found)
        .unwrap()
        .explored()
        .unwrap()
        .expect("the explored row");
    assert_eq!((e.kind.as_str(), e.rank, e.slice), ("test", 0, None));
    assert!(e
        .detail
        .starts_with("rank 0's test-like call #0 finds its request complete"));
}

/// A Waitany race (`test_race any=1`): the recorded Waitany reported request 1; explore
/// forces it to report request 0 (its message made faster) and finds the failure; the
/// "seen one poll later" forcing before it lands on a wait and changes nothing.
#[test]
fn explore_finds_a_waitany_race_by_forcing_a_lower_index() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("test_race", dir.path());
    let pass = dir.path().join("pass.db");
    let o = record_c(&pass, &prog, 2, &["any=1"], &[]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("first_try=1"), "{}", o.stdout);
    let found = dir.path().join("found.db");
    let o = explore(&pass, &found, &[]);
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    assert_eq!(
        runs(&o.stderr),
        [
            "run 1: rank 0's test-like call #0 finds nothing complete instead of its request \
             (seen one poll later): passed",
            "run 2: rank 0's test-like call #0 reports request 0 of its set instead of request \
             1 (request 0's message is faster): FAILED (exit status 134)"
        ],
        "{}",
        o.stderr
    );
    replays_to(&found, "killed by SIGABRT");
}

/// A test whose completion needs the testing rank to go on first (`test_race
/// handshake=1`) cannot be forced to succeed: the idle release ends the wait, the run is
/// "not taken" and passes, and the search ends without a failure.
#[test]
fn a_test_that_cannot_succeed_early_is_released_and_reported_not_taken() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("test_race", dir.path());
    let pass = dir.path().join("pass.db");
    let o = record_c(&pass, &prog, 2, &["handshake=1", "gap=0"], &[]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let found = dir.path().join("found.db");
    let o = explore(&pass, &found, &["--idle", "300ms"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert_eq!(
        runs(&o.stderr),
        [
            "run 1: rank 0's test-like call #0 finds its request complete instead of nothing \
          (the message is faster): not taken (the request never completed while the rank \
          waited); passed"
        ],
        "{}",
        o.stderr
    );
    assert!(!found.exists());
}
