//! Issue 12, items 2 and 6: the TUI's wait-for graph was wrong both ways: `CYCLE 0 -> 1 -> 0` in
//! healthy slices of a ring (a send and its receive about to match), and no cycle for a
//! barrier-versus-receive deadlock the launcher reported. The Slice tab now shows the
//! runtime's analysis: never a cycle in a job that ended well, and the cycle of a
//! barrier-versus-receive deadlock, at 80x24, 120x40 and 200x60.

use std::path::Path;

use strobe_tests::record_fixture_into;
use strobe_tui::app::{Event, Tab};
use strobe_tui::ratatui::backend::TestBackend;
use strobe_tui::ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use strobe_tui::ratatui::Terminal;
use strobe_tui::terminal::draw;
use strobe_tui::{App, Recording, Theme};

const SIZES: [(u16, u16); 3] = [(80, 24), (120, 40), (200, 60)];

fn screen(term: &Terminal<TestBackend>) -> String {
    let buf = term.backend().buffer();
    let mut s = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            s.push_str(buf[(x, y)].symbol());
        }
        s.push('\n');
    }
    s
}

fn key(app: &mut App, term: &mut Terminal<TestBackend>, c: KeyCode) {
    app.handle(Event::Key(KeyEvent::new(c, KeyModifiers::NONE)));
    draw(term, app).unwrap();
}

#[test]
fn a_healthy_ring_never_shows_a_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let db = record_fixture_into(dir.path(), "token_ring", 3);
    let mut app = App::new(Recording::open(&db).unwrap(), Theme { color: false });
    assert_eq!(app.rec.job().outcome.as_deref(), Some("success"));
    let last = app.rec.last_slice();
    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap();
    draw(&mut term, &mut app).unwrap();
    key(&mut app, &mut term, KeyCode::Char('3'));
    key(&mut app, &mut term, KeyCode::Char('g'));
    assert_eq!(app.tab, Tab::Slice);
    let mut with_graph = 0;
    for s in 1..=last {
        assert_eq!(app.view.cursor, s);
        let text = screen(&term);
        assert!(
            !text.contains("CYCLE"),
            "slice {s} of a healthy ring shows a cycle:\n{text}"
        );
        if text.contains("wait-for graph") {
            with_graph += 1;
        }
        key(&mut app, &mut term, KeyCode::Char('l'));
    }
    assert!(
        with_graph > 0,
        "the ring's slices show their wait-for graph"
    );
}

/// Rank 0 receives from rank 1, which waits in a barrier for rank 0.
const BARRIER_VS_RECV: &str = r#"
#include <mpi.h>
int main(int argc, char **argv) {
    int rank, v = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        MPI_Recv(&v, 1, MPI_INT, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else
        MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
"#;

fn build(dir: &Path) -> std::path::PathBuf {
    let src = dir.join("barrier_vs_recv.c");
    std::fs::write(&src, BARRIER_VS_RECV).unwrap();
    let exe = dir.join("barrier_vs_recv");
    let out = std::process::Command::new(strobe_tests::strobe())
        .args(["mpicc", "-g", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    exe
}

#[test]
fn a_barrier_versus_receive_deadlock_shows_its_cycle_at_every_size() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path());
    let db = dir.path().join("bvr.db");
    let out = strobe_tests::tools::record_c(&db, &exe, 2, &[], &[]);
    assert_eq!(out.code, 3, "a deadlock: {}", out.stderr);
    assert!(
        out.stderr.contains("cycle"),
        "the launcher names the cycle: {}",
        out.stderr
    );
    for (w, h) in SIZES {
        let mut app = App::new(Recording::open(&db).unwrap(), Theme { color: false });
        let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
        draw(&mut term, &mut app).unwrap();
        key(&mut app, &mut term, KeyCode::Char('e'));
        key(&mut app, &mut term, KeyCode::Enter);
        assert_eq!(app.tab, Tab::Slice);
        // The detail scrolls on small terminals: look at every page.
        let mut seen = String::new();
        for _ in 0..40 {
            seen.push_str(&screen(&term));
            if seen.contains("CYCLE 0 -> 1 -> 0") {
                break;
            }
            key(&mut app, &mut term, KeyCode::Char('j'));
        }
        assert!(
            seen.contains("CYCLE 0 -> 1 -> 0"),
            "{w}x{h}: the Slice tab shows the barrier-versus-receive cycle:\n{seen}"
        );
    }
}

/// Issue 12, item 6: a C deadlock's Overview showed "rank 0 exited with 1" (the ranks
/// strobe stopped) instead of the deadlock report.
#[test]
fn a_c_deadlock_overview_shows_the_report_not_the_stopped_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let prog = strobe_tests::tools::build_c("deadlock", dir.path());
    let db = dir.path().join("dl.db");
    let out = strobe_tests::tools::record_c(&db, &prog, 3, &[], &[]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    for (w, h) in SIZES {
        let mut app = App::new(Recording::open(&db).unwrap(), Theme { color: false });
        let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
        draw(&mut term, &mut app).unwrap();
        let s = screen(&term);
        assert!(s.contains("outcome deadlock"), "{w}x{h}:\n{s}");
        assert!(s.contains("deadlock"), "{w}x{h}:\n{s}");
        assert!(
            s.contains("cycle"),
            "{w}x{h}: the report's cycle line:\n{s}"
        );
        assert!(!s.contains("exited with 1"), "{w}x{h}:\n{s}");
        assert!(!s.contains("signal 9"), "{w}x{h}:\n{s}");
    }
}
