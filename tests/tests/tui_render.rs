//! The terminal UI rendered to ratatui's TestBackend: every view at 80x24, 120x40 and
//! 200x60, after scripted key sequences that include a resize, on recordings made from the
//! fixtures with `strobe record`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use strobe_tests::record_fixture_into;
use strobe_tui::app::{Event, Tab};
use strobe_tui::ratatui::backend::TestBackend;
use strobe_tui::ratatui::crossterm::event::{
    KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use strobe_tui::ratatui::style::{Color, Modifier};
use strobe_tui::ratatui::Terminal;
use strobe_tui::terminal::draw;
use strobe_tui::{App, Recording, Theme};

const SIZES: [(u16, u16); 3] = [(80, 24), (120, 40), (200, 60)];

struct Recordings {
    _dir: tempfile::TempDir,
    deadlock: PathBuf,
    collectives: PathBuf,
    /// token_ring with per-process statistics tables added.
    ring_stats: PathBuf,
}

/// Recorded once per test binary: recording is the slow part.
fn recordings() -> &'static Recordings {
    static R: OnceLock<Recordings> = OnceLock::new();
    R.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let deadlock = record_fixture_into(dir.path(), "deadlock", 3);
        let collectives = record_fixture_into(dir.path(), "collectives", 4);
        let ring_stats = record_fixture_into(dir.path(), "token_ring", 4);
        strobe_tui::synthetic::add_process_stats(&ring_stats, 4).unwrap();
        Recordings {
            _dir: dir,
            deadlock,
            collectives,
            ring_stats,
        }
    })
}

fn key(c: char) -> Event {
    Event::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
}

fn code(c: KeyCode) -> Event {
    Event::Key(KeyEvent::new(c, KeyModifiers::NONE))
}

/// A UI on `db`, first drawn at 200x60, then resized to `size`, then fed `keys`, drawing
/// after every event as the real loop does.
struct Ui {
    app: App,
    term: Terminal<TestBackend>,
}

impl Ui {
    fn open(db: &Path, size: (u16, u16), color: bool) -> Ui {
        let rec = Recording::open(db).unwrap();
        let mut ui = Ui {
            app: App::new(rec, Theme { color }),
            term: Terminal::new(TestBackend::new(200, 60)).unwrap(),
        };
        ui.draw();
        ui.resize(size.0, size.1);
        ui
    }

    fn draw(&mut self) {
        draw(&mut self.term, &mut self.app).unwrap();
    }

    fn resize(&mut self, w: u16, h: u16) {
        self.term.backend_mut().resize(w, h);
        self.send(&[Event::Resize(w, h)]);
    }

    fn send(&mut self, events: &[Event]) {
        for e in events {
            self.app.handle(e.clone());
            self.draw();
        }
    }

    fn keys(&mut self, s: &str) {
        let events: Vec<Event> = s.chars().map(key).collect();
        self.send(&events);
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

    fn assert_shows(&self, what: &[&str], context: &str) {
        let screen = self.screen();
        for w in what {
            assert!(
                screen.contains(w),
                "{context}: the screen does not show {w:?}:\n{screen}"
            );
        }
        if let Some((m, true)) = &self.app.message {
            panic!("{context}: error in the status line: {m}\n{screen}");
        }
    }
}

#[test]
fn overview_at_every_size() {
    let r = recordings();
    for size in SIZES {
        let mut ui = Ui::open(&r.collectives, size, true);
        let ctx = format!("overview {size:?}");
        ui.assert_shows(
            &[
                "1 Overview",
                "GETTS",
                "NCOLL",
                "NP2P",
                "collectives",
                "outcome success",
                "▲",
            ],
            &ctx,
        );
        // Collectives were scheduled: the NCOLL chart has bars.
        let screen = ui.screen();
        let ncoll = screen.lines().skip_while(|l| !l.starts_with("NCOLL"));
        assert!(
            ncoll
                .take_while(|l| !l.starts_with("NP2P"))
                .any(|l| l.contains('▌') || l.contains('▐') || l.contains('█')),
            "{ctx}: the NCOLL chart is empty:\n{screen}"
        );
        // Zoom in around the cursor, pan, page, and come back.
        let before = ui.app.view;
        ui.keys("G");
        ui.keys("++");
        assert!(ui.app.view.per_col <= before.per_col, "{ctx}: + zooms in");
        assert_eq!(
            ui.app.view.cursor,
            ui.app.rec.last_slice(),
            "{ctx}: G goes to the last slice"
        );
        ui.send(&[code(KeyCode::PageUp), key('h'), key('l'), key('g')]);
        assert_eq!(ui.app.view.cursor, 1, "{ctx}: g goes to the first slice");
        ui.keys("--------");
        assert_eq!(
            ui.app.view.first, 1,
            "{ctx}: zoomed out, the view starts at slice 1"
        );
        ui.assert_shows(&["slice 1/"], &ctx);
        // The cursor column is drawn in reversed video in the GETTS plot.
        let buf = ui.term.backend().buffer();
        let x = 9 + ui.app.view.cursor_col() as u16;
        let reversed =
            (1..buf.area.height - 1).any(|y| buf[(x, y)].modifier.contains(Modifier::REVERSED));
        assert!(reversed, "{ctx}: no cursor column at x={x}");
    }
}

#[test]
fn overview_wide_layout_names_the_deadlock() {
    let r = recordings();
    let mut ui = Ui::open(&r.deadlock, (200, 60), true);
    ui.assert_shows(
        &[
            "outcome deadlock",
            "deadlock in slice",
            "at the cursor",
            "GETTS",
        ],
        "wide",
    );
    ui.keys("e");
    ui.assert_shows(&["NCOLLDEM"], "wide, trouble");
}

#[test]
fn timeline_shows_blocked_ranks_at_every_size() {
    let r = recordings();
    for size in SIZES {
        let ctx = format!("timeline {size:?}");
        let mut ui = Ui::open(&r.deadlock, size, true);
        ui.keys("2");
        assert_eq!(ui.app.tab, Tab::Timeline);
        ui.assert_shows(&["Blocked processes", "legend", "MPI_Recv"], &ctx);
        // Where the deadlock cycle closed, every rank is blocked in MPI_Recv.
        ui.keys("ejj");
        ui.assert_shows(&["rank 2 at slice", "blocked in MPI_Recv"], &ctx);
        let screen = ui.screen();
        let rows = screen
            .lines()
            .filter(|l| l.trim_start().starts_with(['0', '1', '2']) && l.contains('R'))
            .count();
        assert_eq!(rows, 3, "{ctx}: three rank rows with R cells:\n{screen}");
        // Collapsing merges identical ranks; at the end all three are blocked alike.
        ui.keys("c");
        ui.assert_shows(&["identical ranks collapsed"], &ctx);
        ui.resize(size.0.max(100), size.1);
        ui.keys("G");
        ui.assert_shows(&["MPI_Recv"], &ctx);
    }
}

#[test]
fn slice_detail_shows_the_wait_for_cycle_at_every_size() {
    let r = recordings();
    for size in SIZES {
        let ctx = format!("slice {size:?}");
        let mut ui = Ui::open(&r.deadlock, size, true);
        ui.keys("e");
        ui.send(&[code(KeyCode::Enter)]);
        assert_eq!(ui.app.tab, Tab::Slice);
        ui.assert_shows(
            &["blocked ranks", "wait-for graph", "CYCLE 0 -> 1 -> 2 -> 0"],
            &ctx,
        );
        if size.0 >= 120 {
            ui.assert_shows(&["descriptors posted", "per node", "GETTS"], &ctx);
        }
        // h/l step one slice; Esc goes back to where Enter came from.
        let at = ui.app.view.cursor;
        ui.keys("h");
        assert_eq!(ui.app.view.cursor, at - 1, "{ctx}");
        ui.send(&[code(KeyCode::Esc)]);
        assert_eq!(ui.app.tab, Tab::Overview, "{ctx}");
    }
    // Slice 1 of a collective job: descriptors and decisions listed.
    let mut ui = Ui::open(&r.collectives, (200, 60), true);
    ui.keys("]3");
    ui.assert_shows(&["NCOLL ", "MPI_"], "collective slice");
}

#[test]
fn statistics_table_sorts_and_shows_histograms_at_every_size() {
    let r = recordings();
    for size in SIZES {
        let ctx = format!("statistics {size:?}");
        let mut ui = Ui::open(&r.ring_stats, size, true);
        ui.keys("4");
        ui.assert_shows(
            &[
                "Statistics of all ranks",
                "primitive",
                "MPI_Allreduce",
                "MPI_Recv",
                "all primitives",
            ],
            &ctx,
        );
        if size.1 >= 40 {
            ui.assert_shows(&["computation granularity", "communication overhead"], &ctx);
        }
        // Sort by count, descending; then one rank.
        ui.keys("s");
        ui.assert_shows(&["count▼"], &ctx);
        let screen = ui.screen();
        let pos = |p: &str| screen.find(p).unwrap();
        assert!(
            pos("MPI_Recv") < pos("MPI_Barrier") && pos("MPI_Barrier") < pos("MPI_Allreduce"),
            "{ctx}: sorted by count, biggest first:\n{screen}"
        );
        ui.keys("S");
        ui.assert_shows(&["count▲"], &ctx);
        ui.keys("ll");
        ui.assert_shows(&["Statistics of rank 1"], &ctx);
    }
    // The statistics the recorder really measured show too (collectives: real MMDS).
    let mut ui = Ui::open(&r.collectives, (120, 40), true);
    ui.keys("4");
    ui.assert_shows(
        &["MPI_Allreduce", "MPI_Barrier", "all primitives"],
        "real stats",
    );
    // A recording made with the metrics layer off (empty tables) says so.
    let dir = tempfile::tempdir().unwrap();
    let off = dir.path().join("no-metrics.db");
    std::fs::copy(&r.deadlock, &off).unwrap();
    let c = rusqlite::Connection::open(&off).unwrap();
    c.execute_batch(
        "DELETE FROM mmds_rank; DELETE FROM mmds_primitive; DELETE FROM mmds_histogram;",
    )
    .unwrap();
    // As the recorder would have sealed it (the content checksum covers the MMDS tables).
    strobe_recorder::checksum::seal(&c).unwrap();
    drop(c);
    let mut ui = Ui::open(&off, (80, 24), true);
    ui.keys("4");
    ui.assert_shows(&["no per-process statistics"], "no stats");
}

#[test]
fn help_lists_keys_at_every_size() {
    let r = recordings();
    for size in SIZES {
        let ctx = format!("help {size:?}");
        let mut ui = Ui::open(&r.deadlock, size, true);
        ui.keys("?");
        ui.assert_shows(&["Keys", "quit", "zoom in / out", "search"], &ctx);
        if size.1 >= 40 {
            for (k, _, _) in strobe_tui::keys::KEYS {
                ui.assert_shows(&[k], &ctx);
            }
        }
        ui.keys("x");
        assert!(!ui.app.help, "{ctx}: any key closes the help");
        assert!(!ui.app.quit);
    }
}

#[test]
fn search_tabs_and_mouse() {
    let r = recordings();
    let mut ui = Ui::open(&r.deadlock, (120, 40), true);
    // A slice number.
    ui.keys("/7");
    ui.assert_shows(&["search: /7"], "typing");
    ui.send(&[code(KeyCode::Enter)]);
    assert_eq!(ui.app.view.cursor, 7);
    // A call: the first later slice where a rank is blocked in it or posts it.
    ui.keys("g/recv");
    ui.send(&[code(KeyCode::Enter)]);
    let first = ui.app.view.cursor;
    assert!(first > 1, "found MPI_Recv");
    ui.keys("n");
    assert!(ui.app.view.cursor > first, "n finds the next one");
    ui.keys("N");
    assert_eq!(ui.app.view.cursor, first, "N goes back");
    // A rank opens the timeline on it.
    ui.keys("/rank 2");
    ui.send(&[code(KeyCode::Enter)]);
    assert_eq!((ui.app.tab, ui.app.rank), (Tab::Timeline, 2));
    ui.keys("/rank 9");
    ui.send(&[code(KeyCode::Enter)]);
    assert!(ui.app.message.as_ref().unwrap().0.contains("no rank 9"));
    // Tab and Shift-Tab cycle; digits jump.
    ui.send(&[code(KeyCode::Tab)]);
    assert_eq!(ui.app.tab, Tab::Slice);
    ui.send(&[code(KeyCode::BackTab), code(KeyCode::BackTab)]);
    assert_eq!(ui.app.tab, Tab::Overview);
    // Click the "4 Statistics" tab, then a chart column on the overview.
    let click = |x, y| {
        Event::Mouse(MouseEvent {
            kind: MouseEventKind::Down(MouseButton::Left),
            column: x,
            row: y,
            modifiers: KeyModifiers::NONE,
        })
    };
    let screen = ui.screen();
    let x = screen.lines().next().unwrap().find("4 Statistics").unwrap() as u16;
    ui.send(&[click(x, 0)]);
    assert_eq!(ui.app.tab, Tab::Statistics);
    ui.keys("1");
    ui.send(&[click(9 + 5, 15)]);
    assert_eq!(ui.app.view.cursor_col(), 5);
    let wheel = Event::Mouse(MouseEvent {
        kind: MouseEventKind::ScrollDown,
        column: 20,
        row: 15,
        modifiers: KeyModifiers::NONE,
    });
    ui.send(&[wheel]);
    assert_eq!(ui.app.view.cursor_col(), 6);
    ui.keys("q");
    assert!(ui.app.quit);
}

#[test]
fn no_color_draws_no_colour() {
    let r = recordings();
    for tab in ['1', '2', '3', '4'] {
        let mut ui = Ui::open(&r.deadlock, (120, 40), false);
        ui.keys(&format!("e{tab}"));
        let buf = ui.term.backend().buffer();
        for cell in buf.content() {
            assert_eq!(
                (cell.fg, cell.bg),
                (Color::Reset, Color::Reset),
                "tab {tab}: a coloured cell under NO_COLOR"
            );
        }
        // Meaning survives in glyphs: the timeline still has its letters.
        if tab == '2' {
            ui.assert_shows(&[" R  MPI_Recv"], "no colour legend");
        }
    }
}

#[test]
fn a_tiny_terminal_does_not_panic() {
    let r = recordings();
    let mut ui = Ui::open(&r.collectives, (80, 24), true);
    for (w, h) in [
        (20, 5),
        (1, 1),
        (10, 3),
        (40, 8),
        (41, 9),
        (45, 12),
        (80, 24),
    ] {
        ui.resize(w, h);
        for tab in "1234?x".chars() {
            ui.keys(&tab.to_string());
        }
    }
    ui.resize(20, 5);
    ui.assert_shows(&["terminal too small"], "20x5");
    ui.resize(80, 24);
    ui.keys("1");
    ui.assert_shows(&["GETTS"], "back to 80x24");
}

/// Issue 12, item 6: at every size the Overview shows the deadlock report (its first line
/// and the wait-for cycle), never the exits of the ranks strobe itself stopped; at 200x60
/// the report's lines are not wrapped; `e` says why the cursor moved.
#[test]
fn overview_shows_the_deadlock_report_at_every_size_and_e_says_why() {
    let r = recordings();
    for size in SIZES {
        let ctx = format!("deadlock overview {size:?}");
        let mut ui = Ui::open(&r.deadlock, size, true);
        ui.assert_shows(
            &[
                "deadlock in slice",
                "wait-for cycle: rank 0 -> rank 1 -> rank 2 -> rank 0",
            ],
            &ctx,
        );
        let screen = ui.screen();
        for stopped in ["killed by signal 9", "exited with 1", "SIGKILL"] {
            assert!(
                !screen.contains(stopped),
                "{ctx}: shows {stopped:?}:\n{screen}"
            );
        }
        if size.0 >= 200 {
            // The report's longest line is whole on one screen line.
            assert!(
                screen
                    .lines()
                    .any(|l| l.contains("rank 0 blocked in MPI_Recv(source=1")
                        && l.contains("deadlock.rs:")),
                "{ctx}: the report is wrapped:\n{screen}"
            );
        }
        ui.keys("e");
        let (m, err) = ui.app.message.clone().expect("e explains itself");
        assert!(!err && m.contains("deadlock formed in slice"), "{ctx}: {m}");
        // The whole message is on the status line, not cut.
        let status = ui.screen().lines().last().unwrap().to_string();
        assert!(
            status.contains("(blocked set fixed); Enter"),
            "{ctx}: cut: {status}"
        );
    }
}

/// Issue 12, item 7: the help scrolls at 80x24 to its last key, the GETTS axis shows its
/// whole unit, and the slice detail's right column is not cut at 120 columns.
#[test]
fn help_scrolls_and_nothing_is_cut() {
    let r = recordings();
    let mut ui = Ui::open(&r.deadlock, (80, 24), true);
    ui.keys("?");
    ui.assert_shows(&["Keys", "lines 1-"], "help 80x24");
    assert!(!ui.screen().contains("mouse"), "the last key fits?");
    ui.send(&[
        code(KeyCode::PageDown),
        code(KeyCode::PageDown),
        code(KeyCode::PageDown),
    ]);
    ui.assert_shows(
        &[
            "mouse",
            "live, held: gdb on the selected",
            "--diff: jump to the first",
        ],
        "help scrolled",
    );
    assert!(ui.app.help, "scrolling keeps the help open");
    ui.keys("q");
    for size in SIZES {
        let ctx = format!("axis {size:?}");
        let ui = Ui::open(&r.collectives, size, true);
        let screen = ui.screen();
        let getts = screen
            .lines()
            .skip_while(|l| !l.contains("GETTS elapsed time"))
            .nth(1)
            .unwrap_or_default();
        let label: String = getts.chars().take(9).collect();
        assert!(
            label.trim_end().ends_with(" ns")
                || label.trim_end().ends_with(" us")
                || label.trim_end().ends_with(" ms")
                || label.trim_end().ends_with(" s"),
            "{ctx}: axis label {label:?}"
        );
    }
    let mut ui = Ui::open(&r.deadlock, (120, 40), true);
    ui.keys("G");
    ui.send(&[code(KeyCode::Enter)]);
    ui.assert_shows(&["LTTS", "BPTS 3"], "slice detail 120x40");
}
