//! Issue 12, item 10: `strobe stats` must not mislead. A deadlocked job's MMDS says what it
//! covers; `--rank R` does not repeat the job-wide sections; job-wide times say they are
//! sums over ranks; the outcome is in words; durations follow the units rule of
//! docs/cli.md (a standalone duration carries a unit that fits it).

use strobe_tests::replay::strobe_cmd;
use strobe_tests::{fixture, record_fixture_into};

#[test]
fn a_deadlocked_jobs_statistics_say_what_they_cover() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("dl.db");
    let out = strobe_cmd(
        &[
            "record",
            "-o",
            &db.display().to_string(),
            "-n",
            "3",
            "--",
            &fixture("deadlock").display().to_string(),
        ],
        &[],
    );
    assert_eq!(out.code, 3, "{}", out.stderr);
    let all = strobe_cmd(&["stats", &db.display().to_string()], &[]);
    assert_eq!(all.code, 0, "{}", all.stderr);
    let t = &all.stdout;
    assert!(t.contains("note: the job did not finish (deadlock)"), "{t}");
    assert!(t.contains("run time (summed over 3 ranks)"), "{t}");
    assert!(t.contains("top slices by GETTS"), "{t}");
    // A standalone duration fits its unit: never "13900.4 us" nor "0.049 s".
    let getts = t.lines().find(|l| l.starts_with("GETTS")).unwrap();
    for w in getts.split_whitespace().collect::<Vec<_>>().windows(2) {
        if let (Ok(v), "us") = (w[0].parse::<f64>(), w[1]) {
            assert!(v < 1000.0, "{getts}");
        }
    }
    let outcome = t.lines().find(|l| l.starts_with("outcome")).unwrap();
    assert!(!outcome.contains(" 0.0"), "{outcome}");

    let one = strobe_cmd(&["stats", &db.display().to_string(), "--rank", "1"], &[]);
    assert_eq!(one.code, 0, "{}", one.stderr);
    let r = &one.stdout;
    assert!(r.contains("MMDS of rank 1"), "{r}");
    for job_wide in ["top slices by GETTS", "GETTS      p50", "blocked    "] {
        assert!(!r.contains(job_wide), "--rank repeats {job_wide:?}:\n{r}");
    }
    assert!(!r.contains("summed over"), "{r}");
}

#[test]
fn a_failed_jobs_outcome_is_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let db = record_fixture_into(dir.path(), "token_ring", 2);
    let ok = strobe_cmd(&["stats", &db.display().to_string()], &[]);
    assert!(ok.stdout.contains("outcome    success"), "{}", ok.stdout);
    let db = dir.path().join("seg.db");
    let out = strobe_cmd(
        &[
            "record",
            "-o",
            &db.display().to_string(),
            "-n",
            "2",
            "--",
            &fixture("crash").display().to_string(),
        ],
        &[],
    );
    assert_ne!(out.code, 0);
    let s = strobe_cmd(&["stats", &db.display().to_string()], &[]);
    assert!(
        s.stdout.contains("outcome    a rank failed"),
        "{}",
        s.stdout
    );
    assert!(!s.stdout.contains("rank_failed"), "{}", s.stdout);
}
