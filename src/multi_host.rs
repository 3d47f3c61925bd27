//! `strobe run` across node daemons (docs/multi-host.md): the host options, rank
//! placement, and the call into the Machine Manager (`strobe_runtime::daemon::machine`).
//! Without `--hosts`, `--hostfile` or `--launcher local`, `run` keeps its in-process path.

use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use strobe_runtime::daemon::launch::placement::{MapBy, PlacementOptions};
use strobe_runtime::daemon::launch::plan::LaunchOptions;
use strobe_runtime::daemon::launch::LauncherKind;
use strobe_runtime::daemon::machine::{run_machine, MachineConfig};
use strobe_runtime::launcher::LaunchConfig;

use crate::cli_util;

/// `--launcher`: `auto` or a launcher's name (checked while parsing the command line).
fn parse_launcher(s: &str) -> Result<String, String> {
    launcher_kind(s).map(|_| s.to_string())
}

fn launcher_kind(s: &str) -> Result<Option<LauncherKind>, String> {
    match s {
        "auto" => Ok(None),
        other => other
            .parse::<LauncherKind>()
            .map(Some)
            .map_err(|e| e.to_string()),
    }
}

fn parse_map_by(s: &str) -> Result<MapBy, String> {
    s.parse()
        .map_err(|e: strobe_runtime::daemon::launch::placement::PlacementError| e.to_string())
}

#[derive(Args, Clone, Debug)]
pub struct HostArgs {
    /// Run across these hosts, one node daemon each: `h1,h2` or with slots `h1:4,h2:4`.
    #[arg(long, conflicts_with = "hostfile")]
    pub hosts: Option<String>,
    /// Read the hosts from this file: `host`, `host:N` or `host slots=N` per line.
    #[arg(long)]
    pub hostfile: Option<PathBuf>,
    /// How the node daemons are started: auto, local, ssh, slurm or hydra (auto: ssh with
    /// hosts, Slurm inside an allocation, else this process runs the job itself).
    #[arg(long, default_value = "auto", value_parser = parse_launcher)]
    pub launcher: String,
    /// The remote shell, as ssh is called: `CMD HOST COMMAND-LINE` (also $STROBE_RSH);
    /// for Hydra, its `-launcher-exec`.
    #[arg(long, value_name = "CMD")]
    pub launcher_exec: Option<String>,
    /// The path of `strobe` on the hosts (default: the same as here).
    #[arg(long, value_name = "PATH")]
    pub remote_strobe: Option<PathBuf>,
    /// The address the Machine Manager listens on for the daemons (the interface that
    /// reaches the hosts); each daemon's fabric binds the address it reaches us from.
    #[arg(long, value_name = "ADDR")]
    pub iface: Option<IpAddr>,
    /// Ranks per host (default: the hosts' slots, else even blocks).
    #[arg(long, value_name = "N")]
    pub ppn: Option<u32>,
    /// Rank placement: `slot` (blocks, the default) or `node` (round robin).
    #[arg(long, default_value = "slot", value_parser = parse_map_by)]
    pub map_by: MapBy,
    /// Allow more ranks than the hosts' slots.
    #[arg(long)]
    pub oversubscribe: bool,
}

impl HostArgs {
    /// Whether this run goes through node daemons: hosts given, a launcher named, or
    /// inside a Slurm allocation with `--launcher slurm`. Without any, `run` keeps its
    /// in-process path (`--nodes K` as threads).
    pub fn wanted(&self) -> bool {
        self.hosts.is_some() || self.hostfile.is_some() || self.kind().is_some()
    }

    fn kind(&self) -> Option<LauncherKind> {
        launcher_kind(&self.launcher).ok().flatten()
    }

    fn options(&self) -> LaunchOptions {
        LaunchOptions {
            launcher: self.kind(),
            hosts: self.hosts.clone(),
            hostfile: self.hostfile.clone(),
            launcher_exec: self.launcher_exec.clone(),
            remote_strobe: self.remote_strobe.clone(),
            placement: PlacementOptions {
                ppn: self.ppn,
                map_by: self.map_by,
                oversubscribe: self.oversubscribe,
            },
        }
    }
}

/// The Machine Manager's configuration for a job on node daemons: the launcher, hosts
/// and placement from the options, `cfg` with its node count and placement set.
/// `ship_slices`: the daemons send their slice records (`strobe record` across hosts
/// passes true and a `FrameSink` to [`run_machine`]).
pub fn machine_config(
    h: &HostArgs,
    mut cfg: LaunchConfig,
    ship_slices: bool,
) -> Result<MachineConfig> {
    let plan = h
        .options()
        .plan(cfg.engine.ranks, cfg.engine.nodes)
        .map_err(|e| cli_util::usage(e.to_string()))?;
    cfg.engine.nodes = plan.hosts.len() as u32;
    cfg.engine.placement = Some(plan.node_of_rank.clone().into());
    Ok(MachineConfig {
        launch: cfg,
        hosts: plan.hosts,
        placement: plan.node_of_rank,
        launcher: plan.launcher,
        iface: h.iface,
        strobe_exe: std::env::current_exe().context("locating the strobe executable")?,
        ship_slices,
    })
}

/// Runs the job on node daemons; prints the outcome like the one-host path. Returns the
/// exit status.
pub fn run_on_daemons(h: &HostArgs, cfg: LaunchConfig) -> Result<i32> {
    let m = machine_config(h, cfg, false)?;
    let report = match run_machine(&m, None) {
        Ok(r) => r,
        Err(e) => {
            // The daemons could not be started or set up: strobe's own failure.
            eprintln!("strobe: cannot run the job on node daemons: {e}");
            return Ok(strobe_runtime::launcher::EXIT_INTERNAL);
        }
    };
    if let Some(msg) = &report.message {
        eprintln!("strobe: {}", msg.trim_end());
    }
    Ok(report.exit_code)
}
