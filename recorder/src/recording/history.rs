//! One rank's match history: every receive the rank posted that a send matched, in the
//! order the scheduler matched them, with the sender, tag and size it matched and the
//! slice. Read from the `message` rows (or, in older files, the `decision` rows and the
//! `descriptor` table) in one query, or, in files of format `DERIVED_ROWS_VERSION` on
//! (which hold no `message` rows unless exported), from the blobs in one pass
//! (`history_blobs.rs`);
//! the key view for wildcard (`MPI_ANY_SOURCE`) bugs (the TUI's History tab).

use rusqlite::{params, OptionalExtension};
use strobe_core::descriptor::{ANY_SOURCE, ANY_TAG};

use super::{sql_u64, Recording};
use crate::{Layer, RecordError};

/// One matched receive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatchEntry {
    /// The slice whose schedule matched it.
    pub slice: u64,
    /// The receive: its sequence number, call, requested source and tag, buffer size.
    pub recv_seq: u64,
    pub call: String,
    pub source_asked: i64,
    pub tag_asked: i64,
    pub recv_bytes: i64,
    /// The send it matched: sender rank, its sequence number, its tag.
    pub sender: u32,
    pub send_seq: u64,
    pub tag: i64,
    /// Bytes moved (the smaller of the two sizes); `truncated` when the send was larger.
    pub bytes: u64,
    pub truncated: bool,
}

impl MatchEntry {
    /// The receive named any source (`MPI_ANY_SOURCE`): its sender was the scheduler's
    /// choice among those ready, which another run can make differently.
    pub fn wildcard_source(&self) -> bool {
        self.source_asked == i64::from(ANY_SOURCE)
    }
    /// The receive named any tag (`MPI_ANY_TAG`).
    pub fn wildcard_tag(&self) -> bool {
        self.tag_asked == i64::from(ANY_TAG)
    }
}

/// A rank's matched receives, and how much of the recording they cover.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MatchHistory {
    pub rank: u32,
    pub entries: Vec<MatchEntry>,
    /// More matches exist than the limit asked for.
    pub truncated: bool,
    /// The recording has no decision sets for some slices (outside the schedule log's
    /// window, or an old format): the history may miss matches there.
    pub partial: bool,
}

impl Recording {
    /// `rank`'s matched receives in match order, at most `limit` of them. `Ok(None)` when
    /// the recording cannot say (no decision sets: format 1, or the schedule log was off).
    pub fn match_history(
        &self,
        rank: u32,
        limit: usize,
    ) -> Result<Option<MatchHistory>, RecordError> {
        if !self.has_decision_sets || self.job.schedule_log == Layer::Off {
            return Ok(None);
        }
        let mut hist = MatchHistory {
            rank,
            partial: self.job.schedule_log != Layer::On,
            ..MatchHistory::default()
        };
        if self.messages_derived()? {
            let want = limit.saturating_add(1);
            hist.entries = self.match_history_from_blobs(rank, want)?;
            hist.truncated = hist.entries.len() > limit;
            hist.entries.truncate(limit);
            return Ok(Some(hist));
        }
        // One query over the `message` rows (one per matched message, written with the
        // compact schedule) and, for older layouts, the `decision` rows joined to both
        // descriptors by primary key: decoding every slice's blob took 135 s on a
        // 22,514-slice recording whose rank 0 matched 80,000 receives.
        // Rows expanded from the blobs (`strobe export --format sqlite`) are not counted
        // twice: the `decision` rows count only for slices without a compact schedule.
        let only_old = if self.has_schedule {
            format!("AND NOT {}", self.covered_by_blobs("m.slice", ""))
        } else {
            String::new()
        };
        let messages = if self.has_schedule {
            "SELECT m.matched, m.recv_seq, m.send_rank, m.send_seq, m.bytes, m.flags,
                    k.name, m.recv_peer, m.recv_tag, m.recv_bytes, m.send_tag, m.idx
             FROM message m LEFT JOIN desc_kind k ON k.code = m.recv_kind
             WHERE m.recv_rank = ?1
             UNION ALL "
        } else {
            ""
        };
        let mut st = self.conn.prepare_cached(&format!(
            "{messages}SELECT m.slice, m.recv_seq, m.send_rank, m.send_seq, m.bytes, m.flags,
                    r.kind, r.peer, r.tag, r.bytes, s.tag, m.idx
             FROM decision m
             LEFT JOIN descriptor r ON r.rank = m.recv_rank AND r.seq = m.recv_seq
             LEFT JOIN descriptor s ON s.rank = m.send_rank AND s.seq = m.send_seq
             WHERE m.kind = 'match' AND m.recv_rank = ?1 {only_old}
             ORDER BY 1, 12
             LIMIT ?2"
        ))?;
        let fetch = i64::try_from(limit)
            .unwrap_or(i64::MAX - 1)
            .saturating_add(1);
        let mut rows = st.query(params![rank, fetch])?;
        while let Some(row) = rows.next()? {
            if hist.entries.len() == limit {
                hist.truncated = true;
                break;
            }
            hist.entries.push(match_entry(row)?);
        }
        Ok(Some(hist))
    }

    /// Whether the file's `message` rows are to be derived from the blobs: format
    /// `DERIVED_ROWS_VERSION` on writes none, unless `strobe export --format sqlite`
    /// (or a test) filled them in.
    fn messages_derived(&self) -> Result<bool, RecordError> {
        if !self.has_schedule || self.format < crate::migrations::DERIVED_ROWS_VERSION {
            return Ok(false);
        }
        // A file migrated from before format 14 has no blobs: its `decision` rows answer.
        let batches = if self.layouts.batches {
            " OR EXISTS (SELECT 1 FROM schedule_batch)"
        } else {
            ""
        };
        let derive: i64 = self.conn.query_row(
            &format!(
                "SELECT NOT EXISTS (SELECT 1 FROM message)
                        AND (EXISTS (SELECT 1 FROM slice_schedule){batches})"
            ),
            [],
            |r| r.get(0),
        )?;
        Ok(derive != 0)
    }

    /// The first slice after (or before) `from` where `rank` is blocked in a call, or
    /// posted a descriptor, whose name is `LIKE pattern` (the TUI's `/rank=2 call=Recv`).
    pub fn search_rank_call(
        &self,
        rank: u32,
        pattern: &str,
        from: u64,
        forward: bool,
    ) -> Result<Option<u64>, RecordError> {
        let (op, order) = if forward { (">", "") } else { ("<", "DESC") };
        // An open span (`last_slice` NULL) reaches the recording's last slice.
        let spans = if forward {
            "SELECT min(max(first_slice, ?1 + 1)) FROM blocked_span
             WHERE rank = ?3 AND ifnull(last_slice, (SELECT max(slice) FROM slice)) > ?1
               AND call LIKE ?2"
        } else {
            "SELECT max(min(ifnull(last_slice, (SELECT max(slice) FROM slice)), ?1 - 1))
             FROM blocked_span WHERE rank = ?3 AND first_slice < ?1 AND call LIKE ?2"
        };
        let descriptors = format!(
            "SELECT slice FROM descriptor WHERE rank = ?3 AND slice {op} ?1 AND kind LIKE ?2
             ORDER BY slice {order} LIMIT 1"
        );
        let mut best: Option<u64> = None;
        for sql in [spans, descriptors.as_str()] {
            let s: Option<i64> = self
                .conn
                .query_row(sql, params![sql_u64(from), pattern, rank], |r| r.get(0))
                .optional()?
                .flatten();
            if let Some(s) = s.map(|s| s.max(0) as u64) {
                best = Some(match best {
                    None => s,
                    Some(b) if forward => b.min(s),
                    Some(b) => b.max(s),
                });
            }
        }
        self.search_blobs(pattern, Some(rank), from, forward, best)
    }
}

/// One row of the history query: the match, then the receive's descriptor (NULL when the
/// recording lacks it), then the send's tag.
fn match_entry(row: &rusqlite::Row<'_>) -> rusqlite::Result<MatchEntry> {
    let sender: u32 = row.get(2)?;
    let flags: i64 = row.get::<_, Option<i64>>(5)?.unwrap_or(0);
    let call: Option<String> = row.get(6)?;
    Ok(MatchEntry {
        slice: row.get::<_, i64>(0)?.max(0) as u64,
        recv_seq: row.get::<_, i64>(1)?.max(0) as u64,
        call: call.unwrap_or_else(|| "?".into()),
        source_asked: row.get::<_, Option<i64>>(7)?.unwrap_or(i64::from(sender)),
        tag_asked: row.get::<_, Option<i64>>(8)?.unwrap_or(0),
        recv_bytes: row.get::<_, Option<i64>>(9)?.unwrap_or(0),
        sender,
        send_seq: row.get::<_, i64>(3)?.max(0) as u64,
        tag: row.get::<_, Option<i64>>(10)?.unwrap_or(0),
        bytes: row.get::<_, Option<i64>>(4)?.unwrap_or(0).max(0) as u64,
        truncated: flags & 1 != 0,
    })
}
