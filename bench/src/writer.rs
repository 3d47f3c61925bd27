//! `strobe bench writer-rate`: how many slices per second one recorder (one SQLite writer
//! thread, as at the Machine Manager of a multi-host job) sustains as the node count grows
//! (docs/multi-host.md, "Scale"). Per slice the Machine Manager's recorder gets one slice
//! record (from node 0) and one `node_metrics` row per node; this feeds exactly that, as
//! fast as the recorder's bounded queue accepts it (its `sync_channel` blocks when the
//! writer falls behind), so the time from the first call to `finish` is the writer's
//! sustained rate. The slices are quiet (no descriptors): the fixed per-slice cost that
//! grows with the nodes, which is what limits scale; a message-heavy slice adds its
//! descriptors and decisions on top (`strobe bench record`).

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;
use strobe_recorder::{JobInfo, Layer, RecordOptions, Recorder};
use strobe_runtime::engine::{
    EngineConfig, GlobalMetrics, LocalMetrics, SliceRecord, SliceSink, StartReason, StrobePolicy,
    DEFAULT_DIRECT_COPY_MIN,
};
use strobe_runtime::launcher::{JobOutcome, JobReport, LaunchConfig};
use strobe_runtime::sched::{SliceDecisions, DEFAULT_CHUNK_BUDGET};

/// Two ranks per node: the rank count only sizes the job row and the replay log.
const RANKS_PER_NODE: u32 = 2;

fn job(nodes: u32) -> Result<LaunchConfig> {
    Ok(LaunchConfig {
        engine: EngineConfig {
            ranks: nodes * RANKS_PER_NODE,
            nodes,
            slice: Duration::from_millis(1),
            policy: StrobePolicy::Adaptive,
            deadlock_slices: 20,
            chunk_budget: DEFAULT_CHUNK_BUDGET,
            direct_copy_min: DEFAULT_DIRECT_COPY_MIN,
            eager_max: strobe_runtime::engine::DEFAULT_EAGER_MAX,
            inline_max: strobe_runtime::engine::DEFAULT_INLINE_MAX,
            local_null: true,
            placement: None,
        },
        program: std::env::current_exe()?,
        args: Vec::new(),
        tag_output: false,
        timeout: None,
        env: Vec::new(),
        mmds_resolution: 0,
        output: None,
        output_marks: None,
    })
}

/// Feed `slices` quiet slices of a `nodes`-node job into a recorder at `db`; returns the
/// wall time until the writer has committed them all.
fn feed(db: &Path, nodes: u32, slices: u64) -> Result<Duration> {
    let _ = std::fs::remove_file(db);
    let cfg = job(nodes)?;
    let opts = RecordOptions {
        schedule_log: Layer::On,
        metrics: Layer::On,
        ..RecordOptions::default()
    };
    let rec = Recorder::create(db, &JobInfo::new(&cfg, &[cfg.program.clone().into()]), opts)?;
    let t = Instant::now();
    let step = Duration::from_millis(1);
    for s in 1..=slices {
        let at = step * s as u32;
        for node in 0..nodes {
            let m = LocalMetrics {
                node,
                letts: at,
                ltdem: Duration::from_micros(40),
                ltmsm: Duration::from_micros(60),
                ltts: Duration::from_micros(90),
                ..Default::default()
            };
            rec.node_metrics(s, &m);
        }
        rec.slice(&SliceRecord {
            slice: s,
            reason: if s == 1 {
                StartReason::First
            } else {
                StartReason::Timer
            },
            start_ns: at.as_nanos() as u64,
            global: GlobalMetrics {
                getts: at,
                ..Default::default()
            },
            descriptors: Vec::new(),
            decisions: SliceDecisions {
                slice: s,
                ..Default::default()
            },
            digest: 0,
            blocked: Vec::new(),
            sites: Vec::new(),
        });
    }
    rec.finish(&JobReport {
        outcome: JobOutcome::Success,
        slices,
        elapsed: t.elapsed(),
        rank_status: vec![Some(0); cfg.engine.ranks as usize],
    })?;
    Ok(t.elapsed())
}

/// The table: for each node count, slices/s and node rows/s one writer sustains, and the
/// largest slice rate it keeps up with (slices of 1 ms and 10 ms).
pub fn writer_rate(nodes: &[u32], slices: u64) -> Result<String> {
    let dir = tempfile::tempdir()?;
    let mut out = String::new();
    writeln!(
        out,
        "| nodes | slices | wall (s) | slices/s | node rows/s | keeps up with 1 ms slices | with 10 ms slices |"
    )?;
    writeln!(out, "|---:|---:|---:|---:|---:|---|---|")?;
    for &n in nodes {
        // Enough slices for a second or so of writing at any node count.
        let s = (slices / n.max(1) as u64).max(200);
        let wall = feed(&dir.path().join(format!("w{n}.db")), n, s)?;
        let per_s = s as f64 / wall.as_secs_f64();
        let yes = |hz: f64| if per_s >= hz { "yes" } else { "no" };
        writeln!(
            out,
            "| {n} | {s} | {:.2} | {:.0} | {:.0} | {} | {} |",
            wall.as_secs_f64(),
            per_s,
            per_s * n as f64,
            yes(1000.0),
            yes(100.0)
        )?;
    }
    Ok(out)
}
