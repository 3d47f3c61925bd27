//! strobe-recorder: records a job into one SQLite file (schema in `docs/recording.md`).
//!
//! [`Recorder`] is a [`SliceSink`]. The slice path only copies what the enabled layers need
//! into a bounded queue; one writer thread owns the SQLite connection and writes in batched
//! transactions, so node managers never wait on the disk (unless the queue fills, in which
//! case they wait rather than lose records: a recording with holes is useless for replay).

mod blocked_delta;
mod blocked_spans;
mod checkpointer;
pub mod checksum;
pub mod compact;
pub mod expand;
pub mod file;
mod fresh_schema;
mod messages;
pub mod migrations;
pub mod mmds_stats;
mod nap;
mod node_rows;
pub mod privacy;
pub mod read;
pub mod recording;
pub mod replay_log;
mod row_batch;
mod schedule_rows;
mod slice_pool;
pub mod summaries;
pub mod synthetic;
pub mod window;
mod writer;

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Mutex, OnceLock, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection};
use sha2::{Digest, Sha256};
use strobe_runtime::engine::{LocalMetrics, SliceRecord, SliceSink};
use strobe_runtime::launcher::{JobOutcome, JobReport, LaunchConfig};
use strobe_runtime::mmds::RankMmds;

pub use read::open_recording;
pub use recording::{Job, Recording, Totals};
pub use window::Layer;
pub use writer::error_name;

use writer::{Msg, WriterDone};

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0} already exists (use --force to overwrite it)")]
    Exists(PathBuf),
    #[error("{0} is being written by another strobe (it holds the file's lock): not touching it; choose another file or wait for it to finish")]
    Busy(PathBuf),
    #[error("{0} is {1}: a recording must be a regular file (give a file name)")]
    NotRegular(PathBuf, &'static str),
    #[error("SQLite: {0}")]
    Sqlite(rusqlite::Error),
    #[error("this recording has format version {found}, but this strobe reads only up to version {supported}: use a newer strobe")]
    TooNew { found: i64, supported: i64 },
    #[error("not a strobe recording: {0}")]
    NotARecording(String),
    /// A value no strobe writes, a missing part, unreadable pages: exit status 2 in every
    /// command (`docs/reliability.md`).
    #[error("damaged recording: {0}")]
    Corrupt(String),
    #[error("the recorder's writer thread failed: {0}")]
    Writer(String),
    #[error("a recorded decision set: {0}")]
    Schema(#[from] strobe_schema::SchemaError),
    #[error("rank {0} has no per-process statistics in this recording (not a rank of the job, never initialized, or the metrics layer was off)")]
    NoMmds(u32),
    #[error("the recording was already finished")]
    Finished,
}

/// SQLite errors that can only come from the file's content (a value of the wrong type
/// or out of range for its column, a malformed database) are damage; the rest (I/O,
/// locking, a bad query) stay SQLite errors.
impl From<rusqlite::Error> for RecordError {
    fn from(e: rusqlite::Error) -> Self {
        use rusqlite::Error as E;
        use rusqlite::ErrorCode as C;
        match &e {
            E::IntegralValueOutOfRange(..)
            | E::InvalidColumnType(..)
            | E::FromSqlConversionFailure(..)
            | E::Utf8Error(..) => RecordError::Corrupt(format!("a value of the wrong type: {e}")),
            E::SqliteFailure(f, _) if matches!(f.code, C::DatabaseCorrupt | C::NotADatabase) => {
                RecordError::Corrupt(e.to_string())
            }
            // A reader's query names only tables and columns every format has (or checks
            // first): one missing was dropped from the file.
            E::SqliteFailure(_, Some(m)) | E::SqlInputError { msg: m, .. }
                if m.starts_with("no such table") || m.starts_with("no such column") =>
            {
                RecordError::Corrupt(m.clone())
            }
            _ => RecordError::Sqlite(e),
        }
    }
}

/// How the recorder batches and which layers it records.
#[derive(Clone, Copy, Debug)]
pub struct RecordOptions {
    /// Descriptors, decisions and blocked ranks (tables `descriptor`, `decision`, `blocked`).
    pub schedule_log: Layer,
    /// Slice metrics columns and the `node_slice` table.
    pub metrics: Layer,
    /// Queue capacity between the slice path and the writer thread, in messages.
    pub queue: usize,
    /// Commit after this many slices...
    pub batch_slices: usize,
    /// ...or this long after the transaction began, whichever comes first.
    pub batch_interval: Duration,
    /// Permission bits of a new recording ([`file::DEFAULT_MODE`], 0600).
    pub mode: u32,
    /// Replace an existing recording (`--force`; see [`file`] for how).
    pub replace: bool,
    /// Store secret-looking argument values as `<redacted>` ([`privacy::redact_args`]).
    pub redact: bool,
}

impl Default for RecordOptions {
    fn default() -> Self {
        RecordOptions {
            schedule_log: Layer::On,
            metrics: Layer::On,
            queue: 8192,
            batch_slices: 512,
            batch_interval: Duration::from_millis(20),
            mode: file::DEFAULT_MODE,
            replace: false,
            redact: true,
        }
    }
}

/// What is known about a job before it runs.
#[derive(Clone, Debug)]
pub struct JobInfo {
    /// The command line as typed after `--` (program first). Non-UTF-8 bytes are replaced.
    pub command: Vec<String>,
    pub cwd: String,
    /// The resolved program path (what was executed).
    pub program: PathBuf,
    /// Environment variables that can change a run: see [`recorded_env`].
    pub env: Vec<(String, String)>,
    pub ranks: u32,
    pub nodes: u32,
    pub slice: Duration,
    pub policy: String,
    pub deadlock_slices: u32,
    pub chunk_budget: u64,
    pub direct_copy_min: u64,
    /// MMDS histogram buckets per power of two; 0 when MMDS is off.
    pub histogram_resolution: u32,
    /// The node of each rank (`job.placement`); `None`: block placement over `nodes`.
    pub placement: Option<Vec<u32>>,
    /// The transport between the nodes (`job.transport`: `shm`, `tcp` or `verbs`).
    pub transport: String,
}

impl JobInfo {
    /// Describe the job `cfg` started from `command`, in the current process environment.
    pub fn new(cfg: &LaunchConfig, command: &[OsString]) -> JobInfo {
        let e = &cfg.engine;
        JobInfo {
            command: command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            cwd: std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
            program: cfg.program.clone(),
            env: recorded_env(std::env::vars_os()),
            ranks: e.ranks,
            nodes: e.nodes,
            slice: e.slice,
            policy: e.policy.name().to_string(),
            deadlock_slices: e.deadlock_slices,
            chunk_budget: e.chunk_budget,
            direct_copy_min: e.direct_copy_min,
            histogram_resolution: cfg.mmds_resolution,
            // NULL for block placement (what every old recording used).
            placement: e.placement.as_deref().map(<[u32]>::to_vec),
            // The launcher's nodes share one host; `strobe record` says otherwise.
            transport: "shm".to_string(),
        }
    }
}

/// The environment variables a recording keeps: an allow-list of strobe's documented
/// switches ([`privacy::STORED_ENV`], never its internal `STROBE_JOB_FD` and the like),
/// `OMP_*` (threading inside ranks changes timing) and `MPIEXEC_TIMEOUT`. Not `PATH`: the
/// resolved program path and its SHA-256 identify the program better, and a full
/// environment would leak secrets into files people share. Sorted by name.
pub fn recorded_env(vars: impl Iterator<Item = (OsString, OsString)>) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = vars
        .filter_map(|(k, val)| Some((k.into_string().ok()?, val)))
        .filter(|(k, _)| privacy::stored_var(k))
        .map(|(k, val)| (k, val.to_string_lossy().into_owned()))
        .collect();
    v.sort();
    v
}

/// SHA-256 of a file, lowercase hex.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

fn unix_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// Beside the job: hash the program into the job row (through the writer's queue) and
/// remember the launch (`privacy::remember_launch` reads the user's whole launch list).
/// The hash was taken before the job started: a 27 MB Rust program (an example with the
/// runtime and its debug information) took 20-25 ms of every `strobe record`'s start, a
/// large application's binary hundreds. The row has it once the writer takes the message
/// (about as long after the start as the hash takes), so a recording of strobe killed
/// later than that has it too; `finish` waits for the thread.
fn hash_and_remember(
    job: &JobInfo,
    command: Vec<String>,
    tx: SyncSender<Msg>,
) -> Option<JoinHandle<()>> {
    let program = job.program.clone();
    let (cwd, env) = (job.cwd.clone(), job.env.clone());
    std::thread::Builder::new()
        .name("strobe-launches".into())
        .spawn(move || {
            let sha = sha256_file(&program).ok();
            if let Some(sha) = &sha {
                let _ = tx.send(Msg::ProgramSha256(sha.clone()));
            }
            drop(tx);
            let shown = program.display().to_string();
            let launch = privacy::launch_id(&shown, sha.as_deref(), &command, &cwd, &env);
            privacy::remember_launch(&launch);
        })
        .ok()
}

/// Records one job into an SQLite file. Create it before `launch`, pass it as (part of) the
/// sink, then call [`Recorder::finish`] with the report, whatever the outcome.
pub struct Recorder {
    path: PathBuf,
    opts: RecordOptions,
    tx: RwLock<Option<SyncSender<Msg>>>,
    writer: Mutex<Option<JoinHandle<WriterDone>>>,
    /// The writer thread, woken when the queue is full or closed (it naps otherwise:
    /// `nap::Nap`).
    writer_thread: std::thread::Thread,
    checkpointer: Mutex<Option<checkpointer::Checkpointer>>,
    /// The correctness checks' findings, written by [`Recorder::finish`].
    checks: Mutex<Vec<strobe_runtime::checks::Finding>>,
    /// Held until the recorder is dropped: a second writer is refused.
    _lock: file::FileLock,
    /// Room for marking the file cut when the disk fills up ([`file::SpaceReserve`]).
    reserve: Mutex<file::SpaceReserve>,
    /// `--capture-payloads`: which ranks' deliveries are stored (index: rank).
    capture: OnceLock<Vec<bool>>,
    /// The last blocked set sent to the writer: the slice path sends only changes.
    blocked: Mutex<blocked_delta::BlockedMirror>,
    /// Slice messages the writer has written, for the slice path to refill.
    pool: slice_pool::SlicePool,
    /// Remembering the launch (`privacy::remember_launch`): it reads the user's whole
    /// launch list, so it runs beside the job, and `finish` waits for it.
    remembering: Mutex<Option<JoinHandle<()>>>,
}

impl Recorder {
    /// Create `path` (which must not exist, unless `opts.replace`: see [`file`]), locked
    /// while it is written, write the job row and start the writer thread.
    pub fn create(
        path: &Path,
        job: &JobInfo,
        opts: RecordOptions,
    ) -> Result<Recorder, RecordError> {
        // Refused before the file exists.
        let placement = job
            .placement
            .as_ref()
            .map(|p| {
                if p.len() != job.ranks as usize || p.iter().any(|&n| n >= job.nodes) {
                    return Err(RecordError::Writer(format!(
                        "placement {p:?} does not place {} ranks on {} nodes",
                        job.ranks, job.nodes
                    )));
                }
                serde_json::to_string(p).map_err(|e| RecordError::Writer(e.to_string()))
            })
            .transpose()?;
        let lock = file::create_locked(path, opts.mode, opts.replace)?;
        let reserve = file::SpaceReserve::hold(path);
        let stored_command = if opts.redact {
            privacy::redact_args(&job.command)
        } else {
            job.command.clone()
        };
        let mut conn = Connection::open(path)?;
        // Until the job row is in: no fsync at all. The file is new and holds nothing a
        // power cut could lose (it would leave a file that fails its checks, reported as
        // damaged); the first checkpoint makes all of it durable. The switch to WAL, the
        // schema and the job row took six fsyncs, 5 to 500 ms of start-up by disk load.
        conn.pragma_update(None, "synchronous", "OFF")?;
        // WAL: the writer's commits do not rewrite the main file.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        // No checkpoint on the writer's commits: a checkpoint fsyncs, which on a busy disk
        // stalls the writer for tens of milliseconds, and a SIGKILL in that window loses
        // more than the last batch. The checkpointer thread does it instead.
        conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        migrations::migrate(&mut conn)?;
        // JSON, so SQLite's `json_each` can read them (docs/recording.md).
        let command = serde_json::to_string(&stored_command)
            .map_err(|e| RecordError::Writer(e.to_string()))?;
        let env = serde_json::to_string(
            &job.env
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect::<std::collections::BTreeMap<_, _>>(),
        )
        .map_err(|e| RecordError::Writer(e.to_string()))?;
        conn.execute(
            "INSERT INTO job (format_version, strobe_version, command, cwd, program, program_sha256,
                env, ranks, nodes, slice_ns, policy, deadlock_slices, chunk_budget, direct_copy_min,
                schedule_log, metrics, started_at, wire_format_version, histogram_resolution,
                scheduler_version, placement, transport)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
                ?18, ?19, ?20, ?21, ?22)",
            params![
                migrations::CURRENT_VERSION,
                env!("CARGO_PKG_VERSION"),
                command,
                job.cwd,
                job.program.display().to_string(),
                None::<String>,
                env,
                job.ranks,
                job.nodes,
                job.slice.as_nanos() as i64,
                job.policy,
                job.deadlock_slices,
                job.chunk_budget as i64,
                job.direct_copy_min as i64,
                opts.schedule_log.to_string(),
                opts.metrics.to_string(),
                unix_ns(),
                strobe_schema::FORMAT_VERSION,
                (job.histogram_resolution != 0).then_some(job.histogram_resolution),
                strobe_core::sched::SCHEDULER_VERSION,
                placement,
                job.transport,
            ],
        )?;
        // NORMAL: a commit does not wait for fsync (a power cut may lose the last batch,
        // never corrupt the file); checkpoints sync.
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        let queue = opts.queue.max(1);
        let (tx, rx) = sync_channel::<Msg>(queue);
        let batch = (opts.batch_slices.max(1), opts.batch_interval);
        let (checkpointer, folds) = checkpointer::Checkpointer::start(path)?;
        let pool = slice_pool::SlicePool::default();
        let spent = pool.clone();
        let handle = std::thread::Builder::new()
            .name("strobe-recorder".into())
            .spawn(move || writer::run(conn, rx, spent, queue, batch, folds))
            .map_err(|e| RecordError::Writer(e.to_string()))?;
        let remembering = hash_and_remember(job, stored_command, tx.clone());
        Ok(Recorder {
            writer_thread: handle.thread().clone(),
            path: path.to_path_buf(),
            opts,
            tx: RwLock::new(Some(tx)),
            writer: Mutex::new(Some(handle)),
            checkpointer: Mutex::new(Some(checkpointer)),
            checks: Mutex::new(Vec::new()),
            _lock: lock,
            reserve: Mutex::new(reserve),
            blocked: Mutex::new(Default::default()),
            capture: OnceLock::new(),
            pool,
            remembering: Mutex::new(remembering),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Mark this recording as regenerated by `strobe replay` from `source`: its schedule
    /// log is the original's, but its timing (metrics, start reasons, start times) was
    /// measured during the replay and is the replay's, not the original run's.
    pub fn mark_regenerated(&self, source: &Path) -> Result<(), RecordError> {
        let conn = Connection::open(&self.path)?;
        conn.busy_timeout(Duration::from_secs(5))?;
        conn.execute(
            "INSERT INTO regenerated (source, note) VALUES (?1, ?2)",
            params![
                source.display().to_string(),
                "schedule log and replay log regenerated by strobe replay; metrics, slice start times and reasons were measured during the replay, not the original run"
            ],
        )?;
        Ok(())
    }

    /// Replaces `job.transport` (a job across hosts learns its transport from the node
    /// daemons once they report, after the job row was written). Before `finish`, which
    /// seals the content checksum.
    pub fn set_transport(&self, transport: &str) -> Result<(), RecordError> {
        if !["shm", "tcp", "verbs"].contains(&transport) {
            return Err(RecordError::Writer(format!(
                "unknown transport {transport:?} (shm, tcp or verbs)"
            )));
        }
        let conn = Connection::open(&self.path)?;
        conn.busy_timeout(Duration::from_secs(5))?;
        conn.execute("UPDATE job SET transport = ?1", params![transport])?;
        Ok(())
    }

    /// Store the bytes delivered to `ranks` (`strobe record --capture-payloads`): every
    /// completion of theirs gets a `payload` row, so each can be replayed alone. Call it
    /// before the job starts, once; the list goes into `job.captured_ranks`.
    pub fn capture_payloads(&self, ranks: &[u32], job_ranks: u32) -> Result<(), RecordError> {
        let mut set = vec![false; job_ranks as usize];
        for &r in ranks {
            match set.get_mut(r as usize) {
                Some(b) => *b = true,
                None => {
                    return Err(RecordError::Writer(format!(
                        "cannot capture rank {r}: the job has {job_ranks} ranks"
                    )))
                }
            }
        }
        let list: Vec<u32> = (0..job_ranks).filter(|&r| set[r as usize]).collect();
        let conn = Connection::open(&self.path)?;
        conn.busy_timeout(Duration::from_secs(5))?;
        conn.execute(
            "UPDATE job SET captured_ranks = ?1",
            params![serde_json::to_string(&list).map_err(|e| RecordError::Writer(e.to_string()))?],
        )?;
        self.capture
            .set(set)
            .map_err(|_| RecordError::Writer("payload capture set twice".into()))
    }

    /// The correctness checks' findings, stored by [`Recorder::finish`] (`check_finding`).
    pub fn write_checks(
        &self,
        findings: &[strobe_runtime::checks::Finding],
    ) -> Result<(), RecordError> {
        self.checks
            .lock()
            .expect("recorder lock")
            .extend_from_slice(findings);
        Ok(())
    }

    fn send(&self, m: Msg) {
        if let Some(tx) = self.tx.read().expect("recorder lock").as_ref() {
            // Blocks when the queue is full (after waking the napping writer); fails only
            // if the writer is gone (its error is reported by finish).
            if let Err(TrySendError::Full(m)) = tx.try_send(m) {
                self.writer_thread.unpark();
                let _ = tx.send(m);
            }
        }
    }

    /// Stop the writer and get the connection back, with the writer's first error. On an
    /// error (a full disk), the file is marked cut at the last committed slice first.
    fn stop_writer(&self) -> Result<(Connection, u64, Option<checksum::TableRows>), RecordError> {
        self.tx.write().expect("recorder lock").take();
        self.writer_thread.unpark();
        if let Some(c) = self.checkpointer.lock().expect("recorder lock").take() {
            c.stop();
        }
        let handle = self
            .writer
            .lock()
            .expect("recorder lock")
            .take()
            .ok_or(RecordError::Finished)?;
        let done = handle
            .join()
            .map_err(|_| RecordError::Writer("panicked".into()))?;
        match done.error {
            Some(e) => {
                let e = RecordError::Writer(e.to_string());
                // The disk is probably full: give back the reserved space first, so the
                // cut can be written.
                self.reserve.lock().expect("recorder lock").release();
                mark_cut(done.conn, done.committed, done.program_sha256, &e);
                Err(e)
            }
            None => Ok((done.conn, done.slices, done.slice_rows)),
        }
    }

    /// Flush every slice, write the outcome and the ranks' exit statuses, and close the file.
    /// Returns the number of slices recorded.
    pub fn finish(&self, report: &JobReport) -> Result<u64, RecordError> {
        self.finish_with(
            outcome_name(&report.outcome),
            report.message(),
            report.exit_code(),
            Some((report.slices, report.elapsed)),
            &report.rank_status,
        )
    }

    /// The job could not be started at all (`outcome = 'not_started'`).
    pub fn finish_not_started(&self, message: &str, exit_status: i32) -> Result<u64, RecordError> {
        self.finish_with(
            "not_started",
            Some(message.to_string()),
            exit_status,
            None,
            &[],
        )
    }

    fn finish_with(
        &self,
        outcome: &str,
        message: Option<String>,
        exit_status: i32,
        slices: Option<(u64, Duration)>,
        rank_status: &[Option<i32>],
    ) -> Result<u64, RecordError> {
        if let Some(t) = self.remembering.lock().expect("recorder lock").take() {
            let _ = t.join();
        }
        let (mut conn, recorded, slice_rows) = self.stop_writer()?;
        let tx = conn.transaction()?;
        tx.execute(
            "UPDATE job SET ended_at = ?1, elapsed_ns = ?2, outcome = ?3, message = ?4,
                exit_status = ?5, total_slices = ?6",
            params![
                unix_ns(),
                slices.map(|s| s.1.as_nanos() as i64),
                outcome,
                message,
                exit_status,
                slices.map(|s| s.0 as i64),
            ],
        )?;
        {
            let mut st = tx.prepare(
                "INSERT INTO check_finding (slice, rank, kind, call, call_site, detail)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?;
            for f in self.checks.lock().expect("recorder lock").iter() {
                st.execute(params![
                    f.slice as i64,
                    f.rank,
                    f.kind.name(),
                    f.call,
                    f.call_site,
                    f.detail,
                ])?;
            }
        }
        {
            let mut st = tx.prepare(
                "INSERT INTO rank (rank, wait_status, exit_code, signal) VALUES (?1, ?2, ?3, ?4)",
            )?;
            for (rank, raw) in rank_status.iter().enumerate() {
                let st_ = raw.map(std::process::ExitStatus::from_raw);
                st.execute(params![
                    rank as i64,
                    raw,
                    st_.and_then(|s| s.code()),
                    st_.and_then(|s| s.signal()),
                ])?;
            }
        }
        // In the same transaction as the outcome: a reader never sees a finished
        // recording without its checksum, nor the checksum of an unfinished one.
        checksum::seal_with(&tx, slice_rows)?;
        tx.commit()?;
        // Leave one self-contained file: switch to a rollback journal, which folds the
        // WAL back (synced) and deletes it, so the recording can be copied alone and
        // opened read-only anywhere. (A checkpoint of its own first, as before, folded
        // and synced twice: 1.5 ms of every recording's end.) The only connection now,
        // so the switch cannot be refused; if it were, the file would stay in WAL.
        let mode: String =
            conn.pragma_update_and_check(None, "journal_mode", "DELETE", |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("delete") {
            return Err(RecordError::Writer(format!(
                "could not leave WAL mode (journal mode still {mode}): the recording \
                 needs its -wal file beside it"
            )));
        }
        conn.close().map_err(|(_, e)| RecordError::Sqlite(e))?;
        self.reserve.lock().expect("recorder lock").release();
        Ok(recorded)
    }
}

/// The writer failed (typically a full disk: ENOSPC, or EFBIG past `RLIMIT_FSIZE`): keep
/// what was committed and say so in the job row. `outcome` stays NULL (cut short, so a
/// replay goes to the end of what was recorded), `message` says `cut: ... at slice S`,
/// `total_slices` is S. Best effort: with no space at all the update itself may fail, and
/// the slices stay in the WAL next to the file (SQLite reads them from there). Then fold
/// the WAL back if there is room, so the file can be copied alone.
fn mark_cut(conn: Connection, committed: u64, sha: Option<String>, e: &RecordError) {
    let why = e.to_string();
    let what =
        if why.contains("full") || why.contains("too large") || why.contains("File too large") {
            "disk full"
        } else {
            "write error"
        };
    let marked = conn.execute(
        "UPDATE job SET message = ?1, total_slices = ?2, ended_at = ?3,
            program_sha256 = coalesce(program_sha256, ?4) WHERE outcome IS NULL",
        params![
            format!(
                "cut: {what} at slice {committed} ({why}); the slices up to {committed} are kept"
            ),
            committed as i64,
            unix_ns(),
            sha,
        ],
    );
    // Then the checksum of what is kept, on its own (best effort, like the cut): with no
    // room for it the file stays readable, without a checksum (unverified).
    if marked.is_ok() && conn.execute_batch("BEGIN").is_ok() {
        let sealed = checksum::seal(&conn).and_then(|()| Ok(conn.execute_batch("COMMIT")?));
        if sealed.is_err() {
            let _ = conn.execute_batch("ROLLBACK");
        }
    }
    let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
    let _ = conn.pragma_update(None, "journal_mode", "DELETE");
    let _ = conn.close();
}

/// A job's outcome as `job.outcome` names it.
pub fn outcome_name(o: &JobOutcome) -> &'static str {
    match o {
        JobOutcome::Success => "success",
        JobOutcome::RankFailed { .. } => "rank_failed",
        JobOutcome::Deadlock(r) if r.livelock.is_some() => "livelock",
        JobOutcome::Deadlock(_) => "deadlock",
        JobOutcome::Interrupted => "interrupted",
        JobOutcome::Timeout => "timeout",
        JobOutcome::EngineFailed(_) => "engine_failed",
        JobOutcome::SourceStopped(_) => "stopped",
    }
}

impl SliceSink for Recorder {
    fn slice(&self, rec: &SliceRecord) {
        // Refill a spent message: no allocation on the slice path once the pool is warm.
        let mut m = self.pool.take();
        m.slice = rec.slice;
        m.reason = rec.reason;
        m.start_ns = rec.start_ns;
        m.global = self.opts.metrics.covers(rec.slice).then_some(rec.global);
        m.n_descriptors = rec.descriptors.len() as u32;
        m.counts = rec.decisions.counts();
        m.n_blocked = rec.blocked.len() as u32;
        m.digest = rec.digest;
        if self.opts.schedule_log.covers(rec.slice) {
            // Only what the tables hold: the catalog carries addresses and is not copied.
            let sch = m.schedule.get_or_insert_with(Default::default);
            sch.descriptors.clone_from(&rec.descriptors);
            sch.decisions.slice = rec.slice;
            sch.decisions.decisions.clone_from(&rec.decisions.decisions);
            sch.decisions.wake.clone_from(&rec.decisions.wake);
            sch.decisions.catalog.clear();
            self.blocked.lock().expect("recorder lock").diff_into(
                &rec.blocked,
                &rec.sites,
                &mut sch.blocked,
            );
            // The replay log's inputs: the writer derives them from the copies above.
            m.replay.clear();
        } else {
            // Without the schedule log, only the replay log's inputs are copied.
            m.schedule = None;
            m.replay
                .fill(&rec.descriptors, &rec.decisions.decisions, &rec.blocked);
        }
        self.send(Msg::Slice(m));
    }

    fn outcomes(&self, rank: u32, recs: &[strobe_runtime::outcome::OutcomeRec]) {
        self.send(Msg::Outcomes(rank, recs.to_vec()));
    }

    fn captures(&self, rank: u32) -> bool {
        self.capture
            .get()
            .is_some_and(|set| set.get(rank as usize).copied().unwrap_or(false))
    }

    fn payload(&self, p: &strobe_runtime::engine::Payload) {
        self.send(Msg::Payload(Box::new(p.clone())));
    }

    fn node_metrics(&self, slice: u64, m: &LocalMetrics) {
        if self.opts.metrics.covers(slice) {
            self.send(Msg::Node(slice, Box::new(*m)));
        }
    }

    fn mmds(&self, ranks: &[RankMmds]) {
        if self.opts.metrics != Layer::Off {
            self.send(Msg::Mmds(ranks.to_vec()));
        }
    }
}

#[cfg(test)]
mod tests;
