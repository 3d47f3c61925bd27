//! `strobe record` and `strobe stats` end to end: real jobs recorded into SQLite files,
//! read back with plain SQL.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use rusqlite::Connection;
use strobe_tests::{fixture, strobe};

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn strobe_cmd(args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut cmd = Command::new(strobe());
    cmd.args(args)
        .env_remove("STROBE_SCHEDULE_LOG")
        .env_remove("STROBE_METRICS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().expect("spawn strobe");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// `strobe record -o db <args> --timeout 120s -- <fixture>`.
fn record(db: &Path, args: &[&str], name: &str, env: &[(&str, &str)]) -> Out {
    let fx = fixture(name).display().to_string();
    let db = db.display().to_string();
    let mut all = vec!["record", "-o", db.as_str()];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--timeout", "120s", "--", fx.as_str()]);
    strobe_cmd(&all, env)
}

fn count(c: &Connection, sql: &str) -> i64 {
    c.query_row(sql, [], |r| r.get(0)).unwrap()
}

fn stats(db: &Path) -> Out {
    strobe_cmd(&["stats", &db.display().to_string()], &[])
}

/// Every slice from 1 to the job's last is there, once.
fn assert_all_slices(c: &Connection) {
    let (n, lo, hi, total): (i64, i64, i64, i64) = c
        .query_row(
            "SELECT count(*), min(slice), max(slice), (SELECT total_slices FROM job) FROM slice",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!((lo, hi), (1, n), "slices are contiguous from 1");
    assert!(
        hi >= total - 1 && hi <= total,
        "recorded {hi}, job ran {total}"
    );
}

#[test]
fn token_ring_recording_matches_the_decision_log() {
    let dir = tempfile::tempdir().unwrap();
    for nodes in ["1", "2"] {
        let db = dir.path().join(format!("ring{nodes}.db"));
        let log = dir.path().join(format!("ring{nodes}.log"));
        let log_s = log.display().to_string();
        let r = record(
            &db,
            &["-n", "4", "--nodes", nodes, "--decision-log", &log_s],
            "token_ring",
            &[],
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stderr.contains("strobe: recorded"), "{}", r.stderr);
        let mut c = Connection::open(&db).unwrap();
        // The schedule log is compact (one blob row per slice); expanded, its rows are
        // the per-call tables the text log is compared with below.
        assert_eq!(count(&c, "SELECT count(*) FROM descriptor"), 0);
        strobe_recorder::expand::expand_schedule(&mut c).unwrap();
        let (outcome, ranks, nodes_col, sha): (String, i64, i64, String) = c
            .query_row(
                "SELECT outcome, ranks, nodes, program_sha256 FROM job",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .unwrap();
        assert_eq!((outcome.as_str(), ranks), ("success", 4));
        assert_eq!(nodes_col.to_string(), nodes);
        assert_eq!(sha.len(), 64);
        assert_eq!(
            count(&c, "SELECT count(*) FROM rank WHERE exit_code = 0"),
            4
        );
        assert_all_slices(&c);

        // The text log holds the same slices: compare digests and counts slice by slice.
        let text = std::fs::read_to_string(&log).unwrap();
        let mut digests = BTreeMap::new();
        let (mut posts, mut decisions) = (0i64, 0i64);
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("slice ") {
                let slice: i64 = rest.split(' ').next().unwrap().parse().unwrap();
                let hex = line.rsplit("digest=").next().unwrap();
                digests.insert(slice, u64::from_str_radix(hex, 16).unwrap());
            } else if line.starts_with("  post ") {
                posts += 1;
            } else if line.starts_with("  ") {
                decisions += 1;
            }
        }
        let slices = count(&c, "SELECT count(*) FROM slice");
        assert_eq!(digests.len() as i64, slices);
        let mut st = c.prepare("SELECT slice, digest FROM slice").unwrap();
        for row in st
            .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
            .unwrap()
        {
            let (s, d) = row.unwrap();
            assert_eq!(digests[&s], d as u64, "digest of slice {s}");
        }
        assert!(posts > 0);
        assert_eq!(count(&c, "SELECT count(*) FROM descriptor"), posts);
        assert_eq!(count(&c, "SELECT sum(n_descriptors) FROM slice"), posts);
        assert_eq!(count(&c, "SELECT count(*) FROM decision"), decisions);
        assert_eq!(
            count(&c, "SELECT count(*) FROM slice WHERE n_matches + n_chunks + n_collectives + n_completions > 0 AND digest = 0"),
            0
        );
        assert!(count(&c, "SELECT count(*) FROM decision WHERE kind = 'match'") > 0);
        // Every rank posted MPI_Finalize, and every node reported every slice.
        assert_eq!(
            count(
                &c,
                "SELECT count(*) FROM descriptor WHERE kind = 'MPI_Finalize'"
            ),
            4
        );
        assert_eq!(
            count(&c, "SELECT count(*) FROM node_slice"),
            slices * nodes.parse::<i64>().unwrap()
        );
        let s = stats(&db);
        assert_eq!(s.code, 0, "{}", s.stderr);
        assert!(s.stdout.contains("4 ranks") && s.stdout.contains("outcome    success"));
    }
}

#[test]
fn deadlock_and_crash_recordings_are_complete() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("deadlock.db");
    let r = record(&db, &["-n", "3"], "deadlock", &[]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    let c = Connection::open(&db).unwrap();
    let (outcome, msg): (String, String) = c
        .query_row("SELECT outcome, message FROM job", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(outcome, "deadlock");
    assert!(msg.contains("wait-for cycle"), "{msg}");
    assert_all_slices(&c);
    assert!(count(&c, "SELECT count(*) FROM blocked WHERE call = 'MPI_Recv'") > 0);
    let s = stats(&db);
    assert_eq!(s.code, 0, "{}", s.stderr);
    assert!(
        s.stdout.contains("deadlock (exit status 3)"),
        "{}",
        s.stdout
    );

    let db = dir.path().join("crash.db");
    let r = record(&db, &["-n", "4"], "crash", &[]);
    assert_eq!(r.code, 128 + 6, "{}", r.stderr);
    let c = Connection::open(&db).unwrap();
    assert_eq!(
        count(
            &c,
            "SELECT count(*) FROM job WHERE outcome = 'rank_failed' AND exit_status = 134"
        ),
        1
    );
    assert_eq!(count(&c, "SELECT signal FROM rank WHERE rank = 3"), 6);
    assert_all_slices(&c);
    let s = stats(&db);
    assert_eq!(s.code, 0, "{}", s.stderr);
    assert!(s.stdout.contains("was killed by SIGABRT"), "{}", s.stdout);
}

#[test]
fn layers_switch_by_flag_and_environment() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("layers.db");
    let r = record(
        &db,
        &["-n", "2", "--metrics", "2..4"],
        "token_ring",
        &[("STROBE_SCHEDULE_LOG", "off")],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let c = Connection::open(&db).unwrap();
    assert!(count(&c, "SELECT count(*) FROM slice") > 4);
    for t in ["descriptor", "decision", "blocked"] {
        assert_eq!(count(&c, &format!("SELECT count(*) FROM {t}")), 0, "{t}");
    }
    assert_eq!(count(&c, "SELECT count(getts_ns) FROM slice"), 3);
    assert_eq!(count(&c, "SELECT count(*) FROM node_slice"), 3);
    assert_eq!(
        count(
            &c,
            "SELECT count(*) FROM job WHERE schedule_log = 'off' AND metrics = '2..4'"
        ),
        1
    );
    // The flag wins over the environment.
    let r = record(
        &db,
        &["-n", "2", "--force", "--schedule-log", "on"],
        "token_ring",
        &[("STROBE_SCHEDULE_LOG", "off")],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let c = Connection::open(&db).unwrap();
    assert!(count(&c, "SELECT count(*) FROM schedule_batch") > 0);
}

#[test]
fn existing_files_are_not_overwritten_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("keep.db");
    std::fs::write(&db, b"precious").unwrap();
    let r = record(&db, &["-n", "2"], "token_ring", &[]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("already exists"), "{}", r.stderr);
    assert_eq!(std::fs::read(&db).unwrap(), b"precious");
    let r = record(&db, &["-n", "2", "--force"], "token_ring", &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

#[test]
fn stats_on_garbage_and_truncated_files_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.db");
    std::fs::write(&garbage, vec![0x5au8; 10_000]).unwrap();
    let db = dir.path().join("ring.db");
    assert_eq!(record(&db, &["-n", "4"], "token_ring", &[]).code, 0);
    let bytes = std::fs::read(&db).unwrap();
    let cut = dir.path().join("cut.db");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let missing = dir.path().join("missing.db");
    for (f, what) in [
        (&garbage, "not an SQLite database"),
        (&cut, "truncated"),
        (&missing, "No such file"),
    ] {
        let s = stats(f);
        assert_ne!(s.code, 0, "{what}");
        assert!(s.stderr.contains(what), "{what}: {}", s.stderr);
        assert!(!s.stderr.contains("panicked"), "{}", s.stderr);
        assert!(s.stdout.is_empty());
    }
}
