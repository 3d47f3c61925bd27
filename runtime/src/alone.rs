//! Rank-alone mode (`strobe replay FILE --rank R`): one rank of a recorded job runs with
//! no other rank process and no node manager, fed by a [`DeliverySource`] (the replayer,
//! from the payloads `strobe record --capture-payloads` stored).
//!
//! The rank is the unchanged program, attached to a job segment of the recorded size (so
//! `MPI_Comm_size` is what it was); only its own slot is used. This module plays the node
//! manager for it, one recorded slice at a time:
//!
//! 1. the rank may post what the slices up to the next one handled (the replay's post
//!    limit, so it is held where the full replay would hold it);
//! 2. once it posted every descriptor slice `s` handled, each is checked against the
//!    recording ([`DeliverySource::check`]: the call, its peer, tag and size, and a send's
//!    bytes when the receiver's payload was captured);
//! 3. slice `s`'s completions are delivered: the captured bytes written into the rank's
//!    result buffers (the same regions capture read, [`result_region`]), the completions
//!    pushed and the rank woken.
//!
//! Timing-dependent outcomes (`MPI_Test*`, `MPI_Wtime`, the C library's clocks) come from
//! the replay log through `STROBE_REPLAY_OUTCOMES`, as in a full replay. A difference
//! stops the rank with a divergence report naming the call.

use std::collections::BTreeMap;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::descriptor::{Completion, Descriptor};
use crate::engine::capture::result_region;
use crate::launcher::{LaunchConfig, LaunchError, INTERRUPTED};
use crate::segment::{
    resume_computing, JobSegment, RankState, ENV_FD, ENV_LEN, ENV_RANK, ENV_SIZE,
};

/// One completion the recording handed the rank, with the bytes its call received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// The rank's descriptor it completes.
    pub seq: u64,
    pub completion: Completion,
    /// What the runtime wrote into the rank's result region (empty: nothing).
    pub data: Vec<u8>,
}

/// Reads `len` bytes at an address of the lone rank (a send buffer), `None` if it cannot.
pub type ReadRank<'a> = &'a mut dyn FnMut(u64, u64) -> Option<Vec<u8>>;

/// Where a lone rank's input comes from: the recorded slices, as far as they concern it.
/// The runtime defines it and the replayer implements it (the runtime never depends on
/// the recorder), like [`crate::engine::SliceSource`] for full replays.
pub trait DeliverySource {
    /// The recording's last slice.
    fn last_slice(&self) -> u64;
    /// How many descriptors of the rank slices `1..=slice` handled (0 for slice 0).
    fn handled_by(&self, slice: u64) -> u64;
    /// A descriptor the rank posted: `Err(report)` when it is not what the recording holds.
    fn check(&mut self, slice: u64, d: &Descriptor, read: ReadRank<'_>) -> Result<(), String>;
    /// The rank's completions in `slice`, in delivery order.
    fn deliveries(&mut self, slice: u64) -> Vec<Delivery>;
    /// Whether the recorded rank went on to exit after the last slice. When not (the
    /// recorded job deadlocked, timed out or was cut), the lone rank is stopped there,
    /// as a full replay stops at the end of such a recording.
    fn recorded_exit(&self) -> bool {
        true
    }
}

/// How a lone rank's run ended.
#[derive(Clone, Debug)]
pub struct AloneReport {
    /// The rank's raw wait status, `None` if it was not reaped (it could not be started).
    pub status: Option<i32>,
    /// The first difference from the recording, as a report.
    pub divergence: Option<String>,
    /// Slices delivered.
    pub slices: u64,
    pub interrupted: bool,
    pub timed_out: bool,
    /// The rank called `MPI_Abort` with this code.
    pub abort: Option<i32>,
    /// `MPI_Finalize` returned in the rank.
    pub finalized: bool,
    /// Stopped at the end of a recording whose rank did not exit ([`DeliverySource::recorded_exit`]).
    pub end_of_recording: bool,
    pub elapsed: Duration,
}

/// Why the slice loop stopped early.
enum Stop {
    Exited,
    Diverged(String),
    Interrupted,
    TimedOut,
}

struct Lone<'a> {
    seg: &'a JobSegment,
    rank: u32,
    child: Child,
    status: Option<i32>,
    cfg: &'a LaunchConfig,
    started: Instant,
    /// Posted descriptors not yet completed, by sequence number.
    pending: BTreeMap<u64, Descriptor>,
    posted: u64,
    /// `--tag-output` copiers, joined before returning so no line is lost.
    forwarders: Vec<std::thread::JoinHandle<()>>,
    /// Seen in the slot before the rank exited (the launcher's reaper is not there to
    /// overwrite it, but a dying rank's slot is read once, here).
    finalized: bool,
    /// A debugger is attached: Ctrl-C is its (it interrupts the rank), not ours.
    debugged: bool,
}

/// Starts a debugger on the lone rank's pid and returns when it exits (or, when it runs
/// elsewhere, e.g. in a tmux window, once it is started).
pub type Debugger = Box<dyn FnOnce(u32) + Send>;

/// Run rank `rank` of a `cfg.engine.ranks`-rank job alone, fed by `src`. With a
/// `debugger`, the rank is held at its first MPI call until a tracer is attached (or the
/// debugger gave up), Ctrl-C is left to the debugger, and the run ends once the debugger
/// has returned too.
pub fn launch_alone(
    cfg: &LaunchConfig,
    rank: u32,
    src: &mut dyn DeliverySource,
    debugger: Option<Debugger>,
) -> Result<AloneReport, LaunchError> {
    let ranks = cfg.engine.ranks;
    if rank >= ranks {
        return Err(LaunchError::Config(format!(
            "rank {rank} is not a rank of a {ranks}-rank job"
        )));
    }
    crate::launcher::install_interrupt_handlers();
    let started = Instant::now();
    let seg = crate::rank::create_segment(ranks, 1).map_err(LaunchError::Segment)?;
    // The rank inlines tiny sends as it did in the recording (its scheduler version).
    crate::segment::set_send_limits(
        &seg,
        cfg.engine.inline_max,
        cfg.engine.eager_max,
        cfg.engine.local_null,
    );
    if debugger.is_some() {
        // Held at its first MPI call, where the debugger will find it.
        seg.slot(rank).post_limit.store(1, Ordering::Release);
    }
    let (child, forwarders) = spawn(cfg, &seg, rank)?;
    seg.slot(rank).pid.store(child.id(), Ordering::Release);
    let mut lone = Lone {
        seg: &seg,
        rank,
        child,
        status: None,
        cfg,
        started,
        pending: BTreeMap::new(),
        posted: 0,
        forwarders,
        finalized: false,
        debugged: false,
    };
    let mut slices = 0;
    let mut stop = None;
    let mut debugger_thread = None;
    if let Some(start) = debugger {
        lone.debugged = true;
        match lone.await_held() {
            Ok(()) => {
                let pid = lone.pid() as u32;
                let d = std::thread::spawn(move || start(pid));
                stop = lone.await_tracer(&d).err();
                debugger_thread = Some(d);
            }
            Err(s) => stop = Some(s),
        }
    }
    let first = if stop.is_none() { 1 } else { u64::MAX };
    for slice in first..=src.last_slice() {
        if let Err(s) = lone.run_slice(slice, src) {
            stop = Some(s);
            break;
        }
        slices = slice;
    }
    let end_of_recording = stop.is_none() && !src.recorded_exit();
    let stop = match stop {
        Some(s) => Some(s),
        None if end_of_recording => None,
        None => lone.await_exit(src).err(),
    };
    let divergence = match &stop {
        Some(Stop::Diverged(d)) => Some(d.clone()),
        _ => None,
    };
    let (interrupted, timed_out) = match stop {
        Some(Stop::Interrupted) => (true, false),
        Some(Stop::TimedOut) => (false, true),
        _ => (false, false),
    };
    if let Some(d) = debugger_thread {
        // The debugger owns the terminal until it exits; the rank runs (or has ended).
        let _ = d.join();
    }
    lone.kill();
    for f in std::mem::take(&mut lone.forwarders) {
        let _ = f.join();
    }
    let slot = lone.seg.slot(rank);
    let abort = slot.abort_code.load(Ordering::Acquire);
    Ok(AloneReport {
        status: lone.status,
        divergence,
        slices,
        interrupted,
        timed_out,
        abort: (abort != 0).then(|| abort as i32 - 1),
        finalized: lone.finalized,
        end_of_recording,
        elapsed: started.elapsed(),
    })
}

type Forwarders = Vec<std::thread::JoinHandle<()>>;

fn spawn(
    cfg: &LaunchConfig,
    seg: &JobSegment,
    rank: u32,
) -> Result<(Child, Forwarders), LaunchError> {
    let fd = seg.inheritable_fd().map_err(LaunchError::Segment)?;
    let mut cmd = Command::new(&cfg.program);
    cmd.args(&cfg.args)
        .env(ENV_FD, fd.to_string())
        .env(ENV_LEN, seg.len().to_string())
        .env(ENV_RANK, rank.to_string())
        .env(ENV_SIZE, cfg.engine.ranks.to_string())
        .env(
            crate::procmem::ENV_LAUNCHER_PID,
            std::process::id().to_string(),
        )
        .env_remove(crate::outcome::ENV_REPLAY_OUTCOMES);
    // A terminal stays strobe's (the stepper's, a debugger's); a redirected stdin is the
    // rank's as in a full replay of rank 0.
    let tty = std::io::IsTerminal::is_terminal(&std::io::stdin());
    cmd.stdin(if rank == 0 && !tty {
        Stdio::inherit()
    } else {
        Stdio::null()
    });
    for (k, v) in &cfg.env {
        cmd.env(k, v);
    }
    if cfg.tag_output {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    }
    // SAFETY: the closure runs in the child between fork and exec and only calls
    // async-signal-safe functions (prctl, signal, setpgid).
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            libc::setpgid(0, 0);
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|source| LaunchError::Spawn {
        program: cfg.program.display().to_string(),
        source,
    })?;
    let mut forwarders = Vec::new();
    if cfg.tag_output {
        forwarders.push(crate::launcher::forward(child.stdout.take(), rank, false));
        forwarders.push(crate::launcher::forward(child.stderr.take(), rank, true));
    }
    Ok((child, forwarders))
}

/// How long the loop naps between looks at the rank.
const NAP: Duration = Duration::from_micros(200);

impl<'a> Lone<'a> {
    /// The segment, borrowed for as long as the run (not from `self`).
    fn seg_ref(&self) -> &'a JobSegment {
        self.seg
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Interrupts, the timeout, the rank's own divergence report and its exit.
    fn watch(&mut self) -> Result<(), Stop> {
        if INTERRUPTED.load(Ordering::SeqCst) && !self.debugged {
            return Err(Stop::Interrupted);
        }
        if self.cfg.timeout.is_some_and(|t| self.started.elapsed() > t) {
            return Err(Stop::TimedOut);
        }
        let slot = self.seg_ref().slot(self.rank);
        if let Some(why) = slot.diverged() {
            return Err(Stop::Diverged(format!(
                "rank {} left the recorded path ({why:?}): it printed the call on stderr",
                self.rank
            )));
        }
        if self.status.is_none() {
            let finalized = slot.state() == RankState::Finalized;
            if let Ok(Some(st)) = self.child.try_wait() {
                self.status = Some(st.into_raw());
                self.finalized = finalized;
            }
        }
        match self.status {
            Some(_) => Err(Stop::Exited),
            None => Ok(()),
        }
    }

    /// Keep the rank held at its first MPI call until a tracer is attached to it, or the
    /// debugger has returned.
    /// Wait until the rank is held at its first MPI call (or ended).
    fn await_held(&mut self) -> Result<(), Stop> {
        let slot = self.seg_ref().slot(self.rank);
        while slot.state() != RankState::Held {
            self.watch()?;
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }

    fn await_tracer(&mut self, debugger: &std::thread::JoinHandle<()>) -> Result<(), Stop> {
        let status = format!("/proc/{}/status", self.pid());
        let traced = || {
            std::fs::read_to_string(&status).is_ok_and(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("TracerPid:"))
                    .is_some_and(|t| t.trim() != "0")
            })
        };
        while !traced() && !debugger.is_finished() {
            self.watch()?;
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// Take what the rank posted and check each descriptor against the recording.
    fn take_posts(&mut self, slice: u64, src: &mut dyn DeliverySource) -> Result<(), Stop> {
        let queues = self.seg.queues(self.rank);
        while let Some(d) = queues.descriptors.pop() {
            let pid = self.pid();
            // A send the rank completed when it posted it (inline, or through its send
            // arena) may have its buffer reused already: its bytes are in the descriptor
            // or the arena entry (read now, before the rank can post a queue's worth more).
            let copied = if d.in_arena() {
                self.seg.arena_read(d.rank, d.seq, d.bytes as usize)
            } else {
                d.inline_payload()
                    .map(|p| p[..(d.bytes as usize).min(p.len())].to_vec())
            };
            let mut read = |addr: u64, len: u64| match &copied {
                Some(bytes) => bytes.get(..len as usize).map(<[u8]>::to_vec),
                None => {
                    let mut v = vec![0u8; len as usize];
                    crate::procmem::read_from(pid, addr, &mut v).ok().map(|_| v)
                }
            };
            src.check(slice, &d, &mut read).map_err(Stop::Diverged)?;
            self.pending.insert(d.seq, d);
            self.posted += 1;
        }
        Ok(())
    }

    fn run_slice(&mut self, slice: u64, src: &mut dyn DeliverySource) -> Result<(), Stop> {
        self.seg.header().slice.store(slice, Ordering::Release);
        let slot = self.seg_ref().slot(self.rank);
        // While `slice` runs the rank may post what slices up to `slice + 1` handle.
        let limit = src.handled_by(slice + 1) + 1;
        if slot.post_limit.swap(limit, Ordering::AcqRel) != limit && slot.state() == RankState::Held
        {
            self.seg_ref().wake_rank(self.rank);
        }
        let need = src.handled_by(slice);
        let mut stuck_since: Option<Instant> = None;
        loop {
            self.take_posts(slice, src)?;
            if self.posted >= need {
                break;
            }
            self.watch()?;
            // A rank asleep in a blocking call with descriptors of this slice still to
            // post never posts them: in the recording it posted them before the slice.
            let asleep =
                slot.state() == RankState::Blocked && slot.posted.load(Ordering::Acquire) < need;
            match (asleep, stuck_since) {
                (false, _) => stuck_since = None,
                (true, None) => stuck_since = Some(Instant::now()),
                (true, Some(t)) if t.elapsed() > Duration::from_millis(200) => {
                    return Err(Stop::Diverged(format!(
                        "slice {slice}: rank {} is blocked in {} after posting {} descriptors, but the recording has it post {need} before this slice",
                        self.rank,
                        slot.blocked_call().name(),
                        self.posted
                    )));
                }
                _ => {}
            }
            std::thread::sleep(NAP);
        }
        self.deliver(slice, src)
    }

    fn deliver(&mut self, slice: u64, src: &mut dyn DeliverySource) -> Result<(), Stop> {
        let deliveries = src.deliveries(slice);
        if deliveries.is_empty() {
            return Ok(());
        }
        let queues = self.seg.queues(self.rank);
        for del in deliveries {
            let Some(d) = self.pending.remove(&del.seq) else {
                return Err(Stop::Diverged(format!(
                    "slice {slice}: the recording completes descriptor #{} of rank {}, which the rank has not posted",
                    del.seq, self.rank
                )));
            };
            if !del.data.is_empty() {
                let call = d.kind().map_or("?", |k| k.mpi_name());
                let region = result_region(&d, &del.completion);
                match region {
                    Some((addr, len)) if len >= del.data.len() as u64 => {
                        crate::procmem::write_to(self.pid(), addr, &del.data).map_err(|e| {
                            Stop::Diverged(format!(
                                "slice {slice}: cannot write the recorded bytes of {call} (descriptor #{}) into rank {}: {e}",
                                d.seq, self.rank
                            ))
                        })?;
                    }
                    _ => {
                        return Err(Stop::Diverged(format!(
                            "slice {slice}: {call} (descriptor #{}) of rank {} has room for {} bytes, but the recording delivered {}",
                            d.seq,
                            self.rank,
                            region.map_or(0, |r| r.1),
                            del.data.len()
                        )))
                    }
                }
            }
            let mut c = del.completion;
            c.request = d.request;
            // An inline send completed on the rank when it was posted.
            if c.request == 0 || c.flags & crate::descriptor::COMPLETION_INLINE != 0 {
                continue;
            }
            while queues.completions.push(&c).is_err() {
                // The rank drains its completion queue when it next looks: let it.
                self.seg_ref().wake_rank(self.rank);
                self.watch()?;
                std::thread::sleep(NAP);
            }
        }
        resume_computing(self.seg, self.rank);
        self.seg.wake_rank(self.rank);
        Ok(())
    }

    /// After the last slice: the rank should end as it did (it may still compute and
    /// print); posting more than the recording holds, or sleeping in a call, diverges.
    fn await_exit(&mut self, src: &mut dyn DeliverySource) -> Result<(), Stop> {
        let last = src.last_slice();
        let slot = self.seg_ref().slot(self.rank);
        let mut stuck_since: Option<Instant> = None;
        loop {
            self.take_posts(last + 1, src)?;
            self.watch()?;
            let state = slot.state();
            let stuck = matches!(state, RankState::Blocked | RankState::Held);
            match (stuck, stuck_since) {
                (false, _) => stuck_since = None,
                (true, None) => stuck_since = Some(Instant::now()),
                (true, Some(t)) if t.elapsed() > Duration::from_millis(200) => {
                    let what = if state == RankState::Held {
                        "tries to post a descriptor the recording does not have"
                    } else {
                        "waits for a completion the recording does not have"
                    };
                    return Err(Stop::Diverged(format!(
                        "after the recording's last slice {last}, rank {} {what} (in {})",
                        self.rank,
                        slot.blocked_call().name()
                    )));
                }
                _ => {}
            }
            std::thread::sleep(NAP);
        }
    }

    /// Stop the rank if it still runs and reap it.
    fn kill(&mut self) {
        if self.status.is_none() {
            self.seg.header().shutdown.store(1, Ordering::Release);
            let _ = self.child.kill();
            if let Ok(st) = self.child.wait() {
                self.status = Some(st.into_raw());
            }
        }
    }
}
