//! Ctrl-C and SIGTERM, sent as a terminal and `timeout(1)` send them: to strobe's whole
//! process group (issue 11 item 7, issue 12 items 1 and 4). The ranks run in groups of
//! their own, so only strobe sees the signal and stops the job: "stopped"/"interrupted",
//! exit 130, never a rank "killed by SIGINT" or a divergence; nothing is left running.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use strobe_tests::replay::{record, replay};
use strobe_tests::{fixture, processes_matching, strobe};

/// Start `strobe args` as the leader of a new process group (as a shell starts a job), its
/// stderr lines sent to the returned channel as they come.
fn spawn_group(args: &[&str]) -> (Child, mpsc::Receiver<String>) {
    let mut child = Command::new(strobe())
        .args(args)
        .env_remove("STROBE_SCHEDULE_LOG")
        .env_remove("STROBE_METRICS")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("spawn strobe");
    let (tx, rx) = mpsc::channel();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (child, rx)
}

/// Send `sig` to the whole process group led by `child`, as the terminal does for Ctrl-C.
fn signal_group(child: &Child, sig: i32) {
    // SAFETY: kill with a negative pid signals a process group; no memory is involved.
    let rc = unsafe { libc::kill(-(child.id() as i32), sig) };
    assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
}

/// Wait until `n` ranks mention `token` (strobe's own command line mentions it too).
fn await_ranks(token: &str, n: usize) {
    let t = Instant::now();
    while processes_matching(token).len() < n + 1 {
        assert!(t.elapsed() < Duration::from_secs(60), "ranks never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Let them get into MPI_Init and the first slices.
    std::thread::sleep(Duration::from_millis(500));
}

fn finish(mut child: Child, rx: mpsc::Receiver<String>) -> (i32, String) {
    let st = child.wait().unwrap();
    let err: Vec<String> = rx.iter().collect();
    (st.code().unwrap_or(-1), err.join("\n"))
}

fn assert_none_left(token: &str) {
    let t = Instant::now();
    loop {
        let left = processes_matching(token);
        if left.is_empty() {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "left running: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A unique sleep length for `idle`, so its command line names this test's ranks only.
fn token(base: u64) -> String {
    (base + u64::from(std::process::id() % 1000)).to_string()
}

#[test]
fn ctrl_c_to_the_group_stops_run_with_130() {
    let ms = token(611_000);
    let idle = fixture("idle").display().to_string();
    let (child, rx) = spawn_group(&["run", "-n", "3", "--", &idle, &ms]);
    await_ranks(&format!("idle {ms}"), 3);
    signal_group(&child, libc::SIGINT);
    let (code, err) = finish(child, rx);
    assert_eq!(code, 130, "{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert!(!err.contains("killed by SIGINT"), "{err}");
    assert_none_left(&format!("idle {ms}"));
}

#[test]
fn ctrl_c_during_record_is_stored_as_interrupted_and_replays_as_stopped_by_the_user() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cut.db");
    let ms = token(612_000);
    let idle = fixture("idle").display().to_string();
    let dbs = db.display().to_string();
    let (child, rx) = spawn_group(&["record", "-o", &dbs, "-n", "2", "--", &idle, &ms]);
    await_ranks(&format!("idle {ms}"), 2);
    signal_group(&child, libc::SIGINT);
    let (code, err) = finish(child, rx);
    assert_eq!(code, 130, "{err}");
    assert_none_left(&format!("idle {ms}"));
    let conn = rusqlite::Connection::open(&db).unwrap();
    let outcome: String = conn
        .query_row("SELECT outcome FROM job", [], |r| r.get(0))
        .unwrap();
    assert_eq!(outcome, "interrupted");
    drop(conn);

    let out = replay(&db, &[], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("stopped by the user at slice"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("DIVERGED"), "{}", out.stderr);
}

/// `replay --until-slice 20`, held at the slice, then Ctrl-C (SIGINT) or `timeout`
/// (SIGTERM) to the group: "stopped", 130.
fn replay_held_then(db: &Path, sig: i32) {
    let dbs = db.display().to_string();
    let (child, rx) = spawn_group(&["replay", &dbs, "--timeout", "120s", "--until-slice", "20"]);
    let mut seen = Vec::new();
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("never paused: {seen:?}"));
        let held = line.contains("to the control socket to go on");
        seen.push(line);
        if held {
            break;
        }
    }
    signal_group(&child, sig);
    let (code, err) = finish(child, rx);
    assert_eq!(code, 130, "{seen:?}\n{err}");
    assert!(err.contains("stopped"), "{err}");
    assert!(!err.contains("DIVERGED"), "{err}");
}

#[test]
fn ctrl_c_and_sigterm_stop_a_held_replay_with_130() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ring.db");
    let out = record(&db, &["-n", "3"], "token_ring", &[], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    replay_held_then(&db, libc::SIGINT);
    replay_held_then(&db, libc::SIGTERM);
}

#[test]
fn sigterm_while_spawning_300_ranks_stops_and_leaves_nothing() {
    let ms = token(613_000);
    let idle = fixture("idle").display().to_string();
    let (child, rx) = spawn_group(&["run", "-n", "300", "--", &idle, &ms]);
    // Signal as soon as the first ranks exist: the launcher is still spawning the others.
    await_first(&format!("idle {ms}"));
    let t = Instant::now();
    signal_group(&child, libc::SIGTERM);
    let (code, err) = finish(child, rx);
    eprintln!("stopped {:?} after SIGTERM", t.elapsed());
    assert_eq!(code, 130, "{err}");
    assert_none_left(&format!("idle {ms}"));
}

fn await_first(token: &str) {
    let t = Instant::now();
    while processes_matching(token).len() < 3 {
        assert!(t.elapsed() < Duration::from_secs(60), "no rank started");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// At a real terminal (a pty from `script(1)`): rank 0, in a background process group, still
/// reads the terminal (through strobe), and the terminal's own Ctrl-C (the ^C character, not
/// a kill) stops the job with 130.
#[test]
fn at_a_terminal_rank_0_reads_it_through_strobe_and_ctrl_c_is_130() {
    use std::io::{Read, Write};
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: script(1) is not installed");
        return;
    }
    let inner = format!(
        "{} run -n 2 -- /bin/sh -c 'read x; echo got-$x; exec sleep 60'; echo STATUS=$?",
        strobe().display()
    );
    // script(1) runs the line with $SHELL, or /bin/sh when unset (dash on Debian, and CI has
    // no SHELL). dash dies of the terminal's SIGINT itself and never prints STATUS; bash, like
    // the interactive shells users have, waits for strobe and goes on when strobe exits 130.
    let mut child = Command::new("script")
        .env("SHELL", "/bin/bash")
        .args(["-qc", &inner, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn script");
    let mut tty_in = child.stdin.take().unwrap();
    let mut out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = out.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                return;
            }
        }
    });
    let mut seen = String::new();
    let await_text = |what: &str, seen: &mut String| {
        let t = Instant::now();
        while !seen.contains(what) {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "no {what:?} in {seen:?}"
            );
            if let Ok(b) = rx.recv_timeout(Duration::from_millis(100)) {
                seen.push_str(&String::from_utf8_lossy(&b));
            }
        }
    };
    std::thread::sleep(Duration::from_millis(500));
    tty_in.write_all(b"hello\n").unwrap();
    await_text("got-hello", &mut seen);
    tty_in.write_all(b"\x03").unwrap();
    await_text("STATUS=", &mut seen);
    assert!(seen.contains("STATUS=130"), "{seen}");
    assert!(!seen.contains("killed by SIGINT"), "{seen}");
    drop(tty_in);
    let _ = child.wait();
}

/// What a rank started itself is stopped with it: the ranks' process groups no longer get
/// the terminal's Ctrl-C, so strobe kills each rank's whole group.
#[test]
fn ctrl_c_stops_what_the_ranks_started_too() {
    let secs = token(614_000);
    // The sleeps must not hold strobe's stderr pipe open (the test would hang, not fail).
    let script = format!("sleep {secs} >/dev/null 2>&1 & wait");
    let (child, rx) = spawn_group(&["run", "-n", "2", "--", "/bin/sh", "-c", &script]);
    let needle = format!("sleep {secs}");
    let t = Instant::now();
    // strobe's and the two shells' command lines mention it too; wait for the two sleeps.
    while processes_matching(&needle)
        .iter()
        .filter(|p| !p.contains("/bin/sh") && !p.contains("strobe"))
        .count()
        < 2
    {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "sleeps never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    signal_group(&child, libc::SIGINT);
    let (code, err) = finish(child, rx);
    assert_eq!(code, 130, "{err}");
    assert_none_left(&needle);
}
