//! Requests beyond what the machine can hold are refused before anything is spawned, with
//! the limit named (issue 11 items 4 and 12, issue 12 item 4).

use std::time::{Duration, Instant};

use strobe_tests::fixture;
use strobe_tests::replay::{record, replay, strobe_cmd};

#[test]
fn a_hundred_thousand_ranks_are_refused_at_once_naming_the_limit() {
    let hello = fixture("hello").display().to_string();
    let t = Instant::now();
    let out = strobe_cmd(&["run", "-n", "100000", "--", &hello], &[]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        ["pid_max", "RLIMIT_NPROC", "MemAvailable"]
            .iter()
            .any(|l| out.stderr.contains(l)),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("--max-ranks 100000"), "{}", out.stderr);
    assert!(out.stdout.is_empty(), "a rank ran: {}", out.stdout);
    // Refused, not spawned and then killed: far below the time of a single spawn wave.
    assert!(t.elapsed() < Duration::from_secs(30));

    let out = strobe_cmd(&["run", "-n", "50", "--max-ranks", "10", "--", &hello], &[]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("--max-ranks 10"), "{}", out.stderr);
    assert!(out.stdout.is_empty(), "a rank ran: {}", out.stdout);

    // The override accepts what it names.
    let out = strobe_cmd(&["run", "-n", "2", "--max-ranks", "2", "--", &hello], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn a_recording_tampered_to_a_hundred_thousand_ranks_is_refused_before_spawning() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("hello.db");
    let out = record(&db, &["-n", "2"], "hello", &[], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute("UPDATE job SET ranks = 100000", []).unwrap();
    drop(conn);
    let out = replay(&db, &[], &[]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(!out.stdout.contains("hello from rank"), "{}", out.stdout);
    assert!(!out.stderr.contains("DIVERGED"), "{}", out.stderr);
}

#[test]
fn chunk_budget_below_4kib_is_refused_naming_the_minimum() {
    let hello = fixture("hello").display().to_string();
    for b in ["1", "0", "4095"] {
        let out = strobe_cmd(&["run", "-n", "2", "--chunk-budget", b, "--", &hello], &[]);
        assert_eq!(out.code, 2, "{b}: {}", out.stderr);
        assert!(out.stderr.contains("4KiB"), "{b}: {}", out.stderr);
    }
    let out = strobe_cmd(
        &["run", "-n", "2", "--chunk-budget", "4KiB", "--", &hello],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn a_bad_strobe_spin_us_is_refused_naming_the_variable() {
    let hello = fixture("hello").display().to_string();
    for v in ["garbage", "-1", "5000000"] {
        let out = strobe_cmd(&["run", "-n", "2", "--", &hello], &[("STROBE_SPIN_US", v)]);
        assert_eq!(out.code, 2, "{v}: {}", out.stderr);
        assert!(out.stderr.contains("STROBE_SPIN_US"), "{v}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{v}: a rank ran");
    }
    let out = strobe_cmd(
        &["run", "-n", "2", "--", &hello],
        &[("STROBE_SPIN_US", "0")],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
}
