//! Issue 12: `strobe replay dl.db --gdb 1` inside tmux holds the replayed deadlock with
//! every rank alive and starts gdb on rank 1 in a new tmux window; gdb (in batch mode,
//! through --gdb-command) finds rank 1 stopped inside MPI_Recv at the fixture's line. No
//! process is left behind. Also: the foreground form and the refusals (exit 2).

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use strobe_tests::replay::strobe_cmd;
use strobe_tests::tools::{build_c, record_c};
use strobe_tests::{processes_matching, strobe};

/// gdb and tmux, installed by scripts/ensure-tools.sh; `false` (with why) when missing.
fn have_tools() -> bool {
    let ok = |p: &str| {
        Command::new(p)
            .arg("-V")
            .output()
            .or_else(|_| Command::new(p).arg("--version").output())
            .is_ok()
    };
    let _ = Command::new("scripts/ensure-tools.sh")
        .current_dir(strobe_tests::c_fixtures::source_dir().join("../.."))
        .status();
    for tool in ["gdb", "tmux"] {
        if !ok(tool) {
            eprintln!(
                "SKIPPED: {tool} is not installed and scripts/ensure-tools.sh could not install it"
            );
            return false;
        }
    }
    true
}

/// The deadlock C fixture on 2 ranks, recorded into `dir/dl.db` (it deadlocks: exit 3).
fn record_deadlock(dir: &Path) -> std::path::PathBuf {
    let prog = build_c("deadlock", dir);
    let db = dir.join("dl.db");
    let out = record_c(&db, &prog, 2, &[], &[]);
    assert_eq!(out.code, 3, "the fixture deadlocks: {}", out.stderr);
    db
}

/// Rank pids from the replay's hold report (`rank   1  pid    9414  ...`).
fn rank_pids(stderr: &str) -> Vec<u32> {
    stderr
        .lines()
        .filter(|l| l.trim_start().starts_with("rank "))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            (w.nth(2) == Some("pid")).then(|| w.next()?.parse().ok())?
        })
        .collect()
}

/// Whether `pid` is a live (not zombie) process.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

fn wait_for(what: &str, deadline: Instant, mut done: impl FnMut() -> bool) {
    while !done() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn gdb_attaches_to_the_deadlocked_rank_in_a_tmux_window() {
    if !have_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = record_deadlock(dir.path());
    let (bt, err, rc) = (
        dir.path().join("bt.txt"),
        dir.path().join("err.txt"),
        dir.path().join("rc.txt"),
    );
    // gdb runs in the new window, writes the backtrace, and the window closes.
    let gdb = format!(
        "gdb -batch -ex bt -p {{pid}} > {0}.tmp 2>&1; mv {0}.tmp {0}",
        bt.display()
    );
    let script = format!(
        "{} replay {} --gdb 1 --gdb-command '{gdb}' 2> {}; echo $? > {}",
        strobe().display(),
        db.display(),
        err.display(),
        rc.display()
    );
    let sock = format!("strobe-gdb-{}", std::process::id());
    let tmux = |args: &[&str]| -> Output {
        Command::new("tmux")
            .args(["-L", &sock, "-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("run tmux")
    };
    let out = tmux(&[
        "new-session",
        "-d",
        "-s",
        "g",
        "-x",
        "160",
        "-y",
        "40",
        &script,
    ]);
    assert!(out.status.success(), "{out:?}");
    let deadline = Instant::now() + Duration::from_secs(120);
    wait_for("gdb wrote the backtrace", deadline, || bt.exists());
    // The replay is still held (every rank alive) after gdb detached: end it with Ctrl-C.
    let held = std::fs::read_to_string(&err).unwrap();
    let pids = rank_pids(&held);
    assert_eq!(pids.len(), 2, "two ranks held:\n{held}");
    assert!(
        pids.iter().all(|&p| alive(p)),
        "ranks alive at the hold:\n{held}"
    );
    assert!(!rc.exists(), "strobe still runs while held");
    let _ = tmux(&["send-keys", "-t", "g:0", "C-c"]);
    wait_for("strobe exited", deadline, || rc.exists());
    let _ = tmux(&["kill-server"]);

    let trace = std::fs::read_to_string(&bt).unwrap();
    let stderr = std::fs::read_to_string(&err).unwrap();
    assert!(
        stderr.contains("held at the failure: the recorded job deadlocks"),
        "{stderr}"
    );
    assert!(stderr.contains("tmux window \"gdb rank 1\""), "{stderr}");
    assert!(
        trace.contains(&format!("process {}", pids[1])) || trace.contains(&pids[1].to_string()),
        "gdb attached to rank 1 (pid {}):\n{trace}",
        pids[1]
    );
    assert!(
        trace.contains("MPI_Recv"),
        "stopped inside MPI_Recv:\n{trace}"
    );
    assert!(
        trace.contains("deadlock.c:15"),
        "at the fixture's receive:\n{trace}"
    );
    let code = std::fs::read_to_string(&rc).unwrap();
    assert_eq!(
        code.trim(),
        "130",
        "Ctrl-C stops the held replay:\n{stderr}"
    );
    wait_for("no rank left", deadline, || !pids.iter().any(|&p| alive(p)));
    assert!(processes_matching(&db.display().to_string()).is_empty());
}

#[test]
fn gdb_in_the_foreground_ends_the_replay_when_it_exits() {
    if !have_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = record_deadlock(dir.path());
    let db_s = db.display().to_string();
    let out = strobe_cmd(
        &["replay", &db_s, "--gdb", "0"],
        &[("STROBE_GDB", "gdb -batch -ex bt -p {pid}")],
    );
    assert_eq!(out.code, 130, "{}", out.stderr);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(all.contains("the replay ends when gdb exits"), "{all}");
    assert!(all.contains("MPI_Recv"), "{all}");
    assert!(all.contains("deadlock.c:15"), "{all}");
    let pids = rank_pids(&out.stderr);
    assert_eq!(pids.len(), 2, "{}", out.stderr);
    assert!(!pids.iter().any(|&p| alive(p)), "no rank left");
}

#[test]
fn gdb_refuses_a_rank_that_does_not_exist_or_a_job_that_did_not_fail() {
    let dir = tempfile::tempdir().unwrap();
    let db = record_deadlock(dir.path());
    let db_s = db.display().to_string();
    let out = strobe_cmd(&["replay", &db_s, "--gdb", "2"], &[]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("rank 2 does not exist"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("2 ranks (0..=1)"), "{}", out.stderr);

    let prog = build_c("barrier_every", dir.path());
    let ok = dir.path().join("ok.db");
    assert_eq!(record_c(&ok, &prog, 2, &[], &[]).code, 0);
    let ok_s = ok.display().to_string();
    let out = strobe_cmd(&["replay", &ok_s, "--gdb", "1"], &[]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("did not fail (success)"),
        "{}",
        out.stderr
    );
}
