//! Slice detail for the slice under the cursor: its global metrics, the descriptors it
//! handled, the scheduler's decisions, the blocked ranks with what they wait for, the
//! wait-for graph (a cycle highlighted) and each node's local metrics.

use std::collections::BTreeMap;

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget};

use super::dur;
use crate::app::App;
use crate::data::{BlockedRank, DescriptorRow, SliceDetail};
use crate::theme::Theme;

/// Peer values with a meaning of their own (docs/recording.md, `descriptor.peer`).
fn peer(p: i64) -> String {
    match p {
        -1 => "any".into(),
        -2 => "null".into(),
        p => p.to_string(),
    }
}

fn describe(d: &DescriptorRow) -> String {
    let comm = if d.comm == 0 {
        String::new()
    } else {
        format!(" comm {}", d.comm)
    };
    format!(
        "{}:{} {} peer {} tag {} {} B{}{}",
        d.rank,
        d.seq,
        d.kind,
        peer(d.peer),
        if d.tag == -1 {
            "any".into()
        } else {
            d.tag.to_string()
        },
        d.bytes,
        comm,
        if d.blocking { " (blocking)" } else { "" }
    )
}

/// Wait-for edges between blocked ranks: a rank blocked in a point-to-point call on the
/// world communicator waits for its peer. Returns the edges and the ranks on a cycle.
pub fn wait_for(blocked: &[BlockedRank]) -> (BTreeMap<u32, u32>, Vec<u32>) {
    let mut edges = BTreeMap::new();
    for b in blocked {
        if let Some(d) = &b.waits_on {
            let p2p = matches!(
                d.kind.as_str(),
                "MPI_Send"
                    | "MPI_Ssend"
                    | "MPI_Rsend"
                    | "MPI_Bsend"
                    | "MPI_Recv"
                    | "MPI_Probe"
                    | "MPI_Sendrecv"
            );
            if p2p && d.comm == 0 && d.peer >= 0 {
                edges.insert(b.rank, d.peer as u32);
            }
        }
    }
    // Out-degree is at most one: follow each path until it repeats.
    let mut cycle = Vec::new();
    for &start in edges.keys() {
        let mut path = vec![start];
        let mut at = start;
        while let Some(&next) = edges.get(&at) {
            if let Some(pos) = path.iter().position(|r| *r == next) {
                for r in &path[pos..] {
                    if !cycle.contains(r) {
                        cycle.push(*r);
                    }
                }
                break;
            }
            path.push(next);
            at = next;
        }
    }
    cycle.sort_unstable();
    (edges, cycle)
}

fn metrics_lines(d: &SliceDetail, t: &Theme) -> Vec<Line<'static>> {
    let mut l = vec![Line::from(Span::styled(
        format!("slice {}", d.slice),
        t.title(),
    ))];
    let Some(r) = &d.row else {
        l.push(Line::from("not in the recording"));
        return l;
    };
    let o = |v: Option<i64>| v.map_or("-".to_string(), dur);
    l.push(Line::from(format!(
        "started {} ({}), digest {:016x}",
        dur(r.start_ns),
        r.reason,
        r.digest
    )));
    l.push(Line::from(format!(
        "GETTS {}  GTDEM {}  GTMSM {}  GTTS {}",
        o(r.getts_ns),
        o(r.gtdem_ns),
        o(r.gtmsm_ns),
        o(r.gtts_ns)
    )));
    if let Some((a, b, c)) = r.usr {
        l.push(Line::from(format!("USRSTS {a}  USRDEM {b}  USRMSM {c}")));
    }
    l.push(Line::from(format!(
        "{} descriptors handled, {} ranks blocked at the start",
        r.n_descriptors, r.n_blocked
    )));
    l
}

fn section(title: &str, t: &Theme) -> Line<'static> {
    Line::from(Span::styled(title.to_string(), t.title()))
}

fn schedule_lines(d: &SliceDetail, t: &Theme) -> Vec<Line<'static>> {
    let mut l = vec![section("descriptors posted (handled in this slice)", t)];
    if d.descriptors.is_empty() {
        l.push(Line::from(Span::styled("  none", t.dim())));
    }
    for x in &d.descriptors {
        l.push(Line::from(format!("  {}", describe(x))));
    }
    l.push(section("decisions: matches, chunks, collectives", t));
    if d.decisions.is_empty() {
        l.push(Line::from(Span::styled("  none", t.dim())));
    }
    for x in &d.decisions {
        l.push(Line::from(format!("  {x}")));
    }
    l
}

fn blocked_lines(d: &SliceDetail, t: &Theme) -> Vec<Line<'static>> {
    let (edges, cycle) = wait_for(&d.blocked);
    let mut l = vec![section("blocked ranks: call, waiting on", t)];
    if d.blocked.is_empty() {
        l.push(Line::from(Span::styled("  none", t.dim())));
    }
    for b in &d.blocked {
        let on = b.waits_on.as_ref().map_or("?".to_string(), |x| {
            format!("{} peer {}", x.kind, peer(x.peer))
        });
        let style = if cycle.contains(&b.rank) {
            t.bad()
        } else {
            Default::default()
        };
        l.push(Line::from(Span::styled(
            format!("  rank {:<4} {:<16} on {on}", b.rank, b.call),
            style,
        )));
    }
    l.push(section("wait-for graph", t));
    if edges.is_empty() {
        l.push(Line::from(Span::styled(
            "  no point-to-point waits",
            t.dim(),
        )));
    }
    if !cycle.is_empty() {
        // Print the cycle in path order from its lowest rank.
        let mut path = vec![cycle[0]];
        while let Some(&n) = edges.get(path.last().expect("non-empty")) {
            if n == path[0] || path.len() > cycle.len() {
                break;
            }
            path.push(n);
        }
        let text = path
            .iter()
            .chain(std::iter::once(&path[0]))
            .map(|r| r.to_string())
            .collect::<Vec<_>>()
            .join(" -> ");
        l.push(Line::from(Span::styled(format!("  CYCLE {text}"), t.bad())));
    }
    for (a, b) in &edges {
        if !(cycle.contains(a) && cycle.contains(b)) {
            l.push(Line::from(format!("  {a} -> {b}")));
        }
    }
    l.push(section(
        "per node: LETTS LTDEM LTMSM LTTS NP2P NCOLL BPTS",
        t,
    ));
    if d.nodes.is_empty() {
        l.push(Line::from(Span::styled(
            "  no metrics for this slice",
            t.dim(),
        )));
    }
    for n in &d.nodes {
        l.push(Line::from(format!(
            "  node {} {} {} {} {}  p2p {}/{}  coll {}/{}  bpts {}",
            n.node,
            dur(n.letts_ns),
            dur(n.ltdem_ns),
            dur(n.ltmsm_ns),
            dur(n.ltts_ns),
            n.np2pdem,
            n.np2pmsm,
            n.ncolldem,
            n.ncollmsm,
            n.bpts
        )));
    }
    l
}

pub fn render(buf: &mut Buffer, body: Rect, app: &App) {
    let t = &app.theme;
    let d = &app.data.detail;
    let block = Block::default()
        .borders(Borders::TOP)
        .title(" j/k scroll, h/l previous/next slice, Esc back ");
    if body.width >= 120 {
        let [left, right] =
            Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)])
                .areas(body);
        let mut l = metrics_lines(d, t);
        l.extend(schedule_lines(d, t));
        Paragraph::new(l)
            .block(block.clone())
            .scroll((app.detail_scroll, 0))
            .render(left, buf);
        Paragraph::new(blocked_lines(d, t))
            .block(block)
            .scroll((app.detail_scroll, 0))
            .render(right, buf);
    } else {
        // Narrow: one column, blocked ranks first (what a person debugging a hang wants).
        let mut l = metrics_lines(d, t);
        l.extend(blocked_lines(d, t));
        l.extend(schedule_lines(d, t));
        Paragraph::new(l)
            .block(block)
            .scroll((app.detail_scroll, 0))
            .render(body, buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(rank: u32, kind: &str, peer: i64) -> BlockedRank {
        BlockedRank {
            rank,
            call: kind.into(),
            waits_on: Some(DescriptorRow {
                rank,
                seq: 0,
                kind: kind.into(),
                peer,
                tag: 0,
                comm: 0,
                bytes: 8,
                blocking: true,
            }),
        }
    }

    #[test]
    fn a_cycle_is_found_and_a_chain_is_not_one() {
        let b = [
            blocked(0, "MPI_Recv", 2),
            blocked(1, "MPI_Recv", 0),
            blocked(2, "MPI_Recv", 1),
            blocked(3, "MPI_Recv", 0),
        ];
        let (edges, cycle) = wait_for(&b);
        assert_eq!(edges.len(), 4);
        assert_eq!(cycle, vec![0, 1, 2]);
        let (_, cycle) = wait_for(&b[1..]);
        assert!(cycle.is_empty());
        let (edges, _) = wait_for(&[blocked(0, "MPI_Barrier", 0)]);
        assert!(
            edges.is_empty(),
            "a collective is not a point-to-point wait"
        );
    }
}
