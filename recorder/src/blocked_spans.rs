//! Blocked sets as spans (`blocked_span`, format 6): the writer keeps each rank's open
//! span (call, first and last slice) in memory, extends it while the rank stays blocked in
//! the same call in consecutive recorded slices, and writes a row when the span changes
//! hands: when it closes, and at every commit for spans still open (an upsert keyed by
//! rank and first slice), so a committed batch always holds the blocked sets of its slices.
//! A 1,000-rank job blocked for thousands of slices writes a few rows per rank, not one per
//! rank and slice.

use std::collections::HashMap;

use rusqlite::{params, Connection};
use strobe_runtime::segment::BlockedCall;

#[derive(Clone, Copy)]
struct Span {
    first: u64,
    last: u64,
    call: BlockedCall,
    /// Changed since it was last written.
    dirty: bool,
}

#[derive(Default)]
pub(crate) struct BlockedSpans {
    open: HashMap<u32, Span>,
    /// Closed spans not yet written (written with the next slice's rows or the commit).
    closed: Vec<(u32, Span)>,
}

impl BlockedSpans {
    /// The blocked set of recorded slice `slice`. A rank absent from it, or blocked in
    /// another call, or whose span ended before the previous slice (a slice outside the
    /// schedule log's window has no blocked set), starts or ends a span.
    pub fn slice(&mut self, slice: u64, blocked: &[(u32, BlockedCall)]) {
        for &(rank, call) in blocked {
            match self.open.get_mut(&rank) {
                Some(s) if s.call == call && s.last + 1 == slice => {
                    s.last = slice;
                    s.dirty = true;
                }
                _ => {
                    let fresh = Span {
                        first: slice,
                        last: slice,
                        call,
                        dirty: true,
                    };
                    if let Some(old) = self.open.insert(rank, fresh) {
                        self.closed.push((rank, old));
                    }
                }
            }
        }
        // Spans not extended by this slice are over.
        if self.open.len() > blocked.len() || self.open.values().any(|s| s.last != slice) {
            let closed = &mut self.closed;
            self.open.retain(|&rank, s| {
                let keep = s.last == slice;
                if !keep {
                    closed.push((rank, *s));
                }
                keep
            });
        }
    }

    /// Write every span closed or changed since the last flush (inside the writer's open
    /// transaction).
    pub fn flush(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        let mut st = conn.prepare_cached(
            "INSERT INTO blocked_span (rank, first_slice, last_slice, call)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (rank, first_slice) DO UPDATE SET last_slice = excluded.last_slice",
        )?;
        for (rank, s) in self.closed.drain(..) {
            if s.dirty {
                st.execute(params![rank, s.first as i64, s.last as i64, s.call.name()])?;
            }
        }
        for (&rank, s) in self.open.iter_mut().filter(|(_, s)| s.dirty) {
            st.execute(params![rank, s.first as i64, s.last as i64, s.call.name()])?;
            s.dirty = false;
        }
        Ok(())
    }
}
