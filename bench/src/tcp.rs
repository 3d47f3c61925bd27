//! The TCP transport (runtime/src/transport/tcp.rs): the cost of an empty slice versus the
//! number of node endpoints over loopback, and latency and bandwidth between two
//! `scripts/hosts.sh` test hosts (separate network namespaces on a bridge).
//!
//! An *empty slice* here is the transport work a slice needs when nobody posted anything:
//! every node sends its (empty, 16-byte) descriptor batch to every node with one all-node
//! Xfer-And-Signal and waits for everybody's; then node 0, the Strobe Sender, checks with
//! one Compare-And-Write that every node finished the slice (`done >= k` on all nodes) and
//! writes the new slice number everywhere, and opens it with an all-node Xfer-And-Signal.
//! Node 0 retries the Compare-And-Write while a node is still behind.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use strobe_runtime::transport::auth::{JobSecret, SECRET_ENV};
use strobe_runtime::transport::tcp::{TcpBinding, TcpConfig, TcpEndpoint};
use strobe_runtime::transport::{CmpOp, EventId, NodeSet, Transport, Wait};

use crate::paths;

const EV_BATCH: EventId = EventId(0);
const EV_STROBE: EventId = EventId(1);
const SLICE_VAR: usize = 0;
const DONE_VAR: usize = 8;
const BATCHES: usize = 64;

/// One node's side of `slices` empty slices; node 0 returns each slice's duration.
fn run_slices(ep: &dyn Transport, slices: u64) -> Result<Vec<f64>> {
    let (me, n) = (ep.node(), ep.nodes());
    let all = NodeSet::all(n);
    let mut times = Vec::new();
    for k in 1..=slices {
        let t = Instant::now();
        if k > 1 {
            ep.test_event(EV_STROBE, Wait::BlockSpinning)?;
        }
        ep.xfer_and_signal(
            &[0; 16],
            &all,
            BATCHES + me as usize * 16,
            None,
            Some(EV_BATCH),
        )?;
        for _ in 0..n {
            ep.test_event(EV_BATCH, Wait::BlockSpinning)?;
        }
        ep.store_var(DONE_VAR, k)?;
        if me == 0 {
            while !ep.compare_and_write(DONE_VAR, CmpOp::Ge, k, &all, Some((SLICE_VAR, k + 1)))? {
                thread::yield_now();
            }
            if k < slices {
                ep.xfer_and_signal(&[], &all, 0, None, Some(EV_STROBE))?;
            }
            times.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    Ok(times)
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// Empty-slice cost for each endpoint count, all endpoints in this process on loopback.
pub fn empty_slice(endpoints: &[u32], slices: u64) -> Result<String> {
    let mut out = String::new();
    writeln!(
        out,
        "### TCP transport: cost of an empty slice (loopback)\n"
    )?;
    writeln!(
        out,
        "Every endpoint in one process, a full mesh of loopback TCP connections. Per slice: \
         one all-node Xfer-And-Signal per node (16-byte batch), one Compare-And-Write strobe \
         at node 0 (retried while a node is behind) and its all-node opening \
         Xfer-And-Signal. {slices} slices after 50 warm-up slices; durations at node 0.\n"
    )?;
    writeln!(
        out,
        "| endpoints | slice p50 (us) | slice p90 (us) | slice p99 (us) | slices/s |"
    )?;
    writeln!(out, "|---:|---:|---:|---:|---:|")?;
    for &n in endpoints {
        let eps = TcpEndpoint::loopback_job(n, 4096, 2)
            .with_context(|| format!("wiring up {n} loopback endpoints"))?;
        let total = slices + 50;
        let mut times = thread::scope(|s| -> Result<Vec<f64>> {
            let handles: Vec<_> = eps
                .iter()
                .map(|ep| s.spawn(move || run_slices(ep, total)))
                .collect();
            let mut first = Vec::new();
            for (i, h) in handles.into_iter().enumerate() {
                let t = h.join().expect("slice thread panicked")?;
                if i == 0 {
                    first = t;
                }
            }
            Ok(first)
        })?;
        times.drain(..50);
        let sum: f64 = times.iter().sum();
        let rate = times.len() as f64 / (sum / 1e6);
        writeln!(
            out,
            "| {n} | {:.0} | {:.0} | {:.0} | {rate:.0} |",
            percentile(&mut times, 0.5),
            percentile(&mut times, 0.9),
            percentile(&mut times, 0.99)
        )?;
        drop(eps);
    }
    Ok(out)
}

// ---- two test hosts -------------------------------------------------------------------------

const SIZES: [usize; 7] = [8, 1024, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20];
const GLOBAL: usize = 4 << 20;

fn iterations(size: usize) -> u32 {
    if size <= 16 << 10 {
        1000
    } else if size <= 256 << 10 {
        200
    } else {
        40
    }
}

/// The hidden `tcp-peer` role: one endpoint process of the link benchmark. Prints its
/// address, reads the address list from stdin, then runs its side.
pub fn peer(node: u32, listen: SocketAddr) -> Result<String> {
    let config = TcpConfig::new(2, GLOBAL, 2, JobSecret::from_env()?);
    let binding = TcpBinding::bind(node, listen, config)?;
    println!("listening {}", binding.local_addr()?);
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    let addrs = line
        .trim()
        .split(',')
        .map(str::parse)
        .collect::<Result<Vec<SocketAddr>, _>>()?;
    let ep = binding.join(&addrs)?;
    if node == 1 {
        echo(&ep)?;
        return Ok(String::new());
    }
    measure(&ep)
}

fn echo(ep: &dyn Transport) -> Result<()> {
    let buf = vec![0u8; GLOBAL];
    for size in SIZES {
        for _ in 0..iterations(size) + 5 {
            ep.test_event(EventId(0), Wait::BlockSpinning)?;
            ep.xfer_and_signal(&buf[..size], &NodeSet::single(0), 0, None, Some(EventId(0)))?;
        }
    }
    // Wait for node 0's end of the bandwidth runs before leaving.
    ep.test_event(EventId(1), Wait::Block)?;
    Ok(())
}

fn measure(ep: &dyn Transport) -> Result<String> {
    let buf = vec![0x5au8; GLOBAL];
    let mut out = String::new();
    writeln!(
        out,
        "| size | ping-pong half round trip (us) | one-way xfer (us) | bandwidth (MB/s) |"
    )?;
    writeln!(out, "|---:|---:|---:|---:|")?;
    let one = NodeSet::single(1);
    let mut pingpong = Vec::new();
    for size in SIZES {
        let n = iterations(size);
        let mut t0 = Instant::now();
        for i in 0..n + 5 {
            if i == 5 {
                t0 = Instant::now();
            }
            ep.xfer_and_signal(&buf[..size], &one, 0, None, Some(EventId(0)))?;
            ep.test_event(EventId(0), Wait::BlockSpinning)?;
        }
        pingpong.push(t0.elapsed().as_secs_f64() * 1e6 / n as f64 / 2.0);
    }
    for (size, half_rtt) in SIZES.iter().zip(pingpong) {
        // Xfer-And-Signal returns once the data is applied remotely: back-to-back calls
        // measure the one-way cost including the acknowledgement.
        let n = iterations(*size);
        let t0 = Instant::now();
        for _ in 0..n {
            ep.xfer_and_signal(&buf[..*size], &one, 0, None, None)?;
        }
        let per = t0.elapsed().as_secs_f64() * 1e6 / n as f64;
        writeln!(
            out,
            "| {} | {half_rtt:.1} | {per:.1} | {:.0} |",
            human(*size),
            *size as f64 / per
        )?;
    }
    ep.xfer_and_signal(&[], &one, 0, None, Some(EventId(1)))?;
    Ok(out)
}

fn human(size: usize) -> String {
    match size {
        s if s >= 1 << 20 => format!("{} MiB", s >> 20),
        s if s >= 1 << 10 => format!("{} KiB", s >> 10),
        s => format!("{s} B"),
    }
}

/// Latency and bandwidth between two endpoint processes in two test hosts (brought up and
/// down with scripts/hosts.sh, instance 199) — or on loopback without root.
pub fn link() -> Result<String> {
    let root = unsafe_is_root();
    let script = paths::repo_root().join("scripts/hosts.sh");
    let mut out = String::new();
    if root {
        writeln!(out, "### TCP transport between two test hosts\n")?;
        writeln!(out, "Two endpoint processes in two `scripts/hosts.sh` hosts (own network and PID namespaces, veth pair through a bridge).\n")?;
        hosts(&script, &["down"])?;
        hosts(&script, &["up", "2"])?;
    } else {
        writeln!(
            out,
            "### TCP transport between two processes (loopback: not root, no test hosts)\n"
        )?;
    }
    let result = link_run(&script, root);
    if root {
        hosts(&script, &["down"])?;
    }
    out.push_str(&result?);
    Ok(out)
}

fn unsafe_is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn hosts(script: &PathBuf, args: &[&str]) -> Result<()> {
    let st = Command::new(script)
        .args(args)
        .env("STROBE_HOSTS_ID", "199")
        .stdout(Stdio::null())
        .status()
        .with_context(|| format!("running {}", script.display()))?;
    if !st.success() {
        bail!("hosts.sh {args:?} failed");
    }
    Ok(())
}

fn link_run(script: &PathBuf, across_hosts: bool) -> Result<String> {
    let me = std::env::current_exe()?;
    let secret = JobSecret::generate()?;
    let mut children: Vec<(Child, BufReader<std::process::ChildStdout>, String)> = Vec::new();
    for node in 0..2u32 {
        let mut cmd = if across_hosts {
            let mut c = Command::new(script);
            c.env("STROBE_HOSTS_ID", "199")
                .args(["exec", &format!("h{}", node + 1)])
                .arg(&me)
                .args([
                    "tcp-peer",
                    &node.to_string(),
                    &format!("10.213.199.{}:7200", node + 1),
                ]);
            c
        } else {
            let mut c = Command::new(&me);
            c.args(["tcp-peer", &node.to_string(), "127.0.0.1:0"]);
            c
        };
        let mut child = cmd
            .env(SECRET_ENV, secret.to_hex())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        let addr = line
            .strip_prefix("listening ")
            .with_context(|| format!("tcp-peer said {line:?}"))?
            .trim()
            .to_string();
        children.push((child, stdout, addr));
    }
    let list = children
        .iter()
        .map(|c| c.2.clone())
        .collect::<Vec<_>>()
        .join(",");
    for (child, _, _) in &mut children {
        writeln!(child.stdin.take().unwrap(), "{list}")?;
    }
    let mut table = String::new();
    for (i, (mut child, mut stdout, _)) in children.into_iter().enumerate() {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut text)?;
        let st = child.wait()?;
        if !st.success() {
            bail!("tcp-peer {i} failed ({st})");
        }
        if i == 0 {
            table = text;
        }
    }
    Ok(table)
}
