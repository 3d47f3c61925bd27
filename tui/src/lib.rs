//! strobe-tui: the terminal UI over a recording (`strobe tui run.db`).
//!
//! * [`data`]: every query, over one read-only connection, downsampled in SQL (the
//!   History tab's read excepted: [`history_load`] runs it on a worker thread with a
//!   connection of its own, so that the tab opens at once);
//! * [`app`]: state, the [`app::Event`] enum, what each action does;
//! * [`keys`]: the key map (and the help screen's table);
//! * [`ui`]: one render function per pane;
//! * [`feed`]: changes from outside (a growing file);
//! * [`live`]: the live replay feed (`strobe replay FILE --tui`);
//! * [`terminal`]: the real terminal, restored on every exit path.

pub mod app;
pub mod bench;
pub mod data;
pub mod debugger;
pub mod feed;
pub mod history;
pub mod history_load;
pub mod keys;
pub mod live;
pub mod marks;
pub mod query;
pub use strobe_recorder::synthetic;
pub mod terminal;
pub mod theme;
pub mod ui;

use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

/// The ratatui this crate renders with (tests drive its TestBackend).
pub use ratatui;

pub use app::App;
pub use data::{DataError, Recording};
pub use marks::{DiffMark, Marks};
pub use theme::Theme;

#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    #[error(transparent)]
    Data(#[from] DataError),
    #[error("the terminal UI needs a terminal: standard input and output must be a tty")]
    NotATerminal,
    #[error("terminal: {0}")]
    Terminal(#[from] std::io::Error),
}

/// How often a recording still being written is re-read.
pub const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// `strobe tui FILE`: open the recording (refusing what is not one before the terminal is
/// touched), then run the UI until the user quits.
pub fn run(path: &Path) -> Result<(), TuiError> {
    run_with(path, Marks::default())
}

/// `strobe tui FILE [--diff B.db]`: as [`run`], with what other commands found marked.
pub fn run_with(path: &Path, marks: Marks) -> Result<(), TuiError> {
    let rec = data::open(path)?;
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(TuiError::NotATerminal);
    }
    let mut feed = feed::FollowFile::new(&rec, FOLLOW_EVERY);
    let mut app = App::new(rec, Theme::from_env());
    app.marks.diff = marks.diff;
    app.message = app.marks.greeting().map(|g| (g, false));
    terminal::run(&mut app, &mut feed)?;
    Ok(())
}

/// `strobe replay FILE --tui`: open the recording (refusing what is not one before the
/// terminal is touched), start the replay held before slice 1, and run the UI on it until
/// the user quits; quitting stops the replay and reaps every rank. `opts.recording` must
/// be absolute (the replay changes the process's working directory to the recorded one).
/// `debugger`: the command `x` runs (`{pid}`, `{rank}` replaced; see [`debugger`]).
pub fn run_live(
    opts: strobe_replayer::ReplayOptions,
    debugger: &str,
) -> Result<live::ReplayFeed, TuiError> {
    let rec = data::open(&opts.recording)?;
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(TuiError::NotATerminal);
    }
    let mut feed = live::ReplayFeed::start(opts);
    feed.debugger = debugger.to_string();
    let mut app = App::new(rec, Theme::from_env());
    let res = terminal::run(&mut app, &mut feed);
    // The terminal is back; now stop and reap the job.
    feed.shutdown();
    res?;
    Ok(feed)
}
