//! The schedule log slice by slice, whichever layout holds it: one `slice_schedule` row per
//! slice (formats 14 to 19, and the older slices of a file migrated since) or one
//! `schedule_batch` row per writer transaction (format `SCHEDULE_BATCHES_VERSION` on,
//! `compact/batch.rs`). Every reader of the compact schedule log goes through here (the
//! `Recording` API and `strobe export`), so both layouts read the same.

use std::collections::VecDeque;

use rusqlite::{params, Connection, OptionalExtension};

use crate::compact::{self, BatchEntry};
use crate::RecordError;

/// One slice's schedule-log blobs (as stored: plain or packed; `None`: none).
pub type ScheduleRow = BatchEntry;

/// Rows fetched per query from `slice_schedule` (a scan stops at its first hit).
const ROW_PAGE: i64 = 256;

fn sql_u64(v: u64) -> i64 {
    v.min(i64::MAX as u64) as i64
}

fn damaged_batch(first: u64, e: String) -> RecordError {
    RecordError::Corrupt(format!("the schedule batch from slice {first}: {e}"))
}

/// A `schedule_batch` row read and decoded.
pub(crate) fn batch_row(row: &rusqlite::Row<'_>) -> Result<(u64, Vec<BatchEntry>), RecordError> {
    let first = row.get::<_, i64>(0)?;
    let last = row.get::<_, i64>(1)?;
    let entries = row.get::<_, i64>(2)?;
    let data = match row.get_ref(3)? {
        rusqlite::types::ValueRef::Blob(b) => b,
        _ => {
            return Err(damaged_batch(
                first.max(0) as u64,
                "data is not a blob".into(),
            ))
        }
    };
    let [first, last, entries] = [first, last, entries].map(|v| v.max(0) as u64);
    let rows =
        compact::decode_batch(first, last, entries, data).map_err(|e| damaged_batch(first, e))?;
    Ok((first, rows))
}

/// Which tables the file has.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layouts {
    pub rows: bool,
    pub batches: bool,
}

impl Layouts {
    pub fn of(conn: &Connection) -> rusqlite::Result<Layouts> {
        let table = |name: &str| -> rusqlite::Result<bool> {
            conn.query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [name],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n > 0)
        };
        Ok(Layouts {
            rows: table("slice_schedule")?,
            batches: table("schedule_batch")?,
        })
    }
}

/// The per-slice rows between `lo` and `hi`, a page at a time.
struct RowSource<'c> {
    conn: &'c Connection,
    /// The next slice to fetch from (moves past each page); `None`: exhausted.
    at: Option<i64>,
    bound: i64,
    descending: bool,
    buf: VecDeque<ScheduleRow>,
}

impl RowSource<'_> {
    fn peek(&mut self) -> Result<Option<u64>, RecordError> {
        if self.buf.is_empty() {
            self.fill()?;
        }
        Ok(self.buf.front().map(|r| r.slice))
    }

    fn fill(&mut self) -> Result<(), RecordError> {
        let Some(at) = self.at else { return Ok(()) };
        let sql = if self.descending {
            "SELECT slice, descriptors, decisions FROM slice_schedule
             WHERE slice <= ?1 AND slice >= ?2 ORDER BY slice DESC LIMIT ?3"
        } else {
            "SELECT slice, descriptors, decisions FROM slice_schedule
             WHERE slice >= ?1 AND slice <= ?2 ORDER BY slice LIMIT ?3"
        };
        let mut st = self.conn.prepare_cached(sql)?;
        let rows = st
            .query_map(params![at, self.bound, ROW_PAGE], |r| {
                Ok(ScheduleRow {
                    slice: r.get::<_, i64>(0)?.max(0) as u64,
                    descriptors: r.get(1)?,
                    decisions: r.get(2)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        self.at = match rows.last() {
            Some(r) if rows.len() as i64 == ROW_PAGE => {
                let s = r.slice as i64;
                Some(if self.descending { s - 1 } else { s + 1 })
            }
            _ => None,
        };
        self.buf.extend(rows);
        Ok(())
    }
}

/// The batches overlapping `lo..=hi`, one decoded at a time.
struct BatchSource<'c> {
    conn: &'c Connection,
    lo: u64,
    hi: u64,
    descending: bool,
    /// The `first_slice` of the last batch read; `None` before the first.
    last_first: Option<i64>,
    done: bool,
    buf: VecDeque<ScheduleRow>,
}

impl BatchSource<'_> {
    fn peek(&mut self) -> Result<Option<u64>, RecordError> {
        while self.buf.is_empty() && !self.done {
            self.fill()?;
        }
        Ok(self.buf.front().map(|r| r.slice))
    }

    fn fill(&mut self) -> Result<(), RecordError> {
        const COLS: &str = "SELECT first_slice, last_slice, entries, data FROM schedule_batch";
        let sql = match (self.last_first.is_some(), self.descending) {
            // First the batch holding the range's start (it may begin before it).
            (false, _) => {
                format!("{COLS} WHERE first_slice <= ?1 ORDER BY first_slice DESC LIMIT 1")
            }
            (true, false) => format!("{COLS} WHERE first_slice > ?1 ORDER BY first_slice LIMIT 1"),
            (true, true) => {
                format!("{COLS} WHERE first_slice < ?1 ORDER BY first_slice DESC LIMIT 1")
            }
        };
        let key = match (self.last_first, self.descending) {
            (Some(f), _) => f,
            (None, false) => sql_u64(self.lo),
            (None, true) => sql_u64(self.hi),
        };
        let mut st = self.conn.prepare_cached(&sql)?;
        let mut rows = st.query([key])?;
        let Some(row) = rows.next()? else {
            if self.last_first.is_none() && !self.descending {
                // No batch starts at or before `lo`: start from the first after it.
                self.last_first = Some(sql_u64(self.lo));
                return Ok(());
            }
            self.done = true;
            return Ok(());
        };
        let (first, entries) = batch_row(row)?;
        self.last_first = Some(first as i64);
        let past = if self.descending {
            entries.last().is_some_and(|e| e.slice < self.lo)
        } else {
            first > self.hi
        };
        if past {
            self.done = true;
            return Ok(());
        }
        let keep = entries
            .into_iter()
            .filter(|e| (self.lo..=self.hi).contains(&e.slice));
        if self.descending {
            self.buf.extend(keep.rev());
        } else {
            self.buf.extend(keep);
        }
        Ok(())
    }
}

/// Call `f` with each slice's schedule-log blobs for the slices `lo..=hi` that have any, in
/// slice order (descending when asked), until `f` returns `false`.
pub(crate) fn for_each(
    conn: &Connection,
    layouts: Layouts,
    lo: u64,
    hi: u64,
    descending: bool,
    mut f: impl FnMut(ScheduleRow) -> Result<bool, RecordError>,
) -> Result<(), RecordError> {
    if lo > hi {
        return Ok(());
    }
    let mut rows = RowSource {
        conn,
        at: layouts
            .rows
            .then_some(sql_u64(if descending { hi } else { lo })),
        bound: sql_u64(if descending { lo } else { hi }),
        descending,
        buf: VecDeque::new(),
    };
    let mut batches = BatchSource {
        conn,
        lo,
        hi,
        descending,
        last_first: None,
        done: !layouts.batches,
        buf: VecDeque::new(),
    };
    loop {
        let next = match (rows.peek()?, batches.peek()?) {
            (None, None) => return Ok(()),
            (Some(_), None) => rows.buf.pop_front(),
            (None, Some(_)) => batches.buf.pop_front(),
            (Some(a), Some(b)) => {
                if (a <= b) != descending || a == b {
                    rows.buf.pop_front()
                } else {
                    batches.buf.pop_front()
                }
            }
        };
        if let Some(row) = next {
            if !f(row)? {
                return Ok(());
            }
        }
    }
}

/// The batch holding `slice` (its first slice and entries), if any.
pub(crate) fn batch_of(
    conn: &Connection,
    slice: u64,
) -> Result<Option<(u64, u64, Vec<BatchEntry>)>, RecordError> {
    let mut st = conn.prepare_cached(
        "SELECT first_slice, last_slice, entries, data FROM schedule_batch
         WHERE first_slice <= ?1 ORDER BY first_slice DESC LIMIT 1",
    )?;
    let found = st
        .query_row([sql_u64(slice)], |r| {
            Ok(batch_row(r).map(|(first, entries)| {
                let last = r.get::<_, i64>(1).map_or(0, |v| v.max(0) as u64);
                (first, last, entries)
            }))
        })
        .optional()?
        .transpose()?;
    Ok(found.filter(|(_, last, _)| *last >= slice))
}

/// A `WHERE` condition (on the column `col` naming a slice) true for slices a batch
/// covers: with an index on `first_slice`, one lookup per row.
pub(crate) fn in_a_batch(col: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM (SELECT last_slice FROM schedule_batch WHERE first_slice <= {col}
                 ORDER BY first_slice DESC LIMIT 1) WHERE last_slice >= {col})"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compact::BatchBuilder;

    /// A migrated file: per-slice rows for slices 1, 2 and 5, then two batches (7, 9) and
    /// (12, 13, 15).
    fn both_layouts() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE slice_schedule (slice INTEGER PRIMARY KEY, descriptors BLOB,
                                          decisions BLOB);
             CREATE TABLE schedule_batch (first_slice INTEGER PRIMARY KEY,
                 last_slice INTEGER NOT NULL, entries INTEGER NOT NULL, data BLOB NOT NULL);
             INSERT INTO slice_schedule VALUES (1, x'0101', NULL), (2, NULL, x'0102'),
                                               (5, x'0105', x'0105');",
        )
        .unwrap();
        for slices in [&[7u64, 9][..], &[12, 13, 15]] {
            let mut b = BatchBuilder::default();
            for &s in slices {
                b.push(s, Some(&[1, s as u8]), (s % 2 == 1).then_some(&[1, 0][..]));
            }
            let r = b.finish().unwrap();
            c.execute(
                "INSERT INTO schedule_batch VALUES (?1, ?2, ?3, ?4)",
                params![
                    r.first_slice as i64,
                    r.last_slice as i64,
                    r.entries as i64,
                    r.data
                ],
            )
            .unwrap();
        }
        c
    }

    fn slices(c: &Connection, lo: u64, hi: u64, descending: bool, stop: usize) -> Vec<u64> {
        let layouts = Layouts::of(c).unwrap();
        let mut out = Vec::new();
        for_each(c, layouts, lo, hi, descending, |row| {
            out.push(row.slice);
            Ok(out.len() < stop)
        })
        .unwrap();
        out
    }

    #[test]
    fn both_layouts_read_in_slice_order() {
        let c = both_layouts();
        let all = [1, 2, 5, 7, 9, 12, 13, 15];
        assert_eq!(slices(&c, 0, u64::MAX, false, 99), all);
        let mut rev = all.to_vec();
        rev.reverse();
        assert_eq!(slices(&c, 0, u64::MAX, true, 99), rev);
        // Ranges starting and ending inside batches and between them.
        assert_eq!(slices(&c, 8, 13, false, 99), [9, 12, 13]);
        assert_eq!(slices(&c, 8, 13, true, 99), [13, 12, 9]);
        assert_eq!(slices(&c, 3, 6, false, 99), [5]);
        assert_eq!(slices(&c, 10, 11, true, 99), Vec::<u64>::new());
        assert_eq!(slices(&c, 16, 99, false, 99), Vec::<u64>::new());
        assert_eq!(slices(&c, 9, 3, false, 99), Vec::<u64>::new());
        // The callback stops the walk.
        assert_eq!(slices(&c, 0, u64::MAX, false, 4), [1, 2, 5, 7]);
        assert_eq!(slices(&c, 14, 0, true, 99), Vec::<u64>::new());
        assert_eq!(slices(&c, 0, 14, true, 2), [13, 12]);
    }

    #[test]
    fn a_slice_is_found_in_its_batch_and_sql_knows_which_slices_batches_cover() {
        let c = both_layouts();
        let (first, last, entries) = batch_of(&c, 13).unwrap().unwrap();
        assert_eq!((first, last, entries.len()), (12, 15, 3));
        assert_eq!(entries[1].descriptors.as_deref(), Some(&[1, 13][..]));
        assert_eq!(entries[1].decisions, Some(vec![1, 0]));
        assert!(batch_of(&c, 10).unwrap().is_none(), "between batches");
        assert!(batch_of(&c, 3).unwrap().is_none(), "before every batch");
        let covered: Vec<i64> = (1..=16)
            .filter(|s| {
                c.query_row(&format!("SELECT {}", in_a_batch(&s.to_string())), [], |r| {
                    r.get::<_, bool>(0)
                })
                .unwrap()
            })
            .collect();
        assert_eq!(covered, [7, 8, 9, 12, 13, 14, 15]);
    }
}
