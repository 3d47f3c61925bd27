//! `strobe bench`: measurements of the runtime itself. Figures are measured, never asserted;
//! the output is Markdown meant to be kept in `docs/`.
//!
//! - `empty-slice`: the cost of one slice in which nothing happens (every rank idle), for a
//!   range of rank counts: slices run back to back (`fixed` policy, zero length) while the
//!   ranks sit blocked, and the cost is the median GTTS (strobe to end of slice on every node).
//! - `validation`: the papers' validation run (000_... section 5.3): ranks barrier every
//!   1.9 ms under fixed 250 us slices; reports the GETTS distribution and how many slices
//!   separate consecutive barriers of each rank and consecutive scheduled barriers.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use strobe_runtime::descriptor::DescKind;
use strobe_runtime::engine::{EngineConfig, SliceRecord, SliceSink, StartReason, StrobePolicy};
use strobe_runtime::launcher::{self, LaunchConfig};
use strobe_runtime::sched::{Decision, DEFAULT_CHUNK_BUDGET};

/// Keeps what the benchmarks need from each slice.
#[derive(Default)]
struct Collect {
    rows: Mutex<Vec<Row>>,
}

#[derive(Clone)]
struct Row {
    slice: u64,
    reason: StartReason,
    getts_us: f64,
    gtts_us: f64,
    descriptors: usize,
    /// (rank, kind) of each descriptor handled.
    posts: Vec<(u32, u8)>,
    collectives: u32,
}

impl SliceSink for Collect {
    fn slice(&self, rec: &SliceRecord) {
        let collectives = rec
            .decisions
            .decisions
            .iter()
            .filter(|d| matches!(d, Decision::Collective(_)))
            .count() as u32;
        self.rows.lock().expect("bench lock").push(Row {
            slice: rec.slice,
            reason: rec.reason,
            getts_us: rec.global.getts.as_secs_f64() * 1e6,
            gtts_us: rec.global.gtts.as_secs_f64() * 1e6,
            descriptors: rec.descriptors.len(),
            posts: rec.descriptors.iter().map(|d| (d.rank, d.kind)).collect(),
            collectives,
        });
    }
}

fn fixture(name: &str) -> Result<PathBuf> {
    let p = crate::paths::sibling(name)?;
    if !p.exists() {
        bail!(
            "fixture {} not built (cargo build --release --workspace)",
            p.display()
        );
    }
    Ok(p)
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn run_job(
    ranks: u32,
    nodes: u32,
    policy: StrobePolicy,
    slice: Duration,
    prog: &str,
    args: &[&str],
) -> Result<(Vec<Row>, Duration)> {
    let sink = Arc::new(Collect::default());
    let cfg = LaunchConfig {
        engine: EngineConfig {
            ranks,
            nodes,
            slice,
            policy,
            deadlock_slices: u32::MAX,
            chunk_budget: DEFAULT_CHUNK_BUDGET,
            direct_copy_min: strobe_runtime::engine::DEFAULT_DIRECT_COPY_MIN,
            eager_max: strobe_runtime::engine::DEFAULT_EAGER_MAX,
            inline_max: strobe_runtime::engine::DEFAULT_INLINE_MAX,
            local_null: true,
            placement: None,
        },
        program: fixture(prog)?,
        args: args.iter().map(Into::into).collect(),
        tag_output: false,
        timeout: Some(Duration::from_secs(300)),
        env: Vec::new(),
        mmds_resolution: 0,
        output: None,
        output_marks: None,
    };
    let report = launcher::launch(&cfg, sink.clone(), None)?;
    if let Some(m) = report.message() {
        bail!("{prog} on {ranks} ranks failed: {m}");
    }
    let rows = std::mem::take(&mut *sink.rows.lock().expect("bench lock"));
    Ok((rows, report.elapsed))
}

pub fn empty_slice(ranks: &[u32], nodes: &[u32], idle_ms: u32) -> Result<String> {
    let mut out = String::new();
    writeln!(out, "### Cost of an empty slice\n")?;
    writeln!(
        out,
        "Every rank blocked in a barrier while rank 0 sleeps {idle_ms} ms; slices run back to back \
         (`--strobe fixed --slice 0us`). Cost = GTTS of slices that handled no descriptor \
         (strobe until every node finished RM), and slices per second over the idle period.\n"
    )?;
    writeln!(out, "| ranks | nodes | empty slices | GTTS p50 (us) | GTTS p90 (us) | GTTS p99 (us) | slices/s |")?;
    writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|")?;
    for &k in nodes {
        for &n in ranks {
            if k > n {
                continue;
            }
            let (rows, _) = run_job(
                n,
                k,
                StrobePolicy::Fixed,
                Duration::ZERO,
                "idle",
                &[&idle_ms.to_string()],
            )?;
            let empty: Vec<&Row> = rows
                .iter()
                .filter(|r| r.descriptors == 0 && r.slice > 2)
                .collect();
            let mut gtts: Vec<f64> = empty.iter().map(|r| r.gtts_us).collect();
            let total_us: f64 = empty.iter().map(|r| r.getts_us).sum();
            let rate = empty.len() as f64 / (total_us / 1e6);
            writeln!(
                out,
                "| {n} | {k} | {} | {:.1} | {:.1} | {:.1} | {:.0} |",
                empty.len(),
                percentile(&mut gtts, 0.5),
                percentile(&mut gtts, 0.9),
                percentile(&mut gtts, 0.99),
                rate
            )?;
        }
    }
    Ok(out)
}

pub fn validation(ranks: u32, iterations: u32) -> Result<String> {
    let (rows, elapsed) = run_job(
        ranks,
        1,
        StrobePolicy::Fixed,
        Duration::from_micros(250),
        "barrier_every",
        &["1900", &iterations.to_string()],
    )?;
    let mut out = String::new();
    writeln!(
        out,
        "### The papers' validation run (000_... section 5.3)\n"
    )?;
    writeln!(
        out,
        "{ranks} ranks barrier every 1.9 ms of computation, {iterations} iterations, fixed 250 us slices; \
         {} slices in {:.2} s.\n",
        rows.len(),
        elapsed.as_secs_f64()
    )?;
    // GETTS distribution over timer-started slices.
    let mut getts: Vec<f64> = rows
        .iter()
        .filter(|r| r.reason == StartReason::Timer)
        .map(|r| r.getts_us)
        .collect();
    let within = getts
        .iter()
        .filter(|&&g| (250.0..=270.0).contains(&g))
        .count();
    let near = getts
        .iter()
        .filter(|&&g| (240.0..=270.0).contains(&g))
        .count();
    let n = getts.len().max(1);
    writeln!(out, "GETTS (time between slice starts), us:\n")?;
    writeln!(
        out,
        "| min | p1 | p50 | p90 | p99 | p99.9 | max | in 250-270 us | in 240-270 us |"
    )?;
    writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|")?;
    writeln!(
        out,
        "| {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1}% | {:.1}% |\n",
        percentile(&mut getts, 0.0),
        percentile(&mut getts, 0.01),
        percentile(&mut getts, 0.5),
        percentile(&mut getts, 0.9),
        percentile(&mut getts, 0.99),
        percentile(&mut getts, 0.999),
        percentile(&mut getts, 1.0),
        100.0 * within as f64 / n as f64,
        100.0 * near as f64 / n as f64
    )?;
    // Slices between consecutive barrier descriptors of each rank, and between scheduled barriers.
    let mut per_rank: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    let mut sched = Vec::new();
    for r in &rows {
        for &(rank, kind) in &r.posts {
            if kind == DescKind::Barrier as u8 {
                per_rank.entry(rank).or_default().push(r.slice);
            }
        }
        if r.collectives > 0 {
            sched.push(r.slice);
        }
    }
    let gaps = |v: &[u64]| -> BTreeMap<u64, usize> {
        let mut h = BTreeMap::new();
        for w in v.windows(2).skip(1) {
            *h.entry(w[1] - w[0]).or_insert(0) += 1;
        }
        h
    };
    let fmt_hist = |h: &BTreeMap<u64, usize>| -> String {
        let total: usize = h.values().sum();
        let in_8_9: usize = h
            .iter()
            .filter(|(k, _)| (8..=9).contains(*k))
            .map(|(_, v)| v)
            .sum();
        let parts: Vec<String> = h.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        format!(
            "{} ({:.1}% in 8-9)",
            parts.join(", "),
            100.0 * in_8_9 as f64 / total.max(1) as f64
        )
    };
    writeln!(out, "Slices between consecutive barriers (gap: count):\n")?;
    for (rank, v) in &per_rank {
        writeln!(
            out,
            "- rank {rank} enters a barrier every {}",
            fmt_hist(&gaps(v))
        )?;
    }
    writeln!(
        out,
        "- a barrier is scheduled every {}",
        fmt_hist(&gaps(&sched))
    )?;
    Ok(out)
}

/// `strobe bench tui`: generate (or reuse) a synthetic recording, then time the TUI on it
/// at the three terminal sizes the rendering tests use.
pub fn tui(slices: u64, ranks: u32, nodes: u32, db: Option<PathBuf>) -> Result<String> {
    if ranks < 4 || nodes == 0 || nodes > ranks || slices < 100 {
        bail!("strobe bench tui needs --ranks >= 4, 1 <= --nodes <= ranks, --slices >= 100");
    }
    let tmp = tempfile::tempdir().context("creating a temporary directory")?;
    let path = db.unwrap_or_else(|| tmp.path().join("synthetic.db"));
    let mut text = String::from("## TUI on a synthetic recording\n\n");
    if !path.exists() {
        let t = Instant::now();
        strobe_tui::synthetic::generate(&path, slices, ranks, nodes)
            .with_context(|| format!("generating {}", path.display()))?;
        eprintln!(
            "generated {} in {:.1} s",
            path.display(),
            t.elapsed().as_secs_f64()
        );
    }
    for (w, h) in [(80, 24), (120, 40), (200, 60)] {
        text.push_str(&strobe_tui::bench::measure(&path, w, h)?);
        text.push('\n');
    }
    Ok(text)
}
