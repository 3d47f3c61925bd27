//! Blobs packed whole (format `PACKED_SCHEDULE_VERSION`, docs/recording.md): a slice's
//! varint blob repeats itself (a ping-pong slice's messages differ in a few sequence
//! numbers), and a byte-level LZ77 pass takes the repeats out.
//!
//! Why not deflate: the blobs are a few hundred bytes, and a deflate compressor (miniz)
//! clears and allocates about 200 KB of tables per stream: recording a 4-rank exchange
//! (240,000 blobs) took +0.4 s of user and +1.5 s of system time more than without
//! packing (docs/benchmarks-detail.md). This packer's whole state is a 4 KiB table.
//!
//! A packed blob is the byte [`PACKED`] followed by tokens until the end: a varint `h`;
//! `h` even: a literal run of `h / 2 + 1` bytes follows; `h` odd: a copy of
//! `h / 2 + MIN_MATCH` bytes from a varint distance back (1 = the last byte written; the
//! copy may overlap what it writes). The output is the whole plain blob, its own version
//! byte included. The writer keeps the plain blob whenever packing does not make it
//! smaller, so both forms occur in one file and the decoders accept both. Unpacking never
//! trusts the tokens: the output is capped at [`MAX_INFLATED`] (a forged blob cannot make
//! the reader allocate more), a distance must point into what was written, and the result
//! must be a plain blob.

use super::CODEC_VERSION;
use crate::replay_log::{put_varint, VarintReader};

/// The first byte of a packed blob.
pub const PACKED: u8 = 2;

/// Blobs shorter than this are stored plain: too short to repeat themselves.
const MIN_PACK: usize = 24;

/// The largest plain blob a packed one may unpack to (64 MiB: far above any slice's
/// blob, far below what would hurt a reader).
pub const MAX_INFLATED: usize = 64 << 20;

/// The shortest copy: a copy token costs at least two bytes.
const MIN_MATCH: usize = 3;

const HASH_BITS: u32 = 10;

fn hash(b: &[u8]) -> usize {
    let v = u32::from(b[0]) | u32::from(b[1]) << 8 | u32::from(b[2]) << 16;
    (v.wrapping_mul(2_654_435_761) >> (32 - HASH_BITS)) as usize
}

fn literals(out: &mut Vec<u8>, lit: &[u8]) {
    for run in lit.chunks(1 << 16) {
        put_varint(out, ((run.len() - 1) as u64) << 1);
        out.extend_from_slice(run);
    }
}

/// `plain` packed when that is smaller, else `plain` itself.
pub fn pack(plain: Vec<u8>) -> Vec<u8> {
    if plain.len() < MIN_PACK {
        return plain;
    }
    // Positions + 1 of the last 3-byte string with each hash (0: none).
    let mut table = [0u32; 1 << HASH_BITS];
    let mut out = Vec::with_capacity(plain.len() / 2 + 8);
    out.push(PACKED);
    let (mut i, mut lit) = (0usize, 0usize);
    while i + MIN_MATCH <= plain.len() {
        let h = hash(&plain[i..]);
        let cand = table[h] as usize;
        table[h] = i as u32 + 1;
        if cand > 0 {
            let c = cand - 1;
            let len = plain[c..]
                .iter()
                .zip(&plain[i..])
                .take_while(|(a, b)| a == b)
                .count();
            if len >= MIN_MATCH {
                if lit < i {
                    literals(&mut out, &plain[lit..i]);
                }
                put_varint(&mut out, (((len - MIN_MATCH) as u64) << 1) | 1);
                put_varint(&mut out, (i - c) as u64);
                i += len;
                lit = i;
                if out.len() >= plain.len() {
                    return plain;
                }
                continue;
            }
        }
        i += 1;
    }
    if lit < plain.len() {
        literals(&mut out, &plain[lit..]);
    }
    if out.len() >= plain.len() {
        return plain;
    }
    out
}

/// The plain blob of `bytes`: itself unless it is packed.
pub fn unpack(bytes: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, String> {
    unpack_at_most(bytes, MAX_INFLATED)
}

/// [`unpack`] with the cap given (tests use a small one).
pub(super) fn unpack_at_most(
    bytes: &[u8],
    limit: usize,
) -> Result<std::borrow::Cow<'_, [u8]>, String> {
    let Some((&PACKED, tokens)) = bytes.split_first() else {
        return Ok(std::borrow::Cow::Borrowed(bytes));
    };
    let mut rd = VarintReader::new(tokens);
    let mut out: Vec<u8> = Vec::with_capacity(tokens.len().saturating_mul(3).min(limit));
    let too_long = || format!("packed blob unpacks past {limit} bytes");
    while !rd.at_end() {
        let h = rd.read()?;
        let n = usize::try_from(h >> 1).map_err(|_| too_long())?;
        if h & 1 == 0 {
            let n = n.checked_add(1).ok_or_else(too_long)?;
            if out.len().saturating_add(n) > limit {
                return Err(too_long());
            }
            out.extend_from_slice(rd.take(n)?);
        } else {
            let n = n.checked_add(MIN_MATCH).ok_or_else(too_long)?;
            let dist = usize::try_from(rd.read()?).unwrap_or(usize::MAX);
            if dist == 0 || dist > out.len() {
                return Err("packed blob copies from before its start".into());
            }
            if out.len().saturating_add(n) > limit {
                return Err(too_long());
            }
            let from = out.len() - dist;
            // Byte by byte: the copy may overlap what it writes (a run).
            for k in 0..n {
                out.push(out[from + k]);
            }
        }
    }
    if out.first() != Some(&CODEC_VERSION) {
        return Err("packed blob does not hold a plain blob".into());
    }
    Ok(std::borrow::Cow::Owned(out))
}
