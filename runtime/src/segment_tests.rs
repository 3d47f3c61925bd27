//! The job segment's encodings and accessors.

use super::*;

#[test]
fn blocked_calls_keep_their_slot_codes() {
    // The codes the slot held when they were bare `CALL_*` constants.
    let legacy = [
        (BlockedCall::Call(Primitive::Wait), 100),
        (BlockedCall::Call(Primitive::Waitall), 101),
        (BlockedCall::Call(Primitive::Waitany), 102),
        (BlockedCall::Call(Primitive::Waitsome), 103),
        (BlockedCall::QueueFull, 104),
        (BlockedCall::Call(Primitive::Test), 105),
        (BlockedCall::Call(Primitive::Testall), 106),
        (BlockedCall::Call(Primitive::Testany), 107),
        (BlockedCall::Call(Primitive::Testsome), 108),
        (BlockedCall::Posted(DescKind::Recv), DescKind::Recv as u32),
        (
            BlockedCall::Posted(DescKind::Barrier),
            DescKind::Barrier as u32,
        ),
    ];
    for (call, code) in legacy {
        assert_eq!(call.to_raw(), code, "{call:?}");
        assert_eq!(BlockedCall::from_raw(code), call);
    }
    assert_eq!(BlockedCall::Call(Primitive::Waitall).name(), "MPI_Waitall");
    assert_eq!(BlockedCall::Posted(DescKind::Recv).name(), "MPI_Recv");
    assert_eq!(BlockedCall::from_raw(99_999).name(), "?");
}

#[test]
fn every_blocked_call_round_trips() {
    let kinds = (0..=u8::MAX).filter_map(DescKind::from_u8);
    for k in kinds {
        assert!(
            (k as u32) < 100,
            "descriptor kinds stay below the call codes"
        );
        let c = BlockedCall::Posted(k);
        assert_eq!(BlockedCall::from_raw(c.to_raw()), c);
    }
    for &p in Primitive::ALL {
        let c = BlockedCall::Call(p);
        assert_eq!(BlockedCall::from_raw(c.to_raw()), c, "{}", p.mpi_name());
    }
}

#[test]
fn states_and_divergences_keep_their_codes_and_unknown_words_are_safe() {
    for (s, v) in [
        (RankState::Computing, 0),
        (RankState::Blocked, 1),
        (RankState::Finalized, 2),
        (RankState::Exited, 3),
        (RankState::Held, 4),
    ] {
        assert_eq!(s as u32, v);
        assert_eq!(RankState::from_raw(v), s);
    }
    assert_eq!(RankState::from_raw(77), RankState::Exited);
    assert_eq!(Divergence::from_raw(0), None);
    for d in [
        Divergence::OutcomeKind,
        Divergence::LogExhausted,
        Divergence::BadIndex,
        Divergence::BadLog,
    ] {
        assert_eq!(Divergence::from_raw(d as u32), Some(d));
    }
    assert_eq!(Divergence::from_raw(9), Some(Divergence::Unknown));
}

#[test]
fn slot_accessors_track_the_computing_count() {
    let seg = JobSegment::create(2, 1, 16, 16).expect("segment");
    assert_eq!(seg.slot(1).state(), RankState::Computing);
    assert!(!leave_computing(&seg, 0, RankState::Blocked));
    assert!(
        leave_computing(&seg, 1, RankState::Held),
        "the last one rings"
    );
    assert_eq!(count_state(&seg, 0..2, RankState::Blocked), 1);
    assert!(!resume_computing(&seg, 1), "held, not blocked");
    assert!(resume_computing_from(&seg, 1, RankState::Held));
    assert!(resume_computing(&seg, 0));
    assert_eq!(seg.header().computing.load(Ordering::Acquire), 2);
    seg.slot(0).set_blocked_call(Primitive::Waitany.into());
    assert_eq!(seg.slot(0).blocked_call().name(), "MPI_Waitany");
    assert_eq!(seg.slot(0).diverged(), None);
    seg.slot(0).set_diverged(Divergence::BadIndex);
    assert_eq!(seg.slot(0).diverged(), Some(Divergence::BadIndex));
}

/// Pages of `rank`'s slot in memory (the memfd's page cache), by `mincore`.
fn resident_pages(seg: &JobSegment, rank: u32) -> usize {
    let pages = seg.stride / 4096;
    let mut vec = vec![0u8; pages];
    // SAFETY: the slot lies inside the mapping (page-aligned, `stride` bytes) and `vec`
    // has one byte per page of it.
    let rc = unsafe {
        libc::mincore(
            seg.slot_ptr(rank) as *mut libc::c_void,
            seg.stride,
            vec.as_mut_ptr(),
        )
    };
    assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
    vec.iter().filter(|&&b| b & 1 != 0).count()
}

#[test]
fn a_node_segment_never_touches_the_other_nodes_ranks_slots() {
    let of = [0, 0, 1, 1];
    let seg = JobSegment::create_for_node(4, 2, 1024, 1024, 1, &of).expect("segment");
    assert_eq!(resident_pages(&seg, 0), 0);
    assert_eq!(resident_pages(&seg, 1), 0);
    assert!(
        resident_pages(&seg, 2) > 0,
        "its own ranks' queues are set up"
    );
    assert_eq!(seg.header().computing.load(Ordering::Acquire), 2);
    assert_eq!(seg.header().mirrored.load(Ordering::Acquire), 1);
    // Node 0's mirror writes a remote rank's slot header: its first page only.
    seg.slot(0).mirror(&SlotStatus {
        state: RankState::Blocked as u32,
        ..Default::default()
    });
    assert_eq!(resident_pages(&seg, 0), 1);
    assert_eq!(seg.slot(0).state(), RankState::Blocked);
    assert!(JobSegment::create_for_node(4, 2, 16, 16, 0, &of[..3]).is_err());
}

#[test]
fn only_a_receive_posted_while_every_rank_computes_leaves_the_strobe_asleep() {
    use crate::descriptor::{Descriptor, FLAG_BLOCKING, PROC_NULL};
    let d = |kind: DescKind, peer: i32, flags: u8| {
        let mut d = Descriptor {
            peer,
            flags,
            ..Descriptor::default()
        };
        d.kind = kind as u8;
        d
    };
    let irecv = d(DescKind::Recv, 1, 0);
    let seg = JobSegment::create(2, 1, 16, 16).expect("segment");
    assert!(post_waits_for_a_wait(&seg, &irecv));
    // Anything else rings: a send, a blocking receive, a receive from MPI_PROC_NULL.
    assert!(!post_waits_for_a_wait(&seg, &d(DescKind::Send, 1, 0)));
    assert!(!post_waits_for_a_wait(
        &seg,
        &d(DescKind::Recv, 1, FLAG_BLOCKING)
    ));
    assert!(!post_waits_for_a_wait(
        &seg,
        &d(DescKind::Recv, PROC_NULL, 0)
    ));
    assert!(!post_waits_for_a_wait(&seg, &d(DescKind::Barrier, 0, 0)));
    // A rank that does not compute may wait for the receive (a blocked synchronous send).
    // (Not the last computing rank: rank 0 still computes.)
    assert!(!leave_computing(&seg, 1, RankState::Blocked));
    assert!(!post_waits_for_a_wait(&seg, &irecv));
    assert!(resume_computing(&seg, 1));
    assert!(post_waits_for_a_wait(&seg, &irecv));
    // With several nodes the other nodes' ranks are not counted here: ring.
    let two = JobSegment::create(2, 2, 16, 16).expect("segment");
    assert!(!post_waits_for_a_wait(&two, &irecv));
}

#[test]
fn urgent_requests_keep_both_levels_until_a_slice_begins() {
    let seg = JobSegment::create(2, 1, 16, 16).expect("segment");
    let bell = seg.header().doorbell.load(Ordering::Acquire);
    assert_eq!(urgent(&seg), 0);
    ring_urgent(&seg, URGENT_SOON);
    assert_eq!(urgent(&seg), URGENT_SOON);
    assert_ne!(
        seg.header().doorbell.load(Ordering::Acquire),
        bell,
        "every request rings"
    );
    // A later request for the slice at once is not lost behind the earlier one.
    ring_urgent(&seg, URGENT_NOW);
    assert_eq!(urgent(&seg), URGENT_SOON | URGENT_NOW);
    ring_urgent(&seg, URGENT_SOON);
    assert_eq!(urgent(&seg), URGENT_SOON | URGENT_NOW);
    clear_urgent(&seg);
    assert_eq!(urgent(&seg), 0, "the slice serves both");
}

#[test]
fn a_block_asks_at_once_for_other_ranks_posts_and_soon_for_its_own() {
    let seg = JobSegment::create(3, 1, 16, 16).expect("segment");
    assert_eq!(block_wants_slice(&seg, 0), None, "nothing waits");
    mark_posted(&seg, 0);
    mark_posted(&seg, 0);
    assert_eq!(
        block_wants_slice(&seg, 0),
        Some(URGENT_SOON),
        "only its own posts"
    );
    assert_eq!(
        block_wants_slice(&seg, 1),
        Some(URGENT_NOW),
        "rank 0's posts"
    );
    mark_posted(&seg, 2);
    assert_eq!(
        block_wants_slice(&seg, 0),
        Some(URGENT_NOW),
        "several ranks posted"
    );
    assert_eq!(block_wants_slice(&seg, 2), Some(URGENT_NOW));
    // Once several, always several until the slice begins.
    mark_posted(&seg, 0);
    assert_eq!(block_wants_slice(&seg, 0), Some(URGENT_NOW));
    clear_urgent(&seg);
    assert_eq!(block_wants_slice(&seg, 2), None, "the slice takes them");
    mark_posted(&seg, 2);
    assert_eq!(block_wants_slice(&seg, 2), Some(URGENT_SOON));
}

#[test]
fn the_wake_up_of_a_send_to_a_blocked_rank_already_finds_its_request() {
    let seg = JobSegment::create(2, 1, 16, 16).expect("segment");
    let h = seg.header();
    let bell = h.doorbell.load(Ordering::Acquire);
    // The Strobe Sender stretched its timer and sleeps: the post wakes it.
    h.stretched.store(1, Ordering::SeqCst);
    let seen = post_with_request(&seg, true, || {
        ring_if_stretched(&seg);
        assert_ne!(h.doorbell.load(Ordering::Acquire), bell, "the post rang");
        // What the Strobe Sender woken by that ring reads.
        urgent(&seg)
    });
    assert_eq!(
        seen, URGENT_NOW,
        "the request is there before the post's ring"
    );
    assert_eq!(urgent(&seg), URGENT_NOW);
    let after_post = h.doorbell.load(Ordering::Acquire);
    // Without a blocked receiver nothing is asked.
    clear_urgent(&seg);
    let seen = post_with_request(&seg, false, || urgent(&seg));
    assert_eq!(seen, 0);
    assert_eq!(urgent(&seg), 0);
    assert_eq!(h.doorbell.load(Ordering::Acquire), after_post, "no ring");
}

#[test]
fn a_send_arena_entry_belongs_to_one_descriptor_of_two_queues_full() {
    use crate::descriptor::RANK_COPY_MAX;
    let seg = JobSegment::create(2, 1, 16, 16).expect("segment");
    let cap = 16u64;
    let a = [0xA5u8; RANK_COPY_MAX as usize];
    let b: Vec<u8> = (0..60u8).collect();
    assert!(seg.arena_write(1, 3, &a));
    assert!(
        seg.arena_write(1, 3 + cap, &b),
        "a queue later: another entry"
    );
    assert_eq!(seg.arena_read(1, 3, a.len()).unwrap(), a);
    assert_eq!(seg.arena_read(1, 3 + cap, b.len()).unwrap(), b);
    assert_eq!(
        seg.arena_read(0, 3, 4).unwrap(),
        [0; 4],
        "rank 0's arena untouched"
    );
    // Two queues later the entry is reused: the node manager read it a drain ago.
    assert!(seg.arena_write(1, 3 + 2 * cap, &[7; 4]));
    assert_eq!(seg.arena_read(1, 3, 4).unwrap(), [7; 4]);
    // What does not fit an entry, or names no rank, is refused, never written past.
    assert!(!seg.arena_write(1, 0, &[1; RANK_COPY_MAX as usize + 1]));
    assert!(!seg.arena_write(2, 0, &[1]));
    assert!(seg.arena_read(1, 0, RANK_COPY_MAX as usize + 1).is_none());
    assert!(seg.arena_read(2, 0, 1).is_none());
}

#[test]
fn a_receive_arena_entry_travels_with_its_completion_through_the_queue() {
    use crate::descriptor::{Completion, RANK_COPY_MAX};
    let seg = JobSegment::create(2, 1, 16, 8).expect("segment");
    let q = seg.queues(1);
    let other = seg.queues(0);
    let mut c = Completion {
        request: 9,
        bytes: 40,
        ..Completion::default()
    };
    assert!(c.carry_in_arena(0x1000, 40));
    // Twenty completions through a queue of eight: entries are reused as slots are.
    for round in 0..20u8 {
        let data = vec![round; 40];
        let mut written_at = None;
        q.completions
            .push_with(&c, |position| {
                written_at = Some(position);
                assert!(seg.recv_arena_write(1, position, &data));
            })
            .expect("room");
        let mut seen = None;
        let got = q
            .completions
            .pop_with(|c, position| {
                assert_eq!(Some(position), written_at);
                let (addr, len) = c.take_arena().expect("flagged");
                assert_eq!((addr, len), (0x1000, 40));
                seen = seg.recv_arena_bytes(1, position, len).map(<[u8]>::to_vec);
            })
            .expect("a completion");
        assert_eq!(seen.as_deref(), Some(&data[..]), "round {round}");
        assert_eq!(got.flags, 0, "taken: the completion as decided");
    }
    // A full queue is not written: the callback does not run.
    for _ in 0..8 {
        q.completions.push(&c).expect("room");
    }
    let mut called = false;
    assert!(q.completions.push_with(&c, |_| called = true).is_err());
    assert!(!called);
    assert!(
        other.completions.pop().is_none(),
        "rank 0's queue untouched"
    );
    // What does not fit an entry, or names no rank, is refused.
    assert!(!seg.recv_arena_write(1, 0, &[1; RANK_COPY_MAX as usize + 1]));
    assert!(!seg.recv_arena_write(2, 0, &[1]));
    assert!(seg
        .recv_arena_bytes(1, 0, RANK_COPY_MAX as usize + 1)
        .is_none());
    assert!(seg.recv_arena_bytes(2, 0, 1).is_none());
}
