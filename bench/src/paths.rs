//! Where the benchmark tool finds strobe, the Rust fixtures and the source tree.

use std::path::PathBuf;

use anyhow::{Context, Result};

/// The `strobe` executable: `$STROBE_EXE` (set by `strobe bench`), else `strobe` next to
/// this tool (both are built into the same `target/<profile>/`).
pub fn strobe_exe() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("STROBE_EXE") {
        return Ok(PathBuf::from(p));
    }
    Ok(std::env::current_exe()
        .context("cannot find the strobe-bench executable")?
        .with_file_name("strobe"))
}

/// A binary built next to strobe (the Rust fixtures: `token_ring`, `barrier_every`, ...).
pub fn sibling(name: &str) -> Result<PathBuf> {
    Ok(strobe_exe()?.with_file_name(name))
}

/// The repository checkout the suite runs from (sources of the C fixtures, scripts):
/// `$STROBE_SOURCE_DIR`, else the checkout this tool was built from.
pub fn repo_root() -> PathBuf {
    match std::env::var_os("STROBE_SOURCE_DIR") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/..")),
    }
}
