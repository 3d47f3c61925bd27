//! `strobe record` and `strobe replay` across node daemons (docs/multi-host.md,
//! "Recording across hosts", "Replay across hosts"): the daemons ship their slice records
//! to the Machine Manager's one recorder; a replay ships each daemon its part of the
//! recording and verifies node 0's slice records at the Machine Manager. A recording made
//! on daemons replays on daemons and on one host, and the other way round. The across-hosts
//! part runs on `scripts/hosts.sh` test hosts and needs root (CI runs as root); without it,
//! it says so and skips. Instance ids 180..189 are this file's.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use strobe_tests::{fixture, strobe, Run};

fn output_of(out: Output, t: Instant) -> Run {
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: t.elapsed(),
    }
}

fn strobe_cmd(args: &[&str]) -> Run {
    let t = Instant::now();
    let out = Command::new(strobe())
        .args(args)
        .output()
        .expect("spawn strobe");
    output_of(out, t)
}

/// `strobe record -o db <host options> -n N --timeout 120s -- program args`.
fn record(db: &Path, host_opts: &[String], ranks: &str, program: &str, args: &[&str]) -> Run {
    let t = Instant::now();
    let out = Command::new(strobe())
        .arg("record")
        .arg("-o")
        .arg(db)
        .arg("--force")
        .args(host_opts)
        .args(["-n", ranks, "--timeout", "120s", "--"])
        .arg(fixture(program))
        .args(args)
        .output()
        .expect("spawn strobe record");
    output_of(out, t)
}

/// `strobe replay db <options>`.
fn replay(db: &Path, opts: &[String]) -> Run {
    let t = Instant::now();
    let out = Command::new(strobe())
        .arg("replay")
        .arg(db)
        .args(opts)
        .args(["--timeout", "120s"])
        .output()
        .expect("spawn strobe replay");
    output_of(out, t)
}

fn assert_matched(r: &Run, what: &str) {
    assert!(
        r.code == 0 && r.stderr.contains("strobe: replay matched the recording"),
        "{what}: exit {}\nstdout:\n{}\nstderr:\n{}",
        r.code,
        r.stdout,
        r.stderr
    );
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn tmp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(name);
    (dir, db)
}

/// The recording's node count and placement, as `strobe stats` and sqlite see them.
fn job_nodes(db: &Path) -> String {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row("SELECT nodes FROM job", [], |r| r.get::<_, i64>(0))
        .map(|n| n.to_string())
        .unwrap()
}

// ---- on this host: local daemons --------------------------------------------------------

/// One daemon is the whole path (control connection, wire sink, frame applier, replay
/// package, replay end); three daemons add the slot mirror and the data plane.
#[test]
fn recorded_on_local_daemons_replays_on_daemons_and_in_process() {
    for nodes in ["1", "3"] {
        let (_d, db) = tmp("ring.db");
        let local = strings(&["--launcher", "local", "--nodes", nodes]);
        let rec = record(&db, &local, "6", "token_ring", &[]);
        rec.assert_ok(&format!("token_ring recorded on {nodes} local daemons"));
        assert_eq!(job_nodes(&db), nodes, "the job row names the daemons");
        let stats = strobe_cmd(&["stats", db.to_str().unwrap()]);
        stats.assert_ok("stats of a recording made on daemons");
        let r = replay(&db, &local);
        assert_matched(&r, &format!("replayed on {nodes} local daemons"));
        assert_eq!(
            r.stdout, rec.stdout,
            "the replay prints what the recording did"
        );
        for k in ["3", "1"] {
            let r = replay(&db, &strings(&["--nodes", k]));
            assert_matched(&r, &format!("replayed in-process on {k} nodes"));
        }
    }
}

/// A recording made in one process replays on three daemons, collectives included.
#[test]
fn recorded_in_process_replays_on_three_local_daemons() {
    let (_d, db) = tmp("coll.db");
    let rec = record(&db, &strings(&["--nodes", "3"]), "6", "collectives", &[]);
    rec.assert_ok("collectives recorded in process");
    let r = replay(&db, &strings(&["--launcher", "local", "--nodes", "3"]));
    assert_matched(&r, "collectives replayed on three local daemons");
}

/// Payload capture travels in the job spec: the captured rank replays alone.
#[test]
fn captured_payloads_on_daemons_replay_one_rank_alone() {
    let (_d, db) = tmp("cap.db");
    let mut opts = strings(&["--launcher", "local", "--nodes", "3"]);
    opts.extend(strings(&["--capture-payloads", "4"]));
    record(&db, &opts, "6", "token_ring", &[]).assert_ok("token_ring with capture");
    let r = replay(&db, &strings(&["--rank", "4"]));
    assert!(r.code == 0, "rank 4 alone: {}\n{}", r.stdout, r.stderr);
}

/// A divergence is found by the verifier at the Machine Manager (node 0's slice records)
/// and stops every daemon; the report is a one-host replay's, naming the rank's node.
#[test]
fn a_divergence_on_daemons_is_found_at_the_machine_manager() {
    let (_d, db) = tmp("div.db");
    let local = strings(&["--launcher", "local", "--nodes", "3"]);
    record(&db, &local, "4", "divergent", &[]).assert_ok("divergent recorded on daemons");
    let mut opts = local.clone();
    opts.extend(strings(&["--env", "DIVERGENT_FIXTURE_TAG=9"]));
    let r = replay(&db, &opts);
    assert_eq!(
        r.code, 1,
        "diverged
{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("replay DIVERGED from the recording at slice")
            && r.stderr.contains("(node 1, rank 2)")
            && r.stderr
                .contains("replayed: call rank 2 seq 10: MPI_Send peer=3 tag=9"),
        "{}",
        r.stderr
    );
}

/// Stopping and stepping are for a replay on this host: refused on daemons, one line.
#[test]
fn stepping_on_daemons_is_refused() {
    let (_d, db) = tmp("ring.db");
    record(&db, &[], "2", "token_ring", &[]).assert_ok("token_ring");
    let r = replay(
        &db,
        &strings(&["--launcher", "local", "--nodes", "1", "--until-slice", "2"]),
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("--until-slice is for a replay on this host"),
        "{}",
        r.stderr
    );
}

// ---- across hosts.sh test hosts -----------------------------------------------------------

fn hosts_sh() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/hosts.sh")
}

fn root_or_skip(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() == 0 };
    if !root {
        eprintln!("SKIPPED {what}: scripts/hosts.sh needs root (namespaces, bridges)");
    }
    root
}

/// A hosts.sh instance, brought down on drop.
struct Hosts {
    id: String,
}

impl Hosts {
    fn up(id: u32, n: u32) -> Hosts {
        let h = Hosts { id: id.to_string() };
        assert!(h.script(&["down"]).status.success());
        let out = h.script(&["up", &n.to_string()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        h
    }

    fn script(&self, args: &[&str]) -> Output {
        Command::new(hosts_sh())
            .args(args)
            .env("STROBE_HOSTS_ID", &self.id)
            .output()
            .expect("run hosts.sh")
    }

    fn args(&self, hosts: &str) -> Vec<String> {
        vec![
            "--hosts".into(),
            hosts.into(),
            "--launcher-exec".into(),
            format!("/run/strobe-hosts/{}/rsh", self.id),
            "--iface".into(),
            format!("10.213.{}.254", self.id),
        ]
    }

    fn ps(&self, host: &str) -> Vec<(u32, String)> {
        let out = self.script(&["exec", host, "ps", "-eo", "pid=,args="]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let (pid, args) = l.trim().split_once(' ')?;
                Some((pid.parse().ok()?, args.trim().to_string()))
            })
            .collect()
    }

    fn await_ps(&self, host: &str, pred: impl Fn(&[(u32, String)]) -> bool) -> Vec<(u32, String)> {
        let t = Instant::now();
        loop {
            let ps = self.ps(host);
            if pred(&ps) {
                return ps;
            }
            assert!(t.elapsed() < Duration::from_secs(60), "{host}: {ps:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        let _ = self.script(&["down"]);
    }
}

/// Recorded on three hosts, replayed verified on three hosts (other names than recorded
/// would do: the hosts are options) and on this host alone.
#[test]
fn record_and_replay_across_three_hosts() {
    if !root_or_skip("record_and_replay_across_three_hosts") {
        return;
    }
    let hosts = Hosts::up(180, 3);
    let on3 = hosts.args("h1,h2,h3");
    for (program, args) in [
        ("token_ring", &[][..]),
        ("collectives", &[][..]),
        ("heisenbug", &[][..]),
        ("polling", &[][..]),
    ] {
        let (_d, db) = tmp("job.db");
        let rec = record(&db, &on3, "6", program, args);
        // The heisenbug may fail (that is the point): recorded either way.
        assert!(
            rec.stderr.contains("strobe: recorded"),
            "{program}: {}",
            rec.stderr
        );
        assert_eq!(job_nodes(&db), "3", "{program}");
        let r = replay(&db, &on3);
        assert_matched(&r, &format!("{program} replayed on three hosts"));
        assert_eq!(r.stdout, rec.stdout, "{program}: the same output");
        let r = replay(&db, &strings(&["--nodes", "1"]));
        assert_matched(&r, &format!("{program} replayed on one host"));
        if program == "token_ring" {
            // Other hosts than the recorded ones, another count: placed in blocks anew.
            let r = replay(&db, &hosts.args("h3,h2"));
            assert_matched(&r, "token_ring replayed on two other hosts");
        }
    }
}

/// A daemon SIGKILLed mid-record: the recording ends as a one-host crash does; it opens
/// (`strobe stats`) and replays up to the failure.
#[test]
fn a_daemon_killed_during_record_leaves_a_replayable_recording() {
    if !root_or_skip("a_daemon_killed_during_record_leaves_a_replayable_recording") {
        return;
    }
    let hosts = Hosts::up(181, 3);
    let (_d, db) = tmp("killed.db");
    let t = Instant::now();
    let child: Child = Command::new(strobe())
        .arg("record")
        .arg("-o")
        .arg(&db)
        .args(hosts.args("h1,h2,h3"))
        .args(["-n", "6", "--timeout", "120s", "--"])
        .arg(fixture("steps"))
        .arg("100000")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn strobe record");
    let ps = hosts.await_ps("h2", |ps| {
        ps.iter()
            .filter(|(_, a)| a.contains("steps 100000"))
            .count()
            == 2
    });
    // Some slices recorded first.
    std::thread::sleep(Duration::from_secs(2));
    let (daemon, _) = ps
        .iter()
        .find(|(_, a)| a.ends_with("strobe node --env-stdin") && !a.starts_with("sh "))
        .expect("the daemon runs on h2");
    let out = hosts.script(&["exec", "h2", "kill", "-KILL", &daemon.to_string()]);
    assert!(out.status.success());
    let r = output_of(child.wait_with_output().unwrap(), t);
    // As `strobe run` ends for a lost node; under load node 0's fabric may report the
    // broken link before the Machine Manager sees the control connection drop.
    let lost = r.code == 128 + libc::SIGKILL && r.stderr.contains("node 1 (host h2) was lost");
    let link =
        r.code == strobe_runtime::launcher::EXIT_INTERNAL && r.stderr.contains("runtime failure");
    assert!(
        (lost || link) && r.stderr.contains("strobe: recorded"),
        "exit {}: {}",
        r.code,
        r.stderr
    );
    let stats = strobe_cmd(&["stats", db.to_str().unwrap()]);
    stats.assert_ok("stats of a recording cut by a lost daemon");
    let r = replay(&db, &strings(&["--nodes", "3"]));
    assert_matched(&r, "the cut recording replays to its end");
    assert!(
        r.stderr.contains("to the end of the recording"),
        "{}",
        r.stderr
    );
}
