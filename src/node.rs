//! `strobe node`: one node daemon of a job across hosts. **A skeleton** (docs/multi-host.md,
//! "Next increments"): it joins the job's TCP fabric and leaves it cleanly, but runs no
//! ranks yet; the node manager, the control connection and the launchers come next.
//!
//! The protocol with whoever starts it (the Machine Manager, through ssh, Slurm or PMI):
//! the job secret comes in the environment ([`SECRET_ENV`], never argv) and is removed from
//! the daemon's environment at once, so the ranks it will start do not inherit it; the
//! daemon binds `--listen`, prints `listening ADDR`, reads one line from stdin (every
//! node's address, comma-separated, in node order), joins, waits until every node has
//! joined, prints `joined node I of K`, and then stays in the job until:
//! - its stdin closes (the Machine Manager is gone or ends the job): node 0 tells every
//!   node to stop first; exit 0;
//! - node 0 tells it to stop: exit 0;
//! - a link to another node breaks (a daemon died, a host vanished): exit 3, naming it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use strobe_runtime::transport::auth::{JobSecret, SECRET_ENV};
use strobe_runtime::transport::tcp::{TcpBinding, TcpConfig};
use strobe_runtime::transport::{EventId, NodeSet, Transport, Wait};

/// Signalled once by every node when it joined.
const EV_JOINED: EventId = EventId(0);
/// Node 0 tells the others to leave.
const EV_STOP: EventId = EventId(1);
/// How often a daemon looks at its stdin's state while it waits.
const TICK: Duration = Duration::from_millis(100);
/// Exit status when the job's fabric broke.
pub const EXIT_FABRIC_BROKEN: i32 = 3;

#[derive(Args, Debug)]
pub struct NodeArgs {
    /// This daemon's node index, 0..nodes.
    #[arg(long)]
    node: u32,
    /// Number of node daemons in the job.
    #[arg(long)]
    nodes: u32,
    /// Address to listen on during wire-up (the chosen interface's; port 0 picks a port).
    #[arg(long)]
    listen: SocketAddr,
    /// Bytes of global memory per node.
    #[arg(long, default_value_t = 1 << 20)]
    global_size: usize,
}

pub fn node(a: &NodeArgs) -> Result<i32> {
    let secret = JobSecret::from_env()?;
    // Before any thread exists (changing the environment races with readers of it).
    std::env::remove_var(SECRET_ENV);
    let config = TcpConfig::new(a.nodes, a.global_size, 2, secret);
    let binding = TcpBinding::bind(a.node, a.listen, config)?;
    println!("listening {}", binding.local_addr()?);
    std::io::stdout().flush()?;
    let mut stdin = BufReader::new(std::io::stdin());
    let mut line = String::new();
    stdin.read_line(&mut line)?;
    let peers = line
        .trim()
        .split(',')
        .map(str::parse)
        .collect::<Result<Vec<SocketAddr>, _>>()
        .context("the address list on stdin (comma-separated, in node order)")?;
    let ep = binding.join(&peers)?;
    let others = NodeSet::from_nodes((0..a.nodes).filter(|&n| n != a.node));
    if !others.is_empty() {
        ep.xfer_and_signal(&[], &others, 0, None, Some(EV_JOINED))?;
    }
    for _ in 1..a.nodes {
        ep.test_event(EV_JOINED, Wait::Block)?;
    }
    println!("joined node {} of {}", a.node, a.nodes);
    std::io::stdout().flush()?;

    let stdin_closed = Arc::new(AtomicBool::new(false));
    let flag = stdin_closed.clone();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut stdin.by_ref(), &mut std::io::sink());
        flag.store(true, Ordering::SeqCst);
    });
    loop {
        match ep.test_event(EV_STOP, Wait::Timeout(TICK)) {
            Ok(true) => break,
            Ok(false) => {}
            Err(e) => {
                eprintln!("strobe node {}: the job's fabric broke: {e}", a.node);
                return Ok(EXIT_FABRIC_BROKEN);
            }
        }
        if stdin_closed.load(Ordering::SeqCst) {
            if a.node == 0 && !others.is_empty() {
                ep.xfer_and_signal(&[], &others, 0, None, Some(EV_STOP))?;
            }
            break;
        }
    }
    println!("node {}: left the job", a.node);
    Ok(0)
}
