//! The replay control API: pause before a slice, step, run to a slice, breakpoints, state,
//! quit. The Strobe Sender asks [`Controller::before_slice`] before every slice; clients
//! (the terminal stepper, the control socket, the TUI next) call the other methods from
//! their own threads and learn about pauses through [`Controller::subscribe`].

use std::sync::atomic::Ordering;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use strobe_runtime::engine::Gate;
use strobe_runtime::segment::JobSegment;

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

    pub fn add_break(&self, b: Break) {
        self.lock().breaks.push(b);
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

/// What every rank is doing, from the job segment.
pub fn rank_views(seg: &JobSegment) -> Vec<RankView> {
    (0..seg.ranks())
        .map(|r| {
            let slot = seg.slot(r);
            RankView {
                rank: r,
                pid: slot.pid.load(Ordering::Acquire),
                state: slot.state().name(),
                call: slot.blocked_call().name(),
                posted: slot.posted.load(Ordering::Acquire),
            }
        })
        .collect()
}

impl Pause {
    /// The human-readable form: every rank's pid and a ready-to-paste gdb command.
    pub fn render(&self) -> String {
        let mut s = format!(
            "strobe: replay held before slice {} ({}); every rank is held at its next MPI call\n",
            self.slice, self.reason
        );
        for r in &self.ranks {
            let what = if r.state == "blocked" {
                format!("blocked in {}", r.call)
            } else {
                r.state.to_string()
            };
            s.push_str(&format!(
                "  rank {:>3}  pid {:>7}  {:<28} posted {:>6}   gdb -p {}\n",
                r.rank, r.pid, what, r.posted, r.pid
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
    }
}
