//! Deadlock reports: who is blocked, in which call, waiting for whom, and the cycle.

use std::collections::BTreeMap;
use std::fmt;

use crate::descriptor::{ANY_SOURCE, COMM_SELF_BASE, COMM_WORLD};
use crate::sched::{PendingOp, Scheduler};
use crate::segment::{JobSegment, RankState};

#[derive(Clone, Debug)]
pub struct BlockedRank {
    pub rank: u32,
    /// The MPI call the rank is blocked in.
    pub call: &'static str,
    /// Its pending operations, each with the ranks it waits for.
    pub ops: Vec<PendingOp>,
}

#[derive(Clone, Debug)]
pub struct DeadlockReport {
    pub slice: u64,
    pub blocked: Vec<BlockedRank>,
    /// A wait-for cycle, as world ranks, if there is one (`[0, 1]` means 0 waits for 1
    /// and 1 waits for 0).
    pub cycle: Option<Vec<u32>>,
}

impl DeadlockReport {
    pub fn build(slice: u64, seg: &JobSegment, sched: &Scheduler, ranks: u32) -> Self {
        let blocked: Vec<BlockedRank> = (0..ranks)
            .filter(|&r| seg.slot(r).state() == RankState::Blocked)
            .map(|r| BlockedRank {
                rank: r,
                call: seg.slot(r).blocked_call().name(),
                ops: sched.pending_of(r),
            })
            .collect();
        let graph: BTreeMap<u32, Vec<u32>> = blocked
            .iter()
            .map(|b| {
                let mut w: Vec<u32> = b
                    .ops
                    .iter()
                    .flat_map(|o| o.waits_for.iter().copied())
                    .collect();
                w.sort_unstable();
                w.dedup();
                (b.rank, w)
            })
            .collect();
        DeadlockReport {
            slice,
            cycle: find_cycle(&graph),
            blocked,
        }
    }
}

/// Depth-first search for a cycle in the wait-for graph, starting from the lowest rank so
/// the same deadlock is always reported the same way.
pub fn find_cycle(graph: &BTreeMap<u32, Vec<u32>>) -> Option<Vec<u32>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Active,
        Done,
    }
    let mut mark: BTreeMap<u32, Mark> = graph.keys().map(|&k| (k, Mark::New)).collect();
    fn dfs(
        v: u32,
        graph: &BTreeMap<u32, Vec<u32>>,
        mark: &mut BTreeMap<u32, Mark>,
        path: &mut Vec<u32>,
    ) -> Option<Vec<u32>> {
        mark.insert(v, Mark::Active);
        path.push(v);
        for &w in graph.get(&v).map(|v| v.as_slice()).unwrap_or(&[]) {
            match mark.get(&w).copied() {
                Some(Mark::Active) => {
                    let start = path
                        .iter()
                        .position(|&x| x == w)
                        .expect("active is on path");
                    return Some(path[start..].to_vec());
                }
                Some(Mark::New) => {
                    if let Some(c) = dfs(w, graph, mark, path) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        mark.insert(v, Mark::Done);
        None
    }
    let keys: Vec<u32> = graph.keys().copied().collect();
    for k in keys {
        if mark[&k] == Mark::New {
            if let Some(c) = dfs(k, graph, &mut mark, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

fn comm_name(c: u32) -> String {
    match c {
        COMM_WORLD => "MPI_COMM_WORLD".into(),
        c if c >= COMM_SELF_BASE => "MPI_COMM_SELF".into(),
        c => format!("comm#{c}"),
    }
}

fn describe(o: &PendingOp) -> String {
    let peer = if o.peer == ANY_SOURCE {
        "MPI_ANY_SOURCE".to_string()
    } else {
        o.peer.to_string()
    };
    let tag = if o.tag == -1 {
        "MPI_ANY_TAG".to_string()
    } else {
        o.tag.to_string()
    };
    let what = o.kind.mpi_name();
    if o.kind.is_collective() {
        format!("{what}(comm={}, root={})", comm_name(o.comm), o.peer)
    } else if o.kind.is_send() {
        format!(
            "{what}(dest={peer}, tag={tag}, comm={}, {} bytes)",
            comm_name(o.comm),
            o.bytes
        )
    } else {
        format!(
            "{what}(source={peer}, tag={tag}, comm={}, {} bytes)",
            comm_name(o.comm),
            o.bytes
        )
    }
}

impl fmt::Display for DeadlockReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "deadlock in slice {}: every live rank is blocked and nothing can be scheduled",
            self.slice
        )?;
        for b in &self.blocked {
            writeln!(f, "  rank {} blocked in {}", b.rank, b.call)?;
            for o in &b.ops {
                let waits: Vec<String> = o.waits_for.iter().map(|w| w.to_string()).collect();
                writeln!(
                    f,
                    "    pending {} -> waits for rank(s) {}",
                    describe(o),
                    waits.join(", ")
                )?;
            }
        }
        match &self.cycle {
            Some(c) => {
                let mut s: Vec<String> = c.iter().map(|r| format!("rank {r}")).collect();
                s.push(format!("rank {}", c[0]));
                writeln!(f, "  wait-for cycle: {}", s.join(" -> "))
            }
            None => writeln!(
                f,
                "  no wait-for cycle: some rank waits for a rank that already finished"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_cycle_from_the_lowest_rank() {
        let g: BTreeMap<u32, Vec<u32>> =
            [(0, vec![1]), (1, vec![2]), (2, vec![1]), (3, vec![])].into();
        assert_eq!(find_cycle(&g), Some(vec![1, 2]));
        let g: BTreeMap<u32, Vec<u32>> = [(0, vec![1]), (1, vec![])].into();
        assert_eq!(find_cycle(&g), None);
    }
}
