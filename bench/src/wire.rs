//! `strobe bench wire-sink`: what recording across hosts ships and costs
//! (docs/multi-host.md, "Recording across hosts"). Each job is recorded twice per round,
//! alternating the order: directly (the recorder is the engine's sink) and through the
//! wire (a `WireSink` encodes every sink call into a sink frame, and `apply_sink_frame`
//! decodes it into the recorder, in this process: the daemon's and the Machine Manager's
//! work without the network). Reported: the frames' bytes per slice and per descriptor
//! (every descriptor is one MPI call's message to the scheduler), the CPU per frame on
//! each side, and the job's wall time through the wire over the direct one.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use strobe_recorder::{JobInfo, Layer, RecordOptions, Recorder};
use strobe_runtime::daemon::wire_sink::{apply_sink_frame, WireSink, WireStats};
use strobe_runtime::engine::{EngineConfig, SliceSink, StrobePolicy, DEFAULT_DIRECT_COPY_MIN};
use strobe_runtime::launcher::{self, LaunchConfig};
use strobe_runtime::mmds::DEFAULT_RESOLUTION;
use strobe_runtime::sched::DEFAULT_CHUNK_BUDGET;

struct Workload {
    name: &'static str,
    program: &'static str,
    args: Vec<String>,
}

fn workloads(heavy: u64) -> Vec<Workload> {
    vec![
        Workload {
            name: "barrier every 1 ms",
            program: "barrier_every",
            args: vec!["1000".into(), "500".into()],
        },
        Workload {
            name: "message-heavy: 4-neighbour 4 KiB exchange",
            program: "exchange",
            args: vec!["0".into(), heavy.to_string(), "4096".into()],
        },
    ]
}

struct Sample {
    elapsed: Duration,
    /// Through the wire: what the sink shipped, and the decode+apply time.
    wire: Option<(WireStats, u64)>,
    descriptors: u64,
    slices: u64,
}

fn launch_config(ranks: u32, nodes: u32, w: &Workload) -> Result<LaunchConfig> {
    let program = crate::paths::sibling(w.program)?;
    if !program.exists() {
        bail!(
            "fixture {} not built (cargo build --release --workspace)",
            program.display()
        );
    }
    Ok(LaunchConfig {
        engine: EngineConfig {
            ranks,
            nodes,
            slice: Duration::from_micros(500),
            policy: StrobePolicy::Adaptive,
            deadlock_slices: 20,
            chunk_budget: DEFAULT_CHUNK_BUDGET,
            direct_copy_min: DEFAULT_DIRECT_COPY_MIN,
            eager_max: strobe_runtime::engine::DEFAULT_EAGER_MAX,
            inline_max: strobe_runtime::engine::DEFAULT_INLINE_MAX,
            local_null: true,
            placement: None,
        },
        program,
        args: w.args.iter().map(Into::into).collect(),
        tag_output: false,
        timeout: Some(Duration::from_secs(600)),
        env: Vec::new(),
        mmds_resolution: DEFAULT_RESOLUTION,
        output: None,
        output_marks: None,
    })
}

fn run_once(cfg: &LaunchConfig, through_wire: bool, db: &Path) -> Result<Sample> {
    let _ = std::fs::remove_file(db);
    let command = std::iter::once(cfg.program.clone().into_os_string())
        .chain(cfg.args.iter().cloned())
        .collect::<Vec<_>>();
    let opts = RecordOptions {
        schedule_log: Layer::On,
        metrics: Layer::On,
        ..RecordOptions::default()
    };
    let rec = Arc::new(Recorder::create(db, &JobInfo::new(cfg, &command), opts)?);
    let apply_ns = Arc::new(AtomicU64::new(0));
    let wire = if through_wire {
        let (inner, ns) = (rec.clone(), apply_ns.clone());
        let send = Box::new(move |frame: Vec<u8>| {
            let t = Instant::now();
            let res = apply_sink_frame(&frame, &*inner);
            ns.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
            if let Err(e) = res {
                eprintln!("strobe bench: a sink frame was refused: {e}");
            }
        });
        Some(Arc::new(WireSink::new(0, Vec::new(), send)?))
    } else {
        None
    };
    let sink: Arc<dyn SliceSink> = match &wire {
        Some(w) => w.clone(),
        None => rec.clone(),
    };
    let report = launcher::launch(cfg, sink, None)?;
    if let Some(w) = &wire {
        w.finish();
    }
    rec.finish(&report)?;
    if let Some(m) = report.message() {
        bail!("{} failed: {m}", cfg.program.display());
    }
    let totals = strobe_recorder::Recording::open(db)?.totals()?;
    Ok(Sample {
        elapsed: report.elapsed,
        wire: wire.map(|w| (w.stats(), apply_ns.load(Ordering::Relaxed))),
        descriptors: totals.descriptors,
        slices: totals.slice_rows,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Record every workload `rounds` times each way and report.
pub fn wire_sink(ranks: u32, nodes: u32, rounds: u32, heavy: u64) -> Result<String> {
    let dir: PathBuf = tempfile::tempdir()?.keep();
    let db = dir.join("wire.db");
    let mut out = String::new();
    writeln!(out, "### Recording through the wire (sink frames)\n")?;
    writeln!(
        out,
        "{ranks} ranks on {nodes} nodes, adaptive strobe, 500 us slices, every layer on; \
         {rounds} rounds, each recording directly and through a WireSink + apply_sink_frame \
         (order alternating). Bytes are the frames' (packed Cap'n Proto); CPU per frame on \
         the daemon's side (encode, off the slice path) and the Machine Manager's (decode + \
         hand to the recorder); wall = the job's wall time through the wire / directly \
         (median).\n"
    )?;
    writeln!(
        out,
        "| workload | slices | frames | bytes/slice (slice frames) | bytes/descriptor (all frames) | encode ns/frame | decode+apply ns/frame | wall, wire/direct |\n|---|---:|---:|---:|---:|---:|---:|---:|"
    )?;
    for w in workloads(heavy) {
        let cfg = launch_config(ranks, nodes, &w)?;
        run_once(&cfg, true, &db)?; // warm-up
        let (mut ratios, mut last) = (Vec::new(), None);
        for round in 0..rounds {
            let order = if round % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            };
            let mut times = [0.0; 2];
            for through in order {
                let s = run_once(&cfg, through, &db)?;
                times[through as usize] = s.elapsed.as_secs_f64();
                if through {
                    last = Some(s);
                }
            }
            ratios.push(times[1] / times[0]);
        }
        let Some(s) = last else { continue };
        let (st, apply) = s.wire.unwrap_or_default();
        let per = |n: u64, d: u64| n.checked_div(d).unwrap_or(0);
        writeln!(
            out,
            "| {} | {} | {} | {} | {:.1} | {} | {} | {:.3} |",
            w.name,
            s.slices,
            st.frames,
            per(st.slice_bytes, st.slice_frames),
            st.bytes as f64 / s.descriptors.max(1) as f64,
            per(st.encode_ns, st.frames),
            per(apply, st.frames),
            median(ratios),
        )?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(out)
}
