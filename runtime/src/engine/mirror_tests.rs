//! The slot mirror between two nodes with a segment each, over the shared-memory fabric:
//! node 0's slot of a remote rank changes only when the mirror applies that node's block.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::descriptor::{DescKind, Descriptor};
use crate::engine::{global_size, JobShared, StrobePolicy, EVENTS};
use crate::segment::{leave_computing, BlockedCall, JobSegment, RankState};
use crate::transport::shm::ShmFabric;

/// Ranks 0, 1 on node 0; ranks 2, 3 on node 1.
fn config() -> EngineConfig {
    EngineConfig {
        ranks: 4,
        nodes: 2,
        slice: Duration::from_millis(1),
        policy: StrobePolicy::Adaptive,
        deadlock_slices: 10,
        chunk_budget: 1 << 20,
        direct_copy_min: u64::MAX,
        eager_max: 0,
        inline_max: 0,
        local_null: false,
        placement: None,
    }
}

struct Pair {
    cfg: EngineConfig,
    fabric: ShmFabric,
    shared: [Arc<JobShared>; 2],
    mirrors: [NodeMirror; 2],
}

fn pair(track_posts: bool) -> Pair {
    let cfg = config();
    let of = cfg.node_of_rank();
    let seg = |n| JobSegment::create_for_node(4, 2, 16, 16, n, &of).expect("segment");
    let shared = [
        Arc::new(JobShared::new(seg(0))),
        Arc::new(JobShared::new(seg(1))),
    ];
    let fabric = ShmFabric::create(2, global_size(&cfg), EVENTS).expect("fabric");
    let base = super::super::node::mirror_base(&cfg);
    let mirrors = [0, 1].map(|n| {
        let t: Arc<dyn Transport> = Arc::new(fabric.endpoint(n));
        NodeMirror::new(&cfg, base, n, t, shared[n as usize].clone(), track_posts)
    });
    Pair {
        cfg,
        fabric,
        shared,
        mirrors,
    }
}

#[test]
fn a_remote_rank_reaches_node_0_only_through_the_mirror() {
    let p = pair(false);
    let (seg0, seg1) = (&p.shared[0].seg, &p.shared[1].seg);
    assert_eq!(seg1.header().computing.load(Ordering::Acquire), 2);
    assert_eq!(seg1.header().mirrored.load(Ordering::Acquire), 1);
    assert_eq!(seg0.header().mirrored.load(Ordering::Acquire), 0);
    // Until node 1 reports, node 0 counts its two ranks as computing.
    assert_eq!(p.shared[0].computing_total(), 4);

    seg1.slot(2).set_blocked_call(DescKind::Recv.into());
    seg1.slot(2).pid.store(4242, Ordering::Release);
    leave_computing(seg1, 2, RankState::Blocked);
    assert_eq!(
        seg0.slot(2).state(),
        RankState::Computing,
        "not before a push"
    );
    p.mirrors[1].push().expect("push");
    assert_eq!(
        seg0.slot(2).state(),
        RankState::Computing,
        "a push alone writes global memory, never node 0's slots"
    );
    p.mirrors[0].apply().expect("apply");
    assert_eq!(seg0.slot(2).state(), RankState::Blocked);
    assert_eq!(
        seg0.slot(2).blocked_call(),
        BlockedCall::Posted(DescKind::Recv)
    );
    assert_eq!(seg0.slot(2).pid.load(Ordering::Acquire), 4242);
    assert_eq!(seg0.slot(3).state(), RankState::Computing);
    assert_eq!(p.shared[0].computing_total(), 2 + 1);
    // Node 0's own ranks and node 1's slots of node 0's ranks are left alone.
    assert_eq!(seg0.slot(0).pid.load(Ordering::Acquire), 0);
    assert_eq!(seg1.slot(0).state(), RankState::Computing);
    assert!(!p.shared[0].remote.queued() && !p.shared[0].remote.backlog());

    // A descriptor waiting in a remote rank's queue, and completions waiting for room.
    let d = Descriptor {
        rank: 3,
        ..Default::default()
    };
    seg1.queues(3).descriptors.push(&d).expect("room");
    p.shared[1].backlog.store(true, Ordering::Release);
    p.mirrors[1].push().expect("push");
    p.mirrors[0].apply().expect("apply");
    assert!(p.shared[0].remote.queued() && p.shared[0].remote.backlog());
}

#[test]
fn unchanged_status_is_not_pushed_and_counters_alone_only_at_slice_ends_or_in_replay() {
    for track_posts in [false, true] {
        let p = pair(track_posts);
        let pusher = p.mirrors[1].pusher.as_ref().expect("node 1 pushes");
        let mut pusher = pusher.lock().expect("lock");
        assert!(pusher.push(false).expect("first push"));
        assert!(!pusher.push(true).expect("nothing changed"));
        let slot = &p.shared[1].seg.slot(3);
        slot.posted.store(7, Ordering::Release);
        assert_eq!(pusher.push(false).expect("push"), track_posts);
        slot.pending_fails.store(3, Ordering::Release);
        assert_eq!(pusher.push(false).expect("push"), track_posts);
        // The end of a slice pushes counters too (the livelock watch reads failed tests).
        slot.pending_fails.store(4, Ordering::Release);
        assert!(pusher.push(true).expect("push"));
        drop(pusher);
        p.mirrors[0].apply().expect("apply");
        assert_eq!(
            p.shared[0]
                .seg
                .slot(3)
                .pending_fails
                .load(Ordering::Acquire),
            4
        );
    }
}

#[test]
fn a_damaged_block_is_ignored() {
    let p = pair(false);
    p.mirrors[1].push().expect("push");
    // Scribble over node 1's block in node 0's global memory (a torn read looks the same).
    let base = super::super::node::mirror_base(&p.cfg);
    let off = block_offset(base, &p.cfg, 1) + HEAD;
    let t = p.fabric.endpoint(1);
    t.xfer_and_signal(&[0xff; 8], &NodeSet::single(0), off, None, None)
        .expect("xfer");
    let applier = p.mirrors[0].applier.as_ref().expect("node 0 applies");
    assert!(!applier.lock().expect("lock").apply().expect("apply"));
    assert_eq!(p.shared[0].seg.slot(2).pid.load(Ordering::Acquire), 0);
}

#[test]
fn the_mirror_threads_carry_a_change_without_the_node_managers() {
    let p = pair(false);
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = [0u32, 1]
        .into_iter()
        .filter_map(|n| {
            let t: Arc<dyn Transport> = Arc::new(p.fabric.endpoint(n));
            let shared = p.shared[n as usize].clone();
            p.mirrors[n as usize]
                .spawn(n, t, shared, stop.clone())
                .expect("spawn")
        })
        .collect();
    assert_eq!(threads.len(), 2);
    let bell = p.shared[0].seg.header().doorbell.load(Ordering::Acquire);
    leave_computing(&p.shared[1].seg, 3, RankState::Finalized);
    // Bounded, so a broken mirror fails the test instead of hanging it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while p.shared[0].seg.slot(3).state() != RankState::Finalized {
        assert!(Instant::now() < deadline, "the change never reached node 0");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_ne!(
        p.shared[0].seg.header().doorbell.load(Ordering::Acquire),
        bell,
        "node 0's doorbell rang"
    );
    stop.store(true, Ordering::Release);
    crate::segment::ring_doorbell(&p.shared[1].seg);
    for t in threads {
        t.join().expect("mirror thread");
    }
}
