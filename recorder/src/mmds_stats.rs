//! The papers' per-process statistics table (000_..., Table 5.3) from a recording's
//! `mmds_*` tables: per primitive min, max, total, count and average latency, plus the
//! computation granularity and communication overhead rows, for one rank or the whole job,
//! and the accuracy check (computation + communication = run time within 0.01%).

use rusqlite::{params, Connection, OptionalExtension};
use serde::ser::{SerializeStruct, Serializer};
use serde::Serialize;

use crate::RecordError;

/// Largest relative gap between computation + communication and the run time that the
/// accuracy check accepts (the papers' 0.01%).
pub const ACCURACY: f64 = 1e-4;

/// One line of the table. Times in nanoseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct PrimitiveRow {
    pub primitive: String,
    pub min_ns: i64,
    pub max_ns: i64,
    pub total_ns: i64,
    pub count: i64,
    /// Bytes the calls moved (0 for the granularity and overhead rows).
    pub bytes: i64,
}

impl PrimitiveRow {
    pub fn average_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.total_ns as f64 / self.count as f64
        }
    }
}

/// With the average (`strobe stats --json`; a non-finite number is `null`).
impl Serialize for PrimitiveRow {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("PrimitiveRow", 7)?;
        o.serialize_field("primitive", &self.primitive)?;
        o.serialize_field("min_ns", &self.min_ns)?;
        o.serialize_field("max_ns", &self.max_ns)?;
        o.serialize_field("total_ns", &self.total_ns)?;
        o.serialize_field("count", &self.count)?;
        o.serialize_field("average_ns", &self.average_ns())?;
        o.serialize_field("bytes", &self.bytes)?;
        o.end()
    }
}

/// The MMDS of one rank, or of the whole job (every rank's figures combined: counts and
/// totals added, minima and maxima over all ranks).
#[derive(Clone, Debug, PartialEq)]
pub struct MmdsStats {
    /// `None` for the whole job.
    pub rank: Option<u32>,
    pub ranks: u32,
    /// Run time: from entering `MPI_Init` to leaving `MPI_Finalize` (summed over ranks for
    /// the whole job).
    pub wall_ns: i64,
    pub compute_ns: i64,
    pub comm_ns: i64,
    pub calls: i64,
    pub primitives: Vec<PrimitiveRow>,
    pub granularity: PrimitiveRow,
    pub overhead: PrimitiveRow,
}

impl MmdsStats {
    /// |computation + communication - run time| / run time.
    pub fn error(&self) -> f64 {
        if self.wall_ns <= 0 {
            return if self.compute_ns + self.comm_ns == 0 {
                0.0
            } else {
                f64::INFINITY
            };
        }
        (self.compute_ns + self.comm_ns - self.wall_ns).abs() as f64 / self.wall_ns as f64
    }

    /// The papers' accuracy check.
    pub fn accurate(&self) -> bool {
        self.error() <= ACCURACY
    }
}

/// With the accuracy check's figures (`strobe stats --json`).
impl Serialize for MmdsStats {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("MmdsStats", 11)?;
        o.serialize_field("rank", &self.rank)?;
        o.serialize_field("ranks", &self.ranks)?;
        o.serialize_field("wall_ns", &self.wall_ns)?;
        o.serialize_field("compute_ns", &self.compute_ns)?;
        o.serialize_field("comm_ns", &self.comm_ns)?;
        o.serialize_field("calls", &self.calls)?;
        o.serialize_field("error", &self.error())?;
        o.serialize_field("accurate", &self.accurate())?;
        o.serialize_field("primitives", &self.primitives)?;
        o.serialize_field("granularity", &self.granularity)?;
        o.serialize_field("overhead", &self.overhead)?;
        o.end()
    }
}

/// Whether the recording holds MMDS rows at all (metrics layer on, schema new enough).
pub(crate) fn has_mmds(conn: &Connection) -> Result<bool, RecordError> {
    let tables: i64 = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'mmds_rank'",
        [],
        |r| r.get(0),
    )?;
    if tables == 0 {
        return Ok(false);
    }
    Ok(conn.query_row("SELECT count(*) FROM mmds_rank", [], |r| r.get::<_, i64>(0))? > 0)
}

/// The statistics of `rank` (or of the whole job with `None`). `None` when the recording
/// has no MMDS for it.
pub(crate) fn mmds_stats(
    conn: &Connection,
    rank: Option<u32>,
) -> Result<Option<MmdsStats>, RecordError> {
    if !has_mmds(conn)? {
        return Ok(None);
    }
    // `?1 IS NULL` selects every rank; one rank is `rank = ?1` alone, so SQLite looks it
    // up by primary key (`?1 IS NULL OR rank = ?1` scans the whole table, and `stats` asks
    // once per rank: 1,000 ranks read the histograms 1,000 times).
    let r = rank.map(i64::from);
    let which = if rank.is_some() {
        "rank = ?1"
    } else {
        "?1 IS NULL"
    };
    /// ranks, wall, compute, comm, calls, granularity min and max.
    type Head = (i64, i64, i64, i64, i64, Option<i64>, Option<i64>);
    let head: Option<Head> = conn
        .prepare_cached(&format!(
            "SELECT count(*), sum(wall_ns), sum(compute_ns), sum(comm_ns), sum(calls),
                    min(granularity_min_ns), max(granularity_max_ns)
             FROM mmds_rank WHERE {which} HAVING count(*) > 0"
        ))?
        .query_row(params![r], |x| {
            Ok((
                x.get(0)?,
                x.get(1)?,
                x.get(2)?,
                x.get(3)?,
                x.get(4)?,
                x.get(5)?,
                x.get(6)?,
            ))
        })
        .optional()?;
    let Some((ranks, wall, compute, comm, calls, gmin, gmax)) = head else {
        return Ok(None);
    };
    let mut st = conn.prepare_cached(&format!(
        "SELECT primitive, min(min_ns), max(max_ns), sum(total_ns), sum(count), sum(bytes)
         FROM mmds_primitive WHERE {which}
         GROUP BY primitive ORDER BY sum(total_ns) DESC, primitive"
    ))?;
    let primitives: Vec<PrimitiveRow> = st
        .query_map(params![r], |x| {
            Ok(PrimitiveRow {
                primitive: x.get(0)?,
                min_ns: x.get(1)?,
                max_ns: x.get(2)?,
                total_ns: x.get(3)?,
                count: x.get(4)?,
                bytes: x.get(5)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    let samples: i64 = conn
        .prepare_cached(&format!(
            "SELECT coalesce(sum(count), 0) FROM mmds_histogram
             WHERE {which} AND primitive = '*' AND metric = 'granularity'"
        ))?
        .query_row(params![r], |x| x.get(0))?;
    let granularity = PrimitiveRow {
        primitive: "Comp Granularity".into(),
        min_ns: gmin.unwrap_or(0),
        max_ns: gmax.unwrap_or(0),
        total_ns: compute,
        count: samples,
        bytes: 0,
    };
    let overhead = PrimitiveRow {
        primitive: "Comm Overhead".into(),
        min_ns: primitives.iter().map(|p| p.min_ns).min().unwrap_or(0),
        max_ns: primitives.iter().map(|p| p.max_ns).max().unwrap_or(0),
        total_ns: comm,
        count: calls,
        bytes: primitives.iter().map(|p| p.bytes).sum(),
    };
    Ok(Some(MmdsStats {
        rank,
        ranks: ranks as u32,
        wall_ns: wall,
        compute_ns: compute,
        comm_ns: comm,
        calls,
        primitives,
        granularity,
        overhead,
    }))
}

/// Every rank's statistics, by rank.
pub(crate) fn mmds_per_rank(conn: &Connection) -> Result<Vec<MmdsStats>, RecordError> {
    if !has_mmds(conn)? {
        return Ok(Vec::new());
    }
    let mut st = conn.prepare("SELECT rank FROM mmds_rank ORDER BY rank")?;
    let ranks: Vec<u32> = st.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
    let mut out = Vec::with_capacity(ranks.len());
    for r in ranks {
        if let Some(s) = mmds_stats(conn, Some(r))? {
            out.push(s);
        }
    }
    Ok(out)
}
