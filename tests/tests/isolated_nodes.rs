//! Issue 15, part 1: the engine with one job segment per node. With the hidden test mode
//! `STROBE_ISOLATE_NODES=1`, `strobe run|record|replay` give every node a segment (and a
//! `JobShared`) of its own: each rank attaches to its node's segment only, and node 0
//! learns about the other nodes' ranks through the transport (the slot mirror,
//! `runtime/src/engine/mirror.rs`), as node daemons on separate hosts will.

use rusqlite::Connection;
use strobe_tests::replay::{record, strobe_cmd};
use strobe_tests::run_fixture_env;

const ISOLATED: (&str, &str) = ("STROBE_ISOLATE_NODES", "1");
const LAYOUT: [&str; 4] = ["--nodes", "3", "-n", "6"];

#[test]
fn fixtures_run_with_a_segment_per_node() {
    for name in ["token_ring", "collectives", "p2p"] {
        let run = run_fixture_env(&LAYOUT, name, &[], &[ISOLATED]);
        run.assert_ok(name);
    }
}

/// The report of a deadlock across nodes is the one a shared segment gives, but for the
/// call sites of the other nodes' ranks: node 0 never resolves a pid of another node (on
/// another host it is some other process), so those stay unresolved for now. That
/// difference is also what shows the segments really are separate.
#[test]
fn a_deadlock_across_isolated_nodes_is_reported_as_with_one_segment() {
    let iso = run_fixture_env(&LAYOUT, "deadlock", &[], &[ISOLATED]);
    let one = run_fixture_env(&LAYOUT, "deadlock", &[], &[]);
    for run in [&iso, &one] {
        assert_eq!(run.code, 3, "{}", run.stderr);
        assert!(
            run.stderr.contains(
                "wait-for cycle: rank 0 -> rank 1 -> rank 2 -> rank 3 -> rank 4 -> rank 5 -> rank 0"
            ),
            "{}",
            run.stderr
        );
    }
    // Ranks 0 and 1 are node 0's, 2..=5 the other nodes'.
    for r in 0..6u32 {
        let call = format!(
            "rank {r} blocked in MPI_Recv(source={}, tag=0, comm=MPI_COMM_WORLD, 8 bytes)",
            (r + 1) % 6
        );
        let sited = format!("{call} at deadlock.rs:");
        assert!(one.stderr.contains(&sited), "{}", one.stderr);
        let line = iso
            .stderr
            .lines()
            .find(|l| l.contains(&call))
            .unwrap_or_else(|| panic!("rank {r} missing:\n{}", iso.stderr));
        assert_eq!(line.contains(" at deadlock.rs:"), r < 2, "{line}");
    }
}

#[test]
fn a_recording_with_a_segment_per_node_replays_verified() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tr.db");
    let rec = record(&db, &LAYOUT, "token_ring", &[], &[ISOLATED]);
    assert_eq!(rec.code, 0, "{}", rec.stderr);
    let dbs = db.display().to_string();
    let cwd = dir.path().display().to_string();
    for env in [&[ISOLATED][..], &[]] {
        let rep = strobe_cmd(&["replay", &dbs, "--cwd", &cwd], env);
        assert_eq!(rep.code, 0, "{}", rep.stderr);
        assert!(
            rep.stderr.contains("replay matched the recording"),
            "{}",
            rep.stderr
        );
    }
}

/// The adaptive strobe still stretches its timer: while rank 0 (node 0) computes and the
/// other nodes' ranks wait in a barrier, node 0 must see through the mirror that nobody
/// else computes or posts, and run a handful of slices, not one per 500 us.
#[test]
fn the_adaptive_strobe_stretches_with_isolated_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("idle.db");
    let rec = record(&db, &LAYOUT, "idle", &["600"], &[ISOLATED]);
    assert_eq!(rec.code, 0, "{}", rec.stderr);
    let c = Connection::open(&db).unwrap();
    let total: i64 = c
        .query_row("SELECT total_slices FROM job", [], |r| r.get(0))
        .unwrap();
    // 600 ms of 500 us timer slices would be 1200; stretched, a slice per doorbell or
    // per 100 ms safety timeout.
    assert!(total < 120, "{total} slices: the timer did not stretch");
}

/// Node 0's livelock watch sees the other nodes' ranks polling (their failed tests come
/// through the mirror at the end of every slice).
#[test]
fn ranks_polling_on_two_isolated_nodes_are_a_livelock() {
    const PROGRAM: &str = r#"
#include <mpi.h>
int main(int argc, char **argv) {
    int rank, flag = 0, in = 0;
    MPI_Request req;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Irecv(&in, 1, MPI_INT, 1 - rank, 0, MPI_COMM_WORLD, &req);
    while (!flag) MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
"#;
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("poll.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.path().join("poll").display().to_string();
    let cc = strobe_cmd(&["mpicc", "-o", &exe, &src.display().to_string()], &[]);
    assert_eq!(cc.code, 0, "mpicc: {}", cc.stderr);
    let args = [
        "run",
        "--nodes",
        "2",
        "-n",
        "2",
        "--livelock-slices",
        "200",
        "--timeout",
        "120s",
        "--",
        &exe,
    ];
    let out = strobe_cmd(&args, &[ISOLATED]);
    assert_eq!(out.code, 5, "{}", out.stderr);
    assert!(
        out.stderr.contains("rank 0 polling in") && out.stderr.contains("rank 1 polling in"),
        "{}",
        out.stderr
    );
}
