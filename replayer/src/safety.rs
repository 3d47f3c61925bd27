//! What a replay will execute, decided before anything is spawned (issue 11, item 1: a
//! recording is data, never a command).
//!
//! The model (docs/reliability.md, "Replay runs only what the user agrees to"):
//! - The program is the user's `--program`, else the recorded path. Its SHA-256 is
//!   compared with the recorded one: *match*, *different*, or *cannot verify* (no recorded
//!   hash). Different or unverifiable is refused unless `--program P
//!   --allow-different-binary`.
//! - A recording's launch (program, hash, arguments, cwd, environment) runs without a
//!   question only if the hash matches AND this user recorded that very launch
//!   (`strobe_recorder::privacy`'s per-user launch list). Anything else — a mailed
//!   recording, an edited job row, a different binary — needs confirmation: a y/N prompt
//!   on a terminal naming what will run, or `--yes` when stdin is not a terminal. So
//!   opening a recording never runs anything the user did not record, name or confirm.
//! - The environment passed to ranks from the file is an allow-list ([`passed_var`]):
//!   `OMP_*` and `MPIEXEC_TIMEOUT`. Never `LD_*`, `STROBE_*` or anything else: those the
//!   user passes explicitly (`--env KEY=VALUE`, `--pass-env KEY`).
//! - The working directory (recorded, or `--cwd`) must exist, be a directory and belong
//!   to the user (root: to root), and not be writable by others.
//! - A recording with redacted arguments replays only with the arguments given by the
//!   user (`strobe replay FILE -- ARGS...`).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use strobe_recorder::privacy;
use strobe_runtime::outcome::ENV_REPLAY_OUTCOMES;
use strobe_runtime::procmem::ENV_DEBUG_ATTACH;

use crate::{Recording, ReplayError, ReplayOptions};

/// The SHA-256 check of the program to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HashVerdict {
    Match,
    Different { found: String, recorded: String },
    CannotVerify,
}

/// Everything a replay would execute.
#[derive(Clone, Debug)]
pub struct LaunchPlan {
    pub program: PathBuf,
    /// The program came from `--program` (the user named it).
    pub program_named: bool,
    pub verdict: HashVerdict,
    pub args: Vec<OsString>,
    pub cwd: PathBuf,
    /// Passed to the ranks on top of strobe's own environment.
    pub env: Vec<(OsString, OsString)>,
    /// Recorded variables not passed (not on the allow-list).
    pub dropped_env: Vec<String>,
    /// This user recorded exactly this launch.
    pub known_launch: bool,
}

impl LaunchPlan {
    /// Why the user must confirm, if they must.
    pub fn needs_confirmation(&self) -> Option<String> {
        match &self.verdict {
            HashVerdict::Match if self.known_launch => None,
            HashVerdict::Match => Some(
                "this recording's launch was not recorded by you on this machine (a copied or edited recording)".into(),
            ),
            HashVerdict::Different { .. } => {
                Some("the program is not the recorded one (--allow-different-binary)".into())
            }
            HashVerdict::CannotVerify => Some(
                "the recording has no SHA-256 of its program: cannot verify it".into(),
            ),
        }
    }

    /// Warnings to print before the replay (a different or unverified binary).
    pub fn warnings(&self) -> Vec<String> {
        match &self.verdict {
            HashVerdict::Match => Vec::new(),
            HashVerdict::Different { found, recorded } => vec![format!(
                "warning: {} is not the recorded program (SHA-256 {found}, recorded {recorded}); the replay will likely diverge",
                self.program.display()
            )],
            HashVerdict::CannotVerify => vec![
                "warning: the recording has no SHA-256 of its program; running the program you named".into(),
            ],
        }
    }

    /// What `--dry-run` prints and the confirmation prompt shows.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let verdict = match &self.verdict {
            HashVerdict::Match => "SHA-256 matches the recording".to_string(),
            HashVerdict::Different { found, recorded } => {
                format!("DIFFERENT from the recording (SHA-256 {found}, recorded {recorded})")
            }
            HashVerdict::CannotVerify => "cannot verify (no SHA-256 recorded)".to_string(),
        };
        let from = if self.program_named {
            "--program"
        } else {
            "recording"
        };
        let _ = writeln!(s, "program: {} (from the {from})", self.program.display());
        let _ = writeln!(s, "hash:    {verdict}");
        let args: Vec<String> = self
            .args
            .iter()
            .map(|a| format!("{:?}", a.to_string_lossy()))
            .collect();
        let _ = writeln!(s, "args:    [{}]", args.join(", "));
        let _ = writeln!(s, "cwd:     {}", self.cwd.display());
        if self.env.is_empty() {
            let _ = writeln!(s, "env:     (strobe's own environment, nothing added)");
        }
        for (k, v) in &self.env {
            let _ = writeln!(
                s,
                "env:     {}={}",
                k.to_string_lossy(),
                v.to_string_lossy()
            );
        }
        if !self.dropped_env.is_empty() {
            let _ = writeln!(
                s,
                "dropped: {} (recorded, not on the allow-list; --env/--pass-env to pass them)",
                self.dropped_env.join(", ")
            );
        }
        let known = if self.known_launch {
            "yes"
        } else {
            "no (needs confirmation)"
        };
        let _ = writeln!(s, "recorded by you: {known}");
        s
    }
}

/// Whether a recorded variable is passed to the replayed ranks.
pub fn passed_var(k: &str) -> bool {
    k == "MPIEXEC_TIMEOUT"
        || k == "STROBE_LIBC_REPLAY"
        || (k.starts_with("OMP_")
            && k.len() > 4
            && k.bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'))
}

fn unsafe_cwd(what: String) -> ReplayError {
    ReplayError::UnsafeLaunch(what)
}

/// The ranks' extra environment: the allow-listed recorded variables and the user's
/// (the plan), then strobe's own last (the launcher applies them in order), so nothing
/// from the file can override them.
pub(crate) fn rank_env(
    plan: &LaunchPlan,
    opts: &ReplayOptions,
    outcomes: &Path,
) -> Vec<(OsString, OsString)> {
    let mut env = plan.env.clone();
    // Whether the ranks' libc calls are replayed is the recording's, never the shell's.
    if !env.iter().any(|(k, _)| k == "STROBE_LIBC_REPLAY") {
        env.push(("STROBE_LIBC_REPLAY".into(), "1".into()));
    }
    env.push((ENV_REPLAY_OUTCOMES.into(), outcomes.as_os_str().to_owned()));
    // Any process of the user may attach (gdb -p) only when this replay can hold the
    // ranks for a debugger; otherwise only strobe and its descendants (procmem).
    let holds = opts.start_paused
        || opts.until_slice.is_some()
        || !opts.breaks.is_empty()
        || opts.attachable;
    env.push((
        ENV_DEBUG_ATTACH.into(),
        if holds { "1" } else { "0" }.into(),
    ));
    env
}

/// The working directory must exist and be the user's own, not writable by others.
fn check_cwd(cwd: &Path) -> Result<(), ReplayError> {
    let meta = std::fs::metadata(cwd).map_err(|_| ReplayError::NoCwd(cwd.to_path_buf()))?;
    if !meta.is_dir() {
        return Err(ReplayError::NoCwd(cwd.to_path_buf()));
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(unsafe_cwd(format!(
            "the working directory {} belongs to uid {}, not to you (uid {me}); give --cwd DIR",
            cwd.display(),
            meta.uid()
        )));
    }
    // Group-writable is allowed (shared project directories under umask 002); writable
    // by anyone is not: anyone could have planted what the program loads from it.
    if meta.mode() & 0o002 != 0 {
        return Err(unsafe_cwd(format!(
            "the working directory {} is writable by everyone; give --cwd DIR",
            cwd.display()
        )));
    }
    Ok(())
}

/// SHA-256 of the program, memoized per process on the file's identity and change times:
/// `strobe replay` plans (to show and confirm) and then replays, and hashing a large
/// unoptimized binary twice costs half a second.
fn program_sha256(path: &Path) -> std::io::Result<String> {
    use std::collections::HashMap;
    use std::sync::Mutex;
    type Key = (PathBuf, u64, u64, u64, i64, i64, i64, i64);
    static MEMO: Mutex<Option<HashMap<Key, String>>> = Mutex::new(None);
    let m = std::fs::metadata(path)?;
    let key = (
        path.to_path_buf(),
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    );
    if let Some(h) = MEMO
        .lock()
        .ok()
        .and_then(|g| g.as_ref()?.get(&key).cloned())
    {
        return Ok(h);
    }
    let h = strobe_recorder::sha256_file(path)?;
    if let Ok(mut g) = MEMO.lock() {
        g.get_or_insert_with(HashMap::new).insert(key, h.clone());
    }
    Ok(h)
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Decide what the replay of `rec` with `opts` would run. Errors are refusals (exit 2).
pub fn plan(rec: &Recording, opts: &ReplayOptions) -> Result<LaunchPlan, ReplayError> {
    let job = &rec.job;
    let program = absolute(opts.program.as_deref().unwrap_or(&job.program));
    let found = program_sha256(&program).map_err(|source| ReplayError::Io {
        path: program.clone(),
        source,
    })?;
    let verdict = match &job.program_sha256 {
        Some(want) if *want == found => HashVerdict::Match,
        Some(want) => HashVerdict::Different {
            found: found.clone(),
            recorded: want.clone(),
        },
        None => HashVerdict::CannotVerify,
    };
    if verdict != HashVerdict::Match && !(opts.allow_different_binary && opts.program.is_some()) {
        return Err(match &verdict {
            HashVerdict::Different { found, recorded } => ReplayError::DifferentBinary {
                program: program.display().to_string(),
                found: found.clone(),
                recorded: recorded.clone(),
            },
            _ => ReplayError::UnsafeLaunch(format!(
                "the recording has no SHA-256 of its program {}: cannot verify what it would run; name the program yourself with --program PATH --allow-different-binary",
                program.display()
            )),
        });
    }
    let args: Vec<OsString> = match &opts.args {
        Some(a) => a.clone(),
        None if privacy::is_redacted(&job.command) => {
            return Err(ReplayError::UnsafeLaunch(
                "the recording's arguments were redacted (secrets are not stored): give them after --, as in strobe replay FILE -- ARGS...".into(),
            ))
        }
        None => job.command[1..].iter().map(Into::into).collect(),
    };
    let cwd = absolute(opts.cwd.as_deref().unwrap_or(&job.cwd));
    check_cwd(&cwd)?;
    let mut env = Vec::new();
    let mut dropped_env = Vec::new();
    for (k, v) in &job.env {
        if passed_var(k) && !v.contains('\0') {
            env.push((k.into(), v.into()));
        } else {
            dropped_env.push(k.clone());
        }
    }
    for (k, v) in &opts.env {
        env.retain(|(ek, _)| ek != k);
        env.push((k.clone(), v.clone()));
    }
    let known_launch = privacy::is_known_launch(&privacy::launch_id(
        &job.program.display().to_string(),
        job.program_sha256.as_deref(),
        &job.command,
        &job.cwd.display().to_string(),
        &job.env,
    ));
    Ok(LaunchPlan {
        program,
        program_named: opts.program.is_some(),
        verdict,
        args,
        cwd,
        env,
        dropped_env,
        known_launch,
    })
}

/// A new private directory (0700, unpredictable name) for the replay's files that
/// outlive it: under `$XDG_RUNTIME_DIR` when that is the user's own, else `$TMPDIR`.
pub fn private_dir() -> std::io::Result<PathBuf> {
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| {
            // SAFETY: geteuid has no preconditions.
            let me = unsafe { libc::geteuid() };
            std::fs::symlink_metadata(d)
                .is_ok_and(|m| m.is_dir() && m.uid() == me && m.mode() & 0o077 == 0)
        });
    let base = runtime.unwrap_or_else(std::env::temp_dir);
    // A random name created exclusively, mode 0700: nothing can be planted in it.
    let dir = tempfile::Builder::new()
        .prefix("strobe-replay-")
        // Explicitly: tempfile creates directories with the umask's default (0755).
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir_in(&base)?;
    Ok(dir.keep())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_dirs_are_0700_and_unpredictable() {
        use std::os::unix::fs::PermissionsExt;
        let (a, b) = (private_dir().unwrap(), private_dir().unwrap());
        assert_ne!(a, b);
        for d in [&a, &b] {
            let m = std::fs::symlink_metadata(d).unwrap();
            assert!(m.is_dir());
            assert_eq!(m.permissions().mode() & 0o777, 0o700, "{}", d.display());
            std::fs::remove_dir(d).unwrap();
        }
    }

    #[test]
    fn only_allow_listed_variables_pass() {
        for k in ["OMP_NUM_THREADS", "MPIEXEC_TIMEOUT"] {
            assert!(passed_var(k), "{k}");
        }
        for k in [
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "STROBE_JOB_FD",
            "STROBE_SPIN_US",
            "PATH",
            "OMP_",
            "OMP_x",
        ] {
            assert!(!passed_var(k), "{k}");
        }
    }
}
