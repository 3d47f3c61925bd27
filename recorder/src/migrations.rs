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

/// The ordered migration scripts; the schema version is their count.
pub const MIGRATIONS: &[&str] = &[V1, V_REPLAY_LOG];

/// The schema version this build writes and reads.
pub const CURRENT_VERSION: i64 = MIGRATIONS.len() as i64;

/// The file's schema version (`PRAGMA user_version`; 0 for a new, empty file).
pub fn version(conn: &Connection) -> Result<i64, RecordError> {
    Ok(conn.query_row("PRAGMA user_version", [], |r| r.get(0))?)
}

/// Bring the file up to [`CURRENT_VERSION`], one script per transaction, so a failure leaves
/// the file at a well-defined earlier version. Running it again is a no-op.
pub fn migrate(conn: &mut Connection) -> Result<i64, RecordError> {
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
    for (i, script) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let tx = conn.transaction()?;
        tx.execute_batch(script)?;
        // PRAGMA does not take bound parameters; the value is our own integer.
        tx.execute_batch(&format!("PRAGMA user_version = {}", i + 1))?;
        tx.commit()?;
    }
    Ok(CURRENT_VERSION)
}
