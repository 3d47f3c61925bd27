//! A rank's match history from the schedule log's blobs (format `DERIVED_ROWS_VERSION`
//! on): files of that format hold no `message` rows (they were 40% of a message-heavy
//! file and are derived data), so the History tab decodes every slice's two blobs in one
//! pass, keeping only what a match of the rank needs: its pending receives, and the
//! pending sends (for their tags). `strobe export --format sqlite` writes the rows back
//! (`expand.rs`), and a file that has them is read with SQL instead (`history.rs`).

use std::collections::HashMap;

use strobe_core::descriptor::{DescKind, Descriptor};
use strobe_core::sched::Decision;

use super::history::MatchEntry;
use super::Recording;
use crate::{compact, RecordError};

/// A pending receive of the rank: its call, the source and tag it asked for, its size.
struct Recv {
    kind: u8,
    peer: i32,
    tag: i32,
    bytes: u64,
}

/// What one pass keeps between slices.
struct Pass {
    rank: u32,
    recvs: HashMap<u64, Recv>,
    /// Send tags by (rank, seq), until the send is matched.
    sends: HashMap<(u32, u64), i32>,
    entries: Vec<MatchEntry>,
}

impl Pass {
    fn descriptors(&mut self, ds: &[Descriptor]) {
        for d in ds {
            match d.kind() {
                Some(DescKind::Recv) if d.rank == self.rank => {
                    let r = Recv {
                        kind: d.kind,
                        peer: d.peer,
                        tag: d.tag,
                        bytes: d.bytes,
                    };
                    self.recvs.insert(d.seq, r);
                }
                Some(DescKind::Send | DescKind::Ssend | DescKind::Rsend) => {
                    self.sends.insert((d.rank, d.seq), d.tag);
                }
                _ => {}
            }
        }
    }

    /// The slice's decisions; false once `want` entries are kept.
    fn decisions(&mut self, slice: u64, decisions: &[Decision], want: usize) -> bool {
        for dec in decisions {
            match dec {
                Decision::Match(m) => {
                    let tag = self.sends.remove(&(m.send.rank, m.send.seq));
                    if m.recv.rank != self.rank {
                        continue;
                    }
                    let r = self.recvs.remove(&m.recv.seq);
                    self.entries.push(MatchEntry {
                        slice,
                        recv_seq: m.recv.seq,
                        call: r
                            .as_ref()
                            .and_then(|r| DescKind::from_u8(r.kind))
                            .map_or_else(|| "?".into(), |k| k.mpi_name().to_string()),
                        source_asked: r.as_ref().map_or(i64::from(m.send.rank), |r| r.peer.into()),
                        tag_asked: r.as_ref().map_or(0, |r| r.tag.into()),
                        recv_bytes: r.as_ref().map_or(0, |r| r.bytes as i64),
                        sender: m.send.rank,
                        send_seq: m.send.seq,
                        tag: tag.map_or(0, i64::from),
                        bytes: m.bytes,
                        truncated: m.truncated,
                    });
                    if self.entries.len() >= want {
                        return false;
                    }
                }
                // A receive completed without a match (MPI_PROC_NULL, cancelled).
                Decision::Complete(c) if c.desc.rank == self.rank => {
                    self.recvs.remove(&c.desc.seq);
                }
                _ => {}
            }
        }
        true
    }
}

impl Recording {
    /// The first `want` matched receives of `rank`, in match order, from the blobs.
    pub(super) fn match_history_from_blobs(
        &self,
        rank: u32,
        want: usize,
    ) -> Result<Vec<MatchEntry>, RecordError> {
        let mut pass = Pass {
            rank,
            recvs: HashMap::new(),
            sends: HashMap::new(),
            entries: Vec::new(),
        };
        if want == 0 {
            return Ok(pass.entries);
        }
        self.for_each_schedule(0, u64::MAX, false, |row| {
            let slice = row.slice;
            let damaged =
                |e: String| RecordError::Corrupt(format!("the schedule of slice {slice}: {e}"));
            if let Some(b) = &row.descriptors {
                pass.descriptors(&compact::decode_descriptors(b).map_err(damaged)?);
            }
            if let Some(b) = &row.decisions {
                let (decisions, _) = compact::decode_decisions(b).map_err(damaged)?;
                return Ok(pass.decisions(slice, &decisions, want));
            }
            Ok(true)
        })?;
        Ok(pass.entries)
    }
}
