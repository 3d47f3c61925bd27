//! Inline sends (scheduler version 3, docs/architecture.md "Inline sends for tiny
//! messages"; above 56 bytes through the rank's send arena, version 5):
//! `fixtures/c/tiny_messages.c` sends 1..64-byte messages to wildcard receives,
//! reuses every send buffer at once, checks non-overtaking and that `MPI_Issend` stays
//! synchronous. Here it runs on one node and across isolated nodes (where inline bytes
//! cross through the data plane), the decision log must show the inline completions (and
//! none for the synchronous send), and a recording made under timing noise replays
//! verified with the same output.

use std::path::{Path, PathBuf};

use strobe_tests::c_fixtures::source_dir;
use strobe_tests::replay::{per_rank, replay, strobe_cmd};

const NOISE: (&str, &str) = ("STROBE_FIXTURE_NOISE_US", "300");

fn build(dir: &Path) -> PathBuf {
    let src = source_dir().join("tiny_messages.c");
    let out = dir.join("tiny_messages");
    let inc = source_dir().display().to_string();
    let (s, o) = (src.display().to_string(), out.display().to_string());
    let b = strobe_cmd(&["mpicc", "-std=c11", "-O2", "-I", &inc, "-o", &o, &s], &[]);
    assert_eq!(b.code, 0, "mpicc: {}", b.stderr);
    out
}

#[test]
fn tiny_sends_complete_inline_and_ssend_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path()).display().to_string();
    for nodes in ["1", "2"] {
        let log = dir.path().join(format!("dec{nodes}.log"));
        let log_s = log.display().to_string();
        let r = strobe_cmd(
            &[
                "run",
                "-n",
                "4",
                "--nodes",
                nodes,
                "--decision-log",
                &log_s,
                "--",
                &prog,
                "count=70",
            ],
            &[NOISE],
        );
        assert_eq!(r.code, 0, "{nodes} node(s): {}", r.stderr);
        assert!(
            r.stdout.contains("tiny_messages ok ranks=4 msgs=210"),
            "{}",
            r.stdout
        );
        let text = std::fs::read_to_string(&log).unwrap();
        let inline = text.lines().filter(|l| l.ends_with(", inline")).count();
        // 3 senders x 70 messages of 1..64 bytes: all inline (1..56 in the descriptor,
        // 57..64 in the send arena from scheduler version 5).
        assert!(
            inline >= 3 * 70,
            "{nodes} node(s): {inline} inline completions"
        );
        let synchronous: Vec<&str> = text.lines().filter(|l| l.contains(" tag 77,")).collect();
        assert!(
            !synchronous.is_empty() && synchronous.iter().all(|l| !l.contains("inline")),
            "MPI_Issend is never inline: {synchronous:?}"
        );
    }
}

#[test]
fn a_recording_with_inline_sends_replays_verified() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path()).display().to_string();
    for nodes in ["1", "2"] {
        let db = dir.path().join(format!("tiny{nodes}.db"));
        let db_s = db.display().to_string();
        let rec = strobe_cmd(
            &[
                "record",
                "-o",
                &db_s,
                "--force",
                "--tag-output",
                "-n",
                "4",
                "--nodes",
                nodes,
                "--",
                &prog,
                "count=90",
            ],
            &[NOISE],
        );
        assert_eq!(rec.code, 0, "record: {}", rec.stderr);
        let rep = replay(&db, &[], &[NOISE]);
        assert_eq!(rep.code, 0, "replay: {}", rep.stderr);
        assert!(
            rep.stderr.contains("strobe: replay matched the recording"),
            "{}",
            rep.stderr
        );
        assert_eq!(per_rank(&rec.stdout), per_rank(&rep.stdout));
    }
}

/// A sender replayed alone (`strobe replay --rank 1`) is checked against the bytes rank 0
/// received in the recording (`--capture-payloads 0,1`: rank 1's own, to run it alone, and
/// rank 0's, to check its sends). Every send of `tiny_messages`
/// completes when posted (1..56 bytes in the descriptor, 57..64 in the send arena) and the
/// fixture overwrites its buffer at once, so the check must read the bytes the rank copied,
/// never the program's buffer: reading the buffer made a run that matched look like a
/// divergence ("sends different bytes").
#[test]
fn a_sender_replayed_alone_is_checked_against_the_bytes_it_copied() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path()).display().to_string();
    let db = dir.path().join("alone.db");
    let db_s = db.display().to_string();
    let rec = strobe_cmd(
        &[
            "record",
            "-o",
            &db_s,
            "--force",
            "--capture-payloads",
            "0,1",
            "-n",
            "2",
            "--",
            &prog,
            "count=200",
        ],
        &[NOISE],
    );
    assert_eq!(rec.code, 0, "record: {}", rec.stderr);
    let alone = strobe_cmd(&["replay", &db_s, "--rank", "1", "--timeout", "120s"], &[]);
    assert_eq!(alone.code, 0, "replay --rank 1: {}", alone.stderr);
    assert!(
        alone
            .stderr
            .contains("single-rank replay of rank 1 matched"),
        "{}",
        alone.stderr
    );
}
