//! Issue 12, item 5: long work shows progress on a terminal (slices, rate, file size; a
//! bar with an ETA for replay) and nothing of the sort when stderr is not a terminal; the
//! final line of `record` gives the file's size.

use std::process::Command;
use std::time::{Duration, Instant};

use strobe_tests::replay::strobe_cmd;
use strobe_tests::{fixture, strobe};

/// A tmux pane running `cmd`, read until it shows `what`.
fn pane_shows(cmd: &str, what: &[&str]) -> String {
    // One tmux server per call: the tests of this file run in parallel threads.
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let sock = format!(
        "strobe-progress-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .args(["-L", &sock, "-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("tmux (scripts/test.sh installs it)")
    };
    let out = tmux(&["new-session", "-d", "-s", "p", "-x", "160", "-y", "10", cmd]);
    assert!(out.status.success(), "{out:?}");
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut seen = String::new();
    loop {
        let screen =
            String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", "p"]).stdout).into_owned();
        seen.push_str(&screen);
        if what.iter().all(|w| seen.contains(w)) {
            let _ = tmux(&["kill-server"]);
            return seen;
        }
        if Instant::now() > deadline {
            let _ = tmux(&["kill-server"]);
            panic!("the pane never showed {what:?}:\n{seen}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn record_and_replay_show_progress_on_a_terminal_only() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("long.db");
    // 1,000 barriers after 1.9 ms of computation each: at least 1.9 s by construction.
    let job = format!("{} 1900 1000", fixture("barrier_every").display());
    let s = strobe().display().to_string();
    let cmd = format!(
        "{s} record -o {db} --force -n 2 -- {job} >/dev/null; {s} replay {db} >/dev/null; echo done-$?; sleep 60",
        db = db.display()
    );
    let seen = pane_shows(
        &cmd,
        &[
            "strobe: recording ",
            "slices/s",
            "strobe: replaying [",
            "ETA",
            "done-0",
        ],
    );
    assert!(
        seen.contains(&format!("slices to {} (", db.display())),
        "{seen}"
    );

    // Not a terminal: no progress line, and the final line still has the size.
    let out = strobe_cmd(
        &[
            "record",
            "-o",
            &db.display().to_string(),
            "--force",
            "-n",
            "2",
            "--",
            &fixture("barrier_every").display().to_string(),
            "1900",
            "600",
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains("slices/s"), "{}", out.stderr);
    let last = out.stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains("slices to") && (last.ends_with("KiB)") || last.ends_with("MiB)")),
        "{last}"
    );
}

/// `strobe bench record` ran for minutes without a word (issue 12, item 5): on a terminal
/// it shows a progress line (runs done of all, the ETA, the workload, round and mode); its
/// report on stdout stays clean, and without a terminal there is no progress line.
#[test]
fn bench_record_shows_progress_on_a_terminal_only() {
    let bench = strobe_tests::target_dir().join("strobe-bench");
    if !bench.exists() {
        eprintln!(
            "SKIPPED: {} is not built (cargo build -p strobe-bench)",
            bench.display()
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.md");
    let s = strobe().display().to_string();
    let cmd = format!(
        "{s} bench record -n 2 --rounds 1 --iterations 1 --heavy-iterations 5 > {r}; echo done-$?; sleep 60",
        r = report.display()
    );
    let seen = pane_shows(
        &cmd,
        &[
            "strobe bench: recording overhead [",
            "runs, ETA",
            // Which run a capture catches is timing (the pane is read every 200 ms and a
            // warm-up of the barrier workload can be over in less): any warm-up label.
            ", warm-up, ",
            "done-0",
        ],
    );
    assert!(
        seen.contains("/18 runs"),
        "3 workloads x 2 rounds x 3 modes:\n{seen}"
    );
    let text = std::fs::read_to_string(&report).unwrap();
    assert!(text.contains("### Recording overhead"), "{text}");
    assert!(!text.contains("ETA"), "no progress in the report:\n{text}");

    // Not a terminal: nothing on stderr but the report's own lines.
    let out = Command::new(strobe())
        .args([
            "bench",
            "record",
            "-n",
            "2",
            "--rounds",
            "1",
            "--iterations",
            "1",
            "--heavy-iterations",
            "5",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("runs, ETA"),
        "{out:?}"
    );
}

/// `strobe stats` on a big file (79 s for a 1,000-rank job) shows a spinner with the
/// file's size on a terminal once it has read for a second.
#[test]
fn stats_on_a_big_recording_shows_progress_on_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("big.db");
    strobe_tui::synthetic::generate(&db, 400_000, 64, 4).unwrap();
    let cmd = format!(
        "{} stats {} > /dev/null; echo done-$?; sleep 60",
        strobe().display(),
        db.display()
    );
    // The verdict does not matter here, only that the reading was shown: `stats` refuses
    // the synthetic file (exit 2: its slices name descriptors its replay log lacks).
    let seen = pane_shows(&cmd, &["strobe: reading", "MiB", "done-"]);
    let reading = seen.find("strobe: reading").unwrap();
    assert!(reading < seen.find("done-").unwrap(), "{seen}");
}
