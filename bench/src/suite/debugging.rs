//! The debugging tools' section: runs to the first failure of `strobe hunt` (one search per
//! chaos seed) against `strobe explore` (from a fresh passing recording) on the
//! wildcard-order fixtures (docs/debugging.md). Counts, not times: how many runs each needs.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use super::build::Implementation;
use super::report::Table;
use super::{Ctx, Doc};

/// Runs per hunt before it gives up.
const HUNT_BUDGET: u32 = 300;

/// `strobe ARGS`: exit status and stdout.
fn strobe(args: &[&str]) -> Result<(i32, String)> {
    let o = Command::new(crate::paths::strobe_exe()?)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .context("running strobe")?;
    Ok((
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    ))
}

/// The number after `prefix` on a line of `out`.
fn count(out: &str, prefix: &str) -> Option<u32> {
    out.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|n| n.trim().parse().ok())
}

/// Runs `hunt` needs from `seed` (`None`: none failed within the budget).
fn hunt(prog: &Path, args: &[&str], seed: u64, scratch: &Path) -> Result<Option<u32>> {
    let (p, out, seed, budget) = (
        prog.display().to_string(),
        scratch.join("hunt.db").display().to_string(),
        seed.to_string(),
        HUNT_BUDGET.to_string(),
    );
    let mut all = vec![
        "hunt", "-o", &out, "--force", "--runs", &budget, "--chaos", &seed, "-n", "4", "--", &p,
    ];
    all.extend_from_slice(args);
    let (code, stdout) = strobe(&all)?;
    Ok(if code == 1 {
        count(&stdout, "runs to failure: ")
    } else {
        None
    })
}

/// Runs `explore` needs from a passing recording (recorded until one passes).
fn explore(prog: &Path, args: &[&str], scratch: &Path) -> Result<Option<u32>> {
    let (p, pass, found) = (
        prog.display().to_string(),
        scratch.join("pass.db").display().to_string(),
        scratch.join("found.db").display().to_string(),
    );
    let mut record = vec!["record", "-o", &pass, "--force", "-n", "4", "--", &p];
    record.extend_from_slice(args);
    if !(0..5).any(|_| strobe(&record).is_ok_and(|(code, _)| code == 0)) {
        bail!("no passing run of {p} to explore from in 5 tries");
    }
    let (code, stdout) = strobe(&["explore", &pass, "-o", &found, "--force"])?;
    Ok((code == 1).then(|| count(&stdout, "runs: ")).flatten())
}

fn show(v: Option<u32>) -> String {
    v.map_or(format!("none in {HUNT_BUDGET}"), |n| n.to_string())
}

pub fn debugging(ctx: &Ctx, doc: &mut Doc) -> Result<()> {
    let _ = writeln!(
        doc.body,
        "## Debugging tools: runs to the first failure (4 ranks)\n\n\
         `strobe hunt` with its default chaos (delays up to 5 ms before half of the MPI calls), \
         one search per seed; `strobe explore` from a fresh passing recording each time \
         (docs/debugging.md).\n"
    );
    let scratch = tempfile::tempdir().context("scratch directory")?;
    let seeds: Vec<u64> = if ctx.quick {
        vec![1, 1001, 2001]
    } else {
        (0..10).map(|i| 1 + 1000 * i).collect()
    };
    let mut programs: Vec<(&str, &str, Vec<&str>)> = vec![("heisenbug", "heisenbug", vec![])];
    if !ctx.quick {
        programs.push((
            "wildcard_race bad=3,2,1",
            "wildcard_race",
            vec!["bad=3,2,1"],
        ));
    }
    let mut t = Table::new(&[
        "program",
        "hunt: runs per seed",
        "hunt: mean of the found",
        "explore: runs per recording",
    ]);
    for (what, stem, args) in programs {
        let prog = ctx.binary(Implementation::Strobe, stem)?;
        let hunts = seeds
            .iter()
            .map(|&s| hunt(&prog, &args, s, scratch.path()))
            .collect::<Result<Vec<_>>>()?;
        let found: Vec<u32> = hunts.iter().flatten().copied().collect();
        let mean = if found.is_empty() {
            "-".to_string()
        } else {
            format!(
                "{:.1}",
                f64::from(found.iter().sum::<u32>()) / found.len() as f64
            )
        };
        let explores = (0..if ctx.quick { 1 } else { 3 })
            .map(|_| explore(&prog, &args, scratch.path()))
            .collect::<Result<Vec<_>>>()?;
        let list = |v: &[Option<u32>]| v.iter().map(|&x| show(x)).collect::<Vec<_>>().join(", ");
        t.row(vec![what.into(), list(&hunts), mean, list(&explores)]);
        let line = std::iter::once(stem)
            .chain(args.iter().copied())
            .collect::<Vec<_>>()
            .join(" ");
        doc.commands.push(format!(
            "strobe hunt -o fail.db --runs {HUNT_BUDGET} --chaos SEED -n 4 -- {line}"
        ));
        doc.commands.push(format!(
            "strobe record -o pass.db -n 4 -- {line}; strobe explore pass.db -o found.db"
        ));
    }
    let _ = writeln!(doc.body, "{}", t.render());
    Ok(())
}
