//! `strobe node`: one node daemon of a job across hosts (docs/multi-host.md, "Node
//! daemons").
//!
//! It learns who it is and where the Machine Manager listens from its environment (or
//! from `KEY=VALUE` lines on stdin: ssh does not pass environment), connects back and
//! authenticates, receives the job's [`JobSpec`], checks the program's checksum on this
//! host, joins the job's TCP fabric, creates its own job segment, spawns its ranks,
//! forwards their output, reports their exits, runs its node manager, and ends with a
//! node report. It kills its ranks and exits when the control connection drops or the
//! Machine Manager's heartbeat is late; nothing of it listens after the job.

use std::io::BufRead;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use strobe_schema::{ControlMessage, Death, JobSpec, NodeOutcome};

use super::control::{self, ControlReader, ControlWriter, HEARTBEAT_EVERY, HEARTBEAT_LATE};
use super::local_ranks::{deadlock_report, LocalRanks};
use super::node_replay::{DaemonReplay, OutcomesFile, ReplayBuilder};
use super::wire_sink::WireSink;
use super::{ranks, DaemonError};
use crate::engine::{
    global_size, Engine, EngineConfig, EngineOutcome, JobShared, NodePart, NullSink, SliceSink,
    SliceSource, StrobePolicy, EVENTS,
};
use crate::launcher::{EXIT_CANNOT_START, EXIT_INTERNAL};
use crate::segment::JobSegment;
use crate::segment::{leave_computing, ring_doorbell, RankState};
use crate::transport::auth::{JobSecret, SECRET_ENV};
use crate::transport::select::{self, Offer};
use crate::transport::tcp::{TcpBinding, TcpConfig};
use crate::transport::Transport;

/// Where the Machine Manager's control listener is (`host:port`).
pub const ENV_MM_ADDR: &str = "STROBE_MM_ADDR";
pub use super::launch::{NODES_ENV as ENV_NODES, NODE_ENV as ENV_NODE};
/// The address the fabric endpoint binds (default: the one the control connection leaves
/// from, which is the interface that reaches the Machine Manager).
pub const ENV_IFACE: &str = "STROBE_IFACE";
/// Exit status of a daemon whose Machine Manager vanished.
pub const EXIT_MM_LOST: i32 = 3;

/// Who this daemon is, from its environment.
#[derive(Debug)]
pub struct DaemonSetup {
    pub node: u32,
    pub nodes: u32,
    pub mm_addr: SocketAddr,
    pub secret: JobSecret,
    pub iface: Option<IpAddr>,
}

impl DaemonSetup {
    /// Reads the setup from the environment and removes the secret from it (the ranks
    /// must not inherit it). Call before any thread exists.
    pub fn from_env(iface: Option<IpAddr>) -> Result<DaemonSetup, DaemonError> {
        let secret = JobSecret::from_env().map_err(|e| DaemonError::Setup(e.to_string()))?;
        std::env::remove_var(SECRET_ENV);
        let (node, nodes) = super::launch::node_index_from_env().ok_or_else(|| {
            DaemonError::Setup(format!(
                "no node index: none of {ENV_NODE}/{ENV_NODES}, PMI_RANK/PMI_SIZE, \
                 SLURM_NODEID/SLURM_NNODES is set (`strobe node` is started by \
                 `strobe run --hosts ...`)"
            ))
        })?;
        let mm = std::env::var(ENV_MM_ADDR)
            .map_err(|_| DaemonError::Setup(format!("{ENV_MM_ADDR} is not set")))?;
        let mm_addr = std::net::ToSocketAddrs::to_socket_addrs(mm.as_str())
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| {
                DaemonError::Setup(format!(
                    "{ENV_MM_ADDR}={mm:?} is not a host:port this host can resolve"
                ))
            })?;
        let iface = match (iface, std::env::var(ENV_IFACE)) {
            (Some(a), _) => Some(a),
            (None, Ok(v)) if !v.is_empty() => Some(
                v.parse()
                    .map_err(|_| DaemonError::Setup(format!("{ENV_IFACE}={v:?}")))?,
            ),
            _ => None,
        };
        Ok(DaemonSetup {
            node,
            nodes,
            mm_addr,
            secret,
            iface,
        })
    }
}

/// `strobe node --env-stdin`: sets `KEY=VALUE` lines read from `input`, up to an empty
/// line, in this process's environment (ssh passes no environment; the secret must not be
/// in argv; the format is the ssh launcher's, `launch::ssh`). Call before any thread
/// exists. Returns how many were set.
pub fn env_from_stdin(input: &mut impl BufRead) -> Result<usize, DaemonError> {
    let lines = super::launch::ssh::read_env_lines(input)
        .map_err(|e| DaemonError::Setup(format!("reading the environment on stdin: {e}")))?;
    for (k, v) in &lines {
        std::env::set_var(k, v);
    }
    Ok(lines.len())
}

/// What the control reader and the heartbeat hand to the daemon's main loop.
enum FromMm {
    Message(ControlMessage),
    Lost(String),
}

/// This host's name (gethostname).
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into a buffer we own.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The sha256 of a file, hex.
pub fn file_sha256(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h)?;
    Ok(h.finalize().to_vec())
}

fn check_spec(spec: &JobSpec, setup: &DaemonSetup) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt;
    if spec.nodes != setup.nodes || spec.placement.len() != spec.ranks as usize {
        return Err(format!(
            "the job spec names {} nodes and {} placements for {} ranks; this daemon is node {} of {}",
            spec.nodes,
            spec.placement.len(),
            spec.ranks,
            setup.node,
            setup.nodes
        ));
    }
    let path = std::path::Path::new(std::ffi::OsStr::from_bytes(&spec.program));
    let sum = file_sha256(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if sum != spec.program_sha256 {
        return Err(format!(
            "{} differs on this host from the Machine Manager's (sha256 mismatch): \
             install the same build on every host",
            path.display()
        ));
    }
    Ok(())
}

fn engine_config(spec: &JobSpec) -> EngineConfig {
    EngineConfig {
        ranks: spec.ranks,
        nodes: spec.nodes,
        slice: Duration::from_nanos(spec.slice_ns),
        policy: if spec.adaptive {
            StrobePolicy::Adaptive
        } else {
            StrobePolicy::Fixed
        },
        deadlock_slices: spec.deadlock_slices,
        chunk_budget: spec.chunk_budget,
        direct_copy_min: spec.direct_copy_min,
        eager_max: spec.eager_max,
        // From the Machine Manager's engine config: 0 when replaying a recording made
        // before scheduler version 3, so its sends are not inlined.
        inline_max: spec.inline_max,
        local_null: spec.local_null,
        placement: Some(spec.placement.clone().into()),
    }
}

/// Starts this node's share of the engine: the whole engine for a one-daemon job, else
/// this node's part over the TCP endpoint (`Engine::start_nodes`; node 0 learns the other
/// nodes' ranks through the slot mirror).
fn start_engine(
    cfg: &EngineConfig,
    node: u32,
    fabric: Option<Arc<dyn Transport>>,
    shared: Arc<JobShared>,
    sink: Arc<dyn SliceSink>,
    source: Option<Arc<dyn SliceSource>>,
) -> Result<Engine, DaemonError> {
    Ok(match fabric {
        None => Engine::start(cfg.clone(), shared, sink, source)?,
        Some(ep) => {
            let part = NodePart {
                node,
                transport: ep,
                shared,
            };
            Engine::start_nodes(cfg.clone(), vec![part], sink, source)?
        }
    })
}

/// This node's job segment: every slot for a one-daemon job, else only its own ranks'
/// (the others' state reaches node 0 through the slot mirror).
fn create_segment(cfg: &EngineConfig, node: u32) -> std::io::Result<JobSegment> {
    if cfg.nodes == 1 {
        return crate::rank::create_segment(cfg.ranks, cfg.nodes);
    }
    JobSegment::create_for_node(
        cfg.ranks,
        cfg.nodes,
        crate::rank::DESC_CAPACITY,
        crate::rank::COMP_CAPACITY,
        node,
        &cfg.node_of_rank(),
    )
}

/// The engine's sink, and the wire sink inside it to flush at the end (if any).
type NodeSink = (Arc<dyn SliceSink>, Option<Arc<WireSink>>);

/// The sink this node's engine writes its slice records into: a job that ships slices
/// (`JobSpec::ship_slices`: `strobe record` and `strobe replay` across hosts) gets the
/// wire sink (`daemon/wire_sink.rs`), built with [`frame_sender`] so its frames travel as
/// `sinkFrame`s on the control connection, in order, before the node report
/// ([`finish_sink`] runs, then the wire sink is flushed). Otherwise the records are
/// dropped (`strobe run`).
fn node_sink(spec: &JobSpec, node: u32, writer: &Arc<ControlWriter>) -> std::io::Result<NodeSink> {
    if !spec.ship_slices {
        return Ok((Arc::new(NullSink), None));
    }
    let mut captures = vec![false; spec.ranks as usize];
    for &r in &spec.captures {
        if let Some(c) = captures.get_mut(r as usize) {
            *c = true;
        }
    }
    let wire = Arc::new(WireSink::new(
        node,
        captures,
        Box::new(frame_sender(writer.clone())),
    )?);
    Ok((wire.clone(), Some(wire)))
}

/// Hands encoded sink frames to the Machine Manager (the wire sink's `FrameSender`).
pub fn frame_sender(writer: Arc<ControlWriter>) -> impl Fn(Vec<u8>) + Send + Sync {
    move |bytes| {
        let _ = writer.send(&ControlMessage::SinkFrame, &bytes);
    }
}

/// After the engine: what the local ranks' outcome rings still hold, each one's open run
/// of failed tests, and (with MMDS on) their final counters go to the sink, as the one-host
/// launcher does for every rank.
fn finish_sink(spec: &JobSpec, shared: &JobShared, local: &[u32], sink: &dyn SliceSink) {
    for &r in local {
        let mut recs = Vec::new();
        shared.seg.queues(r).outcomes.drain_into(&mut recs);
        let fails = shared.seg.slot(r).pending_fails.load(Ordering::Acquire);
        if fails > 0 {
            recs.push(crate::outcome::OutcomeRec::fails(fails));
        }
        if !recs.is_empty() {
            sink.outcomes(r, &recs);
        }
    }
    if spec.mmds_resolution != 0 {
        let mmds: Vec<_> = local
            .iter()
            .filter_map(|&r| crate::mmds::snapshot(&shared.seg, r))
            .collect();
        sink.mmds(&mmds);
    }
}

/// The daemon: runs its share of the job; the exit status of `strobe node`.
/// `replay`: how this daemon reads a replay package (the `strobe` binary's, which knows
/// the replayer); `None`: a replay's job spec is refused.
pub fn run_daemon(setup: DaemonSetup, replay: Option<ReplayBuilder>) -> Result<i32, DaemonError> {
    crate::launcher::install_interrupt_handlers();
    let (reader, writer, local) =
        control::connect(setup.mm_addr, setup.node, setup.nodes, &setup.secret)?;
    let writer = Arc::new(writer);
    writer.send(
        &ControlMessage::DaemonHello {
            node: setup.node,
            host: host_name(),
            pid: std::process::id(),
        },
        &[],
    )?;
    let (tx, rx) = mpsc::channel();
    let slice = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let heard = Arc::new(control::LastHeard::default());
    let (input_tx, input_rx) = mpsc::channel();
    let (package_tx, package_rx) = mpsc::channel();
    start_control_reader(reader, tx.clone(), heard.clone(), input_tx, package_tx)?;
    start_heartbeat(writer.clone(), slice.clone(), done.clone(), tx)?;
    let mut d = Daemon {
        setup,
        writer,
        rx,
        slice,
        heard,
        input: Some(input_rx),
        packages: package_rx,
        replay_builder: replay,
        replay: None,
    };
    let code = d.run(local.ip());
    done.store(true, Ordering::Release);
    d.writer.shutdown();
    code
}

fn start_control_reader(
    mut reader: ControlReader,
    tx: Sender<FromMm>,
    heard: Arc<control::LastHeard>,
    input: Sender<Vec<u8>>,
    packages: Sender<Vec<u8>>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("strobe-control".into())
        .spawn(move || loop {
            match reader.recv() {
                Ok(Some((ControlMessage::RankInput(_), bytes))) => {
                    // Rank 0's stdin, straight to its feeder (the main loop may be busy).
                    heard.touch();
                    let _ = input.send(bytes);
                }
                Ok(Some((ControlMessage::ReplayPackage, bytes))) => {
                    // The bytes before the message: `expect` returns the message, then
                    // the main loop takes them.
                    heard.touch();
                    let _ = packages.send(bytes);
                    if tx
                        .send(FromMm::Message(ControlMessage::ReplayPackage))
                        .is_err()
                    {
                        return;
                    }
                }
                Ok(Some((m, _))) => {
                    heard.touch();
                    if tx.send(FromMm::Message(m)).is_err() {
                        return;
                    }
                }
                Ok(None) => {
                    let _ = tx.send(FromMm::Lost(
                        "the Machine Manager closed the connection".into(),
                    ));
                    return;
                }
                Err(e) => {
                    let _ = tx.send(FromMm::Lost(format!("the control connection broke: {e}")));
                    return;
                }
            }
        })?;
    Ok(())
}

fn start_heartbeat(
    writer: Arc<ControlWriter>,
    slice: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
    tx: Sender<FromMm>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("strobe-heartbeat".into())
        .spawn(move || {
            while !done.load(Ordering::Acquire) {
                let beat = ControlMessage::Heartbeat(slice.load(Ordering::Acquire));
                if let Err(e) = writer.send(&beat, &[]) {
                    let _ = tx.send(FromMm::Lost(format!("cannot send a heartbeat: {e}")));
                    return;
                }
                std::thread::sleep(HEARTBEAT_EVERY);
            }
        })?;
    Ok(())
}

struct Daemon {
    setup: DaemonSetup,
    writer: Arc<ControlWriter>,
    rx: Receiver<FromMm>,
    slice: Arc<AtomicU64>,
    heard: Arc<control::LastHeard>,
    /// Rank 0's stdin as the Machine Manager forwards it (an empty chunk: the end); taken
    /// by the node that runs rank 0.
    input: Option<Receiver<Vec<u8>>>,
    /// Replay packages' bytes, in the order their messages arrive.
    packages: Receiver<Vec<u8>>,
    replay_builder: Option<ReplayBuilder>,
    /// This node's share of a replay (a replay's job spec).
    replay: Option<DaemonReplay>,
}

/// How the daemon's main loop ended.
enum Ending {
    /// The Machine Manager is gone: the ranks were killed; nobody to report to.
    Lost(String),
    /// Stopped by the Machine Manager or by an interrupt.
    Stopped(String),
    /// The ranks ended (the engine's outcome says how the job went).
    Ran,
}

impl Daemon {
    fn send_report(&self, outcome: NodeOutcome, exit_code: i32, message: String) {
        if let Some(r) = &self.replay {
            // Before the report: the Machine Manager's verdict reads it with the report.
            let _ = self
                .writer
                .send(&ControlMessage::ReplayEnd(Box::new((r.end)())), &[]);
        }
        let m = ControlMessage::NodeReport {
            outcome,
            slice: self.slice.load(Ordering::Acquire),
            exit_code,
            message,
        };
        let _ = self.writer.send(&m, &[]);
    }

    /// The node's last word: its report, then goodbye.
    fn report(&self, outcome: NodeOutcome, exit_code: i32, message: String) {
        self.send_report(outcome, exit_code, message);
        let _ = self.writer.send(&ControlMessage::Goodbye, &[]);
    }

    /// This node's engine stopped the job (node 0: a deadlock; any node: a failure; a
    /// replay's source): say so at once, before the exits of the ranks this stop ends,
    /// which would otherwise reach the Machine Manager first and read as rank failures.
    fn report_engine_stop(&self, shared: &JobShared) {
        let report = match &*shared.outcome.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(EngineOutcome::Deadlock(r)) => Some(deadlock_report(r)),
            Some(EngineOutcome::Failed(f)) => Some((
                NodeOutcome::Failed,
                EXIT_INTERNAL,
                format!("runtime failure: {f}"),
            )),
            Some(EngineOutcome::SourceStopped(why)) => Some((
                NodeOutcome::SourceStopped,
                crate::launcher::EXIT_SOURCE_STOPPED,
                why.clone(),
            )),
            _ => None,
        };
        if let Some((o, code, msg)) = report {
            self.send_report(o, code, msg);
        }
    }

    /// The next message from the Machine Manager, heartbeats absorbed; `Err` when it is
    /// gone or late.
    fn next_message(&mut self, wait: Duration) -> Result<Option<ControlMessage>, String> {
        let deadline = Instant::now() + wait;
        loop {
            let quiet = self.heard.quiet();
            if quiet > HEARTBEAT_LATE {
                return Err(format!(
                    "no heartbeat from the Machine Manager for {:.1} s",
                    quiet.as_secs_f64()
                ));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left.min(Duration::from_millis(100))) {
                Ok(FromMm::Message(ControlMessage::Heartbeat(_))) => {}
                Ok(FromMm::Message(ControlMessage::Goodbye)) => {
                    return Err("the Machine Manager said goodbye".into())
                }
                Ok(FromMm::Message(m)) => return Ok(Some(m)),
                Ok(FromMm::Lost(why)) => return Err(why),
                Err(_) if Instant::now() >= deadline => return Ok(None),
                Err(_) => {}
            }
        }
    }

    /// Waits for a message the setup needs (the job spec, the peers' list).
    fn expect(&mut self, what: &str) -> Result<ControlMessage, DaemonError> {
        match self.next_message(Duration::from_secs(60)) {
            Ok(Some(m)) => Ok(m),
            Ok(None) => Err(DaemonError::Control(format!("no {what} in 60 s"))),
            Err(why) => Err(DaemonError::Control(format!(
                "waiting for the {what}: {why}"
            ))),
        }
    }

    fn run(&mut self, control_ip: IpAddr) -> Result<i32, DaemonError> {
        let mut spec = match self.expect("job spec")? {
            ControlMessage::JobSpec(s) => *s,
            ControlMessage::Stop(_) => return Ok(0),
            other => {
                return Err(DaemonError::Control(format!(
                    "expected the job spec, got {other:?}"
                )))
            }
        };
        if let Err(why) = check_spec(&spec, &self.setup) {
            tracing::error!("node {}: {why}", self.setup.node);
            self.report(NodeOutcome::Failed, EXIT_CANNOT_START, why);
            return Ok(EXIT_CANNOT_START);
        }
        let _outcomes = match self.receive_replay(&mut spec) {
            Ok(f) => f,
            Err(why) => {
                tracing::error!("node {}: {why}", self.setup.node);
                self.report(NodeOutcome::Failed, EXIT_CANNOT_START, why);
                return Ok(EXIT_CANNOT_START);
            }
        };
        let fabric = match self.wire_fabric(&spec, control_ip) {
            Ok(f) => f,
            Err(e) => {
                self.report(NodeOutcome::Failed, EXIT_INTERNAL, e.to_string());
                return Ok(EXIT_INTERNAL);
            }
        };
        self.run_job(&spec, fabric)
    }

    /// A replay's spec: the package that follows it, read with the binary's builder; the
    /// ranks' outcome file written on this host (kept while the job runs).
    fn receive_replay(&mut self, spec: &mut JobSpec) -> Result<Option<OutcomesFile>, String> {
        if !spec.replay {
            return Ok(None);
        }
        let builder = self
            .replay_builder
            .ok_or("this strobe node cannot replay (no replay support)")?;
        match self.expect("replay package") {
            Ok(ControlMessage::ReplayPackage) => {}
            Ok(other) => return Err(format!("expected the replay package, got {other:?}")),
            Err(e) => return Err(e.to_string()),
        }
        let bytes = self
            .packages
            .recv()
            .map_err(|_| "the replay package's bytes are missing".to_string())?;
        let replay = builder(&bytes, self.setup.node)?;
        let file = OutcomesFile::install(spec, self.setup.node, &replay.outcomes_file)
            .map_err(|e| format!("writing the ranks' recorded outcomes: {e}"))?;
        self.replay = Some(replay);
        Ok(Some(file))
    }

    /// Binds the fabric endpoint, reports its address, gets everybody's, joins. A
    /// one-daemon job has no fabric (it reports an empty address).
    fn wire_fabric(
        &mut self,
        spec: &JobSpec,
        control_ip: IpAddr,
    ) -> Result<Option<Arc<dyn Transport>>, DaemonError> {
        let binding = if spec.nodes > 1 {
            let ip = self.setup.iface.unwrap_or(control_ip);
            let ecfg = engine_config(spec);
            let mut cfg = TcpConfig::new(
                spec.nodes,
                global_size(&ecfg),
                EVENTS,
                self.setup.secret.clone(),
            );
            cfg.wireup_timeout = Duration::from_secs(30);
            Some(TcpBinding::bind(
                self.setup.node,
                SocketAddr::new(ip, 0),
                cfg,
            )?)
        } else {
            None
        };
        let addr = match &binding {
            Some(b) => b.local_addr()?.to_string(),
            None => String::new(),
        };
        // The verbs offer: the Machine Manager picks one transport for the job.
        let ecfg = engine_config(spec);
        let verbs = select::daemon_verbs(self.setup.node, spec.nodes, global_size(&ecfg));
        let offer = Offer {
            tcp: addr,
            verbs: verbs.as_ref().map(|b| b.address()).map_err(Clone::clone),
        };
        self.writer
            .send(&ControlMessage::FabricAddr(offer.encode()), &[])?;
        let peers = match self.expect("fabric peers")? {
            ControlMessage::FabricPeers(p) => p,
            other => {
                return Err(DaemonError::Control(format!(
                    "expected the fabric peers, got {other:?}"
                )))
            }
        };
        match binding {
            Some(tcp) => Ok(Some(select::join_chosen(&peers, tcp, verbs)?)),
            None => Ok(None),
        }
    }

    fn run_job(
        &mut self,
        spec: &JobSpec,
        fabric: Option<Arc<dyn Transport>>,
    ) -> Result<i32, DaemonError> {
        let cfg = engine_config(spec);
        if let Err(why) = cfg.check_placement() {
            self.report(NodeOutcome::Failed, EXIT_INTERNAL, why);
            return Ok(EXIT_INTERNAL);
        }
        let seg = create_segment(&cfg, self.setup.node)?;
        let fd = seg.inheritable_fd()?;
        let seg_len = seg.len();
        crate::mmds::set_resolution(&seg, spec.mmds_resolution);
        crate::segment::set_send_limits(&seg, cfg.inline_max, cfg.eager_max, cfg.local_null);
        let shared = Arc::new(JobShared::new(seg));
        let (mut sink, wire) = node_sink(spec, self.setup.node, &self.writer)?;
        let sink_ref = sink.clone();
        let mut source = None;
        if let Some(r) = self.replay.as_mut() {
            source = Some(r.source.clone());
            if let Some(tap) = r.tap.take() {
                sink = tap(sink);
            }
        }
        let engine = match start_engine(&cfg, self.setup.node, fabric, shared.clone(), sink, source)
        {
            Ok(e) => e,
            Err(e) => {
                self.report(NodeOutcome::Failed, EXIT_INTERNAL, e.to_string());
                return Ok(EXIT_INTERNAL);
            }
        };
        let mut job = LocalRanks::default();
        if let Err(how) = self.spawn_local(spec, &shared, fd, seg_len, &mut job) {
            ranks::kill_all(&shared, &mut job.children, &job.reaped);
            job.reap_all();
            let _ = engine.join();
            self.report(NodeOutcome::Failed, EXIT_CANNOT_START, how);
            return Ok(EXIT_CANNOT_START);
        }
        let ending = self.watch(&shared, &mut job);
        if let Ending::Lost(why) = &ending {
            // Nobody to report to: the ranks are dead and reaped; leave at once (the
            // engine's threads may be blocked on a fabric that is going away too).
            tracing::error!("node {}: {why}; its ranks were killed", self.setup.node);
            return Ok(EXIT_MM_LOST);
        }
        shared.request_stop();
        let outcome = engine.join();
        self.slice
            .store(shared.slice.load(Ordering::Acquire), Ordering::Release);
        for f in job.forwarders.drain(..) {
            let _ = f.join();
        }
        finish_sink(spec, &shared, &job.ranks, sink_ref.as_ref());
        if let Some(w) = &wire {
            // Every frame leaves before the report: the Machine Manager applies them all
            // before it finishes the recording.
            w.finish();
        }
        self.final_report(ending, outcome);
        Ok(0)
    }

    /// Spawns this node's ranks and starts forwarding their output; `Err` says why one
    /// could not be started (those already started are in `job`).
    fn spawn_local(
        &mut self,
        spec: &JobSpec,
        shared: &JobShared,
        fd: i32,
        seg_len: usize,
        job: &mut LocalRanks,
    ) -> Result<(), String> {
        let program = String::from_utf8_lossy(&spec.program).into_owned();
        for rank in (0..spec.ranks).filter(|&r| spec.placement[r as usize] == self.setup.node) {
            let mut child = ranks::spawn_rank(spec, rank, fd, seg_len)
                .map_err(|e| format!("cannot start {program}: {e}"))?;
            shared
                .seg
                .slot(rank)
                .pid
                .store(child.id(), Ordering::Release);
            if let (Some(pipe), Some(input)) = (child.stdin.take(), self.input.take()) {
                ranks::feed_stdin(pipe, input).map_err(|e| format!("rank 0's stdin: {e}"))?;
            }
            let out = child.stdout.take();
            let err = child.stderr.take();
            job.push(rank, child);
            let forwarding =
                |e: std::io::Error| format!("cannot forward rank {rank}'s output: {e}");
            if let Some(p) = out {
                let f = ranks::forward_output(p, rank, false, self.writer.clone());
                job.forwarders.push(f.map_err(forwarding)?);
            }
            if let Some(p) = err {
                let f = ranks::forward_output(p, rank, true, self.writer.clone());
                job.forwarders.push(f.map_err(forwarding)?);
            }
        }
        Ok(())
    }

    fn final_report(&self, ending: Ending, outcome: EngineOutcome) {
        let (o, code, msg) = match (ending, outcome) {
            (Ending::Stopped(why), _) => (NodeOutcome::Stopped, 0, why),
            (_, EngineOutcome::Deadlock(r)) => deadlock_report(&r),
            (_, EngineOutcome::Failed(f)) => (
                NodeOutcome::Failed,
                EXIT_INTERNAL,
                format!("runtime failure: {f}"),
            ),
            (_, EngineOutcome::SourceStopped(why)) => (
                NodeOutcome::SourceStopped,
                crate::launcher::EXIT_SOURCE_STOPPED,
                why,
            ),
            _ => (NodeOutcome::Success, 0, String::new()),
        };
        self.report(o, code, msg);
    }

    /// Until every local rank is reaped: reports exits, obeys stops, notices a lost or
    /// silent Machine Manager and an engine that stopped (deadlock, failure).
    fn watch(&mut self, shared: &Arc<JobShared>, job: &mut LocalRanks) -> Ending {
        let (tx, rx) = mpsc::channel();
        let pids = job.pids();
        let reaper = std::thread::Builder::new()
            .name("strobe-reaper".into())
            .spawn(move || crate::launcher::reap(pids, tx))
            .expect("spawn reaper thread");
        let mut ending: Option<Ending> = None;
        while job.alive() > 0 {
            self.slice
                .store(shared.slice.load(Ordering::Acquire), Ordering::Release);
            if ending.is_none() {
                ending = self.poll_control(shared);
                if ending.is_none() && crate::launcher::INTERRUPTED.load(Ordering::SeqCst) {
                    ending = Some(Ending::Stopped("the node daemon was interrupted".into()));
                }
                if ending.is_none() && shared.stop.load(Ordering::Acquire) {
                    self.report_engine_stop(shared);
                    ending = Some(Ending::Ran);
                }
                if ending.is_some() {
                    ranks::kill_all(shared, &mut job.children, &job.reaped);
                }
            }
            let Ok(crate::launcher::Event::Exited { pid, status }) =
                rx.recv_timeout(Duration::from_millis(20))
            else {
                continue;
            };
            let Some((i, rank)) = job.exited(pid) else {
                continue;
            };
            // Classified before the slot says Exited (it tells a finalized rank apart).
            let (how, code) = ranks::classify(shared, rank, status);
            if leave_computing(&shared.seg, rank, RankState::Exited) {
                ring_doorbell(&shared.seg);
            }
            let m = ControlMessage::RankExit {
                rank,
                pid: pid as u32,
                status,
                how,
                code,
                slice: shared.slice.load(Ordering::Acquire),
            };
            let _ = self.writer.send(&m, &[]);
            if how != Death::Clean && ending.is_none() {
                // The Machine Manager stops every node; this one stops its own at once.
                ending = Some(Ending::Ran);
                ranks::kill_all(shared, &mut job.children, &job.reaped);
            }
            let _ = i;
        }
        let _ = reaper.join();
        ending.unwrap_or(Ending::Ran)
    }

    fn poll_control(&mut self, _shared: &JobShared) -> Option<Ending> {
        match self.next_message(Duration::ZERO) {
            Ok(Some(ControlMessage::Stop(why))) => Some(Ending::Stopped(why)),
            Ok(_) => None,
            Err(why) => Some(Ending::Lost(why)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_lines_up_to_an_empty_line() {
        let mut input = &b"STROBE_TEST_ENV_A=1\nSTROBE_TEST_ENV_B=x=y\n\nNOT_READ=1\n"[..];
        assert_eq!(env_from_stdin(&mut input).unwrap(), 2);
        assert_eq!(std::env::var("STROBE_TEST_ENV_B").unwrap(), "x=y");
        assert!(std::env::var("NOT_READ").is_err());
        let mut bad = &b"no equals sign\n"[..];
        assert!(env_from_stdin(&mut bad).is_err());
    }
}
