//! Helpers for the debugging tools' tests (`export`, `diff`, `hunt`, `explore`): build a C
//! fixture with `strobe mpicc` and record it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::c_fixtures::source_dir;
use crate::replay::{strobe_cmd, Out};

/// Compile `fixtures/c/<stem>.c` with `strobe mpicc` into `dir`; returns the program.
pub fn build_c(stem: &str, dir: &Path) -> PathBuf {
    let out = dir.join(stem);
    let o = Command::new(crate::strobe())
        .args(["mpicc", "-std=c11", "-O2", "-g", "-Wall", "-Wextra", "-o"])
        .arg(&out)
        .arg(source_dir().join(format!("{stem}.c")))
        .arg("-I")
        .arg(source_dir())
        .output()
        .expect("run strobe mpicc");
    assert!(
        o.status.success(),
        "strobe mpicc {stem}.c: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// `strobe record -o db --force -n ranks --timeout 120s -- prog args` with `env`.
pub fn record_c(db: &Path, prog: &Path, ranks: u32, args: &[&str], env: &[(&str, &str)]) -> Out {
    let (db, prog, n) = (
        db.display().to_string(),
        prog.display().to_string(),
        ranks.to_string(),
    );
    let mut all = vec![
        "record",
        "-o",
        &db,
        "--force",
        "-n",
        &n,
        "--timeout",
        "120s",
        "--",
        &prog,
    ];
    all.extend_from_slice(args);
    strobe_cmd(&all, env)
}

/// Record the heisenbug fixture on 4 ranks until a run passes (`want_pass`) or fails its
/// assertion; the noise makes both happen. Returns the recording, or panics after `tries`.
pub fn record_heisenbug(db: &Path, prog: &Path, want_pass: bool, tries: u32) -> Out {
    for _ in 0..tries {
        // Passing runs: the fixture's gap keeps rank 1 first. Failing runs: no gap and up
        // to 50 ms of noise let another worker overtake rank 1 about half the time.
        let (args, env): (&[&str], &[(&str, &str)]) = if want_pass {
            (&["gap=3000"], &[])
        } else {
            (&["gap=0"], &[("STROBE_FIXTURE_NOISE_US", "50000")])
        };
        let out = record_c(db, prog, 4, args, env);
        if (out.code == 0) == want_pass {
            return out;
        }
    }
    panic!(
        "no {} heisenbug run in {tries} tries",
        if want_pass { "passing" } else { "failing" }
    );
}
