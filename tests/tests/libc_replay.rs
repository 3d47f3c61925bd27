//! Nondeterminism outside MPI (issue 17, item 8): a C program that seeds `rand()` with
//! `time(NULL) ^ getpid()` and prints clock readings and `getrandom` bytes replays with
//! identical output, again and again as the clock moves on, because libmpi records and
//! replays those libc calls; with `--no-libc-replay` the same program does not (the test
//! can fail).

use std::path::{Path, PathBuf};
use std::time::Duration;

use strobe_tests::c_fixtures::{build_all, manifest};
use strobe_tests::replay::{per_rank, replay, strobe_cmd, Out};

/// Builds `time_seed` with `strobe mpicc` into `dir`.
fn build(dir: &Path) -> PathBuf {
    let fx: Vec<_> = manifest()
        .into_iter()
        .filter(|f| f.name == "time_seed")
        .collect();
    assert_eq!(fx.len(), 1, "time_seed is in fixtures/c/manifest.toml");
    let strobe = strobe_tests::strobe().to_string_lossy().into_owned();
    build_all(&[&strobe, "mpicc"], &fx, dir).unwrap_or_else(|e| panic!("{e}"));
    dir.join(fx[0].stem())
}

fn record(db: &Path, prog: &Path, extra: &[&str]) -> Out {
    let db = db.display().to_string();
    let prog = prog.display().to_string();
    let mut args = vec!["record", "-o", &db, "--force", "--tag-output", "-n", "3"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--timeout", "120s", "--", &prog, "draws=6"]);
    strobe_cmd(&args, &[])
}

/// The time moves on between runs (`time()` has one-second resolution).
fn let_the_clock_move() {
    std::thread::sleep(Duration::from_millis(1100));
}

#[test]
fn time_and_pid_seeded_program_replays_with_identical_output() {
    let dir = tempfile::tempdir().expect("temp dir");
    let prog = build(dir.path());
    let db = dir.path().join("seed.db");
    let rec = record(&db, &prog, &[]);
    assert_eq!(rec.code, 0, "record failed: {}", rec.stderr);
    assert!(
        rec.stdout.contains("time_seed ok ranks=3") && rec.stdout.contains(" random="),
        "{}",
        rec.stdout
    );
    for run in 0..3 {
        let_the_clock_move();
        let rep = replay(&db, &[], &[]);
        assert_eq!(rep.code, 0, "replay {run}: {}", rep.stderr);
        assert!(
            rep.stderr.contains("strobe: replay matched the recording"),
            "replay {run}: {}",
            rep.stderr
        );
        assert_eq!(
            per_rank(&rec.stdout),
            per_rank(&rep.stdout),
            "replay {run}: output differs from the recording"
        );
    }
    // The program really is nondeterministic: another recording prints other lines.
    let again = record(&dir.path().join("again.db"), &prog, &[]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_ne!(per_rank(&rec.stdout), per_rank(&again.stdout));
}

#[test]
fn without_libc_replay_the_replay_does_not_reproduce_the_output() {
    let dir = tempfile::tempdir().expect("temp dir");
    let prog = build(dir.path());
    let db = dir.path().join("off.db");
    let rec = record(&db, &prog, &["--no-libc-replay"]);
    assert_eq!(rec.code, 0, "record failed: {}", rec.stderr);
    let_the_clock_move();
    let rep = replay(&db, &[], &[]);
    assert!(
        rep.code != 0 || per_rank(&rec.stdout) != per_rank(&rep.stdout),
        "a replay without recorded libc values reproduced time/pid-seeded output:\n{}",
        rep.stdout
    );
}

/// Calls `time` then `getpid`, or the other way round when the file named by its argument
/// exists: an input file changed between record and replay.
const ORDER_SRC: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    long v;
    if (access(argv[1], F_OK) == 0)
        v = (long)getpid() + (long)time(NULL);
    else {
        v = (long)time(NULL);
        v += (long)getpid();
    }
    printf("v=%ld\n", v);
    MPI_Finalize();
    return 0;
}
"#;

#[test]
fn a_libc_call_out_of_the_recorded_order_is_a_divergence_naming_both() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path().join("order.c");
    std::fs::write(&src, ORDER_SRC).unwrap();
    let prog = dir.path().join("order");
    let strobe = strobe_tests::strobe().to_string_lossy().into_owned();
    let cc = std::process::Command::new(&strobe)
        .args(["mpicc", "-o"])
        .arg(&prog)
        .arg(&src)
        .output()
        .expect("strobe mpicc");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let flip = dir.path().join("flip");
    let db = dir.path().join("order.db");
    let (db_s, prog_s, flip_s) = (
        db.display().to_string(),
        prog.display().to_string(),
        flip.display().to_string(),
    );
    let rec = strobe_cmd(
        &[
            "record", "-o", &db_s, "--force", "-n", "1", "--", &prog_s, &flip_s,
        ],
        &[],
    );
    assert_eq!(rec.code, 0, "{}", rec.stderr);
    std::fs::write(&flip, "").unwrap();
    let rep = replay(&db, &[], &[]);
    assert_ne!(rep.code, 0, "{}", rep.stderr);
    assert!(
        rep.stderr
            .contains("the program called getpid outside MPI, the recording has time = "),
        "{}",
        rep.stderr
    );
    assert!(rep.stderr.contains("replay DIVERGED"), "{}", rep.stderr);
}
