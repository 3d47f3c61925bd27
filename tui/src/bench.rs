//! `strobe bench tui`: time to the first frame and per key press on a synthetic recording
//! (see [`crate::synthetic`]), rendered to ratatui's `TestBackend` so the terminal's own
//! speed does not enter the numbers. Each key press is measured as the user feels it:
//! the action, the queries it triggers and the frame.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;

use crate::app::{App, Event};
use crate::data::DataError;
use crate::terminal::draw;
use crate::theme::Theme;
use strobe_runtime::sched::Decision;

/// One scripted key press, named for the report.
struct Step {
    name: &'static str,
    key: KeyEvent,
    times: usize,
}

fn key(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

/// The script: zoom into the middle, pan, page, zoom out, then the same on the Timeline.
fn script() -> Vec<Step> {
    let ctrl_d = KeyEvent::new(KeyCode::Char('d'), KeyModifiers::CONTROL);
    vec![
        Step {
            name: "overview: zoom in (+)",
            key: key(KeyCode::Char('+')),
            times: 14,
        },
        Step {
            name: "overview: pan right (l)",
            key: key(KeyCode::Char('l')),
            times: 30,
        },
        Step {
            name: "overview: half page (Ctrl-d)",
            key: ctrl_d,
            times: 10,
        },
        Step {
            name: "overview: zoom out (-)",
            key: key(KeyCode::Char('-')),
            times: 14,
        },
        Step {
            name: "overview: pan right zoomed out (l)",
            key: key(KeyCode::Char('l')),
            times: 20,
        },
        Step {
            name: "timeline: open (2)",
            key: key(KeyCode::Char('2')),
            times: 1,
        },
        Step {
            name: "timeline: pan right (l)",
            key: key(KeyCode::Char('l')),
            times: 20,
        },
        Step {
            name: "timeline: zoom in (+)",
            key: key(KeyCode::Char('+')),
            times: 14,
        },
        Step {
            name: "timeline: pan right (l)",
            key: key(KeyCode::Char('l')),
            times: 20,
        },
        Step {
            name: "timeline: zoom out (-)",
            key: key(KeyCode::Char('-')),
            times: 14,
        },
        Step {
            name: "slice detail: open (Enter)",
            key: key(KeyCode::Enter),
            times: 1,
        },
        Step {
            name: "slice detail: next slice (l)",
            key: key(KeyCode::Char('l')),
            times: 20,
        },
    ]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Measure on the recording at `path` (made with [`crate::synthetic::generate`]) at a
/// `width` x `height` terminal; returns a Markdown report.
pub fn measure(path: &Path, width: u16, height: u16) -> Result<String, DataError> {
    let mut out = String::new();
    let t = Instant::now();
    let rec = crate::data::open(path)?;
    let opened = t.elapsed();
    let slices = rec.last_slice();
    let ranks = rec.job().ranks;
    let mut app = App::new(rec, Theme { color: true });
    let mut term = Terminal::new(TestBackend::new(width, height)).expect("test backend");
    draw(&mut term, &mut app).expect("test backend draws");
    let first = t.elapsed();
    if let Some((m, true)) = &app.message {
        return Err(DataError::Corrupt(m.clone()));
    }
    writeln!(
        out,
        "{slices} slices, {ranks} ranks, {} MB, {width}x{height} terminal\n",
        std::fs::metadata(path).map(|m| m.len() >> 20).unwrap_or(0)
    )
    .ok();
    writeln!(out, "| what | presses | median ms | max ms |").ok();
    writeln!(out, "|---|---:|---:|---:|").ok();
    writeln!(
        out,
        "| open the recording | 1 | {:.1} | {:.1} |",
        ms(opened),
        ms(opened)
    )
    .ok();
    writeln!(
        out,
        "| **first frame** (open, query, render) | 1 | {:.1} | {:.1} |",
        ms(first),
        ms(first)
    )
    .ok();
    let mut worst = Duration::ZERO;
    for step in script() {
        let mut times = Vec::with_capacity(step.times);
        for _ in 0..step.times {
            let t = Instant::now();
            app.handle(Event::Key(step.key));
            draw(&mut term, &mut app).expect("test backend draws");
            times.push(t.elapsed());
        }
        times.sort();
        let max = *times.last().unwrap_or(&Duration::ZERO);
        worst = worst.max(max);
        writeln!(
            out,
            "| {} | {} | {:.1} | {:.1} |",
            step.name,
            step.times,
            ms(times[times.len() / 2]),
            ms(max)
        )
        .ok();
        if let Some((m, true)) = &app.message {
            writeln!(out, "\nerror during `{}`: {m}", step.name).ok();
        }
    }
    writeln!(
        out,
        "\nfirst frame {:.0} ms (target < 300 ms), slowest key {:.1} ms (target < 50 ms)",
        ms(first),
        ms(worst)
    )
    .ok();
    Ok(out)
}

/// `strobe bench history`: the History tab of `rank` on the recording at `path`, as the
/// user feels it: the frame after pressing `5` (the tab opens before the history is
/// read, [`crate::history_load`]), then the time until the history is on screen. With
/// `baseline`, also the pass the former implementation made: decode every slice's
/// decision-set blob and keep the rank's matches. Returns a Markdown report.
pub fn measure_history(
    path: &Path,
    rank: u32,
    width: u16,
    height: u16,
    baseline: bool,
) -> Result<String, DataError> {
    let rec = crate::data::open(path)?;
    let (slices, ranks) = (rec.last_slice(), rec.job().ranks);
    let mut app = App::new(rec, Theme { color: true });
    let mut term = Terminal::new(TestBackend::new(width, height)).expect("test backend");
    draw(&mut term, &mut app).expect("test backend draws");
    app.rank = rank.min(ranks.saturating_sub(1));
    let t = Instant::now();
    app.handle(Event::Key(key(KeyCode::Char('5'))));
    draw(&mut term, &mut app).expect("test backend draws");
    let first = t.elapsed();
    app.wait_for_history();
    draw(&mut term, &mut app).expect("test backend draws");
    let loaded = t.elapsed();
    if let Some((m, true)) = &app.message {
        return Err(DataError::Corrupt(m.clone()));
    }
    let matches = app.data.history.as_ref().map_or(0, |h| h.entries.len());
    let mut out = String::new();
    writeln!(
        out,
        "{slices} slices, {ranks} ranks, {} MB, {width}x{height} terminal, rank {}: {matches} matched receives\n",
        std::fs::metadata(path).map(|m| m.len() >> 20).unwrap_or(0),
        app.rank
    )
    .ok();
    writeln!(out, "| what | ms |").ok();
    writeln!(out, "|---|---:|").ok();
    writeln!(
        out,
        "| history: first frame after `5` (\"loading…\") | {:.1} |",
        ms(first)
    )
    .ok();
    writeln!(out, "| history: read and drawn | {:.1} |", ms(loaded)).ok();
    if baseline {
        let t = Instant::now();
        let mut found = 0usize;
        for slice in 1..=slices {
            for d in app.rec.decisions(slice)?.unwrap_or_default() {
                if matches!(d, Decision::Match(m) if m.recv.rank == app.rank) {
                    found += 1;
                }
            }
        }
        writeln!(
            out,
            "| former method: decode every decision-set blob ({found} matches) | {:.1} |",
            ms(t.elapsed())
        )
        .ok();
    }
    Ok(out)
}
