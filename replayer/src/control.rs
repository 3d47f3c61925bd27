//! The replay control API: pause before a slice, step, run to a slice, breakpoints, state,
//! quit. The Strobe Sender asks [`Controller::before_slice`] before every slice; clients
//! (the terminal stepper, the control socket, the TUI next) call the other methods from
//! their own threads and learn about pauses through [`Controller::subscribe`].

use std::sync::atomic::Ordering;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

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
                        "slice {s} has already started (the replay is at slice {}): a replay only goes forward",
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
        st.run_to = Some(s);
        st.step = false;
        Self::release(&mut st);
        drop(st);
        self.resumed();
    }

    /// Run one slice, then hold again.
    pub fn step(&self) {
        let mut st = self.lock();
        st.step = true;
        Self::release(&mut st);
        drop(st);
        self.resumed();
    }

    /// Run until a breakpoint, the end, or a divergence.
    pub fn resume(&self) {
        let mut st = self.lock();
        st.step = false;
        st.run_to = None;
        Self::release(&mut st);
        drop(st);
        self.resumed();
    }

    /// Pause before the next slice (from a client).
    pub fn pause(&self) {
        self.lock().step = true;
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
        if st.paused.is_some() {
            return Gate::Wait;
        }
        let mut reason = None;
        if st.released != Some(next) {
            if st.step {
                reason = Some("step".to_string());
            } else if st.run_to == Some(next) {
                reason = Some(format!("reached slice {next}"));
            } else if st.breaks.contains(&Break::Slice(next)) {
                reason = Some(format!("breakpoint slice={next}"));
            } else if let Some(i) = st.pending.iter().position(|(s, _)| *s == next) {
                reason = Some(st.pending.remove(i).1);
            }
        }
        // The first hold (before slice 1) used to come before the launcher had spawned
        // every rank: it printed "pid 0 ... gdb -p 0" (issue 12, item 8). Hold only once
        // every rank has a pid; until then ask again shortly.
        if reason.is_some() && !every_rank_spawned(seg) {
            return Gate::Wait;
        }
        match reason {
            Some(reason) => {
                st.step = false;
                if st.run_to == Some(next) {
                    st.run_to = None;
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
}
