//! `strobe bench record`: what recording costs. The same job runs under `strobe run` and
//! under `strobe record` with different layers, alternating A B C, B C A, C A B ... after
//! one warm-up of each mode, so slow drifts of a shared machine hit every mode alike. For each
//! round the job's wall time under each recording mode is divided by the same round's
//! `strobe run` time; the table gives the median ratio and its spread (min..max). Also the
//! size of the recordings: bytes per descriptor (full recording) and per slice.
//!
//! Workloads are the papers' synthetic benchmarks at 10 ms granularity (002_..., section
//! 6: computation then a barrier; computation then a non-blocking exchange of 4 KiB with 4
//! neighbours) and a message-heavy one (the same exchange without computation).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use strobe_recorder::{JobInfo, Layer, RecordOptions, Recorder};
use strobe_runtime::engine::{EngineConfig, NullSink, StrobePolicy, DEFAULT_DIRECT_COPY_MIN};
use strobe_runtime::launcher::{self, LaunchConfig};
use strobe_runtime::mmds::DEFAULT_RESOLUTION;
use strobe_runtime::sched::DEFAULT_CHUNK_BUDGET;

/// How a job is run. Adding a recording mode (the replay log only, when it lands) is one
/// more entry in [`MODES`].
#[derive(Clone, Copy)]
struct Mode {
    name: &'static str,
    /// `None`: `strobe run` (no recorder).
    record: Option<(Layer, Layer)>,
}

const MODES: &[Mode] = &[
    Mode {
        name: "run",
        record: None,
    },
    Mode {
        name: "record, schedule log and metrics off",
        record: Some((Layer::Off, Layer::Off)),
    },
    Mode {
        name: "record, everything on",
        record: Some((Layer::On, Layer::On)),
    },
];

struct Workload {
    name: &'static str,
    program: &'static str,
    args: Vec<String>,
}

fn workloads(iterations: u64, heavy_iterations: u64) -> Vec<Workload> {
    vec![
        Workload {
            name: "barrier every 10 ms",
            program: "barrier_every",
            args: vec!["10000".into(), iterations.to_string()],
        },
        Workload {
            name: "10 ms + 4-neighbour 4 KiB exchange",
            program: "exchange",
            args: vec!["10000".into(), iterations.to_string(), "4096".into()],
        },
        Workload {
            name: "message-heavy: 4-neighbour 4 KiB exchange, no computation",
            program: "exchange",
            args: vec!["0".into(), heavy_iterations.to_string(), "4096".into()],
        },
    ]
}

/// What one run measured.
struct Sample {
    elapsed: Duration,
    /// Recording modes: file size, descriptors and slices in it.
    file: Option<(u64, i64, i64)>,
}

fn program(name: &str) -> Result<PathBuf> {
    let p = crate::paths::sibling(name)?;
    if !p.exists() {
        bail!(
            "fixture {} not built (cargo build --release --workspace)",
            p.display()
        );
    }
    Ok(p)
}

fn run_once(ranks: u32, w: &Workload, mode: Mode, db: &Path) -> Result<Sample> {
    let mut cfg = LaunchConfig {
        engine: EngineConfig {
            ranks,
            nodes: 1,
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
        program: program(w.program)?,
        args: w.args.iter().map(Into::into).collect(),
        tag_output: false,
        timeout: Some(Duration::from_secs(600)),
        env: Vec::new(),
        mmds_resolution: 0,
        output: None,
        output_marks: None,
    };
    let Some((schedule_log, metrics)) = mode.record else {
        let report = launcher::launch(&cfg, Arc::new(NullSink), None)?;
        if let Some(m) = report.message() {
            bail!("{} failed: {m}", w.program);
        }
        return Ok(Sample {
            elapsed: report.elapsed,
            file: None,
        });
    };
    if metrics != Layer::Off {
        cfg.mmds_resolution = DEFAULT_RESOLUTION;
    }
    let _ = std::fs::remove_file(db);
    let command = std::iter::once(cfg.program.clone().into_os_string())
        .chain(cfg.args.iter().cloned())
        .collect::<Vec<_>>();
    let opts = RecordOptions {
        schedule_log,
        metrics,
        ..RecordOptions::default()
    };
    let rec = Arc::new(Recorder::create(db, &JobInfo::new(&cfg, &command), opts)?);
    let report = launcher::launch(&cfg, rec.clone(), None)?;
    rec.finish(&report)?;
    if let Some(m) = report.message() {
        bail!("{} failed: {m}", w.program);
    }
    let size = std::fs::metadata(db)?.len();
    let totals = strobe_recorder::Recording::open(db)?.totals()?;
    let (slices, descriptors) = (totals.slice_rows as i64, totals.descriptors as i64);
    Ok(Sample {
        elapsed: report.elapsed,
        file: Some((size, descriptors, slices)),
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Run every workload `rounds` times in every mode (after a warm-up round) and report.
pub fn record_overhead(ranks: u32, rounds: u32, iterations: u64, heavy: u64) -> Result<String> {
    let dir = std::env::temp_dir().join(format!("strobe-bench-record-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let db = dir.join("bench.db");
    let mut out = String::new();
    writeln!(out, "### Recording overhead\n")?;
    writeln!(
        out,
        "{ranks} ranks, adaptive strobe, 500 us slices. Each round runs every mode once ({}), \
         starting one mode later each round, after one warm-up round; {rounds} rounds. Ratio = the job's wall time \
         under the mode / the same round's `strobe run` time: median (min..max over rounds).\n",
        MODES.iter().map(|m| m.name).collect::<Vec<_>>().join(", ")
    )?;
    let mut header = String::from("| workload | run (s, median) |");
    let mut rule = String::from("|---|---:|");
    for m in &MODES[1..] {
        write!(header, " {} |", m.name)?;
        rule.push_str("---:|");
    }
    header.push_str(" full recording: bytes/descriptor | bytes/slice, layers off |");
    rule.push_str("---:|---:|");
    writeln!(out, "{header}\n{rule}")?;
    let workloads = workloads(iterations, heavy);
    let bar = progress_bar((workloads.len() * (rounds as usize + 1) * MODES.len()) as u64);
    let run = |w: &Workload, m: Mode, what: &str| {
        bar.set_message(format!("{}, {what}, {}", w.name, m.name));
        let s = run_once(ranks, w, m, &db);
        bar.inc(1);
        s
    };
    for w in &workloads {
        for &m in MODES {
            run(w, m, "warm-up")?;
        }
        let mut samples: Vec<Vec<Sample>> = MODES.iter().map(|_| Vec::new()).collect();
        for round in 0..rounds as usize {
            // Rotate the order each round: no mode always runs right after the same one
            // (the kernel writes the previous recording back to disk during the next run).
            for k in 0..MODES.len() {
                let i = (round + k) % MODES.len();
                let what = format!("round {}/{rounds}", round + 1);
                samples[i].push(run(w, MODES[i], &what)?);
            }
        }
        let base: Vec<f64> = samples[0].iter().map(|s| s.elapsed.as_secs_f64()).collect();
        write!(out, "| {} | {:.3} |", w.name, median(&mut base.clone()))?;
        for s in &samples[1..] {
            let mut ratios: Vec<f64> = s
                .iter()
                .zip(&base)
                .map(|(x, b)| x.elapsed.as_secs_f64() / b)
                .collect();
            let lo = ratios.iter().cloned().fold(f64::INFINITY, f64::min);
            let hi = ratios.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            write!(out, " {:.3} ({:.3}..{:.3}) |", median(&mut ratios), lo, hi)?;
        }
        let full = samples.last().and_then(|s| s.last()).and_then(|s| s.file);
        let off = samples.get(1).and_then(|s| s.last()).and_then(|s| s.file);
        let per = |f: Option<(u64, i64, i64)>, by_slices: bool| match f {
            Some((size, d, sl)) => {
                let n = if by_slices { sl } else { d };
                if n > 0 {
                    format!("{:.1}", size as f64 / n as f64)
                } else {
                    "-".into()
                }
            }
            None => "-".into(),
        };
        writeln!(out, " {} | {} |", per(full, false), per(off, true))?;
    }
    bar.finish_and_clear();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(out)
}

/// The progress line on stderr (issue 12, item 5: `bench record` ran for minutes without a
/// word): runs done of all, the workload, round and mode running, the ETA. Hidden when
/// stderr is not a terminal (indicatif's default target), so reports stay clean.
fn progress_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(
            "strobe bench: recording overhead [{bar:20}] {pos}/{len} runs, ETA {eta}: {wide_msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}
