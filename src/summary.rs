//! An in-memory sink that keeps per-slice aggregates for `--summary` and `strobe demo`.

use std::sync::Mutex;
use std::time::Duration;

use strobe_runtime::engine::{SliceRecord, SliceSink, StartReason};

#[derive(Default)]
struct Agg {
    slices: u64,
    reasons: [u64; 4],
    getts_us: Vec<f64>,
    gtts_us: Vec<f64>,
    descriptors: u64,
    matches: u64,
    chunks: u64,
    collectives: u64,
    completions: u64,
    retries: u64,
    blocked_slices: u64,
}

#[derive(Default)]
pub struct Summary {
    agg: Mutex<Agg>,
}

impl SliceSink for Summary {
    fn slice(&self, rec: &SliceRecord) {
        let mut a = self.agg.lock().expect("summary lock");
        a.slices += 1;
        a.reasons[rec.reason as usize] += 1;
        if rec.reason != StartReason::First {
            a.getts_us.push(rec.global.getts.as_secs_f64() * 1e6);
        }
        a.gtts_us.push(rec.global.gtts.as_secs_f64() * 1e6);
        a.descriptors += rec.descriptors.len() as u64;
        let c = rec.decisions.counts();
        a.matches += c.matches as u64;
        a.chunks += c.chunks as u64;
        a.collectives += c.collectives as u64;
        a.completions += c.completions as u64;
        a.retries += rec.global.usrsts as u64;
        if !rec.blocked.is_empty() {
            a.blocked_slices += 1;
        }
    }
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * p).round() as usize]
}

impl Summary {
    pub fn render(&self, elapsed: Duration) -> String {
        let mut a = self.agg.lock().expect("summary lock");
        let (g50, g99, gmax) = (
            pct(&mut a.getts_us, 0.5),
            pct(&mut a.getts_us, 0.99),
            pct(&mut a.getts_us, 1.0),
        );
        let (t50, t99) = (pct(&mut a.gtts_us, 0.5), pct(&mut a.gtts_us, 0.99));
        format!(
            "strobe summary\n\
             \x20 wall time            {:.3} s\n\
             \x20 slices               {} (timer {}, early {}, first {})\n\
             \x20 GETTS (us)           p50 {:.1}  p99 {:.1}  max {:.1}\n\
             \x20 GTTS  (us)           p50 {:.1}  p99 {:.1}\n\
             \x20 descriptors          {}\n\
             \x20 matches / chunks     {} / {}\n\
             \x20 collectives          {}\n\
             \x20 completions          {}\n\
             \x20 sync retries (USR)   {}\n\
             \x20 slices with blocked  {}\n",
            elapsed.as_secs_f64(),
            a.slices,
            a.reasons[StartReason::Timer as usize],
            a.reasons[StartReason::Early as usize],
            a.reasons[StartReason::First as usize],
            g50,
            g99,
            gmax,
            t50,
            t99,
            a.descriptors,
            a.matches,
            a.chunks,
            a.collectives,
            a.completions,
            a.retries,
            a.blocked_slices,
        )
    }
}

/// `--summary` of a job on node daemons: one line per node after the job's summary.
pub fn render_nodes(nodes: &[strobe_runtime::daemon::machine::NodeSummary]) -> String {
    nodes
        .iter()
        .map(|n| {
            format!(
                "  {:<21}host {}, {} rank{}, {} slices\n",
                format!("node {}", n.node),
                n.host,
                n.ranks,
                if n.ranks == 1 { "" } else { "s" },
                n.slices
            )
        })
        .collect()
}

/// Fan one slice stream out to several sinks.
pub struct Tee(pub Vec<std::sync::Arc<dyn SliceSink>>);

impl SliceSink for Tee {
    fn slice(&self, rec: &SliceRecord) {
        for s in &self.0 {
            s.slice(rec);
        }
    }
    fn node_metrics(&self, slice: u64, m: &strobe_runtime::engine::LocalMetrics) {
        for s in &self.0 {
            s.node_metrics(slice, m);
        }
    }
    fn mmds(&self, ranks: &[strobe_runtime::mmds::RankMmds]) {
        for s in &self.0 {
            s.mmds(ranks);
        }
    }

    fn outcomes(&self, rank: u32, recs: &[strobe_runtime::outcome::OutcomeRec]) {
        for s in &self.0 {
            s.outcomes(rank, recs);
        }
    }

    fn captures(&self, rank: u32) -> bool {
        self.0.iter().any(|s| s.captures(rank))
    }

    fn payload(&self, p: &strobe_runtime::engine::Payload) {
        for s in self.0.iter().filter(|s| s.captures(p.desc.rank)) {
            s.payload(p);
        }
    }
}
