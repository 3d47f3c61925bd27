//! `strobe replay` end to end: real jobs recorded under timing noise, replayed, verified
//! slice by slice, with program output compared between record and replay (as rr's tests
//! do); heisenbugs, polling, divergences, failures, regeneration, the replay log's size.

use std::path::Path;

use rusqlite::Connection;
use strobe_tests::replay::{end_message, per_rank, record, replay, schedule_log, strobe_cmd, Out};

const NOISE: (&str, &str) = ("STROBE_FIXTURE_NOISE_US", "300");

fn assert_matched(r: &Out, what: &str) {
    assert_eq!(
        r.code, 0,
        "{what}: replay exit status\nstdout:\n{}\nstderr:\n{}",
        r.stdout, r.stderr
    );
    assert!(
        r.stderr.contains("strobe: replay matched the recording"),
        "{what}: {}",
        r.stderr
    );
}

#[test]
fn every_fixture_replays_verified_with_identical_output() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &[&str], &str)] = &[
        ("token_ring", &[], "1"),
        ("p2p", &[], "1"),
        ("collectives", &[], "2"),
        ("comms", &[], "1"),
        ("pingpong", &[], "1"),
        ("barrier_every", &[], "1"),
        ("hello", &[], "2"),
        ("heisenbug", &[], "1"),
        ("polling", &[], "1"),
        ("divergent", &[], "2"),
    ];
    for (name, fargs, nodes) in cases {
        let db = dir.path().join(format!("{name}.db"));
        let rec = record(&db, &["-n", "4", "--nodes", nodes], name, fargs, &[NOISE]);
        let rep = replay(&db, &[], &[]);
        if *name != "heisenbug" {
            assert_eq!(rec.code, 0, "{name}: record\n{}", rec.stderr);
        }
        assert_matched(&rep, name);
        assert_eq!(
            per_rank(&rec.stdout),
            per_rank(&rep.stdout),
            "{name}: output differs between record and replay"
        );
    }
}

#[test]
fn failures_replay_to_the_same_report() {
    let dir = tempfile::tempdir().unwrap();
    for (name, nodes) in [
        ("crash", "1"),
        ("abort", "2"),
        ("deadlock", "1"),
        ("deadlock", "2"),
        ("noexit_finalize", "1"),
    ] {
        let db = dir.path().join(format!("{name}-{nodes}.db"));
        let rec = record(&db, &["-n", "4", "--nodes", nodes], name, &[], &[NOISE]);
        assert_ne!(rec.code, 0, "{name}: the recorded job fails");
        let rep = replay(&db, &[], &[]);
        assert_matched(&rep, name);
        let msg = end_message(&rec.stderr).unwrap_or_else(|| panic!("{name}: {}", rec.stderr));
        assert!(
            rep.stderr.contains(&msg),
            "{name}: replay report lacks {msg:?}:\n{}",
            rep.stderr
        );
        if name == "deadlock" {
            // The whole report (blocked calls, pending operations, the cycle) is the same.
            let report: Vec<&str> = rec
                .stderr
                .lines()
                .skip_while(|l| !l.starts_with("strobe: deadlock"))
                .skip(1)
                .take_while(|l| !l.starts_with("strobe: recorded"))
                .collect();
            assert!(!report.is_empty(), "{}", rec.stderr);
            for l in report {
                assert!(
                    rep.stderr.contains(l),
                    "replay lacks {l:?}:\n{}",
                    rep.stderr
                );
            }
        }
    }
}

#[test]
fn heisenbug_recordings_replay_to_their_own_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let noise = ("STROBE_FIXTURE_NOISE_US", "3000");
    let mut seen: Vec<(std::path::PathBuf, i32, String)> = Vec::new();
    for i in 0..20 {
        let db = dir.path().join(format!("h{i}.db"));
        let rec = record(&db, &["-n", "4"], "heisenbug", &[], &[noise]);
        if !seen.iter().any(|(_, c, _)| *c == rec.code) {
            seen.push((db, rec.code, rec.stdout));
        }
        if seen.len() == 2 {
            break;
        }
    }
    assert_eq!(
        seen.len(),
        2,
        "20 recordings under noise never showed both outcomes"
    );
    for (db, code, stdout) in &seen {
        for _ in 0..5 {
            let rep = replay(db, &[], &[]);
            assert_matched(&rep, "heisenbug");
            assert_eq!(per_rank(&rep.stdout), per_rank(stdout));
            let failed = rep.stderr.contains("exited with status 1");
            assert_eq!(failed, *code != 0, "{}", rep.stderr);
        }
    }
}

#[test]
fn polling_replays_identically_although_poll_counts_differ() {
    let dir = tempfile::tempdir().unwrap();
    let noise = ("STROBE_FIXTURE_NOISE_US", "2000");
    let mut outputs = Vec::new();
    for i in 0..3 {
        let db = dir.path().join(format!("p{i}.db"));
        let rec = record(&db, &["-n", "4"], "polling", &[], &[noise]);
        assert_eq!(rec.code, 0, "{}", rec.stderr);
        for _ in 0..2 {
            let rep = replay(&db, &[], &[]);
            assert_matched(&rep, "polling");
            assert_eq!(rep.stdout, rec.stdout, "rank 0 prints alone: byte for byte");
        }
        outputs.push(rec.stdout);
    }
    assert!(
        outputs.iter().any(|o| *o != outputs[0]),
        "three recordings polled exactly alike: {outputs:?}"
    );
}

/// The slice that handled `rank`'s descriptor `seq` in a recording.
fn slice_of(db: &Path, rank: u32, seq: u64) -> i64 {
    let rec = strobe_recorder::Recording::open(db).unwrap();
    (1..=rec.last_slice())
        .find(|s| {
            rec.descriptors(*s)
                .unwrap()
                .is_some_and(|ds| ds.iter().any(|d| d.rank == rank && d.seq == seq as i64))
        })
        .expect("the descriptor was recorded") as i64
}

#[test]
fn a_provoked_divergence_names_the_first_divergent_slice_and_rank() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("d.db");
    let rec = record(&db, &["-n", "4"], "divergent", &[], &[NOISE]);
    assert_eq!(rec.code, 0, "{}", rec.stderr);
    let rep = replay(&db, &[], &[("DIVERGENT_FIXTURE_TAG", "9")]);
    assert_eq!(rep.code, 1, "diverged exit status\n{}", rep.stderr);
    // Round 5's send of rank 2 is its descriptor 10 (two per round).
    let slice = slice_of(&db, 2, 10);
    let head = format!("replay DIVERGED from the recording at slice {slice} (node 0, rank 2)");
    assert!(rep.stderr.contains(&head), "{}", rep.stderr);
    assert!(rep
        .stderr
        .contains("recorded: call rank 2 seq 10: MPI_Send peer=3 tag=0"));
    assert!(rep
        .stderr
        .contains("replayed: call rank 2 seq 10: MPI_Send peer=3 tag=9"));
    assert!(rep.stderr.contains("last calls of rank 2"));
    assert!(rep.stderr.contains("hint:"));

    // Without a schedule log the report has the digests and the replayed decisions.
    let db2 = dir.path().join("d2.db");
    let rec = record(
        &db2,
        &["-n", "4", "--schedule-log", "off"],
        "divergent",
        &[],
        &[],
    );
    assert_eq!(rec.code, 0);
    let rep = replay(&db2, &[], &[("DIVERGENT_FIXTURE_TAG", "9")]);
    assert_eq!(rep.code, 1, "{}", rep.stderr);
    assert!(rep
        .stderr
        .contains("replay DIVERGED from the recording at slice"));
    assert!(rep.stderr.contains("recorded: digest "), "{}", rep.stderr);
    assert!(rep
        .stderr
        .contains("handled rank 2 seq 10: MPI_Send peer=3 tag=9"));
}

#[test]
fn replay_refuses_what_it_cannot_replay() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, b"not a recording at all, not even SQLite").unwrap();
    let r = replay(&junk, &[], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("not an SQLite database"), "{}", r.stderr);

    let db = dir.path().join("t.db");
    assert_eq!(record(&db, &["-n", "2"], "token_ring", &[], &[]).code, 0);
    let other = strobe_tests::fixture("hello").display().to_string();
    let r = replay(&db, &["--program", &other], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("is not the recorded program"),
        "{}",
        r.stderr
    );
    let r = replay(
        &db,
        &["--program", &other, "--allow-different-binary", "--yes"],
        &[],
    );
    assert!(r.stderr.contains("warning:"), "{}", r.stderr);
    assert_eq!(r.code, 1, "a different program diverges\n{}", r.stderr);

    // Regenerating into the file being replayed is refused.
    let r = replay(
        &db,
        &["--record", &db.display().to_string(), "--force"],
        &[],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("cannot regenerate into the recording"),
        "{}",
        r.stderr
    );

    // A damaged replay log is a clear error, not a panic.
    let c = Connection::open(&db).unwrap();
    c.execute("UPDATE replay_log SET data = x'ff' WHERE stream = 0", [])
        .unwrap();
    drop(c);
    let r = replay(&db, &[], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("damaged"), "{}", r.stderr);
}

fn rows(c: &Connection, sql: &str) -> Vec<String> {
    let mut st = c.prepare(sql).unwrap();
    let n = st.column_count();
    st.query_map([], |r| {
        Ok((0..n)
            .map(|i| format!("{:?}", r.get_ref(i).unwrap()))
            .collect::<Vec<_>>()
            .join("|"))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

#[test]
fn regeneration_is_identical_to_a_full_recording() {
    let dir = tempfile::tempdir().unwrap();
    for (name, nodes) in [("collectives", "2"), ("p2p", "1"), ("deadlock", "1")] {
        let full = dir.path().join(format!("{name}-full.db"));
        let rec = record(&full, &["-n", "4", "--nodes", nodes], name, &[], &[NOISE]);
        assert!(rec.stderr.contains("recorded"), "{}", rec.stderr);
        // The same recording with only the replay log (as production would record it).
        let lean = dir.path().join(format!("{name}-lean.db"));
        std::fs::copy(&full, &lean).unwrap();
        let c = Connection::open(&lean).unwrap();
        c.execute_batch(
            "DELETE FROM schedule_batch; DELETE FROM message; DELETE FROM blocked;
             DELETE FROM node_slice; UPDATE job SET schedule_log = 'off', metrics = 'off';",
        )
        .unwrap();
        // As a recording made with those layers off is sealed (the content checksum).
        strobe_recorder::checksum::seal(&c).unwrap();
        drop(c);
        let regen = dir.path().join(format!("{name}-regen.db"));
        let rep = replay(&lean, &["--record", &regen.display().to_string()], &[]);
        assert_matched(&rep, name);
        let (a, b) = (
            Connection::open(&full).unwrap(),
            Connection::open(&regen).unwrap(),
        );
        // The schedule log slice by slice (its batches end where each writer committed).
        let last_busy: i64 = a
            .query_row(
                "SELECT max(slice) FROM slice WHERE n_descriptors > 0 OR n_blocked > 0",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(
            schedule_log(&full, Some(last_busy as u64)),
            schedule_log(&regen, Some(last_busy as u64)),
            "{name}: schedule log"
        );
        for sql in [
            "SELECT * FROM message ORDER BY recv_rank, matched, idx",
            "SELECT * FROM blocked ORDER BY slice, rank",
            // Up to the last slice that posted or held anything: whether the launcher ran
            // one more empty timer slice before it saw the last rank exit is timing (seen
            // under CI load), not a decision, and the replay need not reproduce it.
            "SELECT slice, n_descriptors, n_matches, n_chunks, n_collectives, n_completions,
                n_blocked, digest FROM slice WHERE slice <= (SELECT max(slice) FROM slice
                WHERE n_descriptors > 0 OR n_blocked > 0) ORDER BY slice",
            "SELECT stream, rank, hex(group_concat(hex(data), '')) FROM
                (SELECT * FROM replay_log ORDER BY stream, rank, chunk) GROUP BY stream, rank",
            // (`total_slices` counts those trailing empty slices too: see above.)
            "SELECT outcome, message, exit_status FROM job",
        ] {
            let (ra, rb) = (rows(&a, sql), rows(&b, sql));
            // (A deadlocked job decides nothing; a job of collectives matches no message.)
            assert!(
                !ra.is_empty() || sql.contains("decision") || sql.contains("message"),
                "{name}: {sql}"
            );
            assert_eq!(ra, rb, "{name}: {sql}");
        }
        // The replay's timing is marked as the replay's.
        assert_eq!(rows(&b, "SELECT count(*) FROM regenerated"), ["Integer(1)"]);
        assert_eq!(
            rows(
                &b,
                "SELECT count(*) FROM slice WHERE slice > 1 AND reason != 'logical'"
            ),
            ["Integer(0)"]
        );
    }
}

#[test]
fn replay_log_costs_at_most_two_bytes_per_descriptor() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let rec = record(
        &db,
        &["-n", "4", "--schedule-log", "off", "--metrics", "off"],
        "token_ring",
        &[],
        &[NOISE],
    );
    assert_eq!(rec.code, 0);
    let c = Connection::open(&db).unwrap();
    let bytes: i64 = c
        .query_row("SELECT sum(length(data)) FROM replay_log", [], |r| r.get(0))
        .unwrap();
    let descs: i64 = c
        .query_row("SELECT sum(n_descriptors) FROM slice", [], |r| r.get(0))
        .unwrap();
    assert!(descs > 400);
    assert!(
        (bytes as f64) / (descs as f64) <= 2.0,
        "{bytes} bytes of replay log for {descs} descriptors"
    );
    let st = strobe_cmd(&["stats", &db.display().to_string()], &[]);
    assert_eq!(st.code, 0, "{}", st.stderr);

    // Empty slices (rank 0 computes for 200 ms under fixed 500 us slices) cost nothing
    // with only the replay log, and the recording still replays, verified.
    let idle = dir.path().join("idle.db");
    let rec = record(
        &idle,
        &[
            "-n",
            "3",
            "--strobe",
            "fixed",
            "--schedule-log",
            "off",
            "--metrics",
            "off",
        ],
        "idle",
        &["200"],
        &[],
    );
    assert_eq!(rec.code, 0, "{}", rec.stderr);
    let c = Connection::open(&idle).unwrap();
    let (rows, total, bytes): (i64, i64, i64) = c
        .query_row(
            "SELECT (SELECT count(*) FROM slice), total_slices,
                (SELECT sum(length(data)) FROM replay_log) FROM job",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    // (How many timer slices fit in 200 ms depends on the machine's load: only a bound.)
    assert!(total > 40, "{total} slices");
    assert!(
        rows <= 20 && rows < total / 2,
        "{rows} slice rows for {total} slices"
    );
    assert!(bytes < 100, "{bytes} bytes of replay log");
    assert_matched(&replay(&idle, &[], &[]), "idle");
}

#[test]
fn a_recording_cut_short_by_sigkill_replays_up_to_the_cut() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cut.db");
    let fx = strobe_tests::fixture("token_ring");
    // Slow rounds (about 10 ms each), so the job is still running when strobe is killed.
    let mut child = std::process::Command::new(strobe_tests::strobe())
        .args(["record", "-o"])
        .arg(&db)
        .args(["-n", "3", "--timeout", "120s", "--"])
        .arg(&fx)
        .env("STROBE_FIXTURE_NOISE_US", "20000")
        .env_remove("STROBE_SCHEDULE_LOG")
        .env_remove("STROBE_METRICS")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until some batches are committed, then kill strobe itself (the ranks die with it).
    let t = std::time::Instant::now();
    loop {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let slices: i64 = Connection::open(&db)
            .and_then(|c| c.query_row("SELECT count(*) FROM slice", [], |r| r.get(0)))
            .unwrap_or(0);
        if slices > 50 || t.elapsed() > std::time::Duration::from_secs(60) {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let rep = replay(&db, &[], &[("STROBE_FIXTURE_NOISE_US", "0")]);
    assert_matched(&rep, "cut-short recording");
    assert!(
        rep.stderr
            .contains("to the end of the recording (the recorded job was cut short)"),
        "{}",
        rep.stderr
    );
}

#[test]
fn a_program_asking_for_outcomes_the_log_lacks_diverges_at_that_call() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let rec = record(&db, &["-n", "4"], "polling", &[], &[NOISE]);
    assert_eq!(rec.code, 0, "{}", rec.stderr);
    // Drop rank 0's outcomes (its MPI_Wtime values and tests).
    let c = Connection::open(&db).unwrap();
    c.execute("DELETE FROM replay_log WHERE stream = 1 AND rank = 0", [])
        .unwrap();
    // Resealed: without it the content checksum refuses the file as damaged, before any
    // divergence (tests/tests/mutation.rs); this test is about the divergence report.
    strobe_recorder::checksum::seal(&c).unwrap();
    drop(c);
    let rep = replay(&db, &[], &[]);
    assert_eq!(rep.code, 1, "{}", rep.stderr);
    assert!(
        rep.stderr.contains("replay divergence on rank 0") && rep.stderr.contains("MPI_Wtime"),
        "{}",
        rep.stderr
    );
    assert!(rep.stderr.contains("(node 0, rank 0)"), "{}", rep.stderr);
    assert!(
        rep.stderr
            .contains("made more timing-dependent calls than recorded"),
        "{}",
        rep.stderr
    );
}
