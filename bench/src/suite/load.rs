//! Polling under load (issue 11, item 8; docs/benchmarks-detail.md, "Polling under
//! load"): `exchange 0 5000 1024` on 8 and 2 ranks, each run timed whole (`strobe run`),
//! with no load of ours and then beside two busy loops, under the spin policy and under
//! the old always-poll behaviour (`STROBE_SPIN_US=50`, which bypasses the policy). The
//! issue's target: beside two busy loops, at most 2x the unloaded time on 8 ranks.
//! `scripts/spin-under-load.sh` is the same measurement by hand.

use std::fmt::Write as _;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result};

use super::report::{cell, ratio, ratio_value, Summary, Table, Target};
use super::{Ctx, Doc};

/// Two `sh -c 'while :; do :; done'` loops, killed and reaped when dropped.
struct BusyLoops(Vec<Child>);

impl BusyLoops {
    fn start(n: usize) -> Result<BusyLoops> {
        let mut v = Vec::new();
        for _ in 0..n {
            v.push(
                Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .stdin(Stdio::null())
                    .spawn()
                    .context("starting a busy loop")?,
            );
        }
        Ok(BusyLoops(v))
    }
}

impl Drop for BusyLoops {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Seconds of one `strobe run -n ranks -- exchange 0 iters 1024` (`None` if it failed).
fn once(ctx: &Ctx, ranks: u32, iters: u32, env: &[(&str, &str)]) -> Result<Option<f64>> {
    let exchange = crate::paths::sibling("exchange")?;
    let mut cmd = Command::new(&ctx.runner.strobe);
    cmd.args(["run", "-n", &ranks.to_string(), "--timeout", "300s", "--"])
        .arg(&exchange)
        .args(["0", &iters.to_string(), "1024"])
        .env_remove("STROBE_SPIN_US")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let t = Instant::now();
    let ok = cmd.status().context("running strobe")?.success();
    Ok(ok.then(|| t.elapsed().as_secs_f64()))
}

fn rounds(ctx: &Ctx, ranks: u32, iters: u32, env: &[(&str, &str)]) -> Result<Option<Summary>> {
    let mut v = Vec::new();
    for _ in 0..ctx.rounds {
        if let Some(s) = once(ctx, ranks, iters, env)? {
            v.push(s);
        }
    }
    Ok(Summary::of(&v))
}

pub fn load(ctx: &Ctx, doc: &mut Doc) -> Result<()> {
    let iters = if ctx.quick { 1000 } else { 5000 };
    let _ = writeln!(
        doc.body,
        "\n## Polling under load\n\n`strobe run -n N -- exchange 0 {iters} 1024`, wall time in \
         seconds, with no load of ours and then beside two busy loops (`sh -c 'while :; do :; \
         done'`), rounds: {}. \"always poll\" is `STROBE_SPIN_US=50`, the behaviour before \
         the spin policy (an explicit value bypasses it). The machine's other load is not \
         ours to control: the load average is noted.\n",
        ctx.rounds
    );
    let policies: [(&str, &[(&str, &str)]); 2] = [
        ("spin policy", &[]),
        ("always poll 50 us (before)", &[("STROBE_SPIN_US", "50")]),
    ];
    let mut t = Table::new(&[
        "ranks",
        "policy",
        "unloaded (s)",
        "beside 2 busy loops (s)",
        "loaded / unloaded",
    ]);
    for ranks in [8u32, 2] {
        for (name, env) in policies {
            let unloaded = rounds(ctx, ranks, iters, env)?;
            let loaded = {
                let _busy = BusyLoops::start(2)?;
                rounds(ctx, ranks, iters, env)?
            };
            t.row(vec![
                ranks.to_string(),
                name.to_string(),
                cell(unloaded),
                cell(loaded),
                ratio(loaded, unloaded),
            ]);
            if ranks == 8 && name == "spin policy" {
                let r = ratio_value(loaded, unloaded);
                doc.targets.push(Target {
                    what: "exchange on 8 ranks beside 2 busy loops".into(),
                    goal: "at most 2x the unloaded time".into(),
                    measured: r.map_or("—".into(), |r| format!("{r:.2}x")),
                    met: r.map(|r| r <= 2.0),
                });
            }
        }
    }
    doc.body.push_str(&t.render());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let _ = writeln!(
        doc.body,
        "\nLoad average when the section ended: {}.",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    doc.commands.push(format!(
        "strobe run -n {{8,2}} -- exchange 0 {iters} 1024   # unloaded, then beside 2 busy loops; STROBE_SPIN_US=50 for the old behaviour"
    ));
    Ok(())
}
