//! The schedule log's compact per-slice encoding (`slice_schedule`, docs/recording.md):
//! a slice's descriptors and its decision set as two blobs of LEB128 varints, one row per
//! slice instead of one SQLite row per descriptor and per decision.
//!
//! Why not Cap'n Proto, as the older `slice_decisions` blobs are: a packed Cap'n Proto
//! decision costs about 30 bytes (a struct pointer per decision, a union, eight-byte
//! fields packed a word at a time), the varints below about 10. The decision set is walked
//! with the scheduler's field visitor ([`Decision::visit`] / [`Decision::read`]), the same
//! one the digest and the Cap'n Proto codec use, so a decision kind or field added to the
//! scheduler is encoded here without a change, in the digest's field order.
//!
//! Encoding tricks, all reversible: descriptor references repeat the same few descriptors
//! (a match, its chunks and both completions name the same pair), so a reference stores its
//! sequence number as the zigzag difference from the previous reference to the same rank
//! in the blob; `u64` fields are stored plus one (wrapping), so `u64::MAX` ("none", as in
//! `value`) costs one byte; signed fields are zigzag. Descriptors are in canonical order
//! (rank, then sequence number): a descriptor stores its rank as the difference from the
//! previous one's and, for the same rank, its sequence number as the gap after it; then a
//! mask of its non-zero fields and only those (a send's six zero fields cost nothing).
//!
//! The writer stores each blob [`pack`]ed (packed by an LZ77 pass when that is smaller, format
//! `PACKED_SCHEDULE_VERSION`); the decoders take either form.
//!
//! The decoder never trusts the bytes: every error is a `String` the reader turns into
//! "damaged recording", and the decision set's digest is checked against `slice.digest`.

use std::collections::BTreeMap;

use strobe_core::descriptor::{DescKind, DescRef, Descriptor};
use strobe_core::sched::{Decision, DecisionKind, DecisionSource, DecisionVisitor};

use crate::replay_log::{put_varint, VarintReader};

mod batch;
mod pack;
pub use batch::{decode_batch, BatchBuilder, BatchEntry, BatchRow};
pub use pack::{pack, unpack, MAX_INFLATED, PACKED};

/// The first byte of every blob: the codec's version. A reader refuses another.
pub const CODEC_VERSION: u8 = 1;

/// Lists longer than this in one blob are damage (a collective's members, a new
/// communicator's ranks, a slice's descriptors): never an allocation of a forged size.
const MAX_LIST: u64 = 1 << 24;

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}
fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// A descriptor as the schedule log keeps it: what the `descriptor` table's columns held,
/// plus the reduction's element type and op, and `aux`/`aux2` where they are not addresses
/// (a split's colour and key, the request a cancel names). Buffer addresses and the type
/// signature are dropped (ASLR changes them; they never enter a decision).
pub fn encode_descriptors(descs: &[Descriptor]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + descs.len() * 12);
    out.push(CODEC_VERSION);
    put_varint(&mut out, descs.len() as u64);
    let mut prev: Option<(u32, u64)> = None;
    for d in descs {
        match prev {
            Some((rank, seq)) if rank == d.rank && d.seq > seq => {
                put_varint(&mut out, 0);
                put_varint(&mut out, d.seq - seq - 1);
            }
            _ => {
                let from = prev.map_or(0, |p| p.0 as i64);
                // Rank difference + 1 (zigzag), so 0 can mean "same rank, next seq".
                put_varint(&mut out, zigzag(d.rank as i64 - from) + 1);
                put_varint(&mut out, d.seq);
            }
        }
        prev = Some((d.rank, d.seq));
        let fields = fields_of(d);
        // Which fields are not zero (one byte for a point-to-point call), then those.
        let mask = fields
            .iter()
            .enumerate()
            .fold(0u64, |m, (i, v)| m | (((*v != 0) as u64) << i));
        put_varint(&mut out, mask);
        for v in fields.iter().filter(|v| **v != 0) {
            put_varint(&mut out, *v);
        }
    }
    out
}

/// A descriptor's stored fields, in mask-bit order (the common ones of a point-to-point
/// call in the low seven bits), signed ones zigzag.
fn fields_of(d: &Descriptor) -> [u64; FIELDS] {
    let keeps_aux = matches!(d.kind(), Some(DescKind::CommSplit | DescKind::Cancel));
    let (aux, aux2) = if keeps_aux { (d.aux, d.aux2) } else { (0, 0) };
    [
        d.kind as u64,
        d.flags as u64,
        zigzag(d.peer as i64),
        zigzag(d.tag as i64),
        d.bytes,
        d.request,
        d.comm as u64,
        d.rbytes,
        d.elem as u64,
        d.op as u64,
        aux,
        aux2,
    ]
}

/// Fields per descriptor after its rank and sequence number.
const FIELDS: usize = 12;

fn check_version(rd: &mut VarintReader<'_>, what: &str) -> Result<(), String> {
    match rd.read()? {
        v if v == CODEC_VERSION as u64 => Ok(()),
        v => Err(format!(
            "{what} blob of codec version {v}, not {CODEC_VERSION}"
        )),
    }
}

fn read_u32(rd: &mut VarintReader<'_>, what: &str) -> Result<u32, String> {
    u32::try_from(rd.read()?).map_err(|_| format!("{what} out of range"))
}

fn read_i32(rd: &mut VarintReader<'_>, what: &str) -> Result<i32, String> {
    i32::try_from(unzigzag(rd.read()?)).map_err(|_| format!("{what} out of range"))
}

fn read_u8(rd: &mut VarintReader<'_>, what: &str) -> Result<u8, String> {
    u8::try_from(rd.read()?).map_err(|_| format!("{what} out of range"))
}

fn read_len(rd: &mut VarintReader<'_>, what: &str) -> Result<usize, String> {
    match rd.read()? {
        n if n <= MAX_LIST => Ok(n as usize),
        n => Err(format!("{what}: a list of {n} entries")),
    }
}

/// Read back [`encode_descriptors`]' output, plain or [`pack`]ed (addresses and
/// signatures zero).
pub fn decode_descriptors(bytes: &[u8]) -> Result<Vec<Descriptor>, String> {
    let plain = unpack(bytes)?;
    let mut rd = VarintReader::new(&plain);
    check_version(&mut rd, "descriptor")?;
    let n = read_len(&mut rd, "descriptors")?;
    let mut out = Vec::with_capacity(n.min(4096));
    let mut prev: Option<(u32, u64)> = None;
    for _ in 0..n {
        let head = rd.read()?;
        let (rank, seq) = match (head, prev) {
            (0, Some((rank, seq))) => {
                let gap = rd.read()?;
                let seq = seq
                    .checked_add(gap)
                    .and_then(|s| s.checked_add(1))
                    .ok_or("descriptor sequence number out of range")?;
                (rank, seq)
            }
            (0, None) => return Err("the first descriptor continues no rank".into()),
            (h, _) => {
                let from = prev.map_or(0, |p| p.0 as i64);
                let rank = u32::try_from(from + unzigzag(h - 1))
                    .map_err(|_| "descriptor rank out of range".to_string())?;
                (rank, rd.read()?)
            }
        };
        prev = Some((rank, seq));
        let mask = rd.read()?;
        if mask >> FIELDS != 0 {
            return Err(format!("descriptor field mask {mask:#x}"));
        }
        let mut f = [0u64; FIELDS];
        for (i, v) in f.iter_mut().enumerate() {
            if mask & (1 << i) != 0 {
                *v = rd.read()?;
            }
        }
        let small =
            |v: u64, what: &str| u8::try_from(v).map_err(|_| format!("{what} out of range"));
        let signed = |v: u64, what: &str| {
            i32::try_from(unzigzag(v)).map_err(|_| format!("{what} out of range"))
        };
        out.push(Descriptor {
            rank,
            seq,
            kind: small(f[0], "descriptor kind")?,
            flags: small(f[1], "descriptor flags")?,
            peer: signed(f[2], "descriptor peer")?,
            tag: signed(f[3], "descriptor tag")?,
            bytes: f[4],
            request: f[5],
            comm: u32::try_from(f[6]).map_err(|_| "descriptor comm out of range".to_string())?,
            rbytes: f[7],
            elem: small(f[8], "descriptor elem")?,
            op: small(f[9], "descriptor op")?,
            aux: f[10],
            aux2: f[11],
            ..Descriptor::default()
        });
    }
    if !rd.at_end() {
        return Err("trailing bytes after the descriptors".into());
    }
    Ok(out)
}

/// Writes a decision's fields as varints (see the module docs).
struct Writer<'a> {
    out: &'a mut Vec<u8>,
    last_seq: BTreeMap<u32, u64>,
}

impl DecisionVisitor for Writer<'_> {
    fn kind(&mut self, kind: DecisionKind) {
        self.out.push(kind as u8);
    }
    fn desc(&mut self, _field: &'static str, v: DescRef) {
        put_varint(self.out, v.rank as u64);
        let prev = self.last_seq.insert(v.rank, v.seq).unwrap_or(0);
        put_varint(self.out, zigzag(v.seq.wrapping_sub(prev) as i64));
    }
    fn u32(&mut self, _field: &'static str, v: u32) {
        put_varint(self.out, v as u64);
    }
    fn u64(&mut self, _field: &'static str, v: u64) {
        put_varint(self.out, v.wrapping_add(1));
    }
    fn i32(&mut self, _field: &'static str, v: i32) {
        put_varint(self.out, zigzag(v as i64));
    }
    fn bool(&mut self, _field: &'static str, v: bool) {
        self.out.push(v as u8);
    }
    fn coll_kind(&mut self, _field: &'static str, v: DescKind) {
        put_varint(self.out, v as u64);
    }
    fn error(&mut self, _field: &'static str, v: u32) {
        put_varint(self.out, v as u64);
    }
    fn desc_list(&mut self, field: &'static str, v: &[DescRef]) {
        put_varint(self.out, v.len() as u64);
        for d in v {
            self.desc(field, *d);
        }
    }
    fn u32_list(&mut self, field: &'static str, v: &[u32]) {
        put_varint(self.out, v.len() as u64);
        for x in v {
            self.u32(field, *x);
        }
    }
}

/// A slice's decisions, in order, and the ranks they wake (ascending).
pub fn encode_decisions(decisions: &[Decision], wake: &[u32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + decisions.len() * 10 + wake.len());
    out.push(CODEC_VERSION);
    put_varint(&mut out, decisions.len() as u64);
    let mut w = Writer {
        out: &mut out,
        last_seq: BTreeMap::new(),
    };
    for d in decisions {
        d.visit(&mut w);
    }
    put_varint(&mut out, wake.len() as u64);
    let mut prev = 0u32;
    for (i, r) in wake.iter().enumerate() {
        // Ascending: gaps (the first absolute).
        let gap = if i == 0 { *r } else { r.wrapping_sub(prev) };
        put_varint(&mut out, gap as u64);
        prev = *r;
    }
    out
}

/// Reads a decision's fields back (the inverse of [`Writer`]).
struct Reader<'a, 'b> {
    rd: &'a mut VarintReader<'b>,
    last_seq: BTreeMap<u32, u64>,
}

impl DecisionSource for Reader<'_, '_> {
    type Error = String;
    fn desc(&mut self, _field: &'static str) -> Result<DescRef, String> {
        let rank = read_u32(self.rd, "decision rank")?;
        let delta = unzigzag(self.rd.read()?);
        let prev = self.last_seq.get(&rank).copied().unwrap_or(0);
        let seq = prev.wrapping_add(delta as u64);
        self.last_seq.insert(rank, seq);
        Ok(DescRef { rank, seq })
    }
    fn u32(&mut self, field: &'static str) -> Result<u32, String> {
        read_u32(self.rd, field)
    }
    fn u64(&mut self, _field: &'static str) -> Result<u64, String> {
        Ok(self.rd.read()?.wrapping_sub(1))
    }
    fn i32(&mut self, field: &'static str) -> Result<i32, String> {
        read_i32(self.rd, field)
    }
    fn bool(&mut self, field: &'static str) -> Result<bool, String> {
        match self.rd.read()? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(format!("{field}: {v} is not a boolean")),
        }
    }
    fn coll_kind(&mut self, field: &'static str) -> Result<DescKind, String> {
        let v = read_u8(self.rd, field)?;
        DescKind::from_u8(v).ok_or_else(|| format!("{field}: unknown call kind {v}"))
    }
    fn error(&mut self, field: &'static str) -> Result<u32, String> {
        read_u32(self.rd, field)
    }
    fn desc_list(&mut self, field: &'static str) -> Result<Vec<DescRef>, String> {
        let n = read_len(self.rd, field)?;
        (0..n).map(|_| self.desc(field)).collect()
    }
    fn u32_list(&mut self, field: &'static str) -> Result<Vec<u32>, String> {
        let n = read_len(self.rd, field)?;
        (0..n).map(|_| self.u32(field)).collect()
    }
}

/// Read back [`encode_decisions`]' output, plain or [`pack`]ed: the decisions and the
/// ranks woken.
pub fn decode_decisions(bytes: &[u8]) -> Result<(Vec<Decision>, Vec<u32>), String> {
    let plain = unpack(bytes)?;
    let mut rd = VarintReader::new(&plain);
    check_version(&mut rd, "decision")?;
    let n = read_len(&mut rd, "decisions")?;
    let mut decisions = Vec::with_capacity(n.min(4096));
    let mut last_seq = BTreeMap::new();
    for _ in 0..n {
        let tag = rd.read()?;
        let kind = DecisionKind::ALL
            .into_iter()
            .find(|k| *k as u64 == tag)
            .ok_or_else(|| format!("unknown decision kind {tag}"))?;
        let mut src = Reader {
            rd: &mut rd,
            last_seq,
        };
        decisions.push(Decision::read(kind, &mut src)?);
        last_seq = src.last_seq;
    }
    let n = read_len(&mut rd, "woken ranks")?;
    let mut wake = Vec::with_capacity(n.min(4096));
    let mut prev = 0u32;
    for i in 0..n {
        let gap = read_u32(&mut rd, "woken rank")?;
        let r = if i == 0 {
            gap
        } else {
            prev.checked_add(gap).ok_or("woken rank out of range")?
        };
        wake.push(r);
        prev = r;
    }
    if !rd.at_end() {
        return Err("trailing bytes after the decisions".into());
    }
    Ok((decisions, wake))
}

#[cfg(test)]
mod tests;
