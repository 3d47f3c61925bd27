//! The Fortran binding: every C entry point has its gfortran-named twins, mpif.h agrees
//! with mpi.h, and the Fortran fixtures (fixtures/fortran) build with `strobe mpifort` and
//! with MPICH's `mpif90.mpich`, run under both with the same output, and replay.
//!
//! The CG kernel's residual depends on the order the library adds the ranks' partial
//! sums in. On 2 ranks every order gives the same bits (addition is commutative), so it
//! is compared with MPICH bit for bit there; on 4 ranks it is checked against strobe's
//! own recording (replay must reproduce it exactly). The other fixtures reduce small
//! integers only, so any order gives the same output and they run on 4 ranks.
//!
//! scripts/test.sh installs MPICH (scripts/ensure-mpich.sh) and gfortran
//! (scripts/ensure-tools.sh; Debian's libmpich-dev depends on it too).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use strobe_tests::c_fixtures::{run_with_deadline, JobEnd};
use strobe_tests::replay::{per_rank, replay, strobe_cmd};
use strobe_tests::{strobe, target_dir};

const DEADLINE: Duration = Duration::from_secs(120);

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/fortran")
}

fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime/capi/include")
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program} >/dev/null")])
        .status()
        .is_ok_and(|s| s.success())
}

fn require_tools() {
    // CI must not skip: scripts/test.sh installs both.
    assert!(
        have("gfortran"),
        "gfortran is missing: run scripts/ensure-tools.sh (scripts/test.sh does)"
    );
    assert!(
        have("mpif90.mpich") && have("mpiexec.mpich"),
        "MPICH is missing: run scripts/ensure-mpich.sh (scripts/test.sh does)"
    );
}

/// The fixtures: (source, ranks compared with MPICH, program arguments).
const FIXTURES: &[(&str, u32, &[&str])] = &[
    ("ring.f90", 4, &[]),
    ("colls.f", 4, &[]),
    ("cg.f90", 2, &["4000", "60"]),
    ("api.f90", 4, &[]),
    ("dtypes.f90", 4, &[]),
    ("mpi4.f90", 4, &[]),
];

fn stem(source: &str) -> &str {
    source.split('.').next().unwrap_or(source)
}

/// Compile `source` with `compiler` (argv prefix) into `out`; panics with the messages.
fn compile(compiler: &[&str], source: &str, extra: &[&str], out: &Path) {
    // The program's own modules go next to the binary, one directory per binary: tests
    // compiling one fixture with strobe and with MPICH at the same time must not share
    // its .mod files (they embed the mpi module's constants, which differ).
    let mods = out.with_extension("mods");
    std::fs::create_dir_all(&mods).unwrap();
    let o = Command::new(compiler[0])
        .args(&compiler[1..])
        .args(["-O2", "-g", "-Wall"])
        .arg("-J")
        .arg(&mods)
        .args(extra)
        .arg(fixtures_dir().join(source))
        .arg("-o")
        .arg(out)
        .output()
        .unwrap_or_else(|e| panic!("run {compiler:?}: {e}"));
    assert!(
        o.status.success(),
        "{compiler:?} {source}:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn strobe_job(bin: &Path, ranks: u32, args: &[&str]) -> JobEnd {
    let mut cmd = Command::new(strobe());
    cmd.args(["run", "-n", &ranks.to_string(), "--timeout", "120s", "--"])
        .arg(bin)
        .args(args);
    run_with_deadline(cmd, DEADLINE + Duration::from_secs(10))
}

fn mpich_job(bin: &Path, ranks: u32, args: &[&str]) -> JobEnd {
    let mut cmd = Command::new("mpiexec.mpich");
    // Hydra's fork launcher: every rank on this host, no ssh needed.
    cmd.args(["-launcher", "fork", "-n", &ranks.to_string()])
        .arg(bin)
        .args(args);
    run_with_deadline(cmd, DEADLINE)
}

fn assert_passed(end: &JobEnd, what: &str, summary: &str) {
    assert!(
        end.code == Some(0) && end.stdout.lines().any(|l| l.starts_with(summary)),
        "{what}: {}",
        end.describe()
    );
}

#[test]
fn every_c_function_has_fortran_twins() {
    let header = std::fs::read_to_string(include_dir().join("mpi.h")).unwrap();
    let names: Vec<String> = header
        .lines()
        .filter_map(|l| l.strip_prefix("STROBE_MPI_FN("))
        .filter_map(|l| l.split(',').nth(1))
        .map(|n| n.trim().to_lowercase())
        // The handle conversions exist only in C (MPI-3.1 17.2.4); checked below.
        .filter(|n| !n.ends_with("_f2c") && !n.ends_with("_c2f"))
        // MPI-4's large-count calls have no mpif.h/`use mpi` names (only mpi_f08's
        // overloads, which strobe does not provide).
        .filter(|n| !n.ends_with("_c"))
        .collect();
    assert!(names.len() > 100, "{} functions", names.len());
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(target_dir().join("libmpi.so"))
        .output()
        .expect("nm");
    let syms = String::from_utf8_lossy(&out.stdout);
    let mut missing = Vec::new();
    for n in &names {
        for (kind, sym) in [("T", format!("pmpi_{n}_")), ("W", format!("mpi_{n}_"))] {
            if !syms.contains(&format!(" {kind} {sym}\n")) {
                missing.push(sym);
            }
        }
    }
    for h in [
        "Comm",
        "Type",
        "Group",
        "Op",
        "Request",
        "Errhandler",
        "Info",
        "Status",
    ] {
        for dir in ["f2c", "c2f"] {
            for (kind, prefix) in [("T", "PMPI_"), ("W", "MPI_")] {
                let sym = format!("{prefix}{h}_{dir}");
                if !syms.contains(&format!(" {kind} {sym}\n")) {
                    missing.push(sym);
                }
            }
        }
    }
    for block in ["mpifcmb1_", "mpifcmb2_", "mpifcmb3_", "mpifcmb4_"] {
        if !syms.contains(&format!(" B {block}\n")) {
            missing.push(block.to_string());
        }
    }
    assert!(missing.is_empty(), "not exported: {missing:?}");
}

/// `#define NAME N` / `#define NAME ((T)N)` values of mpi.h.
fn c_values(header: &str) -> BTreeMap<String, i64> {
    let mut m = BTreeMap::new();
    for l in header.lines() {
        let mut w = l.split_whitespace();
        if w.next() != Some("#define") {
            continue;
        }
        let (Some(name), Some(v)) = (w.next(), w.next()) else {
            continue;
        };
        let v = v.trim_start_matches('(').trim_end_matches(')');
        let v = v.rsplit(')').next().unwrap_or(v);
        if let Ok(n) = v.parse() {
            m.insert(name.to_string(), n);
        }
    }
    m
}

/// `PARAMETER (NAME=N)` values of mpif.h.
fn fortran_values(mpif: &str) -> BTreeMap<String, i64> {
    mpif.lines()
        .filter_map(|l| l.trim().strip_prefix("PARAMETER ("))
        .filter_map(|l| l.strip_suffix(')')?.split_once('='))
        .map(|(n, v)| (n.to_string(), v.parse().expect(v)))
        .collect()
}

#[test]
fn mpif_h_agrees_with_mpi_h_and_is_fixed_and_free_form() {
    let c = c_values(&std::fs::read_to_string(include_dir().join("mpi.h")).unwrap());
    let mpif = std::fs::read_to_string(include_dir().join("mpif.h")).unwrap();
    let f = fortran_values(&mpif);
    let mut shared = 0;
    for (name, v) in &f {
        if let Some(cv) = c.get(name) {
            assert_eq!(v, cv, "{name}: mpif.h {v}, mpi.h {cv}");
            shared += 1;
        }
    }
    assert!(shared > 150, "only {shared} constants in both headers");
    // Every integer constant of mpi.h is in mpif.h too (a constant added to mpi.h must be
    // added there).
    let missing: Vec<&String> = c
        .keys()
        .filter(|n| n.starts_with("MPI_") && !f.contains_key(*n))
        .collect();
    assert!(missing.is_empty(), "in mpi.h, not in mpif.h: {missing:?}");
    // The Fortran datatypes have handles of their own (so that MPI_Type_get_name names
    // them, as MPICH's typename tests ask), distinct from their C twins and each other.
    let mut seen = std::collections::HashSet::new();
    for (fname, cname) in [
        ("MPI_INTEGER", "MPI_INT"),
        ("MPI_REAL", "MPI_FLOAT"),
        ("MPI_DOUBLE_PRECISION", "MPI_DOUBLE"),
        ("MPI_CHARACTER", "MPI_CHAR"),
        ("MPI_INTEGER1", "MPI_INT8_T"),
        ("MPI_INTEGER2", "MPI_INT16_T"),
        ("MPI_INTEGER4", "MPI_INT32_T"),
        ("MPI_INTEGER8", "MPI_INT64_T"),
        ("MPI_REAL4", "MPI_FLOAT"),
        ("MPI_REAL8", "MPI_DOUBLE"),
        ("MPI_2INTEGER", "MPI_2INT"),
    ] {
        assert_eq!(f[fname], c[fname], "{fname}: mpif.h and mpi.h");
        assert_ne!(
            f[fname], c[cname],
            "{fname} has its own handle, not {cname}'s"
        );
        assert!(
            seen.insert(f[fname]),
            "{fname}: handle shared with another type"
        );
    }
    // The Fortran-only ones are distinct negative handles (src/fortran/handles.rs).
    let mut own: Vec<i64> = [
        "MPI_LOGICAL",
        "MPI_COMPLEX",
        "MPI_DOUBLE_COMPLEX",
        "MPI_2REAL",
        "MPI_2DOUBLE_PRECISION",
    ]
    .iter()
    .map(|n| f[*n])
    .collect();
    own.sort();
    own.dedup();
    assert!(own.len() == 5 && own.iter().all(|v| *v < 0), "{own:?}");
    assert_eq!(f["MPI_STATUS_SIZE"], 6);
    // Fixed form: statements in columns 7-72, no tabs, comments with ! in column 1 (also
    // valid free form), no continuation lines.
    for l in mpif.lines() {
        assert!(l.len() <= 72 && !l.contains('\t'), "{l:?}");
        assert!(l.starts_with('!') || l.starts_with("      "), "{l:?}");
        assert!(!l.starts_with("     &"), "{l:?}");
    }
}

#[test]
fn fixtures_give_the_same_output_as_under_mpich() {
    require_tools();
    let dir = tempfile::tempdir().unwrap();
    let s = strobe().to_string_lossy().into_owned();
    for &(source, ranks, args) in FIXTURES {
        let ours = dir.path().join(stem(source));
        let theirs = dir.path().join(format!("{}-mpich", stem(source)));
        compile(&[&s, "mpifort"], source, &[], &ours);
        compile(&["mpif90.mpich"], source, &[], &theirs);
        let summary = format!("{} ok", stem(source));
        let a = strobe_job(&ours, ranks, args);
        assert_passed(&a, &format!("{source} under strobe"), &summary);
        let b = mpich_job(&theirs, ranks, args);
        assert_passed(&b, &format!("{source} under MPICH"), &summary);
        assert_eq!(
            a.stdout, b.stdout,
            "{source} on {ranks} ranks: strobe and MPICH print different results"
        );
        eprintln!("{source}: same output under strobe and MPICH on {ranks} ranks");
    }
}

#[test]
fn cg_on_more_ranks_and_linked_statically() {
    require_tools();
    let dir = tempfile::tempdir().unwrap();
    let s = strobe().to_string_lossy().into_owned();
    let bin = dir.path().join("cg-static");
    compile(&[&s, "mpifort", "-static-mpi"], "cg.f90", &[], &bin);
    let ldd = Command::new("ldd").arg(&bin).output().expect("ldd");
    assert!(
        !String::from_utf8_lossy(&ldd.stdout).contains("libmpi.so"),
        "linked against libmpi.so"
    );
    // 4 and 5 ranks (uneven rows are refused: 4000 is a multiple of both).
    for ranks in [4, 5] {
        let end = strobe_job(&bin, ranks, &["4000", "60"]);
        assert_passed(&end, &format!("cg on {ranks} ranks"), "cg ok");
    }
    let end = strobe_job(&bin, 3, &["4000", "60"]);
    assert_eq!(
        end.code,
        Some(2),
        "n not a multiple of 3: {}",
        end.describe()
    );
}

/// Record `bin args` on 4 ranks under timing noise, replay it: verified, same output.
fn record_and_replay(dir: &Path, bin: &Path, args: &[&str], summary: &str) {
    let db = dir.join(format!("{}.db", bin.file_name().unwrap().to_string_lossy()));
    let (db_s, bin_s) = (db.display().to_string(), bin.display().to_string());
    let noise = [("STROBE_FIXTURE_NOISE_US", "300")];
    let mut all = vec![
        "record",
        "-o",
        &db_s,
        "--force",
        "--tag-output",
        "-n",
        "4",
        "--timeout",
        "120s",
        "--",
        &bin_s,
    ];
    all.extend_from_slice(args);
    let rec = strobe_cmd(&all, &noise);
    assert_eq!(rec.code, 0, "record {bin_s}: {}", rec.stderr);
    assert!(rec.stdout.contains(summary), "{}", rec.stdout);
    let rep = replay(&db, &[], &noise);
    assert_eq!(rep.code, 0, "replay {bin_s}: {}", rep.stderr);
    assert!(
        rep.stderr.contains("strobe: replay matched the recording"),
        "{}",
        rep.stderr
    );
    assert_eq!(per_rank(&rec.stdout), per_rank(&rep.stdout), "{bin_s}");
}

/// The CG kernel, and api.f90 whose Iprobe and Test loops depend on timing.
#[test]
fn fortran_programs_replay_verified_with_identical_output() {
    require_tools();
    let dir = tempfile::tempdir().unwrap();
    let s = strobe().to_string_lossy().into_owned();
    for (source, args, summary) in [
        ("cg.f90", &["2000", "40"][..], "cg ok"),
        ("api.f90", &[][..], "api ok"),
        ("dtypes.f90", &[][..], "dtypes ok"),
        ("mpi4.f90", &[][..], "mpi4 ok"),
    ] {
        let bin = dir.path().join(stem(source));
        compile(&[&s, "mpifort"], source, &[], &bin);
        record_and_replay(dir.path(), &bin, args, summary);
    }
}

#[test]
fn install_gives_mpif90_and_the_mpi_module() {
    require_tools();
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("prefix");
    let inst = strobe_cmd(&["install", "--prefix", prefix.to_str().unwrap()], &[]);
    assert_eq!(inst.code, 0, "{}", inst.stderr);
    for f in [
        "bin/mpifort",
        "bin/mpif90",
        "bin/mpif77",
        "include/mpif.h",
        "include/mpi.f90",
        "include/mpi.mod",
    ] {
        assert!(prefix.join(f).exists(), "{f} not installed");
    }
    // -show names the installed include directory (mpi.mod is there) and libmpi.
    let show = Command::new(prefix.join("bin/mpif90"))
        .args(["-show", "x.f90"])
        .output()
        .unwrap();
    let show = String::from_utf8_lossy(&show.stdout).into_owned();
    let inc = format!("-I{}", prefix.join("include").display());
    assert!(
        show.starts_with("gfortran ") && show.contains(&inc) && show.contains("-lmpi"),
        "{show}"
    );
    assert!(!show.contains("strobe-fortran"), "{show}");
    // A `use mpi` program built with the installed mpif90 runs under the installed mpiexec.
    let bin = dir.path().join("ring");
    let mpif90 = prefix.join("bin/mpif90").to_string_lossy().into_owned();
    compile(&[&mpif90], "ring.f90", &[], &bin);
    let mut cmd = Command::new(prefix.join("bin/mpiexec"));
    cmd.args(["-np", "2"]).arg(&bin);
    let end = run_with_deadline(cmd, DEADLINE);
    assert_passed(&end, "ring via the installed mpiexec", "ring ok");
}
