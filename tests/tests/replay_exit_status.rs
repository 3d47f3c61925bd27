//! Issue 12, item 11: when several ranks exit non-zero (MPICH's `init/exitst1` on 2 ranks,
//! `exitst2` on 4), which exit the launcher sees first is a race; the replay's verdict must
//! not depend on it. Each recording is replayed 20 times: every replay must match. A
//! replay in which a rank really ends differently must still diverge.

use std::path::{Path, PathBuf};

use strobe_tests::replay::{replay, strobe_cmd};

/// Every rank returns non-zero after MPI_Finalize: 1, or with an argument 1 on even ranks
/// and 2 on odd ones. `EXITST_CODE` overrides the status (to make a real difference).
const PROGRAM: &str = r#"
#include <mpi.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Finalize();
    const char *forced = getenv("EXITST_CODE");
    if (forced) return atoi(forced);
    return argc > 1 ? 1 + rank % 2 : 1;
}
"#;

fn build(dir: &Path) -> PathBuf {
    let src = dir.join("exitst.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join("exitst");
    let out = strobe_cmd(
        &[
            "mpicc",
            "-o",
            &exe.display().to_string(),
            &src.display().to_string(),
        ],
        &[],
    );
    assert_eq!(out.code, 0, "mpicc: {}", out.stderr);
    exe
}

fn record(db: &Path, exe: &Path, ranks: &str, args: &[&str]) {
    let (db, exe) = (db.display().to_string(), exe.display().to_string());
    let mut all = vec![
        "record",
        "-o",
        &db,
        "--force",
        "-n",
        ranks,
        "--timeout",
        "120s",
        "--",
        &exe,
    ];
    all.extend_from_slice(args);
    let out = strobe_cmd(&all, &[]);
    assert_ne!(out.code, 0, "the job fails: {}", out.stderr);
    assert!(out.stderr.contains("exited with status"), "{}", out.stderr);
}

fn replays_always_match(db: &Path) {
    for i in 0..20 {
        let out = replay(db, &[], &[]);
        assert_eq!(out.code, 0, "replay {i}:\n{}", out.stderr);
        assert!(
            out.stderr.contains("replay matched the recording")
                && out.stderr.contains("the job ended as recorded"),
            "replay {i}:\n{}",
            out.stderr
        );
    }
}

#[test]
fn two_ranks_exiting_non_zero_replay_verified_every_time() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path());
    let db = dir.path().join("exitst1.db");
    record(&db, &exe, "2", &[]);
    replays_always_match(&db);
    // A real difference is still a divergence: every rank now exits with 3.
    let out = replay(&db, &["--env", "EXITST_CODE=3"], &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("replay DIVERGED"), "{}", out.stderr);
}

#[test]
fn four_ranks_exiting_with_different_statuses_replay_verified_every_time() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path());
    let db = dir.path().join("exitst2.db");
    record(&db, &exe, "4", &["odd-ranks-exit-2"]);
    replays_always_match(&db);
}
