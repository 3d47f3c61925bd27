//! One TCP transport endpoint as a process, for the multi-process and multi-host tests
//! (tests/tests/hosts.rs) and for trying the transport by hand.
//!
//! ```text
//! STROBE_JOB_SECRET=<64 hex> tcp_endpoint NODE NODES LISTEN_ADDR SCENARIO
//! ```
//!
//! The rendezvous is the caller's, as a launcher's would be: the endpoint binds
//! LISTEN_ADDR (port 0: any), prints `listening ADDR`, then reads one line from stdin:
//! every node's address, comma-separated, in node order. The secret comes from the
//! environment, never argv. Scenarios:
//!
//! - `exchange`: every node sends a block to every other node (data checked on arrival),
//!   then increments a counter on every node with Compare-And-Write 200 times; prints
//!   `ok node N host HOSTNAME pid PID counter C` when the counter reached 200 × NODES.
//! - `sink`: joins, prints `joined`, then waits on an event that never comes, until the
//!   link breaks (prints `broken: ...`, exit 3) or the process is killed.

use std::io::{BufRead, Write};
use std::net::SocketAddr;

use anyhow::{bail, Context, Result};
use strobe_runtime::transport::auth::JobSecret;
use strobe_runtime::transport::tcp::{TcpBinding, TcpConfig};
use strobe_runtime::transport::{CmpOp, EventId, NodeSet, Transport, Wait};

const GLOBAL: usize = 1 << 20;
const BLOCK: usize = 4096;
const COUNTER: usize = GLOBAL - 8;
const INCREMENTS: u64 = 200;

fn main() {
    if let Err(e) = run() {
        eprintln!("tcp_endpoint: {e:#}");
        std::process::exit(1);
    }
}

fn pattern(node: u32) -> Vec<u8> {
    (0..BLOCK)
        .map(|i| (i as u32 * 7 + node * 13) as u8)
        .collect()
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [node, nodes, listen, scenario] = &args[..] else {
        bail!("usage: STROBE_JOB_SECRET=... tcp_endpoint NODE NODES LISTEN_ADDR exchange|sink");
    };
    let (node, nodes): (u32, u32) = (node.parse()?, nodes.parse()?);
    let listen: SocketAddr = listen.parse().context("LISTEN_ADDR")?;
    let config = TcpConfig::new(nodes, GLOBAL, 2, JobSecret::from_env()?);
    let binding = TcpBinding::bind(node, listen, config)?;
    println!("listening {}", binding.local_addr()?);
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    let peers = line
        .trim()
        .split(',')
        .map(|a| a.parse::<SocketAddr>())
        .collect::<Result<Vec<_>, _>>()
        .context("the address list on stdin")?;
    let ep = binding.join(&peers)?;
    match scenario.as_str() {
        "exchange" => exchange(&ep),
        "sink" => sink(&ep),
        other => bail!("unknown scenario {other}"),
    }
}

fn exchange(ep: &dyn Transport) -> Result<()> {
    let (me, n) = (ep.node(), ep.nodes());
    let others = NodeSet::from_nodes((0..n).filter(|&o| o != me));
    if !others.is_empty() {
        ep.xfer_and_signal(
            &pattern(me),
            &others,
            me as usize * BLOCK,
            None,
            Some(EventId(0)),
        )?;
    }
    for _ in 1..n {
        ep.test_event(EventId(0), Wait::Block)?;
    }
    let mut buf = vec![0; BLOCK];
    for o in (0..n).filter(|&o| o != me) {
        ep.read_local(o as usize * BLOCK, &mut buf)?;
        if buf != pattern(o) {
            bail!("node {me}: the block from node {o} is wrong");
        }
    }
    let all = NodeSet::all(n);
    for _ in 0..INCREMENTS {
        let mut k = ep.load_var(COUNTER)?;
        while !ep.compare_and_write(COUNTER, CmpOp::Eq, k, &all, Some((COUNTER, k + 1)))? {
            k = ep.load_var(COUNTER)?;
        }
    }
    // Everyone is done once the counter reached its total everywhere.
    let total = INCREMENTS * n as u64;
    while !ep.compare_and_write(COUNTER, CmpOp::Eq, total, &all, None)? {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // Leave together, so nobody's goodbye looks like a failure to a peer still working.
    if !others.is_empty() {
        ep.xfer_and_signal(&[], &others, 0, None, Some(EventId(1)))?;
    }
    for _ in 1..n {
        ep.test_event(EventId(1), Wait::Block)?;
    }
    println!(
        "ok node {me} host {} pid {} counter {}",
        hostname(),
        std::process::id(),
        ep.load_var(COUNTER)?
    );
    Ok(())
}

fn sink(ep: &dyn Transport) -> Result<()> {
    println!("joined");
    std::io::stdout().flush()?;
    loop {
        if let Err(e) = ep.test_event(EventId(1), Wait::Block) {
            println!("broken: {e}");
            std::process::exit(3);
        }
    }
}
