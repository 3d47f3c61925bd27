//! `strobe record`: run a job like `strobe run` with the SQLite recorder
//! as (part of) its sink.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use clap::Args;
use strobe_recorder::window::{ENV_METRICS, ENV_SCHEDULE_LOG};
use strobe_recorder::{JobInfo, Layer, RecordOptions, Recorder};
use strobe_runtime::checks::Finding;
use strobe_runtime::daemon::wire_sink::{apply_sink_frame, WireSink};
use strobe_runtime::engine::SliceSink;
use strobe_runtime::launcher::JobReport;
use strobe_runtime::launcher::{EXIT_CANNOT_START, EXIT_INTERNAL};
use strobe_runtime::mmds;

use crate::{execute, launch_config, JobArgs};

#[derive(Args)]
pub struct RecordArgs {
    /// The recording to write (an SQLite file).
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    out: PathBuf,
    /// Replace FILE if it exists (a regular file no other `strobe record` is writing;
    /// directories, symlinks, FIFOs and devices are refused).
    #[arg(long)]
    force: bool,
    /// Permission bits of the new recording, octal (default 0600: only you can read it;
    /// e.g. 0640 or 0644 to share). Group- or world-writable modes are refused.
    #[arg(long, value_name = "MODE", value_parser = strobe_recorder::file::parse_mode)]
    mode: Option<u32>,
    /// Store secret-looking arguments (`*password*`, `*token*`, `*secret*`) as given
    /// instead of `<redacted>` (docs/recording.md, "Privacy").
    #[arg(long)]
    no_redact: bool,
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
    /// Also store the bytes delivered to these ranks (every receive's payload, every
    /// collective's result), so each can be replayed alone (`strobe replay FILE --rank R`):
    /// a comma-separated list of ranks and ranges (`2`, `0,3`, `4-7`) or `all`.
    /// Costs about one byte of recording per byte received (docs/recording.md).
    #[arg(long, value_name = "RANKS", value_parser = parse_capture)]
    capture_payloads: Option<CaptureRanks>,
    #[command(flatten)]
    job: JobArgs,
    /// Across hosts: `--hosts`, `--launcher local --nodes K`, ... as for `strobe run`
    /// (docs/multi-host.md, "Recording across hosts").
    #[command(flatten)]
    hosts: crate::multi_host::HostArgs,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<OsString>,
}

pub fn record(a: &RecordArgs) -> Result<i32> {
    let files = FileOptions {
        force: a.force,
        mode: a.mode.unwrap_or(strobe_recorder::file::DEFAULT_MODE),
        redact: !a.no_redact,
    };
    record_to(
        &a.job,
        &a.command,
        &a.out,
        files,
        Layers {
            schedule_log: a.schedule_log,
            metrics: a.metrics,
            histogram_resolution: a.histogram_resolution,
        },
        &Extras {
            capture_payloads: a.capture_payloads.clone(),
            hosts: a.hosts.wanted().then(|| a.hosts.clone()),
            transport: a.hosts.transport,
            ..Extras::default()
        },
    )
}

/// The ranks of `--capture-payloads`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CaptureRanks {
    All,
    /// Ascending, without duplicates.
    Some(Vec<u32>),
}

impl CaptureRanks {
    /// The ranks of a `ranks`-rank job, or why the list does not fit it.
    pub fn resolve(&self, ranks: u32) -> Result<Vec<u32>> {
        match self {
            CaptureRanks::All => Ok((0..ranks).collect()),
            CaptureRanks::Some(v) => match v.iter().find(|&&r| r >= ranks) {
                Some(r) => Err(anyhow!(
                    "--capture-payloads: rank {r} does not exist in a {ranks}-rank job (0..={})",
                    ranks.saturating_sub(1)
                )),
                None => Ok(v.clone()),
            },
        }
    }
}

/// Parse `--capture-payloads`: `all`, or ranks and ranges separated by commas.
pub fn parse_capture(s: &str) -> Result<CaptureRanks, String> {
    if s.trim() == "all" {
        return Ok(CaptureRanks::All);
    }
    let rank = |t: &str| {
        t.trim()
            .parse::<u32>()
            .map_err(|_| format!("{t:?} is not a rank (give ranks like 2, 0,3, 4-7 or all)"))
    };
    let mut out = Vec::new();
    for part in s.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (rank(a)?, rank(b)?);
                if a > b {
                    return Err(format!("{part:?} is an empty range"));
                }
                out.extend(a..=b);
            }
            None => out.push(rank(part)?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(CaptureRanks::Some(out))
}

/// What is recorded (`--schedule-log`, `--metrics`, `--histogram-resolution`); `None`:
/// the environment's setting, else the default.
#[derive(Clone, Copy, Debug, Default)]
pub struct Layers {
    pub schedule_log: Option<Layer>,
    pub metrics: Option<Layer>,
    pub histogram_resolution: Option<u32>,
}

/// What `strobe hunt` and `strobe explore` add to a recorded run: environment for the
/// ranks (also stored in the recording's `job.env`, so the file says how the run was
/// perturbed), where the ranks' output goes, another sink beside the recorder, and
/// whether to leave out the "recorded N slices" line.
#[derive(Clone, Default)]
pub struct Extras {
    pub env: Vec<(String, String)>,
    pub output: Option<PathBuf>,
    pub sink: Option<Arc<dyn strobe_runtime::engine::SliceSink>>,
    pub quiet: bool,
    /// `--capture-payloads`.
    pub capture_payloads: Option<CaptureRanks>,
    /// Run on node daemons across hosts (`--hosts`, `--launcher local`, ...).
    pub hosts: Option<crate::multi_host::HostArgs>,
    /// `--transport`.
    pub transport: strobe_runtime::transport::select::TransportChoice,
}

/// How the recording file is created (`--force`, `--mode`, `--no-redact`).
#[derive(Clone, Copy, Debug)]
pub struct FileOptions {
    pub force: bool,
    pub mode: u32,
    pub redact: bool,
}

impl FileOptions {
    /// The defaults, with `--force` as given.
    pub fn new(force: bool) -> Self {
        FileOptions {
            force,
            mode: strobe_recorder::file::DEFAULT_MODE,
            redact: true,
        }
    }
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

/// Record `command` into `out`; returns the job's exit status.
pub fn record_to(
    job: &JobArgs,
    command: &[OsString],
    out: &Path,
    files: FileOptions,
    layers: Layers,
    extras: &Extras,
) -> Result<i32> {
    // Checked before the file is created: `--transport verbs` where verbs cannot work
    // says why and writes nothing.
    let transport = match &extras.hosts {
        Some(h) => h.hosts_transport()?,
        None => strobe_runtime::transport::select::resolve_local(
            extras.transport,
            strobe_runtime::launcher::isolate_nodes(),
        )
        .map_err(crate::cli_util::usage)?,
    };
    let mut cfg = launch_config(job, command)?;
    cfg.env
        .extend(extras.env.iter().map(|(k, v)| (k.into(), v.into())));
    cfg.output = extras.output.clone();
    if let Some(h) = &extras.hosts {
        // The job row says where each rank ran.
        crate::multi_host::place(h, &mut cfg)?;
    }
    let mut info = JobInfo::new(&cfg, command);
    info.transport = transport.to_string();
    let no_libc = job
        .no_libc_replay
        .then(|| ("STROBE_LIBC_REPLAY".to_string(), "0".to_string()));
    for (k, v) in extras.env.iter().chain(no_libc.iter()) {
        info.env.retain(|(ek, _)| ek != k);
        info.env.push((k.clone(), v.clone()));
    }
    info.env.sort();
    let opts = RecordOptions {
        schedule_log: Layer::resolve(layers.schedule_log, ENV_SCHEDULE_LOG)
            .map_err(|e| anyhow!(e))?,
        metrics: Layer::resolve(layers.metrics, ENV_METRICS).map_err(|e| anyhow!(e))?,
        mode: files.mode,
        replace: files.force,
        redact: files.redact,
        ..RecordOptions::default()
    };
    cfg.mmds_resolution = mmds_resolution(layers.histogram_resolution, opts.metrics)?;
    // The job row describes the configuration the job runs with (set above).
    info.histogram_resolution = cfg.mmds_resolution;
    // Refused before the file is created.
    let capture = extras
        .capture_payloads
        .as_ref()
        .map(|c| c.resolve(info.ranks))
        .transpose()?;
    // Existence, file type, the lock and --force are the recorder's (strobe_recorder::file).
    let rec = Arc::new(
        Recorder::create(out, &info, opts)
            .with_context(|| format!("creating the recording {}", out.display()))?,
    );
    if let Some(ranks) = &capture {
        rec.capture_payloads(ranks, info.ranks)
            .with_context(|| format!("writing {}", out.display()))?;
    }
    let sink: Arc<dyn strobe_runtime::engine::SliceSink> = match &extras.sink {
        Some(s) => Arc::new(crate::summary::Tee(vec![rec.clone(), s.clone()])),
        None => rec.clone(),
    };
    let loopback = wire_loopback(sink.clone(), capture.as_deref(), &info, opts)?;
    let sink = match &loopback {
        Some(l) => l.sink(),
        None => sink,
    };
    let machine_exit = Mutex::new(None);
    // Across hosts the Machine Manager decides `auto` once the daemons report.
    let decided = Mutex::new(None);
    let daemons = extras.hosts.as_ref().map(|h| {
        let captures = capture.clone().unwrap_or_default();
        crate::multi_host::record_on_daemons(h, captures, &machine_exit, &decided)
    });
    let transport_now = || {
        let d = *decided.lock().unwrap_or_else(|e| e.into_inner());
        d.unwrap_or(transport).to_string()
    };
    let launch = daemons
        .as_ref()
        .map(|l| l as &crate::multi_host::Launch<'_>);
    match execute(job, &cfg, Some(sink), Some(out), launch, &transport_now) {
        Ok((report, checks)) => {
            let t = transport_now();
            if t != info.transport {
                if let Err(e) = rec.set_transport(&t) {
                    eprintln!("strobe: writing the transport to {}: {e}", out.display());
                }
            }
            // On daemons: the Machine Manager's status (a lost node: as for `strobe run`).
            let decided = *machine_exit.lock().unwrap_or_else(|e| e.into_inner());
            let mut code = decided.unwrap_or_else(|| report.exit_code());
            if let Some(l) = &loopback {
                if let Err(e) = l.finish(&report, &checks) {
                    eprintln!("strobe: {e:#}");
                    code = EXIT_INTERNAL;
                }
            }
            // `hunt`'s many runs keep their findings in the recording, unprinted.
            if !extras.quiet {
                crate::print_checks(&checks);
            }
            match rec.write_checks(&checks).and_then(|()| rec.finish(&report)) {
                Ok(n) => {
                    if !extras.quiet {
                        let size = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
                        eprintln!(
                            "strobe: recorded {n} slices to {} ({})",
                            out.display(),
                            crate::progress::size_of(out).unwrap_or_default()
                        );
                        if size > crate::progress::LARGE_RECORDING {
                            eprintln!("{}", crate::progress::lean_hint(size));
                        }
                    }
                    Ok(code)
                }
                Err(e) => {
                    eprintln!("strobe: recording {} failed: {e}", out.display());
                    eprintln!(
                        "strobe: the slices committed before the error are kept; the file's job.message says where it was cut (docs/recording.md, \"Files and privacy\")"
                    );
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

/// Test hook, not a user option: `STROBE_WIRE_LOOPBACK=1` sends every sink call of the
/// recording through a [`WireSink`] as sink frames and back through [`apply_sink_frame`]
/// into the recorder, on this host, exactly as a node daemon's calls reach the Machine
/// Manager's recorder across hosts; the frames' sizes and costs are printed on stderr (one
/// `strobe: wire loopback:` line, docs/multi-host.md "Recording across hosts").
/// `STROBE_WIRE_LOOPBACK=PATH` also writes a direct recording of the same run to PATH (no
/// frames), so a test can check the two are equal row for row (tests/tests/wire_sink.rs).
pub const ENV_WIRE_LOOPBACK: &str = "STROBE_WIRE_LOOPBACK";

struct Loopback {
    wire: Arc<WireSink>,
    /// The direct twin recording (`STROBE_WIRE_LOOPBACK=PATH`).
    direct: Option<(Arc<Recorder>, PathBuf)>,
    /// The first frame the recorder's side could not apply.
    error: Arc<Mutex<Option<String>>>,
    apply_ns: Arc<AtomicU64>,
}

fn wire_loopback(
    inner: Arc<dyn SliceSink>,
    capture: Option<&[u32]>,
    info: &JobInfo,
    opts: RecordOptions,
) -> Result<Option<Loopback>> {
    let Some(v) = std::env::var_os(ENV_WIRE_LOOPBACK).filter(|v| !v.is_empty() && v != "0") else {
        return Ok(None);
    };
    let direct = match v == "1" {
        true => None,
        false => {
            let path = PathBuf::from(v);
            let r = Recorder::create(&path, info, opts)
                .with_context(|| format!("creating the direct twin {}", path.display()))?;
            if let Some(ranks) = capture {
                r.capture_payloads(ranks, info.ranks)?;
            }
            Some((Arc::new(r), path))
        }
    };
    let mut captures = vec![false; info.ranks as usize];
    for &r in capture.unwrap_or_default() {
        if let Some(c) = captures.get_mut(r as usize) {
            *c = true;
        }
    }
    let error = Arc::new(Mutex::new(None));
    let apply_ns = Arc::new(AtomicU64::new(0));
    let (e, ns) = (error.clone(), apply_ns.clone());
    let send = Box::new(move |frame: Vec<u8>| {
        let t = Instant::now();
        let res = apply_sink_frame(&frame, &*inner);
        ns.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        if let Err(err) = res {
            e.lock()
                .expect("loopback error")
                .get_or_insert(err.to_string());
        }
    });
    let wire = WireSink::new(0, captures, send).context("starting the wire loopback")?;
    Ok(Some(Loopback {
        wire: Arc::new(wire),
        direct,
        error,
        apply_ns,
    }))
}

impl Loopback {
    /// The job's sink: the wire, and beside it the direct twin if any.
    fn sink(&self) -> Arc<dyn SliceSink> {
        match &self.direct {
            Some((d, _)) => Arc::new(crate::summary::Tee(vec![self.wire.clone(), d.clone()])),
            None => self.wire.clone(),
        }
    }

    /// Wait for every frame to be applied, print what crossed, finish the twin; fail on a
    /// refused frame.
    fn finish(&self, report: &JobReport, checks: &[Finding]) -> Result<()> {
        self.wire.finish();
        let st = self.wire.stats();
        let per = |n: u64, d: u64| n.checked_div(d).unwrap_or(0);
        eprintln!(
            "strobe: wire loopback: {} frames, {} bytes; {} slice frames, {} bytes ({} B/slice); encode {} ns/frame, decode+apply {} ns/frame",
            st.frames,
            st.bytes,
            st.slice_frames,
            st.slice_bytes,
            per(st.slice_bytes, st.slice_frames),
            per(st.encode_ns, st.frames),
            per(self.apply_ns.load(Ordering::Relaxed), st.frames),
        );
        if let Some((d, path)) = &self.direct {
            d.write_checks(checks)
                .and_then(|()| d.finish(report).map(drop))
                .with_context(|| format!("writing the direct twin {}", path.display()))?;
        }
        match self.error.lock().expect("loopback error").take() {
            Some(e) => Err(anyhow!("wire loopback: a sink frame was refused: {e}")),
            None => Ok(()),
        }
    }
}
