//! The C fixture suite (fixtures/c, listed in fixtures/c/manifest.toml) under MPICH and
//! under strobe. Every fixture checks its own results; these tests build each one, run it
//! on each of its rank counts, and judge the run against the manifest's verdict.
//!
//! MPICH is the reference that proves the fixtures are standard MPI; scripts/test.sh
//! installs it (scripts/ensure-mpich.sh). Its waiting ranks spin, so on 2 cores the
//! manifest's test arguments are small. MPICH has no deadlock detection: the deadlock
//! fixture's verdict there is "still running at the deadline", and it is killed.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use strobe_tests::c_fixtures::{
    build_all, judge, manifest, parse_manifest, run_with_deadline, Fixture, Launcher, Verdict,
};

/// How long a deadlocked MPICH job is left hanging before we call it a deadlock.
const MPICH_DEADLOCK_WAIT: Duration = Duration::from_secs(3);
/// Far beyond any fixture's run time at test size: only a hang gets here.
const JOB_DEADLINE: Duration = Duration::from_secs(120);

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program} >/dev/null")])
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn require_mpich() {
    // CI must not skip: scripts/test.sh installs MPICH before the tests run.
    assert!(
        have("mpicc.mpich") && have("mpiexec.mpich"),
        "MPICH is missing: run scripts/ensure-mpich.sh (scripts/test.sh does)"
    );
}

fn mpich_job(bin: &Path, fx: &Fixture, ranks: u32) -> Command {
    let mut cmd = Command::new("mpiexec.mpich");
    // Hydra's fork launcher: every rank on this host, no ssh needed in CI.
    cmd.args(["-launcher", "fork", "-n", &ranks.to_string()])
        .arg(bin)
        .args(&fx.args)
        .envs(fx.env.iter().map(|(k, v)| (k, v)));
    cmd
}

fn run_suite(launcher: Launcher, fixtures: &[&Fixture], bin_dir: &Path) {
    let mut failures = Vec::new();
    for fx in fixtures {
        for &ranks in &fx.ranks {
            let bin = bin_dir.join(fx.stem());
            let (cmd, deadline) = match launcher {
                Launcher::Mpich => (
                    mpich_job(&bin, fx, ranks),
                    if fx.verdict == Verdict::Deadlock {
                        MPICH_DEADLOCK_WAIT
                    } else {
                        JOB_DEADLINE
                    },
                ),
                Launcher::Strobe => {
                    let mut cmd = Command::new(strobe_tests::strobe());
                    cmd.args(["run", "-n", &ranks.to_string(), "--timeout", "120s", "--"])
                        .arg(&bin)
                        .args(&fx.args)
                        .envs(fx.env.iter().map(|(k, v)| (k, v)));
                    (cmd, JOB_DEADLINE + Duration::from_secs(10))
                }
            };
            let end = run_with_deadline(cmd, deadline);
            eprintln!(
                "{launcher:?} {} on {ranks} ranks: exit {:?} in {:.1?}",
                fx.name, end.code, end.elapsed
            );
            if let Err(e) = judge(fx, launcher, &end) {
                failures.push(format!("--- {} on {ranks} ranks: {e}", fx.name));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} run(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn mpich_built() -> (tempfile::TempDir, Vec<Fixture>) {
    require_mpich();
    let fixtures = manifest();
    let dir = tempfile::tempdir().expect("temp dir");
    build_all(&["mpicc.mpich"], &fixtures, dir.path()).unwrap_or_else(|e| panic!("{e}"));
    (dir, fixtures)
}

#[test]
fn manifest_lists_every_source_and_every_source_is_listed() {
    let fixtures = manifest();
    let mut sources: Vec<String> = std::fs::read_dir(strobe_tests::c_fixtures::source_dir())
        .expect("fixtures/c")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".c"))
        .collect();
    sources.sort();
    let mut listed: Vec<String> = fixtures.iter().map(|f| f.source.clone()).collect();
    listed.sort();
    listed.dedup();
    assert_eq!(sources, listed, "fixtures/c/*.c and manifest.toml disagree");
    let mut names: Vec<&str> = fixtures.iter().map(|f| f.name.as_str()).collect();
    names.sort();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len(), "duplicate fixture names");
    for fx in &fixtures {
        assert!(!fx.ranks.is_empty(), "{}: no rank counts", fx.name);
        assert!(
            fx.ranks.iter().all(|r| [2, 4, 8].contains(r)),
            "{}: the suite runs on 2, 4 and 8 ranks",
            fx.name
        );
    }
}

#[test]
fn manifest_reader_rejects_what_it_does_not_understand() {
    assert!(
        parse_manifest("name = \"x\"").is_err(),
        "key outside a table"
    );
    let base = "[[fixture]]\nname = \"a\"\nsource = \"a.c\"\nranks = [2]\n";
    assert!(parse_manifest(&format!("{base}verdict = \"pass\"\n")).is_ok());
    assert!(parse_manifest(&format!("{base}verdict = \"maybe\"\n")).is_err());
    assert!(parse_manifest(&format!("{base}verdict = \"abort\"\n")).is_err());
    assert!(parse_manifest(&format!("{base}verdict = \"pass\"\ncolour = \"red\"\n")).is_err());
    let parsed = parse_manifest(&format!(
        "{base}verdict = \"abort\"\nabort_code = 7\nargs = [\"a=1\", \"b=2,3\"]\nenv = [\"K=V\"]\n"
    ))
    .expect("parses");
    assert_eq!(parsed[0].verdict, Verdict::Abort(7));
    assert_eq!(parsed[0].args, vec!["a=1", "b=2,3"]);
    assert_eq!(parsed[0].env, vec![("K".to_string(), "V".to_string())]);
}

/// The fixtures whose verdict is a clean pass, under MPICH on 2, 4 and 8 ranks.
#[test]
fn mpich_runs_the_passing_fixtures() {
    let (dir, fixtures) = mpich_built();
    let passing: Vec<&Fixture> = fixtures
        .iter()
        .filter(|f| f.verdict == Verdict::Pass)
        .collect();
    run_suite(Launcher::Mpich, &passing, dir.path());
}

/// Deadlock, segfault, MPI_Abort and the heisenbug under MPICH.
#[test]
fn mpich_gives_the_failing_fixtures_their_verdicts() {
    let (dir, fixtures) = mpich_built();
    let failing: Vec<&Fixture> = fixtures
        .iter()
        .filter(|f| f.verdict != Verdict::Pass)
        .collect();
    run_suite(Launcher::Mpich, &failing, dir.path());
}

/// The same suite under strobe, built with `strobe mpicc` against strobe's C library.
#[test]
fn strobe_runs_the_whole_fixture_suite() {
    let fixtures = manifest();
    let dir = tempfile::tempdir().expect("temp dir");
    let strobe = strobe_tests::strobe();
    let strobe = strobe.to_string_lossy().into_owned();
    build_all(&[&strobe, "mpicc"], &fixtures, dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let all: Vec<&Fixture> = fixtures.iter().collect();
    run_suite(Launcher::Strobe, &all, dir.path());
}

/// The NAS IS-pattern kernel (fixtures/c/nas_is.c) sorts the same keys to the same checksum
/// under strobe and under MPICH, on 2 and 4 ranks, at class S and at class W (a million
/// keys: the MPI_Alltoallv moves megabytes, here through the DMA Helpers) — bit for bit,
/// not just "ok".
#[test]
fn nas_is_sorts_to_mpichs_checksum() {
    require_mpich();
    let fixtures: Vec<Fixture> = manifest()
        .into_iter()
        .filter(|f| f.name == "nas_is")
        .collect();
    assert_eq!(fixtures.len(), 1, "nas_is is in the manifest");
    let mpich_dir = tempfile::tempdir().expect("temp dir");
    build_all(&["mpicc.mpich"], &fixtures, mpich_dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let strobe_dir = tempfile::tempdir().expect("temp dir");
    let strobe = strobe_tests::strobe().to_string_lossy().into_owned();
    build_all(&[&strobe, "mpicc"], &fixtures, strobe_dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let ok_line = |end: &strobe_tests::c_fixtures::JobEnd| -> String {
        assert_eq!(end.code, Some(0), "{}", end.describe());
        let line = end.stdout.lines().find(|l| l.starts_with("nas_is ok "));
        line.unwrap_or_else(|| panic!("no summary line: {}", end.describe()))
            .to_string()
    };
    for class in ["S", "W"] {
        for ranks in [2u32, 4] {
            let args = [format!("class={class}"), "iters=3".to_string()];
            let mut mpich = Command::new("mpiexec.mpich");
            mpich
                .args(["-launcher", "fork", "-n", &ranks.to_string()])
                .arg(mpich_dir.path().join("nas_is"))
                .args(&args);
            let mut ours = Command::new(strobe_tests::strobe());
            ours.args(["run", "-n", &ranks.to_string(), "--timeout", "120s"]);
            if class == "W" {
                // Its Alltoallv blocks (about 1 MiB) then go through the receivers' DMA
                // Helpers, as class A's 8 MB blocks do at the default threshold.
                ours.args(["--direct-copy-min", "64KiB"]);
            }
            ours.arg("--")
                .arg(strobe_dir.path().join("nas_is"))
                .args(&args);
            let reference = ok_line(&run_with_deadline(mpich, JOB_DEADLINE));
            let got = ok_line(&run_with_deadline(ours, JOB_DEADLINE));
            assert!(reference.contains("checksum="), "{reference}");
            assert_eq!(got, reference, "class {class} on {ranks} ranks");
        }
    }
}
