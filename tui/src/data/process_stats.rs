//! Per-process statistics (the papers' MMDS), read from the `mmds_rank`,
//! `mmds_primitive` and `mmds_histogram` tables when the recording has them.

use rusqlite::params;

use super::{DataError, Recording};

/// A row of the per-primitive statistics table.
#[derive(Clone, Debug, PartialEq)]
pub struct PrimitiveRow {
    pub primitive: String,
    pub count: i64,
    pub min_ns: i64,
    pub max_ns: i64,
    pub total_ns: i64,
    pub bytes: i64,
}

impl PrimitiveRow {
    pub fn avg_ns(&self) -> i64 {
        if self.count == 0 {
            0
        } else {
            self.total_ns / self.count
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct RankTotals {
    pub wall_ns: i64,
    pub compute_ns: i64,
    pub comm_ns: i64,
    pub calls: i64,
}

/// Per-process statistics (the papers' MMDS) of one rank or of all ranks.
#[derive(Clone, Debug, Default)]
pub struct ProcessStats {
    pub totals: RankTotals,
    pub primitives: Vec<PrimitiveRow>,
    /// (lo, hi, count) bins of computation granularity and communication overhead.
    pub granularity: Vec<(i64, i64, i64)>,
    pub overhead: Vec<(i64, i64, i64)>,
}

impl Recording {
    /// Ranks that have per-process statistics.
    pub fn mmds_ranks(&self) -> Result<Vec<u32>, DataError> {
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

    /// Per-process statistics of one rank, or summed over all ranks (`None`).
    /// `Ok(None)` when the recording has no per-process statistics.
    pub fn process_stats(&self, rank: Option<u32>) -> Result<Option<ProcessStats>, DataError> {
        if !self.has_mmds {
            return Ok(None);
        }
        // `?1 IS NULL` selects every rank.
        let r = rank.map(i64::from);
        let totals = self.conn.query_row(
            "SELECT coalesce(sum(wall_ns), 0), coalesce(sum(compute_ns), 0),
                    coalesce(sum(comm_ns), 0), coalesce(sum(calls), 0)
             FROM mmds_rank WHERE ?1 IS NULL OR rank = ?1",
            [r],
            |row| {
                Ok(RankTotals {
                    wall_ns: row.get(0)?,
                    compute_ns: row.get(1)?,
                    comm_ns: row.get(2)?,
                    calls: row.get(3)?,
                })
            },
        )?;
        let mut st = self.conn.prepare_cached(
            "SELECT primitive, sum(count), min(min_ns), max(max_ns), sum(total_ns), sum(bytes)
             FROM mmds_primitive WHERE ?1 IS NULL OR rank = ?1
             GROUP BY primitive ORDER BY primitive",
        )?;
        let primitives = st
            .query_map([r], |row| {
                Ok(PrimitiveRow {
                    primitive: row.get(0)?,
                    count: row.get(1)?,
                    min_ns: row.get(2)?,
                    max_ns: row.get(3)?,
                    total_ns: row.get(4)?,
                    bytes: row.get(5)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let hist = |metric: &str| -> Result<Vec<(i64, i64, i64)>, DataError> {
            let mut st = self.conn.prepare_cached(
                "SELECT lo, hi, sum(count) FROM mmds_histogram
                 WHERE metric = ?1 AND (?2 IS NULL OR rank = ?2)
                 GROUP BY lo, hi ORDER BY lo, hi",
            )?;
            let v = st
                .query_map(params![metric, r], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(v)
        };
        let granularity = hist("granularity")?;
        let overhead = hist("overhead")?;
        Ok(Some(ProcessStats {
            totals,
            primitives,
            granularity,
            overhead,
        }))
    }
}
