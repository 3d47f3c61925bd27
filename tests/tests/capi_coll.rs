//! Nonblocking collectives, Alltoallw, intercommunicators, `MPI_Comm_create_group` and the
//! complex datatypes in the C ABI: the C fixtures built unchanged with Debian's MPICH and with `strobe mpicc` must
//! print the same results, and a recording made under timing noise must replay verified
//! with the same output, the timing-dependent `MPI_Test` outcomes on collective requests
//! included.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use strobe_tests::c_fixtures::{build_all, manifest, run_with_deadline, Fixture};
use strobe_tests::replay::{per_rank, replay, strobe_cmd};

const DEADLINE: Duration = Duration::from_secs(180);

fn fixtures(names: &[&str]) -> Vec<Fixture> {
    let all = manifest();
    names
        .iter()
        .map(|n| {
            all.iter()
                .find(|f| f.name == *n)
                .unwrap_or_else(|| panic!("{n} is not in fixtures/c/manifest.toml"))
                .clone()
        })
        .collect()
}

/// `names` built with MPICH (`dir/mpich/`) and with strobe (`dir/strobe/`).
fn built(names: &[&str]) -> (tempfile::TempDir, Vec<Fixture>) {
    assert!(
        Command::new("mpicc.mpich").arg("-v").output().is_ok(),
        "MPICH is missing: run scripts/ensure-mpich.sh"
    );
    let fx = fixtures(names);
    let dir = tempfile::tempdir().expect("temp dir");
    let strobe = strobe_tests::strobe().to_string_lossy().into_owned();
    for (sub, cc) in [
        ("mpich", vec!["mpicc.mpich"]),
        ("strobe", vec![&strobe, "mpicc"]),
    ] {
        let out = dir.path().join(sub);
        std::fs::create_dir(&out).expect("mkdir");
        build_all(&cc, &fx, &out).unwrap_or_else(|e| panic!("{sub}: {e}"));
    }
    (dir, fx)
}

fn bin(dir: &Path, sub: &str, fx: &Fixture) -> PathBuf {
    dir.join(sub).join(fx.stem())
}

/// Stdout of a passing run under MPICH or strobe.
fn run(launcher: &str, prog: &Path, fx: &Fixture, ranks: u32, env: &[(&str, &str)]) -> String {
    let n = ranks.to_string();
    let mut cmd = if launcher == "mpich" {
        let mut c = Command::new("mpiexec.mpich");
        c.args(["-launcher", "fork", "-n", &n]);
        c
    } else {
        let mut c = Command::new(strobe_tests::strobe());
        c.args(["run", "-n", &n, "--timeout", "150s", "--"]);
        c
    };
    cmd.arg(prog).args(&fx.args).envs(env.iter().copied());
    let end = run_with_deadline(cmd, DEADLINE);
    assert_eq!(
        end.code,
        Some(0),
        "{} under {launcher} on {ranks} ranks: {}",
        fx.name,
        end.describe()
    );
    end.stdout
}

fn matches_mpich(name: &str, ranks: &[u32]) {
    let (dir, fx) = built(&[name]);
    let fx = &fx[0];
    for &n in ranks {
        let want = run("mpich", &bin(dir.path(), "mpich", fx), fx, n, &[]);
        let got = run("strobe", &bin(dir.path(), "strobe", fx), fx, n, &[]);
        assert!(
            want.contains(&format!("{} ok", fx.stem())),
            "MPICH did not pass: {want}"
        );
        assert_eq!(want, got, "{name} on {n} ranks: strobe and MPICH disagree");
    }
}

fn replays_verified(name: &str, env: &[(&str, &str)]) {
    let (dir, fx) = built(&[name]);
    let fx = &fx[0];
    let db = dir.path().join(format!("{name}.db"));
    let (db_s, prog) = (
        db.display().to_string(),
        bin(dir.path(), "strobe", fx).display().to_string(),
    );
    let mut args = vec![
        "record",
        "-o",
        &db_s,
        "--force",
        "--tag-output",
        "-n",
        "4",
        "--timeout",
        "150s",
        "--",
        &prog,
    ];
    args.extend(fx.args.iter().map(String::as_str));
    let rec = strobe_cmd(&args, env);
    assert_eq!(rec.code, 0, "record: {}", rec.stderr);
    let rep = replay(&db, &[], env);
    assert_eq!(rep.code, 0, "replay: {}", rep.stderr);
    assert!(
        rep.stderr.contains("strobe: replay matched the recording"),
        "{}",
        rep.stderr
    );
    assert_eq!(
        per_rank(&rec.stdout),
        per_rank(&rep.stdout),
        "{name}: output differs between record and replay"
    );
}

#[test]
fn nonblocking_collectives_and_alltoallw_match_mpich() {
    matches_mpich("icoll", &[2, 3, 4]);
}

#[test]
fn nonblocking_collectives_replay_verified_with_the_same_test_outcomes() {
    // Noise makes the number of unsuccessful MPI_Test/MPI_Testany calls on collective
    // requests vary from run to run; each rank prints its count, and the replay must
    // reproduce every one of them.
    replays_verified(
        "icoll",
        &[
            ("STROBE_FIXTURE_NOISE_US", "300"),
            ("ICOLL_SHOW_POLLS", "1"),
        ],
    );
}

#[test]
fn intercommunicators_and_group_creation_match_mpich() {
    matches_mpich("intercomm", &[2, 3, 5]);
}

#[test]
fn intercommunicators_replay_verified() {
    replays_verified("intercomm", &[("STROBE_FIXTURE_NOISE_US", "300")]);
}

#[test]
fn complex_reductions_match_mpich_and_replay_verified() {
    matches_mpich("complex", &[2, 3]);
    replays_verified("complex", &[]);
}

/// The Fortran fixture `fixtures/fortran/icoll.f90` built with `mpifort` (strobe's or
/// MPICH's `mpif90.mpich`) into `out`.
fn fortran(compiler: &[&str], out: &Path) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/fortran/icoll.f90");
    let o = Command::new(compiler[0])
        .args(&compiler[1..])
        .args(["-O2", "-g"])
        .arg(&src)
        .arg("-o")
        .arg(out)
        .output()
        .expect("run the Fortran compiler");
    assert!(
        o.status.success(),
        "{compiler:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Lines of every rank, sorted (ranks print concurrently).
fn sorted(out: &str) -> Vec<&str> {
    let mut v: Vec<&str> = out.lines().collect();
    v.sort_unstable();
    v
}

#[test]
fn fortran_nonblocking_collectives_and_intercommunicators_match_mpich_and_replay() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (ours, theirs) = (dir.path().join("ours"), dir.path().join("theirs"));
    let strobe = strobe_tests::strobe().to_string_lossy().into_owned();
    fortran(&[&strobe, "mpifort"], &ours);
    fortran(&["mpif90.mpich"], &theirs);
    let fx = Fixture {
        name: "icoll.f90".into(),
        source: "icoll.f90".into(),
        args: Vec::new(),
        bench_args: Vec::new(),
        ranks: vec![2, 4],
        verdict: strobe_tests::c_fixtures::Verdict::Pass,
        env: Vec::new(),
    };
    for n in [2, 4] {
        let want = run("mpich", &theirs, &fx, n, &[]);
        let got = run("strobe", &ours, &fx, n, &[]);
        assert!(want.contains("icoll ok"), "MPICH: {want}");
        assert_eq!(sorted(&want), sorted(&got), "on {n} ranks");
    }
    let db = dir.path().join("f.db");
    let (db_s, prog) = (db.display().to_string(), ours.display().to_string());
    let args = [
        "record",
        "-o",
        &db_s,
        "--force",
        "--tag-output",
        "-n",
        "4",
        "--timeout",
        "150s",
        "--",
        &prog,
    ];
    let rec = strobe_cmd(&args, &[]);
    assert_eq!(rec.code, 0, "record: {}", rec.stderr);
    let rep = replay(&db, &[], &[]);
    assert_eq!(rep.code, 0, "replay: {}", rep.stderr);
    assert!(rep.stderr.contains("strobe: replay matched the recording"));
    assert_eq!(per_rank(&rec.stdout), per_rank(&rep.stdout));
}

// ---- issue 13 (mpi13a): MPI-4 persistent collectives, Comm_idup, topologies and
// neighbour collectives, sessions and large-count calls.

#[test]
fn persistent_collectives_and_comm_idup_match_mpich() {
    matches_mpich("pcoll_idup", &[1, 2, 3, 4]);
}

#[test]
fn persistent_collectives_and_comm_idup_replay_verified() {
    // Noise varies the slices in which the idups and the polled persistent collectives
    // complete; the replay must reproduce every Test outcome.
    replays_verified("pcoll_idup", &[("STROBE_FIXTURE_NOISE_US", "300")]);
}

#[test]
fn topologies_and_neighbour_collectives_match_mpich() {
    matches_mpich("topo", &[1, 2, 3, 6]);
}

#[test]
fn topologies_and_neighbour_collectives_replay_verified() {
    replays_verified("topo", &[("STROBE_FIXTURE_NOISE_US", "300")]);
}

#[test]
fn sessions_and_large_count_calls_match_mpich_and_replay_verified() {
    matches_mpich("session_large", &[1, 3]);
    replays_verified("session_large", &[("STROBE_FIXTURE_NOISE_US", "300")]);
}
