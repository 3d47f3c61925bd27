//! A chart over the slice axis drawn from (min, max) per screen column: what a downsampled
//! series needs (a plain line would hide every spike narrower than a column).
//!
//! One series: the column is solid up to its minimum and a thin bar from there to its
//! maximum, so a column's spread is visible. Two series: the first fills the left half of
//! each cell, the second the right half (full block where both reach), so the glyphs tell
//! them apart even without colour.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;

use super::GUTTER;

pub struct Series<'a> {
    pub points: &'a [Option<(i64, i64)>],
    pub style: Style,
}

/// Rows (from the bottom) a value fills, with `top` the value of the top row.
fn height(v: i64, top: i64, rows: u16) -> u16 {
    if v <= 0 || top <= 0 {
        return 0;
    }
    // Anything above zero shows at least one row: a lone collective must be visible.
    (((v as f64 / top as f64) * rows as f64).ceil() as u16).clamp(1, rows)
}

/// Draw `series` (one or two) in `area`: the labels `top_label` and `0` in the gutter,
/// the cursor column in reversed video.
pub fn draw(
    buf: &mut Buffer,
    area: Rect,
    series: &[Series],
    top: i64,
    top_label: &str,
    cursor_col: Option<usize>,
    cursor_style: Style,
) {
    if area.height == 0 || area.width <= GUTTER {
        return;
    }
    let rows = area.height;
    buf.set_stringn(
        area.x,
        area.y,
        top_label,
        GUTTER as usize - 1,
        Style::default(),
    );
    if rows > 1 {
        buf.set_string(area.x, area.bottom() - 1, "0", Style::default());
    }
    let x0 = area.x + GUTTER;
    let cols = (area.width - GUTTER) as usize;
    for c in 0..cols {
        let x = x0 + c as u16;
        let get = |s: &Series| s.points.get(c).copied().flatten();
        for row in 0..rows {
            // row 0 is the bottom.
            let y = area.bottom() - 1 - row;
            let (ch, style) = match series {
                [one] => match get(one) {
                    Some((lo, _)) if row < height(lo, top, rows) => ("█", one.style),
                    Some((_, hi)) if row < height(hi, top, rows) => ("│", one.style),
                    _ => (" ", Style::default()),
                },
                [a, b, ..] => {
                    let fa = get(a).is_some_and(|(_, hi)| row < height(hi, top, rows));
                    let fb = get(b).is_some_and(|(_, hi)| row < height(hi, top, rows));
                    match (fa, fb) {
                        (true, true) => ("█", a.style),
                        (true, false) => ("▌", a.style),
                        (false, true) => ("▐", b.style),
                        (false, false) => (" ", Style::default()),
                    }
                }
                [] => (" ", Style::default()),
            };
            let style = if Some(c) == cursor_col {
                style.patch(cursor_style)
            } else {
                style
            };
            buf[(x, y)].set_symbol(ch).set_style(style);
        }
    }
}

/// The highest maximum of a series, at least 1.
pub fn top_of(points: &[Option<(i64, i64)>]) -> i64 {
    points
        .iter()
        .flatten()
        .map(|p| p.1)
        .max()
        .unwrap_or(0)
        .max(1)
}
