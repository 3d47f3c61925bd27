//! The "scale" section (issue 14): `strobe record -n N -- token_ring` with every layer on,
//! at 64, 256 and 1,000 ranks on one host (oversubscribed): record/run wall-time ratio,
//! file size, `strobe stats` time and the terminal UI's first frame. `--quick` (the CI
//! smoke test) runs it at 4 and 8 ranks.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::report::{cell, ratio, ratio_value, Summary, Table, Target};
use super::runner::{Config, Launch, Samples};
use super::{Ctx, Doc};

const RUN: &str = "scale-run";
const RECORD: &str = "scale-record";

/// Wall time of `strobe stats FILE` (output discarded).
fn stats_time(strobe: &Path, db: &Path) -> Result<Duration> {
    let t = Instant::now();
    let out = std::process::Command::new(strobe)
        .arg("stats")
        .arg(db)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
        .context("cannot start strobe stats")?;
    let took = t.elapsed();
    anyhow::ensure!(
        out.status.success(),
        "strobe stats failed: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(took)
}

/// Open the recording in the terminal UI (an off-screen 160x48 terminal) and draw the
/// first frame, as `strobe tui FILE` does before it reads a key.
fn first_frame(db: &Path) -> Result<Duration> {
    use strobe_tui::ratatui::{backend::TestBackend, Terminal};
    let t = Instant::now();
    let rec = strobe_tui::data::open(db).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut app = strobe_tui::App::new(rec, strobe_tui::Theme { color: true });
    let mut term = Terminal::new(TestBackend::new(160, 48))?;
    strobe_tui::terminal::draw(&mut term, &mut app)?;
    Ok(t.elapsed())
}

fn timed(n: usize, mut f: impl FnMut() -> Result<Duration>) -> Result<Option<Summary>> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(f()?.as_secs_f64());
    }
    Ok(Summary::of(&v))
}

fn wall(s: &Samples, label: &str) -> Option<Summary> {
    let v: Vec<f64> = s
        .runs
        .get(label)?
        .iter()
        .map(|r| r.wall.as_secs_f64())
        .collect();
    Summary::of(&v)
}

pub fn scale(ctx: &Ctx, doc: &mut Doc) -> Result<()> {
    let sizes: &[u32] = if ctx.quick { &[4, 8] } else { &[64, 256, 1000] };
    let _ = writeln!(
        doc.body,
        "## Scale: token_ring recorded with everything on\n\n`strobe record -n N -- \
         token_ring` (50 laps of a token, a barrier every 10) against `strobe run`, all \
         ranks on this host; the file is the finished recording, `strobe stats` is timed as \
         a whole command, the first frame is the terminal UI opening the file and drawing \
         160x48 cells off-screen.\n"
    );
    let program = crate::paths::sibling("token_ring")?;
    let cfgs = [
        Config {
            label: RUN.into(),
            launch: Launch::StrobeRun(vec![]),
            program: program.clone(),
        },
        Config {
            label: RECORD.into(),
            launch: Launch::StrobeRecord(vec![]),
            program,
        },
    ];
    let mut t = Table::new(&[
        "ranks",
        "run (s)",
        "record (s)",
        "record / run",
        "file (MB)",
        "strobe stats (s)",
        "TUI first frame (ms)",
    ]);
    // Few rounds: a 1,000-rank round takes tens of seconds on two cores.
    let rounds = ctx.rounds.min(3);
    for &n in sizes {
        let s = ctx.runner.alternate(&cfgs, n, &[], rounds);
        super::sections::note_run(doc, &format!("scale n={n}"), &s);
        let (run, rec) = (wall(&s, RUN), wall(&s, RECORD));
        let db = ctx.runner.recording(RECORD);
        let mb = s
            .runs
            .get(RECORD)
            .and_then(|r| r.last())
            .and_then(|r| r.recording_bytes)
            .map(|b| b as f64 / 1e6);
        let (stats, frame) = if rec.is_some() {
            (
                timed(3, || stats_time(&ctx.runner.strobe, &db))?,
                timed(3, || first_frame(&db))?,
            )
        } else {
            (None, None)
        };
        let frame_ms = frame.map(|f| Summary {
            median: f.median * 1e3,
            min: f.min * 1e3,
            max: f.max * 1e3,
            n: f.n,
        });
        t.row(vec![
            n.to_string(),
            cell(run),
            cell(rec),
            ratio(rec, run),
            mb.map_or("—".into(), |m| format!("{m:.1}")),
            cell(stats),
            cell(frame_ms),
        ]);
        doc.commands
            .push(format!("strobe stats {}    # scale n={n}", db.display()));
        if n == 1000 {
            let r = ratio_value(rec, run);
            let targets = [
                ("record / run wall time", "<= 1.2", r, 1.2, 3),
                ("file size (MB)", "<= 50", mb, 50.0, 1),
                ("strobe stats (s)", "<= 2", stats.map(|s| s.median), 2.0, 2),
                (
                    "TUI first frame (ms)",
                    "<= 300",
                    frame_ms.map(|f| f.median),
                    300.0,
                    0,
                ),
            ];
            for (what, goal, v, max, digits) in targets {
                doc.targets.push(Target {
                    what: format!("token_ring -n 1000 recorded, {what}"),
                    goal: goal.into(),
                    measured: v.map_or("—".into(), |x| format!("{x:.digits$}")),
                    met: v.map(|x| x <= max),
                });
            }
        }
    }
    let _ = writeln!(doc.body, "{}", t.render());
    Ok(())
}
