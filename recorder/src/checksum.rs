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
/// `sha256-tables-v2` (format 21): a SHA-256 of each table's rows, then one over the
/// tables' names and digests, so the writer can hash the `slice` table's rows as it
/// inserts them ([`TableRows`]) instead of `finish` reading them all back (50 ms of a
/// message-heavy 1 s job's end).
pub const ALGORITHM: &str = "sha256-tables-v2";
/// Formats 10 to 20: one SHA-256 over every table's rows in turn. Still verified.
pub const ALGORITHM_V1: &str = "sha256-rows-v1";

/// The table holding the checksum (migration `V_CONTENT_CHECKSUM`).
pub const TABLE: &str = "content_checksum";

/// One table's rows as the checksum hashes them: its column names, then each row's values,
/// each tagged with its SQLite type (so `1`, `1.0`, `'1'` and `x'31'` differ) and
/// length-prefixed where it has a length. Fed by reading the table back ([`compute`]) or,
/// for the `slice` table, by the writer with the values it binds ([`TableRows`]): the same
/// bytes either way.
struct RowHasher<'h> {
    h: &'h mut Sha256,
    buf: Vec<u8>,
}

impl<'h> RowHasher<'h> {
    fn new<'c>(h: &'h mut Sha256, columns: impl IntoIterator<Item = &'c str>) -> Self {
        let mut buf = Vec::with_capacity(256);
        for name in columns {
            put_bytes(&mut buf, name.as_bytes());
        }
        h.update(&buf);
        RowHasher { h, buf }
    }

    /// A row's bytes go to the hash in one update (value by value, the per-call cost of
    /// `update` was a fifth of the checksum's time).
    fn row<'v>(&mut self, values: impl IntoIterator<Item = ValueRef<'v>>) {
        hash_row(self.h, &mut self.buf, values);
    }
}

/// A table's rows hashed as they are inserted, in key order (the writer's `slice` rows).
/// Given to [`seal_with`], it stands for reading the table back if the table still has
/// exactly these columns and this many rows; otherwise (a key out of order, another
/// column) the table is read as before.
pub struct TableRows {
    table: &'static str,
    columns: &'static [&'static str],
    h: Sha256,
    rows: u64,
    last_key: Option<i64>,
    in_order: bool,
    buf: Vec<u8>,
}

impl TableRows {
    pub fn new(table: &'static str, columns: &'static [&'static str]) -> Self {
        let mut h = Sha256::new();
        RowHasher::new(&mut h, columns.iter().copied());
        TableRows {
            table,
            columns,
            h,
            rows: 0,
            last_key: None,
            in_order: true,
            buf: Vec::with_capacity(256),
        }
    }

    /// A row just inserted, with its key (`order` of its [`Covered`] entry).
    pub fn row<'v>(&mut self, key: i64, values: impl IntoIterator<Item = ValueRef<'v>>) {
        self.in_order &= self.last_key.is_none_or(|last| key > last);
        self.last_key = Some(key);
        self.rows += 1;
        hash_row(&mut self.h, &mut self.buf, values);
    }
}

/// SHA-256 (lowercase hex) over the tables `covers` by [`ALGORITHM`], reading every table.
pub fn compute(conn: &Connection, covers: &[Covered]) -> Result<String, RecordError> {
    compute_as(conn, covers, ALGORITHM, None)
}

/// The checksum by `algorithm` ([`ALGORITHM`] or [`ALGORITHM_V1`]); `known` stands for
/// reading its table if it still holds ([`TableRows`]; v2 only).
pub(crate) fn compute_as(
    conn: &Connection,
    covers: &[Covered],
    algorithm: &str,
    mut known: Option<TableRows>,
) -> Result<String, RecordError> {
    let mut h = Sha256::new();
    h.update(algorithm.as_bytes());
    for c in covers {
        let mut name = vec![b'T'];
        put_bytes(&mut name, c.table.as_bytes());
        h.update(&name);
        if algorithm == ALGORITHM_V1 {
            hash_table(conn, c, &mut h)?;
            h.update(b"E");
            continue;
        }
        let usable = match known.take_if(|k| k.table == c.table) {
            Some(k) => still_true(conn, c, &k)?.then_some(k),
            None => None,
        };
        let mut t = match usable {
            Some(k) => k.h,
            None => {
                let mut t = Sha256::new();
                hash_table(conn, c, &mut t)?;
                t
            }
        };
        t.update(b"E");
        h.update(t.finalize());
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

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

/// A table's column names and rows, in key order, into `h` (without the closing `E`).
fn hash_table(conn: &Connection, c: &Covered, h: &mut Sha256) -> Result<(), RecordError> {
    // The names come from COVERED, never from the file.
    let mut st = conn.prepare(&format!(
        "SELECT * FROM \"{}\" ORDER BY {}",
        c.table, c.order
    ))?;
    let n = st.column_count();
    let names: Vec<String> = st.column_names().iter().map(|s| s.to_string()).collect();
    let mut hasher = RowHasher::new(h, names.iter().map(String::as_str));
    let mut rows = st.query([])?;
    while let Some(row) = rows.next()? {
        let values = (0..n)
            .map(|i| row.get_ref(i))
            .collect::<Result<Vec<_>, _>>()?;
        hasher.row(values);
    }
    Ok(())
}

/// Whether the rows hashed as they were inserted are still the table's: the same columns
/// (`SELECT *`'s) and as many rows.
fn still_true(conn: &Connection, c: &Covered, k: &TableRows) -> Result<bool, RecordError> {
    if !k.in_order {
        return Ok(false);
    }
    let st = conn.prepare(&format!("SELECT * FROM \"{}\" LIMIT 0", c.table))?;
    if st.column_names() != k.columns {
        return Ok(false);
    }
    let rows: i64 = conn.query_row(&format!("SELECT count(*) FROM \"{}\"", c.table), [], |r| {
        r.get(0)
    })?;
    Ok(rows as u64 == k.rows)
}

/// One row: `R`, then its values, in one `update`.
fn hash_row<'v>(h: &mut Sha256, buf: &mut Vec<u8>, values: impl IntoIterator<Item = ValueRef<'v>>) {
    buf.clear();
    buf.push(b'R');
    for v in values {
        put_value(buf, v);
    }
    h.update(&buf);
}

fn put_bytes(h: &mut Vec<u8>, b: &[u8]) {
    h.extend_from_slice(&(b.len() as u64).to_le_bytes());
    h.extend_from_slice(b);
}

fn put_value(h: &mut Vec<u8>, v: ValueRef<'_>) {
    match v {
        ValueRef::Null => h.push(0),
        ValueRef::Integer(i) => {
            h.push(1);
            h.extend_from_slice(&i.to_le_bytes());
        }
        ValueRef::Real(f) => {
            h.push(2);
            h.extend_from_slice(&f.to_bits().to_le_bytes());
        }
        ValueRef::Text(t) => {
            h.push(3);
            put_bytes(h, t);
        }
        ValueRef::Blob(b) => {
            h.push(4);
            put_bytes(h, b);
        }
    }
}

/// Write the checksum of [`COVERED`] (replacing any), inside the caller's transaction:
/// `Recorder::finish` calls it after the outcome and the ranks, `mark_cut` after the cut.
pub fn seal(conn: &Connection) -> Result<(), RecordError> {
    seal_with(conn, None)
}

/// [`seal`], with the rows of one table hashed as they were inserted (the writer's
/// `slice` rows): that table is not read back if they are still its rows. A file of a
/// format before [`crate::migrations::TABLES_CHECKSUM_VERSION`] (a user resealing an
/// older recording) gets that format's `sha256-rows-v1`, which the strobe of its time reads.
pub fn seal_with(conn: &Connection, known: Option<TableRows>) -> Result<(), RecordError> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let algorithm = if version >= crate::migrations::TABLES_CHECKSUM_VERSION {
        ALGORITHM
    } else {
        ALGORITHM_V1
    };
    seal_as(conn, algorithm, known)
}

pub(crate) fn seal_as(
    conn: &Connection,
    algorithm: &'static str,
    known: Option<TableRows>,
) -> Result<(), RecordError> {
    let digest = compute_as(conn, COVERED, algorithm, known)?;
    let covers: Vec<&str> = COVERED.iter().map(|c| c.table).collect();
    conn.execute(&format!("DELETE FROM {TABLE}"), [])?;
    conn.execute(
        &format!("INSERT INTO {TABLE} (algorithm, covers, digest) VALUES (?1, ?2, ?3)"),
        rusqlite::params![algorithm, covers.join(","), digest],
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
    if algorithm != ALGORITHM && algorithm != ALGORITHM_V1 {
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
    let found = compute_as(conn, &tables, algorithm, None)?;
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
