//! Blocked sets as spans (`blocked_span`, format 6): the writer keeps each rank's open
//! span (call, first and last slice) in memory, extends it while the rank stays blocked in
//! the same call in consecutive recorded slices, and writes a row when the span changes
//! hands: when it closes, and at every commit for spans still open (an upsert keyed by
//! rank and first slice), so a committed batch always holds the blocked sets of its slices.
//! A 1,000-rank job blocked for thousands of slices writes a few rows per rank, not one per
//! rank and slice.
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
    /// Changed since it was last written.
    dirty: bool,
    /// Its `blocked_site` row is written (once: it never changes during the span).
    site_written: bool,
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
                    s.dirty = true;
                }
                slot => {
                    let fresh = Span {
                        first: slice,
                        last: slice,
                        call,
                        site,
                        site_arc,
                        dirty: true,
                        site_written: false,
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

    fn site_id(&mut self, site: Arc<CallSite>) -> i64 {
        let next = self.site_ids.len() as i64 + 1;
        *self.site_ids.entry(Arc::clone(&site)).or_insert_with(|| {
            self.new_sites.push((next, site));
            next
        })
    }

    /// Write every span closed or changed since the last flush (inside the writer's open
    /// transaction).
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
            "INSERT OR IGNORE INTO blocked_site (rank, first_slice, site) VALUES (?1, ?2, ?3)",
        )?;
        let mut st = conn.prepare_cached(
            "INSERT INTO blocked_span (rank, first_slice, last_slice, call)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (rank, first_slice) DO UPDATE SET last_slice = excluded.last_slice",
        )?;
        for (rank, s) in self.closed.drain(..) {
            if s.dirty {
                st.execute(params![rank, s.first as i64, s.last as i64, s.call.name()])?;
            }
            if let Some(id) = s.site.filter(|_| !s.site_written) {
                where_.execute(params![rank, s.first as i64, id])?;
            }
        }
        for (rank, slot) in self.open.iter_mut().enumerate() {
            if let Some(s) = slot.as_mut().filter(|s| s.dirty) {
                st.execute(params![rank, s.first as i64, s.last as i64, s.call.name()])?;
                if let Some(id) = s.site.filter(|_| !s.site_written) {
                    where_.execute(params![rank, s.first as i64, id])?;
                }
                s.dirty = false;
                s.site_written = true;
            }
        }
        Ok(())
    }
}
