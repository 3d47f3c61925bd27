//! Recorder tests without processes: synthetic slices into a temporary file, read back
//! with plain SQL.

use std::time::Duration;

use rusqlite::Connection;
use strobe_runtime::descriptor::{
    Completion, DescKind, DescRef, Descriptor, RtError, FLAG_BLOCKING,
};
use strobe_runtime::engine::{GlobalMetrics, LocalMetrics, SliceRecord, SliceSink, StartReason};
use strobe_runtime::launcher::{JobOutcome, JobReport, RankDeath};
use strobe_runtime::sched::{Chunk, CollectiveRun, Completed, Decision, Match, SliceDecisions};

use super::*;

fn job() -> JobInfo {
    JobInfo {
        command: vec!["/bin/prog".into(), "a \"quoted\" arg".into()],
        cwd: "/tmp".into(),
        program: "/bin/true".into(),
        env: vec![("STROBE_X".into(), "1".into())],
        ranks: 2,
        nodes: 1,
        slice: Duration::from_micros(500),
        policy: "adaptive".into(),
        deadlock_slices: 20,
        chunk_budget: 4 << 20,
        direct_copy_min: 2 << 20,
        histogram_resolution: 4,
        placement: None,
        transport: "shm".into(),
    }
}

fn desc(rank: u32, seq: u64, kind: DescKind, peer: i32) -> Descriptor {
    Descriptor {
        rank,
        seq,
        kind: kind as u8,
        flags: FLAG_BLOCKING,
        peer,
        tag: 7,
        bytes: 8,
        request: seq + 1,
        ..Descriptor::default()
    }
}

/// Slice `i`: rank 0 sends to rank 1 (seq i), which receives; match, chunk, two completions.
fn record(i: u64) -> SliceRecord {
    let (s, r) = (DescRef { rank: 0, seq: i }, DescRef { rank: 1, seq: i });
    let complete = |d: DescRef, source| {
        Decision::Complete(Completed {
            desc: d,
            completion: Completion {
                request: i + 1,
                source,
                tag: 7,
                bytes: 8,
                error: RtError::Ok as u32,
                value: u64::MAX,
                ..Completion::default()
            },
        })
    };
    let decisions = SliceDecisions {
        slice: i,
        decisions: vec![
            Decision::Match(Match {
                send: s,
                recv: r,
                bytes: 8,
                truncated: false,
            }),
            Decision::Chunk(Chunk {
                send: s,
                recv: r,
                offset: 0,
                len: 8,
            }),
            Decision::Collective(CollectiveRun {
                comm: 0,
                coll_seq: i,
                kind: DescKind::Barrier,
                root: 0,
                parts: vec![s, r],
            }),
            complete(s, -1),
            complete(r, 0),
        ],
        wake: vec![0, 1],
        catalog: vec![],
    };
    SliceRecord {
        slice: i,
        reason: if i == 1 {
            StartReason::First
        } else {
            StartReason::Early
        },
        start_ns: i * 1000,
        global: GlobalMetrics {
            getts: Duration::from_micros(100 + i),
            gtts: Duration::from_micros(10),
            usrsts: 1,
            ..GlobalMetrics::default()
        },
        descriptors: vec![desc(0, i, DescKind::Send, 1), desc(1, i, DescKind::Recv, 0)],
        digest: decisions.digest(),
        decisions,
        blocked: vec![(1, DescKind::Recv.into())],
        sites: Vec::new(),
    }
}

fn report(outcome: JobOutcome, slices: u64) -> JobReport {
    JobReport {
        outcome,
        slices,
        elapsed: Duration::from_millis(5),
        // exit(0) and killed by SIGABRT, as raw wait statuses.
        rank_status: vec![Some(0), Some(6)],
    }
}

fn record_n(path: &std::path::Path, n: u64, opts: RecordOptions) -> u64 {
    let rec = Recorder::create(path, &job(), opts).unwrap();
    for i in 1..=n {
        rec.slice(&record(i));
        for node in 0..2 {
            rec.node_metrics(
                i,
                &LocalMetrics {
                    node,
                    bpts: 1,
                    ..LocalMetrics::default()
                },
            );
        }
    }
    rec.finish(&report(JobOutcome::Success, n)).unwrap()
}

fn count(c: &Connection, sql: &str) -> i64 {
    c.query_row(sql, [], |r| r.get(0)).unwrap()
}

#[test]
fn slices_decisions_and_job_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("run.db");
    // Small batches so several transactions are exercised.
    let opts = RecordOptions {
        batch_slices: 3,
        ..RecordOptions::default()
    };
    assert_eq!(record_n(&p, 10, opts), 10);
    assert!(!dir.path().join("run.db-wal").exists(), "WAL folded back");
    let c = open_recording(&p).unwrap();
    assert_eq!(count(&c, "SELECT count(*) FROM slice"), 10);
    // The schedule log is one compact batch per transaction (at least one per 3 slices)
    // holding every slice; the per-slice and per-row tables stay empty...
    assert_eq!(count(&c, "SELECT sum(entries) FROM schedule_batch"), 10);
    assert!(count(&c, "SELECT count(*) FROM schedule_batch") >= 4);
    assert_eq!(count(&c, "SELECT count(*) FROM slice_schedule"), 0);
    assert_eq!(count(&c, "SELECT count(*) FROM descriptor"), 0);
    assert_eq!(count(&c, "SELECT count(*) FROM decision"), 0);
    drop(c);
    // ...until expanded (`strobe export --format sqlite`), column for column as before.
    let mut w = Connection::open(&p).unwrap();
    assert_eq!(crate::expand::expand_schedule(&mut w).unwrap(), (20, 50));
    drop(w);
    let c = open_recording(&p).unwrap();
    assert_eq!(count(&c, "SELECT count(*) FROM descriptor"), 20);
    assert_eq!(count(&c, "SELECT count(*) FROM decision"), 50);
    assert_eq!(count(&c, "SELECT count(*) FROM node_slice"), 20);
    assert_eq!(
        count(&c, "SELECT count(*) FROM blocked WHERE call = 'MPI_Recv'"),
        10
    );
    assert_eq!(
        count(&c, "SELECT count(*) FROM slice WHERE reason = 'first'"),
        1
    );
    let d: i64 = c
        .query_row("SELECT digest FROM slice WHERE slice = 4", [], |r| r.get(0))
        .unwrap();
    assert_eq!(d as u64, record(4).digest);
    let (outcome, exit, total, cmd): (String, i64, i64, String) = c
        .query_row(
            "SELECT outcome, exit_status, total_slices, command FROM job",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!((outcome.as_str(), exit, total), ("success", 0, 10));
    let arg: String = c
        .query_row(
            "SELECT value FROM json_each(?1) WHERE key = 1",
            [&cmd],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(arg, "a \"quoted\" arg");
    // Rank 1 died of signal 6.
    let (code, sig): (Option<i64>, Option<i64>) = c
        .query_row(
            "SELECT exit_code, signal FROM rank WHERE rank = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((code, sig), (None, Some(6)));
    // Decision columns: a match names both sides; a completion keeps u64::MAX as -1.
    let (sr, rs, kind): (i64, i64, String) = c
        .query_row(
            "SELECT send_rank, recv_seq, kind FROM decision WHERE slice = 2 AND idx = 0",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!((sr, rs, kind.as_str()), (0, 2, "match"));
    assert_eq!(
        count(
            &c,
            "SELECT count(*) FROM decision WHERE kind = 'complete' AND value = -1 AND error = 'ok'"
        ),
        20
    );
    assert_eq!(
        count(
            &c,
            "SELECT count(*) FROM decision, json_each(decision.members) WHERE kind = 'collective'"
        ),
        20
    );
    // The views answer the common questions from the same rows.
    assert_eq!(count(&c, "SELECT count(*) FROM slowest_slices"), 9);
    assert_eq!(
        count(&c, "SELECT max(getts_ns) FROM slowest_slices"),
        110_000
    );
    assert_eq!(
        count(
            &c,
            "SELECT count(*) FROM blocked_per_slice WHERE n_blocked = 1"
        ),
        10
    );
    assert_eq!(
        count(
            &c,
            "SELECT count(*) FROM message_life WHERE matched = send_seq
                AND last_chunk = matched AND send_completed = matched AND recv_completed = matched"
        ),
        10
    );
    // Each slice's decision set, as a compact blob that decodes to what was decided.
    assert_eq!(count(&c, "SELECT count(*) FROM slice_decisions"), 0);
    let rec = Recording::open(&p).unwrap();
    assert_eq!(
        rec.decisions(4).unwrap(),
        Some(record(4).decisions.decisions)
    );
    assert_eq!(rec.decisions(11).unwrap(), Some(Vec::new()));
    let job = rec.job();
    assert_eq!(
        job.wire_format_version,
        Some(strobe_schema::FORMAT_VERSION as i64)
    );
    assert_eq!(job.scheduler_version, strobe_core::sched::SCHEDULER_VERSION);
    assert_eq!(job.command, ["/bin/prog", "a \"quoted\" arg"]);
    assert_eq!(job.env, [("STROBE_X".to_string(), "1".to_string())]);
    assert_eq!(
        job.failed_ranks,
        [recording::FailedRank {
            rank: 1,
            exit_code: None,
            signal: Some(6)
        }]
    );
    let s = rec.stats(None).unwrap();
    assert_eq!(s.outcome.as_deref(), Some("success"));
    assert!(
        s.decisions
            .iter()
            .any(|k| k.kind == "match" && k.count == 10),
        "{s:?}"
    );
    assert_eq!(s.blocked[0].call, "MPI_Recv");
}

#[test]
fn windows_limit_each_layer() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("w.db");
    let opts = RecordOptions {
        schedule_log: "3..5".parse().unwrap(),
        metrics: Layer::Off,
        ..RecordOptions::default()
    };
    record_n(&p, 10, opts);
    let c = open_recording(&p).unwrap();
    assert_eq!(
        count(&c, "SELECT count(*) FROM slice"),
        10,
        "slice rows always"
    );
    assert_eq!(count(&c, "SELECT sum(entries) FROM schedule_batch"), 3);
    assert_eq!(count(&c, "SELECT min(first_slice) FROM schedule_batch"), 3);
    assert_eq!(count(&c, "SELECT max(last_slice) FROM schedule_batch"), 5);
    let rec = Recording::open(&p).unwrap();
    for slice in 1..=10 {
        let inside = (3..=5).contains(&slice);
        assert_eq!(rec.descriptors(slice).unwrap().is_some(), inside, "{slice}");
        assert_eq!(rec.decisions(slice).unwrap().is_some(), inside, "{slice}");
    }
    assert_eq!(count(&c, "SELECT max(slice) FROM blocked"), 5);
    assert_eq!(count(&c, "SELECT count(*) FROM node_slice"), 0);
    assert_eq!(count(&c, "SELECT count(getts_ns) FROM slice"), 0);
    let (sl, m): (String, String) = c
        .query_row("SELECT schedule_log, metrics FROM job", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((sl.as_str(), m.as_str()), ("3..5", "off"));
    let rec = Recording::open(&p).unwrap();
    assert_eq!(rec.stats(None).unwrap().getts.slices, 0);
    // Outside the schedule log's window the recording cannot say what was decided.
    assert_eq!(rec.decisions(2).unwrap(), None);
    assert!(rec.decisions(4).unwrap().is_some());
    assert_eq!(rec.descriptors(2).unwrap(), None);
    assert_eq!(rec.descriptors(4).unwrap().map(|d| d.len()), Some(2));
}

#[test]
fn migrations_are_idempotent_and_newer_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.db");
    let mut c = Connection::open(&p).unwrap();
    assert_eq!(
        migrations::migrate(&mut c).unwrap(),
        migrations::CURRENT_VERSION
    );
    assert_eq!(
        migrations::migrate(&mut c).unwrap(),
        migrations::CURRENT_VERSION
    );
    assert_eq!(
        migrations::version(&c).unwrap(),
        migrations::CURRENT_VERSION
    );
    c.pragma_update(None, "user_version", migrations::CURRENT_VERSION + 1)
        .unwrap();
    let e = migrations::migrate(&mut c).unwrap_err();
    assert!(matches!(e, RecordError::TooNew { .. }), "{e}");
    drop(c);
    let e = open_recording(&p).unwrap_err();
    assert!(e.to_string().contains("newer strobe"), "{e}");
}

#[test]
fn a_damaged_decision_blob_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("b.db");
    record_n(&p, 3, RecordOptions::default());
    edit_schedule(&p, |entries| {
        entries[1].decisions = Some(vec![0x01, 0xff, 0x10])
    });
    let rec = Recording::open(&p).unwrap();
    let e = rec.decisions(2).unwrap_err();
    assert!(matches!(e, RecordError::Corrupt(_)), "{e}");
    assert!(e.to_string().contains("slice 2"), "{e}");
    assert!(rec.decisions(3).unwrap().is_some());
    // A blob that decodes but is not what the slice decided: its digest says so.
    edit_schedule(&p, |entries| {
        entries[1].decisions = entries[2].decisions.clone()
    });
    let e = Recording::open(&p).unwrap().decisions(2).unwrap_err();
    assert!(e.to_string().contains("digest"), "{e}");
    // A batch that does not decode, or disagrees with its row, is damage too.
    for (i, sql) in [
        "UPDATE schedule_batch SET data = x'02ff'",
        "UPDATE schedule_batch SET entries = entries + 1",
        "UPDATE schedule_batch SET last_slice = last_slice + 1",
        "UPDATE schedule_batch SET data = substr(data, 1, length(data) - 1)",
    ]
    .into_iter()
    .enumerate()
    {
        let p = dir.path().join(format!("b{i}.db"));
        record_n(&p, 3, RecordOptions::default());
        Connection::open(&p).unwrap().execute_batch(sql).unwrap();
        // Refused when opened (the row's columns) or when read (its entries).
        let e = match Recording::open(&p) {
            Ok(rec) => rec.decisions(2).unwrap_err(),
            Err(e) => e,
        };
        assert!(matches!(e, RecordError::Corrupt(_)), "{sql}: {e}");
        assert!(
            e.to_string().contains("schedule batch") || e.to_string().contains("schedule_batch"),
            "{sql}: {e}"
        );
    }
    // Overlapping batches are refused when the file is opened.
    let p = dir.path().join("overlap.db");
    record_n(&p, 3, RecordOptions::default());
    Connection::open(&p)
        .unwrap()
        .execute_batch(
            "INSERT INTO schedule_batch SELECT first_slice + 1, last_slice + 1, entries, data
             FROM schedule_batch",
        )
        .unwrap();
    let e = Recording::open(&p).err().unwrap();
    assert!(e.to_string().contains("schedule_batch"), "{e}");
}

/// Rewrite the recording at `p` as one schedule batch holding its entries after `edit`.
fn edit_schedule(p: &std::path::Path, edit: impl FnOnce(&mut Vec<crate::compact::BatchEntry>)) {
    let c = Connection::open(p).unwrap();
    let mut entries = Vec::new();
    {
        let mut st = c
            .prepare("SELECT first_slice, last_slice, entries, data FROM schedule_batch ORDER BY 1")
            .unwrap();
        let mut rows = st.query([]).unwrap();
        while let Some(r) = rows.next().unwrap() {
            entries.extend(crate::schedule_rows::batch_row(r).unwrap().1);
        }
    }
    edit(&mut entries);
    let mut b = crate::compact::BatchBuilder::default();
    for e in &entries {
        b.push(e.slice, e.descriptors.as_deref(), e.decisions.as_deref());
    }
    let row = b.finish().unwrap();
    c.execute("DELETE FROM schedule_batch", []).unwrap();
    c.execute(
        "INSERT INTO schedule_batch VALUES (?1, ?2, ?3, ?4)",
        rusqlite::params![
            row.first_slice as i64,
            row.last_slice as i64,
            row.entries as i64,
            row.data
        ],
    )
    .unwrap();
}

#[test]
fn refuses_to_overwrite_and_rejects_non_recordings() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.db");
    std::fs::write(&p, b"hello, not a database at all").unwrap();
    assert!(matches!(
        Recorder::create(&p, &job(), RecordOptions::default()),
        Err(RecordError::Exists(_))
    ));
    let e = Recording::open(&p).err().unwrap();
    assert!(e.to_string().contains("not an SQLite database"), "{e}");
    // An SQLite file that is not ours.
    let q = dir.path().join("other.db");
    Connection::open(&q)
        .unwrap()
        .execute_batch("CREATE TABLE t(x)")
        .unwrap();
    assert!(matches!(
        Recording::open(&q),
        Err(RecordError::NotARecording(_))
    ));
}

#[test]
fn truncated_recordings_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.db");
    record_n(&p, 200, RecordOptions::default());
    let bytes = std::fs::read(&p).unwrap();
    for cut in [bytes.len() / 2, bytes.len() - 1, 50] {
        let q = dir.path().join(format!("cut{cut}.db"));
        std::fs::write(&q, &bytes[..cut]).unwrap();
        let e = Recording::open(&q).err().unwrap();
        assert!(
            matches!(e, RecordError::Corrupt(_) | RecordError::NotARecording(_)),
            "cut at {cut}: {e}"
        );
    }
}

#[test]
fn a_failed_job_still_yields_a_complete_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f.db");
    let rec = Recorder::create(&p, &job(), RecordOptions::default()).unwrap();
    rec.slice(&record(1));
    let r = report(
        JobOutcome::RankFailed {
            rank: 1,
            pid: 42,
            how: RankDeath::Signal(6),
            slice: 1,
        },
        1,
    );
    rec.finish(&r).unwrap();
    assert!(matches!(rec.finish(&r), Err(RecordError::Finished)));
    let rec = Recording::open(&p).unwrap();
    let job = rec.job();
    assert_eq!(job.outcome.as_deref(), Some("rank_failed"));
    assert_eq!(job.exit_status, Some(134));
    let m = job.message.as_deref().unwrap_or_default();
    assert!(m.contains("rank 1 (pid 42) was killed by SIGABRT"), "{m}");
}

#[test]
fn recorded_env_keeps_only_what_matters() {
    let vars = [
        ("PATH", "/bin"),
        ("STROBE_METRICS", "off"),
        ("OMP_NUM_THREADS", "2"),
        ("HOME", "/root"),
    ];
    let env = recorded_env(vars.iter().map(|(k, v)| ((*k).into(), (*v).into())));
    assert_eq!(
        env,
        vec![
            ("OMP_NUM_THREADS".to_string(), "2".to_string()),
            ("STROBE_METRICS".to_string(), "off".to_string())
        ]
    );
}

mod blocked_episodes;
mod blocked_spans;
mod checksum;
mod compact_schedule;
mod decision_rows;
mod match_history;
mod node_rows;
mod open_spans;
mod payloads;

#[test]
fn the_placement_is_stored_read_back_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    let mut info = job();
    info.nodes = 2;
    info.placement = Some(vec![1, 0]);
    let rec = Recorder::create(&path, &info, RecordOptions::default()).unwrap();
    rec.finish(&report(JobOutcome::Success, 0)).unwrap();
    drop(rec);
    let r = Recording::open(&path).unwrap();
    assert_eq!(r.job().placement, Some(vec![1, 0]));
    assert_eq!(r.job().setup().placement, Some(vec![1, 0]));
    drop(r);
    // A placement that does not fit the job is damage.
    for bad in ["[0]", "[0,2]", "\"x\""] {
        let c = Connection::open(&path).unwrap();
        c.execute("UPDATE job SET placement = ?1", [bad]).unwrap();
        drop(c);
        let e = Recording::open(&path).err().expect("refused");
        assert!(e.to_string().contains("job.placement"), "{bad}: {e}");
    }
    // The recorder refuses to write one.
    info.placement = Some(vec![0, 5]);
    let other = dir.path().join("q.db");
    assert!(Recorder::create(&other, &info, RecordOptions::default()).is_err());
    // Block placement (no column value) reads as None.
    info.placement = None;
    let rec = Recorder::create(&other, &info, RecordOptions::default()).unwrap();
    rec.finish(&report(JobOutcome::Success, 0)).unwrap();
    drop(rec);
    assert_eq!(Recording::open(&other).unwrap().job().placement, None);
}

#[test]
fn the_transport_is_stored_read_back_defaulted_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let mut info = job();
    info.nodes = 2;
    info.placement = Some(vec![1, 0]);
    info.transport = "verbs".into();
    let rec = Recorder::create(&path, &info, RecordOptions::default()).unwrap();
    rec.finish(&report(JobOutcome::Success, 0)).unwrap();
    drop(rec);
    let r = Recording::open(&path).unwrap();
    assert_eq!(r.job().transport, "verbs");
    assert_eq!(r.job().setup().transport, "verbs");
    drop(r);
    // A file made before the column (NULL): across hosts it was TCP, else shm.
    let c = Connection::open(&path).unwrap();
    c.execute("UPDATE job SET transport = NULL", []).unwrap();
    crate::checksum::seal(&c).unwrap();
    drop(c);
    assert_eq!(Recording::open(&path).unwrap().job().transport, "tcp");
    let c = Connection::open(&path).unwrap();
    c.execute("UPDATE job SET placement = NULL", []).unwrap();
    crate::checksum::seal(&c).unwrap();
    drop(c);
    assert_eq!(Recording::open(&path).unwrap().job().transport, "shm");
    // Anything else is damage, named by column.
    for bad in ["'ib'", "7"] {
        let c = Connection::open(&path).unwrap();
        c.execute(&format!("UPDATE job SET transport = {bad}"), [])
            .unwrap();
        crate::checksum::seal(&c).unwrap();
        drop(c);
        let e = Recording::open(&path).err().expect("refused");
        assert!(e.to_string().contains("job.transport"), "{bad}: {e}");
    }
}
