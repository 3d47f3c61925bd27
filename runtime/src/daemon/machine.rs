//! The Machine Manager of a job across node daemons: the command the user runs (`strobe
//! run --hosts ...`). It generates the job secret, listens for the daemons' control
//! connections on the chosen interface only, starts the daemons through a launcher, sends
//! them the job, relays their fabric addresses, prints the ranks' output, collects exits
//! and node reports, decides the outcome with the one-host launcher's exit codes and
//! messages, stops the job when a daemon is lost (its connection drops or its heartbeat is
//! late), and makes sure every daemon is gone at the end.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, ToSocketAddrs, UdpSocket};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use strobe_schema::{ControlMessage, JobSpec, NodeOutcome, ReplayEnd};

use super::control::{self, ControlReader, ControlWriter, HEARTBEAT_EVERY, HEARTBEAT_LATE};
use super::launch::{DaemonCommand, Launcher};
use super::node_host::{file_sha256, ENV_MM_ADDR};
use super::ranks::rank_death;
use super::DaemonError;
use crate::engine::StrobePolicy;
use crate::launcher::{JobOutcome, JobReport, LaunchConfig, INTERRUPTED};
use crate::transport::auth::{JobSecret, SECRET_ENV};
use crate::transport::select::{self, Chosen, Offer, TransportChoice};

/// How long the daemons have to connect back once started.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long stopped daemons have to report and say goodbye before they are cut off.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// Exit status when a node daemon was lost: as for a rank killed by SIGKILL.
pub const EXIT_NODE_LOST: i32 = 128 + libc::SIGKILL;

/// How long after a node reports a failure of its link to another node the Machine
/// Manager still takes that node's loss, when it notices it, for the cause (the report
/// races the control connection's close; seen under CI load:
/// `multi_host::a_killed_daemon_stops_the_job_with_a_report` got the link failure, 70).
const LINK_FAILURE_GRACE: Duration = Duration::from_secs(2);

/// Receives the sink frames daemons ship on their control connections (the recorder's
/// or a replay's verifier side: `wire_sink::FrameApplier`); called on the Machine
/// Manager's main thread, in arrival order per node. A replay across hosts also gives each
/// daemon its package, hears how each node's source ended, and stops the job when the
/// Machine Manager's side (the verifier, the user) stopped the replay.
pub trait FrameSink: Send + Sync {
    fn frame(&self, node: u32, bytes: &[u8]);
    /// A replay: node `node`'s replay package (sent after the job spec). `None` for
    /// every node: not a replay.
    fn replay_package(&self, _node: u32) -> Option<Vec<u8>> {
        None
    }
    /// A daemon's replay source ended (sent before its node report).
    fn replay_end(&self, _node: u32, _end: &ReplayEnd) {}
    /// Why the job must stop now (a replay's divergence found here, a quit), if it must.
    fn stopped(&self) -> Option<String> {
        None
    }
}

impl FrameSink for super::wire_sink::FrameApplier {
    fn frame(&self, node: u32, bytes: &[u8]) {
        super::wire_sink::FrameApplier::frame(self, node, bytes);
    }
}

/// A job across node daemons.
pub struct MachineConfig {
    /// The program, its arguments and environment, the engine's settings (`ranks`,
    /// `nodes` = `hosts.len()`), `tag_output`, `timeout`, `mmds_resolution`.
    pub launch: LaunchConfig,
    /// Node `i` runs on `hosts[i]`.
    pub hosts: Vec<String>,
    /// The node of each rank.
    pub placement: Vec<u32>,
    pub launcher: Box<dyn Launcher>,
    /// The address the control listener binds (`--iface`); `None`: the address this host
    /// reaches the first host from (loopback for local daemons).
    pub iface: Option<IpAddr>,
    /// The `strobe` executable the daemons run (the same path on every host).
    pub strobe_exe: PathBuf,
    /// Ship slice records to the Machine Manager (recording, replay).
    pub ship_slices: bool,
    /// Ranks whose payloads are recorded (`--capture-payloads`).
    pub captures: Vec<u32>,
    /// `--transport`: decided once every daemon reported its offers (`transport::select`).
    pub transport: TransportChoice,
}

/// How the job ended, and what `strobe run` should say and exit with.
#[derive(Debug)]
pub struct MachineReport {
    pub report: JobReport,
    pub exit_code: i32,
    pub message: Option<String>,
    /// Control connections refused (failed authentication).
    pub refused: u64,
    /// The transport chosen between the nodes (`None`: the job ended before wire-up).
    pub transport: Option<Chosen>,
    /// Each node's share of the job, in node order (`--summary`).
    pub nodes: Vec<NodeSummary>,
}

/// One node daemon's share of a job, as the Machine Manager saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSummary {
    pub node: u32,
    /// The host it ran on (the name it was started on; with the name the host gives
    /// itself in parentheses when they differ).
    pub host: String,
    /// How many ranks ran on it.
    pub ranks: u32,
    /// The last slice it reported (heartbeats, its node report).
    pub slices: u64,
}

/// Resolves `program` as a shell would (a bare name through `PATH`) to an absolute path.
pub fn resolve_program(program: &Path) -> Result<PathBuf, DaemonError> {
    let found = if program.as_os_str().as_bytes().contains(&b'/') {
        Some(program.to_path_buf())
    } else {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(program))
                .find(|p| p.is_file())
        })
    };
    let p = found
        .ok_or_else(|| DaemonError::Launch(format!("cannot find {} in PATH", program.display())))?;
    p.canonicalize()
        .map_err(|e| DaemonError::Launch(format!("cannot start {}: {e}", p.display())))
}

/// The control listener's address: `--iface`, else the local address that routes to the
/// first host (a UDP "connect" sends nothing), else loopback for local daemons, else the
/// wildcard (a host name this machine cannot resolve: daemons still authenticate).
fn control_ip(cfg: &MachineConfig) -> IpAddr {
    if let Some(ip) = cfg.iface {
        return ip;
    }
    if cfg.launcher.name() == "local" {
        return IpAddr::V4(Ipv4Addr::LOCALHOST);
    }
    let first = cfg.hosts.first().map(String::as_str).unwrap_or("localhost");
    let routed = (first, 9).to_socket_addrs().ok().and_then(|mut a| {
        let to = a.next()?;
        let s = UdpSocket::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0)).ok()?;
        s.connect(to).ok()?;
        Some(s.local_addr().ok()?.ip())
    });
    routed.unwrap_or_else(|| {
        tracing::warn!(
            "cannot tell which interface reaches {first}: listening for the daemons on every \
             interface (pass --iface ADDR to choose one)"
        );
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    })
}

fn job_spec(cfg: &MachineConfig) -> Result<JobSpec, DaemonError> {
    let l = &cfg.launch;
    let e = &l.engine;
    let program = resolve_program(&l.program)?;
    let sum = file_sha256(&program)
        .map_err(|err| DaemonError::Launch(format!("cannot read {}: {err}", program.display())))?;
    let cwd = std::env::current_dir()?;
    Ok(JobSpec {
        program: program.as_os_str().as_bytes().to_vec(),
        program_sha256: sum,
        args: l.args.iter().map(|a| a.as_bytes().to_vec()).collect(),
        env: l
            .env
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect(),
        cwd: cwd.as_os_str().as_bytes().to_vec(),
        ranks: e.ranks,
        nodes: cfg.hosts.len() as u32,
        placement: cfg.placement.clone(),
        slice_ns: e.slice.as_nanos() as u64,
        adaptive: e.policy == StrobePolicy::Adaptive,
        deadlock_slices: e.deadlock_slices,
        chunk_budget: e.chunk_budget,
        direct_copy_min: e.direct_copy_min,
        eager_max: e.eager_max,
        inline_max: e.inline_max,
        local_null: e.local_null,
        tag_output: l.tag_output,
        timeout_ms: l.timeout.map_or(0, |t| t.as_millis() as u64),
        mmds_resolution: l.mmds_resolution,
        ship_slices: cfg.ship_slices,
        captures: cfg.captures.clone(),
        replay: false,
    })
}

/// What the per-connection readers hand to the main loop.
enum FromNode {
    Message(u32, ControlMessage, Vec<u8>),
    Lost(u32, String),
}

/// One daemon as the Machine Manager sees it.
struct Node {
    host: String,
    writer: Arc<ControlWriter>,
    heard: Arc<control::LastHeard>,
    slice: u64,
    /// Said goodbye or was lost: nothing more is expected from it.
    finished: bool,
}

/// Whether a node's failure message is about its link to `node` (the TCP transport's
/// errors: `link to node N lost: ...`, `link to node N closed`, `link to node N: send
/// failed: ...`).
fn names_link_to(message: &str, node: u32) -> bool {
    message.contains(&format!("link to node {node}:"))
        || message.contains(&format!("link to node {node} "))
}

/// The job's state while it runs.
struct Machine<'a> {
    cfg: &'a MachineConfig,
    nodes: Vec<Node>,
    rx: Receiver<FromNode>,
    outcome: Option<JobOutcome>,
    /// Exit status and message when they are not the outcome's own (a lost node, a
    /// node's report).
    verdict: Option<(i32, String)>,
    /// The verdict came from a node's failure report naming its link to another node, at
    /// this instant: if that node is found lost soon after, the loss is the cause and
    /// becomes the verdict ([`Machine::lost`]).
    link_failure: Option<(String, Instant)>,
    rank_status: Vec<Option<i32>>,
    /// Per (rank, stderr): the last piece forwarded ended a line.
    at_line_start: BTreeMap<(u32, bool), bool>,
    stopping_since: Option<Instant>,
    frames: Option<Arc<dyn FrameSink>>,
    started: Instant,
    transport: Option<Chosen>,
}

/// Runs a job on node daemons to the end. Prints the ranks' output; nothing else.
pub fn run_machine(
    cfg: &MachineConfig,
    frames: Option<Arc<dyn FrameSink>>,
) -> Result<MachineReport, DaemonError> {
    let n = cfg.hosts.len();
    if n == 0 || cfg.placement.len() != cfg.launch.engine.ranks as usize {
        return Err(DaemonError::Launch(format!(
            "{} hosts and a placement of {} ranks for {} ranks",
            n,
            cfg.placement.len(),
            cfg.launch.engine.ranks
        )));
    }
    if let Some(bad) = cfg.placement.iter().find(|&&p| p as usize >= n) {
        return Err(DaemonError::Launch(format!(
            "a rank placed on node {bad} of {n}"
        )));
    }
    crate::launcher::install_interrupt_handlers();
    let mut spec = job_spec(cfg)?;
    let packages: Option<Vec<Vec<u8>>> = frames
        .as_ref()
        .and_then(|f| (0..n as u32).map(|node| f.replay_package(node)).collect());
    spec.replay = packages.is_some();
    // Verification needs node 0's slice records at the Machine Manager.
    spec.ship_slices |= spec.replay;
    let started = Instant::now();
    let secret = JobSecret::generate()?;
    let listener = TcpListener::bind(SocketAddr::new(control_ip(cfg), 0))?;
    let addr = listener.local_addr()?;
    // Listening on every interface: the daemons reach this host by its name (as Hydra's
    // proxies reach mpiexec), which the cluster's name service must resolve.
    let published = if addr.ip().is_unspecified() {
        format!("{}:{}", super::node_host::host_name(), addr.port())
    } else {
        addr.to_string()
    };
    let cmd = DaemonCommand {
        program: cfg.strobe_exe.clone(),
        args: vec![OsString::from("node")],
        env: vec![
            (ENV_MM_ADDR.into(), published.into()),
            (SECRET_ENV.into(), secret.to_hex().into()),
        ],
    };
    let mut children = cfg
        .launcher
        .start(&cfg.hosts, &cmd)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => DaemonError::LauncherNotFound(e.to_string()),
            _ => DaemonError::Launch(format!("{} launcher: {e}", cfg.launcher.name())),
        })?;
    let accepted = accept_daemons(listener, n as u32, &secret, &mut children);
    let (conns, refused) = match accepted {
        Ok(c) => c,
        Err(e) => {
            end_daemons(&mut children, Duration::ZERO);
            return Err(e);
        }
    };
    let (tx, rx) = mpsc::channel();
    let mut nodes = Vec::new();
    for (node, (reader, writer)) in conns.into_iter().enumerate() {
        let heard = Arc::new(control::LastHeard::default());
        start_reader(node as u32, reader, tx.clone(), heard.clone())?;
        nodes.push(Node {
            host: cfg.hosts[node].clone(),
            writer: Arc::new(writer),
            heard,
            slice: 0,
            finished: false,
        });
    }
    drop(tx);
    let mut m = Machine {
        cfg,
        nodes,
        rx,
        outcome: None,
        verdict: None,
        link_failure: None,
        rank_status: vec![None; spec.ranks as usize],
        at_line_start: BTreeMap::new(),
        stopping_since: None,
        frames,
        started,
        transport: None,
    };
    m.set_up(spec, packages);
    m.watch();
    for node in &m.nodes {
        node.writer.shutdown();
    }
    end_daemons(&mut children, Duration::from_secs(2));
    Ok(m.into_report(refused))
}

/// Accepts one authenticated control connection per node, until `CONNECT_TIMEOUT` or a
/// launcher child exits before its daemon connected. Refusals are logged and counted. The
/// listener is closed on return: nothing listens during the job.
#[allow(clippy::type_complexity)]
fn accept_daemons(
    listener: TcpListener,
    nodes: u32,
    secret: &JobSecret,
    children: &mut [Child],
) -> Result<(Vec<(ControlReader, ControlWriter)>, u64), DaemonError> {
    listener.set_nonblocking(true)?;
    let deadline = Instant::now() + CONNECT_TIMEOUT;
    type Accepted = Result<(u32, ControlReader, ControlWriter), String>;
    let (tx, rx) = mpsc::channel::<(SocketAddr, Accepted)>();
    let mut got: BTreeMap<u32, (ControlReader, ControlWriter)> = BTreeMap::new();
    let mut refused = 0u64;
    while got.len() < nodes as usize {
        while let Ok((from, r)) = rx.try_recv() {
            match r {
                Ok((node, rd, wr)) if !got.contains_key(&node) => {
                    got.insert(node, (rd, wr));
                }
                Ok((node, _, _)) => refuse(&mut refused, from, &format!("node {node} twice")),
                Err(why) => refuse(&mut refused, from, &why),
            }
        }
        if got.len() == nodes as usize {
            break;
        }
        let missing: Vec<u32> = (0..nodes).filter(|n| !got.contains_key(n)).collect();
        for &n in &missing {
            if let Some(Ok(Some(st))) = children.get_mut(n as usize).map(|c| c.try_wait()) {
                return Err(DaemonError::Launch(format!(
                    "the daemon of node {n} ended ({st}) before it connected back"
                )));
            }
        }
        if Instant::now() >= deadline {
            return Err(DaemonError::Launch(format!(
                "nodes {missing:?} did not connect back within {CONNECT_TIMEOUT:?}"
            )));
        }
        match listener.accept() {
            Ok((s, from)) => {
                let (tx, secret) = (tx.clone(), secret.clone());
                let _ = s.set_nonblocking(false);
                std::thread::spawn(move || {
                    let _ = tx.send((from, control::accept(s, nodes, &secret)));
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok((got.into_values().collect(), refused))
}

fn refuse(count: &mut u64, from: SocketAddr, why: &str) {
    *count += 1;
    tracing::warn!("refused a control connection from {from}: {why}");
    eprintln!("strobe: refused a control connection from {from}: {why}");
}

fn start_reader(
    node: u32,
    mut r: ControlReader,
    tx: Sender<FromNode>,
    heard: Arc<control::LastHeard>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(format!("strobe-ctl{node}"))
        .spawn(move || loop {
            let ev = match r.recv() {
                Ok(Some((m, payload))) => {
                    heard.touch();
                    FromNode::Message(node, m, payload)
                }
                Ok(None) => FromNode::Lost(node, "its control connection closed".into()),
                Err(e) => FromNode::Lost(node, format!("its control connection broke: {e}")),
            };
            let last = matches!(ev, FromNode::Lost(..));
            if tx.send(ev).is_err() || last {
                return;
            }
        })?;
    Ok(())
}

/// Sends what this process reads on its stdin to rank 0's daemon, then the end (an empty
/// chunk), as mpiexec forwards its stdin to rank 0. The thread is never joined: it may sit
/// in `read` on a terminal until strobe exits. It reads fd 0 directly, not through
/// `std::io::stdin()`, whose lock it would hold while blocked.
fn forward_stdin(to: Arc<ControlWriter>) {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    let _ = std::thread::Builder::new()
        .name("strobe-stdin".into())
        .spawn(move || {
            // SAFETY: fd 0 is open for the life of the process; ManuallyDrop keeps this
            // File from closing it.
            let mut stdin = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(0) });
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match stdin.read(&mut buf) {
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => 0,
                };
                if to.send(&ControlMessage::RankInput(0), &buf[..n]).is_err() || n == 0 {
                    return;
                }
            }
        });
}

/// Waits up to `grace` for the launcher's children (daemons, remote shells), then kills
/// and reaps what is left.
fn end_daemons(children: &mut [Child], grace: Duration) {
    let deadline = Instant::now() + grace;
    for c in children.iter_mut() {
        loop {
            match c.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() >= deadline => {
                    let _ = c.kill();
                    let _ = c.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }
}

impl Machine<'_> {
    fn live(&self) -> impl Iterator<Item = (u32, &Node)> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| !n.finished)
            .map(|(i, n)| (i as u32, n))
    }

    fn send_all(&self, m: &ControlMessage) {
        for (_, n) in self.live() {
            let _ = n.writer.send(m, &[]);
        }
    }

    /// The job spec to every daemon, then the fabric addresses they report, to all.
    fn set_up(&mut self, spec: JobSpec, packages: Option<Vec<Vec<u8>>>) {
        self.send_all(&ControlMessage::JobSpec(Box::new(spec)));
        for (node, bytes) in packages.iter().flatten().enumerate() {
            let _ = self.nodes[node]
                .writer
                .send(&ControlMessage::ReplayPackage, bytes);
        }
        let mut addrs: Vec<Option<String>> = vec![None; self.nodes.len()];
        while self.outcome.is_none() && addrs.iter().any(Option::is_none) {
            match self.next_event(HEARTBEAT_EVERY) {
                Some((node, ControlMessage::FabricAddr(a), _)) => addrs[node as usize] = Some(a),
                Some((node, m, payload)) => self.handle(node, m, &payload),
                None => {}
            }
            self.check_health();
        }
        if self.outcome.is_none() {
            let offers: Vec<Offer> = addrs
                .into_iter()
                .map(|a| Offer::decode(&a.unwrap_or_default()))
                .collect();
            let peers = match select::decide_job(self.cfg.transport, &offers) {
                Ok((chosen, peers)) => {
                    self.transport = Some(chosen);
                    peers
                }
                Err(why) => {
                    self.verdict = Some((select::EXIT_TRANSPORT_REFUSED, why.clone()));
                    return self.stop(JobOutcome::EngineFailed(why.clone()), &why);
                }
            };
            self.send_all(&ControlMessage::FabricPeers(peers));
            let rank0 = &self.nodes[self.cfg.placement[0] as usize];
            forward_stdin(rank0.writer.clone());
        }
    }

    /// Until every daemon said goodbye or was lost.
    fn watch(&mut self) {
        while self.live().next().is_some() {
            if let Some((node, m, payload)) = self.next_event(Duration::from_millis(20)) {
                self.handle(node, m, &payload);
            }
            self.check_health();
        }
    }

    /// The next message (heartbeats absorbed, lost nodes handled), sending our own
    /// heartbeats on time.
    fn next_event(&mut self, wait: Duration) -> Option<(u32, ControlMessage, Vec<u8>)> {
        let deadline = Instant::now() + wait;
        let mut last_beat = Instant::now() - HEARTBEAT_EVERY;
        loop {
            if last_beat.elapsed() >= HEARTBEAT_EVERY {
                self.send_all(&ControlMessage::Heartbeat(0));
                last_beat = Instant::now();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left.min(HEARTBEAT_EVERY)) {
                Ok(FromNode::Message(node, m, payload)) => {
                    let n = &mut self.nodes[node as usize];
                    if let ControlMessage::Heartbeat(s) = m {
                        n.slice = n.slice.max(s);
                        continue;
                    }
                    return Some((node, m, payload));
                }
                Ok(FromNode::Lost(node, why)) => {
                    self.lost(node, &why);
                    return None;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(left.min(Duration::from_millis(20)));
                    return None;
                }
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() >= deadline => return None,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// Late heartbeats, Ctrl-C, the timeout, and stopped daemons that take too long.
    fn check_health(&mut self) {
        let late: Vec<(u32, Duration)> = self
            .live()
            .filter(|(_, n)| n.heard.quiet() > HEARTBEAT_LATE)
            .map(|(i, n)| (i, n.heard.quiet()))
            .collect();
        for (node, quiet) in late {
            self.lost(
                node,
                &format!(
                    "its heartbeat is late (nothing heard for {:.1} s)",
                    quiet.as_secs_f64()
                ),
            );
        }
        if self.outcome.is_none() {
            if let Some(why) = self.frames.as_ref().and_then(|f| f.stopped()) {
                self.stop(JobOutcome::SourceStopped(why.clone()), &why);
            } else if INTERRUPTED.load(Ordering::SeqCst) {
                self.stop(JobOutcome::Interrupted, "interrupted");
            } else if self
                .cfg
                .launch
                .timeout
                .is_some_and(|t| self.started.elapsed() > t)
            {
                self.stop(JobOutcome::Timeout, "timeout");
            }
        }
        if self
            .stopping_since
            .is_some_and(|s| s.elapsed() > STOP_GRACE)
        {
            let stuck: Vec<u32> = self.live().map(|(i, _)| i).collect();
            for node in stuck {
                tracing::warn!("node {node} did not end within {STOP_GRACE:?} of the stop");
                self.nodes[node as usize].writer.shutdown();
                self.nodes[node as usize].finished = true;
            }
        }
    }

    /// Sets the outcome (the first one wins) and tells every daemon to stop.
    fn stop(&mut self, outcome: JobOutcome, why: &str) {
        if self.outcome.is_none() {
            self.outcome = Some(outcome);
        }
        if self.stopping_since.is_none() {
            self.stopping_since = Some(Instant::now());
            self.send_all(&ControlMessage::Stop(why.to_string()));
        }
    }

    fn lost(&mut self, node: u32, why: &str) {
        let n = &mut self.nodes[node as usize];
        if n.finished {
            return;
        }
        n.finished = true;
        n.writer.shutdown();
        let msg = format!(
            "node {node} (host {}) was lost in slice {}: {why}; the other nodes were stopped",
            n.host, n.slice
        );
        tracing::error!("{msg}");
        if self.link_failure_caused_by(node) {
            // A node whose link to this one broke reported first (its socket saw the peer
            // die before the Machine Manager's control connection did): the loss is the
            // cause, and the job's verdict.
            self.outcome = None;
            self.verdict = None;
        }
        if self.outcome.is_none() {
            self.verdict = Some((EXIT_NODE_LOST, msg.clone()));
        }
        self.stop(JobOutcome::EngineFailed(msg.clone()), &msg);
    }

    /// Whether the verdict so far is a node's report, made within [`LINK_FAILURE_GRACE`],
    /// of a failure of its link to `node`.
    fn link_failure_caused_by(&self, node: u32) -> bool {
        self.link_failure.as_ref().is_some_and(|(message, at)| {
            at.elapsed() < LINK_FAILURE_GRACE && names_link_to(message, node)
        })
    }

    fn handle(&mut self, node: u32, m: ControlMessage, payload: &[u8]) {
        match m {
            ControlMessage::RankOutput { rank, stderr } => self.print(rank, stderr, payload),
            ControlMessage::RankExit {
                rank,
                pid,
                status,
                how,
                code,
                slice,
            } => {
                if let Some(s) = self.rank_status.get_mut(rank as usize) {
                    *s = Some(status);
                }
                if let Some(how) = rank_death(how, code) {
                    let failed = JobOutcome::RankFailed {
                        rank,
                        pid,
                        how,
                        slice,
                    };
                    self.stop(failed, &format!("rank {rank} failed"));
                }
            }
            ControlMessage::NodeReport {
                outcome,
                exit_code,
                message,
                slice,
            } => {
                // The job's last slice (the report's `slices`, the recording's end): the
                // heartbeats may not have said it.
                let n = &mut self.nodes[node as usize];
                n.slice = n.slice.max(slice);
                self.node_report(node, outcome, exit_code, message)
            }
            ControlMessage::SinkFrame => {
                if let Some(f) = &self.frames {
                    f.frame(node, payload);
                }
            }
            ControlMessage::ReplayEnd(end) => {
                if let Some(f) = &self.frames {
                    f.replay_end(node, &end);
                }
            }
            ControlMessage::Goodbye => self.nodes[node as usize].finished = true,
            ControlMessage::DaemonHello { host, .. } => {
                tracing::debug!(node, host, "daemon connected");
                // The name the daemon's host gives itself, for reports.
                if !host.is_empty() && host != self.nodes[node as usize].host {
                    let n = &mut self.nodes[node as usize];
                    n.host = format!("{} ({host})", n.host);
                }
            }
            other => tracing::warn!(node, "unexpected control message {other:?}"),
        }
    }

    fn node_report(&mut self, node: u32, outcome: NodeOutcome, code: i32, message: String) {
        let host = self.nodes[node as usize].host.clone();
        let failed = match outcome {
            NodeOutcome::Success | NodeOutcome::Stopped => return,
            NodeOutcome::Deadlock => JobOutcome::EngineFailed(message.clone()),
            NodeOutcome::SourceStopped => JobOutcome::SourceStopped(message.clone()),
            NodeOutcome::Failed => {
                JobOutcome::EngineFailed(format!("node {node} (host {host}): {message}"))
            }
        };
        if self.outcome.is_none() {
            if outcome == NodeOutcome::Failed {
                self.link_failure = Some((message.clone(), Instant::now()));
            }
            let text = match outcome {
                NodeOutcome::Failed => format!("node {node} (host {host}): {message}"),
                _ => message,
            };
            self.verdict = Some((code, text.clone()));
            self.stop(failed, &text);
        }
    }

    /// A rank's output, tagged `[rank] ` at each line start with `--tag-output`.
    fn print(&mut self, rank: u32, stderr: bool, bytes: &[u8]) {
        let mut out = Vec::with_capacity(bytes.len() + 8);
        let start = self.at_line_start.entry((rank, stderr)).or_insert(true);
        if self.cfg.launch.tag_output && *start {
            out.extend_from_slice(format!("[{rank}] ").as_bytes());
        }
        out.extend_from_slice(bytes);
        *start = bytes.ends_with(b"\n");
        let _ = if stderr {
            std::io::stderr().lock().write_all(&out)
        } else {
            std::io::stdout().lock().write_all(&out)
        };
    }

    fn into_report(self, refused: u64) -> MachineReport {
        let slices = self.nodes.iter().map(|n| n.slice).max().unwrap_or(0);
        let report = JobReport {
            outcome: self.outcome.unwrap_or(JobOutcome::Success),
            slices,
            elapsed: self.started.elapsed(),
            rank_status: self.rank_status,
        };
        let (exit_code, message) = match self.verdict {
            Some((code, msg)) => (code, Some(msg)),
            None => (report.exit_code(), report.message()),
        };
        let nodes = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| NodeSummary {
                node: i as u32,
                host: n.host.clone(),
                ranks: self
                    .cfg
                    .placement
                    .iter()
                    .filter(|&&p| p as usize == i)
                    .count() as u32,
                slices: n.slice,
            })
            .collect();
        MachineReport {
            report,
            exit_code,
            message,
            refused,
            transport: self.transport,
            nodes,
        }
    }
}

#[cfg(test)]
mod link_failure_tests {
    use super::names_link_to;

    #[test]
    fn a_failure_names_the_link_it_lost_and_no_other() {
        let lost = "transport: transport failure: link to node 1 lost: it closed the link";
        assert!(names_link_to(lost, 1));
        assert!(!names_link_to(lost, 2));
        assert!(names_link_to(
            "link to node 12: send failed: broken pipe",
            12
        ));
        assert!(!names_link_to(
            "link to node 12: send failed: broken pipe",
            1
        ));
        assert!(names_link_to("link to node 3 closed", 3));
        assert!(!names_link_to("rank 3 died", 3));
    }
}
