//! Deadlock reports: who is blocked, in which call, waiting for whom, and the cycle.

use std::fmt;

use crate::descriptor::{ANY_SOURCE, COMM_SELF_BASE, COMM_WORLD};
use crate::sched::{PendingOp, Scheduler};
use crate::segment::{JobSegment, RankState};
use strobe_core::waitfor::{self, Blocked, WaitOp};

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
        let input: Vec<Blocked> = blocked
            .iter()
            .map(|b| Blocked {
                rank: b.rank,
                ops: b.ops.iter().map(|o| wait_op(sched, b.rank, o)).collect(),
            })
            .collect();
        let cycle = waitfor::analyze(&input).cycle;
        if let Some(c) = &cycle {
            tracing::info!(slice, cycle = ?c, "deadlock with a wait-for cycle");
        }
        DeadlockReport {
            slice,
            cycle,
            blocked,
        }
    }
}

/// The wait-for analysis' view of a pending operation: world ranks instead of
/// communicator ranks. At a deadlock nothing pending is matched (the scheduler is
/// quiescent: no transfer in flight).
fn wait_op(sched: &Scheduler, rank: u32, o: &PendingOp) -> WaitOp {
    let members = sched
        .comms()
        .get(o.comm, rank)
        .map(|c| c.members())
        .unwrap_or_default();
    let peer = u32::try_from(o.peer)
        .ok()
        .and_then(|p| members.get(p as usize).copied());
    WaitOp {
        kind: o.kind,
        comm: o.comm,
        peer: if o.peer == ANY_SOURCE { None } else { peer },
        members,
        matched: false,
    }
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
