//! Across hosts (issue 15): two `scripts/hosts.sh` test hosts (own network, PID and UTS
//! namespaces on a bridge, instance 198), strobe's node daemons against MPICH over TCP
//! between the same two namespaces (each host has its own name, so MPICH's Nemesis takes
//! its TCP path): ping-pong latency and bandwidth, a barrier (one slice across hosts), and
//! the recording overhead across hosts next to one host's. Needs root; skipped otherwise.

use std::fmt::Write as _;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use super::build::Implementation;
use super::report::{cell, ratio, ratio_value, Table, Target};
use super::runner::{value, Config, Launch};
use super::sections::{args, note_run, summ};
use super::{Ctx, Doc};
use crate::paths;

const INSTANCE: &str = "198";
const STROBE_HOSTS: &str = "strobe, 2 hosts";
const MPICH_HOSTS: &str = "mpich, 2 hosts";
const ONE_HOST: &str = "strobe, 1 host";

fn hosts_sh(args: &[&str]) -> Result<String> {
    let script = paths::repo_root().join("scripts/hosts.sh");
    let out = Command::new(&script)
        .args(args)
        .env("STROBE_HOSTS_ID", INSTANCE)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        bail!("hosts.sh {args:?} failed");
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

pub fn hosts(ctx: &Ctx, doc: &mut Doc) -> Result<()> {
    let _ = writeln!(doc.body, "## Across hosts (2 test hosts)\n");
    if !is_root() {
        let _ = writeln!(
            doc.body,
            "skipped: needs root (network and PID namespaces)\n"
        );
        return Ok(());
    }
    hosts_sh(&["down"])?;
    let printed = hosts_sh(&["up", "2"])?;
    let res = measure(ctx, doc, &printed);
    hosts_sh(&["down"])?;
    res
}

/// The `--launcher-exec` script of the instance, from the options line `up` prints.
fn rsh_of(printed: &str) -> Result<String> {
    let line = printed.lines().last().unwrap_or_default();
    let words: Vec<&str> = line.split_whitespace().collect();
    words
        .iter()
        .position(|w| *w == "--launcher-exec")
        .and_then(|i| words.get(i + 1))
        .map(|s| s.to_string())
        .with_context(|| format!("no --launcher-exec in hosts.sh's options: {line:?}"))
}

fn configs(ctx: &Ctx, stem: &str, rsh: &str) -> Result<Vec<Config>> {
    let across = ["--hosts", "h1,h2", "--launcher-exec", rsh].map(String::from);
    let mut v = vec![Config {
        label: STROBE_HOSTS.into(),
        launch: Launch::StrobeRun(across.to_vec()),
        program: ctx.binary(Implementation::Strobe, stem)?,
    }];
    // MPICH across the test hosts only in full runs: in the quick smoke test (CI) one of
    // its runs hung now and then (Debian's ch4:ucx over TCP between two namespaces, a
    // collective never returning), and a hung comparison would fail the suite for MPICH's
    // sake.
    if ctx.mpich && !ctx.quick {
        v.push(Config {
            label: MPICH_HOSTS.into(),
            launch: Launch::MpichHosts {
                hosts: "h1,h2".into(),
                rsh: rsh.into(),
            },
            program: ctx.binary(Implementation::Mpich, stem)?,
        });
    }
    Ok(v)
}

fn measure(ctx: &Ctx, doc: &mut Doc, printed: &str) -> Result<()> {
    let rsh = rsh_of(printed)?;
    let _ = writeln!(
        doc.body,
        "`strobe run --hosts h1,h2 --launcher-exec {rsh}` (one node daemon per host, the \
         data plane through the TCP transport) against `mpiexec.mpich -launcher rsh \
         -hosts h1,h2` (Nemesis over TCP), one rank per host.\n"
    );
    pingpong(ctx, doc, &rsh)?;
    barrier(ctx, doc, &rsh)?;
    recording(ctx, doc, &rsh)
}

fn pingpong(ctx: &Ctx, doc: &mut Doc, rsh: &str) -> Result<()> {
    let cfgs = configs(ctx, "bench_pingpong", rsh)?;
    let sizes = ["8", "1024", "65536", "1048576"];
    let reps = if ctx.quick { "reps=10" } else { "reps=100" };
    let a = args(&[&format!("sizes={}", sizes.join(",")), reps, "window=8"]);
    let s = ctx.runner.alternate(&cfgs, 2, &a, ctx.rounds);
    note_run(doc, "p2p across hosts", &s);
    let mut t = Table::new(&[
        "bytes",
        "strobe latency (us)",
        "mpich latency (us)",
        "strobe bw (MB/s)",
        "mpich bw (MB/s)",
        "bw strobe / mpich",
    ]);
    for b in sizes {
        let get = |label: &str, metric: &str, unit: &str| {
            summ(&s, label, |r| value(r, metric, &[("bytes", b)], unit))
        };
        let (sl, ml) = (
            get(STROBE_HOSTS, "latency", "usec"),
            get(MPICH_HOSTS, "latency", "usec"),
        );
        let (sb, mb) = (
            get(STROBE_HOSTS, "bw_uni", "mbps"),
            get(MPICH_HOSTS, "bw_uni", "mbps"),
        );
        t.row(vec![
            b.into(),
            cell(sl),
            cell(ml),
            cell(sb),
            cell(mb),
            ratio(sb, mb),
        ]);
        if b == "1048576" {
            let r = ratio_value(sb, mb);
            doc.targets.push(Target {
                what: "bandwidth at 1 MiB across 2 test hosts, strobe / MPICH over TCP".into(),
                goal: ">= 0.5".into(),
                measured: r.map_or("—".into(), |r| format!("{r:.2}")),
                met: r.map(|r| r >= 0.5),
            });
        }
    }
    let _ = writeln!(doc.body, "### Ping-pong across hosts\n\n{}", t.render());
    Ok(())
}

/// A barrier across the two hosts: with strobe, one slice with a collective (the strobe,
/// DEM's all-to-all, the microstrobes over TCP): the empty-slice cost across hosts.
fn barrier(ctx: &Ctx, doc: &mut Doc, rsh: &str) -> Result<()> {
    let cfgs = configs(ctx, "bench_collectives", rsh)?;
    let reps = if ctx.quick { "reps=10" } else { "reps=200" };
    let a = args(&["sizes=8", reps]);
    let s = ctx.runner.alternate(&cfgs, 2, &a, ctx.rounds);
    note_run(doc, "barrier across hosts", &s);
    let get = |label: &str| summ(&s, label, |r| value(r, "barrier", &[], "usec"));
    let (st, mp) = (get(STROBE_HOSTS), get(MPICH_HOSTS));
    let mut t = Table::new(&[
        "strobe barrier (us)",
        "mpich barrier (us)",
        "strobe / mpich",
    ]);
    t.row(vec![cell(st), cell(mp), ratio(st, mp)]);
    let _ = writeln!(
        doc.body,
        "### Barrier across hosts (strobe: one slice across 2 daemons)\n\n{}",
        t.render()
    );
    Ok(())
}

/// Recording overhead across hosts (record / run, 2 hosts) next to one host's.
fn recording(ctx: &Ctx, doc: &mut Doc, rsh: &str) -> Result<()> {
    let stem = "synth_barrier";
    let prog = ctx.binary(Implementation::Strobe, stem)?;
    let across = ["--hosts", "h1,h2", "--launcher-exec", rsh].map(String::from);
    let cfg = |label: &str, launch: Launch| Config {
        label: label.into(),
        launch,
        program: prog.clone(),
    };
    let cfgs = vec![
        cfg("run, 2 hosts", Launch::StrobeRun(across.to_vec())),
        cfg("record, 2 hosts", Launch::StrobeRecord(across.to_vec())),
        cfg(ONE_HOST, Launch::StrobeRun(vec![])),
        cfg("record, 1 host", Launch::StrobeRecord(vec![])),
    ];
    let iters = if ctx.quick { "iters=20" } else { "iters=150" };
    let a = args(&["gran=10", iters]);
    let s = ctx.runner.alternate(&cfgs, 2, &a, ctx.rounds);
    note_run(doc, "synth_barrier 10 ms across hosts", &s);
    let wall = |label: &str| summ(&s, label, |r| Some(r.wall.as_secs_f64()));
    let over = |rec: &str, run: &str| ratio_value(wall(rec), wall(run)).map(|r| (r - 1.0) * 100.0);
    let (two, one) = (
        over("record, 2 hosts", "run, 2 hosts"),
        over("record, 1 host", ONE_HOST),
    );
    let pct = |x: Option<f64>| x.map_or("— (failed, see notes)".into(), |x| format!("{x:+.2}%"));
    let mut t = Table::new(&["layout", "run (s)", "record (s)", "recording overhead"]);
    t.row(vec![
        "2 hosts".into(),
        cell(wall("run, 2 hosts")),
        cell(wall("record, 2 hosts")),
        pct(two),
    ]);
    t.row(vec![
        "1 host".into(),
        cell(wall(ONE_HOST)),
        cell(wall("record, 1 host")),
        pct(one),
    ]);
    let _ = writeln!(
        doc.body,
        "### Recording overhead across hosts (synth_barrier, 10 ms granularity)\n\n{}",
        t.render()
    );
    let diff = two.zip(one).map(|(a, b)| a - b);
    doc.targets.push(Target {
        what: "recording overhead across 2 hosts minus one host's (percentage points)".into(),
        goal: "<= 1".into(),
        measured: diff.map_or("—".into(), |d| format!("{d:+.2} pp")),
        met: diff.map(|d| d <= 1.0),
    });
    Ok(())
}
