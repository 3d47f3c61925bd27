//! Versioned schema migrations, tracked with SQLite's `PRAGMA user_version`.
//!
//! `MIGRATIONS[i]` turns a version-`i` file into a version-`i+1` file. Scripts are only ever
//! appended: a released script never changes, because recordings made with it exist. A file
//! whose `user_version` is newer than the last script was written by a newer strobe and is
//! refused rather than misread.

use rusqlite::Connection;

use crate::RecordError;

/// Schema v1: the job, its ranks, per-slice metrics and schedule, per-node metrics.
/// Every table and column is documented in `docs/recording.md`; keep the two in step.
const V1: &str = r#"
CREATE TABLE job (
    format_version   INTEGER NOT NULL,
    strobe_version   TEXT NOT NULL,
    command          TEXT NOT NULL,
    cwd              TEXT NOT NULL,
    program          TEXT NOT NULL,
    program_sha256   TEXT,
    env              TEXT NOT NULL,
    ranks            INTEGER NOT NULL,
    nodes            INTEGER NOT NULL,
    slice_ns         INTEGER NOT NULL,
    policy           TEXT NOT NULL,
    deadlock_slices  INTEGER NOT NULL,
    chunk_budget     INTEGER NOT NULL,
    direct_copy_min  INTEGER NOT NULL,
    schedule_log     TEXT NOT NULL,
    metrics          TEXT NOT NULL,
    started_at       INTEGER NOT NULL,
    ended_at         INTEGER,
    elapsed_ns       INTEGER,
    outcome          TEXT,
    message          TEXT,
    exit_status      INTEGER,
    total_slices     INTEGER
);

CREATE TABLE rank (
    rank         INTEGER PRIMARY KEY,
    wait_status  INTEGER,
    exit_code    INTEGER,
    signal       INTEGER
);

CREATE TABLE slice (
    slice          INTEGER PRIMARY KEY,
    reason         TEXT NOT NULL,
    start_ns       INTEGER NOT NULL,
    getts_ns       INTEGER,
    gtdem_ns       INTEGER,
    gtmsm_ns       INTEGER,
    gtts_ns        INTEGER,
    usrsts         INTEGER,
    usrdem         INTEGER,
    usrmsm         INTEGER,
    n_descriptors  INTEGER NOT NULL,
    n_matches      INTEGER NOT NULL,
    n_chunks       INTEGER NOT NULL,
    n_collectives  INTEGER NOT NULL,
    n_completions  INTEGER NOT NULL,
    n_blocked      INTEGER NOT NULL,
    digest         INTEGER NOT NULL
);

CREATE TABLE node_slice (
    slice          INTEGER NOT NULL,
    node           INTEGER NOT NULL,
    letts_ns       INTEGER NOT NULL,
    ltdem_ns       INTEGER NOT NULL,
    ltmsm_ns       INTEGER NOT NULL,
    ltts_ns        INTEGER NOT NULL,
    np2pdem        INTEGER NOT NULL,
    np2pmsm        INTEGER NOT NULL,
    ncolldem       INTEGER NOT NULL,
    ncollmsm       INTEGER NOT NULL,
    bpts           INTEGER NOT NULL,
    t_drain_ns     INTEGER NOT NULL,
    t_schedule_ns  INTEGER NOT NULL,
    t_p2p_ns       INTEGER NOT NULL,
    t_bbm_ns       INTEGER NOT NULL,
    t_rm_ns        INTEGER NOT NULL,
    t_deliver_ns   INTEGER NOT NULL,
    PRIMARY KEY (slice, node)
) WITHOUT ROWID;

CREATE TABLE descriptor (
    rank     INTEGER NOT NULL,
    seq      INTEGER NOT NULL,
    slice    INTEGER NOT NULL,
    kind     TEXT NOT NULL,
    peer     INTEGER NOT NULL,
    tag      INTEGER NOT NULL,
    comm     INTEGER NOT NULL,
    bytes    INTEGER NOT NULL,
    rbytes   INTEGER NOT NULL,
    request  INTEGER NOT NULL,
    flags    INTEGER NOT NULL,
    PRIMARY KEY (rank, seq)
) WITHOUT ROWID;
CREATE INDEX descriptor_slice ON descriptor(slice);

CREATE TABLE decision (
    slice      INTEGER NOT NULL,
    idx        INTEGER NOT NULL,
    kind       TEXT NOT NULL,
    send_rank  INTEGER,
    send_seq   INTEGER,
    recv_rank  INTEGER,
    recv_seq   INTEGER,
    desc_rank  INTEGER,
    desc_seq   INTEGER,
    "offset"   INTEGER,
    bytes      INTEGER,
    comm       INTEGER,
    parent     INTEGER,
    coll_seq   INTEGER,
    coll_kind  TEXT,
    root       INTEGER,
    members    TEXT,
    request    INTEGER,
    source     INTEGER,
    tag        INTEGER,
    error      TEXT,
    flags      INTEGER,
    value      INTEGER,
    value2     INTEGER,
    PRIMARY KEY (slice, idx)
) WITHOUT ROWID;
CREATE INDEX decision_kind ON decision(kind, slice);

CREATE TABLE blocked (
    slice  INTEGER NOT NULL,
    rank   INTEGER NOT NULL,
    call   TEXT NOT NULL,
    PRIMARY KEY (slice, rank)
) WITHOUT ROWID;
"#;

/// Chart summaries for the terminal UI (`docs/recording.md`, "Summaries"): per block of 64
/// and of 4096 slices, the minimum and maximum of GETTS and of each node's NCOLL/NP2P
/// counters, kept by triggers as rows arrive, so a chart of a million slices reads a few
/// hundred rows instead of every slice. Self-contained: it backfills a file that already
/// holds slices, and the writer needs no change (a trigger costs a few microseconds per
/// row on the writer thread, never on the slice path).
const V_SUMMARIES: &str = r#"
CREATE TABLE summary_getts (
    span   INTEGER NOT NULL,
    block  INTEGER NOT NULL,
    lo     INTEGER NOT NULL,
    hi     INTEGER NOT NULL,
    PRIMARY KEY (span, block)
) WITHOUT ROWID;

CREATE TABLE summary_node (
    span          INTEGER NOT NULL,
    block         INTEGER NOT NULL,
    ncolldem_lo   INTEGER NOT NULL,
    ncolldem_hi   INTEGER NOT NULL,
    ncollmsm_lo   INTEGER NOT NULL,
    ncollmsm_hi   INTEGER NOT NULL,
    np2pdem_lo    INTEGER NOT NULL,
    np2pdem_hi    INTEGER NOT NULL,
    np2pmsm_lo    INTEGER NOT NULL,
    np2pmsm_hi    INTEGER NOT NULL,
    PRIMARY KEY (span, block)
) WITHOUT ROWID;

INSERT INTO summary_getts
SELECT span, (slice - 1) / span, min(getts_ns), max(getts_ns)
FROM slice, (SELECT 64 AS span UNION ALL SELECT 4096)
WHERE getts_ns IS NOT NULL AND reason != 'first'
GROUP BY span, (slice - 1) / span;

INSERT INTO summary_node
SELECT span, (slice - 1) / span, min(ncolldem), max(ncolldem), min(ncollmsm), max(ncollmsm),
       min(np2pdem), max(np2pdem), min(np2pmsm), max(np2pmsm)
FROM node_slice, (SELECT 64 AS span UNION ALL SELECT 4096)
GROUP BY span, (slice - 1) / span;

CREATE TRIGGER summary_getts_insert AFTER INSERT ON slice
WHEN NEW.getts_ns IS NOT NULL AND NEW.reason != 'first'
BEGIN
    INSERT INTO summary_getts VALUES (64, (NEW.slice - 1) / 64, NEW.getts_ns, NEW.getts_ns)
    ON CONFLICT (span, block) DO UPDATE SET lo = min(lo, excluded.lo), hi = max(hi, excluded.hi);
    INSERT INTO summary_getts VALUES (4096, (NEW.slice - 1) / 4096, NEW.getts_ns, NEW.getts_ns)
    ON CONFLICT (span, block) DO UPDATE SET lo = min(lo, excluded.lo), hi = max(hi, excluded.hi);
END;

CREATE TRIGGER summary_node_insert AFTER INSERT ON node_slice
BEGIN
    INSERT INTO summary_node VALUES (64, (NEW.slice - 1) / 64,
        NEW.ncolldem, NEW.ncolldem, NEW.ncollmsm, NEW.ncollmsm,
        NEW.np2pdem, NEW.np2pdem, NEW.np2pmsm, NEW.np2pmsm)
    ON CONFLICT (span, block) DO UPDATE SET
        ncolldem_lo = min(ncolldem_lo, excluded.ncolldem_lo),
        ncolldem_hi = max(ncolldem_hi, excluded.ncolldem_hi),
        ncollmsm_lo = min(ncollmsm_lo, excluded.ncollmsm_lo),
        ncollmsm_hi = max(ncollmsm_hi, excluded.ncollmsm_hi),
        np2pdem_lo = min(np2pdem_lo, excluded.np2pdem_lo),
        np2pdem_hi = max(np2pdem_hi, excluded.np2pdem_hi),
        np2pmsm_lo = min(np2pmsm_lo, excluded.np2pmsm_lo),
        np2pmsm_hi = max(np2pmsm_hi, excluded.np2pmsm_hi);
    INSERT INTO summary_node VALUES (4096, (NEW.slice - 1) / 4096,
        NEW.ncolldem, NEW.ncolldem, NEW.ncollmsm, NEW.ncollmsm,
        NEW.np2pdem, NEW.np2pdem, NEW.np2pmsm, NEW.np2pmsm)
    ON CONFLICT (span, block) DO UPDATE SET
        ncolldem_lo = min(ncolldem_lo, excluded.ncolldem_lo),
        ncolldem_hi = max(ncolldem_hi, excluded.ncolldem_hi),
        ncollmsm_lo = min(ncollmsm_lo, excluded.ncollmsm_lo),
        ncollmsm_hi = max(ncollmsm_hi, excluded.ncollmsm_hi),
        np2pdem_lo = min(np2pdem_lo, excluded.np2pdem_lo),
        np2pdem_hi = max(np2pdem_hi, excluded.np2pdem_hi),
        np2pmsm_lo = min(np2pmsm_lo, excluded.np2pmsm_lo),
        np2pmsm_hi = max(np2pmsm_hi, excluded.np2pmsm_hi);
END;
"#;

/// The recorder's second increment, one self-contained step: the Cap'n Proto format version
/// of the blobs, each slice's decision set as a packed Cap'n Proto blob (schedule log), the
/// per-process MMDS tables (metrics layer), and views for the common questions. Documented
/// in `docs/recording.md`.
const RECORDER_V2: &str = r#"
ALTER TABLE job ADD COLUMN wire_format_version INTEGER;
ALTER TABLE job ADD COLUMN histogram_resolution INTEGER;

CREATE TABLE slice_decisions (
    slice      INTEGER PRIMARY KEY,
    decisions  BLOB NOT NULL
);

CREATE TABLE mmds_rank (
    rank                INTEGER PRIMARY KEY,
    wall_ns             INTEGER NOT NULL,
    compute_ns          INTEGER NOT NULL,
    comm_ns             INTEGER NOT NULL,
    calls               INTEGER NOT NULL,
    finalized           INTEGER NOT NULL,
    granularity_min_ns  INTEGER,
    granularity_max_ns  INTEGER
);

CREATE TABLE mmds_primitive (
    rank       INTEGER NOT NULL,
    primitive  TEXT NOT NULL,
    count      INTEGER NOT NULL,
    min_ns     INTEGER NOT NULL,
    max_ns     INTEGER NOT NULL,
    total_ns   INTEGER NOT NULL,
    bytes      INTEGER NOT NULL,
    PRIMARY KEY (rank, primitive)
) WITHOUT ROWID;

CREATE TABLE mmds_histogram (
    rank       INTEGER NOT NULL,
    primitive  TEXT NOT NULL,
    metric     TEXT NOT NULL CHECK (metric IN ('latency', 'size', 'granularity', 'overhead')),
    lo         INTEGER NOT NULL,
    hi         INTEGER NOT NULL,
    count      INTEGER NOT NULL,
    PRIMARY KEY (rank, primitive, metric, lo)
) WITHOUT ROWID;

CREATE VIEW slowest_slices AS
    SELECT slice, reason, getts_ns, gtdem_ns, gtmsm_ns, gtts_ns, n_descriptors, n_blocked,
           n_matches + n_chunks + n_collectives + n_completions AS n_decisions
    FROM slice WHERE getts_ns IS NOT NULL AND reason != 'first'
    ORDER BY getts_ns DESC;

CREATE VIEW blocked_per_slice AS
    SELECT slice, count(*) AS n_blocked, group_concat(rank || ':' || call, ' ') AS ranks
    FROM blocked GROUP BY slice;

CREATE VIEW message_life AS
    SELECT s.rank AS send_rank, s.seq AS send_seq, s.kind AS send_kind,
           s.slice - 1 AS send_posted, r.rank AS recv_rank, r.seq AS recv_seq,
           r.slice - 1 AS recv_posted, m.slice AS matched, m.bytes AS bytes,
           (SELECT max(c.slice) FROM decision c
             WHERE c.kind = 'chunk' AND c.send_rank = m.send_rank AND c.send_seq = m.send_seq)
             AS last_chunk,
           (SELECT c.slice FROM decision c
             WHERE c.kind = 'complete' AND c.desc_rank = m.send_rank AND c.desc_seq = m.send_seq)
             AS send_completed,
           (SELECT c.slice FROM decision c
             WHERE c.kind = 'complete' AND c.desc_rank = m.recv_rank AND c.desc_seq = m.recv_seq)
             AS recv_completed
    FROM decision m
    JOIN descriptor s ON s.rank = m.send_rank AND s.seq = m.send_seq
    JOIN descriptor r ON r.rank = m.recv_rank AND r.seq = m.recv_seq
    WHERE m.kind = 'match';

CREATE VIEW mmds_summary AS
    SELECT rank, primitive, count, min_ns, max_ns, total_ns,
           CAST(total_ns AS REAL) / count AS avg_ns, bytes
    FROM mmds_primitive WHERE count > 0;
"#;

/// The replay log (model.md 4.3): per rank, the slices its descriptors were handled in,
/// its timing-dependent outcomes and its blocked-state flips, as varint streams cut into
/// blob chunks (`replay_log.rs`; `docs/recording.md`, "The replay log"). Self-contained:
/// it only adds a table.
const V_REPLAY_LOG: &str = r#"
CREATE TABLE replay_log (
    stream      INTEGER NOT NULL,
    rank        INTEGER NOT NULL,
    chunk       INTEGER NOT NULL,
    last_slice  INTEGER NOT NULL,
    data        BLOB NOT NULL,
    PRIMARY KEY (stream, rank, chunk)
) WITHOUT ROWID;

CREATE TABLE regenerated (
    source      TEXT NOT NULL,
    note        TEXT NOT NULL
);
"#;

/// The scheduler's version (`strobe_core::sched::SCHEDULER_VERSION`) the job was recorded
/// with: a replay by a strobe whose scheduler decides differently is refused up front
/// instead of diverging. Every file made before this column existed was recorded by a
/// scheduler of version 1, which is therefore the default for migrated files.
const V_SCHEDULER_VERSION: &str = r#"
ALTER TABLE job ADD COLUMN scheduler_version INTEGER NOT NULL DEFAULT 1;
"#;

/// Blocked sets as intervals (issue 14): one `blocked_span` row per rank and stretch of
/// consecutive recorded slices in which the rank sat in the same blocking call, instead of
/// one `blocked` row per rank and slice (1.37 GB of a 1,000-rank token ring's 1.4 GB).
/// `blocked` becomes a view that expands the spans over the `slice` table (every slice of
/// the schedule log's window has a `slice` row, and a span never crosses a slice without
/// one), so old queries and `sqlite3` users see the same rows; INSTEAD OF triggers keep
/// `INSERT INTO blocked` and `DELETE FROM blocked` working. Existing rows are folded into
/// spans (gaps and islands: consecutive slices of one rank and call).
const V_BLOCKED_SPANS: &str = r#"
CREATE TABLE blocked_span (
    rank         INTEGER NOT NULL,
    first_slice  INTEGER NOT NULL,
    last_slice   INTEGER NOT NULL,
    call         TEXT NOT NULL,
    PRIMARY KEY (rank, first_slice)
) WITHOUT ROWID;
CREATE INDEX blocked_span_last ON blocked_span(last_slice, first_slice, call);
CREATE INDEX blocked_span_length ON blocked_span(last_slice - first_slice);

INSERT INTO blocked_span (rank, first_slice, last_slice, call)
SELECT rank, min(slice), max(slice), call FROM (
    SELECT slice, rank, call,
           slice - row_number() OVER (PARTITION BY rank, call ORDER BY slice) AS island
    FROM blocked)
GROUP BY rank, call, island;

DROP VIEW blocked_per_slice;
DROP TABLE blocked;

CREATE VIEW blocked AS
    SELECT s.slice AS slice, b.rank AS rank, b.call AS call
    FROM blocked_span b JOIN slice s ON s.slice BETWEEN b.first_slice AND b.last_slice;

CREATE VIEW blocked_per_slice AS
    SELECT slice, count(*) AS n_blocked, group_concat(rank || ':' || call, ' ') AS ranks
    FROM blocked GROUP BY slice;

CREATE TRIGGER blocked_insert INSTEAD OF INSERT ON blocked
BEGIN
    UPDATE blocked_span SET last_slice = NEW.slice
    WHERE rank = NEW.rank AND call = NEW.call AND last_slice = NEW.slice - 1;
    INSERT INTO blocked_span (rank, first_slice, last_slice, call)
    SELECT NEW.rank, NEW.slice, NEW.slice, NEW.call
    WHERE NOT EXISTS (SELECT 1 FROM blocked_span
                      WHERE rank = NEW.rank AND call = NEW.call AND last_slice = NEW.slice);
END;

CREATE TRIGGER blocked_delete INSTEAD OF DELETE ON blocked
BEGIN
    INSERT INTO blocked_span (rank, first_slice, last_slice, call)
    SELECT rank, OLD.slice + 1, last_slice, call FROM blocked_span
    WHERE rank = OLD.rank AND first_slice <= OLD.slice AND last_slice > OLD.slice;
    UPDATE blocked_span SET last_slice = OLD.slice - 1
    WHERE rank = OLD.rank AND first_slice <= OLD.slice AND last_slice >= OLD.slice;
    DELETE FROM blocked_span WHERE rank = OLD.rank AND last_slice < first_slice;
END;
"#;

/// Payload capture (`strobe record --capture-payloads RANKS`, issue 17 item 4): for the
/// captured ranks (`job.captured_ranks`, a JSON list; NULL: none), one `payload` row per
/// completed descriptor: the call as posted, the completion the rank received, the send a
/// receive matched, and the bytes the runtime wrote into the rank's memory for it
/// (`runtime/src/engine/capture.rs`). Enough to replay that rank alone
/// (`strobe replay --rank R`). A rowid table: its rows hold blobs.
const V_PAYLOADS: &str = r#"
ALTER TABLE job ADD COLUMN captured_ranks TEXT;

CREATE TABLE payload (
    rank          INTEGER NOT NULL,
    seq           INTEGER NOT NULL,
    slice         INTEGER NOT NULL,
    kind          INTEGER NOT NULL,
    peer          INTEGER NOT NULL,
    tag           INTEGER NOT NULL,
    comm          INTEGER NOT NULL,
    bytes         INTEGER NOT NULL,
    source        INTEGER NOT NULL,
    status_tag    INTEGER NOT NULL,
    status_bytes  INTEGER NOT NULL,
    error         INTEGER NOT NULL,
    flags         INTEGER NOT NULL,
    value         INTEGER NOT NULL,
    value2        INTEGER NOT NULL,
    send_rank     INTEGER,
    send_seq      INTEGER,
    data          BLOB NOT NULL,
    PRIMARY KEY (rank, seq)
);
CREATE INDEX payload_send ON payload(send_rank, send_seq) WHERE send_rank IS NOT NULL;
"#;

/// The correctness checks' findings (`strobe_runtime::checks`), one row each, written when
/// the job ends; a file without the table predates the checks.
const V_CHECKS: &str = r#"
CREATE TABLE check_finding (
    id INTEGER PRIMARY KEY,
    slice INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    kind TEXT NOT NULL,
    call TEXT NOT NULL,
    call_site TEXT,
    detail TEXT NOT NULL
);
"#;

/// Call sites (issue 12): where in the program each blocked rank made its call. One
/// `call_site` row per distinct site (the object and the return address's offset in it,
/// which are the same in every run of the binary whatever ASLR does, and what its debug
/// information says: function, file, line), and one `blocked_site` row per blocked span
/// whose site is known, naming its site by id (a span ends where the site changes). Older
/// files have neither table: readers show no sites for them.
const V_CALL_SITES: &str = r#"
CREATE TABLE call_site (
    id        INTEGER PRIMARY KEY,
    object    TEXT NOT NULL,
    offset    INTEGER NOT NULL,
    function  TEXT,
    file      TEXT,
    line      INTEGER
);

CREATE TABLE blocked_site (
    rank         INTEGER NOT NULL,
    first_slice  INTEGER NOT NULL,
    site         INTEGER NOT NULL REFERENCES call_site(id),
    PRIMARY KEY (rank, first_slice)
) WITHOUT ROWID;

-- A span deleted (directly, or through the `blocked` view's INSTEAD OF DELETE trigger)
-- takes its site row with it.
CREATE TRIGGER blocked_span_site_delete AFTER DELETE ON blocked_span
BEGIN
    DELETE FROM blocked_site WHERE rank = OLD.rank AND first_slice = OLD.first_slice;
END;

CREATE VIEW blocked_where AS
    SELECT b.rank, b.first_slice, b.last_slice, b.call,
           c.file, c.line, c.function, c.object, c.offset
    FROM blocked_span b
    LEFT JOIN blocked_site s ON s.rank = b.rank AND s.first_slice = b.first_slice
    LEFT JOIN call_site c ON c.id = s.site;
"#;

/// The content checksum (issue 11; `checksum.rs`, `docs/reliability.md`): one row with a
/// SHA-256 over the tables replay and `stats` act on, written when the recording is
/// finished (or cut by a full disk). Self-contained: it only adds a table; a file without
/// the row opens as unverified.
const V_CONTENT_CHECKSUM: &str = r#"
CREATE TABLE content_checksum (
    algorithm  TEXT NOT NULL,
    covers     TEXT NOT NULL,
    digest     TEXT NOT NULL
);
"#;

/// What `strobe explore -o` forced to get the saved recording (issue 17 item 3 of the
/// gaps): at most one row, written by explore after the run; other recordings have none.
/// `kind` is `wildcard` (a wildcard receive forced to another sender) or `test` (a
/// test-like call's outcome forced); `slice` is where the forced receive was matched in
/// this recording (`NULL` for a test forcing: the outcome log has no slices).
const V_EXPLORED: &str = r#"
CREATE TABLE explored (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    kind    TEXT NOT NULL,
    rank    INTEGER NOT NULL,
    slice   INTEGER,
    runs    INTEGER NOT NULL,
    detail  TEXT NOT NULL
);
"#;

/// Rank placement (issue 15, recording across hosts): `job.placement`, the node of each
/// rank as a JSON list (index: rank); NULL means block placement over `job.nodes` (every
/// recording made before, and every job that does not place ranks otherwise). Decisions
/// do not depend on it: it records the layout the job ran with, and a replay on the same
/// node count uses it.
const V_PLACEMENT: &str = r#"
ALTER TABLE job ADD COLUMN placement TEXT;
"#;

/// The transport between the job's nodes (issue 16): `shm` (nodes on one host), `tcp` or
/// `verbs` (nodes on several hosts; `verbs` also in the emulated-verbs isolated-nodes test
/// mode). NULL in files made before the column: read as `tcp` for a job placed across
/// hosts (`placement` set) and `shm` otherwise. A replay does not depend on it: it runs
/// over the current machine's choice and says so when the two differ.
const V_TRANSPORT: &str = r#"
ALTER TABLE job ADD COLUMN transport TEXT;
"#;

#[path = "migrations_compact.rs"]
mod compact_formats;
use compact_formats::{
    V_BLOCKED_EPISODES, V_COMPACT_SCHEDULE, V_DERIVED_ROWS, V_OPEN_SPANS, V_PACKED_SCHEDULE,
    V_SCHEDULE_BATCHES, V_TABLES_CHECKSUM, V_WRITER_SUMMARIES,
};

/// The ordered migration scripts; the schema version is their count.
pub const MIGRATIONS: &[&str] = &[
    V1,
    RECORDER_V2,
    V_SUMMARIES,
    V_REPLAY_LOG,
    V_SCHEDULER_VERSION,
    V_BLOCKED_SPANS,
    V_PAYLOADS,
    V_CHECKS,
    V_CALL_SITES,
    V_CONTENT_CHECKSUM,
    V_EXPLORED,
    V_PLACEMENT,
    V_TRANSPORT,
    V_COMPACT_SCHEDULE,
    V_PACKED_SCHEDULE,
    V_OPEN_SPANS,
    V_DERIVED_ROWS,
    V_WRITER_SUMMARIES,
    V_BLOCKED_EPISODES,
    V_SCHEDULE_BATCHES,
    V_TABLES_CHECKSUM,
];

/// The first format whose content checksum is `sha256-tables-v2` (`checksum::ALGORITHM`):
/// the position of [`V_TABLES_CHECKSUM`].
pub const TABLES_CHECKSUM_VERSION: i64 = version_of(V_TABLES_CHECKSUM);

/// The first format whose schedule log is written in batches (`schedule_batch`): the
/// position of [`V_SCHEDULE_BATCHES`].
pub const SCHEDULE_BATCHES_VERSION: i64 = version_of(V_SCHEDULE_BATCHES);

/// The first format whose blocked spans may be open (`blocked_span.last_slice` NULL): the
/// position of [`V_OPEN_SPANS`].
pub const OPEN_SPANS_VERSION: i64 = version_of(V_OPEN_SPANS);

/// The first format whose schedule-log blobs may be packed: the position of
/// [`V_PACKED_SCHEDULE`].
pub const PACKED_SCHEDULE_VERSION: i64 = version_of(V_PACKED_SCHEDULE);

/// The first format without `message` rows and with `node_slice` as a view over
/// `node_metrics`: the position of [`V_DERIVED_ROWS`].
pub const DERIVED_ROWS_VERSION: i64 = version_of(V_DERIVED_ROWS);

/// The first format whose chart summaries are kept by the writer, not by triggers
/// (`summaries.rs`): the position of [`V_WRITER_SUMMARIES`].
pub const WRITER_SUMMARIES_VERSION: i64 = version_of(V_WRITER_SUMMARIES);

/// The first format with `job.transport`: the position of [`V_TRANSPORT`].
pub const TRANSPORT_VERSION: i64 = version_of(V_TRANSPORT);

/// The first format whose schedule log is compact (`slice_schedule`, `message`): the
/// position of [`V_COMPACT_SCHEDULE`].
pub const COMPACT_SCHEDULE_VERSION: i64 = version_of(V_COMPACT_SCHEDULE);

/// The first format with `job.placement`: the position of [`V_PLACEMENT`].
pub const PLACEMENT_VERSION: i64 = version_of(V_PLACEMENT);

/// The first format with the `explored` table: the position of [`V_EXPLORED`].
pub const EXPLORED_VERSION: i64 = version_of(V_EXPLORED);

/// The first format with call sites (`call_site`, `blocked_site`): the position of
/// [`V_CALL_SITES`] in [`MIGRATIONS`], never a number written by hand.
pub const CALL_SITES_VERSION: i64 = version_of(V_CALL_SITES);

/// The schema version this build writes and reads.
pub const CURRENT_VERSION: i64 = MIGRATIONS.len() as i64;

/// The version a migration script brings a file to (its position in [`MIGRATIONS`], from
/// 1), so no version number is written down twice.
const fn version_of(script: &str) -> i64 {
    let mut i = 0;
    while i < MIGRATIONS.len() {
        let (a, b) = (MIGRATIONS[i].as_bytes(), script.as_bytes());
        if a.len() == b.len() {
            let mut j = 0;
            while j < a.len() && a[j] == b[j] {
                j += 1;
            }
            if j == a.len() {
                return i as i64 + 1;
            }
        }
        i += 1;
    }
    panic!("not a migration script")
}

/// The first format with payload capture (`payload`, `job.captured_ranks`).
pub const PAYLOADS_VERSION: i64 = version_of(V_PAYLOADS);

/// The first format with the `check_finding` table.
pub const CHECKS_VERSION: i64 = version_of(V_CHECKS);

/// The first format with the `content_checksum` table (its position in [`MIGRATIONS`]).
pub const CONTENT_CHECKSUM_VERSION: i64 = version_of(V_CONTENT_CHECKSUM);

/// The first format whose blocked sets are spans (`blocked_span`; `blocked` is a view).
pub const BLOCKED_SPANS_VERSION: i64 = 6;

/// For a read-only connection to an older file (which cannot be migrated): a temporary
/// `blocked_span` table folded from its `blocked` table, so every reader queries one
/// layout. Temporary objects live in the connection's own temp schema, never in the file;
/// a table (not a view) so span lookups are indexed. Old files are never live.
pub const OLD_BLOCKED_SPANS: &str = r#"
CREATE TEMP TABLE blocked_span AS
SELECT rank, min(slice) AS first_slice, max(slice) AS last_slice, call FROM (
    SELECT slice, rank, call,
           slice - row_number() OVER (PARTITION BY rank, call ORDER BY slice) AS island
    FROM main.blocked)
GROUP BY rank, call, island;
CREATE INDEX temp.blocked_span_rank ON blocked_span(rank, first_slice);
CREATE INDEX temp.blocked_span_last ON blocked_span(last_slice, first_slice, call);
CREATE INDEX temp.blocked_span_length ON blocked_span(last_slice - first_slice);
"#;

/// The file's schema version (`PRAGMA user_version`; 0 for a new, empty file).
pub fn version(conn: &Connection) -> Result<i64, RecordError> {
    Ok(conn.query_row("PRAGMA user_version", [], |r| r.get(0))?)
}

/// Bring the file up to [`CURRENT_VERSION`], one script per transaction, so a failure leaves
/// the file at a well-defined earlier version. Running it again is a no-op.
pub fn migrate(conn: &mut Connection) -> Result<i64, RecordError> {
    migrate_to(conn, CURRENT_VERSION)
}

/// Bring the file up to `target` (at most [`CURRENT_VERSION`]): [`migrate`], or an older
/// format for the tests that compare a format with the one before it. A new file at the
/// current format gets the schema in one script ([`crate::fresh_schema`]).
pub(crate) fn migrate_to(conn: &mut Connection, target: i64) -> Result<i64, RecordError> {
    if target >= CURRENT_VERSION && version(conn)? == 0 {
        return crate::fresh_schema::create(conn);
    }
    migrate_with_scripts(conn, target)
}

/// [`migrate_to`] by the scripts alone, whatever the file's version (what
/// `fresh_schema.sql` is generated from and checked against).
pub(crate) fn migrate_with_scripts(conn: &mut Connection, target: i64) -> Result<i64, RecordError> {
    let found = version(conn)?;
    if found > CURRENT_VERSION {
        return Err(RecordError::TooNew {
            found,
            supported: CURRENT_VERSION,
        });
    }
    if found < 0 {
        return Err(RecordError::NotARecording(format!(
            "negative schema version {found}"
        )));
    }
    let target = target.clamp(0, CURRENT_VERSION) as usize;
    let scripts = MIGRATIONS
        .iter()
        .enumerate()
        .take(target)
        .skip(found as usize);
    if found == 0 {
        // A new file: every script in one transaction (one commit instead of one per
        // format: `strobe record`'s start-up), all or nothing as each one is.
        let tx = conn.transaction()?;
        for (_, script) in scripts {
            tx.execute_batch(script)?;
        }
        tx.execute_batch(&format!("PRAGMA user_version = {target}"))?;
        tx.commit()?;
        return Ok(target as i64);
    }
    for (i, script) in scripts {
        let tx = conn.transaction()?;
        tx.execute_batch(script)?;
        // PRAGMA does not take bound parameters; the value is our own integer.
        tx.execute_batch(&format!("PRAGMA user_version = {}", i + 1))?;
        tx.commit()?;
    }
    Ok(version(conn)?.max(target as i64))
}
