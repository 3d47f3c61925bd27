//! Blobs deflated whole (format `DEFLATED_SCHEDULE_VERSION`, docs/recording.md): a
//! slice's varint blob repeats itself (a ping-pong slice's four messages differ in a few
//! sequence numbers), and raw deflate takes it from 62 to about 26 bytes a message.
//!
//! A packed blob is the byte [`DEFLATED`] followed by the raw deflate stream of the whole
//! plain blob (its own version byte included). The writer keeps the plain blob whenever
//! deflating does not make it smaller (short blobs), so both forms occur in one file and
//! the decoders accept both. Inflating never trusts the stream: its output is capped at
//! [`MAX_INFLATED`] (a forged stream cannot make the reader allocate more) and must be a
//! plain blob.

use super::CODEC_VERSION;

/// The first byte of a deflated blob.
pub const DEFLATED: u8 = 2;

/// Blobs shorter than this are stored plain: deflate's block header and the Huffman
/// tables cost more than a short blob can save.
const MIN_PACK: usize = 32;

/// The largest plain blob a deflated one may inflate to (64 MiB: far above any slice's
/// blob, far below what would hurt a reader).
pub const MAX_INFLATED: usize = 64 << 20;

/// Deflate level: 1 (the fastest) loses about 3% of the size against 6 on the schedule
/// log's blobs and costs the writer thread half the CPU.
const LEVEL: u8 = 1;

/// `plain` deflated when that is smaller, else `plain` itself.
pub fn pack(plain: Vec<u8>) -> Vec<u8> {
    if plain.len() < MIN_PACK {
        return plain;
    }
    let z = miniz_oxide::deflate::compress_to_vec(&plain, LEVEL);
    if z.len() + 1 >= plain.len() {
        return plain;
    }
    let mut out = Vec::with_capacity(z.len() + 1);
    out.push(DEFLATED);
    out.extend_from_slice(&z);
    out
}

/// The plain blob of `bytes`: itself unless it is deflated.
pub fn unpack(bytes: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, String> {
    unpack_at_most(bytes, MAX_INFLATED)
}

/// [`unpack`] with the cap given (tests use a small one).
pub(super) fn unpack_at_most(
    bytes: &[u8],
    limit: usize,
) -> Result<std::borrow::Cow<'_, [u8]>, String> {
    match bytes.split_first() {
        Some((&DEFLATED, z)) => {
            let plain = miniz_oxide::inflate::decompress_to_vec_with_limit(z, limit)
                .map_err(|e| format!("deflated blob does not inflate ({:?})", e.status))?;
            if plain.first() != Some(&CODEC_VERSION) {
                return Err("deflated blob does not hold a plain blob".into());
            }
            Ok(std::borrow::Cow::Owned(plain))
        }
        _ => Ok(std::borrow::Cow::Borrowed(bytes)),
    }
}
