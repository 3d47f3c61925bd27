//! Recording across hosts without daemons (docs/multi-host.md, "Recording across hosts"):
//! `STROBE_WIRE_LOOPBACK=PATH strobe record` sends every sink call through a `WireSink` as
//! sink frames and back through `apply_sink_frame` into the recorder, and writes a direct
//! recording of the same run to PATH. The two must hold the same rows, and the one that
//! went through the wire must replay verified. Then: decisions do not depend on the node
//! layout, so a recording made on 3 nodes replays verified on 1, 2 and 3.

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::Connection;
use strobe_tests::replay::{record, replay, schedule_log};

/// Every row of every table, as text, sorted (rows of different nodes are written in
/// whatever order the node threads reach the recorder). Left out: `job` (times of the
/// file's creation), and the replay log's chunks and the content checksum, whose cuts
/// follow the writer's commits (time-driven): the decoded replay log is compared instead.
fn rows(db: &Path) -> BTreeMap<String, Vec<String>> {
    let c = Connection::open(db).unwrap();
    let tables: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        // Schedule batches end where each writer committed: compared slice by slice below.
        .filter(|t: &String| {
            !["job", "replay_log", "content_checksum", "schedule_batch"].contains(&t.as_str())
        })
        .collect();
    let mut out = BTreeMap::new();
    for t in tables {
        let mut st = c.prepare(&format!("SELECT * FROM \"{t}\"")).unwrap();
        let n = st.column_count();
        let mut v: Vec<String> = st
            .query_map([], |r| {
                Ok((0..n)
                    .map(|i| format!("{:?}", r.get_ref(i).unwrap()))
                    .collect::<Vec<_>>()
                    .join("|"))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        v.sort();
        out.insert(t, v);
    }
    out
}

fn replay_log(db: &Path) -> (Vec<strobe_recorder::replay_log::RankLog>, Vec<u64>) {
    let log = strobe_recorder::Recording::open(db)
        .unwrap()
        .replay_log()
        .unwrap();
    (log.ranks, log.digests)
}

fn job_shape(db: &Path) -> (u32, u32, String, i64) {
    let c = Connection::open(db).unwrap();
    c.query_row(
        "SELECT ranks, nodes, outcome, total_slices FROM job",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )
    .unwrap()
}

/// The `strobe: wire loopback:` line's numbers: (frames, bytes, slice frames, slice bytes).
fn loopback_numbers(stderr: &str) -> (u64, u64, u64, u64) {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("strobe: wire loopback:"))
        .unwrap_or_else(|| panic!("no loopback line in:\n{stderr}"));
    let nums: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| w.parse().unwrap())
        .collect();
    (nums[0], nums[1], nums[2], nums[3])
}

fn through_the_wire(name: &str, ranks: &str, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let wire = dir.path().join("wire.db");
    let direct = dir.path().join("direct.db");
    let mut args = vec!["-n", ranks, "--nodes", "3"];
    args.extend_from_slice(extra);
    let rec = record(
        &wire,
        &args,
        name,
        &[],
        &[("STROBE_WIRE_LOOPBACK", direct.to_str().unwrap())],
    );
    assert_eq!(rec.code, 0, "{name}: record failed:\n{}", rec.stderr);
    let (frames, bytes, slice_frames, slice_bytes) = loopback_numbers(&rec.stderr);
    let (_, _, _, total) = job_shape(&wire);
    assert_eq!(
        slice_frames as i64, total,
        "{name}: one slice frame per slice"
    );
    assert!(
        frames > slice_frames && bytes > slice_bytes,
        "{name}: {}",
        rec.stderr
    );

    assert_eq!(job_shape(&wire), job_shape(&direct), "{name}: job");
    let (w, d) = (rows(&wire), rows(&direct));
    assert_eq!(w.keys().collect::<Vec<_>>(), d.keys().collect::<Vec<_>>());
    for (table, wrows) in &w {
        assert!(
            *wrows == d[table],
            "{name}: table {table} differs: {} rows through the wire, {} direct; first different: {:?}",
            wrows.len(),
            d[table].len(),
            wrows.iter().zip(&d[table]).find(|(a, b)| a != b)
        );
    }
    // From format 20 the decisions live in `schedule_batch` blobs (the `decision` table
    // stays empty in new recordings); from format 17 the view `node_slice` reads the
    // table `node_metrics`.
    for table in ["slice", "node_metrics", "mmds_rank"] {
        assert!(!w[table].is_empty(), "{name}: no rows in {table}");
    }
    let (sw, sd) = (schedule_log(&wire, None), schedule_log(&direct, None));
    assert!(
        sw.iter().any(|s| !s.ends_with("Some([]) Some([])")),
        "{name}: no schedule"
    );
    assert_eq!(sw, sd, "{name}: schedule log");
    if extra.contains(&"--capture-payloads") {
        assert!(!w["payload"].is_empty(), "{name}: no payloads");
    }
    assert_eq!(replay_log(&wire), replay_log(&direct), "{name}: replay log");

    let rep = replay(&wire, &[], &[]);
    assert_eq!(
        rep.code, 0,
        "{name}: replay of the wire recording:\n{}",
        rep.stderr
    );
    assert!(
        rep.stderr.contains("replay matched the recording"),
        "{}",
        rep.stderr
    );
    // The daemon's way: the source from a replay package, the slices back as sink frames.
    let rep = replay(&wire, &[], &[("STROBE_REMOTE_LOOPBACK", "1")]);
    assert_eq!(
        rep.code, 0,
        "{name}: remote loopback replay:\n{}",
        rep.stderr
    );
    assert!(
        rep.stderr.contains("replay matched the recording"),
        "{}",
        rep.stderr
    );
}

#[test]
fn token_ring_through_the_wire_equals_the_direct_recording() {
    through_the_wire("token_ring", "6", &[]);
}

#[test]
fn collectives_with_captured_payloads_through_the_wire() {
    // Payload frames (every rank captured) and MMDS frames cross too.
    through_the_wire("collectives", "4", &["--capture-payloads", "all"]);
}

#[test]
fn polling_outcomes_through_the_wire() {
    // Timing-dependent outcomes (failed tests) are the replay log's stream 1.
    through_the_wire("polling", "4", &[]);
}

#[test]
fn a_recording_of_3_nodes_replays_verified_on_1_2_and_3() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let rec = record(&db, &["-n", "6", "--nodes", "3"], "collectives", &[], &[]);
    assert_eq!(rec.code, 0, "{}", rec.stderr);
    assert_eq!(job_shape(&db).1, 3, "the recording stores its node count");
    let recorded = strobe_tests::replay::per_rank(&rec.stdout);
    for k in ["1", "2", "3"] {
        let rep = replay(&db, &["--nodes", k], &[]);
        assert_eq!(rep.code, 0, "--nodes {k}:\n{}", rep.stderr);
        assert!(
            rep.stderr.contains("replay matched the recording"),
            "--nodes {k}: {}",
            rep.stderr
        );
        assert_eq!(
            strobe_tests::replay::per_rank(&rep.stdout),
            recorded,
            "--nodes {k}"
        );
    }
    // A regenerated recording says which layout the replay ran with.
    let regen = dir.path().join("regen.db");
    let rep = replay(
        &db,
        &["--nodes", "2", "--record", regen.to_str().unwrap()],
        &[],
    );
    assert_eq!(rep.code, 0, "{}", rep.stderr);
    assert_eq!(job_shape(&regen).1, 2);
    for bad in ["0", "7"] {
        let rep = replay(&db, &["--nodes", bad], &[]);
        assert_ne!(rep.code, 0);
        assert!(
            rep.stderr
                .contains(&format!("--nodes {bad}: the recording has 6 ranks")),
            "{}",
            rep.stderr
        );
    }
}
