//! Slice detail for the slice under the cursor: its global metrics, the descriptors it
//! handled, the scheduler's decisions, the blocked ranks with what they wait for, the
//! wait-for graph (a cycle highlighted) and each node's local metrics.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget, Wrap};

use super::dur;
use crate::app::App;
use crate::data::{BlockedRank, DescriptorRow, SliceDetail};
use crate::theme::Theme;
use strobe_runtime::descriptor::{DescKind, COMM_SELF_BASE, COMM_WORLD};
use strobe_runtime::waitfor::{self, Blocked, WaitFor, WaitOp};

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

/// The kind of a recorded descriptor (`descriptor.kind` is the MPI name of a `DescKind`).
fn kind_of(name: &str) -> Option<DescKind> {
    (0..=u8::MAX)
        .filter_map(DescKind::from_u8)
        .find(|k| k.mpi_name() == name)
}

/// The wait-for graph of a slice's blocked ranks (`strobe_core::waitfor`): each blocked
/// rank waits through the descriptor it is blocked on, unless a decision of this slice
/// matches or completes that descriptor. Peers are world ranks on `MPI_COMM_WORLD` and
/// `MPI_COMM_SELF`; on a derived communicator the recording has no member list at hand
/// here, so such a wait shows no edge (decided: no edge rather than a wrong one).
pub fn wait_for(blocked: &[BlockedRank], ranks: u32) -> WaitFor {
    waitfor::analyze(&wait_input(blocked, ranks))
}

/// The classic deadlock patterns among a slice's blocked ranks (`strobe_core::waitfor`,
/// the same classification as the runtime's deadlock report), each a hint.
pub fn patterns(blocked: &[BlockedRank], ranks: u32) -> Vec<waitfor::Pattern> {
    let input = wait_input(blocked, ranks);
    waitfor::classify(&input, &waitfor::analyze(&input))
}

fn wait_input(blocked: &[BlockedRank], ranks: u32) -> Vec<Blocked> {
    let world: Vec<u32> = (0..ranks).collect();
    blocked
        .iter()
        .map(|b| {
            let op = b.waits_on.as_ref().and_then(|d| {
                let kind = kind_of(&d.kind)?;
                let comm = u32::try_from(d.comm).ok()?;
                let (peer, members) = if comm == COMM_WORLD {
                    // -1: ANY_SOURCE (waits for any member); -2: PROC_NULL (for nobody).
                    match d.peer {
                        -2 => return None,
                        p => (u32::try_from(p).ok(), world.clone()),
                    }
                } else if comm >= COMM_SELF_BASE {
                    (Some(b.rank), vec![b.rank])
                } else {
                    (None, Vec::new())
                };
                Some(WaitOp {
                    kind,
                    comm,
                    peer,
                    members,
                    matched: b.matched,
                })
            });
            Blocked {
                rank: b.rank,
                ops: op.into_iter().collect(),
            }
        })
        .collect()
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

fn blocked_lines(d: &SliceDetail, ranks: u32, t: &Theme) -> Vec<Line<'static>> {
    let graph = wait_for(&d.blocked, ranks);
    let cycle = graph.cycle.clone().unwrap_or_default();
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
        if let Some(site) = &b.site {
            // Where the program made the call (the recording's `call_site`).
            l.push(Line::from(Span::styled(
                format!("            at {site}"),
                style,
            )));
        }
    }
    l.push(section("wait-for graph", t));
    if graph.edges.is_empty() {
        l.push(Line::from(Span::styled(
            "  no rank waits for another",
            t.dim(),
        )));
    }
    if !cycle.is_empty() {
        // In path order from its lowest rank, back to it.
        let text = cycle
            .iter()
            .chain(cycle.first())
            .map(|r| r.to_string())
            .collect::<Vec<_>>()
            .join(" -> ");
        l.push(Line::from(Span::styled(format!("  CYCLE {text}"), t.bad())));
    }
    for (a, to) in &graph.edges {
        let to = to.iter().map(|r| r.to_string()).collect::<Vec<_>>();
        l.push(Line::from(format!("  {a} -> {}", to.join(", "))));
    }
    for p in patterns(&d.blocked, ranks) {
        l.push(Line::from(Span::styled(format!("  hint: {p}"), t.bad())));
    }
    l.push(section("per node", t));
    if d.nodes.is_empty() {
        l.push(Line::from(Span::styled(
            "  no metrics for this slice",
            t.dim(),
        )));
    }
    // Two short lines per node, each value named: one long line was cut in the right
    // column at 120 columns (issue 12, item 7).
    for n in &d.nodes {
        l.push(Line::from(format!(
            "  node {}  LETTS {}  LTDEM {}",
            n.node,
            dur(n.letts_ns),
            dur(n.ltdem_ns),
        )));
        l.push(Line::from(format!(
            "          LTMSM {}  LTTS {}",
            dur(n.ltmsm_ns),
            dur(n.ltts_ns),
        )));
        l.push(Line::from(format!(
            "          NP2P {}/{}  NCOLL {}/{}  BPTS {}",
            n.np2pdem, n.np2pmsm, n.ncolldem, n.ncollmsm, n.bpts
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
            // Long lines wrap instead of being cut at the column's edge.
            .wrap(Wrap { trim: false })
            .scroll((app.detail_scroll, 0))
            .render(left, buf);
        Paragraph::new(blocked_lines(d, app.rec.job().ranks, t))
            .block(
                Block::default()
                    .borders(Borders::TOP)
                    .title(" blocked ranks, wait-for graph "),
            )
            // Long lines wrap instead of being cut at the column's edge.
            .wrap(Wrap { trim: false })
            .scroll((app.detail_scroll, 0))
            .render(right, buf);
    } else {
        // Narrow: one column, blocked ranks first (what a person debugging a hang wants).
        let mut l = metrics_lines(d, t);
        l.extend(blocked_lines(d, app.rec.job().ranks, t));
        l.extend(schedule_lines(d, t));
        Paragraph::new(l)
            .block(block)
            // Long lines wrap instead of being cut at the column's edge.
            .wrap(Wrap { trim: false })
            .scroll((app.detail_scroll, 0))
            .render(body, buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(rank: u32, kind: &str, peer: i64, matched: bool) -> BlockedRank {
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
            matched,
            site: None,
        }
    }

    #[test]
    fn a_cycle_is_found_and_a_chain_is_not_one() {
        let b = [
            blocked(0, "MPI_Recv", 2, false),
            blocked(1, "MPI_Recv", 0, false),
            blocked(2, "MPI_Recv", 1, false),
            blocked(3, "MPI_Recv", 0, false),
        ];
        let w = wait_for(&b, 4);
        assert_eq!(w.edges.len(), 4);
        assert_eq!(w.cycle, Some(vec![0, 2, 1]));
        assert_eq!(wait_for(&b[1..], 4).cycle, None);
    }

    #[test]
    fn a_send_and_receive_matched_in_the_slice_are_no_cycle() {
        // The healthy case the string matcher got wrong: both blocked at the start of the
        // slice that matches them.
        let b = [
            blocked(0, "MPI_Send", 1, true),
            blocked(1, "MPI_Recv", 0, true),
        ];
        let w = wait_for(&b, 2);
        assert_eq!(w.cycle, None);
        assert!(w.edges.is_empty());
        // Not matched (a real send-receive deadlock would be two sends).
        let b = [
            blocked(0, "MPI_Send", 1, false),
            blocked(1, "MPI_Ssend", 0, false),
        ];
        assert_eq!(wait_for(&b, 2).cycle, Some(vec![0, 1]));
    }

    #[test]
    fn a_barrier_against_a_receive_is_a_cycle() {
        let b = [
            blocked(0, "MPI_Barrier", 0, false),
            blocked(1, "MPI_Recv", 0, false),
        ];
        let w = wait_for(&b, 2);
        assert_eq!(w.cycle, Some(vec![0, 1]));
        // A receive from MPI_PROC_NULL waits for nobody.
        assert!(wait_for(&[blocked(0, "MPI_Recv", -2, false)], 2)
            .edges
            .is_empty());
    }
}
