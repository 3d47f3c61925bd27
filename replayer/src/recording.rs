//! What the replayer reads from a recording: the job (program, arguments, ranks, options,
//! how it ended), its replay log, and (when the schedule log covers a slice) the recorded
//! descriptors and decisions for divergence reports.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension};
use strobe_recorder::replay_log::ReplayLog;
use strobe_recorder::{open_recording, RecordError};
use strobe_runtime::engine::{EngineConfig, StrobePolicy};

use crate::json::{self, Json};
use crate::ReplayError;

/// The `job` row, as replay needs it.
#[derive(Clone, Debug)]
pub struct RecordedJob {
    pub command: Vec<String>,
    pub cwd: PathBuf,
    pub program: PathBuf,
    pub program_sha256: Option<String>,
    pub env: Vec<(String, String)>,
    pub ranks: u32,
    pub nodes: u32,
    pub slice: Duration,
    pub policy: String,
    pub deadlock_slices: u32,
    pub chunk_budget: u64,
    pub direct_copy_min: u64,
    pub schedule_log: String,
    /// `None` when the recording was cut short (strobe itself was killed).
    pub outcome: Option<String>,
    pub message: Option<String>,
    pub exit_status: Option<i32>,
    pub total_slices: Option<u64>,
}

impl RecordedJob {
    pub fn engine(&self) -> EngineConfig {
        EngineConfig {
            ranks: self.ranks,
            nodes: self.nodes,
            slice: self.slice,
            policy: self.policy.parse().unwrap_or(StrobePolicy::Adaptive),
            deadlock_slices: self.deadlock_slices.max(1),
            chunk_budget: self.chunk_budget.max(1),
            direct_copy_min: self.direct_copy_min,
        }
    }
}

/// An open recording.
pub struct Recording {
    pub path: PathBuf,
    pub conn: Connection,
    pub job: RecordedJob,
    pub log: ReplayLog,
}

fn bad(what: impl Into<String>) -> ReplayError {
    ReplayError::Recording(RecordError::Corrupt(what.into()))
}

impl Recording {
    pub fn open(path: &Path) -> Result<Recording, ReplayError> {
        let conn = open_recording(path)?;
        let job = read_job(&conn)?;
        if job.ranks == 0 || job.nodes == 0 || job.nodes > job.ranks {
            return Err(bad(format!(
                "job has {} ranks on {} nodes",
                job.ranks, job.nodes
            )));
        }
        let log = ReplayLog::load(&conn, job.ranks)?;
        Ok(Recording {
            path: path.to_path_buf(),
            conn,
            job,
            log,
        })
    }

    /// The recorded descriptors of `slice` as comparable text lines `(rank, line)`, if the
    /// schedule log covers it.
    pub fn descriptors(&self, slice: u64) -> Option<Vec<(u32, String)>> {
        let n: i64 = self
            .conn
            .query_row(
                "SELECT count(*) FROM descriptor WHERE slice = ?1",
                [slice as i64],
                |r| r.get(0),
            )
            .ok()?;
        let expected: i64 = self
            .conn
            .query_row(
                "SELECT n_descriptors FROM slice WHERE slice = ?1",
                [slice as i64],
                |r| r.get(0),
            )
            .ok()?;
        if n != expected || (n == 0 && !self.schedule_covers(slice)) {
            return None;
        }
        let mut st = self
            .conn
            .prepare(
                "SELECT rank, seq, kind, peer, tag, comm, bytes FROM descriptor WHERE slice = ?1
                 ORDER BY rank, seq",
            )
            .ok()?;
        let rows = st
            .query_map([slice as i64], |r| {
                Ok((
                    r.get::<_, u32>(0)?,
                    format!(
                        "rank {} seq {}: {} peer={} tag={} comm={} bytes={}",
                        r.get::<_, i64>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, i64>(4)?,
                        r.get::<_, i64>(5)?,
                        r.get::<_, i64>(6)?
                    ),
                ))
            })
            .ok()?;
        rows.collect::<Result<Vec<_>, _>>().ok()
    }

    /// The recorded decisions of `slice` as comparable text lines, if the schedule log
    /// covers it.
    pub fn decisions(&self, slice: u64) -> Option<Vec<String>> {
        if !self.schedule_covers(slice) {
            return None;
        }
        let mut st = self
            .conn
            .prepare(
                "SELECT kind, send_rank, send_seq, recv_rank, recv_seq, desc_rank, desc_seq,
                    \"offset\", bytes, comm, parent, coll_seq, coll_kind, root, members, request,
                    source, tag, error, flags, value, value2
                 FROM decision WHERE slice = ?1 ORDER BY idx",
            )
            .ok()?;
        let rows = st
            .query_map([slice as i64], |r| {
                let i = |k: usize| r.get::<_, Option<i64>>(k).map(|v| v.unwrap_or(0));
                let s = |k: usize| r.get::<_, Option<String>>(k).map(|v| v.unwrap_or_default());
                let kind: String = r.get(0)?;
                Ok(match kind.as_str() {
                    "match" => format!(
                        "match send=({},{}) recv=({},{}) bytes={} truncated={}",
                        i(1)?, i(2)?, i(3)?, i(4)?, i(8)?, i(19)?
                    ),
                    "chunk" => format!(
                        "chunk send=({},{}) recv=({},{}) offset={} len={}",
                        i(1)?, i(2)?, i(3)?, i(4)?, i(7)?, i(8)?
                    ),
                    "collective" => format!(
                        "collective {} comm={} seq={} root={} members={}",
                        s(12)?, i(9)?, i(11)?, i(13)?, s(14)?
                    ),
                    "new_comm" => format!(
                        "new_comm comm={} parent={} members={}",
                        i(9)?, i(10)?, s(14)?
                    ),
                    _ => format!(
                        "complete desc=({},{}) request={} source={} tag={} bytes={} error={} flags={} value={} value2={}",
                        i(5)?, i(6)?, i(15)?, i(16)?, i(17)?, i(8)?, s(18)?, i(19)?, i(20)?, i(21)?
                    ),
                })
            })
            .ok()?;
        rows.collect::<Result<Vec<_>, _>>().ok()
    }

    fn schedule_covers(&self, slice: u64) -> bool {
        self.job
            .schedule_log
            .parse::<strobe_recorder::Layer>()
            .ok()
            .is_some_and(|l| l.covers(slice))
    }
}

fn read_job(conn: &Connection) -> Result<RecordedJob, ReplayError> {
    type Row = (
        String,
        String,
        String,
        Option<String>,
        String,
        i64,
        i64,
        i64,
        String,
        i64,
        i64,
        i64,
        String,
        Option<String>,
        Option<String>,
        Option<i64>,
        Option<i64>,
    );
    let row: Option<Row> = conn
        .query_row(
            "SELECT command, cwd, program, program_sha256, env, ranks, nodes, slice_ns, policy,
                deadlock_slices, chunk_budget, direct_copy_min, schedule_log, outcome, message,
                exit_status, total_slices FROM job",
            [],
            |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                    r.get(8)?,
                    r.get(9)?,
                    r.get(10)?,
                    r.get(11)?,
                    r.get(12)?,
                    r.get(13)?,
                    r.get(14)?,
                    r.get(15)?,
                    r.get(16)?,
                ))
            },
        )
        .optional()
        .map_err(RecordError::from)?;
    let Some(r) = row else {
        return Err(bad("the job table is empty"));
    };
    let command = match json::parse(&r.0) {
        Ok(Json::Arr(a)) => a
            .into_iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| bad("job.command is not an array of strings"))?,
        _ => return Err(bad("job.command is not a JSON array")),
    };
    if command.is_empty() {
        return Err(bad("job.command is empty"));
    }
    let env = match json::parse(&r.4) {
        Ok(Json::Obj(m)) => m
            .into_iter()
            .map(|(k, v)| v.as_str().map(|v| (k, v.to_owned())))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| bad("job.env has a value that is not a string"))?,
        _ => return Err(bad("job.env is not a JSON object")),
    };
    let u32_of = |v: i64, what: &str| {
        u32::try_from(v).map_err(|_| bad(format!("job.{what} = {v} is out of range")))
    };
    Ok(RecordedJob {
        command,
        cwd: PathBuf::from(r.1),
        program: PathBuf::from(r.2),
        program_sha256: r.3,
        env,
        ranks: u32_of(r.5, "ranks")?,
        nodes: u32_of(r.6, "nodes")?,
        slice: Duration::from_nanos(r.7.max(1) as u64),
        policy: r.8,
        deadlock_slices: u32_of(r.9, "deadlock_slices")?,
        chunk_budget: r.10 as u64,
        direct_copy_min: r.11 as u64,
        schedule_log: r.12,
        outcome: r.13,
        message: r.14,
        exit_status: r.15.map(|v| v as i32),
        total_slices: r.16.map(|v| v as u64),
    })
}
