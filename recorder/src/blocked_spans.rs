//! Blocked sets as spans (`blocked_span`, format 6): the writer keeps each rank's open
//! span (call, first and last slice) in memory and extends it while the rank stays blocked
//! in the same call in consecutive recorded slices. Each span is written at most twice
//! (`migrations::OPEN_SPANS_VERSION`): once at the first commit after it opened, with
//! `last_slice` NULL ("still open"), and once when it closes, its `last_slice` set (a span
//! that opens and closes between two commits is written once, closed). A committed batch
//! therefore always holds the blocked sets of its slices: an open span reads as blocked
//! through the recording's last slice. When the recording is finished (or leaves the
//! schedule log's window) every open span is closed at its last slice, so a finished file
//! has no open span. A 1,000-rank job blocked for thousands of slices writes a few rows
//! per rank, and nothing per commit for the spans that stay open.
//!
//! Call sites (`call_site`, `blocked_site`): a span also ends where the rank's call site
//! changes; each distinct site gets one `call_site` row (interned here) and each span with
//! a known site one `blocked_site` row.

use std::collections::HashMap;
use std::sync::Arc;

use rusqlite::{params, Connection};
use strobe_runtime::segment::BlockedCall;
use strobe_runtime::symbolize::CallSite;

#[derive(Clone)]
struct Span {
    first: u64,
    last: u64,
    call: BlockedCall,
    /// The `call_site` id of where the call was made, when known.
    site: Option<i64>,
    /// The site as the runtime handed it (it hands the same `Arc` slice after slice for a
    /// rank that stays blocked): a pointer comparison instead of hashing the site's
    /// strings, 1,000 times a slice in a 1,000-rank job. Held, so its address cannot be
    /// reused by another site while the span is open.
    site_arc: Option<Arc<CallSite>>,
    /// Its row is in the file, open (`last_slice` NULL): closing it is an update.
    written: bool,
}

#[derive(Default)]
pub(crate) struct BlockedSpans {
    /// Indexed by rank (ranks are dense): the rank's open span.
    open: Vec<Option<Span>>,
    n_open: usize,
    /// Closed spans not yet written (written at the next commit).
    closed: Vec<(u32, Span)>,
    /// Every call site seen, by id (`call_site.id`).
    site_ids: HashMap<Arc<CallSite>, i64>,
    /// Sites seen since the last flush (written before the spans that name them).
    new_sites: Vec<(i64, Arc<CallSite>)>,
}

impl BlockedSpans {
    /// The blocked set of recorded slice `slice`. A rank absent from it, or blocked in
    /// another call, or whose span ended before the previous slice (a slice outside the
    /// schedule log's window has no blocked set), starts or ends a span. Linear in the
    /// blocked set, with no hashing: a 1,000-rank job has 1,000 entries per slice.
    ///
    /// `sites`: the call sites of some of the blocked ranks, in the blocked set's order.
    pub fn slice<S: std::borrow::Borrow<Arc<CallSite>>>(
        &mut self,
        slice: u64,
        blocked: &[(u32, BlockedCall)],
        sites: &[(u32, S)],
    ) {
        let mut next_site = sites.iter().peekable();
        for &(rank, call) in blocked {
            let i = rank as usize;
            if i >= self.open.len() {
                self.open.resize(i + 1, None);
            }
            let (site, site_arc) = match next_site.peek() {
                Some((r, s)) if *r == rank => {
                    let s: &Arc<CallSite> = s.borrow();
                    next_site.next();
                    let same = self.open[i]
                        .as_ref()
                        .filter(|o| o.site_arc.as_ref().is_some_and(|a| Arc::ptr_eq(a, s)));
                    match same {
                        Some(o) => (o.site, None),
                        None => (Some(self.site_id(Arc::clone(s))), Some(Arc::clone(s))),
                    }
                }
                _ => (None, None),
            };
            match &mut self.open[i] {
                Some(s) if s.call == call && s.site == site && s.last + 1 == slice => {
                    s.last = slice;
                }
                slot => {
                    let fresh = Span {
                        first: slice,
                        last: slice,
                        call,
                        site,
                        site_arc,
                        written: false,
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
                if slot.as_ref().is_some_and(|s| s.last != slice) {
                    self.closed
                        .push((rank as u32, slot.take().expect("checked")));
                    self.n_open -= 1;
                }
            }
        }
    }

    /// Spans open now (ranks blocked in the last recorded slice).
    pub fn open_count(&self) -> usize {
        self.n_open
    }

    /// Whether a flush would write anything.
    pub fn pending(&self) -> bool {
        !self.closed.is_empty() || !self.new_sites.is_empty()
    }

    fn site_id(&mut self, site: Arc<CallSite>) -> i64 {
        let next = self.site_ids.len() as i64 + 1;
        *self.site_ids.entry(Arc::clone(&site)).or_insert_with(|| {
            self.new_sites.push((next, site));
            next
        })
    }

    /// Close every open span at its last slice: the recording is finished, or left the
    /// schedule log's window (a slice without a blocked set follows).
    pub fn close_all(&mut self) {
        if self.n_open == 0 {
            return;
        }
        for (rank, slot) in self.open.iter_mut().enumerate() {
            if let Some(s) = slot.take() {
                self.closed.push((rank as u32, s));
            }
        }
        self.n_open = 0;
    }

    /// Write what changed since the last flush (inside the writer's open transaction):
    /// new call sites, the spans closed (an insert, or an update of the open row written
    /// before), and the spans opened (an insert with `last_slice` NULL). The spans that
    /// stay open cost nothing.
    pub fn flush(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        let mut site = conn.prepare_cached(
            "INSERT INTO call_site (id, object, offset, function, file, line)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?;
        for (id, s) in self.new_sites.drain(..) {
            site.execute(params![
                id,
                s.object,
                s.offset as i64,
                s.function,
                s.file,
                s.line
            ])?;
        }
        let mut where_ = conn.prepare_cached(
            "INSERT INTO blocked_site (rank, first_slice, site) VALUES (?1, ?2, ?3)",
        )?;
        let mut insert = conn.prepare_cached(
            "INSERT INTO blocked_span (rank, first_slice, last_slice, call)
             VALUES (?1, ?2, ?3, ?4)",
        )?;
        let mut close = conn.prepare_cached(
            "UPDATE blocked_span SET last_slice = ?3 WHERE rank = ?1 AND first_slice = ?2",
        )?;
        for (rank, s) in self.closed.drain(..) {
            if s.written {
                close.execute(params![rank, s.first as i64, s.last as i64])?;
            } else {
                insert.execute(params![rank, s.first as i64, s.last as i64, s.call.name()])?;
                if let Some(id) = s.site {
                    where_.execute(params![rank, s.first as i64, id])?;
                }
            }
        }
        for (rank, slot) in self.open.iter_mut().enumerate() {
            if let Some(s) = slot.as_mut().filter(|s| !s.written) {
                insert.execute(params![rank, s.first as i64, None::<i64>, s.call.name()])?;
                if let Some(id) = s.site {
                    where_.execute(params![rank, s.first as i64, id])?;
                }
                s.written = true;
            }
        }
        Ok(())
    }
}
