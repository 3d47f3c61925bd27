//! Rendering: one function per pane, all reading [`App`]. Layout helpers live here too, so
//! the app (mouse hits, the width of the slice axis) and the renderer agree on geometry.

pub mod chart;
pub mod history;
pub mod overview;
pub mod slice;
pub mod stats;
pub mod timeline;

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use ratatui::Frame;

use crate::app::{App, Tab};
use crate::keys::KEYS;

/// Width of the label column left of every plot.
pub const GUTTER: u16 = 9;

/// Terminals at least this wide get the richer layouts.
pub const WIDE: u16 = 150;

/// Tab bar, body, status line.
fn frame_areas(area: Rect) -> (Rect, Rect, Rect) {
    let [tabs, body, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(area);
    (tabs, body, status)
}

/// Where the slice axis is drawn in the current tab: (x of column 0, number of columns).
fn plot_span(app: &App, area: Rect) -> (u16, u16) {
    let (_, body, _) = frame_areas(area);
    let gutter = match app.tab {
        Tab::Timeline => timeline::gutter(body.width),
        _ => GUTTER,
    };
    let width = match app.tab {
        Tab::Overview => overview::charts_area(body, app).width,
        _ => body.width,
    };
    (body.x + gutter, width.saturating_sub(gutter).max(1))
}

/// The number of screen columns of the slice axis for the current tab at this size.
pub fn plot_width(app: &App, area: Rect) -> u16 {
    plot_span(app, area).1
}

/// The slice-axis column under screen column `x`, if any.
pub fn plot_column_at(app: &App, x: u16) -> Option<usize> {
    if !matches!(app.tab, Tab::Overview | Tab::Timeline) {
        return None;
    }
    let (x0, n) = plot_span(app, app.size);
    (x >= x0 && x < x0 + n).then(|| (x - x0) as usize)
}

/// Tab titles as drawn: (tab, x range).
fn tab_positions() -> Vec<(Tab, u16, u16)> {
    let mut x = 8; // after " strobe "
    Tab::ALL
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let w = format!(" {} {} ", i + 1, t.title()).len() as u16;
            let r = (*t, x, x + w);
            x += w + 1;
            r
        })
        .collect()
}

/// The tab whose title is at (x, y), if any.
pub fn tab_at(app: &App, x: u16, y: u16) -> Option<Tab> {
    let (tabs, _, _) = frame_areas(app.size);
    if y != tabs.y {
        return None;
    }
    tab_positions()
        .into_iter()
        .find(|(_, a, b)| x >= *a && x < *b)
        .map(|(t, _, _)| t)
}

/// Below this size the views cannot be laid out; a message says so instead.
pub const MIN_SIZE: (u16, u16) = (40, 8);

/// Draw the whole screen. [`App::prepare`] must have run for this size.
pub fn render(frame: &mut Frame, app: &App) {
    let area = frame.area();
    if area.width < MIN_SIZE.0 || area.height < MIN_SIZE.1 {
        let text = format!(
            "terminal too small ({}x{}): strobe tui needs {}x{}; q quits",
            area.width, area.height, MIN_SIZE.0, MIN_SIZE.1
        );
        frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), area);
        return;
    }
    let (tabs, body, status) = frame_areas(area);
    let buf = frame.buffer_mut();
    render_tabs(buf, tabs, app);
    match app.tab {
        Tab::Overview => overview::render(buf, body, app),
        Tab::Timeline => timeline::render(buf, body, app),
        Tab::Slice => slice::render(buf, body, app),
        Tab::Statistics => stats::render(buf, body, app),
        Tab::History => history::render(buf, body, app),
    }
    render_status(buf, status, app);
    if app.help {
        render_help(frame, body, app);
    } else if let Some((title, text)) = &app.popup {
        render_popup(frame, body, app, title, text);
    }
}

/// A report over the body (a divergence, a crash, the gdb command): as wide as its
/// longest line allows, wrapped, cut at the bottom; any key closes it.
fn render_popup(frame: &mut Frame, body: Rect, app: &App, title: &str, text: &str) {
    let longest = text.lines().map(|l| l.chars().count()).max().unwrap_or(0) as u16;
    let w = body.width.min(longest.max(40) + 4);
    let mut lines: Vec<Line> = text.lines().map(|l| Line::raw(l.to_string())).collect();
    lines.push(Line::from(Span::styled(
        "any key closes this",
        app.theme.dim(),
    )));
    let h = body.height.min(lines.len() as u16 + 2);
    let area = Rect::new(
        body.x + (body.width - w) / 2,
        body.y + (body.height - h) / 2,
        w,
        h,
    );
    frame.render_widget(Clear, area);
    frame.render_widget(
        Paragraph::new(lines)
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(format!(" {title} ")),
            )
            .wrap(Wrap { trim: false }),
        area,
    );
}

fn render_tabs(buf: &mut Buffer, area: Rect, app: &App) {
    let t = &app.theme;
    buf.set_string(area.x, area.y, " strobe ", t.title());
    for (i, (tab, x, _)) in tab_positions().into_iter().enumerate() {
        if x >= area.right() {
            break;
        }
        let style = if tab == app.tab {
            t.selected_tab()
        } else {
            Style::default()
        };
        let label = format!(" {} {} ", i + 1, tab.title());
        buf.set_stringn(x, area.y, &label, (area.right() - x) as usize, style);
    }
    let (_, _, end) = tab_positions()[Tab::ALL.len() - 1];
    let name = app
        .rec
        .path()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let help = "  ? help";
    if area.right() > end + 2 {
        let room = (area.right() - end - 1) as usize;
        let text = format!("{name}{help}");
        let text = if text.len() > room {
            help.trim().to_string()
        } else {
            text
        };
        let x = area
            .right()
            .saturating_sub(text.len() as u16 + 1)
            .max(end + 1);
        buf.set_stringn(x, area.y, &text, room, t.dim());
    }
}

fn render_status(buf: &mut Buffer, area: Rect, app: &App) {
    let t = &app.theme;
    let line = if let Some(input) = &app.search_input {
        Line::from(vec![
            Span::raw(" search: /"),
            Span::raw(input.clone()),
            Span::raw("_   (slice number, rank N, or call; Enter, Esc)"),
        ])
    } else {
        let v = &app.view;
        let last = app.rec.last_slice();
        let end = v.slice_at(app.cols).saturating_sub(1).min(last);
        let full = format!(
            " slice {}/{}  view {}-{} ({}/col)  rank {}  {}  [{}]",
            v.cursor,
            last,
            v.first,
            end,
            v.per_col,
            app.rank,
            app.tab.title(),
            app.mode
        );
        // A message that does not fit beside the position replaces it (it was cut at 80
        // and 120 columns: issue 12, item 7): first the short position (the slice and the
        // mode), then, for a message longer still, the message alone.
        let width = area.width as usize;
        let fits = |pos: &str, m: &str| pos.chars().count() + 2 + m.chars().count() <= width;
        let short = format!(" slice {}/{}  [{}]", v.cursor, last, app.mode);
        let position = match &app.message {
            Some((m, _)) if fits(&full, m) => full,
            Some((m, _)) if fits(&short, m) => short,
            Some(_) => String::new(),
            None => full,
        };
        let gap = if position.is_empty() { " " } else { "  " };
        let mut spans = vec![Span::raw(position)];
        if let Some((m, err)) = &app.message {
            spans.push(Span::raw(gap));
            spans.push(Span::styled(
                m.clone(),
                if *err { t.bad() } else { Style::default() },
            ));
        }
        Line::from(spans)
    };
    buf.set_style(area, t.status());
    buf.set_line(area.x, area.y, &line, area.width);
}

fn render_help(frame: &mut Frame, body: Rect, app: &App) {
    let w = body.width.min(96);
    let key_w = KEYS.iter().map(|(k, _, _)| k.len()).max().unwrap_or(0);
    // Inside the border, one line for the footer; each key's text may wrap, so the lines
    // are laid out here (no wrapping by the widget) and scrolled by `help_scroll`.
    let inner_w = w.saturating_sub(2) as usize;
    let mut lines: Vec<Line> = Vec::new();
    for (k, what, _) in KEYS {
        let indent = key_w + 2;
        let mut first = true;
        for chunk in wrap_words(what, inner_w.saturating_sub(indent).max(10)) {
            let key = if first {
                format!("{k:<key_w$}  ")
            } else {
                " ".repeat(indent)
            };
            first = false;
            lines.push(Line::from(vec![
                Span::styled(key, app.theme.title()),
                Span::raw(chunk),
            ]));
        }
    }
    let total = lines.len();
    let h = body.height.min(total as u16 + 3);
    let area = Rect::new(
        body.x + (body.width - w) / 2,
        body.y + (body.height - h) / 2,
        w,
        h,
    );
    let rows = h.saturating_sub(3) as usize;
    let top = (app.help_scroll as usize).min(total.saturating_sub(rows));
    let mut shown: Vec<Line> = lines.into_iter().skip(top).take(rows).collect();
    let footer = if total > rows {
        format!(
            "lines {}-{} of {total}: j/k, PgUp/PgDn scroll; any other key closes",
            top + 1,
            (top + rows).min(total)
        )
    } else {
        "any key closes this help".to_string()
    };
    shown.push(Line::from(Span::styled(footer, app.theme.dim())));
    frame.render_widget(Clear, area);
    frame.render_widget(
        Paragraph::new(shown).block(Block::default().borders(Borders::ALL).title(" Keys ")),
        area,
    );
}

/// `text` cut into lines of at most `width` characters at spaces.
fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            out.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() || out.is_empty() {
        out.push(line);
    }
    out
}

/// Nanoseconds as a short human duration.
pub fn dur(ns: i64) -> String {
    let a = ns.unsigned_abs();
    // The units rule of docs/cli.md ("Units"): the unit that fits the value.
    if a < 1_000 {
        format!("{ns} ns")
    } else if a < 1_000_000 {
        format!("{:.1} us", ns as f64 / 1e3)
    } else if a < 1_000_000_000 {
        format!("{:.2} ms", ns as f64 / 1e6)
    } else {
        format!("{:.2} s", ns as f64 / 1e9)
    }
}
