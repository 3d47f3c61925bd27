//! Scheduler unit tests: no processes, no clock. The "virtual clock" is the slice counter
//! the tests advance by calling `schedule`.

use super::*;
use crate::datatype::{ElemType, ReduceOp};
use crate::descriptor::*;

/// Builds descriptors with per-rank sequence numbers, like ranks posting calls.
struct Job {
    seq: Vec<u64>,
    sched: Scheduler,
    slice: u64,
}

impl Job {
    fn new(ranks: u32) -> Self {
        Self::with(SchedConfig::single_node(ranks))
    }
    fn with(cfg: SchedConfig) -> Self {
        Job {
            seq: vec![0; cfg.ranks as usize],
            sched: Scheduler::new(cfg),
            slice: 0,
        }
    }
    fn desc(&mut self, rank: u32, kind: DescKind) -> Descriptor {
        let seq = self.seq[rank as usize];
        self.seq[rank as usize] += 1;
        Descriptor {
            rank,
            kind: kind as u8,
            seq,
            request: seq + 1,
            comm: COMM_WORLD,
            ..Default::default()
        }
    }
    fn send(&mut self, rank: u32, dest: i32, tag: i32, bytes: u64) -> Descriptor {
        let mut d = self.desc(rank, DescKind::Send);
        d.peer = dest;
        d.tag = tag;
        d.bytes = bytes;
        d
    }
    fn recv(&mut self, rank: u32, src: i32, tag: i32, bytes: u64) -> Descriptor {
        let mut d = self.desc(rank, DescKind::Recv);
        d.peer = src;
        d.tag = tag;
        d.bytes = bytes;
        d
    }
    fn coll(&mut self, rank: u32, kind: DescKind, root: i32, bytes: u64) -> Descriptor {
        let mut d = self.desc(rank, kind);
        d.peer = root;
        d.bytes = bytes;
        d.rbytes = bytes;
        d
    }
    /// Run one slice over descriptors given in any order (sorted canonically here, as the
    /// Buffer Receiver does).
    fn slice(&mut self, mut posted: Vec<Descriptor>) -> SliceDecisions {
        posted.sort_by_key(|d| d.id());
        self.slice += 1;
        self.sched
            .schedule(self.slice, &posted)
            .expect("canonical input")
    }
}

fn matches(s: &SliceDecisions) -> Vec<(DescRef, DescRef)> {
    s.decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Match(m) => Some((m.send, m.recv)),
            _ => None,
        })
        .collect()
}

fn completion(s: &SliceDecisions, id: DescRef) -> Option<(i32, i32, u64, RtError, u32, u64, u64)> {
    s.decisions
        .iter()
        .filter_map(Decision::completion)
        .find(|(desc, _)| *desc == id)
        .map(|(_, c)| {
            let error = RtError::from_u32(c.error);
            (c.source, c.tag, c.bytes, error, c.flags, c.value, c.value2)
        })
}

fn r(rank: u32, seq: u64) -> DescRef {
    DescRef { rank, seq }
}

#[test]
fn send_and_recv_in_one_slice_match_move_and_complete() {
    let mut j = Job::new(2);
    let s = j.send(0, 1, 7, 100);
    let rv = j.recv(1, 0, 7, 100);
    let out = j.slice(vec![rv, s]);
    assert_eq!(matches(&out), vec![(r(0, 0), r(1, 0))]);
    assert!(out.decisions.contains(&Decision::Chunk(Chunk {
        send: r(0, 0),
        recv: r(1, 0),
        offset: 0,
        len: 100
    })));
    let (src, tag, bytes, err, ..) = completion(&out, r(1, 0)).unwrap();
    assert_eq!((src, tag, bytes, err), (0, 7, 100, RtError::Ok));
    assert_eq!(completion(&out, r(0, 0)).unwrap().3, RtError::Ok);
    assert_eq!(out.wake, vec![0, 1]);
    assert_eq!(out.descriptor(r(0, 0)).unwrap().bytes, 100);
    assert_eq!(j.sched.live_descriptors(), 0);
}

#[test]
fn unmatched_send_waits_for_a_later_receive() {
    let mut j = Job::new(2);
    let s = j.send(0, 1, 1, 8);
    let out = j.slice(vec![s]);
    assert!(out.is_empty());
    let out = j.slice(vec![]);
    assert!(out.is_empty(), "nothing changes without input");
    let rv = j.recv(1, 0, 1, 8);
    let out = j.slice(vec![rv]);
    assert_eq!(matches(&out).len(), 1);
}

#[test]
fn non_overtaking_order_between_one_pair() {
    let mut j = Job::new(2);
    let a = j.send(0, 1, 5, 1);
    let b = j.send(0, 1, 5, 2);
    j.slice(vec![a, b]);
    let r1 = j.recv(1, 0, 5, 8);
    let r2 = j.recv(1, 0, 5, 8);
    let out = j.slice(vec![r1, r2]);
    assert_eq!(matches(&out), vec![(r(0, 0), r(1, 0)), (r(0, 1), r(1, 1))]);
    assert_eq!(completion(&out, r(1, 0)).unwrap().2, 1);
    assert_eq!(completion(&out, r(1, 1)).unwrap().2, 2);
}

#[test]
fn any_source_takes_earliest_slice_then_lowest_rank() {
    let mut j = Job::new(4);
    let late = j.send(1, 0, 0, 4);
    let s3 = j.send(3, 0, 0, 4);
    j.slice(vec![s3]);
    let s2 = j.send(2, 0, 0, 4);
    j.slice(vec![late, s2]);
    let rv = j.recv(0, ANY_SOURCE, ANY_TAG, 4);
    let rv2 = j.recv(0, ANY_SOURCE, ANY_TAG, 4);
    let rv3 = j.recv(0, ANY_SOURCE, ANY_TAG, 4);
    let out = j.slice(vec![rv, rv2, rv3]);
    let senders: Vec<u32> = matches(&out).iter().map(|(s, _)| s.rank).collect();
    assert_eq!(senders, vec![3, 1, 2], "slice posted first, then rank");
    assert_eq!(completion(&out, r(0, 0)).unwrap().0, 3);
}

#[test]
fn tag_selection_lets_a_later_message_match_first() {
    let mut j = Job::new(2);
    let a = j.send(0, 1, 1, 4);
    let b = j.send(0, 1, 2, 4);
    let rv = j.recv(1, 0, 2, 4);
    let out = j.slice(vec![a, b, rv]);
    assert_eq!(matches(&out), vec![(r(0, 1), r(1, 0))]);
}

#[test]
fn truncation_moves_what_fits_and_reports_the_error() {
    let mut j = Job::new(2);
    let s = j.send(0, 1, 0, 100);
    let rv = j.recv(1, 0, 0, 10);
    let out = j.slice(vec![s, rv]);
    let (_, _, bytes, err, ..) = completion(&out, r(1, 0)).unwrap();
    assert_eq!((bytes, err), (10, RtError::Truncate));
    assert_eq!(completion(&out, r(0, 0)).unwrap().3, RtError::Ok);
}

#[test]
fn large_messages_are_chunked_over_slices_within_the_node_budget() {
    let mut cfg = SchedConfig::single_node(2);
    cfg.chunk_budget = 1000;
    let mut j = Job::with(cfg);
    let s = j.send(0, 1, 0, 2500);
    let rv = j.recv(1, 0, 0, 2500);
    let mut chunks = Vec::new();
    let mut done_in = None;
    let mut out = j.slice(vec![s, rv]);
    for _ in 0..5 {
        for d in &out.decisions {
            if let Decision::Chunk(c) = d {
                chunks.push((c.offset, c.len));
            }
        }
        if completion(&out, r(1, 0)).is_some() {
            done_in = Some(out.slice);
            break;
        }
        assert!(!j.sched.is_quiescent());
        out = j.slice(vec![]);
    }
    assert_eq!(chunks, vec![(0, 1000), (1000, 1000), (2000, 500)]);
    assert_eq!(done_in, Some(3));
    assert!(j.sched.is_quiescent());
}

#[test]
fn budget_is_per_receiving_node() {
    let mut cfg = SchedConfig::single_node(4);
    cfg.node_of_rank = vec![0, 0, 1, 1];
    cfg.chunk_budget = 100;
    let mut j = Job::with(cfg);
    let a = j.send(0, 1, 0, 100);
    let b = j.send(2, 3, 0, 100);
    let ra = j.recv(1, 0, 0, 100);
    let rb = j.recv(3, 2, 0, 100);
    let out = j.slice(vec![a, b, ra, rb]);
    assert_eq!(out.counts().chunks, 2, "two nodes, one full budget each");
}

#[test]
fn probe_reports_without_consuming_and_iprobe_answers_now() {
    let mut j = Job::new(2);
    let mut ip = j.desc(1, DescKind::Iprobe);
    ip.peer = ANY_SOURCE;
    ip.tag = ANY_TAG;
    let out = j.slice(vec![ip]);
    let (.., flags, _, _) = completion(&out, r(1, 0)).unwrap();
    assert_eq!(flags & COMPLETION_FOUND, 0);

    let s = j.send(0, 1, 9, 33);
    let mut p = j.desc(1, DescKind::Probe);
    p.peer = 0;
    p.tag = ANY_TAG;
    let rv = j.recv(1, 0, 9, 64);
    let out = j.slice(vec![s, p, rv]);
    let (src, tag, bytes, ..) = completion(&out, r(1, 1)).unwrap();
    assert_eq!((src, tag, bytes), (0, 9, 33));
    assert_eq!(matches(&out), vec![(r(0, 0), r(1, 2))]);
}

#[test]
fn cancel_of_an_unmatched_receive_completes_it_cancelled() {
    let mut j = Job::new(2);
    let rv = j.recv(1, 0, 0, 8);
    j.slice(vec![rv]);
    let mut c = j.desc(1, DescKind::Cancel);
    c.aux = rv.request;
    c.request = 0;
    let out = j.slice(vec![c]);
    let (.., flags, _, _) = completion(&out, rv.id()).unwrap();
    assert_ne!(flags & COMPLETION_CANCELLED, 0);
    let s = j.send(0, 1, 0, 8);
    assert!(matches(&j.slice(vec![s])).is_empty());
}

#[test]
fn cancel_of_an_unmatched_send_completes_it_cancelled_and_a_matched_one_not() {
    let mut j = Job::new(2);
    let s = j.send(0, 1, 0, 8);
    j.slice(vec![s]);
    let mut c = j.desc(0, DescKind::Cancel);
    c.aux = s.request;
    c.request = 0;
    let out = j.slice(vec![c]);
    let (.., flags, _, _) = completion(&out, s.id()).unwrap();
    assert_ne!(flags & COMPLETION_CANCELLED, 0);
    // The cancelled message is gone: a receive does not match it.
    let rv = j.recv(1, 0, 0, 8);
    assert!(matches(&j.slice(vec![rv])).is_empty());
    // A send matched in the same slice as its receive cannot be cancelled any more.
    let s2 = j.send(0, 1, 0, 8);
    let out = j.slice(vec![s2]);
    assert_eq!(matches(&out), vec![(s2.id(), rv.id())]);
    let mut c2 = j.desc(0, DescKind::Cancel);
    c2.aux = s2.request;
    c2.request = 0;
    let out = j.slice(vec![c2]);
    assert!(completion(&out, s2.id()).is_none_or(|c| c.4 & COMPLETION_CANCELLED == 0));
}

#[test]
fn proc_null_and_bad_peers_complete_at_once() {
    let mut j = Job::new(2);
    let a = j.send(0, PROC_NULL, 0, 8);
    let b = j.recv(1, PROC_NULL, 0, 8);
    let c = j.send(0, 5, 0, 8);
    let mut d = j.recv(1, 0, 0, 8);
    d.comm = 77;
    let out = j.slice(vec![a, b, c, d]);
    assert_eq!(completion(&out, a.id()).unwrap().3, RtError::Ok);
    assert_eq!(completion(&out, b.id()).unwrap().0, PROC_NULL);
    assert_eq!(completion(&out, c.id()).unwrap().3, RtError::Rank);
    assert_eq!(completion(&out, d.id()).unwrap().3, RtError::Comm);
}

#[test]
fn out_of_order_input_is_refused() {
    let mut j = Job::new(2);
    let a = j.send(0, 1, 0, 8);
    let b = j.send(0, 1, 0, 8);
    let err = j.sched.schedule(1, &[b, a]).unwrap_err();
    assert!(matches!(err, SchedError::OutOfOrder { rank: 0, .. }));
}

#[test]
fn barrier_is_scheduled_when_the_last_member_arrives() {
    let mut j = Job::new(3);
    let a = j.coll(0, DescKind::Barrier, 0, 0);
    let b = j.coll(1, DescKind::Barrier, 0, 0);
    let out = j.slice(vec![a, b]);
    assert!(out.is_empty());
    let pending = j.sched.pending_of(0);
    assert_eq!(pending[0].waits_for, vec![2]);
    let c = j.coll(2, DescKind::Barrier, 0, 0);
    let out = j.slice(vec![c]);
    assert_eq!(out.counts().collectives, 1);
    assert_eq!(out.counts().completions, 3);
    assert_eq!(out.wake, vec![0, 1, 2]);
}

#[test]
fn mismatched_collectives_fail_instead_of_hanging() {
    let mut j = Job::new(2);
    let a = j.coll(0, DescKind::Barrier, 0, 0);
    let b = j.coll(1, DescKind::Bcast, 0, 8);
    let out = j.slice(vec![a, b]);
    assert_eq!(
        completion(&out, a.id()).unwrap().3,
        RtError::CollectiveMismatch
    );
    let a = j.coll(0, DescKind::Bcast, 0, 8);
    let b = j.coll(1, DescKind::Bcast, 1, 8);
    let out = j.slice(vec![a, b]);
    assert_eq!(
        completion(&out, b.id()).unwrap().3,
        RtError::CollectiveMismatch
    );
}

#[test]
fn reductions_check_op_and_sizes() {
    let mut j = Job::new(2);
    let mut a = j.coll(0, DescKind::Allreduce, 0, 16);
    let mut b = j.coll(1, DescKind::Allreduce, 0, 8);
    for d in [&mut a, &mut b] {
        d.op = ReduceOp::Sum as u8;
        d.elem = ElemType::F64 as u8;
    }
    let out = j.slice(vec![a, b]);
    assert_eq!(completion(&out, a.id()).unwrap().3, RtError::Count);
}

#[test]
fn split_groups_by_colour_orders_by_key_and_numbers_comms_deterministically() {
    let mut j = Job::new(4);
    let mut ds = Vec::new();
    for (rank, colour, key) in [(0, 1, 5), (1, 0, 0), (2, 1, 1), (3, SPLIT_UNDEFINED, 0)] {
        let mut d = j.desc(rank, DescKind::CommSplit);
        d.aux = colour as u64;
        d.aux2 = key as u64;
        ds.push(d);
    }
    let out = j.slice(ds.clone());
    let new: Vec<(u32, Vec<u32>)> = out
        .decisions
        .iter()
        .filter_map(|d| match d {
            Decision::NewComm(n) => Some((n.comm, n.members.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(new, vec![(2, vec![1]), (3, vec![2, 0])]);
    let (.., value, value2) = completion(&out, ds[0].id()).unwrap();
    assert_eq!((value, value2), (3, (1 << 32) | 2));
    assert_eq!(completion(&out, ds[3].id()).unwrap().5, u64::MAX);

    // The new communicator works for point-to-point with its own ranks.
    let mut s = j.send(2, 1, 0, 4);
    s.comm = 3;
    let mut rv = j.recv(0, 0, 0, 4);
    rv.comm = 3;
    let out = j.slice(vec![s, rv]);
    assert_eq!(matches(&out).len(), 1);
    assert_eq!(
        completion(&out, rv.id()).unwrap().0,
        0,
        "source in comm ranks"
    );
    // A non-member cannot use it.
    let mut bad = j.send(1, 0, 0, 4);
    bad.comm = 3;
    assert_eq!(
        completion(&j.slice(vec![bad]), bad.id()).unwrap().3,
        RtError::Comm
    );
}

#[test]
fn comm_self_is_private_to_each_rank() {
    let mut j = Job::new(2);
    let mut a = j.coll(0, DescKind::Barrier, 0, 0);
    a.comm = comm_self(0);
    let mut s = j.send(1, 0, 0, 4);
    s.comm = comm_self(1);
    let mut rv = j.recv(1, 0, 0, 4);
    rv.comm = comm_self(1);
    let mut wrong = j.send(0, 0, 0, 4);
    wrong.comm = comm_self(1);
    let out = j.slice(vec![a, s, rv, wrong]);
    assert_eq!(out.counts().collectives, 1);
    assert_eq!(matches(&out).len(), 1);
    assert_eq!(completion(&out, wrong.id()).unwrap().3, RtError::Comm);
}

#[test]
fn deadlock_wait_for_graph_from_pending_operations() {
    let mut j = Job::new(3);
    let a = j.recv(0, 1, 0, 4);
    let b = j.recv(1, 2, 0, 4);
    let c = j.recv(2, 0, 0, 4);
    let out = j.slice(vec![a, b, c]);
    assert!(out.is_empty());
    assert!(j.sched.is_quiescent());
    let graph: Vec<Vec<u32>> = (0..3)
        .map(|r| j.sched.pending_of(r)[0].waits_for.clone())
        .collect();
    assert_eq!(graph, vec![vec![1], vec![2], vec![0]]);
}

#[test]
fn same_input_same_digest_and_different_input_different_digest() {
    let run = |tag: i32| {
        let mut j = Job::new(3);
        let mut digests = Vec::new();
        for round in 0..5 {
            let s = j.send(round % 3, ((round + 1) % 3) as i32, tag, 64);
            let rv = j.recv((round + 1) % 3, (round % 3) as i32, ANY_TAG, 64);
            digests.push(j.slice(vec![s, rv]).digest());
        }
        digests
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn finalize_is_collective_over_the_world() {
    let mut j = Job::new(3);
    let a = j.desc(0, DescKind::Finalize);
    let b = j.desc(2, DescKind::Finalize);
    assert!(j.slice(vec![a, b]).is_empty(), "waits for rank 1");
    assert_eq!(j.sched.pending_of(0)[0].waits_for, vec![1]);
    let c = j.desc(1, DescKind::Finalize);
    let out = j.slice(vec![c]);
    assert_eq!(out.counts().completions, 3);
    assert!((0..3).all(|r| j.sched.finalized(r)));
}

fn group_create(j: &mut Job, rank: u32, key: u64, me: u64, size: u64, first: i32) -> Descriptor {
    let mut d = j.desc(rank, DescKind::CommSplit);
    d.flags = FLAG_GROUP;
    d.aux = key;
    d.aux2 = me;
    d.bytes = size;
    d.peer = first;
    d
}

fn new_comms(s: &SliceDecisions) -> Vec<(u32, Vec<u32>)> {
    s.decisions
        .iter()
        .filter_map(|d| match d {
            Decision::NewComm(n) => Some((n.comm, n.members.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_group_creates_a_communicator_without_the_rest_of_its_parent() {
    let mut j = Job::new(4);
    // Ranks 3 and 1 (in that new order) create a communicator; 0 and 2 never take part.
    let a = group_create(&mut j, 3, 77, 0, 2, 0);
    let out = j.slice(vec![a]);
    assert!(new_comms(&out).is_empty(), "waits for every member");
    let b = group_create(&mut j, 1, 77, 1, 2, 0);
    let out = j.slice(vec![b]);
    assert_eq!(new_comms(&out), vec![(2, vec![3, 1])]);
    assert_eq!(completion(&out, a.id()).unwrap().5, 2);
    assert_eq!(completion(&out, b.id()).unwrap().6, (1 << 32) | 2);
    // Two creations with one key in a row stay apart, in posting order.
    let c1 = group_create(&mut j, 3, 77, 0, 2, 0);
    let c2 = group_create(&mut j, 3, 77, 0, 2, 0);
    let d1 = group_create(&mut j, 1, 77, 1, 2, 0);
    let out = j.slice(vec![c1, c2, d1]);
    assert_eq!(new_comms(&out), vec![(3, vec![3, 1])]);
    assert!(completion(&out, c2.id()).is_none());
}

#[test]
fn group_creations_that_disagree_fail_instead_of_hanging() {
    let mut j = Job::new(3);
    let a = group_create(&mut j, 0, 5, 0, 2, 0);
    let b = group_create(&mut j, 1, 5, 1, 3, 0);
    let out = j.slice(vec![a, b]);
    assert_eq!(
        completion(&out, b.id()).unwrap().3,
        RtError::CollectiveMismatch
    );
    // The same world rank at both positions.
    let c = group_create(&mut j, 2, 8, 1, 2, 0);
    let d = group_create(&mut j, 2, 8, 0, 2, 0);
    let out = j.slice(vec![c, d]);
    assert_eq!(
        completion(&out, c.id()).unwrap().3,
        RtError::CollectiveMismatch
    );
    assert_eq!(
        completion(&out, d.id()).unwrap().3,
        RtError::CollectiveMismatch
    );
    // Members disagreeing on the intercommunicator split.
    let e = group_create(&mut j, 0, 9, 0, 2, 1);
    let f = group_create(&mut j, 1, 9, 1, 2, 0);
    let out = j.slice(vec![e, f]);
    assert_eq!(
        completion(&out, f.id()).unwrap().3,
        RtError::CollectiveMismatch
    );
    let bad = group_create(&mut j, 0, 6, 2, 2, 0);
    let out = j.slice(vec![bad]);
    assert_eq!(completion(&out, bad.id()).unwrap().3, RtError::Rank);
}

#[test]
fn an_intercommunicator_context_names_the_remote_group() {
    let mut j = Job::new(4);
    // Groups {0, 2} and {3, 1}: the context holds [0, 2, 3, 1], first group of 2.
    let parts: Vec<Descriptor> = [(0, 0), (2, 1), (3, 2), (1, 3)]
        .into_iter()
        .map(|(rank, me)| group_create(&mut j, rank, 9, me, 4, 2))
        .collect();
    let out = j.slice(parts);
    assert_eq!(new_comms(&out), vec![(2, vec![0, 2, 3, 1])]);
    // Rank 2 (local rank 1 of the first group) sends to remote rank 1 = world rank 1,
    // which receives from remote rank 1 = world rank 2.
    let mut s = j.send(2, 1, 4, 8);
    s.comm = 2;
    let mut r = j.recv(1, 1, 4, 8);
    r.comm = 2;
    let out = j.slice(vec![s, r]);
    assert_eq!(matches(&out), vec![(s.id(), r.id())]);
    // ANY_SOURCE reports the sender's rank in the receiver's remote group.
    let mut s = j.send(3, 0, 4, 8);
    s.comm = 2;
    let mut r = j.recv(0, ANY_SOURCE, 4, 8);
    r.comm = 2;
    let out = j.slice(vec![s, r]);
    assert_eq!(completion(&out, r.id()).unwrap().0, 0);
    // Collectives on the context itself are refused.
    let parts: Vec<Descriptor> = (0..4)
        .map(|rank| {
            let mut d = j.coll(rank, DescKind::Barrier, -1, 0);
            d.comm = 2;
            d
        })
        .collect();
    let out = j.slice(parts.clone());
    assert_eq!(completion(&out, parts[0].id()).unwrap().3, RtError::Comm);
}

/// A job with the eager protocol of scheduler version 2 and a small node-memory budget.
fn eager_job(ranks: u32, budget: u64) -> Job {
    let mut cfg = SchedConfig::single_node(ranks);
    cfg.eager_max = SchedConfig::eager_max_for_version(2);
    cfg.eager_budget = budget;
    Job::with(cfg)
}

fn chunks(s: &SliceDecisions) -> Vec<Chunk> {
    s.decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Chunk(c) => Some(*c),
            _ => None,
        })
        .collect()
}

#[test]
fn eager_send_completes_in_its_slice_and_the_receive_gets_it_later() {
    let mut j = eager_job(2, DEFAULT_EAGER_BUDGET);
    let s = j.send(0, 1, 3, 100);
    let out = j.slice(vec![s]);
    let (_, tag, bytes, err, flags, ..) = completion(&out, r(0, 0)).expect("eager completion");
    assert_eq!(
        (tag, bytes, err, flags),
        (3, 100, RtError::Ok, COMPLETION_EAGER)
    );
    assert_eq!(out.wake, vec![0]);
    assert!(matches(&out).is_empty() && chunks(&out).is_empty());
    let line = out
        .decisions
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>();
    assert_eq!(
        line,
        vec!["complete 0#0 req 1: source 1 tag 3, 100 bytes, eager"]
    );
    assert!(
        j.sched.pending_of(0).is_empty(),
        "an eager send waits for nothing"
    );
    let rv = j.recv(1, 0, 3, 100);
    let out = j.slice(vec![rv]);
    assert_eq!(matches(&out), vec![(r(0, 0), r(1, 0))]);
    assert_eq!(chunks(&out).len(), 1);
    assert!(
        completion(&out, r(0, 0)).is_none(),
        "the send completes once"
    );
    assert_eq!(completion(&out, r(1, 0)).unwrap().2, 100);
    assert_eq!(out.wake, vec![1]);
    assert_eq!(j.sched.live_descriptors(), 0);
}

#[test]
fn synchronous_large_and_matched_sends_are_not_eager() {
    let mut j = eager_job(2, DEFAULT_EAGER_BUDGET);
    let mut ss = j.send(0, 1, 1, 8);
    ss.kind = DescKind::Ssend as u8;
    let big = j.send(0, 1, 2, DEFAULT_EAGER_MAX + 1);
    let out = j.slice(vec![ss, big]);
    assert!(out.is_empty(), "MPI_Ssend and a large send wait: {out:?}");
    // A send matched in the slice it is exchanged in moves at once, without the eager copy.
    let s = j.send(0, 1, 4, 8);
    let rv = j.recv(1, 0, 4, 8);
    let out = j.slice(vec![s, rv]);
    assert_eq!(completion(&out, s.id()).unwrap().4, 0);
}

#[test]
fn eager_budget_bounds_node_memory_and_is_freed_on_delivery() {
    let mut j = eager_job(2, 150);
    let a = j.send(0, 1, 1, 100);
    let b = j.send(0, 1, 1, 100);
    let out = j.slice(vec![a, b]);
    assert_eq!(completion(&out, a.id()).unwrap().4, COMPLETION_EAGER);
    assert!(completion(&out, b.id()).is_none(), "over the budget: waits");
    let r1 = j.recv(1, 0, 1, 100);
    let out = j.slice(vec![r1]);
    assert_eq!(matches(&out), vec![(a.id(), r1.id())]);
    // The budget is free again: the next small send is eager.
    let c = j.send(0, 1, 9, 100);
    let out = j.slice(vec![c]);
    assert_eq!(completion(&out, c.id()).unwrap().4, COMPLETION_EAGER);
}

#[test]
fn eager_off_in_version_1_keeps_the_old_decisions() {
    assert_eq!(SchedConfig::eager_max_for_version(1), 0);
    let mut j = Job::new(2);
    let s = j.send(0, 1, 1, 8);
    assert!(j.slice(vec![s]).is_empty());
}

#[test]
fn cancel_with_eager_sends_never_loses_or_panics() {
    // Cancelled in the slice it is exchanged in: cancelled, never made eager.
    let mut j = eager_job(2, DEFAULT_EAGER_BUDGET);
    let s = j.send(0, 1, 0, 8);
    let mut c = j.desc(0, DescKind::Cancel);
    c.aux = s.request;
    c.request = 0;
    let out = j.slice(vec![s, c]);
    let (.., flags, _, _) = completion(&out, s.id()).unwrap();
    assert_ne!(flags & COMPLETION_CANCELLED, 0);
    assert_eq!(flags & COMPLETION_EAGER, 0);
    // Completed eagerly first: the cancel has no effect and the message is still delivered.
    let s2 = j.send(0, 1, 1, 8);
    let out = j.slice(vec![s2]);
    assert_eq!(completion(&out, s2.id()).unwrap().4, COMPLETION_EAGER);
    let mut c2 = j.desc(0, DescKind::Cancel);
    c2.aux = s2.request;
    c2.request = 0;
    let out = j.slice(vec![c2]);
    assert!(
        completion(&out, s2.id()).is_none(),
        "completed once, not cancelled"
    );
    let rv = j.recv(1, 0, 1, 8);
    let out = j.slice(vec![rv]);
    assert_eq!(matches(&out), vec![(s2.id(), rv.id())]);
}

/// An inline send (scheduler version 3) of `bytes` bytes: its payload in the descriptor.
fn inline_send(j: &mut Job, rank: u32, dest: i32, tag: i32, bytes: u64) -> Descriptor {
    let mut s = j.send(rank, dest, tag, bytes);
    assert!(s.set_inline_payload(&vec![0xA5; bytes as usize]));
    s
}

#[test]
fn inline_send_completes_where_exchanged_wakes_nobody_and_completes_once() {
    let mut j = eager_job(2, DEFAULT_EAGER_BUDGET);
    let s = inline_send(&mut j, 0, 1, 3, 8);
    let out = j.slice(vec![s]);
    let (_, tag, bytes, err, flags, ..) = completion(&out, s.id()).expect("inline completion");
    assert_eq!(
        (tag, bytes, err, flags),
        (3, 8, RtError::Ok, COMPLETION_INLINE)
    );
    assert!(out.wake.is_empty(), "the rank completed it when it posted");
    assert_eq!(
        out.decisions[0].to_string(),
        "complete 0#0 req 1: source 1 tag 3, 8 bytes, inline"
    );
    assert!(
        j.sched.pending_of(0).is_empty(),
        "the sender waits for nothing"
    );
    let rv = j.recv(1, ANY_SOURCE, ANY_TAG, 64);
    let out = j.slice(vec![rv]);
    assert_eq!(matches(&out), vec![(s.id(), rv.id())]);
    assert_eq!(chunks(&out).len(), 1);
    assert!(completion(&out, s.id()).is_none(), "completed once");
    assert_eq!(completion(&out, rv.id()).unwrap().2, 8);
    assert_eq!(j.sched.live_descriptors(), 0);
    // Matched in the slice it is exchanged in: completed inline all the same, once.
    let s = inline_send(&mut j, 0, 1, 4, 1);
    let rv = j.recv(1, 0, 4, 1);
    let out = j.slice(vec![s, rv]);
    let done: Vec<_> = out
        .decisions
        .iter()
        .filter_map(Decision::completion)
        .filter(|(d, _)| *d == s.id())
        .collect();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].1.flags, COMPLETION_INLINE);
}

/// `a` (an inline or arena send, in a job with a 100-byte eager budget) completes in the
/// slice it is exchanged in, flagged inline, and a 100-byte send beside it still completes
/// eagerly: its bytes took none of the budget (they are in the descriptor, or the node
/// manager holds them already).
/// Returns that send.
fn completes_at_post_and_leaves_the_eager_budget(j: &mut Job, a: Descriptor) -> Descriptor {
    let b = j.send(0, 1, 1, 100);
    let out = j.slice(vec![a, b]);
    assert_eq!(completion(&out, a.id()).unwrap().4, COMPLETION_INLINE);
    assert_eq!(
        completion(&out, b.id()).unwrap().4,
        COMPLETION_EAGER,
        "inline and arena bytes take no eager budget"
    );
    b
}

#[test]
fn inline_sends_keep_the_eager_budget_and_cannot_be_cancelled() {
    let mut j = eager_job(2, 100);
    let a = inline_send(&mut j, 0, 1, 1, INLINE_MAX);
    let b = completes_at_post_and_leaves_the_eager_budget(&mut j, a);
    let mut c = j.desc(0, DescKind::Cancel);
    c.aux = a.request;
    c.request = 0;
    let out = j.slice(vec![c]);
    assert!(completion(&out, a.id()).is_none(), "not cancelled");
    let r1 = j.recv(1, 0, 1, 64);
    let r2 = j.recv(1, 0, 1, 100);
    let out = j.slice(vec![r1, r2]);
    assert_eq!(matches(&out), vec![(a.id(), r1.id()), (b.id(), r2.id())]);
    assert_eq!(j.sched.live_descriptors(), 0);
}

#[test]
fn a_malformed_inline_descriptor_is_an_argument_error() {
    let mut j = eager_job(2, DEFAULT_EAGER_BUDGET);
    let mut big = j.send(0, 1, 1, RANK_COPY_MAX + 1);
    big.flags |= FLAG_INLINE;
    let mut ss = inline_send(&mut j, 0, 1, 1, 4);
    ss.kind = DescKind::Ssend as u8;
    let out = j.slice(vec![big, ss]);
    for d in [big, ss] {
        let (.., err, flags, _, _) = completion(&out, d.id()).unwrap();
        assert_eq!((err, flags), (RtError::Arg, COMPLETION_INLINE));
    }
    assert_eq!(SchedConfig::inline_max_for_version(2), 0);
    assert_eq!(SchedConfig::inline_max_for_version(3), INLINE_MAX);
    assert_eq!(SchedConfig::inline_max_for_version(4), INLINE_MAX);
    assert_eq!(SchedConfig::inline_max_for_version(5), RANK_COPY_MAX);
}

#[test]
fn an_arena_send_completes_when_posted_like_an_inline_one() {
    let mut j = eager_job(2, 100);
    let mut a = j.send(0, 1, 1, RANK_COPY_MAX);
    a.flags |= FLAG_INLINE;
    assert!(a.in_arena() && a.inline_payload().is_none());
    let b = completes_at_post_and_leaves_the_eager_budget(&mut j, a);
    let r1 = j.recv(1, 0, 1, 64);
    let r2 = j.recv(1, 0, 1, 100);
    let out = j.slice(vec![r1, r2]);
    assert_eq!(matches(&out), vec![(a.id(), r1.id()), (b.id(), r2.id())]);
    assert_eq!(j.sched.live_descriptors(), 0);
}

#[test]
fn local_proc_null_calls_complete_where_exchanged_and_wake_nobody() {
    let mut j = eager_job(2, DEFAULT_EAGER_BUDGET);
    let mut send = j.send(0, PROC_NULL, 7, 4096);
    send.flags |= FLAG_LOCAL | FLAG_BLOCKING;
    let mut ssend = j.send(0, PROC_NULL, 7, 8);
    ssend.kind = DescKind::Ssend as u8;
    ssend.flags |= FLAG_LOCAL;
    let mut recv = j.recv(1, PROC_NULL, 9, 64);
    recv.flags |= FLAG_LOCAL;
    let plain = j.recv(1, PROC_NULL, 9, 64);
    let out = j.slice(vec![send, ssend, recv, plain]);
    for d in [send, ssend, recv] {
        let (src, tag, bytes, err, flags, ..) = completion(&out, d.id()).expect("completion");
        assert_eq!(
            (src, tag, bytes, err, flags),
            (PROC_NULL, ANY_TAG, 0, RtError::Ok, COMPLETION_INLINE)
        );
    }
    assert_eq!(
        completion(&out, plain.id()).unwrap().4,
        0,
        "without the flag: delivered as before (scheduler version 3)"
    );
    assert_eq!(
        out.wake,
        vec![1],
        "only the unflagged receive wakes its rank"
    );
    assert_eq!(j.sched.live_descriptors(), 0);
}

#[test]
fn a_local_descriptor_with_a_real_peer_is_an_argument_error() {
    let mut j = eager_job(2, DEFAULT_EAGER_BUDGET);
    let mut send = j.send(0, 1, 1, 8);
    send.flags |= FLAG_LOCAL;
    let mut recv = j.recv(1, 0, 1, 8);
    recv.flags |= FLAG_LOCAL;
    let out = j.slice(vec![send, recv]);
    for d in [send, recv] {
        let (.., err, flags, _, _) = completion(&out, d.id()).unwrap();
        assert_eq!((err, flags), (RtError::Arg, COMPLETION_INLINE));
    }
    assert!(matches(&out).is_empty());
    assert!(!SchedConfig::local_null_for_version(3));
    assert!(SchedConfig::local_null_for_version(4));
}
