//! What a recording keeps about the user (issue 11, item 14) and how a replay knows a
//! recording's launch is one the user made themselves.
//!
//! - Arguments whose name says they are secret are stored as `<redacted>` (see
//!   [`redact_args`]); `strobe record --no-redact` keeps them.
//! - The stored environment is an allow-list ([`STORED_ENV`], `OMP_*`).
//! - Every launch `strobe record` writes is remembered in a per-user list of launch
//!   identities (SHA-256 of program, program hash, command, cwd and environment), so
//!   `strobe replay` can run a recording this user made without asking, and asks (or
//!   needs `--yes`) for any other: a recording someone mailed, or one whose launch fields
//!   were edited. The list is `$XDG_STATE_HOME/strobe/launches` (default
//!   `~/.local/state/strobe/launches`), mode 0600, one hex identity a line.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;

use sha2::{Digest, Sha256};

/// What replaces a secret argument value.
pub const REDACTED: &str = "<redacted>";

/// `STROBE_*` variables a recording stores (strobe's documented switches; never its
/// internal ones such as `STROBE_JOB_FD`), besides `OMP_*`.
pub const STORED_ENV: &[&str] = &[
    "MPIEXEC_TIMEOUT",
    "STROBE_SPIN_US",
    "STROBE_SCHEDULE_LOG",
    "STROBE_METRICS",
    "STROBE_HISTOGRAM_RESOLUTION",
    "STROBE_LOG",
    // `0`: the ranks' time/getpid calls were not recorded (the replay must match).
    "STROBE_LIBC_REPLAY",
];

/// Whether a variable is on the stored allow-list.
pub fn stored_var(k: &str) -> bool {
    STORED_ENV.contains(&k)
        || (k.starts_with("OMP_")
            && k.len() > 4
            && k.bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'))
}

fn secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["password", "passwd", "token", "secret"]
        .iter()
        .any(|w| n.contains(w))
}

/// Redact secret argument values (the program, `command[0]`, is kept):
/// `--password=x`, `-token=x`, `DB_PASSWORD=x` → `NAME=<redacted>`; `--token x`,
/// `-secret x` (a dash-prefixed name with no `=`) → the next argument is `<redacted>`.
/// Names match case-insensitively on `password`, `passwd`, `token`, `secret`.
pub fn redact_args(command: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(command.len());
    let mut hide_next = false;
    for (i, a) in command.iter().enumerate() {
        if i == 0 {
            out.push(a.clone());
            continue;
        }
        if std::mem::take(&mut hide_next) {
            out.push(REDACTED.to_string());
            continue;
        }
        match a.split_once('=') {
            Some((name, _)) if secret_name(name) => out.push(format!("{name}={REDACTED}")),
            Some(_) => out.push(a.clone()),
            None => {
                hide_next = a.starts_with('-') && secret_name(a);
                out.push(a.clone());
            }
        }
    }
    out
}

/// Whether a stored command has redacted arguments.
pub fn is_redacted(command: &[String]) -> bool {
    command.iter().skip(1).any(|a| a.ends_with(REDACTED))
}

/// The identity of a launch: what a replay of it would execute.
pub fn launch_id(
    program: &str,
    program_sha256: Option<&str>,
    command: &[String],
    cwd: &str,
    env: &[(String, String)],
) -> String {
    let v = serde_json::json!([program, program_sha256, command, cwd, env]);
    let h = Sha256::digest(v.to_string().as_bytes());
    h.iter().map(|b| format!("{b:02x}")).collect()
}

/// The per-user list of launches recorded here: under `$XDG_STATE_HOME`, else `$HOME`,
/// else the home directory of the effective uid in /etc/passwd (services and CI
/// runners often have no `$HOME`); `None` when there is none of them.
pub fn launches_file() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_STATE_HOME") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => match std::env::var_os("HOME") {
            Some(h) if !h.is_empty() => PathBuf::from(h),
            _ => passwd_home()?,
        }
        .join(".local/state"),
    };
    Some(base.join("strobe").join("launches"))
}

fn passwd_home() -> Option<PathBuf> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() }.to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() >= 7 && f[2] == me && !f[5].is_empty()).then(|| PathBuf::from(f[5]))
    })
}

/// Remember a launch this user recorded. Best effort: without the list, replays of the
/// recording ask for confirmation, nothing worse.
pub fn remember_launch(id: &str) {
    let Some(path) = launches_file() else { return };
    if is_known_launch(id) {
        return;
    }
    if let Some(dir) = path.parent() {
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir);
    }
    let f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path);
    if let Ok(mut f) = f {
        // One write of one line: appends from concurrent recorders do not interleave.
        let _ = f.write_all(format!("{id}\n").as_bytes());
    }
    trim_launches(&path);
}

/// Keep the list bounded: past [`LAUNCHES_MAX`] bytes, keep the newest half (a forgotten
/// launch only means its replay asks again). Replaced by rename, so readers never see a
/// partial list.
fn trim_launches(path: &std::path::Path) {
    if std::fs::metadata(path).map_or(0, |m| m.len()) <= LAUNCHES_MAX {
        return;
    }
    let Ok(text) = std::fs::read_to_string(path) else {
        return;
    };
    let lines: Vec<&str> = text.lines().collect();
    let keep = lines[lines.len() / 2..].join("\n") + "\n";
    let tmp = path.with_extension(format!("trim-{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(keep.as_bytes()));
    if written.is_ok() {
        let _ = std::fs::rename(&tmp, path);
    } else {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// The size past which the launch list is trimmed (about 60,000 launches).
const LAUNCHES_MAX: u64 = 4 << 20;

/// Whether this user recorded this launch (the list must be the user's own, not
/// writable by others).
pub fn is_known_launch(id: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(path) = launches_file() else {
        return false;
    };
    let Ok(meta) = std::fs::symlink_metadata(&path) else {
        return false;
    };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !meta.is_file() || meta.uid() != me || meta.mode() & 0o022 != 0 {
        return false;
    }
    std::fs::read_to_string(&path).is_ok_and(|s| s.lines().any(|l| l == id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn secrets_are_redacted() {
        let got = redact_args(&v(&[
            "./app",
            "--password=hunter2",
            "--token",
            "abc",
            "DB_SECRET=s",
            "-n",
            "4",
            "--tokenizer=x",
            "plain",
        ]));
        assert_eq!(
            got,
            v(&[
                "./app",
                "--password=<redacted>",
                "--token",
                "<redacted>",
                "DB_SECRET=<redacted>",
                "-n",
                "4",
                "--tokenizer=<redacted>",
                "plain",
            ])
        );
        assert!(is_redacted(&got));
        assert!(!is_redacted(&v(&["./app", "-n", "4"])));
    }

    #[test]
    fn the_launch_list_stays_bounded_and_keeps_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("launches");
        let n = (LAUNCHES_MAX / 65 + 10) as usize;
        let text: String = (0..n).map(|i| format!("{i:064x}\n")).collect();
        std::fs::write(&p, text).unwrap();
        trim_launches(&p);
        let after = std::fs::read_to_string(&p).unwrap();
        assert!((after.len() as u64) < LAUNCHES_MAX);
        assert!(after.ends_with(&format!("{:064x}\n", n - 1)));
        assert!(!after.contains(&format!("{:064x}\n", 0)));
    }

    #[test]
    fn stored_env_is_an_allow_list() {
        assert!(stored_var("OMP_NUM_THREADS"));
        assert!(stored_var("STROBE_SPIN_US"));
        assert!(!stored_var("STROBE_JOB_FD"));
        assert!(!stored_var("LD_PRELOAD"));
        assert!(!stored_var("OMP_"));
    }
}
