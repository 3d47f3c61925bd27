//! The replay control API: pause before a slice, step, run to a slice, breakpoints, state,
//! quit. The Strobe Sender asks [`Controller::before_slice`] before every slice; clients
//! (the terminal stepper, the control socket, the TUI next) call the other methods from
//! their own threads and learn about pauses through [`Controller::subscribe`].

use std::sync::atomic::Ordering;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use strobe_runtime::engine::Gate;
use strobe_runtime::segment::{JobSegment, RankState};

/// Where a replay stops by itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Break {
    /// Before slice S starts.
    Slice(u64),
    /// After the slice that handled a descriptor of `rank` for the MPI function `call`
    /// (`MPI_Recv`, `MPI_Barrier`, ...): the rank is inside (or just past) that call.
    Call { rank: u32, call: String },
}

impl std::str::FromStr for Break {
    type Err = String;
    /// `slice=S` or `rank=R,call=MPI_Recv` (also `call=...,rank=...`).
    fn from_str(s: &str) -> Result<Break, String> {
        let mut rank = None;
        let mut call = None;
        let mut slice = None;
        for part in s.split(',') {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("bad breakpoint {s:?}: expected KEY=VALUE,..."))?;
            match k.trim() {
                "rank" => rank = Some(v.trim().parse::<u32>().map_err(|e| e.to_string())?),
                "call" => call = Some(v.trim().to_string()),
                "slice" => slice = Some(v.trim().parse::<u64>().map_err(|e| e.to_string())?),
                other => return Err(format!("bad breakpoint key {other:?} (rank, call, slice)")),
            }
        }
        match (slice, rank, call) {
            (Some(s), None, None) => Ok(Break::Slice(s)),
            (None, Some(rank), Some(call)) => Ok(Break::Call { rank, call }),
            _ => Err(format!(
                "bad breakpoint {s:?}: use slice=S or rank=R,call=MPI_Name"
            )),
        }
    }
}

impl std::fmt::Display for Break {
    /// The form `--break` takes, so a listed breakpoint can be typed again.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Break::Slice(s) => write!(f, "slice={s}"),
            Break::Call { rank, call } => write!(f, "rank={rank},call={call}"),
        }
    }
}

/// What a recording allows a breakpoint to name: breakpoints that can never fire are
/// refused before the replay runs (issue 12, item 3), not discovered at its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    pub ranks: u32,
    /// The recording's last slice (slices are numbered from 1).
    pub last_slice: u64,
}

impl Bounds {
    /// `Ok` if the replay can stop before slice `s`; else why not, in one line.
    pub fn check_slice(&self, s: u64) -> Result<(), String> {
        if s == 0 {
            return Err("slice 0 does not exist: slices are numbered from 1".into());
        }
        if s > self.last_slice {
            return Err(format!(
                "slice {s} is beyond the recording's last slice ({}): the replay would end without stopping",
                self.last_slice
            ));
        }
        Ok(())
    }

    /// `Ok` if `b` can fire in this recording; else why not, in one line.
    pub fn check(&self, b: &Break) -> Result<(), String> {
        match b {
            Break::Slice(s) => self.check_slice(*s),
            Break::Call { rank, call } => {
                if *rank >= self.ranks {
                    return Err(format!(
                        "rank {rank} does not exist: the recording has {} rank{} (0..={})",
                        self.ranks,
                        if self.ranks == 1 { "" } else { "s" },
                        self.ranks.saturating_sub(1)
                    ));
                }
                check_call(call)
            }
        }
    }
}

/// A call breakpoint fires on the descriptor a call posts, so it must name a descriptor
/// kind. Decision: a known MPI call that posts no descriptor of its own name (a local call
/// such as `MPI_Comm_rank`, or `MPI_Isend`, which posts an `MPI_Send` descriptor) is
/// refused with the name to use instead, rather than silently never firing.
pub fn check_call(call: &str) -> Result<(), String> {
    let kinds = (0..=u8::MAX).filter_map(strobe_core::descriptor::DescKind::from_u8);
    if kinds
        .clone()
        .any(|k| k.mpi_name().eq_ignore_ascii_case(call))
    {
        return Ok(());
    }
    let known = strobe_runtime::calls::Call::ALL
        .iter()
        .find(|c| c.mpi_name().eq_ignore_ascii_case(call));
    let Some(known) = known else {
        return Err(format!(
            "unknown MPI call {call:?} (not in strobe's MPI call table; names look like MPI_Recv)"
        ));
    };
    let name = known.mpi_name();
    // MPI_Isend -> MPI_Send, MPI_Irecv -> MPI_Recv, MPI_Ibarrier -> MPI_Barrier...
    let blocking = name.strip_prefix("MPI_I").map(|rest| format!("MPI_{rest}"));
    let alias = blocking.and_then(|b| {
        kinds
            .clone()
            .map(|k| k.mpi_name())
            .find(|k| k.eq_ignore_ascii_case(&b))
    });
    Err(match alias {
        Some(b) => format!(
            "{name} posts an {b} descriptor and call breakpoints fire on descriptors: use call={b}"
        ),
        None => format!(
            "{name} posts no descriptor (it completes in the rank, or waits on requests), so a breakpoint on it can never fire; calls that can: MPI_Send, MPI_Recv, MPI_Barrier, MPI_Bcast, MPI_Allreduce, ... (docs/replay-control.md)"
        ),
    })
}

/// One rank as seen while the replay is paused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankView {
    pub rank: u32,
    pub pid: u32,
    /// `computing`, `blocked`, `held`, `finalized` or `exited`.
    pub state: &'static str,
    /// The MPI call it is blocked in (meaningful when `state` is `blocked`).
    pub call: &'static str,
    /// Descriptors it has posted so far.
    pub posted: u64,
    /// Where in the program it made the call it is blocked or held in
    /// (`deadlock.c:23 (in exchange)`), when known.
    pub site: Option<String>,
}

/// The replay is held before `slice` starts; every rank is held at its next MPI call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pause {
    pub slice: u64,
    pub reason: String,
    pub ranks: Vec<RankView>,
}

/// What clients are told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Paused(Pause),
    Resumed {
        slice: u64,
    },
    /// The replay is going back (or forward) to slice `to` by re-executing the job from
    /// the start (time travel, docs/replay-control.md): the ranks of the run so far are
    /// stopped; a `Paused` event follows when every rank is held before `to`.
    Travelling {
        to: u64,
    },
    /// The replay ended; the text is the verdict line.
    Finished(String),
}

#[derive(Default)]
struct State {
    run_to: Option<u64>,
    step: bool,
    breaks: Vec<Break>,
    /// Pauses requested by call breakpoints: (slice to pause before, reason).
    pending: Vec<(u64, String)>,
    paused: Option<Pause>,
    /// The slice whose pause was just released (so it does not pause again).
    released: Option<u64>,
    stop: Option<String>,
    last_started: u64,
    finished: Option<String>,
    /// Set once the recording is open: later breakpoints are checked against it.
    bounds: Option<Bounds>,
    /// Time travel asked for: end this run of the job and start again, landing here.
    travel: Option<Landing>,
    /// The run under way is a re-execution that must hold before this slice; slice and
    /// call breakpoints before it do not fire (the user already went past them).
    landing: Option<Landing>,
    /// Why time travel is refused in this replay (`--record` writes the run as it goes).
    no_travel: Option<String>,
    /// Re-executions of the job so far (time travels that went back).
    runs: u64,
    /// A pause before this slice waits, since then, for computing ranks to reach a call.
    settling: Option<(u64, Instant)>,
}

/// Where a time travel lands: held before `slice`, with `reason` as the pause's reason.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Landing {
    slice: u64,
    reason: String,
}

/// Shared between the Strobe Sender (through the replay source), the verifier and clients.
#[derive(Default)]
pub struct Controller {
    st: Mutex<State>,
    cv: Condvar,
    subscribers: Mutex<Vec<Subscriber>>,
}

/// Called with every event in the thread that publishes it; `false` unsubscribes.
type Subscriber = Box<dyn Fn(&Event) -> bool + Send>;

/// A snapshot for `print state`.
#[derive(Clone, Debug)]
pub struct Status {
    /// The last slice that started.
    pub slice: u64,
    pub paused: Option<Pause>,
    pub finished: Option<String>,
}

impl Controller {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.st.lock().expect("controller lock")
    }

    fn publish(&self, e: Event) {
        self.subscribers
            .lock()
            .expect("subscribers lock")
            .retain(|s| s(&e));
        self.cv.notify_all();
    }

    /// Receive every later event.
    pub fn subscribe(&self) -> Receiver<Event> {
        let (tx, rx): (Sender<Event>, Receiver<Event>) = channel();
        self.subscribe_fn(Box::new(move |e| tx.send(e.clone()).is_ok()));
        rx
    }

    /// Have `f` called with every later event, synchronously (a delivered `Finished` has
    /// been handed to `f` when the replay returns).
    pub fn subscribe_fn(&self, f: Subscriber) {
        self.subscribers.lock().expect("subscribers lock").push(f);
    }

    /// The recording's ranks and slices: breakpoints added from now on are checked.
    pub fn set_bounds(&self, bounds: Bounds) {
        self.lock().bounds = Some(bounds);
    }

    /// Add a breakpoint; refused (with why) if it can never fire. A breakpoint already set
    /// is not added twice. Returns its number in [`Controller::breaks`] (from 1).
    pub fn add_break(&self, b: Break) -> Result<usize, String> {
        let mut st = self.lock();
        if let Some(bounds) = &st.bounds {
            bounds.check(&b)?;
            if let Break::Slice(s) = b {
                if s <= st.last_started {
                    return Err(format!(
                        "slice {s} has already started (the replay is at slice {}): go back there with goto {s}",
                        st.last_started
                    ));
                }
            }
        }
        if let Some(i) = st.breaks.iter().position(|x| *x == b) {
            return Ok(i + 1);
        }
        st.breaks.push(b);
        Ok(st.breaks.len())
    }

    /// The breakpoints set, in the order they were added (numbered from 1 by clients).
    pub fn breaks(&self) -> Vec<Break> {
        self.lock().breaks.clone()
    }

    /// Delete breakpoint number `n` (from 1, as [`Controller::breaks`] lists them).
    pub fn delete_break(&self, n: usize) -> Result<Break, String> {
        let mut st = self.lock();
        let count = st.breaks.len();
        if n == 0 || n > count {
            return Err(match count {
                0 => "no breakpoints are set".to_string(),
                c => format!("no breakpoint {n}: breakpoints are numbered 1..={c}"),
            });
        }
        Ok(st.breaks.remove(n - 1))
    }

    /// The call breakpoints set so far.
    pub(crate) fn call_breaks(&self) -> Vec<(u32, String)> {
        self.lock()
            .breaks
            .iter()
            .filter_map(|b| match b {
                Break::Call { rank, call } => Some((*rank, call.clone())),
                Break::Slice(_) => None,
            })
            .collect()
    }

    /// Hold the replay before slice `s` (`--until-slice`, "run to slice N").
    pub fn run_to(&self, s: u64) {
        let mut st = self.lock();
        // A newer command replaces a time travel's landing still on its way.
        st.landing = None;
        st.run_to = Some(s);
        st.step = false;
        Self::release(&mut st);
        drop(st);
        self.resumed();
    }

    /// Run one slice, then hold again.
    pub fn step(&self) {
        let mut st = self.lock();
        st.landing = None;
        st.step = true;
        Self::release(&mut st);
        drop(st);
        self.resumed();
    }

    /// Run until a breakpoint, the end, or a divergence.
    pub fn resume(&self) {
        let mut st = self.lock();
        st.landing = None;
        st.step = false;
        st.run_to = None;
        Self::release(&mut st);
        drop(st);
        self.resumed();
    }

    /// Pause before the next slice (from a client).
    pub fn pause(&self) {
        let mut st = self.lock();
        st.landing = None;
        st.step = true;
    }

    /// Where the replay is: the slice it is held before, or (running) the next to start.
    fn position(st: &State) -> u64 {
        st.paused.as_ref().map_or(st.last_started + 1, |p| p.slice)
    }

    /// Time travel: hold every rank before slice `s`, earlier or later than where the
    /// replay is, exactly as `--until-slice s` holds a fresh replay. Forward, the replay
    /// runs on to `s`; backward (or to where a running replay already is), the job is
    /// stopped and re-executed from the start with a hold at `s` (the mechanism and its
    /// cost: docs/replay-control.md, "Time travel"). Breakpoints stay set; slice and call
    /// breakpoints before `s` do not fire on the way. `reason` becomes the pause's reason
    /// (`goto 12`, `reverse-step`, `back 3`).
    pub fn goto(&self, s: u64, reason: String) -> Result<Travel, String> {
        let mut st = self.lock();
        if let Some(v) = &st.finished {
            return Err(format!("the replay has ended ({v})"));
        }
        if st.stop.is_some() {
            return Err("the replay is stopping".into());
        }
        if let Some(bounds) = &st.bounds {
            bounds.check_slice(s)?;
        }
        let here = Self::position(&st);
        let held = st.paused.is_some();
        if st.travel.is_none() {
            if held && s == here {
                return Ok(Travel::Here);
            }
            if s > here || (s == here && !held) {
                // Forward: run on and land at `s` (breakpoints on the way do not fire:
                // a goto lands where it was asked to; `run N` stops at them).
                st.landing = Some(Landing { slice: s, reason });
                st.step = false;
                st.run_to = None;
                Self::release(&mut st);
                drop(st);
                self.resumed();
                return Ok(Travel::Forward);
            }
        }
        if let Some(why) = &st.no_travel {
            return Err(format!("cannot go back to slice {s}: {why}"));
        }
        st.travel = Some(Landing { slice: s, reason });
        st.step = false;
        st.run_to = None;
        Self::release(&mut st);
        drop(st);
        self.publish(Event::Travelling { to: s });
        Ok(Travel::Back)
    }

    /// `reverse-step`: back to the slice before the one the replay holds before.
    pub fn reverse_step(&self) -> Result<Travel, String> {
        self.back(1, "reverse-step".into())
    }

    /// `back N`: N slices before where the replay holds (or, running, the next slice).
    pub fn back(&self, n: u64, reason: String) -> Result<Travel, String> {
        let here = Self::position(&self.lock());
        if n == 0 {
            return Err("back N: N is at least 1".into());
        }
        match here.checked_sub(n).filter(|&s| s >= 1) {
            Some(s) => self.goto(s, reason),
            None => Err(format!(
                "cannot go {n} slice{} back from slice {here}: slices are numbered from 1 (goto 1 goes to the start)",
                if n == 1 { "" } else { "s" }
            )),
        }
    }

    /// Refuse time travel back in this replay, saying why.
    pub fn forbid_travel(&self, why: String) {
        self.lock().no_travel = Some(why);
    }

    /// How many times the job was re-executed for time travel.
    pub fn reruns(&self) -> u64 {
        self.lock().runs
    }

    /// The replay loop, after a run of the job ended: `Some(S)` if it ended for a time
    /// travel to S, with the per-run state reset for the next run (breakpoints kept).
    pub(crate) fn take_travel(&self) -> Option<u64> {
        let mut st = self.lock();
        if st.stop.is_some() {
            return None;
        }
        let to = st.travel.take()?;
        let s = to.slice;
        st.landing = Some(to);
        st.runs += 1;
        st.paused = None;
        st.released = None;
        st.pending.clear();
        st.step = false;
        st.run_to = None;
        // A settle begun in the run that ends must not shorten the next run's (its clock
        // would count from the old run).
        st.settling = None;
        st.last_started = 0;
        Some(s)
    }

    fn release(st: &mut State) {
        if let Some(p) = st.paused.take() {
            st.released = Some(p.slice);
        }
    }

    fn resumed(&self) {
        let s = self.lock().last_started;
        self.publish(Event::Resumed { slice: s + 1 });
    }

    /// End the replay now with `why` (the user quit; the verifier found a divergence).
    pub fn stop(&self, why: String) {
        let mut st = self.lock();
        st.stop.get_or_insert(why);
        st.paused = None;
        drop(st);
        self.cv.notify_all();
    }

    pub fn stop_reason(&self) -> Option<String> {
        self.lock().stop.clone()
    }

    /// Why the run of the job under way must end now: a stop, or a time travel back
    /// (checked first thing at every gate, so ranks computing long do not delay it).
    pub(crate) fn run_ends(&self) -> Option<String> {
        let st = self.lock();
        st.stop.clone().or_else(|| {
            st.travel
                .as_ref()
                .map(|t| format!("time travel to slice {}", t.slice))
        })
    }

    /// A call breakpoint fired in slice `s - 1`: hold before `s`.
    pub(crate) fn pause_before(&self, s: u64, reason: String) {
        self.lock().pending.push((s, reason));
    }

    /// Hold before slice `s`, saying `reason` (`--hold-at-failure`, `--gdb`: the slice a
    /// recorded failure happens in, from [`failure_slice`]).
    pub fn hold_before(&self, s: u64, reason: String) {
        self.pause_before(s, reason);
    }

    pub(crate) fn finished(&self, verdict: String) {
        self.lock().finished = Some(verdict.clone());
        self.publish(Event::Finished(verdict));
    }

    pub fn status(&self) -> Status {
        let st = self.lock();
        Status {
            slice: st.last_started,
            paused: st.paused.clone(),
            finished: st.finished.clone(),
        }
    }

    /// Wait until the replay is paused (or finished), up to `timeout`.
    pub fn wait_paused(&self, timeout: Duration) -> Option<Pause> {
        let st = self.lock();
        let (st, _) = self
            .cv
            .wait_timeout_while(st, timeout, |s| s.paused.is_none() && s.finished.is_none())
            .expect("controller lock");
        st.paused.clone()
    }

    /// The Strobe Sender asks before starting slice `next` (data gates already open).
    pub(crate) fn before_slice(&self, next: u64, seg: &JobSegment) -> Gate {
        let mut st = self.lock();
        if let Some(why) = &st.stop {
            return Gate::Stop(why.clone());
        }
        if let Some(t) = &st.travel {
            // The replay loop starts the job again and lands at `t.slice`.
            return Gate::Stop(format!("time travel to slice {}", t.slice));
        }
        if st.paused.is_some() {
            return Gate::Wait;
        }
        let reason = Self::stop_before(&st, next);
        // The first hold (before slice 1) used to come before the launcher had spawned
        // every rank: it printed "pid 0 ... gdb -p 0" (issue 12, item 8). Hold only once
        // every rank has a pid; until then ask again shortly.
        if reason.is_some() && !every_rank_spawned(seg) {
            return Gate::Wait;
        }
        if reason.is_some() && !settled(seg, &mut st.settling, next) {
            return Gate::Wait;
        }
        if st.landing.as_ref().is_some_and(|l| l.slice > next) {
            // Re-executing towards a time travel's landing: what would stop before it
            // was already seen on the way there.
            st.pending.retain(|(s, _)| *s > next);
        }
        match reason {
            Some(reason) => {
                st.step = false;
                st.landing = None;
                if st.run_to == Some(next) {
                    st.run_to = None;
                }
                if let Some(i) = st.pending.iter().position(|(s, _)| *s == next) {
                    st.pending.remove(i);
                }
                let p = Pause {
                    slice: next,
                    reason,
                    ranks: rank_views(seg),
                };
                st.paused = Some(p.clone());
                drop(st);
                self.publish(Event::Paused(p));
                Gate::Wait
            }
            None => {
                st.last_started = next;
                st.released = None;
                Gate::Open
            }
        }
    }

    /// Why the replay holds before `next`, if it does (nothing changed).
    fn stop_before(st: &State, next: u64) -> Option<String> {
        if let Some(l) = &st.landing {
            return (l.slice == next).then(|| l.reason.clone());
        }
        if st.released == Some(next) {
            return None;
        }
        if st.step {
            Some("step".to_string())
        } else if st.run_to == Some(next) {
            Some(format!("reached slice {next}"))
        } else if st.breaks.contains(&Break::Slice(next)) {
            Some(format!("breakpoint slice={next}"))
        } else {
            st.pending
                .iter()
                .find(|(s, _)| *s == next)
                .map(|(_, r)| r.clone())
        }
    }
}

/// What a time travel did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Travel {
    /// The replay already holds there.
    Here,
    /// Later than where the replay is: it runs on to it.
    Forward,
    /// Earlier: the job is re-executed from the start up to it.
    Back,
}

/// Where `--hold-at-failure` (and `--gdb`) holds a replay of a recording that ended in
/// `outcome` after `last_slice` slices: before the last slice, with why. The engine kills
/// every rank once it declares the failure, so the hold comes one slice earlier: a
/// deadlocked or livelocked rank is then already inside the call it never leaves (the
/// replay gate waits for the ranks the recording has blocked to be in their call). For a
/// failed rank (abort, crash signal) the others are held at their next MPI call while the
/// failing one runs on to its failure unless it calls MPI first. `None` for a recording
/// that did not fail (success, cut short, interrupted): there is no failure to hold at.
pub fn failure_slice(outcome: Option<&str>, last_slice: u64) -> Option<(u64, String)> {
    let what = match outcome? {
        "deadlock" => "deadlocks",
        "livelock" => "livelocks",
        "rank_failed" => "has a rank fail",
        _ => return None,
    };
    (last_slice > 0).then(|| {
        (
            last_slice,
            format!("held at the failure: the recorded job {what} in slice {last_slice}"),
        )
    })
}

/// How long a pause waits for ranks still computing to reach their next MPI call.
const SETTLE: Duration = Duration::from_millis(250);

/// Whether a pause before `next` may be taken now: no rank computes (each is held at, or
/// blocked in, its next MPI call, or gone), or [`SETTLE`] has passed since the first ask.
/// A pause taken at once showed a rank `computing` a few microseconds before it would be
/// `held`, so two landings on the same slice (a `goto` back and a fresh `--until-slice`)
/// differed by timing (`goto_back_lands_where_a_fresh_until_slice_holds_and_prints_nothing_twice`).
/// A rank that computes for longer is shown computing, as before. A held rank rings the
/// doorbell, so the gate is asked again as soon as the last one arrives.
fn settled(seg: &JobSegment, settling: &mut Option<(u64, Instant)>, next: u64) -> bool {
    let computing = (0..seg.ranks()).any(|r| seg.slot(r).state() == RankState::Computing);
    let waited = match settling {
        Some((s, since)) if *s == next => since.elapsed() >= SETTLE,
        _ => {
            *settling = Some((next, Instant::now()));
            false
        }
    };
    if !computing || waited {
        *settling = None;
        return true;
    }
    false
}

/// Whether the launcher has given every rank a pid (a rank that exited keeps its pid).
fn every_rank_spawned(seg: &JobSegment) -> bool {
    (0..seg.ranks()).all(|r| seg.slot(r).pid.load(Ordering::Acquire) != 0)
}

/// What every rank is doing, from the job segment.
pub fn rank_views(seg: &JobSegment) -> Vec<RankView> {
    let mut sym = strobe_runtime::symbolize::Symbolizer::default();
    (0..seg.ranks())
        .map(|r| {
            let slot = seg.slot(r);
            let pid = slot.pid.load(Ordering::Acquire);
            let state = slot.state();
            // A rank in a call (blocked, or held at its next one) is alive: its call site
            // can be resolved now.
            let in_call = matches!(state, RankState::Blocked | RankState::Held);
            RankView {
                rank: r,
                pid,
                state: state.name(),
                call: slot.blocked_call().name(),
                posted: slot.posted.load(Ordering::Acquire),
                site: in_call
                    .then(|| sym.resolve(pid as i32, slot.site()))
                    .flatten()
                    .map(|s| s.short()),
            }
        })
        .collect()
}

impl Pause {
    /// The human-readable form: every rank's pid and a ready-to-paste gdb command.
    pub fn render(&self) -> String {
        let mut s = format!(
            "strobe: replay held before slice {} ({}); no rank gets past its next MPI call (a rank shown computing runs until it reaches one)\n",
            self.slice, self.reason
        );
        for r in &self.ranks {
            let mut what = if r.state == "blocked" {
                format!("blocked in {}", r.call)
            } else {
                r.state.to_string()
            };
            if let Some(site) = &r.site {
                what.push_str(&format!(" at {site}"));
            }
            let gdb = match (r.pid, r.state) {
                (0, _) => "(not started)".to_string(),
                (_, "exited") => "(exited)".to_string(),
                (pid, _) => format!("gdb -p {pid}"),
            };
            s.push_str(&format!(
                "  rank {:>3}  pid {:>7}  {:<28} posted {:>6}   {gdb}\n",
                r.rank, r.pid, what, r.posted
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breakpoints_parse() {
        assert_eq!("slice=12".parse::<Break>(), Ok(Break::Slice(12)));
        assert_eq!(
            "rank=2,call=MPI_Recv".parse::<Break>(),
            Ok(Break::Call {
                rank: 2,
                call: "MPI_Recv".into()
            })
        );
        assert!("rank=2".parse::<Break>().is_err());
        assert!("slice=x".parse::<Break>().is_err());
        assert!("bogus".parse::<Break>().is_err());
        let b: Break = "call=MPI_Recv,rank=2".parse().unwrap();
        assert_eq!(b.to_string(), "rank=2,call=MPI_Recv");
    }

    fn bounds() -> Bounds {
        Bounds {
            ranks: 4,
            last_slice: 50,
        }
    }

    #[test]
    fn breakpoints_that_cannot_fire_are_refused() {
        let b = bounds();
        assert!(b.check(&Break::Slice(1)).is_ok());
        assert!(b.check(&Break::Slice(50)).is_ok());
        assert!(b.check(&Break::Slice(0)).unwrap_err().contains("from 1"));
        assert!(b
            .check(&Break::Slice(51))
            .unwrap_err()
            .contains("last slice (50)"));
        let call = |rank, call: &str| Break::Call {
            rank,
            call: call.into(),
        };
        assert!(b.check(&call(3, "MPI_Recv")).is_ok());
        assert!(b.check(&call(1, "mpi_barrier")).is_ok());
        let e = b.check(&call(9, "MPI_Recv")).unwrap_err();
        assert!(e.contains("4 ranks (0..=3)"), "{e}");
        let e = b.check(&call(1, "MPI_Foo")).unwrap_err();
        assert!(e.contains("unknown MPI call"), "{e}");
        let e = b.check(&call(1, "MPI_Isend")).unwrap_err();
        assert!(e.contains("use call=MPI_Send"), "{e}");
        let e = b.check(&call(1, "MPI_Comm_rank")).unwrap_err();
        assert!(e.contains("never fire"), "{e}");
    }

    #[test]
    fn failures_are_held_before_their_last_slice() {
        let (s, why) = failure_slice(Some("deadlock"), 14).unwrap();
        assert_eq!(s, 14);
        assert!(why.contains("deadlocks in slice 14"), "{why}");
        assert_eq!(failure_slice(Some("rank_failed"), 3).unwrap().0, 3);
        assert_eq!(failure_slice(Some("livelock"), 9).unwrap().0, 9);
        assert_eq!(failure_slice(Some("success"), 9), None);
        assert_eq!(failure_slice(Some("interrupted"), 9), None);
        assert_eq!(failure_slice(None, 9), None);
        assert_eq!(failure_slice(Some("deadlock"), 0), None);
    }

    #[test]
    fn breakpoints_are_listed_and_deleted() {
        let c = Controller::new();
        c.set_bounds(bounds());
        assert_eq!(c.add_break(Break::Slice(7)), Ok(1));
        assert_eq!(c.add_break("rank=1,call=MPI_Recv".parse().unwrap()), Ok(2));
        assert_eq!(c.add_break(Break::Slice(7)), Ok(1), "no duplicate");
        assert!(c.add_break(Break::Slice(99)).is_err());
        assert_eq!(c.breaks().len(), 2);
        assert!(c.delete_break(3).is_err());
        assert_eq!(c.delete_break(1), Ok(Break::Slice(7)));
        assert_eq!(c.breaks(), vec!["rank=1,call=MPI_Recv".parse().unwrap()]);
    }

    /// Drive the controller as the Strobe Sender does, slice after slice, until it holds
    /// (or stops): the slices it let start, and the gate that ended the walk.
    fn walk(c: &Controller, seg: &JobSegment, from: u64) -> (Vec<u64>, Gate) {
        let mut started = Vec::new();
        for next in from..=50 {
            match c.before_slice(next, seg) {
                Gate::Open => started.push(next),
                g => return (started, g),
            }
        }
        (started, Gate::Open)
    }

    #[test]
    fn a_pause_waits_a_little_for_computing_ranks_to_reach_a_call() {
        let seg = strobe_runtime::rank::create_segment(2, 1).unwrap();
        for r in 0..2 {
            seg.slot(r).pid.store(100 + r, Ordering::Release);
        }
        seg.slot(0).set_state(RankState::Held);
        let c = Controller::new();
        c.set_bounds(bounds());
        c.add_break(Break::Slice(2)).unwrap();
        assert_eq!(c.before_slice(1, &seg), Gate::Open);
        // Rank 1 computes: no pause yet.
        assert_eq!(c.before_slice(2, &seg), Gate::Wait);
        assert!(c.status().paused.is_none());
        // It reaches its call: the pause shows it held.
        seg.slot(1).set_state(RankState::Held);
        assert_eq!(c.before_slice(2, &seg), Gate::Wait);
        let p = c.status().paused.expect("paused");
        assert!(p.ranks.iter().all(|r| r.state == "held"), "{p:?}");
        // A rank that computes on is shown computing after the grace.
        c.resume();
        assert_eq!(c.before_slice(2, &seg), Gate::Open);
        c.add_break(Break::Slice(3)).unwrap();
        seg.slot(1).set_state(RankState::Computing);
        assert_eq!(c.before_slice(3, &seg), Gate::Wait);
        assert!(c.status().paused.is_none());
        std::thread::sleep(SETTLE);
        assert_eq!(c.before_slice(3, &seg), Gate::Wait);
        let p = c.status().paused.expect("paused after the grace");
        assert_eq!(p.ranks[1].state, "computing");
    }

    #[test]
    fn time_travel_lands_before_the_slice_asked_for_and_keeps_breakpoints() {
        let seg = strobe_runtime::rank::create_segment(2, 1).unwrap();
        for r in 0..2 {
            seg.slot(r).pid.store(100 + r, Ordering::Release);
            // Held at their next calls: a pause is taken at once (see `settled`).
            seg.slot(r).set_state(RankState::Held);
        }
        let c = Controller::new();
        c.set_bounds(bounds());
        c.add_break(Break::Slice(3)).unwrap();
        c.run_to(10);
        let (ran, g) = walk(&c, &seg, 1);
        assert_eq!((ran.len(), g), (2, Gate::Wait), "the breakpoint at 3 first");
        c.run_to(10);
        let (ran, g) = walk(&c, &seg, 3);
        assert_eq!((ran, g), ((3..10).collect::<Vec<_>>(), Gate::Wait));
        assert_eq!(c.status().paused.unwrap().slice, 10);

        // Back: this run stops, the next one lands at 5 without stopping at 3 on the way.
        assert_eq!(c.goto(5, "goto 5".into()), Ok(Travel::Back));
        assert!(matches!(c.before_slice(10, &seg), Gate::Stop(_)));
        assert_eq!(c.take_travel(), Some(5));
        assert_eq!(c.take_travel(), None, "once");
        let (ran, g) = walk(&c, &seg, 1);
        assert_eq!((ran, g), (vec![1, 2, 3, 4], Gate::Wait));
        let p = c.status().paused.unwrap();
        assert_eq!((p.slice, p.reason.as_str()), (5, "goto 5"));
        assert_eq!(c.reruns(), 1);

        // Where it is: nothing to do. One back, then N back from there.
        assert_eq!(c.goto(5, "goto 5".into()), Ok(Travel::Here));
        assert_eq!(c.reverse_step(), Ok(Travel::Back));
        assert_eq!(c.take_travel(), Some(4));
        assert_eq!(walk(&c, &seg, 1).0, vec![1, 2, 3]);
        assert_eq!(c.status().paused.unwrap().reason, "reverse-step");
        assert!(c.back(4, "back 4".into()).is_err(), "before slice 1");
        assert!(c.goto(0, "goto 0".into()).is_err());
        assert!(c.goto(51, "goto 51".into()).is_err());

        // Forward: runs on over the breakpoint and lands; then the breakpoint is kept.
        assert_eq!(c.goto(20, "goto 20".into()), Ok(Travel::Forward));
        assert_eq!(walk(&c, &seg, 4).0, (4..20).collect::<Vec<_>>());
        assert_eq!(c.status().paused.unwrap().reason, "goto 20");
        assert_eq!(c.breaks(), vec![Break::Slice(3)]);

        // A pause while a goto runs on holds at the next slice instead.
        assert_eq!(c.goto(40, "goto 40".into()), Ok(Travel::Forward));
        assert_eq!(c.before_slice(20, &seg), Gate::Open);
        assert_eq!(c.before_slice(21, &seg), Gate::Open);
        c.pause();
        assert_eq!(c.before_slice(22, &seg), Gate::Wait);
        assert_eq!(c.status().paused.unwrap().reason, "step");

        c.forbid_travel("--record".into());
        assert!(c.goto(2, "goto 2".into()).unwrap_err().contains("--record"));
        c.stop("stopped by the user".into());
        assert!(c.goto(30, "goto 30".into()).is_err());
    }
}
