//! Issue 12, item 12: a job in which every live rank polls (`MPI_Test`, `MPI_Iprobe`) for
//! what can never come is stopped as a livelock after `--livelock-slices` slices, with a
//! report like a deadlock's and exit status 5; the decision is recorded and a replay ends
//! at the same slice, verified. A rank polling while another computes is not a livelock.

use std::path::{Path, PathBuf};

use strobe_tests::replay::{replay, strobe_cmd, Out};

const PROGRAM: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
/* "test": each rank polls MPI_Test on a receive from the other and would send only after
 * it completed. "probe": each rank polls MPI_Iprobe for a message nobody sends. A number
 * N: rank 1 computes N ms (no MPI), then sends; rank 0 polls MPI_Test meanwhile. */
int main(int argc, char **argv) {
    int rank, flag = 0, in = 0, out = 7;
    MPI_Request req;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!strcmp(argv[1], "test")) {
        MPI_Irecv(&in, 1, MPI_INT, 1 - rank, 0, MPI_COMM_WORLD, &req);
        while (!flag) MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        MPI_Send(&out, 1, MPI_INT, 1 - rank, 0, MPI_COMM_WORLD);
    } else if (!strcmp(argv[1], "probe")) {
        while (!flag) MPI_Iprobe(1 - rank, 5, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    } else if (rank == 0) {
        MPI_Irecv(&in, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, &req);
        while (!flag) MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        printf("rank 0 got %d\n", in);
    } else {
        double until = now() + atoi(argv[1]) / 1000.0;
        volatile double x = 0;
        while (now() < until) x += 1.0;
        MPI_Send(&out, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
"#;

fn build(dir: &Path) -> PathBuf {
    let src = dir.join("livelock.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join("livelock");
    let out = strobe_cmd(
        &[
            "mpicc",
            "-g",
            "-o",
            &exe.display().to_string(),
            &src.display().to_string(),
        ],
        &[],
    );
    assert_eq!(out.code, 0, "mpicc: {}", out.stderr);
    exe
}

fn run(cmd: &str, exe: &Path, extra: &[&str], mode: &str) -> Out {
    let exe = exe.display().to_string();
    let mut args = vec![cmd];
    args.extend_from_slice(extra);
    if !extra.contains(&"--timeout") {
        args.extend_from_slice(&["--timeout", "120s"]);
    }
    args.extend_from_slice(&["-n", "2", "--", &exe, mode]);
    strobe_cmd(&args, &[])
}

#[test]
fn ranks_polling_for_what_never_comes_are_a_livelock() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path());
    for mode in ["test", "probe"] {
        let out = run("run", &exe, &["--livelock-slices", "200"], mode);
        assert_eq!(out.code, 5, "{mode}: {}", out.stderr);
        let e = &out.stderr;
        assert!(e.contains("strobe: livelock in slice"), "{mode}: {e}");
        assert!(
            e.contains("for 200 slices every live rank polled"),
            "{mode}: {e}"
        );
        assert!(
            e.contains("rank 0 polling in") && e.contains("rank 1 polling in"),
            "{e}"
        );
        if mode == "test" {
            assert!(e.contains("pending MPI_Recv(source=1"), "{e}");
            // Where each rank polls (issue 12: source locations): the MPI_Test loop.
            let line = PROGRAM
                .lines()
                .position(|l| l.contains("while (!flag) MPI_Test"))
                .expect("the loop")
                + 1;
            assert_eq!(
                e.matches(&format!("at livelock.c:{line} (in main)"))
                    .count(),
                2,
                "{e}"
            );
            assert!(
                e.contains("wait-for cycle: rank 0 -> rank 1 -> rank 0"),
                "{e}"
            );
        }
    }
    // Off: the same job runs until its timeout.
    let out = run(
        "run",
        &exe,
        &["--livelock-slices", "0", "--timeout", "2s"],
        "test",
    );
    assert_eq!(out.code, 124, "{}", out.stderr);
}

#[test]
fn polling_while_another_rank_computes_is_not_a_livelock() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path());
    // Rank 1 computes 400 ms (about 800 slices of 500 us) while rank 0 polls: far more
    // than the 100 slices allowed, yet rank 1 computing means something may still come.
    let out = run("run", &exe, &["--livelock-slices", "100"], "400");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("rank 0 got 7"), "{}", out.stdout);
}

#[test]
fn a_recorded_livelock_replays_to_the_same_slice() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path());
    let db = dir.path().join("ll.db");
    let rec = run(
        "record",
        &exe,
        &["-o", &db.display().to_string(), "--livelock-slices", "200"],
        "test",
    );
    assert_eq!(rec.code, 5, "{}", rec.stderr);
    let stats = strobe_cmd(&["stats", &db.display().to_string()], &[]);
    assert!(
        stats.stdout.contains("outcome    livelock (exit status 5)"),
        "{}",
        stats.stdout
    );
    for _ in 0..3 {
        let rep = replay(&db, &[], &[]);
        assert_eq!(rep.code, 0, "{}", rep.stderr);
        assert!(
            rep.stderr.contains("replay matched the recording")
                && rep.stderr.contains("the recorded job was livelock"),
            "{}",
            rep.stderr
        );
    }
}
