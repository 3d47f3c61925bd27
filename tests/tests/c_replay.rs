//! The C fixture suite recorded and replayed: every program of fixtures/c (built unchanged
//! with `strobe mpicc`) is recorded on 4 ranks under timing noise and replayed; every
//! replay must verify, slice by slice, with the same output as the recording, including
//! the failing ones (deadlock, segfault, MPI_Abort) and the heisenbug; a C program whose
//! behaviour depends on its environment diverges where it should.

use std::path::{Path, PathBuf};

use strobe_tests::c_fixtures::{build_all, manifest, Fixture};
use strobe_tests::replay::{per_rank, replay, strobe_cmd, Out};

const NOISE: (&str, &str) = ("STROBE_FIXTURE_NOISE_US", "300");

fn record(db: &Path, prog: &Path, args: &[String], env: &[(&str, &str)]) -> Out {
    let db = db.display().to_string();
    let prog = prog.display().to_string();
    let mut all = vec![
        "record",
        "-o",
        &db,
        "--force",
        "--tag-output",
        "-n",
        "4",
        "--timeout",
        "120s",
        "--",
        &prog,
    ];
    all.extend(args.iter().map(String::as_str));
    strobe_cmd(&all, env)
}

fn built() -> (tempfile::TempDir, Vec<Fixture>) {
    let fixtures = manifest();
    let dir = tempfile::tempdir().expect("temp dir");
    let strobe = strobe_tests::strobe().to_string_lossy().into_owned();
    build_all(&[&strobe, "mpicc"], &fixtures, dir.path()).unwrap_or_else(|e| panic!("{e}"));
    (dir, fixtures)
}

fn binary(dir: &Path, fx: &Fixture) -> PathBuf {
    dir.join(fx.stem())
}

#[test]
fn every_c_fixture_replays_verified_with_identical_output() {
    let (dir, fixtures) = built();
    let mut checked = 0;
    for fx in fixtures.iter().filter(|f| f.ranks.contains(&4)) {
        let db = dir.path().join(format!("{}.db", fx.name));
        let mut env: Vec<(&str, &str)> = vec![NOISE];
        env.extend(fx.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let rec = record(&db, &binary(dir.path(), fx), &fx.args, &env);
        let rep = replay(&db, &[], &env);
        assert_eq!(
            rep.code, 0,
            "{}: replay exit status (record exit {})\nrecord stderr:\n{}\nreplay stderr:\n{}",
            fx.name, rec.code, rec.stderr, rep.stderr
        );
        assert!(
            rep.stderr.contains("strobe: replay matched the recording"),
            "{}: {}",
            fx.name,
            rep.stderr
        );
        assert_eq!(
            per_rank(&rec.stdout),
            per_rank(&rep.stdout),
            "{}: output differs between record and replay",
            fx.name
        );
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} C fixtures run on 4 ranks");
}

#[test]
fn a_c_program_that_reads_its_environment_diverges_where_it_changes() {
    let (dir, fixtures) = built();
    let fx = fixtures
        .iter()
        .find(|f| f.name == "diverge")
        .expect("diverge fixture");
    let db = dir.path().join("diverge.db");
    let args = vec!["iters=10".to_string()];
    let rec = record(&db, &binary(dir.path(), fx), &args, &[("DIVERGE_AT", "-1")]);
    assert_eq!(rec.code, 0, "{}", rec.stderr);
    // Same environment: matched. Changed from iteration 5 on: diverged, with a report.
    let same = replay(&db, &[], &[("DIVERGE_AT", "-1")]);
    assert_eq!(same.code, 0, "{}", same.stderr);
    let rep = replay(&db, &[], &[("DIVERGE_AT", "5")]);
    assert_eq!(rep.code, 1, "diverged exit status:\n{}", rep.stderr);
    assert!(
        rep.stderr
            .contains("replay DIVERGED from the recording at slice")
            && rep.stderr.contains(", rank "),
        "the report names the slice and the rank:\n{}",
        rep.stderr
    );
    // ... and where the replayed rank was in the program (issue 12): the ring's step.
    let first = rep.stderr.lines().next().unwrap_or("");
    assert!(
        first.contains(" at ring.h:") && first.contains("(in ring_step)"),
        "the first divergence names the source line:\n{}",
        rep.stderr
    );
}
