//! `strobe run` across node daemons (docs/multi-host.md): the host options, rank
//! placement, and the call into the Machine Manager (`strobe_runtime::daemon::machine`).
//! Without `--hosts`, `--hostfile` or `--launcher local`, `run` keeps its in-process path.

use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use strobe_runtime::daemon::local_launch::{Launcher, LocalLauncher, RshLauncher};
use strobe_runtime::daemon::machine::{run_machine, MachineConfig};
use strobe_runtime::launcher::LaunchConfig;

use crate::cli_util;

/// The remote shell for `--launcher ssh` when neither `--launcher-exec` nor this is set:
/// `ssh -T`.
pub const ENV_RSH: &str = "STROBE_RSH";

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LauncherKind {
    /// ssh (or `--launcher-exec`) with `--hosts`/`--hostfile`; in-process otherwise.
    Auto,
    /// Every node daemon on this host (`--nodes K` daemons).
    Local,
    /// A remote shell per host (`--launcher-exec`, $STROBE_RSH, default `ssh -T`).
    Ssh,
    /// `srun` inside a Slurm allocation.
    Slurm,
    /// MPICH's Hydra (PMI-1).
    Hydra,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MapBy {
    /// Fill each host's slots before the next (block placement).
    Slot,
    /// Round-robin over the hosts.
    Node,
}

#[derive(Args, Clone, Debug)]
pub struct HostArgs {
    /// Run across these hosts, one node daemon each (comma-separated).
    #[arg(long, value_delimiter = ',', conflicts_with = "hostfile")]
    pub hosts: Vec<String>,
    /// Read the hosts from this file: one `host[:slots]` per line, `#` comments.
    #[arg(long)]
    pub hostfile: Option<PathBuf>,
    /// How the node daemons are started.
    #[arg(long, value_enum, default_value = "auto")]
    pub launcher: LauncherKind,
    /// The remote shell, as ssh is called: `CMD HOST COMMAND-LINE` (also $STROBE_RSH).
    #[arg(long, value_name = "CMD")]
    pub launcher_exec: Option<String>,
    /// The address the Machine Manager listens on for the daemons (the interface that
    /// reaches the hosts); each daemon's fabric binds the address it reaches us from.
    #[arg(long, value_name = "ADDR")]
    pub iface: Option<IpAddr>,
    /// Ranks per host (default: -n spread in blocks over the hosts).
    #[arg(long, value_name = "N")]
    pub ppn: Option<u32>,
    /// Rank placement: `slot` (blocks, the default) or `node` (round-robin).
    #[arg(long, value_enum, default_value = "slot")]
    pub map_by: MapBy,
}

impl HostArgs {
    /// Whether this run goes through node daemons.
    pub fn wanted(&self) -> bool {
        !self.hosts.is_empty() || self.hostfile.is_some() || self.launcher != LauncherKind::Auto
    }
}

/// `host[:slots]` lines; blank lines and `#` comments skipped.
pub fn parse_hostfile(text: &str) -> Result<Vec<(String, Option<u32>)>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (host, slots) = match line.split_once(':') {
            Some((h, s)) => {
                let n: u32 = s.trim().parse().map_err(|_| {
                    cli_util::usage(format!(
                        "hostfile line {}: {s:?} is not a slot count",
                        i + 1
                    ))
                })?;
                (h.trim(), Some(n))
            }
            None => (line, None),
        };
        out.push((host.to_string(), slots));
    }
    Ok(out)
}

/// The node of each rank: blocks (`--ppn` per host, or an even split), or round-robin.
pub fn place(ranks: u32, hosts: u32, ppn: Option<u32>, map_by: MapBy) -> Result<Vec<u32>> {
    if let Some(p) = ppn {
        if p == 0 || (p as u64) * (hosts as u64) < ranks as u64 {
            return Err(cli_util::usage(format!(
                "--ppn {p} on {hosts} hosts holds fewer than the {ranks} ranks"
            )));
        }
    }
    Ok((0..ranks)
        .map(|r| match (map_by, ppn) {
            (MapBy::Node, _) => r % hosts,
            (MapBy::Slot, Some(p)) => r / p,
            (MapBy::Slot, None) => (r as u64 * hosts as u64 / ranks as u64) as u32,
        })
        .collect())
}

fn hosts_of(h: &HostArgs, nodes: u32) -> Result<Vec<String>> {
    if let Some(f) = &h.hostfile {
        let text =
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        let hosts: Vec<String> = parse_hostfile(&text)?.into_iter().map(|(h, _)| h).collect();
        if hosts.is_empty() {
            return Err(cli_util::usage(format!("{} names no host", f.display())));
        }
        return Ok(hosts);
    }
    if !h.hosts.is_empty() {
        return Ok(h.hosts.clone());
    }
    // `--launcher local` without hosts: `--nodes` daemons on this host.
    Ok(vec!["localhost".to_string(); nodes as usize])
}

fn launcher_of(h: &HostArgs) -> Result<Box<dyn Launcher>> {
    Ok(match h.launcher {
        LauncherKind::Local => Box::new(LocalLauncher),
        LauncherKind::Auto | LauncherKind::Ssh => {
            let exec = h
                .launcher_exec
                .clone()
                .or_else(|| std::env::var(ENV_RSH).ok())
                .unwrap_or_else(|| "ssh -T".to_string());
            let exec: Vec<String> = exec.split_whitespace().map(String::from).collect();
            if exec.is_empty() {
                return Err(cli_util::usage("--launcher-exec is empty"));
            }
            Box::new(RshLauncher { exec })
        }
        LauncherKind::Slurm | LauncherKind::Hydra => {
            return Err(cli_util::usage(
                format!(
                    "--launcher {:?} is not in this build yet (use ssh or local)",
                    h.launcher
                )
                .to_lowercase(),
            ))
        }
    })
}

/// Runs the job on node daemons; prints the outcome like the one-host path. Returns the
/// exit status.
pub fn run_on_daemons(h: &HostArgs, mut cfg: LaunchConfig) -> Result<i32> {
    let hosts = hosts_of(h, cfg.engine.nodes)?;
    let nodes = hosts.len() as u32;
    if nodes > cfg.engine.ranks {
        return Err(cli_util::usage(format!(
            "{nodes} hosts for {} ranks: every node needs a rank (-n)",
            cfg.engine.ranks
        )));
    }
    cfg.engine.nodes = nodes;
    let placement = place(cfg.engine.ranks, nodes, h.ppn, h.map_by)?;
    let m = MachineConfig {
        launch: cfg,
        hosts,
        placement,
        launcher: launcher_of(h)?,
        iface: h.iface,
        strobe_exe: std::env::current_exe().context("locating the strobe executable")?,
        ship_slices: false,
    };
    let report = run_machine(&m, None)?;
    if let Some(msg) = &report.message {
        eprintln!("strobe: {}", msg.trim_end());
    }
    Ok(report.exit_code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement() {
        assert_eq!(place(6, 3, None, MapBy::Slot).unwrap(), [0, 0, 1, 1, 2, 2]);
        assert_eq!(place(6, 3, None, MapBy::Node).unwrap(), [0, 1, 2, 0, 1, 2]);
        assert_eq!(place(5, 3, Some(2), MapBy::Slot).unwrap(), [0, 0, 1, 1, 2]);
        assert!(place(7, 3, Some(2), MapBy::Slot).is_err());
    }

    #[test]
    fn hostfiles() {
        let h = parse_hostfile("# cluster\nh1:4\n\n h2 \nh3:2 # fast\n").unwrap();
        assert_eq!(
            h,
            [
                ("h1".to_string(), Some(4)),
                ("h2".to_string(), None),
                ("h3".to_string(), Some(2))
            ]
        );
        assert!(parse_hostfile("h1:x\n").is_err());
    }
}
