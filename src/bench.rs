//! `strobe bench ...`: a thin launcher for `strobe-bench`, the benchmark tool (crate
//! `bench/`). The benchmarks live in their own binary so the shipped `strobe` carries no
//! plotting library, no compiler driver for the C benchmark fixtures and no package
//! installation; users who know `strobe bench` from the docs still type it.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use anyhow::{bail, Result};

/// The benchmark tool: `$STROBE_BENCH`, else `strobe-bench` next to this executable, else
/// on `PATH`.
fn bench_tool() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("STROBE_BENCH") {
        return Some(PathBuf::from(p));
    }
    let sibling = std::env::current_exe().ok()?.with_file_name("strobe-bench");
    if sibling.is_file() {
        return Some(sibling);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("strobe-bench"))
        .find(|p| p.is_file())
}

/// Replace this process with `strobe-bench ARGS` (only returns on failure).
pub fn bench(args: &[OsString]) -> Result<i32> {
    let Some(tool) = bench_tool() else {
        bail!(
            "strobe bench needs the benchmark tool strobe-bench, which is not installed next \
             to strobe or on PATH; build it from the source tree with \
             `cargo build --release -p strobe-bench`"
        );
    };
    // `strobe-bench` finds strobe (and the fixtures) next to itself, or through STROBE_EXE.
    let me = std::env::current_exe()?;
    let err = std::process::Command::new(&tool)
        .args(args)
        .env("STROBE_EXE", me)
        .exec();
    bail!("cannot run {}: {err}", tool.display())
}
