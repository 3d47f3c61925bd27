//! History: the selected rank's matched receives in match order: the slice, the call, the
//! source and tag it asked for, the sender, tag and size it matched. Wildcard receives
//! (`MPI_ANY_SOURCE`: the scheduler chose the sender, and another run may choose another)
//! are marked `*` and highlighted: the key view for wildcard bugs.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;

use crate::app::App;
use crate::data::{MatchEntry, MatchHistory};

/// Columns: (title, width); the wide layout adds the sequence numbers.
fn columns(wide: bool) -> Vec<(&'static str, usize)> {
    let mut c = vec![
        ("#", 6),
        ("slice", 8),
        ("call", 12),
        ("asked", 7),
        ("from", 6),
        ("tag", 7),
        ("bytes", 9),
    ];
    if wide {
        c.extend([("recv seq", 10), ("send seq", 10)]);
    }
    c
}

fn cells(i: usize, e: &MatchEntry, wide: bool) -> Vec<String> {
    let asked = if e.wildcard_source() {
        "ANY*".to_string()
    } else {
        e.source_asked.to_string()
    };
    let tag = if e.wildcard_tag() {
        format!("{}*", e.tag)
    } else {
        e.tag.to_string()
    };
    let bytes = if e.truncated {
        format!("{}!", e.bytes)
    } else {
        e.bytes.to_string()
    };
    let mut v = vec![
        (i + 1).to_string(),
        e.slice.to_string(),
        e.call.clone(),
        asked,
        e.sender.to_string(),
        tag,
        bytes,
    ];
    if wide {
        v.extend([e.recv_seq.to_string(), e.send_seq.to_string()]);
    }
    v
}

fn line(cols: &[(&str, usize)], vals: &[String]) -> String {
    let mut s = String::new();
    for ((_, w), v) in cols.iter().zip(vals) {
        let v: String = v.chars().take(w - 1).collect();
        s.push_str(&format!("{v:<w$}", w = *w));
    }
    s
}

/// The first line: whose history, how many, how many wildcard, what is left out.
fn summary(app: &App, h: &MatchHistory) -> String {
    let wild = h.entries.iter().filter(|e| e.wildcard_source()).count();
    let mut s = format!(
        "rank {}: {} receive{} matched, {wild} with MPI_ANY_SOURCE (*)",
        h.rank,
        h.entries.len(),
        if h.entries.len() == 1 { "" } else { "s" }
    );
    if h.truncated {
        s.push_str(&format!("; the first {} only", h.entries.len()));
    }
    if h.partial {
        s.push_str("; the schedule log covers part of the run");
    }
    if let Some(f) = &app.rank_filter {
        s.push_str(&format!("; {} ranks shown", f.len()));
    }
    s
}

pub fn render(buf: &mut Buffer, body: Rect, app: &App) {
    let t = &app.theme;
    let w = body.width as usize;
    if let Some(rank) = app.history_placeholder() {
        let text = format!("loading history of rank {rank}…");
        buf.set_stringn(body.x, body.y, text, w, t.title());
        return;
    }
    let Some(h) = &app.data.history else {
        buf.set_stringn(
            body.x,
            body.y,
            "no match history: the recording has no schedule log (recorded with --schedule-log off, or an old format); strobe replay FILE --record FULL.db regenerates it",
            w,
            t.dim(),
        );
        return;
    };
    buf.set_stringn(body.x, body.y, summary(app, h), w, t.title());
    let wide = body.width >= super::WIDE;
    let cols = columns(wide);
    let titles: Vec<String> = cols.iter().map(|(t, _)| t.to_string()).collect();
    if body.height < 4 {
        return;
    }
    buf.set_stringn(body.x, body.y + 1, line(&cols, &titles), w, t.dim());
    let hint = "j/k receive  h/l rank  Enter its slice  /rank=R call=C  /ranks=SET  * wildcard  ! truncated";
    let rows = body.height.saturating_sub(3) as usize;
    buf.set_stringn(body.x, body.bottom() - 1, hint, w, t.dim());
    if h.entries.is_empty() {
        buf.set_stringn(
            body.x,
            body.y + 2,
            format!("rank {} received no point-to-point message", h.rank),
            w,
            Style::default(),
        );
        return;
    }
    let sel = app.history_row.min(h.entries.len() - 1);
    let top = sel
        .saturating_sub(rows / 2)
        .min(h.entries.len().saturating_sub(rows));
    let diff_slice = app.marks.diff.as_ref().and_then(|d| d.slice);
    let explored_slice = app.marks.explored.as_ref().and_then(|e| e.slice);
    for (k, (i, e)) in h
        .entries
        .iter()
        .enumerate()
        .skip(top)
        .take(rows)
        .enumerate()
    {
        let y = body.y + 2 + k as u16;
        let mut text = line(&cols, &cells(i, e, wide));
        if diff_slice == Some(e.slice) {
            text.push_str("<- first difference (m)");
        } else if explored_slice == Some(e.slice) && e.wildcard_source() {
            text.push_str("<- forced by strobe explore (m)");
        }
        let mut style = if e.wildcard_source() {
            t.wildcard()
        } else {
            Style::default()
        };
        if i == sel {
            style = style.patch(t.cursor());
        }
        buf.set_stringn(body.x, y, text, w, style);
    }
}
