//! `strobe export`: a real recording of the heisenbug fixture as a Chrome trace (checked
//! against the recording's own counts, read through `Recording`) and as CSV; Perfetto's
//! trace processor loads the trace when its Python package and binary are available.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;
use strobe_core::sched::Decision;
use strobe_recorder::Recording;
use strobe_tests::replay::strobe_cmd;
use strobe_tests::tools::{build_c, record_heisenbug};

/// `pid`s of the node managers and of the counters (src/export.rs).
const NODE_PID_BASE: u64 = 1_000_000;
const JOB_PID: u64 = 2_000_000;

fn export(db: &Path, format: &str, out: &Path) {
    let o = strobe_cmd(
        &[
            "export",
            &db.display().to_string(),
            "--format",
            format,
            "-o",
            &out.display().to_string(),
        ],
        &[],
    );
    assert_eq!(o.code, 0, "strobe export: {}", o.stderr);
}

/// What the recording says the trace must hold.
struct Expected {
    descriptors: usize,
    matches: usize,
    node_rows: usize,
    metric_slices: usize,
}

fn expected(db: &Path) -> Expected {
    let rec = Recording::open(db).expect("open recording");
    let last = rec.last_slice();
    let mut e = Expected {
        descriptors: 0,
        matches: 0,
        node_rows: rec.metrics(1..=last).unwrap().len(),
        metric_slices: 0,
    };
    for s in 1..=last {
        e.descriptors += rec.descriptors(s).unwrap().map_or(0, |d| d.len());
        e.matches += rec
            .decisions(s)
            .unwrap()
            .unwrap_or_default()
            .iter()
            .filter(|d| matches!(d, Decision::Match(_)))
            .count();
    }
    e.metric_slices = rec
        .slices(1..=last)
        .unwrap()
        .iter()
        .filter(|r| r.getts_ns.is_some())
        .count();
    e
}

#[test]
fn perfetto_trace_matches_the_recording() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("heisenbug", dir.path());
    let db = dir.path().join("run.db");
    record_heisenbug(&db, &prog, true, 5);
    let json = dir.path().join("run.json");
    export(&db, "perfetto", &json);
    let trace: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().expect("traceEvents array");
    let want = expected(&db);
    assert!(
        want.descriptors > 0 && want.matches == 3,
        "4 ranks: 3 matched messages"
    );

    // Schema: every event has a phase, pid and tid; timed ones a non-negative time.
    for e in events {
        let ph = e["ph"].as_str().expect("ph");
        assert!(["X", "M", "C", "s", "f"].contains(&ph), "phase {ph}");
        assert!(e["pid"].is_u64() && e["tid"].is_u64(), "pid/tid: {e}");
        if ph != "M" {
            assert!(e["ts"].as_f64().is_some_and(|t| t >= 0.0), "ts: {e}");
        }
        if ph == "X" {
            assert!(e["dur"].as_f64().is_some_and(|d| d >= 0.0), "dur: {e}");
            assert!(e["name"].is_string() && e["cat"].is_string(), "{e}");
        }
    }
    let count = |pred: &dyn Fn(&Value) -> bool| events.iter().filter(|e| pred(e)).count();
    let calls = count(&|e| e["ph"] == "X" && e["cat"] == "mpi");
    assert_eq!(
        calls, want.descriptors,
        "one call event per recorded descriptor"
    );
    assert!(
        events
            .iter()
            .filter(|e| e["cat"] == "mpi")
            .all(|e| e["pid"].as_u64().unwrap() < 4
                && e["name"].as_str().unwrap().starts_with("MPI_"))
    );
    let node_slices = count(&|e| e["ph"] == "X" && e["cat"] == "slice");
    assert_eq!(
        node_slices, want.node_rows,
        "one node slice per node_slice row"
    );
    assert_eq!(
        count(&|e| e["ph"] == "X" && e["cat"] == "microphase"),
        3 * want.node_rows
    );
    assert!(events
        .iter()
        .filter(|e| e["cat"] == "slice")
        .all(|e| e["pid"].as_u64().unwrap() == NODE_PID_BASE));
    for name in ["GETTS", "NCOLL", "NP2P"] {
        assert_eq!(
            count(&|e| e["ph"] == "C" && e["name"] == name && e["pid"] == JOB_PID),
            want.metric_slices,
            "{name} samples"
        );
    }
    // Flows: each id once as start and once as finish, from a send to a receive.
    let mut starts = BTreeMap::new();
    let mut ends = BTreeMap::new();
    for e in events {
        match e["ph"].as_str() {
            Some("s") => assert!(starts
                .insert(e["id"].as_u64().unwrap(), e.clone())
                .is_none()),
            Some("f") => assert!(ends.insert(e["id"].as_u64().unwrap(), e.clone()).is_none()),
            _ => {}
        }
    }
    assert_eq!(starts.len(), want.matches);
    assert_eq!(
        starts.keys().collect::<BTreeSet<_>>(),
        ends.keys().collect::<BTreeSet<_>>()
    );
    for (id, f) in &ends {
        assert_eq!(f["pid"], 0, "every message goes to rank 0");
        assert_ne!(starts[id]["pid"], 0, "and comes from a worker");
    }
    // Rank 0 blocked in its wildcard receives.
    assert!(events
        .iter()
        .any(|e| e["cat"] == "blocked" && e["pid"] == 0 && e["name"] == "blocked in MPI_Recv"));
    // Calls on one thread never overlap (a Chrome trace thread must nest).
    let mut lanes: BTreeMap<(u64, u64), Vec<(f64, f64)>> = BTreeMap::new();
    for e in events.iter().filter(|e| e["cat"] == "mpi") {
        let ts = e["ts"].as_f64().unwrap();
        lanes
            .entry((e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()))
            .or_default()
            .push((ts, ts + e["dur"].as_f64().unwrap()));
    }
    for spans in lanes.values_mut() {
        spans.sort_by(|a, b| a.partial_cmp(b).unwrap());
        for w in spans.windows(2) {
            assert!(
                w[0].1 <= w[1].0 + 1e-6,
                "overlapping calls on one thread: {w:?}"
            );
        }
    }
    trace_processor_loads(&json, want.descriptors, want.matches);
}

/// Perfetto's trace processor (Python package `perfetto`, which downloads its binary on
/// first use) loads the trace with the same counts. Skipped, with a message, when the
/// package or its binary is not available here (no network for the download).
fn trace_processor_loads(json: &Path, descriptors: usize, matches: usize) {
    let python = std::env::var("STROBE_PERFETTO_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = format!(
        "from perfetto.trace_processor import TraceProcessor\n\
         tp = TraceProcessor(trace={:?})\n\
         n = list(tp.query(\"select count(*) as n from slice where category = 'mpi'\"))[0].n\n\
         f = list(tp.query('select count(*) as n from flow'))[0].n\n\
         print(n, f)\n",
        json.display().to_string()
    );
    let o = std::process::Command::new(&python)
        .args(["-c", &script])
        .output();
    let o = match o {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            eprintln!(
                "SKIPPED: Perfetto's trace processor is not usable with {python} here ({}); \
                 set STROBE_PERFETTO_PYTHON to a python with `perfetto` and its binary",
                err.lines().last().unwrap_or("")
            );
            return;
        }
        Err(e) => {
            eprintln!("SKIPPED: cannot run {python}: {e}");
            return;
        }
    };
    let got = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        got.trim(),
        format!("{descriptors} {matches}"),
        "trace processor counts"
    );
}

#[test]
fn csv_has_one_row_per_slice() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("heisenbug", dir.path());
    let db = dir.path().join("run.db");
    record_heisenbug(&db, &prog, true, 5);
    let csv = dir.path().join("run.csv");
    export(&db, "csv", &csv);
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(header[0], "slice");
    assert!(header.contains(&"getts_ns") && header.contains(&"np2pdem"));
    let rec = Recording::open(&db).unwrap();
    let rows = rec.slices(1..=rec.last_slice()).unwrap();
    let body: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(body.len(), rows.len());
    for (cells, row) in body.iter().zip(&rows) {
        assert_eq!(cells.len(), header.len());
        assert_eq!(cells[0], row.slice.to_string());
        assert_eq!(cells[10], row.n_descriptors.to_string());
    }
    let matches: i64 = body.iter().map(|c| c[11].parse::<i64>().unwrap()).sum();
    assert_eq!(matches, 3);
}

#[test]
fn a_damaged_file_is_refused_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.db");
    std::fs::write(&bad, b"not a recording at all").unwrap();
    let out = dir.path().join("out.json");
    let o = strobe_cmd(
        &[
            "export",
            &bad.display().to_string(),
            "-o",
            &out.display().to_string(),
        ],
        &[],
    );
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(!out.exists(), "nothing written for a damaged recording");
}

/// Format 16 writes no `message` rows: the History tab reads the blobs, and `strobe export
/// --format sqlite` writes the rows into its copy, where `message_life` answers and the
/// History tab's query gives what the blobs gave.
#[test]
fn sqlite_export_fills_the_message_rows_the_history_derives() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("heisenbug", dir.path());
    let db = dir.path().join("run.db");
    record_heisenbug(&db, &prog, true, 5);
    let rows = dir.path().join("rows.db");
    export(&db, "sqlite", &rows);
    let count = |p: &Path, sql: &str| -> i64 {
        let c = strobe_recorder::open_recording(p).unwrap();
        c.query_row(sql, [], |r| r.get(0)).unwrap()
    };
    let matches = count(&db, "SELECT sum(n_matches) FROM slice");
    assert!(matches > 0);
    assert_eq!(count(&db, "SELECT count(*) FROM message"), 0);
    assert_eq!(count(&db, "SELECT count(*) FROM message_life"), 0);
    assert_eq!(count(&rows, "SELECT count(*) FROM message"), matches);
    assert_eq!(count(&rows, "SELECT count(*) FROM message_life"), matches);
    let (from_blobs, from_rows) = (
        Recording::open(&db).unwrap(),
        Recording::open(&rows).unwrap(),
    );
    let mut seen = 0;
    for rank in 0..from_blobs.job().ranks {
        let a = from_blobs.match_history(rank, usize::MAX).unwrap().unwrap();
        let b = from_rows.match_history(rank, usize::MAX).unwrap().unwrap();
        assert_eq!(a, b, "rank {rank}");
        seen += a.entries.len();
    }
    assert_eq!(seen as i64, matches);
}
