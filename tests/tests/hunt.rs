//! `strobe hunt`: the heisenbug fixture, which passes without noise, fails under injected
//! chaos; the first failing run's recording is kept, names its chaos setting, and replays
//! to the same assertion. A program that never fails exhausts the budget and keeps nothing.

use std::path::Path;

use strobe_recorder::Recording;
use strobe_tests::replay::{strobe_cmd, Out};
use strobe_tests::tools::build_c;

fn hunt(out: &Path, flags: &[&str], prog: &Path, args: &[&str]) -> Out {
    let (o, p) = (out.display().to_string(), prog.display().to_string());
    let mut all = vec!["hunt", "-o", o.as_str(), "-n", "4", "--timeout", "60s"];
    all.extend_from_slice(flags);
    all.push("--");
    all.push(&p);
    all.extend_from_slice(args);
    strobe_cmd(&all, &[])
}

#[test]
fn hunt_finds_the_heisenbug_and_keeps_a_replayable_recording() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("heisenbug", dir.path());
    let fail = dir.path().join("fail.db");
    // 10 ms delays at every call against a 2 ms gap: about one run in four fails.
    let o = hunt(
        &fail,
        &[
            "--runs",
            "200",
            "--chaos",
            "1000",
            "--chaos-max-delay",
            "10ms",
            "--chaos-percent",
            "100",
        ],
        &prog,
        &[],
    );
    assert_eq!(o.code, 1, "found: {}{}", o.stdout, o.stderr);
    let runs: u64 = o
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("runs to failure: "))
        .expect("runs reported")
        .parse()
        .unwrap();
    assert!(
        o.stdout.contains("Assertion") || o.stderr.contains("SIGABRT"),
        "{}",
        o.stderr
    );
    let rec = Recording::open(&fail).unwrap();
    assert_eq!(rec.job().exit_status, Some(134), "SIGABRT from assert()");
    let chaos = rec
        .job()
        .env
        .iter()
        .find(|(k, _)| k == "STROBE_CHAOS")
        .map(|(_, v)| v.clone())
        .expect("the chaos setting is stored in the recording");
    assert_eq!(
        chaos,
        format!("seed={},max_us=10000,percent=100", 1000 + runs - 1)
    );
    // No scratch recording is left next to it.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".strobe-hunt"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // The kept recording replays to the failure, every time.
    for _ in 0..2 {
        let r = strobe_cmd(&["replay", &fail.display().to_string()], &[]);
        assert!(
            r.stderr.contains("replay matched the recording")
                && r.stderr.contains("killed by SIGABRT"),
            "{}",
            r.stderr
        );
    }
}

#[test]
fn a_program_that_never_fails_exhausts_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("none.db");
    let prog = build_c("barrier_every", dir.path());
    let args = ["interval_ms=0.5", "iters=5"];
    let o = hunt(
        &out,
        &["--runs", "3", "--chaos-max-delay", "1ms"],
        &prog,
        &args,
    );
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("no failure in 3 run(s)"), "{}", o.stderr);
    assert!(!out.exists(), "nothing kept");
    // An output pattern makes a passing run count as the failure.
    let o = hunt(
        &out,
        &["--runs", "3", "--until-output", "barrier_every ok"],
        &prog,
        &args,
    );
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("runs to failure: 1"), "{}", o.stdout);
    assert!(o.stderr.contains("its output contains"), "{}", o.stderr);
    assert_eq!(Recording::open(&out).unwrap().job().exit_status, Some(0));
    // The kept file is not replaced without --force.
    let o = hunt(&out, &["--runs", "1"], &prog, &args);
    assert_eq!(o.code, 2, "{}", o.stderr);
}

#[test]
fn a_bad_chaos_setting_is_refused_at_mpi_init() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("barrier_every", dir.path());
    let p = prog.display().to_string();
    for (var, value) in [
        ("STROBE_CHAOS", "seed=x"),
        ("STROBE_CHAOS", "seed=1,percent=200"),
        ("STROBE_EXPLORE_HOLD", "1:0:../../etc"),
    ] {
        let o = strobe_cmd(&["run", "-n", "2", "--", &p, "iters=2"], &[(var, value)]);
        assert_ne!(o.code, 0, "{var}={value}");
        assert!(
            o.stderr.contains(&format!("bad value of {var}")),
            "{var}={value}: {}",
            o.stderr
        );
    }
}

/// On a terminal (script(1) gives it one) hunt shows a progress line it rewrites in place;
/// through a pipe it prints none (the other tests).
#[test]
fn hunt_shows_progress_on_a_terminal() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED: script(1) is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("barrier_every", dir.path());
    let line = format!(
        "{} hunt -o {} --runs 2 --chaos-max-delay 1ms -n 2 -- {} iters=2",
        strobe_tests::strobe().display(),
        dir.path().join("none.db").display(),
        prog.display()
    );
    let o = std::process::Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env("SHELL", "/bin/bash")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("\r\x1b[Khunt: run 1/2 (seed 1)"), "{text:?}");
    assert!(text.contains("\r\x1b[Khunt: run 2/2 (seed 2)"), "{text:?}");
    assert!(text.contains("no failure in 2 run(s)"), "{text:?}");
    let piped = hunt(
        &dir.path().join("none.db"),
        &["--runs", "1"],
        &prog,
        &["iters=2"],
    );
    assert!(!piped.stderr.contains("hunt: run 1/"), "{}", piped.stderr);
}

/// Ctrl-C (SIGINT to strobe) stops the hunt: exit 130, and the interrupted run is not kept
/// as if the program had failed.
#[test]
fn an_interrupted_hunt_keeps_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("barrier_every", dir.path());
    let out = dir.path().join("fail.db");
    let child = std::process::Command::new(strobe_tests::strobe())
        .arg("hunt")
        .arg("-o")
        .arg(&out)
        .args(["--runs", "5", "-n", "2", "--"])
        .arg(&prog)
        .args(["interval_ms=2", "iters=2000"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the first run's recording to exist (the job is running), then interrupt.
    let started = std::time::Instant::now();
    while !std::fs::read_dir(dir.path()).unwrap().any(|e| {
        e.unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with(".strobe-hunt")
    }) {
        assert!(started.elapsed().as_secs() < 60, "hunt never started a run");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    // SAFETY: signalling a child we spawned and have not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("interrupted: stopped, nothing kept"),
        "{stderr}"
    );
    assert!(!out.exists());
}
