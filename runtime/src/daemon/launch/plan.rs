//! From the user's options to what the Machine Manager starts: which launcher, on which
//! hosts, and the node of each rank. `strobe run|record|replay` maps its command-line
//! options into [`LaunchOptions`] and calls [`LaunchOptions::plan`].
//!
//! Decisions (docs/multi-host.md, "Launching: ssh, Hydra, Slurm"):
//! - `--hosts` and `--hostfile` together are an error (which one would win is a guess);
//! - ssh and Hydra need a host list; Slurm takes the allocation's (`SLURM_JOB_NODELIST`,
//!   hosts without slot counts: even blocks unless `--ppn`), and `--hosts` narrows it;
//! - local runs `local_nodes` daemons on this machine (`--nodes K`), named `local0..`;
//! - hosts that get no rank start no daemon ([`super::placement::drop_unused_hosts`]).

use std::path::PathBuf;

use super::hostfile::{self, Host, HostfileError};
use super::hydra::HydraLauncher;
use super::placement::{self, PlacementError, PlacementOptions};
use super::slurm::SlurmLauncher;
use super::ssh::SshLauncher;
use super::{detect, LaunchError, Launcher, LauncherKind, LocalLauncher};

/// The launch-related options of `strobe run|record|replay`.
#[derive(Clone, Debug, Default)]
pub struct LaunchOptions {
    /// `--launcher NAME`; `None`: [`detect`].
    pub launcher: Option<LauncherKind>,
    /// `--hosts h1,h2:4`.
    pub hosts: Option<String>,
    /// `--hostfile FILE`.
    pub hostfile: Option<PathBuf>,
    /// `--launcher-exec CMD`: the remote shell (ssh) or Hydra's `-launcher-exec`.
    pub launcher_exec: Option<String>,
    /// `--remote-strobe PATH`: the `strobe` binary on the hosts (ssh).
    pub remote_strobe: Option<PathBuf>,
    /// `--ppn`, `--map-by`, `--oversubscribe`.
    pub placement: PlacementOptions,
}

/// What to start: the launcher, the host of each node, the node of each rank.
pub struct LaunchPlan {
    pub launcher: Box<dyn Launcher>,
    pub hosts: Vec<String>,
    pub node_of_rank: Vec<u32>,
}

impl std::fmt::Debug for LaunchPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaunchPlan")
            .field("launcher", &self.launcher.name())
            .field("hosts", &self.hosts)
            .field("node_of_rank", &self.node_of_rank)
            .finish()
    }
}

/// Options that do not make a launch.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Launcher(#[from] LaunchError),
    #[error(transparent)]
    Hosts(#[from] HostfileError),
    #[error(transparent)]
    Placement(#[from] PlacementError),
    #[error("--hosts and --hostfile both name the hosts: give one")]
    HostsTwice,
    #[error("the {0} launcher needs hosts: --hosts h1,h2 or --hostfile FILE")]
    NoHosts(LauncherKind),
    #[error("--hosts {0:?} is not in the Slurm allocation ({1})")]
    NotAllocated(String, String),
}

impl LaunchOptions {
    /// The launcher, hosts and placement for `ranks` ranks; `local_nodes`: how many
    /// daemons the local launcher runs (`--nodes`).
    pub fn plan(&self, ranks: u32, local_nodes: u32) -> Result<LaunchPlan, PlanError> {
        let given = self.given_hosts()?;
        let kind = detect(self.launcher, given.is_some());
        let (launcher, hosts): (Box<dyn Launcher>, Vec<Host>) = match kind {
            LauncherKind::Local => {
                let hosts = (0..local_nodes.max(1))
                    .map(|n| Host::new(&format!("local{n}"), None))
                    .collect();
                (Box::new(LocalLauncher), hosts)
            }
            LauncherKind::Ssh => {
                let launcher =
                    SshLauncher::new(self.launcher_exec.as_deref(), self.remote_strobe.clone())?;
                (Box::new(launcher), given.ok_or(PlanError::NoHosts(kind))?)
            }
            LauncherKind::Hydra => {
                let launcher = HydraLauncher::new(None, self.launcher_exec.as_deref())?;
                (Box::new(launcher), given.ok_or(PlanError::NoHosts(kind))?)
            }
            LauncherKind::Slurm => {
                let allocated = SlurmLauncher::hosts_from_env()?;
                let hosts = slurm_hosts(&allocated, given)?;
                (Box::new(SlurmLauncher::new(None)), hosts)
            }
        };
        let nodes = placement::place(ranks, &hosts, &self.placement)?;
        let (used, node_of_rank) = placement::drop_unused_hosts(&hosts, &nodes);
        Ok(LaunchPlan {
            launcher,
            hosts: hostfile::host_names(&used),
            node_of_rank,
        })
    }

    fn given_hosts(&self) -> Result<Option<Vec<Host>>, PlanError> {
        match (&self.hosts, &self.hostfile) {
            (Some(_), Some(_)) => Err(PlanError::HostsTwice),
            (Some(list), None) => Ok(Some(hostfile::parse_host_list(list)?)),
            (None, Some(path)) => Ok(Some(hostfile::read_hostfile(path)?)),
            (None, None) => Ok(None),
        }
    }
}

/// The allocation's hosts, or the given ones when each is allocated.
fn slurm_hosts(allocated: &[String], given: Option<Vec<Host>>) -> Result<Vec<Host>, PlanError> {
    let Some(given) = given else {
        return Ok(allocated.iter().map(|h| Host::new(h, None)).collect());
    };
    match given.iter().find(|h| !allocated.contains(&h.name)) {
        Some(stray) => Err(PlanError::NotAllocated(
            stray.name.clone(),
            allocated.join(","),
        )),
        None => Ok(given),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::launch::placement::MapBy;

    #[test]
    fn local_plan_is_even_blocks() {
        let plan = LaunchOptions::default().plan(6, 3).unwrap();
        assert_eq!(plan.launcher.name(), "local");
        assert_eq!(plan.hosts, ["local0", "local1", "local2"]);
        assert_eq!(plan.node_of_rank, [0, 0, 1, 1, 2, 2]);
    }

    #[test]
    fn hosts_mean_ssh_and_unused_hosts_start_nothing() {
        let opts = LaunchOptions {
            hosts: Some("a:2,b:2,c:2".into()),
            launcher_exec: Some("rsh".into()),
            ..LaunchOptions::default()
        };
        let plan = opts.plan(3, 1).unwrap();
        assert_eq!(plan.launcher.name(), "ssh");
        assert_eq!(plan.hosts, ["a", "b"]);
        assert_eq!(plan.node_of_rank, [0, 0, 1]);
        let round = LaunchOptions {
            placement: PlacementOptions {
                map_by: MapBy::Node,
                ..PlacementOptions::default()
            },
            ..opts
        };
        assert_eq!(round.plan(4, 1).unwrap().node_of_rank, [0, 1, 2, 0]);
    }

    #[test]
    fn option_errors() {
        let both = LaunchOptions {
            hosts: Some("a".into()),
            hostfile: Some("/etc/hostname".into()),
            ..LaunchOptions::default()
        };
        assert!(matches!(both.plan(1, 1), Err(PlanError::HostsTwice)));
        let hydra = LaunchOptions {
            launcher: Some(LauncherKind::Hydra),
            ..LaunchOptions::default()
        };
        let err = hydra.plan(2, 1).unwrap_err();
        assert!(
            err.to_string().contains("hydra launcher needs hosts"),
            "{err}"
        );
        let over = LaunchOptions {
            hosts: Some("a:1,b:1".into()),
            ..LaunchOptions::default()
        };
        assert!(matches!(over.plan(3, 1), Err(PlanError::Placement(_))));
    }

    #[test]
    fn slurm_hosts_narrow_the_allocation() {
        let allocated = vec!["n1".to_string(), "n2".to_string()];
        let all = slurm_hosts(&allocated, None).unwrap();
        assert_eq!(hostfile::host_names(&all), ["n1", "n2"]);
        let one = slurm_hosts(&allocated, Some(vec![Host::new("n2", None)])).unwrap();
        assert_eq!(hostfile::host_names(&one), ["n2"]);
        let err = slurm_hosts(&allocated, Some(vec![Host::new("x", None)])).unwrap_err();
        assert!(err.to_string().contains("\"x\""), "{err}");
    }
}
