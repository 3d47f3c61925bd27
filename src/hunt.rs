//! `strobe hunt -o FAIL.db -n R -- PROG ARGS`: run a job again and again under injected
//! timing noise until a run fails, and keep that run's recording.
//!
//! Run i (from 0) is recorded with `STROBE_CHAOS=seed=SEED+i,max_us=...,percent=...`
//! (runtime/src/chaos.rs: random delays before MPI calls, a function of the seed, the rank
//! and the call number). The setting is stored in the recording's `job.env` (the recorder's
//! free-form environment column: no new column), so the file says how the run was shaken,
//! and `strobe hunt --chaos SEED+i --runs 1` shakes the same way again. A run fails when it
//! exits non-zero (a rank died or aborted, a deadlock, the timeout) or, with
//! `--until-output`, when its output contains the pattern. Only the first failing run's
//! recording is kept (`-o`); passing runs' recordings and output are discarded. The ranks'
//! output of every run goes to a file; the failing run's is printed at the end.
//!
//! Exit status: 1 a failure was found (its recording is in `-o`), 0 none within the
//! budget (`--runs`, `--time`), 2 bad usage, 130 interrupted (Ctrl-C), 70 strobe itself
//! failed; nothing is kept in the last two.

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use strobe_runtime::chaos::{ChaosSpec, ENV_CHAOS};
use strobe_runtime::launcher::{EXIT_INTERNAL, EXIT_INTERRUPTED};

use crate::record::{self, Extras, FileOptions};
use crate::JobArgs;

pub const EXIT_FOUND: i32 = 1;
pub const EXIT_NOT_FOUND: i32 = 0;

#[derive(Args)]
pub struct HuntArgs {
    /// Where to keep the first failing run's recording.
    #[arg(short = 'o', long = "out", value_name = "FAIL.db")]
    out: PathBuf,
    /// Replace FAIL.db if it exists.
    #[arg(long)]
    force: bool,
    /// At most this many runs.
    #[arg(long, default_value_t = 100)]
    runs: u32,
    /// Stop starting runs after this long, e.g. 60s, 10m.
    #[arg(long, value_parser = crate::cli_util::parse_duration)]
    time: Option<Duration>,
    /// The first run's chaos seed; run i uses SEED + i.
    #[arg(long, value_name = "SEED", default_value_t = 1)]
    chaos: u64,
    /// The longest injected delay, e.g. 5ms.
    #[arg(long, default_value = "5ms", value_parser = crate::cli_util::parse_duration)]
    chaos_max_delay: Duration,
    /// The percentage of MPI calls delayed.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(0..=100))]
    chaos_percent: u32,
    /// A run also fails when its output contains PATTERN (a plain substring).
    #[arg(long, value_name = "PATTERN")]
    until_output: Option<String>,
    #[command(flatten)]
    job: JobArgs,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<OsString>,
}

/// How one run ended.
pub struct RunEnd {
    pub code: i32,
    pub output: Vec<u8>,
}

/// Record one run of `command` into `out` with extra rank environment `env`; the ranks'
/// output is captured (returned), the "recorded" line left out.
pub fn record_quietly(
    job: &JobArgs,
    command: &[OsString],
    out: &Path,
    env: Vec<(String, String)>,
    sink: Option<std::sync::Arc<dyn strobe_runtime::engine::SliceSink>>,
) -> Result<RunEnd> {
    let tmp = tempfile::Builder::new()
        .prefix("strobe-run-output")
        .tempfile()
        .context("creating a file for the ranks' output")?;
    let extras = Extras {
        env,
        output: Some(tmp.path().to_path_buf()),
        sink,
        quiet: true,
        ..Extras::default()
    };
    let code = record::record_to(
        job,
        command,
        out,
        FileOptions::new(true),
        record::Layers::default(),
        &extras,
    )?;
    let output = std::fs::read(tmp.path()).unwrap_or_default();
    Ok(RunEnd { code, output })
}

/// An end that is not the program's: Ctrl-C (130) stops the search, and a failure of
/// strobe itself (70: the runtime, or the recording could not be completed) is no bug of
/// the program to keep. `Some(why)`: stop with that exit status.
pub fn not_the_programs(code: i32) -> Option<&'static str> {
    match code {
        EXIT_INTERRUPTED => Some("interrupted: stopped, nothing kept"),
        EXIT_INTERNAL => Some("strobe itself failed (above): stopped, nothing kept"),
        _ => None,
    }
}

fn contains(hay: &[u8], needle: &str) -> bool {
    let n = needle.as_bytes();
    !n.is_empty() && hay.windows(n.len()).any(|w| w == n)
}

pub fn hunt(a: &HuntArgs) -> Result<i32> {
    if a.runs == 0 {
        bail!(crate::cli_util::UsageError(
            "--runs must be at least 1".into()
        ));
    }
    if a.out.exists() && !a.force {
        bail!(crate::cli_util::UsageError(format!(
            "{} exists (--force replaces it)",
            a.out.display()
        )));
    }
    let dir = a
        .out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // Each run is recorded next to FAIL.db (a rename keeps the failing one).
    let scratch = tempfile::Builder::new()
        .prefix(".strobe-hunt")
        .suffix(".db")
        .tempfile_in(dir)
        .with_context(|| format!("creating a scratch recording in {}", dir.display()))?
        .into_temp_path();
    let tty = std::io::stderr().is_terminal();
    let started = Instant::now();
    let mut done = 0;
    for i in 0..a.runs {
        if a.time.is_some_and(|t| started.elapsed() >= t) {
            break;
        }
        done += 1;
        let spec = ChaosSpec {
            seed: a.chaos.wrapping_add(u64::from(i)),
            max_us: a.chaos_max_delay.as_micros() as u64,
            percent: a.chaos_percent,
        };
        if tty {
            eprint!(
                "\r\x1b[Khunt: run {}/{} (seed {}), {:.1}s, no failure yet",
                i + 1,
                a.runs,
                spec.seed,
                started.elapsed().as_secs_f64()
            );
        }
        let end = record_quietly(
            &a.job,
            &a.command,
            &scratch,
            vec![(ENV_CHAOS.to_string(), spec.to_env())],
            None,
        )?;
        if let Some(why) = not_the_programs(end.code) {
            if tty {
                eprint!("\r\x1b[K");
            }
            eprintln!("strobe hunt: run {}: {why}", i + 1);
            return Ok(end.code);
        }
        let matched = a
            .until_output
            .as_deref()
            .is_some_and(|p| contains(&end.output, p));
        if end.code == 0 && !matched {
            continue;
        }
        if tty {
            eprint!("\r\x1b[K");
        }
        std::io::stdout().write_all(&end.output)?;
        std::fs::rename(&scratch, &a.out)
            .with_context(|| format!("keeping the recording as {}", a.out.display()))?;
        let why = if end.code != 0 {
            format!("exit status {}", end.code)
        } else {
            format!(
                "its output contains {:?}",
                a.until_output.as_deref().unwrap_or("")
            )
        };
        eprintln!(
            "strobe hunt: run {} failed ({why}) after {:.1}s, with {ENV_CHAOS}={}; its \
             recording is {} (replay it: strobe replay {})",
            i + 1,
            started.elapsed().as_secs_f64(),
            spec.to_env(),
            a.out.display(),
            a.out.display()
        );
        println!("runs to failure: {}", i + 1);
        return Ok(EXIT_FOUND);
    }
    if tty {
        eprint!("\r\x1b[K");
    }
    eprintln!(
        "strobe hunt: no failure in {} run(s) ({:.1}s; seeds {}..); nothing kept",
        done,
        started.elapsed().as_secs_f64(),
        a.chaos
    );
    Ok(EXIT_NOT_FOUND)
}
