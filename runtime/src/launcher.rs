//! The Machine Manager: creates a job, spawns its ranks, starts the node managers, watches
//! everything, and tears it all down, whatever happens.
//!
//! - Ranks are children of this process; each inherits the job segment's memfd (nothing is
//!   ever created in `/dev/shm`) and dies with us (`PR_SET_PDEATHSIG`).
//! - A reaper thread blocks in `waitpid` and reports every exit; the first abnormal one
//!   (signal, non-zero status, `MPI_Abort`, exit without `MPI_Finalize`) stops the job.
//! - Ctrl-C (SIGINT/SIGTERM) stops the job cleanly; every child is reaped before we return.
//!   Each rank runs in a process group of its own, so the terminal's Ctrl-C (sent to the
//!   foreground group: strobe's) reaches strobe only, and strobe stops the job: the ranks
//!   are never "killed by SIGINT", which a replay would take for a divergence. Consequences,
//!   decided: a rank that reads the terminal reads it through strobe (a pipe fed from
//!   strobe's stdin, see [`forward_stdin`]), since a background group reading a terminal is
//!   stopped by SIGTTIN; Ctrl-Z stops strobe, not the ranks.
//! - The job's size is checked against the machine before anything is spawned
//!   ([`crate::limits`]), and SIGINT/SIGTERM are honoured between spawns.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::{
    DeadlockReport, EngineConfig, EngineOutcome, JobShared, SliceSink, SliceSource,
};
use crate::segment::{
    leave_computing, ring_doorbell, RankState, ENV_FD, ENV_LEN, ENV_RANK, ENV_SIZE,
};

#[path = "launcher_nodes.rs"]
mod nodes;
use nodes::JobSegments;
pub use nodes::{isolate_nodes, ENV_ISOLATE_NODES};

/// Exit status of `strobe run` when the job deadlocked.
pub const EXIT_DEADLOCK: i32 = 3;
/// Exit status when the runtime itself failed.
pub const EXIT_INTERNAL: i32 = 70;
/// Exit status when the job ran past its timeout (as timeout(1)).
pub const EXIT_TIMEOUT: i32 = 124;
/// Exit status when the program could not be started.
pub const EXIT_CANNOT_START: i32 = 127;
/// Exit status after Ctrl-C.
pub const EXIT_INTERRUPTED: i32 = 130;
/// Exit status when the slice source (the replayer) stopped the job.
pub const EXIT_SOURCE_STOPPED: i32 = 4;

#[derive(Clone, Debug)]
pub struct LaunchConfig {
    pub engine: EngineConfig,
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// Prefix every line a rank prints with `[rank] `.
    pub tag_output: bool,
    /// Stop the job after this long.
    pub timeout: Option<Duration>,
    /// Extra environment for the ranks.
    pub env: Vec<(OsString, OsString)>,
    /// Per-process monitoring (MMDS, `mmds.rs`): histogram buckets per power of two, or
    /// 0 to leave it off. When on, every rank's statistics go to the sink at the end.
    pub mmds_resolution: u32,
    /// Send every rank's stdout and stderr to this file (appended) and give no rank the
    /// terminal's stdin, instead of sharing strobe's (`strobe replay --tui`: the terminal
    /// belongs to the UI). `tag_output` still prefixes lines when both are set.
    pub output: Option<PathBuf>,
    /// Relay every rank's stdout and stderr through strobe, skipping the bytes these marks
    /// say were already shown (the replayer's time travel runs a job again from the start:
    /// `rank_output`). `None`: the ranks write to the terminal (or `output`) directly.
    pub output_marks: Option<Arc<crate::rank_output::OutputMarks>>,
}

/// How a rank died.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RankDeath {
    Signal(i32),
    ExitCode(i32),
    /// Exited with status 0 without calling `MPI_Finalize`.
    NoFinalize,
    /// Exited with status 0 without ever calling `MPI_Init` (not an MPI program, or one
    /// that returned before initializing).
    NoInit,
    Abort(i32),
}

#[derive(Debug)]
pub enum JobOutcome {
    Success,
    RankFailed {
        rank: u32,
        pid: u32,
        how: RankDeath,
        slice: u64,
    },
    Deadlock(DeadlockReport),
    Interrupted,
    Timeout,
    EngineFailed(String),
    /// The slice source (the replayer) ended the job: a divergence, or the user.
    SourceStopped(String),
}

#[derive(Debug)]
pub struct JobReport {
    pub outcome: JobOutcome,
    pub slices: u64,
    pub elapsed: Duration,
    /// Each rank's raw wait status, as `ExitStatus::into_raw`, if it was reaped.
    pub rank_status: Vec<Option<i32>>,
}

impl JobReport {
    /// The exit status `strobe run` should end with.
    pub fn exit_code(&self) -> i32 {
        match &self.outcome {
            JobOutcome::Success => 0,
            JobOutcome::RankFailed { how, .. } => match how {
                RankDeath::Signal(s) => 128 + s,
                RankDeath::ExitCode(c) | RankDeath::Abort(c) => *c,
                RankDeath::NoFinalize | RankDeath::NoInit => 1,
            },
            JobOutcome::Deadlock(r) if r.livelock.is_some() => crate::engine::EXIT_LIVELOCK,
            JobOutcome::Deadlock(_) => EXIT_DEADLOCK,
            JobOutcome::Interrupted => EXIT_INTERRUPTED,
            JobOutcome::Timeout => EXIT_TIMEOUT,
            JobOutcome::EngineFailed(_) => EXIT_INTERNAL,
            JobOutcome::SourceStopped(_) => EXIT_SOURCE_STOPPED,
        }
    }

    /// A human-readable explanation, or `None` on success (success prints nothing).
    pub fn message(&self) -> Option<String> {
        Some(match &self.outcome {
            JobOutcome::Success => return None,
            JobOutcome::RankFailed {
                rank,
                pid,
                how,
                slice,
            } => {
                let how = match how {
                    RankDeath::Signal(s) => format!("was killed by {}", signal_name(*s)),
                    RankDeath::ExitCode(c) => format!("exited with status {c}"),
                    RankDeath::NoFinalize => "exited without calling MPI_Finalize".to_string(),
                    RankDeath::NoInit => "exited without calling MPI_Init".to_string(),
                    RankDeath::Abort(c) => format!("called MPI_Abort with error code {c}"),
                };
                format!(
                    "rank {rank} (pid {pid}) {how} in slice {slice}; the other ranks were stopped"
                )
            }
            JobOutcome::Deadlock(r) => r.to_string(),
            JobOutcome::Interrupted => "interrupted; every rank was stopped".to_string(),
            JobOutcome::Timeout => {
                "the job ran past its timeout; every rank was stopped".to_string()
            }
            JobOutcome::EngineFailed(e) => format!("runtime failure: {e}"),
            JobOutcome::SourceStopped(why) => why.clone(),
        })
    }
}

pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGPIPE => "SIGPIPE",
        _ => return format!("signal {sig}"),
    };
    name.to_string()
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("cannot create the job segment: {0}")]
    Segment(std::io::Error),
    #[error("cannot start the node managers: {0}")]
    Engine(#[from] crate::engine::EngineError),
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("invalid configuration: {0}")]
    Config(String),
    /// More ranks than the machine can hold (`crate::limits`).
    #[error("{0}")]
    Limit(String),
}

pub(crate) static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_sig: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

pub(crate) fn install_interrupt_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            libc::signal(sig, on_interrupt as *const () as libc::sighandler_t);
        }
    }
}

pub(crate) enum Event {
    Exited { pid: i32, status: i32 },
}

/// Run a job to the end. Prints nothing on stdout of its own.
pub fn launch(
    cfg: &LaunchConfig,
    sink: Arc<dyn SliceSink>,
    source: Option<Arc<dyn SliceSource>>,
) -> Result<JobReport, LaunchError> {
    let e = &cfg.engine;
    if e.ranks == 0 || e.nodes == 0 || e.nodes > e.ranks {
        return Err(LaunchError::Config(format!(
            "need at least one rank and 1..=ranks nodes (got {} ranks, {} nodes)",
            e.ranks, e.nodes
        )));
    }
    e.check_placement().map_err(LaunchError::Config)?;
    crate::limits::check_ranks(e.ranks)?;
    crate::futex::note_job_ranks(e.ranks);
    let output = match &cfg.output {
        Some(p) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|source| LaunchError::Spawn {
                    program: format!("(output file {})", p.display()),
                    source,
                })?,
        ),
        None => None,
    };
    install_interrupt_handlers();
    let started = Instant::now();
    let segs = JobSegments::create(e, isolate_nodes()).map_err(LaunchError::Segment)?;
    let mut seg_fds = Vec::new();
    for s in segs.all() {
        seg_fds.push(s.seg.inheritable_fd().map_err(LaunchError::Segment)?);
        crate::mmds::set_resolution(&s.seg, cfg.mmds_resolution);
    }
    let shared = segs.lead().clone();
    let logical = source.is_some();
    let engine = segs.start_engine(e, sink.clone(), source)?;

    let mut children: Vec<Child> = Vec::new();
    let mut forwarders = Vec::new();
    // A terminal stays strobe's (the ranks are in background groups): in a live run rank 0
    // reads it through a pipe. A replay (`logical`) does not feed it to rank 0: the
    // terminal is the stepper's there, and a forwarding thread would swallow its commands;
    // input for a replayed rank comes from a redirected stdin (a file or a pipe is passed
    // on as before).
    let tty_stdin = output.is_none() && std::io::IsTerminal::is_terminal(&std::io::stdin());
    for rank in 0..e.ranks {
        if INTERRUPTED.load(Ordering::SeqCst) {
            // Ctrl-C or SIGTERM while spawning: stop here, kill and reap what runs.
            shutdown(&segs, &mut children, &[]);
            for c in children.iter_mut() {
                let _ = c.wait();
            }
            let _ = engine.join();
            return Ok(JobReport {
                outcome: JobOutcome::Interrupted,
                slices: 0,
                elapsed: started.elapsed(),
                rank_status: vec![None; e.ranks as usize],
            });
        }
        let mut cmd = Command::new(&cfg.program);
        let own = segs.of(rank);
        let fd = seg_fds[segs
            .all()
            .iter()
            .position(|s| std::ptr::eq(&**s, own))
            .unwrap_or(0)];
        cmd.args(&cfg.args)
            .env(ENV_FD, fd.to_string())
            .env(ENV_LEN, own.seg.len().to_string())
            .env(ENV_RANK, rank.to_string())
            .env(ENV_SIZE, e.ranks.to_string())
            .env(
                crate::procmem::ENV_LAUNCHER_PID,
                std::process::id().to_string(),
            )
            .stdin(if rank == 0 && tty_stdin && !logical {
                Stdio::piped()
            } else if rank == 0 && tty_stdin {
                Stdio::null()
            } else if rank == 0 && output.is_none() {
                Stdio::inherit()
            } else {
                Stdio::null()
            });

        // Replay mode is only ever asked for explicitly (through `cfg.env`), never
        // inherited from whoever started strobe.
        cmd.env_remove(crate::outcome::ENV_REPLAY_OUTCOMES);
        for (k, v) in &cfg.env {
            cmd.env(k, v);
        }
        if cfg.tag_output {
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        // Out of the terminal's foreground group: Ctrl-C is strobe's to handle. No
        // `pre_exec` hook: with one, std forks (copying strobe's page tables, and making
        // every page the running node manager and recorder threads write fault once more
        // after each spawn); without, it uses posix_spawn (vfork-like, nothing copied).
        // At 1,000 ranks that was 0.3-0.4 s of `strobe record` (docs/benchmarks-detail.md).
        // What the hook also did happens in the rank at load time instead
        // (`procmem::die_with_launcher`, run by libmpi before `main`): the death signal,
        // and SIGINT/SIGTERM back to their defaults (handlers reset at exec anyway).
        cmd.process_group(0);
        let relays = match &cfg.output_marks {
            Some(marks) => Some(
                crate::rank_output::attach(&mut cmd, rank, marks, cfg.tag_output, output.as_ref())
                    .map_err(|source| LaunchError::Spawn {
                        program: "(the ranks' output relay)".into(),
                        source,
                    })?,
            ),
            None => None,
        };
        let spawned = match &output {
            Some(f) if relays.is_none() => f
                .try_clone()
                .and_then(|o| Ok((o, f.try_clone()?)))
                .and_then(|(o, e)| cmd.stdout(o).stderr(e).spawn()),
            _ => cmd.spawn(),
        };
        match spawned {
            Ok(mut child) => {
                segs.publish_pid(rank, child.id());
                if let Some(pipe) = child.stdin.take() {
                    forward_stdin(pipe);
                }
                if let Some(r) = relays {
                    forwarders.extend(r.start());
                } else if cfg.tag_output {
                    forwarders.push(forward(child.stdout.take(), rank, false));
                    forwarders.push(forward(child.stderr.take(), rank, true));
                }
                children.push(child);
            }
            Err(source) => {
                shutdown(&segs, &mut children, &[]);
                for c in children.iter_mut() {
                    let _ = c.wait();
                }
                let _ = engine.join();
                return Err(LaunchError::Spawn {
                    program: cfg.program.display().to_string(),
                    source,
                });
            }
        }
    }

    let pids: Vec<i32> = children.iter().map(|c| c.id() as i32).collect();
    let (tx, rx) = mpsc::channel();
    let rank_pids = pids.clone();
    let reaper = std::thread::Builder::new()
        .name("strobe-reaper".into())
        .spawn(move || reap(rank_pids, tx))
        .expect("spawn reaper thread");

    let mut status: Vec<Option<i32>> = vec![None; pids.len()];
    let mut outcome: Option<JobOutcome> = None;
    let mut alive = pids.len();
    while alive > 0 {
        if outcome.is_none() {
            if INTERRUPTED.load(Ordering::SeqCst) {
                outcome = Some(JobOutcome::Interrupted);
            } else if cfg.timeout.is_some_and(|t| started.elapsed() > t) {
                outcome = Some(JobOutcome::Timeout);
            } else if let Some(stopped) = segs.stopped() {
                outcome = Some(match stopped.outcome.lock().expect("outcome lock").take() {
                    Some(EngineOutcome::Deadlock(r)) => JobOutcome::Deadlock(r),
                    Some(EngineOutcome::Failed(f)) => {
                        // A replica divergence lands here: the node threads end the job
                        // with it, and it becomes the job's failure (EXIT_INTERNAL).
                        tracing::error!("engine failed: {f}");
                        JobOutcome::EngineFailed(f)
                    }
                    Some(EngineOutcome::SourceStopped(why)) => JobOutcome::SourceStopped(why),
                    _ => JobOutcome::EngineFailed("the engine stopped unexpectedly".into()),
                });
            }
            if outcome.is_some() {
                shutdown(&segs, &mut children, &status);
            }
        }
        let Ok(Event::Exited { pid, status: raw }) = rx.recv_timeout(Duration::from_millis(20))
        else {
            continue;
        };
        let Some(rank) = pids.iter().position(|&p| p == pid) else {
            continue;
        };
        alive -= 1;
        status[rank] = Some(raw);
        let rank = rank as u32;
        let own = &segs.of(rank).seg;
        let slot = own.slot(rank);
        let finalized = slot.state() == RankState::Finalized;
        tracing::debug!(rank, pid, status = raw, finalized, "rank exited");
        if leave_computing(own, rank, RankState::Exited) {
            ring_doorbell(own);
        }
        if outcome.is_some() {
            continue;
        }
        let st = std::process::ExitStatus::from_raw(raw);
        let abort = slot.abort_code.load(Ordering::Acquire);
        let how = if let Some(sig) = st.signal() {
            Some(RankDeath::Signal(sig))
        } else if abort != 0 {
            Some(RankDeath::Abort(abort as i32 - 1))
        } else if st.code() != Some(0) {
            Some(RankDeath::ExitCode(st.code().unwrap_or(1)))
        } else if !finalized {
            // A finalized rank called MPI_Init; only a rank that did not finalize is asked.
            if crate::mmds::called_init(own, rank) {
                Some(RankDeath::NoFinalize)
            } else {
                Some(RankDeath::NoInit)
            }
        } else {
            None
        };
        if let Some(how) = how {
            tracing::info!(rank, pid, ?how, "rank failed; stopping the job");
            if logical {
                await_parked(&shared);
            }
            outcome = Some(JobOutcome::RankFailed {
                rank,
                pid: pid as u32,
                how,
                slice: shared.slice.load(Ordering::Acquire),
            });
            shutdown(&segs, &mut children, &status);
        }
    }
    let _ = reaper.join();
    for s in segs.all() {
        s.request_stop();
    }
    let engine_outcome = engine.join();
    drain_outcomes_after(&segs, sink.as_ref());
    for f in forwarders {
        let _ = f.join();
    }
    if cfg.mmds_resolution != 0 {
        // Every rank is reaped: the counters are final, crashed ranks' included.
        let mmds: Vec<_> = (0..e.ranks)
            .filter_map(|r| crate::mmds::snapshot(&segs.of(r).seg, r))
            .collect();
        sink.mmds(&mmds);
    }
    let outcome = outcome.unwrap_or(match engine_outcome {
        EngineOutcome::Failed(f) => JobOutcome::EngineFailed(f),
        _ => JobOutcome::Success,
    });
    Ok(JobReport {
        outcome,
        slices: shared.slice.load(Ordering::Acquire),
        elapsed: started.elapsed(),
        rank_status: status,
    })
}

/// Logical slices (replay): before naming the slice a rank died in, let the Strobe Sender
/// run the slices it can still run (it runs empty ones back to back, without a timer) until
/// it waits at a closed gate. A live run names the slice the timer had reached; without
/// this, a replay would name whichever slice the engine happened to be in.
fn await_parked(shared: &JobShared) {
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut stable: Option<(u64, Instant)> = None;
    while Instant::now() < deadline && !shared.stop.load(Ordering::Acquire) {
        let p = shared.parked.load(Ordering::Acquire);
        match stable {
            // Longer than the replayer's wait for ranks to enter their blocking calls.
            Some((q, since)) if q == p && p != 0 => {
                if since.elapsed() > Duration::from_millis(50) {
                    return;
                }
            }
            _ => stable = Some((p, Instant::now())),
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// After the job: hand the sink what the ranks' outcome rings still hold and each rank's
/// open run of failed tests (the node threads are gone, so we are the rings' consumer).
fn drain_outcomes_after(segs: &JobSegments, sink: &dyn SliceSink) {
    for r in 0..segs.lead().seg.ranks() {
        let seg = &segs.of(r).seg;
        let mut recs = Vec::new();
        seg.queues(r).outcomes.drain_into(&mut recs);
        let fails = seg.slot(r).pending_fails.load(Ordering::Acquire);
        if fails > 0 {
            recs.push(crate::outcome::OutcomeRec::fails(fails));
        }
        if !recs.is_empty() {
            sink.outcomes(r, &recs);
        }
    }
}

/// Stop every rank: tell them (blocked ranks exit on their own), then kill what is left.
fn shutdown(segs: &JobSegments, children: &mut [Child], reaped: &[Option<i32>]) {
    for s in segs.all() {
        s.seg.header().shutdown.store(1, Ordering::Release);
        s.request_stop();
    }
    for r in 0..segs.lead().seg.ranks() {
        segs.of(r).seg.wake_rank(r);
    }
    // Ranks computing outside MPI would never notice: kill everything still running. Each
    // rank leads its own process group, which holds whatever it started too (the
    // terminal's Ctrl-C no longer reaches those): kill the group; a rank that has not
    // reached its `setpgid` yet has no group (ESRCH), so kill it alone.
    for (i, c) in children.iter_mut().enumerate() {
        if reaped.get(i).is_none_or(|s| s.is_none()) {
            // SAFETY: kill with a negative pid signals a process group; no memory involved.
            let rc = unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
            if rc != 0 {
                let _ = c.kill();
            }
        }
    }
}

/// Reaper thread: report every child exit (also a node daemon's, `daemon/node_host.rs`).
pub(crate) fn reap(mut ranks: Vec<i32>, tx: mpsc::Sender<Event>) {
    // Reap the ranks only: strobe starts other children too (gdb, tmux for `--gdb`), whose
    // owners wait for them. `waitid(WNOWAIT)` peeks at the next exited child; a rank is then
    // reaped, anyone else's child is left to its owner.
    while !ranks.is_empty() {
        // SAFETY: siginfo_t is plain data; an all-zero value is valid for waitid to fill.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid with a valid pointer to a local siginfo_t.
        let rc = unsafe { libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if rc < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return;
        }
        // SAFETY: waitid filled `info` for an exited child (si_pid is valid for SIGCHLD).
        let peeked = unsafe { info.si_pid() };
        let Some(pos) = ranks.iter().position(|&p| p == peeked) else {
            // Not a rank: its owner reaps it. Until it does, waitid keeps reporting it, so
            // poll the ranks themselves meanwhile.
            if !reap_exited_ranks(&mut ranks, &tx) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
            continue;
        };
        let mut status = 0;
        // SAFETY: waitpid on a known, exited child with a valid pointer to a local int.
        let pid = unsafe { libc::waitpid(peeked, &mut status, 0) };
        if pid != peeked {
            continue;
        }
        ranks.swap_remove(pos);
        if tx.send(Event::Exited { pid, status }).is_err() {
            return;
        }
    }
}

/// Reap every rank that has exited, without blocking; false when the receiver is gone.
fn reap_exited_ranks(ranks: &mut Vec<i32>, tx: &mpsc::Sender<Event>) -> bool {
    let mut i = 0;
    while i < ranks.len() {
        let mut status = 0;
        // SAFETY: waitpid on one of our children with a valid pointer to a local int.
        let pid = unsafe { libc::waitpid(ranks[i], &mut status, libc::WNOHANG) };
        if pid == ranks[i] {
            ranks.swap_remove(i);
            if tx.send(Event::Exited { pid, status }).is_err() {
                return false;
            }
        } else {
            i += 1;
        }
    }
    true
}

/// Copy what strobe reads from its terminal to rank 0. The thread is never joined: it may
/// sit in `read` on the terminal until strobe exits. It reads fd 0 directly, not through
/// `std::io::stdin()`, whose lock it would hold while blocked (the replay stepper reads
/// the terminal too).
fn forward_stdin(mut pipe: std::process::ChildStdin) {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    let _ = std::thread::Builder::new()
        .name("strobe-stdin".into())
        .spawn(move || {
            // SAFETY: fd 0 is open for the life of the process; ManuallyDrop keeps this
            // File from closing it.
            let mut tty = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(0) });
            let mut buf = [0u8; 4096];
            loop {
                match tty.read(&mut buf) {
                    Ok(0) => return,
                    Ok(n) => {
                        if pipe.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => return,
                }
            }
        });
}

/// Copy a rank's output line by line with a `[rank] ` prefix.
pub(crate) fn forward<R: std::io::Read + Send + 'static>(
    pipe: Option<R>,
    rank: u32,
    to_stderr: bool,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let Some(p) = pipe else { return };
        for line in BufReader::new(p).split(b'\n') {
            let Ok(line) = line else { return };
            let mut buf = format!("[{rank}] ").into_bytes();
            buf.extend_from_slice(&line);
            buf.push(b'\n');
            if to_stderr {
                let _ = std::io::stderr().lock().write_all(&buf);
            } else {
                let _ = std::io::stdout().lock().write_all(&buf);
            }
        }
    })
}
