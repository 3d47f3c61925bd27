//! Reading a recording: the one API every reader uses (`strobe stats`, the replayer, the
//! terminal UI), in the manner of rr's `TraceReader`. Every SQL query a reader makes is in
//! this module; what it returns is plain data (deriving `serde::Serialize`), and turning it
//! into text or JSON is the caller's business.
//!
//! * [`Recording::open`] refuses what is not a readable recording with a typed
//!   [`RecordError`]: not SQLite, truncated, damaged, another program's database, or a
//!   newer format. It never migrates (the file is opened read-only); older formats are
//!   read as they are, a column that did not exist yet taking its documented default.
//! * [`Recording::job`] is the `job` row, [`Recording::slices`] the `slice` table,
//!   [`Recording::decisions`] a slice's decision set (decoded from its Cap'n Proto blob),
//!   [`Recording::replay_log`] what a replay needs, [`Recording::stats`] what
//!   `strobe stats` shows; `browse.rs` holds the terminal UI's queries.

mod blocked;
mod browse;
mod checks;
mod explored;
mod history;
mod history_blobs;
mod job;
mod payloads;
mod schedule;
mod stats;
pub mod validate;

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection};
use serde::Serialize;

pub use crate::checksum::ChecksumState;
use crate::read::{check_header, open_connection, quick_check};
use crate::replay_log::ReplayLog;
use crate::RecordError;

pub use blocked::{BlockedGrid, GridStrategy, GRID_SAMPLES};
pub use browse::{BlockedRank, Column, Notable, ProcessStats, RankTotals, SliceDetail};
pub use checks::CheckRow;
pub use explored::{store_explored, Explored};
pub use history::{MatchEntry, MatchHistory};
pub use job::{FailedRank, Job};
pub use stats::{BlockedCall, GettsStats, KindCount, Stats, TopSlice};

/// Files up to this size get SQLite's `quick_check` (every page read) when opened with
/// [`Check::UpTo`]; bigger ones only the header, version and table checks, so a huge
/// recording opens at once in the terminal UI.
/// 16 MiB is about 150 ms of checking on a 2-core machine under load, half the terminal
/// UI's 300 ms budget for its first frame (64 MiB took 1.3 s: a 1,000-rank token ring's
/// 44 MB recording missed it by 4x). `strobe stats` and `strobe replay` check every file.
pub const FULL_CHECK_MAX_BYTES: u64 = 16 << 20;

/// How thoroughly [`Recording::open_with`] checks the file's pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// Read every page (`PRAGMA quick_check`): a damaged file is one clear error.
    Full,
    /// [`Check::Full`] for files up to this many bytes, only the header and schema
    /// checks above (a damaged page then surfaces as an error of the query that reads it).
    UpTo(u64),
}

/// A row of the `slice` table. Metrics are `None` outside the metrics window.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SliceRow {
    pub slice: u64,
    pub reason: String,
    pub start_ns: i64,
    pub getts_ns: Option<i64>,
    pub gtdem_ns: Option<i64>,
    pub gtmsm_ns: Option<i64>,
    pub gtts_ns: Option<i64>,
    /// USRSTS, USRDEM, USRMSM.
    pub usr: Option<(i64, i64, i64)>,
    pub n_descriptors: i64,
    pub n_matches: i64,
    pub n_chunks: i64,
    pub n_collectives: i64,
    pub n_completions: i64,
    pub n_blocked: i64,
    /// The digest's bits as SQLite stores them (signed).
    pub digest: i64,
}

/// A row of the `descriptor` table (schedule log).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
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

/// A row of the `node_slice` table (metrics layer): one node's view of one slice.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeRow {
    pub slice: u64,
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

/// Counts over a whole recording ([`Recording::totals`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Totals {
    /// Slices with a `slice` row.
    pub slice_rows: u64,
    /// Descriptors handled by those slices.
    pub descriptors: u64,
}

/// An open recording (read-only).
pub struct Recording {
    conn: Connection,
    path: PathBuf,
    format: i64,
    job: Job,
    last_slice: u64,
    has_mmds: bool,
    has_summaries: bool,
    /// Whether chart columns may be answered from the summaries (see `use_summaries`).
    use_summaries: bool,
    has_decision_sets: bool,
    /// The compact schedule log (`slice_schedule`, `message`; `COMPACT_SCHEDULE_VERSION`).
    has_schedule: bool,
    /// Which schedule-log tables the file has (per-slice rows, batches).
    layouts: crate::schedule_rows::Layouts,
    /// The schedule batch last decoded for a slice lookup (first slice, last slice,
    /// entries): stepping through slices decodes each batch once.
    batch_cache: std::cell::RefCell<Option<(u64, u64, Vec<crate::compact::BatchEntry>)>>,
    checksum: ChecksumState,
}

/// The `slice` columns in table order, as the writer inserts them (one list).
static SLICE_COLUMNS: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| crate::writer::SLICE_COLUMNS.join(", "));

const DESCRIPTOR_COLUMNS: &str = "rank, seq, kind, peer, tag, comm, bytes, flags";

const NODE_COLUMNS: &str = "slice, node, letts_ns, ltdem_ns, ltmsm_ns, ltts_ns, np2pdem,
    np2pmsm, ncolldem, ncollmsm, bpts";

impl Recording {
    /// Open a recording read-only, reading every page once ([`Check::Full`]).
    pub fn open(path: &Path) -> Result<Recording, RecordError> {
        Recording::open_with(path, Check::Full)
    }

    /// Open a recording read-only, refusing what is not one before anything else happens.
    pub fn open_with(path: &Path, check: Check) -> Result<Recording, RecordError> {
        check_header(path)?;
        let conn = open_connection(path)?;
        let full = match check {
            Check::Full => true,
            Check::UpTo(max) => {
                std::fs::metadata(path)
                    .map_err(|source| RecordError::Io {
                        path: path.to_path_buf(),
                        source,
                    })?
                    .len()
                    <= max
            }
        };
        // The three whole-file checks run at once, each on a connection of its own (a
        // 1,000-rank recording of 15 MB: `quick_check` alone ~230 ms; opening took ~320
        // ms with the checks one after the other, ~240 ms at once); their errors are still
        // reported in this order: damaged pages, then impossible values, then a checksum
        // mismatch.
        let checks = full.then(|| {
            std::thread::scope(|s| {
                let tables = s.spawn(|| validate::tables(&open_connection(path)?));
                let sum = s.spawn(|| crate::checksum::verify(&open_connection(path)?));
                let pages = quick_check(&conn);
                let lost = || RecordError::Corrupt("a check of the file failed".into());
                let tables = tables.join().unwrap_or_else(|_| Err(lost()));
                (pages, tables, sum.join().unwrap_or_else(|_| Err(lost())))
            })
        });
        let (tables_ok, checksum) = match checks {
            Some((pages, tables, sum)) => {
                pages?;
                (Some(tables), Some(sum))
            }
            None => (None, None),
        };
        let format = crate::migrations::version(&conn)?;
        let table = |name: &str| -> Result<bool, RecordError> {
            Ok(conn.query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [name],
                |r| r.get::<_, i64>(0),
            )? > 0)
        };
        if format < crate::migrations::BLOCKED_SPANS_VERSION && table("blocked")? {
            // Older files keep one `blocked` row per rank and slice: read them as spans.
            conn.execute_batch(crate::migrations::OLD_BLOCKED_SPANS)?;
        }
        let has_summaries = table("summary_getts")? && table("summary_node")?;
        let has_decision_sets = table("slice_decisions")?;
        let has_schedule = table("slice_schedule")?;
        let layouts = crate::schedule_rows::Layouts::of(&conn)?;
        let job = Job::read(&conn)?;
        // One pass over the slice and schedule-log tables: an impossible value is refused
        // here rather than printed (a huge file is checked row by row as read).
        tables_ok.transpose()?;
        // After validation, so a value strobe never writes is named as such; then the
        // checksum catches what validation cannot see (checksum.rs).
        let checksum = checksum.transpose()?.unwrap_or(ChecksumState::NotChecked);
        let mut rec = Recording {
            conn,
            path: path.to_path_buf(),
            format,
            job,
            last_slice: 0,
            has_mmds: false,
            has_summaries,
            use_summaries: true,
            has_decision_sets,
            has_schedule,
            layouts,
            batch_cache: Default::default(),
            checksum,
        };
        rec.refresh()?;
        Ok(rec)
    }

    /// Whether the content checksum was verified when the file was opened (damage is an
    /// error of [`Recording::open`]; this tells "verified" from "unverified").
    pub fn checksum(&self) -> &ChecksumState {
        &self.checksum
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's schema version (`PRAGMA user_version`).
    pub fn format_version(&self) -> i64 {
        self.format
    }

    /// The `job` row as of the last [`Recording::refresh`].
    pub fn job(&self) -> &Job {
        &self.job
    }

    /// The highest slice number recorded so far (0: none).
    pub fn last_slice(&self) -> u64 {
        self.last_slice
    }

    /// Whether the recording holds per-process statistics (metrics layer on, and the job
    /// got far enough for them to be written).
    pub fn has_mmds(&self) -> bool {
        self.has_mmds
    }

    /// Whether the recorder's chart summaries (`summary_getts`, `summary_node`) are there.
    pub fn has_summaries(&self) -> bool {
        self.has_summaries
    }

    /// Answer chart columns from the summaries when they can (the default), or always
    /// from the slices: the two must agree, which tests check.
    pub fn use_summaries(&mut self, on: bool) {
        self.use_summaries = on;
    }

    /// Whether the job row has an outcome (the recording is finished).
    pub fn finished(&self) -> bool {
        self.job.outcome.is_some()
    }

    /// Re-read the job row, the last slice and whether MMDS rows exist: a recording still
    /// being written grows. Returns whether anything changed.
    pub fn refresh(&mut self) -> Result<bool, RecordError> {
        let job = Job::read(&self.conn)?;
        let last: Option<i64> = self
            .conn
            .query_row("SELECT max(slice) FROM slice", [], |r| r.get(0))?;
        let last = last.unwrap_or(0);
        if !(0..=validate::MAX_SLICES as i64).contains(&last) {
            return Err(RecordError::Corrupt(format!("slice number {last}")));
        }
        let last = last as u64;
        let has_mmds = crate::mmds_stats::has_mmds(&self.conn)?;
        let changed = last != self.last_slice || job != self.job || has_mmds != self.has_mmds;
        self.job = job;
        self.last_slice = last;
        self.has_mmds = has_mmds;
        Ok(changed)
    }

    /// The `slice` rows in `range` (slices without a row had nothing happen outside the
    /// metrics and schedule-log windows).
    pub fn slices(&self, range: RangeInclusive<u64>) -> Result<Vec<SliceRow>, RecordError> {
        let mut st = self.conn.prepare_cached(&format!(
            "SELECT {} FROM slice WHERE slice BETWEEN ?1 AND ?2 ORDER BY slice",
            *SLICE_COLUMNS
        ))?;
        let rows = st
            .query_map(
                params![sql_u64(*range.start()), sql_u64(*range.end())],
                slice_row,
            )?
            .collect::<Result<Vec<_>, _>>()?;
        rows.iter().try_for_each(validate::slice)?;
        Ok(rows)
    }

    /// How many slices have a row and how many descriptors they handled in all (the
    /// benchmarks' bytes per descriptor and per slice).
    pub fn totals(&self) -> Result<Totals, RecordError> {
        let (slices, descriptors): (i64, Option<i64>) =
            self.conn
                .query_row("SELECT count(*), sum(n_descriptors) FROM slice", [], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?;
        Ok(Totals {
            slice_rows: slices.max(0) as u64,
            descriptors: descriptors.unwrap_or(0).max(0) as u64,
        })
    }

    /// The `slice` row of one slice.
    pub fn slice(&self, slice: u64) -> Result<Option<SliceRow>, RecordError> {
        Ok(self.slices(slice..=slice)?.pop())
    }

    /// The `node_slice` rows (per-node metrics) of the slices in `range`, by slice and node.
    pub fn metrics(&self, range: RangeInclusive<u64>) -> Result<Vec<NodeRow>, RecordError> {
        let mut st = self.conn.prepare_cached(&format!(
            "SELECT {NODE_COLUMNS} FROM node_slice WHERE slice BETWEEN ?1 AND ?2
             ORDER BY slice, node"
        ))?;
        let rows = st
            .query_map(
                params![sql_u64(*range.start()), sql_u64(*range.end())],
                node_row,
            )?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    /// The replay log, decoded, with every slice's digest.
    pub fn replay_log(&self) -> Result<ReplayLog, RecordError> {
        ReplayLog::load(&self.conn, &self.job)
    }
}

/// A slice number as SQLite's signed integer (slices never come near 2^63).
fn sql_u64(v: u64) -> i64 {
    v.min(i64::MAX as u64) as i64
}

fn slice_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SliceRow> {
    let usr: (Option<i64>, Option<i64>, Option<i64>) = (r.get(7)?, r.get(8)?, r.get(9)?);
    Ok(SliceRow {
        slice: r.get::<_, i64>(0)?.max(0) as u64,
        reason: r.get(1)?,
        start_ns: r.get(2)?,
        getts_ns: r.get(3)?,
        gtdem_ns: r.get(4)?,
        gtmsm_ns: r.get(5)?,
        gtts_ns: r.get(6)?,
        usr: match usr {
            (Some(a), Some(b), Some(c)) => Some((a, b, c)),
            _ => None,
        },
        n_descriptors: r.get(10)?,
        n_matches: r.get(11)?,
        n_chunks: r.get(12)?,
        n_collectives: r.get(13)?,
        n_completions: r.get(14)?,
        n_blocked: r.get(15)?,
        digest: r.get(16)?,
    })
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

fn node_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<NodeRow> {
    Ok(NodeRow {
        slice: r.get::<_, i64>(0)?.max(0) as u64,
        node: r.get(1)?,
        letts_ns: r.get(2)?,
        ltdem_ns: r.get(3)?,
        ltmsm_ns: r.get(4)?,
        ltts_ns: r.get(5)?,
        np2pdem: r.get(6)?,
        np2pmsm: r.get(7)?,
        ncolldem: r.get(8)?,
        ncollmsm: r.get(9)?,
        bpts: r.get(10)?,
    })
}

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
