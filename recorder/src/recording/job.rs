//! The `job` row (and the failed ranks of the `rank` table): the one reading of it.

use std::path::PathBuf;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension};
use serde::Serialize;
use strobe_runtime::engine::{EngineConfig, StrobePolicy};

use crate::{JobInfo, Layer, RecordError};

/// A rank that was killed by a signal or exited with a non-zero code.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FailedRank {
    pub rank: u32,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
}

/// The `job` row of a recording (`docs/recording.md`, table `job`), with the ranks that
/// failed. Times are nanoseconds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Job {
    /// The schema version the file was created with.
    pub format_version: i64,
    pub strobe_version: String,
    /// The command line as typed after `--` (program first).
    pub command: Vec<String>,
    pub cwd: PathBuf,
    /// The resolved program path that was executed.
    pub program: PathBuf,
    pub program_sha256: Option<String>,
    /// The recorded environment variables, sorted by name.
    pub env: Vec<(String, String)>,
    pub ranks: u32,
    pub nodes: u32,
    pub slice_ns: u64,
    pub policy: String,
    pub deadlock_slices: u32,
    pub chunk_budget: u64,
    pub direct_copy_min: u64,
    #[serde(serialize_with = "as_text")]
    pub schedule_log: Layer,
    #[serde(serialize_with = "as_text")]
    pub metrics: Layer,
    pub started_at: i64,
    pub ended_at: Option<i64>,
    pub elapsed_ns: Option<i64>,
    /// `None` while the recording is written, or when it was cut short.
    pub outcome: Option<String>,
    pub message: Option<String>,
    pub exit_status: Option<i32>,
    pub total_slices: Option<u64>,
    pub wire_format_version: Option<i64>,
    pub histogram_resolution: Option<u32>,
    /// `strobe_core::sched::SCHEDULER_VERSION` of the recording strobe (1 for files made
    /// before the column existed).
    pub scheduler_version: u32,
    /// The node of each rank (`job.placement`, index: rank); `None`: block placement over
    /// `nodes` (files made before the column existed, and jobs placed in blocks).
    pub placement: Option<Vec<u32>>,
    /// The transport between the nodes (`job.transport`: `shm`, `tcp` or `verbs`); for
    /// files made before the column, `tcp` when placed across hosts, else `shm`.
    pub transport: String,
    /// Ranks killed by a signal or exited non-zero, by rank.
    pub failed_ranks: Vec<FailedRank>,
}

fn as_text<S: serde::Serializer>(l: &Layer, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(l)
}

fn bad(what: impl Into<String>) -> RecordError {
    RecordError::Corrupt(what.into())
}

impl Job {
    /// The slice length (`--slice`).
    pub fn slice(&self) -> Duration {
        Duration::from_nanos(self.slice_ns.max(1))
    }

    /// The engine configuration the job ran with.
    pub fn engine(&self) -> EngineConfig {
        EngineConfig {
            ranks: self.ranks,
            nodes: self.nodes,
            slice: self.slice(),
            policy: self.policy.parse().unwrap_or(StrobePolicy::Adaptive),
            deadlock_slices: self.deadlock_slices.max(1),
            chunk_budget: self.chunk_budget.max(1),
            direct_copy_min: self.direct_copy_min,
            // The eager threshold is part of the scheduling rules (strobe-perf): a
            // version-1 recording replays without the eager protocol.
            eager_max: strobe_core::sched::SchedConfig::eager_max_for_version(
                self.scheduler_version,
            ),
            inline_max: strobe_core::sched::SchedConfig::inline_max_for_version(
                self.scheduler_version,
            ),
            local_null: strobe_core::sched::SchedConfig::local_null_for_version(
                self.scheduler_version,
            ),
            // The recorded placement (validated on opening: one node < `nodes` per rank).
            // A replay with another `--nodes` replaces it (decisions do not depend on it).
            placement: self.placement.as_deref().map(std::sync::Arc::from),
        }
    }

    /// What the recorder needs to write a recording of the same job (a regeneration).
    pub fn setup(&self) -> JobInfo {
        JobInfo {
            command: self.command.clone(),
            cwd: self.cwd.display().to_string(),
            program: self.program.clone(),
            env: self.env.clone(),
            ranks: self.ranks,
            nodes: self.nodes,
            slice: self.slice(),
            policy: self.policy.clone(),
            deadlock_slices: self.deadlock_slices,
            chunk_budget: self.chunk_budget,
            direct_copy_min: self.direct_copy_min,
            histogram_resolution: self.histogram_resolution.unwrap_or(0),
            placement: self.placement.clone(),
            transport: self.transport.clone(),
        }
    }

    /// Read the job row of an open recording. Columns added by later formats are read
    /// when the file has them; otherwise they take their documented default (NULL, and
    /// `scheduler_version` 1).
    pub(crate) fn read(conn: &Connection) -> Result<Job, RecordError> {
        let mut st = conn.prepare("SELECT name FROM pragma_table_info('job')")?;
        let have: Vec<String> = st.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
        let column = |name: &'static str, default: &'static str| {
            if have.iter().any(|h| h == name) {
                name
            } else {
                default
            }
        };
        let sql = format!(
            "SELECT format_version, strobe_version, command, cwd, program, program_sha256, env,
                ranks, nodes, slice_ns, policy, deadlock_slices, chunk_budget, direct_copy_min,
                schedule_log, metrics, started_at, ended_at, elapsed_ns, outcome, message,
                exit_status, total_slices, {}, {}, {}, {}, {} FROM job",
            column("wire_format_version", "NULL"),
            column("histogram_resolution", "NULL"),
            column("scheduler_version", "1"),
            column("placement", "NULL"),
            column("transport", "NULL"),
        );
        let row = conn
            .query_row(&sql, [], raw_job)
            .optional()
            .map_err(column_damage)?;
        let Some((mut job, command, env, placement, transport)) = row else {
            return Err(RecordError::NotARecording("the job table is empty".into()));
        };
        job.command = serde_json::from_str(&command)
            .map_err(|e| bad(format!("job.command is not a JSON array of strings: {e}")))?;
        let env: std::collections::BTreeMap<String, String> = serde_json::from_str(&env)
            .map_err(|e| bad(format!("job.env is not a JSON object of strings: {e}")))?;
        job.env = env.into_iter().collect();
        job.placement = placement
            .map(|p| serde_json::from_str(&p))
            .transpose()
            .map_err(|e| bad(format!("job.placement is not a JSON list of nodes: {e}")))?;
        job.transport = transport.unwrap_or_else(|| {
            let across_hosts = job.nodes > 1 && job.placement.is_some();
            (if across_hosts { "tcp" } else { "shm" }).to_string()
        });
        job.failed_ranks = failed_ranks(conn)?;
        super::validate::job(&job)?;
        super::validate::job_in_file(conn, &job)?;
        Ok(job)
    }
}

/// The job row's columns in the order `Job::read` selects them.
const JOB_COLUMNS: [&str; 28] = [
    "format_version",
    "strobe_version",
    "command",
    "cwd",
    "program",
    "program_sha256",
    "env",
    "ranks",
    "nodes",
    "slice_ns",
    "policy",
    "deadlock_slices",
    "chunk_budget",
    "direct_copy_min",
    "schedule_log",
    "metrics",
    "started_at",
    "ended_at",
    "elapsed_ns",
    "outcome",
    "message",
    "exit_status",
    "total_slices",
    "wire_format_version",
    "histogram_resolution",
    "scheduler_version",
    "placement",
    "transport",
];

/// A value of the wrong type or out of range in the job row is damage, named by column.
fn column_damage(e: rusqlite::Error) -> RecordError {
    use rusqlite::Error as E;
    let col = |i: usize| JOB_COLUMNS.get(i).copied().unwrap_or("?");
    match e {
        E::IntegralValueOutOfRange(i, v) => bad(format!("job.{} is {v}, out of range", col(i))),
        E::InvalidColumnType(i, _, ty) => bad(format!("job.{} is of type {ty}", col(i))),
        E::FromSqlConversionFailure(i, _, err) => bad(format!("job.{}: {err}", col(i))),
        e => e.into(),
    }
}

/// An integer column that must fit `T` (a damaged file must not wrap around silently).
fn int<T: TryFrom<i64>>(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<T> {
    let v: i64 = r.get(i)?;
    T::try_from(v).map_err(|_| rusqlite::Error::IntegralValueOutOfRange(i, v))
}

fn opt_int<T: TryFrom<i64>>(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Option<T>> {
    match r.get::<_, Option<i64>>(i)? {
        None => Ok(None),
        Some(v) => T::try_from(v)
            .map(Some)
            .map_err(|_| rusqlite::Error::IntegralValueOutOfRange(i, v)),
    }
}

fn layer(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Layer> {
    let s: String = r.get(i)?;
    s.parse().map_err(|e: String| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, e.into())
    })
}

/// The row, with `command`, `env` and `placement` still as their JSON text.
type RawJob = (Job, String, String, Option<String>, Option<String>);

fn raw_job(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawJob> {
    let job = Job {
        format_version: r.get(0)?,
        strobe_version: r.get(1)?,
        command: Vec::new(),
        cwd: PathBuf::from(r.get::<_, String>(3)?),
        program: PathBuf::from(r.get::<_, String>(4)?),
        program_sha256: r.get(5)?,
        env: Vec::new(),
        ranks: int(r, 7)?,
        nodes: int(r, 8)?,
        slice_ns: int(r, 9)?,
        policy: r.get(10)?,
        deadlock_slices: int(r, 11)?,
        // Stored as the signed integer with the same bits (direct_copy_min = -1: off).
        chunk_budget: r.get::<_, i64>(12)? as u64,
        direct_copy_min: r.get::<_, i64>(13)? as u64,
        schedule_log: layer(r, 14)?,
        metrics: layer(r, 15)?,
        started_at: r.get(16)?,
        ended_at: r.get(17)?,
        elapsed_ns: r.get(18)?,
        outcome: r.get(19)?,
        message: r.get(20)?,
        exit_status: opt_int(r, 21)?,
        total_slices: opt_int(r, 22)?,
        wire_format_version: r.get(23)?,
        histogram_resolution: opt_int(r, 24)?,
        scheduler_version: int(r, 25)?,
        placement: None,
        transport: String::new(),
        failed_ranks: Vec::new(),
    };
    Ok((job, r.get(2)?, r.get(6)?, r.get(26)?, r.get(27)?))
}

fn failed_ranks(conn: &Connection) -> Result<Vec<FailedRank>, RecordError> {
    let mut st = conn.prepare_cached(
        "SELECT rank, exit_code, signal FROM rank
         WHERE signal IS NOT NULL OR (exit_code IS NOT NULL AND exit_code != 0) ORDER BY rank",
    )?;
    let rows = st
        .query_map([], |r| {
            Ok(FailedRank {
                rank: int(r, 0)?,
                exit_code: opt_int(r, 1)?,
                signal: opt_int(r, 2)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}
