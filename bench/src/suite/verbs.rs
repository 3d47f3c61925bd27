//! RDMA (issue 16): two node daemons on this machine (`--launcher local --nodes 2`), one
//! rank each, every byte between them through the verbs transport (loopback through the
//! HCA), next to the same two daemons over the TCP transport: ping-pong latency and
//! bandwidth, and a barrier (one slice across the daemons). Runs only where `strobe doctor`
//! says verbs is usable; otherwise the report says "skipped: no RDMA device" (or the
//! doctor's reason). MPICH is not compared here: across hosts it would need its own RDMA
//! build (Debian's is ch4:ucx), and on one host it uses shared memory.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::Result;

use super::build::Implementation;
use super::report::{cell, ratio, Table};
use super::runner::{value, Config, Launch};
use super::sections::{args, note_run, summ};
use super::{Ctx, Doc};

const VERBS: &str = "strobe, 2 daemons, verbs";
const TCP: &str = "strobe, 2 daemons, tcp";

/// Whether verbs can run here: the device and port `strobe doctor` chose, or why not.
fn availability(strobe: &Path) -> Result<String, String> {
    let has_device =
        std::fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some());
    if !has_device {
        return Err("no RDMA device".into());
    }
    let out = Command::new(strobe)
        .arg("doctor")
        .output()
        .map_err(|e| format!("cannot run strobe doctor: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let verdict = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("verbs:"))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| "strobe doctor printed no verdict".into());
    match verdict.strip_prefix("usable: ") {
        Some(port) if out.status.success() => Ok(port.to_string()),
        _ => Err(format!("verbs {verdict}")),
    }
}

fn configs(ctx: &Ctx, stem: &str) -> Result<Vec<Config>> {
    let program = ctx.binary(Implementation::Strobe, stem)?;
    let daemons = |transport: &str| {
        Launch::StrobeRun(
            [
                "--launcher",
                "local",
                "--nodes",
                "2",
                "--transport",
                transport,
            ]
            .map(String::from)
            .to_vec(),
        )
    };
    Ok(vec![
        Config {
            label: VERBS.into(),
            launch: daemons("verbs"),
            program: program.clone(),
        },
        Config {
            label: TCP.into(),
            launch: daemons("tcp"),
            program,
        },
    ])
}

pub fn verbs(ctx: &Ctx, doc: &mut Doc) -> Result<()> {
    let _ = writeln!(doc.body, "## RDMA (verbs)\n");
    let port = match availability(&ctx.runner.strobe) {
        Ok(port) => port,
        Err(why) => {
            let _ = writeln!(doc.body, "skipped: {why}\n");
            return Ok(());
        }
    };
    let _ = writeln!(
        doc.body,
        "`strobe run --launcher local --nodes 2 --transport verbs` (two node daemons on this \
         machine, loopback through {port}) against the same daemons with `--transport tcp`, \
         one rank per daemon.\n"
    );
    pingpong(ctx, doc)?;
    barrier(ctx, doc)
}

fn pingpong(ctx: &Ctx, doc: &mut Doc) -> Result<()> {
    let cfgs = configs(ctx, "bench_pingpong")?;
    let sizes = ["8", "1024", "65536", "1048576", "4194304"];
    let reps = if ctx.quick { "reps=10" } else { "reps=100" };
    let a = args(&[&format!("sizes={}", sizes.join(",")), reps, "window=8"]);
    let s = ctx.runner.alternate(&cfgs, 2, &a, ctx.rounds);
    note_run(doc, "p2p over verbs", &s);
    let mut t = Table::new(&[
        "bytes",
        "verbs latency (us)",
        "tcp latency (us)",
        "verbs bw (MB/s)",
        "tcp bw (MB/s)",
        "bw verbs / tcp",
    ]);
    for b in sizes {
        let get = |label: &str, metric: &str, unit: &str| {
            summ(&s, label, |r| value(r, metric, &[("bytes", b)], unit))
        };
        let (vl, tl) = (get(VERBS, "latency", "usec"), get(TCP, "latency", "usec"));
        let (vb, tb) = (get(VERBS, "bw_uni", "mbps"), get(TCP, "bw_uni", "mbps"));
        t.row(vec![
            b.into(),
            cell(vl),
            cell(tl),
            cell(vb),
            cell(tb),
            ratio(vb, tb),
        ]);
    }
    let _ = writeln!(
        doc.body,
        "### Ping-pong between two daemons\n\n{}",
        t.render()
    );
    Ok(())
}

/// A barrier across the two daemons: one slice with a collective, the verbs transport's
/// empty-slice cost.
fn barrier(ctx: &Ctx, doc: &mut Doc) -> Result<()> {
    let cfgs = configs(ctx, "bench_collectives")?;
    let reps = if ctx.quick { "reps=10" } else { "reps=200" };
    let a = args(&["sizes=8", reps]);
    let s = ctx.runner.alternate(&cfgs, 2, &a, ctx.rounds);
    note_run(doc, "barrier over verbs", &s);
    let get = |label: &str| summ(&s, label, |r| value(r, "barrier", &[], "usec"));
    let (v, t_) = (get(VERBS), get(TCP));
    let mut t = Table::new(&["verbs barrier (us)", "tcp barrier (us)", "verbs / tcp"]);
    t.row(vec![cell(v), cell(t_), ratio(v, t_)]);
    let _ = writeln!(
        doc.body,
        "### Barrier between two daemons (one slice)\n\n{}",
        t.render()
    );
    Ok(())
}
