//! The `message` rows (one per matched message, what the `message_life` view reads), as
//! the writer of formats 14 and 15 wrote them. From format `DERIVED_ROWS_VERSION` on the
//! writer no longer does (the rows were 40% of a message-heavy file and hold nothing the
//! `slice_schedule` blobs do not): `strobe export --format sqlite` fills them in
//! (`expand.rs`), slice by slice in order, through this log.
//!
//! A message's row is complete when both its send and its receive completed; the log
//! keeps open messages in memory, writes a row when it completes and, at the end, the
//! rows of messages still open. Slices are stored relative to the match (`recv_age` =
//! matched - the slice that handled the receive, `send_done` = the send's completion -
//! matched, ...): small integers cost one byte or none.

use std::collections::{BTreeMap, HashMap};

use rusqlite::{params, Connection};
use strobe_runtime::descriptor::{DescKind, DescRef, Descriptor};
use strobe_runtime::sched::Decision;

/// A point-to-point descriptor handled and not finished yet.
struct Pending {
    kind: u8,
    peer: i32,
    tag: i32,
    bytes: u64,
    slice: u64,
    /// An eager send completes before its match.
    done: Option<u64>,
    msg: Option<Key>,
}

/// `(recv_rank, matched, idx)`: the table's primary key.
type Key = (u32, u64, u32);

#[derive(Clone, Copy)]
struct Row {
    send: DescRef,
    recv: DescRef,
    bytes: u64,
    truncated: bool,
    recv_desc: Option<(u8, i32, i32, u64, u64)>,
    send_desc: Option<(u8, i32, u64)>,
    last_chunk: Option<u64>,
    send_done: Option<u64>,
    recv_done: Option<u64>,
}

#[derive(Default)]
pub(crate) struct MessageLog {
    pending: HashMap<(u32, u64), Pending>,
    open: BTreeMap<Key, Row>,
}

fn p2p(kind: u8) -> bool {
    matches!(
        DescKind::from_u8(kind),
        Some(DescKind::Send | DescKind::Ssend | DescKind::Rsend | DescKind::Recv)
    )
}

impl MessageLog {
    /// One slice of the schedule log: its descriptors, then its decisions in order.
    pub fn slice(
        &mut self,
        conn: &Connection,
        slice: u64,
        descriptors: &[Descriptor],
        decisions: &[Decision],
    ) -> rusqlite::Result<()> {
        for d in descriptors.iter().filter(|d| p2p(d.kind)) {
            self.pending.insert(
                (d.rank, d.seq),
                Pending {
                    kind: d.kind,
                    peer: d.peer,
                    tag: d.tag,
                    bytes: d.bytes,
                    slice,
                    done: None,
                    msg: None,
                },
            );
        }
        for (idx, dec) in decisions.iter().enumerate() {
            match dec {
                Decision::Match(m) => self.matched(slice, idx as u32, m),
                Decision::Chunk(c) => {
                    // By the receive: an eager send may be finished before its chunks move.
                    let key = self.pending.get(&(c.recv.rank, c.recv.seq));
                    if let Some(row) = key.and_then(|p| p.msg).and_then(|k| self.open.get_mut(&k)) {
                        row.last_chunk = Some(slice);
                    }
                }
                Decision::Complete(c) => self.completed(conn, slice, c.desc)?,
                _ => {}
            }
        }
        Ok(())
    }

    fn matched(&mut self, slice: u64, idx: u32, m: &strobe_runtime::sched::Match) {
        let key = (m.recv.rank, slice, idx);
        let mut row = Row {
            send: m.send,
            recv: m.recv,
            bytes: m.bytes,
            truncated: m.truncated,
            recv_desc: None,
            send_desc: None,
            last_chunk: None,
            send_done: None,
            recv_done: None,
        };
        if let Some(r) = self.pending.get_mut(&(m.recv.rank, m.recv.seq)) {
            row.recv_desc = Some((r.kind, r.peer, r.tag, r.bytes, r.slice));
            r.msg = Some(key);
        }
        if let Some(s) = self.pending.get_mut(&(m.send.rank, m.send.seq)) {
            row.send_desc = Some((s.kind, s.tag, s.slice));
            row.send_done = s.done;
            s.msg = Some(key);
            if s.done.is_some() {
                // Completed eagerly before its match: nothing more will name it.
                self.pending.remove(&(m.send.rank, m.send.seq));
            }
        }
        self.open.insert(key, row);
    }

    fn completed(&mut self, conn: &Connection, slice: u64, desc: DescRef) -> rusqlite::Result<()> {
        let id = (desc.rank, desc.seq);
        let Some(p) = self.pending.get_mut(&id) else {
            return Ok(());
        };
        let Some(key) = p.msg else {
            if matches!(DescKind::from_u8(p.kind), Some(DescKind::Recv)) {
                // A receive completed without a match (MPI_PROC_NULL, cancelled, an error).
                self.pending.remove(&id);
            } else {
                p.done = Some(slice);
            }
            return Ok(());
        };
        self.pending.remove(&id);
        let Some(row) = self.open.get_mut(&key) else {
            return Ok(());
        };
        if row.send == desc {
            row.send_done = Some(slice);
        } else {
            row.recv_done = Some(slice);
        }
        if row.send_done.is_some() && row.recv_done.is_some() {
            let row = *row;
            self.open.remove(&key);
            write(conn, key, &row)?;
        }
        Ok(())
    }

    /// Write the rows of the messages still open (at a commit, and at the end).
    pub fn flush(&self, conn: &Connection) -> rusqlite::Result<()> {
        for (key, row) in &self.open {
            write(conn, *key, row)?;
        }
        Ok(())
    }
}

fn write(conn: &Connection, key: Key, m: &Row) -> rusqlite::Result<()> {
    let (recv_rank, matched, idx) = key;
    let rel = |s: Option<u64>| s.map(|s| s as i64 - matched as i64);
    let age = |s: u64| matched as i64 - s as i64;
    conn.prepare_cached(
        "INSERT OR REPLACE INTO message (recv_rank, matched, idx, recv_seq, send_rank, send_seq,
            bytes, flags, recv_kind, recv_peer, recv_tag, recv_bytes, recv_age, send_kind,
            send_tag, send_age, last_chunk, send_done, recv_done)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
            ?18, ?19)",
    )?
    .execute(params![
        recv_rank,
        matched as i64,
        idx,
        m.recv.seq as i64,
        m.send.rank,
        m.send.seq as i64,
        m.bytes as i64,
        m.truncated as u32,
        m.recv_desc.map(|d| d.0),
        m.recv_desc.map(|d| d.1),
        m.recv_desc.map(|d| d.2),
        m.recv_desc.map(|d| d.3 as i64),
        m.recv_desc.map(|d| age(d.4)),
        m.send_desc.map(|d| d.0),
        m.send_desc.map(|d| d.1),
        m.send_desc.map(|d| age(d.2)),
        rel(m.last_chunk),
        rel(m.send_done),
        rel(m.recv_done),
    ])?;
    Ok(())
}
