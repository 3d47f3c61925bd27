//! strobe-replayer: re-executes a recorded job slice by slice so that every rank sees what
//! it saw in the recording (model.md section 4), verifies every slice against the
//! recording, stops and steps on request, and reports the first divergence.
//!
//! The runtime knows nothing of this crate: a replay is a launch with a [`ReplaySource`]
//! (logical slices, quotas, post limits, recorded blocked sets) and a [`Verifier`] sink,
//! and ranks that find `STROBE_REPLAY_OUTCOMES` in their environment take their
//! timing-dependent outcomes from that file instead of the clock and the completion table.
//! [`Controller`] is the control API (pause, step, run to, breakpoints, state, quit);
//! [`socket`] serves it over a local Unix socket (`docs/replay-control.md`).

pub mod alternatives;
pub mod control;
pub mod recording;
pub mod remote;
mod report;
pub mod safety;
pub mod single;
pub mod socket;
pub mod source;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use strobe_recorder::{JobInfo, Layer, RecordError, RecordOptions, Recorder};
use strobe_runtime::checks::{Checked, Checker, Finding};
use strobe_runtime::engine::SliceSink;
use strobe_runtime::launcher::{self, JobOutcome, JobReport, LaunchConfig, LaunchError};
use strobe_runtime::outcome::encode_file;

pub use control::{Bounds, Break, Controller, Event, Pause, Travel};
pub use recording::Recording;
pub use safety::{HashVerdict, LaunchPlan};
pub use single::replay_rank;
pub use source::{Divergence, ReplaySource, Verifier};
/// The outcome of a job report as the recorder names it.
pub use strobe_recorder::outcome_name;

/// `strobe replay` exit status: the replay matched the recording (whatever the recorded job
/// did: a recorded crash that crashes again the same way matched).
pub const EXIT_MATCHED: i32 = 0;
/// The replay diverged from the recording (the report says where).
pub const EXIT_DIVERGED: i32 = 1;
/// The replay could not start (not a recording, damaged, a different binary, ...).
pub const EXIT_CANNOT_START: i32 = 2;
/// Stopped by the user (Ctrl-C, `quit`) before the end.
pub const EXIT_STOPPED: i32 = 130;

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Recording(#[from] RecordError),
    #[error("{program} is not the recorded program (SHA-256 {found}, recorded {recorded}); to replay it anyway name it: --program PATH --allow-different-binary (then confirm)")]
    DifferentBinary {
        program: String,
        found: String,
        recorded: String,
    },
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the working directory {0} does not exist (give --cwd DIR)")]
    NoCwd(PathBuf),
    #[error("refusing to replay: {0}")]
    UnsafeLaunch(String),
    #[error("refusing to replay without confirmation: {0}; check what would run with --dry-run, then pass --yes")]
    NeedsConfirmation(String),
    #[error(transparent)]
    Launch(#[from] LaunchError),
    #[error("the recording to regenerate into: {0}")]
    Regenerate(RecordError),
    #[error("cannot regenerate into the recording being replayed ({0}): write a new file")]
    RegenerateInPlace(PathBuf),
    #[error("{0}")]
    Breakpoint(String),
    /// `--rank R` for a rank whose payloads were not captured (the text says how to).
    #[error("{0}")]
    NotCaptured(String),
    /// A replay package that does not decode (replay across hosts, `remote.rs`).
    #[error(transparent)]
    Remote(#[from] remote::RemoteError),
    #[error("--nodes {nodes}: the recording has {ranks} ranks, so between 1 and {ranks} nodes")]
    Nodes { nodes: u32, ranks: u32 },
    /// The job could not be run on node daemons (`strobe replay --hosts`).
    #[error("cannot run the replay on node daemons: {0}")]
    Daemons(String),
    #[error("the recording was made by scheduler version {recorded}, but this strobe runs scheduler version {running}: its decisions cannot be replayed; use a strobe with scheduler version {recorded}")]
    SchedulerVersion { recorded: u32, running: u32 },
}

/// Up to this many ranks, a replay that can travel in time relays its ranks' output so that
/// none of it is shown twice.
pub const RELAY_MAX_RANKS: u32 = 256;

/// What to replay and how.
#[derive(Clone, Debug, Default)]
pub struct ReplayOptions {
    pub recording: PathBuf,
    /// Run this program instead of the recorded one (a rebuild with debug symbols).
    pub program: Option<PathBuf>,
    /// Replay a program whose SHA-256 differs from the recorded one (with a warning).
    pub allow_different_binary: bool,
    pub breaks: Vec<Break>,
    /// Hold before this slice.
    pub until_slice: Option<u64>,
    /// Start held before slice 1.
    pub start_paused: bool,
    pub tag_output: bool,
    pub timeout: Option<Duration>,
    /// Write a full recording (schedule log and all) of the replay here.
    pub regenerate: Option<PathBuf>,
    /// Send the ranks' stdout and stderr to this file instead of the terminal (and give
    /// rank 0 no stdin): the terminal UI owns the terminal.
    pub output: Option<PathBuf>,
    /// The program's arguments, given by the user, instead of the recorded ones (needed
    /// when the recording's were redacted).
    pub args: Option<Vec<std::ffi::OsString>>,
    /// Run in this directory instead of the recorded one.
    pub cwd: Option<PathBuf>,
    /// Variables the user passes to the ranks (`--env`, `--pass-env`), on top of the
    /// allow-listed recorded ones ([`safety::passed_var`]).
    pub env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    /// The user confirmed the launch ([`LaunchPlan::needs_confirmation`]): a prompt
    /// answered yes, or `--yes`.
    pub confirmed: bool,
    /// Regenerated recording's file: replace an existing one (`--force`).
    pub replace: bool,
    /// A client may pause the replay (a control socket): ranks let the user's debugger
    /// attach (`PR_SET_PTRACER_ANY`), as they do when the options themselves stop.
    pub attachable: bool,
    /// Run the replay on this many nodes instead of the recorded number (`--nodes K`):
    /// decisions do not depend on the node layout, so a recording made on any number of
    /// nodes or hosts replays on one machine with any K (1..=ranks).
    pub nodes: Option<u32>,
    /// The transport this replay runs over (`shm`, `tcp`, `verbs`), when known: a
    /// recording made over another one gets a note (decisions do not depend on it).
    pub transport: Option<String>,
}

/// How the replay ended.
#[derive(Clone, Debug)]
pub enum Verdict {
    /// Every slice matched and the job ended as recorded.
    Matched,
    Diverged(Divergence),
    /// The user stopped it (Ctrl-C, quit).
    Stopped,
}

pub struct ReplayReport {
    pub verdict: Verdict,
    /// The human-readable verdict (the divergence report, or one line).
    pub text: String,
    pub job: JobReport,
    /// Warnings to show first (a different binary).
    pub warnings: Vec<String>,
    /// Slices replayed (and verified).
    pub slices: u64,
    /// The correctness checks' findings in the replayed run (`strobe_runtime::checks`).
    pub checks: Vec<Finding>,
}

impl ReplayReport {
    pub fn exit_code(&self) -> i32 {
        match self.verdict {
            Verdict::Matched => EXIT_MATCHED,
            Verdict::Diverged(_) => EXIT_DIVERGED,
            Verdict::Stopped => EXIT_STOPPED,
        }
    }
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// What replaying `opts.recording` would run (for `--dry-run` and the confirmation
/// prompt), without spawning anything.
pub fn plan(opts: &ReplayOptions) -> Result<LaunchPlan, ReplayError> {
    let rec = Recording::open_planned(&absolute(&opts.recording))?;
    let plan = safety::plan(&rec, opts);
    // The replay that usually follows opens the same file: kept, not opened twice.
    rec.keep_for_replay();
    plan
}

/// Check `--until-slice` and every `--break` against the recording and give `ctl` its
/// bounds (so breakpoints added while the replay runs are checked too).
fn check_stops(rec: &Recording, opts: &ReplayOptions, ctl: &Controller) -> Result<(), ReplayError> {
    let bounds = Bounds {
        ranks: rec.job.ranks,
        last_slice: rec.log.last_slice(),
    };
    if let Some(s) = opts.until_slice {
        bounds
            .check_slice(s)
            .map_err(|e| ReplayError::Breakpoint(format!("--until-slice {s}: {e}")))?;
    }
    for b in &opts.breaks {
        bounds
            .check(b)
            .map_err(|e| ReplayError::Breakpoint(format!("--break {b}: {e}")))?;
    }
    ctl.set_bounds(bounds);
    Ok(())
}

/// Runs a replay's job somewhere else than in this process's launcher: on node daemons
/// across hosts (the `strobe` binary's Machine Manager, `src/multi_host.rs`;
/// docs/multi-host.md "Replay across hosts"). It ships each daemon its part of `package`,
/// applies the slice records they send back to `verifier`, reports each daemon's source
/// end into `shared`, and stops the job when `shared.ctl` is stopped.
pub trait JobRunner {
    fn run(
        &self,
        cfg: &LaunchConfig,
        package: &remote::ReplayPackage,
        verifier: Arc<dyn SliceSink>,
        shared: Arc<source::Shared>,
    ) -> Result<JobReport, ReplayError>;
}

/// Replay a recording. `ctl` is the control API the caller's clients use. Changes this
/// process's working directory to the recorded one (ranks inherit it; the `strobe`
/// process is the job's Machine Manager and owns its cwd).
pub fn replay(opts: &ReplayOptions, ctl: Arc<Controller>) -> Result<ReplayReport, ReplayError> {
    replay_with(opts, ctl, None)
}

/// [`replay`], the job run by `runner` when given (node daemons across hosts).
pub fn replay_with(
    opts: &ReplayOptions,
    ctl: Arc<Controller>,
    runner: Option<&dyn JobRunner>,
) -> Result<ReplayReport, ReplayError> {
    let rec = Recording::open_planned(&absolute(&opts.recording))?;
    let job = rec.job.clone();
    let plan = safety::plan(&rec, opts)?;
    if let (Some(why), false) = (plan.needs_confirmation(), opts.confirmed) {
        return Err(ReplayError::NeedsConfirmation(why));
    }
    let mut warnings = plan.warnings();
    if let strobe_recorder::recording::ChecksumState::Absent(why) = rec.checksum() {
        // Said with every verdict: damage validation cannot see would replay as a
        // divergence in such a file (docs/reliability.md, "The content checksum").
        warnings.push(format!(
            "note: the recording's content is unverified ({why}): a divergence may also be damage to the file"
        ));
    }
    if let Some(now) = opts.transport.as_ref().filter(|t| **t != job.transport) {
        warnings.push(format!(
            "note: replaying over {now}; the recording ran over {} (a replay uses this machine's transport: the slices do not depend on it)",
            job.transport
        ));
    }
    // Breakpoints that can never fire are refused before anything runs (issue 12, item 3).
    check_stops(&rec, opts, &ctl)?;
    let regen_path = opts.regenerate.as_deref().map(absolute);
    if let Some(p) = &regen_path {
        let same = match (std::fs::canonicalize(p), std::fs::canonicalize(&rec.path)) {
            (Ok(a), Ok(b)) => a == b,
            _ => *p == rec.path,
        };
        if same {
            return Err(ReplayError::RegenerateInPlace(p.clone()));
        }
    }

    // Each rank's recorded outcomes, in a file the ranks read at init.
    let per_rank: Vec<_> = rec.log.ranks.iter().map(|r| r.outcomes.clone()).collect();
    let mut outfile = tempfile::Builder::new()
        .prefix("strobe-replay-outcomes-")
        .tempfile()
        .map_err(|source| ReplayError::Io {
            path: std::env::temp_dir(),
            source,
        })?;
    outfile
        .write_all(&encode_file(&per_rank))
        .and_then(|_| outfile.flush())
        .map_err(|source| ReplayError::Io {
            path: outfile.path().to_path_buf(),
            source,
        })?;

    std::env::set_current_dir(&plan.cwd).map_err(|source| ReplayError::Io {
        path: plan.cwd.clone(),
        source,
    })?;

    let mut engine = job.engine();
    if let Some(nodes) = opts.nodes {
        if nodes == 0 || nodes > job.ranks {
            return Err(ReplayError::Nodes {
                nodes,
                ranks: job.ranks,
            });
        }
        if nodes != engine.nodes {
            // The recorded placement names the recorded nodes: blocks over the new count.
            engine.placement = None;
        }
        engine.nodes = nodes;
    }
    let env = safety::rank_env(&plan, opts, outfile.path());
    let cfg = LaunchConfig {
        engine: engine.clone(),
        program: plan.program.clone(),
        args: plan.args.clone(),
        tag_output: opts.tag_output,
        timeout: opts.timeout,
        env,
        // Per-process statistics of a replay are the replay's timings: measured only when
        // regenerating, into a file marked as regenerated (never passed off as the
        // original's).
        mmds_resolution: if regen_path.is_some() {
            strobe_runtime::mmds::DEFAULT_RESOLUTION
        } else {
            0
        },
        output: opts.output.clone(),
        // A replay that can travel back in time runs the job again from the start: its
        // ranks' output goes through strobe, which shows each byte once (rank_output).
        // Decision: not beyond RELAY_MAX_RANKS ranks, where two descriptors and two
        // threads per rank would press on the open-file limit (1024 by default); such a
        // job's output is printed again after a travel back (docs/replay-control.md).
        output_marks: (opts.attachable && regen_path.is_none() && job.ranks <= RELAY_MAX_RANKS)
            .then(strobe_runtime::rank_output::OutputMarks::new),
    };

    let regen = match &regen_path {
        Some(p) => {
            let info = JobInfo {
                program: cfg.program.clone(),
                // The layout the replay ran with (`--nodes`), as any recording says: the
                // recorded placement only when it is the recorded node count.
                nodes: engine.nodes,
                placement: job.placement.clone().filter(|_| engine.nodes == job.nodes),
                transport: opts
                    .transport
                    .clone()
                    .unwrap_or_else(|| job.transport.clone()),
                histogram_resolution: cfg.mmds_resolution,
                ..job.setup()
            };
            let opts = RecordOptions {
                schedule_log: Layer::On,
                metrics: Layer::On,
                replace: opts.replace,
                ..RecordOptions::default()
            };
            let r = Recorder::create(p, &info, opts).map_err(ReplayError::Regenerate)?;
            r.mark_regenerated(&rec.path)
                .map_err(ReplayError::Regenerate)?;
            // Replaying ranks take their outcomes from the log and capture none: the
            // regenerated replay log gets the recorded ones.
            for (rank, outs) in per_rank.iter().enumerate() {
                if !outs.is_empty() {
                    r.outcomes(rank as u32, outs);
                }
            }
            Some(Arc::new(r))
        }
        None => None,
    };

    if opts.start_paused {
        ctl.pause();
    }
    if let Some(s) = opts.until_slice {
        ctl.run_to(s);
    }
    for b in &opts.breaks {
        ctl.add_break(b.clone())
            .map_err(|e| ReplayError::Breakpoint(format!("--break {b}: {e}")))?;
    }
    if regen.is_some() {
        ctl.forbid_travel(
            "--record writes the replay as it runs, and going back would cut it short".into(),
        );
    }
    let package = runner.map(|_| remote::ReplayPackage::from_recording(&rec));
    // Time travel back (control.rs, `Controller::goto`) ends a run of the job; the job is
    // then executed again from the start with a hold at the landing slice (decision and
    // numbers: docs/replay-control.md, "Time travel"). Each run gets a fresh source,
    // verifier and checker; the controller (breakpoints, clients) and the output filter
    // carry over.
    let (report, shared, checks) = loop {
        let shared = Arc::new(source::Shared::new(ctl.clone(), job.ranks));
        let src = Arc::new(ReplaySource::new(
            &rec.log,
            job.outcome.as_deref(),
            shared.clone(),
        ));
        // The checks run on every replay (they are cheap); the caller prints them or not.
        let checker = Arc::new(Checker::new());
        let checked: Arc<dyn SliceSink> = Arc::new(Checked {
            checker: checker.clone(),
            inner: regen.clone().map(|r| r as Arc<dyn SliceSink>),
        });
        let verifier = Arc::new(Verifier::new(
            &rec.log,
            shared.clone(),
            Some(checked),
            engine.node_of_rank(),
        ));
        let report = if let (Some(r), Some(p)) = (runner, &package) {
            r.run(&cfg, p, verifier, shared.clone())?
        } else if remote::remote_loopback() {
            let (src, wire) = remote::loopback(&rec, shared.clone(), verifier)?;
            let report = launcher::launch(&cfg, wire.clone(), Some(src));
            wire.finish();
            report?
        } else {
            launcher::launch(&cfg, verifier, Some(src))?
        };
        let user_ended = matches!(
            report.outcome,
            JobOutcome::Interrupted | JobOutcome::Timeout
        );
        if !user_ended && ctl.take_travel().is_some() {
            continue;
        }
        break (report, shared, checker.findings());
    };
    if let Some(r) = &regen {
        r.write_checks(&checks).map_err(ReplayError::Regenerate)?;
        r.finish(&report).map_err(ReplayError::Regenerate)?;
    }
    let (verdict, text) = report::verdict(&rec, &report, &shared, &engine.node_of_rank());
    ctl.finished(text.lines().next().unwrap_or("").to_string());
    Ok(ReplayReport {
        verdict,
        text,
        slices: report.slices,
        job: report,
        warnings,
        checks,
    })
}
