//! `strobe`: run MPI jobs on the Buffered Coscheduling runtime (and, as the recorder,
//! replayer and TUI land, record, replay and browse them).

mod bench;
mod cli_util;
mod decision_log;
mod diff;
mod doctor;
mod explore;
mod export;
mod hunt;
mod mpicc;
mod mpifort;
mod multi_host;
mod node;
mod progress;
mod record;
mod replay;
mod stats;
mod summary;

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use strobe_runtime::checks::{Checker, Finding};
use strobe_runtime::engine::{
    EngineConfig, NullSink, SliceSink, StrobePolicy, DEFAULT_DIRECT_COPY_MIN,
};
use strobe_runtime::launcher::{self, LaunchConfig};
use strobe_runtime::sched::DEFAULT_CHUNK_BUDGET;

#[derive(Parser)]
#[command(
    name = "strobe",
    version,
    about = "Deterministic record/replay debugger for MPI jobs on a Buffered Coscheduling runtime"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run an MPI program on N ranks (like mpiexec).
    Run(RunArgs),
    /// Run a job exactly like `run` and record it into an SQLite file.
    Record(record::RecordArgs),
    /// Replay a recording deterministically, verifying every slice; stop, step, regenerate.
    Replay(replay::ReplayArgs),
    /// Summarize a recording: the job, slices, GETTS, decisions, blocked ranks, and the
    /// per-primitive MMDS table with the computation + communication = run time check.
    Stats {
        /// The recording (an SQLite file written by `strobe record`).
        file: PathBuf,
        /// Show the MMDS table of this rank instead of the whole job's.
        #[arg(long)]
        rank: Option<u32>,
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Browse a recording in the terminal: GETTS, NCOLL, NP2P, blocked ranks, slices,
    /// statistics (keys: `?`; docs/tui.md).
    Tui {
        /// The recording (an SQLite file written by `strobe record`; it may still be growing).
        file: PathBuf,
        /// Compare with this recording (as `strobe diff FILE B.db`): the first slice where
        /// they differ is marked; `m` jumps there and shows the difference.
        #[arg(long, value_name = "B.db")]
        diff: Option<PathBuf>,
    },
    /// The benchmark suite: strobe against MPICH and against itself, side by side, and
    /// measurements of the runtime (`strobe bench --help`). Runs `strobe-bench`, the
    /// benchmark tool installed next to strobe (`cargo build --release -p strobe-bench`).
    #[command(disable_help_flag = true)]
    Bench {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Compile and link a C MPI program against strobe (also installable as `mpicc`).
    /// Flags pass through to the C compiler (`cc`, or $STROBE_CC); `-show` prints the
    /// command instead, `-static-mpi` links libmpi.a.
    #[command(disable_help_flag = true)]
    Mpicc {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Compile and link a Fortran MPI program against strobe (also installable as
    /// `mpifort`, `mpif90`, `mpif77`). Flags pass through to the Fortran compiler
    /// (`gfortran`, or $STROBE_FC); `-show` prints the command instead, `-static-mpi`
    /// links libmpi.a. Builds the `mpi` module (mpi.mod) on first use.
    #[command(disable_help_flag = true)]
    Mpifort {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Install bin/strobe (with mpicc, mpifort, mpif90, mpif77, mpiexec and mpirun
    /// links), include/{mpi.h,mpif.h,mpi.f90,mpi.mod} and lib/libmpi.{so,a} under a prefix.
    Install {
        #[arg(long)]
        prefix: PathBuf,
    },
    /// Compare two recordings of one program call by call and report where they part
    /// ways (exit 0: no difference, 1: different, 2: cannot compare).
    Diff(diff::DiffArgs),
    /// Run a job repeatedly under injected timing noise (random delays at MPI calls,
    /// deterministic per seed) and keep the recording of the first run that fails
    /// (exit 1: found, 0: none within --runs/--time).
    Hunt(hunt::HuntArgs),
    /// From a recording, try the other senders each wildcard receive could have matched,
    /// one forced alternative per run (depth first, bounded), and keep the first failing
    /// run's recording (exit 1: found, 0: none).
    Explore(explore::ExploreArgs),
    /// Write a recording as a Chrome trace for ui.perfetto.dev (`--format perfetto`) or its
    /// per-slice metrics as CSV (`--format csv`).
    Export(export::ExportArgs),
    /// One node daemon of a job across hosts, started by `strobe run --hosts ...` through
    /// a launcher, never by hand (docs/multi-host.md). Its setup comes from the
    /// environment, or from `KEY=VALUE` lines on stdin with --env-stdin.
    Node(node::NodeArgs),
    /// What this host offers the transports: whether verbs (RDMA) is usable, each RDMA
    /// device and port, the locked-memory limit (exit 0: usable, 1: not, with why).
    Doctor,
    /// Record a fixture job and show what the runtime did (`strobe stats` of the recording).
    Demo {
        /// Number of ranks.
        #[arg(short = 'n', long, default_value_t = 4)]
        ranks: u32,
        /// Keep the recording in this file (overwritten) instead of a temporary one.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

#[derive(Args, Clone)]
struct JobArgs {
    /// Number of ranks.
    #[arg(
        short = 'n',
        long = "np",
        visible_short_alias = 'N',
        default_value_t = 1
    )]
    ranks: u32,
    /// Number of node managers on this host (each gets a contiguous block of ranks).
    #[arg(long, default_value_t = 1)]
    nodes: u32,
    /// Slice length, e.g. 500us, 250us, 2ms.
    #[arg(long, default_value = "500us", value_parser = cli_util::parse_duration)]
    slice: Duration,
    /// Strobe policy: adaptive (start a slice early when no rank computes) or fixed.
    #[arg(long, default_value = "adaptive")]
    strobe: StrobePolicy,
    /// Idle slices with every rank blocked before the job is declared deadlocked.
    #[arg(long, default_value_t = 20)]
    deadlock_slices: u32,
    /// Slices in a row in which every live rank polls (MPI_Test*, MPI_Iprobe) or is
    /// blocked and nothing matches, before the job is declared livelocked (exit 5); 0: off.
    #[arg(long, value_name = "N", default_value_t = strobe_runtime::engine::DEFAULT_LIVELOCK_SLICES)]
    livelock_slices: u32,
    /// Bytes each node may receive per slice; larger messages are chunked (at least 4KiB).
    #[arg(long, default_value = "16MiB", value_parser = cli_util::parse_chunk_budget)]
    chunk_budget: u64,
    /// Chunks and collective blocks of at least this size are copied once by the ranks' own
    /// DMA Helpers (a chunk: half pulled by the receiver's, half pushed by the sender's);
    /// `off` sends everything through the node manager.
    #[arg(long, default_value = "64KiB", value_parser = parse_direct_min)]
    direct_copy_min: u64,
    /// Prefix each line of rank output with `[rank] `.
    #[arg(long)]
    tag_output: bool,
    /// Stop the job after this long (also MPIEXEC_TIMEOUT, in seconds).
    #[arg(long, value_parser = cli_util::parse_duration)]
    timeout: Option<Duration>,
    /// Write a plain-text log of every slice's decisions to this file.
    #[arg(long)]
    decision_log: Option<PathBuf>,
    /// Print a summary of the run's slices on stderr at the end.
    #[arg(long)]
    summary: bool,
    /// Accept up to N ranks without checking them against the machine (pid_max,
    /// RLIMIT_NPROC, memory); without it, -n is checked and refused when too large.
    #[arg(long, value_name = "N")]
    max_ranks: Option<u32>,
    /// Do not record or replay the ranks' time, gettimeofday, clock_gettime, getpid and
    /// getrandom calls outside MPI (sets STROBE_LIBC_REPLAY=0 for the ranks).
    #[arg(long)]
    no_libc_replay: bool,
    /// Do not run the correctness checks (type mismatches, leaked requests, buffers
    /// reused while pending, unsafe send-send pairs; docs/debugging.md).
    #[arg(long)]
    no_checks: bool,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    job: JobArgs,
    #[command(flatten)]
    hosts: multi_host::HostArgs,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<OsString>,
}

/// Runtime diagnostics (`tracing`) on stderr, off unless `STROBE_LOG` holds a filter such
/// as `strobe_runtime=debug` (docs/cli.md): normal output is unchanged by default.
fn init_logging() {
    let Some(spec) = std::env::var_os("STROBE_LOG") else {
        return;
    };
    match tracing_subscriber::EnvFilter::try_new(spec.to_string_lossy()) {
        Ok(filter) => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        Err(e) => eprintln!("strobe: ignoring STROBE_LOG: {e}"),
    }
}

/// Set when stdout or stderr was closed under us (`strobe demo | head`).
static BROKEN_PIPE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `println!` panics when the reader of stdout went away (EPIPE: Rust ignores SIGPIPE).
/// Decision: such a panic is not a bug to report but the end of the conversation: it
/// unwinds quietly (destructors run: the demo's temporary recording is removed) and strobe
/// exits 141, the status of a program killed by SIGPIPE, as `seq | head` would. The job's
/// own output is forwarded by the launcher, which ignores a closed stdout by itself.
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let p = info.payload();
        let msg = p
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| p.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to std") && msg.contains("Broken pipe") {
            BROKEN_PIPE.store(true, std::sync::atomic::Ordering::SeqCst);
            return;
        }
        default(info)
    }));
}

/// Exit status after a closed stdout (128 + SIGPIPE).
const EXIT_BROKEN_PIPE: i32 = 141;

fn main() {
    init_logging();
    quiet_on_broken_pipe();
    let code = std::panic::catch_unwind(dispatch);
    if BROKEN_PIPE.load(std::sync::atomic::Ordering::SeqCst) {
        std::process::exit(EXIT_BROKEN_PIPE);
    }
    // `dispatch` always exits; only a panic returns here (its message is already printed).
    std::process::exit(if code.is_ok() { 0 } else { 101 })
}

fn dispatch() {
    // Invoked as mpicc / mpifort / mpiexec / mpirun (install links): behave as that tool.
    let argv: Vec<OsString> = std::env::args_os().collect();
    let name = argv
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let cli = match name.as_str() {
        "mpicc" => finish(mpicc::mpicc(&argv[1..])),
        "mpifort" | "mpif90" | "mpif77" => finish(mpifort::mpifort(&argv[1..])),
        "mpiexec" | "mpirun" => Cli::parse_from(mpicc::mpiexec_args(&argv[1..])),
        _ => Cli::parse(),
    };
    let code = match cli.cmd {
        Cmd::Mpicc { args } => mpicc::mpicc(&args),
        Cmd::Mpifort { args } => mpifort::mpifort(&args),
        Cmd::Install { prefix } => mpicc::install(&prefix),
        Cmd::Run(a) => run(&a.job, &a.hosts, &a.command),
        Cmd::Record(a) => record::record(&a),
        Cmd::Replay(a) => replay::replay(&a),
        Cmd::Stats { file, rank, json } => Ok(stats::stats(&file, rank, json)),
        Cmd::Tui { file, diff } => tui(&file, diff.as_deref()),
        Cmd::Demo { ranks, out } => demo(ranks, out),
        Cmd::Bench { args } => bench::bench(&args),
        Cmd::Export(a) => export::export(&a),
        Cmd::Diff(a) => diff::diff(&a),
        Cmd::Hunt(a) => hunt::hunt(&a),
        Cmd::Explore(a) => explore::explore(&a),
        Cmd::Node(a) => node::node(&a),
        Cmd::Doctor => doctor::doctor(),
    };
    finish(code)
}

/// Exit with the command's status, or report its error in one line.
fn finish(code: Result<i32>) -> ! {
    match code {
        Ok(c) => std::process::exit(c),
        Err(e) => {
            eprintln!("strobe: {}", cli_util::one_line(&e));
            std::process::exit(cli_util::exit_status_of(&e));
        }
    }
}

fn tui(file: &std::path::Path, other: Option<&std::path::Path>) -> Result<i32> {
    let mut marks = strobe_tui::Marks::default();
    if let Some(b) = other {
        // Compared before the terminal is touched: a pair that cannot be compared is a
        // clear error, exit 2 (as `strobe diff`).
        match diff::first_difference(file, b) {
            Ok(Some((slice, text))) => {
                marks.diff = Some(strobe_tui::DiffMark {
                    other: b.to_path_buf(),
                    slice,
                    text,
                })
            }
            Ok(None) => {
                marks.diff = Some(strobe_tui::DiffMark {
                    other: b.to_path_buf(),
                    slice: None,
                    text: String::new(),
                })
            }
            Err(why) => {
                eprintln!("strobe tui --diff: cannot compare: {why}");
                return Ok(diff::EXIT_CANNOT_COMPARE);
            }
        }
    }
    match strobe_tui::run_with(file, marks) {
        Ok(()) => Ok(0),
        // A file that is not a recording (or a damaged one) is the user's input, not
        // strobe's failure: exit 2, as `stats` and `replay` (docs/reliability.md).
        Err(strobe_tui::TuiError::Data(e)) => {
            eprintln!("strobe: {}: {e}", file.display());
            Ok(stats::EXIT_DAMAGED)
        }
        Err(e) => Err(e.into()),
    }
}

fn launch_config(job: &JobArgs, command: &[OsString]) -> Result<LaunchConfig> {
    let Some((program, args)) = command.split_first() else {
        bail!("no program given: strobe run -n N -- PROGRAM [ARGS]");
    };
    if job.ranks == 0 {
        return Err(cli_util::usage("-n must be at least 1"));
    }
    if job.nodes == 0 || job.nodes > job.ranks {
        return Err(cli_util::usage(format!(
            "--nodes must be between 1 and the number of ranks ({})",
            job.ranks
        )));
    }
    if job.chunk_budget < cli_util::MIN_CHUNK_BUDGET {
        return Err(cli_util::usage("--chunk-budget must be at least 4KiB"));
    }
    strobe_runtime::futex::spin_env().map_err(cli_util::UsageError)?;
    strobe_runtime::engine::set_livelock_slices(job.livelock_slices);
    if let Some(n) = job.max_ranks {
        strobe_runtime::limits::allow_ranks(n);
    }
    // Refused here, before a recording file is created or anything is spawned (the
    // launcher checks again, for every other path into it).
    strobe_runtime::limits::check_ranks(job.ranks)?;
    let timeout = match (job.timeout, std::env::var("MPIEXEC_TIMEOUT")) {
        (Some(t), _) => Some(t),
        (None, Ok(s)) => Some(Duration::from_secs(s.trim().parse().with_context(
            || format!("MPIEXEC_TIMEOUT={s:?} is not a number of seconds"),
        )?)),
        (None, Err(_)) => None,
    };
    Ok(LaunchConfig {
        engine: EngineConfig {
            ranks: job.ranks,
            nodes: job.nodes,
            slice: job.slice,
            policy: job.strobe,
            deadlock_slices: job.deadlock_slices.max(1),
            chunk_budget: job.chunk_budget,
            direct_copy_min: job.direct_copy_min,
            eager_max: strobe_runtime::engine::DEFAULT_EAGER_MAX,
            inline_max: strobe_runtime::engine::DEFAULT_INLINE_MAX,
            local_null: true,
            placement: None,
        },
        program: resolve_program(program)?,
        args: args.to_vec(),
        tag_output: job.tag_output,
        timeout,
        env: if job.no_libc_replay {
            vec![("STROBE_LIBC_REPLAY".into(), "0".into())]
        } else {
            Vec::new()
        },
        mmds_resolution: 0,
        output: None,
        output_marks: None,
    })
}

/// Find the program like a shell would, so errors name the real problem.
fn resolve_program(p: &OsString) -> Result<PathBuf> {
    let path = PathBuf::from(p);
    // The program's arguments swallow everything after the first word clap does not know,
    // so a mistyped option lands here: name it as such rather than as a missing program.
    if p.to_string_lossy().starts_with('-') {
        return Err(cli_util::usage(format!(
            "unknown option {} (options go before the program; see `strobe run --help`)",
            path.display()
        )));
    }
    let not_startable = |why: String| anyhow::Error::new(cli_util::ProgramError(why));
    if path.components().count() > 1 {
        return cli_util::check_program(&path)
            .map(|()| path)
            .map_err(not_startable);
    }
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        let cand = dir.join(&path);
        if cand.is_file() {
            return cli_util::check_program(&cand)
                .map(|()| cand)
                .map_err(not_startable);
        }
    }
    Err(not_startable(format!(
        "program {} not found in PATH",
        path.display()
    )))
}

fn run(job: &JobArgs, hosts: &multi_host::HostArgs, command: &[OsString]) -> Result<i32> {
    // Checked first: `--transport verbs` where verbs cannot work says why and nothing else.
    let transport = match hosts.wanted() {
        true => hosts.hosts_transport()?,
        false => hosts.local_transport()?,
    };
    let cfg = launch_config(job, command)?;
    if hosts.wanted() {
        return multi_host::run_on_daemons(hosts, cfg, job.summary);
    }
    let (report, checks) = execute(job, &cfg, None, None, None, &|| transport.to_string())?;
    print_checks(&checks);
    if matches!(report.outcome, launcher::JobOutcome::Timeout) && job.timeout.is_none() {
        // mpiexec's habit: say which setting stopped the job.
        if let Ok(v) = std::env::var("MPIEXEC_TIMEOUT") {
            eprintln!("strobe: MPIEXEC_TIMEOUT={} seconds expired", v.trim());
        }
    }
    Ok(report.exit_code())
}

/// Run a job with the sinks `job` asks for plus `extra` (the recorder), and report its end
/// on stderr; returns the report and the correctness checks' findings (none with
/// `--no-checks`), which the caller prints ([`print_checks`]). Shared by `run` and
/// `record`, so both run a job the same way.
/// `launch`: how the job runs (default: this process's launcher; `strobe record --hosts`:
/// the Machine Manager, `multi_host::record_on_daemons`).
fn execute(
    job: &JobArgs,
    cfg: &LaunchConfig,
    extra: Option<Arc<dyn SliceSink>>,
    output: Option<&std::path::Path>,
    launch: Option<&multi_host::Launch<'_>>,
    transport: &dyn Fn() -> String,
) -> Result<(launcher::JobReport, Vec<Finding>)> {
    let summary = Arc::new(summary::Summary::default());
    let log = match &job.decision_log {
        Some(p) => Some(Arc::new(
            decision_log::DecisionLog::create(p)
                .with_context(|| format!("creating {}", p.display()))?,
        )),
        None => None,
    };
    let recording = extra.is_some();
    let mut sinks: Vec<Arc<dyn SliceSink>> = extra.into_iter().collect();
    // A progress line for `record` on a terminal (not for `run`: its terminal is the
    // program's, and a run prints nothing of its own on success).
    let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
    if recording {
        sinks.push(Arc::new(progress::SliceCounter(counter.clone())));
    }
    if job.summary {
        sinks.push(summary.clone());
    }
    if let Some(l) = &log {
        sinks.push(l.clone());
    }
    let checker = (!job.no_checks).then(|| Arc::new(Checker::new()));
    if let Some(c) = &checker {
        sinks.push(c.clone());
    }
    let sink: Arc<dyn SliceSink> = match sinks.len() {
        0 => Arc::new(NullSink),
        1 => sinks.pop().expect("one sink"),
        _ => Arc::new(summary::Tee(sinks)),
    };
    let shown = recording
        .then(|| {
            let c = counter.clone();
            progress::Progress::start(progress::Work {
                verb: "recording",
                file: output.map(PathBuf::from),
                total: None,
                current: Some(Box::new(move || {
                    c.load(std::sync::atomic::Ordering::Relaxed)
                })),
            })
        })
        .flatten();
    let report = match launch {
        Some(l) => l(cfg, sink),
        None => launcher::launch(cfg, sink, None).map_err(Into::into),
    };
    drop(shown);
    let report = report?;
    if let Some(l) = &log {
        l.finish().context("writing the decision log")?;
    }
    if let Some(msg) = report.message() {
        eprintln!("strobe: {}", msg.trim_end());
    }
    if job.summary {
        eprint!("{}", summary.render(report.elapsed));
        eprintln!("  transport            {}", transport());
    }
    let checks = checker.map(|c| c.findings()).unwrap_or_default();
    Ok((report, checks))
}

/// The checks' findings on stderr, one line each, after the run.
pub(crate) fn print_checks(checks: &[Finding]) {
    for f in checks {
        eprintln!("strobe: check: {f}");
    }
    if !checks.is_empty() {
        eprintln!(
            "strobe: {} correctness check finding{} (docs/debugging.md, \"Correctness checks\"; --no-checks silences them)",
            checks.len(),
            if checks.len() == 1 { "" } else { "s" }
        );
    }
}

/// The fixture programs are built next to this executable (same target directory).
fn fixture(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let p = exe.with_file_name(name);
    if !p.exists() {
        bail!(
            "fixture {} not found next to {}: build the workspace first (cargo build --release --workspace)",
            name,
            exe.display()
        );
    }
    Ok(p)
}

fn demo(ranks: u32, out: Option<PathBuf>) -> Result<i32> {
    let prog = fixture("token_ring")?;
    // Without --out: `demo.db` in a fresh private directory (0700, random name, under
    // `$XDG_RUNTIME_DIR` when it is the user's, else `$TMPDIR`; issue 11), never a name
    // another user could predict and plant a file at. Removed with its directory however
    // demo ends (an error, or a reader that closed stdout).
    let private = match out {
        Some(_) => None,
        None => Some(demo_dir()?),
    };
    let (path, keep) = match (out, &private) {
        (Some(p), _) => (p, true),
        (None, Some(dir)) => (dir.path().join("demo.db"), false),
        (None, None) => unreachable!("a private directory is made without --out"),
    };
    eprintln!(
        "strobe demo: recording the token_ring fixture on {ranks} ranks (adaptive strobe, 500us slices) to {}\n",
        path.display()
    );
    let job = JobArgs {
        ranks,
        nodes: 1,
        slice: Duration::from_micros(500),
        strobe: StrobePolicy::Adaptive,
        deadlock_slices: 20,
        livelock_slices: strobe_runtime::engine::DEFAULT_LIVELOCK_SLICES,
        chunk_budget: DEFAULT_CHUNK_BUDGET,
        direct_copy_min: DEFAULT_DIRECT_COPY_MIN,
        tag_output: false,
        timeout: Some(Duration::from_secs(60)),
        decision_log: None,
        summary: false,
        max_ranks: None,
        no_libc_replay: false,
        no_checks: false,
    };
    let code = record::record_to(
        &job,
        &[prog.into_os_string()],
        &path,
        // O_NOFOLLOW and the lock: a symlink planted at the demo's name is refused.
        record::FileOptions::new(true),
        record::Layers::default(),
        &record::Extras::default(),
    )?;
    let shown = stats::stats(&path, None, false);
    if keep {
        println!(
            "\nReplay it (deterministically, every slice verified): strobe replay {0}\n\
             Stop before slice 20 and step: strobe replay {0} --until-slice 20 --step",
            path.display()
        );
    } else {
        println!("\nTo replay the demo recording, keep it: strobe demo --out demo.db; strobe replay demo.db");
    }
    Ok(if code != 0 { code } else { shown })
}

/// A new private directory for the demo's recording (see `demo`).
fn demo_dir() -> Result<tempfile::TempDir> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| {
            std::fs::symlink_metadata(d)
                .is_ok_and(|m| m.is_dir() && m.uid() == me && m.mode() & 0o077 == 0)
        })
        .unwrap_or_else(std::env::temp_dir);
    Ok(tempfile::Builder::new()
        .prefix("strobe-demo-")
        // Explicitly: tempfile's default is 0777 masked by the umask.
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(&base)?)
}

fn parse_direct_min(s: &str) -> Result<u64, String> {
    if s == "off" {
        Ok(u64::MAX)
    } else {
        cli_util::parse_bytes(s)
    }
}
