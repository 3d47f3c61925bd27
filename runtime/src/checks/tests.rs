//! The checker driven by a real scheduler (`super::Checker`).

use super::*;
use crate::descriptor::{ANY_TAG, FLAG_BLOCKING};
use crate::engine::{GlobalMetrics, StartReason};
use crate::sched::{SchedConfig, Scheduler};

/// Drives a real scheduler over slices of descriptors and feeds the checker what a
/// node manager would: each slice's batch and decisions.
struct Job {
    sched: Scheduler,
    checker: Checker,
    slice: u64,
    next_seq: Vec<u64>,
}

impl Job {
    fn new(ranks: u32) -> Job {
        let mut cfg = SchedConfig::single_node(ranks);
        cfg.eager_max = crate::sched::DEFAULT_EAGER_MAX;
        Job {
            sched: Scheduler::new(cfg),
            checker: Checker::new(),
            slice: 0,
            next_seq: vec![0; ranks as usize],
        }
    }

    fn slice(&mut self, batch: Vec<Descriptor>) {
        self.slice_at(batch, Vec::new(), Vec::new());
    }

    /// A slice whose start found `blocked` ranks, node 0 resolving `sites` for them.
    fn slice_at(
        &mut self,
        mut batch: Vec<Descriptor>,
        blocked: Vec<(u32, BlockedCall)>,
        sites: Vec<(u32, std::sync::Arc<crate::symbolize::CallSite>)>,
    ) {
        self.slice += 1;
        for d in &mut batch {
            d.seq = self.next_seq[d.rank as usize];
            d.request = d.seq + 1;
            self.next_seq[d.rank as usize] += 1;
        }
        let decisions = self.sched.schedule(self.slice, &batch).unwrap();
        let rec = SliceRecord {
            slice: self.slice,
            reason: StartReason::Timer,
            start_ns: 0,
            global: GlobalMetrics::default(),
            descriptors: batch,
            decisions,
            digest: 0,
            blocked,
            sites,
        };
        self.checker.slice(&rec);
    }

    fn kinds(&self) -> Vec<(CheckKind, u32)> {
        self.checker
            .findings()
            .iter()
            .map(|f| (f.kind, f.rank))
            .collect()
    }
}

fn p2p(kind: DescKind, rank: u32, peer: i32, buf: u64, bytes: u64, blocking: bool) -> Descriptor {
    Descriptor {
        rank,
        kind: kind as u8,
        flags: if blocking { FLAG_BLOCKING } else { 0 },
        peer,
        tag: if kind == DescKind::Recv { ANY_TAG } else { 1 },
        buf,
        bytes,
        ..Default::default()
    }
}

const I32: u64 = crate::datatype::ElemType::I32.sig_code();
const BYTE: u64 = crate::datatype::ElemType::Byte.sig_code();

fn typed(mut d: Descriptor, basic: u64, count: u64) -> Descriptor {
    d.set_type_sig(TypeSig::basic(basic), count);
    d
}

#[test]
fn a_match_of_different_signatures_is_a_type_mismatch() {
    let mut job = Job::new(2);
    job.slice(vec![
        typed(p2p(DescKind::Send, 0, 1, 0x1000, 4, true), I32, 1),
        typed(p2p(DescKind::Recv, 1, 0, 0x2000, 4, true), BYTE, 4),
    ]);
    assert_eq!(job.kinds(), [(CheckKind::TypeMismatch, 1)]);
    let detail = &job.checker.findings()[0].detail;
    assert!(detail.contains("(1 x i32)"), "{detail}");
    assert!(detail.contains("(4 x byte)"), "{detail}");
    // The same type on both sides, or no signature on one, is no finding.
    job.slice(vec![
        typed(p2p(DescKind::Send, 0, 1, 0x1000, 4, true), 4, 1),
        typed(p2p(DescKind::Recv, 1, 0, 0x2000, 8, true), 4, 2),
    ]);
    job.slice(vec![
        p2p(DescKind::Send, 0, 1, 0x1000, 4, true),
        typed(p2p(DescKind::Recv, 1, 0, 0x2000, 4, true), 1, 4),
    ]);
    assert_eq!(job.checker.findings().len(), 1);
}

/// A finding about a blocking call names the site its rank was blocked at when the
/// slice began; one about a non-blocking call, or a rank without a site, names none.
#[test]
fn a_finding_names_the_site_of_the_blocking_call_it_is_about() {
    let site = |line| {
        std::sync::Arc::new(crate::symbolize::CallSite {
            object: "/bin/prog".into(),
            offset: 0x40,
            function: Some("exchange".into()),
            file: Some("/src/prog.c".into()),
            line: Some(line),
        })
    };
    let mut job = Job::new(2);
    let in_recv = vec![(1, BlockedCall::Posted(DescKind::Recv))];
    job.slice_at(
        vec![
            typed(p2p(DescKind::Send, 0, 1, 0x1000, 4, false), I32, 1),
            typed(p2p(DescKind::Recv, 1, 0, 0x2000, 4, true), BYTE, 4),
        ],
        in_recv.clone(),
        vec![(1, site(21))],
    );
    // A non-blocking receive: rank 1 is in a wait, whose site is not the Irecv's.
    job.slice_at(
        vec![
            typed(p2p(DescKind::Send, 0, 1, 0x1000, 4, false), I32, 1),
            typed(p2p(DescKind::Recv, 1, 0, 0x2000, 4, false), BYTE, 4),
        ],
        vec![(1, BlockedCall::Call(crate::calls::Primitive::Wait))],
        vec![(1, site(30))],
    );
    // Blocked in the receive, its site unknown.
    job.slice_at(
        vec![
            typed(p2p(DescKind::Send, 0, 1, 0x1000, 4, false), I32, 1),
            typed(p2p(DescKind::Recv, 1, 0, 0x3000, 4, true), BYTE, 4),
        ],
        in_recv,
        Vec::new(),
    );
    let sites: Vec<Option<String>> = job
        .checker
        .findings()
        .into_iter()
        .map(|f| f.call_site)
        .collect();
    assert_eq!(
        sites,
        [Some("prog.c:21 (in exchange)".to_string()), None, None]
    );
    assert!(job.checker.findings()[0]
        .to_string()
        .starts_with("type-mismatch: rank 1: MPI_Recv at prog.c:21 (in exchange) (slice 1)"));
}

#[test]
fn a_receive_into_a_pending_irecv_buffer_is_reported_until_it_completes() {
    let mut job = Job::new(2);
    // Rank 1: Irecv into [0x2000, 0x2010), then a send from a disjoint buffer, then a
    // receive into an overlapping one.
    job.slice(vec![
        p2p(DescKind::Recv, 1, 0, 0x2000, 16, false),
        p2p(DescKind::Send, 1, 0, 0x3000, 16, false),
        p2p(DescKind::Recv, 1, 0, 0x2008, 16, true),
    ]);
    assert_eq!(job.kinds(), [(CheckKind::BufferReuse, 1)]);
    // Rank 0 sends twice; both receives complete; the buffer is free again.
    job.slice(vec![p2p(DescKind::Send, 0, 1, 0x1000, 16, true)]);
    job.slice(vec![p2p(DescKind::Recv, 0, 1, 0x1100, 16, true)]);
    job.slice(vec![p2p(DescKind::Send, 0, 1, 0x1000, 16, true)]);
    job.slice(vec![p2p(DescKind::Recv, 1, 0, 0x2000, 16, true)]);
    job.slice(vec![]);
    assert_eq!(job.kinds(), [(CheckKind::BufferReuse, 1)]);
}

#[test]
fn an_overlap_with_a_long_buffer_below_a_short_one_is_found() {
    let mut job = Job::new(2);
    job.slice(vec![
        // Two pending sends, the short one inside the long one: both only read.
        p2p(DescKind::Send, 1, 0, 0x1000, 0x8000, false),
        p2p(DescKind::Send, 1, 0, 0x4000, 0x10, false),
        // A receive into the long one past the short one, and one beside both.
        p2p(DescKind::Recv, 1, 0, 0x8000, 0x10, false),
        p2p(DescKind::Recv, 1, 0, 0x9000, 0x10, true),
    ]);
    // Receives from MPI_PROC_NULL move no data: no clash.
    job.slice(vec![
        p2p(DescKind::Recv, 0, PROC_NULL, 0x1000, 0x10, false),
        p2p(DescKind::Recv, 0, PROC_NULL, 0x1000, 0x10, false),
    ]);
    let f = job.checker.findings();
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].call, "MPI_Irecv");
    assert!(
        f[0].detail.contains("pending MPI_Isend #0"),
        "{}",
        f[0].detail
    );
}

#[test]
fn crossed_blocking_sends_saved_by_eager_buffering_are_unsafe_and_reported_once() {
    let mut job = Job::new(2);
    job.slice(vec![
        p2p(DescKind::Send, 0, 1, 0x1000, 64, true),
        p2p(DescKind::Send, 1, 0, 0x1000, 64, true),
    ]);
    job.slice(vec![
        p2p(DescKind::Recv, 0, 1, 0x2000, 64, true),
        p2p(DescKind::Recv, 1, 0, 0x2000, 64, true),
    ]);
    assert_eq!(job.kinds(), [(CheckKind::UnsafeSendSend, 0)]);
    // The safe order: rank 1 receives before it sends.
    let mut safe = Job::new(2);
    safe.slice(vec![
        p2p(DescKind::Send, 0, 1, 0x1000, 64, true),
        p2p(DescKind::Recv, 1, 0, 0x2000, 64, true),
    ]);
    safe.slice(vec![p2p(DescKind::Send, 1, 0, 0x1000, 64, true)]);
    safe.slice(vec![p2p(DescKind::Recv, 0, 1, 0x2000, 64, true)]);
    assert!(safe.kinds().is_empty(), "{:?}", safe.kinds());
}

#[test]
fn a_mistake_in_a_loop_is_listed_a_bounded_number_of_times() {
    let mut job = Job::new(2);
    for _ in 0..MAX_PER_KIND + 20 {
        job.slice(vec![
            typed(p2p(DescKind::Send, 0, 1, 0x1000, 4, true), 4, 1),
            typed(p2p(DescKind::Recv, 1, 0, 0x2000, 4, true), 1, 4),
        ]);
    }
    let f = job.checker.findings();
    assert_eq!(f.len(), MAX_PER_KIND + 1);
    assert!(
        f[MAX_PER_KIND].detail.contains("not listed"),
        "{}",
        f[MAX_PER_KIND].detail
    );
}

#[test]
fn leaks_round_trip() {
    let mut calls: Vec<Option<Call>> = [
        Call::Isend,
        Call::Irecv,
        Call::Irecv,
        Call::SendInit,
        Call::Isend,
    ]
    .map(Some)
    .to_vec();
    calls.push(None);
    calls.push(Some(Call::Ibarrier));
    let (aux, aux2) = encode_leaks(&calls);
    let (n, named) = decode_leaks(aux, aux2);
    assert_eq!(n, 7);
    assert_eq!(
        named,
        [
            ("MPI_Isend", 2),
            ("MPI_Irecv", 2),
            ("MPI_Send_init", 1),
            ("an unknown call", 1)
        ]
    );
    // Counts saturate; the total stays exact.
    let many = vec![Some(Call::Irecv); 1000];
    let (aux, aux2) = encode_leaks(&many);
    assert_eq!(
        decode_leaks(aux, aux2),
        (1000, vec![("MPI_Irecv", LEAK_COUNT_MAX)])
    );
    assert_eq!(decode_leaks(0, 0), (0, vec![]));
}

#[test]
fn kinds_have_stable_names() {
    for k in CheckKind::ALL {
        assert_eq!(CheckKind::from_name(k.name()), Some(k));
    }
}
