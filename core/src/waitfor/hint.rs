//! The classic deadlock patterns, recognised from the blocked ranks' pending operations and
//! their wait-for graph, each with a hint a reader who did not write the program can act on.
//!
//! Patterns (a report can show several; they are given in this order):
//!
//! * **send–send without buffering**: the ranks of a wait-for cycle are each in a blocking
//!   send to the next rank of the cycle, so nobody reaches its receive;
//! * **collective mismatch**: a rank waits in a collective on a communicator while another
//!   blocked member of it is in a different collective on it, or in no collective on it
//!   (point-to-point, or a collective on another communicator);
//! * **wildcard receive starvation**: an `MPI_ANY_SOURCE` receive or probe waits while every
//!   other member of its communicator is blocked elsewhere, so no sender can come.

use std::fmt;

use super::{Blocked, WaitFor};
use crate::descriptor::DescKind;

/// One recognised pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// The ranks of the cycle, in cycle order, each blocked sending to the next.
    SendSend { ranks: Vec<u32> },
    /// On communicator `comm`, `rank` waits in collective `kind`, while `other` (a blocked
    /// member) is in `other_call` instead.
    CollectiveMismatch {
        comm: u32,
        rank: u32,
        kind: DescKind,
        other: u32,
        other_call: DescKind,
    },
    /// `rank` waits in an `MPI_ANY_SOURCE` receive (or probe) and every other member of the
    /// communicator is blocked elsewhere.
    WildcardStarvation { rank: u32, kind: DescKind },
}

/// The patterns found among `blocked` (whose analysis is `wf`), in the order above.
pub fn classify(blocked: &[Blocked], wf: &WaitFor) -> Vec<Pattern> {
    let mut out = Vec::new();
    if let Some(p) = send_send(blocked, wf) {
        out.push(p);
    }
    out.extend(collective_mismatch(blocked));
    out.extend(wildcard_starvation(blocked));
    out
}

fn ops_of(blocked: &[Blocked], rank: u32) -> impl Iterator<Item = &super::WaitOp> {
    blocked
        .iter()
        .filter(move |b| b.rank == rank)
        .flat_map(|b| b.ops.iter().filter(|o| !o.matched))
}

fn send_send(blocked: &[Blocked], wf: &WaitFor) -> Option<Pattern> {
    let cycle = wf.cycle.as_ref()?;
    let all_send = cycle.iter().enumerate().all(|(i, &r)| {
        let next = cycle[(i + 1) % cycle.len()];
        ops_of(blocked, r).any(|o| o.kind.is_send() && o.peer == Some(next))
    });
    all_send.then(|| Pattern::SendSend {
        ranks: cycle.clone(),
    })
}

/// The first mismatch: the lowest rank in a collective, against the lowest blocked member
/// of that communicator doing something else.
fn collective_mismatch(blocked: &[Blocked]) -> Option<Pattern> {
    let mut sorted: Vec<&Blocked> = blocked.iter().collect();
    sorted.sort_by_key(|b| b.rank);
    for b in &sorted {
        for o in b
            .ops
            .iter()
            .filter(|o| !o.matched && o.kind.is_collective())
        {
            for other in sorted.iter().filter(|x| x.rank != b.rank) {
                if !o.members.contains(&other.rank) {
                    continue;
                }
                let mut theirs = other.ops.iter().filter(|x| !x.matched);
                let same_comm = theirs
                    .clone()
                    .find(|x| x.kind.is_collective() && x.comm == o.comm);
                let other_call = match same_comm {
                    Some(x) if x.kind == o.kind => continue,
                    Some(x) => x.kind,
                    None => match theirs.next() {
                        Some(x) => x.kind,
                        None => continue,
                    },
                };
                return Some(Pattern::CollectiveMismatch {
                    comm: o.comm,
                    rank: b.rank,
                    kind: o.kind,
                    other: other.rank,
                    other_call,
                });
            }
        }
    }
    None
}

fn wildcard_starvation(blocked: &[Blocked]) -> Option<Pattern> {
    let is_blocked = |r: u32| blocked.iter().any(|b| b.rank == r);
    let mut sorted: Vec<&Blocked> = blocked.iter().collect();
    sorted.sort_by_key(|b| b.rank);
    sorted.iter().find_map(|b| {
        b.ops
            .iter()
            .filter(|o| !o.matched && o.peer.is_none() && !o.kind.is_send())
            .filter(|o| matches!(o.kind, DescKind::Recv | DescKind::Probe | DescKind::Iprobe))
            .find(|o| {
                o.members
                    .iter()
                    .filter(|&&m| m != b.rank)
                    .all(|&m| is_blocked(m))
            })
            .map(|o| Pattern::WildcardStarvation {
                rank: b.rank,
                kind: o.kind,
            })
    })
}

fn ranks_text(ranks: &[u32]) -> String {
    let names: Vec<String> = ranks.iter().map(|r| r.to_string()).collect();
    match names.len() {
        0 | 1 => names.join(""),
        2 => format!("{} and {}", names[0], names[1]),
        n => format!("{} and {}", names[..n - 1].join(", "), names[n - 1]),
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::SendSend { ranks } => write!(
                f,
                "send-send without buffering: ranks {} each wait in a blocking send to the next \
                 one, and none has reached its receive. Use MPI_Sendrecv, or post the receive \
                 first (MPI_Irecv, then the send, then MPI_Wait), or order the calls by rank \
                 (even ranks send first, odd ranks receive first).",
                ranks_text(ranks)
            ),
            Pattern::CollectiveMismatch {
                rank,
                kind,
                other,
                other_call,
                ..
            } => write!(
                f,
                "collective mismatch: rank {rank} waits in {} while rank {other} is in {} \
                 instead. Every member of a communicator must call the same collectives in \
                 the same order; check the branches around these calls.",
                kind.mpi_name(),
                other_call.mpi_name()
            ),
            Pattern::WildcardStarvation { rank, kind } => write!(
                f,
                "wildcard receive starvation: rank {rank} waits in {}(MPI_ANY_SOURCE) but every \
                 rank that could send to it is blocked elsewhere, so no message can come. \
                 Check that some rank still sends what this receive expects before it blocks.",
                kind.mpi_name()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{analyze, WaitOp};
    use super::*;

    const WORLD: [u32; 4] = [0, 1, 2, 3];

    fn op(kind: DescKind, comm: u32, peer: Option<u32>) -> WaitOp {
        WaitOp {
            kind,
            comm,
            peer,
            members: WORLD.to_vec(),
            matched: false,
        }
    }

    fn blocked(rank: u32, ops: Vec<WaitOp>) -> Blocked {
        Blocked { rank, ops }
    }

    fn patterns(b: &[Blocked]) -> Vec<Pattern> {
        classify(b, &analyze(b))
    }

    #[test]
    fn two_ranks_sending_to_each_other_are_send_send() {
        let b = [
            blocked(0, vec![op(DescKind::Send, 0, Some(1))]),
            blocked(1, vec![op(DescKind::Ssend, 0, Some(0))]),
        ];
        let p = patterns(&b);
        assert_eq!(p, [Pattern::SendSend { ranks: vec![0, 1] }]);
        let text = p[0].to_string();
        assert!(text.contains("ranks 0 and 1"), "{text}");
        assert!(text.contains("MPI_Sendrecv"), "{text}");
    }

    #[test]
    fn a_receive_cycle_is_not_send_send() {
        let b = [
            blocked(0, vec![op(DescKind::Recv, 0, Some(1))]),
            blocked(1, vec![op(DescKind::Recv, 0, Some(0))]),
        ];
        assert_eq!(patterns(&b), []);
        // A ring of three sends is send-send too.
        let ring = [
            blocked(0, vec![op(DescKind::Send, 0, Some(1))]),
            blocked(1, vec![op(DescKind::Send, 0, Some(2))]),
            blocked(2, vec![op(DescKind::Send, 0, Some(0))]),
        ];
        assert_eq!(
            patterns(&ring),
            [Pattern::SendSend {
                ranks: vec![0, 1, 2]
            }]
        );
    }

    #[test]
    fn a_barrier_against_a_receive_is_a_collective_mismatch() {
        let b = [
            blocked(0, vec![op(DescKind::Barrier, 0, Some(0))]),
            blocked(1, vec![op(DescKind::Recv, 0, Some(0))]),
        ];
        let p = patterns(&b);
        assert_eq!(
            p,
            [Pattern::CollectiveMismatch {
                comm: 0,
                rank: 0,
                kind: DescKind::Barrier,
                other: 1,
                other_call: DescKind::Recv,
            }]
        );
        assert!(
            p[0].to_string().contains("rank 1 is in MPI_Recv"),
            "{}",
            p[0]
        );
        // Different collectives on the same communicator.
        let b = [
            blocked(0, vec![op(DescKind::Barrier, 0, Some(0))]),
            blocked(1, vec![op(DescKind::Bcast, 0, Some(0))]),
        ];
        assert!(matches!(
            patterns(&b)[..],
            [Pattern::CollectiveMismatch {
                other_call: DescKind::Bcast,
                ..
            }]
        ));
        // Everybody in the same barrier (some not arrived yet): no mismatch.
        let b = [
            blocked(0, vec![op(DescKind::Barrier, 0, Some(0))]),
            blocked(1, vec![op(DescKind::Barrier, 0, Some(0))]),
        ];
        assert_eq!(patterns(&b), []);
    }

    #[test]
    fn an_any_source_receive_with_every_sender_blocked_is_starvation() {
        let any = |r| blocked(r, vec![op(DescKind::Recv, 0, None)]);
        let b = [
            any(0),
            blocked(1, vec![op(DescKind::Recv, 0, Some(2))]),
            blocked(2, vec![op(DescKind::Recv, 0, Some(1))]),
            blocked(3, vec![op(DescKind::Recv, 0, Some(1))]),
        ];
        let p = patterns(&b);
        assert!(
            p.contains(&Pattern::WildcardStarvation {
                rank: 0,
                kind: DescKind::Recv
            }),
            "{p:?}"
        );
        assert!(p
            .iter()
            .any(|p| p.to_string().contains("MPI_Recv(MPI_ANY_SOURCE)")));
        // Rank 3 still computing: it may yet send; no starvation.
        assert!(!patterns(&b[..3])
            .iter()
            .any(|p| matches!(p, Pattern::WildcardStarvation { .. })));
    }
}
