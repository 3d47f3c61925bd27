//! The Hydra launcher: one `mpiexec.hydra` starts every daemon, one per host.
//!
//! `mpiexec -hosts h1,h2 -ppn 1 -n K [-launcher rsh -launcher-exec CMD]
//! -genvlist A,B,... -genv STROBE_NODES K PROGRAM ARGS... --pmi`. Each daemon (`strobe node
//! --pmi`) learns its node from `PMI_RANK` and reaches the others through PMI's key-value
//! space ([`super::pmi::Pmi`]). The daemon environment is set in **mpiexec's own
//! environment** and named with `-genvlist`, so Hydra copies the values from there: no
//! value (the job secret least of all) is in any argv, mpiexec's or its proxies'.

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use super::{DaemonCommand, LaunchError, Launcher, NODES_ENV};

/// The option that makes a daemon do its wire-up through PMI.
pub const PMI_FLAG: &str = "--pmi";
/// mpiexec programs tried in order when none is named.
pub const MPIEXEC_CANDIDATES: [&str; 2] = ["mpiexec.hydra", "mpiexec.mpich"];

/// Starts the daemons with one Hydra `mpiexec`.
#[derive(Clone, Debug)]
pub struct HydraLauncher {
    mpiexec: PathBuf,
    launcher_exec: Option<String>,
}

impl HydraLauncher {
    /// `mpiexec`: the Hydra mpiexec to run (else the first of [`MPIEXEC_CANDIDATES`] on
    /// `PATH`); `launcher_exec`: Hydra's remote shell (`-launcher rsh -launcher-exec CMD`,
    /// from strobe's `--launcher-exec`); without it Hydra picks its default (ssh).
    pub fn new(
        mpiexec: Option<PathBuf>,
        launcher_exec: Option<&str>,
    ) -> Result<HydraLauncher, LaunchError> {
        let mpiexec = match mpiexec {
            Some(path) => path,
            None => find_on_path(&MPIEXEC_CANDIDATES)
                .unwrap_or_else(|| PathBuf::from(MPIEXEC_CANDIDATES[0])),
        };
        if let Some(exec) = launcher_exec {
            if exec.trim().is_empty() {
                return Err(LaunchError::BadRemoteShell(exec.to_string()));
            }
        }
        Ok(HydraLauncher {
            mpiexec,
            launcher_exec: launcher_exec.map(str::to_string),
        })
    }

    /// The mpiexec command (argv and environment) that starts `cmd` on `hosts`.
    pub fn command(&self, hosts: &[String], cmd: &DaemonCommand) -> io::Result<Command> {
        let names = env_names(&cmd.env)?;
        let mut mpiexec = Command::new(&self.mpiexec);
        mpiexec
            .arg("-hosts")
            .arg(hosts.join(","))
            .args(["-ppn", "1", "-n"])
            .arg(hosts.len().to_string());
        if let Some(exec) = &self.launcher_exec {
            mpiexec.args(["-launcher", "rsh", "-launcher-exec", exec]);
        }
        if !names.is_empty() {
            mpiexec.arg("-genvlist").arg(names.join(","));
        }
        mpiexec
            .args(["-genv", NODES_ENV])
            .arg(hosts.len().to_string())
            .arg(&cmd.program)
            .args(&cmd.args)
            .arg(PMI_FLAG)
            .envs(cmd.env.iter().map(|(k, v)| (k, v)));
        Ok(mpiexec)
    }
}

/// The variable names for `-genvlist` (comma-separated: a name with a comma, or not
/// UTF-8, cannot be listed).
fn env_names(env: &[(OsString, OsString)]) -> io::Result<Vec<&str>> {
    env.iter()
        .map(|(key, _)| match key.to_str() {
            Some(k) if !k.is_empty() && !k.contains([',', '=', ' ']) => Ok(k),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("environment variable {key:?} cannot be named to -genvlist"),
            )),
        })
        .collect()
}

fn find_on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

impl Launcher for HydraLauncher {
    fn name(&self) -> &'static str {
        "hydra"
    }

    fn start(&self, hosts: &[String], cmd: &DaemonCommand) -> io::Result<Vec<Child>> {
        if hosts.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "no host"));
        }
        let child = self
            .command(hosts, cmd)?
            .stdin(Stdio::piped())
            .spawn()
            .map_err(|e| super::spawn_error(e, "launcher", &self.mpiexec))?;
        Ok(vec![child])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_stay_out_of_argv() {
        let hydra =
            HydraLauncher::new(Some("/usr/bin/mpiexec.hydra".into()), Some("/run/x/rsh")).unwrap();
        let cmd = DaemonCommand {
            program: "/opt/strobe".into(),
            args: vec!["node".into()],
            env: vec![
                ("STROBE_JOB_SECRET".into(), "c0ffee".into()),
                ("STROBE_MM_ADDR".into(), "10.0.0.254:7000".into()),
            ],
        };
        let command = hydra.command(&["h1".into(), "h2".into()], &cmd).unwrap();
        let argv: Vec<String> = command
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            argv,
            [
                "-hosts",
                "h1,h2",
                "-ppn",
                "1",
                "-n",
                "2",
                "-launcher",
                "rsh",
                "-launcher-exec",
                "/run/x/rsh",
                "-genvlist",
                "STROBE_JOB_SECRET,STROBE_MM_ADDR",
                "-genv",
                "STROBE_NODES",
                "2",
                "/opt/strobe",
                "node",
                "--pmi"
            ]
        );
        let envs: Vec<_> = command.get_envs().collect();
        assert!(envs.contains(&("STROBE_JOB_SECRET".as_ref(), Some("c0ffee".as_ref()))));
        let bad = DaemonCommand {
            env: vec![("A,B".into(), "x".into())],
            ..cmd
        };
        assert!(hydra.command(&["h1".into()], &bad).is_err());
    }
}
