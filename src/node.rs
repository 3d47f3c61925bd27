//! `strobe node`: one node daemon of a job across hosts, started by the Machine Manager
//! (`strobe run --hosts ...`) through a launcher; never by hand. What it does is
//! `strobe_runtime::daemon::node_host` (docs/multi-host.md, "Node daemons").
//!
//! Its setup comes from the environment (`STROBE_MM_ADDR`, `STROBE_JOB_SECRET`,
//! `STROBE_NODE`, `STROBE_NODES`) or, with `--env-stdin`, from `KEY=VALUE` lines on stdin
//! up to an empty line (ssh passes no environment; the secret never goes in argv).

use std::net::IpAddr;

use anyhow::Result;
use clap::Args;
use strobe_runtime::daemon::node_host::{env_from_stdin, run_daemon, DaemonSetup};

#[derive(Args, Debug)]
pub struct NodeArgs {
    /// Read `KEY=VALUE` environment lines from stdin, up to an empty line.
    #[arg(long)]
    env_stdin: bool,
    /// The address this daemon's fabric endpoint listens on (default: the one its
    /// control connection to the Machine Manager leaves from).
    #[arg(long, value_name = "ADDR")]
    iface: Option<IpAddr>,
    /// Started by a PMI-1 launcher (MPICH's Hydra): the node index comes from `PMI_RANK`
    /// and `PMI_SIZE`; the wire-up still goes through the Machine Manager's control
    /// connection, so nothing else is asked of PMI.
    #[arg(long)]
    pmi: bool,
}

pub fn node(a: &NodeArgs) -> Result<i32> {
    if a.env_stdin {
        // Before any thread exists: changing the environment races with readers of it.
        env_from_stdin(&mut std::io::stdin().lock())?;
    }
    let _ = a.pmi;
    let setup = DaemonSetup::from_env(a.iface)?;
    let node = setup.node;
    match run_daemon(setup, Some(crate::multi_host::build_node_replay)) {
        Ok(code) => Ok(code),
        Err(e) => {
            eprintln!("strobe node {node}: {e}");
            Ok(strobe_runtime::daemon::node_host::EXIT_MM_LOST)
        }
    }
}
