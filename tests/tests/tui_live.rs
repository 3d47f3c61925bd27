//! `strobe replay FILE --tui`, rendered: the live replay feed (`strobe_tui::live`) driving a
//! real replay of recorded fixtures, the app and its status line and popups drawn to
//! ratatui's TestBackend after every key, as the real event loop does.

use std::path::Path;
use std::time::{Duration, Instant};

use strobe_replayer::ReplayOptions;
use strobe_tests::record_fixture_into;
use strobe_tui::app::Event;
use strobe_tui::feed::{poll_into, run_commands};
use strobe_tui::live::{LiveState, ReplayFeed};
use strobe_tui::ratatui::backend::TestBackend;
use strobe_tui::ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use strobe_tui::ratatui::Terminal;
use strobe_tui::terminal::draw;
use strobe_tui::{App, Recording, Theme};

/// One test at a time: a launch reaps with `waitpid(-1)` (any child of the process), so
/// two replays, or a replay and a `strobe record` child, must not overlap in one process.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

struct Live {
    app: App,
    feed: ReplayFeed,
    term: Terminal<TestBackend>,
}

impl Live {
    fn start(db: &Path, out: &Path) -> Live {
        let feed = ReplayFeed::start(ReplayOptions {
            recording: db.to_path_buf(),
            output: Some(out.to_path_buf()),
            ..ReplayOptions::default()
        });
        let mut app = App::new(Recording::open(db).unwrap(), Theme { color: false });
        app.live = true;
        let mut l = Live {
            app,
            feed,
            term: Terminal::new(TestBackend::new(160, 40)).unwrap(),
        };
        l.draw();
        l
    }

    fn draw(&mut self) {
        draw(&mut self.term, &mut self.app).unwrap();
    }

    /// A key, then the commands it queued, then a frame (the event loop's order).
    fn key(&mut self, c: KeyCode) {
        self.app
            .handle(Event::Key(KeyEvent::new(c, KeyModifiers::NONE)));
        run_commands(&mut self.app, &mut self.feed);
        self.draw();
    }

    fn keys(&mut self, s: &str) {
        for c in s.chars() {
            self.key(KeyCode::Char(c));
        }
    }

    /// Poll the feed until its state is `want` (a generous bound: a noisy 2-core machine).
    fn until(&mut self, want: impl Fn(&LiveState) -> bool, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            poll_into(&mut self.app, &mut self.feed);
            if want(self.feed.state()) {
                self.draw();
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: the replay is {:?}\n{}",
                self.feed.state(),
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn screen(&self) -> String {
        let buf = self.term.backend().buffer();
        let mut s = String::new();
        for y in 0..buf.area.height {
            for x in 0..buf.area.width {
                s.push_str(buf[(x, y)].symbol());
            }
            s.push('\n');
        }
        s
    }

    fn status_line(&self) -> String {
        self.screen().lines().last().unwrap_or("").to_string()
    }

    fn assert_shows(&self, what: &[&str], context: &str) {
        let screen = self.screen();
        for w in what {
            assert!(
                screen.contains(w),
                "{context}: the screen lacks {w:?}:\n{screen}"
            );
        }
    }
}

/// The pids in a `gdb -p PID` popup (one per rank line).
fn pids_in(screen: &str) -> Vec<u32> {
    let mut pids: Vec<u32> = screen
        .split("gdb -p ")
        .skip(1)
        .filter_map(|s| {
            s.split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|d| d.parse().ok())
        })
        .collect();
    pids.sort();
    pids.dedup();
    pids
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

#[test]
fn a_live_replay_holds_breaks_steps_shows_gdb_and_quits_cleanly() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let db = record_fixture_into(dir.path(), "token_ring", 3);
    let out = dir.path().join("ranks.out");
    let mut l = Live::start(&db, &out);
    let slices = l.app.rec.last_slice();
    assert!(slices > 8, "token_ring has more than 8 slices ({slices})");

    // Held before slice 1, the cursor there, the mode in the status line.
    l.until(|s| *s == LiveState::Paused { slice: 1 }, "start");
    assert_eq!(l.app.view.cursor, 1);
    assert!(
        l.status_line().contains("[replay paused before slice 1]"),
        "{}",
        l.status_line()
    );
    l.assert_shows(&["live replay: space runs/pauses"], "greeting");

    // Every rank is held: the gdb popup names live pids, rank 0's first.
    l.keys("x");
    l.assert_shows(&["gdb: rank 0", "gdb -p ", "rank 0 (pid "], "gdb popup");
    let pids = pids_in(&l.screen());
    assert!(!pids.is_empty(), "gdb commands with pids:\n{}", l.screen());
    // ... and asks the event loop to start it (the real loop does: tests/tests/tui_tmux.rs).
    let req = l.app.debugger.take().expect("x asks for a debugger");
    assert_eq!((req.rank, req.slice), (0, 1));
    assert_eq!(req.command, format!("gdb -p {}", req.pid));
    assert!(pids.contains(&req.pid), "{pids:?} {req:?}");
    l.key(KeyCode::Esc);
    assert!(l.app.popup.is_none(), "any key closes the popup");

    // A breakpoint at the cursor's slice (search moves the cursor), then run to it.
    l.keys("/5");
    l.key(KeyCode::Enter);
    assert_eq!(l.app.view.cursor, 5);
    l.keys("b");
    l.assert_shows(&["breakpoint 1: before slice 5"], "breakpoint set");
    // Listed, deleted, set again (issue 12, item 3): L lists, D deletes at the cursor.
    l.keys("L");
    l.assert_shows(&["Breakpoints", "1  slice=5"], "breakpoint list");
    l.key(KeyCode::Esc);
    l.keys("D");
    l.assert_shows(&["deleted breakpoint 1: slice=5"], "breakpoint deleted");
    l.keys("L");
    l.assert_shows(&["no breakpoints"], "empty list");
    l.key(KeyCode::Esc);
    l.keys("b");
    l.assert_shows(&["breakpoint 1: before slice 5"], "breakpoint set again");
    l.keys(" ");
    l.until(
        |s| *s == LiveState::AtBreakpoint { slice: 5 },
        "run to the breakpoint",
    );
    assert_eq!(l.app.view.cursor, 5);
    l.assert_shows(
        &[
            "[replay at breakpoint before slice 5]",
            "stopped at slice 5: breakpoint slice=5",
        ],
        "at the breakpoint",
    );

    // A breakpoint behind the replay is refused.
    l.keys("/2");
    l.key(KeyCode::Enter);
    l.keys("b");
    l.assert_shows(&["slice 2 has already run"], "no going back");

    // `n` steps one slice while live.
    l.keys("n");
    l.until(|s| *s == LiveState::Paused { slice: 6 }, "step");
    assert_eq!(l.app.view.cursor, 6);
    l.assert_shows(&["[replay paused before slice 6]"], "stepped");

    // Quit: the replay is stopped and every rank reaped.
    l.keys("q");
    assert!(l.app.quit);
    l.feed.shutdown();
    assert_eq!(*l.feed.state(), LiveState::Stopped);
    assert_eq!(l.feed.exit_code(), strobe_replayer::EXIT_STOPPED);
    let left: Vec<u32> = pids.into_iter().filter(|p| *p > 1 && alive(*p)).collect();
    assert!(left.is_empty(), "ranks left behind: {left:?}");
    let fx = strobe_tests::fixture("token_ring").display().to_string();
    let procs = strobe_tests::processes_matching(&fx);
    assert!(procs.is_empty(), "ranks left behind: {procs:?}");
}

#[test]
fn a_divergence_opens_its_report_at_its_slice() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("d.db");
    let rec = strobe_tests::replay::record(
        &db,
        &["-n", "4"],
        "divergent",
        &[],
        &[("STROBE_FIXTURE_NOISE_US", "300")],
    );
    assert_eq!(rec.code, 0, "{}", rec.stderr);
    // The divergent fixture changes a tag when this is set (inherited by the ranks); no
    // other test in this binary runs it.
    std::env::set_var("DIVERGENT_FIXTURE_TAG", "9");
    let mut l = Live::start(&db, &dir.path().join("ranks.out"));
    l.until(|s| *s == LiveState::Paused { slice: 1 }, "start");
    l.keys(" ");
    l.until(
        |s| matches!(s, LiveState::Diverged { .. }),
        "run to the divergence",
    );
    let LiveState::Diverged { slice } = l.feed.state().clone() else {
        unreachable!()
    };
    assert_eq!(l.app.view.cursor, slice, "the cursor is where it diverged");
    l.assert_shows(
        &[
            &format!("[replay diverged in slice {slice}]"),
            &format!("Divergence in slice {slice}"),
            "replay DIVERGED from the recording",
            "MPI_Send peer=3 tag=9",
        ],
        "divergence",
    );
    assert_eq!(l.feed.exit_code(), strobe_replayer::EXIT_DIVERGED);
    // The replay is over: replay keys say so.
    l.key(KeyCode::Esc);
    l.keys(" ");
    l.assert_shows(&["the replay diverged"], "after the end");
}
