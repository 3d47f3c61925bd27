//! Requests forgotten (`mem::forget`) inside `api::scope` are completed before the scope
//! returns, also when the scope unwinds: the receive buffers hold the data afterwards, and
//! the buffers are freed only after the runtime is done with them.
//!
//! The test launches jobs whose ranks are this test binary again, running only the ignored
//! test [`rank_program`] (the job's environment tells it which rank it is).

use std::sync::Arc;
use std::time::Duration;

use strobe_runtime::api::{self, Comm};
use strobe_runtime::engine::{EngineConfig, NullSink, StrobePolicy, DEFAULT_DIRECT_COPY_MIN};
use strobe_runtime::launcher::{launch, JobOutcome, LaunchConfig};
use strobe_runtime::sched::DEFAULT_CHUNK_BUDGET;

fn job(ranks: u32) -> LaunchConfig {
    LaunchConfig {
        engine: EngineConfig {
            ranks,
            nodes: 1,
            slice: Duration::from_micros(500),
            policy: StrobePolicy::Adaptive,
            deadlock_slices: 200,
            chunk_budget: DEFAULT_CHUNK_BUDGET,
            direct_copy_min: DEFAULT_DIRECT_COPY_MIN,
            eager_max: strobe_runtime::engine::DEFAULT_EAGER_MAX,
            inline_max: strobe_runtime::engine::DEFAULT_INLINE_MAX,
            local_null: true,
            placement: None,
        },
        program: std::env::current_exe().expect("test binary"),
        args: [
            "rank_program",
            "--exact",
            "--ignored",
            "--test-threads=1",
            "-q",
        ]
        .map(Into::into)
        .to_vec(),
        tag_output: true,
        timeout: Some(Duration::from_secs(60)),
        env: Vec::new(),
        mmds_resolution: 0,
        output: None,
        output_marks: None,
    }
}

#[test]
fn a_scope_waits_for_forgotten_requests() {
    for ranks in [1, 2] {
        let report = launch(&job(ranks), Arc::new(NullSink), None).expect("launch");
        assert!(
            matches!(report.outcome, JobOutcome::Success),
            "{ranks} ranks: {:?}",
            report.message()
        );
    }
}

/// A message to myself, both requests forgotten: only the scope's end completes them.
fn forgotten_to_self(w: &Comm) {
    let me = w.rank();
    let out: Vec<u64> = (0..512).map(|k| k * 3 + me as u64).collect();
    let mut back = vec![0u64; 512];
    api::scope(|s| {
        std::mem::forget(w.irecv(s, &mut back, me, 1).expect("irecv"));
        std::mem::forget(w.isend(s, &out, me, 1).expect("isend"));
    });
    assert_eq!(
        back, out,
        "a forgotten receive is complete when its scope ends"
    );
}

/// The same, with the scope left by a panic: unwinding waits too.
fn forgotten_then_panic(w: &Comm) {
    let me = w.rank();
    let out = [me + 40; 8];
    let mut back = [0i32; 8];
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        api::scope(|s| {
            std::mem::forget(w.irecv(s, &mut back, me, 2).expect("irecv"));
            std::mem::forget(w.isend(s, &out, me, 2).expect("isend"));
            panic!("leaving the scope by unwinding");
        })
    }));
    assert!(unwound.is_err());
    assert_eq!(back, out, "the scope waited while unwinding");
}

/// Across ranks, the sender late: rank 0's scope must wait for a message rank 1 sends
/// only after a pause, into a heap buffer freed right after the scope.
fn forgotten_late_message(w: &Comm) {
    if w.size() < 2 || w.rank() > 1 {
        return;
    }
    let want: Vec<i32> = (0..4096).map(|k| k ^ 0x5a5a).collect();
    if w.rank() == 1 {
        std::thread::sleep(Duration::from_millis(30));
        w.send(&want, 0, 3).expect("send");
        return;
    }
    let mut got = vec![0i32; 4096];
    api::scope(|s| std::mem::forget(w.irecv(s, &mut got, 1, 3).expect("irecv")));
    assert_eq!(got, want, "the late message is in when the scope returns");
    drop(got);
}

#[test]
#[ignore = "the rank program of a_scope_waits_for_forgotten_requests, run inside its jobs"]
fn rank_program() {
    let world = api::init().expect("init (this test runs inside a job)");
    forgotten_to_self(&world);
    forgotten_then_panic(&world);
    forgotten_late_message(&world);
    world.barrier().expect("barrier");
    api::finalize();
}
