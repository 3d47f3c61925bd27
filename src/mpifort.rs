//! `strobe mpifort` (also `mpifort`, `mpif90`, `mpif77` through install links): compile
//! and link a Fortran MPI program against strobe, as `strobe mpicc` does for C.
//!
//! The compiler is `gfortran`, or `$STROBE_FC`. Its command line is `mpicc`'s
//! ([`mpicc::compile_command`]: `-I include`, the user's arguments, libmpi when linking;
//! `-show`, `-static-mpi`) plus, for the `mpi` module, `-I` of the directory holding
//! `mpi.mod`, and, for GNU Fortran 10 or later, `-fallow-argument-mismatch`: the
//! routines have no explicit interfaces (mpif.h, mpi.f90), and gfortran 10 refuses a file
//! that passes, say, an INTEGER and a DOUBLE PRECISION buffer to MPI_SEND.
//!
//! `mpi.mod` is compiled from `mpi.f90` on first use, with the compiler in use (a .mod file
//! only works with the compiler version that wrote it): `strobe install` writes it into
//! `PREFIX/include`; otherwise `strobe mpifort` keeps it in `<lib dir>/strobe-fortran/`
//! (the build tree's `target/<profile>/strobe-fortran/`), rebuilt when `mpi.f90` or
//! `mpif.h` is newer or the compiler's `--version` changes. The library build (cargo)
//! never needs a Fortran compiler.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::mpicc::{self, Prefix};

/// The Fortran compiler: `$STROBE_FC`, else `gfortran`.
fn compiler() -> OsString {
    std::env::var_os("STROBE_FC").unwrap_or_else(|| "gfortran".into())
}

/// First line of `fc --version` (None: the compiler does not run).
fn version_line(fc: &OsStr) -> Option<String> {
    let out = Command::new(fc).arg("--version").output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().next().map(str::to_string)
}

/// Whether `version` (a `--version` line) is GNU Fortran 10 or later.
fn needs_mismatch_flag(version: &str) -> bool {
    if !version.contains("GNU Fortran") {
        return false;
    }
    // "GNU Fortran (Debian 12.2.0-14) 12.2.0": the last word is the version.
    version
        .split_whitespace()
        .last()
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse::<u32>().ok())
        .is_some_and(|major| major >= 10)
}

/// The compiler command for `args`, with `mod_dir` holding mpi.mod.
pub fn fortran_command(
    args: &[OsString],
    pre: &Prefix,
    fc: &OsStr,
    mod_dir: &Path,
    mismatch_flag: bool,
) -> (Vec<OsString>, bool) {
    let (mut cmd, show) = mpicc::compile_command(args, pre, fc);
    let mut extra = Vec::new();
    if mod_dir != pre.include {
        let mut i = OsString::from("-I");
        i.push(mod_dir);
        extra.push(i);
    }
    if mismatch_flag {
        extra.push("-fallow-argument-mismatch".into());
    }
    // After the compiler and mpicc's -I, before the user's arguments.
    cmd.splice(2..2, extra);
    (cmd, show)
}

/// Where mpi.mod lives for this prefix (see the module doc).
fn mod_dir(pre: &Prefix) -> PathBuf {
    if pre.include.join("mpi.mod").is_file() {
        pre.include.clone()
    } else {
        pre.lib.join("strobe-fortran")
    }
}

fn modified(p: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// Make sure `dir/mpi.mod` is current for compiler `fc` (version line `version`):
/// compile `mpi.f90` into a private temporary directory and rename into place, so
/// concurrent builds never see a half-written module.
pub fn ensure_module(pre: &Prefix, dir: &Path, fc: &OsStr, version: &str) -> Result<()> {
    let source = pre.include.join("mpi.f90");
    let module = dir.join("mpi.mod");
    let stamp = dir.join("mpi.mod.compiler");
    let current = modified(&module).is_some_and(|m| {
        [&source, &pre.include.join("mpif.h")]
            .iter()
            .all(|s| modified(s).is_none_or(|t| t <= m))
    }) && std::fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == version);
    if current {
        return Ok(());
    }
    if !source.is_file() {
        bail!(
            "{} not found: cannot build the mpi module",
            source.display()
        );
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = tempfile::Builder::new()
        .prefix(".mpi-mod-")
        .tempdir_in(dir)
        .with_context(|| format!("creating a temporary directory in {}", dir.display()))?;
    let mut inc = OsString::from("-I");
    inc.push(&pre.include);
    let mut jdir = OsString::from("-J");
    jdir.push(tmp.path());
    let out = Command::new(fc)
        .args([inc, jdir, "-c".into()])
        .arg(&source)
        .arg("-o")
        .arg(tmp.path().join("mpi.o"))
        .output()
        .with_context(|| format!("running the Fortran compiler {fc:?}"))?;
    if !out.status.success() {
        bail!(
            "compiling {} failed:\n{}",
            source.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let tmp_stamp = tmp.path().join("mpi.mod.compiler");
    std::fs::write(&tmp_stamp, format!("{version}\n"))?;
    std::fs::rename(tmp.path().join("mpi.mod"), &module)
        .with_context(|| format!("installing {}", module.display()))?;
    std::fs::rename(&tmp_stamp, &stamp)
        .with_context(|| format!("installing {}", stamp.display()))?;
    Ok(())
}

/// `strobe mpifort ARGS...`: exit status of the compiler.
pub fn mpifort(args: &[OsString]) -> Result<i32> {
    let pre = mpicc::locate()?;
    if !pre.include.join("mpif.h").is_file() {
        bail!(
            "{} not found: this strobe was installed without Fortran support",
            pre.include.join("mpif.h").display()
        );
    }
    let fc = compiler();
    let version = version_line(&fc).with_context(|| {
        format!("the Fortran compiler {fc:?} does not run (install gfortran or set STROBE_FC)")
    })?;
    let dir = mod_dir(&pre);
    let (cmd, show) = fortran_command(args, &pre, &fc, &dir, needs_mismatch_flag(&version));
    if show {
        let words: Vec<String> = cmd
            .iter()
            .map(|w| w.to_string_lossy().into_owned())
            .collect();
        println!("{}", words.join(" "));
        return Ok(0);
    }
    if dir != pre.include {
        ensure_module(&pre, &dir, &fc, &version)?;
    }
    let status = Command::new(&cmd[0])
        .args(&cmd[1..])
        .status()
        .with_context(|| format!("running the Fortran compiler {:?}", cmd[0]))?;
    Ok(status.code().unwrap_or(1))
}

/// `strobe install`'s Fortran part: mpif.h and mpi.f90 into `include`, and mpi.mod
/// compiled there when a Fortran compiler runs (otherwise `strobe mpifort` builds it on
/// first use, under lib/).
pub fn install(
    pre: &Prefix,
    include: &Path,
    copy: &dyn Fn(&Path, &Path) -> Result<()>,
) -> Result<()> {
    for f in ["mpif.h", "mpi.f90"] {
        copy(&pre.include.join(f), &include.join(f))?;
    }
    let fc = compiler();
    let Some(version) = version_line(&fc) else {
        eprintln!(
            "strobe: no Fortran compiler ({fc:?}): mpi.mod not built; `strobe mpifort` builds \
             it on first use"
        );
        return Ok(());
    };
    let installed = Prefix {
        include: include.to_path_buf(),
        lib: pre.lib.clone(),
    };
    ensure_module(&installed, include, &fc, &version)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn gnu_fortran_10_and_later_get_the_mismatch_flag() {
        assert!(needs_mismatch_flag(
            "GNU Fortran (Debian 12.2.0-14+deb12u1) 12.2.0"
        ));
        assert!(!needs_mismatch_flag("GNU Fortran (GCC) 9.4.0"));
        assert!(!needs_mismatch_flag("ifx (IFX) 2024.0.0"));
    }

    #[test]
    fn module_dir_and_flags_come_before_the_user_arguments() {
        let pre = Prefix {
            include: "/p/include".into(),
            lib: "/p/lib".into(),
        };
        let (c, show) = fortran_command(
            &os(&["-O2", "x.f90", "-o", "x"]),
            &pre,
            OsStr::new("gfortran"),
            Path::new("/p/lib/strobe-fortran"),
            true,
        );
        assert!(!show);
        assert_eq!(
            c,
            os(&[
                "gfortran",
                "-I/p/include",
                "-I/p/lib/strobe-fortran",
                "-fallow-argument-mismatch",
                "-O2",
                "x.f90",
                "-o",
                "x",
                "-L/p/lib",
                "-Wl,-rpath,/p/lib",
                "-lmpi"
            ])
        );
        // Installed: mpi.mod is in include/, no second -I.
        let (c, show) = fortran_command(
            &os(&["-show", "-c", "x.f"]),
            &pre,
            OsStr::new("gfortran"),
            Path::new("/p/include"),
            false,
        );
        assert!(show);
        assert_eq!(c, os(&["gfortran", "-I/p/include", "-c", "x.f"]));
    }
}
