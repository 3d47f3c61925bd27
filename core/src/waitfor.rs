//! The wait-for analysis of blocked ranks, shared by the runtime's deadlock report and the
//! TUI's slice pane: which rank waits for which, and a cycle if there is one.
//!
//! Rules (an operation waits for nobody once it is matched: its data moves or it completes
//! without anyone else doing anything):
//!
//! * a send waits for its destination; a receive or probe for its source, or with
//!   `MPI_ANY_SOURCE` for every other member of the communicator (any one of them could
//!   satisfy it; the graph keeps all of them, so a cycle through an `ANY_SOURCE` receive
//!   means "every possible sender is itself waiting", the usual conservative reading);
//! * a collective waits for the members of its communicator that have not arrived, i.e.
//!   that have no pending, unmatched collective on the same communicator among the blocked
//!   ranks' operations (a member that is not blocked at all has not arrived either);
//! * other operations (cancel, comm free) wait for nobody.
//!
//! Edges to ranks that are not blocked are kept (they say who is waited for), but only
//! blocked ranks can be on a cycle. The cycle is found by a depth-first search from the
//! lowest rank, following edges in ascending order, and given in path order from its
//! lowest rank, so the same situation is always reported the same way.

use std::collections::{BTreeMap, BTreeSet};

use crate::descriptor::DescKind;

mod hint;
pub use hint::{classify, Pattern};

/// One pending operation of a blocked rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitOp {
    pub kind: DescKind,
    /// Communicator context id.
    pub comm: u32,
    /// World rank of the destination, source or root; `None` for `MPI_ANY_SOURCE` (or when
    /// the peer cannot be resolved to a world rank).
    pub peer: Option<u32>,
    /// World ranks of the communicator's members (for `ANY_SOURCE` and collectives).
    pub members: Vec<u32>,
    /// Already matched (or completed): it no longer waits for any rank.
    pub matched: bool,
}

/// A blocked rank and its pending operations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    pub rank: u32,
    pub ops: Vec<WaitOp>,
}

/// The wait-for graph of a set of blocked ranks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WaitFor {
    /// Each blocked rank with an edge, and the ranks it waits for (ascending).
    pub edges: BTreeMap<u32, Vec<u32>>,
    /// A wait-for cycle in path order, starting at its lowest rank (`[0, 1]`: 0 waits for
    /// 1 and 1 waits for 0).
    pub cycle: Option<Vec<u32>>,
}

/// Build the wait-for graph of `blocked` and look for a cycle.
pub fn analyze(blocked: &[Blocked]) -> WaitFor {
    // (comm, rank) pairs that arrived at a collective on that communicator.
    let arrived: BTreeSet<(u32, u32)> = blocked
        .iter()
        .flat_map(|b| {
            b.ops
                .iter()
                .filter(|o| o.kind.is_collective() && !o.matched)
                .map(move |o| (o.comm, b.rank))
        })
        .collect();
    let mut edges: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for b in blocked {
        let mut to: Vec<u32> = Vec::new();
        for o in b.ops.iter().filter(|o| !o.matched) {
            if o.kind.is_collective() {
                to.extend(
                    o.members
                        .iter()
                        .filter(|&&m| !arrived.contains(&(o.comm, m))),
                );
            } else if o.kind.is_send()
                || matches!(o.kind, DescKind::Recv | DescKind::Probe | DescKind::Iprobe)
            {
                match o.peer {
                    Some(p) => to.push(p),
                    // A send always names its destination; `None` is ANY_SOURCE.
                    None if !o.kind.is_send() => to.extend(&o.members),
                    None => {}
                }
            }
        }
        to.retain(|&r| r != b.rank);
        to.sort_unstable();
        to.dedup();
        if !to.is_empty() {
            edges.insert(b.rank, to);
        }
    }
    let cycle = find_cycle(&edges);
    WaitFor { edges, cycle }
}

#[derive(Clone, Copy, PartialEq)]
enum Mark {
    New,
    Active,
    Done,
}

/// Depth-first search for a cycle, from the lowest rank; the cycle is rotated to start at
/// its lowest rank.
fn find_cycle(graph: &BTreeMap<u32, Vec<u32>>) -> Option<Vec<u32>> {
    let mut mark: BTreeMap<u32, Mark> = graph.keys().map(|&k| (k, Mark::New)).collect();
    for &k in graph.keys() {
        if mark[&k] == Mark::New {
            if let Some(mut c) = dfs(k, graph, &mut mark, &mut Vec::new()) {
                let low = c
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, &r)| r)
                    .map_or(0, |(i, _)| i);
                c.rotate_left(low);
                return Some(c);
            }
        }
    }
    None
}

fn dfs(
    v: u32,
    graph: &BTreeMap<u32, Vec<u32>>,
    mark: &mut BTreeMap<u32, Mark>,
    path: &mut Vec<u32>,
) -> Option<Vec<u32>> {
    mark.insert(v, Mark::Active);
    path.push(v);
    for &w in graph.get(&v).map(Vec::as_slice).unwrap_or(&[]) {
        match mark.get(&w).copied() {
            Some(Mark::Active) => {
                let start = path.iter().position(|&x| x == w).expect("on the path");
                return Some(path[start..].to_vec());
            }
            Some(Mark::New) => {
                if let Some(c) = dfs(w, graph, mark, path) {
                    return Some(c);
                }
            }
            // Done, or not blocked (no outgoing edges recorded): no cycle through it.
            _ => {}
        }
    }
    path.pop();
    mark.insert(v, Mark::Done);
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORLD: [u32; 4] = [0, 1, 2, 3];

    fn op(kind: DescKind, peer: Option<u32>, matched: bool) -> WaitOp {
        WaitOp {
            kind,
            comm: 0,
            peer,
            members: WORLD.to_vec(),
            matched,
        }
    }

    fn blocked(rank: u32, ops: Vec<WaitOp>) -> Blocked {
        Blocked { rank, ops }
    }

    #[test]
    fn a_send_and_a_receive_about_to_match_are_no_cycle() {
        let b = [
            blocked(0, vec![op(DescKind::Send, Some(1), true)]),
            blocked(1, vec![op(DescKind::Recv, Some(0), true)]),
        ];
        let w = analyze(&b);
        assert!(w.edges.is_empty(), "{w:?}");
        assert_eq!(w.cycle, None);
    }

    #[test]
    fn two_unmatched_sends_to_each_other_are_a_cycle() {
        let b = [
            blocked(1, vec![op(DescKind::Ssend, Some(0), false)]),
            blocked(0, vec![op(DescKind::Send, Some(1), false)]),
        ];
        let w = analyze(&b);
        assert_eq!(w.cycle, Some(vec![0, 1]));
        assert_eq!(w.edges[&0], [1]);
    }

    #[test]
    fn a_barrier_against_a_receive_is_a_cycle() {
        // Rank 0 is in the barrier; rank 1 waits for a message from 0 instead of joining.
        let b = [
            blocked(0, vec![op(DescKind::Barrier, Some(0), false)]),
            blocked(1, vec![op(DescKind::Recv, Some(0), false)]),
        ];
        let w = analyze(&b);
        assert_eq!(w.cycle, Some(vec![0, 1]));
        // The barrier waits for every member that has not arrived: 1, 2 and 3.
        assert_eq!(w.edges[&0], [1, 2, 3]);
        // Every member in the barrier: nobody waits for anybody through it.
        let all: Vec<Blocked> = WORLD
            .iter()
            .map(|&r| blocked(r, vec![op(DescKind::Barrier, Some(0), false)]))
            .collect();
        assert_eq!(analyze(&all), WaitFor::default());
    }

    #[test]
    fn a_chain_is_not_a_cycle_and_a_ring_is_one_in_path_order() {
        let chain = [
            blocked(0, vec![op(DescKind::Recv, Some(1), false)]),
            blocked(1, vec![op(DescKind::Recv, Some(2), false)]),
        ];
        let w = analyze(&chain);
        assert_eq!(w.edges.len(), 2);
        assert_eq!(w.cycle, None);
        // 3 -> 1 -> 2 -> 1: the cycle is 1 -> 2, reported from its lowest rank.
        let ring = [
            blocked(3, vec![op(DescKind::Recv, Some(1), false)]),
            blocked(1, vec![op(DescKind::Send, Some(2), false)]),
            blocked(2, vec![op(DescKind::Recv, Some(1), false)]),
        ];
        assert_eq!(analyze(&ring).cycle, Some(vec![1, 2]));
        let ring = [
            blocked(0, vec![op(DescKind::Recv, Some(2), false)]),
            blocked(1, vec![op(DescKind::Recv, Some(0), false)]),
            blocked(2, vec![op(DescKind::Recv, Some(1), false)]),
        ];
        assert_eq!(analyze(&ring).cycle, Some(vec![0, 2, 1]));
    }

    #[test]
    fn any_source_waits_for_every_other_member() {
        let b = [blocked(2, vec![op(DescKind::Recv, None, false)])];
        assert_eq!(analyze(&b).edges[&2], [0, 1, 3]);
        let b = [blocked(2, vec![op(DescKind::Cancel, None, false)])];
        assert!(analyze(&b).edges.is_empty());
    }
}
