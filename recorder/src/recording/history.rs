//! One rank's match history: every receive the rank posted that a send matched, in the
//! order the scheduler matched them, with the sender, tag and size it matched and the
//! slice. Read from the decision-set blobs (`slice_decisions`) and the `descriptor` table;
//! the key view for wildcard (`MPI_ANY_SOURCE`) bugs (the TUI's History tab).

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use rusqlite::{params, OptionalExtension};
use strobe_core::descriptor::{ANY_SOURCE, ANY_TAG};
use strobe_core::sched::Decision;

use super::{descriptor_row, sql_u64, DescriptorRow, Recording, DESCRIPTOR_COLUMNS};
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
        // Two reads per rank at most (its descriptors, by primary-key prefix), not two
        // lookups per match: a rank of a message-heavy job matches 100,000 receives.
        let own = self.rank_descriptors(rank)?;
        let mut tags: HashMap<u32, HashMap<u64, i64>> = HashMap::new();
        let mut blobs = self
            .conn
            .prepare_cached("SELECT slice, decisions FROM slice_decisions ORDER BY slice")?;
        let mut rows = blobs.query([])?;
        while let Some(row) = rows.next()? {
            let slice = row.get::<_, i64>(0)?.max(0) as u64;
            let blob: Vec<u8> = row.get(1)?;
            let set = strobe_schema::decode_slice_decisions(&blob)?;
            for d in set.decisions {
                let Decision::Match(m) = d else { continue };
                if m.recv.rank != rank {
                    continue;
                }
                if hist.entries.len() == limit {
                    hist.truncated = true;
                    return Ok(Some(hist));
                }
                let recv = own.get(&m.recv.seq);
                let tag = match tags.entry(m.send.rank) {
                    Entry::Occupied(e) => e.into_mut(),
                    Entry::Vacant(e) => e.insert(
                        self.rank_descriptors(m.send.rank)?
                            .into_iter()
                            .map(|(seq, d)| (seq, d.tag))
                            .collect(),
                    ),
                }
                .get(&m.send.seq)
                .copied()
                .unwrap_or(0);
                hist.entries.push(MatchEntry {
                    slice,
                    recv_seq: m.recv.seq,
                    call: recv.map_or_else(|| "?".into(), |r| r.kind.clone()),
                    source_asked: recv.map_or(i64::from(m.send.rank), |r| r.peer),
                    tag_asked: recv.map_or(0, |r| r.tag),
                    recv_bytes: recv.map_or(0, |r| r.bytes),
                    sender: m.send.rank,
                    send_seq: m.send.seq,
                    tag,
                    bytes: m.bytes,
                    truncated: m.truncated,
                });
            }
        }
        Ok(Some(hist))
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
        let spans = if forward {
            "SELECT min(max(first_slice, ?1 + 1)) FROM blocked_span
             WHERE rank = ?3 AND last_slice > ?1 AND call LIKE ?2"
        } else {
            "SELECT max(min(last_slice, ?1 - 1)) FROM blocked_span
             WHERE rank = ?3 AND first_slice < ?1 AND call LIKE ?2"
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
        Ok(best)
    }

    /// Every descriptor of `rank`, by sequence number.
    fn rank_descriptors(&self, rank: u32) -> Result<HashMap<u64, DescriptorRow>, RecordError> {
        let mut st = self.conn.prepare_cached(&format!(
            "SELECT {DESCRIPTOR_COLUMNS} FROM descriptor WHERE rank = ?1"
        ))?;
        let rows = st
            .query_map(params![rank], descriptor_row)?
            .map(|r| r.map(|d| (d.seq.max(0) as u64, d)))
            .collect::<Result<HashMap<_, _>, _>>()?;
        Ok(rows)
    }
}
