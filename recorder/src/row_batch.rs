//! The writer's per-slice rows (`slice`, `node_metrics`), inserted [`ROWS`] to a statement.
//!
//! A message-heavy job records a `slice` row (and, with metrics, a `node_metrics` row) for
//! every slice: 111,000 of each in a one-second `comet_exchange`, where the writer's CPU is
//! taken from the job's two cores. One `INSERT` per row through the statement cache cost
//! 0.65-0.68 us a row; the same rows 16 to an `INSERT ... VALUES (...), (...)` 0.47 us
//! (`cargo run --release -p strobe-recorder --example rowbench`: 17 columns, WAL, 1,000
//! rows a transaction): SQLite's cost per statement (the cache lookup, the step, the
//! reset, the VDBE's set-up and the B-tree's seek to the end) is shared by 16 rows. Rows
//! wait here only within the writer's open transaction: [`RowBatch::flush`] runs before
//! every commit, so what a commit holds, and what a crash keeps, is unchanged.

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::Connection;

/// Rows per multi-row statement.
pub(crate) const ROWS: usize = 16;

/// Rows of one table with `C` columns, waiting for their statement.
pub(crate) struct RowBatch<const C: usize> {
    rows: Vec<[ValueRef<'static>; C]>,
    /// `INSERT INTO t (columns) VALUES (?, ...)`: one row (the remainder at a flush).
    one: String,
    /// The same with [`ROWS`] rows.
    many: String,
}

impl<const C: usize> RowBatch<C> {
    pub fn new(table: &str, columns: &[&str; C]) -> RowBatch<C> {
        let row = format!("({})", vec!["?"; C].join(", "));
        let head = format!("INSERT INTO {table} ({}) VALUES ", columns.join(", "));
        RowBatch {
            rows: Vec::with_capacity(ROWS),
            one: format!("{head}{row}"),
            many: format!("{head}{}", vec![row; ROWS].join(", ")),
        }
    }

    /// Queue one row; a full batch is inserted at once.
    pub fn push(&mut self, conn: &Connection, row: [ValueRef<'static>; C]) -> rusqlite::Result<()> {
        self.rows.push(row);
        if self.rows.len() < ROWS {
            return Ok(());
        }
        let mut st = conn.prepare_cached(&self.many)?;
        for (i, v) in self.rows.iter().flatten().enumerate() {
            st.raw_bind_parameter(i + 1, ToSqlOutput::Borrowed(*v))?;
        }
        self.rows.clear();
        st.raw_execute()?;
        Ok(())
    }

    /// Insert the rows still waiting (before a commit).
    pub fn flush(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let mut st = conn.prepare_cached(&self.one)?;
        for row in self.rows.drain(..) {
            for (i, v) in row.iter().enumerate() {
                st.raw_bind_parameter(i + 1, ToSqlOutput::Borrowed(*v))?;
            }
            st.raw_execute()?;
        }
        Ok(())
    }

    /// Forget the waiting rows (their transaction is rolled back).
    pub fn discard(&mut self) {
        self.rows.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows come out as they went in, whether inserted 16 at a time or at the flush, and
    /// nothing is inserted twice or left behind.
    #[test]
    fn every_row_once_in_order() {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch("CREATE TABLE t (a INTEGER PRIMARY KEY, b TEXT, c INTEGER)")
            .unwrap();
        let mut b = RowBatch::new("t", &["a", "b", "c"]);
        for n in 1..=(2 * ROWS as i64 + 5) {
            let odd = (n % 2 == 1).then_some(n * 10);
            let c_val = odd.map_or(ValueRef::Null, ValueRef::Integer);
            b.push(&c, [ValueRef::Integer(n), ValueRef::Text(b"x"), c_val])
                .unwrap();
            let stored: i64 = c
                .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
                .unwrap();
            assert_eq!(stored, n - n % ROWS as i64, "after row {n}");
        }
        b.flush(&c).unwrap();
        let rows: Vec<(i64, String, Option<i64>)> = c
            .prepare("SELECT a, b, c FROM t ORDER BY a")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rows.len(), 2 * ROWS + 5);
        for (i, (a, s, c)) in rows.into_iter().enumerate() {
            let n = i as i64 + 1;
            assert_eq!((a, s.as_str(), c), (n, "x", (n % 2 == 1).then_some(n * 10)));
        }
        b.flush(&c).unwrap();
        b.push(
            &c,
            [ValueRef::Integer(1000), ValueRef::Null, ValueRef::Null],
        )
        .unwrap();
        b.discard();
        b.flush(&c).unwrap();
        let n: i64 = c
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 2 * ROWS as i64 + 5, "a discarded row is never inserted");
    }
}
