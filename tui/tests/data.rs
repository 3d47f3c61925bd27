//! The data layer on synthetic recordings: summaries agree with the slices they
//! summarize, a growing recording is followed, bad files are refused clearly.

use std::time::Duration;

use rusqlite::{params, Connection};
use strobe_tui::app::{App, Event};
use strobe_tui::data::{Notable, Recording};
use strobe_tui::feed::{Feed, FeedEvent, FollowFile};
use strobe_tui::keys::Action;
use strobe_tui::ratatui::layout::Rect;
use strobe_tui::synthetic;
use strobe_tui::Theme;

fn synthetic(slices: u64, ranks: u32, nodes: u32) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("synthetic.db");
    synthetic::generate(&path, slices, ranks, nodes).unwrap();
    (dir, path)
}

#[test]
fn summaries_give_the_same_columns_as_the_slices() {
    let (_dir, path) = synthetic(60_000, 8, 2);
    let mut rec = Recording::open(&path).unwrap();
    assert!(rec.has_summaries(), "the recorder's migration creates them");
    for (first, per_col, cols) in [
        (1, 64, 100),
        (1 + 64 * 7, 128, 50),
        (1, 4096, 15),
        (4097, 8192, 7),
    ] {
        let summarized = rec.columns(first, per_col, cols).unwrap();
        rec.use_summaries(false);
        let scanned = rec.columns(first, per_col, cols).unwrap();
        rec.use_summaries(true);
        assert_eq!(summarized, scanned, "first {first}, {per_col} per column");
        // The spike every 50,000 slices is in the column that covers it.
        if first == 1 && per_col == 4096 {
            let c = (50_000 - 1) / 4096;
            assert!(summarized[c].getts_ns.unwrap().1 > 4_000_000);
        }
    }
    // Unaligned columns fall back to the slices and still see everything.
    let cols = rec.columns(3, 64, 10).unwrap();
    assert!(cols
        .iter()
        .all(|c| c.getts_ns.is_some() && c.ncolldem.is_some()));
}

#[test]
fn notable_slices_and_the_deadlock() {
    let (_dir, path) = synthetic(1_000, 8, 1);
    let rec = Recording::open(&path).unwrap();
    assert_eq!(rec.notable(Notable::Collective, 1, true).unwrap(), Some(97));
    assert_eq!(
        rec.notable(Notable::Collective, 97, true).unwrap(),
        Some(194)
    );
    assert_eq!(rec.notable(Notable::Collective, 97, false).unwrap(), None);
    // The synthetic deadlock starts 25 slices before the end.
    assert_eq!(rec.trouble_slice().unwrap(), Some(975));
    let d = rec.slice_detail(990).unwrap();
    let ranks: Vec<u32> = d.blocked.iter().map(|b| b.rank).collect();
    assert_eq!(ranks, vec![0, 1]);
    assert_eq!(d.blocked[0].waits_on.as_ref().unwrap().peer, 1);
    // Slice 3 is the first where rank 5 (5 % 4 == 1: MPI_Barrier) is in the rotation.
    assert_eq!(rec.search_call("%Barrier%", 1, true).unwrap(), Some(3));
    let grid = rec.blocked_grid(1, 64, 16).unwrap();
    assert!(grid.calls.contains(&"MPI_Recv".to_string()));
    assert!(grid.cells[0].iter().any(|c| c.is_some()));
}

#[test]
fn a_growing_recording_is_followed() {
    let (_dir, path) = synthetic(200, 4, 1);
    let writer = Connection::open(&path).unwrap();
    writer
        // A recording still being written: no outcome, and so no end or message either
        // (the recorder writes them together; one without the other is damage).
        .execute_batch(
            "PRAGMA journal_mode = WAL;
             UPDATE job SET outcome = NULL, message = NULL, ended_at = NULL",
        )
        .unwrap();
    let rec = Recording::open(&path).unwrap();
    assert!(!rec.finished());
    let mut feed = FollowFile::new(&rec, Duration::ZERO);
    // The UI on it, zoomed all the way out with the cursor on the last slice.
    let mut app = App::new(rec, Theme { color: false });
    let area = Rect::new(0, 0, 100, 30);
    app.prepare(area);
    app.act(Action::Last);
    app.prepare(area);
    assert_eq!((app.view.first, app.view.cursor), (1, 200));
    let rec = &mut app.rec;
    assert_eq!(feed.mode(), "follow");
    assert_eq!(feed.poll(rec).unwrap(), vec![]);
    writer
        .execute(
            "INSERT INTO slice SELECT slice + 200, reason, start_ns, getts_ns, gtdem_ns, gtmsm_ns,
                gtts_ns, usrsts, usrdem, usrmsm, n_descriptors, n_matches, n_chunks,
                n_collectives, n_completions, n_blocked, digest FROM slice WHERE slice > 1",
            [],
        )
        .unwrap();
    let events = feed.poll(rec).unwrap();
    assert_eq!(events, vec![FeedEvent::Grew { slices: 400 }]);
    // Like tail -f: the view still shows everything and the cursor is still on the end.
    for e in events {
        app.handle(Event::Feed(e));
    }
    app.prepare(area);
    let end = app.view.slice_at(app.cols) - 1;
    assert_eq!((app.view.first, app.view.cursor), (1, 400));
    assert!(end >= 400, "the view ends at {end}");
    let rec = &mut app.rec;
    writer
        .execute("UPDATE job SET outcome = ?1", params!["success"])
        .unwrap();
    assert_eq!(
        feed.poll(rec).unwrap(),
        vec![FeedEvent::Finished {
            outcome: "success".into()
        }]
    );
    assert_eq!(feed.mode(), "browse");
}

#[test]
fn files_that_are_not_recordings_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "hello, this is not SQLite\n".repeat(10)).unwrap();
    let e = Recording::open(&text).err().unwrap().to_string();
    assert!(e.contains("not an SQLite database"), "{e}");

    let foreign = dir.path().join("other.db");
    Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
        .unwrap();
    let e = Recording::open(&foreign).err().unwrap().to_string();
    assert!(e.contains("without a strobe schema"), "{e}");

    let (_d, good) = synthetic(300, 4, 1);
    let bytes = std::fs::read(&good).unwrap();
    let cut = dir.path().join("cut.db");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let e = Recording::open(&cut).err().unwrap().to_string();
    assert!(e.contains("truncated"), "{e}");

    let missing = dir.path().join("missing.db");
    let e = Recording::open(&missing).err().unwrap().to_string();
    assert!(e.contains("missing.db"), "{e}");
}
