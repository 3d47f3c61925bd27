//! The content checksum (issue 11; `docs/reliability.md`, "The content checksum"): a
//! SHA-256 over every row of the tables replay and `stats` act on, written by the recorder
//! when the recording is finished and verified by every reader before it acts on the file.
//! Validation (`recording/validate.rs`) refuses values strobe could never have written;
//! the checksum refuses the rest of the damage: a flipped bit inside a value that is
//! itself what replay verifies (a digest, an `MPI_Wtime` value in the replay log), a
//! changed `job.message`, a deleted last chunk of a rank's outcome stream, a lowered
//! `job.deadlock_slices`. Those used to replay as a divergence.
//!
//! Decisions:
//!
//! * **One checksum, written at the end** (in the transaction that writes the outcome, or
//!   by `mark_cut` when a full disk cuts the recording), not one per committed batch: the
//!   slice path never pays for it, and a recording cut by a crash (SIGKILL, power) is the
//!   one case without it. Such a file, like a recording older than the checksum or one
//!   made by hand, opens as **unverified** ([`ChecksumState::Absent`]): validation still
//!   applies, and replay says it could not verify the content.
//! * **What it covers**: the tables in [`COVERED`], every column (`SELECT *`, so a column
//!   a later migration adds to one of them is covered without a change here), rows in key
//!   order. The row names the tables it covers, so a newer strobe that covers more still
//!   verifies an older file. To cover a new table, add it to [`COVERED`]; a table written
//!   after the recording is finished (`regenerated`) must not be in it.
//! * **Damage, not forgery**: anyone who can edit the file can recompute or delete the
//!   checksum. It is not what keeps a recording from running a command (replay checks the
//!   program's hash, the environment and the working directory whatever the checksum).

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::RecordError;

/// A table the checksum covers: every column, rows in the order of `order` (its key).
#[derive(Clone, Copy, Debug)]
pub struct Covered {
    pub table: &'static str,
    pub order: &'static str,
}

/// The tables the recorder's checksum covers: the job row (everything replay and `stats`
/// act on), the ranks' exit statuses, the slice rows with their digests, the replay log
/// and the per-process statistics `stats` prints. Not the schedule log (`descriptor`,
/// `decision`, `slice_decisions`, `blocked_span`: shown, not acted on, and the largest
/// tables of a file) nor the metrics of `node_slice`.
pub const COVERED: &[Covered] = &[
    Covered {
        table: "job",
        order: "rowid",
    },
    Covered {
        table: "rank",
        order: "rank",
    },
    Covered {
        table: "slice",
        order: "slice",
    },
    Covered {
        table: "replay_log",
        order: "stream, rank, chunk",
    },
    Covered {
        table: "mmds_rank",
        order: "rank",
    },
    Covered {
        table: "mmds_primitive",
        order: "rank, primitive",
    },
    Covered {
        table: "mmds_histogram",
        order: "rank, primitive, metric, lo",
    },
    // What `strobe replay --rank` feeds a rank with: a tampered payload must be damage,
    // never a divergence of the program.
    Covered {
        table: "payload",
        order: "rank, seq",
    },
    Covered {
        table: "check_finding",
        order: "id",
    },
    Covered {
        table: "call_site",
        order: "id",
    },
    Covered {
        table: "blocked_site",
        order: "rank, first_slice",
    },
];

/// The checksum's algorithm and encoding (see [`compute`]): a new encoding gets a new name.
pub const ALGORITHM: &str = "sha256-rows-v1";

/// The table holding the checksum (migration `V_CONTENT_CHECKSUM`).
pub const TABLE: &str = "content_checksum";

/// What a reader knows about a recording's content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "why")]
pub enum ChecksumState {
    /// The checksum matches the content.
    Verified,
    /// The file has no checksum: older than the checksum, cut by a crash, still being
    /// written, or made without the recorder. Validation applied; the content is unverified.
    Absent(String),
    /// Not checked on this open (the terminal UI on a file above its full-check size).
    NotChecked,
}

impl ChecksumState {
    /// For `stats` and replay: `verified`, or `unverified (why)`.
    pub fn describe(&self) -> String {
        match self {
            ChecksumState::Verified => "verified".into(),
            ChecksumState::Absent(why) => format!("unverified ({why})"),
            ChecksumState::NotChecked => "not checked".into(),
        }
    }
}

fn table_exists(conn: &Connection, name: &str) -> Result<bool, RecordError> {
    Ok(conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [name],
        |r| r.get::<_, i64>(0),
    )? > 0)
}

/// SHA-256 (lowercase hex) over the tables `covers`, each as its name, its column names
/// and every row in key order, each value tagged with its SQLite type (so `1`, `1.0`,
/// `'1'` and `x'31'` differ) and length-prefixed where it has a length.
pub fn compute(conn: &Connection, covers: &[Covered]) -> Result<String, RecordError> {
    let mut h = Sha256::new();
    h.update(ALGORITHM.as_bytes());
    for c in covers {
        h.update(b"T");
        put_bytes(&mut h, c.table.as_bytes());
        // The names come from COVERED, never from the file.
        let mut st = conn.prepare(&format!(
            "SELECT * FROM \"{}\" ORDER BY {}",
            c.table, c.order
        ))?;
        let n = st.column_count();
        for name in st.column_names() {
            put_bytes(&mut h, name.as_bytes());
        }
        let mut rows = st.query([])?;
        while let Some(row) = rows.next()? {
            h.update(b"R");
            for i in 0..n {
                put_value(&mut h, row.get_ref(i)?);
            }
        }
        h.update(b"E");
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

fn put_bytes(h: &mut Sha256, b: &[u8]) {
    h.update((b.len() as u64).to_le_bytes());
    h.update(b);
}

fn put_value(h: &mut Sha256, v: ValueRef<'_>) {
    match v {
        ValueRef::Null => h.update([0u8]),
        ValueRef::Integer(i) => {
            h.update([1u8]);
            h.update(i.to_le_bytes());
        }
        ValueRef::Real(f) => {
            h.update([2u8]);
            h.update(f.to_bits().to_le_bytes());
        }
        ValueRef::Text(t) => {
            h.update([3u8]);
            put_bytes(h, t);
        }
        ValueRef::Blob(b) => {
            h.update([4u8]);
            put_bytes(h, b);
        }
    }
}

/// Write the checksum of [`COVERED`] (replacing any), inside the caller's transaction:
/// `Recorder::finish` calls it after the outcome and the ranks, `mark_cut` after the cut.
pub fn seal(conn: &Connection) -> Result<(), RecordError> {
    let digest = compute(conn, COVERED)?;
    let covers: Vec<&str> = COVERED.iter().map(|c| c.table).collect();
    conn.execute(&format!("DELETE FROM {TABLE}"), [])?;
    conn.execute(
        &format!("INSERT INTO {TABLE} (algorithm, covers, digest) VALUES (?1, ?2, ?3)"),
        rusqlite::params![ALGORITHM, covers.join(","), digest],
    )?;
    Ok(())
}

/// Check the recording's checksum: [`ChecksumState::Verified`], [`ChecksumState::Absent`]
/// (no checksum: see the module documentation), or damage ("content checksum ...").
pub fn verify(conn: &Connection) -> Result<ChecksumState, RecordError> {
    if !table_exists(conn, TABLE)? {
        return Ok(ChecksumState::Absent(
            "recorded before strobe kept a content checksum".into(),
        ));
    }
    let damaged = |what: String| RecordError::Corrupt(format!("content checksum {what}"));
    let mut st = conn.prepare(&format!("SELECT algorithm, covers, digest FROM {TABLE}"))?;
    let rows: Vec<(String, String, String)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    let (algorithm, covers, digest) = match rows.as_slice() {
        [] => {
            return Ok(ChecksumState::Absent(
                "no content checksum: the recording was cut short or is still being written".into(),
            ))
        }
        [one] => one,
        _ => return Err(damaged(format!("table has {} rows", rows.len()))),
    };
    if algorithm != ALGORITHM {
        return Err(damaged(format!(
            "algorithm {algorithm:?} is not one strobe writes"
        )));
    }
    let mut tables = Vec::new();
    for name in covers.split(',') {
        match COVERED.iter().find(|c| c.table == name) {
            Some(c) if !tables.iter().any(|t: &Covered| t.table == name) => tables.push(*c),
            _ => return Err(damaged(format!("covers an unknown table {name:?}"))),
        }
    }
    let found = compute(conn, &tables)?;
    if &found != digest {
        return Err(damaged(format!(
            "does not match: the content of {} was changed after strobe wrote it",
            covers.replace(',', ", ")
        )));
    }
    Ok(ChecksumState::Verified)
}

/// The checksum row as stored, for tests and `sqlite3` users: `(algorithm, covers, digest)`.
pub fn stored(conn: &Connection) -> Result<Option<(String, String, String)>, RecordError> {
    if !table_exists(conn, TABLE)? {
        return Ok(None);
    }
    Ok(conn
        .query_row(
            &format!("SELECT algorithm, covers, digest FROM {TABLE}"),
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?)
}
