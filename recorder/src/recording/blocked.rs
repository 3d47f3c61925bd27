//! The blocked ranks, read from the blocked spans (`blocked_span`): one slice's blocked set,
//! the terminal UI's blocked-process grid, and a blocked rank's call site.
//!
//! Open spans (`last_slice` NULL, `migrations::OPEN_SPANS_VERSION`): a recording still
//! being written, or cut short (strobe killed), has spans that had not closed at its last
//! commit. Each reads as blocked through the recording's last slice ([`Recording::last_slice`]
//! as of the last refresh). They are at most one per rank, the first entries of the
//! `blocked_span_last` index; the queries below read them in a separate arm, so the closed
//! spans keep their index ranges. A finished recording has none.

use rusqlite::{params, OptionalExtension};
use serde::Serialize;

use super::Recording;
use crate::RecordError;

/// A grid column wider than this many slices is sampled at this many slices.
pub const GRID_SAMPLES: u64 = 16;

/// Slices probed to estimate the spans on screen.
const SPAN_PROBE: u64 = 1024;

/// A primary-key lookup, in index entries read sequentially (roughly, on this machine).
const SEEK_COST: u64 = 10;

/// How [`Recording::blocked_grid`] reads the spans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GridStrategy {
    /// Every span on screen, counted exactly per column.
    Exact,
    /// Per sample, the spans of at most this length ending within as many slices after
    /// it, and the longer spans by length.
    Window(u64),
    /// Per rank and sample, the rank's span at or before the sample.
    Seek,
}

/// The blocked-process grid: `cells[rank][col]` is the call the rank spent most of the
/// column's (sampled) slices blocked in, if any.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BlockedGrid {
    pub calls: Vec<String>,
    /// Index into `calls`, per rank then column.
    pub cells: Vec<Vec<Option<u16>>>,
}

impl Recording {
    /// The longest closed span's length (`last_slice - first_slice`; 0 without any) and
    /// the number of open spans (`last_slice` NULL), from two index lookups.
    fn span_shape(&self) -> Result<(u64, u64), RecordError> {
        let (longest, open): (Option<i64>, i64) = self
            .conn
            .prepare_cached(
                "SELECT (SELECT max(last_slice - first_slice) FROM blocked_span),
                        (SELECT count(*) FROM blocked_span WHERE last_slice IS NULL)",
            )?
            .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok((longest.unwrap_or(0).max(0) as u64, open.max(0) as u64))
    }

    /// The slice an open span (`last_slice` NULL) reads as ending at: the recording's last.
    fn open_end(&self) -> i64 {
        self.last_slice as i64
    }

    /// The cheapest way to fill the blocked grid for slices `first..end` with `samples`
    /// samples, from two index lookups: the spans ending in a probe of [`SPAN_PROBE`]
    /// slices in the middle (their density) and the longest span. Costs are in index
    /// entries read; a primary-key lookup counts as [`SEEK_COST`] of them.
    fn grid_strategy(
        &self,
        first: u64,
        end: u64,
        samples: u64,
    ) -> Result<GridStrategy, RecordError> {
        let len = end.saturating_sub(first);
        let lo = (first + len / 2).saturating_sub(SPAN_PROBE / 2);
        let probed: i64 = self
            .conn
            .prepare_cached(
                "SELECT count(*) FROM blocked_span WHERE last_slice >= ?1 AND last_slice < ?2",
            )?
            .query_row(params![lo as i64, (lo + SPAN_PROBE) as i64], |r| r.get(0))?;
        let (longest, open) = self.span_shape()?;
        let probed = probed.max(0) as u64;
        let ranks = self.job.ranks as u64;
        let exact = probed * len.div_ceil(SPAN_PROBE) + ranks + open;
        // The window's split: spans longer than `k` are read per sample by length; pick
        // the `k` (a power of two minus one, up to the longest) that reads the least.
        let mut best = (u64::MAX, longest);
        let mut k = 0u64;
        loop {
            let k_eff = k.min(longest);
            let longer: i64 = self
                .conn
                .prepare_cached(
                    "SELECT count(*) FROM (SELECT 1 FROM blocked_span
                     WHERE last_slice - first_slice > ?1 LIMIT 100000)",
                )?
                .query_row([k_eff as i64], |r| r.get(0))?;
            let per_sample = (probed * (k_eff + 1)).div_ceil(SPAN_PROBE) + 1 + longer as u64 + open;
            if per_sample < best.0 {
                best = (per_sample, k_eff);
            }
            if k_eff >= longest {
                break;
            }
            k = k * 2 + 1;
        }
        let window = samples.saturating_mul(best.0);
        let longest = best.1;
        let seek = SEEK_COST * (ranks * samples).min(2 * exact);
        Ok(if exact <= window.min(seek) {
            GridStrategy::Exact
        } else if window <= seek {
            GridStrategy::Window(longest)
        } else {
            GridStrategy::Seek
        })
    }

    /// The ranks blocked when `slice` started and their calls, by rank. The spans that
    /// contain one slice are found either in the window of spans ending at most the longest
    /// span's length after it (cheap when spans are short), or by one primary-key lookup
    /// per rank (cheap when they are long), whichever an index probe says reads less.
    /// Open spans (at most one per rank) are read apart, from the start of the
    /// `blocked_span_last` index.
    pub fn blocked_at(&self, slice: u64) -> Result<Vec<(u32, String)>, RecordError> {
        let (longest, open) = self.span_shape()?;
        let probe = longest.min(SPAN_PROBE);
        let probed: i64 = self
            .conn
            .prepare_cached(
                "SELECT count(*) FROM blocked_span WHERE last_slice BETWEEN ?1 AND ?1 + ?2",
            )?
            .query_row(params![slice as i64, probe as i64], |r| r.get(0))?;
        let window = probed.max(0) as u64 * (longest + 1).div_ceil(probe + 1) + open;
        let mut out: Vec<(u32, String)> = Vec::new();
        if window <= SEEK_COST * self.job.ranks as u64 {
            let mut st = self.conn.prepare_cached(
                "SELECT rank, call FROM blocked_span
                 WHERE last_slice BETWEEN ?1 AND ?1 + ?2 AND first_slice <= ?1
                 UNION ALL
                 SELECT rank, call FROM blocked_span
                 WHERE last_slice IS NULL AND first_slice <= ?1 AND ?1 <= ?3",
            )?;
            let rows = st.query_map(
                params![slice as i64, longest as i64, self.open_end()],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            for row in rows {
                out.push(row?);
            }
            out.sort();
        } else {
            let mut st = self.conn.prepare_cached(
                "SELECT last_slice, call FROM blocked_span
                 WHERE rank = ?1 AND first_slice <= ?2 ORDER BY first_slice DESC LIMIT 1",
            )?;
            for rank in 0..self.job.ranks {
                let span: Option<(Option<i64>, String)> = st
                    .query_row(params![rank, slice as i64], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?;
                let reaches =
                    |s: &(Option<i64>, String)| s.0.unwrap_or(self.open_end()) >= slice as i64;
                if let Some((_, call)) = span.filter(reaches) {
                    out.push((rank, call));
                }
            }
        }
        Ok(out)
    }

    /// GRID_SAMPLES slices per column (slice, column), ascending.
    fn grid_samples(&self, first: u64, per_col: u64, cols: usize) -> Vec<(i64, i64)> {
        let step = per_col / GRID_SAMPLES;
        let mut samples = Vec::with_capacity(cols * GRID_SAMPLES as usize);
        for c in 0..cols as u64 {
            for k in 0..GRID_SAMPLES {
                let s = first + c * per_col + k * step;
                if s > self.last_slice {
                    return samples;
                }
                samples.push((s as i64, c as i64));
            }
        }
        samples
    }

    /// The blocked-process grid for every rank over the given columns.
    pub fn blocked_grid(
        &self,
        first: u64,
        per_col: u64,
        cols: usize,
    ) -> Result<BlockedGrid, RecordError> {
        let per_col = per_col.max(1);
        let end = first + per_col * cols as u64;
        // Exact when the screen's spans are few enough to read them all (any zoom for a
        // job with long spans, like a 1,000-rank token ring); sampled otherwise.
        let strategy = if per_col <= GRID_SAMPLES {
            GridStrategy::Exact
        } else {
            self.grid_strategy(first, end, cols as u64 * GRID_SAMPLES)?
        };
        self.blocked_grid_by(first, per_col, cols, strategy)
    }

    #[doc(hidden)]
    pub fn blocked_grid_by(
        &self,
        first: u64,
        per_col: u64,
        cols: usize,
        strategy: GridStrategy,
    ) -> Result<BlockedGrid, RecordError> {
        let ranks = self.job.ranks as usize;
        let end = first + per_col * cols as u64;
        // counts[rank][col] = (call index, slices) of the most frequent call so far.
        let mut tally: Vec<Vec<Vec<(u16, u32)>>> = vec![vec![Vec::new(); cols]; ranks];
        let mut grid = BlockedGrid {
            calls: Vec::new(),
            cells: vec![vec![None; cols]; ranks],
        };
        let mut add = |grid: &mut BlockedGrid, col: i64, rank: i64, call: String, n: i64| {
            let (Ok(col), Ok(rank)) = (usize::try_from(col), usize::try_from(rank)) else {
                return;
            };
            if col >= cols || rank >= ranks {
                return;
            }
            let idx = match grid.calls.iter().position(|c| *c == call) {
                Some(i) => i,
                None => {
                    grid.calls.push(call);
                    grid.calls.len() - 1
                }
            } as u16;
            let t = &mut tally[rank][col];
            match t.iter_mut().find(|(i, _)| *i == idx) {
                Some(e) => e.1 += n as u32,
                None => t.push((idx, n as u32)),
            }
        };
        match strategy {
            GridStrategy::Exact => {
                // Every span overlapping the screen, split over the columns it covers (an
                // open one ends at the recording's last slice).
                let mut st = self.conn.prepare_cached(
                    "SELECT rank, call, max(first_slice, ?1), min(last_slice, ?2 - 1)
                     FROM blocked_span WHERE last_slice >= ?1 AND first_slice < ?2
                     UNION ALL
                     SELECT rank, call, max(first_slice, ?1), min(?3, ?2 - 1)
                     FROM blocked_span WHERE last_slice IS NULL AND first_slice < ?2
                       AND ?3 >= ?1",
                )?;
                let mut rows = st.query(params![first as i64, end as i64, self.open_end()])?;
                while let Some(r) = rows.next()? {
                    let (rank, call): (i64, String) = (r.get(0)?, r.get(1)?);
                    let (lo, hi): (i64, i64) = (r.get(2)?, r.get(3)?);
                    let mut s = lo;
                    while s <= hi {
                        let col = (s - first as i64) / per_col as i64;
                        let col_end = first as i64 + (col + 1) * per_col as i64 - 1;
                        let n = col_end.min(hi) - s + 1;
                        add(&mut grid, col, rank, call.clone(), n);
                        s = col_end + 1;
                    }
                }
            }
            GridStrategy::Window(k) => {
                // Each sample's spans: those of length up to `k` ending at most `k` slices
                // after it (an index range over `blocked_span_last`, which covers the
                // query), the longer ones (a range over `blocked_span_length`, named: the
                // planner would otherwise scan every later span by last slice), and the
                // open ones (the start of `blocked_span_last`).
                let mut st = self.conn.prepare_cached(
                    "SELECT rank, call FROM blocked_span
                     WHERE last_slice BETWEEN ?1 AND ?1 + ?2 AND first_slice <= ?1
                       AND last_slice - first_slice <= ?2
                     UNION ALL
                     SELECT rank, call FROM blocked_span INDEXED BY blocked_span_length
                     WHERE last_slice - first_slice > ?2 AND first_slice <= ?1
                       AND last_slice >= ?1
                     UNION ALL
                     SELECT rank, call FROM blocked_span
                     WHERE last_slice IS NULL AND first_slice <= ?1 AND ?1 <= ?3",
                )?;
                for (s, col) in self.grid_samples(first, per_col, cols) {
                    let mut rows = st.query(params![s, k as i64, self.open_end()])?;
                    while let Some(r) = rows.next()? {
                        add(&mut grid, col, r.get(0)?, r.get(1)?, 1);
                    }
                }
            }
            GridStrategy::Seek => {
                // Per rank, the span at or before a sample is one primary-key lookup, and
                // it answers every later sample it covers (an open one reaches the last).
                let samples = self.grid_samples(first, per_col, cols);
                let open_end = self.open_end();
                let mut st = self.conn.prepare_cached(
                    "SELECT first_slice, last_slice, call FROM blocked_span
                     WHERE rank = ?1 AND first_slice <= ?2 ORDER BY first_slice DESC LIMIT 1",
                )?;
                for rank in 0..ranks as i64 {
                    let mut span: Option<(i64, i64, String)> = None;
                    for &(s, col) in &samples {
                        if !span.as_ref().is_some_and(|(f, l, _)| *f <= s && s <= *l) {
                            span = st
                                .query_row(params![rank, s], |r| {
                                    let last: Option<i64> = r.get(1)?;
                                    Ok((r.get(0)?, last.unwrap_or(open_end), r.get(2)?))
                                })
                                .optional()?;
                        }
                        if let Some((_, l, call)) = &span {
                            if s <= *l {
                                add(&mut grid, col, rank, call.clone(), 1);
                            }
                        }
                    }
                }
            }
        }
        for (rank, cols) in tally.iter().enumerate() {
            for (col, t) in cols.iter().enumerate() {
                grid.cells[rank][col] = most_slices(t);
            }
        }
        Ok(grid)
    }

    /// Where rank `rank`, blocked at the start of `slice`, made its call (`None` when it
    /// was not blocked then, its site is unknown, or the file predates call sites).
    pub fn blocked_site(
        &self,
        rank: u32,
        slice: u64,
    ) -> Result<Option<strobe_runtime::symbolize::CallSite>, RecordError> {
        if self.format < crate::migrations::CALL_SITES_VERSION {
            return Ok(None);
        }
        let site = self
            .conn
            .prepare_cached(
                // The rank's last span starting at or before the slice (a primary-key
                // range read from its end), if it reaches the slice.
                "SELECT c.object, c.offset, c.function, c.file, c.line
                 FROM (SELECT rank, first_slice, last_slice FROM blocked_span
                       WHERE rank = ?1 AND first_slice <= ?2
                       ORDER BY first_slice DESC LIMIT 1) b
                 JOIN blocked_site s ON s.rank = b.rank AND s.first_slice = b.first_slice
                 JOIN call_site c ON c.id = s.site
                 WHERE ifnull(b.last_slice, ?3) >= ?2",
            )?
            .query_row(params![rank, slice as i64, self.open_end()], |r| {
                Ok(strobe_runtime::symbolize::CallSite {
                    object: r.get(0)?,
                    offset: r.get::<_, i64>(1)? as u64,
                    function: r.get(2)?,
                    file: r.get(3)?,
                    line: r.get(4)?,
                })
            })
            .optional()?;
        Ok(site)
    }
}

/// The call of a grid cell's tally `(call index, slices)` with the most slices; on a tie
/// the call seen first (a deterministic order).
fn most_slices(tally: &[(u16, u32)]) -> Option<u16> {
    tally
        .iter()
        .fold(None::<(u16, u32)>, |best, &(i, n)| match best {
            Some((_, bn)) if bn >= n => best,
            _ => Some((i, n)),
        })
        .map(|(i, _)| i)
}
