//! Schedule batches (format `SCHEDULE_BATCHES_VERSION`, docs/recording.md): the schedule
//! log of every slice a writer transaction holds, as one `schedule_batch` row instead of one
//! `slice_schedule` row per slice.
//!
//! Why: a message-heavy job runs about one slice per message, and one SQLite row per slice
//! cost the writer thread about a microsecond of CPU for the insert alone, CPU the job's
//! ranks need on a busy machine; and a slice's blob, packed alone, cannot point at the
//! previous slice's, which in a loop says nearly the same thing (a ping-pong's slices
//! differ in a few sequence numbers). Packed as one blob, the batch's slices refer to
//! each other.
//!
//! A batch's plain form: the codec version byte ([`CODEC_VERSION`]), the number of
//! entries, then per entry the slice as the difference from the previous entry's (the
//! first from 0, so it is the slice itself; every difference at least 1), and its
//! descriptors' and decisions' plain blobs (the `slice_schedule` encodings, version byte
//! included), each as a length and the bytes, length 0 for none. The row stores it
//! deflated (RFC 1951, raw) behind the byte [`DEFLATED`] when that is smaller. Readers check everything: the version, every length,
//! that slices increase, and that the entries agree with the row's `first_slice`,
//! `last_slice` and `entries`; anything else is a damaged recording.

use super::{CODEC_VERSION, MAX_INFLATED, MAX_LIST};
use crate::replay_log::{put_varint, VarintReader};

/// One slice of a batch: its descriptors' and decisions' blobs (plain; `None`: none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchEntry {
    pub slice: u64,
    pub descriptors: Option<Vec<u8>>,
    pub decisions: Option<Vec<u8>>,
}

/// A batch being built by the writer, one slice at a time.
#[derive(Debug, Default)]
pub struct BatchBuilder {
    /// The entries so far, without the version byte and count (added by `finish`).
    body: Vec<u8>,
    first: u64,
    last: u64,
    entries: u64,
}

/// A finished batch: the `schedule_batch` row.
#[derive(Debug)]
pub struct BatchRow {
    pub first_slice: u64,
    pub last_slice: u64,
    pub entries: u64,
    pub data: Vec<u8>,
}

impl BatchBuilder {
    /// Add `slice` (greater than every slice added before), with its blobs (plain).
    pub fn push(&mut self, slice: u64, descriptors: Option<&[u8]>, decisions: Option<&[u8]>) {
        debug_assert!(
            self.entries == 0 || slice > self.last,
            "slices out of order"
        );
        if self.entries == 0 {
            self.first = slice;
        }
        put_varint(
            &mut self.body,
            slice - if self.entries == 0 { 0 } else { self.last },
        );
        for blob in [descriptors, decisions] {
            let blob = blob.unwrap_or_default();
            put_varint(&mut self.body, blob.len() as u64);
            self.body.extend_from_slice(blob);
        }
        self.last = slice;
        self.entries += 1;
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Bytes held so far (the writer ends a batch early past a bound).
    pub fn len(&self) -> usize {
        self.body.len()
    }

    /// The row of everything pushed since the last `finish` (`None`: nothing), packed
    /// when that is smaller; the builder is empty again.
    pub fn finish(&mut self) -> Option<BatchRow> {
        if self.entries == 0 {
            return None;
        }
        let mut plain = Vec::with_capacity(self.body.len() + 12);
        plain.push(CODEC_VERSION);
        put_varint(&mut plain, self.entries);
        plain.extend_from_slice(&self.body);
        self.body.clear();
        let row = BatchRow {
            first_slice: self.first,
            last_slice: self.last,
            entries: self.entries,
            data: deflate(plain),
        };
        self.entries = 0;
        Some(row)
    }
}

/// The first byte of a deflated batch (a plain one starts with [`CODEC_VERSION`]).
pub const DEFLATED: u8 = 3;

/// Deflate level: 1, the fastest. Measured on comet_exchange's 110,000 entries
/// (docs/benchmarks-detail.md, "Schedule batches"): 105 bytes an entry plain, 47 with the
/// per-blob LZ77 pass (`pack.rs`, no entropy coding: a batch's sequence numbers differ in
/// every entry), 26 deflated at level 1, 24 at level 6 for four times the CPU.
const DEFLATE_LEVEL: u8 = 1;

/// `plain` deflated behind [`DEFLATED`], or `plain` when that is not smaller.
fn deflate(plain: Vec<u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(plain.len() / 3 + 16);
    out.push(DEFLATED);
    out.extend(miniz_oxide::deflate::compress_to_vec(&plain, DEFLATE_LEVEL));
    if out.len() < plain.len() {
        out
    } else {
        plain
    }
}

/// The plain form of a batch's `data`: inflated (at most `limit` bytes: a forged stream
/// cannot make the reader allocate more) when deflated.
fn inflate(data: &[u8], limit: usize) -> Result<std::borrow::Cow<'_, [u8]>, String> {
    match data.split_first() {
        Some((&DEFLATED, rest)) => miniz_oxide::inflate::decompress_to_vec_with_limit(rest, limit)
            .map(std::borrow::Cow::Owned)
            .map_err(|e| format!("schedule batch does not inflate ({:?})", e.status)),
        _ => Ok(std::borrow::Cow::Borrowed(data)),
    }
}

/// The entries of a `schedule_batch` row, checked against its columns.
pub fn decode_batch(
    first_slice: u64,
    last_slice: u64,
    entries: u64,
    data: &[u8],
) -> Result<Vec<BatchEntry>, String> {
    decode_batch_at_most(first_slice, last_slice, entries, data, MAX_INFLATED)
}

/// [`decode_batch`] with the inflation cap given (tests use a small one).
fn decode_batch_at_most(
    first_slice: u64,
    last_slice: u64,
    entries: u64,
    data: &[u8],
    limit: usize,
) -> Result<Vec<BatchEntry>, String> {
    let plain = inflate(data, limit)?;
    let mut rd = VarintReader::new(&plain);
    if rd.read()? != u64::from(CODEC_VERSION) {
        return Err("schedule batch of an unknown codec version".into());
    }
    let n = rd.read()?;
    if n != entries || n == 0 || n > MAX_LIST {
        return Err(format!(
            "schedule batch holds {n} entries, its row says {entries}"
        ));
    }
    let mut out = Vec::with_capacity(n.min(4096) as usize);
    let mut slice = 0u64;
    for i in 0..n {
        let step = rd.read()?;
        if step == 0 && i > 0 {
            return Err("schedule batch repeats a slice".into());
        }
        slice = slice
            .checked_add(step)
            .ok_or("schedule batch slice out of range")?;
        let mut blob = || -> Result<Option<Vec<u8>>, String> {
            let len = usize::try_from(rd.read()?).map_err(|_| "blob length out of range")?;
            (len > 0)
                .then(|| rd.take(len).map(<[u8]>::to_vec))
                .transpose()
        };
        let descriptors = blob()?;
        let decisions = blob()?;
        out.push(BatchEntry {
            slice,
            descriptors,
            decisions,
        });
    }
    if !rd.at_end() {
        return Err("schedule batch has bytes after its entries".into());
    }
    let (first, last) = (out[0].slice, slice);
    if first != first_slice || last != last_slice {
        return Err(format!(
            "schedule batch holds slices {first}..={last}, its row says {first_slice}..={last_slice}"
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(slice: u64, d: Option<&[u8]>, c: Option<&[u8]>) -> BatchEntry {
        BatchEntry {
            slice,
            descriptors: d.map(<[u8]>::to_vec),
            decisions: c.map(<[u8]>::to_vec),
        }
    }

    fn build(entries: &[BatchEntry]) -> BatchRow {
        let mut b = BatchBuilder::default();
        for e in entries {
            b.push(e.slice, e.descriptors.as_deref(), e.decisions.as_deref());
        }
        let row = b.finish().expect("a row");
        assert!(
            b.is_empty() && b.finish().is_none(),
            "finish empties the builder"
        );
        row
    }

    fn decode(row: &BatchRow) -> Result<Vec<BatchEntry>, String> {
        decode_batch(row.first_slice, row.last_slice, row.entries, &row.data)
    }

    #[test]
    fn a_batch_round_trips_and_deflates_what_repeats() {
        // A loop's slices: nearly the same blobs, some slices with decisions only.
        let entries: Vec<BatchEntry> = (0..300u64)
            .map(|i| {
                let d = [1, 2, 0, 5, (i % 7) as u8, 9, 9, 9, 9, 9];
                let c = [1, 4, 1, 0, 3, 0, 2, (i % 5) as u8, 1, 1];
                entry(10 + 2 * i, (i % 3 != 0).then_some(&d[..]), Some(&c[..]))
            })
            .collect();
        let row = build(&entries);
        assert_eq!(
            (row.first_slice, row.last_slice, row.entries),
            (10, 608, 300)
        );
        assert_eq!(row.data[0], DEFLATED);
        assert!(row.data.len() * 5 < 300 * 20, "{} bytes", row.data.len());
        assert_eq!(decode(&row).unwrap(), entries);
        // One short entry stays plain (deflating it would not shrink it).
        let one = build(&[entry(7, Some(&[1, 0]), None)]);
        assert_eq!(one.data[0], CODEC_VERSION);
        assert_eq!(decode(&one).unwrap(), vec![entry(7, Some(&[1, 0]), None)]);
    }

    #[test]
    fn a_batch_that_disagrees_with_its_row_is_damage() {
        let entries = [
            entry(3, Some(&[1, 0]), None),
            entry(5, None, Some(&[1, 0, 0])),
        ];
        let row = build(&entries);
        for (first, last, n) in [(2, 5, 2), (3, 6, 2), (3, 5, 1), (3, 5, 3)] {
            let e = decode_batch(first, last, n, &row.data).unwrap_err();
            assert!(e.contains("its row says"), "{first} {last} {n}: {e}");
        }
        // Truncated, trailing bytes, a repeated slice, another codec version.
        let mut plain = row.data.clone();
        assert_eq!(plain[0], CODEC_VERSION);
        plain.pop();
        assert!(decode_batch(3, 5, 2, &plain).is_err());
        let mut long = row.data.clone();
        long.push(0);
        assert!(decode_batch(3, 5, 2, &long).unwrap_err().contains("after"));
        let mut b = BatchBuilder::default();
        b.push(4, Some(&[1]), None);
        b.body.extend_from_slice(&[0, 1, 1, 0]);
        b.entries += 1;
        let row = b.finish().unwrap();
        assert!(decode_batch(4, 4, 2, &row.data)
            .unwrap_err()
            .contains("repeats"));
        let mut other = build(&entries).data;
        other[0] = 9;
        assert!(decode_batch(3, 5, 2, &other).is_err());
    }

    #[test]
    fn inflating_a_forged_batch_is_capped() {
        // 1 MiB of zeros deflates to about a kilobyte; the reader stops at its cap.
        let mut bomb = vec![DEFLATED];
        bomb.extend(miniz_oxide::deflate::compress_to_vec(
            &vec![0u8; 1 << 20],
            6,
        ));
        let e = decode_batch_at_most(1, 1, 1, &bomb, 1 << 16).unwrap_err();
        assert!(e.contains("does not inflate"), "{e}");
        assert!(decode_batch(1, 1, 1, &[DEFLATED, 0xff, 0x00]).is_err());
    }

    proptest! {
        #[test]
        fn any_batch_round_trips(
            steps in proptest::collection::vec(
                (1u64..1000, proptest::option::of(proptest::collection::vec(any::<u8>(), 1..40)),
                 proptest::option::of(proptest::collection::vec(0u8..3, 1..40))),
                1..60)
        ) {
            let mut slice = 0;
            let entries: Vec<BatchEntry> = steps
                .into_iter()
                .map(|(step, d, c)| {
                    slice += step;
                    BatchEntry { slice, descriptors: d, decisions: c }
                })
                .collect();
            let row = build(&entries);
            prop_assert_eq!(decode(&row).unwrap(), entries);
        }

        #[test]
        fn arbitrary_batch_bytes_never_panic(
            data in proptest::collection::vec(any::<u8>(), 0..300),
            first in 0u64..10, n in 0u64..10,
        ) {
            let _ = decode_batch_at_most(first, first + n, n, &data, 1 << 16);
            let mut deflated = vec![DEFLATED];
            deflated.extend(&data);
            let _ = decode_batch_at_most(first, first + n, n, &deflated, 1 << 16);
        }
    }
}
