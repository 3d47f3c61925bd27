//! Blocked sets as spans (`blocked_span`, format 6): the writer keeps each rank's open
//! span (call, first and last slice) in memory, extends it while the rank stays blocked in
//! the same call in consecutive recorded slices, and writes a row when the span changes
//! hands: when it closes, and at every commit for spans still open (an upsert keyed by
//! rank and first slice), so a committed batch always holds the blocked sets of its slices.
//! A 1,000-rank job blocked for thousands of slices writes a few rows per rank, not one per
//! rank and slice.

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
    /// Indexed by rank (ranks are dense): the rank's open span.
    open: Vec<Option<Span>>,
    n_open: usize,
    /// Closed spans not yet written (written at the next commit).
    closed: Vec<(u32, Span)>,
}

impl BlockedSpans {
    /// The blocked set of recorded slice `slice`. A rank absent from it, or blocked in
    /// another call, or whose span ended before the previous slice (a slice outside the
    /// schedule log's window has no blocked set), starts or ends a span. Linear in the
    /// blocked set, with no hashing: a 1,000-rank job has 1,000 entries per slice.
    pub fn slice(&mut self, slice: u64, blocked: &[(u32, BlockedCall)]) {
        for &(rank, call) in blocked {
            let i = rank as usize;
            if i >= self.open.len() {
                self.open.resize(i + 1, None);
            }
            match &mut self.open[i] {
                Some(s) if s.call == call && s.last + 1 == slice => {
                    s.last = slice;
                    s.dirty = true;
                }
                slot => {
                    let fresh = Span {
                        first: slice,
                        last: slice,
                        call,
                        dirty: true,
                    };
                    match slot.replace(fresh) {
                        Some(old) => self.closed.push((rank, old)),
                        None => self.n_open += 1,
                    }
                }
            }
        }
        // Spans not extended or started by this slice are over (the blocked set names each
        // rank once, so every open span was touched unless there are more of them).
        if self.n_open > blocked.len() {
            for (rank, slot) in self.open.iter_mut().enumerate() {
                if slot.is_some_and(|s| s.last != slice) {
                    self.closed
                        .push((rank as u32, slot.take().expect("checked")));
                    self.n_open -= 1;
                }
            }
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
        for (rank, slot) in self.open.iter_mut().enumerate() {
            if let Some(s) = slot.as_mut().filter(|s| s.dirty) {
                st.execute(params![rank, s.first as i64, s.last as i64, s.call.name()])?;
                s.dirty = false;
            }
        }
        Ok(())
    }
}
