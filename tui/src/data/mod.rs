//! Data access: every query the views make, over one read-only connection.
//!
//! Nothing here loads a table whole. Charts ask for one (min, max) pair per screen column,
//! computed by SQLite with `GROUP BY` over the slice bucket of the visible range; the
//! blocked-process grid is aggregated the same way and, when a column covers many slices,
//! sampled at [`GRID_SAMPLES`] evenly spaced slices (looked up by primary key). A recording
//! still being written is followed by [`Recording::refresh`].

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use strobe_recorder::migrations::CURRENT_VERSION;
use strobe_recorder::RecordError;

mod process_stats;
pub use process_stats::{PrimitiveRow, ProcessStats, RankTotals};

/// Files up to this size get SQLite's `quick_check` (every page read) when opened; bigger
/// ones only the header, version and table checks, so a huge recording opens at once. A
/// damaged page in a big file then surfaces as a query error in the status line.
pub const FULL_CHECK_MAX_BYTES: u64 = 64 << 20;

/// A grid column wider than this many slices is sampled at this many slices.
pub const GRID_SAMPLES: u64 = 16;

#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error(transparent)]
    Recording(#[from] RecordError),
    #[error("SQLite: {0}")]
    Sqlite(#[from] rusqlite::Error),
}

/// The `job` row, as the overview shows it.
#[derive(Clone, Debug, Default)]
pub struct JobInfo {
    pub command: String,
    pub ranks: u32,
    pub nodes: u32,
    pub slice_ns: i64,
    pub policy: String,
    pub outcome: Option<String>,
    pub message: Option<String>,
    pub exit_status: Option<i64>,
    pub elapsed_ns: Option<i64>,
    pub total_slices: Option<i64>,
    /// Ranks that died by a signal or exited non-zero: (rank, description).
    pub failed_ranks: Vec<(u32, String)>,
}

/// One screen column of the overview charts: (min, max) over the slices it covers.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Column {
    pub getts_ns: Option<(i64, i64)>,
    pub ncolldem: Option<(i64, i64)>,
    pub ncollmsm: Option<(i64, i64)>,
    pub np2pdem: Option<(i64, i64)>,
    pub np2pmsm: Option<(i64, i64)>,
}

/// The blocked-process grid: `cells[rank][col]` is the call the rank spent most of the
/// column's (sampled) slices blocked in, if any.
#[derive(Clone, Debug, Default)]
pub struct BlockedGrid {
    pub calls: Vec<String>,
    /// Index into `calls`, per rank then column.
    pub cells: Vec<Vec<Option<u16>>>,
}

#[derive(Clone, Debug, Default)]
pub struct SliceRow {
    pub reason: String,
    pub start_ns: i64,
    pub getts_ns: Option<i64>,
    pub gtdem_ns: Option<i64>,
    pub gtmsm_ns: Option<i64>,
    pub gtts_ns: Option<i64>,
    pub usr: Option<(i64, i64, i64)>,
    pub n_descriptors: i64,
    pub n_blocked: i64,
    pub digest: i64,
}

#[derive(Clone, Debug)]
pub struct DescriptorRow {
    pub rank: u32,
    pub seq: i64,
    pub kind: String,
    pub peer: i64,
    pub tag: i64,
    pub comm: i64,
    pub bytes: i64,
    pub blocking: bool,
}

#[derive(Clone, Debug)]
pub struct NodeRow {
    pub node: u32,
    pub letts_ns: i64,
    pub ltdem_ns: i64,
    pub ltmsm_ns: i64,
    pub ltts_ns: i64,
    pub np2pdem: i64,
    pub np2pmsm: i64,
    pub ncolldem: i64,
    pub ncollmsm: i64,
    pub bpts: i64,
}

/// A blocked rank and the descriptor it most recently posted (what it waits for).
#[derive(Clone, Debug)]
pub struct BlockedRank {
    pub rank: u32,
    pub call: String,
    pub waits_on: Option<DescriptorRow>,
    /// `waits_on` is matched or completed by a decision of this slice: it no longer waits
    /// for another rank (the wait-for graph leaves it out).
    pub matched: bool,
}

/// Everything the slice detail view shows about one slice.
#[derive(Clone, Debug, Default)]
pub struct SliceDetail {
    pub slice: u64,
    pub row: Option<SliceRow>,
    pub descriptors: Vec<DescriptorRow>,
    /// One line per decision, in decision order.
    pub decisions: Vec<String>,
    pub blocked: Vec<BlockedRank>,
    pub nodes: Vec<NodeRow>,
}

/// Kinds of slices the views can jump to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notable {
    /// A slice that scheduled a collective.
    Collective,
    /// A slice where the set of blocked ranks changed size.
    BlockedChange,
}

/// An open recording.
pub struct Recording {
    conn: Connection,
    path: PathBuf,
    pub job: JobInfo,
    /// The highest slice number recorded so far.
    pub slices: u64,
    pub has_mmds: bool,
    /// The recorder's chart summaries (`summary_getts`, `summary_node`) are there.
    pub has_summaries: bool,
}

impl Recording {
    /// Open a recording read-only, refusing what is not one before anything else happens.
    pub fn open(path: &Path) -> Result<Recording, DataError> {
        let len = std::fs::metadata(path)
            .map_err(|source| RecordError::Io {
                path: path.to_path_buf(),
                source,
            })?
            .len();
        let conn = if len <= FULL_CHECK_MAX_BYTES {
            strobe_recorder::open_recording(path)?
        } else {
            open_big(path)?
        };
        let mut rec = Recording {
            conn,
            path: path.to_path_buf(),
            job: JobInfo::default(),
            slices: 0,
            has_mmds: false,
            has_summaries: false,
        };
        rec.refresh()?;
        Ok(rec)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Re-read the job row and the slice count (a recording may still be growing).
    /// Returns whether anything changed.
    pub fn refresh(&mut self) -> Result<bool, DataError> {
        let job = read_job(&self.conn)?;
        let slices: Option<i64> = self
            .conn
            .query_row("SELECT max(slice) FROM slice", [], |r| r.get(0))?;
        let slices = slices.unwrap_or(0).max(0) as u64;
        let tables: i64 = self.conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table'
             AND name IN ('mmds_rank', 'mmds_primitive', 'mmds_histogram')",
            [],
            |r| r.get(0),
        )?;
        // The tables exist in every recording of format 2 and later; they hold rows only
        // when the metrics layer was on (and the job got far enough to be read).
        let has_mmds: i64 = if tables == 3 {
            self.conn.query_row(
                "SELECT CASE WHEN EXISTS (SELECT 1 FROM mmds_rank) THEN 3 ELSE 0 END",
                [],
                |r| r.get(0),
            )?
        } else {
            0
        };
        let summaries: i64 = self.conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table'
             AND name IN ('summary_getts', 'summary_node')",
            [],
            |r| r.get(0),
        )?;
        self.has_summaries = summaries == 2;
        let changed = slices != self.slices
            || job.outcome != self.job.outcome
            || job.failed_ranks != self.job.failed_ranks
            || (has_mmds == 3) != self.has_mmds;
        self.job = job;
        self.slices = slices;
        self.has_mmds = has_mmds == 3;
        Ok(changed)
    }

    /// Whether the recording is finished (the job row has an outcome).
    pub fn finished(&self) -> bool {
        self.job.outcome.is_some()
    }

    /// One [`Column`] per screen column: column `c` covers slices
    /// `first + c*per_col .. first + (c+1)*per_col`. NCOLL and NP2P are the per-node
    /// counters (the papers' local metrics): min and max over the column's slices and the
    /// nodes. When columns are whole blocks of the recorder's summaries (`per_col` a
    /// multiple of 64 or 4096 and `first - 1` too) the summaries are read instead of the
    /// slices: a few hundred rows for any zoom.
    pub fn columns(&self, first: u64, per_col: u64, cols: usize) -> Result<Vec<Column>, DataError> {
        let mut out = vec![Column::default(); cols];
        let end = first + per_col * cols as u64;
        let span = [4096u64, 64]
            .into_iter()
            .find(|&b| {
                self.has_summaries && per_col.is_multiple_of(b) && (first - 1).is_multiple_of(b)
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
        let p = params![first as i64, per_col as i64, end as i64, span as i64];
        let mut st = self.conn.prepare_cached(getts_sql)?;
        // Parameters a statement does not use must not be bound.
        let mut rows = if span == 1 {
            st.query(params![first as i64, per_col as i64, end as i64])?
        } else {
            st.query(p)?
        };
        while let Some(r) = rows.next()? {
            let c: i64 = r.get(0)?;
            if let Some(col) = usize::try_from(c).ok().and_then(|c| out.get_mut(c)) {
                col.getts_ns = Some((r.get(1)?, r.get(2)?));
            }
        }
        drop(rows);
        let mut st = self.conn.prepare_cached(node_sql)?;
        let mut rows = if span == 1 {
            st.query(params![first as i64, per_col as i64, end as i64])?
        } else {
            st.query(p)?
        };
        while let Some(r) = rows.next()? {
            let c: i64 = r.get(0)?;
            if let Some(col) = usize::try_from(c).ok().and_then(|c| out.get_mut(c)) {
                col.ncolldem = Some((r.get(1)?, r.get(2)?));
                col.ncollmsm = Some((r.get(3)?, r.get(4)?));
                col.np2pdem = Some((r.get(5)?, r.get(6)?));
                col.np2pmsm = Some((r.get(7)?, r.get(8)?));
            }
        }
        Ok(out)
    }

    /// The blocked-process grid for every rank over the given columns.
    pub fn blocked_grid(
        &self,
        first: u64,
        per_col: u64,
        cols: usize,
    ) -> Result<BlockedGrid, DataError> {
        let ranks = self.job.ranks as usize;
        // counts[rank][col] = (call index, slices) of the most frequent call so far.
        let mut tally: Vec<Vec<Vec<(u16, u32)>>> = vec![vec![Vec::new(); cols]; ranks];
        let mut grid = BlockedGrid {
            calls: Vec::new(),
            cells: vec![vec![None; cols]; ranks],
        };
        let mut add = |grid: &mut BlockedGrid, col: i64, rank: i64, call: String, n: i64| {
            let (Ok(col), Ok(rank)) = (usize::try_from(col), usize::try_from(rank)) else {
                return;
            };
            if col >= cols || rank >= ranks {
                return;
            }
            let idx = match grid.calls.iter().position(|c| *c == call) {
                Some(i) => i,
                None => {
                    grid.calls.push(call);
                    grid.calls.len() - 1
                }
            } as u16;
            let t = &mut tally[rank][col];
            match t.iter_mut().find(|(i, _)| *i == idx) {
                Some(e) => e.1 += n as u32,
                None => t.push((idx, n as u32)),
            }
        };
        if per_col <= GRID_SAMPLES {
            let end = first + per_col * cols as u64;
            let mut st = self.conn.prepare_cached(
                "SELECT (slice - ?1) / ?2 AS col, rank, call, count(*) FROM blocked
                 WHERE slice >= ?1 AND slice < ?3 GROUP BY col, rank, call",
            )?;
            let mut rows = st.query(params![first as i64, per_col as i64, end as i64])?;
            while let Some(r) = rows.next()? {
                add(&mut grid, r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
            }
        } else {
            // Sample GRID_SAMPLES slices per column, each looked up by primary key.
            let step = per_col / GRID_SAMPLES;
            let mut samples = String::from("[");
            for c in 0..cols as u64 {
                for k in 0..GRID_SAMPLES {
                    let s = first + c * per_col + k * step;
                    if s > self.slices {
                        break;
                    }
                    if samples.len() > 1 {
                        samples.push(',');
                    }
                    samples.push_str(&s.to_string());
                }
            }
            samples.push(']');
            let mut st = self.conn.prepare_cached(
                "SELECT (b.slice - ?1) / ?2 AS col, b.rank, b.call, count(*)
                 FROM json_each(?3) AS j JOIN blocked AS b ON b.slice = j.value
                 GROUP BY col, b.rank, b.call",
            )?;
            let mut rows = st.query(params![first as i64, per_col as i64, samples])?;
            while let Some(r) = rows.next()? {
                add(&mut grid, r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
            }
        }
        for (rank, cols) in tally.iter().enumerate() {
            for (col, t) in cols.iter().enumerate() {
                // Most slices wins; on a tie the call seen first (deterministic order).
                grid.cells[rank][col] = t
                    .iter()
                    .fold(None::<(u16, u32)>, |best, &(i, n)| match best {
                        Some((_, bn)) if bn >= n => best,
                        _ => Some((i, n)),
                    })
                    .map(|(i, _)| i);
            }
        }
        Ok(grid)
    }

    /// The next (or previous) slice after `from` of the given kind.
    pub fn notable(
        &self,
        kind: Notable,
        from: u64,
        forward: bool,
    ) -> Result<Option<u64>, DataError> {
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
    pub fn getts_peak(&self, lo: u64, hi: u64) -> Result<Option<u64>, DataError> {
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
    pub fn trouble_slice(&self) -> Result<Option<u64>, DataError> {
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
            return Ok(Some(s.map(|s| s as u64).unwrap_or(1).min(self.slices)));
        }
        Ok(Some(self.slices))
    }

    /// The first slice after (or before) `from` where `call_like` (an SQL LIKE pattern)
    /// is a blocked rank's call or a handled descriptor's kind.
    pub fn search_call(
        &self,
        pattern: &str,
        from: u64,
        forward: bool,
    ) -> Result<Option<u64>, DataError> {
        let (op, order) = if forward { (">", "") } else { ("<", "DESC") };
        let mut best: Option<u64> = None;
        for table in [("blocked", "call"), ("descriptor", "kind")] {
            let sql = format!(
                "SELECT slice FROM {} WHERE slice {op} ?1 AND {} LIKE ?2 ORDER BY slice {order} LIMIT 1",
                table.0, table.1
            );
            let s: Option<i64> = self
                .conn
                .query_row(&sql, params![from as i64, pattern], |r| r.get(0))
                .optional()?;
            if let Some(s) = s.map(|s| s as u64) {
                best = Some(match best {
                    None => s,
                    Some(b) if forward => b.min(s),
                    Some(b) => b.max(s),
                });
            }
        }
        Ok(best)
    }

    /// Everything about one slice.
    pub fn slice_detail(&self, slice: u64) -> Result<SliceDetail, DataError> {
        let s = slice as i64;
        let row = self
            .conn
            .query_row(
                "SELECT reason, start_ns, getts_ns, gtdem_ns, gtmsm_ns, gtts_ns, usrsts, usrdem,
                        usrmsm, n_descriptors, n_blocked, digest FROM slice WHERE slice = ?1",
                [s],
                |r| {
                    let usr: (Option<i64>, Option<i64>, Option<i64>) =
                        (r.get(6)?, r.get(7)?, r.get(8)?);
                    Ok(SliceRow {
                        reason: r.get(0)?,
                        start_ns: r.get(1)?,
                        getts_ns: r.get(2)?,
                        gtdem_ns: r.get(3)?,
                        gtmsm_ns: r.get(4)?,
                        gtts_ns: r.get(5)?,
                        usr: match usr {
                            (Some(a), Some(b), Some(c)) => Some((a, b, c)),
                            _ => None,
                        },
                        n_descriptors: r.get(9)?,
                        n_blocked: r.get(10)?,
                        digest: r.get(11)?,
                    })
                },
            )
            .optional()?;
        let mut st = self.conn.prepare_cached(
            "SELECT rank, seq, kind, peer, tag, comm, bytes, flags FROM descriptor
             WHERE slice = ?1 ORDER BY rank, seq",
        )?;
        let descriptors = st
            .query_map([s], descriptor_row)?
            .collect::<Result<Vec<_>, _>>()?;
        let mut st = self.conn.prepare_cached(
            "SELECT idx, kind, send_rank, send_seq, recv_rank, recv_seq, desc_rank, desc_seq,
                    \"offset\", bytes, comm, coll_kind, coll_seq, members, error
             FROM decision WHERE slice = ?1 ORDER BY idx",
        )?;
        let decisions = st
            .query_map([s], |r| {
                let kind: String = r.get(1)?;
                let g = |i: usize| r.get::<_, Option<i64>>(i);
                let n = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
                Ok(match kind.as_str() {
                    "match" => format!(
                        "match    send {}:{} -> recv {}:{}  {} B",
                        n(g(2)?),
                        n(g(3)?),
                        n(g(4)?),
                        n(g(5)?),
                        n(g(9)?)
                    ),
                    "chunk" => format!(
                        "chunk    send {}:{} -> recv {}:{}  @{} {} B",
                        n(g(2)?),
                        n(g(3)?),
                        n(g(4)?),
                        n(g(5)?),
                        n(g(8)?),
                        n(g(9)?)
                    ),
                    "collective" => format!(
                        "coll     {} #{} on comm {}  members {}",
                        r.get::<_, Option<String>>(11)?.unwrap_or_default(),
                        n(g(12)?),
                        n(g(10)?),
                        r.get::<_, Option<String>>(13)?.unwrap_or_default()
                    ),
                    "complete" => format!(
                        "complete {}:{}  {} B  {}",
                        n(g(6)?),
                        n(g(7)?),
                        n(g(9)?),
                        r.get::<_, Option<String>>(14)?.unwrap_or_default()
                    ),
                    other => format!("{other:<8} comm {}", n(g(10)?)),
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let mut st = self
            .conn
            .prepare_cached("SELECT rank, call FROM blocked WHERE slice = ?1 ORDER BY rank")?;
        let blocked_calls = st
            .query_map([s], |r| Ok((r.get::<_, u32>(0)?, r.get::<_, String>(1)?)))?
            .collect::<Result<Vec<_>, _>>()?;
        // A rank blocked at the start of the slice is blocked in a call it posted before:
        // its latest descriptor handled by this slice is what it waits on.
        let mut last = self.conn.prepare_cached(
            "SELECT rank, seq, kind, peer, tag, comm, bytes, flags FROM descriptor
             WHERE rank = ?1 AND slice <= ?2 ORDER BY seq DESC LIMIT 1",
        )?;
        let mut matched = self.conn.prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM decision WHERE slice = ?1 AND (
                 (kind = 'match' AND ((send_rank = ?2 AND send_seq = ?3)
                                      OR (recv_rank = ?2 AND recv_seq = ?3)))
                 OR (kind = 'complete' AND desc_rank = ?2 AND desc_seq = ?3)))",
        )?;
        let mut blocked = Vec::with_capacity(blocked_calls.len());
        for (rank, call) in blocked_calls {
            let waits_on = last
                .query_row(params![rank, s], descriptor_row)
                .optional()?;
            let is_matched = match &waits_on {
                Some(d) => matched.query_row(params![s, rank, d.seq], |r| r.get(0))?,
                None => false,
            };
            blocked.push(BlockedRank {
                rank,
                call,
                waits_on,
                matched: is_matched,
            });
        }
        let mut st = self.conn.prepare_cached(
            "SELECT node, letts_ns, ltdem_ns, ltmsm_ns, ltts_ns, np2pdem, np2pmsm, ncolldem,
                    ncollmsm, bpts FROM node_slice WHERE slice = ?1 ORDER BY node",
        )?;
        let nodes = st
            .query_map([s], |r| {
                Ok(NodeRow {
                    node: r.get(0)?,
                    letts_ns: r.get(1)?,
                    ltdem_ns: r.get(2)?,
                    ltmsm_ns: r.get(3)?,
                    ltts_ns: r.get(4)?,
                    np2pdem: r.get(5)?,
                    np2pmsm: r.get(6)?,
                    ncolldem: r.get(7)?,
                    ncollmsm: r.get(8)?,
                    bpts: r.get(9)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SliceDetail {
            slice,
            row,
            descriptors,
            decisions,
            blocked,
            nodes,
        })
    }
}

fn descriptor_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<DescriptorRow> {
    Ok(DescriptorRow {
        rank: r.get(0)?,
        seq: r.get(1)?,
        kind: r.get(2)?,
        peer: r.get(3)?,
        tag: r.get(4)?,
        comm: r.get(5)?,
        bytes: r.get(6)?,
        blocking: r.get::<_, i64>(7)? & 1 != 0,
    })
}

/// The checks of [`strobe_recorder::open_recording`] except the page-by-page one.
fn open_big(path: &Path) -> Result<Connection, RecordError> {
    strobe_recorder::read::check_header(path)?;
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version == 0 {
        return Err(RecordError::NotARecording(format!(
            "{} is an SQLite database without a strobe schema",
            path.display()
        )));
    }
    if version > CURRENT_VERSION {
        return Err(RecordError::TooNew {
            found: version,
            supported: CURRENT_VERSION,
        });
    }
    Ok(conn)
}

fn read_job(conn: &Connection) -> Result<JobInfo, DataError> {
    let has_job: i64 = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'job'",
        [],
        |r| r.get(0),
    )?;
    if has_job == 0 {
        return Err(RecordError::NotARecording("it has no job table".into()).into());
    }
    let job = conn
        .query_row(
            "SELECT (SELECT group_concat(value, ' ') FROM json_each(command)), ranks, nodes,
                    slice_ns, policy, outcome, message, exit_status, elapsed_ns, total_slices
             FROM job",
            [],
            |r| {
                Ok(JobInfo {
                    command: r.get::<_, Option<String>>(0)?.unwrap_or_default(),
                    ranks: r.get(1)?,
                    nodes: r.get(2)?,
                    slice_ns: r.get(3)?,
                    policy: r.get(4)?,
                    outcome: r.get(5)?,
                    message: r.get(6)?,
                    exit_status: r.get(7)?,
                    elapsed_ns: r.get(8)?,
                    total_slices: r.get(9)?,
                    failed_ranks: Vec::new(),
                })
            },
        )
        .optional()?;
    let Some(mut job) = job else {
        return Err(RecordError::NotARecording("the job table is empty".into()).into());
    };
    let mut st = conn.prepare_cached(
        "SELECT rank, exit_code, signal FROM rank
         WHERE signal IS NOT NULL OR (exit_code IS NOT NULL AND exit_code != 0) ORDER BY rank",
    )?;
    job.failed_ranks = st
        .query_map([], |r| {
            let rank: u32 = r.get(0)?;
            let code: Option<i64> = r.get(1)?;
            let sig: Option<i64> = r.get(2)?;
            Ok((
                rank,
                match (sig, code) {
                    (Some(s), _) => format!("killed by signal {s}"),
                    (None, Some(c)) => format!("exited with {c}"),
                    _ => "failed".to_string(),
                },
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(job)
}
