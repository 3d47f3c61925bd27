//! Overview: the job, and three aligned charts over the slice axis with one cursor:
//! GETTS (000_... Figure 5.3), NCOLL processed in DEM and scheduled in MSM (Figures 5.4,
//! 5.5), and NP2P descriptors processed in DEM and operations scheduled in MSM.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::chart::{self, Series};
use super::{dur, GUTTER, WIDE};
use crate::app::App;
use crate::data::Column;

/// Width of the job panel on wide terminals, at least.
const JOB_PANEL: u16 = 44;

/// The job panel on wide terminals: wide enough for the job's report (a deadlock report's
/// lines run to ~90 columns and were wrapped into 44: issue 12, item 6), up to half the
/// width.
fn job_panel(body: Rect, app: &App) -> u16 {
    let longest = report_lines(app)
        .iter()
        .map(|l| l.chars().count() as u16 + 2)
        .max()
        .unwrap_or(0);
    longest.clamp(JOB_PANEL, (body.width / 2).max(JOB_PANEL))
}

/// Lines of job information above the charts on narrow terminals: the job, its outcome,
/// and (when it failed) two lines of its report.
fn job_lines_narrow(body: Rect, app: &App) -> u16 {
    let trouble = if report_lines(app).is_empty() { 0 } else { 2 };
    let checks = check_lines(app, false).len() as u16;
    if body.height >= 30 && trouble == 0 {
        5
    } else {
        3 + trouble + checks
    }
}

/// The job's report (the deadlock report, the failing rank): what went wrong, not the
/// ranks strobe itself stopped afterwards. Those exits (SIGKILL, or a blocked rank told
/// to leave) are consequences, listed only for a failed rank's job and never as SIGKILL.
fn report_lines(app: &App) -> Vec<String> {
    let j = app.rec.job();
    let mut out: Vec<String> = j
        .message
        .iter()
        .flat_map(|m| m.lines())
        .map(str::to_string)
        .collect();
    if j.outcome.as_deref() == Some("rank_failed") {
        for f in &j.failed_ranks {
            if f.signal == Some(9) {
                continue;
            }
            let line = format!("rank {} {}", f.rank, crate::data::failed_rank_text(f));
            if !out
                .iter()
                .any(|l| l.starts_with(&format!("rank {} ", f.rank)))
            {
                out.push(line);
            }
        }
    }
    out
}

/// The report in two lines for narrow terminals: its first line, and the wait-for cycle
/// (or its second line); the whole report is in the wide layout and the Slice tab.
fn report_summary(app: &App) -> Vec<String> {
    let all = report_lines(app);
    let mut out: Vec<String> = all.first().cloned().into_iter().collect();
    let second = all
        .iter()
        .find(|l| l.contains("wait-for cycle") || l.contains("no wait-for cycle"))
        .or_else(|| all.get(1));
    if let Some(l) = second {
        out.push(format!("{} (e: trouble slice)", l.trim()));
    }
    out
}

/// The part of the body the charts (and the slice axis) use.
pub fn charts_area(body: Rect, app: &App) -> Rect {
    if body.width >= WIDE {
        Rect {
            width: body.width - job_panel(body, app),
            ..body
        }
    } else {
        let top = job_lines_narrow(body, app).min(body.height);
        Rect {
            y: body.y + top,
            height: body.height - top,
            ..body
        }
    }
}

pub fn render(buf: &mut Buffer, body: Rect, app: &App) {
    let charts = charts_area(body, app);
    let job = if body.width >= WIDE {
        Rect {
            x: charts.right() + 1,
            width: job_panel(body, app) - 1,
            ..body
        }
    } else {
        Rect {
            height: charts.y - body.y,
            ..body
        }
    };
    render_job(buf, job, app, body.width >= WIDE);
    render_charts(buf, charts, app);
}

fn outcome_line(app: &App) -> Line<'static> {
    let t = &app.theme;
    let j = app.rec.job();
    let mut spans = vec![Span::raw("outcome ")];
    match &j.outcome {
        Some(o) if o == "success" => spans.push(Span::styled(o.clone(), t.good())),
        // In words, as `strobe stats` prints it (the stored name is `rank_failed`).
        Some(o) => spans.push(Span::styled(
            match o.as_str() {
                "rank_failed" => "a rank failed".to_string(),
                "engine_failed" => "runtime failure".to_string(),
                other => other.to_string(),
            },
            t.bad(),
        )),
        None => spans.push(Span::styled("still recording (or cut short)", t.dim())),
    }
    if let Some(e) = j.exit_status {
        spans.push(Span::raw(format!(" (exit {e})")));
    }
    if let Some(ns) = j.elapsed_ns {
        spans.push(Span::raw(format!(" after {}", dur(ns))));
    }
    spans.push(Span::raw(format!(", {} slices", app.rec.last_slice())));
    Line::from(spans)
}

fn render_job(buf: &mut Buffer, area: Rect, app: &App, wide: bool) {
    let t = &app.theme;
    let j = app.rec.job();
    let mut lines = vec![
        Line::from(vec![
            Span::styled("job ", t.title()),
            Span::raw(j.command.join(" ")),
        ]),
        Line::from(format!(
            "{} ranks, {} node{}, {} slices, {} strobe",
            j.ranks,
            j.nodes,
            if j.nodes == 1 { "" } else { "s" },
            dur(j.slice_ns as i64),
            j.policy
        )),
        outcome_line(app),
    ];
    let trouble: Vec<Line> = if wide {
        report_lines(app)
    } else {
        report_summary(app)
    }
    .into_iter()
    .map(|l| Line::from(Span::styled(l, t.bad())))
    .collect();
    let checks = check_lines(app, wide);
    if wide {
        lines.push(Line::from(""));
        lines.extend(trouble);
        lines.extend(checks);
        lines.push(Line::from(""));
        lines.push(Line::from(Span::styled("at the cursor", t.title())));
        lines.extend(cursor_lines(app));
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .render(area, buf);
    } else {
        // Narrow: the first trouble line replaces nothing; it follows the outcome.
        let room = area.height as usize;
        lines.extend(trouble);
        lines.extend(checks);
        lines.truncate(room);
        Paragraph::new(lines).render(area, buf);
    }
}

/// The correctness checks' findings (`strobe stats` has them in full): in the wide
/// layout a "checks" list, one line each (kind, rank, call, its source line when known, slice); in the narrow one a
/// count. Read at each draw: the table holds a handful of rows.
/// Also what `strobe explore` forced to get this recording, when it made it: one line.
fn check_lines(app: &App, wide: bool) -> Vec<Line<'static>> {
    let t = &app.theme;
    let mut out = explored_lines(app, wide);
    let found = match app.rec.checks() {
        Ok(Some(f)) if !f.is_empty() => f,
        _ => return out,
    };
    if !wide {
        out.push(Line::from(Span::styled(
            format!(
                "checks: {} finding(s) (strobe stats lists them)",
                found.len()
            ),
            t.bad(),
        )));
        return out;
    }
    out.extend([
        Line::from(""),
        Line::from(Span::styled("checks", t.title())),
    ]);
    out.extend(found.iter().map(|f| {
        let at = f
            .call_site
            .as_ref()
            .map_or_else(String::new, |s| format!(" at {s}"));
        Line::from(Span::styled(
            format!(
                "{}: rank {} {}{at} (slice {})",
                f.kind, f.rank, f.call, f.slice
            ),
            t.bad(),
        ))
    }));
    out
}

/// The alternative `strobe explore -o` forced (the `explored` table): the whole line in
/// the wide layout, its slice in the narrow one (`strobe stats` has it in full).
fn explored_lines(app: &App, wide: bool) -> Vec<Line<'static>> {
    let Some(e) = &app.marks.explored else {
        return Vec::new();
    };
    let t = &app.theme;
    let at = e
        .slice
        .map_or_else(String::new, |s| format!(" in slice {s}"));
    if !wide {
        return vec![Line::from(Span::styled(
            format!("explored: forced{at} (strobe stats says what)"),
            t.bad(),
        ))];
    }
    vec![
        Line::from(""),
        Line::from(Span::styled("explored", t.title())),
        Line::from(Span::styled(e.to_string(), t.bad())),
    ]
}

/// A duration for the chart's gutter (8 columns): the unit is never cut off (the GETTS
/// axis read "2953.5 u": issue 12, item 7); decimals go first.
pub fn axis_dur(ns: i64) -> String {
    let full = dur(ns);
    let room = GUTTER as usize - 1;
    if full.chars().count() <= room {
        return full;
    }
    let (num, unit) = full.split_once(' ').unwrap_or((&full, ""));
    let whole = num.split('.').next().unwrap_or(num);
    format!("{whole} {unit}")
}

/// The values of the column under the cursor.
fn cursor_lines(app: &App) -> Vec<Line<'static>> {
    let v = &app.view;
    let c = v.cursor_col();
    let Some(col) = app.data.columns.get(c) else {
        return Vec::new();
    };
    let range = |p: Option<(i64, i64)>, f: &dyn Fn(i64) -> String| match p {
        None => "-".to_string(),
        Some((a, b)) if a == b => f(a),
        Some((a, b)) => format!("{} .. {}", f(a), f(b)),
    };
    let n = |x: i64| x.to_string();
    debug_assert!(axis_dur(2_953_500).ends_with("ms"));
    let mut out = vec![Line::from(format!(
        "slices {}-{}",
        v.slice_at(c),
        v.slice_at(c + 1) - 1
    ))];
    out.push(Line::from(format!(
        "GETTS     {}",
        range(col.getts_ns, &dur)
    )));
    out.push(Line::from(format!("NCOLLDEM  {}", range(col.ncolldem, &n))));
    out.push(Line::from(format!("NCOLLMSM  {}", range(col.ncollmsm, &n))));
    out.push(Line::from(format!("NP2PDEM   {}", range(col.np2pdem, &n))));
    out.push(Line::from(format!("NP2PMSM   {}", range(col.np2pmsm, &n))));
    out
}

fn render_charts(buf: &mut Buffer, area: Rect, app: &App) {
    let t = &app.theme;
    let cols = &app.data.columns;
    let pick = |f: fn(&Column) -> Option<(i64, i64)>| cols.iter().map(f).collect::<Vec<_>>();
    let getts = pick(|c| c.getts_ns);
    let cdem = pick(|c| c.ncolldem);
    let cmsm = pick(|c| c.ncollmsm);
    let pdem = pick(|c| c.np2pdem);
    let pmsm = pick(|c| c.np2pmsm);
    // Three charts, each a title line and a plot, then the slice axis.
    let [g, c, p, axis] = Layout::vertical([
        Constraint::Ratio(1, 3),
        Constraint::Ratio(1, 3),
        Constraint::Ratio(1, 3),
        Constraint::Length(1),
    ])
    .areas(area);
    let cursor = Some(app.view.cursor_col());
    let titled = |buf: &mut Buffer, a: Rect, title: Line| -> Rect {
        if a.height == 0 {
            return a;
        }
        buf.set_line(a.x, a.y, &title, a.width);
        Rect {
            y: a.y + 1,
            height: a.height.saturating_sub(1),
            ..a
        }
    };
    let top = chart::top_of(&getts);
    let plot = titled(
        buf,
        g,
        Line::from(vec![
            Span::styled("GETTS", t.title()),
            Span::raw(" elapsed time per slice (min│max per column)"),
        ]),
    );
    let s = [Series {
        points: &getts,
        style: t.series(0),
    }];
    chart::draw(buf, plot, &s, top, &axis_dur(top), cursor, t.cursor());

    let top = chart::top_of(&cdem).max(chart::top_of(&cmsm));
    let plot = titled(
        buf,
        c,
        Line::from(vec![
            Span::styled("NCOLL", t.title()),
            Span::raw(" per node"),
            Span::styled(" ▌processed (DEM)", t.series(1)),
            Span::styled(" ▐scheduled (MSM)", t.series(2)),
        ]),
    );
    let s = [
        Series {
            points: &cdem,
            style: t.series(1),
        },
        Series {
            points: &cmsm,
            style: t.series(2),
        },
    ];
    chart::draw(buf, plot, &s, top, &top.to_string(), cursor, t.cursor());

    let top = chart::top_of(&pdem).max(chart::top_of(&pmsm));
    let plot = titled(
        buf,
        p,
        Line::from(vec![
            Span::styled("NP2P", t.title()),
            Span::raw(" per node"),
            Span::styled(" ▌descriptors (DEM)", t.series(3)),
            Span::styled(" ▐scheduled ops (MSM)", t.series(0)),
        ]),
    );
    let s = [
        Series {
            points: &pdem,
            style: t.series(3),
        },
        Series {
            points: &pmsm,
            style: t.series(0),
        },
    ];
    chart::draw(buf, plot, &s, top, &top.to_string(), cursor, t.cursor());
    render_axis(buf, axis, app, GUTTER);
}

/// `slice` at the gutter, then the first slice, the cursor's slice and the last one.
pub fn render_axis(buf: &mut Buffer, area: Rect, app: &App, gutter: u16) {
    if area.height == 0 || area.width <= gutter {
        return;
    }
    let v = &app.view;
    let cols = app.cols as u16;
    buf.set_string(area.x, area.y, "slice", app.theme.dim());
    let x0 = area.x + gutter;
    let first = v.first.to_string();
    let last = v
        .slice_at(app.cols)
        .saturating_sub(1)
        .min(app.rec.last_slice())
        .to_string();
    buf.set_string(x0, area.y, &first, app.theme.dim());
    let lx = (x0 + cols).saturating_sub(last.len() as u16);
    if lx > x0 + first.len() as u16 {
        buf.set_string(lx, area.y, &last, app.theme.dim());
    }
    let cur = format!("▲{}", v.cursor);
    let cx = x0 + v.cursor_col() as u16;
    if cx + (cur.chars().count() as u16) <= area.right() {
        buf.set_string(cx, area.y, &cur, app.theme.title());
    }
}
