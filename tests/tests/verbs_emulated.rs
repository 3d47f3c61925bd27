//! Issue 16: `--transport` selection, and real MPI programs over the verbs protocol.
//!
//! With `STROBE_ISOLATE_NODES=1` and the test hook `STROBE_VERBS_PROVIDER=emulated`, the
//! launcher's in-process nodes talk through the verbs transport (`VerbsEndpoint`) over an
//! emulated RC fabric: the fixtures run, record and replay over the verbs protocol where
//! no RDMA device exists. Without a device, `--transport verbs` is refused at once with
//! one line, and `auto` across daemons falls back to TCP silently (`--summary` says so).

use rusqlite::Connection;
use strobe_tests::replay::{record, strobe_cmd};
use strobe_tests::{fixture, run_fixture_env};

const ISOLATED: (&str, &str) = ("STROBE_ISOLATE_NODES", "1");
const EMULATED: (&str, &str) = ("STROBE_VERBS_PROVIDER", "emulated");
const LAYOUT: [&str; 5] = ["--nodes", "3", "-n", "6", "--summary"];

/// The line `--summary` ends with.
fn transport_line(stderr: &str) -> &str {
    stderr
        .lines()
        .find(|l| l.trim_start().starts_with("transport "))
        .unwrap_or_else(|| panic!("no transport line in the summary:\n{stderr}"))
        .split_whitespace()
        .nth(1)
        .unwrap()
}

fn has_rdma_device() -> bool {
    std::fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some())
}

#[test]
fn fixtures_run_over_emulated_verbs_between_isolated_nodes() {
    // token_ring and p2p: point to point; collectives: every collective, reductions
    // with every op; exchange: larger messages through the staging chunks.
    for name in ["token_ring", "collectives", "p2p", "exchange"] {
        let run = run_fixture_env(&LAYOUT, name, &[], &[ISOLATED, EMULATED]);
        run.assert_ok(name);
        assert_eq!(transport_line(&run.stderr), "verbs", "{name}");
    }
    // Without the hook the same nodes share memory.
    let run = run_fixture_env(&LAYOUT, "token_ring", &[], &[ISOLATED]);
    run.assert_ok("token_ring");
    assert_eq!(transport_line(&run.stderr), "shm");
}

#[test]
fn a_recording_over_emulated_verbs_replays_verified_and_says_where_it_ran() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("coll.db");
    let rec = record(&db, &LAYOUT[..4], "collectives", &[], &[ISOLATED, EMULATED]);
    assert_eq!(rec.code, 0, "{}", rec.stderr);
    let stored: String = Connection::open(&db)
        .unwrap()
        .query_row("SELECT transport FROM job", [], |r| r.get(0))
        .unwrap();
    assert_eq!(stored, "verbs");
    let dbs = db.display().to_string();
    let cwd = dir.path().display().to_string();
    let note = "note: replaying over shm; the recording ran over verbs";
    // Over the same transport: no note; over shared memory: matched, with the note.
    for (env, noted) in [(&[ISOLATED, EMULATED][..], false), (&[], true)] {
        let rep = strobe_cmd(&["replay", &dbs, "--cwd", &cwd], env);
        assert_eq!(rep.code, 0, "{}", rep.stderr);
        assert!(
            rep.stderr.contains("replay matched the recording"),
            "{}",
            rep.stderr
        );
        assert_eq!(rep.stderr.contains(note), noted, "{}", rep.stderr);
    }
}

#[test]
fn transport_verbs_without_a_device_is_refused_in_one_line() {
    if has_rdma_device() {
        eprintln!("skipped: this machine has an RDMA device");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("never.db");
    let fx = fixture("hello").display().to_string();
    let dbs = db.display().to_string();
    for args in [
        vec!["run", "--transport", "verbs", "-n", "2", "--", &fx],
        vec![
            "record",
            "-o",
            &dbs,
            "--transport",
            "verbs",
            "-n",
            "2",
            "--",
            &fx,
        ],
        vec![
            "run",
            "--transport",
            "verbs",
            "-n",
            "2",
            "--",
            "no-such-program",
        ],
    ] {
        let out = strobe_cmd(&args, &[]);
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        let lines: Vec<&str> = out.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {}", out.stderr);
        assert!(
            lines[0].starts_with("strobe: --transport verbs: verbs unavailable: "),
            "{}",
            lines[0]
        );
        assert!(out.stdout.is_empty(), "{}", out.stdout);
    }
    assert!(!db.exists(), "a refused record wrote a file");
}

#[test]
fn auto_takes_shared_memory_on_one_host_and_tcp_across_daemons() {
    let one = run_fixture_env(&["-n", "2", "--summary"], "hello", &[], &[]);
    one.assert_ok("hello");
    assert_eq!(transport_line(&one.stderr), "shm");
    let args = [
        "--launcher",
        "local",
        "--nodes",
        "2",
        "-n",
        "2",
        "--summary",
    ];
    let daemons = run_fixture_env(&args, "hello", &[], &[]);
    daemons.assert_ok("hello");
    if !has_rdma_device() {
        assert_eq!(transport_line(&daemons.stderr), "tcp");
    }
    let forced = [
        "--transport",
        "tcp",
        "--launcher",
        "local",
        "--nodes",
        "2",
        "-n",
        "2",
    ];
    run_fixture_env(&forced, "hello", &[], &[]).assert_ok("hello");
    let shm = [
        "--transport",
        "shm",
        "--launcher",
        "local",
        "--nodes",
        "2",
        "-n",
        "2",
    ];
    let refused = run_fixture_env(&shm, "hello", &[], &[]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("--transport shm: the job spans several hosts"),
        "{}",
        refused.stderr
    );
}

#[test]
fn across_daemons_the_machine_manager_decides_and_the_recording_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("daemons.db");
    let daemons = ["--launcher", "local", "--nodes", "2", "-n", "2"];
    let rec = record(&db, &daemons, "hello", &[], &[]);
    assert_eq!(rec.code, 0, "{}", rec.stderr);
    let stored: String = Connection::open(&db)
        .unwrap()
        .query_row("SELECT transport FROM job", [], |r| r.get(0))
        .unwrap();
    if !has_rdma_device() {
        assert_eq!(stored, "tcp");
        // `--transport verbs`: the daemons report why they have none; the job ends, exit 2.
        let mut verbs = vec!["--transport", "verbs"];
        verbs.extend_from_slice(&daemons);
        let run = run_fixture_env(&verbs, "hello", &[], &[]);
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(
            run.stderr
                .contains("strobe: --transport verbs: node 0: verbs unavailable: "),
            "{}",
            run.stderr
        );
    }
    let dbs = db.display().to_string();
    let cwd = dir.path().display().to_string();
    let rep = strobe_cmd(&["replay", &dbs, "--cwd", &cwd], &[]);
    assert_eq!(rep.code, 0, "{}", rep.stderr);
    let note = format!("note: replaying over shm; the recording ran over {stored}");
    assert!(rep.stderr.contains(&note), "{}", rep.stderr);
}
