//! `strobe record`: run a job like `strobe run` with the SQLite recorder
//! as (part of) its sink.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use strobe_recorder::window::{ENV_METRICS, ENV_SCHEDULE_LOG};
use strobe_recorder::{JobInfo, Layer, RecordOptions, Recorder};
use strobe_runtime::launcher::{EXIT_CANNOT_START, EXIT_INTERNAL};
use strobe_runtime::mmds;

use crate::{execute, launch_config, JobArgs};

#[derive(Args)]
pub struct RecordArgs {
    /// The recording to write (an SQLite file).
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    out: PathBuf,
    /// Overwrite FILE if it exists.
    #[arg(long)]
    force: bool,
    /// Record descriptors, decisions and blocked ranks: on, off, or a slice window FROM..TO
    /// (default: $STROBE_SCHEDULE_LOG, else on).
    #[arg(long, value_name = "on|off|FROM..TO")]
    schedule_log: Option<Layer>,
    /// Record slice and per-node metrics: on, off, or a slice window FROM..TO
    /// (default: $STROBE_METRICS, else on).
    #[arg(long, value_name = "on|off|FROM..TO")]
    metrics: Option<Layer>,
    /// MMDS histogram resolution: buckets per power of two, 1, 2, 4 or 8 (default:
    /// $STROBE_HISTOGRAM_RESOLUTION, else 4). MMDS is part of the metrics layer: off with it.
    #[arg(long, value_name = "N", value_parser = strobe_runtime::mmds::parse_resolution)]
    histogram_resolution: Option<u32>,
    #[command(flatten)]
    job: JobArgs,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<OsString>,
}

pub fn record(a: &RecordArgs) -> Result<i32> {
    record_to(
        &a.job,
        &a.command,
        &a.out,
        a.force,
        a.schedule_log,
        a.metrics,
        a.histogram_resolution,
    )
}

/// The MMDS resolution: the flag, else the environment, else the default; 0 (off) when the
/// metrics layer is off.
fn mmds_resolution(flag: Option<u32>, metrics: Layer) -> Result<u32> {
    if metrics == Layer::Off {
        return Ok(0);
    }
    if let Some(r) = flag {
        return Ok(r);
    }
    match std::env::var(mmds::ENV_HISTOGRAM_RESOLUTION) {
        Ok(v) => mmds::parse_resolution(&v)
            .map_err(|e| anyhow!("{}: {e}", mmds::ENV_HISTOGRAM_RESOLUTION)),
        Err(_) => Ok(mmds::DEFAULT_RESOLUTION),
    }
}

/// Remove a recording and the SQLite side files a cut-short one may have left.
fn remove_recording(path: &Path) -> Result<()> {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("removing {}", path.display())),
        }
    }
    Ok(())
}

/// Record `command` into `out`; returns the job's exit status.
pub fn record_to(
    job: &JobArgs,
    command: &[OsString],
    out: &Path,
    force: bool,
    schedule_log: Option<Layer>,
    metrics: Option<Layer>,
    histogram_resolution: Option<u32>,
) -> Result<i32> {
    let mut cfg = launch_config(job, command)?;
    let opts = RecordOptions {
        schedule_log: Layer::resolve(schedule_log, ENV_SCHEDULE_LOG).map_err(|e| anyhow!(e))?,
        metrics: Layer::resolve(metrics, ENV_METRICS).map_err(|e| anyhow!(e))?,
        ..RecordOptions::default()
    };
    cfg.mmds_resolution = mmds_resolution(histogram_resolution, opts.metrics)?;
    if out.exists() {
        if !force {
            bail!(
                "{} already exists (use --force to overwrite it)",
                out.display()
            );
        }
        remove_recording(out)?;
    }
    let rec = Arc::new(
        Recorder::create(out, &JobInfo::new(&cfg, command), opts)
            .with_context(|| format!("creating the recording {}", out.display()))?,
    );
    match execute(job, &cfg, Some(rec.clone())) {
        Ok(report) => {
            let code = report.exit_code();
            match rec.finish(&report) {
                Ok(n) => {
                    eprintln!("strobe: recorded {n} slices to {}", out.display());
                    Ok(code)
                }
                Err(e) => {
                    eprintln!("strobe: recording {} failed: {e}", out.display());
                    // Never report success when the recording is not complete.
                    Ok(if code == 0 { EXIT_INTERNAL } else { code })
                }
            }
        }
        Err(e) => {
            // Keep a well-formed file that says why nothing ran.
            let _ = rec.finish_not_started(&format!("{e:#}"), EXIT_CANNOT_START);
            Err(e)
        }
    }
}
