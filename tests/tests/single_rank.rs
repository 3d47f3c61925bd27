//! Single-rank replay (issue 17 item 4): `strobe record --capture-payloads RANKS` and
//! `strobe replay FILE --rank R`. Real processes and real recordings: rank 2 of a 4-rank
//! job replayed alone prints exactly what it printed in the recording, with no other rank
//! process; a tampered payload is a divergence; an uncaptured rank is refused.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use strobe_tests::replay::{per_rank, record, replay, strobe_cmd, Out};
use strobe_tests::tools::{build_c, record_c};

fn show(o: &Out) -> String {
    format!(
        "exit {}\nstdout:\n{}\nstderr:\n{}",
        o.code, o.stdout, o.stderr
    )
}

/// Rank `rank`'s lines of a `--tag-output` run, untagged, as the rank printed them.
fn rank_output(tagged: &str, rank: u32) -> String {
    per_rank(tagged)
        .remove(&format!("[{rank}"))
        .map(|lines| lines.iter().map(|l| format!("{l}\n")).collect())
        .unwrap_or_default()
}

/// `strobe replay db --rank R` without `--tag-output`: stdout is the rank's own.
fn replay_alone(db: &Path, rank: u32, extra: &[&str]) -> Out {
    let (db, r) = (db.display().to_string(), rank.to_string());
    let mut args = vec![
        "replay",
        db.as_str(),
        "--rank",
        r.as_str(),
        "--timeout",
        "120s",
    ];
    args.extend_from_slice(extra);
    strobe_cmd(&args, &[])
}

fn record_c_tagged(db: &Path, prog: &Path, capture: &str) -> Out {
    // Without capture first: the fixture passes plainly (and the file is replaced).
    let o = record_c(db, prog, 4, &["rounds=3"], &[]);
    assert_eq!(o.code, 0, "plain record: {}", show(&o));
    let (dbs, progs) = (db.display().to_string(), prog.display().to_string());
    strobe_cmd(
        &[
            "record",
            "-o",
            &dbs,
            "--force",
            "--tag-output",
            "--capture-payloads",
            capture,
            "-n",
            "4",
            "--timeout",
            "120s",
            "--",
            &progs,
            "rounds=3",
        ],
        &[],
    )
}

#[test]
fn c_rank_2_alone_prints_what_it_printed() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("lone_rank", dir.path());
    let db = dir.path().join("lone.db");
    let rec = record_c_tagged(&db, &prog, "2");
    assert_eq!(rec.code, 0, "record: {}", show(&rec));
    let want = rank_output(&rec.stdout, 2);
    assert!(want.contains("rank 2 round 0"), "rank 2 printed: {want:?}");
    let alone = replay_alone(&db, 2, &[]);
    assert_eq!(alone.code, 0, "replay --rank 2: {}", show(&alone));
    assert_eq!(alone.stdout, want, "rank 2 alone printed something else");
    assert!(
        alone
            .stderr
            .contains("single-rank replay of rank 2 matched"),
        "{}",
        alone.stderr
    );
}

/// Every process running `prog`, with its parent pid.
fn processes_of(prog: &Path) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if std::fs::read_link(e.path().join("exe")).ok().as_deref() != Some(prog) {
            continue;
        }
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // pid (comm) state ppid ...: the comm may hold spaces, the ')' ends it.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok())
            .unwrap_or(0);
        out.push((pid, ppid));
    }
    out
}

#[test]
fn rank_alone_runs_no_other_rank_process() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("lone_rank", dir.path());
    let db = dir.path().join("lone.db");
    let rec = record_c_tagged(&db, &prog, "2");
    assert_eq!(rec.code, 0, "record: {}", show(&rec));
    // The rank sleeps after MPI_Init while the process tree is looked at.
    let child = Command::new(strobe_tests::strobe())
        .args(["replay", &db.display().to_string(), "--rank", "2"])
        .args(["--env", "LONE_RANK_PAUSE_MS=3000", "--yes"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let strobe_pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(60);
    let seen = loop {
        let procs = processes_of(&prog);
        if !procs.is_empty() || Instant::now() > deadline {
            break procs;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Looked at while the rank sleeps after MPI_Init: the rank's environment says which
    // rank it is.
    let environ = seen
        .first()
        .map(|(pid, _)| std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default())
        .unwrap_or_default();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(seen.len(), 1, "rank processes seen: {seen:?}; {stderr}");
    assert_eq!(
        seen[0].1, strobe_pid,
        "the rank is not strobe's child: {stderr}"
    );
    assert!(
        environ.split(|&b| b == 0).any(|v| v == b"STROBE_RANK=2"),
        "the one rank process is not rank 2"
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

#[test]
fn rust_fixtures_rank_2_alone_match() {
    let dir = tempfile::tempdir().unwrap();
    for (name, fargs) in [("token_ring", &[][..]), ("collectives", &[][..])] {
        let db = dir.path().join(format!("{name}.db"));
        let rec = record(
            &db,
            &["-n", "4", "--capture-payloads", "2"],
            name,
            fargs,
            &[],
        );
        assert_eq!(rec.code, 0, "record {name}: {}", show(&rec));
        let want = rank_output(&rec.stdout, 2);
        let alone = replay_alone(&db, 2, &[]);
        assert_eq!(alone.code, 0, "{name} replay --rank 2: {}", show(&alone));
        assert_eq!(
            alone.stdout, want,
            "{name}: rank 2 alone printed something else"
        );
        // The full replay of the same file still matches (the capture changes nothing).
        let full = replay(&db, &[], &[]);
        assert_eq!(full.code, 0, "{name} full replay: {}", show(&full));
    }
}

fn sqlite(db: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(db).unwrap()
}

#[test]
fn tampered_payload_is_a_divergence() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("lone_rank", dir.path());
    let db = dir.path().join("lone.db");
    let rec = record_c_tagged(&db, &prog, "2,3");
    assert_eq!(rec.code, 0, "record: {}", show(&rec));
    // What rank 3 received from rank 2's first send: rank 2 alone must send those bytes.
    let changed = sqlite(&db)
        .execute(
            "UPDATE payload SET data = zeroblob(length(data))
             WHERE rowid = (SELECT rowid FROM payload WHERE rank = 3 AND send_rank = 2
                            AND length(data) > 0 ORDER BY send_seq LIMIT 1)",
            [],
        )
        .unwrap();
    assert_eq!(changed, 1, "rank 3 received nothing from rank 2");
    // As it stands the file is damaged (the content checksum covers the payloads): refused,
    // never called a divergence of the program.
    let damaged = replay_alone(&db, 2, &["--yes"]);
    assert_eq!(damaged.code, 2, "unsealed: {}", show(&damaged));
    assert!(
        damaged.stderr.contains("damaged recording"),
        "{}",
        damaged.stderr
    );
    // Resealed, as if the recording had captured those bytes: rank 2 alone must notice.
    strobe_recorder::checksum::seal(&sqlite(&db)).unwrap();
    let alone = replay_alone(&db, 2, &["--yes"]);
    assert_eq!(alone.code, 1, "tampered: {}", show(&alone));
    assert!(
        alone.stderr.contains("diverged")
            && alone
                .stderr
                .contains("sends different bytes than rank 3 received"),
        "{}",
        alone.stderr
    );
}

#[test]
fn tampered_call_is_a_divergence_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ring.db");
    let rec = record(
        &db,
        &["-n", "4", "--capture-payloads", "2"],
        "token_ring",
        &[],
        &[],
    );
    assert_eq!(rec.code, 0, "record: {}", show(&rec));
    // The recorded tag of rank 2's first receive no longer matches what it posts.
    sqlite(&db)
        .execute(
            "UPDATE payload SET tag = tag + 1000 WHERE rank = 2 AND seq =
                (SELECT min(seq) FROM payload WHERE rank = 2 AND kind = 4)",
            [],
        )
        .unwrap();
    // Resealed (the checksum would otherwise refuse it as damage): the check under test is
    // the rank-alone verification of each call.
    strobe_recorder::checksum::seal(&sqlite(&db)).unwrap();
    let alone = replay_alone(&db, 2, &["--yes"]);
    assert_eq!(alone.code, 1, "{}", show(&alone));
    assert!(
        alone.stderr.contains("MPI_Recv") && alone.stderr.contains("but the recording has"),
        "{}",
        alone.stderr
    );
}

#[test]
fn uncaptured_rank_is_refused_with_the_command_to_capture_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ring.db");
    let rec = record(&db, &["-n", "4"], "token_ring", &[], &[]);
    assert_eq!(rec.code, 0, "record: {}", show(&rec));
    let alone = replay_alone(&db, 2, &[]);
    assert_eq!(alone.code, 2, "{}", show(&alone));
    assert!(
        alone.stderr.contains("no rank's payloads were captured")
            && alone.stderr.contains("strobe record --capture-payloads 2"),
        "{}",
        alone.stderr
    );
    let db2 = dir.path().join("ring2.db");
    let rec = record(
        &db2,
        &["-n", "4", "--capture-payloads", "2"],
        "token_ring",
        &[],
        &[],
    );
    assert_eq!(rec.code, 0, "record: {}", show(&rec));
    let other = replay_alone(&db2, 1, &[]);
    assert_eq!(other.code, 2, "{}", show(&other));
    assert!(
        other
            .stderr
            .contains("only the payloads of rank(s) 2 were captured")
            && other.stderr.contains("--capture-payloads 1"),
        "{}",
        other.stderr
    );
    // A rank the job does not have is refused by `record` before anything runs.
    let bad = record(
        &dir.path().join("bad.db"),
        &["-n", "4", "--capture-payloads", "7"],
        "token_ring",
        &[],
        &[],
    );
    assert_eq!(bad.code, 2, "{}", show(&bad));
    assert!(
        bad.stderr.contains("rank 7 does not exist"),
        "{}",
        bad.stderr
    );
}

#[test]
fn rank_alone_under_gdb_is_held_at_its_first_mpi_call() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("lone_rank", dir.path());
    let db = dir.path().join("lone.db");
    let rec = record_c_tagged(&db, &prog, "2");
    assert_eq!(rec.code, 0, "record: {}", show(&rec));
    let bt = dir.path().join("bt.txt");
    // A batch gdb: attach, print the stack, detach; the rank then runs to its end.
    let gdb = format!("gdb -q -batch -ex bt -p {{pid}} > {} 2>&1", bt.display());
    let (dbs, out) = (
        db.display().to_string(),
        std::process::Command::new(strobe_tests::strobe())
            .args([
                "replay",
                &db.display().to_string(),
                "--rank",
                "2",
                "--gdb",
                "2",
            ])
            .args(["--gdb-command", &gdb, "--timeout", "120s"])
            .env_remove("TMUX")
            .stdin(Stdio::null())
            .output()
            .unwrap(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{dbs}: {stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        rank_output(&rec.stdout, 2),
        "{stderr}"
    );
    let trace = std::fs::read_to_string(&bt).unwrap_or_default();
    // Held at the first MPI call (lone_rank's MPI_Irecv), not somewhere later.
    assert!(
        trace.contains("hold_until_allowed") && trace.contains("Irecv"),
        "gdb's backtrace:\n{trace}\n{stderr}"
    );
    // --gdb names the one rank that runs.
    let other = replay_alone(&db, 2, &["--gdb", "1"]);
    assert_eq!(other.code, 2, "{}", show(&other));
    assert!(other.stderr.contains("give --gdb 2"), "{}", other.stderr);
}
