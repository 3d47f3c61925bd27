//! The engine with real node threads over the shared-memory transport, without rank
//! processes: ranks that never post still get slices, which is enough to exercise the
//! node-level protocol and the replica cross-check.

use std::sync::mpsc;

use super::*;
use crate::segment::JobSegment;

fn config(nodes: u32) -> EngineConfig {
    EngineConfig {
        ranks: 4,
        nodes,
        slice: Duration::from_micros(200),
        policy: StrobePolicy::Fixed,
        deadlock_slices: 1000,
        chunk_budget: 4 << 20,
        direct_copy_min: DEFAULT_DIRECT_COPY_MIN,
        eager_max: super::DEFAULT_EAGER_MAX,
        inline_max: super::DEFAULT_INLINE_MAX,
        local_null: true,
        placement: None,
    }
}

/// Run an engine until it ends by itself, or stop it once `stop_after` slices ran; fail
/// the test instead of hanging.
fn run(cfg: EngineConfig, diverge: Option<(u32, u64)>, stop_after: u64) -> EngineOutcome {
    let seg = crate::rank::create_segment(cfg.ranks, cfg.nodes).expect("segment");
    let mut shared = JobShared::new(seg);
    shared.diverge_replica = diverge;
    let shared = Arc::new(shared);
    let engine = Engine::start(cfg, shared.clone(), Arc::new(NullSink), None).expect("start");
    wait(engine, &shared, stop_after)
}

/// The same with a segment (and `JobShared`) per node, started by `Engine::start_nodes`.
fn run_isolated(cfg: EngineConfig, diverge: Option<(u32, u64)>, stop_after: u64) -> EngineOutcome {
    let fabric = ShmFabric::create(cfg.nodes, global_size(&cfg), EVENTS).expect("fabric");
    let of = cfg.node_of_rank();
    let parts: Vec<NodePart> = (0..cfg.nodes)
        .map(|n| {
            let seg = JobSegment::create_for_node(cfg.ranks, cfg.nodes, 64, 64, n, &of);
            let mut shared = JobShared::new(seg.expect("segment"));
            shared.diverge_replica = diverge;
            NodePart {
                node: n,
                transport: Arc::new(fabric.endpoint(n)),
                shared: Arc::new(shared),
            }
        })
        .collect();
    let lead = parts[0].shared.clone();
    let engine = Engine::start_nodes(cfg, parts, Arc::new(NullSink), None).expect("start");
    wait(engine, &lead, stop_after)
}

fn wait(engine: Engine, shared: &Arc<JobShared>, stop_after: u64) -> EngineOutcome {
    let (tx, rx) = mpsc::channel();
    let joiner = std::thread::spawn(move || tx.send(engine.join()).expect("send"));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(outcome) = rx.recv_timeout(Duration::from_millis(5)) {
            joiner.join().expect("join");
            return outcome;
        }
        if shared.slice.load(Ordering::Acquire) >= stop_after {
            shared.request_stop();
        }
        assert!(Instant::now() < deadline, "the engine hangs");
    }
}

#[test]
fn agreeing_replicas_run_until_stopped() {
    let outcome = run(config(2), None, 20);
    assert!(
        matches!(outcome, EngineOutcome::Stopped { slices } if slices >= 20),
        "{outcome:?}"
    );
}

#[test]
fn a_diverging_replica_ends_the_job_with_the_slice_and_the_nodes() {
    let outcome = run(config(2), Some((1, 5)), u64::MAX);
    let EngineOutcome::Failed(msg) = outcome else {
        panic!("expected a failure, got {outcome:?}");
    };
    assert!(
        msg.contains("scheduler replicas diverged in slice 5")
            && msg.contains("node 0")
            && msg.contains("node 1"),
        "{msg}"
    );
}

#[test]
fn a_diverging_replica_among_three_nodes_stops_every_node() {
    let outcome = run(config(3), Some((2, 3)), u64::MAX);
    assert!(
        matches!(&outcome, EngineOutcome::Failed(m) if m.contains("slice 3") && m.contains("node 2")),
        "{outcome:?}"
    );
}

#[test]
fn nodes_with_a_segment_each_run_until_stopped_and_catch_a_diverging_replica() {
    let outcome = run_isolated(config(3), None, 20);
    assert!(
        matches!(outcome, EngineOutcome::Stopped { slices } if slices >= 20),
        "{outcome:?}"
    );
    let outcome = run_isolated(config(2), Some((1, 5)), u64::MAX);
    assert!(
        matches!(&outcome, EngineOutcome::Failed(m) if m.contains("slice 5")),
        "{outcome:?}"
    );
}

#[test]
fn a_placement_that_leaves_a_node_empty_is_refused() {
    let mut cfg = config(3);
    cfg.placement = Some(Arc::from(vec![0, 0, 2, 2]));
    assert_eq!(cfg.node_of_rank(), vec![0, 0, 2, 2]);
    let err = cfg.check_placement().expect_err("node 1 has no rank");
    assert!(err.contains("node 1"), "{err}");
    cfg.placement = Some(Arc::from(vec![0, 1, 2, 1]));
    assert_eq!(cfg.max_ranks_per_node(), 2);
    assert!(cfg.check_placement().is_ok());
}
