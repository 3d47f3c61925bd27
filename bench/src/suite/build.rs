//! Building the C benchmark fixtures twice: with `strobe mpicc` and with MPICH's
//! `mpicc.mpich`. MPICH comes from Debian (`scripts/ensure-mpich.sh` installs it when it is
//! missing); when it cannot be had, the suite says why and measures strobe alone.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// An MPI implementation the suite builds and runs the fixtures with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Implementation {
    Strobe,
    Mpich,
}

impl Implementation {
    pub fn name(self) -> &'static str {
        match self {
            Implementation::Strobe => "strobe",
            Implementation::Mpich => "mpich",
        }
    }
}

pub use crate::paths::repo_root;

pub fn fixture_sources() -> PathBuf {
    repo_root().join("fixtures/c")
}

/// Make MPICH available, installing Debian's package if needed. `Err` says why not.
pub fn ensure_mpich() -> Result<String> {
    if which("mpicc.mpich").is_none() || which("mpiexec.mpich").is_none() {
        let script = repo_root().join("scripts/ensure-mpich.sh");
        let st = Command::new("bash")
            .arg(&script)
            .status()
            .with_context(|| format!("cannot run {}", script.display()))?;
        if !st.success() || which("mpicc.mpich").is_none() {
            bail!(
                "MPICH is not installed and {} could not install it",
                script.display()
            );
        }
    }
    let out = Command::new("mpichversion").output();
    let version = match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .find(|l| l.contains("Version"))
            .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
            .unwrap_or_default(),
        _ => String::new(),
    };
    Ok(if version.is_empty() {
        "MPICH (version unknown)".into()
    } else {
        format!("MPICH {version}")
    })
}

fn which(prog: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

/// Compiles `stem.c` with `imp`'s compiler into `out_dir/imp/stem`; returns the binary.
pub fn build(imp: Implementation, stem: &str, out_dir: &Path) -> Result<PathBuf> {
    let dir = out_dir.join(imp.name());
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let bin = dir.join(stem);
    let src = fixture_sources().join(format!("{stem}.c"));
    let mut cmd = match imp {
        Implementation::Strobe => {
            let mut c = Command::new(crate::paths::strobe_exe()?);
            c.arg("mpicc");
            c
        }
        Implementation::Mpich => Command::new("mpicc.mpich"),
    };
    cmd.args(["-std=c11", "-O2", "-o"])
        .arg(&bin)
        .arg(&src)
        .arg("-I")
        .arg(fixture_sources());
    let out = cmd
        .output()
        .with_context(|| format!("cannot run the {} compiler", imp.name()))?;
    if !out.status.success() {
        bail!(
            "building {} with {} failed:\n{}",
            src.display(),
            imp.name(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(bin)
}
