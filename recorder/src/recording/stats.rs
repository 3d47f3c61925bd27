//! What `strobe stats` shows, as data: the job, the slice summary, the decisions, the
//! blocked calls and the per-process statistics. The CLI turns it into text; its
//! `serde::Serialize` form is `strobe stats --json` (docs/cli.md), whose keys scripts rely
//! on: the figures that only the text shows are therefore not serialized.

use std::ops::Not;

use serde::Serialize;

use super::Recording;
use crate::mmds_stats::{mmds_per_rank, mmds_stats, MmdsStats};
use crate::RecordError;

/// A name and how often it occurs (slice start reasons, decision kinds).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KindCount {
    pub kind: String,
    pub count: u64,
}

/// GETTS over the slices that measured it (not the `first` slice, not slices outside the
/// metrics window).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GettsStats {
    pub slices: u64,
    pub max_ns: Option<i64>,
    pub mean_ns: Option<f64>,
    /// Nearest-rank percentiles (0 when there are no slices).
    #[serde(skip)]
    pub p50_ns: i64,
    #[serde(skip)]
    pub p99_ns: i64,
}

/// A slice among those with the highest GETTS.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TopSlice {
    pub slice: u64,
    pub reason: String,
    pub getts_ns: i64,
    pub descriptors: i64,
    pub decisions: i64,
}

/// How many rank-slices were spent blocked in a call, by how many ranks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BlockedCall {
    pub call: String,
    pub rank_slices: u64,
    pub ranks: u64,
}

/// `strobe stats` of a recording (see the module documentation for the JSON form).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stats {
    /// The recording's path, as it was opened.
    pub recording: String,
    pub format_version: i64,
    /// `verified`, or `unverified (why)`: the content checksum (`checksum.rs`). Damage
    /// never gets here (the file is refused).
    pub content_checksum: String,
    pub ranks: u32,
    pub nodes: u32,
    pub policy: String,
    pub outcome: Option<String>,
    pub exit_status: Option<i32>,
    pub elapsed_ns: Option<i64>,
    pub total_slices: Option<u64>,
    pub recorded_slices: u64,
    pub getts: GettsStats,
    /// The statistics shown: of the rank asked for, or of the whole job. `None` when the
    /// metrics layer was off.
    pub mmds: Option<MmdsStats>,
    /// Every rank's statistics, or only the rank asked for.
    pub mmds_ranks: Vec<MmdsStats>,
    /// False when some shown rank's (or the job's) computation + communication differs
    /// from its run time by more than 0.01%: the monitoring lost or double-counted time.
    pub accurate: bool,
    /// The correctness checks' findings (`None`: the file predates the checks).
    pub checks: Option<Vec<super::CheckRow>>,
    /// What `strobe explore` forced to get this recording (`None`: not one of its).
    pub explored: Option<super::Explored>,
    /// The rank asked for (`--rank`), if any.
    #[serde(skip)]
    pub rank: Option<u32>,
    #[serde(skip)]
    pub command: Vec<String>,
    #[serde(skip)]
    pub slice_ns: u64,
    #[serde(skip)]
    pub message: Option<String>,
    /// Slices per start reason: `first`, `timer`, then the others.
    #[serde(skip)]
    pub reasons: Vec<KindCount>,
    /// Decisions per kind, most frequent first.
    #[serde(skip)]
    pub decisions: Vec<KindCount>,
    #[serde(skip)]
    pub descriptors: u64,
    /// The five slices with the highest GETTS.
    #[serde(skip)]
    pub top_slices: Vec<TopSlice>,
    /// Blocked rank-slices per call, most frequent first.
    #[serde(skip)]
    pub blocked: Vec<BlockedCall>,
}

/// The value at fraction `p` of an ascending list (nearest rank).
fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

impl Recording {
    /// `strobe stats`: the slice summary, and the per-process statistics of `rank` (of the
    /// whole job with `None`). Asking for a rank without statistics is
    /// [`RecordError::NoMmds`].
    pub fn stats(&self, rank: Option<u32>) -> Result<Stats, RecordError> {
        // Every figure below comes from these tables: check them whatever the file's size.
        super::validate::tables(&self.conn)?;
        // And the replay log against the slice table: what `replay` would refuse as
        // damaged, `stats` must not show as a good recording.
        match self.replay_log() {
            // A file made before the replay log existed (format 1) has none to check.
            Ok(_) | Err(RecordError::NotARecording(_)) => {}
            Err(e) => return Err(e),
        }
        let job_mmds = mmds_stats(&self.conn, None)?;
        let per_rank = mmds_per_rank(&self.conn)?;
        let mmds = match rank {
            Some(r) => Some(
                per_rank
                    .iter()
                    .find(|s| s.rank == Some(r))
                    .cloned()
                    .ok_or(RecordError::NoMmds(r))?,
            ),
            None => job_mmds,
        };
        let mmds_ranks = match rank {
            Some(_) => mmds.clone().into_iter().collect(),
            None => per_rank,
        };
        // With --rank only that rank is checked; otherwise the job and every rank.
        let accurate = mmds.iter().chain(&mmds_ranks).all(MmdsStats::accurate);
        let job = &self.job;
        Ok(Stats {
            recording: self.path.display().to_string(),
            format_version: job.format_version,
            content_checksum: self.checksum.describe(),
            ranks: job.ranks,
            nodes: job.nodes,
            policy: job.policy.clone(),
            outcome: job.outcome.clone(),
            exit_status: job.exit_status,
            elapsed_ns: job.elapsed_ns,
            total_slices: job.total_slices,
            recorded_slices: self.count("SELECT count(*) FROM slice")?,
            getts: self.getts_stats()?,
            mmds,
            mmds_ranks,
            accurate,
            checks: self.checks()?,
            explored: self.explored()?,
            rank,
            command: job.command.clone(),
            slice_ns: job.slice_ns,
            message: job.message.clone(),
            reasons: self.kind_counts(
                "SELECT reason, count(*) FROM slice GROUP BY reason
                 ORDER BY CASE reason WHEN 'first' THEN 0 WHEN 'timer' THEN 1 ELSE 2 END",
            )?,
            decisions: self
                .decision_kind_counts()?
                .into_iter()
                .map(|(kind, count)| KindCount { kind, count })
                .collect(),
            descriptors: self.descriptor_count()?,
            top_slices: self.top_slices()?,
            blocked: self.blocked_calls()?,
        })
    }

    fn count(&self, sql: &str) -> Result<u64, RecordError> {
        Ok(self.conn.query_row(sql, [], |r| r.get::<_, i64>(0))?.max(0) as u64)
    }

    fn kind_counts(&self, sql: &str) -> Result<Vec<KindCount>, RecordError> {
        let mut st = self.conn.prepare(sql)?;
        let rows = st
            .query_map([], |r| {
                Ok(KindCount {
                    kind: r.get(0)?,
                    count: r.get::<_, i64>(1)?.max(0) as u64,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }

    fn getts_stats(&self) -> Result<GettsStats, RecordError> {
        // The first slice's GETTS measures nothing (there is no previous slice).
        let mut st = self.conn.prepare(
            "SELECT getts_ns FROM slice WHERE getts_ns IS NOT NULL AND reason != 'first'
             ORDER BY getts_ns",
        )?;
        let getts: Vec<i64> = st.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
        let sum: i128 = getts.iter().map(|&g| g as i128).sum();
        Ok(GettsStats {
            slices: getts.len() as u64,
            max_ns: getts.last().copied(),
            mean_ns: getts
                .is_empty()
                .not()
                .then(|| sum as f64 / getts.len() as f64),
            p50_ns: percentile(&getts, 0.5),
            p99_ns: percentile(&getts, 0.99),
        })
    }

    fn top_slices(&self) -> Result<Vec<TopSlice>, RecordError> {
        let mut st = self.conn.prepare(
            "SELECT slice, reason, getts_ns, n_descriptors,
                    n_matches + n_chunks + n_collectives + n_completions
             FROM slice WHERE getts_ns IS NOT NULL AND reason != 'first'
             ORDER BY getts_ns DESC, slice LIMIT 5",
        )?;
        let rows = st
            .query_map([], |r| {
                Ok(TopSlice {
                    slice: r.get::<_, i64>(0)?.max(0) as u64,
                    reason: r.get(1)?,
                    getts_ns: r.get(2)?,
                    descriptors: r.get(3)?,
                    decisions: r.get(4)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }

    fn blocked_calls(&self) -> Result<Vec<BlockedCall>, RecordError> {
        let mut st = self.conn.prepare(
            // An open span (`last_slice` NULL: a recording cut short) reaches the last
            // slice.
            "SELECT call,
                    sum(ifnull(last_slice, (SELECT max(slice) FROM slice)) - first_slice + 1)
                      AS n,
                    count(DISTINCT rank)
             FROM blocked_span GROUP BY call ORDER BY n DESC, call",
        )?;
        let rows = st
            .query_map([], |r| {
                Ok(BlockedCall {
                    call: r.get(0)?,
                    rank_slices: r.get::<_, i64>(1)?.max(0) as u64,
                    ranks: r.get::<_, i64>(2)?.max(0) as u64,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }
}
