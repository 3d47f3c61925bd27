//! Captured payloads (`strobe record --capture-payloads`, table `payload`): what a rank was
//! handed for each of its descriptors, for replaying it alone (`strobe replay --rank R`).
//! Every row is checked as it is read, beyond the SQL pass of `validate.rs`: a value that
//! does not fit the runtime's types is damage, never a truncated number.

use rusqlite::{params, Row};
use strobe_runtime::descriptor::{Completion, DescKind, DescRef, Descriptor};
use strobe_runtime::engine::Payload;

use super::Recording;
use crate::RecordError;

const PAYLOAD_COLUMNS: &str = "rank, seq, slice, kind, peer, tag, comm, bytes, source,
    status_tag, status_bytes, error, flags, value, value2, send_rank, send_seq, data";

fn damaged(what: String) -> RecordError {
    RecordError::Corrupt(what)
}

fn payload_row(r: &Row<'_>) -> rusqlite::Result<Result<Payload, String>> {
    let rank: i64 = r.get(0)?;
    let seq: i64 = r.get(1)?;
    let slice: i64 = r.get(2)?;
    let kind: i64 = r.get(3)?;
    let ints: [i64; 11] = [
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
        r.get(8)?,
        r.get(9)?,
        r.get(10)?,
        r.get(11)?,
        r.get(12)?,
        r.get(13)?,
        r.get(14)?,
    ];
    let send: (Option<i64>, Option<i64>) = (r.get(15)?, r.get(16)?);
    let data: Vec<u8> = r.get(17)?;
    let bad = |what: &str| format!("the payload of rank {rank} descriptor {seq}: {what}");
    let i32_of = |v: i64, what: &str| i32::try_from(v).map_err(|_| bad(what));
    let u32_of = |v: i64, what: &str| u32::try_from(v).map_err(|_| bad(what));
    let u64_of = |v: i64, what: &str| u64::try_from(v).map_err(|_| bad(what));
    let build = || -> Result<Payload, String> {
        let k = u8::try_from(kind)
            .ok()
            .and_then(DescKind::from_u8)
            .ok_or_else(|| bad("unknown call kind"))?;
        let desc = Descriptor {
            rank: u32_of(rank, "rank")?,
            kind: k as u8,
            seq: u64_of(seq, "sequence number")?,
            peer: i32_of(ints[0], "peer")?,
            tag: i32_of(ints[1], "tag")?,
            comm: u32_of(ints[2], "communicator")?,
            bytes: u64_of(ints[3], "size")?,
            ..Descriptor::default()
        };
        let completion = Completion {
            request: 0,
            source: i32_of(ints[4], "status source")?,
            tag: i32_of(ints[5], "status tag")?,
            bytes: u64_of(ints[6], "status size")?,
            error: u32_of(ints[7], "error")?,
            flags: u32_of(ints[8], "flags")?,
            value: ints[9] as u64,
            value2: ints[10] as u64,
            _pad: 0,
        };
        let matched_send = match send {
            (Some(r), Some(s)) => Some(DescRef {
                rank: u32_of(r, "matched send rank")?,
                seq: u64_of(s, "matched send sequence number")?,
            }),
            (None, None) => None,
            _ => return Err(bad("half a matched send")),
        };
        Ok(Payload {
            slice: u64_of(slice, "slice")?,
            desc,
            completion,
            matched_send,
            data,
        })
    };
    Ok(build())
}

impl Recording {
    /// The ranks whose payloads were captured (`job.captured_ranks`; none in files made
    /// before the `payload` table existed or without `--capture-payloads`).
    pub fn captured_ranks(&self) -> Result<Vec<u32>, RecordError> {
        if self.format < crate::migrations::PAYLOADS_VERSION {
            return Ok(Vec::new());
        }
        let raw: Option<String> =
            self.conn
                .query_row("SELECT captured_ranks FROM job", [], |r| r.get(0))?;
        let Some(raw) = raw else {
            return Ok(Vec::new());
        };
        let ranks: Vec<u32> = serde_json::from_str(&raw)
            .map_err(|e| damaged(format!("job.captured_ranks is not a list of ranks: {e}")))?;
        if let Some(r) = ranks.iter().find(|&&r| r >= self.job.ranks) {
            return Err(damaged(format!(
                "job.captured_ranks names rank {r} of a {}-rank job",
                self.job.ranks
            )));
        }
        Ok(ranks)
    }

    fn payload_query(&self, sql: &str, arg: u32) -> Result<Vec<Payload>, RecordError> {
        if self.format < crate::migrations::PAYLOADS_VERSION {
            return Ok(Vec::new());
        }
        let mut st = self.conn.prepare(sql)?;
        let rows = st.query_map(params![arg], payload_row)?;
        let mut out = Vec::new();
        for row in rows {
            let p = row?.map_err(damaged)?;
            if p.desc.rank >= self.job.ranks
                || p.matched_send.is_some_and(|s| s.rank >= self.job.ranks)
            {
                return Err(damaged(format!(
                    "the payload of rank {} descriptor {} names a rank outside the job",
                    p.desc.rank, p.desc.seq
                )));
            }
            if p.slice > self.last_slice().max(1) {
                return Err(damaged(format!(
                    "the payload of rank {} descriptor {} is in slice {}, after the recording's last slice {}",
                    p.desc.rank, p.desc.seq, p.slice, self.last_slice()
                )));
            }
            out.push(p);
        }
        Ok(out)
    }

    /// Every captured completion of `rank`, by sequence number (empty when not captured).
    pub fn payloads(&self, rank: u32) -> Result<Vec<Payload>, RecordError> {
        self.payload_query(
            &format!("SELECT {PAYLOAD_COLUMNS} FROM payload WHERE rank = ?1 ORDER BY seq"),
            rank,
        )
    }

    /// The captured receives (of any captured rank) that matched a send of `rank`: what
    /// its sends must have carried.
    pub fn payloads_sent_by(&self, rank: u32) -> Result<Vec<Payload>, RecordError> {
        self.payload_query(
            &format!(
                "SELECT {PAYLOAD_COLUMNS} FROM payload WHERE send_rank = ?1 ORDER BY send_seq"
            ),
            rank,
        )
    }
}
