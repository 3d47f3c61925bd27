//! The writer thread: the only owner of the SQLite connection while the job runs. It writes
//! in batched transactions (commit every N slices or after an interval, whichever comes
//! first) so a crash of strobe itself loses at most one batch, and a slow disk never
//! stalls the slice path until the queue is full.

use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

use rusqlite::types::ValueRef;
use rusqlite::{params, Connection};
use strobe_runtime::descriptor::Descriptor;
use strobe_runtime::engine::{GlobalMetrics, LocalMetrics, StartReason};
use strobe_runtime::mmds::{Bucket, RankMmds};
pub use strobe_runtime::sched::error_name;
use strobe_runtime::sched::{DecisionCounts, SliceDecisions};
use strobe_runtime::segment::BlockedCall;

use crate::blocked_spans::BlockedSpans;
use crate::checksum::TableRows;
use crate::compact;
use crate::node_rows::NodeRows;
use crate::replay_log::ReplayLogEncoder;
use crate::row_batch::RowBatch;
use crate::RecordError;

pub(crate) enum Msg {
    Slice(Box<SliceMsg>),
    /// Boxed, as a slice is: the queue's slots are as large as its largest message, and
    /// `sync_channel` writes every slot when it is made (8,192 slots of 192 bytes took
    /// 0.55 ms of every `strobe record`'s start; 40 bytes now).
    Node(u64, Box<LocalMetrics>),
    /// Every rank's MMDS, once at the end of the job.
    Mmds(Vec<RankMmds>),
    /// Timing-dependent outcomes of one rank (replay log).
    Outcomes(u32, Vec<strobe_runtime::outcome::OutcomeRec>),
    /// What a captured rank was handed for one descriptor (`--capture-payloads`).
    Payload(Box<strobe_runtime::engine::Payload>),
    /// The program's SHA-256, hashed beside the job (`hash_and_remember`).
    ProgramSha256(String),
}

/// One slice, reduced to what the enabled layers record.
pub(crate) struct SliceMsg {
    pub slice: u64,
    pub reason: StartReason,
    pub start_ns: u64,
    /// `None` outside the metrics layer's window.
    pub global: Option<GlobalMetrics>,
    pub n_descriptors: u32,
    pub counts: DecisionCounts,
    pub n_blocked: u32,
    pub digest: u64,
    /// `None` outside the schedule log's window.
    pub schedule: Option<Schedule>,
    /// The replay log's inputs, empty when `schedule` is there: the writer then derives
    /// them from it ([`ReplayInputs::of_schedule`]), off the slice path.
    pub replay: ReplayInputs,
}

impl SliceMsg {
    /// A message for the pool to hand out; the slice path fills every field.
    pub fn empty() -> SliceMsg {
        SliceMsg {
            slice: 0,
            reason: StartReason::Timer,
            start_ns: 0,
            global: None,
            n_descriptors: 0,
            counts: DecisionCounts::default(),
            n_blocked: 0,
            digest: 0,
            schedule: None,
            replay: ReplayInputs::default(),
        }
    }
}

/// What the replay log (always recorded) needs of a slice: descriptors handled per rank
/// (ranks ascending), the blocking ones, the ranks blocked when the slice started
/// (ascending), and the descriptors the slice completed.
#[derive(Default)]
pub(crate) struct ReplayInputs {
    pub posted: Vec<(u32, u32)>,
    pub blocking: Vec<(u32, u64)>,
    pub blocked_ranks: Vec<u32>,
    pub completed: Vec<(u32, u64)>,
}

impl ReplayInputs {
    /// Refill from a slice (the slice path, without the schedule log), keeping every
    /// vector's capacity: a pooled message ([`crate::slice_pool`]) allocates nothing.
    pub fn fill(
        &mut self,
        descriptors: &[Descriptor],
        decisions: &[strobe_runtime::sched::Decision],
        blocked: &[(u32, BlockedCall)],
    ) {
        crate::replay_log::posted_per_rank_into(descriptors, &mut self.posted);
        crate::replay_log::blocking_into(descriptors, &mut self.blocking);
        crate::replay_log::completions_into(decisions, &mut self.completed);
        self.blocked_ranks.clear();
        self.blocked_ranks.extend(blocked.iter().map(|&(r, _)| r));
        self.blocked_ranks.sort_unstable();
    }

    /// Empty, keeping the capacity.
    pub fn clear(&mut self) {
        self.posted.clear();
        self.blocking.clear();
        self.blocked_ranks.clear();
        self.completed.clear();
    }

    /// Without the blocked ranks: a slice with a schedule has them in the writer's mirror
    /// (`blocked_delta.rs`), kept sorted.
    pub fn of_schedule(
        descriptors: &[Descriptor],
        decisions: &[strobe_runtime::sched::Decision],
    ) -> ReplayInputs {
        ReplayInputs {
            posted: crate::replay_log::posted_per_rank(descriptors),
            blocking: crate::replay_log::blocking_of(descriptors),
            blocked_ranks: Vec::new(),
            completed: crate::replay_log::completions_of(decisions),
        }
    }
}

#[derive(Default)]
pub(crate) struct Schedule {
    pub descriptors: Vec<Descriptor>,
    /// The decisions and the ranks woken (the catalog, which holds addresses, is empty).
    pub decisions: SliceDecisions,
    /// What changed in the blocked set (and the blocked ranks' call sites) since the last
    /// slice sent with a schedule (`blocked_delta.rs`).
    pub blocked: Vec<crate::blocked_delta::Change>,
}

pub(crate) struct WriterDone {
    pub conn: Connection,
    /// The first error; later messages were drained and dropped so senders never block.
    pub error: Option<RecordError>,
    pub slices: u64,
    /// The `slice` rows as inserted, for the content checksum (none after an error).
    pub slice_rows: Option<TableRows>,
    /// The last slice of the last successful commit (0: none): after an error (a full
    /// disk), the recording holds exactly the slices up to it.
    pub committed: u64,
    /// The program's hash, if it came ([`Msg::ProgramSha256`]), even after an error.
    pub program_sha256: Option<String>,
}

/// The writer's transaction state.
#[derive(Default)]
struct Batch {
    open_since: Option<Instant>,
    pending: usize,
    /// The last slice written in the open transaction.
    last: u64,
    /// The last slice committed.
    committed: u64,
    /// The chart summaries of the `slice` rows this transaction wrote (node rows':
    /// `NodeRows`).
    summaries: crate::summaries::Pending,
    /// The schedule log of this transaction's slices: one `schedule_batch` row, written
    /// when it commits (`compact/batch.rs`).
    schedule: compact::BatchBuilder,
}

/// A schedule batch past this many bytes is written before its transaction commits, so a
/// batch of 1,000-rank slices stays a bounded allocation for its readers.
const BATCH_BYTES: usize = 1 << 20;

/// With this many blocked spans open, a commit is stretched to [`LONG_COMMIT_INTERVAL`].
const MANY_OPEN_SPANS: usize = 256;
/// The longest time between commits (the crash-safety bound docs/recording.md states:
/// a killed strobe loses at most the last 20 to 50 ms).
const LONG_COMMIT_INTERVAL: Duration = Duration::from_millis(50);

/// Commits used to upsert every open blocked span (format 15 and before); an open span is
/// now written once (`blocked_spans.rs`), but a commit still has a fixed cost (a WAL frame
/// for every page it touched), so with many ranks blocked (a big job, where the writer's
/// CPU is the ranks') commits stay 50 ms apart, within the documented bound.
fn commit_interval(interval: Duration, spans: &BlockedSpans) -> Duration {
    if spans.open_count() >= MANY_OPEN_SPANS {
        interval.max(LONG_COMMIT_INTERVAL)
    } else {
        interval
    }
}

pub(crate) fn run(
    conn: Connection,
    rx: Receiver<Msg>,
    pool: crate::slice_pool::SlicePool,
    queue: usize,
    (batch_slices, interval): (usize, Duration),
    mut folds: crate::checkpointer::FoldRequests,
) -> WriterDone {
    // Room for every statement the writer keeps (rusqlite's default is 16; the multi-row
    // inserts alone are four): one evicted is prepared again on its next use.
    conn.set_prepared_statement_cache_capacity(64);
    crate::checkpointer::watch_wal(&conn);
    let mut error: Option<RecordError> = None;
    let mut slices = 0u64;
    let mut b = Batch::default();
    let mut enc = ReplayLogEncoder::default();
    let mut spans = BlockedSpans::default();
    let mut mirror = crate::blocked_delta::BlockedMirror::default();
    let mut rows = SliceRows::new();
    let mut nap = crate::nap::Nap::new(queue, interval, Instant::now());
    let mut slice_rows = TableRows::new("slice", &SLICE_COLUMNS);
    let mut program_sha256 = None;
    loop {
        let msg = match rx.try_recv() {
            Ok(m) => Some(m),
            Err(TryRecvError::Disconnected) => None,
            Err(TryRecvError::Empty) => {
                let longest = commit_interval(interval, &spans);
                if b.open_since.is_some_and(|t| t.elapsed() >= longest) {
                    commit(&conn, &mut enc, &mut spans, &mut rows, &mut b, &mut error);
                    folds.committed();
                }
                let commit_in = b.open_since.map(|t| longest.saturating_sub(t.elapsed()));
                std::thread::park_timeout(nap.length(Instant::now(), commit_in));
                continue;
            }
        };
        nap.received();
        let Some(msg) = msg else { break };
        if let Msg::ProgramSha256(sha) = &msg {
            // Kept whatever happens: a recording cut by a full disk still says which
            // program it ran (`mark_cut` writes it), or replay refuses it.
            program_sha256 = Some(sha.clone());
        }
        if error.is_some() {
            continue;
        }
        if b.open_since.is_none() {
            folds.before_begin();
            if let Err(e) = conn.execute_batch("BEGIN") {
                error = Some(e.into());
                continue;
            }
            b.open_since = Some(Instant::now());
        }
        let res = match &msg {
            Msg::Slice(s) => {
                b.pending += 1;
                b.last = s.slice;
                slices += 1;
                let derived = match &s.schedule {
                    Some(sch) => {
                        mirror.apply(&sch.blocked);
                        spans.update(s.slice, &sch.blocked, &mirror);
                        Some(ReplayInputs::of_schedule(
                            &sch.descriptors,
                            &sch.decisions.decisions,
                        ))
                    }
                    None => {
                        // Out of the schedule log's window: no open span reaches this
                        // slice (in a file cut short, it would read as blocked to the end).
                        spans.close_all();
                        None
                    }
                };
                let (r, blocked_ranks) = match &derived {
                    Some(r) => (r, mirror.ranks()),
                    None => (&s.replay, &s.replay.blocked_ranks[..]),
                };
                enc.slice(s.slice, &r.posted, &r.blocking, blocked_ranks, &r.completed);
                b.summaries.slice(
                    s.slice,
                    s.reason == StartReason::First,
                    s.global.map(|g| ns(g.getts)),
                );
                write_slice(&conn, s, &mut slice_rows, &mut rows, &mut b.schedule)
            }
            Msg::Node(slice, m) => rows.nodes.node(&conn, *slice, m),
            Msg::Mmds(ranks) => write_mmds(&conn, ranks),
            Msg::Outcomes(rank, recs) => {
                enc.outcomes(*rank, recs);
                Ok(())
            }
            Msg::Payload(p) => write_payload(&conn, p),
            Msg::ProgramSha256(sha) => conn
                .execute("UPDATE job SET program_sha256 = ?1", [sha])
                .map(drop),
        };
        if let Err(e) = res {
            error = Some(e.into());
        }
        if let Msg::Slice(s) = msg {
            pool.give(s);
        }
        let due = b
            .open_since
            .is_some_and(|t| t.elapsed() >= commit_interval(interval, &spans));
        if b.pending >= batch_slices || due {
            commit(&conn, &mut enc, &mut spans, &mut rows, &mut b, &mut error);
            folds.committed();
        }
    }
    // Node rows still waiting for a slice that never came are written whole. (They wait
    // across commits: what is stored then never depends on when a commit fell.)
    if rows.nodes.waiting() && error.is_none() {
        let open = if b.open_since.is_some() {
            Ok(())
        } else {
            conn.execute_batch("BEGIN").map(|()| {
                b.open_since = Some(Instant::now());
            })
        };
        if let Err(e) = open.and_then(|()| rows.nodes.write_waiting(&conn)) {
            error = Some(e.into());
        }
    }
    // The recording is finished: its open spans are closed at their last slice, so a
    // finished file has none (only a recording cut short reads them as open).
    spans.close_all();
    let episodes = enc.end_episodes();
    if b.open_since.is_none() && error.is_none() && (spans.pending() || episodes) {
        match conn.execute_batch("BEGIN") {
            Ok(()) => b.open_since = Some(Instant::now()),
            Err(e) => error = Some(e.into()),
        }
    }
    if b.open_since.is_some() {
        commit(&conn, &mut enc, &mut spans, &mut rows, &mut b, &mut error);
    }
    WriterDone {
        program_sha256,
        slice_rows: error.is_none().then_some(slice_rows),
        conn,
        error,
        slices,
        committed: b.committed,
    }
}

fn commit(
    conn: &Connection,
    enc: &mut ReplayLogEncoder,
    spans: &mut BlockedSpans,
    rows: &mut SliceRows,
    b: &mut Batch,
    error: &mut Option<RecordError>,
) {
    if b.open_since.take().is_some() {
        // The replay log goes into the same transaction as its slices: a crash never
        // leaves slices whose replay log is missing. So do the chart summaries of the
        // blocks this transaction touched (`summaries.rs`).
        if error.is_none() {
            if let Err(e) = rows.flush(conn) {
                error.get_or_insert(e.into());
            }
        }
        b.summaries.merge(std::mem::take(&mut rows.nodes.summaries));
        if error.is_none() {
            if let Err(e) = b.summaries.flush(conn) {
                error.get_or_insert(e.into());
            }
        }
        if error.is_none() {
            if let Err(e) = write_schedule_batch(conn, &mut b.schedule) {
                error.get_or_insert(e.into());
            }
            if let Err(e) = enc.flush(conn) {
                error.get_or_insert(e.into());
            }
            if let Err(e) = spans.flush(conn) {
                error.get_or_insert(e.into());
            }
        }
        // After an error, roll back: a failed write (a full disk) may have left part of
        // a slice, and SQLite may already have rolled the transaction back itself. The
        // file keeps the batches committed before, with a consistent replay log.
        if error.is_some() {
            // Its slices are rolled back with it.
            let _ = b.schedule.finish();
            rows.discard();
            let _ = conn.execute_batch("ROLLBACK");
        } else if let Err(e) = conn.execute_batch("COMMIT") {
            error.get_or_insert(e.into());
            let _ = conn.execute_batch("ROLLBACK");
        } else {
            b.committed = b.last;
        }
    }
    b.pending = 0;
}

fn ns(d: Duration) -> i64 {
    d.as_nanos() as i64
}

fn write_payload(conn: &Connection, p: &strobe_runtime::engine::Payload) -> rusqlite::Result<()> {
    let (d, c) = (&p.desc, &p.completion);
    conn.prepare_cached(
        "INSERT OR REPLACE INTO payload (rank, seq, slice, kind, peer, tag, comm, bytes, source,
            status_tag, status_bytes, error, flags, value, value2, send_rank, send_seq, data)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
    )?
    .execute(params![
        d.rank,
        d.seq as i64,
        p.slice as i64,
        d.kind,
        d.peer,
        d.tag,
        d.comm,
        d.bytes as i64,
        c.source,
        c.tag,
        c.bytes as i64,
        c.error,
        c.flags,
        // Bit patterns (u64::MAX is "none"): SQLite integers are signed 64-bit.
        c.value as i64,
        c.value2 as i64,
        p.matched_send.map(|s| s.rank),
        p.matched_send.map(|s| s.seq as i64),
        p.data,
    ])?;
    Ok(())
}

/// The `slice` table's columns in table order: its insert, and the content checksum's
/// hash of the rows as they are inserted.
pub(crate) const SLICE_COLUMNS: [&str; 17] = [
    "slice",
    "reason",
    "start_ns",
    "getts_ns",
    "gtdem_ns",
    "gtmsm_ns",
    "gtts_ns",
    "usrsts",
    "usrdem",
    "usrmsm",
    "n_descriptors",
    "n_matches",
    "n_chunks",
    "n_collectives",
    "n_completions",
    "n_blocked",
    "digest",
];

/// The per-slice rows: `slice` and the nodes' `node_metrics`, each inserted 16 to a
/// statement (`row_batch.rs`).
pub(crate) struct SliceRows {
    pub slices: RowBatch<{ SLICE_COLUMNS.len() }>,
    pub nodes: NodeRows,
}

impl SliceRows {
    fn new() -> SliceRows {
        SliceRows {
            slices: RowBatch::new("slice", &SLICE_COLUMNS),
            nodes: NodeRows::default(),
        }
    }

    /// Before a commit: every row waiting goes in.
    fn flush(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        self.slices.flush(conn)?;
        self.nodes.flush_batch(conn)
    }

    /// The transaction is rolled back: its waiting rows with it.
    fn discard(&mut self) {
        self.slices.discard();
        self.nodes.discard_batch();
    }
}

fn write_slice(
    conn: &Connection,
    s: &SliceMsg,
    slice_rows: &mut TableRows,
    rows: &mut SliceRows,
    batch: &mut compact::BatchBuilder,
) -> rusqlite::Result<()> {
    // A slice in which nothing happened, outside both windows, has no row: its digest is
    // the empty digest and its blocked set is in the replay log, so the replay-log-only
    // recording of a long computation costs nothing per slice (docs/recording.md).
    if s.global.is_none()
        && s.schedule.is_none()
        && s.n_descriptors == 0
        && s.digest == crate::replay_log::empty_digest()
    {
        return Ok(());
    }
    let g = s.global;
    let int = ValueRef::Integer;
    let opt = |v: Option<i64>| v.map_or(ValueRef::Null, ValueRef::Integer);
    let row: [ValueRef<'static>; SLICE_COLUMNS.len()] = [
        int(s.slice as i64),
        ValueRef::Text(s.reason.name().as_bytes()),
        int(s.start_ns as i64),
        opt(g.map(|g| ns(g.getts))),
        opt(g.map(|g| ns(g.gtdem))),
        opt(g.map(|g| ns(g.gtmsm))),
        opt(g.map(|g| ns(g.gtts))),
        opt(g.map(|g| g.usrsts.into())),
        opt(g.map(|g| g.usrdem.into())),
        opt(g.map(|g| g.usrmsm.into())),
        int(s.n_descriptors.into()),
        int(s.counts.matches.into()),
        int(s.counts.chunks.into()),
        int(s.counts.collectives.into()),
        int(s.counts.completions.into()),
        int(s.n_blocked.into()),
        // The u64 digest's bit pattern: SQLite integers are signed 64-bit.
        int(s.digest as i64),
    ];
    rows.slices.push(conn, row)?;
    // The content checksum's rows of `slice`: the values bound (`checksum::TableRows`).
    slice_rows.row(s.slice as i64, row);
    rows.nodes
        .slice(conn, s.slice, s.global.as_ref(), s.n_blocked)?;
    let Some(sch) = &s.schedule else {
        return Ok(());
    };
    // No `message` rows (format `DERIVED_ROWS_VERSION`): they are derived from the blobs.
    add_schedule(batch, s.slice, sch);
    if batch.len() >= BATCH_BYTES {
        write_schedule_batch(conn, batch)?;
    }
    Ok(())
}

/// The slice's descriptors and decision set as two compact blobs (`compact.rs`) added to
/// the transaction's schedule batch: no row per descriptor, per decision, or per slice.
/// Encoded here, on the writer thread, never on the slice path. A slice that handled and
/// decided nothing has no entry.
fn add_schedule(batch: &mut compact::BatchBuilder, slice: u64, sch: &Schedule) {
    let set = &sch.decisions;
    let descriptors =
        (!sch.descriptors.is_empty()).then(|| compact::encode_descriptors(&sch.descriptors));
    let decisions = (!set.is_empty()).then(|| compact::encode_decisions(&set.decisions, &set.wake));
    if descriptors.is_none() && decisions.is_none() {
        return;
    }
    batch.push(slice, descriptors.as_deref(), decisions.as_deref());
}

/// The batch built so far as one `schedule_batch` row, packed (nothing when empty).
fn write_schedule_batch(
    conn: &Connection,
    batch: &mut compact::BatchBuilder,
) -> rusqlite::Result<()> {
    let Some(row) = batch.finish() else {
        return Ok(());
    };
    conn.prepare_cached(
        "INSERT INTO schedule_batch (first_slice, last_slice, entries, data)
         VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![
        row.first_slice as i64,
        row.last_slice as i64,
        row.entries as i64,
        row.data
    ])?;
    Ok(())
}

/// The per-process tables: `mmds_rank`, `mmds_primitive`, `mmds_histogram`. Granularity
/// and overhead are per process: their histogram rows have `primitive = '*'`.
fn write_mmds(conn: &Connection, ranks: &[RankMmds]) -> rusqlite::Result<()> {
    let mut rank_st = conn.prepare_cached(
        "INSERT INTO mmds_rank (rank, wall_ns, compute_ns, comm_ns, calls, finalized,
            granularity_min_ns, granularity_max_ns)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    let mut prim_st = conn.prepare_cached(
        "INSERT INTO mmds_primitive (rank, primitive, count, min_ns, max_ns, total_ns, bytes)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    // 60 histogram rows a rank (65,000 for a 1,000-rank job, written while `strobe
    // record` waits for the writer at the job's end): 16 to a statement.
    let mut hist_rows = RowBatch::new("mmds_histogram", &HIST_COLUMNS);
    let mut hist = |rank: u32, prim: &'static str, metric: &'static str, b: &[Bucket]| {
        for x in b {
            hist_rows.push(
                conn,
                [
                    ValueRef::Integer(rank.into()),
                    ValueRef::Text(prim.as_bytes()),
                    ValueRef::Text(metric.as_bytes()),
                    ValueRef::Integer(x.lo as i64),
                    ValueRef::Integer(x.hi as i64),
                    ValueRef::Integer(x.count as i64),
                ],
            )?;
        }
        Ok::<_, rusqlite::Error>(())
    };
    for r in ranks {
        rank_st.execute(params![
            r.rank,
            r.wall_ns as i64,
            r.compute_ns as i64,
            r.comm_ns as i64,
            r.calls as i64,
            r.finalized,
            r.granularity_min_max.map(|m| m.0 as i64),
            r.granularity_min_max.map(|m| m.1 as i64),
        ])?;
        hist(r.rank, "*", "granularity", &r.granularity)?;
        hist(r.rank, "*", "overhead", &r.overhead)?;
        for p in &r.primitives {
            let name = p.primitive.mpi_name();
            prim_st.execute(params![
                r.rank,
                name,
                p.count as i64,
                p.min_ns as i64,
                p.max_ns as i64,
                p.total_ns as i64,
                p.bytes as i64
            ])?;
            hist(r.rank, name, "latency", &p.latency)?;
            hist(r.rank, name, "size", &p.size)?;
        }
    }
    hist_rows.flush(conn)
}

/// `mmds_histogram`'s columns, in the order [`write_mmds`] binds them.
const HIST_COLUMNS: [&str; 6] = ["rank", "primitive", "metric", "lo", "hi", "count"];

#[cfg(test)]
mod msg_size {
    /// Every slot of the writer's queue is as large as this, and all 8,192 are written
    /// when the queue is made: a large message belongs in a box.
    #[test]
    fn a_queued_message_is_small() {
        assert!(std::mem::size_of::<super::Msg>() <= 48);
    }
}
