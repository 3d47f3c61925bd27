//! Jobs that go wrong end quickly, say what happened, and leave nothing behind.

use std::time::Duration;

use strobe_tests::{dev_shm_strobe_entries, fixture, processes_matching, run_fixture, strobe};

/// Tests that run the same fixture and then check that none of its processes is left must
/// not overlap (the test harness runs two at a time): each would see the other's ranks.
static DEADLOCK_FIXTURE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn assert_no_leftovers(name: &str) {
    let path = fixture(name).display().to_string();
    // The launcher reaps every rank before it exits; give the kernel a moment to drop
    // the zombies' /proc entries.
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        processes_matching(&path).is_empty(),
        "leftover ranks: {:?}",
        processes_matching(&path)
    );
    assert!(dev_shm_strobe_entries().is_empty(), "leftovers in /dev/shm");
}

#[test]
fn deadlock_is_reported_within_a_second_with_the_cycle() {
    let _one_at_a_time = DEADLOCK_FIXTURE.lock().unwrap_or_else(|e| e.into_inner());
    for (n, nodes) in [("3", "1"), ("4", "2")] {
        let r = run_fixture(&["-n", n, "--nodes", nodes], "deadlock", &[]);
        assert_eq!(r.code, 3, "deadlock exit status; stderr:\n{}", r.stderr);
        assert!(r.elapsed < Duration::from_secs(1), "took {:?}", r.elapsed);
        assert!(r.stderr.contains("deadlock in slice"), "{}", r.stderr);
        assert!(
            r.stderr.contains("rank 0 blocked in MPI_Recv"),
            "{}",
            r.stderr
        );
        assert!(
            r.stderr.contains("wait-for cycle: rank 0 -> rank 1"),
            "{}",
            r.stderr
        );
        assert!(r.stdout.is_empty());
        assert_no_leftovers("deadlock");
    }
    // Under fixed slices too. In the same test, not a parallel one: the leftover check
    // looks for any process running the fixture.
    let r = run_fixture(
        &["-n", "2", "--strobe", "fixed", "--slice", "1ms"],
        "deadlock",
        &[],
    );
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.elapsed < Duration::from_secs(1), "took {:?}", r.elapsed);
    assert_no_leftovers("deadlock");
}

#[test]
fn a_crashing_rank_stops_the_job_with_a_clear_message() {
    let r = run_fixture(&["-n", "4"], "crash", &[]);
    assert_eq!(r.code, 128 + 6, "SIGABRT status; stderr:\n{}", r.stderr);
    assert!(
        r.stderr.contains("rank 3 (pid") && r.stderr.contains("was killed by SIGABRT in slice"),
        "{}",
        r.stderr
    );
    assert_no_leftovers("crash");
}

#[test]
fn mpi_abort_reports_the_code_and_exits_with_it() {
    let r = run_fixture(&["-n", "3"], "abort", &[]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains("rank 0") && r.stderr.contains("called MPI_Abort with error code 3"),
        "{}",
        r.stderr
    );
    assert_no_leftovers("abort");
}

#[test]
fn exit_without_finalize_is_a_failure() {
    let r = run_fixture(&["-n", "2"], "noexit_finalize", &[]);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("exited without calling MPI_Finalize"),
        "{}",
        r.stderr
    );
    assert_no_leftovers("noexit_finalize");
}

#[test]
fn missing_program_and_bad_arguments_are_clear_errors() {
    let out = std::process::Command::new(strobe())
        .args(["run", "-n", "2", "--", "/nonexistent/prog"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
    for bad in [
        vec!["run", "-n", "0", "--", "true"],
        vec!["run", "-n", "2", "--nodes", "3", "--", "true"],
        vec!["run", "-n", "2", "--slice", "fast", "--", "true"],
        vec!["run", "-n", "2", "--strobe", "sometimes", "--", "true"],
    ] {
        let out = std::process::Command::new(strobe())
            .args(&bad)
            .output()
            .unwrap();
        assert_ne!(out.status.code(), Some(0), "{bad:?}");
        assert!(!out.stderr.is_empty(), "{bad:?} printed no error");
    }
}

/// Issue 12, item 10: a program that never calls `MPI_Init` (here `/bin/true`) is reported
/// as such, not as "exited without calling MPI_Finalize", by `run`, by `record` (the
/// recording's report), by `stats` on that recording and in the TUI's overview.
#[test]
fn a_non_mpi_program_is_reported_as_never_calling_mpi_init() {
    let r = std::process::Command::new(strobe())
        .args(["run", "-n", "2", "--", "/bin/true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(err.contains("exited without calling MPI_Init"), "{err}");
    assert!(!err.contains("MPI_Finalize"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("true.db");
    let r = std::process::Command::new(strobe())
        .args(["record", "-n", "2", "-o"])
        .arg(&db)
        .args(["--", "/bin/true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(err.contains("exited without calling MPI_Init"), "{err}");

    let r = std::process::Command::new(strobe())
        .arg("stats")
        .arg(&db)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&r.stdout);
    assert!(
        out.contains("exited without calling MPI_Init"),
        "stats:\n{out}\n{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(!out.contains("MPI_Finalize"), "{out}");

    // The TUI's overview, at the smallest size it lays out fully.
    use strobe_tui::ratatui::{backend::TestBackend, Terminal};
    let rec = strobe_tui::Recording::open(&db).unwrap();
    let mut app = strobe_tui::App::new(rec, strobe_tui::Theme { color: false });
    let mut term = Terminal::new(TestBackend::new(80, 24)).unwrap();
    strobe_tui::terminal::draw(&mut term, &mut app).unwrap();
    let screen: String = term
        .backend()
        .buffer()
        .content()
        .chunks(80)
        .map(|row| row.iter().map(|c| c.symbol()).collect::<String>() + "\n")
        .collect();
    assert!(
        screen.contains("without calling MPI_Init"),
        "the TUI's overview:\n{screen}"
    );
}

#[test]
fn ctrl_c_stops_the_job_cleanly() {
    let mut child = std::process::Command::new(strobe())
        .args(["run", "-n", "3", "--"])
        .arg(fixture("barrier_every"))
        .args(["1900", "1000000"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: sending SIGINT to our own child.
    unsafe { libc_kill(child.id() as i32, 2) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert_no_leftovers("barrier_every");
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}
