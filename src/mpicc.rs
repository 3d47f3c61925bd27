//! `strobe mpicc` (the compiler wrapper), the `mpiexec`/`mpirun` argument habits, and
//! `strobe install`.
//!
//! Where the header and the library are: `$STROBE_PREFIX/{include,lib}` if set; else the
//! installed layout next to the running executable (`<prefix>/bin/strobe` with
//! `<prefix>/include/mpi.h` and `<prefix>/lib/libmpi.so`); else the build tree
//! (`target/<profile>/strobe` with `libmpi.so` beside it, `mpi.h` in the source tree).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// Libraries the static `libmpi.a` (a Rust staticlib) needs after it on the link line
/// (`rustc --print native-static-libs`).
const STATIC_DEPS: &[&str] = &[
    "-lgcc_s",
    "-lutil",
    "-lrt",
    "-lpthread",
    "-lm",
    "-ldl",
    "-lc",
];

/// The source tree's include directory, as a last resort for the build tree.
const SOURCE_INCLUDE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/runtime/capi/include");

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prefix {
    pub include: PathBuf,
    pub lib: PathBuf,
}

/// Find the include and lib directories (see the module doc).
pub fn locate() -> Result<Prefix> {
    if let Some(p) = std::env::var_os("STROBE_PREFIX") {
        let p = PathBuf::from(p);
        let pre = Prefix {
            include: p.join("include"),
            lib: p.join("lib"),
        };
        if !pre.include.join("mpi.h").is_file() {
            bail!(
                "STROBE_PREFIX={}: {} not found",
                p.display(),
                pre.include.join("mpi.h").display()
            );
        }
        return Ok(pre);
    }
    let exe = std::env::current_exe().context("locating the strobe executable")?;
    let exe = exe.canonicalize().unwrap_or(exe);
    let dir = exe
        .parent()
        .context("the strobe executable has no directory")?;
    locate_from(dir)
}

fn locate_from(bin_dir: &Path) -> Result<Prefix> {
    if let Some(root) = bin_dir.parent() {
        let installed = Prefix {
            include: root.join("include"),
            lib: root.join("lib"),
        };
        if installed.include.join("mpi.h").is_file() && installed.lib.join("libmpi.so").is_file() {
            return Ok(installed);
        }
        // target/<profile>/strobe: the repository root is two levels up.
        if bin_dir.join("libmpi.so").is_file() {
            let tree = root.parent().map(|r| r.join("runtime/capi/include"));
            let include = match tree {
                Some(t) if t.join("mpi.h").is_file() => t,
                _ => PathBuf::from(SOURCE_INCLUDE),
            };
            if include.join("mpi.h").is_file() {
                return Ok(Prefix {
                    include,
                    lib: bin_dir.to_path_buf(),
                });
            }
        }
    }
    bail!(
        "cannot find mpi.h and libmpi.so for {}: build the workspace (cargo build --workspace), \
         run `strobe install --prefix DIR`, or set STROBE_PREFIX",
        bin_dir.display()
    )
}

/// The compiler command `mpicc ARGS` runs. `-show` and `-static-mpi` are the wrapper's own.
pub fn compile_command(args: &[OsString], pre: &Prefix, cc: &OsStr) -> (Vec<OsString>, bool) {
    let mut show = false;
    let mut static_mpi = false;
    let mut link = true;
    let mut user = Vec::new();
    for a in args {
        match a.to_str() {
            Some("-show") | Some("--show") => show = true,
            Some("-static-mpi") => static_mpi = true,
            Some("-c") | Some("-E") | Some("-S") | Some("-M") | Some("-MM") => {
                link = false;
                user.push(a.clone());
            }
            _ => user.push(a.clone()),
        }
    }
    let mut cmd = vec![cc.to_os_string()];
    let mut inc = OsString::from("-I");
    inc.push(&pre.include);
    cmd.push(inc);
    cmd.extend(user);
    if link {
        if static_mpi {
            cmd.push(pre.lib.join("libmpi.a").into_os_string());
            cmd.extend(STATIC_DEPS.iter().map(OsString::from));
        } else {
            let mut l = OsString::from("-L");
            l.push(&pre.lib);
            cmd.push(l);
            let mut rpath = OsString::from("-Wl,-rpath,");
            rpath.push(&pre.lib);
            cmd.push(rpath);
            cmd.push("-lmpi".into());
        }
    }
    (cmd, show)
}

/// `strobe mpicc ARGS...`: exit status of the compiler.
pub fn mpicc(args: &[OsString]) -> Result<i32> {
    let pre = locate()?;
    let cc = std::env::var_os("STROBE_CC").unwrap_or_else(|| "cc".into());
    let (cmd, show) = compile_command(args, &pre, &cc);
    if show {
        let words: Vec<String> = cmd
            .iter()
            .map(|w| w.to_string_lossy().into_owned())
            .collect();
        println!("{}", words.join(" "));
        return Ok(0);
    }
    let status = Command::new(&cmd[0])
        .args(&cmd[1..])
        .status()
        .with_context(|| {
            format!(
                "running the C compiler {:?} (set STROBE_CC to choose another)",
                cmd[0]
            )
        })?;
    Ok(status.code().unwrap_or(1))
}

/// `mpiexec`/`mpirun` arguments as `strobe run` arguments: `-np N` becomes `--np N`
/// (clap would read `-np` as `-n p`); everything else is `strobe run`'s own syntax, and
/// `--` before the program is optional.
pub fn mpiexec_args(args: &[OsString]) -> Vec<OsString> {
    let mut out: Vec<OsString> = vec!["strobe".into(), "run".into()];
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.to_str() {
            Some("-np") => out.push("--np".into()),
            Some(s) if s.starts_with("-np=") => out.push(format!("--np={}", &s[4..]).into()),
            _ => {
                out.push(a.clone());
                // The program starts here: the rest is its own.
                if !a.to_string_lossy().starts_with('-') && !follows_option(&out) {
                    out.extend(it.cloned());
                    break;
                }
            }
        }
    }
    out
}

/// Whether the last pushed word is the value of the option before it.
fn follows_option(out: &[OsString]) -> bool {
    let n = out.len();
    if n < 2 {
        return false;
    }
    let prev = out[n - 2].to_string_lossy();
    let takes_value = [
        "-n",
        "--np",
        "-N",
        "--nodes",
        "--slice",
        "--strobe",
        "--deadlock-slices",
        "--chunk-budget",
        "--direct-copy-min",
        "--timeout",
        "--decision-log",
    ];
    takes_value.contains(&prev.as_ref())
}

/// `strobe install --prefix DIR`.
pub fn install(prefix: &Path) -> Result<i32> {
    let pre = locate()?;
    let exe = std::env::current_exe().context("locating the strobe executable")?;
    let bin = prefix.join("bin");
    let include = prefix.join("include");
    let lib = prefix.join("lib");
    for d in [&bin, &include, &lib] {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let copy = |from: &Path, to: &Path| -> Result<()> {
        // Copy to a temporary name and rename, so a running copy of the target is not
        // overwritten in place.
        let tmp = to.with_extension("strobe-install-tmp");
        std::fs::copy(from, &tmp)
            .with_context(|| format!("copying {} to {}", from.display(), tmp.display()))?;
        std::fs::rename(&tmp, to).with_context(|| format!("installing {}", to.display()))?;
        Ok(())
    };
    copy(&exe, &bin.join("strobe"))?;
    copy(&pre.include.join("mpi.h"), &include.join("mpi.h"))?;
    copy(&pre.lib.join("libmpi.so"), &lib.join("libmpi.so"))?;
    let static_lib = pre.lib.join("libmpi.a");
    if static_lib.is_file() {
        copy(&static_lib, &lib.join("libmpi.a"))?;
    }
    crate::mpifort::install(&pre, &include, &copy)?;
    for name in ["mpicc", "mpifort", "mpif90", "mpif77", "mpiexec", "mpirun"] {
        let link = bin.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("strobe", &link)
            .with_context(|| format!("creating {}", link.display()))?;
    }
    eprintln!("strobe: installed into {}", prefix.display());
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn pre() -> Prefix {
        Prefix {
            include: "/p/include".into(),
            lib: "/p/lib".into(),
        }
    }

    #[test]
    fn link_flags_only_when_linking() {
        let (c, show) = compile_command(
            &os(&["-O2", "x.c", "-o", "x", "-lm"]),
            &pre(),
            OsStr::new("cc"),
        );
        assert!(!show);
        assert_eq!(
            c,
            os(&[
                "cc",
                "-I/p/include",
                "-O2",
                "x.c",
                "-o",
                "x",
                "-lm",
                "-L/p/lib",
                "-Wl,-rpath,/p/lib",
                "-lmpi"
            ])
        );
        let (c, _) = compile_command(&os(&["-c", "x.c"]), &pre(), OsStr::new("gcc"));
        assert_eq!(c, os(&["gcc", "-I/p/include", "-c", "x.c"]));
        let (c, show) = compile_command(
            &os(&["-show", "-static-mpi", "x.o"]),
            &pre(),
            OsStr::new("cc"),
        );
        assert!(show);
        assert_eq!(
            c[..4],
            os(&["cc", "-I/p/include", "x.o", "/p/lib/libmpi.a"])[..]
        );
        assert!(c.contains(&OsString::from("-lpthread")));
    }

    #[test]
    fn mpiexec_habits() {
        assert_eq!(
            mpiexec_args(&os(&["-np", "4", "./prog", "-np", "x"])),
            os(&["strobe", "run", "--np", "4", "./prog", "-np", "x"])
        );
        assert_eq!(
            mpiexec_args(&os(&["-n", "2", "--", "./prog"])),
            os(&["strobe", "run", "-n", "2", "--", "./prog"])
        );
        assert_eq!(
            mpiexec_args(&os(&["--tag-output", "-n", "2", "prog", "a"])),
            os(&["strobe", "run", "--tag-output", "-n", "2", "prog", "a"])
        );
    }

    #[test]
    fn locate_reports_missing_files() {
        let d = std::env::temp_dir().join(format!("strobe-locate-{}", std::process::id()));
        std::fs::create_dir_all(d.join("bin")).unwrap();
        assert!(locate_from(&d.join("bin")).is_err());
        std::fs::create_dir_all(d.join("include")).unwrap();
        std::fs::create_dir_all(d.join("lib")).unwrap();
        std::fs::write(d.join("include/mpi.h"), "").unwrap();
        std::fs::write(d.join("lib/libmpi.so"), "").unwrap();
        let p = locate_from(&d.join("bin")).unwrap();
        assert_eq!(p.include, d.join("include"));
        assert_eq!(p.lib, d.join("lib"));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
