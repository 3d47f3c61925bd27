//! The ssh launcher: `CMD HOST strobe node ... --env-stdin` per host.
//!
//! ssh's semantics: the words after the host are joined with spaces into **one command
//! line** that the remote user's shell parses. So every word (program path, arguments) is
//! quoted for a POSIX shell here, and a path with spaces or `$` reaches the remote program
//! intact. ssh does not carry environment variables (and `SendEnv` needs the server's
//! `AcceptEnv`), and argv is world-readable on both ends: the daemon's environment, the job
//! secret among it, is written as `KEY=VALUE` lines followed by one empty line on the
//! daemon's stdin ([`write_env_lines`]; the daemon reads them with [`read_env_lines`]).
//! The pipe then stays open: when the Machine Manager goes away, ssh closes the remote
//! stdin and the daemon sees EOF.

use std::ffi::{OsStr, OsString};
use std::io::{self, BufRead, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use super::{kill_all, DaemonCommand, LaunchError, Launcher, NODES_ENV, NODE_ENV};

/// The remote shell when neither `--launcher-exec` nor `STROBE_RSH` names one. `-T`: no
/// terminal (stdin carries the environment lines); `BatchMode`: fail instead of asking for
/// a password nobody will type.
pub const DEFAULT_RSH: &str = "ssh -T -o BatchMode=yes";
/// The variable naming the remote shell command when `--launcher-exec` is not given.
pub const RSH_ENV: &str = "STROBE_RSH";
/// The option that makes a daemon read its environment from stdin.
pub const ENV_STDIN_FLAG: &str = "--env-stdin";

/// Starts each daemon with `RSH HOST 'PROGRAM' 'ARGS'... --env-stdin`.
#[derive(Clone, Debug)]
pub struct SshLauncher {
    rsh: Vec<String>,
    remote_program: Option<PathBuf>,
}

impl SshLauncher {
    /// `launcher_exec`: the remote shell command (`--launcher-exec`, shell words: `ssh -p
    /// 2222`), else `STROBE_RSH`, else [`DEFAULT_RSH`]. `remote_program`: the path of
    /// `strobe` on the hosts (`--remote-strobe`); by default the same absolute path as here.
    pub fn new(
        launcher_exec: Option<&str>,
        remote_program: Option<PathBuf>,
    ) -> Result<SshLauncher, LaunchError> {
        let from_env = std::env::var(RSH_ENV).ok().filter(|s| !s.trim().is_empty());
        let line = launcher_exec
            .map(str::to_string)
            .or(from_env)
            .unwrap_or_else(|| DEFAULT_RSH.to_string());
        let rsh = shlex::split(&line)
            .filter(|words| !words.is_empty())
            .ok_or_else(|| LaunchError::BadRemoteShell(line.clone()))?;
        Ok(SshLauncher {
            rsh,
            remote_program,
        })
    }

    /// The remote shell command as words (what runs locally before the host name).
    pub fn rsh(&self) -> &[String] {
        &self.rsh
    }

    /// The one command line the remote shell runs for `cmd`.
    pub fn remote_command_line(&self, cmd: &DaemonCommand) -> io::Result<String> {
        let program = self.remote_program.as_deref().unwrap_or(&cmd.program);
        let mut words = vec![utf8(program.as_os_str())?];
        for arg in &cmd.args {
            words.push(utf8(arg)?);
        }
        words.push(ENV_STDIN_FLAG);
        shlex::try_join(words).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
    }
}

fn utf8(word: &OsStr) -> io::Result<&str> {
    word.to_str().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{word:?} is not UTF-8: it cannot be quoted for the remote shell"),
        )
    })
}

impl Launcher for SshLauncher {
    fn name(&self) -> &'static str {
        "ssh"
    }

    fn start(&self, hosts: &[String], cmd: &DaemonCommand) -> io::Result<Vec<Child>> {
        let line = self.remote_command_line(cmd)?;
        let mut children = Vec::with_capacity(hosts.len());
        for (node, host) in hosts.iter().enumerate() {
            match start_one(&self.rsh, host, &line, node, hosts.len(), cmd) {
                Ok(child) => children.push(child),
                Err(e) => {
                    kill_all(&mut children);
                    return Err(e);
                }
            }
        }
        Ok(children)
    }
}

fn start_one(
    rsh: &[String],
    host: &str,
    line: &str,
    node: usize,
    nodes: usize,
    cmd: &DaemonCommand,
) -> io::Result<Child> {
    if host.is_empty() || host.starts_with('-') {
        // A host "-oProxyCommand=..." would be an option to ssh.
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{host:?} is not a host name"),
        ));
    }
    let mut child = Command::new(&rsh[0])
        .args(&rsh[1..])
        .arg(host)
        .arg(line)
        .stdin(Stdio::piped())
        .spawn()
        .map_err(|e| super::spawn_error(e, "launcher-exec", &rsh[0]))?;
    let mut env: Vec<(OsString, OsString)> = cmd.env.clone();
    env.push((NODE_ENV.into(), node.to_string().into()));
    env.push((NODES_ENV.into(), nodes.to_string().into()));
    let stdin = child.stdin.as_mut().expect("stdin is piped");
    if let Err(e) = write_env_lines(stdin, &env) {
        let _ = child.kill();
        let _ = child.wait();
        return Err(e);
    }
    Ok(child)
}

/// Writes `KEY=VALUE` lines and one empty line. Refuses what the format cannot carry: an
/// empty key, `=` in a key, a newline or NUL anywhere, non-UTF-8.
pub fn write_env_lines(out: &mut impl Write, env: &[(OsString, OsString)]) -> io::Result<()> {
    let mut text = String::new();
    for (key, value) in env {
        let (k, v) = (utf8(key)?, utf8(value)?);
        let bad = |s: &str| s.contains(['\n', '\r', '\0']);
        if k.is_empty() || k.contains('=') || bad(k) || bad(v) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("environment variable {k:?} cannot be sent as a KEY=VALUE line"),
            ));
        }
        text.push_str(k);
        text.push('=');
        text.push_str(v);
        text.push('\n');
    }
    text.push('\n');
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// The daemon's side of `--env-stdin`: reads `KEY=VALUE` lines up to an empty line. Reads
/// byte by byte up to each newline only (through `BufRead`), so the caller's reader keeps
/// whatever follows. EOF before the empty line, or a line without `=`, is an error.
pub fn read_env_lines(input: &mut impl BufRead) -> io::Result<Vec<(String, String)>> {
    let mut env = Vec::new();
    loop {
        let mut line = String::new();
        if input.read_line(&mut line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "stdin ended before the empty line that ends the environment",
            ));
        }
        let line = line.strip_suffix('\n').unwrap_or(&line);
        if line.is_empty() {
            return Ok(env);
        }
        match line.split_once('=') {
            Some((k, v)) if !k.is_empty() => env.push((k.to_string(), v.to_string())),
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("environment line {:?} is not KEY=VALUE", line),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_command_line_is_quoted_for_the_remote_shell() {
        let ssh = SshLauncher::new(Some("ssh -p 2222 -o 'BatchMode yes'"), None).unwrap();
        assert_eq!(ssh.rsh(), ["ssh", "-p", "2222", "-o", "BatchMode yes"]);
        let cmd = DaemonCommand {
            program: "/opt/my tools/strobe".into(),
            args: vec!["node".into(), "--label".into(), "it's $HOME".into()],
            env: vec![],
        };
        let line = ssh.remote_command_line(&cmd).unwrap();
        assert_eq!(
            shlex::split(&line).unwrap(),
            [
                "/opt/my tools/strobe",
                "node",
                "--label",
                "it's $HOME",
                "--env-stdin"
            ]
        );
        let remote = SshLauncher::new(Some("rsh"), Some("/usr/local/bin/strobe".into())).unwrap();
        assert!(remote
            .remote_command_line(&cmd)
            .unwrap()
            .starts_with("/usr/local/bin/strobe node"));
    }

    #[test]
    fn bad_remote_shell_is_refused() {
        for bad in ["", "   ", "ssh 'unterminated"] {
            assert!(matches!(
                SshLauncher::new(Some(bad), None),
                Err(LaunchError::BadRemoteShell(_))
            ));
        }
    }

    #[test]
    fn env_lines_round_trip() {
        let env: Vec<(OsString, OsString)> = vec![
            ("STROBE_JOB_SECRET".into(), "00ff".into()),
            ("EMPTY".into(), "".into()),
            ("WITH_EQ".into(), "a=b c".into()),
        ];
        let mut buf = Vec::new();
        write_env_lines(&mut buf, &env).unwrap();
        buf.extend_from_slice(b"after\n");
        let mut input = io::Cursor::new(buf);
        let read = read_env_lines(&mut input).unwrap();
        let expect: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_str().unwrap().into(), v.to_str().unwrap().into()))
            .collect();
        assert_eq!(read, expect);
        let mut rest = String::new();
        input.read_line(&mut rest).unwrap();
        assert_eq!(rest, "after\n");
    }

    #[test]
    fn env_lines_refuse_what_they_cannot_carry() {
        for (k, v) in [("A", "x\ny"), ("", "v"), ("A=B", "v")] {
            let env = vec![(OsString::from(k), OsString::from(v))];
            assert!(
                write_env_lines(&mut Vec::new(), &env).is_err(),
                "{k:?}={v:?}"
            );
        }
        let mut truncated = io::Cursor::new(b"A=1\n".to_vec());
        assert!(read_env_lines(&mut truncated).is_err());
        let mut no_eq = io::Cursor::new(b"A\n\n".to_vec());
        assert!(read_env_lines(&mut no_eq).is_err());
    }
}
