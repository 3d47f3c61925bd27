//! Timeline: the blocked-process view. Ranks down, slices across; a cell shows the call
//! the rank was blocked in (a letter, and a colour unless NO_COLOR), with a legend; the
//! crosshair is the cursor's column and the selected rank's row. With collapsing on,
//! consecutive ranks whose rows are identical on screen share one row (`[0-31]`).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::overview::render_axis;
use crate::app::App;

/// Lines above the grid: title and legend.
const HEAD: u16 = 2;
/// Lines below the grid: the slice axis and what the crosshair points at.
const FOOT: u16 = 2;

/// Width of the rank labels (room for `[0-31] MPI_Barrier` on wide terminals).
pub fn gutter(width: u16) -> u16 {
    if width >= 100 {
        22
    } else {
        10
    }
}

/// A row of the grid: ranks `lo..=hi`, which share the same cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RankRow {
    pub lo: u32,
    pub hi: u32,
}

/// The rows, collapsed or not.
pub fn rows(app: &App) -> Vec<RankRow> {
    let cells = &app.data.grid.cells;
    let n = app.rec.job().ranks;
    let mut out: Vec<RankRow> = Vec::new();
    // The rank filter (`/ranks=SET`) leaves the other ranks out.
    for r in (0..n).filter(|r| app.shows_rank(*r)) {
        match out.last_mut() {
            Some(last)
                if app.collapse
                    && last.hi + 1 == r
                    && cells.get(r as usize).is_some()
                    && cells.get(r as usize) == cells.get(last.hi as usize) =>
            {
                last.hi = r
            }
            _ => out.push(RankRow { lo: r, hi: r }),
        }
    }
    out
}

/// The index of the first row shown so that the selected rank's row is visible.
fn scroll(rows: &[RankRow], selected: u32, height: usize) -> usize {
    let sel = rows
        .iter()
        .position(|r| r.lo <= selected && selected <= r.hi)
        .unwrap_or(0);
    if height == 0 {
        return 0;
    }
    // Keep the selection in the middle once the list is longer than the screen.
    let start = sel.saturating_sub(height / 2);
    start.min(rows.len().saturating_sub(height))
}

fn grid_area(body: Rect) -> Rect {
    Rect {
        y: body.y + HEAD,
        height: body.height.saturating_sub(HEAD + FOOT),
        ..body
    }
}

/// The rank of the row at screen line `y`, if any.
pub fn rank_at(app: &App, y: u16) -> Option<u32> {
    let body = Rect {
        y: app.size.y + 1,
        height: app.size.height.saturating_sub(2),
        ..app.size
    };
    let g = grid_area(body);
    if y < g.y || y >= g.bottom() {
        return None;
    }
    let rows = rows(app);
    let start = scroll(&rows, app.rank, g.height as usize);
    rows.get(start + (y - g.y) as usize).map(|r| r.lo)
}

/// One letter per call: the first letter of its name after `MPI_` that no other call took.
pub fn glyphs(calls: &[String]) -> Vec<char> {
    let mut taken: Vec<char> = Vec::new();
    for call in calls {
        let name = call.strip_prefix("MPI_").unwrap_or(call);
        let cands = name
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .map(|c| c.to_ascii_uppercase())
            .chain(
                name.chars()
                    .filter(|c| c.is_ascii_alphabetic())
                    .map(|c| c.to_ascii_lowercase()),
            )
            .chain('0'..='9');
        let g = cands
            .into_iter()
            .find(|c| !taken.contains(c))
            .unwrap_or('#');
        taken.push(g);
    }
    taken
}

/// Calls in legend order (sorted by name) with their index in the grid's `calls`.
fn legend_order(calls: &[String]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..calls.len()).collect();
    idx.sort_by(|a, b| calls[*a].cmp(&calls[*b]));
    idx
}

pub fn render(buf: &mut Buffer, body: Rect, app: &App) {
    let t = &app.theme;
    let grid = &app.data.grid;
    let order = legend_order(&grid.calls);
    let sorted: Vec<String> = order.iter().map(|i| grid.calls[*i].clone()).collect();
    let glyph_sorted = glyphs(&sorted);
    // Per grid call index: (glyph, style).
    let mut look = vec![('?', Style::default()); grid.calls.len()];
    for (pos, &i) in order.iter().enumerate() {
        look[i] = (glyph_sorted[pos], t.call(pos));
    }
    let v = &app.view;
    buf.set_line(
        body.x,
        body.y,
        &Line::from(vec![
            Span::styled("Blocked processes", t.title()),
            Span::raw(format!(
                ": ranks down, slices across; {} ({} to toggle)",
                if app.collapse {
                    "identical ranks collapsed"
                } else {
                    "one row per rank"
                },
                "c"
            )),
        ]),
        body.width,
    );
    let mut legend = vec![Span::raw("legend ")];
    if grid.calls.is_empty() {
        legend.push(Span::styled("no rank blocked in this window", t.dim()));
    }
    for (pos, name) in sorted.iter().enumerate() {
        legend.push(Span::styled(
            format!(" {} ", glyph_sorted[pos]),
            t.call(pos),
        ));
        legend.push(Span::raw(format!(" {name}  ")));
    }
    buf.set_line(body.x, body.y + 1, &Line::from(legend), body.width);

    let g = grid_area(body);
    let gut = gutter(body.width);
    let rows = rows(app);
    let start = scroll(&rows, app.rank, g.height as usize);
    let ccol = v.cursor_col();
    let cols = app.cols.min(g.width.saturating_sub(gut) as usize);
    for (line, row) in rows.iter().skip(start).take(g.height as usize).enumerate() {
        let y = g.y + line as u16;
        let selected = row.lo <= app.rank && app.rank <= row.hi;
        let cells = grid.cells.get(row.lo as usize);
        let label = if row.lo == row.hi {
            format!("{:>4}", row.lo)
        } else {
            format!("[{}-{}]", row.lo, row.hi)
        };
        let label = if gut >= 20 {
            // Wide: name what the row is blocked in at the cursor.
            match cells.and_then(|c| c.get(ccol)).copied().flatten() {
                Some(i) => format!("{label} {}", grid.calls[i as usize]),
                None => label,
            }
        } else {
            label
        };
        let ls = if selected {
            t.cursor()
        } else {
            Style::default()
        };
        buf.set_stringn(g.x, y, &label, gut as usize - 1, ls);
        for c in 0..cols {
            let x = g.x + gut + c as u16;
            let cell = cells.and_then(|cs| cs.get(c)).copied().flatten();
            let (ch, mut style) = match cell {
                Some(i) => {
                    let (ch, st) = look[i as usize];
                    (ch.to_string(), st)
                }
                None if selected => ("·".to_string(), t.dim()),
                None => (" ".to_string(), Style::default()),
            };
            if c == ccol {
                style = style.patch(t.cursor());
            }
            buf[(x, y)].set_symbol(&ch).set_style(style);
        }
    }
    let axis = Rect {
        y: g.bottom(),
        height: 1,
        ..body
    };
    render_axis(buf, axis, app, gut);
    // What the crosshair points at.
    let row = rows.iter().find(|r| r.lo <= app.rank && app.rank <= r.hi);
    let who = match row {
        Some(r) if r.lo != r.hi => format!("ranks {}-{}", r.lo, r.hi),
        _ => format!("rank {}", app.rank),
    };
    let what = grid
        .cells
        .get(app.rank as usize)
        .and_then(|c| c.get(ccol))
        .copied()
        .flatten()
        .map(|i| {
            // One slice under the cursor: where the program made the call, if recorded.
            let site = (v.per_col == 1)
                .then(|| app.rec.blocked_site(app.rank, v.slice_at(ccol)).ok())
                .flatten()
                .flatten()
                .map(|s| format!(" at {s}"))
                .unwrap_or_default();
            format!("blocked in {}{site}", grid.calls[i as usize])
        })
        .unwrap_or_else(|| "not blocked".into());
    let span = if v.per_col == 1 {
        format!("slice {}", v.slice_at(ccol))
    } else {
        format!("slices {}-{}", v.slice_at(ccol), v.slice_at(ccol + 1) - 1)
    };
    buf.set_stringn(
        body.x,
        axis.y + 1,
        format!("{who} at {span}: {what}   (Enter: slice detail)"),
        body.width as usize,
        Style::default(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glyphs_are_distinct_and_readable() {
        let calls: Vec<String> = [
            "MPI_Barrier",
            "MPI_Bcast",
            "MPI_Recv",
            "(descriptor queue full)",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(glyphs(&calls), vec!['B', 'C', 'R', 'D']);
    }
}
