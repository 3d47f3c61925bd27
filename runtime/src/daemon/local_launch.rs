//! A minimal way to start node daemons, used until the launchers of `daemon/launch/`
//! (helper launchF: ssh, Slurm, Hydra, placement) are merged; it has their shape
//! (`DaemonCommand`, `Launcher`), so switching is a change of imports.
//!
//! - [`LocalLauncher`]: every daemon a child process on this host (`--launcher local`).
//! - [`RshLauncher`]: `CMD HOST COMMAND-LINE` with ssh's semantics (`--launcher-exec`,
//!   `STROBE_RSH`, default `ssh -T`); the daemon runs `strobe node --env-stdin` and reads
//!   its environment (the secret among it) from stdin, never argv.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use super::node_host::{ENV_NODE, ENV_NODES};

/// How to start one node daemon: the program, its arguments, and the environment it
/// needs (secrets only here, never in `args`).
#[derive(Clone, Debug)]
pub struct DaemonCommand {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
}

/// Starts one `strobe node` per host.
pub trait Launcher: Send + Sync {
    fn name(&self) -> &'static str;
    /// Starts node `i` on `hosts[i]`; every daemon gets `cmd.env`, `STROBE_NODE=i` and
    /// `STROBE_NODES=len`. Returns the local child processes.
    fn start(&self, hosts: &[String], cmd: &DaemonCommand) -> std::io::Result<Vec<Child>>;
}

fn node_env(cmd: &DaemonCommand, i: usize, n: usize) -> Vec<(OsString, OsString)> {
    let mut env = cmd.env.clone();
    env.push((ENV_NODE.into(), i.to_string().into()));
    env.push((ENV_NODES.into(), n.to_string().into()));
    env
}

/// Every daemon on this host, a child of the Machine Manager (dies with it).
#[derive(Debug, Default)]
pub struct LocalLauncher;

impl Launcher for LocalLauncher {
    fn name(&self) -> &'static str {
        "local"
    }

    fn start(&self, hosts: &[String], cmd: &DaemonCommand) -> std::io::Result<Vec<Child>> {
        let mut out = Vec::new();
        for i in 0..hosts.len() {
            let mut c = Command::new(&cmd.program);
            c.args(&cmd.args).stdin(Stdio::null());
            for (k, v) in node_env(cmd, i, hosts.len()) {
                c.env(k, v);
            }
            // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                c.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
            out.push(c.spawn()?);
        }
        Ok(out)
    }
}

/// A remote shell with ssh's semantics: `exec... HOST 'command line'`.
#[derive(Debug)]
pub struct RshLauncher {
    pub exec: Vec<String>,
}

/// Quotes one word for a POSIX shell.
pub fn shell_quote(word: &[u8]) -> String {
    let s = String::from_utf8_lossy(word);
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-=:,+@%".contains(&b))
    {
        return s.into_owned();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

impl Launcher for RshLauncher {
    fn name(&self) -> &'static str {
        "ssh"
    }

    fn start(&self, hosts: &[String], cmd: &DaemonCommand) -> std::io::Result<Vec<Child>> {
        let (prog, pre) = self
            .exec
            .split_first()
            .ok_or_else(|| std::io::Error::other("empty --launcher-exec"))?;
        let mut line = vec![shell_quote(cmd.program.as_os_str().as_bytes())];
        line.extend(cmd.args.iter().map(|a| shell_quote(a.as_bytes())));
        line.push("--env-stdin".into());
        let line = line.join(" ");
        let mut out = Vec::new();
        for (i, host) in hosts.iter().enumerate() {
            let mut c = Command::new(prog);
            c.args(pre).arg(host).arg(&line).stdin(Stdio::piped());
            let mut child = c.spawn()?;
            let mut text = Vec::new();
            for (k, v) in node_env(cmd, i, hosts.len()) {
                text.extend_from_slice(k.as_bytes());
                text.push(b'=');
                text.extend_from_slice(v.as_bytes());
                text.push(b'\n');
            }
            text.push(b'\n');
            if let Some(mut stdin) = child.stdin.take() {
                // A remote shell that died already is noticed by the Machine Manager (its
                // daemon never connects).
                let _ = stdin.write_all(&text);
            }
            out.push(child);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(shell_quote(b"/usr/bin/strobe"), "/usr/bin/strobe");
        assert_eq!(shell_quote(b"a b"), "'a b'");
        assert_eq!(shell_quote(b"it's"), "'it'\\''s'");
        assert_eq!(shell_quote(b""), "''");
    }
}
