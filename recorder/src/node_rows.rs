//! The writer's `node_metrics` rows (format `DERIVED_ROWS_VERSION`): a node's LETTS,
//! LTDEM, LTMSM, LTTS and BPTS are stored as NULL when they equal the slice's GETTS,
//! GTDEM, GTMSM, GTTS and blocked count (always so on one node, where the global values
//! are node 0's), and the `node_slice` view fills them from `slice`.
//!
//! A node's metrics reach the writer before the slice's row (the node reports when its
//! slice ends; node 0 then sends the slice), so rows wait here for their slice, across
//! commits (so what is stored never depends on when a commit fell; a crash loses a
//! waiting row with its slice, which was not committed either). Rows that cannot wait
//! (more than [`RECENT`] of them) or whose slice never came are written whole: still
//! exact, only larger.

use std::collections::VecDeque;
use std::time::Duration;

use rusqlite::types::ValueRef;
use rusqlite::Connection;
use strobe_runtime::engine::{GlobalMetrics, LocalMetrics};

use crate::row_batch::RowBatch;

/// `node_metrics`' columns in table order.
const NODE_COLUMNS: [&str; 17] = [
    "slice",
    "node",
    "letts_ns",
    "ltdem_ns",
    "ltmsm_ns",
    "ltts_ns",
    "np2pdem",
    "np2pmsm",
    "ncolldem",
    "ncollmsm",
    "bpts",
    "t_drain_ns",
    "t_schedule_ns",
    "t_p2p_ns",
    "t_bbm_ns",
    "t_rm_ns",
    "t_deliver_ns",
];

/// What a node row may leave to its slice: GETTS, GTDEM, GTMSM, GTTS (ns), blocked ranks.
type Global = [i64; 5];

/// How many recent slices' global values are kept for rows that arrive late (other
/// nodes'), and how many rows may wait for their slice.
const RECENT: usize = 64;

pub(crate) struct NodeRows {
    waiting: Vec<(u64, LocalMetrics)>,
    recent: VecDeque<(u64, Global)>,
    /// The chart summaries of the rows written since the writer's last commit.
    pub summaries: crate::summaries::Pending,
    /// Rows written, waiting for their multi-row insert (`row_batch.rs`).
    batch: RowBatch<{ NODE_COLUMNS.len() }>,
}

impl Default for NodeRows {
    fn default() -> NodeRows {
        NodeRows {
            waiting: Vec::new(),
            recent: VecDeque::new(),
            summaries: Default::default(),
            batch: RowBatch::new("node_metrics", &NODE_COLUMNS),
        }
    }
}

fn ns(d: Duration) -> i64 {
    d.as_nanos() as i64
}

impl NodeRows {
    /// One node's metrics of `slice`.
    pub fn node(
        &mut self,
        conn: &Connection,
        slice: u64,
        m: &LocalMetrics,
    ) -> rusqlite::Result<()> {
        if let Some(&(_, g)) = self.recent.iter().find(|(s, _)| *s == slice) {
            return self.write(conn, slice, m, Some(&g));
        }
        if self.waiting.len() >= RECENT {
            return self.write(conn, slice, m, None);
        }
        self.waiting.push((slice, *m));
        Ok(())
    }

    /// The slice's row was written with these values: write the rows waiting for it (and
    /// whole, any waiting for an earlier slice).
    pub fn slice(
        &mut self,
        conn: &Connection,
        slice: u64,
        global: Option<&GlobalMetrics>,
        n_blocked: u32,
    ) -> rusqlite::Result<()> {
        let g = global.map(|g| {
            [
                ns(g.getts),
                ns(g.gtdem),
                ns(g.gtmsm),
                ns(g.gtts),
                i64::from(n_blocked),
            ]
        });
        if let Some(g) = g {
            if self.recent.len() == RECENT {
                self.recent.pop_front();
            }
            self.recent.push_back((slice, g));
        }
        if self.waiting.iter().any(|(s, _)| *s <= slice) {
            let waiting = std::mem::take(&mut self.waiting);
            for (s, m) in waiting {
                if s == slice {
                    self.write(conn, s, &m, g.as_ref())?;
                } else if s < slice {
                    self.write(conn, s, &m, None)?;
                } else {
                    self.waiting.push((s, m));
                }
            }
        }
        Ok(())
    }

    /// Whether rows wait for their slice.
    pub fn waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Write every row still waiting for its slice whole (at the end).
    pub fn write_waiting(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        for (s, m) in std::mem::take(&mut self.waiting) {
            self.write(conn, s, &m, None)?;
        }
        Ok(())
    }

    /// Insert the rows written and not yet inserted (before a commit).
    pub fn flush_batch(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        self.batch.flush(conn)
    }

    /// Their transaction is rolled back: forget the rows not yet inserted.
    pub fn discard_batch(&mut self) {
        self.batch.discard();
    }

    /// Write one row and note it in the chart summaries of the open transaction.
    fn write(
        &mut self,
        conn: &Connection,
        slice: u64,
        m: &LocalMetrics,
        global: Option<&Global>,
    ) -> rusqlite::Result<()> {
        self.summaries.node(slice, counts(m));
        self.batch.push(conn, row(slice, m, global))
    }
}

/// The counters the chart summary keeps (`summary_node`'s column order).
fn counts(m: &LocalMetrics) -> [i64; 4] {
    [m.ncolldem, m.ncollmsm, m.np2pdem, m.np2pmsm].map(i64::from)
}

/// One `node_metrics` row: NULL where the slice's row holds the same value.
fn row(slice: u64, m: &LocalMetrics, global: Option<&Global>) -> [ValueRef<'static>; 17] {
    let int = ValueRef::Integer;
    let own = |i: usize, v: i64| {
        if global.map(|g| g[i]) == Some(v) {
            ValueRef::Null
        } else {
            ValueRef::Integer(v)
        }
    };
    [
        int(slice as i64),
        int(m.node.into()),
        own(0, ns(m.letts)),
        own(1, ns(m.ltdem)),
        own(2, ns(m.ltmsm)),
        own(3, ns(m.ltts)),
        int(m.np2pdem.into()),
        int(m.np2pmsm.into()),
        int(m.ncolldem.into()),
        int(m.ncollmsm.into()),
        own(4, i64::from(m.bpts)),
        int(ns(m.t_drain)),
        int(ns(m.t_schedule)),
        int(ns(m.t_p2p)),
        int(ns(m.t_bbm)),
        int(ns(m.t_rm)),
        int(ns(m.t_deliver)),
    ]
}
