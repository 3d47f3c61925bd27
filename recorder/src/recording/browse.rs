//! The terminal UI's queries: chart columns downsampled in SQL (over the chart summaries
//! when columns are whole summary blocks), the blocked-process grid, jumps to notable
//! slices, one slice's detail and the per-process statistics.
//!
//! Nothing here loads a table whole. Charts ask for one (min, max) pair per screen column,
//! computed by SQLite with `GROUP BY` over the slice bucket of the visible range; the
//! blocked-process grid is aggregated the same way and, when a column covers many slices,
//! sampled at [`GRID_SAMPLES`] evenly spaced slices (looked up by primary key).

use rusqlite::{params, OptionalExtension};
use serde::Serialize;
use strobe_core::descriptor::DescRef;
use strobe_core::sched::Decision;

use super::{DescriptorRow, NodeRow, Recording, SliceRow};
use crate::mmds_stats::{mmds_stats, PrimitiveRow};
use crate::RecordError;

/// One screen column of the overview charts: (min, max) over the slices it covers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Column {
    pub getts_ns: Option<(i64, i64)>,
    pub ncolldem: Option<(i64, i64)>,
    pub ncollmsm: Option<(i64, i64)>,
    pub np2pdem: Option<(i64, i64)>,
    pub np2pmsm: Option<(i64, i64)>,
}

/// A blocked rank and the descriptor it most recently posted (what it waits for).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BlockedRank {
    pub rank: u32,
    pub call: String,
    pub waits_on: Option<DescriptorRow>,
    /// `waits_on` is matched or completed by a decision of this slice: it no longer waits
    /// for another rank (the wait-for graph leaves it out).
    pub matched: bool,
    /// Where in the program the rank made its call (`deadlock.c:23 (in exchange)`), when
    /// the recording has it (format [`crate::migrations::CALL_SITES_VERSION`] and later).
    pub site: Option<String>,
}

/// Everything the slice detail view shows about one slice.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SliceDetail {
    pub slice: u64,
    pub row: Option<SliceRow>,
    pub descriptors: Vec<DescriptorRow>,
    /// The slice's decisions in order (empty when the schedule log does not cover it:
    /// see [`Recording::decisions`]).
    #[serde(skip)]
    pub decisions: Vec<Decision>,
    pub blocked: Vec<BlockedRank>,
    pub nodes: Vec<NodeRow>,
}

/// Kinds of slices the views can jump to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Notable {
    /// A slice that scheduled a collective.
    Collective,
    /// A slice where the set of blocked ranks changed size.
    BlockedChange,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RankTotals {
    pub wall_ns: i64,
    pub compute_ns: i64,
    pub comm_ns: i64,
    pub calls: i64,
}

/// Per-process statistics (the papers' MMDS) of one rank or of all ranks.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ProcessStats {
    pub totals: RankTotals,
    /// By primitive name.
    pub primitives: Vec<PrimitiveRow>,
    /// (lo, hi, count) bins of computation granularity and communication overhead.
    pub granularity: Vec<(i64, i64, i64)>,
    pub overhead: Vec<(i64, i64, i64)>,
}

impl Recording {
    /// One [`Column`] per screen column: column `c` covers slices
    /// `first + c*per_col .. first + (c+1)*per_col`. NCOLL and NP2P are the per-node
    /// counters (the papers' local metrics): min and max over the column's slices and the
    /// nodes. When columns are whole blocks of the recorder's summaries (`per_col` a
    /// multiple of 64 or 4096 and `first - 1` too) the summaries are read instead of the
    /// slices: a few hundred rows for any zoom.
    pub fn columns(
        &self,
        first: u64,
        per_col: u64,
        cols: usize,
    ) -> Result<Vec<Column>, RecordError> {
        let mut out = vec![Column::default(); cols];
        let end = first + per_col * cols as u64;
        let span = [4096u64, 64]
            .into_iter()
            .find(|&b| {
                self.has_summaries
                    && self.use_summaries
                    && per_col.is_multiple_of(b)
                    && (first - 1).is_multiple_of(b)
            })
            .unwrap_or(1);
        let (getts_sql, node_sql) = if span == 1 {
            // The first slice's GETTS measures nothing (there was no previous slice).
            (
                "SELECT (slice - ?1) / ?2 AS col, min(getts_ns), max(getts_ns) FROM slice
                 WHERE slice >= ?1 AND slice < ?3 AND getts_ns IS NOT NULL AND reason != 'first'
                 GROUP BY col",
                "SELECT (slice - ?1) / ?2 AS col, min(ncolldem), max(ncolldem), min(ncollmsm),
                        max(ncollmsm), min(np2pdem), max(np2pdem), min(np2pmsm), max(np2pmsm)
                 FROM node_slice WHERE slice >= ?1 AND slice < ?3 GROUP BY col",
            )
        } else {
            (
                "SELECT (block * ?4 + 1 - ?1) / ?2 AS col, min(lo), max(hi) FROM summary_getts
                 WHERE span = ?4 AND block >= (?1 - 1) / ?4 AND block < (?3 - 1) / ?4
                 GROUP BY col",
                "SELECT (block * ?4 + 1 - ?1) / ?2 AS col, min(ncolldem_lo), max(ncolldem_hi),
                        min(ncollmsm_lo), max(ncollmsm_hi), min(np2pdem_lo), max(np2pdem_hi),
                        min(np2pmsm_lo), max(np2pmsm_hi)
                 FROM summary_node
                 WHERE span = ?4 AND block >= (?1 - 1) / ?4 AND block < (?3 - 1) / ?4
                 GROUP BY col",
            )
        };
        // Parameters a statement does not use must not be bound.
        let bounds = [first as i64, per_col as i64, end as i64, span as i64];
        let bound = if span == 1 { &bounds[..3] } else { &bounds[..] };
        self.each_column(getts_sql, bound, &mut out, |r, col| {
            col.getts_ns = Some((r.get(1)?, r.get(2)?));
            Ok(())
        })?;
        self.each_column(node_sql, bound, &mut out, |r, col| {
            col.ncolldem = Some((r.get(1)?, r.get(2)?));
            col.ncollmsm = Some((r.get(3)?, r.get(4)?));
            col.np2pdem = Some((r.get(5)?, r.get(6)?));
            col.np2pmsm = Some((r.get(7)?, r.get(8)?));
            Ok(())
        })?;
        Ok(out)
    }

    /// Run a chart query whose first result column is the screen column, handing each row
    /// to `fill` with its [`Column`] (rows outside the screen are skipped).
    fn each_column(
        &self,
        sql: &str,
        bound: &[i64],
        out: &mut [Column],
        mut fill: impl FnMut(&rusqlite::Row<'_>, &mut Column) -> rusqlite::Result<()>,
    ) -> Result<(), RecordError> {
        let mut st = self.conn.prepare_cached(sql)?;
        let mut rows = st.query(rusqlite::params_from_iter(bound))?;
        while let Some(r) = rows.next()? {
            let c: i64 = r.get(0)?;
            if let Some(col) = usize::try_from(c).ok().and_then(|c| out.get_mut(c)) {
                fill(r, col)?;
            }
        }
        Ok(())
    }
    /// The next (or previous) slice after `from` of the given kind.
    pub fn notable(
        &self,
        kind: Notable,
        from: u64,
        forward: bool,
    ) -> Result<Option<u64>, RecordError> {
        let sql = match (kind, forward) {
            (Notable::Collective, true) => {
                "SELECT slice FROM slice WHERE slice > ?1 AND n_collectives > 0 ORDER BY slice LIMIT 1"
            }
            (Notable::Collective, false) => {
                "SELECT slice FROM slice WHERE slice < ?1 AND n_collectives > 0 ORDER BY slice DESC LIMIT 1"
            }
            (Notable::BlockedChange, true) => {
                "SELECT slice FROM slice WHERE slice > ?1 AND n_blocked !=
                   (SELECT n_blocked FROM slice WHERE slice = ?1) ORDER BY slice LIMIT 1"
            }
            (Notable::BlockedChange, false) => {
                "SELECT slice FROM slice WHERE slice < ?1 AND n_blocked !=
                   (SELECT n_blocked FROM slice WHERE slice = ?1) ORDER BY slice DESC LIMIT 1"
            }
        };
        let s: Option<i64> = self
            .conn
            .query_row(sql, [from as i64], |r| r.get(0))
            .optional()?;
        Ok(s.map(|s| s as u64))
    }

    /// The slice with the highest GETTS in `lo..=hi` (first one on a tie).
    pub fn getts_peak(&self, lo: u64, hi: u64) -> Result<Option<u64>, RecordError> {
        let s: Option<i64> = self
            .conn
            .query_row(
                "SELECT slice FROM slice WHERE slice BETWEEN ?1 AND ?2 AND reason != 'first'
                 AND getts_ns IS NOT NULL ORDER BY getts_ns DESC, slice LIMIT 1",
                params![lo as i64, hi as i64],
                |r| r.get(0),
            )
            .optional()?;
        Ok(s.map(|s| s as u64))
    }

    /// Where the job went wrong: for a deadlock, the first slice of the final stretch in
    /// which the blocked count no longer changed (the cycle closed there); otherwise the
    /// last slice. None for a successful job.
    pub fn trouble_slice(&self) -> Result<Option<u64>, RecordError> {
        match self.job.outcome.as_deref() {
            Some("success") | None if self.job.failed_ranks.is_empty() => return Ok(None),
            _ => {}
        }
        if self.job.outcome.as_deref() == Some("deadlock") {
            let s: Option<i64> = self.conn.query_row(
                "SELECT max(slice) + 1 FROM slice WHERE n_blocked !=
                   (SELECT n_blocked FROM slice ORDER BY slice DESC LIMIT 1)",
                [],
                |r| r.get(0),
            )?;
            return Ok(Some(s.map(|s| s as u64).unwrap_or(1).min(self.last_slice)));
        }
        Ok(Some(self.last_slice))
    }

    /// The first slice after (or before) `from` where `call_like` (an SQL LIKE pattern)
    /// is a blocked rank's call or a handled descriptor's kind.
    pub fn search_call(
        &self,
        pattern: &str,
        from: u64,
        forward: bool,
    ) -> Result<Option<u64>, RecordError> {
        let (op, order) = if forward { (">", "") } else { ("<", "DESC") };
        let mut best: Option<u64> = None;
        // Blocked calls are spans: the nearest slice of a matching span beyond `from`.
        // An open span (`last_slice` NULL) reaches the recording's last slice.
        let spans = if forward {
            "SELECT min(max(first_slice, ?1 + 1)) FROM blocked_span
             WHERE ifnull(last_slice, (SELECT max(slice) FROM slice)) > ?1 AND call LIKE ?2"
        } else {
            "SELECT max(min(ifnull(last_slice, (SELECT max(slice) FROM slice)), ?1 - 1))
             FROM blocked_span WHERE first_slice < ?1 AND call LIKE ?2"
        };
        let descriptors = format!(
            "SELECT slice FROM descriptor WHERE slice {op} ?1 AND kind LIKE ?2
             ORDER BY slice {order} LIMIT 1"
        );
        for sql in [spans, descriptors.as_str()] {
            let s: Option<i64> = self
                .conn
                .query_row(sql, params![from as i64, pattern], |r| r.get(0))
                .optional()?
                .flatten();
            if let Some(s) = s.map(|s| s as u64) {
                best = Some(match best {
                    None => s,
                    Some(b) if forward => b.min(s),
                    Some(b) => b.max(s),
                });
            }
        }
        self.search_blobs(pattern, None, from, forward, best)
    }

    /// [`Recording::search_call`]'s descriptors in the compact schedule: the nearest slice
    /// beyond `from` (and nearer than `best`) whose blob holds a call of a kind `LIKE
    /// pattern`, optionally of one rank.
    pub(super) fn search_blobs(
        &self,
        pattern: &str,
        rank: Option<u32>,
        from: u64,
        forward: bool,
        best: Option<u64>,
    ) -> Result<Option<u64>, RecordError> {
        let kinds = self.kinds_like(pattern)?;
        if kinds.is_empty() || (!forward && from <= 1) {
            return Ok(best);
        }
        let start = if forward {
            from.saturating_add(1)
        } else {
            from - 1
        };
        let hit = |d: &strobe_core::descriptor::Descriptor| {
            kinds.contains(&d.kind) && rank.is_none_or(|r| r == d.rank)
        };
        Ok(match self.scan_descriptors(start, forward, best, hit)? {
            Some((s, _)) => Some(s),
            None => best,
        })
    }

    /// Everything about one slice.
    pub fn slice_detail(&self, slice: u64) -> Result<SliceDetail, RecordError> {
        let row: Option<SliceRow> = self.slice(slice)?;
        let descriptors = self.descriptor_rows(slice)?;
        let blocked_calls = self.blocked_at(slice)?;
        // A rank blocked at the start of the slice is blocked in a call it posted before:
        // its latest descriptor handled by this slice is what it waits on.
        let decisions = self.decisions(slice)?.unwrap_or_default();
        let ranks: Vec<u32> = blocked_calls.iter().map(|(r, _)| *r).collect();
        let mut last = self.last_descriptors(&ranks, slice)?;
        let mut blocked = Vec::with_capacity(blocked_calls.len());
        for (rank, call) in blocked_calls {
            let waits_on = last.remove(&rank);
            let matched = waits_on.as_ref().is_some_and(|d| {
                let id = DescRef {
                    rank: d.rank,
                    seq: d.seq as u64,
                };
                decisions.iter().any(|dec| matches_or_completes(dec, id))
            });
            let site = self.blocked_site(rank, slice)?.map(|s| s.short());
            blocked.push(BlockedRank {
                rank,
                call,
                waits_on,
                matched,
                site,
            });
        }
        Ok(SliceDetail {
            slice,
            row,
            descriptors,
            decisions,
            blocked,
            nodes: self.metrics(slice..=slice)?,
        })
    }

    /// Ranks that have per-process statistics.
    pub fn mmds_ranks(&self) -> Result<Vec<u32>, RecordError> {
        if !self.has_mmds {
            return Ok(Vec::new());
        }
        let mut st = self
            .conn
            .prepare_cached("SELECT DISTINCT rank FROM mmds_rank ORDER BY rank")?;
        let v = st
            .query_map([], |r| r.get(0))?
            .collect::<Result<Vec<u32>, _>>()?;
        Ok(v)
    }

    /// Per-process statistics of one rank, or summed over all ranks (`None`), with the
    /// granularity and overhead histograms. `Ok(None)` when the recording has no
    /// per-process statistics; a rank without any has zeros.
    pub fn process_stats(&self, rank: Option<u32>) -> Result<Option<ProcessStats>, RecordError> {
        if !self.has_mmds {
            return Ok(None);
        }
        let mut stats = ProcessStats::default();
        if let Some(m) = mmds_stats(&self.conn, rank)? {
            stats.totals = RankTotals {
                wall_ns: m.wall_ns,
                compute_ns: m.compute_ns,
                comm_ns: m.comm_ns,
                calls: m.calls,
            };
            stats.primitives = m.primitives;
            stats
                .primitives
                .sort_by(|a, b| a.primitive.cmp(&b.primitive));
        }
        stats.granularity = self.histogram("granularity", rank)?;
        stats.overhead = self.histogram("overhead", rank)?;
        Ok(Some(stats))
    }

    /// (lo, hi, count) bins of a per-process histogram, summed over ranks for `None`.
    fn histogram(
        &self,
        metric: &str,
        rank: Option<u32>,
    ) -> Result<Vec<(i64, i64, i64)>, RecordError> {
        // `?2 IS NULL` selects every rank.
        let mut st = self.conn.prepare_cached(
            "SELECT lo, hi, sum(count) FROM mmds_histogram
             WHERE metric = ?1 AND (?2 IS NULL OR rank = ?2)
             GROUP BY lo, hi ORDER BY lo, hi",
        )?;
        let v = st
            .query_map(params![metric, rank.map(i64::from)], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(v)
    }
}
/// Whether `d` matches `id` (as its send or its receive) or completes it.
fn matches_or_completes(d: &Decision, id: DescRef) -> bool {
    match d {
        Decision::Match(m) => m.send == id || m.recv == id,
        Decision::Complete(c) => c.desc == id,
        _ => false,
    }
}
