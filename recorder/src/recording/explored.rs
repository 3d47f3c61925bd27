//! What `strobe explore -o FOUND.db` forced to get the saved recording (the `explored`
//! table, docs/recording.md): written once by explore after the failing run, read by
//! `strobe stats` and the TUI.

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use super::Recording;
use crate::RecordError;

/// The alternative explore forced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Explored {
    /// `wildcard` (a wildcard receive forced to another sender) or `test` (a test-like
    /// call's outcome forced).
    pub kind: String,
    /// The rank whose call was forced.
    pub rank: u32,
    /// The slice of this recording where the forced receive was matched (`None` for a
    /// test forcing).
    pub slice: Option<u64>,
    /// The runs explore needed, this one included.
    pub runs: u64,
    /// One line: `rank 0's wildcard receive 0#0 (slice 4) takes rank 2's message instead
    /// of rank 1's`.
    pub detail: String,
}

impl std::fmt::Display for Explored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (found by strobe explore in {} run(s))",
            self.detail, self.runs
        )
    }
}

/// Store what explore forced in the recording at `path` (a finished recording of this
/// build's format).
pub fn store_explored(path: &Path, e: &Explored) -> Result<(), RecordError> {
    let conn = Connection::open(path)?;
    conn.execute(
        "INSERT OR REPLACE INTO explored (id, kind, rank, slice, runs, detail)
         VALUES (1, ?1, ?2, ?3, ?4, ?5)",
        params![
            e.kind,
            e.rank,
            e.slice.map(|s| s as i64),
            e.runs as i64,
            e.detail
        ],
    )?;
    Ok(())
}

impl Recording {
    /// What explore forced to get this recording; `None` for any other recording (and
    /// files older than the table).
    pub fn explored(&self) -> Result<Option<Explored>, RecordError> {
        if self.format < crate::migrations::EXPLORED_VERSION {
            return Ok(None);
        }
        let row = self
            .conn
            .query_row(
                "SELECT kind, rank, slice, runs, detail FROM explored WHERE id = 1",
                [],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, Option<i64>>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, String>(4)?,
                    ))
                },
            )
            .optional()?;
        let Some((kind, rank, slice, runs, detail)) = row else {
            return Ok(None);
        };
        // Checked again here (the file may have changed since it was opened).
        let damaged = |what: &str| RecordError::Corrupt(format!("explored: {what}"));
        if kind != "wildcard" && kind != "test" {
            return Err(damaged("unknown kind"));
        }
        let rank = u32::try_from(rank)
            .ok()
            .filter(|&r| r < self.job.ranks)
            .ok_or_else(|| damaged("rank out of range"))?;
        let slice = match slice {
            None => None,
            Some(s) if s >= 1 && s as u64 <= self.last_slice => Some(s as u64),
            Some(_) => return Err(damaged("slice out of range")),
        };
        let runs = u64::try_from(runs)
            .ok()
            .filter(|&n| n >= 1)
            .ok_or_else(|| damaged("runs out of range"))?;
        if detail.len() > 4096 {
            return Err(damaged("detail too long"));
        }
        Ok(Some(Explored {
            kind,
            rank,
            slice,
            runs,
            detail,
        }))
    }
}
