//! Nondeterminism outside MPI (issue 17, item 8): a C program that seeds `rand()` with
//! `time(NULL) ^ getpid()` and prints clock readings replays with identical output, again
//! and again as the clock moves on, because libmpi records and replays those libc calls;
//! with `--no-libc-replay` the same program does not (the test can fail).

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
        rec.stdout.contains("time_seed ok ranks=3"),
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
