//! The C ABI end to end: C programs compiled with `strobe mpicc` and run with `strobe run`
//! (and through the `mpiexec` name) on 2 and 4 ranks. The programs check their own results
//! (`runtime/capi/tests/c/`); these tests check exit status, stdout and stderr. They use the
//! `libmpi` and `strobe` in the target directory: build them first (`scripts/test.sh` runs
//! `cargo build --workspace --lib --bins`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

use strobe_tests::{processes_matching, strobe, target_dir};

fn sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime/capi/tests/c")
}

/// A directory of compiled test programs, built once per test binary.
fn build_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // One fixed directory under target/: rebuilt from scratch by each run.
        let d = target_dir().join("capi-tests");
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("create build dir");
        for p in ["p2p", "coll", "types", "comm", "errors", "hello"] {
            mpicc(&d, &[&format!("{p}.c"), "-o", p]);
        }
        d
    })
}

/// `strobe mpicc -Wall -Werror -I<sources> ARGS` in `dir`; panics with the compiler's
/// output if it fails.
fn mpicc(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(strobe())
        .arg("mpicc")
        .args(["-Wall", "-Wextra", "-Werror", "-O1"])
        .arg(format!("-I{}", sources().display()))
        .args(args.iter().map(|a| {
            if a.ends_with(".c") {
                sources().join(a).into_os_string()
            } else {
                a.into()
            }
        }))
        .current_dir(dir)
        .output()
        .expect("spawn strobe mpicc");
    assert!(
        out.status.success(),
        "strobe mpicc {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

struct Job {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run_with(launcher: &Path, args: &[&str], env: &[(&str, &str)]) -> Job {
    let mut cmd = Command::new(launcher);
    cmd.args(args).current_dir(build_dir());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("spawn the launcher");
    Job {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn run(n: &str, prog: &str, args: &[&str]) -> Job {
    let mut a = vec!["run", "-n", n, "--timeout", "120s", "--"];
    let p = build_dir().join(prog).display().to_string();
    a.push(&p);
    a.extend_from_slice(args);
    run_with(&strobe(), &a, &[])
}

fn assert_passes(n: &str, prog: &str) {
    let j = run(n, prog, &[]);
    assert_eq!(
        j.code, 0,
        "{prog} on {n} ranks: exit {}\nstdout:\n{}\nstderr:\n{}",
        j.code, j.stdout, j.stderr
    );
    assert_eq!(
        j.stdout,
        format!("{prog} ok on {n} ranks\n"),
        "stdout of {prog}"
    );
}

#[test]
fn point_to_point_and_requests() {
    assert_passes("2", "p2p");
    assert_passes("4", "p2p");
}

#[test]
fn collectives_reductions_and_user_ops() {
    assert_passes("1", "coll");
    assert_passes("2", "coll");
    assert_passes("4", "coll");
}

#[test]
fn derived_datatypes() {
    assert_passes("2", "types");
    assert_passes("4", "types");
}

#[test]
fn communicators_groups_attributes() {
    assert_passes("2", "comm");
    assert_passes("4", "comm");
}

#[test]
fn errors_return_their_class_with_errors_return() {
    assert_passes("2", "errors");
    assert_passes("4", "errors");
}

#[test]
fn errors_are_fatal_by_default_with_a_clear_message() {
    for (mode, code, msg) in [
        (
            "fatal-rank",
            6,
            "strobe: MPI_Send on rank 1: MPI_ERR_RANK: invalid rank 7",
        ),
        (
            "fatal-truncate",
            15,
            "strobe: MPI_Recv on rank 1: MPI_ERR_TRUNCATE:",
        ),
        (
            "fatal-comm",
            5,
            "strobe: MPI_Barrier on rank 0: MPI_ERR_COMM: invalid communicator handle 12345",
        ),
    ] {
        let j = run("2", "errors", &[mode]);
        assert_eq!(j.code, code, "{mode}: stderr:\n{}", j.stderr);
        assert!(j.stderr.contains(msg), "{mode}: stderr:\n{}", j.stderr);
        assert!(
            j.stderr.contains("the other ranks were stopped"),
            "{}",
            j.stderr
        );
        assert!(j.stdout.is_empty(), "{mode}: stdout: {}", j.stdout);
    }
    std::thread::sleep(Duration::from_millis(50));
    // Only this test's ranks (their argument is a fatal mode): a sibling test runs the same
    // binary without arguments at the same time.
    let path = build_dir().join("errors").display().to_string();
    let leftovers = processes_matching(&format!("{path} fatal-"));
    assert!(leftovers.is_empty(), "leftover ranks: {leftovers:?}");
}

#[test]
fn pmpi_tool_intercepts_in_shared_and_static_links() {
    let d = build_dir().join("pmpi");
    std::fs::create_dir_all(&d).unwrap();
    mpicc(&d, &["-c", "pmpi_tool.c", "-o", "tool.o"]);
    mpicc(&d, &["-c", "pmpi_prog.c", "-o", "prog.o"]);
    mpicc(&d, &["-fPIC", "-shared", "pmpi_tool.c", "-o", "libtool.so"]);
    mpicc(&d, &["prog.o", "tool.o", "-o", "with_object"]);
    let rpath = format!("-Wl,-rpath,{}", d.display());
    mpicc(
        &d,
        &["prog.o", "-L.", "-ltool", &rpath, "-o", "with_library"],
    );
    mpicc(
        &d,
        &[
            "-static-mpi",
            "prog.o",
            "tool.o",
            "-o",
            "static_with_object",
        ],
    );
    mpicc(&d, &["-static-mpi", "prog.o", "-o", "static_plain"]);
    for prog in ["with_object", "with_library", "static_with_object"] {
        let p = d.join(prog).display().to_string();
        let j = run_with(&strobe(), &["run", "-n", "2", "--timeout", "120s", &p], &[]);
        assert_eq!(j.code, 0, "{prog}: {}", j.stderr);
        let mut lines: Vec<&str> = j.stdout.lines().collect();
        lines.sort_unstable();
        assert_eq!(
            lines,
            [
                "pmpi: rank 0 intercepted 3 MPI_Send calls",
                "pmpi: rank 1 intercepted 3 MPI_Send calls"
            ],
            "{prog}"
        );
    }
    let p = d.join("static_plain").display().to_string();
    let j = run_with(&strobe(), &["run", "-n", "2", "--timeout", "120s", &p], &[]);
    assert_eq!(j.code, 0, "static_plain: {}", j.stderr);
    assert!(j.stdout.is_empty(), "{}", j.stdout);
}

#[test]
fn a_program_run_without_strobe_says_how_to_run_it() {
    let out = Command::new(build_dir().join("hello"))
        .output()
        .expect("run hello directly");
    assert_eq!(out.status.code(), Some(16), "MPI_ERR_OTHER as exit status");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("MPI_Init") && err.contains("strobe run -n N"),
        "{err}"
    );
}

#[test]
fn mpicc_show_and_compile_only() {
    let j = run_with(&strobe(), &["mpicc", "-show", "-O2", "x.c", "-o", "x"], &[]);
    assert_eq!(j.code, 0, "{}", j.stderr);
    let line = j.stdout.trim();
    assert!(line.starts_with("cc -I"), "{line}");
    assert!(line.contains("-O2 x.c -o x"), "{line}");
    assert!(line.ends_with("-lmpi"), "{line}");
    assert!(line.contains("-Wl,-rpath,"), "{line}");
    let j = run_with(
        &strobe(),
        &["mpicc", "-show", "-c", "x.c"],
        &[("STROBE_CC", "gcc")],
    );
    assert!(!j.stdout.contains("-lmpi"), "{}", j.stdout);
    assert!(j.stdout.starts_with("gcc -I"), "{}", j.stdout);
    assert!(j.stdout.trim_end().ends_with("-c x.c"), "{}", j.stdout);
    // A bad source file: the compiler's status comes back.
    let j = run_with(&strobe(), &["mpicc", "-c", "/nonexistent/x.c"], &[]);
    assert_ne!(j.code, 0);
}

#[test]
fn successful_run_prints_only_the_programs_output() {
    let j = run("4", "hello", &[]);
    assert_eq!(j.code, 0, "{}", j.stderr);
    let mut lines: Vec<&str> = j.stdout.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            "hello from 0 of 4",
            "hello from 1 of 4",
            "hello from 2 of 4",
            "hello from 3 of 4"
        ]
    );
}

#[test]
fn mpiexec_name_np_environment_and_timeout() {
    let link = build_dir().join("mpiexec");
    let _ = std::os::unix::fs::symlink(strobe(), &link);
    let j = run_with(
        &link,
        &["-np", "2", "./hello"],
        &[("HELLO_EXTRA", "passed")],
    );
    assert_eq!(j.code, 0, "{}", j.stderr);
    let mut lines: Vec<&str> = j.stdout.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        ["hello from 0 of 2 passed", "hello from 1 of 2 passed"]
    );
    let j = run_with(&link, &["-n", "2", "--", "./hello"], &[]);
    assert_eq!(j.code, 0, "{}", j.stderr);
    let j = run_with(
        &link,
        &["-np", "2", "./hello", "sleep"],
        &[("MPIEXEC_TIMEOUT", "1")],
    );
    assert_eq!(j.code, 124, "{}", j.stderr);
    assert!(j.stderr.contains("MPIEXEC_TIMEOUT"), "{}", j.stderr);
    assert!(j.stdout.is_empty(), "{}", j.stdout);
}

#[test]
fn every_declared_function_is_exported_twice() {
    let header = std::fs::read_to_string(sources().join("../../include/mpi.h")).unwrap();
    let names: Vec<&str> = header
        .lines()
        .filter_map(|l| l.strip_prefix("STROBE_MPI_FN("))
        .filter_map(|l| l.split(',').nth(1))
        .map(str::trim)
        .collect();
    assert!(names.len() > 100, "{} functions", names.len());
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(target_dir().join("libmpi.so"))
        .output()
        .expect("nm");
    let syms = String::from_utf8_lossy(&out.stdout);
    for n in names {
        let weak = format!(" W MPI_{n}\n");
        let strong = format!(" T PMPI_{n}\n");
        assert!(syms.contains(&weak), "MPI_{n} is not a weak export");
        assert!(syms.contains(&strong), "PMPI_{n} is not exported");
    }
    assert!(target_dir().join("libmpi.a").is_file());
}

#[test]
fn install_gives_a_working_prefix() {
    let prefix = build_dir().join("prefix");
    let j = run_with(
        &strobe(),
        &["install", "--prefix", prefix.to_str().unwrap()],
        &[],
    );
    assert_eq!(j.code, 0, "{}", j.stderr);
    for f in [
        "bin/strobe",
        "bin/mpicc",
        "bin/mpiexec",
        "bin/mpirun",
        "include/mpi.h",
        "lib/libmpi.so",
        "lib/libmpi.a",
    ] {
        assert!(prefix.join(f).exists(), "{f} missing");
    }
    let src = sources().join("hello.c").display().to_string();
    let out = prefix.join("hello").display().to_string();
    let j = run_with(&prefix.join("bin/mpicc"), &[&src, "-o", &out], &[]);
    assert_eq!(j.code, 0, "{}", j.stderr);
    let j = run_with(&prefix.join("bin/mpicc"), &["-show", "x.c"], &[]);
    assert!(
        j.stdout
            .contains(&format!("-I{}", prefix.join("include").display())),
        "{}",
        j.stdout
    );
    let j = run_with(&prefix.join("bin/mpirun"), &["-np", "2", &out], &[]);
    assert_eq!(j.code, 0, "{}", j.stderr);
    assert_eq!(j.stdout.lines().count(), 2, "{}", j.stdout);
}
