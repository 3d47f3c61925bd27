//! Blocked sets as spans (`blocked_span`, format 6): the writer keeps each rank's open
//! span (call, site, first slice) in memory; it goes on while the rank stays blocked in
//! the same call at the same site in consecutive recorded slices. Each span is written at most twice
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

use crate::blocked_delta::{BlockedMirror, Change};

#[derive(Clone)]
struct Span {
    first: u64,
    call: BlockedCall,
    /// The `call_site` id of where the call was made, when known.
    site: Option<i64>,
    /// The site as the runtime handed it, held so its address cannot be reused by another
    /// site while the span is open (the slice path recognises an unchanged site by its
    /// pointer).
    site_arc: Option<Arc<CallSite>>,
    /// Its row is in the file, open (`last_slice` NULL): closing it is an update.
    written: bool,
}

#[derive(Default)]
pub(crate) struct BlockedSpans {
    /// Indexed by rank (ranks are dense): the rank's open span. An open span reaches
    /// `last`.
    open: Vec<Option<Span>>,
    n_open: usize,
    /// The last slice given (0: none).
    last: u64,
    /// Closed spans not yet written (written at the next commit), with their last slice.
    closed: Vec<(u32, Span, u64)>,
    /// Every call site seen, by id (`call_site.id`).
    site_ids: HashMap<Arc<CallSite>, i64>,
    /// Sites seen since the last flush (written before the spans that name them).
    new_sites: Vec<(i64, Arc<CallSite>)>,
    /// [`BlockedSpans::slice`]'s two mirrors (tests hand whole blocked sets).
    #[cfg(test)]
    mirrors: (BlockedMirror, BlockedMirror),
}

impl BlockedSpans {
    /// Recorded slice `slice`: `changes`, what changed in the blocked set since the last
    /// slice given, and `set`, the whole set after them (the writer's mirror, already
    /// updated). Costs the ranks that changed, not the blocked set: a 1,000-rank job has
    /// about 1,000 blocked ranks every slice and two or three changes. A rank blocked in
    /// another call, or at another site, ends its span and starts one. After a gap (a
    /// slice without a blocked set, outside the schedule log's window) every span starts
    /// again, from the whole set.
    pub fn update(&mut self, slice: u64, changes: &[Change], set: &BlockedMirror) {
        if self.last + 1 != slice {
            self.close_all();
            self.last = slice - 1;
            for &rank in set.ranks() {
                if let Some((call, site)) = set.get(rank) {
                    self.change(rank, Some((*call, site.as_ref())));
                }
            }
            self.last = slice;
            return;
        }
        for (rank, state) in changes {
            self.change(*rank, state.as_ref().map(|(c, s)| (*c, s.as_ref())));
        }
        self.last = slice;
    }

    /// One rank's new state as of slice `self.last + 1`.
    fn change(&mut self, rank: u32, state: Option<(BlockedCall, Option<&Arc<CallSite>>)>) {
        let i = rank as usize;
        if i >= self.open.len() {
            self.open.resize(i + 1, None);
        }
        let slice = self.last + 1;
        let Some((call, arc)) = state else {
            if let Some(old) = self.open[i].take() {
                self.closed.push((rank, old, slice - 1));
                self.n_open -= 1;
            }
            return;
        };
        let site = arc.map(|s| {
            match self.open[i]
                .as_ref()
                .filter(|o| o.site_arc.as_ref().is_some_and(|a| Arc::ptr_eq(a, s)))
            {
                Some(o) => o.site.expect("a span with a site Arc has its id"),
                None => self.site_id(Arc::clone(s)),
            }
        });
        match &mut self.open[i] {
            // The same call at an equal site (another `Arc`): the span goes on.
            Some(o) if o.call == call && o.site == site => o.site_arc = arc.cloned(),
            slot => {
                let fresh = Span {
                    first: slice,
                    call,
                    site,
                    site_arc: arc.cloned(),
                    written: false,
                };
                match slot.replace(fresh) {
                    Some(old) => self.closed.push((rank, old, slice - 1)),
                    None => self.n_open += 1,
                }
            }
        }
    }

    /// Whole blocked sets (ranks each once; `sites` some of them, in the set's order), as
    /// the slice path and the writer would hand them over: for tests.
    #[cfg(test)]
    pub fn slice<S: std::borrow::Borrow<Arc<CallSite>>>(
        &mut self,
        slice: u64,
        blocked: &[(u32, BlockedCall)],
        sites: &[(u32, S)],
    ) {
        let sites: Vec<(u32, Arc<CallSite>)> = sites
            .iter()
            .map(|(r, s)| (*r, Arc::clone(s.borrow())))
            .collect();
        let mut mirrors = std::mem::take(&mut self.mirrors);
        let changes = mirrors.0.diff(blocked, &sites);
        mirrors.1.apply(&changes);
        self.update(slice, &changes, &mirrors.1);
        self.mirrors = mirrors;
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
                self.closed.push((rank as u32, s, self.last));
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
        for (rank, s, last) in self.closed.drain(..) {
            if s.written {
                close.execute(params![rank, s.first as i64, last as i64])?;
            } else {
                insert.execute(params![rank, s.first as i64, last as i64, s.call.name()])?;
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
