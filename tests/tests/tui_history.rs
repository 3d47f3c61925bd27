//! Issue 17, item 9: the TUI's match history (tab 5), the rank-and-call search, the rank
//! filter and the `--diff` mark, rendered to ratatui's TestBackend at 80x24, 120x40 and
//! 200x60 on recordings of the wildcard heisenbug fixture (`MPI_ANY_SOURCE` receives on
//! rank 0) made with `strobe record`.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use strobe_tests::record_fixture_into;
use strobe_tui::app::{Event, Tab};
use strobe_tui::history_load::file_loader;
use strobe_tui::ratatui::backend::TestBackend;
use strobe_tui::ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use strobe_tui::ratatui::style::{Color, Modifier};
use strobe_tui::ratatui::Terminal;
use strobe_tui::terminal::draw;
use strobe_tui::{App, DiffMark, Marks, Recording, Theme};

const SIZES: [(u16, u16); 3] = [(80, 24), (120, 40), (200, 60)];
const RANKS: u32 = 4;

struct Recordings {
    _dir: tempfile::TempDir,
    heisenbug: PathBuf,
    ring: PathBuf,
}

fn recordings() -> &'static Recordings {
    static R: OnceLock<Recordings> = OnceLock::new();
    R.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let heisenbug = record_fixture_into(dir.path(), "heisenbug", RANKS);
        let ring = record_fixture_into(dir.path(), "token_ring", RANKS);
        Recordings {
            _dir: dir,
            heisenbug,
            ring,
        }
    })
}

struct Ui {
    app: App,
    term: Terminal<TestBackend>,
}

impl Ui {
    fn open(db: &Path, size: (u16, u16)) -> Ui {
        let mut ui = Ui {
            app: App::new(Recording::open(db).unwrap(), Theme { color: true }),
            term: Terminal::new(TestBackend::new(size.0, size.1)).unwrap(),
        };
        ui.draw();
        ui
    }
    fn draw(&mut self) {
        draw(&mut self.term, &mut self.app).unwrap();
    }
    /// Handle `e` and draw, then, if that started reading a history (off the UI thread),
    /// wait for it and draw again: the screen as the user sees it once the tab is filled.
    fn send(&mut self, e: Event) {
        self.send_nowait(e);
        if self.app.history_loading().is_some() {
            self.app.wait_for_history();
            self.draw();
        }
    }
    /// Handle `e` and draw one frame, whatever is still being read.
    fn send_nowait(&mut self, e: Event) {
        self.app.handle(e);
        self.draw();
    }
    fn key_nowait(&mut self, c: char) {
        self.send_nowait(Event::Key(KeyEvent::new(
            KeyCode::Char(c),
            KeyModifiers::NONE,
        )));
    }
    fn keys(&mut self, s: &str) {
        for c in s.chars() {
            self.send(Event::Key(KeyEvent::new(
                KeyCode::Char(c),
                KeyModifiers::NONE,
            )));
        }
    }
    fn code(&mut self, c: KeyCode) {
        self.send(Event::Key(KeyEvent::new(c, KeyModifiers::NONE)));
    }
    fn search(&mut self, q: &str) {
        self.keys("/");
        self.keys(q);
        self.code(KeyCode::Enter);
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
    fn assert_shows(&self, what: &[&str], ctx: &str) {
        let screen = self.screen();
        for w in what {
            assert!(screen.contains(w), "{ctx}: no {w:?} on screen:\n{screen}");
        }
        if let Some((m, true)) = &self.app.message {
            panic!("{ctx}: error in the status line: {m}\n{screen}");
        }
    }
    /// The style of the first cell of the screen line containing `text`.
    fn line_style(&self, text: &str) -> (Color, Modifier) {
        let buf = self.term.backend().buffer();
        let screen = self.screen();
        let y = screen
            .lines()
            .position(|l| l.contains(text))
            .unwrap_or_else(|| panic!("no line with {text:?}:\n{screen}"));
        let c = &buf[(0, y as u16)];
        (c.fg, c.modifier)
    }
}

#[test]
fn the_match_history_shows_every_wildcard_receive_at_every_size() {
    let r = recordings();
    for size in SIZES {
        let ctx = format!("history {size:?}");
        let mut ui = Ui::open(&r.heisenbug, size);
        ui.keys("5");
        assert_eq!(ui.app.tab, Tab::History);
        // Rank 0 received one message from each worker, every one with MPI_ANY_SOURCE.
        ui.assert_shows(
            &[
                "5 History",
                "rank 0: 3 receives matched, 3 with MPI_ANY_SOURCE (*)",
                "asked",
                "from",
                "ANY*",
                "j/k receive",
            ],
            &ctx,
        );
        let h = ui.app.data.history.clone().expect("a history");
        assert_eq!(h.entries.len(), RANKS as usize - 1, "{ctx}");
        let mut senders: Vec<u32> = h.entries.iter().map(|e| e.sender).collect();
        senders.sort();
        assert_eq!(senders, vec![1, 2, 3], "{ctx}: every worker once");
        assert!(h.entries.iter().all(|e| e.wildcard_source() && e.tag == 7));
        assert!(h.entries.windows(2).all(|w| w[0].slice <= w[1].slice));
        // Wildcard rows are highlighted (and the selected one reversed).
        let second = format!("2     {}", h.entries[1].slice);
        let (fg, m) = ui.line_style(&second);
        assert_eq!(fg, Color::Yellow, "{ctx}: a wildcard row is yellow");
        assert!(m.contains(Modifier::BOLD), "{ctx}");
        let (_, m) = ui.line_style(&format!("1     {}", h.entries[0].slice));
        assert!(m.contains(Modifier::REVERSED), "{ctx}: the selection");
        if size.0 >= 150 {
            ui.assert_shows(&["recv seq", "send seq"], &ctx);
        }

        // j selects the next receive; Enter opens its slice.
        ui.keys("j");
        ui.code(KeyCode::Enter);
        assert_eq!(ui.app.tab, Tab::Slice, "{ctx}");
        assert_eq!(ui.app.view.cursor, h.entries[1].slice, "{ctx}");
        ui.code(KeyCode::Esc);
        assert_eq!(ui.app.tab, Tab::History, "{ctx}");

        // l: the next rank; the workers received nothing.
        ui.keys("l");
        ui.assert_shows(
            &["rank 1: 0 receives matched", "received no point-to-point"],
            &ctx,
        );
    }
}

/// The History tab opens before the history is read: the loader here waits until the test
/// releases it, so a frame that waited for it would never show "loading". A load the user
/// moved away from (another rank) is dropped when it finishes.
#[test]
fn the_history_tab_opens_at_once_and_drops_a_stale_load() {
    let r = recordings();
    let mut ui = Ui::open(&r.heisenbug, (120, 40));
    let (release, released) = mpsc::channel::<()>();
    let released = Mutex::new(released);
    let read = file_loader(r.heisenbug.clone());
    let started = Arc::new(Mutex::new(Vec::new()));
    let seen = started.clone();
    ui.app.set_history_loader(Arc::new(move |rank| {
        seen.lock().unwrap().push(rank);
        // Bounded, so that a UI that waited for the loader fails the assertions below
        // instead of hanging the test.
        let _ = released
            .lock()
            .unwrap()
            .recv_timeout(Duration::from_secs(60));
        read(rank)
    }));

    ui.key_nowait('5');
    assert_eq!(ui.app.tab, Tab::History);
    ui.assert_shows(&["5 History", "loading history of rank 0…"], "first frame");
    assert!(!ui.screen().contains("receives matched"), "{}", ui.screen());
    assert_eq!(ui.app.history_loading(), Some(0));

    // l while rank 0 is still being read: rank 1 is read, rank 0's result is dropped.
    ui.key_nowait('l');
    ui.assert_shows(&["loading history of rank 1…"], "after l");
    release.send(()).unwrap();
    release.send(()).unwrap();
    assert!(ui.app.wait_for_history());
    ui.draw();
    ui.assert_shows(
        &["rank 1: 0 receives matched", "received no point-to-point"],
        "loaded",
    );
    assert_eq!(ui.app.data.history.as_ref().map(|h| h.rank), Some(1));
    let mut asked = started.lock().unwrap().clone();
    asked.sort();
    assert_eq!(asked, vec![0, 1], "one read per rank asked for");

    // Back to rank 0: read again, and shown once read.
    ui.key_nowait('h');
    ui.assert_shows(&["loading history of rank 0…"], "back to rank 0");
    release.send(()).unwrap();
    ui.app.wait_for_history();
    ui.draw();
    ui.assert_shows(
        &["rank 0: 3 receives matched, 3 with MPI_ANY_SOURCE (*)"],
        "rank 0 loaded",
    );
}

#[test]
fn a_ring_has_no_wildcards_and_h_l_walk_the_filtered_ranks() {
    let r = recordings();
    let mut ui = Ui::open(&r.ring, (120, 40));
    ui.keys("5");
    let h = ui.app.data.history.clone().expect("a history");
    assert!(!h.entries.is_empty());
    assert!(h.entries.iter().all(|e| !e.wildcard_source()));
    assert!(
        h.entries.iter().all(|e| e.sender == RANKS - 1),
        "rank 0 hears from its left neighbour only: {h:?}"
    );
    ui.assert_shows(&["with MPI_ANY_SOURCE (*)", "rank 0: "], "ring");
    assert!(!ui.screen().contains("ANY*"));

    // A filter: ranks 0 and 2 only; l goes 0 -> 2 -> 0.
    ui.search("ranks=0,2");
    ui.assert_shows(&["showing 2 of 4 ranks"], "filter");
    ui.keys("l");
    assert_eq!(ui.app.rank, 2);
    ui.assert_shows(&["rank 2: ", "2 ranks shown"], "filter");
    ui.keys("l");
    assert_eq!(ui.app.rank, 0);

    // The Timeline shows only those rows.
    ui.keys("2");
    let s = ui.screen();
    let labels: Vec<&str> = s
        .lines()
        .filter(|l| l.trim_start().starts_with("rank "))
        .collect();
    assert!(
        !labels.is_empty()
            && labels
                .iter()
                .all(|l| !l.contains("rank 1") && !l.contains("rank 3")),
        "the Timeline shows ranks 0 and 2 only:\n{s}"
    );
    ui.keys("j");
    assert_eq!(ui.app.rank, 2, "j skips the hidden rank 1");
    ui.search("ranks=all");
    ui.keys("j");
    assert_eq!(ui.app.rank, 3);

    // A bad filter says why, as an error.
    ui.search("ranks=9-7");
    assert!(matches!(&ui.app.message, Some((m, true)) if m.contains("not a rank set")));
}

#[test]
fn rank_and_call_search_together() {
    let r = recordings();
    for size in SIZES {
        let mut ui = Ui::open(&r.heisenbug, size);
        ui.keys("g");
        // Workers only send: rank 2 never calls MPI_Recv...
        ui.search("rank=2 call=MPI_Recv");
        assert!(
            matches!(&ui.app.message, Some((m, false)) if m.contains("rank 2 is in MPI_Recv")),
            "{size:?}: {:?}",
            ui.app.message
        );
        // ...but rank 0 does, and rank 2 sends.
        ui.search("rank=0 call=MPI_Recv");
        let first = ui.app.view.cursor;
        assert!(
            first > 1 || ui.app.message.is_none(),
            "{:?}",
            ui.app.message
        );
        assert_eq!(ui.app.rank, 0);
        ui.keys("g");
        ui.search("call=Send rank=2");
        assert_eq!(ui.app.rank, 2);
        assert!(ui.app.message.is_none(), "{size:?}: {:?}", ui.app.message);
        let rec = Recording::open(&r.heisenbug).unwrap();
        let descs = rec
            .descriptors(ui.app.view.cursor)
            .unwrap()
            .unwrap_or_default();
        assert!(
            descs.iter().any(|d| d.rank == 2 && d.kind.contains("Send")),
            "{size:?}: slice {} has rank 2's send: {descs:?}",
            ui.app.view.cursor
        );
        ui.search("rank=9 call=MPI_Recv");
        assert!(matches!(&ui.app.message, Some((m, true)) if m.contains("no rank 9")));
    }
}

#[test]
fn the_diff_mark_jumps_and_shows_the_difference() {
    let r = recordings();
    let h = Recording::open(&r.heisenbug)
        .unwrap()
        .match_history(0, 100)
        .unwrap()
        .unwrap();
    let slice = h.entries[0].slice;
    for size in SIZES {
        let mut ui = Ui::open(&r.heisenbug, size);
        ui.app.marks = Marks {
            diff: Some(DiffMark {
                other: "/tmp/other.db".into(),
                slice: Some(slice),
                text: "first difference: rank 0, 0#1 MPI_Recv peer=ANY\n  A ...\n  B ...".into(),
            }),
            explored: None,
        };
        ui.app.message = ui.app.marks.greeting().map(|g| (g, false));
        ui.draw();
        ui.assert_shows(
            &["first difference from other.db in slice"],
            &format!("{size:?}"),
        );
        ui.keys("m");
        assert_eq!(ui.app.view.cursor, slice);
        ui.assert_shows(
            &[
                "First difference from /tmp/other.db",
                "first difference: rank 0",
            ],
            &format!("{size:?} popup"),
        );
        ui.code(KeyCode::Esc);
        ui.keys("5");
        ui.assert_shows(&["<- first difference (m)"], &format!("{size:?} history"));
    }
    // Without --diff, m says how to get one.
    let mut ui = Ui::open(&r.heisenbug, (80, 24));
    ui.keys("m");
    assert!(matches!(&ui.app.message, Some((m, false)) if m.contains("--diff")));
}
