//! The live replay feed: `strobe replay FILE --tui`.
//!
//! Decision: the feed drives the replayer **in-process**, through its control API
//! ([`Controller`]), not over the control socket. The UI and the replay live in one
//! process anyway (the replay runs on a thread of the `strobe` process, the job's Machine
//! Manager); the in-process API has no connection to lose, no JSON to parse, gives the
//! full verdict report (the socket only sends its first line) and lets quitting the UI
//! stop and reap the job before `strobe` exits ([`Drop`]). The socket stays available
//! beside it (`--control PATH`) for scripts.
//!
//! The views read the recording file (the replay reproduces it slice for slice); the feed
//! moves the cursor to where the replay is and reports its stops.

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;

use strobe_replayer::{
    Break, Controller, Event, Pause, ReplayError, ReplayOptions, ReplayReport, Travel, Verdict,
};
use strobe_runtime::launcher::JobOutcome;

use crate::data::{DataError, Recording};
use crate::feed::{Feed, FeedEvent, ReplayCommand};

/// Where the replay is, as the status line shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LiveState {
    /// Launched, not yet at its first hold.
    Starting,
    Running,
    /// Held by a step or pause (before `slice`).
    Paused {
        slice: u64,
    },
    /// Re-executing the job to hold before `to` (time travel back).
    Travelling {
        to: u64,
    },
    /// Held by a breakpoint (before `slice`).
    AtBreakpoint {
        slice: u64,
    },
    /// Ended: diverged from the recording in `slice`.
    Diverged {
        slice: u64,
    },
    /// Ended as recorded (the verdict line says how the job ended).
    Finished,
    /// Stopped by the user.
    Stopped,
    /// Could not start (the message says why).
    Failed(String),
}

type ReplayThread = JoinHandle<Result<ReplayReport, ReplayError>>;

/// A replay running on a thread of this process, driven through its [`Controller`].
pub struct ReplayFeed {
    ctl: Arc<Controller>,
    events: Receiver<Event>,
    thread: Option<ReplayThread>,
    state: LiveState,
    pause: Option<Pause>,
    /// The last slice reported to the views.
    shown: u64,
    /// Where the ranks' output goes.
    pub output: Option<PathBuf>,
    /// Events for the next poll (the greeting).
    pending: Vec<FeedEvent>,
    /// The verdict report, once the replay ended.
    pub report: Option<String>,
    /// The command `x` starts (`{pid}`, `{rank}` replaced): [`crate::debugger`].
    pub debugger: String,
}

impl ReplayFeed {
    /// Start replaying `opts.recording`, held before slice 1 (`start_paused` is forced:
    /// the user starts it with space or `n`). `opts.output` should name a file: the ranks
    /// must not write over the UI.
    pub fn start(mut opts: ReplayOptions) -> ReplayFeed {
        opts.start_paused = true;
        let ctl = Arc::new(Controller::new());
        let events = ctl.subscribe();
        let output = opts.output.clone();
        let c = ctl.clone();
        let thread = std::thread::Builder::new()
            .name("strobe-replay".into())
            .spawn(move || strobe_replayer::replay(&opts, c))
            .expect("spawn the replay thread");
        ReplayFeed {
            ctl,
            events,
            thread: Some(thread),
            state: LiveState::Starting,
            pause: None,
            shown: 0,
            pending: vec![FeedEvent::Message(format!(
                "live replay: space runs/pauses, n steps, < back, ? keys{}",
                output
                    .as_ref()
                    .map(|o| format!("; output: {}", o.display()))
                    .unwrap_or_default()
            ))],
            output,
            report: None,
            debugger: crate::debugger::DEFAULT_COMMAND.to_string(),
        }
    }

    /// `strobe replay`'s exit status for how the replay ended (see the replayer's
    /// `EXIT_*`): matched 0, diverged 1, could not start 2, stopped by the user 130.
    pub fn exit_code(&self) -> i32 {
        match self.state {
            LiveState::Finished => strobe_replayer::EXIT_MATCHED,
            LiveState::Diverged { .. } => strobe_replayer::EXIT_DIVERGED,
            LiveState::Failed(_) => strobe_replayer::EXIT_CANNOT_START,
            _ => strobe_replayer::EXIT_STOPPED,
        }
    }

    pub fn state(&self) -> &LiveState {
        &self.state
    }

    /// The replay's own control API (for `--control` beside the UI).
    pub fn controller(&self) -> Arc<Controller> {
        self.ctl.clone()
    }

    /// Whether the replay thread has ended.
    pub fn ended(&self) -> bool {
        self.thread.is_none()
    }

    /// Stop the replay (if it still runs) and wait until every rank is stopped and reaped.
    pub fn shutdown(&mut self) {
        if let Some(t) = self.thread.take() {
            self.ctl.stop("stopped by the user".into());
            if let Ok(Ok(r)) = t.join() {
                self.report = Some(r.text);
            }
            if !matches!(
                self.state,
                LiveState::Diverged { .. } | LiveState::Finished | LiveState::Failed(_)
            ) {
                self.state = LiveState::Stopped;
            }
        }
    }

    /// The replay thread returned: turn its report into the state and what the views show.
    fn ended_with(&mut self, res: Result<ReplayReport, ReplayError>) -> Vec<FeedEvent> {
        self.pause = None;
        match res {
            Err(e) => {
                let text = format!("cannot replay: {e}");
                self.state = LiveState::Failed(text.clone());
                vec![FeedEvent::Popup {
                    title: "Replay failed".into(),
                    text,
                }]
            }
            Ok(r) => {
                self.report = Some(r.text.clone());
                let first = r.text.lines().next().unwrap_or("").to_string();
                match &r.verdict {
                    Verdict::Diverged(d) => {
                        self.state = LiveState::Diverged { slice: d.slice };
                        vec![
                            FeedEvent::Stopped {
                                slice: d.slice,
                                why: "the replay diverged from the recording".into(),
                            },
                            FeedEvent::Popup {
                                title: format!("Divergence in slice {}", d.slice),
                                text: r.text.clone(),
                            },
                        ]
                    }
                    Verdict::Stopped => {
                        self.state = LiveState::Stopped;
                        vec![FeedEvent::Message(first)]
                    }
                    Verdict::Matched => {
                        self.state = LiveState::Finished;
                        // A recorded failure that happened again: show it where it is.
                        let failed = match &r.job.outcome {
                            JobOutcome::Success => None,
                            JobOutcome::RankFailed { slice, .. } => Some(*slice),
                            _ => Some(r.slices),
                        };
                        match failed {
                            Some(slice) => vec![
                                FeedEvent::Stopped {
                                    slice: slice.max(1),
                                    why: first,
                                },
                                FeedEvent::Popup {
                                    title: "The replayed job failed as recorded".into(),
                                    text: r.text.clone(),
                                },
                            ],
                            None => vec![
                                FeedEvent::At {
                                    slice: r.slices.max(1),
                                },
                                FeedEvent::Finished { outcome: first },
                            ],
                        }
                    }
                }
            }
        }
    }
}

/// What the status line says after a time-travel command (the landing's pause follows).
fn travel_events(t: Travel, to: u64) -> Vec<FeedEvent> {
    match t {
        Travel::Here => vec![FeedEvent::Message(format!(
            "already held before slice {to}"
        ))],
        Travel::Forward => vec![FeedEvent::Message(format!("running on to slice {to}"))],
        // The `Travelling` event says it.
        Travel::Back => Vec::new(),
    }
}

/// Whether a pause's reason is a breakpoint (rather than a step, a pause, a run-to or a
/// time travel's landing).
fn is_breakpoint(reason: &str) -> bool {
    !(reason == "step"
        || reason == "reverse-step"
        || reason.starts_with("reached slice")
        || reason.starts_with("goto ")
        || reason.starts_with("back "))
}

impl Feed for ReplayFeed {
    fn mode(&self) -> String {
        match &self.state {
            LiveState::Starting => "replay starting".into(),
            LiveState::Running => "replay running".into(),
            LiveState::Paused { slice } => format!("replay paused before slice {slice}"),
            LiveState::Travelling { to } => format!("replay going back to slice {to}"),
            LiveState::AtBreakpoint { slice } => {
                format!("replay at breakpoint before slice {slice}")
            }
            LiveState::Diverged { slice } => format!("replay diverged in slice {slice}"),
            LiveState::Finished => "replay finished".into(),
            LiveState::Stopped => "replay stopped".into(),
            LiveState::Failed(_) => "replay failed".into(),
        }
    }

    fn is_live(&self) -> bool {
        true
    }

    fn poll(&mut self, _rec: &mut Recording) -> Result<Vec<FeedEvent>, DataError> {
        let mut out = std::mem::take(&mut self.pending);
        let mut finished = false;
        loop {
            match self.events.try_recv() {
                Ok(Event::Paused(p)) => {
                    let slice = p.slice;
                    if is_breakpoint(&p.reason) {
                        self.state = LiveState::AtBreakpoint { slice };
                        out.push(FeedEvent::Stopped {
                            slice,
                            why: p.reason.clone(),
                        });
                    } else {
                        self.state = LiveState::Paused { slice };
                        out.push(FeedEvent::At { slice });
                    }
                    self.shown = slice;
                    self.pause = Some(p);
                }
                Ok(Event::Resumed { .. }) => {
                    self.pause = None;
                    self.state = LiveState::Running;
                }
                Ok(Event::Travelling { to }) => {
                    self.pause = None;
                    self.state = LiveState::Travelling { to };
                    out.push(FeedEvent::Message(format!(
                        "going back to slice {to}: re-executing the job from the start"
                    )));
                }
                Ok(Event::Finished(_)) => finished = true,
                Err(TryRecvError::Empty) | Err(TryRecvError::Disconnected) => break,
            }
        }
        if self.state == LiveState::Running {
            let s = self.ctl.status().slice;
            if s != self.shown && s > 0 {
                self.shown = s;
                out.push(FeedEvent::At { slice: s });
            }
        }
        // `Finished` is published just before the replay returns; a replay that could not
        // start publishes nothing, so a thread that ended is the other way to learn it.
        let done = finished || self.thread.as_ref().is_some_and(|t| t.is_finished());
        if done {
            if let Some(t) = self.thread.take() {
                let res = t.join().unwrap_or_else(|_| {
                    Err(ReplayError::Io {
                        path: PathBuf::new(),
                        source: std::io::Error::other("the replay thread panicked"),
                    })
                });
                out.extend(self.ended_with(res));
            }
        }
        Ok(out)
    }

    fn command(&mut self, cmd: ReplayCommand) -> Result<Vec<FeedEvent>, String> {
        if self.thread.is_none() {
            return Err(format!("the {}", self.mode()));
        }
        match cmd {
            ReplayCommand::RunPause => {
                if self.pause.is_some() {
                    self.ctl.resume();
                } else {
                    self.ctl.pause();
                }
                Ok(Vec::new())
            }
            ReplayCommand::Step => {
                self.ctl.step();
                Ok(Vec::new())
            }
            ReplayCommand::Goto(s) => {
                let t = self.ctl.goto(s, format!("goto {s}"))?;
                Ok(travel_events(t, s))
            }
            ReplayCommand::ReverseStep => {
                let t = self.ctl.reverse_step()?;
                let here = self.pause.as_ref().map_or(self.shown, |p| p.slice);
                Ok(travel_events(t, here.saturating_sub(1)))
            }
            ReplayCommand::BreakAtSlice(s) => {
                // Paused before P: slices before P have run; P itself has not started.
                let next = match &self.pause {
                    Some(p) => p.slice,
                    None => self.ctl.status().slice + 1,
                };
                if s < next || (s == next && self.pause.is_some()) {
                    return Err(format!(
                        "slice {s} has already run or is where the replay holds (before slice {next}): t goes back to the cursor's slice"
                    ));
                }
                let n = self.ctl.add_break(Break::Slice(s))?;
                Ok(vec![FeedEvent::Message(format!(
                    "breakpoint {n}: before slice {s} (space runs to it)"
                ))])
            }
            ReplayCommand::BreakOnCall { rank, call } => {
                let n = self.ctl.add_break(Break::Call {
                    rank,
                    call: call.clone(),
                })?;
                Ok(vec![FeedEvent::Message(format!(
                    "breakpoint {n}: after the slice that handles rank {rank}'s next {call}"
                ))])
            }
            ReplayCommand::ListBreaks => {
                let breaks = self.ctl.breaks();
                let text = if breaks.is_empty() {
                    "no breakpoints: b sets one at the cursor's slice, B on the selected rank's call"
                        .to_string()
                } else {
                    breaks
                        .iter()
                        .enumerate()
                        .map(|(i, b)| format!("{}  {b}", i + 1))
                        .collect::<Vec<_>>()
                        .join("\n")
                        + "\n\nD deletes the one at the cursor's slice (else the last)"
                };
                Ok(vec![FeedEvent::Popup {
                    title: "Breakpoints".into(),
                    text,
                }])
            }
            ReplayCommand::DeleteBreak { at } => {
                let breaks = self.ctl.breaks();
                let n = breaks
                    .iter()
                    .position(|b| *b == Break::Slice(at))
                    .map(|i| i + 1)
                    .unwrap_or(breaks.len());
                let b = self.ctl.delete_break(n)?;
                Ok(vec![FeedEvent::Message(format!(
                    "deleted breakpoint {n}: {b}"
                ))])
            }
            ReplayCommand::Gdb { rank } => {
                let p = self.pause.as_ref().ok_or_else(|| {
                    "gdb attaches while the replay is held: pause it (space) or step (n), then x"
                        .to_string()
                })?;
                let r = p
                    .ranks
                    .iter()
                    .find(|r| r.rank == rank)
                    .ok_or_else(|| format!("no rank {rank} in this replay"))?;
                if r.pid == 0 || r.state == "exited" {
                    return Err(format!(
                        "rank {rank} has exited: there is no process to attach to"
                    ));
                }
                let cmd = crate::debugger::command_for(&self.debugger, r.pid, rank);
                let text = format!(
                    "{cmd}\n\nrank {rank} (pid {}) is {}{}; every rank is held before slice {}.\nAll ranks:\n{}",
                    r.pid,
                    r.state,
                    if r.state == "blocked" {
                        format!(" in {}", r.call)
                    } else {
                        String::new()
                    },
                    p.slice,
                    p.render()
                );
                Ok(vec![
                    FeedEvent::Popup {
                        title: format!("gdb: rank {rank}"),
                        text,
                    },
                    FeedEvent::Debugger(crate::debugger::DebuggerRequest {
                        rank,
                        pid: r.pid,
                        command: cmd,
                        slice: p.slice,
                    }),
                ])
            }
        }
    }
}

impl Drop for ReplayFeed {
    /// Quitting the UI (or unwinding from a panic) stops the replay and reaps every rank.
    fn drop(&mut self) {
        self.shutdown();
    }
}
