//! Where changes to the shown data come from, besides the user's keys.
//!
//! Browsing a file, [`FollowFile`] re-reads the recording on a timer while it is still
//! being written. A live replay (`strobe replay run.db --tui`) plugs in here with its own
//! [`Feed`] ([`crate::live::ReplayFeed`], in-process through the replayer's `Controller`): it reports where the replay is
//! ([`FeedEvent::At`]) and why it stopped ([`FeedEvent::Stopped`]), and takes the replay
//! commands ([`ReplayCommand`]); the views stay the same, because the replay writes the
//! same tables as a recording. See `docs/tui.md`, "Live replay".

use std::time::{Duration, Instant};

use crate::app::{App, Event};
use crate::data::{DataError, Recording};

/// Something that happened outside the UI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FeedEvent {
    /// More slices are available.
    Grew { slices: u64 },
    /// The job (or replay) ended; the recording is complete.
    Finished { outcome: String },
    /// A live replay is at this slice: the views follow it.
    At { slice: u64 },
    /// A live replay stopped: at a breakpoint, a divergence or a crash.
    Stopped { slice: u64, why: String },
    /// Something to read in a popup (a divergence or crash report, the gdb command).
    Popup { title: String, text: String },
    /// A line for the status line (a breakpoint was set).
    Message(String),
    /// Start a debugger on a held rank (`x`); the event loop does it.
    Debugger(crate::debugger::DebuggerRequest),
}

/// What a live replay can be asked to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplayCommand {
    RunPause,
    Step,
    BreakAtSlice(u64),
    BreakOnCall {
        rank: u32,
        call: String,
    },
    /// Start gdb attached to this rank (the replay must be held).
    Gdb {
        rank: u32,
    },
    /// List the breakpoints (a popup).
    ListBreaks,
    /// Delete the breakpoint before this slice if there is one, else the last one set.
    DeleteBreak {
        at: u64,
    },
    /// Time travel: hold every rank before this slice, earlier or later.
    Goto(u64),
    /// Time travel one slice back.
    ReverseStep,
}

pub trait Feed {
    /// Shown in the status line: `browse`, `follow`, or the replay's state.
    fn mode(&self) -> String;
    /// Called on every tick of the event loop; returns what changed.
    fn poll(&mut self, rec: &mut Recording) -> Result<Vec<FeedEvent>, DataError>;
    /// Whether [`Feed::command`] does anything (a live replay).
    fn is_live(&self) -> bool {
        false
    }
    /// Ask a live replay to do something; what to show comes back as events.
    fn command(&mut self, cmd: ReplayCommand) -> Result<Vec<FeedEvent>, String> {
        let _ = cmd;
        Err("this is a recording, not a live replay (strobe replay FILE --tui)".into())
    }
}

/// Forward the commands the keys queued to the feed, and what it answers to the app.
/// Returns whether anything changed.
pub fn run_commands(app: &mut App, feed: &mut dyn Feed) -> bool {
    let cmds = std::mem::take(&mut app.commands);
    let changed = !cmds.is_empty();
    for c in cmds {
        match feed.command(c) {
            Ok(events) => {
                for e in events {
                    app.handle(Event::Feed(e));
                }
            }
            Err(e) => app.message = Some((e, true)),
        }
    }
    changed
}

/// Poll the feed once and hand its events to the app. Returns whether anything changed.
pub fn poll_into(app: &mut App, feed: &mut dyn Feed) -> bool {
    let mut dirty = false;
    match feed.poll(&mut app.rec) {
        Ok(events) => {
            for e in events {
                app.handle(Event::Feed(e));
                dirty = true;
            }
        }
        Err(e) => {
            app.message = Some((format!("refreshing: {e}"), true));
            dirty = true;
        }
    }
    let mode = feed.mode();
    if mode != app.mode {
        app.mode = mode;
        dirty = true;
    }
    dirty
}

/// Follows a recording file: re-reads the job row and the slice count every `every`
/// until the job has an outcome.
pub struct FollowFile {
    every: Duration,
    last: Instant,
    done: bool,
}

impl FollowFile {
    pub fn new(rec: &Recording, every: Duration) -> FollowFile {
        FollowFile {
            every,
            last: Instant::now(),
            done: rec.finished(),
        }
    }
}

impl Feed for FollowFile {
    fn mode(&self) -> String {
        if self.done { "browse" } else { "follow" }.to_string()
    }

    fn poll(&mut self, rec: &mut Recording) -> Result<Vec<FeedEvent>, DataError> {
        if self.done || self.last.elapsed() < self.every {
            return Ok(Vec::new());
        }
        self.last = Instant::now();
        let before = rec.last_slice();
        let mut events = Vec::new();
        if rec.refresh()? && rec.last_slice() != before {
            events.push(FeedEvent::Grew {
                slices: rec.last_slice(),
            });
        }
        if let Some(outcome) = &rec.job().outcome {
            self.done = true;
            events.push(FeedEvent::Finished {
                outcome: outcome.clone(),
            });
        }
        Ok(events)
    }
}
