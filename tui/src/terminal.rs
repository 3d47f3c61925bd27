//! The real terminal: raw mode, the alternate screen and mouse capture on the way in, all
//! undone on the way out, whether the program returns, fails or panics.

use std::io::{self, Stdout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ratatui::backend::{Backend, CrosstermBackend};
use ratatui::crossterm::event::{self, DisableMouseCapture, EnableMouseCapture};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::Terminal;

use crate::app::{App, Event};
use crate::feed::Feed;

/// How long the loop waits for input before it polls the feed.
const TICK: Duration = Duration::from_millis(250);

/// Whether the terminal is in our mode. Restoring twice (the panic hook, then the guard
/// while unwinding) would leave the alternate screen twice, which on some terminals
/// moves the cursor back over the panic message.
static ACTIVE: AtomicBool = AtomicBool::new(false);

fn restore() {
    if !ACTIVE.swap(false, Ordering::SeqCst) {
        return;
    }
    // Each step on its own: one failing must not skip the others.
    let _ = disable_raw_mode();
    let _ = execute!(io::stdout(), DisableMouseCapture, LeaveAlternateScreen);
}

/// Puts the terminal back when dropped (normal return or an error).
struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        restore();
    }
}

/// Draw one frame: lay out and query for the frame's size, then render.
pub fn draw<B: Backend>(terminal: &mut Terminal<B>, app: &mut App) -> Result<(), B::Error> {
    let size = terminal.size()?;
    app.prepare(ratatui::layout::Rect::new(0, 0, size.width, size.height));
    terminal.draw(|f| crate::ui::render(f, app))?;
    Ok(())
}

/// `x`: the debugger in a tmux window, or in the foreground with the terminal given back
/// for as long as it runs (raw mode off, the main screen), then taken again and redrawn.
fn start_debugger(
    terminal: &mut Terminal<CrosstermBackend<Stdout>>,
    app: &mut App,
    req: &crate::debugger::DebuggerRequest,
) -> io::Result<()> {
    use crate::debugger;
    // The popup (the command, every rank's pid and state) stays for when the user is back.
    if debugger::in_tmux() {
        app.message = Some(match debugger::start_in_tmux(req) {
            Ok(m) => (m, false),
            Err(e) => (e, true),
        });
        return Ok(());
    }
    restore();
    let st = debugger::run_foreground(req);
    enable_raw_mode()?;
    ACTIVE.store(true, Ordering::SeqCst);
    execute!(io::stdout(), EnterAlternateScreen, EnableMouseCapture)?;
    terminal.clear()?;
    app.message = Some(debugger::foreground_done(req, st));
    Ok(())
}

/// Run the UI on the process's terminal until the user quits.
pub fn run(app: &mut App, feed: &mut dyn Feed) -> io::Result<()> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // Restore first, so the panic message lands on a usable terminal.
        restore();
        hook(info);
    }));
    enable_raw_mode()?;
    ACTIVE.store(true, Ordering::SeqCst);
    let _guard = Guard;
    execute!(io::stdout(), EnterAlternateScreen, EnableMouseCapture)?;
    let mut terminal: Terminal<CrosstermBackend<Stdout>> =
        Terminal::new(CrosstermBackend::new(io::stdout()))?;
    app.mode = feed.mode();
    app.live = feed.is_live();
    let mut dirty = true;
    // Test seam (debug builds only): the end-to-end test checks that a panic leaves a
    // usable terminal behind.
    let panic_for_test =
        cfg!(debug_assertions) && std::env::var_os("STROBE_TUI_TEST_PANIC").is_some();
    while !app.quit {
        if dirty {
            draw(&mut terminal, app)?;
            dirty = false;
            if panic_for_test {
                panic!("STROBE_TUI_TEST_PANIC is set: panicking after the first frame");
            }
        }
        if event::poll(TICK)? {
            let ev = match event::read()? {
                event::Event::Key(k) => Some(Event::Key(k)),
                event::Event::Mouse(m) => Some(Event::Mouse(m)),
                event::Event::Resize(w, h) => Some(Event::Resize(w, h)),
                _ => None,
            };
            if let Some(ev) = ev {
                app.handle(ev);
                crate::feed::run_commands(app, feed);
                if let Some(req) = app.debugger.take() {
                    start_debugger(&mut terminal, app, &req)?;
                }
                dirty = true;
            }
        }
        // Every turn, not only when idle: typing must not starve a live replay's updates
        // (FollowFile keeps its own timer).
        if crate::feed::poll_into(app, feed) {
            dirty = true;
        }
        while let Some(ev) = app.history_event() {
            app.handle(ev);
            dirty = true;
        }
    }
    Ok(())
}
