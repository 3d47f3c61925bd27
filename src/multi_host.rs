//! `strobe run` across node daemons (docs/multi-host.md): the host options, rank
//! placement, and the call into the Machine Manager (`strobe_runtime::daemon::machine`).
//! Without `--hosts`, `--hostfile` or `--launcher local`, `run` keeps its in-process path.
//! `strobe record` and `strobe replay` across hosts: [`record_on_daemons`],
//! [`DaemonRunner`], and the daemons' side of a replay, [`build_node_replay`].

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use clap::Args;
use strobe_replayer::remote::ReplayPackage;
use strobe_replayer::source::{Divergence, Shared};
use strobe_replayer::{JobRunner, ReplayError};
use strobe_runtime::daemon::launch::placement::{MapBy, PlacementOptions};
use strobe_runtime::daemon::launch::plan::LaunchOptions;
use strobe_runtime::daemon::launch::LauncherKind;
use strobe_runtime::daemon::machine::{run_machine, FrameSink, MachineConfig};
use strobe_runtime::daemon::node_replay::{DaemonReplay, ReplayEnd, SinkTap};
use strobe_runtime::daemon::wire_sink::FrameApplier;
use strobe_runtime::daemon::DaemonError;
use strobe_runtime::engine::{LocalMetrics, Payload, SliceRecord, SliceSink};
use strobe_runtime::launcher::{JobOutcome, JobReport, LaunchConfig};
use strobe_runtime::mmds::RankMmds;
use strobe_runtime::outcome::OutcomeRec;
use strobe_runtime::transport::select::{self, Chosen, TransportChoice};

use crate::cli_util;

/// `--launcher`: `auto` or a launcher's name (checked while parsing the command line).
fn parse_launcher(s: &str) -> Result<String, String> {
    launcher_kind(s).map(|_| s.to_string())
}

fn launcher_kind(s: &str) -> Result<Option<LauncherKind>, String> {
    match s {
        "auto" => Ok(None),
        other => other
            .parse::<LauncherKind>()
            .map(Some)
            .map_err(|e| e.to_string()),
    }
}

fn parse_transport(s: &str) -> Result<TransportChoice, String> {
    s.parse()
}

fn parse_map_by(s: &str) -> Result<MapBy, String> {
    s.parse()
        .map_err(|e: strobe_runtime::daemon::launch::placement::PlacementError| e.to_string())
}

#[derive(Args, Clone, Debug)]
pub struct HostArgs {
    /// Run across these hosts, one node daemon each: `h1,h2` or with slots `h1:4,h2:4`.
    #[arg(long, conflicts_with = "hostfile")]
    pub hosts: Option<String>,
    /// Read the hosts from this file: `host`, `host:N` or `host slots=N` per line.
    #[arg(long)]
    pub hostfile: Option<PathBuf>,
    /// How the node daemons are started: auto, local, ssh, slurm or hydra (auto: ssh with
    /// hosts, Slurm inside an allocation, else this process runs the job itself).
    #[arg(long, default_value = "auto", value_parser = parse_launcher)]
    pub launcher: String,
    /// The remote shell, as ssh is called: `CMD HOST COMMAND-LINE` (also $STROBE_RSH);
    /// for Hydra, its `-launcher-exec`.
    #[arg(long, value_name = "CMD")]
    pub launcher_exec: Option<String>,
    /// The path of `strobe` on the hosts (default: the same as here).
    #[arg(long, value_name = "PATH")]
    pub remote_strobe: Option<PathBuf>,
    /// The address the Machine Manager listens on for the daemons (the interface that
    /// reaches the hosts); each daemon's fabric binds the address it reaches us from.
    #[arg(long, value_name = "ADDR")]
    pub iface: Option<IpAddr>,
    /// Ranks per host (default: the hosts' slots, else even blocks).
    #[arg(long, value_name = "N")]
    pub ppn: Option<u32>,
    /// Rank placement: `slot` (blocks, the default) or `node` (round robin).
    #[arg(long, default_value = "slot", value_parser = parse_map_by)]
    pub map_by: MapBy,
    /// Allow more ranks than the hosts' slots.
    #[arg(long)]
    pub oversubscribe: bool,
    /// The transport between nodes on different hosts: auto (verbs when every node has
    /// an active RDMA port, else TCP), tcp, verbs (refused at once where unavailable), or
    /// shm (one host only). Nodes on one host always share memory (docs/cli.md).
    #[arg(long, default_value = "auto", value_parser = parse_transport)]
    pub transport: TransportChoice,
}

/// Inside a Slurm allocation of more than one node (`SLURM_JOB_ID` with `SLURM_JOB_NUM_NODES`
/// or `SLURM_NNODES` above 1): `strobe run` without host options uses the allocation, one
/// daemon per node through srun, as `mpirun` does inside `salloc`/`sbatch`. A one-node
/// allocation keeps the in-process path (every rank is on this host anyway).
fn in_multi_node_allocation() -> bool {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    var("SLURM_JOB_ID").is_some()
        && ["SLURM_JOB_NUM_NODES", "SLURM_NNODES"]
            .iter()
            .filter_map(|k| var(k)?.parse::<u32>().ok())
            .any(|n| n > 1)
}

impl HostArgs {
    /// Whether this run goes through node daemons: hosts given, a launcher named, or
    /// inside a Slurm allocation with `--launcher slurm`. Without any, `run` keeps its
    /// in-process path (`--nodes K` as threads).
    pub fn wanted(&self) -> bool {
        self.hosts.is_some()
            || self.hostfile.is_some()
            || self.kind().is_some()
            || (self.launcher_is_auto() && in_multi_node_allocation())
    }

    /// The transport of a job on this host only, checked before anything runs: a
    /// `--transport verbs` that cannot work here is refused with the provider's reason.
    pub fn local_transport(&self) -> Result<Chosen> {
        select::resolve_local(self.transport, strobe_runtime::launcher::isolate_nodes())
            .map_err(cli_util::usage)
    }

    /// The transport a job on node daemons is expected to run over before the daemons
    /// report (the Machine Manager decides `auto`: provisionally TCP).
    pub fn hosts_transport(&self) -> Result<Chosen> {
        match self.transport {
            TransportChoice::Shm => Err(cli_util::usage(
                "--transport shm: the job spans several hosts, and shared memory does not cross hosts",
            )),
            TransportChoice::Verbs => Ok(Chosen::Verbs),
            TransportChoice::Auto | TransportChoice::Tcp => Ok(Chosen::Tcp),
        }
    }

    fn launcher_is_auto(&self) -> bool {
        matches!(launcher_kind(&self.launcher), Ok(None))
    }

    fn kind(&self) -> Option<LauncherKind> {
        launcher_kind(&self.launcher).ok().flatten()
    }

    fn options(&self) -> LaunchOptions {
        LaunchOptions {
            launcher: self.kind(),
            hosts: self.hosts.clone(),
            hostfile: self.hostfile.clone(),
            launcher_exec: self.launcher_exec.clone(),
            remote_strobe: self.remote_strobe.clone(),
            placement: PlacementOptions {
                ppn: self.ppn,
                map_by: self.map_by,
                oversubscribe: self.oversubscribe,
            },
        }
    }
}

/// The Machine Manager's configuration for a job on node daemons: the launcher, hosts
/// and placement from the options, `cfg` with its node count and placement set.
/// `ship_slices`: the daemons send their slice records (`strobe record` across hosts
/// passes true and a `FrameSink` to [`run_machine`]).
pub fn machine_config(
    h: &HostArgs,
    mut cfg: LaunchConfig,
    ship_slices: bool,
) -> Result<MachineConfig> {
    h.hosts_transport()?;
    let plan = h
        .options()
        .plan(cfg.engine.ranks, cfg.engine.nodes)
        .map_err(|e| cli_util::usage(e.to_string()))?;
    cfg.engine.nodes = plan.hosts.len() as u32;
    cfg.engine.placement = Some(plan.node_of_rank.clone().into());
    Ok(MachineConfig {
        launch: cfg,
        hosts: plan.hosts,
        placement: plan.node_of_rank,
        launcher: plan.launcher,
        iface: h.iface,
        strobe_exe: std::env::current_exe().context("locating the strobe executable")?,
        ship_slices,
        captures: Vec::new(),
        transport: h.transport,
    })
}

/// Runs the job on node daemons; prints the outcome like the one-host path. Returns the
/// exit status. `summary` (`--summary`): the daemons ship their slice records, which feed
/// the same summary a one-host run prints, followed by one line per node.
pub fn run_on_daemons(h: &HostArgs, cfg: LaunchConfig, summary: bool) -> Result<i32> {
    let m = machine_config(h, cfg, summary)?;
    let sums = Arc::new(crate::summary::Summary::default());
    let frames = summary.then(|| Arc::new(FrameApplier::new(sums.clone())) as Arc<dyn FrameSink>);
    let report = match run_machine(&m, frames) {
        Ok(r) => r,
        Err(e @ DaemonError::LauncherNotFound(_)) => {
            // As a shell reports a command it cannot find.
            eprintln!("strobe: {e}");
            return Ok(strobe_runtime::launcher::EXIT_CANNOT_START);
        }
        Err(e) => {
            // The daemons could not be started or set up: strobe's own failure.
            eprintln!("strobe: cannot run the job on node daemons: {e}");
            return Ok(strobe_runtime::launcher::EXIT_INTERNAL);
        }
    };
    if let Some(msg) = &report.message {
        eprintln!("strobe: {}", msg.trim_end());
    }
    if summary {
        eprint!("{}", sums.render(report.report.elapsed));
        if let Some(t) = report.transport {
            eprintln!("  transport            {t}");
        }
        eprint!("{}", crate::summary::render_nodes(&report.nodes));
    }
    Ok(report.exit_code)
}

/// How `execute` runs a job when not with this process's launcher (`strobe record
/// --hosts`: [`record_on_daemons`]).
pub type Launch<'a> = dyn Fn(&LaunchConfig, Arc<dyn SliceSink>) -> Result<JobReport> + 'a;

/// Fixes `cfg`'s node count and placement from the host options (before the recording's
/// job row is written from it: the file says where each rank ran).
pub fn place(h: &HostArgs, cfg: &mut LaunchConfig) -> Result<()> {
    let m = machine_config(h, cfg.clone(), true)?;
    cfg.engine = m.launch.engine;
    Ok(())
}

/// `strobe record --hosts ...`: the job runs on node daemons that ship their slice records
/// (sink frames) to this process, the Machine Manager, where each is applied to `sink`
/// (the recorder and the checks) in each daemon's order. Every frame is applied before
/// the daemons' goodbyes end [`run_machine`], so before the caller finishes the recording.
/// A frame refused (a daemon writing in another's name, damage) makes the recording
/// incomplete: the job is then reported failed, never a success.
/// The exit status the Machine Manager decided (a lost node exits as `strobe run` does,
/// 137) is left in `exit_code`.
pub fn record_on_daemons<'a>(
    h: &'a HostArgs,
    captures: Vec<u32>,
    exit_code: &'a std::sync::Mutex<Option<i32>>,
    transport: &'a std::sync::Mutex<Option<Chosen>>,
) -> impl Fn(&LaunchConfig, Arc<dyn SliceSink>) -> Result<JobReport> + 'a {
    move |cfg, sink| {
        let mut m = machine_config(h, cfg.clone(), true)?;
        m.captures = captures.clone();
        let last = Arc::new(LastSlice {
            inner: sink,
            last: AtomicU64::new(0),
        });
        let applier = Arc::new(FrameApplier::new(last.clone()));
        let r = run_machine(&m, Some(applier.clone())).map_err(|e| match e {
            // Exit 127, as `strobe run` (cli_util::exit_status_of).
            DaemonError::LauncherNotFound(why) => anyhow::Error::new(cli_util::ProgramError(why)),
            e => anyhow!("cannot run the job on node daemons: {e}"),
        })?;
        *transport.lock().unwrap_or_else(|e| e.into_inner()) = r.transport;
        let mut report = r.report;
        // The recording ends with the last slice record that reached it: a lost node 0
        // (or a daemon ahead of it) may have counted slices whose records never arrived.
        report.slices = last.last.load(Ordering::Acquire);
        if let (n @ 1.., first) = applier.refused() {
            let why = format!(
                "the recording is incomplete: {n} slice record frame{} from the daemons refused (first: {})",
                if n == 1 { " was" } else { "s were" },
                first.unwrap_or_default()
            );
            eprintln!("strobe: {why}");
            if matches!(report.outcome, JobOutcome::Success) {
                report.outcome = JobOutcome::EngineFailed(why);
            }
        }
        if applier.refused().0 == 0 {
            *exit_code.lock().unwrap_or_else(|e| e.into_inner()) = Some(r.exit_code);
        }
        Ok(report)
    }
}

/// Passes every call on, keeping the last slice record's number.
struct LastSlice {
    inner: Arc<dyn SliceSink>,
    last: AtomicU64,
}

impl SliceSink for LastSlice {
    fn slice(&self, rec: &SliceRecord) {
        self.inner.slice(rec);
        self.last.fetch_max(rec.slice, Ordering::AcqRel);
    }
    fn node_metrics(&self, slice: u64, m: &LocalMetrics) {
        self.inner.node_metrics(slice, m);
    }
    fn mmds(&self, ranks: &[RankMmds]) {
        self.inner.mmds(ranks);
    }
    fn outcomes(&self, rank: u32, recs: &[OutcomeRec]) {
        self.inner.outcomes(rank, recs);
    }
    fn captures(&self, rank: u32) -> bool {
        self.inner.captures(rank)
    }
    fn payload(&self, p: &Payload) {
        self.inner.payload(p);
    }
}

/// `strobe replay FILE --hosts ...`: runs the replay's job on node daemons (the replayer's
/// [`JobRunner`]). Each daemon gets its part of the replay package after the job spec and
/// replays from it; node 0's slice records come back as sink frames to the verifier here;
/// each daemon's source end (end of the recording, a rank off its path) comes back before
/// its node report; a divergence the verifier finds stops every daemon (`stop`).
pub struct DaemonRunner<'a> {
    pub hosts: &'a HostArgs,
}

impl JobRunner for DaemonRunner<'_> {
    fn run(
        &self,
        cfg: &LaunchConfig,
        package: &ReplayPackage,
        verifier: Arc<dyn SliceSink>,
        shared: Arc<Shared>,
    ) -> Result<JobReport, ReplayError> {
        let m = machine_config(self.hosts, cfg.clone(), true)
            .map_err(|e| ReplayError::Daemons(format!("{e:#}")))?;
        let placement = m.placement.clone();
        let packages = (0..m.hosts.len() as u32)
            .map(|n| package.encode_for_node(n, |r| placement.get(r as usize) == Some(&n)))
            .collect();
        let frames = Arc::new(ReplayFrames {
            applier: FrameApplier::new(verifier),
            shared: shared.clone(),
            packages,
        });
        let r = run_machine(&m, Some(frames.clone()))
            .map_err(|e| ReplayError::Daemons(e.to_string()))?;
        if let (n @ 1.., first) = frames.applier.refused() {
            // Unverified slices: never a match.
            shared.ctl.stop(format!(
                "{n} slice record frames from node 0 were refused (first: {})",
                first.unwrap_or_default()
            ));
            return Err(ReplayError::Daemons(format!(
                "{n} slice record frames were refused: the replay could not be verified"
            )));
        }
        Ok(r.report)
    }
}

/// The Machine Manager's side of a replay across hosts.
struct ReplayFrames {
    applier: FrameApplier,
    shared: Arc<Shared>,
    packages: Vec<Vec<u8>>,
}

impl FrameSink for ReplayFrames {
    fn frame(&self, node: u32, bytes: &[u8]) {
        self.applier.frame(node, bytes);
    }

    fn replay_package(&self, node: u32) -> Option<Vec<u8>> {
        self.packages.get(node as usize).cloned()
    }

    fn replay_end(&self, _node: u32, end: &ReplayEnd) {
        if let Some(s) = end.end_of_recording {
            *self
                .shared
                .end_of_recording
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(s);
        }
        if let Some((slice, rank, recorded, replayed)) = &end.divergence {
            self.shared.diverged(Divergence {
                slice: *slice,
                rank: *rank,
                recorded: recorded.clone(),
                replayed: replayed.clone(),
                calls: Vec::new(),
                decisions: Vec::new(),
                sites: Vec::new(),
            });
        }
    }

    fn stopped(&self) -> Option<String> {
        self.shared.ctl.stop_reason()
    }
}

/// `strobe node`'s replay support: node `node`'s share of a replay from the package the
/// Machine Manager sent (the runtime cannot read one: `node_replay::ReplayBuilder`).
pub fn build_node_replay(bytes: &[u8], node: u32) -> Result<DaemonReplay, String> {
    let p = ReplayPackage::decode(bytes).map_err(|e| e.to_string())?;
    if p.node() != Some(node) {
        return Err(format!(
            "the replay package was made for node {:?}, this daemon is node {node}",
            p.node()
        ));
    }
    let replay = Arc::new(p.node_replay(node));
    let shared = replay.shared().clone();
    let tap = (node == 0).then(|| {
        let r = replay.clone();
        Box::new(move |sink: Arc<dyn SliceSink>| r.tap(sink)) as SinkTap
    });
    Ok(DaemonReplay {
        source: replay.source(),
        tap,
        outcomes_file: strobe_runtime::outcome::encode_file(&p.outcomes()),
        end: Box::new(move || ReplayEnd {
            end_of_recording: *shared
                .end_of_recording
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
            divergence: shared
                .divergence
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
                .map(|d| (d.slice, d.rank, d.recorded, d.replayed)),
        }),
    })
}
