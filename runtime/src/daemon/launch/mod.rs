//! Launchers: how the Machine Manager starts one `strobe node` daemon per host.
//!
//! Launching goes through the engines a cluster already has (issue 15, item 2):
//! - [`ssh::SshLauncher`]: `CMD HOST strobe node --env-stdin` per host, CMD from
//!   `--launcher-exec`, `STROBE_RSH` or `ssh -T -o BatchMode=yes`; the environment (the job
//!   secret among it) goes as `KEY=VALUE` lines on the daemon's stdin, never in argv;
//! - [`hydra::HydraLauncher`]: one `mpiexec.hydra -hosts ... -ppn 1 strobe node --pmi`; the
//!   daemons find each other through PMI-1's key-value space ([`pmi::Pmi`]);
//! - [`slurm::SlurmLauncher`]: inside an allocation, one `srun --ntasks-per-node=1` step;
//! - [`LocalLauncher`]: every daemon on this machine (`--nodes K` on one host).
//!
//! [`detect`] picks one; [`hostfile`] reads `host[:slots]` files and [`placement`] decides
//! the node of each rank; [`plan::LaunchOptions::plan`] puts the three together. A daemon learns its node index with [`node_index_from_env`],
//! whichever launcher started it.

pub mod hostfile;
pub mod hydra;
pub mod placement;
pub mod plan;
pub mod pmi;
pub mod slurm;
pub mod ssh;

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::str::FromStr;

/// The variable naming a daemon's node index (0-based), set by the local and ssh launchers.
pub const NODE_ENV: &str = "STROBE_NODE";
/// The variable naming the number of node daemons in the job.
pub const NODES_ENV: &str = "STROBE_NODES";

/// What every daemon runs: the program (the `strobe` binary), its arguments (`node ...`)
/// and the environment it must receive. Secrets belong in `env`, never in `args`: argv is
/// world-readable (`/proc/PID/cmdline`), and every launcher keeps `env` out of argv.
#[derive(Clone, Debug, Default)]
pub struct DaemonCommand {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
}

/// Starts the node daemons of one job.
pub trait Launcher: Send + Sync {
    fn name(&self) -> &'static str;
    /// Start one `strobe node` per entry of `hosts` (node i on hosts[i]); every daemon gets
    /// `cmd.env` (the ssh launcher sends it on stdin), `STROBE_NODE=i` and
    /// `STROBE_NODES=len` (Hydra and Slurm cannot set a per-daemon variable: there the
    /// daemon reads its index from `PMI_RANK` or `SLURM_NODEID`, see
    /// [`node_index_from_env`]). Returns the local child processes (ssh/srun/mpiexec
    /// clients). Their stdin is a pipe left open: a daemon that sees EOF on its stdin knows
    /// the Machine Manager is gone (ssh and srun forward the EOF).
    fn start(&self, hosts: &[String], cmd: &DaemonCommand) -> std::io::Result<Vec<Child>>;
}

/// Which launcher (`--launcher NAME`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LauncherKind {
    Local,
    Ssh,
    Hydra,
    Slurm,
}

impl LauncherKind {
    pub const NAMES: &'static str = "local, ssh, hydra, slurm";
}

impl fmt::Display for LauncherKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LauncherKind::Local => "local",
            LauncherKind::Ssh => "ssh",
            LauncherKind::Hydra => "hydra",
            LauncherKind::Slurm => "slurm",
        })
    }
}

impl FromStr for LauncherKind {
    type Err = LaunchError;
    fn from_str(s: &str) -> Result<Self, LaunchError> {
        match s {
            "local" => Ok(LauncherKind::Local),
            "ssh" | "rsh" => Ok(LauncherKind::Ssh),
            "hydra" | "pmi" => Ok(LauncherKind::Hydra),
            "slurm" => Ok(LauncherKind::Slurm),
            other => Err(LaunchError::UnknownLauncher(other.to_string())),
        }
    }
}

/// A launcher that cannot be configured as asked.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("unknown launcher {0:?} (one of: {names})", names = LauncherKind::NAMES)]
    UnknownLauncher(String),
    #[error("the remote shell command {0:?} is empty or not valid shell words")]
    BadRemoteShell(String),
    #[error("{0} is not set: the Slurm launcher runs inside an allocation (salloc/sbatch)")]
    NotInSlurm(&'static str),
    #[error("the Slurm node list {0:?} is malformed")]
    BadNodeList(String),
}

/// Which launcher to use: `requested` (`--launcher`) wins; else ssh when hosts were given
/// (`--hosts`/`--hostfile`); else Slurm inside an allocation (`SLURM_JOB_ID` set); else
/// local. Hydra is never guessed: `mpiexec` is what starts *us* when it is in charge.
pub fn detect(requested: Option<LauncherKind>, hosts_given: bool) -> LauncherKind {
    detect_in(requested, hosts_given, |k| std::env::var_os(k))
}

/// [`detect`] with the environment as a function (tests).
pub fn detect_in(
    requested: Option<LauncherKind>,
    hosts_given: bool,
    env: impl Fn(&str) -> Option<OsString>,
) -> LauncherKind {
    if let Some(kind) = requested {
        return kind;
    }
    if hosts_given {
        LauncherKind::Ssh
    } else if env("SLURM_JOB_ID").is_some_and(|v| !v.is_empty()) {
        LauncherKind::Slurm
    } else {
        LauncherKind::Local
    }
}

/// This daemon's `(node, nodes)`, from whichever launcher started it: `STROBE_NODE` and
/// `STROBE_NODES` (local, ssh), `PMI_RANK` and `PMI_SIZE` (Hydra or any PMI-1 launcher),
/// `SLURM_NODEID` and `SLURM_NNODES` (srun, one task per node), in that order. `None`
/// when none is set completely or the index is not below the count. A daemon started with
/// `--pmi` should prefer [`pmi::Pmi::rank`]: in Hydra's `PMI_PORT` mode only PMI knows it.
pub fn node_index_from_env() -> Option<(u32, u32)> {
    node_index_in(|k| std::env::var(k).ok())
}

/// [`node_index_from_env`] with the environment as a function (tests).
pub fn node_index_in(env: impl Fn(&str) -> Option<String>) -> Option<(u32, u32)> {
    const PAIRS: [(&str, &str); 3] = [
        (NODE_ENV, NODES_ENV),
        ("PMI_RANK", "PMI_SIZE"),
        ("SLURM_NODEID", "SLURM_NNODES"),
    ];
    PAIRS.iter().find_map(|(index, count)| {
        let index: u32 = env(index)?.trim().parse().ok()?;
        let count: u32 = env(count)?.trim().parse().ok()?;
        (index < count).then_some((index, count))
    })
}

/// Every daemon on this machine, `cmd.env` and the node variables in its environment.
#[derive(Clone, Copy, Debug, Default)]
pub struct LocalLauncher;

impl Launcher for LocalLauncher {
    fn name(&self) -> &'static str {
        "local"
    }

    fn start(&self, hosts: &[String], cmd: &DaemonCommand) -> std::io::Result<Vec<Child>> {
        let mut children = Vec::with_capacity(hosts.len());
        for node in 0..hosts.len() {
            let spawned = Command::new(&cmd.program)
                .args(&cmd.args)
                .envs(cmd.env.iter().map(|(k, v)| (k, v)))
                .env(NODE_ENV, node.to_string())
                .env(NODES_ENV, hosts.len().to_string())
                .stdin(Stdio::piped())
                .spawn();
            match spawned {
                Ok(child) => children.push(child),
                Err(e) => {
                    kill_all(&mut children);
                    return Err(spawn_error(e, "daemon", &cmd.program));
                }
            }
        }
        Ok(children)
    }
}

/// Kills and reaps children already started when a later one fails to start.
pub(crate) fn kill_all(children: &mut Vec<Child>) {
    for child in children.iter_mut() {
        let _ = child.kill();
        let _ = child.wait();
    }
    children.clear();
}

/// Why a launcher's program did not start. A program that does not exist keeps the kind
/// `NotFound` and says so in the words the Machine Manager prints (`launcher-exec 'rsh':
/// not found`; exit 127, as a shell's "command not found").
pub(crate) fn spawn_error(
    e: std::io::Error,
    role: &str,
    program: &dyn AsRef<std::ffi::OsStr>,
) -> std::io::Error {
    let program = program.as_ref().to_string_lossy();
    match e.kind() {
        std::io::ErrorKind::NotFound => {
            std::io::Error::new(e.kind(), format!("{role} '{program}': not found"))
        }
        kind => std::io::Error::new(kind, format!("starting {program:?}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn detection_order() {
        let slurm = |k: &str| (k == "SLURM_JOB_ID").then(|| OsString::from("42"));
        let none = |_: &str| None;
        assert_eq!(detect_in(None, false, none), LauncherKind::Local);
        assert_eq!(detect_in(None, false, slurm), LauncherKind::Slurm);
        assert_eq!(detect_in(None, true, slurm), LauncherKind::Ssh);
        assert_eq!(
            detect_in(Some(LauncherKind::Hydra), true, slurm),
            LauncherKind::Hydra
        );
        assert_eq!(
            detect_in(Some(LauncherKind::Local), false, slurm),
            LauncherKind::Local
        );
    }

    #[test]
    fn launcher_names_parse() {
        for kind in [
            LauncherKind::Local,
            LauncherKind::Ssh,
            LauncherKind::Hydra,
            LauncherKind::Slurm,
        ] {
            assert_eq!(kind.to_string().parse::<LauncherKind>().unwrap(), kind);
        }
        let err = "mpirun".parse::<LauncherKind>().unwrap_err().to_string();
        assert!(err.contains("\"mpirun\"") && err.contains("hydra"), "{err}");
    }

    #[test]
    fn node_index_sources() {
        assert_eq!(node_index_in(env_of(&[])), None);
        let strobe = [
            ("STROBE_NODE", "2"),
            ("STROBE_NODES", "3"),
            ("PMI_RANK", "0"),
        ];
        assert_eq!(node_index_in(env_of(&strobe)), Some((2, 3)));
        let pmi = [("PMI_RANK", "1"), ("PMI_SIZE", "4"), ("SLURM_NODEID", "0")];
        assert_eq!(node_index_in(env_of(&pmi)), Some((1, 4)));
        let slurm = [("SLURM_NODEID", "0"), ("SLURM_NNODES", "2")];
        assert_eq!(node_index_in(env_of(&slurm)), Some((0, 2)));
        // Incomplete or inconsistent pairs are skipped, not trusted.
        let bad = [
            ("STROBE_NODE", "3"),
            ("STROBE_NODES", "3"),
            ("PMI_RANK", "x"),
        ];
        assert_eq!(node_index_in(env_of(&bad)), None);
    }
}
