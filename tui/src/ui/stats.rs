//! Statistics: the per-process statistics (the papers' MMDS) of one rank or all ranks:
//! the per-primitive table (count, min, max, average, total), sortable, and the
//! computation-granularity and communication-overhead histograms.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Row, StatefulWidget, Table, TableState, Widget, Wrap};

use super::dur;
use crate::app::{App, SortKey};
use crate::data::PrimitiveRow;
use crate::theme::Theme;

/// The rows in display order.
pub fn sorted(rows: &[PrimitiveRow], key: SortKey, descending: bool) -> Vec<PrimitiveRow> {
    let mut v = rows.to_vec();
    v.sort_by(|a, b| {
        let o = match key {
            SortKey::Primitive => a.primitive.cmp(&b.primitive),
            SortKey::Count => a.count.cmp(&b.count),
            SortKey::Min => a.min_ns.cmp(&b.min_ns),
            SortKey::Max => a.max_ns.cmp(&b.max_ns),
            SortKey::Avg => a.average_ns().total_cmp(&b.average_ns()),
            SortKey::Total => a.total_ns.cmp(&b.total_ns),
        };
        // Ties in primitive order, so the table never jumps around.
        let o = if descending { o.reverse() } else { o };
        o.then_with(|| a.primitive.cmp(&b.primitive))
    });
    v
}

fn histogram(buf: &mut Buffer, area: Rect, title: &str, bins: &[(i64, i64, i64)], t: &Theme) {
    if area.height == 0 {
        return;
    }
    buf.set_stringn(area.x, area.y, title, area.width as usize, t.title());
    if bins.is_empty() {
        buf.set_stringn(
            area.x,
            area.y + 1,
            "  no data",
            area.width as usize,
            t.dim(),
        );
        return;
    }
    let max = bins.iter().map(|b| b.2).max().unwrap_or(1).max(1);
    let label_w = 20u16;
    let count_w = 8u16;
    let bar_w = area.width.saturating_sub(label_w + count_w + 1);
    for (i, (lo, hi, n)) in bins.iter().enumerate().take(area.height as usize - 1) {
        let y = area.y + 1 + i as u16;
        let label = format!("{}-{}", dur(*lo), dur(*hi));
        buf.set_stringn(
            area.x,
            y,
            format!("{label:>19}"),
            label_w as usize,
            Style::default(),
        );
        let len = ((*n as f64 / max as f64) * bar_w as f64).round() as usize;
        buf.set_stringn(
            area.x + label_w,
            y,
            "█".repeat(len),
            bar_w as usize,
            t.series(0),
        );
        buf.set_stringn(
            area.x + label_w + bar_w + 1,
            y,
            n.to_string(),
            count_w as usize,
            Style::default(),
        );
    }
}

pub fn render(buf: &mut Buffer, body: Rect, app: &App) {
    let t = &app.theme;
    let Some(s) = &app.data.stats else {
        Paragraph::new(vec![
            Line::from(Span::styled("Statistics", t.title())),
            Line::from(""),
            Line::from(
                "This recording has no per-process statistics (no mmds_rank, mmds_primitive \
                 and mmds_histogram tables): the strobe that recorded it did not collect them.",
            ),
            Line::from(""),
            Line::from("The other tabs (1 Overview, 2 Timeline, 3 Slice) work on every recording."),
        ])
        .wrap(Wrap { trim: false })
        .render(body, buf);
        return;
    };
    let who = match app.stats_rank {
        None => "all ranks".to_string(),
        Some(r) => format!("rank {r}"),
    };
    let tot = &s.totals;
    // The papers' accuracy check: computation + communication = run time within 0.01%.
    let check = if tot.wall_ns > 0 {
        let off = (tot.compute_ns + tot.comm_ns - tot.wall_ns).abs() as f64 / tot.wall_ns as f64;
        format!("check {:.3}% off", off * 100.0)
    } else {
        String::new()
    };
    let head = vec![
        Line::from(vec![
            Span::styled("Statistics of ", t.title()),
            Span::styled(who, t.title()),
            Span::raw("   (h/l: rank, s/S: sort, j/k: row)"),
        ]),
        Line::from(format!(
            // Over all ranks the times are sums (a 5.8 s job on 8 ranks has 46 s of rank
            // time): say so instead of calling it the wall time (issue 12, item 10).
            "{} {}  compute {}  comm {}  {} calls  {check}",
            match app.stats_rank {
                None => "rank time (sum over ranks)",
                Some(_) => "run time",
            },
            dur(tot.wall_ns),
            dur(tot.compute_ns),
            dur(tot.comm_ns),
            tot.calls
        )),
    ];
    let hist_h = if body.height >= 30 { 8 } else { 5 };
    let [h, table, hists] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(3),
        Constraint::Length(hist_h),
    ])
    .areas(body);
    Paragraph::new(head).render(h, buf);

    let arrow = if app.descending { "▼" } else { "▲" };
    let names = ["primitive", "count", "min", "max", "avg", "total", "bytes"];
    let header = Row::new(names.iter().enumerate().map(|(i, n)| {
        if SortKey::ALL.get(i) == Some(&app.sort) {
            format!("{n}{arrow}")
        } else {
            n.to_string()
        }
    }))
    .style(t.title());
    let rows = sorted(&s.primitives, app.sort, app.descending);
    let mut all = PrimitiveRow {
        primitive: "all primitives".into(),
        count: 0,
        min_ns: i64::MAX,
        max_ns: 0,
        total_ns: 0,
        bytes: 0,
    };
    for r in &rows {
        all.count += r.count;
        all.min_ns = all.min_ns.min(r.min_ns);
        all.max_ns = all.max_ns.max(r.max_ns);
        all.total_ns += r.total_ns;
        all.bytes += r.bytes;
    }
    if rows.is_empty() {
        all.min_ns = 0;
    }
    let line = |r: &PrimitiveRow| {
        Row::new(vec![
            r.primitive.clone(),
            r.count.to_string(),
            dur(r.min_ns),
            dur(r.max_ns),
            dur(r.average_ns() as i64),
            dur(r.total_ns),
            r.bytes.to_string(),
        ])
    };
    let mut table_rows: Vec<Row> = rows.iter().map(line).collect();
    table_rows.push(line(&all).style(t.title()));
    let widths = [
        Constraint::Min(16),
        Constraint::Length(9),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(12),
    ];
    let mut state = TableState::default().with_selected(Some(app.stats_row));
    StatefulWidget::render(
        Table::new(table_rows, widths)
            .header(header)
            .row_highlight_style(t.cursor()),
        table,
        buf,
        &mut state,
    );
    let [a, b] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(hists);
    histogram(buf, a, "computation granularity", &s.granularity, t);
    histogram(buf, b, "communication overhead", &s.overhead, t);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(p: &str, count: i64, total: i64) -> PrimitiveRow {
        PrimitiveRow {
            primitive: p.into(),
            count,
            min_ns: 1,
            max_ns: 2,
            total_ns: total,
            bytes: 0,
        }
    }

    #[test]
    fn sorting_by_each_column() {
        let rows = [
            row("MPI_Send", 10, 100),
            row("MPI_Barrier", 5, 500),
            row("MPI_Recv", 10, 50),
        ];
        let names = |v: Vec<PrimitiveRow>| v.into_iter().map(|r| r.primitive).collect::<Vec<_>>();
        assert_eq!(
            names(sorted(&rows, SortKey::Primitive, false)),
            ["MPI_Barrier", "MPI_Recv", "MPI_Send"]
        );
        assert_eq!(
            names(sorted(&rows, SortKey::Count, true)),
            ["MPI_Recv", "MPI_Send", "MPI_Barrier"]
        );
        assert_eq!(
            names(sorted(&rows, SortKey::Avg, true)),
            ["MPI_Barrier", "MPI_Send", "MPI_Recv"]
        );
    }
}
