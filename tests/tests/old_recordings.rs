//! The previous release's recording (`tests/data/v0.1-token_ring.db`: format 4, made
//! before `job.scheduler_version` existed, token_ring on 4 ranks) keeps working: it opens
//! in `strobe stats` (text and JSON), renders in the terminal UI, and `strobe replay`
//! verifies it. A recording of another scheduler version is refused before it runs.
//!
//! The file is only ever used through a copy in a temporary directory.

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use strobe_tests::fixture;
use strobe_tests::replay::{replay, strobe_cmd, Out};
use strobe_tui::ratatui::backend::TestBackend;
use strobe_tui::ratatui::Terminal;
use strobe_tui::terminal::draw;
use strobe_tui::{App, Theme};

/// A copy of the old recording, its working directory pointed at the temporary
/// directory (the recorded one is a path on the machine that made it).
fn old_recording() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/v0.1-token_ring.db");
    let db = dir.path().join("old.db");
    std::fs::copy(src, &db).unwrap();
    Connection::open(&db)
        .unwrap()
        .execute(
            "UPDATE job SET cwd = ?1",
            [dir.path().display().to_string()],
        )
        .unwrap();
    (dir, db)
}

/// `strobe replay` of the old recording with this build's token_ring (the recorded binary
/// is the previous release's build: same source, other bytes).
fn replay_old(db: &Path) -> Out {
    let prog = fixture("token_ring").display().to_string();
    replay(
        db,
        &["--program", &prog, "--allow-different-binary", "--yes"],
        &[],
    )
}

#[test]
fn strobe_stats_reads_the_old_recording() {
    let (_dir, db) = old_recording();
    let dbs = db.display().to_string();
    let s = strobe_cmd(&["stats", &dbs], &[]);
    assert_eq!(s.code, 0, "{}", s.stderr);
    for want in [
        "(format 4), content unverified (recorded before strobe kept a content checksum)",
        "4 ranks, 1 node",
        "outcome    success (exit status 0)",
        "229 slices (229 recorded)",
        "top slices by GETTS",
        "MMDS of the whole job, 4 ranks combined",
        "within 0.01%",
    ] {
        assert!(s.stdout.contains(want), "{want}:\n{}", s.stdout);
    }
    let s = strobe_cmd(&["stats", &dbs, "--json"], &[]);
    assert_eq!(s.code, 0, "{}", s.stderr);
    let j: serde_json::Value = serde_json::from_str(&s.stdout).unwrap();
    assert_eq!(j["format_version"], 4);
    assert!(j["content_checksum"]
        .as_str()
        .is_some_and(|c| c.starts_with("unverified")));
    assert_eq!(j["total_slices"], 229);
    assert_eq!(j["recorded_slices"], 229);
    assert_eq!(j["outcome"], "success");
    assert_eq!(j["getts"]["slices"], 228);
    assert_eq!(j["mmds_ranks"].as_array().map(Vec::len), Some(4));
    assert_eq!(j["mmds"]["primitives"][0]["primitive"], "MPI_Recv");
    assert_eq!(j["accurate"], true);
}

#[test]
fn the_terminal_ui_renders_the_old_recording() {
    let (_dir, db) = old_recording();
    let rec = strobe_tui::data::open(&db).unwrap();
    let mut app = App::new(rec, Theme { color: false });
    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap();
    let screen = |term: &Terminal<TestBackend>| {
        let buf = term.backend().buffer();
        let mut s = String::new();
        for y in 0..buf.area.height {
            for x in 0..buf.area.width {
                s.push_str(buf[(x, y)].symbol());
            }
            s.push('\n');
        }
        s
    };
    draw(&mut term, &mut app).unwrap();
    let overview = screen(&term);
    for want in ["token_ring", "outcome success", "229 slices", "GETTS"] {
        assert!(overview.contains(want), "{want}:\n{overview}");
    }
    // The slice view of the first slice that scheduled a collective shows its decisions
    // (decoded from the recording's decision-set blobs).
    use strobe_tui::app::Event;
    use strobe_tui::ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    for c in [']', '3'] {
        app.handle(Event::Key(KeyEvent::new(
            KeyCode::Char(c),
            KeyModifiers::NONE,
        )));
        draw(&mut term, &mut app).unwrap();
    }
    let detail = screen(&term);
    assert!(detail.contains("MPI_Barrier"), "{detail}");
    let after_heading = detail
        .lines()
        .skip_while(|l| !l.contains("decisions: matches"))
        .nth(1)
        .unwrap_or_default();
    assert!(
        !after_heading.trim().is_empty() && after_heading.trim() != "none",
        "no decisions shown:\n{detail}"
    );
    if let Some((m, true)) = &app.message {
        panic!("error in the status line: {m}\n{detail}");
    }
}

#[test]
fn strobe_replay_verifies_the_old_recording() {
    let (_dir, db) = old_recording();
    let r = replay_old(&db);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("replay matched the recording: 229 slices verified"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("content is unverified"), "{}", r.stderr);
    // Made on one host before `job.transport` existed: it ran over shm, as this replay
    // does, so no note about another transport.
    assert!(!r.stderr.contains("the recording ran over"), "{}", r.stderr);
}

#[test]
fn a_recording_of_another_scheduler_version_is_refused() {
    let (_dir, db) = old_recording();
    // Bring the copy to the current format (adds job.scheduler_version, 1 for old files),
    // then claim another scheduler made it.
    let mut c = Connection::open(&db).unwrap();
    strobe_recorder::migrations::migrate(&mut c).unwrap();
    let v: u32 = c
        .query_row("SELECT scheduler_version FROM job", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, 1, "files made before the column existed are version 1");
    // A version newer than this strobe's (strobe-perf: version 2 is the eager protocol,
    // which this strobe runs; version-1 files replay with it off).
    let newer = strobe_core::sched::SCHEDULER_VERSION + 1;
    c.execute("UPDATE job SET scheduler_version = ?1", [newer])
        .unwrap();
    drop(c);
    let r = replay_old(&db);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let running = strobe_core::sched::SCHEDULER_VERSION;
    assert!(
        r.stderr.contains(&format!("scheduler version {newer}"))
            && r.stderr.contains(&format!("scheduler version {running}")),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("DIVERGED"), "{}", r.stderr);
}
