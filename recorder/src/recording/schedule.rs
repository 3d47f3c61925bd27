//! The schedule log's descriptors and decisions: from the compact per-slice blobs
//! (`slice_schedule`, format `COMPACT_SCHEDULE_VERSION` on) or, in older files and in
//! slices a migrated file recorded before, from the `descriptor` rows and the
//! `slice_decisions` Cap'n Proto blobs. Every reader goes through here, so the two
//! layouts read the same.

use rusqlite::{params, OptionalExtension};
use strobe_core::descriptor::{DescKind, Descriptor};
use strobe_core::sched::{Decision, DecisionKind, SliceDecisions};

use super::{descriptor_row, sql_u64, DescriptorRow, Recording, DESCRIPTOR_COLUMNS};
use crate::compact::BatchEntry;
use crate::{compact, schedule_rows, RecordError};

/// A decoded descriptor as a `descriptor` row.
fn row_of(d: &Descriptor) -> DescriptorRow {
    DescriptorRow {
        rank: d.rank,
        seq: d.seq as i64,
        kind: match d.kind() {
            Some(k) => k.mpi_name().to_string(),
            None => format!("?{}", d.kind),
        },
        peer: d.peer as i64,
        tag: d.tag as i64,
        comm: d.comm as i64,
        bytes: d.bytes as i64,
        blocking: d.blocking(),
    }
}

fn damaged(slice: u64, e: String) -> RecordError {
    RecordError::Corrupt(format!("the schedule of slice {slice}: {e}"))
}

impl Recording {
    /// One slice's schedule-log blobs: its `slice_schedule` row, or its entry in the
    /// `schedule_batch` holding it (the batch is decoded once for consecutive lookups).
    fn schedule_entry(&self, slice: u64) -> Result<Option<BatchEntry>, RecordError> {
        if !self.has_schedule {
            return Ok(None);
        }
        let row = self
            .conn
            .prepare_cached("SELECT descriptors, decisions FROM slice_schedule WHERE slice = ?1")?
            .query_row([sql_u64(slice)], |r| {
                Ok(BatchEntry {
                    slice,
                    descriptors: r.get(0)?,
                    decisions: r.get(1)?,
                })
            })
            .optional()?;
        if row.is_some() || !self.layouts.batches {
            return Ok(row);
        }
        let mut cache = self.batch_cache.borrow_mut();
        if !cache
            .as_ref()
            .is_some_and(|(first, last, _)| (*first..=*last).contains(&slice))
        {
            *cache = schedule_rows::batch_of(&self.conn, slice)?;
        }
        Ok(cache.as_ref().and_then(|(_, _, entries)| {
            entries
                .binary_search_by_key(&slice, |e| e.slice)
                .ok()
                .map(|i| entries[i].clone())
        }))
    }

    /// One column (descriptors or decisions) of a slice's schedule-log entry.
    fn schedule_blob(&self, slice: u64, column: &str) -> Result<Option<Vec<u8>>, RecordError> {
        Ok(self.schedule_entry(slice)?.and_then(|e| match column {
            "descriptors" => e.descriptors,
            _ => e.decisions,
        }))
    }

    /// [`schedule_rows::for_each`] over this file's layouts.
    pub(super) fn for_each_schedule(
        &self,
        lo: u64,
        hi: u64,
        descending: bool,
        f: impl FnMut(BatchEntry) -> Result<bool, RecordError>,
    ) -> Result<(), RecordError> {
        if !self.has_schedule {
            return Ok(());
        }
        schedule_rows::for_each(&self.conn, self.layouts, lo, hi, descending, f)
    }

    fn decoded_descriptors(&self, slice: u64) -> Result<Option<Vec<Descriptor>>, RecordError> {
        self.schedule_blob(slice, "descriptors")?
            .map(|b| compact::decode_descriptors(&b).map_err(|e| damaged(slice, e)))
            .transpose()
    }

    /// The descriptors the file holds for `slice` (blob or rows), however many.
    pub(super) fn descriptor_rows(&self, slice: u64) -> Result<Vec<DescriptorRow>, RecordError> {
        Ok(match self.decoded_descriptors(slice)? {
            Some(ds) => ds.iter().map(row_of).collect(),
            None => self
                .conn
                .prepare_cached(&format!(
                    "SELECT {DESCRIPTOR_COLUMNS} FROM descriptor WHERE slice = ?1 ORDER BY rank, seq"
                ))?
                .query_map([sql_u64(slice)], descriptor_row)?
                .collect::<Result<Vec<_>, _>>()?,
        })
    }

    /// The recorded descriptors handled in `slice`, by rank and sequence number; `None`
    /// when the schedule log does not cover the slice (outside its window, no `slice` row,
    /// or descriptors missing: fewer than the slice's `n_descriptors`).
    pub fn descriptors(&self, slice: u64) -> Result<Option<Vec<DescriptorRow>>, RecordError> {
        let Some(row) = self.slice(slice)? else {
            // No row: beyond the end, or a quiet slice outside both windows, whose
            // descriptors the schedule log did not see either.
            return Ok(None);
        };
        let rows = self.descriptor_rows(slice)?;
        let complete = rows.len() as i64 == row.n_descriptors
            && (row.n_descriptors > 0 || self.job.schedule_log.covers(slice));
        Ok(complete.then_some(rows))
    }

    /// The latest descriptor `rank` posted that a slice up to `slice` handled.
    pub fn last_descriptor(
        &self,
        rank: u32,
        slice: u64,
    ) -> Result<Option<DescriptorRow>, RecordError> {
        Ok(self.last_descriptors(&[rank], slice)?.remove(&rank))
    }

    /// [`Self::last_descriptor`] of each of `ranks` at once: one backward scan of the
    /// descriptor blobs from `slice` serves them all (a slice with 1,000 blocked ranks costs
    /// one scan, not 1,000), stopping when every rank has been found.
    ///
    /// The scan starts at `slice` itself, never at the start of the rank's blocked span: a
    /// span covers consecutive slices a rank was blocked at the start of, and a rank that
    /// was woken and blocked again before the next slice began (a receive in a ring, after
    /// an inline send) stays in one span while its descriptors move on. Starting at the
    /// span's first slice named the call it had long left (issue 12's wait-for graph then
    /// drew a cycle through a healthy ring).
    pub fn last_descriptors(
        &self,
        ranks: &[u32],
        slice: u64,
    ) -> Result<std::collections::HashMap<u32, DescriptorRow>, RecordError> {
        let mut found = std::collections::HashMap::with_capacity(ranks.len());
        let mut st = self.conn.prepare_cached(&format!(
            "SELECT {DESCRIPTOR_COLUMNS} FROM descriptor WHERE rank = ?1 AND slice <= ?2
             ORDER BY seq DESC LIMIT 1"
        ))?;
        for &rank in ranks {
            if let Some(row) = st
                .query_row(params![rank, sql_u64(slice)], descriptor_row)
                .optional()?
            {
                found.insert(rank, row);
            }
        }
        if !self.has_schedule || ranks.is_empty() {
            return Ok(found);
        }
        // Ranks still looking in the blobs, and the seq a blob's descriptor must beat (a
        // migrated file keeps its older slices as rows).
        let mut open: std::collections::HashMap<u32, i64> = ranks
            .iter()
            .map(|r| (*r, found.get(r).map_or(-1, |d| d.seq)))
            .collect();
        self.for_each_schedule(0, slice, true, |row| {
            let Some(blob) = &row.descriptors else {
                return Ok(true);
            };
            let ds = compact::decode_descriptors(blob).map_err(|e| damaged(row.slice, e))?;
            for d in ds.iter().rev() {
                if let Some(&beat) = open.get(&d.rank) {
                    if d.seq as i64 > beat {
                        found.insert(d.rank, row_of(d));
                    }
                    // The latest blob holding the rank decides: older ones are older.
                    open.remove(&d.rank);
                }
            }
            Ok(!open.is_empty())
        })?;
        Ok(found)
    }

    /// The nearest slice from `from` (inclusive) forward or backward, up to `bound`
    /// (exclusive), whose descriptor blob holds a descriptor `hit` accepts, and that
    /// descriptor (the last such in the slice backward, the first forward).
    pub(super) fn scan_descriptors(
        &self,
        from: u64,
        forward: bool,
        bound: Option<u64>,
        hit: impl Fn(&Descriptor) -> bool,
    ) -> Result<Option<(u64, Descriptor)>, RecordError> {
        if !self.has_schedule {
            return Ok(None);
        }
        // `bound` is exclusive.
        let (lo, hi) = if forward {
            (from, bound.map_or(u64::MAX, |b| b.saturating_sub(1)))
        } else {
            (bound.map_or(0, |b| b.saturating_add(1)), from)
        };
        if bound.is_some_and(|b| if forward { b == 0 } else { b >= from }) {
            return Ok(None);
        }
        let mut hit_at = None;
        self.for_each_schedule(lo, hi, !forward, |row| {
            let Some(blob) = &row.descriptors else {
                return Ok(true);
            };
            let ds = compact::decode_descriptors(blob).map_err(|e| damaged(row.slice, e))?;
            let found = if forward {
                ds.into_iter().find(|d| hit(d))
            } else {
                ds.into_iter().rev().find(|d| hit(d))
            };
            hit_at = found.map(|d| (row.slice, d));
            Ok(hit_at.is_none())
        })?;
        Ok(hit_at)
    }

    /// The call kinds whose MPI name is `LIKE pattern` (SQLite's LIKE, as the row query).
    pub(super) fn kinds_like(&self, pattern: &str) -> Result<Vec<u8>, RecordError> {
        let mut out = Vec::new();
        let mut st = self.conn.prepare_cached("SELECT ?1 LIKE ?2")?;
        for code in 0..=u8::MAX {
            if let Some(k) = DescKind::from_u8(code) {
                if st.query_row(params![k.mpi_name(), pattern], |r| r.get::<_, bool>(0))? {
                    out.push(code);
                }
            }
        }
        Ok(out)
    }

    /// The decisions of `slice` in order, decoded from its decision-set blob (the compact
    /// `slice_schedule.decisions`, or the Cap'n Proto `slice_decisions` of older files;
    /// the digest is checked against the slice's).
    ///
    /// `Ok(None)` when the recording cannot say: the slice lies outside the schedule log's
    /// window, or the file predates decision-set blobs (format 1; its `decision` rows are
    /// not turned back into decisions). A covered slice without a blob decided nothing:
    /// `Ok(Some(empty))`.
    pub fn decisions(&self, slice: u64) -> Result<Option<Vec<Decision>>, RecordError> {
        if !self.has_decision_sets || !self.job.schedule_log.covers(slice) {
            return Ok(None);
        }
        if let Some(b) = self.schedule_blob(slice, "decisions")? {
            let (decisions, wake) = compact::decode_decisions(&b).map_err(|e| damaged(slice, e))?;
            let set = SliceDecisions {
                slice,
                decisions,
                wake,
                catalog: Vec::new(),
            };
            if let Some(row) = self.slice(slice)? {
                if set.digest() != row.digest as u64 {
                    return Err(damaged(
                        slice,
                        format!(
                            "the decisions digest to {:016x} but the slice's digest is {:016x}",
                            set.digest(),
                            row.digest as u64
                        ),
                    ));
                }
            }
            return Ok(Some(set.decisions));
        }
        let blob: Option<Vec<u8>> = self
            .conn
            .query_row(
                "SELECT decisions FROM slice_decisions WHERE slice = ?1",
                [sql_u64(slice)],
                |r| r.get(0),
            )
            .optional()?;
        Ok(Some(match blob {
            Some(b) => strobe_schema::decode_slice_decisions(&b)?.decisions,
            None => Vec::new(),
        }))
    }

    /// Decisions of each kind over the recording (`strobe stats`): the `decision` rows of
    /// older layouts, plus the `slice` table's counts over the slices with a compact
    /// schedule (new communicators, which it does not count, from the blobs of the slices
    /// that ran a collective: they are created by one).
    pub(super) fn decision_kind_counts(&self) -> Result<Vec<(String, u64)>, RecordError> {
        let mut counts: Vec<(String, u64)> = Vec::new();
        let mut add = |kind: &str, n: u64| {
            if n == 0 {
                return;
            }
            match counts.iter_mut().find(|c| c.0 == kind) {
                Some(c) => c.1 += n,
                None => counts.push((kind.to_string(), n)),
            }
        };
        let mut st = self.conn.prepare(&format!(
            "SELECT kind, count(*) FROM decision {} GROUP BY kind",
            self.rows_only_outside_blobs("decision")
        ))?;
        let rows = st
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?
            .collect::<Result<Vec<_>, _>>()?;
        for (k, n) in rows {
            add(&k, n.max(0) as u64);
        }
        if self.has_schedule {
            let sums: [Option<i64>; 4] = self.conn.query_row(
                &format!(
                    "SELECT sum(n_matches), sum(n_chunks), sum(n_collectives), sum(n_completions)
                     FROM slice WHERE {}",
                    self.covered_by_blobs("slice.slice", "decisions")
                ),
                [],
                |r| Ok([r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?]),
            )?;
            let kinds = [
                DecisionKind::Match,
                DecisionKind::Chunk,
                DecisionKind::Collective,
                DecisionKind::Complete,
            ];
            for (k, n) in kinds.iter().zip(sums) {
                add(k.name(), n.unwrap_or(0).max(0) as u64);
            }
            // New communicators are made by collectives: decode the slices that ran one.
            let collective_slices: Vec<i64> = self
                .conn
                .prepare("SELECT slice FROM slice WHERE n_collectives > 0 ORDER BY slice")?
                .query_map([], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            let mut new_comms = 0u64;
            for slice in collective_slices {
                let slice = slice.max(0) as u64;
                let Some(blob) = self.schedule_blob(slice, "decisions")? else {
                    continue;
                };
                let (ds, _) = compact::decode_decisions(&blob).map_err(|e| damaged(slice, e))?;
                new_comms += ds
                    .iter()
                    .filter(|d| d.kind() == DecisionKind::NewComm)
                    .count() as u64;
            }
            add(DecisionKind::NewComm.name(), new_comms);
        }
        counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Ok(counts)
    }

    /// A `WHERE` clause keeping the per-row schedule log (`table`'s rows) to slices without
    /// a compact schedule: rows expanded from the blobs (`strobe export --format sqlite`)
    /// are not counted twice.
    fn rows_only_outside_blobs(&self, table: &str) -> String {
        if self.has_schedule {
            format!(
                "WHERE NOT ({})",
                self.covered_by_blobs(&format!("{table}.slice"), "")
            )
        } else {
            String::new()
        }
    }

    /// An SQL condition on the slice column `col`: the slice's schedule log is in the
    /// compact blobs (a `slice_schedule` row, with a non-NULL `column` when one is named,
    /// or a `schedule_batch`). A slice a batch covers without an entry decided and
    /// handled nothing, so counts over it are right either way.
    pub(super) fn covered_by_blobs(&self, col: &str, column: &str) -> String {
        let not_null = if column.is_empty() {
            String::new()
        } else {
            format!(" AND q.{column} IS NOT NULL")
        };
        let rows =
            format!("EXISTS (SELECT 1 FROM slice_schedule q WHERE q.slice = {col}{not_null})");
        if self.layouts.batches {
            format!("({rows} OR {})", schedule_rows::in_a_batch(col))
        } else {
            rows
        }
    }

    /// Descriptors the schedule log holds: `descriptor` rows plus, for slices with a
    /// compact schedule, the slice's `n_descriptors`.
    pub(super) fn descriptor_count(&self) -> Result<u64, RecordError> {
        let rows: i64 = self.conn.query_row(
            &format!(
                "SELECT count(*) FROM descriptor {}",
                self.rows_only_outside_blobs("descriptor")
            ),
            [],
            |r| r.get(0),
        )?;
        let blobs: i64 = if self.has_schedule {
            self.conn.query_row(
                &format!(
                    "SELECT coalesce(sum(n_descriptors), 0) FROM slice WHERE {}",
                    self.covered_by_blobs("slice.slice", "descriptors")
                ),
                [],
                |r| r.get(0),
            )?
        } else {
            0
        };
        Ok((rows.max(0) + blobs.max(0)) as u64)
    }
}
